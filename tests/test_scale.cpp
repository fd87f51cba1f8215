// Changing a stream's shard count (SPEC §3 rule 9, issue 30): the rules the store applies
// atomically (group::scale_step) and when a shrink's drained shards may retire
// (group::drain_verdict), on made-up metadata and Redis readings; no Redis, no clock but `now`.
#include <gtest/gtest.h>

#include "group/scale.hpp"

using namespace rsc::group;
using rsc::protocol::MigrationState;
using rsc::protocol::StreamMetadata;

namespace {

StreamMetadata stream(int32_t shards, int32_t version = 1) {
  StreamMetadata m;
  m.streamPrefix = "orders";
  m.shardCount = shards;
  m.metadataVersion = version;
  return m;
}
ScaleCall scale(int32_t target) {
  ScaleCall c;
  c.target = target;
  c.requestedBy = "ops";
  c.reason = "quiet season";
  return c;
}
ScaleCall op(ScaleOp o, int32_t expectedVersion = 0) {
  ScaleCall c;
  c.op = o;
  c.expectedVersion = expectedVersion;
  return c;
}

}  // namespace

TEST(ScaleStep, AShrinkRoutesFewerShardsAtOnceAndKeepsTheRemovedOnesReadWhileTheyDrain) {
  auto s = scale_step(stream(16, 4), scale(4), 1000);
  EXPECT_EQ(s.outcome, ScaleOutcome::Draining);
  EXPECT_TRUE(s.changed());
  EXPECT_EQ(s.meta.shardCount, 4) << "producers route to 4 at once";
  EXPECT_EQ(s.meta.drainingShards(), 12);
  EXPECT_EQ(s.meta.readShardCount(), 16) << "groups still read all 16";
  EXPECT_EQ(s.meta.metadataVersion, 5);
  ASSERT_TRUE(s.meta.migration.has_value());
  const auto& m = *s.meta.migration;
  EXPECT_EQ(m.reshardingId, "v5");
  EXPECT_EQ(m.fromShardCount, 16);
  EXPECT_EQ(m.toShardCount, 4);
  EXPECT_EQ(m.state, MigrationState::DRAINING);
  EXPECT_EQ(m.createdAtMs, 1000);
  EXPECT_EQ(m.requestedBy, "ops");
  EXPECT_EQ(m.reason, "quiet season");
}

TEST(ScaleStep, OneChangeAtATimeWhileAShrinkDrains) {
  auto draining = scale_step(stream(8), scale(2), 1000).meta;
  for (int32_t target : {1, 2, 8, 12}) {
    auto s = scale_step(draining, scale(target), 2000);
    EXPECT_EQ(s.outcome, ScaleOutcome::Busy) << target;
    EXPECT_FALSE(s.changed());
    EXPECT_EQ(s.meta, draining) << "nothing moved";
  }
}

// A stream's shard racks change at any time, a shrink in progress too (they move
// no shard by themselves: only the version, so that every group learns them), and the same racks
// again change nothing.
TEST(ScaleStep, ShardRacksAreSetAtAnyTimeAndBumpTheVersionOnlyWhenTheyChange) {
  auto draining = scale_step(stream(8), scale(2), 1000).meta;
  auto set = op(ScaleOp::SetRacks);
  set.racks = {"a", "", "b"};
  auto s = scale_step(draining, set, 2000);
  EXPECT_EQ(s.outcome, ScaleOutcome::RacksSet);
  EXPECT_TRUE(s.changed());
  EXPECT_EQ(s.meta.metadataVersion, draining.metadataVersion + 1);
  EXPECT_EQ(s.meta.shardRacks, set.racks);
  EXPECT_EQ(s.meta.shardCount, draining.shardCount);
  EXPECT_EQ(s.meta.readShardCount(), draining.readShardCount());
  EXPECT_EQ(s.meta.migration, draining.migration) << "the shrink goes on as it was";
  auto again = scale_step(s.meta, set, 3000);
  EXPECT_EQ(again.outcome, ScaleOutcome::Same);
  EXPECT_FALSE(again.changed());
  EXPECT_EQ(again.meta, s.meta);
  set.racksFrom = "cluster-node-zone";  // the same racks, now from the rule: a change (it is shown)
  EXPECT_EQ(scale_step(s.meta, set, 3000).outcome, ScaleOutcome::RacksSet);
  EXPECT_EQ(to_string(ScaleOutcome::RacksSet), "racks set");
}

TEST(ScaleStep, ARollbackRoutesTheDrainingShardsAgainAndOnlyWhileTheyDrain) {
  auto draining = scale_step(stream(8, 3), scale(2), 1000).meta;
  auto back = scale_step(draining, op(ScaleOp::Rollback), 1500);
  EXPECT_EQ(back.outcome, ScaleOutcome::RolledBack);
  EXPECT_EQ(back.meta.shardCount, 8);
  EXPECT_EQ(back.meta.drainingShards(), 0);
  EXPECT_EQ(back.meta.metadataVersion, 5);
  EXPECT_EQ(back.meta.migration->state, MigrationState::ROLLED_BACK);
  EXPECT_EQ(back.meta.migration->updatedAtMs, 1500);
  EXPECT_EQ(back.meta.migration->createdAtMs, 1000);
  auto again = scale_step(back.meta, op(ScaleOp::Rollback), 1600);
  EXPECT_EQ(again.outcome, ScaleOutcome::NothingToRollBack);
  EXPECT_EQ(again.meta, back.meta);
  EXPECT_EQ(scale_step(stream(8), op(ScaleOp::Rollback), 0).outcome, ScaleOutcome::NothingToRollBack);
}

TEST(ScaleStep, RetiringNeedsTheVersionTheDrainWasJudgedAt) {
  auto draining = scale_step(stream(8, 3), scale(0), 1000).meta;  // scale to zero
  ASSERT_EQ(draining.metadataVersion, 4);
  EXPECT_EQ(draining.shardCount, 0);
  EXPECT_EQ(draining.readShardCount(), 8);
  EXPECT_EQ(scale_step(draining, op(ScaleOp::Retire, 3), 2000).outcome, ScaleOutcome::Stale);
  auto done = scale_step(draining, op(ScaleOp::Retire, 4), 2000);
  EXPECT_EQ(done.outcome, ScaleOutcome::Retired);
  EXPECT_EQ(done.meta.readShardCount(), 0);
  EXPECT_EQ(done.meta.metadataVersion, 5);
  EXPECT_EQ(done.meta.migration->state, MigrationState::DEPRECATED);
  EXPECT_EQ(scale_step(done.meta, op(ScaleOp::Retire, 5), 2100).outcome, ScaleOutcome::Stale) << "nothing drains";
  // And back up from zero: at once.
  auto up = scale_step(done.meta, scale(8), 3000);
  EXPECT_EQ(up.outcome, ScaleOutcome::Grown);
  EXPECT_EQ(up.meta.shardCount, 8);
  EXPECT_EQ(up.meta.drainingShards(), 0);
  EXPECT_EQ(up.meta.migration->state, MigrationState::DEPRECATED);
  EXPECT_EQ(up.meta.migration->fromShardCount, 0);
}

// Retired shards' streams: kept by default, deletable after a grace time, and never deleted once a
// growth has put them back in use (the deletion is marked first; a growth waits for its end).
TEST(RetiredShards, ARetirementRemembersWhichShardStreamsAreRetiredAndSince) {
  auto draining = scale_step(stream(16, 3), scale(4), 1000).meta;
  EXPECT_EQ(draining.retiredKeys(), 0) << "draining shards are not retired";
  auto done = scale_step(draining, op(ScaleOp::Retire, 4), 5000).meta;
  EXPECT_EQ(done.retiredKeysTo, 16);
  EXPECT_EQ(done.retiredKeys(), 12) << "shard streams 4..15";
  EXPECT_EQ(done.retiredAtMs, 5000);
  EXPECT_FALSE(done.deletingRetired);
  // A second shrink below: the retired range grows down, counted from the later retirement.
  auto second = scale_step(done, scale(1), 6000).meta;
  EXPECT_EQ(second.retiredKeys(), 12) << "4..15 still retired while 1..3 drain";
  auto twice = scale_step(second, op(ScaleOp::Retire, second.metadataVersion), 9000).meta;
  EXPECT_EQ(twice.retiredKeysTo, 16);
  EXPECT_EQ(twice.retiredKeys(), 15);
  EXPECT_EQ(twice.retiredAtMs, 9000);
}

TEST(RetiredShards, AGrowthOverThemPutsThemBackInUse) {
  auto retired = scale_step(scale_step(stream(16, 3), scale(4), 1000).meta, op(ScaleOp::Retire, 4), 5000).meta;
  auto partly = scale_step(retired, scale(8), 6000).meta;
  EXPECT_EQ(partly.retiredKeys(), 8) << "8..15 still retired";
  EXPECT_EQ(partly.retiredAtMs, 5000);
  auto all = scale_step(partly, scale(16), 7000).meta;
  EXPECT_EQ(all.retiredKeys(), 0);
  EXPECT_EQ(all.retiredKeysTo, 0);
  // A PUT growth follows the same rule.
  auto put = retired;
  grown_over_retired(put, 20);
  EXPECT_EQ(put.retiredKeysTo, 0);
  auto below = retired;
  grown_over_retired(below, 10);
  EXPECT_EQ(below.retiredKeysTo, 16);
}

TEST(RetiredShards, TheirDeletionIsMarkedAtTheJudgedVersionAndHoldsEveryCountChangeOff) {
  auto retired = scale_step(scale_step(stream(8, 1), scale(2), 1000).meta, op(ScaleOp::Retire, 2), 5000).meta;
  ASSERT_EQ(retired.metadataVersion, 3);
  EXPECT_EQ(scale_step(retired, op(ScaleOp::DeleteRetired, 2), 9000).outcome, ScaleOutcome::Stale)
      << "judged at an older version";
  EXPECT_EQ(scale_step(retired, op(ScaleOp::RetiredDeleted), 9000).outcome, ScaleOutcome::Stale) << "not begun";
  auto mark = scale_step(retired, op(ScaleOp::DeleteRetired, 3), 9000);
  EXPECT_EQ(mark.outcome, ScaleOutcome::Deleting);
  EXPECT_FALSE(mark.changed()) << "routing unchanged";
  EXPECT_EQ(mark.meta.metadataVersion, 3);
  EXPECT_TRUE(mark.meta.deletingRetired);
  for (int32_t target : {1, 4, 8}) {
    auto s = scale_step(mark.meta, scale(target), 9100);
    EXPECT_EQ(s.outcome, ScaleOutcome::Busy) << target;
    EXPECT_EQ(s.meta, mark.meta);
  }
  EXPECT_EQ(scale_step(mark.meta, op(ScaleOp::DeleteRetired, 3), 9100).outcome, ScaleOutcome::Stale) << "once";
  auto gone = scale_step(mark.meta, op(ScaleOp::RetiredDeleted), 9200);
  EXPECT_EQ(gone.outcome, ScaleOutcome::KeysDeleted);
  EXPECT_FALSE(gone.meta.deletingRetired);
  EXPECT_EQ(gone.meta.retiredKeys(), 0);
  EXPECT_EQ(scale_step(gone.meta, scale(8), 9300).outcome, ScaleOutcome::Grown) << "and growth again";
  // Nothing retired: nothing to delete.
  EXPECT_EQ(scale_step(stream(8, 1), op(ScaleOp::DeleteRetired, 1), 0).outcome, ScaleOutcome::Stale);
  // While a later shrink drains: not now.
  auto draining = scale_step(retired, scale(1), 9000).meta;
  EXPECT_EQ(scale_step(draining, op(ScaleOp::DeleteRetired, draining.metadataVersion), 9000).outcome, ScaleOutcome::Stale);
}

TEST(RetiredShards, ThePodDeletesThemOnlyWhenConfiguredAndDue) {
  auto retired = scale_step(scale_step(stream(8, 1), scale(2), 1000).meta, op(ScaleOp::Retire, 2), 5000).meta;
  EXPECT_EQ(retired_keys_step(retired, 100000, -1).action, RetiredKeysAction::Forget) << "kept by default";
  auto wait = retired_keys_step(retired, 6000, 3000);
  EXPECT_EQ(wait.action, RetiredKeysAction::Wait);
  EXPECT_EQ(wait.dueAtMs, 8000);
  auto due = retired_keys_step(retired, 8000, 3000);
  EXPECT_EQ(due.action, RetiredKeysAction::Delete);
  EXPECT_EQ(due.from, 2);
  EXPECT_EQ(due.to, 8);
  EXPECT_EQ(retired_keys_step(retired, 5000, 0).action, RetiredKeysAction::Delete) << "0: at once";
  EXPECT_EQ(retired_keys_step(stream(8), 9000, 0).action, RetiredKeysAction::Forget) << "nothing retired";
  // A deletion another pod began and did not finish: finished, whatever this pod is set to.
  auto begun = scale_step(retired, op(ScaleOp::DeleteRetired, 3), 9000).meta;
  auto resume = retired_keys_step(begun, 9000, -1);
  EXPECT_EQ(resume.action, RetiredKeysAction::Delete);
  EXPECT_EQ(resume.from, 2);
  EXPECT_EQ(resume.to, 8);
  // Grown back over them before they were due: nothing left to delete.
  auto regrown = scale_step(retired, scale(8), 6000).meta;
  EXPECT_EQ(retired_keys_step(regrown, 100000, 0).action, RetiredKeysAction::Forget);
  // And the pod reads the list when the deletion is due, not 10 s later.
  EXPECT_FALSE(draining_read_due(1000, 2000, false, std::nullopt));
  EXPECT_FALSE(draining_read_due(1000, 2000, false, 2500));
  EXPECT_TRUE(draining_read_due(1000, 2500, false, 2500));
}

TEST(ScaleStep, TheSameCountChangesNothing) {
  auto s = scale_step(stream(4, 2), scale(4), 0);
  EXPECT_EQ(s.outcome, ScaleOutcome::Same);
  EXPECT_FALSE(s.changed());
  EXPECT_EQ(s.meta.metadataVersion, 2);
  EXPECT_FALSE(s.meta.migration.has_value());
}

namespace {
ShardReading shard(int32_t i, std::vector<ShardGroupReading> groups, std::string lastId = "100-0") {
  ShardReading r;
  r.shard = i;
  r.exists = true;
  r.lastId = std::move(lastId);
  r.groups = std::move(groups);
  return r;
}
ShardGroupReading group(std::string name, int64_t pending, std::optional<int64_t> lag, std::string lastDelivered = "100-0") {
  ShardGroupReading g;
  g.group = std::move(name);
  g.pending = pending;
  g.lag = lag;
  g.lastDeliveredId = std::move(lastDelivered);
  return g;
}
}  // namespace

TEST(DrainVerdict, EveryGroupOnEveryDrainingShardMustHaveNothingPendingAndNothingUnread) {
  auto m = scale_step(stream(4), scale(2), 1000).meta;  // 2 and 3 drain
  StreamReading r;
  r.shardCount = 4;
  r.shards = {shard(0, {group("billing", 5, 7)}),  // routed shards do not matter
              shard(1, {}),
              shard(2, {group("billing", 0, 0), group("audit", 0, 3)}),
              shard(3, {group("billing", 2, 0), group("audit", 0, 0)})};
  auto v = drain_verdict(m, r, 20000, 10000);
  EXPECT_TRUE(v.draining);
  EXPECT_FALSE(v.drained);
  ASSERT_EQ(v.waiting.size(), 2u);
  EXPECT_EQ(v.waiting[0].shard, 2);
  EXPECT_EQ(v.waiting[0].group, "audit");
  EXPECT_EQ(v.waiting[0].unread, 3);
  EXPECT_EQ(v.waiting[1].shard, 3);
  EXPECT_EQ(v.waiting[1].group, "billing");
  EXPECT_EQ(v.waiting[1].pending, 2);
  EXPECT_NE(to_string(v).find("shard 2: group audit 0 pending, 3 unread"), std::string::npos) << to_string(v);
  // Acked and read: retire.
  r.shards[2].groups[1].lag = 0;
  r.shards[3].groups[0].pending = 0;
  v = drain_verdict(m, r, 20000, 10000);
  EXPECT_TRUE(v.drained) << to_string(v);
}

TEST(DrainVerdict, ProducersGetTheirGraceFirst) {
  auto m = scale_step(stream(4), scale(2), 1000).meta;
  StreamReading r;
  r.shards = {shard(2, {group("billing", 0, 0)}), shard(3, {group("billing", 0, 0)})};
  auto v = drain_verdict(m, r, 5000, 10000);
  EXPECT_FALSE(v.drained);
  EXPECT_EQ(v.graceLeftMs, 6000);
  EXPECT_TRUE(v.waiting.empty());
  EXPECT_NE(to_string(v).find("grace"), std::string::npos);
  EXPECT_TRUE(drain_verdict(m, r, 11000, 10000).drained);
}

TEST(DrainVerdict, UnknownLagBlocksUnlessTheGroupHasReadTheLastIdAndMissingShardsHoldNothing) {
  auto m = scale_step(stream(3), scale(0), 0).meta;  // 0, 1, 2 drain
  StreamReading r;
  ShardReading gone;
  gone.shard = 2;  // the shard stream does not exist: nothing to read on it
  r.shards = {shard(0, {group("billing", 0, std::nullopt, "100-0")}, "100-0"),
              shard(1, {group("billing", 0, std::nullopt, "99-5")}, "100-0"), gone};
  auto v = drain_verdict(m, r, 100000, 0);
  ASSERT_EQ(v.waiting.size(), 1u);
  EXPECT_EQ(v.waiting[0].shard, 1);
  EXPECT_FALSE(v.waiting[0].unread.has_value()) << "Redis cannot tell: unknown, never 0";
  r.shards[1].groups[0].lastDeliveredId = "100-0";
  EXPECT_TRUE(drain_verdict(m, r, 100000, 0).drained);
  // A shard the reading lacks was not read: nothing can be said of it.
  r.shards.pop_back();
  r.shards.pop_back();
  v = drain_verdict(m, r, 100000, 0);
  EXPECT_FALSE(v.drained);
  EXPECT_NE(to_string(v).find("not read"), std::string::npos);
}

TEST(DrainVerdict, NothingDrainsWithoutAShrink) {
  auto v = drain_verdict(stream(4), StreamReading{}, 0, 0);
  EXPECT_FALSE(v.draining);
  EXPECT_FALSE(v.drained);
}

TEST(DrainingRead, EveryBeatWhileWatchingElseEveryTenSeconds) {
  EXPECT_TRUE(draining_read_due(std::nullopt, 0, false)) << "at start";
  EXPECT_FALSE(draining_read_due(1000, 5000, false));
  EXPECT_TRUE(draining_read_due(1000, 11000, false));
  EXPECT_TRUE(draining_read_due(1000, 1500, true)) << "a draining stream is watched every beat";
  EXPECT_EQ(kDrainingReadIntervalMs, 10000);
}

// The pod's part of a shrink, step by step on a fake clock (the store played by scale_step): read
// the draining shards, watch until every group drained them, retire, wait for the deletion time,
// mark, delete the shard streams, record it, forget the stream.
TEST(ShrinkStep, APodCarriesAShrinkFromDrainToDeletedKeys) {
  const int64_t grace = 10000, ttl = 3000;
  ShrinkProgress p;
  p.meta = scale_step(stream(4), scale(2), 1000).meta;  // shards 2 and 3 drain
  auto s = shrink_step(p, 2000, grace, ttl);
  EXPECT_EQ(s.action, ShrinkAction::ReadShards);
  EXPECT_EQ(s.from, 2);
  EXPECT_EQ(s.to, 4);
  StreamReading r;
  r.shards = {shard(2, {group("billing", 1, 0)}), shard(3, {group("billing", 0, 0)})};
  p.reading = r;
  s = shrink_step(p, 5000, grace, ttl);
  EXPECT_EQ(s.action, ShrinkAction::Watch) << "producers' grace first";
  EXPECT_EQ(s.verdict.graceLeftMs, 6000);
  s = shrink_step(p, 20000, grace, ttl);
  EXPECT_EQ(s.action, ShrinkAction::Watch);
  ASSERT_EQ(s.verdict.waiting.size(), 1u);
  EXPECT_EQ(s.verdict.waiting[0].pending, 1);
  p.reading->shards[0].groups[0].pending = 0;  // acked, read again the next round
  s = shrink_step(p, 21000, grace, ttl);
  ASSERT_EQ(s.action, ShrinkAction::Retire);
  EXPECT_EQ(s.expectedVersion, p.meta->metadataVersion);
  auto retired = scale_step(*p.meta, op(ScaleOp::Retire, s.expectedVersion), 21000);
  ASSERT_EQ(retired.outcome, ScaleOutcome::Retired);
  p.meta = retired.meta;
  p.reading.reset();
  s = shrink_step(p, 22000, grace, ttl);
  EXPECT_EQ(s.action, ShrinkAction::WaitUntil);
  EXPECT_EQ(s.dueAtMs, 24000);
  s = shrink_step(p, 24000, grace, ttl);
  ASSERT_EQ(s.action, ShrinkAction::MarkDeleting) << "marked before anything is deleted";
  auto marked = scale_step(*p.meta, op(ScaleOp::DeleteRetired, s.expectedVersion), 24000);
  ASSERT_EQ(marked.outcome, ScaleOutcome::Deleting);
  p.meta = marked.meta;
  s = shrink_step(p, 24000, grace, ttl);
  EXPECT_EQ(s.action, ShrinkAction::DeleteKeys);
  EXPECT_EQ(s.from, 2);
  EXPECT_EQ(s.to, 4);
  p.keysDeleted = true;
  s = shrink_step(p, 24000, grace, ttl);
  ASSERT_EQ(s.action, ShrinkAction::RecordDeleted);
  auto recorded = scale_step(*p.meta, op(ScaleOp::RetiredDeleted), 24100);
  ASSERT_EQ(recorded.outcome, ScaleOutcome::KeysDeleted);
  p.meta = recorded.meta;
  p.keysDeleted = false;
  EXPECT_EQ(shrink_step(p, 24100, grace, ttl).action, ShrinkAction::Forget) << "nothing left to do";
}

TEST(ShrinkStep, GoneKeptRegrownAndHalfDeletedStreams) {
  ShrinkProgress gone;
  EXPECT_EQ(shrink_step(gone, 0, 10000, 0).action, ShrinkAction::Forget) << "no such stream";
  ShrinkProgress kept;
  kept.meta = scale_step(scale_step(stream(8, 1), scale(2), 1000).meta, op(ScaleOp::Retire, 2), 5000).meta;
  EXPECT_EQ(shrink_step(kept, 100000, 10000, -1).action, ShrinkAction::Forget) << "retired streams kept by default";
  ShrinkProgress regrown;
  regrown.meta = scale_step(*kept.meta, scale(8), 6000).meta;
  EXPECT_EQ(shrink_step(regrown, 100000, 10000, 0).action, ShrinkAction::Forget) << "in use again: nothing to delete";
  // A deletion another pod marked and did not finish: deleted at once, whatever this pod is set to.
  ShrinkProgress begun;
  begun.meta = scale_step(*kept.meta, op(ScaleOp::DeleteRetired, kept.meta->metadataVersion), 9000).meta;
  ASSERT_TRUE(begun.meta->deletingRetired);
  const auto s = shrink_step(begun, 9000, 10000, -1);
  EXPECT_EQ(s.action, ShrinkAction::DeleteKeys);
  EXPECT_EQ(s.from, 2);
  EXPECT_EQ(s.to, 8);
}

// Creating and growing a stream (POST / PUT): the rules both stores answer by.
TEST(PutStep, CreateGrowNeverShrinkStyleOnceAndNoGrowthWhileAShrinkIsUnderWay) {
  const auto created = put_step(std::nullopt, "orders", PutCall{4, std::nullopt, false});
  EXPECT_EQ(created.outcome, PutOutcome::Created);
  EXPECT_EQ(created.meta.shardCount, 4);
  EXPECT_EQ(created.meta.metadataVersion, 1);
  EXPECT_EQ(created.meta.keyStyle, rsc::protocol::KeyStyle::Plain) << "plain unless asked";
  EXPECT_EQ(put_step(std::nullopt, "orders", PutCall{4, rsc::protocol::KeyStyle::HashTag, false}).meta.keyStyle,
            rsc::protocol::KeyStyle::HashTag);
  const auto m = created.meta;
  EXPECT_EQ(put_step(m, "orders", PutCall{8, std::nullopt, true}).outcome, PutOutcome::Exists) << "POST leaves it alone";
  EXPECT_EQ(put_step(m, "orders", PutCall{4, std::nullopt, false}).outcome, PutOutcome::Same);
  EXPECT_EQ(put_step(m, "orders", PutCall{2, std::nullopt, false}).outcome, PutOutcome::Shrink);
  EXPECT_EQ(put_step(m, "orders", PutCall{8, rsc::protocol::KeyStyle::HashTag, false}).outcome, PutOutcome::Style);
  const auto grown = put_step(m, "orders", PutCall{8, rsc::protocol::KeyStyle::Plain, false});
  EXPECT_EQ(grown.outcome, PutOutcome::Grown);
  EXPECT_TRUE(grown.changed());
  EXPECT_EQ(grown.meta.shardCount, 8);
  EXPECT_EQ(grown.meta.metadataVersion, 2);
  // A shrink draining, or retired shards' streams being deleted: no growth meanwhile.
  const auto draining = scale_step(stream(8, 2), scale(4), 1000).meta;
  EXPECT_EQ(put_step(draining, "orders", PutCall{16, std::nullopt, false}).outcome, PutOutcome::Busy);
  EXPECT_EQ(put_step(draining, "orders", PutCall{4, std::nullopt, false}).outcome, PutOutcome::Same);
  const auto retired = scale_step(draining, op(ScaleOp::Retire, draining.metadataVersion), 20000).meta;
  const auto deleting = scale_step(retired, op(ScaleOp::DeleteRetired, retired.metadataVersion), 21000).meta;
  ASSERT_TRUE(deleting.deletingRetired);
  EXPECT_EQ(put_step(deleting, "orders", PutCall{16, std::nullopt, false}).outcome, PutOutcome::Deleting);
  // Grown over retired shards: they are in use again.
  const auto regrown = put_step(retired, "orders", PutCall{8, std::nullopt, false});
  EXPECT_EQ(regrown.outcome, PutOutcome::Grown);
  EXPECT_EQ(regrown.meta.retiredKeys(), 0);
}
