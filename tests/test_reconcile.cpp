// Reconciliation (SPEC §3): one test per transition, then one long walk of three members.
// Everything runs on a fake clock through the pure core; no sleeps.
#include <nlohmann/json.hpp>

#include <algorithm>

#include "group/assignor.hpp"
#include "group/co_partition.hpp"
#include "group/rack_zones.hpp"
#include "group/describe.hpp"
#include "group/time_rules.hpp"
#include "group/notify.hpp"
#include "protocol/codec.hpp"
#include "group_harness.hpp"

using namespace rsc::testing;
using rsc::group::GroupState;
using rsc::protocol::GroupStateName;
using LS = rsc::protocol::MemberLifecycleState;

namespace {

// a joins a 6-shard stream and owns all of it; b joins and waits for a to give up 3,4,5.
struct TwoMembers : ::testing::Test {
  Harness h;
  HeartbeatResponse a, b;
  void SetUp() override {
    a = h.hb("a", 0);
    b = h.hb("b", 0);
  }
  // a learns of the revocation and acks it explicitly; b then takes the shards.
  void hand_over() {
    auto r = h.hb("a", a.memberEpoch, {assigned(a)});
    ASSERT_EQ(r.status, HeartbeatStatus::REVOKE_PENDING);
    a = h.hb("a", r.memberEpoch, {assigned(r), Shards{3, 4, 5}});
    ASSERT_EQ(a.status, HeartbeatStatus::OK);
    b = h.hb("b", b.memberEpoch);
    ASSERT_EQ(assigned(b), (Shards{3, 4, 5}));
  }
};

}  // namespace

TEST(Join, AJoinWithEpochZeroIsAcceptedAndBumpsTheGroupEpoch) {
  Harness h;
  const auto before = h.state().groupEpoch;
  auto r = h.hb("a", 0);
  EXPECT_EQ(r.status, HeartbeatStatus::OK);
  EXPECT_EQ(r.groupEpoch, before + 1);
  EXPECT_EQ(r.memberEpoch, r.groupEpoch);
  EXPECT_EQ(r.assignmentEpoch, r.groupEpoch);
  EXPECT_EQ(h.member("a").state, LS::STARTING);
  EXPECT_EQ(r.memberLeaseTtlMs, 1000);
  EXPECT_EQ(r.rebalanceTimeoutMs, 500);
}

TEST(Join, TheFirstMemberGetsEveryShardAtOnce) {
  Harness h;
  auto r = h.hb("a", 0);
  EXPECT_EQ(assigned(r), (Shards{0, 1, 2, 3, 4, 5}));
  EXPECT_TRUE(pending(r).empty());
}

TEST(Join, AJoinedMemberBecomesActiveOnItsFirstHeartbeat) {
  Harness h;
  auto r = h.hb("a", 0);
  h.hb("a", r.memberEpoch, {assigned(r)});
  EXPECT_EQ(h.member("a").state, LS::ACTIVE);
}

TEST_F(TwoMembers, ANewcomerGetsOnlyPendingShardsWhileTheirOwnerStillHoldsThem) {
  EXPECT_EQ(b.status, HeartbeatStatus::OK);
  EXPECT_TRUE(assigned(b).empty());
  EXPECT_EQ(pending(b), (Shards{3, 4, 5}));
  EXPECT_LT(b.heartbeatIntervalMs, h.cfg().heartbeatIntervalMs) << "a waiting member is asked to come back sooner";
}

TEST_F(TwoMembers, AnOwnerWhoseTargetShrankGetsRevokePendingWithoutTheRevokedShards) {
  auto r = h.hb("a", a.memberEpoch, {assigned(a)});
  EXPECT_EQ(r.status, HeartbeatStatus::REVOKE_PENDING);
  EXPECT_EQ(assigned(r), (Shards{0, 1, 2}));
  EXPECT_EQ(r.memberEpoch, a.memberEpoch) << "the epoch is kept until the revocation is acked";
  EXPECT_EQ(h.member("a").revoking, (Shards{3, 4, 5}));
  EXPECT_EQ(h.member("a").revokeDeadlineMs, h.now() + h.cfg().rebalanceTimeoutMs);
  EXPECT_EQ(rsc::group::lifecycle(h.member("a")), LS::DRAINING);
}

TEST_F(TwoMembers, RevokePendingNeverAddsAShardTheMemberDidNotOwn) {
  // c joins too: a's target changes again while it is still revoking.
  h.hb("a", a.memberEpoch, {assigned(a)});
  h.hb("c", 0);
  auto r = h.hb("a", a.memberEpoch, {{0, 1, 2}, {}, {3, 4, 5}});
  EXPECT_EQ(r.status, HeartbeatStatus::REVOKE_PENDING);
  for (auto s : assigned(r)) EXPECT_TRUE(s <= 2) << "shard " << s << " is new to a";
}

TEST_F(TwoMembers, AnExplicitRevokedAckReleasesTheShardsToTheirNewOwner) { hand_over(); }

TEST_F(TwoMembers, AShardStillDrainingIsNotAnAck) {
  auto r = h.hb("a", a.memberEpoch, {assigned(a)});
  r = h.hb("a", r.memberEpoch, {{0, 1, 2}, {}, {3, 4, 5}});
  EXPECT_EQ(r.status, HeartbeatStatus::REVOKE_PENDING);
  EXPECT_EQ(h.member("a").revoking, (Shards{3, 4, 5}));
  EXPECT_TRUE(assigned(h.hb("b", b.memberEpoch)).empty());
}

TEST_F(TwoMembers, AShardAbsentFromBothListsAtTheCurrentEpochCountsAsAcked) {
  auto r = h.hb("a", a.memberEpoch, {assigned(a)});
  r = h.hb("a", r.memberEpoch, {{0, 1, 2}});
  EXPECT_EQ(r.status, HeartbeatStatus::OK);
  EXPECT_TRUE(h.member("a").revoking.empty());
  EXPECT_EQ(assigned(h.hb("b", b.memberEpoch)), (Shards{3, 4, 5}));
}

TEST_F(TwoMembers, TheEpochAdvancesOnceNothingIsLeftToRevoke) {
  auto r = h.hb("a", a.memberEpoch, {assigned(a)});
  EXPECT_EQ(r.memberEpoch, a.memberEpoch);
  r = h.hb("a", r.memberEpoch, {{0, 1, 2}, {3, 4, 5}});
  EXPECT_EQ(r.memberEpoch, h.state().assignmentEpoch);
  EXPECT_EQ(h.member("a").previousEpoch, a.memberEpoch);
  EXPECT_EQ(h.member("a").revokeDeadlineMs, 0);
}

TEST_F(TwoMembers, AShardIsNeverInTwoMembersAssignmentsAtOnce) {
  auto r = h.hb("a", a.memberEpoch, {assigned(a)});
  auto rb = h.hb("b", b.memberEpoch);
  for (auto s : assigned(rb)) EXPECT_TRUE(std::find(assigned(r).begin(), assigned(r).end(), s) == assigned(r).end());
  EXPECT_TRUE(assigned(rb).empty()) << "3,4,5 are still being revoked from a";
}

TEST_F(TwoMembers, APreviousEpochWithOwnedWithinAssignedIsALostResponse) {
  hand_over();
  // a's epoch advanced in its last response; pretend that response was lost.
  const auto prev = h.member("a").previousEpoch;
  auto r = h.hb("a", prev, {{0, 1, 2}});
  EXPECT_EQ(r.status, HeartbeatStatus::OK);
  EXPECT_EQ(r.memberEpoch, h.member("a").epoch);
  EXPECT_EQ(assigned(r), (Shards{0, 1, 2}));
}

TEST_F(TwoMembers, APreviousEpochReportingMoreThanAssignedIsFenced) {
  hand_over();
  const auto prev = h.member("a").previousEpoch;
  const auto rev = h.state().storeRevision;
  auto r = h.hb("a", prev, {{0, 1, 2, 3}});
  EXPECT_EQ(r.status, HeartbeatStatus::FENCED_MEMBER_EPOCH);
  EXPECT_EQ(h.state().storeRevision, rev) << "a stale epoch changes nothing";
}

TEST_F(TwoMembers, AReportAtThePreviousEpochIsNoImplicitAck) {
  // c joins: b must give up shard 5.
  hand_over();
  h.hb("c", 0);
  auto rb = h.hb("b", b.memberEpoch, {assigned(b)});
  ASSERT_EQ(rb.status, HeartbeatStatus::REVOKE_PENDING);
  ASSERT_EQ(h.member("b").revoking, (Shards{5}));
  // Put b one epoch ahead of its report, as if a response b never saw had advanced it: a report
  // at the previous epoch may predate the revocation, so leaving 5 out of it is no ack.
  auto& m = h.state().members.at("b");
  m.previousEpoch = m.epoch;
  m.epoch = h.state().assignmentEpoch;
  const int32_t previous = m.previousEpoch;
  auto r = h.hb("b", previous, {{3, 4}});
  EXPECT_EQ(r.status, HeartbeatStatus::REVOKE_PENDING);
  EXPECT_EQ(h.member("b").revoking, (Shards{5}));
  // The same report at the current epoch is an ack.
  r = h.hb("b", h.member("b").epoch, {{3, 4}});
  EXPECT_EQ(r.status, HeartbeatStatus::OK);
  EXPECT_TRUE(h.member("b").revoking.empty());
}

TEST_F(TwoMembers, AnOlderEpochIsFencedAndChangesNothing) {
  hand_over();
  const auto rev = h.state().storeRevision;
  auto r = h.hb("a", 1, {{0, 1, 2}});
  EXPECT_EQ(r.status, HeartbeatStatus::FENCED_MEMBER_EPOCH);
  EXPECT_TRUE(r.message.has_value());
  EXPECT_EQ(h.state().storeRevision, rev);
  EXPECT_EQ(h.member("a").state, LS::ACTIVE);
}

TEST_F(TwoMembers, AnEpochNeverIssuedIsInvalidAndNothingIsStored) {
  const auto rev = h.state().storeRevision;
  auto r = h.hb("a", a.memberEpoch + 5, {assigned(a)});
  EXPECT_EQ(r.status, HeartbeatStatus::INVALID_REQUEST);
  EXPECT_NE(r.message->find("memberEpoch"), std::string::npos);
  EXPECT_EQ(r.errorField, "memberEpoch") << "a client decides from the field, not the message";
  EXPECT_EQ(h.state().storeRevision, rev);
  EXPECT_FALSE(h.last().changed());
}

TEST(Epochs, AnUnknownMemberIsToldToRejoin) {
  Harness h;
  auto r = h.hb("ghost", 7);
  EXPECT_EQ(r.status, HeartbeatStatus::UNKNOWN_MEMBER_ID);
  EXPECT_FALSE(h.last().changed());
}

TEST_F(TwoMembers, ClaimingAnotherMembersShardFencesTheClaimant) {
  hand_over();
  const auto epoch = h.state().groupEpoch;
  auto r = h.hb("b", b.memberEpoch, {{0, 3, 4, 5}});
  EXPECT_EQ(r.status, HeartbeatStatus::FENCED_MEMBER_EPOCH);
  EXPECT_NE(r.message->find("shard 0"), std::string::npos);
  EXPECT_EQ(h.member("b").state, LS::FENCED);
  EXPECT_TRUE(h.member("b").assigned.empty());
  EXPECT_EQ(h.state().groupEpoch, epoch + 1);
  EXPECT_EQ(h.member("a").target, (Shards{0, 1, 2, 3, 4, 5}));
}

TEST_F(TwoMembers, ProgressOnAShardNotHeldFencesTheReporter) {
  hand_over();
  auto r = h.hb("b", b.memberEpoch, {{3, 4, 5}, {}, {}, {1}});
  EXPECT_EQ(r.status, HeartbeatStatus::FENCED_MEMBER_EPOCH);
  EXPECT_EQ(h.member("b").state, LS::FENCED);
}

TEST_F(TwoMembers, ProgressOnHeldShardsIsKept) {
  hand_over();
  h.hb("b", b.memberEpoch, {{3, 4, 5}, {}, {}, {3, 5}});
  ASSERT_EQ(h.member("b").progress.size(), 2u);
  EXPECT_EQ(h.member("b").progress[1].shardIndex, 5);
}

// Progress is written over the previous report's (in place): each heartbeat's report replaces
// the last one whole, shorter or longer, in shard order.
TEST_F(TwoMembers, EachProgressReportReplacesTheLastWhole) {
  hand_over();
  h.hb("b", b.memberEpoch, {{3, 4, 5}, {}, {}, {5, 3}});
  ASSERT_EQ(h.member("b").progress.size(), 2u);
  EXPECT_EQ(h.member("b").progress[0].shardIndex, 3);
  EXPECT_EQ(h.member("b").progress[1].shardIndex, 5);
  h.hb("b", b.memberEpoch, {{3, 4, 5}, {}, {}, {4}});
  ASSERT_EQ(h.member("b").progress.size(), 1u);
  EXPECT_EQ(h.member("b").progress[0].shardIndex, 4);
  h.hb("b", b.memberEpoch, {{3, 4, 5}, {}, {}, {5, 4, 3}});
  ASSERT_EQ(h.member("b").progress.size(), 3u);
  EXPECT_EQ(h.member("b").progress[2].shardIndex, 5);
  h.hb("b", b.memberEpoch, {{3, 4, 5}});
  EXPECT_TRUE(h.member("b").progress.empty());
}

TEST_F(TwoMembers, AShardOutsideTheStreamIsInvalidAndNothingIsStored) {
  const auto rev = h.state().storeRevision;
  auto r = h.hb("a", a.memberEpoch, {{0, 1, 2, 3, 4, 5, 6}});
  EXPECT_EQ(r.status, HeartbeatStatus::INVALID_REQUEST);
  EXPECT_NE(r.message->find("ownedShards[6].shardIndex"), std::string::npos);
  EXPECT_EQ(r.errorField, "ownedShards[6].shardIndex");
  EXPECT_EQ(h.state().storeRevision, rev);
}

TEST(Leave, ALeaveHoldingNothingRemovesTheMemberAtOnce) {
  Harness h;
  auto a = h.hb("a", 0);
  auto b = h.hb("b", 0);
  auto r = h.hb("b", -1);
  EXPECT_EQ(r.status, HeartbeatStatus::OK);
  EXPECT_EQ(r.memberEpoch, -1);
  ASSERT_TRUE(r.assignment.has_value());
  EXPECT_TRUE(r.assignment->assignedShards.empty());
  EXPECT_FALSE(h.has("b"));
  EXPECT_EQ(h.member("a").target, (Shards{0, 1, 2, 3, 4, 5}));
}

TEST_F(TwoMembers, ALeaveWhileHoldingShardsDrainsThemBeforeAnyoneElseGetsThem) {
  hand_over();
  const auto epoch = h.state().groupEpoch;
  auto r = h.hb("b", -1, {{3, 4, 5}});
  EXPECT_EQ(r.status, HeartbeatStatus::REVOKE_PENDING);
  EXPECT_EQ(r.memberEpoch, -1);
  EXPECT_TRUE(assigned(r).empty());
  EXPECT_EQ(h.state().groupEpoch, epoch + 1);
  EXPECT_EQ(h.member("b").state, LS::LEAVING);
  // a's target now has everything, but 3,4,5 wait for b.
  auto ra = h.hb("a", a.memberEpoch, {assigned(a)});
  EXPECT_EQ(assigned(ra), (Shards{0, 1, 2}));
  EXPECT_EQ(pending(ra), (Shards{3, 4, 5}));
  // Phase two: b drains 3 and 4, still holds 5.
  r = h.hb("b", -1, {{}, {3, 4}, {5}});
  EXPECT_TRUE(h.has("b"));
  ra = h.hb("a", ra.memberEpoch, {assigned(ra)});
  EXPECT_EQ(assigned(ra), (Shards{0, 1, 2, 3, 4}));
  r = h.hb("b", -1, {{}, {5}});
  EXPECT_EQ(r.status, HeartbeatStatus::OK);
  EXPECT_FALSE(h.has("b"));
  ra = h.hb("a", ra.memberEpoch, {assigned(ra)});
  EXPECT_EQ(assigned(ra), (Shards{0, 1, 2, 3, 4, 5}));
}

TEST_F(TwoMembers, ALeavingMemberThatGoesSilentIsRemovedAtItsRevokeDeadlineAndItsShardsGoOnAtItsLeaseEnd) {
  hand_over();
  h.hb("b", -1, {{3, 4, 5}});
  const auto leaseEnd = rsc::group::lease_end(h.member("b"), h.cfg());
  h.advance(400);
  h.hb("a", a.memberEpoch, {assigned(a)});
  h.tick();
  EXPECT_TRUE(h.has("b") && h.member("b").live()) << "not yet: the rebalance timeout is 500ms";
  h.advance(200);
  h.tick();
  EXPECT_TRUE(!h.has("b") || !h.member("b").live()) << "removed";
  // Silent, not provably gone: it may be draining until its lease ends.
  EXPECT_EQ(assigned(h.hb("a", a.memberEpoch, {assigned(a)})), (Shards{0, 1, 2}));
  h.advance(leaseEnd - h.now());
  h.tick();
  EXPECT_FALSE(h.has("b"));
  EXPECT_EQ(assigned(h.hb("a", a.memberEpoch, {assigned(a)})), (Shards{0, 1, 2, 3, 4, 5}));
}

TEST(Leave, ALeavingMemberThatGoesSilentIsRemovedAtItsLease) {
  auto cfg = Harness::default_config();
  cfg.rebalanceTimeoutMs = 5000;  // longer than the lease: the lease decides
  Harness h(6, cfg);
  auto a = h.hb("a", 0);
  h.hb("a", -1, {assigned(a)});
  h.advance(1000);
  h.tick();
  EXPECT_TRUE(h.has("a"));
  h.advance(1);
  h.tick();
  EXPECT_FALSE(h.has("a"));
}

TEST_F(TwoMembers, LeaseExpiryMarksTheMemberExpiredAndReleasesItsShards) {
  hand_over();
  const auto epoch = h.state().groupEpoch;
  h.advance(600);
  a = h.hb("a", a.memberEpoch, {assigned(a)});
  h.advance(600);  // b: 1200ms silent > 1000ms lease
  h.tick();
  EXPECT_EQ(h.member("b").state, LS::EXPIRED);
  EXPECT_TRUE(h.member("b").assigned.empty());
  EXPECT_EQ(h.state().groupEpoch, epoch + 1);
  auto ra = h.hb("a", a.memberEpoch, {assigned(a)});
  EXPECT_EQ(assigned(ra), (Shards{0, 1, 2, 3, 4, 5}));
  // The expired member's next heartbeat is fenced, not trusted.
  auto rb = h.hb("b", b.memberEpoch, {{3, 4, 5}});
  EXPECT_EQ(rb.status, HeartbeatStatus::FENCED_MEMBER_EPOCH);
}

TEST_F(TwoMembers, AMemberWithinItsLeaseIsNotExpired) {
  hand_over();
  h.advance(1000);  // exactly the lease: not past it
  h.tick();
  EXPECT_EQ(h.member("b").state, LS::ACTIVE);
}

TEST_F(TwoMembers, AnExpiredMemberRejoinsWithEpochZero) {
  hand_over();
  h.advance(1001);
  h.tick();
  ASSERT_EQ(h.member("b").state, LS::EXPIRED);
  auto r = h.hb("b", 0);
  EXPECT_EQ(r.status, HeartbeatStatus::OK);
  EXPECT_GT(r.memberEpoch, b.memberEpoch);
  EXPECT_EQ(h.member("b").state, LS::STARTING);
}

TEST_F(TwoMembers, ARejoinOfAKnownIdFencesTheOldIncarnationAndHoldsItsShardsUntilItsLeaseEnds) {
  hand_over();
  const auto epoch = h.state().groupEpoch;
  const auto oldLeaseEnd = rsc::group::lease_end(h.member("b"), h.cfg());
  h.advance(100);
  auto r = h.hb("b", 0);
  EXPECT_EQ(h.state().groupEpoch, epoch + 1);
  EXPECT_EQ(r.memberEpoch, h.state().groupEpoch);
  // The old incarnation may read 3,4,5 until its lease ends: not even this id gets them before.
  EXPECT_TRUE(assigned(r).empty());
  EXPECT_EQ(pending(r), (Shards{3, 4, 5})) << "sticky: the same id still wants them";
  EXPECT_EQ(h.member("b").quarantined, (Shards{3, 4, 5}));
  EXPECT_EQ(h.member("b").quarantineUntilMs, oldLeaseEnd);
  auto stale = h.hb("b", b.memberEpoch, {{3, 4, 5}});
  EXPECT_EQ(stale.status, HeartbeatStatus::FENCED_MEMBER_EPOCH);
  h.advance(oldLeaseEnd - h.now() - 1);
  r = h.hb("b", r.memberEpoch);
  EXPECT_TRUE(assigned(r).empty()) << "1 ms before the old lease ends";
  h.advance(1);
  h.tick();
  r = h.hb("b", r.memberEpoch);
  EXPECT_EQ(assigned(r), (Shards{3, 4, 5})) << "then the new incarnation gets them back";
}

TEST_F(TwoMembers, AMemberThatMissesItsRevokeDeadlineIsFenced) {
  auto r = h.hb("a", a.memberEpoch, {assigned(a)});
  ASSERT_EQ(r.status, HeartbeatStatus::REVOKE_PENDING);
  const auto epoch = h.state().groupEpoch;
  h.advance(300);
  h.hb("a", r.memberEpoch, {{0, 1, 2}, {}, {3, 4, 5}});  // alive but still draining
  h.hb("b", b.memberEpoch);
  h.advance(300);  // 600ms > 500ms rebalance timeout
  h.tick();
  EXPECT_EQ(h.member("a").state, LS::FENCED);
  EXPECT_EQ(h.state().groupEpoch, epoch + 1);
  auto next = h.hb("a", r.memberEpoch, {{0, 1, 2}});
  EXPECT_EQ(next.status, HeartbeatStatus::FENCED_MEMBER_EPOCH);
  // a was alive (heard at +300): it may read until it hears of the fence, at most its lease.
  const auto until = h.member("a").quarantineUntilMs;
  EXPECT_EQ(until, h.now() - 300 + h.cfg().memberLeaseTtlMs);
  auto rb = h.hb("b", b.memberEpoch);
  EXPECT_TRUE(assigned(rb).empty()) << "held until a's lease ends";
  h.advance(until - h.now());
  h.tick();
  rb = h.hb("b", rb.memberEpoch);
  EXPECT_EQ(assigned(rb), (Shards{0, 1, 2, 3, 4, 5}));
}

TEST_F(TwoMembers, TimeTheStoreWasDownDoesNotCountAgainstLeasesOrDeadlines) {
  auto r = h.hb("a", a.memberEpoch, {assigned(a)});
  const auto deadline = h.member("a").revokeDeadlineMs;
  const auto from = h.now() + 100;
  h.advance(5000);  // the store was unreachable for ~5s; no heartbeat got through
  h.apply(rsc::group::resume_after_outage(h.state(), from, h.now()));
  h.tick();
  EXPECT_EQ(h.member("a").state, LS::ACTIVE);
  EXPECT_EQ(h.member("b").state, LS::STARTING);
  EXPECT_EQ(h.member("a").revokeDeadlineMs, deadline + 4900);
  EXPECT_EQ(h.member("b").lastHeartbeatMs, h.now()) << "one full lease from recovery";
  h.advance(1001);
  h.tick();
  EXPECT_EQ(h.member("b").state, LS::EXPIRED) << "after recovery the lease runs again";
}

TEST_F(TwoMembers, AMemberAheadOfTheCoordinatorsMetadataIsToldToSync) {
  auto q = h.request("a", a.memberEpoch, {assigned(a)});
  q.metadataVersion = h.state().metadataVersion + 1;
  auto r = h.send(q);
  EXPECT_EQ(r.status, HeartbeatStatus::SYNC_METADATA);
  EXPECT_EQ(r.metadataVersion, h.state().metadataVersion);
  ASSERT_TRUE(r.assignment.has_value());
  EXPECT_EQ(r.assignment->metadataVersion, h.state().metadataVersion);
  EXPECT_TRUE(h.member("a").revoking.empty()) << "SYNC_METADATA starts no revocation";
}

TEST_F(TwoMembers, AMemberBehindOnMetadataGetsTheNewVersionInItsAssignment) {
  hand_over();
  h.apply(rsc::group::apply_metadata(h.state(), 8, 2, h.cfg(), h.now()));
  auto q = h.request("a", a.memberEpoch, {assigned(a)});
  q.metadataVersion = 1;
  auto r = h.send(q);
  EXPECT_NE(r.status, HeartbeatStatus::SYNC_METADATA);
  ASSERT_TRUE(r.assignment.has_value());
  EXPECT_EQ(r.assignment->metadataVersion, 2);
}

TEST_F(TwoMembers, AGrownStreamBumpsTheEpochAndSpreadsTheNewShards) {
  hand_over();
  const auto epoch = h.state().groupEpoch;
  h.apply(rsc::group::apply_metadata(h.state(), 8, 2, h.cfg(), h.now()));
  EXPECT_EQ(h.state().groupEpoch, epoch + 1);
  EXPECT_EQ(h.state().shardCount, 8);
  EXPECT_EQ(h.member("a").target, (Shards{0, 1, 2, 6}));
  EXPECT_EQ(h.member("b").target, (Shards{3, 4, 5, 7}));
  auto r = h.hb("a", a.memberEpoch, {assigned(a)});
  EXPECT_EQ(assigned(r), (Shards{0, 1, 2, 6}));
  EXPECT_EQ(r.metadataVersion, 2);
}

// Rule 9, a shrink: while the removed shards drain, the stream's metadata moves but the
// group reads the same shards; nothing is revoked and the epoch stays.
TEST_F(TwoMembers, AShrinkStillDrainingMovesOnlyTheMetadataVersion) {
  hand_over();
  const auto epoch = h.state().groupEpoch;
  h.apply(rsc::group::apply_metadata(h.state(), 6, 2, h.cfg(), h.now()));
  EXPECT_EQ(h.state().metadataVersion, 2);
  EXPECT_EQ(h.state().groupEpoch, epoch);
  EXPECT_EQ(h.state().shardCount, 6);
  EXPECT_FALSE(h.state().retireFrom.has_value());
  auto r = h.hb("b", b.memberEpoch, {assigned(b)});
  EXPECT_EQ(r.status, HeartbeatStatus::OK);
  EXPECT_EQ(assigned(r), (Shards{3, 4, 5})) << "the draining shards are still read";
  EXPECT_EQ(r.assignment->metadataVersion, 2);
  EXPECT_EQ(rsc::group::apply_metadata(h.state(), 6, 2, h.cfg(), h.now()).changed(), false) << "the same version twice";
}

// Once drained, the removed shards are taken back like any shard (revoke before assign) and the
// group's shards end below them only when nobody holds one; a late REVOKED report of one is fine.
TEST_F(TwoMembers, DrainedShardsAreRevokedThenRetiredOnceNobodyHoldsThem) {
  hand_over();
  const auto epoch = h.state().groupEpoch;
  h.apply(rsc::group::apply_metadata(h.state(), 4, 3, h.cfg(), h.now()));
  EXPECT_EQ(h.state().groupEpoch, epoch + 1);
  ASSERT_EQ(h.state().retireFrom, 4);
  EXPECT_EQ(h.state().shardCount, 6) << "still held by b";
  for (const auto& id : {"a", "b"}) {
    EXPECT_EQ(h.member(id).target.size(), 2u) << id;
    for (int32_t s : h.member(id).target) EXPECT_LT(s, 4) << id << " is never given a retiring shard";
  }
  auto r = h.hb("b", b.memberEpoch, {assigned(b)});
  ASSERT_EQ(r.status, HeartbeatStatus::REVOKE_PENDING);
  for (int32_t s : assigned(r)) EXPECT_LT(s, 4);
  h.tick();
  EXPECT_EQ(h.state().shardCount, 6) << "4 and 5 are still being revoked";
  // b hands 4 and 5 back; a gives up what b's target wants; the group shrinks at the next tick.
  b = h.hb("b", r.memberEpoch, {assigned(r), Shards{4, 5}});
  EXPECT_EQ(b.status, HeartbeatStatus::OK);
  h.tick();
  EXPECT_EQ(h.state().shardCount, 4);
  EXPECT_FALSE(h.state().retireFrom.has_value());
  EXPECT_EQ(h.state().retiredBelow, 6);
  EXPECT_TRUE(std::any_of(h.events().begin(), h.events().end(),
                          [](const std::string& e) { return e.find("retired: shardCount 6 -> 4") != std::string::npos; }));
  for (const auto& [id, m] : h.state().members)
    for (const auto* set : {&m.assigned, &m.revoking, &m.target})
      for (int32_t s : *set) EXPECT_LT(s, 4) << id;
  // b's answer was lost: it reports 5 REVOKED again. Not a bad request: it let go of a shard that
  // no longer exists. A shard that never existed still is.
  auto again = h.hb("b", b.memberEpoch, {assigned(b), Shards{5}});
  EXPECT_NE(again.status, HeartbeatStatus::INVALID_REQUEST) << again.message.value_or("");
  auto bad = h.hb("b", b.memberEpoch, {assigned(b), Shards{9}});
  EXPECT_EQ(bad.status, HeartbeatStatus::INVALID_REQUEST);
  auto owned = h.hb("b", b.memberEpoch, {Shards{5}});
  EXPECT_EQ(owned.status, HeartbeatStatus::INVALID_REQUEST) << "OWNED of a retired shard is not a late ack";
}

// A member that may still read a retiring shard (fenced by an admin, its lease not over) keeps
// the group from shrinking until it cannot; scale to zero leaves no shard in anyone's target.
TEST_F(TwoMembers, ScaleToZeroWaitsForAFencedMembersLeaseBeforeRetiring) {
  hand_over();
  h.apply(rsc::group::fence_member(h.state(), "b", "removed by admin", h.cfg(), h.now()));
  ASSERT_EQ(h.member("b").quarantined, (Shards{3, 4, 5}));
  ASSERT_GT(h.member("b").quarantineUntilMs, h.now());
  h.apply(rsc::group::apply_metadata(h.state(), 0, 2, h.cfg(), h.now()));
  ASSERT_EQ(h.state().retireFrom, 0);
  EXPECT_TRUE(h.member("a").target.empty());
  auto r = h.hb("a", a.memberEpoch, {assigned(a)});
  EXPECT_EQ(r.status, HeartbeatStatus::REVOKE_PENDING);
  EXPECT_TRUE(assigned(r).empty());
  a = h.hb("a", r.memberEpoch, {{}, Shards{0, 1, 2}});
  h.tick();
  EXPECT_EQ(h.state().shardCount, 6) << "b may still read 3, 4 and 5 until its stored lease ends";
  h.advance(h.member("b").quarantineUntilMs - h.now() + 1);
  h.tick();
  EXPECT_EQ(h.state().shardCount, 0);
  EXPECT_FALSE(h.state().retireFrom.has_value());
}

// A growth while a shrink retires (the stream scaled out again) makes every shard assignable.
TEST_F(TwoMembers, AGrowthWhileRetiringMakesEveryShardAssignableAgain) {
  hand_over();
  h.apply(rsc::group::apply_metadata(h.state(), 4, 2, h.cfg(), h.now()));
  ASSERT_TRUE(h.state().retireFrom.has_value());
  h.apply(rsc::group::apply_metadata(h.state(), 6, 3, h.cfg(), h.now()));
  EXPECT_FALSE(h.state().retireFrom.has_value());
  EXPECT_EQ(h.state().shardCount, 6);
  Shards all;
  for (const auto& [id, m] : h.state().members) all.insert(all.end(), m.target.begin(), m.target.end());
  std::sort(all.begin(), all.end());
  EXPECT_EQ(all, (Shards{0, 1, 2, 3, 4, 5}));
}

TEST_F(TwoMembers, ARepeatedRequestIdGetsTheSameResponseAndChangesNothing) {
  auto q = h.request("a", a.memberEpoch, {assigned(a)});
  auto first = h.send(q);
  const auto rev = h.state().storeRevision;
  h.advance(50);
  auto again = h.send(q);
  EXPECT_EQ(again, first);
  EXPECT_FALSE(h.last().changed());
  EXPECT_EQ(h.state().storeRevision, rev);
}

TEST(Idempotence, ARepeatedJoinDoesNotResetTheMemberAgain) {
  Harness h;
  auto q = h.request("a", 0);
  auto first = h.send(q);
  const auto epoch = h.state().groupEpoch;
  auto again = h.send(q);
  EXPECT_EQ(again, first);
  EXPECT_EQ(h.state().groupEpoch, epoch);
}

// Clients that replace their assignment with every answer's (the reference clients do) must be
// told the whole of it even when nothing changed.
TEST_F(TwoMembers, AConvergedMemberIsToldItsWholeAssignmentAgain) {
  hand_over();
  const auto mine = assigned(a);
  auto r = h.hb("a", a.memberEpoch, {mine});
  EXPECT_EQ(r.status, HeartbeatStatus::OK);
  ASSERT_TRUE(r.assignment.has_value());
  EXPECT_EQ(r.assignment->assignedShards, mine);
  EXPECT_TRUE(r.assignment->pendingShards.empty());
  EXPECT_EQ(r.assignment->metadataVersion, h.state().metadataVersion);
  EXPECT_EQ(r.heartbeatIntervalMs, h.cfg().heartbeatIntervalMs);
  auto again = h.hb("a", a.memberEpoch, {mine});
  ASSERT_TRUE(again.assignment.has_value());
  EXPECT_EQ(again.assignment->assignedShards, mine);
}

// An answer stored by an older build that said null for "nothing changed" is replayed as the
// whole assignment, not as an empty one.
TEST_F(TwoMembers, AReplayedAnswerFromAnOlderBuildCarriesTheAssignment) {
  hand_over();
  const auto mine = assigned(a);
  auto q = h.request("a", a.memberEpoch, {mine});
  auto first = h.send(q);
  ASSERT_EQ(first.status, HeartbeatStatus::OK);
  h.state().members.at("a").lastResponse->hasAssignment = false;  // as the older build stored it
  auto again = h.send(q);
  ASSERT_TRUE(again.assignment.has_value());
  EXPECT_EQ(again.assignment->assignedShards, mine);
}

TEST_F(TwoMembers, AMemberThatHasNotPickedUpItsShardsStillGetsTheAssignment) {
  hand_over();
  auto r = h.hb("b", b.memberEpoch, {{3}});
  ASSERT_TRUE(r.assignment.has_value());
  EXPECT_EQ(r.assignment->assignedShards, (Shards{3, 4, 5}));
}

TEST(GroupState, TheGroupStateIsDerivedFromTheMembers) {
  Harness h;
  EXPECT_EQ(rsc::group::group_state(h.state()), GroupStateName::EMPTY);
  auto a = h.hb("a", 0);
  auto r = h.hb("a", a.memberEpoch, {assigned(a)});
  EXPECT_EQ(rsc::group::group_state(h.state()), GroupStateName::STABLE);
  auto b = h.hb("b", 0);
  EXPECT_EQ(rsc::group::group_state(h.state()), GroupStateName::RECONCILING);
  GroupState s = h.state();
  s.groupEpoch += 1;  // a bump not yet followed by a target
  EXPECT_EQ(rsc::group::group_state(s), GroupStateName::ASSIGNING);
  r = h.hb("a", a.memberEpoch, {assigned(a)});
  r = h.hb("a", r.memberEpoch, {assigned(r)});
  b = h.hb("b", b.memberEpoch);
  EXPECT_EQ(rsc::group::group_state(h.state()), GroupStateName::STABLE);
}

TEST_F(TwoMembers, AFencedMemberIsForgottenAfterItsTombstoneRetention) {
  hand_over();
  h.apply(rsc::group::fence_member(h.state(), "b", "admin removal", h.cfg(), h.now()));
  EXPECT_EQ(h.member("b").state, LS::FENCED);
  h.advance(h.cfg().tombstone_retention());
  h.hb("a", a.memberEpoch, {assigned(a)});
  h.tick();
  EXPECT_FALSE(h.has("b"));
  EXPECT_EQ(h.hb("b", b.memberEpoch).status, HeartbeatStatus::UNKNOWN_MEMBER_ID);
}

TEST_F(TwoMembers, AdminRemovalFencesTheMemberAndHandsItsShardsOnOnceItsLeaseEnds) {
  hand_over();
  const auto until = rsc::group::lease_end(h.member("b"), h.cfg());
  h.apply(rsc::group::fence_member(h.state(), "b", "admin removal", h.cfg(), h.now()));
  EXPECT_EQ(h.hb("b", b.memberEpoch, {{3, 4, 5}}).status, HeartbeatStatus::FENCED_MEMBER_EPOCH);
  EXPECT_EQ(assigned(h.hb("a", a.memberEpoch, {assigned(a)})), (Shards{0, 1, 2}))
      << "b has not heard yet (that answer may be lost): it may read until its lease ends";
  h.advance(until - h.now());
  h.tick();
  EXPECT_EQ(assigned(h.hb("a", a.memberEpoch, {{0, 1, 2}})), (Shards{0, 1, 2, 3, 4, 5}));
}

TEST_F(TwoMembers, AfterAStoreRollbackUnknownEpochsAreFencedAndNothingIsGrantedForOneLease) {
  hand_over();
  // The store lost b's last writes: b knows an epoch the store never recorded.
  const int32_t seen = h.state().groupEpoch + 3;
  h.apply(rsc::group::recover_from_rollback(h.state(), seen, h.cfg(), h.now()));
  EXPECT_GT(h.state().groupEpoch, seen) << "new epochs skip everything this pod saw";
  auto& m = h.state().members.at("b");
  const int32_t storeEpoch = m.epoch;
  auto r = h.hb("b", storeEpoch + 1, {{3, 4, 5}});
  EXPECT_EQ(r.status, HeartbeatStatus::FENCED_MEMBER_EPOCH);
  EXPECT_EQ(h.member("b").state, LS::FENCED);
  // b's shards are free in the store, but nobody gets them until the guard ends.
  auto ra = h.hb("a", a.memberEpoch, {assigned(a)});
  EXPECT_EQ(assigned(ra), (Shards{0, 1, 2}));
  EXPECT_EQ(pending(ra), (Shards{3, 4, 5}));
  h.advance(h.cfg().memberLeaseTtlMs);
  h.tick();
  ra = h.hb("a", ra.memberEpoch, {assigned(ra)});
  EXPECT_EQ(assigned(ra), (Shards{0, 1, 2, 3, 4, 5}));
}

TEST_F(TwoMembers, EveryStateChangeIsReportedAsAnEvent) {
  hand_over();
  auto joined = std::count_if(h.events().begin(), h.events().end(),
                              [](const std::string& e) { return e.rfind("joined", 0) == 0; });
  EXPECT_EQ(joined, 2);
  bool sawRevoke = false, sawAck = false;
  for (const auto& e : h.events()) {
    sawRevoke = sawRevoke || e.rfind("revoke member=a shards=[3,4,5]", 0) == 0;
    sawAck = sawAck || e == "ack member=a shards=[3,4,5]";
  }
  EXPECT_TRUE(sawRevoke);
  EXPECT_TRUE(sawAck);
}

// The long walk: three members through join, scale-out handover, a lost response, a leave, an
// expiry and a rebalance timeout, checking the single-owner invariant after every step.
TEST(Walk, ThreeMembersThroughJoinHandoverLostResponseLeaveExpiryAndRebalanceTimeout) {
  Harness h(9);
  std::map<std::string, int32_t> epoch;
  std::map<std::string, Shards> own;  // what each member reads, as a runtime would track it
  auto beat = [&](const std::string& id, Report r) {
    auto resp = h.hb(id, epoch[id], r);
    if (resp.status == HeartbeatStatus::OK || resp.status == HeartbeatStatus::REVOKE_PENDING) {
      if (resp.memberEpoch > 0) epoch[id] = resp.memberEpoch;
      if (resp.assignment) own[id] = resp.assignment->assignedShards;
    }
    return resp;
  };
  auto steady = [&](const std::string& id) { return beat(id, {own[id]}); };
  auto single_owner = [&] {
    std::map<int32_t, int> holders;
    for (const auto& [id, m] : h.state().members)
      if (m.live())
        for (auto s : m.held()) ++holders[s];
    for (const auto& [s, n] : holders) ASSERT_EQ(n, 1) << "shard " << s;
  };
  const Shards all{0, 1, 2, 3, 4, 5, 6, 7, 8};

  // 1. a joins alone and takes all nine shards.
  beat("a", {});
  ASSERT_EQ(own["a"], all);
  steady("a");
  single_owner();

  // 2. b and c join: a must give up six; b and c wait for them.
  h.advance(50);
  beat("b", {});
  beat("c", {});
  const Shards tb = h.member("b").target, tc = h.member("c").target;
  EXPECT_EQ(tb.size(), 3u);
  EXPECT_EQ(tc.size(), 3u);
  EXPECT_TRUE(own["b"].empty());
  EXPECT_TRUE(own["c"].empty());
  auto ra = steady("a");
  ASSERT_EQ(ra.status, HeartbeatStatus::REVOKE_PENDING);
  EXPECT_EQ(own["a"], (Shards{0, 1, 2}));
  EXPECT_EQ(pending(steady("b")), tb);
  single_owner();

  // 3. a drains b's shards first: b gets them, c still waits.
  h.advance(50);
  ra = beat("a", {own["a"], tb, tc});
  EXPECT_EQ(ra.status, HeartbeatStatus::REVOKE_PENDING);
  steady("b");
  EXPECT_EQ(own["b"], tb);
  steady("c");
  EXPECT_TRUE(own["c"].empty());
  single_owner();

  // 4. a acks the rest, but the response is lost: a retries at its previous epoch.
  h.advance(50);
  const int32_t before = epoch["a"];
  auto lost = h.hb("a", before, {own["a"], tc});
  EXPECT_EQ(lost.status, HeartbeatStatus::OK);
  EXPECT_GT(lost.memberEpoch, before);
  auto retry = h.hb("a", before, {own["a"]});
  EXPECT_EQ(retry.status, HeartbeatStatus::OK) << "previous epoch, owned within assigned: a lost response";
  EXPECT_EQ(retry.memberEpoch, lost.memberEpoch);
  epoch["a"] = retry.memberEpoch;
  steady("c");
  EXPECT_EQ(own["c"], tc);
  for (const char* id : {"a", "b", "c", "b", "c"}) steady(id);
  EXPECT_EQ(rsc::group::group_state(h.state()), GroupStateName::STABLE);
  single_owner();

  // 5. c leaves gracefully: its shards go to a and b only after c acks them.
  h.advance(50);
  auto rc = h.hb("c", -1, {own["c"]});
  EXPECT_EQ(rc.status, HeartbeatStatus::REVOKE_PENDING);
  steady("a");
  steady("b");
  EXPECT_EQ(own["a"].size() + own["b"].size(), 6u) << "c's shards are still pending";
  single_owner();
  rc = h.hb("c", -1, {{}, own["c"]});
  EXPECT_EQ(rc.status, HeartbeatStatus::OK);
  EXPECT_FALSE(h.has("c"));
  steady("a");
  steady("b");
  EXPECT_EQ(own["a"].size() + own["b"].size(), 9u);
  single_owner();

  // 6. b dies silently: after the lease a gets everything.
  for (int i = 0; i < 11; ++i) {
    h.advance(100);
    steady("a");
    h.tick();
    single_owner();
  }
  EXPECT_EQ(h.member("b").state, LS::EXPIRED);
  steady("a");
  EXPECT_EQ(own["a"], all);

  // 7. b rejoins; a is slow to revoke and is fenced at the rebalance timeout; b then takes all.
  epoch["b"] = 0;
  own["b"].clear();
  beat("b", {});
  ra = steady("a");
  ASSERT_EQ(ra.status, HeartbeatStatus::REVOKE_PENDING);
  const Shards drainingA = rsc::group::set_minus(all, own["a"]);
  for (int i = 0; i < 6; ++i) {
    h.advance(100);
    beat("a", {own["a"], {}, drainingA});
    steady("b");
    h.tick();
    single_owner();
  }
  EXPECT_EQ(h.member("a").state, LS::FENCED);
  EXPECT_EQ(h.hb("a", epoch["a"], {own["a"]}).status, HeartbeatStatus::FENCED_MEMBER_EPOCH);
  // a's shards wait for its lease to end (it may read until it hears of the fence).
  const auto heldUntil = h.member("a").quarantineUntilMs;
  const Shards heldShards = h.member("a").quarantined;
  EXPECT_EQ(heldShards, all);
  while (h.now() < heldUntil) {
    steady("b");
    single_owner();
    EXPECT_TRUE(rsc::group::set_intersection(own["b"], heldShards).empty());
    h.advance(100);
    h.tick();
  }
  steady("b");
  EXPECT_EQ(own["b"], all);

  // 8. a rejoins and the group settles 5/4.
  epoch["a"] = 0;
  own["a"].clear();
  beat("a", {});
  for (const char* id : {"b", "b", "a", "a", "b"}) steady(id);
  EXPECT_EQ(rsc::group::group_state(h.state()), GroupStateName::STABLE);
  const auto na = own["a"].size(), nb = own["b"].size();
  EXPECT_EQ(na + nb, 9u);
  EXPECT_LE(std::max(na, nb) - std::min(na, nb), 1u);
  single_owner();
}

TEST(Validation, AJoinOrLeaveNamingAShardOutsideTheStreamIsInvalidAndStoresNothing) {
  Harness h(6);
  const auto rev = h.state().storeRevision;
  auto r = h.hb("a", 0, {{0, 9}});
  EXPECT_EQ(r.status, HeartbeatStatus::INVALID_REQUEST);
  EXPECT_NE(r.message->find("ownedShards[1].shardIndex"), std::string::npos);
  EXPECT_EQ(r.errorField, "ownedShards[1].shardIndex");
  EXPECT_FALSE(h.has("a"));
  EXPECT_EQ(h.state().storeRevision, rev);
  auto l = h.hb("a", -1, {{}, {7}});
  EXPECT_EQ(l.status, HeartbeatStatus::INVALID_REQUEST);
  EXPECT_EQ(h.state().storeRevision, rev);
}

TEST_F(TwoMembers, AMemberAheadOnMetadataThatClaimsAnotherMembersShardIsStillFenced) {
  hand_over();
  auto q = h.request("b", b.memberEpoch, {{0, 3, 4, 5}});
  q.metadataVersion = h.state().metadataVersion + 1;
  auto r = h.send(q);
  EXPECT_EQ(r.status, HeartbeatStatus::FENCED_MEMBER_EPOCH) << "shard 0 is a's, whatever b's metadata says";
  EXPECT_EQ(h.member("b").state, LS::FENCED);
}

TEST_F(TwoMembers, AnEpochNeverIssuedIsInvalidForAnExpiredMemberToo) {
  hand_over();
  h.advance(1001);
  h.tick();
  ASSERT_EQ(h.member("b").state, LS::EXPIRED);
  const auto never = h.hb("b", b.memberEpoch + 7);
  EXPECT_EQ(never.status, HeartbeatStatus::INVALID_REQUEST);
  EXPECT_EQ(never.errorField, "memberEpoch");
  const auto stale = h.hb("b", b.memberEpoch);
  EXPECT_EQ(stale.status, HeartbeatStatus::FENCED_MEMBER_EPOCH);
  EXPECT_FALSE(stale.errorField.has_value()) << "only an INVALID_REQUEST names a field";
}

TEST_F(TwoMembers, EveryRevocationGetsAFullRebalanceTimeout) {
  auto r = h.hb("a", a.memberEpoch, {assigned(a)});
  ASSERT_EQ(h.member("a").revokeDeadlineMs, h.now() + 500);
  h.advance(400);
  h.hb("a", r.memberEpoch, {{0, 1, 2}, {}, {3, 4, 5}});
  h.hb("c", 0);  // a now loses another shard
  h.hb("a", r.memberEpoch, {{0, 1, 2}, {}, {3, 4, 5}});
  EXPECT_EQ(h.member("a").revokeDeadlineMs, h.now() + 500) << "the new revocation has its own 500 ms";
}

// The ring of recent events keeps the newest, drops bookkeeping and ages entries on the given clock.
TEST(RecentEvents, KeepsTheNewestWorthShowingAndAgesThemOnTheGivenClock) {
  using rsc::group::Event;
  rsc::group::RecentEvents ring(3);
  ring.record({{Event::Kind::JOINED, "a", {}, ""}, {Event::Kind::TARGET_COMPUTED, "", {}, ""}}, 1, 1000);
  ring.record({{Event::Kind::JOINED, "b", {}, ""}, {Event::Kind::EPOCH_ADVANCED, "b", {}, ""}}, 2, 2000);
  ring.record({{Event::Kind::REVOKE_REQUESTED, "a", {1, 2}, ""}, {Event::Kind::FENCED, "c", {}, "stale epoch"}}, 3, 3000);
  ASSERT_EQ(ring.items().size(), 3u);
  EXPECT_EQ(ring.items()[0].event.member, "b") << "a's join made room";
  EXPECT_EQ(ring.items()[2].event.kind, Event::Kind::FENCED);
  rsc::group::GroupState g;
  g.streamPrefix = "s";
  g.consumerGroup = "g";
  const auto d = nlohmann::json::parse(rsc::group::describe_json(g, 3500, &ring));
  const auto& ev = d.at("recentEvents");
  ASSERT_EQ(ev.size(), 3u);
  EXPECT_EQ(ev[0].at("agoMs"), 1500);
  EXPECT_EQ(ev[0].at("groupEpoch"), 2);
  EXPECT_EQ(ev[1].at("shards"), nlohmann::json::parse("[1,2]"));
  EXPECT_EQ(ev[2].at("detail"), "stale epoch");
  EXPECT_FALSE(nlohmann::json::parse(rsc::group::describe_json(g, 3500)).contains("recentEvents"));
}

// Every group held carries a ring, so it is packed into a fixed budget: it never grows past it,
// the newest events stay whole, and what does not fit in one event is cut and says so.
TEST(RecentEvents, StayWithinTheirByteBudgetAndKeepTheNewestWhole) {
  using rsc::group::Event;
  rsc::group::RecentEvents ring(64, 512);
  for (int i = 0; i < 200; ++i)
    ring.record({{Event::Kind::JOINED, "member-" + std::to_string(i), {i % 16, 16 + i % 16},
                  "joined with a detail long enough to need the heap " + std::to_string(i)}},
                i, 1000 + i);
  EXPECT_LE(ring.packed_bytes(), 512u);
  const auto items = ring.items();
  ASSERT_GE(items.size(), 3u) << "a 512-byte budget holds several such events";
  EXPECT_LT(items.size(), 64u) << "the byte budget, not the count, is what bounds them here";
  EXPECT_EQ(items.size(), ring.size());
  const auto& last = items.back();
  EXPECT_EQ(last.event.member, "member-199");
  EXPECT_EQ(last.event.shards, (rsc::group::ShardSet{199 % 16, 16 + 199 % 16}));
  EXPECT_EQ(last.event.detail, "joined with a detail long enough to need the heap 199");
  EXPECT_EQ(last.groupEpoch, 199);
  EXPECT_EQ(last.atMs, 1199);
  for (std::size_t i = 1; i < items.size(); ++i) EXPECT_EQ(items[i].groupEpoch, items[i - 1].groupEpoch + 1) << "no gap";

  rsc::group::ShardSet many;
  for (int s = 0; s < 100; ++s) many.push_back(s);
  rsc::group::RecentEvents big;
  big.record({{Event::Kind::REVOKE_REQUESTED, "m", many, std::string(500, 'x')}}, 7, 1);
  const auto one = big.items();
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(one[0].event.shards.size(), rsc::group::RecentEvents::kMaxShards);
  EXPECT_EQ(one[0].event.detail.rfind("(68 more shards) ", 0), 0u) << one[0].event.detail;
  EXPECT_LE(one[0].event.detail.size(), rsc::group::RecentEvents::kMaxText);
  EXPECT_LE(big.packed_bytes(), rsc::group::RecentEvents::kDefaultBytes);
}

// Describe names, per shard, its reader, the member giving it up and the one waiting for it, so
// a person (or the status page, or rsc-admin) sees a handover without working it out.
TEST_F(TwoMembers, DescribeShowsEachShardsOwnerAndItsHandoverInProgress) {
  auto r = h.hb("a", a.memberEpoch, {assigned(a)});
  ASSERT_EQ(r.status, HeartbeatStatus::REVOKE_PENDING);
  h.hb("b", b.memberEpoch);
  auto shards = nlohmann::json::parse(rsc::group::describe_json(h.state(), h.now())).at("shards");
  ASSERT_EQ(shards.size(), 6u);
  for (int s : {0, 1, 2}) {
    EXPECT_EQ(shards[s].at("state"), "OWNED") << s;
    EXPECT_EQ(shards[s].at("owner"), "a");
    EXPECT_TRUE(shards[s].at("pendingFor").is_null());
  }
  for (int s : {3, 4, 5}) {
    EXPECT_EQ(shards[s].at("state"), "REVOKING") << s;
    EXPECT_EQ(shards[s].at("owner"), "a") << "a still reads it until it acks";
    EXPECT_EQ(shards[s].at("revokingBy"), "a");
    EXPECT_EQ(shards[s].at("pendingFor"), "b");
  }
  a = h.hb("a", r.memberEpoch, {assigned(r), Shards{3, 4, 5}});
  ASSERT_EQ(a.status, HeartbeatStatus::OK);
  b = h.hb("b", b.memberEpoch);
  ASSERT_EQ(assigned(b), (Shards{3, 4, 5}));
  shards = nlohmann::json::parse(rsc::group::describe_json(h.state(), h.now())).at("shards");
  for (int s : {3, 4, 5}) {
    EXPECT_EQ(shards[s].at("state"), "OWNED") << s;
    EXPECT_EQ(shards[s].at("owner"), "b");
    EXPECT_TRUE(shards[s].at("revokingBy").is_null());
  }
}

// Right after a shrink retired shards, a describe (the group read, then the
// stream) showed them ACTIVE until the group's own copy learned the stream's new version.
TEST_F(TwoMembers, DescribeNeverShowsAShardTheStreamRetiredAsActiveBeforeTheGroupLearnsIt) {
  rsc::protocol::StreamMetadata stream;
  stream.streamPrefix = h.state().streamPrefix;
  stream.shardCount = 4;  // 6 -> 4, drained and retired: nothing draining
  stream.metadataVersion = h.state().metadataVersion + 1;
  auto shards = nlohmann::json::parse(rsc::group::describe_json(h.state(), h.now(), nullptr, nullptr, &stream)).at("shards");
  ASSERT_EQ(shards.size(), 6u) << "the group's copy still has 6";
  for (int s : {0, 1, 2, 3}) EXPECT_EQ(shards[s].at("phase"), "ACTIVE") << s;
  for (int s : {4, 5}) {
    EXPECT_EQ(shards[s].at("phase"), "RETIRING") << s;
    EXPECT_NE(shards[s].at("waitingFor").get<std::string>().find("metadata version"), std::string::npos);
  }
  stream.metadataVersion = h.state().metadataVersion;  // as old as the group's: the group's own word
  shards = nlohmann::json::parse(rsc::group::describe_json(h.state(), h.now(), nullptr, nullptr, &stream)).at("shards");
  for (int s : {4, 5}) EXPECT_EQ(shards[s].at("phase"), "ACTIVE") << s;
}

// The signature stands for what may_need_telling compares: a steady heartbeat keeps it, anything
// that changes a member's to-do (a join, a revocation, an ack) changes it.
TEST(Notify, TheShapeSignatureChangesExactlyWhenSomebodyMayNeedTelling) {
  using rsc::group::shape_signature;
  Harness h;
  auto a = h.hb("a", 0);
  a = h.hb("a", a.memberEpoch, {assigned(a)});
  const auto stable = shape_signature(h.state());
  h.advance(500);
  h.hb("a", a.memberEpoch, {assigned(a)});  // only a's lease, requestId and answer moved
  EXPECT_EQ(shape_signature(h.state()), stable);
  h.hb("b", 0);
  const auto joined = shape_signature(h.state());
  EXPECT_NE(joined, stable) << "b joined";
  auto r = h.hb("a", a.memberEpoch, {assigned(a)});
  ASSERT_EQ(r.status, HeartbeatStatus::REVOKE_PENDING);
  const auto revoking = shape_signature(h.state());
  EXPECT_NE(revoking, joined) << "a was asked to give shards up";
  h.hb("a", r.memberEpoch, {assigned(r), Shards{3, 4, 5}});
  EXPECT_NE(shape_signature(h.state()), revoking) << "a acked";
  rsc::group::GroupState renamed = h.state();
  auto node = renamed.members.extract("b");
  node.key() = "c";
  node.mapped().id = "c";
  renamed.members.insert(std::move(node));
  EXPECT_NE(shape_signature(renamed), shape_signature(h.state())) << "another member, same shards";
}

// Notifications (group/notify.hpp): after a join, the member that must give shards up is woken;
// after its ack, the member waiting for them is; the members whose heartbeats made the step are
// not (their answer tells them), and nobody is woken twice for the same to-do.
TEST(Notify, AJoinWakesTheOwnerThatMustGiveUpAndItsAckWakesTheNewcomer) {
  Harness h;
  auto a = h.hb("a", 0);
  a = h.hb("a", a.memberEpoch, {assigned(a)});
  const auto stable = h.state();
  h.hb("a", a.memberEpoch, {assigned(a)});  // a steady heartbeat: only a's lease moved
  EXPECT_FALSE(rsc::group::may_need_telling(&stable, h.state())) << "a steady heartbeat is decided without work";
  EXPECT_TRUE(rsc::group::may_need_telling(nullptr, h.state()));
  auto b = h.hb("b", 0);
  EXPECT_TRUE(rsc::group::may_need_telling(&stable, h.state()));
  EXPECT_EQ(rsc::group::members_to_wake(&stable, h.state(), {"b"}), (std::vector<std::string>{"a"}))
      << "a holds shards b's join moved";
  // Had a been answered in the same step, it would be woken only if its answer came before b's
  // join (a is left with the new epoch to take up: nothing told it).
  EXPECT_EQ(rsc::group::members_to_wake(&stable, h.state(), {"a", "b"}), (std::vector<std::string>{"a"}));
  const auto aTodo = rsc::group::member_todo(h.state(), h.state().members.at("a"));
  EXPECT_EQ(aTodo.giveUp, (Shards{3, 4, 5}));
  EXPECT_EQ(aTodo.newEpoch, h.state().assignmentEpoch) << "a also has the new assignment epoch to take up";
  const auto joined = h.state();
  EXPECT_TRUE(rsc::group::members_to_wake(&joined, h.state(), {}).empty()) << "nothing new: nobody is woken";
  auto r = h.hb("a", a.memberEpoch, {assigned(a)});
  ASSERT_EQ(r.status, HeartbeatStatus::REVOKE_PENDING);
  const auto revoking = h.state();
  EXPECT_TRUE(rsc::group::members_to_wake(&joined, revoking, {"a"}).empty()) << "b's shards are still held by a";
  h.hb("a", r.memberEpoch, {assigned(r), Shards{3, 4, 5}});
  EXPECT_EQ(rsc::group::members_to_wake(&revoking, h.state(), {"a"}), (std::vector<std::string>{"b"}))
      << "a's ack freed the shards b waits for";
  const auto todo = rsc::group::member_todo(h.state(), h.state().members.at("b"));
  EXPECT_EQ(todo.take, (Shards{3, 4, 5}));
  EXPECT_TRUE(todo.giveUp.empty());
  EXPECT_EQ(rsc::group::members_to_wake(nullptr, h.state(), {}), (std::vector<std::string>{"b"}))
      << "with no earlier state known, whoever has something to do is woken";
}

// Heartbeats that meet in one batch are answered in order, and a member
// answered before a later heartbeat of the batch freed the shards it waits for was told "pending,
// come back in a quarter interval" (750 ms at the 3 s default). Leaving it out of the wake list
// because it was answered made a graceful leave converge in ~760 ms in some trials. An answered
// member is woken when, after the batch, it has shards to take or an epoch to take up (what its
// answer could not have told it); one whose answer told it everything is not.
TEST(Notify, AMemberAnsweredBeforeALaterHeartbeatOfTheBatchFreedItsShardsIsWoken) {
  Harness h;
  auto a = h.hb("a", 0);
  a = h.hb("a", a.memberEpoch, {assigned(a)});
  auto c = h.hb("c", 0);
  auto r = h.hb("a", a.memberEpoch, {assigned(a)});
  ASSERT_EQ(r.status, HeartbeatStatus::REVOKE_PENDING);
  const Shards given = rsc::group::member_todo(h.state(), h.state().members.at("a")).giveUp;
  a = h.hb("a", r.memberEpoch, {assigned(r), given});
  c = h.hb("c", c.memberEpoch);
  c = h.hb("c", c.memberEpoch, {assigned(c)});
  a = h.hb("a", a.memberEpoch, {assigned(a)});
  ASSERT_EQ(assigned(c).size(), 3u);
  // c leaves while its worker still holds its shards: they are draining, a is to take them.
  h.hb("c", -1, {{}, {}, assigned(c)});
  const auto beforeBatch = h.state();
  // One batch: a's heartbeat first (its shards are still held by c: pending), then c's release.
  auto aAnswer = h.hb("a", a.memberEpoch, {assigned(a)});
  EXPECT_EQ(rsc::group::member_todo(h.state(), h.state().members.at("a")).take, Shards{})
      << "when a was answered, c still held them";
  h.hb("c", -1, {{}, assigned(c), {}});
  const auto todo = rsc::group::member_todo(h.state(), h.state().members.at("a"));
  EXPECT_EQ(todo.take, assigned(c)) << "c's release freed them after a's answer";
  EXPECT_EQ(rsc::group::members_to_wake(&beforeBatch, h.state(), {"a", "c"}), (std::vector<std::string>{"a"}))
      << "a was answered before the shards were free: only a notification gets it to come at once";
  // Answered after the release, a takes them in its answer and is not woken again.
  const auto released = h.state();
  a = h.hb("a", aAnswer.memberEpoch, {assigned(aAnswer)});
  EXPECT_EQ(rsc::group::member_todo(h.state(), h.state().members.at("a")).take, Shards{});
  EXPECT_TRUE(rsc::group::members_to_wake(&released, h.state(), {"a"}).empty());
}

// The answer kept per member for a repeated requestId is compact, and loses nothing: expanded
// again it is the answer given, and written from it the bytes are the answer's own.
TEST(StoredResponse, KeepsEveryFieldOfTheAnswerAndWritesTheSameBytes) {
  using rsc::protocol::HeartbeatResponse;
  HeartbeatResponse full;
  full.responseTo = "req-long-enough-to-leave-the-small-string-buffer-17";
  full.memberId = "member-with-a-long-identifier-0001";
  full.status = HeartbeatStatus::REVOKE_PENDING;
  full.memberEpoch = 12;
  full.groupEpoch = 14;
  full.assignmentEpoch = 13;
  full.metadataVersion = 3;
  full.heartbeatIntervalMs = 750;
  full.rebalanceTimeoutMs = 60000;
  full.memberLeaseTtlMs = 15000;
  rsc::protocol::Assignment a;
  a.assignedShards = {1, 4, 9};
  a.pendingShards = {2};
  a.metadataVersion = 3;
  a.error = "SOMETHING";
  full.assignment = a;
  full.message = "a message";
  full.errorField = "ownedShards[1].shardIndex";

  HeartbeatResponse plain;
  plain.responseTo = "r1";
  plain.memberId = "m";
  plain.memberEpoch = 2;
  plain.heartbeatIntervalMs = 3000;
  plain.assignment = rsc::protocol::Assignment{};
  plain.assignment->assignedShards = {0};

  HeartbeatResponse bare = plain;  // an answer stored by a build that sent no assignment
  bare.assignment.reset();

  HeartbeatResponse waiting = plain;  // shards promised, still held by their previous owner
  waiting.assignment->pendingShards = {5, 6};

  HeartbeatResponse many = plain;  // more shards than are kept inline, and timings past 32 bits
  many.assignment->assignedShards = {0, 1, 2, 3, 4};
  many.assignment->pendingShards = {5, 6};
  many.rebalanceTimeoutMs = int64_t{1} << 40;

  HeartbeatResponse four = plain;  // exactly as many as are kept inline, with pending ones
  four.assignment->assignedShards = {3, 5, 7, 9};
  four.assignment->pendingShards = {10, 11};

  for (const auto& r : {full, plain, bare, waiting, many, four}) {
    const auto s = rsc::group::StoredResponse::of(r);
    EXPECT_EQ(s.expand(r.responseTo, r.memberId), r);
    EXPECT_EQ(rsc::protocol::encode(s.expand(r.responseTo, r.memberId)), rsc::protocol::encode(r));
    EXPECT_EQ(rsc::group::StoredResponse::of(s.expand(r.responseTo, r.memberId)), s);
  }
  EXPECT_EQ(rsc::group::StoredResponse::of(plain).rare, nullptr) << "an ordinary answer keeps no rare part";
  EXPECT_NE(rsc::group::StoredResponse::of(full).rare, nullptr);
  EXPECT_EQ(rsc::group::StoredResponse::of(waiting).rare, nullptr) << "a few pending shards are kept inline";
  EXPECT_NE(rsc::group::StoredResponse::of(many).rare, nullptr);
  EXPECT_EQ(rsc::group::StoredResponse::of(four).rare, nullptr);
  EXPECT_FALSE(rsc::group::StoredResponse::of(plain) == rsc::group::StoredResponse::of(four));
  EXPECT_LE(sizeof(rsc::group::StoredResponse) * 2, sizeof(HeartbeatResponse))
      << "the point of it: every member of every group held carries one";
}

// --- Coarse lease renewal (Config::leaseRenewalSlackMs) -------------------------------------

namespace {
rsc::group::Config slack_config(rsc::group::Millis slack) {
  auto c = Harness::default_config();  // lease 1000, rebalance timeout 500
  c.leaseRenewalSlackMs = slack;
  return c;
}
// Joins `id` and takes what it is given, returning its epoch and shards.
std::pair<int32_t, Shards> settle(Harness& h, const std::string& id) {
  auto r = h.hb(id, 0);
  r = h.hb(id, r.memberEpoch, {assigned(r)});
  return {r.memberEpoch, assigned(r)};
}
}  // namespace

TEST(LeaseRenewal, ASteadyHeartbeatIsWrittenOnlyWhenTheStoredLeaseNoLongerReachesPastOneMoreLease) {
  Harness h(6, slack_config(300));
  auto [epoch, owned] = settle(h, "a");
  const auto t0 = h.now();
  ASSERT_TRUE(h.last().delta.upserted.count("a"));
  EXPECT_EQ(h.member("a").leaseUntilMs, t0 + 1000 + 300) << "a write stores the lease plus the slack";
  for (int step = 1; step <= 2; ++step) {
    h.advance(100);
    auto r = h.hb("a", epoch, {owned});
    EXPECT_EQ(r.status, HeartbeatStatus::OK);
    EXPECT_TRUE(h.last().delta.empty()) << "at +" << step * 100 << " ms the stored lease still covers it";
    EXPECT_EQ(h.member("a").lastHeartbeatMs, h.now()) << "the pod's copy knows it was heard";
    EXPECT_EQ(r.responseTo, h.member("a").lastRequestId) << "and keeps the answer for a repeat";
  }
  h.advance(100);  // +300: stored lease 1300 no longer reaches past now + 1000
  h.hb("a", epoch, {owned});
  EXPECT_TRUE(h.last().delta.upserted.count("a"));
  EXPECT_EQ(h.member("a").leaseUntilMs, h.now() + 1300);
}

TEST(LeaseRenewal, WithoutSlackEveryHeartbeatIsWrittenAsBefore) {
  Harness h(6, slack_config(0));
  auto [epoch, owned] = settle(h, "a");
  for (int i = 0; i < 3; ++i) {
    h.hb("a", epoch, {owned});  // even at the same millisecond
    EXPECT_TRUE(h.last().delta.upserted.count("a")) << i;
    h.advance(1);
  }
}

TEST(LeaseRenewal, AnythingBeyondLivenessIsWrittenAtOnce) {
  Harness h(6, slack_config(300));
  auto [epoch, owned] = settle(h, "a");
  h.advance(10);
  auto q = h.request("a", epoch, {owned});
  q.runtimeConsumerCapacity = {4, 1};
  h.send(q);
  EXPECT_TRUE(h.last().delta.upserted.count("a")) << "a new capacity";
  h.advance(10);
  q = h.request("a", epoch, {owned, {}, {}, {owned.front()}});
  q.runtimeConsumerCapacity = {4, 1};
  h.send(q);
  EXPECT_TRUE(h.last().delta.upserted.count("a")) << "new progress";
  h.advance(10);
  h.hb("b", 0);  // a join: a must revoke half
  h.advance(10);
  h.hb("a", epoch, {owned});
  EXPECT_TRUE(h.last().delta.upserted.count("a")) << "a revocation";
  EXPECT_EQ(h.last().response.status, HeartbeatStatus::REVOKE_PENDING);
}

TEST(LeaseRenewal, ExpiryIsJudgedByTheStoredLeaseSoAPodThatDidNotSeeTheRenewalsExpiresNobodyEarly) {
  Harness h(6, slack_config(300));
  auto [epoch, owned] = settle(h, "a");
  const auto written = h.now();
  const GroupState stored = h.state();  // what another pod loads: lastHeartbeat = written
  h.advance(250);
  h.hb("a", epoch, {owned});  // answered from this pod's copy only
  ASSERT_TRUE(h.last().delta.empty());
  // The other pod judges the stored state: lastHeartbeat + lease has passed, the stored lease has not.
  auto other = rsc::group::tick(stored, h.cfg(), written + 1001);
  EXPECT_TRUE(other.state.members.at("a").live()) << "heard at +250 by the first pod: not expired at +1001";
  EXPECT_EQ(*rsc::group::next_deadline(stored, h.cfg()), written + 1300 + 1);
  auto later = rsc::group::tick(stored, h.cfg(), written + 1301);
  EXPECT_EQ(later.state.members.at("a").state, LS::EXPIRED) << "silent past the stored lease: expired";
}

TEST(Quarantine, AMemberFencedWhileAStalePodCouldStillAnswerItKeepsItsShardsFromOthersUntilItsStoredLeaseEnds) {
  Harness h(4, slack_config(300));
  auto [ea, ownedA] = settle(h, "a");
  ASSERT_EQ(ownedA.size(), 4u);
  auto b = h.hb("b", 0);
  ASSERT_FALSE(pending(b).empty());
  h.advance(50);
  auto ra = h.hb("a", ea, {ownedA});  // told to revoke (written: leaseUntil = now + 1300)
  ASSERT_EQ(ra.status, HeartbeatStatus::REVOKE_PENDING);
  const auto leaseUntil = h.member("a").leaseUntilMs;
  h.advance(10);
  // An admin removes a through this pod. Another pod's copy, from before, could answer a OK
  // without writing until leaseUntil - lease; a may read until leaseUntil.
  h.apply(rsc::group::fence_member(h.state(), "a", "removed by admin", h.cfg(), h.now()));
  const auto& fenced = h.member("a");
  EXPECT_EQ(fenced.state, LS::FENCED);
  EXPECT_EQ(fenced.quarantined, ownedA);
  EXPECT_EQ(fenced.quarantineUntilMs, leaseUntil);
  EXPECT_GE(fenced.tombstoneUntilMs, leaseUntil) << "the tombstone carries the quarantine to its end";
  EXPECT_EQ(*rsc::group::next_deadline(h.state(), h.cfg()), std::min(leaseUntil, h.member("b").leaseUntilMs + 1));
  h.advance(leaseUntil - h.now() - 1);
  auto rb = h.hb("b", b.memberEpoch);
  EXPECT_TRUE(assigned(rb).empty()) << "1 ms before the quarantine ends: still waiting";
  h.advance(1);
  h.tick();
  EXPECT_TRUE(!h.has("a") || h.member("a").quarantined.empty()) << "(its tombstone may end with it)";
  EXPECT_NE(std::find_if(h.events().begin(), h.events().end(),
                         [](const std::string& e) { return e.find("quarantine-ended") != std::string::npos; }),
            h.events().end());
  rb = h.hb("b", rb.memberEpoch);
  EXPECT_EQ(assigned(rb).size(), 4u) << "then b gets every shard";
}

// Every answer written (slack 0) or not, a fenced member hears of its fence only at its next
// answer, so it may read until its lease ends; a member whose lease has ended reads nothing.
TEST(Quarantine, AFencedLiveMemberIsHeldUntilItsLeaseEndsEvenWhenEveryAnswerWasWritten) {
  Harness h(4, slack_config(0));
  auto [ea, ownedA] = settle(h, "a");
  auto b = h.hb("b", 0);
  h.advance(10);
  const auto until = rsc::group::lease_end(h.member("a"), h.cfg());
  h.apply(rsc::group::fence_member(h.state(), "a", "removed by admin", h.cfg(), h.now()));
  EXPECT_EQ(h.member("a").quarantined, ownedA);
  EXPECT_EQ(h.member("a").quarantineUntilMs, until);
  auto rb = h.hb("b", b.memberEpoch);
  EXPECT_TRUE(assigned(rb).empty());
  h.advance(until - h.now());
  h.tick();
  rb = h.hb("b", rb.memberEpoch);
  EXPECT_EQ(assigned(rb).size(), 4u) << "a's shards go once its lease has ended";
  // A member silent past its lease (not expired yet: no tick ran) reads nothing: nothing held.
  Harness k(4, slack_config(300));
  auto [ek, ownedK] = settle(k, "a");
  k.advance(rsc::group::lease_end(k.member("a"), k.cfg()) - k.now() + 1);
  k.apply(rsc::group::fence_member(k.state(), "a", "removed by admin", k.cfg(), k.now()));
  EXPECT_TRUE(k.member("a").quarantined.empty());
}

TEST(Quarantine, ARejoinKeepsItAndTheRollbackGuardCoversTheSlack) {
  Harness h(4, slack_config(300));
  auto [ea, ownedA] = settle(h, "a");
  h.advance(10);
  h.apply(rsc::group::fence_member(h.state(), "a", "removed by admin", h.cfg(), h.now()));
  const auto until = h.member("a").quarantineUntilMs;
  h.hb("a", 0);  // the same id joins again
  EXPECT_EQ(h.member("a").quarantined, ownedA);
  EXPECT_EQ(h.member("a").quarantineUntilMs, until);
  auto rb = h.hb("b", 0);
  for (int32_t s : assigned(rb)) EXPECT_FALSE(std::count(ownedA.begin(), ownedA.end(), s)) << "b gets none of them";
  auto rolled = rsc::group::recover_from_rollback(h.state(), h.state().groupEpoch, h.cfg(), h.now());
  EXPECT_EQ(rolled.state.rollbackGuardUntilMs, h.now() + 1000 + 300) << "a lease and the slack";
  EXPECT_EQ(rsc::group::grants_held_after_delete(h.state(), h.now()), until) << "what a delete leaves behind";
  EXPECT_EQ(rsc::group::grants_held_after_delete(h.state(), until), 0);
}

// A pod whose copy of the group predates a revocation another pod made (and the member acked
// there) must not answer the member without a write: its answer would hand the shard back.
TEST(LeaseRenewal, OnlyAMemberReportingExactlyWhatTheCopySaysItReadsIsAnsweredWithoutAWrite) {
  Harness h(4, slack_config(300));
  auto [epoch, owned] = settle(h, "a");
  ASSERT_EQ(owned.size(), 4u);
  const GroupState podA = h.state();  // pod A's copy: a reads all four
  h.advance(10);
  auto b = h.hb("b", 0);  // at pod B: a must give up two
  auto r = h.hb("a", epoch, {owned});
  ASSERT_EQ(r.status, HeartbeatStatus::REVOKE_PENDING);
  const Shards kept = assigned(r);
  ASSERT_EQ(kept.size(), 2u);
  h.hb("a", epoch, {kept});  // a lets the two go: acked at pod B
  h.advance(10);
  // a's next heartbeat lands on pod A, whose copy still says a reads all four.
  auto atA = rsc::group::heartbeat(podA, h.request("a", epoch, {kept}), h.cfg(), h.now());
  EXPECT_FALSE(atA.delta.empty()) << "a write, whose revision check finds pod A's copy stale";
  EXPECT_FALSE(atA.leaseRenewalDeferred);
  // The same report as pod A's copy: nothing new in the answer, so no write is needed.
  auto same = rsc::group::heartbeat(podA, h.request("a", epoch, {owned}), h.cfg(), h.now());
  EXPECT_TRUE(same.delta.empty());
  EXPECT_TRUE(same.leaseRenewalDeferred);
  EXPECT_EQ(assigned(same.response), owned);
  (void)b;
}

// --- A join of a known id (SPEC §3 rule 1): the old incarnation may still be reading ----------

// The sequence of m owns 0-3, n joins, m is told to give up 2 and 3 and is draining
// them when a join for m (one it had retried, arriving late) reaches the coordinator.
TEST(StaleJoin, TheShardsTheOldIncarnationOwnedOrDrainedGoToNobodyBeforeItsStoredLeaseEnds) {
  Harness h(4, slack_config(300));
  auto [em, ownedM] = settle(h, "m");
  ASSERT_EQ(ownedM, (Shards{0, 1, 2, 3}));
  auto n = h.hb("n", 0);
  ASSERT_EQ(pending(n), (Shards{2, 3}));
  h.advance(20);
  auto rm = h.hb("m", em, {ownedM});
  ASSERT_EQ(rm.status, HeartbeatStatus::REVOKE_PENDING);
  ASSERT_EQ(assigned(rm), (Shards{0, 1}));
  const auto storedLease = h.member("m").leaseUntilMs;  // written with the revocation: +1300
  ASSERT_EQ(storedLease, h.now() + 1300);
  h.advance(30);
  auto join = h.hb("m", 0);  // the late join: the real m is still draining 2 and 3
  EXPECT_EQ(join.status, HeartbeatStatus::OK);
  EXPECT_GT(join.memberEpoch, em);
  EXPECT_TRUE(assigned(join).empty()) << "0 and 1 too: the old incarnation may still read them";
  EXPECT_EQ(h.member("m").quarantined, (Shards{0, 1, 2, 3}));
  EXPECT_EQ(h.member("m").quarantineUntilMs, storedLease);
  // The real m's next heartbeat is fenced; until the stored lease ends, n gets neither 2 nor 3.
  EXPECT_EQ(h.hb("m", em, {{0, 1}, {}, {2, 3}}).status, HeartbeatStatus::FENCED_MEMBER_EPOCH);
  while (h.now() + 100 < storedLease) {
    h.advance(100);
    h.tick();
    n = h.hb("n", n.memberEpoch, {assigned(n)});
    EXPECT_TRUE(assigned(n).empty()) << "at +" << h.now() - (storedLease - 1300);
    join = h.hb("m", join.memberEpoch, {assigned(join)});
    EXPECT_TRUE(assigned(join).empty());
  }
  h.advance(storedLease - h.now());
  h.tick();
  n = h.hb("n", n.memberEpoch, {assigned(n)});
  join = h.hb("m", join.memberEpoch, {assigned(join)});
  EXPECT_EQ(assigned(n), (Shards{2, 3}));
  EXPECT_EQ(assigned(join), (Shards{0, 1}));
  EXPECT_NE(std::find_if(h.events().begin(), h.events().end(),
                         [](const std::string& e) { return e.find("held until its lease ends") != std::string::npos; }),
            h.events().end())
      << "the rejoin says what it holds back";
}

// A member that holds nothing (it waits for shards) joins twice: nobody else is affected.
TEST(StaleJoin, ADuplicateJoinOfAMemberHoldingNothingChangesNothingForOthers) {
  Harness h(4, slack_config(300));
  auto [en, ownedN] = settle(h, "n");
  auto [eo, ownedO] = settle(h, "o");  // n gives up two for o, which takes them
  auto rn = h.hb("n", en, {ownedN});
  rn = h.hb("n", rn.memberEpoch, {assigned(rn)});
  auto ro = h.hb("o", eo, {ownedO});
  ASSERT_EQ(assigned(rn).size() + assigned(ro).size(), 4u);
  auto m = h.hb("m", 0);  // m waits: the 4 shards are split 2/1/1 and m's one is still held
  ASSERT_TRUE(assigned(m).empty());
  const auto n0 = h.member("n"), o0 = h.member("o");
  h.advance(10);
  auto again = h.hb("m", 0);  // the same join, retried
  EXPECT_EQ(again.status, HeartbeatStatus::OK);
  EXPECT_TRUE(h.member("m").quarantined.empty()) << "nothing was held: nothing to keep from anyone";
  for (const auto* pair : {&n0, &o0}) {
    const auto& now = h.member(pair->id);
    EXPECT_EQ(now.assigned, pair->assigned) << pair->id;
    EXPECT_EQ(now.revoking, pair->revoking) << pair->id;
    EXPECT_EQ(now.target, pair->target) << pair->id;
  }
}

// The old incarnation cannot read any more: its lease has ended (no pod expired it yet), it
// expired, or it left. Its shards are given at once, to this id when the assignor says so.
TEST(StaleJoin, AJoinWhoseOldIncarnationIsProvablyGoneGetsItsShardsAtOnce) {
  {
    Harness h(4, slack_config(300));
    auto [em, ownedM] = settle(h, "m");
    h.advance(rsc::group::lease_end(h.member("m"), h.cfg()) - h.now() + 1);  // silent; no tick ran
    auto r = h.hb("m", 0);
    EXPECT_EQ(assigned(r), ownedM) << "past its lease the old incarnation has fenced itself";
    EXPECT_TRUE(h.member("m").quarantined.empty());
  }
  {
    Harness h(4, slack_config(300));
    auto [em, ownedM] = settle(h, "m");
    h.advance(rsc::group::lease_end(h.member("m"), h.cfg()) - h.now() + 1);
    h.tick();
    ASSERT_EQ(h.member("m").state, LS::EXPIRED);
    auto r = h.hb("m", 0);
    EXPECT_EQ(assigned(r), ownedM) << "an expired incarnation holds nothing";
  }
  {
    Harness h(4, slack_config(300));
    auto [em, ownedM] = settle(h, "m");
    h.hb("m", -1);  // leaves, reporting nothing owned: removed at once
    ASSERT_FALSE(h.has("m"));
    auto r = h.hb("m", 0);
    EXPECT_EQ(assigned(r), ownedM);
  }
}

// The hold is kept in the member's record: a new incarnation that leaves before it ends does not
// take the hold with it.
TEST(StaleJoin, TheHoldOutlivesANewIncarnationThatLeavesAtOnce) {
  Harness h(4, slack_config(300));
  auto [em, ownedM] = settle(h, "m");
  const auto until = rsc::group::lease_end(h.member("m"), h.cfg());
  h.hb("m", 0);
  h.hb("m", -1);  // the new incarnation leaves at once
  ASSERT_TRUE(h.has("m")) << "kept as a tombstone while the hold runs";
  EXPECT_FALSE(h.member("m").live());
  EXPECT_EQ(h.member("m").quarantined, ownedM);
  auto n = h.hb("n", 0);
  EXPECT_TRUE(assigned(n).empty());
  h.advance(until - h.now());
  h.tick();
  EXPECT_FALSE(h.has("m"));
  n = h.hb("n", n.memberEpoch);
  EXPECT_EQ(assigned(n), ownedM);
}

// A leave carries no epoch of its own (memberEpoch -1 is the leave). One an older incarnation sent
// that arrives after a newer one joined would release what the newer one reads; naming the epoch
// it leaves from (leavingMemberEpoch) lets the coordinator tell, as rule 3 does for any epoch.
TEST(StaleLeave, ALeaveNamingAnOlderIncarnationsEpochChangesNothing) {
  Harness h(4, slack_config(300));
  auto [oldEpoch, ownedOld] = settle(h, "m");
  auto staleLeave = h.request("m", -1, {{}, ownedOld});
  staleLeave.leavingMemberEpoch = oldEpoch;
  // A newer incarnation joins (it must wait for the old one's lease) and then reads.
  auto r = h.hb("m", 0);
  h.advance(rsc::group::lease_end(h.member("m"), h.cfg()) - h.now());
  h.tick();
  r = h.hb("m", r.memberEpoch);
  ASSERT_EQ(assigned(r), ownedOld);
  const auto rev = h.state().storeRevision;
  auto late = h.send(staleLeave);  // the old incarnation's leave arrives now
  EXPECT_EQ(late.status, HeartbeatStatus::FENCED_MEMBER_EPOCH);
  EXPECT_NE(late.message->find("older incarnation"), std::string::npos) << *late.message;
  EXPECT_EQ(h.state().storeRevision, rev) << "nothing stored";
  EXPECT_EQ(h.member("m").assigned, ownedOld) << "the newer incarnation keeps what it reads";
  EXPECT_TRUE(h.member("m").live());
  // Its own leave, naming its epoch, is applied.
  auto own = h.request("m", -1, {{}, ownedOld});
  own.leavingMemberEpoch = r.memberEpoch;
  EXPECT_EQ(h.send(own).status, HeartbeatStatus::OK);
  EXPECT_FALSE(h.has("m"));
}

TEST(StaleLeave, ALeaveWithoutAnEpochOrWithTheCurrentOrPreviousOneIsAppliedAndAHigherOneIsInvalid) {
  {
    Harness h(4, slack_config(300));
    auto [epoch, owned] = settle(h, "m");
    EXPECT_EQ(h.hb("m", -1, {{}, owned}).status, HeartbeatStatus::OK) << "reference clients send no epoch";
    EXPECT_FALSE(h.has("m"));
  }
  {
    Harness h(4, slack_config(300));
    auto [epoch, owned] = settle(h, "m");
    h.hb("n", 0);
    auto r = h.hb("m", epoch, {owned});  // revoke 2: m keeps its epoch until it acks
    r = h.hb("m", epoch, {assigned(r)});  // acked: a new epoch, whose answer m may have lost
    ASSERT_GT(h.member("m").epoch, epoch);
    auto q = h.request("m", -1, {{}, assigned(r)});
    q.leavingMemberEpoch = epoch;  // the previous epoch: the last answer was lost
    EXPECT_EQ(h.send(q).status, HeartbeatStatus::OK);
    EXPECT_FALSE(h.has("m"));
  }
  {
    Harness h(4, slack_config(300));
    auto [epoch, owned] = settle(h, "m");
    const auto rev = h.state().storeRevision;
    auto q = h.request("m", -1, {{}, owned});
    q.leavingMemberEpoch = epoch + 5;
    auto r = h.send(q);
    EXPECT_EQ(r.status, HeartbeatStatus::INVALID_REQUEST);
    EXPECT_EQ(r.errorField, "leavingMemberEpoch");
    EXPECT_EQ(h.state().storeRevision, rev);
  }
}

// The group's assignor, set by an admin, moves shards like any rebalance.
namespace {
// Members that do what they are told at once: each heartbeat reports what it reads and acks what
// it was asked to give up. After every heartbeat no shard is read by two of them.
struct Crowd {
  Harness& h;
  std::map<std::string, std::pair<int32_t, Shards>> members;  // id -> epoch, shards read
  void join(const std::string& id, const std::string& rack = "") {
    auto q = h.request(id, 0);
    if (!rack.empty()) q.rackId = rack;
    auto r = h.send(q);
    members[id] = {r.memberEpoch, assigned(r)};
  }
  void round() {
    for (auto& [id, m] : members) {
      auto& [epoch, owned] = m;
      auto r = h.hb(id, epoch, {owned});
      Shards given = assigned(r), dropped;
      for (auto s : owned)
        if (std::find(given.begin(), given.end(), s) == given.end()) dropped.push_back(s);
      if (!dropped.empty()) r = h.hb(id, r.memberEpoch, {given, dropped});  // drained and acked
      epoch = r.memberEpoch;
      owned = assigned(r);
      std::map<int32_t, std::string> reader;
      for (const auto& [other, om] : members)
        for (auto s : om.second) {
          EXPECT_FALSE(reader.count(s)) << "shard " << s << " read by " << reader[s] << " and " << other;
          reader[s] = other;
        }
    }
  }
  void settle() {
    for (int i = 0; i < 6; ++i) round();
  }
};
}  // namespace

TEST(Assignor, SettingRangeBumpsTheGroupEpochAndMovesShardsRevokeBeforeAssignIntoBlocks) {
  Harness h(6);
  Crowd c{h, {}};
  for (const char* id : {"a", "b", "c"}) c.join(id), c.settle();
  EXPECT_EQ(h.state().assignor, rsc::protocol::AssignorKind::Uniform);
  const auto before = h.state().groupEpoch;
  // Uniform sticky keeps a's and b's first shards: c got one of each, so nobody holds a block.
  const auto contiguous = [](const Shards& s) { return s.empty() || s.back() - s.front() + 1 == static_cast<int32_t>(s.size()); };
  EXPECT_FALSE(contiguous(c.members["c"].second)) << "the test needs a split that range changes";
  rsc::protocol::GroupConfig cfg;
  cfg.assignor = rsc::protocol::AssignorKind::Range;
  h.apply(rsc::group::set_assignor(h.state(), cfg, h.cfg(), h.now()));
  EXPECT_EQ(h.state().assignor, rsc::protocol::AssignorKind::Range);
  EXPECT_EQ(h.state().groupEpoch, before + 1);
  EXPECT_EQ(h.member("a").target, (Shards{0, 1}));
  EXPECT_EQ(h.member("b").target, (Shards{2, 3}));
  EXPECT_EQ(h.member("c").target, (Shards{4, 5}));
  // The moves are revocations first: whoever reads a shard now keeps it until it lets go (the
  // crowd checks after every heartbeat that no shard has two readers).
  for (const char* id : {"a", "b", "c"}) EXPECT_EQ(h.member(id).assigned, c.members[id].second) << id;
  c.settle();
  EXPECT_EQ(c.members["a"].second, (Shards{0, 1}));
  EXPECT_EQ(c.members["b"].second, (Shards{2, 3}));
  EXPECT_EQ(c.members["c"].second, (Shards{4, 5}));
  EXPECT_EQ(rsc::group::group_state(h.state()), GroupStateName::STABLE);
  // The same choice again changes nothing: no epoch, no write.
  const auto o = rsc::group::set_assignor(h.state(), cfg, h.cfg(), h.now());
  EXPECT_FALSE(o.changed());
  EXPECT_EQ(o.state.groupEpoch, before + 1);
}

// A configuration sent before the group exists makes it, the default one too (so a describe of it
// answers, and the group limit is judged as for any new group).
TEST(Assignor, AGroupThatDoesNotExistIsMadeEvenWithTheDefaultConfiguration) {
  Harness h(6);
  rsc::protocol::GroupConfig uniform;
  const auto made = rsc::group::set_assignor(h.state(), uniform, h.cfg(), h.now(), /*exists=*/false);
  EXPECT_TRUE(made.changed());
  EXPECT_TRUE(made.delta.group);
  EXPECT_EQ(made.state.groupEpoch, h.state().groupEpoch) << "nothing to move: no epoch";
  EXPECT_FALSE(rsc::group::set_assignor(h.state(), uniform, h.cfg(), h.now(), /*exists=*/true).changed());
}

TEST(Assignor, RackAwareReadsEachShardInItsRackWhereAMemberThereExistsAndDescribeCountsIt) {
  Harness h(6);
  Crowd c{h, {}};
  c.join("a", "east"), c.settle();
  c.join("b", "west"), c.settle();
  c.join("c", "east"), c.settle();
  EXPECT_EQ(h.member("b").rackId, "west");
  rsc::protocol::GroupConfig cfg;
  cfg.assignor = rsc::protocol::AssignorKind::RackAware;
  cfg.shardRacks = std::vector<std::string>{"west", "west", "east", "east", "east", "east"};
  h.apply(rsc::group::set_assignor(h.state(), cfg, h.cfg(), h.now()));
  c.settle();
  EXPECT_EQ(c.members["b"].second, (Shards{0, 1})) << "the only west member reads both west shards";
  for (const char* id : {"a", "c"}) {
    EXPECT_EQ(c.members[id].second.size(), 2u);
    for (auto s : c.members[id].second) EXPECT_GE(s, 2) << id << " reads a west shard";
  }
  auto loc = rsc::group::rack_locality(h.state());
  EXPECT_EQ(loc.crossRack, 0);
  EXPECT_EQ(loc.inRack.at("b"), 2);
  const auto d = nlohmann::json::parse(rsc::group::describe_json(h.state(), h.now()));
  EXPECT_EQ(d.at("assignor"), "rack-aware");
  EXPECT_EQ(d.at("crossRackShards"), 0);
  EXPECT_EQ(d.at("shardRacks").size(), 6u);
  for (const auto& m : d.at("members")) EXPECT_EQ(m.at("inRackShards"), 2) << m.dump();
  // Racks kept when a later call names none; three west shards for one west member cannot all be
  // read in their rack without breaking the balance: one is read across racks, and counted.
  cfg.shardRacks = std::vector<std::string>{"west", "west", "west", "east", "east", "east"};
  h.apply(rsc::group::set_assignor(h.state(), cfg, h.cfg(), h.now()));
  c.settle();
  loc = rsc::group::rack_locality(h.state());
  EXPECT_EQ(loc.crossRack, 1);
  EXPECT_EQ(loc.inRack.at("b"), 2);
  rsc::protocol::GroupConfig keep;
  keep.assignor = rsc::protocol::AssignorKind::RackAware;
  EXPECT_FALSE(rsc::group::set_assignor(h.state(), keep, h.cfg(), h.now()).changed()) << "absent racks are kept";
}

// Racks set on the stream (PUT .../racks) reach each group with the stream's
// metadata version. A rack-aware group without racks of its own places by them (a new group epoch:
// shards move revoke-before-assign); a group with its own keeps placing by those; a group of another
// assignor only counts by them. An older version with other racks is ignored.
TEST(Assignor, TheStreamsRacksPlaceARackAwareGroupWithoutItsOwnAndOnlyThatOne) {
  Harness h(6);
  Crowd c{h, {}};
  c.join("a", "east"), c.settle();
  c.join("b", "west"), c.settle();
  c.join("c", "east"), c.settle();
  rsc::protocol::GroupConfig cfg;
  cfg.assignor = rsc::protocol::AssignorKind::RackAware;
  h.apply(rsc::group::set_assignor(h.state(), cfg, h.cfg(), h.now()));
  c.settle();
  const std::vector<std::string> racks{"west", "west", "east", "east", "east", "east"};
  const auto epoch = h.state().groupEpoch;
  auto v = h.state().metadataVersion;
  h.apply(rsc::group::apply_metadata(h.state(), 6, ++v, h.cfg(), h.now(), &racks));
  EXPECT_EQ(h.state().groupEpoch, epoch + 1) << "new racks under rack-aware: a rebalance";
  EXPECT_EQ(h.state().streamRacks, racks);
  EXPECT_TRUE(h.state().shardRacks.empty());
  c.settle();  // the crowd checks after every heartbeat that no shard has two readers
  EXPECT_EQ(c.members["b"].second, (Shards{0, 1})) << "the only west member reads both west shards";
  auto d = nlohmann::json::parse(rsc::group::describe_json(h.state(), h.now()));
  EXPECT_EQ(d.at("shardRacksOf"), "stream");
  EXPECT_EQ(d.at("shardRacks"), nlohmann::json(racks));
  EXPECT_EQ(d.at("crossRackShards"), 0);
  // The same racks at a newer version (a shrink started, say): nothing moves.
  h.apply(rsc::group::apply_metadata(h.state(), 6, ++v, h.cfg(), h.now(), &racks));
  EXPECT_EQ(h.state().groupEpoch, epoch + 1);
  // An older version with other racks: ignored.
  const std::vector<std::string> flipped{"east", "east", "east", "east", "west", "west"};
  EXPECT_FALSE(rsc::group::apply_metadata(h.state(), 6, v - 1, h.cfg(), h.now(), &flipped).changed());
  // The group's own racks win: the stream's change is kept but moves nothing.
  cfg.shardRacks = flipped;
  h.apply(rsc::group::set_assignor(h.state(), cfg, h.cfg(), h.now()));
  c.settle();
  EXPECT_EQ(c.members["b"].second, (Shards{4, 5}));
  const auto own = h.state().groupEpoch;
  h.apply(rsc::group::apply_metadata(h.state(), 6, ++v, h.cfg(), h.now(), &flipped));
  EXPECT_EQ(h.state().groupEpoch, own) << "the group places by its own racks";
  EXPECT_EQ(h.state().streamRacks, flipped);
  d = nlohmann::json::parse(rsc::group::describe_json(h.state(), h.now()));
  EXPECT_EQ(d.at("shardRacksOf"), "group");
  // Its own cleared: the stream's place it again (set_assignor bumps the epoch: the racks changed).
  cfg.shardRacks = std::vector<std::string>{};
  h.apply(rsc::group::set_assignor(h.state(), cfg, h.cfg(), h.now()));
  c.settle();
  EXPECT_EQ(c.members["b"].second, (Shards{4, 5})) << "the stream's racks are the flipped ones now";
  EXPECT_EQ(rsc::group::rack_locality(h.state()).crossRack, 0);
  // Under another assignor the stream's racks only count: no epoch for them.
  cfg.assignor = rsc::protocol::AssignorKind::Uniform;
  h.apply(rsc::group::set_assignor(h.state(), cfg, h.cfg(), h.now()));
  c.settle();
  const auto uniform = h.state().groupEpoch;
  h.apply(rsc::group::apply_metadata(h.state(), 6, ++v, h.cfg(), h.now(), &racks));
  EXPECT_EQ(h.state().groupEpoch, uniform);
  d = nlohmann::json::parse(rsc::group::describe_json(h.state(), h.now()));
  EXPECT_EQ(d.at("shardRacks"), nlohmann::json(racks)) << "shown and counted by, though not placed by";
  // b reads 4 and 5 (east shards, by the stream's racks now): both counted across racks.
  EXPECT_EQ(c.members["b"].second, (Shards{4, 5}));
  EXPECT_GE(d.at("crossRackShards").get<int>(), 2);
  EXPECT_EQ(d.at("crossRackShards").get<int>(), rsc::group::cross_rack_shards(h.state()));
}

// New racks arriving while a shrink's drained shards are being taken back (the group retiring them
// already) still move a rack-aware group: before, that version was taken for the retirement seen
// again and the racks waited for the next epoch.
TEST(Assignor, TheStreamsNewRacksMoveARackAwareGroupWhileItRetiresShards) {
  Harness h(6);
  Crowd c{h, {}};
  c.join("a", "east"), c.settle();
  c.join("b", "west"), c.settle();
  rsc::protocol::GroupConfig cfg;
  cfg.assignor = rsc::protocol::AssignorKind::RackAware;
  h.apply(rsc::group::set_assignor(h.state(), cfg, h.cfg(), h.now()));
  c.settle();
  auto v = h.state().metadataVersion;
  h.apply(rsc::group::apply_metadata(h.state(), 4, ++v, h.cfg(), h.now()));  // shards 4 and 5 retire
  ASSERT_EQ(h.state().retireFrom, 4);
  const auto retiring = h.state().groupEpoch;
  const std::vector<std::string> racks{"west", "west", "east", "east"};
  h.apply(rsc::group::apply_metadata(h.state(), 4, ++v, h.cfg(), h.now(), &racks));
  EXPECT_EQ(h.state().groupEpoch, retiring + 1) << "the racks moved the target";
  EXPECT_EQ(h.state().retireFrom, 4);
  EXPECT_EQ(h.member("b").target, (Shards{0, 1})) << "west reads the west shards";
  EXPECT_EQ(h.member("a").target, (Shards{2, 3}));
  h.apply(rsc::group::apply_metadata(h.state(), 4, ++v, h.cfg(), h.now(), &racks));
  EXPECT_EQ(h.state().groupEpoch, retiring + 1) << "the same racks again move nothing";
  EXPECT_EQ(h.state().metadataVersion, v);
  c.settle();
  h.apply(rsc::group::tick(h.state(), h.cfg(), h.now()));
  EXPECT_EQ(h.state().shardCount, 4) << "retired once nobody held them";
  EXPECT_EQ(c.members["b"].second, (Shards{0, 1}));
}

// The zone rule's pure parts: the coordinator's node -> zone map as configured, and each shard's
// rack from the node serving it, refused whole when any node has no zone.
TEST(RackZones, TheNodeZoneMapIsReadStrictlyAndAShardOnANodeWithoutAZoneRefusesTheWhole) {
  auto z = rsc::group::parse_node_zones(" 10.0.0.1:6379=eu-1a, 10.0.0.2:6379 = eu-1b ");
  ASSERT_EQ(z.error, "");
  EXPECT_EQ(z.zones, (rsc::group::NodeZones{{"10.0.0.1:6379", "eu-1a"}, {"10.0.0.2:6379", "eu-1b"}}));
  EXPECT_TRUE(rsc::group::parse_node_zones("").zones.empty());
  EXPECT_EQ(rsc::group::parse_node_zones("").error, "");
  for (const char* bad : {"10.0.0.1=eu", "10.0.0.1:6379", "10.0.0.1:6379=", "10.0.0.1:63x=eu", ":6379=eu",
                          "10.0.0.1:6379=eu 1", "a:1=x,,b:2=y", "a:1=x,a:1=y"}) {
    const auto p = rsc::group::parse_node_zones(bad);
    EXPECT_NE(p.error, "") << bad;
    EXPECT_TRUE(p.zones.empty()) << bad;
  }
  EXPECT_NE(rsc::group::parse_node_zones("a:1=x,a:1=y").error.find("twice"), std::string::npos);
  const rsc::group::NodeZones zones{{"n1:1", "z1"}, {"n2:2", "z2"}};
  auto r = rsc::group::racks_from_zones({"n1:1", "n2:2", "n1:1"}, zones);
  EXPECT_EQ(r.refusal, "");
  EXPECT_EQ(r.racks, (std::vector<std::string>{"z1", "z2", "z1"}));
  r = rsc::group::racks_from_zones({"n1:1", "n3:3", "n4:4", "n3:3"}, zones);
  EXPECT_TRUE(r.racks.empty());
  EXPECT_NE(r.refusal.find("no zone for the Redis nodes n3:3, n4:4"), std::string::npos) << r.refusal;
  r = rsc::group::racks_from_zones({"n1:1"}, {});
  EXPECT_TRUE(r.racks.empty());
  EXPECT_NE(r.refusal.find("--redis-node-zones"), std::string::npos) << r.refusal;
  // Knowing no zone at all, the refusal still names the node it needs.
  EXPECT_NE(r.refusal.find("knows no zone of any Redis node"), std::string::npos) << r.refusal;
  EXPECT_NE(r.refusal.find("n1:1"), std::string::npos) << r.refusal;
  r = rsc::group::racks_from_zones({}, {});  // a stream of no shards needs no zone
  EXPECT_EQ(r.refusal, "");
}

// Two groups of two streams, both co-partitioned (each naming the other), give
// shard i of both to one member whatever order their members came in and whatever each group held
// before: the split is a function of the members alone. The uniform assignor, given the same
// histories, does not (the check below would fail with it).
namespace {
std::vector<std::string> owners_of(const Crowd& c, int32_t shards) {
  std::vector<std::string> out(static_cast<std::size_t>(shards));
  for (const auto& [id, m] : c.members)
    for (auto s : m.second) out[static_cast<std::size_t>(s)] = id;
  return out;
}
void leave(Crowd& c, const std::string& id) {
  auto& [epoch, owned] = c.members.at(id);
  (void)epoch;
  c.h.send(c.h.request(id, -1, {{}, owned}));
  c.members.erase(id);
}
// Left and right, with members joining in other orders and a member the right saw come and go.
std::pair<std::vector<std::string>, std::vector<std::string>> two_histories(rsc::protocol::AssignorKind kind) {
  Harness l(8), r(8);
  rsc::protocol::GroupConfig lc, rc;
  lc.assignor = rc.assignor = kind;
  if (kind == rsc::protocol::AssignorKind::CoPartitioned) {
    lc.coPartitionedWith = rsc::protocol::GroupKey{"right", "g"};
    rc.coPartitionedWith = rsc::protocol::GroupKey{"left", "g"};
  }
  l.apply(rsc::group::set_assignor(l.state(), lc, l.cfg(), l.now()));
  r.apply(rsc::group::set_assignor(r.state(), rc, r.cfg(), r.now()));
  Crowd left{l, {}}, right{r, {}};
  for (const char* id : {"a", "b", "c"}) left.join(id), left.settle();
  for (const char* id : {"x", "c", "b"}) right.join(id), right.settle();
  leave(right, "x"), right.settle();
  right.join("a"), right.settle();
  EXPECT_EQ(left.members.size(), right.members.size());
  return {owners_of(left, 8), owners_of(right, 8)};
}
}  // namespace

TEST(CoPartitionedAssignor, TwoLinkedGroupsWithTheSameMembersGiveShardIOfBothToOneMember) {
  const auto [left, right] = two_histories(rsc::protocol::AssignorKind::CoPartitioned);
  EXPECT_EQ(left, right);
  EXPECT_EQ(left, (std::vector<std::string>{"a", "a", "a", "b", "b", "b", "c", "c"})) << "range's blocks, the first ones longer";
  const auto [uLeft, uRight] = two_histories(rsc::protocol::AssignorKind::Uniform);
  EXPECT_NE(uLeft, uRight) << "the test must tell a history-dependent assignor apart";
}

TEST(CoPartitionedAssignor, StaticMembersAreOrderedByInstanceSoEachProcessesIncarnationsSortAlike) {
  rsc::group::AssignmentSpec spec;
  spec.members = {"p2.aaaa", "p1.zzzz", "p10.0000"};
  spec.shardCount = 6;
  spec.current = {{"p2.aaaa", {0, 1, 2, 3, 4, 5}}};  // ignored: no stickiness
  const std::map<std::string, std::string> order{{"p2.aaaa", "p2"}, {"p1.zzzz", "p1"}, {"p10.0000", "p10"}};
  const auto t = rsc::group::assign_co_partitioned(spec, order);
  EXPECT_EQ(t.at("p1.zzzz"), (Shards{0, 1}));
  EXPECT_EQ(t.at("p10.0000"), (Shards{2, 3}));
  EXPECT_EQ(t.at("p2.aaaa"), (Shards{4, 5}));
  spec.current.clear();
  EXPECT_EQ(rsc::group::assign_co_partitioned(spec, order), t) << "what members hold does not matter";
}

TEST(CoPartitionedAssignor, TheLinkIsStoredShownAndEndedLoudlyByAScaleThatSlippedPastItsGuard) {
  Harness h(6);
  Crowd c{h, {}};
  for (const char* id : {"a", "b"}) c.join(id), c.settle();
  rsc::protocol::GroupConfig cfg;
  cfg.assignor = rsc::protocol::AssignorKind::CoPartitioned;
  cfg.coPartitionedWith = rsc::protocol::GroupKey{"payments", "g"};
  const auto epoch = h.state().groupEpoch;
  h.apply(rsc::group::set_assignor(h.state(), cfg, h.cfg(), h.now()));
  EXPECT_EQ(h.state().groupEpoch, epoch + 1);
  ASSERT_TRUE(h.state().coPartitionedWith.has_value());
  EXPECT_EQ(h.state().coPartitionedWith->str(), "payments/g");
  c.settle();
  EXPECT_EQ(c.members["a"].second, (Shards{0, 1, 2}));
  const auto d = nlohmann::json::parse(rsc::group::describe_json(h.state(), h.now()));
  EXPECT_EQ(d.at("assignor"), "co-partitioned");
  EXPECT_EQ(d.at("coPartitionedWith"), (nlohmann::json{{"prefix", "payments"}, {"group", "g"}}));
  EXPECT_FALSE(rsc::group::set_assignor(h.state(), cfg, h.cfg(), h.now()).changed()) << "the same link again: nothing";
  auto other = cfg;
  other.coPartitionedWith = rsc::protocol::GroupKey{"refunds", "g"};
  EXPECT_TRUE(rsc::group::set_assignor(h.state(), other, h.cfg(), h.now()).changed()) << "another partner is a change";
  // The stream grew under the link (a scale that raced the link's check): the link ends, said in
  // an event, and the group keeps range's blocks.
  auto grown = rsc::group::apply_metadata(h.state(), 8, h.state().metadataVersion + 1, h.cfg(), h.now());
  EXPECT_EQ(grown.state.assignor, rsc::protocol::AssignorKind::Range);
  EXPECT_FALSE(grown.state.coPartitionedWith.has_value());
  bool said = false;
  for (const auto& e : grown.events) said = said || e.detail.find("co-partitioned -> range") != std::string::npos;
  EXPECT_TRUE(said);
  // A new metadata version with the same count (a scale's bookkeeping) keeps the link.
  auto same = rsc::group::apply_metadata(h.state(), 6, h.state().metadataVersion + 1, h.cfg(), h.now());
  EXPECT_EQ(same.state.assignor, rsc::protocol::AssignorKind::CoPartitioned);
}

TEST(CoPartitionedAssignor, ALinkNeedsTwoStreamsOfAsManyShardsNeitherShrinkingAndFreezesTheirCounts) {
  using rsc::group::link_refusal;
  const rsc::protocol::GroupKey self{"orders", "g"}, with{"payments", "g"};
  rsc::protocol::StreamMetadata orders, payments;
  orders.streamPrefix = "orders", payments.streamPrefix = "payments";
  orders.shardCount = payments.shardCount = 8;
  EXPECT_FALSE(link_refusal(self, with, orders, payments));
  EXPECT_NE(link_refusal(self, {"orders", "h"}, orders, orders).value_or("").find("same stream"), std::string::npos);
  EXPECT_NE(link_refusal(self, with, std::nullopt, payments).value_or("").find("orders does not exist"), std::string::npos);
  EXPECT_NE(link_refusal(self, with, orders, std::nullopt).value_or("").find("payments does not exist"), std::string::npos);
  payments.shardCount = 4;
  EXPECT_NE(link_refusal(self, with, orders, payments).value_or("").find("orders has 8 shards and payments has 4"), std::string::npos);
  payments.shardCount = 8;
  payments.migration = rsc::protocol::Migration{};
  payments.migration->state = rsc::protocol::MigrationState::DRAINING;
  payments.migration->fromShardCount = 12;
  EXPECT_NE(link_refusal(self, with, orders, payments).value_or("").find("payments is shrinking (4 shard(s)"), std::string::npos);
  // The scale guard: a stream with a linked group keeps its count; the others scale.
  rsc::group::Loaded plain, linked;
  plain.exists = linked.exists = true;
  plain.state.consumerGroup = "audit";
  linked.state.consumerGroup = "g";
  linked.state.assignor = rsc::protocol::AssignorKind::CoPartitioned;
  linked.state.coPartitionedWith = with;
  EXPECT_FALSE(rsc::group::scale_refusal("orders", {plain}));
  EXPECT_NE(rsc::group::scale_refusal("orders", {plain, linked}).value_or("").find("group g is co-partitioned with payments/g"),
            std::string::npos);
  // A scale that lands between the check and the write: the write is refused, naming both counts.
  rsc::protocol::GroupConfig link;
  link.assignor = rsc::protocol::AssignorKind::CoPartitioned;
  link.coPartitionedWith = with;
  GroupState grown;
  grown.streamPrefix = "orders";
  grown.shardCount = 16;
  EXPECT_NE(rsc::group::link_outdated(grown, link, 8).value_or("").find("went from 8 to 16 shards"), std::string::npos);
  grown.shardCount = 8;
  EXPECT_FALSE(rsc::group::link_outdated(grown, link, 8));
  EXPECT_FALSE(rsc::group::link_outdated(grown, rsc::protocol::GroupConfig{}, 4)) << "not a link: nothing to check";
  // What the other side says: whom it names, and whether that is the caller (the link is whole).
  auto seen = rsc::group::partner_view(linked, with);
  EXPECT_TRUE(seen.linksBack);
  EXPECT_EQ(seen.names, with);
  EXPECT_FALSE(rsc::group::partner_refusal(seen, with, self)) << "it names the caller";
  seen = rsc::group::partner_view(linked, self);
  EXPECT_FALSE(seen.linksBack) << "it names a third group";
  EXPECT_EQ(seen.names, with);
  // Linking with a group linked to a third one is refused before anything changes.
  EXPECT_NE(rsc::group::partner_refusal(seen, self, with).value_or("").find("is co-partitioned with"), std::string::npos);
  seen = rsc::group::partner_view(plain, with);
  EXPECT_FALSE(seen.linksBack);
  EXPECT_FALSE(seen.names.has_value());
  auto unlinked = linked;
  unlinked.state.assignor = rsc::protocol::AssignorKind::Range;  // a link field under another assignor names nobody
  EXPECT_FALSE(rsc::group::partner_view(unlinked, with).names.has_value());
  unlinked = linked;
  unlinked.exists = false;
  EXPECT_FALSE(rsc::group::partner_view(unlinked, with).linksBack) << "a group that does not exist names nobody";
}

// An external assignor follows the targets a controller posts.
TEST(ExternalAssignor, APostedTargetIsCheckedThenCarriedOutRevokeBeforeAssignAndKeptUntilTheNext) {
  using O = rsc::protocol::TargetPosted::Outcome;
  Harness h(6);
  Crowd c{h, {}};
  for (const char* id : {"a", "b"}) c.join(id), c.settle();
  rsc::protocol::PostedTarget t;
  t.groupEpoch = h.state().groupEpoch;
  t.target = {{"a", {0}}, {"b", {1, 2, 3, 4, 5}}};
  auto v = rsc::group::set_target(h.state(), true, t, h.cfg(), h.now());
  EXPECT_EQ(v.answer.outcome, O::NotExternal) << "a uniform group takes no posted target";
  EXPECT_FALSE(v.outcome.changed());
  rsc::protocol::GroupConfig ext;
  ext.assignor = rsc::protocol::AssignorKind::External;
  h.apply(rsc::group::set_assignor(h.state(), ext, h.cfg(), h.now()));
  c.settle();
  EXPECT_EQ(c.members["a"].second.size() + c.members["b"].second.size(), 6u) << "switching keeps what members have";
  v = rsc::group::set_target(h.state(), true, t, h.cfg(), h.now());
  EXPECT_EQ(v.answer.outcome, O::StaleEpoch) << "computed before the switch bumped the epoch";
  EXPECT_EQ(v.answer.groupEpoch, h.state().groupEpoch);
  EXPECT_FALSE(v.outcome.changed());
  t.groupEpoch = h.state().groupEpoch;
  struct Bad {
    std::map<std::string, std::vector<int32_t>> target;
    const char* says;
  };
  for (const auto& bad : {Bad{{{"a", {0}}, {"x", {1}}}, "targetAssignment.x: 'x' is not a live member"},
                          Bad{{{"a", {0, 6}}}, "shard 6 is not one of the group's 6 shards"},
                          Bad{{{"a", {0, 1}}, {"b", {1}}}, "shard 1 is given to 'a' too"}}) {
    auto tb = t;
    tb.target = bad.target;
    auto r = rsc::group::set_target(h.state(), true, tb, h.cfg(), h.now());
    EXPECT_EQ(r.answer.outcome, O::Invalid);
    EXPECT_NE(r.answer.message.find(bad.says), std::string::npos) << r.answer.message;
    EXPECT_FALSE(r.outcome.changed()) << "nothing stored";
  }
  EXPECT_EQ(rsc::group::set_target(h.state(), false, t, h.cfg(), h.now()).answer.outcome, O::NotFound);
  const auto epoch = h.state().groupEpoch;
  v = rsc::group::set_target(h.state(), true, t, h.cfg(), h.now());
  ASSERT_EQ(v.answer.outcome, O::Set) << v.answer.message;
  EXPECT_TRUE(v.answer.unassigned.empty());
  h.apply(v.outcome);
  EXPECT_EQ(h.state().groupEpoch, epoch) << "a posted target moves no epoch (a controller would chase it)";
  c.settle();  // the crowd checks one reader per shard after every heartbeat
  EXPECT_EQ(c.members["a"].second, (Shards{0}));
  EXPECT_EQ(c.members["b"].second, (Shards{1, 2, 3, 4, 5}));
  // A member that joins gets nothing until a new target names it; one that leaves frees its shards
  // to nobody, and describe says why.
  c.join("n"), c.settle();
  EXPECT_TRUE(c.members["n"].second.empty());
  EXPECT_EQ(c.members["b"].second, (Shards{1, 2, 3, 4, 5})) << "kept until the next target";
  h.hb("b", c.members["b"].first, {{}, {1, 2, 3, 4, 5}});  // b drains and leaves
  auto left = h.hb("b", -1);
  c.members.erase("b");
  c.settle();
  const auto d = nlohmann::json::parse(rsc::group::describe_json(h.state(), h.now()));
  EXPECT_EQ(d.at("assignor"), "external");
  EXPECT_EQ(d.at("unassignedShards"), 5) << d.dump();
  EXPECT_EQ(d.at("shards").at(3).at("state"), "UNASSIGNED");
  EXPECT_TRUE(d.at("shards").at(3).contains("unassignedReason"));
  t.groupEpoch = h.state().groupEpoch;
  t.target = {{"a", {0, 1, 2}}, {"n", {3, 4, 5}}};
  v = rsc::group::set_target(h.state(), true, t, h.cfg(), h.now());
  ASSERT_EQ(v.answer.outcome, O::Set) << v.answer.message;
  h.apply(v.outcome);
  c.settle();
  EXPECT_EQ(c.members["n"].second, (Shards{3, 4, 5}));
  (void)left;
}
