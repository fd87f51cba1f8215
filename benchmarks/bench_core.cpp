// Benchmarks of the pure core: the assignor (full and incremental) and one heartbeat step.
//   ./build/benchmarks/bench_core
#include <benchmark/benchmark.h>

#include "group/assignor.hpp"
#include "group/coordinator.hpp"
#include "group/notify.hpp"
#include "protocol/codec.hpp"

using namespace rsc;

namespace {

std::vector<std::string> member_ids(int n) {
  std::vector<std::string> v;
  for (int i = 0; i < n; ++i) v.push_back("10.1." + std::to_string(i / 250) + "." + std::to_string(i % 250) + ":0");
  return v;
}

// From nothing: every shard placed.
void BM_AssignFull(benchmark::State& st) {
  const int members = static_cast<int>(st.range(0));
  const int32_t shards = static_cast<int32_t>(st.range(1));
  group::AssignmentSpec spec{member_ids(members), shards, {}};
  for (auto _ : st) benchmark::DoNotOptimize(group::assign_uniform_sticky(spec));
  st.counters["members"] = members;
  st.counters["shards"] = shards;
}

// One member joins a balanced group.
void BM_AssignOneJoin(benchmark::State& st) {
  const int members = static_cast<int>(st.range(0));
  const int32_t shards = static_cast<int32_t>(st.range(1));
  auto ids = member_ids(members);
  group::AssignmentSpec spec{ids, shards, {}};
  spec.current = group::assign_uniform_sticky(spec);
  spec.members.push_back("joiner");
  for (auto _ : st) benchmark::DoNotOptimize(group::assign_uniform_sticky(spec));
  st.counters["members"] = members + 1;
  st.counters["shards"] = shards;
}

// The other assignors on the same inputs, one member joining a balanced group: range, and rack
// aware with members and shards over three zones (what a recomputed target costs each).
group::Racks three_zones(const std::vector<std::string>& ids, int32_t shards) {
  group::Racks r;
  for (std::size_t i = 0; i < ids.size(); ++i) r.member[ids[i]] = "zone-" + std::to_string(i % 3);
  for (int32_t s = 0; s < shards; ++s) r.shard.push_back("zone-" + std::to_string((s * 7) % 3));
  return r;
}
void BM_AssignRangeOneJoin(benchmark::State& st) {
  const int members = static_cast<int>(st.range(0));
  const int32_t shards = static_cast<int32_t>(st.range(1));
  group::AssignmentSpec spec{member_ids(members), shards, {}};
  spec.current = group::assign_range(spec);
  spec.members.push_back("joiner");
  for (auto _ : st) benchmark::DoNotOptimize(group::assign_range(spec));
  st.counters["members"] = members + 1;
  st.counters["shards"] = shards;
}
void BM_AssignRackAwareOneJoin(benchmark::State& st) {
  const int members = static_cast<int>(st.range(0));
  const int32_t shards = static_cast<int32_t>(st.range(1));
  auto ids = member_ids(members);
  ids.push_back("joiner");
  const auto racks = three_zones(ids, shards);
  ids.pop_back();
  group::AssignmentSpec spec{ids, shards, {}};
  spec.current = group::assign_rack_aware(spec, racks);
  spec.members.push_back("joiner");
  for (auto _ : st) benchmark::DoNotOptimize(group::assign_rack_aware(spec, racks));
  st.counters["members"] = members + 1;
  st.counters["shards"] = shards;
}

// Co-partitioned: the members' blocks, no stickiness (what members hold is not read).
void BM_AssignCoPartitionedOneJoin(benchmark::State& st) {
  const int members = static_cast<int>(st.range(0));
  const int32_t shards = static_cast<int32_t>(st.range(1));
  group::AssignmentSpec spec{member_ids(members), shards, {}};
  spec.members.push_back("joiner");
  const std::map<std::string, std::string> order;  // no static members: ordered by id
  for (auto _ : st) benchmark::DoNotOptimize(group::assign_co_partitioned(spec, order));
  st.counters["members"] = members + 1;
  st.counters["shards"] = shards;
}

BENCHMARK(BM_AssignFull)->Args({100, 1000})->Args({1000, 10000})->Args({5000, 50000})->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_AssignOneJoin)->Args({100, 1000})->Args({1000, 10000})->Args({5000, 50000})->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_AssignRangeOneJoin)->Args({100, 1000})->Args({1000, 10000})->Args({5000, 50000})->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_AssignRackAwareOneJoin)->Args({100, 1000})->Args({1000, 10000})->Args({5000, 50000})->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_AssignCoPartitionedOneJoin)->Args({100, 1000})->Args({1000, 10000})->Args({5000, 50000})->Unit(benchmark::kMicrosecond);

// A stable group of `members` members; returns it with each member's epoch and shards.
group::GroupState stable_group(int members, int32_t shards, const group::Config& cfg, group::Millis now) {
  group::GroupState g;
  g.streamPrefix = "bench";
  g.consumerGroup = "g";
  g = group::apply_metadata(g, shards, 1, cfg, now).state;
  auto ids = member_ids(members);
  for (const auto& id : ids) {
    protocol::HeartbeatRequest q;
    q.requestId = id + "-join";
    q.memberId = id;
    q.memberEpoch = 0;
    q.metadataVersion = 1;
    g = group::heartbeat(g, q, cfg, now).state;
  }
  // Settle: everybody reports what it has until nothing moves.
  for (int round = 0; round < 4; ++round) {
    for (const auto& id : ids) {
      const auto& m = g.members.at(id);
      protocol::HeartbeatRequest q;
      q.requestId = id + "-settle-" + std::to_string(round);
      q.memberId = id;
      q.memberEpoch = m.epoch;
      q.metadataVersion = 1;
      for (auto s : m.assigned) q.ownedShards.push_back({s, protocol::ShardAssignmentState::OWNED});
      g = group::heartbeat(g, q, cfg, now).state;
    }
  }
  return g;
}

// One steady heartbeat of one member of a stable 100-member group: the hot path.
void BM_HeartbeatSteady(benchmark::State& st) {
  const int members = static_cast<int>(st.range(0));
  group::Config cfg;
  const group::Millis now = 1'000'000;
  auto g = stable_group(members, static_cast<int32_t>(members * 10), cfg, now);
  if (group::group_state(g) != protocol::GroupStateName::STABLE) st.SkipWithError("group did not settle");
  const auto& m = g.members.begin()->second;
  protocol::HeartbeatRequest q;
  q.memberId = m.id;
  q.memberEpoch = m.epoch;
  q.metadataVersion = 1;
  for (auto s : m.assigned) {
    q.ownedShards.push_back({s, protocol::ShardAssignmentState::OWNED});
    q.shardProgress.push_back({s, std::string("1700000000000-0"), 3, 120});
  }
  const bool moved = st.range(1) != 0;
  int64_t i = 0;
  for (auto _ : st) {
    q.requestId = "hb-" + std::to_string(++i);
    if (moved) {
      // The group actor's way: the state goes in and the next state comes back out.
      auto out = group::heartbeat(std::move(g), q, cfg, now + i);
      g = std::move(out.state);
      benchmark::DoNotOptimize(out.response);
    } else {
      auto out = group::heartbeat(g, q, cfg, now + i);
      benchmark::DoNotOptimize(out);
    }
  }
  st.counters["members"] = members;
}
// Second argument: 0 = the state is copied in, 1 = moved in.
BENCHMARK(BM_HeartbeatSteady)
    ->Args({10, 0})->Args({10, 1})->Args({100, 0})->Args({100, 1})->Args({1000, 0})->Args({1000, 1})
    ->Unit(benchmark::kMicrosecond);

// What the group actor computed once per write to tell whether anybody else has work, and still
// does after a join, a leave or an expiry: the shape of a whole stable group (members, states, shards).
void BM_GroupShape(benchmark::State& st) {
  const int members = static_cast<int>(st.range(0));
  group::Config cfg;
  const auto g = stable_group(members, static_cast<int32_t>(members * 10), cfg, 1'000'000);
  for (auto _ : st) benchmark::DoNotOptimize(group::shape_of(g));
}
BENCHMARK(BM_GroupShape)->Arg(10)->Arg(100)->Unit(benchmark::kMicrosecond);

// What a write of steady heartbeats computes instead: the heartbeating member's part of the
// shape, before and after its beat (the rest of the group is not gone over).
void BM_MemberShape(benchmark::State& st) {
  const int members = static_cast<int>(st.range(0));
  group::Config cfg;
  const auto g = stable_group(members, static_cast<int32_t>(members * 10), cfg, 1'000'000);
  const auto& [id, m] = *g.members.begin();
  for (auto _ : st) benchmark::DoNotOptimize(group::member_shape(id, m));
}
BENCHMARK(BM_MemberShape)->Arg(10)->Arg(100)->Unit(benchmark::kMicrosecond);

// A join into a stable group: bump, target recompute, reconcile of the joiner.
void BM_HeartbeatJoin(benchmark::State& st) {
  const int members = static_cast<int>(st.range(0));
  group::Config cfg;
  auto g = stable_group(members, static_cast<int32_t>(members * 10), cfg, 1'000'000);
  protocol::HeartbeatRequest q;
  q.memberId = "joiner";
  q.memberEpoch = 0;
  q.metadataVersion = 1;
  int64_t i = 0;
  for (auto _ : st) {
    q.requestId = "join-" + std::to_string(++i);
    benchmark::DoNotOptimize(group::heartbeat(g, q, cfg, 1'000'000));
  }
}
BENCHMARK(BM_HeartbeatJoin)->Arg(100)->Arg(1000)->Unit(benchmark::kMicrosecond);

}  // namespace

// Decoding a heartbeat body as members write it (the HTTP path's decoder), and encoding an answer.
namespace {
std::string member_body(int shards) {
  protocol::HeartbeatRequest r;
  r.requestId = "10.0.0.7:4-9f2c-17";
  r.memberId = "10.0.0.7:4";
  r.memberEpoch = 3;
  r.metadataVersion = 2;
  r.runtimeConsumerCapacity = {4, 3};
  for (int i = 0; i < shards; ++i) {
    r.ownedShards.push_back({i, protocol::ShardAssignmentState::OWNED});
    r.shardProgress.push_back({i, std::string("1700000000000-") + std::to_string(i), 0, 12});
  }
  return protocol::encode(r);
}
void BM_DecodeHeartbeat(benchmark::State& st) {
  const auto body = member_body(static_cast<int>(st.range(0)));
  for (auto _ : st) benchmark::DoNotOptimize(protocol::decode_heartbeat_request(body, "10.0.0.7:4"));
  st.counters["bytes"] = static_cast<double>(body.size());
}
void BM_EncodeAnswer(benchmark::State& st) {
  protocol::HeartbeatResponse r;
  r.responseTo = "10.0.0.7:4-9f2c-17";
  r.memberId = "10.0.0.7:4";
  r.memberEpoch = 3;
  r.heartbeatIntervalMs = 3000;
  r.rebalanceTimeoutMs = 30000;
  r.memberLeaseTtlMs = 10000;
  r.assignment = protocol::Assignment{"NONE", {0, 1, 2}, {}, 2};
  std::string out;
  for (auto _ : st) {
    out.clear();
    protocol::append_response(out, r);
    benchmark::DoNotOptimize(out.data());
  }
}
}  // namespace
BENCHMARK(BM_DecodeHeartbeat)->Arg(1)->Arg(4)->Arg(16);
BENCHMARK(BM_EncodeAnswer);
