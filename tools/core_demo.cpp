// rsc-core-demo: walks a 12-shard group through joins, a handover and a leave with the pure core
// and prints each decision: the core alone, with no store, actors or HTTP.
#include <iostream>

#include "group/coordinator.hpp"
#include "protocol/codec.hpp"

using namespace rsc;

namespace {

group::GroupState g;
group::Config cfg;
group::Millis now = 0;
int seq = 0;

protocol::HeartbeatResponse send(const std::string& id, int32_t epoch, std::vector<int32_t> owned,
                                 std::vector<int32_t> revoked = {}) {
  protocol::HeartbeatRequest r;
  r.requestId = id + "-" + std::to_string(++seq);
  r.memberId = id;
  r.memberEpoch = epoch;
  r.metadataVersion = g.metadataVersion;
  for (auto s : owned) r.ownedShards.push_back({s, protocol::ShardAssignmentState::OWNED});
  for (auto s : revoked) r.revokingShards.push_back({s, protocol::ShardAssignmentState::REVOKED, 0, std::nullopt});
  auto out = group::heartbeat(g, r, cfg, now);
  for (const auto& e : out.events) std::cout << "  event: " << group::to_string(e) << "\n";
  g = out.state;
  if (out.changed()) ++g.storeRevision;
  std::cout << id << " -> " << protocol::encode(out.response) << "\n";
  return out.response;
}

std::vector<int32_t> assigned(const protocol::HeartbeatResponse& r) {
  return r.assignment ? r.assignment->assignedShards : std::vector<int32_t>{};
}

}  // namespace

int main() {
  g.streamPrefix = "orders";
  g.consumerGroup = "billing";
  g = group::apply_metadata(g, 12, 1, cfg, now).state;
  std::cout << "# member a joins a 12-shard stream\n";
  auto a = send("a", 0, {});
  std::cout << "# member b joins: a must give up half before b may read it\n";
  auto b = send("b", 0, {});
  now += 1000;
  auto a2 = send("a", a.memberEpoch, assigned(a));
  std::cout << "# a drained and acks the revoked shards\n";
  now += 1000;
  auto a3 = send("a", a2.memberEpoch, assigned(a2), {6, 7, 8, 9, 10, 11});
  std::cout << "# b picks the released shards up\n";
  auto b2 = send("b", b.memberEpoch, assigned(b));
  std::cout << "# a leaves gracefully\n";
  send("a", -1, assigned(a3), {});
  send("a", -1, {}, assigned(a3));
  send("b", b2.memberEpoch, assigned(b2));
  std::cout << "group state: " << protocol::to_string(group::group_state(g)) << " storeRevision=" << g.storeRevision
            << "\n";
  return 0;
}
