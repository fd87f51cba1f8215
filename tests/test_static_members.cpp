// Static members (SPEC §3 rule 12, issue 31): a member with an instanceId that leaves with -2 or
// dies keeps its target reserved for its instance; the instance rejoining within the static
// session timeout gets it back with no group-epoch bump and nobody else's shards moved, never
// before the previous incarnation can no longer read them. Pure core, fake clock.
#include <gtest/gtest.h>

#include "group_harness.hpp"

using namespace rsc::testing;
using LS = rsc::protocol::MemberLifecycleState;

namespace {

// Three members on 6 shards, each owning its two: a and b plain, s static (instance "pod-2").
struct StaticGroup : ::testing::Test {
  Harness h;
  HeartbeatResponse a, b, s;
  HeartbeatResponse static_hb(const std::string& id, int32_t memberEpoch, const Report& r = {},
                              const std::string& instance = "pod-2") {
    auto q = h.request(id, memberEpoch, r);
    q.instanceId = instance;
    return h.send(q);
  }
  // Heartbeats until every member owns its target (revocations acked as asked).
  void settle() {
    for (int round = 0; round < 6; ++round) {
      for (auto* who : {&a, &b}) {
        const std::string id = who == &a ? "a" : "b";
        if (!h.has(id) || !h.member(id).live()) continue;
        *who = h.hb(id, who->memberEpoch, {assigned(*who)});
      }
      if (h.has(sId) && h.member(sId).live() && !h.member(sId).leaving()) s = static_hb(sId, s.memberEpoch, {assigned(s)});
    }
  }
  void SetUp() override {
    a = h.hb("a", 0);
    b = h.hb("b", 0);
    s = static_hb(sId, 0);
    settle();
    ASSERT_EQ(assigned(a).size() + assigned(b).size() + assigned(s).size(), 6u);
    ASSERT_EQ(assigned(s).size(), 2u);
    sShards = assigned(s);
    epoch = h.state().groupEpoch;
    aShards = assigned(a);
    bShards = assigned(b);
  }
  // s goes silent, a and b keep heartbeating, until s expires (bounded).
  void until_static_expired() {
    for (int i = 0; i < 30 && h.member(sId).live(); ++i) {
      h.advance(100);
      a = h.hb("a", a.memberEpoch, {aShards});
      b = h.hb("b", b.memberEpoch, {bShards});
      h.tick();
    }
  }
  std::string sId = "s1";
  Shards sShards, aShards, bShards;
  int32_t epoch = 0;
};

}  // namespace

TEST_F(StaticGroup, ALeaveWithMinusTwoReservesItsShardsAndTheReturnTakesThemBackWithNoEpochBump) {
  auto left = static_hb(sId, -2, {{}, sShards});  // drained and released at once
  EXPECT_EQ(left.status, HeartbeatStatus::OK);
  EXPECT_EQ(left.memberEpoch, -2);
  EXPECT_TRUE(assigned(left).empty());
  EXPECT_EQ(h.member(sId).state, LS::FENCED) << "drained: a tombstone while its shards are reserved";
  EXPECT_EQ(h.state().groupEpoch, epoch) << "no bump: nobody else's target changes";
  ASSERT_EQ(h.state().reservations.count("pod-2"), 1u);
  EXPECT_EQ(h.state().reservations.at("pod-2").shards, sShards);
  // The others go on as they were; the reserved shards go to nobody meanwhile.
  a = h.hb("a", a.memberEpoch, {aShards});
  b = h.hb("b", b.memberEpoch, {bShards});
  EXPECT_EQ(a.status, HeartbeatStatus::OK);
  EXPECT_EQ(assigned(a), aShards);
  EXPECT_EQ(assigned(b), bShards);
  // A new plain member joining meanwhile gets only unreserved shards.
  auto c = h.hb("c", 0);
  for (int32_t x : pending(c)) EXPECT_EQ(std::count(sShards.begin(), sShards.end(), x), 0) << x;
  for (int32_t x : assigned(c)) EXPECT_EQ(std::count(sShards.begin(), sShards.end(), x), 0) << x;
  for (const auto& [id, m] : h.state().members)
    for (int32_t x : m.target) EXPECT_EQ(std::count(sShards.begin(), sShards.end(), x), 0) << id << " targets " << x;
  const auto withC = h.state().groupEpoch;
  // The instance returns under a new member id: its shards at once, no bump.
  h.advance(500);
  auto back = static_hb("s2", 0);
  EXPECT_EQ(back.status, HeartbeatStatus::OK);
  EXPECT_EQ(assigned(back), sShards);
  EXPECT_TRUE(pending(back).empty());
  EXPECT_EQ(h.state().groupEpoch, withC) << "a return bumps nothing";
  EXPECT_TRUE(h.state().reservations.empty());
  EXPECT_EQ(h.member("s2").instanceId, "pod-2");
}

TEST_F(StaticGroup, AReturnWhileThePreviousIncarnationStillDrainsWaitsForItsRevokedReport) {
  auto left = static_hb(sId, -2, {{}, {}, sShards});  // still draining both
  EXPECT_EQ(left.status, HeartbeatStatus::REVOKE_PENDING);
  EXPECT_EQ(h.member(sId).state, LS::LEAVING);
  auto back = static_hb("s2", 0);
  EXPECT_TRUE(assigned(back).empty()) << "revoke before assign: the old incarnation still reads them";
  EXPECT_EQ(pending(back), sShards);
  static_hb(sId, -2, {{}, sShards});  // the old one reports them revoked and is gone
  back = static_hb("s2", back.memberEpoch);
  EXPECT_EQ(assigned(back), sShards);
  EXPECT_EQ(h.state().groupEpoch, epoch);
}

TEST_F(StaticGroup, ACrashIsReservedOnceTheLeaseEndsAndTheReturnGetsItsShardsWithinTheTimeout) {
  until_static_expired();
  EXPECT_EQ(h.member(sId).state, LS::EXPIRED);
  EXPECT_EQ(h.state().groupEpoch, epoch) << "a static member's death moves nothing";
  ASSERT_EQ(h.state().reservations.count("pod-2"), 1u);
  EXPECT_EQ(assigned(a), aShards);
  EXPECT_EQ(assigned(b), bShards);
  EXPECT_EQ(h.state().reservations.at("pod-2").untilMs, h.now() + h.cfg().static_session_timeout())
      << "counted from the expiry";
  // Back under a new member id (the runtime makes one per process): no wait, its lease has ended.
  auto back = static_hb("s2", 0);
  EXPECT_EQ(assigned(back), sShards);
  EXPECT_EQ(h.state().groupEpoch, epoch);
}

// Under the member id of an incarnation that held its shards, the return needs a new epoch (a
// late leave, or a heartbeat, of the old process must not pass for the new one's): the group epoch
// moves, but the sticky target moves nobody.
TEST_F(StaticGroup, AReturnUnderTheOldMemberIdGetsANewEpochAndStillMovesNobody) {
  const auto leave = [&] {
    auto q = h.request(sId, -2, {{}, sShards});
    q.instanceId = "pod-2";
    q.leavingMemberEpoch = s.memberEpoch;
    return q;
  }();
  h.send(leave);
  EXPECT_EQ(h.member(sId).state, LS::FENCED) << "kept as a tombstone while its shards are reserved";
  auto back = static_hb(sId, 0);
  EXPECT_EQ(h.state().groupEpoch, epoch + 1);
  EXPECT_GT(back.memberEpoch, s.memberEpoch) << "a new epoch for the new incarnation";
  EXPECT_EQ(assigned(back), sShards);
  a = h.hb("a", a.memberEpoch, {aShards});
  b = h.hb("b", b.memberEpoch, {bShards});
  EXPECT_EQ(a.status, HeartbeatStatus::OK);
  EXPECT_EQ(assigned(a), aShards) << "nobody else moves";
  EXPECT_EQ(assigned(b), bShards);
  // The old incarnation's leave arriving late changes nothing.
  auto late = leave;
  late.requestId += "-late";
  auto r = h.send(late);
  EXPECT_EQ(r.status, HeartbeatStatus::FENCED_MEMBER_EPOCH);
  EXPECT_EQ(h.member(sId).assigned, sShards);
}

TEST_F(StaticGroup, PastTheStaticSessionTimeoutTheReservationEndsAndItsShardsAreRebalanced) {
  static_hb(sId, -2, {{}, sShards});
  h.advance(h.cfg().static_session_timeout() - 1);
  a = h.hb("a", a.memberEpoch, {aShards});
  b = h.hb("b", b.memberEpoch, {bShards});
  h.tick();
  EXPECT_EQ(h.state().reservations.size(), 1u) << "not yet";
  h.advance(1);
  a = h.hb("a", a.memberEpoch, {aShards});
  b = h.hb("b", b.memberEpoch, {bShards});
  h.tick();
  EXPECT_TRUE(h.state().reservations.empty());
  EXPECT_EQ(h.state().groupEpoch, epoch + 1) << "now the group rebalances";
  a = h.hb("a", a.memberEpoch, {aShards});
  b = h.hb("b", b.memberEpoch, {bShards});
  EXPECT_EQ(assigned(a).size() + assigned(b).size(), 6u) << "the reserved shards went to the others";
  // A late return is a plain static join: it gets a share by rebalancing.
  auto late = static_hb("s3", 0);
  EXPECT_EQ(h.state().groupEpoch, epoch + 2);
  EXPECT_TRUE(assigned(late).empty() || pending(late).size() + assigned(late).size() == 2u);
}

TEST_F(StaticGroup, ACrashThatDoesNotReturnWithinTheTimeoutIsRebalancedLikeAnyLeave) {
  until_static_expired();
  ASSERT_EQ(h.state().reservations.count("pod-2"), 1u);
  const auto until = h.state().reservations.at("pod-2").untilMs;
  while (h.now() < until) {
    h.advance(100);
    a = h.hb("a", a.memberEpoch, {assigned(a)});
    b = h.hb("b", b.memberEpoch, {assigned(b)});
    h.tick();
    if (h.now() < until) {
      EXPECT_EQ(h.state().groupEpoch, epoch) << "nothing moves while reserved";
    }
  }
  EXPECT_TRUE(h.state().reservations.empty());
  EXPECT_EQ(h.state().groupEpoch, epoch + 1);
  a = h.hb("a", a.memberEpoch, {assigned(a)});
  b = h.hb("b", b.memberEpoch, {assigned(b)});
  a = h.hb("a", a.memberEpoch, {assigned(a)});
  b = h.hb("b", b.memberEpoch, {assigned(b)});
  EXPECT_EQ(assigned(a).size() + assigned(b).size(), 6u) << "its shards went to the others";
  static_hb("s9", 0);
  EXPECT_EQ(h.state().groupEpoch, epoch + 2) << "a late return is a join like any";
}

// One live process per instance. A join under another member id while the instance's
// holder is live is refused UNRELEASED_INSTANCE_ID with nothing changed: the holder keeps its
// shards and epoch, the group epoch stays, nobody is fenced (two processes of one instance used to
// fence each other in a loop). The holder may be a crashed process: once its lease ends (its
// shards reserved for the instance), the same join takes them.
TEST_F(StaticGroup, ASecondMemberIdOfALiveInstanceIsRefusedAndTakesItsShardsOnlyOnceTheHolderIsGone) {
  const int32_t sEpoch = s.memberEpoch;
  const auto revision = h.state().storeRevision;
  auto dup = static_hb("s2", 0);
  EXPECT_EQ(std::string(rsc::protocol::to_string(dup.status)), "UNRELEASED_INSTANCE_ID") << dup.message.value_or("");
  EXPECT_EQ(dup.errorField.value_or(""), "instanceId");
  EXPECT_NE(dup.message.value_or("").find("held by live member 's1'"), std::string::npos) << dup.message.value_or("");
  EXPECT_FALSE(h.has("s2")) << "nothing stored for the refused join";
  EXPECT_EQ(h.state().storeRevision, revision);
  EXPECT_EQ(h.state().groupEpoch, epoch);
  s = static_hb(sId, s.memberEpoch, {sShards});
  EXPECT_EQ(s.status, HeartbeatStatus::OK) << "the holder is untouched";
  EXPECT_EQ(s.memberEpoch, sEpoch);
  EXPECT_EQ(assigned(s), sShards);
  // The holder goes silent (crashed): refused until its lease ends, then the join takes its shards.
  int refusedAfter = 0;
  while (h.member(sId).live()) {
    h.advance(100);
    a = h.hb("a", a.memberEpoch, {aShards});
    b = h.hb("b", b.memberEpoch, {bShards});
    h.tick();
    if (h.member(sId).live()) {
      dup = static_hb("s2", 0);
      EXPECT_EQ(std::string(rsc::protocol::to_string(dup.status)), "UNRELEASED_INSTANCE_ID");
      ++refusedAfter;
    }
  }
  EXPECT_GT(refusedAfter, 3);
  dup = static_hb("s2", 0);
  EXPECT_EQ(dup.status, HeartbeatStatus::OK) << dup.message.value_or("");
  dup = static_hb("s2", dup.memberEpoch);
  EXPECT_EQ(assigned(dup), sShards) << "the reservation: the instance's shards, nobody else moved";
  EXPECT_EQ(h.state().groupEpoch, epoch);
  EXPECT_EQ(assigned(h.hb("a", a.memberEpoch, {aShards})), aShards);
}

TEST_F(StaticGroup, MinusTwoNeedsTheInstanceTheMemberJoinedWith) {
  auto plain = h.request("a", -2, {{}, aShards});
  auto r = h.send(plain);
  EXPECT_EQ(r.status, HeartbeatStatus::INVALID_REQUEST) << "no instanceId";
  EXPECT_TRUE(h.member("a").live());
  r = static_hb("a", -2, {{}, aShards}, "pod-9");
  EXPECT_EQ(r.status, HeartbeatStatus::INVALID_REQUEST) << "a joined without one: " << r.message.value_or("");
  r = static_hb(sId, -2, {{}, sShards}, "pod-7");
  EXPECT_EQ(r.status, HeartbeatStatus::INVALID_REQUEST) << "another instance's";
  EXPECT_TRUE(h.member(sId).live());
  EXPECT_TRUE(h.state().reservations.empty());
  EXPECT_EQ(h.state().groupEpoch, epoch);
  auto minus3 = h.request("a", -3);
  EXPECT_EQ(h.send(minus3).status, HeartbeatStatus::INVALID_REQUEST);
}

TEST_F(StaticGroup, AReservationRemembersItsIncarnationAndRunsFromTheLeave) {
  h.advance(250);
  static_hb(sId, -2, {{}, sShards});
  const auto& r = h.state().reservations.at("pod-2");
  EXPECT_EQ(r.memberId, sId);
  EXPECT_EQ(r.untilMs, h.now() + h.cfg().static_session_timeout());
  EXPECT_EQ(h.cfg().static_session_timeout(), 3 * h.cfg().memberLeaseTtlMs) << "the default: three leases";
}

// Members without an instanceId behave as before: a leave (-1) and a death bump and rebalance.
TEST_F(StaticGroup, PlainMembersStillRebalanceAtOnce) {
  h.hb("a", -1, {{}, aShards});
  EXPECT_EQ(h.state().groupEpoch, epoch + 1);
  EXPECT_TRUE(h.state().reservations.empty());
}
