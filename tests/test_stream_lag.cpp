// What XINFO GROUPS readings mean for a group's lag (group/stream_lag.hpp): pure, no Redis.
#include "group/stream_lag.hpp"

#include <gtest/gtest.h>

#include <algorithm>

using namespace rsc::group;

namespace {

ShardGroupReading on(const std::string& group, std::optional<int64_t> lag, int64_t pending = 0,
                     std::string lastId = "0-0") {
  return {group, std::move(lastId), lag ? std::optional<int64_t>(100) : std::nullopt, lag, pending};
}

StreamReading two_shards(std::vector<ShardGroupReading> s0, std::vector<ShardGroupReading> s1) {
  StreamReading r;
  r.shardCount = 2;
  r.shards = {{0, true, std::nullopt, std::move(s0)}, {1, true, std::nullopt, std::move(s1)}};
  return r;
}

}  // namespace

TEST(StreamLag, AGroupsLagIsTheSumOverItsShardsWhenEveryOneIsKnown) {
  const auto g = group_lag(two_shards({on("billing", 7, 2, "5-0")}, {on("billing", 3, 1)}), "billing");
  ASSERT_EQ(g.shards.size(), 2u);
  EXPECT_EQ(g.lag(), std::optional<int64_t>(10));
  EXPECT_EQ(g.pending, 3);
  EXPECT_EQ(g.unknownShards, 0);
  EXPECT_TRUE(g.shards[0].onShard);
  EXPECT_EQ(g.shards[0].lastDeliveredId, "5-0");
  EXPECT_EQ(g.shards[0].lag, std::optional<int64_t>(7));
}

TEST(StreamLag, LagRedisCannotTellIsUnknownNeverZero) {
  const auto g = group_lag(two_shards({on("billing", std::nullopt)}, {on("billing", 4)}), "billing");
  EXPECT_FALSE(g.shards[0].lag.has_value());
  EXPECT_FALSE(g.lag().has_value()) << "one unknown shard makes the group's lag unknown";
  EXPECT_EQ(g.knownLag, 4) << "what is known is kept, as a lower bound";
  EXPECT_EQ(g.unknownShards, 1);
}

TEST(StreamLag, AShardWithoutTheGroupOrMissingFromTheReadingIsUnknown) {
  StreamReading r;
  r.shardCount = 3;
  r.shards = {{0, true, std::nullopt, {on("billing", 0)}}, {1, true, std::nullopt, {on("audit", 5)}}};
  const auto g = group_lag(r, "billing");
  ASSERT_EQ(g.shards.size(), 3u);
  EXPECT_TRUE(g.shards[0].onShard);
  EXPECT_EQ(g.shards[0].lag, std::optional<int64_t>(0)) << "read to the end: a known 0";
  EXPECT_FALSE(g.shards[1].onShard) << "another group's figures are not this group's";
  EXPECT_FALSE(g.shards[1].lag.has_value());
  EXPECT_FALSE(g.shards[2].lag.has_value()) << "a shard not read";
  EXPECT_EQ(g.unknownShards, 2);
  EXPECT_FALSE(g.lag().has_value());
}

TEST(StreamLag, RecordsTrimmedBeforeTheGroupReadThemDoNotCountAsWaiting) {
  // Redis says 25 (added minus read) of a shard trimmed to 10 records: 15 of those are gone.
  StreamReading r;
  r.shardCount = 1;
  r.shards = {{0, true, 10, {on("slow", 25), on("fast", 0)}}};
  EXPECT_EQ(group_lag(r, "slow").lag(), std::optional<int64_t>(10));
  EXPECT_EQ(lag_by_group(r, {}).at("slow").knownLag, 10);
  EXPECT_EQ(group_lag(r, "fast").lag(), std::optional<int64_t>(0));
}

TEST(StreamLag, RecordsTheRetentionTrimmedUnreadAreTakenOutOfRedissLag) {
  // Redis says 1,000,120 (added minus read); 1,000,000 of those were trimmed before the group read
  // them: 120 of the 20,000 records left wait.
  auto slow = on("slow", 1'000'120, 0, "5-0");
  slow.trimmedUnread = 1'000'000;
  StreamReading r;
  r.shardCount = 1;
  r.shards = {{0, true, 20'000, {slow}}};
  r.shards[0].firstId = "3-0";
  r.shards[0].lastId = "9-0";
  EXPECT_EQ(group_lag(r, "slow").lag(), std::optional<int64_t>(120));
  EXPECT_EQ(lag_by_group(r, {}).at("slow").knownLag, 120);
  // What describe shows of the shard: what was trimmed, and how much of it this group never read.
  r.shards[0].trimmed = 1'500'000;
  const auto shard = group_lag(r, "slow").shards.at(0);
  EXPECT_EQ(shard.trimmed, 1'500'000);
  EXPECT_EQ(shard.trimmedUnread, 1'000'000);
}

TEST(StreamLag, AGroupAtTheLastIdWaitsForNothingAndOneBehindTheFirstRecordWaitsForAll) {
  StreamReading r;
  r.shardCount = 1;
  r.shards = {{0, true, 40, {on("done", 18, 0, "9-0"), on("behind", std::nullopt, 0, "2-5"), on("mid", std::nullopt, 0, "6-0")}}};
  r.shards[0].firstId = "3-0";
  r.shards[0].lastId = "9-0";
  EXPECT_EQ(group_lag(r, "done").lag(), std::optional<int64_t>(0)) << "Redis said 18: records trimmed unread";
  EXPECT_EQ(group_lag(r, "behind").lag(), std::optional<int64_t>(40)) << "every record left is after it";
  EXPECT_FALSE(group_lag(r, "mid").lag().has_value()) << "inside the records left, Redis could not tell";
}

TEST(StreamLag, AShardStreamThatDoesNotExistTellsNothing) {
  StreamReading r;
  r.shardCount = 1;
  r.shards = {{0, false, std::nullopt, {on("billing", 0)}}};
  EXPECT_FALSE(group_lag(r, "billing").lag().has_value());
}

TEST(StreamLag, EveryGroupFoundOnAShardOrKnownToTheCoordinatorIsListed) {
  const auto all = lag_by_group(two_shards({on("billing", 1)}, {on("audit", 2)}), {"billing", "fresh"});
  ASSERT_EQ(all.size(), 3u);
  EXPECT_EQ(all.at("billing").unknownShards, 1);
  EXPECT_EQ(all.at("billing").knownLag, 1);
  EXPECT_EQ(all.at("audit").knownLag, 2);
  EXPECT_EQ(all.at("audit").unknownShards, 1);
  EXPECT_EQ(all.at("fresh").unknownShards, 2) << "a group not provisioned yet: unknown, not 0";
  EXPECT_EQ(all.at("fresh").knownLag, 0);
}

TEST(StreamLag, TheSumsOfEveryGroupAgreeWithEachGroupsOwnReading) {
  StreamReading r;
  r.shardCount = 3;
  r.shards = {{0, true, std::nullopt, {on("a", 3, 1), on("b", std::nullopt, 2)}},
              {1, true, std::nullopt, {on("a", 4), on("b", 5, 1)}},
              {2, false, std::nullopt, {on("a", 9, 9)}}};  // a shard that does not exist tells nothing
  for (const auto& [name, sums] : lag_by_group(r, {})) {
    const auto g = group_lag(r, name);
    EXPECT_EQ(sums.knownLag, g.knownLag) << name;
    EXPECT_EQ(sums.unknownShards, g.unknownShards) << name;
    EXPECT_EQ(sums.pending, g.pending) << name;
  }
  EXPECT_EQ(lag_by_group(r, {}).at("a").knownLag, 7);
}

TEST(StreamLag, GroupsAreReadAgainWhenTheShardsChangedOrTheLastReadIsFourRoundsOld) {
  EXPECT_TRUE(groups_read_due(std::nullopt, "a", 0, 10'000)) << "never read";
  const GroupsRead last{"a", 1'000};
  EXPECT_FALSE(groups_read_due(last, "a", 11'000, 10'000)) << "nothing added, deleted or created: skipped";
  EXPECT_TRUE(groups_read_due(last, "b", 11'000, 10'000)) << "the fingerprint moved";
  EXPECT_FALSE(groups_read_due(last, "a", 40'999, 10'000));
  EXPECT_TRUE(groups_read_due(last, "a", 41'000, 10'000)) << "reads and acks show in no fingerprint: read anyway";
  EXPECT_TRUE(groups_read_due(GroupsRead{"", 1'000}, "", 2'000, 10'000)) << "no fingerprint: always read";
}

TEST(StreamLag, RoundsComeOnceAnIntervalHasPassedAndNeverWhenOff) {
  EXPECT_TRUE(lag_round_due(std::nullopt, 0, 10'000)) << "the first round at once";
  EXPECT_FALSE(lag_round_due(1'000, 10'999, 10'000));
  EXPECT_TRUE(lag_round_due(1'000, 11'000, 10'000));
  EXPECT_FALSE(lag_round_due(std::nullopt, 50'000, 0)) << "0 turns sampling off";
  EXPECT_NE(lag_duty_key("orders"), lag_duty_key("payments"));
}

TEST(StreamLag, EachPolicyBecomesItsTrimAtTheStoresTime) {
  using K = rsc::protocol::Retention::Kind;
  using M = rsc::group::Trim::Mode;
  EXPECT_EQ(rsc::group::trim_for({}, 5000).mode, M::None);
  const auto len = rsc::group::trim_for({K::MaxLen, 100}, 5000);
  EXPECT_EQ(len.mode, M::MaxLen);
  EXPECT_EQ(len.arg, "100");
  const auto age = rsc::group::trim_for({K::MaxAgeMs, 60000}, 1'700'000'060'000);
  EXPECT_EQ(age.mode, M::MinId);
  EXPECT_EQ(age.arg, "1700000000000-0") << "records older than the age go";
  EXPECT_EQ(rsc::group::trim_for({K::ProcessedByAllGroups, 0}, 5000).mode, M::ProcessedByAllGroups);
}

// A pod's lag rounds on a fake clock: a round reads the streams whose duty is this pod's, reads a
// stream's groups again only when its fingerprint moved (or every kGroupsReadEvery rounds), keeps
// the figures of a stream whose read failed, and at its end drops the series of streams that are
// no longer this pod's or no longer exist.
TEST(LagRounds, ARoundReadsThisPodsStreamsAndForgetsTheOnesThatLeft) {
  LagRounds lag(1000);
  EXPECT_TRUE(lag.due(0)) << "the first round at once";
  lag.begin(0);
  ASSERT_TRUE(lag.plan({"orders", "audit"}));
  EXPECT_TRUE(lag.in_progress());
  EXPECT_FALSE(lag.due(5000)) << "not while one is in progress";
  std::vector<std::string> read;
  while (auto s = lag.next()) {
    EXPECT_TRUE(lag.groups_due(*s, "fp1", 0)) << "never read: read";
    lag.groups_read(*s, "fp1", 0, true);
    read.push_back(*s);
  }
  EXPECT_EQ(read, (std::vector<std::string>{"orders", "audit"}));
  auto end = lag.finish();
  EXPECT_TRUE(end.forget.empty());
  EXPECT_EQ(end.sampled, 2u);
  EXPECT_TRUE(end.changed);
  EXPECT_TRUE(end.ok);

  EXPECT_FALSE(lag.due(999));
  ASSERT_TRUE(lag.due(1000));
  lag.begin(1000);
  ASSERT_TRUE(lag.plan({"orders", "billing"}));  // audit's duty moved to another pod
  auto s = lag.next();
  ASSERT_EQ(s, std::optional<std::string>("orders"));
  EXPECT_FALSE(lag.groups_due("orders", "fp1", 1000)) << "nothing moved: the last figures stand";
  EXPECT_TRUE(lag.groups_due("orders", "fp2", 1000)) << "records added, acked or trimmed: read again";
  s = lag.next();
  ASSERT_EQ(s, std::optional<std::string>("billing"));
  lag.failed();  // its read failed: nothing known, nothing forgotten
  EXPECT_FALSE(lag.next().has_value());
  EXPECT_FALSE(lag.in_progress());
  end = lag.finish();
  EXPECT_EQ(end.forget, std::vector<std::string>{"audit"});
  EXPECT_FALSE(end.changed) << "still two streams";
  EXPECT_FALSE(end.ok);

  // Unchanged for kGroupsReadEvery rounds: read again anyway (reads and acks move no fingerprint).
  EXPECT_FALSE(lag.groups_due("orders", "fp1", 1000 * kGroupsReadEvery - 1));
  EXPECT_TRUE(lag.groups_due("orders", "fp1", 1000 * kGroupsReadEvery));

  // A stream deleted meanwhile: its series go at the round's end.
  lag.begin(2000);
  ASSERT_TRUE(lag.plan({"orders", "billing"}));
  while (auto x = lag.next()) lag.groups_read(*x, "fp3", 2000, *x != "billing");
  end = lag.finish();
  EXPECT_EQ(end.forget, std::vector<std::string>{"billing"});
  EXPECT_EQ(end.sampled, 1u);
  EXPECT_TRUE(lag.groups_due("billing", "fp3", 2001)) << "nothing kept of it";
}

TEST(LagRounds, APodWithNothingToSampleReportsNothingAndOffMeansNever) {
  LagRounds lag(1000);
  lag.begin(0);
  EXPECT_FALSE(lag.plan({})) << "nothing of this pod's, nothing sampled before: the round ends unreported";
  EXPECT_FALSE(lag.due(500));
  EXPECT_TRUE(lag.due(1000));
  LagRounds off(0);
  EXPECT_FALSE(off.due(0));
  EXPECT_FALSE(off.due(1000000));
}

// The lag snapshot gives back, for one group, exactly what the whole reading says of it:
// its position on each shard (unknown stays unknown), the shards' own figures and its sums.
TEST(LagSnapshot, OneGroupDecodedFromTheSnapshotHasTheLagTheWholeReadingGivesIt) {
  auto r = two_shards({on("billing", 7, 2, "5-0"), on("audit", std::nullopt, 1, "1-0")}, {on("billing", 3, 1)});
  r.shards[0].length = 12;
  r.shards[0].firstId = "1-0";
  r.shards[0].lastId = "12-0";
  r.shards[0].trimmed = 4;
  r.shards[0].groups[0].trimmedUnread = 2;
  const auto f = encode_lag_snapshot(r, {"billing", "audit", "idle"});
  ASSERT_EQ(f.positions.size(), 3u) << "every group read, and the known one on no shard";
  ASSERT_EQ(f.sums.size(), 3u);
  for (const std::string g : {"billing", "audit", "idle"}) {
    const auto it = std::find_if(f.positions.begin(), f.positions.end(), [&](const auto& p) { return p.first == g; });
    ASSERT_NE(it, f.positions.end()) << g;
    const auto back = decode_lag_snapshot(f.shards, g, it->second);
    ASSERT_TRUE(back.has_value()) << g << ": " << it->second;
    const auto want = group_lag(r, g), got = group_lag(*back, g);
    EXPECT_EQ(got.lag(), want.lag()) << g;
    EXPECT_EQ(got.knownLag, want.knownLag) << g;
    EXPECT_EQ(got.unknownShards, want.unknownShards) << g;
    EXPECT_EQ(got.pending, want.pending) << g;
    ASSERT_EQ(got.shards.size(), want.shards.size());
    for (std::size_t i = 0; i < got.shards.size(); ++i) {
      EXPECT_EQ(got.shards[i].onShard, want.shards[i].onShard) << g << " " << i;
      EXPECT_EQ(got.shards[i].lastDeliveredId, want.shards[i].lastDeliveredId);
      EXPECT_EQ(got.shards[i].entriesRead, want.shards[i].entriesRead);
      EXPECT_EQ(got.shards[i].lag, want.shards[i].lag);
      EXPECT_EQ(got.shards[i].length, want.shards[i].length);
      EXPECT_EQ(got.shards[i].trimmed, want.shards[i].trimmed);
      EXPECT_EQ(got.shards[i].trimmedUnread, want.shards[i].trimmedUnread);
    }
    const auto sums = decode_lag_sums(f.sums[static_cast<std::size_t>(it - f.positions.begin())].second);
    ASSERT_TRUE(sums.has_value());
    EXPECT_EQ(sums->knownLag, want.knownLag) << g;
    EXPECT_EQ(sums->unknownShards, want.unknownShards) << g;
    EXPECT_EQ(sums->pending, want.pending) << g;
  }
  // A group the snapshot does not hold: the shards without it (unknown everywhere, never 0).
  const auto absent = decode_lag_snapshot(f.shards, "new", std::nullopt);
  ASSERT_TRUE(absent.has_value());
  EXPECT_EQ(group_lag(*absent, "new").unknownShards, 2);
  // What another version wrote, or a position of another shard count, does not decode.
  EXPECT_FALSE(decode_lag_snapshot("1,2,3", "g", std::nullopt).has_value());
  EXPECT_FALSE(decode_lag_snapshot(f.shards, "g", std::string("1-0,1,1,0,0")).has_value()) << "one shard of two";
  EXPECT_FALSE(decode_lag_snapshot(f.shards, "g", std::string("1-0,x,1,0,0;")).has_value());
  EXPECT_FALSE(decode_lag_sums("1,2").has_value());
  EXPECT_FALSE(decode_lag_sums("a,b,c").has_value());
  EXPECT_TRUE(decode_lag_snapshot("", "g", std::nullopt).has_value()) << "a stream of no shards";
}

TEST(LagSnapshot, ARoundWritesOnlyTheGroupsThatChangedAndDropsThoseThatWentAfterAWholeFirstWrite) {
  LagSnapshotMemory mem;
  auto r = two_shards({on("a", 1), on("b", 2)}, {on("a", 0)});
  auto f = encode_lag_snapshot(r, {});
  auto d = mem.diff(f);
  EXPECT_TRUE(d.replace) << "nothing known of what the store holds";
  EXPECT_EQ(d.changed.size(), 2u);
  mem.written(f);
  d = mem.diff(f);
  EXPECT_FALSE(d.replace);
  EXPECT_TRUE(d.changed.empty()) << "nothing changed: nothing written";
  EXPECT_TRUE(d.removed.empty());
  r = two_shards({on("a", 5)}, {on("a", 0), on("c", 1)});  // a moved, b gone, c new
  f = encode_lag_snapshot(r, {});
  d = mem.diff(f);
  std::vector<std::string> changed;
  for (auto i : d.changed) changed.push_back(f.positions[i].first);
  EXPECT_EQ(changed, (std::vector<std::string>{"a", "c"}));
  EXPECT_EQ(d.removed, (std::vector<std::string>{"b"}));
  mem.forget();  // a write failed
  EXPECT_TRUE(mem.diff(f).replace);
}
