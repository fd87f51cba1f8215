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
