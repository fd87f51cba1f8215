// The store (SPEC §4): the same contract tests against the in-memory store and a real
// redis-server started for this binary; then Redis-only tests of concurrency, pauses past the
// mutex TTL, restarts, NOSCRIPT, BUSY, key slots and the steady-state round-trip cost.
#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <nlohmann/json.hpp>
#include <memory>
#include <set>
#include <thread>

#include "group_harness.hpp"
#include "redis/keys.hpp"
#include "redis/memory_store.hpp"
#include "redis/redis_store.hpp"
#include "redis/state_codec.hpp"
#include "redis_cluster.hpp"
#include "redis_server.hpp"

using namespace rsc;
using namespace rsc::store;
using rsc::testing::Harness;
using rsc::testing::LocalCluster;
using rsc::testing::RedisServer;

namespace {

RedisServer& shared_server() {
  static RedisServer server;  // one per test binary, stopped at exit
  return server;
}
// The same contract once over TLS (mutual: the store presents the test PKI's client certificate).
RedisServer& shared_tls_server() {
  static RedisServer server([] {
    rsc::testing::RedisServerOptions o;
    o.tls = true;
    o.tlsAuthClients = true;
    return o;
  }());
  return server;
}

// A GroupStore that forwards to a shared one: a second "pod" of the in-memory backend.
class Forward : public GroupStore {
 public:
  explicit Forward(MemoryStore& s) : s_(s) {}
  Result<Loaded> load(const GroupKey& k) override { return s_.load(k); }
  std::vector<Result<CasResult>> compare_and_set(const std::vector<CasRequest>& b) override {
    return s_.compare_and_set(b);
  }
  using GroupStore::compare_and_set;
  Result<TickLease> tick_lease(const GroupKey& k, const std::string& t, Millis ttl, int64_t rev) override {
    return s_.tick_lease(k, t, ttl, rev);
  }
  Result<bool> finish_deadline_work(const GroupKey& k, const std::string& t, std::optional<Millis> due,
                                    int64_t rev) override {
    return s_.finish_deadline_work(k, t, due, rev);
  }
  Result<PodBeat> pod_beat(const std::string& p, Millis lease, std::size_t limit, const std::string& address) override {
    return s_.pod_beat(p, lease, limit, address);
  }
  Result<bool> pod_leave(const std::string& p) override { return s_.pod_leave(p); }
  Result<bool> mark_due(const GroupKey& k, Millis at) override { return s_.mark_due(k, at); }
  Result<int64_t> index_missing_deadlines(Millis now) override { return s_.index_missing_deadlines(now); }
  Result<DeleteStatus> delete_group(const GroupKey& k, int64_t rev, int64_t held = 0) override {
    return s_.delete_group(k, rev, held);
  }
  Result<int64_t> count_stream_groups(const std::string& p) override { return s_.count_stream_groups(p); }
  Result<std::vector<GroupKey>> list_groups() override { return s_.list_groups(); }
  Result<std::vector<std::string>> list_stream_groups(const std::string& p) override {
    return s_.list_stream_groups(p);
  }
  Result<std::vector<std::string>> list_streams() override { return s_.list_streams(); }
  Result<std::optional<protocol::StreamMetadata>> get_stream(const std::string& p) override { return s_.get_stream(p); }
  Result<StreamWrite> write_stream(const std::string& p, const StreamPut& w) override { return s_.write_stream(p, w); }
  Result<bool> write_lag_snapshot(const std::string& p, const LagSnapshotWrite& w) override { return s_.write_lag_snapshot(p, w); }
  Result<LagSnapshotRead> read_lag_snapshot(const std::string& p, const std::vector<std::string>& g, bool sums) override {
    return s_.read_lag_snapshot(p, g, sums);
  }
  Result<group::ScaleStep> scale_stream(const std::string& p, const group::ScaleCall& c) override {
    return s_.scale_stream(p, c);
  }
  Result<std::vector<std::string>> draining_streams() override { return s_.draining_streams(); }
  Result<bool> forget_draining(const std::string& p) override { return s_.forget_draining(p); }
  Result<int64_t> delete_shard_streams(const std::string& p, protocol::KeyStyle k, int32_t from, int32_t to) override {
    return s_.delete_shard_streams(p, k, from, to);
  }
  Result<int32_t> provision(const GroupKey& k, int32_t n, const std::string& start) override {
    return s_.provision(k, n, start);
  }
  int64_t rollbacks_detected() const override { return s_.rollbacks_detected(); }
  Result<bool> ping() override { return s_.ping(); }
  Result<bool> notify(const GroupKey& k, const std::string& m) override { return s_.notify(k, m); }

 private:
  MemoryStore& s_;
};

struct MemoryBackend {
  MemoryStore store;
  std::unique_ptr<GroupStore> pod() { return std::make_unique<Forward>(store); }
  void set_raw(const GroupKey& k, const std::string& f, const std::string& v) { store.set_raw_field(k, f, v); }
  FieldMap raw(const GroupKey& k) { return store.raw(k); }
  void replace_raw(const GroupKey& k, const FieldMap& m) { store.replace_raw(k, m); }
  void wait_ms(int ms) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); }
  bool has_consumer_group(const std::string& streamKey, const std::string& group) {
    return store.consumer_groups().count({streamKey, group}) > 0;
  }
};

// The same contract on a single redis-server and on a Redis Cluster of three masters with a
// replica each (every key through the routing client, as the coordinator's store sends them).
struct SingleRedis {
  static store::RedisOptions options() { return shared_server().client_options(); }
  static void flush() { shared_server().admin().command({"FLUSHALL"}); }
};
struct ClusterRedis {
  static LocalCluster& cluster() {
    static LocalCluster c(3, 1);
    return c;
  }
  static store::RedisOptions options() { return cluster().client_options(); }
  static void flush() { cluster().flush_all(); }
};
struct SingleRedisTls {
  static store::RedisOptions options() { return shared_tls_server().client_options(); }
  static void flush() { shared_tls_server().admin().command({"FLUSHALL"}); }
};
struct ClusterRedisTls {
  static LocalCluster& cluster() {
    static LocalCluster c(3, 1, "", true);
    return c;
  }
  static store::RedisOptions options() { return cluster().client_options(); }
  static void flush() { cluster().flush_all(); }
};

template <typename Where>
struct RedisBackendOn {
  RedisBackendOn() {
    Where::flush();
    crossSlotBefore = crossslot_errors();
  }
  // No store operation may span two slots: a cluster would refuse it (CROSSSLOT), and this counts
  // the refusals the masters gave, whatever the test checked.
  ~RedisBackendOn() { EXPECT_EQ(crossslot_errors(), crossSlotBefore) << "a store command spanned two hash slots"; }
  static long long crossslot_errors() {
    if constexpr (std::is_same_v<Where, ClusterRedis> || std::is_same_v<Where, ClusterRedisTls>)
      return Where::cluster().crossslot_errors();
    return 0;
  }
  std::unique_ptr<GroupStore> pod() { return std::make_unique<RedisStore>(Where::options()); }
  KeySpace keys;
  RedisClient admin{Where::options()};
  long long crossSlotBefore = 0;
  bool has_consumer_group(const std::string& streamKey, const std::string& group) {
    auto r = admin.command({"XINFO", "GROUPS", streamKey});
    if (!r.ok() || r.value->type != Value::Type::Array) return false;
    for (const auto& g : r.value->elements)  // each a flat list: name, <name>, consumers, ...
      for (std::size_t i = 0; i + 1 < g.elements.size(); i += 2)
        if (g.elements[i].str == "name" && g.elements[i + 1].str == group) return true;
    return false;
  }
  void set_raw(const GroupKey& k, const std::string& f, const std::string& v) {
    ASSERT_TRUE(admin.command({"HSET", keys.group_state(k), f, v}).ok());
  }
  FieldMap raw(const GroupKey& k) {
    auto r = admin.command({"HGETALL", keys.group_state(k)});
    FieldMap m;
    for (std::size_t i = 0; i + 1 < r.value->elements.size(); i += 2)
      m[r.value->elements[i].str] = r.value->elements[i + 1].str;
    return m;
  }
  void replace_raw(const GroupKey& k, const FieldMap& m) {
    admin.command({"DEL", keys.group_state(k)});
    store::Command c{"HSET", keys.group_state(k)};
    for (const auto& [f, v] : m) {
      c.push_back(f);
      c.push_back(v);
    }
    if (!m.empty()) admin.command(c);
  }
  void wait_ms(int ms) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); }
};
using RedisBackend = RedisBackendOn<SingleRedis>;
using RedisClusterBackend = RedisBackendOn<ClusterRedis>;
using RedisTlsBackend = RedisBackendOn<SingleRedisTls>;
using RedisClusterTlsBackend = RedisBackendOn<ClusterRedisTls>;

const GroupKey kKey{"orders", "billing"};

// Another pod holds the group mutex the way production takes it: with the deadline work's lease
// (the only way besides a write), and releases it when that work is done (only its own).
bool take_mutex(GroupStore& s, const std::string& token, Millis ttl = 5000) {
  auto r = s.tick_lease(kKey, token, ttl, 0);
  return r.ok() && r.value->status != LeaseStatus::NotHolder;
}
void release_mutex(GroupStore& s, const std::string& token) {
  auto r = s.finish_deadline_work(kKey, token, std::nullopt, 0);
  EXPECT_TRUE(r.ok()) << r.error.message;
}

// A realistic group: two members through a handover, with progress and replay memory.
group::GroupState sample_group(const GroupKey& key = kKey) {
  Harness h(6);
  h.state().streamPrefix = key.streamPrefix;
  h.state().consumerGroup = key.consumerGroup;
  auto a = h.hb("a", 0);
  auto b = h.hb("b", 0);
  h.hb("a", a.memberEpoch, {rsc::testing::assigned(a), {}, {}, {0, 1}});  // a revoking 3,4,5
  h.hb("c", 0);
  auto s = h.state();
  s.storeRevision = 0;
  return s;
}

void expect_same_state(const group::GroupState& a, const group::GroupState& b) {
  EXPECT_EQ(encode_group_fields(a), encode_group_fields(b));
  ASSERT_EQ(a.members.size(), b.members.size());
  for (const auto& [id, m] : a.members) {
    ASSERT_TRUE(b.members.count(id)) << id;
    EXPECT_EQ(encode_member(m), encode_member(b.members.at(id))) << id;
  }
}

CasRequest create(const GroupKey& key, const group::GroupState& s) {
  CasRequest r;
  r.key = key;
  r.expectedRevision = 0;
  r.next = &s;
  return r;
}

// A write at `rev` that rewrites the group's fields.
CasRequest update(const GroupKey& key, const group::GroupState& s, int64_t rev) {
  static const group::Delta groupOnly{true, {}, {}};
  CasRequest r = create(key, s);
  r.expectedRevision = rev;
  r.delta = &groupOnly;
  return r;
}

}  // namespace

template <typename B>
class StoreContract : public ::testing::Test {
 protected:
  B backend;
};

using Backends =
    ::testing::Types<MemoryBackend, RedisBackend, RedisClusterBackend, RedisTlsBackend, RedisClusterTlsBackend>;
class BackendNames {
 public:
  template <typename T>
  static std::string GetName(int) {
    if (std::is_same_v<T, MemoryBackend>) return "Memory";
    if (std::is_same_v<T, RedisBackend>) return "Redis";
    if (std::is_same_v<T, RedisTlsBackend>) return "RedisOverTls";
    if (std::is_same_v<T, RedisClusterTlsBackend>) return "RedisOverTlsOnCluster";
    return "RedisOnCluster";
  }
};
TYPED_TEST_SUITE(StoreContract, Backends, BackendNames);

TYPED_TEST(StoreContract, AnUnknownGroupLoadsEmptyAtRevisionZero) {
  auto pod = this->backend.pod();
  auto r = pod->load(kKey);
  ASSERT_TRUE(r.ok()) << r.error.message;
  EXPECT_FALSE(r.value->exists);
  EXPECT_EQ(r.value->state.storeRevision, 0);
  EXPECT_EQ(r.value->state.streamPrefix, "orders");
  EXPECT_FALSE(r.value->rollback.detected);
}

TYPED_TEST(StoreContract, ACreatedGroupLoadsBackEqual) {
  auto pod = this->backend.pod();
  const auto s = sample_group();
  auto w = pod->compare_and_set(create(kKey, s));
  ASSERT_TRUE(w.ok()) << w.error.message;
  EXPECT_EQ(w.value->status, CasStatus::Written);
  EXPECT_EQ(w.value->revision, 1);
  auto r = pod->load(kKey);
  ASSERT_TRUE(r.ok()) << r.error.message;
  EXPECT_TRUE(r.value->exists);
  EXPECT_EQ(r.value->state.storeRevision, 1);
  expect_same_state(r.value->state, s);
  EXPECT_FALSE(r.value->state.members.at("a").revoking.empty());
  EXPECT_TRUE(r.value->state.members.at("a").lastResponse.has_value());
}

// The group's assignor and shard racks and each member's rack live in the store.
TYPED_TEST(StoreContract, TheAssignorShardRacksAndMemberRacksAreStored) {
  auto pod = this->backend.pod();
  auto s = sample_group();
  s.assignor = rsc::protocol::AssignorKind::Range;
  s.shardRacks = {"z1", "z2", "", "z1", "z2", "z1"};
  s.members.at("b").rackId = "z2";
  auto w = pod->compare_and_set(create(kKey, s));
  ASSERT_TRUE(w.ok()) << w.error.message;
  auto r = pod->load(kKey);
  ASSERT_TRUE(r.ok()) << r.error.message;
  EXPECT_EQ(r.value->state.assignor, rsc::protocol::AssignorKind::Range);
  EXPECT_EQ(r.value->state.shardRacks, s.shardRacks);
  EXPECT_TRUE(r.value->state.streamRacks.empty());
  EXPECT_EQ(r.value->state.members.at("b").rackId, "z2");
  EXPECT_EQ(r.value->state.members.at("a").rackId, "");
  expect_same_state(r.value->state, s);
  // A co-partitioned group's link, written with the group's fields and read back.
  auto linked = r.value->state;
  linked.assignor = rsc::protocol::AssignorKind::CoPartitioned;
  linked.coPartitionedWith = rsc::protocol::GroupKey{"payments", "billing"};
  rsc::group::Delta d;
  d.group = true;
  CasRequest c{kKey, linked.storeRevision, &linked, &d};
  auto w2 = pod->compare_and_set(c);
  ASSERT_TRUE(w2.ok()) << w2.error.message;
  ASSERT_EQ(w2.value->status, CasStatus::Written);
  auto r2 = pod->load(kKey);
  ASSERT_TRUE(r2.ok()) << r2.error.message;
  EXPECT_EQ(r2.value->state.assignor, rsc::protocol::AssignorKind::CoPartitioned);
  EXPECT_EQ(r2.value->state.coPartitionedWith, linked.coPartitionedWith);
  // The copy of the stream's racks the group took with its metadata version.
  auto copied = r2.value->state;
  copied.streamRacks = {"z2", "", "z1"};
  CasRequest c3{kKey, copied.storeRevision, &copied, &d};
  ASSERT_EQ(pod->compare_and_set(c3).value->status, CasStatus::Written);
  auto r3 = pod->load(kKey);
  ASSERT_TRUE(r3.ok()) << r3.error.message;
  EXPECT_EQ(r3.value->state.streamRacks, copied.streamRacks);
  EXPECT_EQ(r3.value->state.shardRacks, s.shardRacks) << "the group's own, apart";
}

// A stream's shard racks are part of its metadata, set through the scale step's
// rules (a change bumps metadataVersion, so every group learns it the way it learns a new count;
// the same racks again change nothing), and kept across a later scale.
// The lag snapshot is written field by field (changed groups, dropped groups, or replaced
// whole by a pod that does not know what is there) and read back a few fields at a time.
TYPED_TEST(StoreContract, TheLagSnapshotIsWrittenByFieldAndReadBackForTheGroupsAsked) {
  auto pod = this->backend.pod();
  auto none = pod->read_lag_snapshot("orders", {"a"}, false);
  ASSERT_TRUE(none.ok()) << none.error.message;
  EXPECT_FALSE(none.value->atMs.has_value()) << "no round wrote it yet";
  ASSERT_EQ(none.value->values.size(), 1u);
  EXPECT_FALSE(none.value->values[0].has_value());
  StreamStore::LagSnapshotWrite w;
  w.atMs = 1000;
  w.shards = "1,3,1-0,3-0,0;0,,,,0";
  w.positions = {{"a", "2-0,2,1,1,0;"}, {"b", ";"}};
  w.sums = {{"a", "1,1,1"}, {"b", "0,2,0"}};
  w.replace = true;
  ASSERT_TRUE(pod->write_lag_snapshot("orders", w).ok());
  auto r = pod->read_lag_snapshot("orders", {"b", "a", "zz"}, false);
  ASSERT_TRUE(r.ok()) << r.error.message;
  EXPECT_EQ(r.value->atMs, 1000);
  EXPECT_EQ(r.value->shards, w.shards);
  EXPECT_EQ(r.value->values, (std::vector<std::optional<std::string>>{";", "2-0,2,1,1,0;", std::nullopt}));
  auto s = pod->read_lag_snapshot("orders", {"a", "b"}, true);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s.value->atMs, 1000);
  EXPECT_EQ(s.value->values, (std::vector<std::optional<std::string>>{"1,1,1", "0,2,0"}));
  // A later round: a changed, b gone; c new.
  StreamStore::LagSnapshotWrite next;
  next.atMs = 2000;
  next.shards = w.shards;
  next.positions = {{"a", "3-0,3,0,0,0;"}, {"c", ";"}};
  next.sums = {{"a", "0,1,0"}, {"c", "0,2,0"}};
  next.removed = {"b"};
  ASSERT_TRUE(pod->write_lag_snapshot("orders", next).ok());
  r = pod->read_lag_snapshot("orders", {"a", "b", "c"}, false);
  EXPECT_EQ(r.value->atMs, 2000);
  EXPECT_EQ(r.value->values, (std::vector<std::optional<std::string>>{"3-0,3,0,0,0;", std::nullopt, ";"}));
  // Another pod, knowing nothing, replaces it: what it does not give is gone, from both hashes.
  StreamStore::LagSnapshotWrite whole;
  whole.atMs = 3000;
  whole.shards = "1,0,,3-0,3";
  whole.positions = {{"c", "3-0,3,0,0,0"}};
  whole.sums = {{"c", "0,0,0"}};
  whole.replace = true;
  ASSERT_TRUE(this->backend.pod()->write_lag_snapshot("orders", whole).ok());
  r = pod->read_lag_snapshot("orders", {"a", "c"}, false);
  EXPECT_EQ(r.value->values, (std::vector<std::optional<std::string>>{std::nullopt, "3-0,3,0,0,0"}));
  s = pod->read_lag_snapshot("orders", {"a", "c"}, true);
  EXPECT_EQ(s.value->values, (std::vector<std::optional<std::string>>{std::nullopt, "0,0,0"}));
  EXPECT_EQ(s.value->atMs, 3000);
  // Many groups: written in several commands, read back.
  StreamStore::LagSnapshotWrite many;
  many.atMs = 4000;
  many.shards = "1,0,,,0";
  std::vector<std::string> names;
  for (int i = 0; i < 1500; ++i) {
    names.push_back("g" + std::to_string(i));
    many.positions.emplace_back(names.back(), std::to_string(i) + "-0,,,0,0");
    many.sums.emplace_back(names.back(), "0,1,0");
  }
  many.replace = true;
  ASSERT_TRUE(pod->write_lag_snapshot("orders", many).ok());
  r = pod->read_lag_snapshot("orders", names, false);
  ASSERT_EQ(r.value->values.size(), 1500u);
  EXPECT_EQ(r.value->values[1499], "1499-0,,,0,0");
  EXPECT_EQ(pod->read_lag_snapshot("orders", {"c"}, false).value->values[0], std::nullopt);
}

TYPED_TEST(StoreContract, AStreamsShardRacksAreStoredWithItsMetadataAndBumpItsVersion) {
  auto pod = this->backend.pod();
  ASSERT_TRUE(pod->put_stream("orders", 4).ok());
  const auto v0 = (*pod->get_stream("orders").value)->metadataVersion;
  group::ScaleCall set;
  set.op = group::ScaleOp::SetRacks;
  set.racks = {"eu-1a", "", "eu-1b"};
  auto r = pod->scale_stream("orders", set);
  ASSERT_TRUE(r.ok()) << r.error.message;
  EXPECT_EQ(r.value->outcome, group::ScaleOutcome::RacksSet);
  auto m = **pod->get_stream("orders").value;
  EXPECT_EQ(m.metadataVersion, v0 + 1);
  EXPECT_EQ(m.shardRacks, set.racks);
  EXPECT_EQ(m.shardRacksFrom, "");
  EXPECT_EQ(m.shardCount, 4);
  EXPECT_FALSE(m.migration.has_value()) << "no migration: the routing did not change";
  EXPECT_EQ(pod->scale_stream("orders", set).value->outcome, group::ScaleOutcome::Same);
  EXPECT_EQ((*pod->get_stream("orders").value)->metadataVersion, v0 + 1);
  set.racks = {"", "", "", "eu-1c"};  // one shard with a rack; the rule's name kept with them
  set.racksFrom = rsc::protocol::kShardRacksFromClusterZones;
  ASSERT_EQ(pod->scale_stream("orders", set).value->outcome, group::ScaleOutcome::RacksSet);
  group::ScaleCall grow;
  grow.target = 6;
  ASSERT_EQ(pod->scale_stream("orders", grow).value->outcome, group::ScaleOutcome::Grown);
  m = **pod->get_stream("orders").value;
  EXPECT_EQ(m.shardRacks, set.racks);
  EXPECT_EQ(m.shardRacksFrom, rsc::protocol::kShardRacksFromClusterZones);
  EXPECT_EQ(m.metadataVersion, v0 + 3);
  set.racks = {""};  // one shard with none: read back as written, not as none at all
  set.racksFrom.clear();
  ASSERT_EQ(pod->scale_stream("orders", set).value->outcome, group::ScaleOutcome::RacksSet);
  EXPECT_EQ((*pod->get_stream("orders").value)->shardRacks, std::vector<std::string>{""});
  set.racks.clear();
  ASSERT_EQ(pod->scale_stream("orders", set).value->outcome, group::ScaleOutcome::RacksSet);
  m = **pod->get_stream("orders").value;
  EXPECT_TRUE(m.shardRacks.empty());
  EXPECT_EQ(m.metadataVersion, v0 + 5);
}

TYPED_TEST(StoreContract, AStaleRevisionIsAConflictCarryingTheCurrentState) {
  auto pod = this->backend.pod();
  const auto s = sample_group();
  ASSERT_TRUE(pod->compare_and_set(create(kKey, s)).ok());
  auto again = pod->compare_and_set(create(kKey, s));  // expects 0, store is at 1
  ASSERT_TRUE(again.ok()) << again.error.message;
  EXPECT_EQ(again.value->status, CasStatus::Conflict);
  EXPECT_EQ(again.value->revision, 1);
  ASSERT_TRUE(again.value->current.has_value());
  expect_same_state(*again.value->current, s);
  EXPECT_EQ(pod->load(kKey).value->state.storeRevision, 1) << "a conflict writes nothing";
}

// A pod about to answer from its copy with nothing to write asks whether the copy is current.
TYPED_TEST(StoreContract, ARevisionCheckWritesNothingAndCarriesTheCurrentStateWhenTheCopyIsStale) {
  auto podA = this->backend.pod();
  auto podB = this->backend.pod();
  const auto s = sample_group();
  ASSERT_TRUE(podA->compare_and_set(create(kKey, s)).ok());
  CasRequest check = create(kKey, s);
  check.expectedRevision = 1;
  check.verifyOnly = true;
  auto current = podB->compare_and_set(check);
  ASSERT_TRUE(current.ok()) << current.error.message;
  EXPECT_EQ(current.value->status, CasStatus::Written);
  EXPECT_EQ(current.value->revision, 1) << "current: the revision is confirmed, not moved";
  EXPECT_EQ(podA->load(kKey).value->state.storeRevision, 1);
  auto moved = s;
  moved.groupEpoch += 3;
  ASSERT_EQ(podA->compare_and_set(update(kKey, moved, 1)).value->status, CasStatus::Written);
  auto stale = podB->compare_and_set(check);  // pod B's copy is at 1, the store at 2
  ASSERT_TRUE(stale.ok()) << stale.error.message;
  EXPECT_EQ(stale.value->status, CasStatus::Conflict);
  EXPECT_EQ(stale.value->revision, 2);
  EXPECT_FALSE(stale.value->current.has_value()) << "the caller loads the state it needs";
  EXPECT_EQ(podA->load(kKey).value->state.storeRevision, 2) << "a check writes nothing";
}

TYPED_TEST(StoreContract, ADeltaWritesOnlyWhatChangedAndDeletesRemovedMembers) {
  auto pod = this->backend.pod();
  auto s = sample_group();
  ASSERT_TRUE(pod->compare_and_set(create(kKey, s)).ok());
  auto before = this->backend.raw(kKey);
  // b's lease moves; c is removed; a is changed in memory but not in the delta.
  auto next = s;
  next.members.at("b").lastHeartbeatMs += 1000;
  next.members.at("a").lastHeartbeatMs += 5000;
  next.members.erase("c");
  group::Delta d;
  d.upserted = {"b"};
  d.removed = {"c"};
  CasRequest r{kKey, 1, &next, &d};
  auto w = pod->compare_and_set(r);
  ASSERT_TRUE(w.ok()) << w.error.message;
  ASSERT_EQ(w.value->status, CasStatus::Written);
  auto after = this->backend.raw(kKey);
  EXPECT_EQ(after.at("g"), before.at("g"));
  EXPECT_EQ(after.at("m:a"), before.at("m:a")) << "not in the delta, not written";
  EXPECT_NE(after.at("m:b"), before.at("m:b"));
  EXPECT_EQ(after.count("m:c"), 0u);
  EXPECT_EQ(after.at("rev"), "2");
}

TYPED_TEST(StoreContract, TheMutexIsExclusiveAndOnlyItsHolderMayRenewOrReleaseIt) {
  auto p1 = this->backend.pod();
  auto p2 = this->backend.pod();
  const auto t1 = random_token(), t2 = random_token();
  EXPECT_EQ(t1.size(), 32u) << "128 bits in hex";
  EXPECT_NE(t1, t2);
  EXPECT_TRUE(take_mutex(*p1, t1));
  EXPECT_FALSE(take_mutex(*p2, t2));
  release_mutex(*p2, t2);
  EXPECT_FALSE(take_mutex(*p2, t2)) << "a foreign release must not free it";
  EXPECT_TRUE(take_mutex(*p1, t1)) << "its holder renews it";
  release_mutex(*p1, t1);
  EXPECT_TRUE(take_mutex(*p2, t2)) << "its holder's release frees it";
}

TYPED_TEST(StoreContract, AWriteWhileAnotherPodHoldsTheMutexIsRefused) {
  auto p1 = this->backend.pod();
  auto p2 = this->backend.pod();
  const auto s = sample_group();
  ASSERT_TRUE(take_mutex(*p2, "pod-2-token"));
  auto req = create(kKey, s);
  req.lockToken = "pod-1-token";
  auto w = p1->compare_and_set(req);
  ASSERT_TRUE(w.ok()) << w.error.message;
  EXPECT_EQ(w.value->status, CasStatus::Locked);
  EXPECT_FALSE(p1->load(kKey).value->exists);
}

TYPED_TEST(StoreContract, AWriteTakesAndExtendsTheMutexForItsPod) {
  auto p1 = this->backend.pod();
  auto p2 = this->backend.pod();
  const auto s = sample_group();
  auto req = create(kKey, s);
  req.lockToken = "pod-1-token";
  req.lockTtlMs = 5000;
  ASSERT_EQ(p1->compare_and_set(req).value->status, CasStatus::Written);
  EXPECT_FALSE(take_mutex(*p2, "pod-2-token"));
  release_mutex(*p1, "pod-1-token");
  EXPECT_TRUE(take_mutex(*p2, "pod-2-token")) << "the writer's release frees it";
}

TYPED_TEST(StoreContract, OnePodAtATimeHoldsTheTickLeaseAndLearnsWhetherTheGroupMoved) {
  auto p1 = this->backend.pod();
  auto p2 = this->backend.pod();
  auto t = p1->tick_lease(kKey, "pod-1", 5000, 0);
  ASSERT_TRUE(t.ok()) << t.error.message;
  EXPECT_EQ(t.value->status, LeaseStatus::Unchanged) << "no group yet: revision 0 is current";
  EXPECT_EQ(p2->tick_lease(kKey, "pod-2", 5000, 0).value->status, LeaseStatus::NotHolder);
  const auto s = sample_group();
  ASSERT_EQ(p2->compare_and_set(create(kKey, s)).value->status, CasStatus::Written);
  auto moved = p1->tick_lease(kKey, "pod-1", 5000, 0);
  ASSERT_EQ(moved.value->status, LeaseStatus::Changed);
  EXPECT_EQ(moved.value->revision, 1);
  ASSERT_TRUE(moved.value->loaded.has_value());
  expect_same_state(moved.value->loaded->state, s);
  EXPECT_EQ(p1->tick_lease(kKey, "pod-1", 5000, 1).value->status, LeaseStatus::Unchanged);
}

TYPED_TEST(StoreContract, DeadlineWorkHoldsTheGroupMutexAndReleasesItWhenDone) {
  auto p1 = this->backend.pod();
  auto p2 = this->backend.pod();
  ASSERT_EQ(p1->tick_lease(kKey, "pod-1", 5000, 0).value->status, LeaseStatus::Unchanged);
  EXPECT_FALSE(take_mutex(*p2, "pod-2")) << "the lease is the group mutex";
  ASSERT_TRUE(p1->finish_deadline_work(kKey, "pod-1", std::nullopt, 0).ok());
  EXPECT_NE(p2->tick_lease(kKey, "pod-2", 5000, 0).value->status, LeaseStatus::NotHolder) << "released when done";
}

TYPED_TEST(StoreContract, TheDeadlineIndexIsLoweredByWritersAndSetOnlyFromTheNewestRevision) {
  auto p1 = this->backend.pod();
  auto p2 = this->backend.pod();
  auto s = sample_group();
  auto req = create(kKey, s);
  req.lowerDeadlineTo = 5000;
  ASSERT_EQ(p1->compare_and_set(req).value->status, CasStatus::Written);
  auto beat = p1->pod_beat("", 1000, 100);
  ASSERT_TRUE(beat.ok()) << beat.error.message;
  const Millis now = beat.value->storeTimeMs;
  // The owner looked at revision 1 and set the next deadline far ahead...
  ASSERT_TRUE(*p2->finish_deadline_work(kKey, "", now + 60'000, 1).value);
  EXPECT_TRUE(p1->pod_beat("", 1000, 100).value->due.empty());
  // ...a writer at revision 2 brings it earlier (before its write, so even a lost write is safe)...
  auto w = update(kKey, s, 1);
  w.lowerDeadlineTo = now - 1;
  ASSERT_EQ(p1->compare_and_set(w).value->status, CasStatus::Written);
  // ...and an owner still working from revision 1 cannot push it back.
  EXPECT_FALSE(*p2->finish_deadline_work(kKey, "", now + 60'000, 1).value);
  auto due = p1->pod_beat("", 1000, 100).value->due;
  ASSERT_EQ(due.size(), 1u);
  EXPECT_EQ(due[0], kKey);
  // From revision 2 the owner may set it, or remove it when nothing is ever due.
  EXPECT_TRUE(*p2->finish_deadline_work(kKey, "", std::nullopt, 2).value);
  EXPECT_TRUE(p1->pod_beat("", 1000, 100).value->due.empty());
}

TYPED_TEST(StoreContract, PodsAreLiveForTheirLeaseOnTheStoresClock) {
  auto p1 = this->backend.pod();
  auto a = p1->pod_beat("pod-a", 60'000, 10);
  ASSERT_TRUE(a.ok()) << a.error.message;
  EXPECT_GT(a.value->storeTimeMs, 1'600'000'000'000) << "the store's clock, in ms";
  auto b = p1->pod_beat("pod-b", 1, 10);
  EXPECT_EQ(b.value->livePods, (std::vector<std::string>{"pod-a", "pod-b"}));
  this->backend.wait_ms(20);
  EXPECT_EQ(p1->pod_beat("", 0, 10).value->livePods, (std::vector<std::string>{"pod-a"})) << "pod-b's lease ran out";
  EXPECT_TRUE(*p1->pod_leave("pod-a").value);
  EXPECT_TRUE(p1->pod_beat("", 0, 10).value->livePods.empty());
}

TYPED_TEST(StoreContract, AGroupMarkedDueIsDueThenButNeverLater) {
  auto p1 = this->backend.pod();
  auto now = p1->pod_beat("", 0, 10).value->storeTimeMs;
  const GroupKey other{"orders", "elsewhere"};
  ASSERT_TRUE(p1->mark_due(other, now - 5).ok());
  auto due = p1->pod_beat("", 0, 10).value->due;
  ASSERT_EQ(due.size(), 1u);
  EXPECT_EQ(due[0].str(), other.str());
  ASSERT_TRUE(p1->mark_due(other, now + 3'600'000).ok());
  EXPECT_EQ(p1->pod_beat("", 0, 10).value->due.size(), 1u) << "still due: marking never moves a deadline later";
}

// group::PodAuthority's input: a registration made while no other pod was live counts at once
// (minus its time, so that a registration made afresh is told apart); one made among others from
// its time. Renewals keep it; leaving and running out forget it.
TYPED_TEST(StoreContract, ARegistrationCountsFromItsTimeUnlessThePodWasAlone) {
  auto p1 = this->backend.pod();
  auto a = p1->pod_beat("pod-a", 60'000, 10);
  ASSERT_TRUE(a.ok()) << a.error.message;
  ASSERT_EQ(a.value->since.size(), 1u);
  EXPECT_EQ(a.value->since[0], -a.value->storeTimeMs) << "alone: counts at once";
  auto b = p1->pod_beat("pod-b", 60'000, 10);
  ASSERT_EQ(b.value->livePods, (std::vector<std::string>{"pod-a", "pod-b"}));
  EXPECT_EQ(b.value->since, (std::vector<group::Millis>{-a.value->storeTimeMs, b.value->storeTimeMs}));
  this->backend.wait_ms(5);
  auto again = p1->pod_beat("pod-b", 60'000, 10);
  EXPECT_EQ(again.value->since, b.value->since) << "a renewal is the same registration";
  EXPECT_TRUE(*p1->pod_leave("pod-a").value);
  this->backend.wait_ms(5);
  auto back = p1->pod_beat("pod-a", 60'000, 10);
  EXPECT_EQ(back.value->since, (std::vector<group::Millis>{back.value->storeTimeMs, b.value->storeTimeMs}))
      << "registered again among others: counts from then";
  // pod-c's registration runs out: it is forgotten with its time.
  auto c = p1->pod_beat("pod-c", 1, 10, "127.0.0.1:9003");
  EXPECT_EQ(c.value->addresses, (std::vector<std::string>{"", "", "127.0.0.1:9003"})) << "kept with the registration";
  this->backend.wait_ms(20);
  auto seen = p1->pod_beat("", 0, 10);
  EXPECT_EQ(seen.value->livePods, (std::vector<std::string>{"pod-a", "pod-b"}));
  EXPECT_EQ(seen.value->since.size(), 2u);
  EXPECT_EQ(c.value->since.back(), c.value->storeTimeMs);
  auto b2 = p1->pod_beat("pod-b", 60'000, 10, "127.0.0.1:9002");
  EXPECT_EQ(b2.value->addresses, (std::vector<std::string>{"", "127.0.0.1:9002"}));
  EXPECT_EQ(b2.value->since[1], b.value->since[1]) << "a new address keeps the registration's time";
  EXPECT_EQ(p1->pod_beat("pod-b", 60'000, 10).value->addresses, b2.value->addresses) << "kept while not sent again";
  EXPECT_TRUE(*p1->pod_leave("pod-b").value);
  EXPECT_EQ(p1->pod_beat("pod-b", 60'000, 10).value->addresses, (std::vector<std::string>{"", ""}))
      << "leaving forgets the address";
}

TYPED_TEST(StoreContract, ADeletedGroupIsGoneFromEveryIndexButItsRevisionNeverGoesBack) {
  auto pod = this->backend.pod();
  const auto s = sample_group();
  auto req = create(kKey, s);
  req.lowerDeadlineTo = 1;
  ASSERT_EQ(pod->compare_and_set(req).value->status, CasStatus::Written);
  EXPECT_EQ(*pod->count_stream_groups("orders").value, 1);
  EXPECT_EQ(*pod->delete_group(kKey, 0).value, DeleteStatus::Conflict) << "only at the revision it was judged at";
  EXPECT_EQ(*pod->delete_group(kKey, 1).value, DeleteStatus::Deleted);
  EXPECT_EQ(*pod->delete_group(kKey, 2).value, DeleteStatus::NotFound);
  auto l = pod->load(kKey);
  ASSERT_TRUE(l.ok()) << l.error.message;
  EXPECT_FALSE(l.value->exists);
  EXPECT_EQ(l.value->state.storeRevision, 2);
  EXPECT_FALSE(l.value->rollback.detected);
  EXPECT_TRUE(pod->list_groups().value->empty());
  EXPECT_EQ(*pod->count_stream_groups("orders").value, 0);
  EXPECT_TRUE(pod->pod_beat("", 0, 10).value->due.empty());
  // Created again: it continues from the kept revision and is listed again.
  auto again = create(kKey, s);
  again.expectedRevision = 2;
  ASSERT_EQ(pod->compare_and_set(again).value->status, CasStatus::Written);
  EXPECT_EQ(pod->load(kKey).value->state.storeRevision, 3);
  EXPECT_EQ(pod->list_groups().value->size(), 1u);
}

// A group deleted while fenced members may still read (their quarantine) leaves the time until
// which a group created again under its name hands out no shard; the conflict answer of a write
// that raced the delete reads the remnant as "no group" too.
TYPED_TEST(StoreContract, ADeletedGroupLeavesItsGrantHoldForTheGroupCreatedAgain) {
  auto pod = this->backend.pod();
  const auto s = sample_group();
  ASSERT_EQ(pod->compare_and_set(create(kKey, s)).value->status, CasStatus::Written);
  ASSERT_EQ(*pod->delete_group(kKey, 1, 1'700'000'123'456).value, DeleteStatus::Deleted);
  auto l = pod->load(kKey);
  ASSERT_TRUE(l.ok()) << l.error.message;
  EXPECT_FALSE(l.value->exists);
  EXPECT_EQ(l.value->state.storeRevision, 2);
  EXPECT_EQ(l.value->state.rollbackGuardUntilMs, 1'700'000'123'456);
  auto stale = create(kKey, s);
  stale.expectedRevision = 1;
  auto c = pod->compare_and_set(stale);
  ASSERT_TRUE(c.ok()) << c.error.message;
  EXPECT_EQ(c.value->status, CasStatus::Conflict);
  EXPECT_FALSE(c.value->current.has_value()) << "a remnant is no group";
  // Created again from the loaded state: the hold is part of it and is written with it.
  auto next = l.value->state;
  next.groupEpoch = 1;
  auto again = create(kKey, next);
  again.expectedRevision = 2;
  ASSERT_EQ(pod->compare_and_set(again).value->status, CasStatus::Written);
  EXPECT_EQ(pod->load(kKey).value->state.rollbackGuardUntilMs, 1'700'000'123'456);
  // Without a hold, nothing is left but the revision.
  ASSERT_EQ(*pod->delete_group(kKey, 3).value, DeleteStatus::Deleted);
  EXPECT_EQ(pod->load(kKey).value->state.rollbackGuardUntilMs, 0);
}

TYPED_TEST(StoreContract, GroupsWithoutADeadlineEntryAreIndexedOnce) {
  auto pod = this->backend.pod();
  for (const GroupKey& k : {GroupKey{"orders", "a"}, GroupKey{"orders", "b"}})
    ASSERT_EQ(pod->compare_and_set(create(k, sample_group(k))).value->status, CasStatus::Written);
  EXPECT_EQ(*pod->index_missing_deadlines(7).value, 2);
  EXPECT_EQ(*pod->index_missing_deadlines(7).value, 0);
  EXPECT_EQ(pod->pod_beat("", 0, 10).value->due.size(), 2u);
}

TYPED_TEST(StoreContract, AWriteWithLockTtlZeroOnlyChecksTheMutex) {
  auto p1 = this->backend.pod();
  auto p2 = this->backend.pod();
  const auto s = sample_group();
  auto req = create(kKey, s);
  req.lockToken = "pod-1-token";
  req.lockTtlMs = 0;
  ASSERT_EQ(p1->compare_and_set(req).value->status, CasStatus::Written);
  EXPECT_TRUE(take_mutex(*p2, "pod-2-token")) << "the heartbeat write left the mutex free";
}

TYPED_TEST(StoreContract, EveryCreatedGroupIsListed) {
  auto pod = this->backend.pod();
  for (const GroupKey& k : {GroupKey{"orders", "billing"}, GroupKey{"orders", "audit"}, GroupKey{"clicks", "etl"}}) {
    const auto s = sample_group(k);
    ASSERT_EQ(pod->compare_and_set(create(k, s)).value->status, CasStatus::Written);
  }
  auto all = pod->list_groups();
  ASSERT_TRUE(all.ok()) << all.error.message;
  ASSERT_EQ(all.value->size(), 3u);
  auto orders = pod->list_stream_groups("orders");
  ASSERT_TRUE(orders.ok());
  EXPECT_EQ(*orders.value, (std::vector<std::string>{"audit", "billing"}));
}

// A change of the shard count follows group::scale_step's rules, atomically in the store
// (a Lua script beside the stream's metadata in Redis): each step is compared with the pure rules
// applied to the stream as it was (times aside: the store's clock).
TYPED_TEST(StoreContract, ScaleShrinkRollbackRetireAndGrowFollowThePureRules) {
  auto pod = this->backend.pod();
  ASSERT_TRUE(pod->put_stream("orders", 8).ok());
  auto expect_step = [&](const group::ScaleCall& call, group::ScaleOutcome outcome) {
    const auto before = **pod->get_stream("orders").value;
    auto want = group::scale_step(before, call, 0);
    auto got = pod->scale_stream("orders", call);
    ASSERT_TRUE(got.ok()) << got.error.message;
    EXPECT_EQ(got.value->outcome, outcome);
    EXPECT_EQ(want.outcome, outcome);
    auto wantMeta = want.meta;
    if (wantMeta.migration && got.value->meta.migration) {  // the store's clock
      EXPECT_GT(got.value->meta.migration->updatedAtMs, 1'600'000'000'000) << "Redis's clock, in ms";
      wantMeta.migration->createdAtMs = got.value->meta.migration->createdAtMs;
      wantMeta.migration->updatedAtMs = got.value->meta.migration->updatedAtMs;
    }
    if (wantMeta.retiredKeysTo > 0) wantMeta.retiredAtMs = got.value->meta.retiredAtMs;
    EXPECT_EQ(got.value->meta, wantMeta) << "after " << group::to_string(outcome);
    EXPECT_EQ(**pod->get_stream("orders").value, got.value->meta) << "read back as answered";
  };
  group::ScaleCall shrink;
  shrink.target = 2;
  shrink.requestedBy = "ops";
  shrink.reason = "quiet";
  expect_step(shrink, group::ScaleOutcome::Draining);
  auto m = **pod->get_stream("orders").value;
  EXPECT_EQ(m.shardCount, 2);
  EXPECT_EQ(m.readShardCount(), 8);
  EXPECT_EQ(m.migration->requestedBy, "ops");
  auto listed = pod->draining_streams();
  ASSERT_TRUE(listed.ok());
  EXPECT_EQ(*listed.value, std::vector<std::string>{"orders"});
  // One change at a time: another scale and a growth by PUT are refused, nothing written.
  shrink.target = 1;
  expect_step(shrink, group::ScaleOutcome::Busy);
  // The growth's refusal is the scale's (Busy, 409 ACTIVE_MIGRATION_EXISTS), not a bare conflict.
  auto grow = pod->write_stream("orders", StreamPut{12, std::nullopt, false});
  ASSERT_TRUE(grow.ok()) << grow.error.message;
  EXPECT_EQ(grow.value->outcome, StreamWrite::Outcome::Busy);
  EXPECT_EQ(grow.value->meta.shardCount, 2);
  EXPECT_EQ((*pod->get_stream("orders").value)->shardCount, 2) << "nothing written";
  group::ScaleCall rollback;
  rollback.op = group::ScaleOp::Rollback;
  expect_step(rollback, group::ScaleOutcome::RolledBack);
  EXPECT_EQ((*pod->get_stream("orders").value)->shardCount, 8);
  expect_step(rollback, group::ScaleOutcome::NothingToRollBack);
  // Scale to zero, retired only at the version it was judged at; then back up.
  shrink.target = 0;
  expect_step(shrink, group::ScaleOutcome::Draining);
  group::ScaleCall retire;
  retire.op = group::ScaleOp::Retire;
  retire.expectedVersion = (*pod->get_stream("orders").value)->metadataVersion - 1;
  expect_step(retire, group::ScaleOutcome::Stale);
  retire.expectedVersion += 1;
  expect_step(retire, group::ScaleOutcome::Retired);
  EXPECT_EQ((*pod->get_stream("orders").value)->readShardCount(), 0);
  EXPECT_TRUE(pod->forget_draining("orders").value.value_or(false));
  EXPECT_TRUE(pod->draining_streams().value->empty());
  shrink.target = 8;
  expect_step(shrink, group::ScaleOutcome::Grown);
  shrink.target = 8;
  expect_step(shrink, group::ScaleOutcome::Same);
  auto none = pod->scale_stream("clicks", shrink);
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.error.message.find("does not exist"), std::string::npos);
}

// Retired shards' streams: their deletion is marked (growth waits, by scale or PUT), the streams
// and each group's consumer group on them go, and a growth after it creates them anew.
TYPED_TEST(StoreContract, RetiredShardStreamsAreDeletedOnlyUnderTheMarkAndComeBackEmpty) {
  auto pod = this->backend.pod();
  ASSERT_TRUE(pod->put_stream("orders", 8).ok());
  const GroupKey billing{"orders", "billing"}, audit{"orders", "audit"};
  ASSERT_EQ(*pod->provision(billing, 8, "0").value, 8);
  ASSERT_EQ(*pod->provision(audit, 8, "0").value, 8);
  group::ScaleCall call;
  call.target = 3;
  ASSERT_EQ(pod->scale_stream("orders", call).value->outcome, group::ScaleOutcome::Draining);
  call.op = group::ScaleOp::Retire;
  call.expectedVersion = (*pod->get_stream("orders").value)->metadataVersion;
  auto retired = pod->scale_stream("orders", call);
  ASSERT_EQ(retired.value->outcome, group::ScaleOutcome::Retired);
  const auto r = retired.value->meta;
  EXPECT_EQ(r.retiredKeysTo, 8);
  EXPECT_EQ(r.retiredKeys(), 5);
  EXPECT_GT(r.retiredAtMs, 1'600'000'000'000) << "the store's clock";
  EXPECT_EQ(**pod->get_stream("orders").value, r) << "read back";
  call.op = group::ScaleOp::DeleteRetired;
  call.expectedVersion = r.metadataVersion - 1;
  EXPECT_EQ(pod->scale_stream("orders", call).value->outcome, group::ScaleOutcome::Stale);
  call.expectedVersion = r.metadataVersion;
  auto mark = pod->scale_stream("orders", call);
  ASSERT_EQ(mark.value->outcome, group::ScaleOutcome::Deleting);
  EXPECT_TRUE(mark.value->meta.deletingRetired);
  EXPECT_EQ(mark.value->meta.metadataVersion, r.metadataVersion);
  // Meanwhile no count change: growth by PUT is told to retry, a scale is busy.
  auto put = pod->put_stream("orders", 8);
  ASSERT_FALSE(put.ok());
  EXPECT_EQ(put.error.kind, ErrorKind::Retryable);
  EXPECT_NE(put.error.message.find("deleting the streams of its retired shards"), std::string::npos) << put.error.message;
  group::ScaleCall grow;
  grow.target = 8;
  EXPECT_EQ(pod->scale_stream("orders", grow).value->outcome, group::ScaleOutcome::Busy);
  auto gone = pod->delete_shard_streams("orders", r.keyStyle, 3, 8);
  ASSERT_TRUE(gone.ok()) << gone.error.message;
  EXPECT_EQ(*gone.value, 5);
  call.op = group::ScaleOp::RetiredDeleted;
  auto done = pod->scale_stream("orders", call);
  ASSERT_EQ(done.value->outcome, group::ScaleOutcome::KeysDeleted);
  EXPECT_EQ(done.value->meta.retiredKeys(), 0);
  EXPECT_FALSE((*pod->get_stream("orders").value)->deletingRetired);
  EXPECT_EQ(*pod->delete_shard_streams("orders", r.keyStyle, 3, 8).value, 0) << "nothing left there";
  // Shards 0..2 untouched; back to 8: 3..7 come back without their old consumer groups.
  EXPECT_EQ(*pod->provision(billing, 3, "0").value, 0);
  ASSERT_EQ(pod->scale_stream("orders", grow).value->outcome, group::ScaleOutcome::Grown);
  EXPECT_EQ(*pod->provision(billing, 8, "0").value, 5);
  EXPECT_EQ(*pod->provision(audit, 8, "0").value, 5);
}

TYPED_TEST(StoreContract, StreamsAreCreatedAndGrowButNeverShrink) {
  auto pod = this->backend.pod();
  EXPECT_FALSE(pod->get_stream("orders").value->has_value());
  auto c = pod->put_stream("orders", 16);
  ASSERT_TRUE(c.ok()) << c.error.message;
  EXPECT_EQ(c.value->shardCount, 16);
  EXPECT_EQ(c.value->metadataVersion, 1);
  EXPECT_EQ(pod->put_stream("orders", 16).value->metadataVersion, 1);
  auto g = pod->put_stream("orders", 24);
  EXPECT_EQ(g.value->metadataVersion, 2);
  auto s = pod->put_stream("orders", 8);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error.kind, ErrorKind::Invalid);
  EXPECT_NE(s.error.message.find("only grow"), std::string::npos);
  auto m = pod->get_stream("orders");
  ASSERT_TRUE(m.value->has_value());
  EXPECT_EQ(m.value->value().shardCount, 24);
}

// The key style is chosen when a stream is created (plain unless asked) and never changes; POST's
// create-only write leaves an existing stream alone.
TYPED_TEST(StoreContract, AStreamsKeyStyleIsChosenAtCreationAndKept) {
  auto pod = this->backend.pod();
  auto plain = pod->write_stream("orders", StreamPut{4, std::nullopt, false});
  ASSERT_TRUE(plain.ok()) << plain.error.message;
  EXPECT_EQ(plain.value->outcome, StreamWrite::Outcome::Created);
  EXPECT_EQ(plain.value->meta.keyStyle, protocol::KeyStyle::Plain);
  auto tagged = pod->write_stream("audit", StreamPut{2, protocol::KeyStyle::HashTag, true});
  ASSERT_TRUE(tagged.ok()) << tagged.error.message;
  EXPECT_EQ(tagged.value->outcome, StreamWrite::Outcome::Created);
  EXPECT_EQ(pod->get_stream("audit").value->value().keyStyle, protocol::KeyStyle::HashTag);
  auto again = pod->write_stream("audit", StreamPut{9, std::nullopt, true});
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again.value->outcome, StreamWrite::Outcome::Exists);
  EXPECT_EQ(again.value->meta.shardCount, 2) << "create-only leaves it as it was";
  auto other = pod->write_stream("audit", StreamPut{3, protocol::KeyStyle::Plain, false});
  ASSERT_FALSE(other.ok());
  EXPECT_EQ(other.error.kind, ErrorKind::Invalid);
  EXPECT_NE(other.error.message.find("{audit:{shardIndex}}"), std::string::npos) << other.error.message;
  EXPECT_EQ(pod->get_stream("audit").value->value().shardCount, 2) << "refused: nothing stored";
  auto grown = pod->write_stream("audit", StreamPut{3, protocol::KeyStyle::HashTag, false});
  ASSERT_TRUE(grown.ok());
  EXPECT_EQ(grown.value->outcome, StreamWrite::Outcome::Grown);
  EXPECT_EQ(grown.value->meta.metadataVersion, 2);
  EXPECT_EQ(pod->write_stream("audit", StreamPut{3, std::nullopt, false}).value->outcome, StreamWrite::Outcome::Same);
}

// Provisioning creates every shard stream with the group's consumer group, in the stream's key
// style, and is idempotent.
TYPED_TEST(StoreContract, ProvisioningCreatesEveryShardsConsumerGroupOnce) {
  auto pod = this->backend.pod();
  ASSERT_TRUE(pod->write_stream("orders", StreamPut{3, std::nullopt, false}).ok());
  ASSERT_TRUE(pod->write_stream("audit", StreamPut{2, protocol::KeyStyle::HashTag, false}).ok());
  auto p = pod->provision({"orders", "billing"}, 3, "0");
  ASSERT_TRUE(p.ok()) << p.error.message;
  EXPECT_EQ(*p.value, 3);
  for (int i = 0; i < 3; ++i)
    EXPECT_TRUE(this->backend.has_consumer_group("orders:" + std::to_string(i), "billing")) << i;
  EXPECT_FALSE(this->backend.has_consumer_group("orders:3", "billing"));
  EXPECT_FALSE(this->backend.has_consumer_group("orders:0", "shipping"));
  EXPECT_EQ(*pod->provision({"orders", "billing"}, 3, "0").value, 0) << "a second time creates nothing";
  EXPECT_EQ(*pod->provision({"orders", "billing"}, 5, "0").value, 2) << "growth creates the new ones";
  ASSERT_TRUE(pod->provision({"audit", "billing"}, 2, "$").ok());
  EXPECT_TRUE(this->backend.has_consumer_group("{audit:1}", "billing"));
  EXPECT_FALSE(this->backend.has_consumer_group("audit:1", "billing"));
}

TYPED_TEST(StoreContract, ABatchOfWritesToManyGroupsIsAppliedInOneCall) {
  auto pod = this->backend.pod();
  std::vector<group::GroupState> states;
  std::vector<CasRequest> batch;
  for (int i = 0; i < 20; ++i) states.push_back(sample_group({"s", "g" + std::to_string(i)}));
  for (int i = 0; i < 20; ++i) batch.push_back(create({"s", "g" + std::to_string(i)}, states[i]));
  batch.push_back(create({"s", "g3"}, states[3]));  // the same group twice: the second conflicts
  auto out = pod->compare_and_set(batch);
  ASSERT_EQ(out.size(), 21u);
  for (int i = 0; i < 20; ++i) EXPECT_EQ(out[i].value->status, CasStatus::Written) << i;
  EXPECT_EQ(out[20].value->status, CasStatus::Conflict);
  EXPECT_EQ(pod->list_groups().value->size(), 20u);
}

TYPED_TEST(StoreContract, StreamsAreListedWhetherCreatedOrOnlyNamedByAGroup) {
  auto pod = this->backend.pod();
  EXPECT_TRUE(pod->list_streams().value->empty());
  ASSERT_TRUE(pod->write_stream("payments", StreamPut{4, std::nullopt, true}).ok());
  ASSERT_TRUE(pod->write_stream("audit", StreamPut{2, std::nullopt, false}).ok());
  ASSERT_TRUE(pod->compare_and_set(create(kKey, sample_group())).ok());  // stream "orders", never created
  EXPECT_EQ(*pod->list_streams().value, (std::vector<std::string>{"audit", "orders", "payments"}));
}

TYPED_TEST(StoreContract, ARevisionThatGoesBackIsDetectedOnceAndCounted) {
  auto pod = this->backend.pod();
  auto s = sample_group();
  ASSERT_TRUE(pod->compare_and_set(create(kKey, s)).ok());
  const auto old = this->backend.raw(kKey);
  auto next = s;
  next.groupEpoch += 2;
  ASSERT_EQ(pod->compare_and_set(CasRequest{kKey, 1, &next, nullptr}).value->status, CasStatus::Written);
  ASSERT_EQ(pod->compare_and_set(CasRequest{kKey, 2, &next, nullptr}).value->status, CasStatus::Written);
  this->backend.replace_raw(kKey, old);  // the store lost two writes
  auto r = pod->load(kKey);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r.value->rollback.detected);
  EXPECT_EQ(r.value->rollback.seenRevision, 3);
  EXPECT_EQ(r.value->rollback.seenGroupEpoch, next.groupEpoch);
  EXPECT_EQ(pod->rollbacks_detected(), 1);
  EXPECT_FALSE(pod->load(kKey).value->rollback.detected) << "reported once";
  // A conflict that reveals an older revision is a rollback too.
  ASSERT_EQ(pod->compare_and_set(CasRequest{kKey, 1, &next, nullptr}).value->status, CasStatus::Written);
  this->backend.replace_raw(kKey, {});
  auto gone = pod->load(kKey);
  EXPECT_TRUE(gone.value->rollback.detected) << "the whole group vanished";
  EXPECT_EQ(pod->rollbacks_detected(), 2);
}

TYPED_TEST(StoreContract, CorruptedOrForeignValuesGiveAClearErrorNotACrash) {
  auto pod = this->backend.pod();
  const auto s = sample_group();
  struct Case {
    std::string field, value, mention;
  };
  const std::vector<Case> cases = {
      {"g", "{not json", "field 'g': not valid JSON"},
      {"g", R"({"v":2,"p":"orders","c":"billing"})", "format version 2 is newer"},
      {"g", R"({"v":1,"p":"other","c":"billing","ge":1,"ae":1,"mv":1,"sc":6})", "belongs to other/billing"},
      {"g", R"({"v":1,"p":"orders","c":"billing","ge":"x","ae":1,"mv":1,"sc":6})", "field 'g': ge: expected an integer, got string"},
      {"m:a", R"([1,2,3])", "field 'm:a'"},
      {"m:a", R"({"v":1,"e":1,"a":[],"cap":[1,1],"hb":1})", "field 'm:a': pe: is required"},
      {"rev", "seven", "field 'rev'"},
      // Found by fuzz_state: a float where an integer belongs (converting it was undefined).
      {"g", R"({"v":1,"p":"orders","c":"billing","ge":6.7e93,"ae":1,"mv":1,"sc":6})", "ge: expected an integer, got non-integer number"},
      {"m:a", R"({"v":1,"e":1,"pe":0,"s":"ACTIVE","hb":1,"a":[],"t":[],"cap":[1e300,1]})", "field 'm:a': cap[0]: expected an integer"},
      {"g", R"({"v":1,"p":"orders","c":"billing","ge":99999999999,"ae":1,"mv":1,"sc":6})", "ge: must be at most 2147483647"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.field + " = " + c.value);
    this->backend.replace_raw(kKey, {});
    ASSERT_TRUE(pod->compare_and_set(create(kKey, s)).ok());
    this->backend.set_raw(kKey, c.field, c.value);
    auto r = pod->load(kKey);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error.kind, ErrorKind::Corrupt);
    EXPECT_NE(r.error.message.find(c.mention), std::string::npos) << r.error.message;
    EXPECT_NE(r.error.message.find("orders/billing"), std::string::npos) << r.error.message;
  }
  // A hash written by something else entirely.
  this->backend.replace_raw(kKey, {{"foo", "bar"}});
  auto r = pod->load(kKey);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error.kind, ErrorKind::Corrupt);
  EXPECT_NE(r.error.message.find("field 'rev': missing"), std::string::npos) << r.error.message;
}

// ---------------------------------------------------------------------------------------------
// Redis only.

class RedisStoreTest : public ::testing::Test {
 protected:
  void SetUp() override { shared_server().admin().command({"FLUSHALL"}); }
  RedisStore pod() { return RedisStore(shared_server().client_options()); }
};

TEST_F(RedisStoreTest, EveryKeyOfAGroupHashesToOneClusterSlot) {
  EXPECT_EQ(crc16("123456789"), 0x31C3);  // the reference vector of Redis Cluster's CRC16
  EXPECT_EQ(key_slot("{user1000}.following"), key_slot("{user1000}.followers"));
  EXPECT_EQ(key_slot("foo{}{bar}"), key_slot("foo{}{bar}"));
  EXPECT_EQ(key_slot("foo"), 12182);  // as CLUSTER KEYSLOT foo answers
  KeySpace k;
  const GroupKey g{"orders.v2", "billing:eu"};
  EXPECT_EQ(key_slot(k.group_state(g)), key_slot(k.group_lock(g)));
  EXPECT_EQ(key_slot(k.group_state(g)), key_slot(k.dead_letters(g))) << "delete-group drops its dead letters in its script";
  EXPECT_EQ(key_slot(k.pods()), key_slot(k.deadlines())) << "the pod script touches both";
  EXPECT_EQ(key_slot(k.pods()), key_slot(k.pods_info())) << "and the registrations";
  EXPECT_EQ(key_slot(k.deadlines()), key_slot(k.deadline_revisions()));
  EXPECT_EQ(k.group_state(g), "rsc:{orders.v2/billing:eu}:state");
  EXPECT_EQ(k.shard_stream("orders", 3), "{orders:3}");
  // Shards of a stream spread over slots.
  std::set<int> slots;
  for (int i = 0; i < 16; ++i) slots.insert(key_slot(k.shard_stream("orders", i)));
  EXPECT_GT(slots.size(), 8u);
}

// Rollback detection remembers each group the pod has seen written, and nothing for a group that
// does not exist: a client asking about ever new group names must not grow the pod's memory.
TEST_F(RedisStoreTest, AskingAboutGroupsThatDoNotExistIsRememberedNowhere) {
  auto pod = this->pod();
  for (int i = 0; i < 500; ++i) {
    auto l = pod.load({"s", "missing-" + std::to_string(i)});
    ASSERT_TRUE(l.ok());
    ASSERT_FALSE(l.value->exists);
  }
  EXPECT_EQ(pod.revisions_remembered(), 0u);
  const GroupKey k{"s", "real"};
  auto s = sample_group(k);
  ASSERT_EQ(pod.compare_and_set(CasRequest{k, 0, &s, nullptr}).value->status, CasStatus::Written);
  EXPECT_EQ(pod.revisions_remembered(), 1u);
  // Deleted, the group keeps its revision in Redis and here: a store that loses it is still caught.
  ASSERT_EQ(pod.delete_group(k, 1).value, DeleteStatus::Deleted);
  EXPECT_EQ(pod.revisions_remembered(), 1u);
  shared_server().admin().command({"FLUSHALL"});
  auto gone = pod.load(k);
  ASSERT_TRUE(gone.ok());
  EXPECT_TRUE(gone.value->rollback.detected) << "the deleted group's revision went back to 0";
}

// An offset reset is guarded like every write of the group. Judged on a state another pod
// has since written, it moves nothing and says so (the group actor then judges it again on a fresh
// read); judged on the stored state, it moves every shard's position and the revision on by one, so
// a pod still holding the older state must read it again before it writes.
TEST_F(RedisStoreTest, AnOffsetResetJudgedOnAnOlderStateMovesNothing) {
  auto pod = this->pod();
  auto a = shared_server().admin();
  const GroupKey k{"orders", "billing"};
  ASSERT_TRUE(pod.write_stream("orders", StreamPut{2, std::nullopt, false}).ok());
  ASSERT_TRUE(a.command({"XADD", "orders:0", "1-1", "k", "v"}).ok());
  ASSERT_TRUE(pod.provision(k, 2, "$").ok());
  auto s = sample_group(k);
  ASSERT_EQ(pod.compare_and_set(CasRequest{k, 0, &s, nullptr}).value->status, CasStatus::Written);
  ASSERT_EQ(pod.compare_and_set(CasRequest{k, 1, &s, nullptr}).value->status, CasStatus::Written);  // another write: rev 2
  auto position = [&] {
    auto r = a.command({"XINFO", "GROUPS", "orders:0"});
    for (const auto& g : r.value->elements)
      for (std::size_t i = 0; i + 1 < g.elements.size(); i += 2)
        if (g.elements[i].str == "last-delivered-id") return g.elements[i + 1].str;
    return std::string("?");
  };
  ASSERT_EQ(position(), "1-1") << "created at $";
  auto stale = pod.reset_offsets(k, 2, "0", 1);
  ASSERT_TRUE(stale.ok()) << stale.error.message;
  EXPECT_TRUE(stale.value->conflict);
  EXPECT_EQ(stale.value->revision, 2);
  EXPECT_EQ(position(), "1-1") << "nothing moved";
  EXPECT_EQ(pod.load(k).value->state.storeRevision, 2);
  auto fresh = pod.reset_offsets(k, 2, "0", 2);
  ASSERT_TRUE(fresh.ok()) << fresh.error.message;
  EXPECT_FALSE(fresh.value->conflict);
  EXPECT_EQ(fresh.value->shards, 2);
  EXPECT_EQ(position(), "0-0");
  EXPECT_EQ(pod.load(k).value->state.storeRevision, 3) << "the reset is a write of the group";
  EXPECT_EQ(pod.compare_and_set(CasRequest{k, 2, &s, nullptr}).value->status, CasStatus::Conflict)
      << "a pod that judged on the state before the reset must read it again";
}

// Dead letters of a group that does not exist are "not found", not an empty
// page; a redrive names back the ids it could not find and marks what it writes back with where
// it came from; a discard drops them for good; deleting the group takes its dead letters and its
// Redis consumer groups with it.
TEST_F(RedisStoreTest, DeadLettersAreFoundByGroupRedrivenWithProvenanceDiscardedAndDeletedWithTheGroup) {
  auto pod = this->pod();
  auto a = shared_server().admin();
  const GroupKey k{"orders", "billing"};
  const std::string dead = "rsc:{orders/billing}:dead";
  EXPECT_FALSE(pod.dead_letters(k, 10).value->groupFound);
  EXPECT_FALSE(pod.redrive(k, {}, 10).value->groupFound);
  EXPECT_FALSE(pod.discard_dead_letters(k, {"1-1"}, 10).value->groupFound);
  ASSERT_TRUE(pod.write_stream("orders", StreamPut{2, std::nullopt, false}).ok());
  ASSERT_TRUE(pod.provision(k, 2, "0").ok());
  auto s = sample_group(k);
  ASSERT_EQ(pod.compare_and_set(CasRequest{k, 0, &s, nullptr}).value->status, CasStatus::Written);
  auto empty = pod.dead_letters(k, 10);
  ASSERT_TRUE(empty.ok());
  EXPECT_TRUE(empty.value->groupFound);
  EXPECT_EQ(empty.value->total, 0);
  auto add_dead = [&](const std::string& id, const std::string& key) {
    auto r = a.command({"XADD", dead, id, "id", "5-" + key, "shard", "1", "stream", "orders:1", "deliveries", "4", "error",
                        "cannot parse", "member", "m1", "at", "1700000000000", "field:key", key});
    ASSERT_TRUE(r.ok() && !r.value->is_error());
  };
  add_dead("10-1", "k1");
  add_dead("10-2", "k2");
  add_dead("10-3", "k3");
  auto page = pod.dead_letters(k, 10);
  EXPECT_EQ(page.value->total, 3);
  EXPECT_EQ(page.value->items.size(), 3u);

  auto moved = pod.redrive(k, {"10-1", "99-9"}, 1000);
  ASSERT_TRUE(moved.ok()) << moved.error.message;
  EXPECT_EQ(moved.value->moved, 1);
  EXPECT_EQ(moved.value->unknownIds, (std::vector<std::string>{"99-9"}));
  auto back = a.command({"XRANGE", "orders:1", "-", "+"});
  ASSERT_EQ(back.value->elements.size(), 1u);
  std::map<std::string, std::string> f;
  const auto& kv = back.value->elements[0].elements[1].elements;
  std::vector<std::string> order;
  for (std::size_t i = 0; i + 1 < kv.size(); i += 2) f[kv[i].str] = kv[i + 1].str, order.push_back(kv[i].str);
  EXPECT_EQ(order.front(), "key") << "the record's own fields first";
  EXPECT_EQ(f["key"], "k1");
  EXPECT_EQ(f["rsc:redrive:deadLetterId"], "10-1");
  EXPECT_EQ(f["rsc:redrive:id"], "5-k1");
  EXPECT_EQ(f["rsc:redrive:deliveries"], "4");
  EXPECT_EQ(f["rsc:redrive:error"], "cannot parse");
  EXPECT_EQ(f["rsc:redrive:member"], "m1");

  // Dead-lettered again (its fields, the marks included, as the member writes them) and redriven
  // again: only the newest marks.
  ASSERT_TRUE(a.command({"XADD", dead, "11-1", "id", "6-1", "shard", "1", "stream", "orders:1", "deliveries", "2", "error",
                         "still broken", "member", "m2", "at", "1700000000001", "field:key", "k1",
                         "field:rsc:redrive:deadLetterId", "10-1", "field:rsc:redrive:error", "cannot parse"})
                  .ok());
  ASSERT_EQ(pod.redrive(k, {"11-1"}, 1000).value->moved, 1);
  back = a.command({"XREVRANGE", "orders:1", "+", "-", "COUNT", "1"});
  std::multimap<std::string, std::string> again;
  const auto& kv2 = back.value->elements[0].elements[1].elements;
  for (std::size_t i = 0; i + 1 < kv2.size(); i += 2) again.emplace(kv2[i].str, kv2[i + 1].str);
  EXPECT_EQ(again.count("rsc:redrive:deadLetterId"), 1u);
  EXPECT_EQ(again.find("rsc:redrive:deadLetterId")->second, "11-1");
  EXPECT_EQ(again.find("rsc:redrive:error")->second, "still broken");

  auto dropped = pod.discard_dead_letters(k, {"10-2", "10-1"}, 1000);
  ASSERT_TRUE(dropped.ok()) << dropped.error.message;
  EXPECT_EQ(dropped.value->moved, 1);
  EXPECT_EQ(dropped.value->unknownIds, (std::vector<std::string>{"10-1"})) << "already redriven";
  EXPECT_EQ(pod.dead_letters(k, 10).value->total, 1);
  EXPECT_EQ(a.command({"XLEN", "orders:1"}).value->integer, 2) << "a discard writes nothing back";
  EXPECT_EQ(pod.discard_dead_letters(k, {}, 1000).value->moved, 1) << "all: the oldest up to the limit";
  EXPECT_EQ(pod.dead_letters(k, 10).value->total, 0);

  add_dead("12-1", "k9");
  auto groups_on = [&](const std::string& stream) { return a.command({"XINFO", "GROUPS", stream}).value->elements.size(); };
  ASSERT_EQ(groups_on("orders:0"), 1u);
  ASSERT_EQ(groups_on("orders:1"), 1u);
  const auto rev = pod.load(k).value->state.storeRevision;
  ASSERT_EQ(*pod.delete_group(k, rev).value, DeleteStatus::Deleted);
  EXPECT_EQ(a.command({"EXISTS", dead}).value->integer, 0) << "the dead letters went with the group";
  EXPECT_EQ(groups_on("orders:0"), 0u) << "and its Redis consumer groups";
  EXPECT_EQ(groups_on("orders:1"), 0u);
  EXPECT_EQ(a.command({"XLEN", "orders:1"}).value->integer, 2) << "the records stay: other groups read them";
  EXPECT_FALSE(pod.dead_letters(k, 10).value->groupFound);
}

TEST(RevisionTracker, RemembersOnlyWhatItLearnedAndStillDetectsALostGroup) {
  RevisionTracker t;
  for (int i = 0; i < 100; ++i) EXPECT_FALSE(t.observe({"s", "g" + std::to_string(i)}, 0, 0).detected);
  EXPECT_EQ(t.remembered(), 0u);
  EXPECT_FALSE(t.observe({"s", "g1"}, 4, 2).detected);
  EXPECT_EQ(t.remembered(), 1u);
  auto r = t.observe({"s", "g1"}, 0, 0);  // the store forgot it
  EXPECT_TRUE(r.detected);
  EXPECT_EQ(r.seenRevision, 4);
  EXPECT_EQ(r.seenGroupEpoch, 2);
  EXPECT_EQ(t.rollbacks(), 1);
}

// A stream written before key styles existed has hash-tagged keys; a consumer group starts at 0
// (records produced before it existed are read) or at $ (only new ones); a key of another type
// is a clear error, not BUSYGROUP.
TEST_F(RedisStoreTest, OlderStreamsAreHashTaggedAndTheStartIdIsHonoured) {
  auto a = shared_server().admin();
  ASSERT_TRUE(a.command({"HSET", "rsc:stream:{legacy}", "shardCount", "2", "metadataVersion", "3"}).ok());
  auto s = pod();
  auto m = s.get_stream("legacy");
  ASSERT_TRUE(m.ok()) << m.error.message;
  EXPECT_EQ(m.value->value().keyStyle, protocol::KeyStyle::HashTag);
  EXPECT_EQ(m.value->value().metadataVersion, 3);
  ASSERT_TRUE(s.write_stream("early", StreamPut{1, std::nullopt, false}).ok());
  ASSERT_TRUE(a.command({"XADD", "early:0", "1-1", "k", "v"}).ok());  // produced before any group
  ASSERT_TRUE(s.provision({"early", "from-start"}, 1, "0").ok());
  ASSERT_TRUE(s.provision({"early", "only-new"}, 1, "$").ok());
  auto read = [&](const std::string& g) {
    auto r = a.command({"XREADGROUP", "GROUP", g, "c1", "COUNT", "10", "STREAMS", "early:0", ">"});
    return r.ok() && r.value->type == Value::Type::Array ? r.value->elements.size() : 0u;
  };
  EXPECT_EQ(read("from-start"), 1u) << "a group created at 0 reads what came before it";
  EXPECT_EQ(read("only-new"), 0u) << "a group created at $ does not";
  ASSERT_TRUE(a.command({"SET", "early:1", "not a stream"}).ok());
  ASSERT_TRUE(s.write_stream("early", StreamPut{2, std::nullopt, false}).ok());
  auto bad = s.provision({"early", "from-start"}, 2, "0");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error.kind, ErrorKind::Fatal);
  EXPECT_NE(bad.error.message.find("early:1"), std::string::npos) << bad.error.message;
}

TEST_F(RedisStoreTest, ConcurrentPodsLoseNoUpdateAndApplyNoneTwice) {
  constexpr int kPods = 4, kUpdates = 40;
  {
    auto p = pod();
    const auto s = sample_group();
    ASSERT_EQ(p.compare_and_set(create(kKey, s)).value->status, CasStatus::Written);
  }
  std::atomic<int> acknowledged{0}, conflicts{0}, locked{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kPods; ++t) {
    threads.emplace_back([&, t] {
      RedisStore store(shared_server().client_options());
      const std::string token = random_token();
      auto loaded = store.load(kKey);
      group::GroupState state = loaded.value->state;
      for (int u = 0; u < kUpdates;) {
        // Read-modify-CAS: each update adds one uniquely named member.
        auto next = state;
        const std::string id = "p" + std::to_string(t) + "-" + std::to_string(u);
        group::Member m;
        m.id = id;
        m.state = protocol::MemberLifecycleState::ACTIVE;
        next.members[id] = m;
        group::Delta d;
        d.upserted = {id};
        CasRequest req{kKey, state.storeRevision, &next, &d, (u % 2) ? token : std::string(), 200};
        auto r = store.compare_and_set(req);
        if (!r.ok()) continue;
        if (r.value->status == CasStatus::Written) {
          ++acknowledged;
          state = std::move(next);
          state.storeRevision = r.value->revision;
          ++u;
          if (u % 2 == 0) release_mutex(store, token);
        } else if (r.value->status == CasStatus::Conflict) {
          ++conflicts;
          state = *r.value->current;
        } else {
          ++locked;
          std::this_thread::sleep_for(std::chrono::milliseconds(1));
          state = store.load(kKey).value->state;
        }
      }
      release_mutex(store, token);
    });
  }
  for (auto& th : threads) th.join();
  auto p = pod();
  auto final = p.load(kKey);
  ASSERT_TRUE(final.ok());
  EXPECT_EQ(acknowledged.load(), kPods * kUpdates);
  EXPECT_EQ(final.value->state.storeRevision, 1 + kPods * kUpdates) << "every write exactly once";
  for (int t = 0; t < kPods; ++t)
    for (int u = 0; u < kUpdates; ++u)
      EXPECT_TRUE(final.value->state.members.count("p" + std::to_string(t) + "-" + std::to_string(u)));
  std::cout << "concurrency: " << acknowledged << " acknowledged writes, " << conflicts << " conflicts, " << locked
            << " refused by the mutex\n";
  EXPECT_GT(conflicts.load() + locked.load(), 0) << "the pods never raced: the test proved nothing";
}

// A stream's metadata is read, decided on in the core (group::scale_step, put_step) and written
// back only if unchanged (kHashCas): pods changing one stream at once never both win a shrink, and
// no growth is lost.
TEST_F(RedisStoreTest, ConcurrentCountChangesOnOneStreamAreEachDecidedOnWhatIsThere) {
  constexpr int kPods = 4, kRounds = 25;
  int shrinksWon = 0, growths = 0;
  for (int round = 0; round < kRounds; ++round) {
    const std::string stream = "race-" + std::to_string(round);
    ASSERT_TRUE(pod().write_stream(stream, StreamPut{8, std::nullopt, false}).ok());
    std::atomic<int> ready{0}, draining{0}, busy{0}, grown{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < kPods; ++t) {
      threads.emplace_back([&, t] {
        RedisStore store(shared_server().client_options());
        ASSERT_TRUE(store.get_stream(stream).ok());  // connected before the start
        ++ready;
        while (ready.load() < kPods) std::this_thread::yield();
        if (round % 2 == 0) {  // everyone shrinks, each to its own count
          group::ScaleCall c;
          c.target = 2 + t;
          auto r = store.scale_stream(stream, c);
          ASSERT_TRUE(r.ok()) << r.error.message;
          if (r.value->outcome == group::ScaleOutcome::Draining) ++draining;
          else if (r.value->outcome == group::ScaleOutcome::Busy) ++busy;
        } else {  // everyone grows, each to its own count
          auto r = store.write_stream(stream, StreamPut{9 + t, std::nullopt, false});
          if (r.ok() && r.value->outcome == StreamWrite::Outcome::Grown) ++grown;
        }
      });
    }
    for (auto& th : threads) th.join();
    const auto after = pod().get_stream(stream);
    ASSERT_TRUE(after.ok() && after.value->has_value());
    const auto& m = **after.value;
    if (round % 2 == 0) {
      EXPECT_EQ(draining.load(), 1) << "one shrink wins, the others see it draining";
      EXPECT_EQ(busy.load(), kPods - 1);
      EXPECT_EQ(m.metadataVersion, 2);
      ASSERT_TRUE(m.migration.has_value());
      EXPECT_EQ(m.migration->fromShardCount, 8);
      EXPECT_EQ(m.shardCount, m.migration->toShardCount);
      shrinksWon += draining.load();
    } else {
      EXPECT_GE(grown.load(), 1);
      EXPECT_EQ(m.metadataVersion, 1 + grown.load()) << "every growth written once, none lost";
      EXPECT_EQ(m.shardCount, 12) << "the largest count wins whatever the order (smaller ones are refused after it)";
      growths += grown.load();
    }
  }
  std::cout << "streams: " << shrinksWon << " shrinks won of " << kRounds / 2 + 1 << " contested rounds, " << growths
            << " growths written\n";
}

TEST_F(RedisStoreTest, APodPausedPastTheMutexTtlIsRejectedAndCannotFreeAnotherPodsLock) {
  auto a = pod();
  auto b = pod();
  const auto s = sample_group();
  auto req = create(kKey, s);
  req.lockToken = "token-a";
  req.lockTtlMs = 150;
  ASSERT_EQ(a.compare_and_set(req).value->status, CasStatus::Written);
  std::this_thread::sleep_for(std::chrono::milliseconds(250));  // a "pauses" past its TTL
  // b takes over: the lock expired, b's write takes it.
  auto next = s;
  next.groupEpoch += 1;
  CasRequest rb{kKey, 1, &next, nullptr, "token-b", 5000};
  ASSERT_EQ(b.compare_and_set(rb).value->status, CasStatus::Written);
  // a wakes and writes on its stale view: refused.
  CasRequest ra{kKey, 1, &s, nullptr, "token-a", 150};
  EXPECT_EQ(a.compare_and_set(ra).value->status, CasStatus::Locked);
  release_mutex(a, "token-a");
  EXPECT_FALSE(take_mutex(a, "token-a", 150)) << "a's release must not free b's lock";
  // Even with b's lock gone, the revision check rejects a's stale write.
  release_mutex(b, "token-b");
  auto stale = a.compare_and_set(ra);
  EXPECT_EQ(stale.value->status, CasStatus::Conflict);
  EXPECT_EQ(stale.value->revision, 2);
  EXPECT_EQ(b.load(kKey).value->state.groupEpoch, next.groupEpoch);
}

TEST_F(RedisStoreTest, NoScriptAfterAFlushIsReloadedTransparently) {
  auto p = pod();
  const auto s = sample_group();
  ASSERT_EQ(p.compare_and_set(create(kKey, s)).value->status, CasStatus::Written);
  shared_server().admin().command({"SCRIPT", "FLUSH"});
  auto next = s;
  auto w = p.compare_and_set(CasRequest{kKey, 1, &next, nullptr});
  ASSERT_TRUE(w.ok()) << w.error.message;
  EXPECT_EQ(w.value->status, CasStatus::Written);
  EXPECT_EQ(p.script_reloads(), 1);
}

TEST_F(RedisStoreTest, ABusyRedisIsRetryable) {
  auto p = pod();
  ASSERT_TRUE(p.ping().ok());
  std::thread blocker([] {
    auto c = shared_server().admin();
    c.command({"EVAL", "local i = 0 while true do i = i + 1 end", "0"});  // killed below
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // past busy-reply-threshold (100ms)
  auto r = p.load(kKey);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error.kind, ErrorKind::Retryable);
  EXPECT_NE(r.error.message.find("BUSY"), std::string::npos) << r.error.message;
  for (int i = 0; i < 50; ++i) {
    auto k = shared_server().admin().command({"SCRIPT", "KILL"});
    if (k.ok() && !k.value->is_error()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  blocker.join();
  EXPECT_TRUE(p.load(kKey).ok()) << "recovers by itself";
}

TEST_F(RedisStoreTest, WrongCommandsAreFatalNotRetryable) {
  auto e = classify_reply_error("WRONGTYPE Operation against a key holding the wrong kind of value");
  EXPECT_EQ(e.kind, ErrorKind::Fatal);
  EXPECT_EQ(classify_reply_error("LOADING Redis is loading the dataset in memory").kind, ErrorKind::Retryable);
  EXPECT_EQ(classify_reply_error("NOSCRIPT No matching script").kind, ErrorKind::Retryable);
  EXPECT_EQ(classify_reply_error("READONLY You can't write against a read only replica.").kind, ErrorKind::Retryable);
  // The group hash replaced by a string: a clear fatal error.
  shared_server().admin().command({"SET", KeySpace{}.group_state(kKey), "x"});
  auto r = pod().load(kKey);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error.kind, ErrorKind::Fatal);
  EXPECT_NE(r.error.message.find("WRONGTYPE"), std::string::npos) << r.error.message;
}

// Replies are built by hiredis' parser straight into Values (redis/connection.cpp): every shape
// Redis sends reads back whole, nested or not, in one read or split over many.
TEST_F(RedisStoreTest, EveryReplyShapeReadsBackWholeNestedAndSplitOverReads) {
  RedisConnection c(shared_server().client_options());
  const std::string binary("a\0b\r\nc", 6);
  const std::string big(100000, 'x');  // longer than one read of the socket (16 KB)
  ASSERT_TRUE(c.command({"SET", "reply:bin", binary}).ok());
  ASSERT_TRUE(c.command({"SET", "reply:big", big}).ok());
  auto r = c.command({"EVAL",
                      "return {1, -123456789012, 'short', redis.call('GET', KEYS[1]), {}, {7, {'deep', {false}}}, "
                      "redis.status_reply('FINE'), redis.error_reply('ERR inner'), false, redis.call('GET', KEYS[2])}",
                      "2", "reply:bin", "reply:big"});
  ASSERT_TRUE(r.ok()) << r.error.message;
  const Value& v = *r.value;
  ASSERT_EQ(v.type, Value::Type::Array);
  ASSERT_EQ(v.elements.size(), 10u);
  EXPECT_EQ(v.elements[0].type, Value::Type::Integer);
  EXPECT_EQ(v.elements[0].integer, 1);
  EXPECT_EQ(v.elements[1].integer, -123456789012LL);
  EXPECT_EQ(v.elements[2].type, Value::Type::String);
  EXPECT_EQ(v.elements[2].str, "short");
  EXPECT_EQ(v.elements[3].str, binary);
  EXPECT_EQ(v.elements[4].type, Value::Type::Array);
  EXPECT_TRUE(v.elements[4].elements.empty());
  const Value& nested = v.elements[5];
  ASSERT_EQ(nested.elements.size(), 2u);
  EXPECT_EQ(nested.elements[0].integer, 7);
  ASSERT_EQ(nested.elements[1].elements.size(), 2u);
  EXPECT_EQ(nested.elements[1].elements[0].str, "deep");
  ASSERT_EQ(nested.elements[1].elements[1].elements.size(), 1u);
  EXPECT_TRUE(nested.elements[1].elements[1].elements[0].is_nil());  // Lua's false is a nil reply
  EXPECT_EQ(v.elements[6].type, Value::Type::Status);
  EXPECT_EQ(v.elements[6].str, "FINE");
  EXPECT_TRUE(v.elements[7].is_error());
  EXPECT_EQ(v.elements[7].str, "ERR inner");
  EXPECT_TRUE(v.elements[8].is_nil());
  EXPECT_EQ(v.elements[9].str, big);
  // Status and error replies inside an array, and a nil and a long string, as separate replies.
  auto many = c.pipeline({{"EVAL", "return {redis.status_reply('FINE'), redis.error_reply('ERR inner'), 3}", "0"},
                          {"GET", "reply:none"},
                          {"GET", "reply:big"},
                          {"PING"},
                          {"INCRBY", "reply:n", "-5"},
                          {"NOSUCHCOMMAND"}});
  ASSERT_EQ(many.size(), 6u);
  for (const auto& m : many) ASSERT_TRUE(m.ok()) << m.error.message;
  ASSERT_EQ(many[0].value->elements.size(), 3u);
  EXPECT_EQ(many[0].value->elements[0].type, Value::Type::Status);
  EXPECT_EQ(many[0].value->elements[0].str, "FINE");
  EXPECT_TRUE(many[0].value->elements[1].is_error());
  EXPECT_EQ(many[0].value->elements[1].str, "ERR inner");
  EXPECT_EQ(many[0].value->elements[2].integer, 3);
  EXPECT_TRUE(many[1].value->is_nil());
  EXPECT_EQ(many[2].value->type, Value::Type::String);
  EXPECT_EQ(many[2].value->str, big);
  EXPECT_EQ(many[3].value->type, Value::Type::Status);
  EXPECT_EQ(many[3].value->str, "PONG");
  EXPECT_EQ(many[4].value->integer, -5);
  EXPECT_TRUE(many[5].value->is_error());
  EXPECT_NE(many[5].value->str.find("unknown command"), std::string::npos) << many[5].value->str;
  // A reply of thousands of nested entries (as XINFO GROUPS of a busy stream), split over reads.
  std::vector<Command> fill;
  for (int i = 0; i < 3000; ++i) fill.push_back({"HSET", "reply:h", "field-" + std::to_string(i), std::string(40, 'v') + std::to_string(i)});
  for (const auto& f : c.pipeline(fill)) ASSERT_TRUE(f.ok());
  auto all = c.command({"HGETALL", "reply:h"});
  ASSERT_TRUE(all.ok());
  ASSERT_EQ(all.value->elements.size(), 6000u);
  std::map<std::string, std::string> seen;
  for (std::size_t i = 0; i + 1 < all.value->elements.size(); i += 2) seen[all.value->elements[i].str] = all.value->elements[i + 1].str;
  ASSERT_EQ(seen.size(), 3000u);
  EXPECT_EQ(seen["field-2999"], std::string(40, 'v') + "2999");
  EXPECT_EQ(seen["field-0"], std::string(40, 'v') + "0");
  // The connection is still in step afterwards.
  EXPECT_EQ(c.command({"ECHO", "after"}).value->str, "after");
}

TEST(RedisRestart, CallsFailRetryableWhileDownAndRecoverByThemselvesWithPersistence) {
  RedisServer server({/*persistence=*/true});
  RedisStore p(server.client_options());
  const auto s = sample_group();
  ASSERT_EQ(p.compare_and_set(create(kKey, s)).value->status, CasStatus::Written);
  server.stop();
  auto down = p.load(kKey);
  ASSERT_FALSE(down.ok());
  EXPECT_EQ(down.error.kind, ErrorKind::Retryable) << down.error.message;
  auto next = s;
  auto w = p.compare_and_set(CasRequest{kKey, 1, &next, nullptr});
  ASSERT_FALSE(w.ok());
  EXPECT_EQ(w.error.kind, ErrorKind::Retryable);
  server.start();
  auto up = p.load(kKey);
  ASSERT_TRUE(up.ok()) << up.error.message;
  EXPECT_EQ(up.value->state.storeRevision, 1);
  EXPECT_FALSE(up.value->rollback.detected);
  auto w2 = p.compare_and_set(CasRequest{kKey, 1, &next, nullptr});  // scripts reloaded on reconnect
  ASSERT_TRUE(w2.ok()) << w2.error.message;
  EXPECT_EQ(w2.value->status, CasStatus::Written);
  EXPECT_EQ(p.rollbacks_detected(), 0);
}

TEST(RedisRestart, ARestartWithoutPersistenceIsDetectedAsARollback) {
  RedisServer server;
  RedisStore p(server.client_options());
  auto s = sample_group();
  ASSERT_EQ(p.compare_and_set(create(kKey, s)).value->status, CasStatus::Written);
  ASSERT_EQ(p.compare_and_set(CasRequest{kKey, 1, &s, nullptr}).value->status, CasStatus::Written);
  server.restart();
  // The first call may find the old connection dead (retryable); the next reconnects and its
  // write meets an empty store: revision 0 < 2.
  auto w = p.compare_and_set(CasRequest{kKey, 2, &s, nullptr});
  for (int i = 0; i < 3 && !w.ok(); ++i) {
    EXPECT_EQ(w.error.kind, ErrorKind::Retryable) << w.error.message;
    w = p.compare_and_set(CasRequest{kKey, 2, &s, nullptr});
  }
  ASSERT_TRUE(w.ok()) << w.error.message;
  EXPECT_EQ(w.value->status, CasStatus::Conflict);
  EXPECT_EQ(w.value->revision, 0);
  EXPECT_TRUE(w.value->rollback.detected);
  EXPECT_EQ(w.value->rollback.seenRevision, 2);
  EXPECT_EQ(p.rollbacks_detected(), 1);
  // The core then fences what the store forgot (see test_reconcile's rollback test).
  auto rec = group::recover_from_rollback(s, w.value->rollback.seenGroupEpoch, Harness::default_config(), 5'000'000);
  EXPECT_GT(rec.state.groupEpoch, s.groupEpoch);
}

// SPEC/issue: a heartbeat that changes only the member's lease costs at most two Redis round
// trips, the common case one. Counted at the client and confirmed by INFO commandstats.
TEST_F(RedisStoreTest, ASteadyHeartbeatCostsOneRoundTrip) {
  auto stat = [](const std::string& cmd) -> long {
    auto r = shared_server().admin().command({"INFO", "commandstats"});
    const std::string& text = r.value->str;
    const auto at = text.find("cmdstat_" + cmd + ":calls=");
    if (at == std::string::npos) return 0;
    return std::stol(text.substr(at + cmd.size() + 15));
  };
  RedisStore p = pod();
  Harness h(12);
  h.state().streamPrefix = kKey.streamPrefix;
  h.state().consumerGroup = kKey.consumerGroup;
  auto a = h.hb("a", 0);
  a = h.hb("a", a.memberEpoch, {rsc::testing::assigned(a)});
  auto state = h.state();
  state.storeRevision = 0;
  const std::string token = random_token();
  auto req = create(kKey, state);
  req.lockToken = token;
  auto c = p.compare_and_set(req);
  ASSERT_EQ(c.value->status, CasStatus::Written);
  state.storeRevision = c.value->revision;

  constexpr int kBeats = 200;
  const long evalBefore = stat("evalsha");
  const long setBefore = stat("set"), getBefore = stat("get"), hgetallBefore = stat("hgetall");
  const auto tripsBefore = p.connection().round_trips();
  for (int i = 0; i < kBeats; ++i) {
    auto q = h.request("a", a.memberEpoch, {rsc::testing::assigned(a)});
    auto out = group::heartbeat(std::move(state), q, h.cfg(), h.now() + i);
    ASSERT_TRUE(out.changed());
    ASSERT_TRUE(out.delta.upserted.count("a"));
    ASSERT_FALSE(out.delta.group) << "a steady heartbeat touches only its member";
    CasRequest w{kKey, out.state.storeRevision, &out.state, &out.delta, token, 0};  // as the group actor writes
    auto r = p.compare_and_set(w);
    ASSERT_EQ(r.value->status, CasStatus::Written);
    state = std::move(out.state);
    state.storeRevision = r.value->revision;
  }
  const auto trips = p.connection().round_trips() - tripsBefore;
  const long evals = stat("evalsha") - evalBefore;
  std::cout << "steady heartbeat: " << static_cast<double>(trips) / kBeats << " round trips and "
            << static_cast<double>(evals) / kBeats << " EVALSHA per heartbeat (INFO commandstats), "
            << (stat("hgetall") - hgetallBefore) << " HGETALL, " << (stat("set") - setBefore) << " SET (in-script: the mutex is checked, not taken), "
            << (stat("get") - getBefore) << " GET (in-script) over " << kBeats << " heartbeats\n";
  EXPECT_EQ(trips, kBeats);
  EXPECT_EQ(evals, kBeats);
  EXPECT_EQ(stat("hgetall") - hgetallBefore, 0) << "no reload while the cached revision is current";
}

TEST(RedisAuth, AuthWithPasswordOrAclUserAndAClearFatalErrorWhenWrong) {
  RedisServer server({/*persistence=*/false, /*password=*/"s3cret"});
  RedisStore withPassword(server.client_options());
  EXPECT_TRUE(withPassword.ping().ok());
  auto acl = server.client_options();
  acl.user = "rsc";
  RedisStore withUser(acl);
  auto s = sample_group();
  auto w = withUser.compare_and_set(create(kKey, s));
  ASSERT_TRUE(w.ok()) << w.error.message;
  EXPECT_EQ(w.value->status, CasStatus::Written);
  auto wrong = server.client_options();
  wrong.password = "nope";
  RedisStore bad(wrong);
  auto r = bad.load(kKey);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error.kind, ErrorKind::Fatal);
  EXPECT_NE(r.error.message.find("AUTH failed"), std::string::npos) << r.error.message;
  auto none = server.client_options();
  none.password.clear();
  auto n = RedisStore(none).load(kKey);
  ASSERT_FALSE(n.ok());
  EXPECT_NE(n.error.message.find("NOAUTH"), std::string::npos) << n.error.message;
}

TEST_F(RedisStoreTest, AWriteAfterAnotherPodsWriteCostsTwoRoundTrips) {
  RedisStore a = pod(), b = pod();
  Harness h(6);
  h.state().streamPrefix = kKey.streamPrefix;
  h.state().consumerGroup = kKey.consumerGroup;
  auto ra = h.hb("a", 0);
  auto state = h.state();
  state.storeRevision = 0;
  ASSERT_EQ(a.compare_and_set(create(kKey, state)).value->status, CasStatus::Written);
  state.storeRevision = 1;
  // b writes behind a's back.
  auto other = state;
  other.members.at("a").lastHeartbeatMs += 1;
  ASSERT_EQ(b.compare_and_set(CasRequest{kKey, 1, &other, nullptr}).value->status, CasStatus::Written);
  const auto before = a.connection().round_trips();
  auto q = h.request("a", ra.memberEpoch, {rsc::testing::assigned(ra)});
  auto out = group::heartbeat(state, q, h.cfg(), h.now() + 5);
  auto r = a.compare_and_set(CasRequest{kKey, out.state.storeRevision, &out.state, &out.delta});
  ASSERT_EQ(r.value->status, CasStatus::Conflict);
  ASSERT_TRUE(r.value->current.has_value()) << "the conflict reply carries the state: no reload";
  auto again = group::heartbeat(*r.value->current, q, h.cfg(), h.now() + 5);
  auto r2 = a.compare_and_set(CasRequest{kKey, again.state.storeRevision, &again.state, &again.delta});
  ASSERT_EQ(r2.value->status, CasStatus::Written);
  EXPECT_EQ(a.connection().round_trips() - before, 2);
}

TEST(RedisStall, AStalledRedisTimesOutAsRetryableAndTheStoreRecoversWhenItResumes) {
  RedisServer server;
  auto opts = server.client_options();
  opts.commandTimeoutMs = 300;
  RedisStore p(opts);
  ASSERT_TRUE(p.ping().ok());
  server.pause();
  const auto t0 = std::chrono::steady_clock::now();
  auto r = p.load(kKey);
  const auto waited = std::chrono::steady_clock::now() - t0;
  server.resume();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error.kind, ErrorKind::Retryable);
  EXPECT_NE(r.error.message.find("timed out"), std::string::npos) << r.error.message;
  EXPECT_LT(waited, std::chrono::seconds(3)) << "the command timeout bounds the wait";
  auto again = p.load(kKey);
  ASSERT_TRUE(again.ok()) << again.error.message;
}

// The group's assignor and shard racks, and a member's rack, are stored (and left out
// when they are the defaults, so records written before them read the same); a name that is no
// assignor or no rack is a corrupt record, said plainly.
TEST(StateCodec, TheAssignorTheShardRacksAndAMembersRackReadBackTheSame) {
  auto s = sample_group();
  const auto plain = encode_group_fields(s);
  EXPECT_EQ(plain.find("\"as\""), std::string::npos) << plain;
  EXPECT_EQ(plain.find("\"sr\""), std::string::npos) << plain;
  EXPECT_EQ(encode_member(s.members.begin()->second).find("\"rk\""), std::string::npos);
  s.assignor = rsc::protocol::AssignorKind::RackAware;
  s.shardRacks = {"eu-1a", "", "eu-1b"};
  auto& m = s.members.begin()->second;
  m.rackId = "eu-1b";
  const auto text = encode_group_fields(s);
  EXPECT_EQ(nlohmann::json::parse(text).dump(), text) << "keys in a JSON document's order";
  EXPECT_NE(text.find(R"("as":"rack-aware")"), std::string::npos) << text;
  FieldMap fields{{kRevisionField, "1"}, {kGroupField, text}};
  for (const auto& [id, mm] : s.members) fields[kMemberFieldPrefix + id] = encode_member(mm);
  auto back = decode_group(kKey, fields);
  ASSERT_TRUE(back.ok()) << back.error.message;
  EXPECT_EQ(back.value->assignor, rsc::protocol::AssignorKind::RackAware);
  EXPECT_EQ(back.value->shardRacks, s.shardRacks);
  EXPECT_EQ(back.value->members.at(m.id).rackId, "eu-1b");
  EXPECT_EQ(text.find("\"cw\""), std::string::npos) << "no link: no field";
  EXPECT_EQ(text.find("\"ss\""), std::string::npos) << "no stream racks: no field";
  s.streamRacks = {"", "eu-1c"};
  const auto withStream = encode_group_fields(s);
  EXPECT_NE(withStream.find(R"("ss":["","eu-1c"])"), std::string::npos) << withStream;
  fields[kGroupField] = withStream;
  auto sr = decode_group(kKey, fields);
  ASSERT_TRUE(sr.ok()) << sr.error.message;
  EXPECT_EQ(sr.value->streamRacks, s.streamRacks);
  EXPECT_EQ(sr.value->racks(), s.shardRacks) << "the group's own come first";
  s.streamRacks.clear();
  s.assignor = rsc::protocol::AssignorKind::CoPartitioned;
  s.coPartitionedWith = rsc::protocol::GroupKey{"payments", "billing"};
  const auto linked = encode_group_fields(s);
  EXPECT_NE(linked.find(R"("cw":["payments","billing"])"), std::string::npos) << linked;
  fields[kGroupField] = linked;
  auto link = decode_group(kKey, fields);
  ASSERT_TRUE(link.ok()) << link.error.message;
  EXPECT_EQ(link.value->assignor, rsc::protocol::AssignorKind::CoPartitioned);
  EXPECT_EQ(link.value->coPartitionedWith, s.coPartitionedWith);
  for (const char* bad : {R"("as":"sticky")", R"("as":3)", R"("sr":["a b"])", R"("sr":"a")", R"("ss":["a b"])", R"("ss":[1])", R"("cw":["payments"])",
                          R"("cw":["payments","a b"])", R"("cw":"payments/billing")"}) {
    fields[kGroupField] = std::string(R"({"v":1,"p":"orders","c":"billing","ge":1,"ae":1,"mv":1,"sc":6,)") + bad + "}";
    auto r = decode_group(kKey, fields);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.error.kind, ErrorKind::Corrupt) << bad;
  }
}

// Members are written without building a JSON document: the text must be what the document
// would print (sorted keys, the same escaping) and must read back to the same member.
TEST(StateCodec, AStaticMembersInstanceAndTheGroupsReservationsReadBackTheSame) {
  auto s = sample_group();
  auto& m = s.members.begin()->second;
  m.instanceId = "consumer-2";
  s.reservations["consumer-0"] = {{1, 4}, 1'234'567, "m0"};
  s.reservations["consumer-7"] = {{}, 99, "m7"};
  const auto text = encode_member(m);
  EXPECT_EQ(nlohmann::json::parse(text).dump(), text) << "keys in a JSON document's order";
  FieldMap fields{{kRevisionField, "1"}, {kGroupField, encode_group_fields(s)}};
  for (const auto& [id, mm] : s.members) fields[kMemberFieldPrefix + id] = encode_member(mm);
  auto back = decode_group(kKey, fields);
  ASSERT_TRUE(back.ok()) << back.error.message;
  EXPECT_EQ(back.value->members.at(m.id).instanceId, "consumer-2");
  EXPECT_EQ(back.value->reservations, s.reservations);
  fields[kGroupField] = R"({"v":1,"p":"orders","c":"billing","ge":1,"ae":1,"mv":1,"sc":6,"st":[["x",[1],"late",""]]})";
  auto bad = decode_group(kKey, fields);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error.kind, ErrorKind::Corrupt);
}

TEST(StateCodec, AMemberIsWrittenAsItsJsonDocumentWouldBeAndReadsBackTheSame) {
  auto s = sample_group();
  auto& weird = s.members.begin()->second;
  weird.lastRequestId = "req \"quoted\" \\ and \x01 and caf\xc3\xa9";
  weird.progress.push_back({3, std::string("1-\"x\""), std::nullopt, 7});
  weird.progress.push_back({4, std::nullopt, 2, std::nullopt});
  weird.revokeDeadlineMs = 123456;
  weird.tombstoneUntilMs = 0;
  int checked = 0;
  for (const auto& [id, m] : s.members) {
    const auto text = encode_member(m);
    const auto doc = nlohmann::json::parse(text);
    EXPECT_EQ(doc.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace), text) << id;
    ++checked;
  }
  EXPECT_GE(checked, 3);
  FieldMap fields{{kRevisionField, "1"}, {kGroupField, encode_group_fields(s)}};
  for (const auto& [id, m] : s.members) fields[kMemberFieldPrefix + id] = encode_member(m);
  auto back = decode_group(kKey, fields);
  ASSERT_TRUE(back.ok()) << back.error.message;
  for (const auto& [id, m] : s.members) EXPECT_EQ(encode_member(back.value->members.at(id)), encode_member(m)) << id;
  EXPECT_EQ(back.value->members.begin()->second.lastRequestId, weird.lastRequestId);
}
