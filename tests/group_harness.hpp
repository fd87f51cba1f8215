// A fake-clock harness around the pure core: holds the state, applies outcomes like a store would
// (revision +1 per change), and builds heartbeats tersely.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "group/coordinator.hpp"
#include "protocol/codec.hpp"

namespace rsc::testing {

using group::Millis;
using protocol::HeartbeatRequest;
using protocol::HeartbeatResponse;
using protocol::HeartbeatStatus;
using protocol::ShardAssignmentState;
using Shards = std::vector<int32_t>;

struct Report {
  Shards owned;
  Shards revoked;   // REVOKED, inFlight 0: the explicit ack
  Shards draining;  // DRAINING, inFlight 1: still held
  Shards progress;
};

class Harness {
 public:
  explicit Harness(int32_t shards = 6, group::Config cfg = default_config()) : cfg_(cfg) {
    g_.streamPrefix = "orders";
    g_.consumerGroup = "billing";
    apply(group::apply_metadata(g_, shards, 1, cfg_, now_));
  }

  static group::Config default_config() {
    group::Config c;
    c.heartbeatIntervalMs = 100;
    c.memberLeaseTtlMs = 1000;
    c.rebalanceTimeoutMs = 500;
    return c;
  }

  HeartbeatRequest request(const std::string& id, int32_t epoch, const Report& r = {}) {
    HeartbeatRequest q;
    q.requestId = id + "-" + std::to_string(++seq_);
    q.memberId = id;
    q.memberEpoch = epoch;
    q.metadataVersion = g_.metadataVersion;
    q.runtimeConsumerCapacity = {4, 4};
    for (auto s : r.owned) q.ownedShards.push_back({s, ShardAssignmentState::OWNED});
    for (auto s : r.revoked) q.revokingShards.push_back({s, ShardAssignmentState::REVOKED, 0, std::nullopt});
    for (auto s : r.draining) q.revokingShards.push_back({s, ShardAssignmentState::DRAINING, 1, std::nullopt});
    for (auto s : r.progress) q.shardProgress.push_back({s, std::string("1-0"), 0, 0});
    return q;
  }

  HeartbeatResponse send(const HeartbeatRequest& q) {
    last_ = group::heartbeat(g_, q, cfg_, now_);
    apply(last_);
    return last_.response;
  }
  HeartbeatResponse hb(const std::string& id, int32_t epoch, const Report& r = {}) { return send(request(id, epoch, r)); }

  void tick() { apply(group::tick(g_, cfg_, now_)); }
  void advance(Millis ms) { now_ += ms; }

  void apply(const group::Outcome& o) {
    const int64_t rev = g_.storeRevision;
    g_ = o.state;
    g_.storeRevision = rev + (o.changed() ? 1 : 0);
    for (const auto& e : o.events) events_.push_back(group::to_string(e));
  }

  const group::Member& member(const std::string& id) const { return g_.members.at(id); }
  bool has(const std::string& id) const { return g_.members.count(id) != 0; }
  group::GroupState& state() { return g_; }
  const group::HeartbeatOutcome& last() const { return last_; }
  const group::Config& cfg() const { return cfg_; }
  Millis now() const { return now_; }
  std::vector<std::string>& events() { return events_; }

 private:
  group::Config cfg_;
  group::GroupState g_;
  Millis now_ = 1'000'000;
  int seq_ = 0;
  group::HeartbeatOutcome last_;
  std::vector<std::string> events_;
};

inline Shards assigned(const HeartbeatResponse& r) { return r.assignment ? r.assignment->assignedShards : Shards{}; }
inline Shards pending(const HeartbeatResponse& r) { return r.assignment ? r.assignment->pendingShards : Shards{}; }

}  // namespace rsc::testing
