// The time rules of group/time_rules.hpp with a fake clock: deadlines, outages, the first-lease
// hold, the store clock, store availability, tick duty and a group's lifecycle. No sleeps.
#include <gtest/gtest.h>

#include <map>
#include <random>
#include <set>

#include "group/freshness.hpp"
#include "group/time_rules.hpp"
#include "group_harness.hpp"

using namespace rsc;
using namespace rsc::testing;
using group::Millis;
using LS = protocol::MemberLifecycleState;

namespace {

group::TimeView at(Millis now) {
  group::TimeView tv;
  tv.now = now;
  return tv;
}

}  // namespace

// --- next_deadline ---------------------------------------------------------------------------

TEST(Deadlines, AGroupWithoutMembersHasNoDeadline) {
  Harness h;
  EXPECT_FALSE(group::next_deadline(h.state(), h.cfg()).has_value());
}

TEST(Deadlines, TheEarliestLeaseEndIsTheDeadlineAndTheTickExpiresRightThen) {
  Harness h;
  auto a = h.hb("a", 0);
  h.advance(300);
  auto b = h.hb("b", 0);
  const auto due = group::next_deadline(h.state(), h.cfg());
  ASSERT_TRUE(due.has_value());
  EXPECT_EQ(*due, h.member("a").lastHeartbeatMs + h.cfg().memberLeaseTtlMs + 1);
  // One millisecond before the deadline nobody expires; at the deadline a does.
  auto before = group::tick(h.state(), h.cfg(), *due - 1);
  EXPECT_EQ(before.state.members.at("a").state, h.member("a").state);
  auto onTime = group::tick(h.state(), h.cfg(), *due);
  EXPECT_EQ(onTime.state.members.at("a").state, LS::EXPIRED);
  EXPECT_NE(onTime.state.members.at("b").state, LS::EXPIRED);
  (void)a;
  (void)b;
}

TEST(Deadlines, AHeartbeatMovesTheDeadlineLaterAndAJoinIntoAnEmptyGroupCreatesOne) {
  Harness h;
  EXPECT_FALSE(group::next_deadline(h.state(), h.cfg()));
  auto a = h.hb("a", 0);
  const auto first = group::next_deadline(h.state(), h.cfg());
  ASSERT_TRUE(first);
  h.advance(200);
  h.hb("a", a.memberEpoch, {assigned(a)});
  EXPECT_EQ(*group::next_deadline(h.state(), h.cfg()), *first + 200);
}

TEST(Deadlines, ARevokeDeadlineEarlierThanTheLeaseIsTheDeadline) {
  auto cfg = Harness::default_config();
  cfg.rebalanceTimeoutMs = 300;  // shorter than the 1000 ms lease
  Harness h(6, cfg);
  auto a = h.hb("a", 0);
  a = h.hb("a", a.memberEpoch, {assigned(a)});
  h.hb("b", 0);
  auto r = h.hb("a", a.memberEpoch, {assigned(a)});
  ASSERT_EQ(r.status, HeartbeatStatus::REVOKE_PENDING);
  EXPECT_EQ(*group::next_deadline(h.state(), h.cfg()), h.member("a").revokeDeadlineMs + 1);
}

TEST(Deadlines, TombstonesAndTheRollbackGuardAreDeadlinesToo) {
  Harness h;
  auto a = h.hb("a", 0);
  h.advance(1001);
  h.tick();
  ASSERT_EQ(h.member("a").state, LS::EXPIRED);
  EXPECT_EQ(*group::next_deadline(h.state(), h.cfg()), h.member("a").tombstoneUntilMs);
  auto rb = group::recover_from_rollback(h.state(), 5, h.cfg(), h.now());
  EXPECT_EQ(*group::next_deadline(rb.state, h.cfg()),
            std::min(rb.state.rollbackGuardUntilMs, h.member("a").tombstoneUntilMs));
  (void)a;
}

TEST(Deadlines, JudgementsHeldBackByTheFirstLeaseFallDueNoEarlierThanItsEnd) {
  Harness h;
  h.hb("a", 0);
  const Millis hold = h.now() + 5000;
  EXPECT_EQ(*group::next_deadline(h.state(), h.cfg(), hold), hold);
}

// --- Outages and the expiry gate -------------------------------------------------------------

TEST(Outages, AnOutageGivesEveryLiveMemberAFullLeaseFromItsEnd) {
  Harness h;
  auto a = h.hb("a", 0);
  const Millis from = h.now() + 100;
  h.advance(3000);
  auto tv = at(h.now());
  tv.outages.push_back({from, h.now()});
  auto o = group::tick(h.state(), h.cfg(), tv);
  EXPECT_EQ(o.state.members.at("a").state, LS::STARTING) << "not expired for time the store could not take heartbeats";
  EXPECT_EQ(o.state.members.at("a").lastHeartbeatMs, h.now());
  EXPECT_EQ(o.state.outageCoveredUntilMs, h.now());
  EXPECT_TRUE(o.delta.group && o.delta.upserted.count("a")) << "the absorption is written";
  (void)a;
}

TEST(Outages, AbsorbingTheSameOutageTwiceMovesRevokeDeadlinesOnce) {
  Harness h;
  auto a = h.hb("a", 0);
  a = h.hb("a", a.memberEpoch, {assigned(a)});
  h.hb("b", 0);
  auto r = h.hb("a", a.memberEpoch, {assigned(a)});
  ASSERT_EQ(r.status, HeartbeatStatus::REVOKE_PENDING);
  const Millis deadline = h.member("a").revokeDeadlineMs;
  const std::vector<group::Outage> outages{{h.now() + 10, h.now() + 410}};
  auto once = group::absorb_outages(h.state(), outages);
  EXPECT_EQ(once.state.members.at("a").revokeDeadlineMs, deadline + 400);
  auto twice = group::absorb_outages(once.state, outages);
  EXPECT_EQ(twice.state.members.at("a").revokeDeadlineMs, deadline + 400) << "another pod saw the same outage";
  EXPECT_TRUE(twice.delta.empty());
  // A longer view of the same outage (another pod was cut off longer) adds only the difference.
  auto longer = group::absorb_outages(once.state, {{h.now() + 10, h.now() + 610}});
  EXPECT_EQ(longer.state.members.at("a").revokeDeadlineMs, deadline + 600);
}

// The tick absorbs outages first and then judges: a member it removes in that judgement must be
// removed in what is written, even though the absorption touched it (the simulation, writing
// only what the Delta names, found the removal lost).
TEST(Outages, AMemberTheTickRemovesStaysRemovedWhenTheSameTickAbsorbedAnOutage) {
  Harness h;  // lease 1000, rebalance timeout 500
  auto a = h.hb("a", 0);
  a = h.hb("a", a.memberEpoch, {assigned(a)});
  auto leave = h.hb("a", -1, {{}, {}, assigned(a)});  // leaving, still draining everything
  ASSERT_EQ(leave.status, HeartbeatStatus::REVOKE_PENDING);
  const Millis t = h.now();
  auto tv = at(t + 1200);
  tv.outages.push_back({t + 100, t + 150});  // moves the revoke deadline to t + 550, the lease to t + 1150
  auto o = group::tick(h.state(), h.cfg(), tv);
  EXPECT_FALSE(o.state.members.count("a")) << "silent past its (moved) lease: removed, nothing held";
  EXPECT_TRUE(o.delta.removed.count("a"));
  EXPECT_FALSE(o.delta.upserted.count("a"));
}

TEST(Outages, NobodyIsJudgedWhileTheStoreIsNotAnswering) {
  Harness h;
  h.hb("a", 0);
  h.advance(5000);
  auto tv = at(h.now());
  tv.outageOngoing = true;
  EXPECT_FALSE(group::expiry_allowed(tv));
  auto o = group::tick(h.state(), h.cfg(), tv);
  EXPECT_EQ(o.state.members.at("a").state, LS::STARTING);
  tv.outageOngoing = false;
  EXPECT_EQ(group::tick(h.state(), h.cfg(), tv).state.members.at("a").state, LS::EXPIRED)
      << "with no outage known, a silent member expires";
}

TEST(Outages, APodJudgesNobodyDuringItsFirstLeaseButStillDropsTombstones) {
  Harness h;
  h.hb("a", 0);
  h.hb("b", 0);
  h.advance(1001);
  h.tick();  // both expired
  h.hb("c", 0);
  h.advance(4000);  // c silent too; a's and b's tombstones are due
  auto tv = at(h.now());
  tv.expiryHeldUntil = group::first_lease_end(h.now() - 10, h.cfg());
  auto o = group::tick(h.state(), h.cfg(), tv);
  EXPECT_EQ(o.state.members.at("c").state, LS::STARTING) << "first lease: nobody expired";
  EXPECT_FALSE(o.state.members.count("a")) << "tombstones are dropped regardless";
  tv.now = tv.expiryHeldUntil;
  EXPECT_EQ(group::tick(h.state(), h.cfg(), tv).state.members.at("c").state, LS::EXPIRED);
}

TEST(Outages, ARequestOlderThanALeaseIsTooOldToActOn) {
  auto cfg = Harness::default_config();
  EXPECT_FALSE(group::request_too_old(1000, 2000, cfg));
  EXPECT_TRUE(group::request_too_old(1000, 2001, cfg));
}

// --- Store availability ----------------------------------------------------------------------

TEST(StoreAvailability, AStallShorterThanTheCommandTimeoutIsAnOutageDatedFromTheLastReply) {
  group::StoreAvailability s(500);
  auto c1 = s.began(1000);
  s.ended(c1, 1002, true);  // last reply at 1002
  auto c2 = s.began(1100);
  EXPECT_FALSE(s.ongoing(1500));
  EXPECT_TRUE(s.ongoing(1700)) << "a call outstanding past the stall limit";
  EXPECT_EQ(s.down_since(1700), 1002);
  s.ended(c2, 2900, true);  // answered after a 1.8 s stall, no error at all
  EXPECT_FALSE(s.ongoing(2900));
  ASSERT_EQ(s.outages().size(), 1u);
  EXPECT_EQ(s.outages()[0].from, 1002);
  EXPECT_EQ(s.outages()[0].to, 2900);
}

TEST(StoreAvailability, AFailureIsAnOutageUntilTheFirstGoodReplyOnAnyConnection) {
  group::StoreAvailability s(500);
  s.ended(s.began(1000), 1001, true);
  auto a = s.began(1200);
  auto b = s.began(1210);
  s.ended(a, 3200, false);  // timed out
  EXPECT_TRUE(s.ongoing(3200));
  s.ended(b, 3210, false);
  auto c = s.began(5000);
  s.ended(c, 16000, true);
  EXPECT_FALSE(s.ongoing(16000));
  ASSERT_EQ(s.outages().size(), 1u);
  EXPECT_EQ(s.outages()[0].from, 1001) << "dated from the last reply, not from the time-out";
  EXPECT_EQ(s.outages()[0].to, 16000);
}

TEST(StoreAvailability, QuickRepliesAreNoOutageAndOverlappingOutagesMerge) {
  group::StoreAvailability s(500);
  for (Millis t = 0; t < 5000; t += 100) s.ended(s.began(t), t + 3, true);
  EXPECT_TRUE(s.outages().empty());
  auto a = s.began(5000);
  auto b = s.began(5001);
  s.ended(a, 6000, true);
  s.ended(b, 6100, true);
  ASSERT_EQ(s.outages().size(), 1u) << "two connections saw one stall";
  EXPECT_EQ(s.outages()[0].to, 6100);
}

// Readiness through a store outage: within the grace the pod stays ready (every
// pod shares the store: emptying the Service helps no member), beyond it not; grace 0 is the old
// rule (not ready at once); a failed probe of the store counts as an outage starting now.
TEST(Readiness, AStoreOutageShorterThanTheGraceKeepsThePodReadyALongerOneDoesNot) {
  group::StoreAvailability s(500);
  EXPECT_FALSE(group::judge_ready(false, s, 0, 1000, 2000).ready) << "never synced";
  s.ended(s.began(1000), 1002, true);
  EXPECT_TRUE(group::judge_ready(true, s, 1100, 1000, 2000).ready);
  const auto stuck = s.began(1100);  // Redis stops answering
  EXPECT_FALSE(s.ongoing(1500));
  const auto at1800 = group::judge_ready(true, s, 1800, 1000, 2000);
  EXPECT_TRUE(at1800.ready) << "an outage of 798 ms, within the 2 s grace";
  EXPECT_NE(at1800.why.find("ready for up to 2000ms"), std::string::npos) << at1800.why;
  EXPECT_FALSE(group::judge_ready(true, s, 1800, 1000, 0).ready) << "grace 0: not ready at once";
  EXPECT_TRUE(group::judge_ready(true, s, 2900, 1000, 2000).ready) << "1.9 s: still within the grace";
  const auto at3100 = group::judge_ready(true, s, 3100, 1000, 2000);
  EXPECT_FALSE(at3100.ready) << "2.1 s: longer than the grace";
  EXPECT_NE(at3100.why.find("the store has not answered for 2098ms, longer than the readiness grace of 2000ms"),
            std::string::npos)
      << at3100.why;
  s.ended(stuck, 3200, true);
  EXPECT_TRUE(group::judge_ready(true, s, 3200, 1000, 2000).ready) << "answered again";
  EXPECT_TRUE(group::judge_ready(true, s, 3300, 1000, 2000, std::string("timeout")).ready)
      << "a failed probe within the grace";
  EXPECT_FALSE(group::judge_ready(true, s, 3300, 1000, 0, std::string("timeout")).ready);
  EXPECT_FALSE(group::judge_ready(true, s, 5300, 1000, 2000).ready) << "no reply for 2.1 s: longer than the grace";
}

// --- The store clock -------------------------------------------------------------------------

TEST(StoreClock, APodsOwnClockSkewDoesNotChangeTheTimeItJudgesBy) {
  const Millis storeBase = 1'700'000'000'000;
  group::StoreClock fast, slow;
  // Two pods read the same store; their local clocks differ by 20 s.
  for (int i = 0; i < 8; ++i) {
    const Millis storeAt = storeBase + i * 500;
    fast.observe(storeAt + 10'000 - 2, storeAt + 10'000 + 2, storeAt);
    slow.observe(storeAt - 10'000 - 2 - (i % 3), storeAt - 10'000 + 2 + (i % 3), storeAt);
  }
  const Millis storeNow = storeBase + 10'000;
  EXPECT_NEAR(fast.now(storeNow + 10'000), storeNow, 2);
  EXPECT_NEAR(slow.now(storeNow - 10'000), storeNow, 2);
}

TEST(StoreClock, TheRoundTripWithTheLeastDelayWinsAndTimeNeverGoesBack) {
  group::StoreClock c;
  c.observe(0, 2, 1001);     // offset 1000, rtt 2
  c.observe(100, 700, 1500); // a slow round trip: offset 1100 if believed
  EXPECT_EQ(c.offset(), 1000);
  const Millis t1 = c.now(800);
  c.observe(900, 901, 1800);  // the store's clock stepped back 100 ms
  EXPECT_GE(c.now(801), t1) << "the judged time never goes back";
}

// --- Tick duty -------------------------------------------------------------------------------

TEST(TickDuty, EveryGroupHasOneLivePodAndThePodsShareTheGroupsEvenly) {
  const std::vector<std::string> pods{"pod-a1f3", "pod-77c0", "pod-0b9e"};
  std::map<std::string, int> count;
  for (int i = 0; i < 30000; ++i) ++count[group::duty_pod("s/g" + std::to_string(i), pods)];
  ASSERT_EQ(count.size(), 3u);
  for (const auto& [p, n] : count) EXPECT_NEAR(n, 10000, 2000) << p;
  EXPECT_EQ(group::duty_pod("s/g", {}), "");
}

TEST(TickDuty, WhenAPodGoesOnlyItsGroupsMoveAndWhenOneComesOnlyTheNewcomerGains) {
  const std::vector<std::string> three{"p1", "p2", "p3"}, two{"p1", "p3"}, four{"p1", "p2", "p3", "p4"};
  int moved = 0;
  for (int i = 0; i < 5000; ++i) {
    const std::string g = "orders/g" + std::to_string(i);
    const auto before = group::duty_pod(g, three);
    const auto after = group::duty_pod(g, two);
    if (before != "p2") {
      EXPECT_EQ(after, before) << g;
    }
    const auto grown = group::duty_pod(g, four);
    if (grown != "p4") {
      EXPECT_EQ(grown, before) << g;
    }
    moved += grown == "p4";
  }
  EXPECT_NEAR(moved, 1250, 250);
}

// --- Lifecycle --------------------------------------------------------------------------------

TEST(Lifecycle, AnIdleGroupRetiresAfterTheConfiguredTimeAndNeverWhenItIsZero) {
  EXPECT_FALSE(group::should_retire(1000, 30999, 30000));
  EXPECT_TRUE(group::should_retire(1000, 31000, 30000));
  EXPECT_FALSE(group::should_retire(0, 1'000'000'000, 0));
}

TEST(Lifecycle, TheGroupLimitRefusesANewGroupAndNamesTheLimit) {
  EXPECT_FALSE(group::refuse_new_group(1, 2, "orders"));
  auto msg = group::refuse_new_group(2, 2, "orders");
  ASSERT_TRUE(msg);
  EXPECT_NE(msg->find("max-groups-per-stream"), std::string::npos);
  EXPECT_NE(msg->find("is 2"), std::string::npos);
  EXPECT_FALSE(group::refuse_new_group(100000, 0, "orders")) << "0 = no limit";
}

TEST(Lifecycle, DeleteIsRefusedWhileMembersLiveUnlessTheyAreFenced) {
  Harness h;
  EXPECT_EQ(group::judge_delete(false, h.state(), false), group::DeleteVerdict::NotFound);
  EXPECT_EQ(group::judge_delete(true, h.state(), false), group::DeleteVerdict::Delete);
  h.hb("a", 0);
  EXPECT_EQ(group::judge_delete(true, h.state(), false), group::DeleteVerdict::HasLiveMembers);
  EXPECT_EQ(group::judge_delete(true, h.state(), true), group::DeleteVerdict::FenceThenDelete);
  h.advance(1001);
  h.tick();
  EXPECT_EQ(group::judge_delete(true, h.state(), false), group::DeleteVerdict::Delete) << "expired members are not live";
}

// --- provisioning -----------------------------------------------------------------------------

// Only a write that hands a shard out at or past what was provisioned waits for the data plane;
// steady heartbeats, expiry and leaves of a group never do, even one written before provisioning
// existed (provisionedShards 0).
TEST(Provisioning, OnlyHandingOutAnUnprovisionedShardWaitsForTheDataPlane) {
  Harness h(4);
  auto a = h.hb("a", 0);
  auto due = group::provisioning_due(h.state(), h.last().events);
  ASSERT_TRUE(due.has_value()) << "the join hands out shards 0..3";
  EXPECT_EQ(*due, 4);
  // As a group of an older build: members read, nothing recorded as provisioned.
  auto steady = h.hb("a", a.memberEpoch, {assigned(a)});
  EXPECT_EQ(steady.status, HeartbeatStatus::OK);
  EXPECT_FALSE(group::provisioning_due(h.state(), h.last().events)) << "a steady heartbeat hands nothing out";
  h.state().provisionedShards = 4;
  // A second member: the handover hands shards to b, within what is provisioned.
  auto b = h.hb("b", 0);
  auto revoke = h.hb("a", a.memberEpoch, {assigned(a)});
  EXPECT_EQ(revoke.status, HeartbeatStatus::REVOKE_PENDING);
  h.hb("a", revoke.memberEpoch, {assigned(revoke)});
  auto got = h.hb("b", b.memberEpoch);
  EXPECT_FALSE(assigned(got).empty());
  EXPECT_FALSE(group::provisioning_due(h.state(), h.last().events)) << "shards below provisionedShards";
  // Growth: the new shards need their consumer group before they are handed out.
  h.apply(group::apply_metadata(h.state(), 6, 2, h.cfg(), h.now()));
  bool sawNew = false;
  for (int i = 0; i < 6 && !sawNew; ++i) {
    for (const char* id : {"a", "b"}) {
      const auto& m = h.member(id);
      h.hb(id, m.epoch, {Shards(m.assigned.begin(), m.assigned.end())});
      if (auto d = group::provisioning_due(h.state(), h.last().events)) {
        EXPECT_EQ(*d, 6);
        sawNew = true;
        break;
      }
    }
  }
  EXPECT_TRUE(sawNew) << "handing out shard 4 or 5 asks for provisioning";
  // Expiry hands nothing out.
  h.advance(h.cfg().memberLeaseTtlMs + 1);
  auto expired = group::tick(h.state(), h.cfg(), h.now());
  EXPECT_FALSE(group::provisioning_due(expired.state, expired.events));
}

// group/freshness.hpp: which store calls confirm a pod's copy for which requests.
TEST(CopyConfirmation, OnlyAStoreCallMadeAfterARequestArrivedConfirmsTheCopyForIt) {
  rsc::group::CopyConfirmation c;
  const auto load = c.next_call();  // a load in flight
  const auto arrived = c.arrival();  // a heartbeat arrives while it is
  c.confirmed_by(load);
  EXPECT_FALSE(c.may_answer(arrived)) << "the load was sent before the request: it may predate what the member saw";
  const auto check = c.next_call();
  EXPECT_FALSE(c.may_answer(arrived)) << "made, not yet answered";
  c.confirmed_by(check);
  EXPECT_TRUE(c.may_answer(arrived));
  EXPECT_FALSE(c.may_answer(c.arrival())) << "a request arriving now needs a newer call";
  c.confirmed_by(load);  // an older confirmation never undoes a newer one
  EXPECT_TRUE(c.may_answer(arrived));
  c.forget();
  EXPECT_FALSE(c.may_answer(arrived)) << "a dropped copy confirms nothing";
}

// A step's changes merged over earlier ones: the moving merge (names spliced over, used on the
// heartbeat path) gives exactly what the copying one gives, and both give the rule written out
// (upserted: (U \ R') ∪ U', removed: (R \ U') ∪ R'), for every mix of upserts and removals of a
// few names on both sides, including names both sides touch.
TEST(DeltaMerge, MovingAndCopyingMergesAgree) {
  const std::vector<std::string> names{"a", "member-with-a-name-longer-than-fifteen", "c"};
  std::mt19937 rng(7);
  for (int round = 0; round < 2000; ++round) {
    group::Delta before, after;
    before.group = rng() % 2;
    after.group = rng() % 2;
    for (const auto& n : names) {
      // 0: untouched, 1: upserted, 2: removed (a well-formed delta never has a name in both)
      if (auto k = rng() % 3; k == 1) before.upserted.insert(n);
      else if (k == 2) before.removed.insert(n);
      if (auto k = rng() % 3; k == 1) after.upserted.insert(n);
      else if (k == 2) after.removed.insert(n);
    }
    auto copied = before;
    copied.merge(after);
    auto moved = before;
    auto source = after;
    moved.merge(std::move(source));
    EXPECT_EQ(moved.group, copied.group);
    EXPECT_EQ(moved.upserted, copied.upserted);
    EXPECT_EQ(moved.removed, copied.removed);
    // the later step wins: what it upserted is upserted, what it removed is removed
    for (const auto& n : after.upserted) EXPECT_TRUE(moved.upserted.count(n) && !moved.removed.count(n));
    for (const auto& n : after.removed) EXPECT_TRUE(moved.removed.count(n) && !moved.upserted.count(n));
    std::set<std::string> up, rm;
    for (const auto& n : before.upserted)
      if (!after.removed.count(n)) up.insert(n);
    for (const auto& n : after.upserted) up.insert(n);
    for (const auto& n : before.removed)
      if (!after.upserted.count(n)) rm.insert(n);
    for (const auto& n : after.removed) rm.insert(n);
    EXPECT_EQ(moved.upserted, up);
    EXPECT_EQ(moved.removed, rm);
    EXPECT_EQ(moved.group, before.group || after.group);
  }
}
