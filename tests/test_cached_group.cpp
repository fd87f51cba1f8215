// The rules of a pod's copy of one group (group/cached_group.hpp), one test per rule, on a fake
// clock: a tiny store kept here plays the store's part (a revision per write), and the pod's
// view is built by hand. The group actor (test_group_actor) runs the same type over CAF.
#include <gtest/gtest.h>

#include <algorithm>

#include "group/cached_group.hpp"
#include "group/notify.hpp"

namespace rsc::group {
namespace {

using protocol::HeartbeatRequest;
using protocol::HeartbeatResponse;
using protocol::HeartbeatStatus;
using Fate = CachedGroup::Batch::Fate;

Config config() {
  Config c;
  c.heartbeatIntervalMs = 100;
  c.memberLeaseTtlMs = 1000;
  c.rebalanceTimeoutMs = 500;
  return c;
}

// A pod alone in the registry: it serves every group in [0, 1e9) of its local clock.
PodView alone(uint64_t term = 1) { return PodView{"p1", term, 0, 1'000'000'000, {{"p1", "", 0}}}; }

class CachedGroupTest : public ::testing::Test {
 protected:
  void SetUp() override {
    stored.streamPrefix = "orders";
    stored.consumerGroup = "billing";
    stream.streamPrefix = "orders";
    stream.shardCount = 4;
    stream.metadataVersion = 1;
  }

  // A load as the runtime makes it: the store's state adopted, then confirmed by that call.
  std::optional<Rollback> load(std::optional<int64_t> groupsInStream = std::nullopt, Rollback rollback = {}) {
    Loaded l{exists, stored, rollback};
    l.state.storeRevision = revision;
    const auto call = c.calls().next_call();
    auto news = c.adopt(std::move(l), stream, now);
    c.confirm(call, view, local);
    c.loaded(groupsInStream);
    return news;
  }

  HeartbeatRequest request(const std::string& id, int32_t epoch, std::vector<int32_t> owned = {}) {
    HeartbeatRequest q;
    q.requestId = id + "-" + std::to_string(++seq);
    q.memberId = id;
    q.memberEpoch = epoch;
    q.metadataVersion = stream.metadataVersion;
    q.runtimeConsumerCapacity = {4, 4};
    for (auto s : owned) q.ownedShards.push_back({s, protocol::ShardAssignmentState::OWNED});
    return q;
  }

  // A heartbeat of a stored member owning what it was given.
  HeartbeatRequest steady(const std::string& id) {
    const auto& m = stored.members.at(id);
    return request(id, m.epoch, {m.assigned.begin(), m.assigned.end()});
  }

  Ticket ticket(const HeartbeatRequest& q) {
    Ticket t;
    t.kind = WorkKind::Heartbeat;
    t.join = q.memberEpoch == 0;
    t.arrivedMs = now;
    t.arrival = c.calls().arrival();
    return t;
  }

  TimeView tv() const {
    TimeView v;
    v.now = now;
    return v;
  }

  // One step over these heartbeats, as the runtime runs it; the beats' fates in `beats`.
  std::optional<Prepared> step(const std::vector<HeartbeatRequest>& qs, std::vector<CachedGroup::Batch::Beat>* beats = nullptr,
                               int64_t limit = 0) {
    c.begin_step(WorkKind::Heartbeat);
    auto b = c.batch(tv(), limit);
    for (const auto& q : qs) {
      auto t = ticket(q);
      auto beat = b.add(t, q);
      if (beats) beats->push_back(beat);
    }
    auto o = b.finish();
    if (!o) return std::nullopt;
    return c.prepare(std::move(*o));
  }

  WritePlan plan(Prepared&& p, std::optional<uint64_t> oldest = std::nullopt) {
    return c.plan_write(std::move(p), oldest, view, local);
  }

  // The plan's write reaches the store (a revision more) and comes back.
  Stored store(const WritePlan& w) {
    if (w.kind != WritePlan::Kind::Write) {
      ADD_FAILURE() << "not a write: " << static_cast<int>(w.kind);
      return Stored::Lapsed;
    }
    stored = *w.next;
    exists = true;
    ++revision;
    const auto call = c.calls().next_call();
    return c.written(revision, call, view, local);
  }

  // A member joined and stored; returns its answer.
  HeartbeatResponse joined(const std::string& id) {
    if (!c.held()) load();
    std::vector<CachedGroup::Batch::Beat> beats;
    auto p = step({request(id, 0)}, &beats);
    EXPECT_TRUE(p.has_value());
    auto w = plan(std::move(*p));
    EXPECT_EQ(store(w), Stored::Written);
    return beats.at(0).response;
  }

  Config cfg = config();
  CachedGroup c{"orders/billing", &cfg};
  GroupState stored;
  bool exists = false;
  int64_t revision = 0;
  protocol::StreamMetadata stream;
  PodView view = alone();
  Millis now = 10'000;  // the coordinator's clock
  Millis local = 500;   // the pod's own
  int seq = 0;
};

// --- what the front work needs -------------------------------------------------------------------

TEST_F(CachedGroupTest, NothingIsDecidedBeforeThePodHasTheStoreTime) {
  load();
  auto t = ticket(request("a", 0));
  EXPECT_EQ(c.next(t, now, false), Next::NotSynced);
  EXPECT_EQ(c.next(t, now, true), Next::Step);
}

TEST_F(CachedGroupTest, AGroupNotHeldIsReadBeforeAnyStepThenDecidedOnTheCopy) {
  auto t = ticket(request("a", 0));
  EXPECT_EQ(c.next(t, now, true), Next::Load);
  load();
  EXPECT_EQ(c.next(t, now, true), Next::Step);
}

// A join to a group whose stream has no shards (scaled to 0) reads the group again once (the
// stream may have been created meanwhile), then is decided: never a loop of reads.
TEST_F(CachedGroupTest, AJoinToAStreamOfNoShardsReadsItAgainOnceThenIsDecided) {
  stream.shardCount = 0;
  stream.metadataVersion = 3;
  load();
  auto t = ticket(request("a", 0));
  EXPECT_EQ(c.next(t, now, true), Next::Load);
  load();
  EXPECT_EQ(c.next(t, now, true), Next::Step);
  EXPECT_EQ(c.next(t, now, true), Next::Step);
}

TEST_F(CachedGroupTest, AHeartbeatThatWaitedLongerThanALeaseIsRefusedNotDecided) {
  load();
  auto t = ticket(request("a", 0));
  EXPECT_EQ(c.next(t, now + cfg.memberLeaseTtlMs - 1, true), Next::Step);
  EXPECT_EQ(c.next(t, now + cfg.memberLeaseTtlMs + 1, true), Next::TooOld);
}

TEST_F(CachedGroupTest, ADeleteIsJudgedOnlyOnAStateJustReadFromTheStore) {
  load();
  Ticket del;
  del.kind = WorkKind::Delete;
  EXPECT_EQ(c.next(del, now, true), Next::Load);
  EXPECT_TRUE(del.verified);
  EXPECT_FALSE(c.held());  // the copy it would have been judged on is gone
  load();
  EXPECT_EQ(c.next(del, now, true), Next::Step);
  Ticket reset;  // an offsets reset is judged the same way (no live member, on a fresh read)
  reset.kind = WorkKind::ResetOffsets;
  EXPECT_EQ(c.next(reset, now, true), Next::Load);
  EXPECT_TRUE(reset.verified);
}

TEST_F(CachedGroupTest, AJoinIntoAGroupCopiedBeforeItsStreamExistedReadsItAgain) {
  stream.shardCount = 0;
  stream.metadataVersion = 0;
  load();
  ASSERT_EQ(c.state().shardCount, 0);
  auto leave = ticket(request("a", -1));
  EXPECT_EQ(c.next(leave, now, true), Next::Step);
  auto join = ticket(request("a", 0));
  EXPECT_EQ(c.next(join, now, true), Next::Load);
}

TEST_F(CachedGroupTest, DeadlineWorkTakesTheLeaseButATickThatLostARaceIsRedoneOnTheFreshCopy) {
  load();
  Ticket tick;
  tick.kind = WorkKind::Tick;
  tick.deadlineWork = true;
  EXPECT_EQ(c.next(tick, now, true), Next::Lease);
  tick.attempts = 1;
  EXPECT_EQ(c.next(tick, now, true), Next::Step);
  c.forget();
  EXPECT_EQ(c.next(tick, now, true), Next::Lease);  // nothing to redo it on: the lease reads it
  Ticket describe;
  describe.kind = WorkKind::Describe;
  EXPECT_EQ(c.next(describe, now, true), Next::Describe);
}

// --- adopting what the store holds ---------------------------------------------------------------

TEST_F(CachedGroupTest, AdoptingRecoversFromARollbackFirstThenAppliesAGrownStream) {
  joined("a");
  stream.shardCount = 8;
  stream.metadataVersion = 2;
  const auto news = load(std::nullopt, Rollback{true, revision + 5, 40});
  ASSERT_TRUE(news.has_value());
  EXPECT_EQ(news->seenRevision, revision + 5);
  EXPECT_GT(c.state().groupEpoch, 40);  // past every epoch this pod saw
  EXPECT_EQ(c.state().shardCount, 8);
  auto p = step({});
  ASSERT_TRUE(p.has_value());
  std::vector<Event::Kind> kinds;
  for (const auto& e : p->events) kinds.push_back(e.kind);
  const auto rollback = std::find(kinds.begin(), kinds.end(), Event::Kind::ROLLBACK_GUARD);
  const auto metadata = std::find(kinds.begin(), kinds.end(), Event::Kind::METADATA_CHANGED);
  ASSERT_NE(rollback, kinds.end());
  ASSERT_NE(metadata, kinds.end());
  EXPECT_LT(rollback - kinds.begin(), metadata - kinds.begin());
}

TEST_F(CachedGroupTest, ARollbacksEpochIsReappliedToEveryAdoptedStateUntilAWriteCarriesIt) {
  joined("a");
  const int32_t storedEpoch = stored.groupEpoch;
  load(std::nullopt, Rollback{true, revision + 5, 40});
  EXPECT_GT(c.state().groupEpoch, 40);
  // Another pod's state (from before the rollback was carried) comes with a lost race: still guarded.
  auto call = c.calls().next_call();
  auto other = stored;
  c.lost_race(std::move(other), {}, call, view, local, now);
  EXPECT_GT(c.state().groupEpoch, 40);
  // A write carries it; a state adopted after that is taken as it is.
  auto p = step({});
  ASSERT_TRUE(p.has_value());
  ASSERT_EQ(store(plan(std::move(*p))), Stored::Written);
  stored.groupEpoch = storedEpoch;  // as if the store went back once more, undetected
  load();
  EXPECT_EQ(c.state().groupEpoch, storedEpoch);
}

// --- a step and its write ------------------------------------------------------------------------

TEST_F(CachedGroupTest, WhatAdoptingChangedIsWrittenWithTheStepAndComesFirst) {
  joined("a");
  stream.shardCount = 8;
  stream.metadataVersion = 2;
  load();  // the grown stream is applied at once, written with the next step
  c.begin_step(WorkKind::Remove);
  auto o = fence_member(c.take(), "a", "removed by admin", cfg, now);
  auto p = c.prepare(std::move(o));
  EXPECT_TRUE(p.outcome.delta.group);                  // the adopted metadata
  EXPECT_EQ(p.outcome.delta.upserted.count("a"), 1u);  // the step's fence
  ASSERT_FALSE(p.events.empty());
  EXPECT_EQ(p.events.front().kind, Event::Kind::METADATA_CHANGED);
  EXPECT_TRUE(std::any_of(p.events.begin() + 1, p.events.end(), [](const Event& e) { return e.kind == Event::Kind::FENCED; }));
}

TEST_F(CachedGroupTest, TheShardStreamsAreProvisionedBeforeAStateThatHandsOutAShardAndTheGroupRecordsIt) {
  load();
  c.begin_step(WorkKind::Heartbeat);
  auto b = c.batch(tv(), 0);
  auto q = request("a", 0);
  auto t = ticket(q);
  const auto answer = b.add(t, q).response;
  auto o = b.finish();
  ASSERT_TRUE(o.has_value());
  auto p = c.prepare(std::move(*o));
  ASSERT_EQ(p.provision, std::optional<int32_t>(4));
  EXPECT_EQ(p.outcome.state.provisionedShards, 0);
  auto w = plan(std::move(p));
  ASSERT_EQ(w.kind, WritePlan::Kind::Write);
  EXPECT_EQ(w.provision, 4) << "the write asks for the shard streams first";
  EXPECT_EQ(w.next->provisionedShards, 4) << "and records them, written only if they were made";
  // Once recorded, a later step provisions nothing.
  ASSERT_EQ(store(w), Stored::Written);
  ASSERT_TRUE(answer.assignment.has_value());
  auto again = step({request("a", answer.memberEpoch, answer.assignment->assignedShards)});
  ASSERT_TRUE(again.has_value());
  EXPECT_FALSE(again->provision.has_value());
}

TEST_F(CachedGroupTest, TheFirstWriteIsWholeAndLaterOnesWriteOnlyWhatChanged) {
  load();
  auto p = step({request("a", 0)});
  ASSERT_TRUE(p.has_value());
  auto first = plan(std::move(*p));
  EXPECT_EQ(first.delta, nullptr);
  ASSERT_EQ(store(first), Stored::Written);
  auto q = step({request("b", 0)});
  ASSERT_TRUE(q.has_value());
  auto second = plan(std::move(*q));
  ASSERT_NE(second.delta, nullptr);
  EXPECT_EQ(second.delta->upserted.count("b"), 1u);
}

TEST_F(CachedGroupTest, TheDeadlineIndexIsLoweredOnlyByAWriteThatBringsTheNextDeadlineEarlier) {
  load();
  auto p = step({request("a", 0)});
  auto w = plan(std::move(*p));
  EXPECT_TRUE(w.lowerDeadlineTo.has_value());  // a new group: the index has no entry yet
  ASSERT_EQ(store(w), Stored::Written);
  // Half a lease on, a's renewal is written (its stored lease no longer covers one more lease):
  // its deadline moves later, so the index keeps its earlier entry.
  now += cfg.memberLeaseTtlMs / 2;
  auto later = plan(std::move(*step({steady("a")})));
  ASSERT_EQ(later.kind, WritePlan::Kind::Write);
  EXPECT_GT(*next_deadline(*later.next, cfg), *next_deadline(stored, cfg));
  EXPECT_FALSE(later.lowerDeadlineTo.has_value());
  ASSERT_EQ(store(later), Stored::Written);
  // b joins, and a hears it must give shards up: the revoke deadline is earlier than any lease end.
  now += 10;
  ASSERT_EQ(store(plan(std::move(*step({request("b", 0)})))), Stored::Written);
  now += 10;
  auto revoke = plan(std::move(*step({steady("a")})));
  ASSERT_EQ(revoke.kind, WritePlan::Kind::Write);
  ASSERT_FALSE(revoke.next->members.at("a").revoking.empty());
  ASSERT_TRUE(revoke.lowerDeadlineTo.has_value());
  EXPECT_EQ(revoke.lowerDeadlineTo, next_deadline(*revoke.next, cfg));
  EXPECT_LT(*revoke.lowerDeadlineTo, *next_deadline(stored, cfg));
}

TEST_F(CachedGroupTest, AChangedShapeWakesTheOtherMembersASteadyHeartbeatWakesNobody) {
  joined("a");
  for (int i = 0; i < 2; ++i) {  // the second renewal is steady: a owns what it was given
    now += cfg.memberLeaseTtlMs / 2;
    auto renew = plan(std::move(*step({steady("a")})));
    ASSERT_EQ(renew.kind, WritePlan::Kind::Write);
    if (i == 1) {
      EXPECT_TRUE(renew.wake.empty());
    }
    ASSERT_EQ(store(renew), Stored::Written);
  }
  auto join = c.plan_write(std::move(*step({request("b", 0)})), std::nullopt, view, local,
                           [] { return std::set<std::string>{"b"}; });
  EXPECT_EQ(join.wake, std::vector<std::string>{"a"});  // b is answered anyway
}

// A written copy keeps the signature its write computed; a copy adopted from the store (another
// pod's state) has its own computed again, or a change back to the written shape would wake nobody.
TEST_F(CachedGroupTest, AnAdoptedCopyIsNotJudgedByTheShapeOfTheCopyItReplaced) {
  joined("a");
  const auto alone = stored;  // a holds every shard
  auto join = c.plan_write(std::move(*step({request("b", 0)})), std::nullopt, view, local,
                           [] { return std::set<std::string>{"b"}; });
  ASSERT_EQ(join.wake, std::vector<std::string>{"a"});
  const auto written = rsc::group::shape_signature(*join.next);
  ASSERT_EQ(store(join), Stored::Written);  // the copy: a to give shards up, b waiting for them
  // Another pod's write took b out again (the race this pod then loses): a holds every shard.
  auto theirs = alone;
  theirs.storeRevision = revision + 1;
  revision += 1;
  c.lost_race(std::move(theirs), {}, c.calls().next_call(), view, local, now);
  ASSERT_EQ(c.state().members.count("b"), 0u);
  // b joins again: the same shape as this pod's last write, but a, holding everything, must hear it.
  auto again = c.plan_write(std::move(*step({request("b", 0)})), std::nullopt, view, local,
                            [] { return std::set<std::string>{"b"}; });
  ASSERT_EQ(again.kind, WritePlan::Kind::Write);
  ASSERT_EQ(rsc::group::shape_signature(*again.next), written);
  EXPECT_EQ(again.wake, std::vector<std::string>{"a"});
}

// A write's shape and member totals are kept beat by beat from the copy's (each beat's delta names
// whom it changed) and equal those counted over the whole group, whatever the steps do: steady
// heartbeats with moving progress and capacity, joins, leaves, revocations acked, members expiring
// in the tick, several beats in one batch. A batch that only changed the members heartbeating goes
// over no member but them; the copy's totals after a write are the write's.
TEST_F(CachedGroupTest, AWritesShapeAndTotalsAreKeptBeatByBeatAndEqualThoseOfTheWholeGroup) {
  load();
  joined("m0");
  joined("m1");
  uint32_t rnd = 12345;
  auto next = [&rnd](uint32_t n) {
    rnd = rnd * 1103515245u + 12345u;
    return (rnd >> 8) % n;
  };
  int newcomers = 2, writes = 0, counted = 0, aloneWrites = 0, withLag = 0;
  for (int round = 0; round < 400; ++round) {
    now += static_cast<Millis>(next(static_cast<uint32_t>(cfg.heartbeatIntervalMs)));
    if (next(40) == 0) now += cfg.memberLeaseTtlMs + 1;  // whoever does not heartbeat now expires in the tick
    std::vector<std::string> live;
    for (const auto& [id, m] : stored.members)
      if (m.live() && !m.leaving()) live.push_back(id);
    std::vector<HeartbeatRequest> qs;
    bool steadyOnly = true;
    const auto beats = 1 + next(3);
    for (uint32_t b = 0; b < beats; ++b) {
      const auto pick = next(10);
      if (pick == 0 || live.empty()) {
        qs.push_back(request("m" + std::to_string(newcomers++), 0));
        steadyOnly = false;
      } else {
        const auto id = live[next(static_cast<uint32_t>(live.size()))];
        if (std::any_of(qs.begin(), qs.end(), [&](const HeartbeatRequest& q) { return q.memberId == id; })) continue;
        if (pick == 1 && live.size() > 1) {
          auto q = steady(id);
          q.memberEpoch = -1;  // leaves
          qs.push_back(q);
          steadyOnly = false;
        } else {
          auto q = steady(id);  // owns what it was given: acks what it was asked to give up
          for (const auto& o : q.ownedShards)  // and reports where it reads, with a lag that moves
            q.shardProgress.push_back({o.shardIndex, "1-0", static_cast<int64_t>(next(5)),
                                       next(4) == 0 ? std::nullopt : std::optional<int64_t>(next(1000))});
          q.runtimeConsumerCapacity = {4, static_cast<int32_t>(next(5))};
          qs.push_back(q);
        }
      }
    }
    const auto walksBefore = c.walks();
    bool tickChangedNobody = false;
    if (c.held()) {
      const auto t = tick(c.state(), cfg, tv());
      tickChangedNobody = t.delta.upserted.empty() && t.delta.removed.empty();
    }
    auto p = step(qs);
    if (!p) continue;
    // One steady beat that changed its member alone, after a tick that changed nobody.
    const auto& d = p->outcome.delta;
    const bool oneBeatAlone = qs.size() == 1 && steadyOnly && tickChangedNobody && d.removed.empty() &&
                                    std::all_of(d.upserted.begin(), d.upserted.end(), [&](const std::string& n) { return n == qs[0].memberId; });
    auto w = plan(std::move(*p));
    if (w.kind == WritePlan::Kind::FromCopy) continue;
    ASSERT_EQ(w.kind, WritePlan::Kind::Write) << "round " << round;
    ++writes;
    ASSERT_NE(c.writing_counts(), nullptr);
    const auto whole = count_group(*w.next);
    ASSERT_TRUE(c.writing_counts()->shape == whole.shape) << "round " << round;
    ASSERT_TRUE(c.writing_counts()->totals == whole.totals) << "round " << round;
    ASSERT_TRUE(whole.shape == shape_of(*w.next));
    if (whole.totals.lag > 0 && whole.totals.capAvail > 0) ++withLag;
    if (c.walks() == walksBefore) ++counted;
    if (oneBeatAlone) {
      ++aloneWrites;
      EXPECT_EQ(c.walks(), walksBefore) << "round " << round;
    }
    ASSERT_EQ(store(w), Stored::Written);
    ASSERT_NE(c.totals(), nullptr);
    ASSERT_TRUE(*c.totals() == whole.totals);
  }
  EXPECT_GT(writes, 300);
  EXPECT_GT(aloneWrites, 50);
  EXPECT_LT(counted, writes);  // joins, leaves and expiries were counted over the whole group
  EXPECT_GE(counted, aloneWrites);
  EXPECT_GT(withLag, 100);  // the totals moved with what the members reported
}

// --- the heartbeat batch -------------------------------------------------------------------------

TEST_F(CachedGroupTest, AJoinOverTheGroupsPerStreamLimitIsRefusedAndTheCopyDropped) {
  load(3);
  auto q = request("a", 0);
  auto t = ticket(q);
  EXPECT_FALSE(c.refuse_over_limit(t, q, 4, "orders", {}).has_value());
  auto r = c.refuse_over_limit(t, q, 3, "orders", {100, 500, 1000});
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->status, HeartbeatStatus::INVALID_REQUEST);
  EXPECT_EQ(r->errorField, std::optional<std::string>("consumerGroup"));
  EXPECT_EQ(r->memberLeaseTtlMs, 1000);
  EXPECT_FALSE(c.held());  // counted again at the next join
  // A group that exists is never refused by the limit.
  load(3);
  joined("a");
  auto q2 = request("b", 0);
  EXPECT_FALSE(c.refuse_over_limit(ticket(q2), q2, 3, "orders", {}).has_value());
}

TEST_F(CachedGroupTest, TheTickRunsBeforeTheHeartbeatsOfABatch) {
  load();
  joined("a");
  now += cfg.memberLeaseTtlMs / 2;
  joined("b");
  now += cfg.memberLeaseTtlMs / 2 + 10;  // a is silent past its lease; b heartbeats
  std::vector<CachedGroup::Batch::Beat> beats;
  auto p = step({steady("b")}, &beats);
  ASSERT_TRUE(p.has_value());
  ASSERT_FALSE(p->events.empty());
  EXPECT_EQ(p->events.front().kind, Event::Kind::EXPIRED);
  EXPECT_EQ(p->events.front().member, "a");
  EXPECT_FALSE(p->outcome.state.members.at("a").live());
}

TEST_F(CachedGroupTest, ABatchTakesAtMost64HeartbeatsAndNothingElse) {
  load();
  joined("a");
  c.begin_step(WorkKind::Heartbeat);
  auto b = c.batch(tv(), 0);
  Ticket tick;
  tick.kind = WorkKind::Tick;
  EXPECT_FALSE(b.takes(&tick));
  EXPECT_FALSE(b.takes(nullptr));
  for (std::size_t i = 0; i < kMaxBatch; ++i) {
    auto q = request("m" + std::to_string(i), 0);
    auto t = ticket(q);
    ASSERT_TRUE(b.takes(&t)) << i;
    ASSERT_EQ(b.add(t, q).fate, Fate::Batched);
  }
  auto q = request("one-more", 0);
  auto t = ticket(q);
  EXPECT_FALSE(b.takes(&t));
  EXPECT_EQ(b.size(), kMaxBatch);
}

TEST_F(CachedGroupTest, UnderALimitAJoinIntoAGroupThatDoesNotExistYetGoesInABatchOfItsOwn) {
  load(0);
  c.begin_step(WorkKind::Heartbeat);
  auto b = c.batch(tv(), 10);
  auto q = request("a", 0);
  auto t = ticket(q);
  b.add(t, q);
  auto q2 = request("b", 0);
  auto t2 = ticket(q2);
  EXPECT_FALSE(b.takes(&t2));  // the limit is checked for it first
  auto beat = request("b", 5);
  auto t3 = ticket(beat);
  EXPECT_TRUE(b.takes(&t3));  // not a join
  // Once the group exists, joins batch like any heartbeat.
  load(0);
  joined("a");
  c.begin_step(WorkKind::Heartbeat);
  auto b2 = c.batch(tv(), 10);
  auto q4 = request("c", 0);
  auto t4 = ticket(q4);
  b2.add(t4, q4);
  EXPECT_TRUE(b2.takes(&t2));
}

TEST_F(CachedGroupTest, ARequestThatWaitedTooLongIsLeftOutOfTheBatch) {
  load();
  joined("a");
  auto q = request("b", 0);
  auto stale = ticket(q);
  now += cfg.memberLeaseTtlMs + 1;
  auto fresh = ticket(request("c", 0));
  c.begin_step(WorkKind::Heartbeat);
  auto b = c.batch(tv(), 0);
  auto first = request("d", 0);
  auto t = ticket(first);
  b.add(t, first);
  EXPECT_FALSE(b.takes(&stale));
  EXPECT_TRUE(b.takes(&fresh));
}

TEST_F(CachedGroupTest, AnErrorAnswerFromACopyNotJustReadIsDecidedAgainOnAFreshRead) {
  load();
  joined("a");  // the copy is now the one written, not one just read
  std::vector<CachedGroup::Batch::Beat> beats;
  auto unknown = request("ghost", 7);
  c.begin_step(WorkKind::Heartbeat);
  auto b = c.batch(tv(), 0);
  auto t = ticket(unknown);
  auto beat = b.add(t, unknown);
  EXPECT_EQ(beat.fate, Fate::Recheck);
  EXPECT_TRUE(t.verified);
  EXPECT_FALSE(b.takes(nullptr));
  EXPECT_FALSE(b.finish().has_value());  // nothing computed worth keeping
  EXPECT_FALSE(c.held());
  // On the state just read it is answered.
  load();
  c.begin_step(WorkKind::Heartbeat);
  auto b2 = c.batch(tv(), 0);
  Ticket again = ticket(unknown);
  auto answer = b2.add(again, unknown);
  EXPECT_EQ(answer.fate, Fate::Answered);
  EXPECT_EQ(answer.response.status, HeartbeatStatus::UNKNOWN_MEMBER_ID);
}

TEST_F(CachedGroupTest, ARecheckAfterBatchedHeartbeatsEndsTheBatchWhichIsStillWritten) {
  load();
  joined("a");
  c.begin_step(WorkKind::Heartbeat);
  auto b = c.batch(tv(), 0);
  auto join = request("b", 0);
  auto tj = ticket(join);
  EXPECT_EQ(b.add(tj, join).fate, Fate::Batched);
  auto unknown = request("ghost", 7);
  auto tu = ticket(unknown);
  EXPECT_EQ(b.add(tu, unknown).fate, Fate::Recheck);
  auto next = ticket(request("c", 0));
  EXPECT_FALSE(b.takes(&next));
  auto o = b.finish();
  ASSERT_TRUE(o.has_value());
  EXPECT_EQ(o->state.members.count("b"), 1u);
}

TEST_F(CachedGroupTest, OnlyErrorAnswersStoreNothingForAGroupThatDoesNotExistAndTheTickAloneForOneThatDoes) {
  load();
  std::vector<CachedGroup::Batch::Beat> beats;
  auto q = request("ghost", 7);
  EXPECT_FALSE(step({q}, &beats).has_value());  // just read: answered, and nothing to store
  EXPECT_EQ(beats.at(0).fate, Fate::Answered);
  EXPECT_FALSE(c.held());
  load();
  joined("a");
  load();
  beats.clear();
  auto p = step({q}, &beats);
  EXPECT_EQ(beats.at(0).fate, Fate::Answered);
  ASSERT_TRUE(p.has_value());  // the tick's findings, written on their own
}

// A target posted for a group that does not exist (or a member removed from
// one) answered 404 but wrote the group, because loading it had found the stream's metadata.
TEST_F(CachedGroupTest, AnAdminCallAboutMembersOfAGroupThatDoesNotExistWritesNothingAConfigurationMakesIt) {
  load();
  c.begin_step(WorkKind::PostTarget);
  auto loaded = c.prepare(Outcome{c.take()});
  EXPECT_FALSE(loaded.outcome.delta.empty()) << "what loading found would be written with the step";
  EXPECT_TRUE(c.writes_nothing(WorkKind::PostTarget));
  EXPECT_TRUE(c.writes_nothing(WorkKind::Remove));
  EXPECT_FALSE(c.writes_nothing(WorkKind::Configure)) << "a configuration makes the group";
  EXPECT_FALSE(c.writes_nothing(WorkKind::Heartbeat)) << "a join makes the group";
  load();
  joined("a");
  EXPECT_FALSE(c.writes_nothing(WorkKind::PostTarget)) << "an existing group's refusals are judged as any step";
  EXPECT_FALSE(c.writes_nothing(WorkKind::Remove));
}

// --- ownership and the copy's answers ------------------------------------------------------------

TEST_F(CachedGroupTest, TheOwnerAnswersFromACopyConfirmedInItsTermWithoutAStoreCall) {
  load();
  joined("a");
  const auto arrival = c.calls().arrival();  // after the write: a call arriving now
  EXPECT_TRUE(c.copy_answers(arrival, view, local));
  auto p = step({});
  ASSERT_TRUE(p.has_value());
  auto w = plan(std::move(*p), arrival);
  EXPECT_EQ(w.kind, WritePlan::Kind::FromCopy);
  EXPECT_TRUE(c.held());
}

TEST_F(CachedGroupTest, ACopyFromAnEarlierTermIsCheckedWithTheStoreOnce) {
  load();
  joined("a");
  view = alone(2);  // the registry changed: a new term
  const auto arrival = c.calls().arrival();
  EXPECT_FALSE(c.copy_answers(arrival, view, local));
  auto p = step({});
  auto w = plan(std::move(*p), arrival);
  ASSERT_EQ(w.kind, WritePlan::Kind::Check);
  EXPECT_FALSE(w.lowerDeadlineTo.has_value());
  EXPECT_TRUE(w.wake.empty());
  EXPECT_EQ(c.written(revision, c.calls().next_call(), view, local), Stored::Current);
  EXPECT_TRUE(c.copy_answers(c.calls().arrival(), view, local));  // confirmed in term 2
}

TEST_F(CachedGroupTest, APodThatIsNotTheOwnerChecksBeforeAnsweringFromItsCopy) {
  load();
  joined("a");
  // Another pod is established; whichever of the two owns the group, this pod is made the other.
  PodView two{"p1", 2, 0, 1'000'000'000, {{"p1", "", 0}, {"p2", "10.0.0.2:8080", 0}}};
  if (two.owns("orders/billing", local)) two.self = "p2";
  view = two;
  ASSERT_FALSE(view.owns("orders/billing", local));
  const auto arrival = c.calls().arrival();
  EXPECT_FALSE(c.copy_answers(arrival, view, local));
  c.confirm(c.calls().next_call(), view, local);
  EXPECT_TRUE(c.copy_answers(arrival, view, local));                 // a call made after it arrived confirmed it
  EXPECT_FALSE(c.copy_answers(c.calls().arrival(), view, local));   // but not for a call arriving later
}

TEST_F(CachedGroupTest, APodAboutToOwnTheGroupHoldsTheWriteUntilItDoes) {
  load();
  // Established in 300 ms, alone: it will own every group then.
  view = PodView{"p1", 1, local + 300, local + 10'000, {{"p1", "", local + 300}}};
  auto w = plan(std::move(*step({request("a", 0)})));
  ASSERT_EQ(w.kind, WritePlan::Kind::Hold);
  EXPECT_EQ(w.holdMs, 301);
  EXPECT_FALSE(c.held());  // decided again on the store's state then
}

TEST_F(CachedGroupTest, APodThatDoesNotServeTheGroupRefusesTheWriteAndSaysWhichPodDoes) {
  load();
  PodView two{"p1", 2, 0, 1'000'000'000, {{"p1", "", 0}, {"p2", "10.0.0.2:8080", 0}}};
  if (two.owns("orders/billing", local)) two.self = "p2";
  view = two;
  const std::string owner = two.self == "p1" ? "p2" : "p1";
  auto w = plan(std::move(*step({request("a", 0)})));
  ASSERT_EQ(w.kind, WritePlan::Kind::Refuse);
  EXPECT_NE(w.why.find("served by pod " + owner), std::string::npos) << w.why;
  EXPECT_FALSE(c.held());
  EXPECT_EQ(c.why_not_writing(view, local), std::optional<std::string>(w.why));
  EXPECT_FALSE(c.why_not_writing(alone(), local).has_value());
}

TEST_F(CachedGroupTest, AWriteStoredAfterThisPodsWindowClosedIsNotAnswered) {
  load();
  auto w = plan(std::move(*step({request("a", 0)})));
  ASSERT_EQ(w.kind, WritePlan::Kind::Write);
  local = 1'000'000'000;  // the window closed while the write was in flight
  EXPECT_EQ(c.written(1, c.calls().next_call(), view, local), Stored::Lapsed);
  EXPECT_FALSE(c.held());
  // A delete stored so is not answered either.
  local = 500;
  load();
  local = 1'000'000'000;
  EXPECT_EQ(c.deleted(view, local), Stored::Lapsed);
  local = 500;
  load();
  EXPECT_EQ(c.deleted(view, local), Stored::Written);
  EXPECT_FALSE(c.exists());
}

TEST_F(CachedGroupTest, AFailedStoreCallForgetsTheCopyAndWhatItConfirmed) {
  load();
  joined("a");
  const auto arrival = c.calls().arrival();
  ASSERT_TRUE(c.copy_answers(arrival, view, local));
  c.forget();
  EXPECT_FALSE(c.held());
  EXPECT_FALSE(c.copy_answers(arrival, view, local));
  EXPECT_FALSE(c.copy_answers(0, view, local));
}

TEST_F(CachedGroupTest, AStoreCallIsGivenUpAtTheDeadlineOnThePodsClockAndItsLateReplyDropped) {
  StoreCallLine line;
  EXPECT_EQ(line.give_up_in(0, 1000), -1);  // nothing in flight
  line.begin(7, 100);
  EXPECT_TRUE(line.in_flight());
  EXPECT_EQ(line.give_up_in(600, 1000), 500);  // wait 500 ms more
  EXPECT_EQ(line.give_up_in(1100, 1000), 0);   // given up now
  EXPECT_FALSE(line.in_flight());
  EXPECT_FALSE(line.replied(7));  // the late reply is dropped
  line.begin(8, 2000);
  EXPECT_TRUE(line.replied(8));
  EXPECT_EQ(line.replying(), 8u);
  EXPECT_FALSE(line.replied(8));  // answered once
  EXPECT_EQ(line.give_up_in(99'999, 1000), -1);
}

// The store actor's side of the same deadline, on the same clock: the call the asker gave up on
// is not run from the moment the asker answered RETRY (and is run right up to it).
TEST_F(CachedGroupTest, TheStoreSkipsACallFromTheMomentItsAskerGaveUpOnTheSameClock) {
  StoreCallLine line;
  const int64_t askedAt = 100, deadlineMs = 1000;
  line.begin(1, askedAt);
  const int64_t giveUpAt = give_up_at(askedAt, deadlineMs);
  for (int64_t now : {askedAt, int64_t{600}, giveUpAt - 1}) {
    EXPECT_GT(line.give_up_in(now, deadlineMs), 0) << now;
    EXPECT_FALSE(store_call_abandoned(now, giveUpAt)) << "still awaited at " << now << ": run it";
  }
  EXPECT_EQ(line.give_up_in(giveUpAt, deadlineMs), 0);  // the asker answers RETRY now
  EXPECT_TRUE(store_call_abandoned(giveUpAt, giveUpAt)) << "nobody waits for it: not run";
  EXPECT_TRUE(store_call_abandoned(giveUpAt + 50'000, giveUpAt));
  EXPECT_FALSE(store_call_abandoned(INT64_MAX - 1, kNeverGiveUp)) << "a call without a deadline always runs";
}

// --- races, deletes, handovers -------------------------------------------------------------------

TEST_F(CachedGroupTest, AWriteLostToAnotherPodIsRetriedUntilTheContentionLimit) {
  int attempts = 0;
  EXPECT_FALSE(contended(attempts, 3, "orders/billing").has_value());
  EXPECT_FALSE(contended(attempts, 3, "orders/billing").has_value());
  auto why = contended(attempts, 3, "orders/billing");
  ASSERT_TRUE(why.has_value());
  EXPECT_NE(why->find("contended: 3 attempts"), std::string::npos) << *why;
}

TEST_F(CachedGroupTest, ALostRaceAdoptsTheWinnersStateAndConfirmsIt) {
  load();
  joined("a");
  auto theirs = stored;
  theirs.members.erase("a");
  theirs.storeRevision = revision + 1;
  auto w = plan(std::move(*step({request("b", 0)})));
  ASSERT_EQ(w.kind, WritePlan::Kind::Write);
  const auto call = c.calls().next_call();
  c.lost_race(std::move(theirs), {}, call, view, local, now);
  ASSERT_TRUE(c.held());
  EXPECT_EQ(c.state().members.count("a"), 0u);
  EXPECT_EQ(c.state().storeRevision, revision + 1);
  EXPECT_TRUE(c.copy_answers(c.calls().arrival(), view, local));
  // With no state in the answer (the mutex was held), the copy is read again.
  c.lost_race(std::nullopt, {}, c.calls().next_call(), view, local, now);
  EXPECT_FALSE(c.held());
}

TEST_F(CachedGroupTest, AForcedDeleteFencesEveryLiveMemberFirst) {
  load();
  joined("a");
  joined("b");
  auto o = fence_live_members(stored, "group deleted by admin", cfg, now);
  for (const auto& [id, m] : o.state.members) EXPECT_FALSE(m.live()) << id;
  EXPECT_EQ(o.delta.upserted.size(), 2u);
  EXPECT_EQ(judge_delete(true, o.state, false), DeleteVerdict::Delete);
  EXPECT_EQ(judge_delete(true, stored, false), DeleteVerdict::HasLiveMembers);
}

TEST_F(CachedGroupTest, AHandoverIsTimedFromTheRevokeAskedToTheLastShardGivenUp) {
  load();
  joined("a");
  const Event asked{Event::Kind::REVOKE_REQUESTED, "a", {}, ""};
  const Event acked{Event::Kind::REVOKE_ACKED, "a", {}, ""};
  EXPECT_TRUE(c.handovers_done({asked}, 1000).empty());
  EXPECT_EQ(c.handovers_done({acked}, 1250), std::vector<Millis>{250});
  EXPECT_TRUE(c.handovers_done({acked}, 1300).empty());  // timed once
}

TEST_F(CachedGroupTest, TheIndexEntryOfDeadlineWorkIsTheCopysNextDeadlineAndGoesWithTheGroup) {
  load();
  EXPECT_FALSE(c.index_deadline(tv()).has_value());  // the group does not exist
  joined("a");
  EXPECT_EQ(c.index_deadline(tv()), next_deadline(stored, cfg));
  ASSERT_TRUE(c.index_deadline(tv()).has_value());
  TimeView held = tv();
  held.expiryHeldUntil = *next_deadline(stored, cfg) + 5000;
  EXPECT_GE(*c.index_deadline(held), *next_deadline(stored, cfg));
}

}  // namespace
}  // namespace rsc::group
