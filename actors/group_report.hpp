// What a group actor tells operators: its log lines and metrics, and the ring of recent events
// describe shows. No CAF here.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "actors/metrics.hpp"
#include "group/cached_group.hpp"
#include "group/recent_events.hpp"
#include "redis/result.hpp"

namespace rsc::actors {

class GroupReport {
 public:
  GroupReport() = default;
  GroupReport(protocol::GroupKey key, Metrics* metrics, bool logEvents)
      : key_(std::move(key)), metrics_(metrics), logEvents_(logEvents) {}

  // A step was stored: its events (logged, counted, kept for describe), the handovers it
  // completed, the group's gauges.
  void stored(const std::vector<group::Event>& events, group::CachedGroup& c, double computeSeconds, group::Millis now);
  // The store went back in time (recovered by the core; an operator must hear of it).
  void rollback(const std::optional<group::Rollback>& r, const group::CachedGroup& c);
  // A store call failed (an unreachable store is the pod's news, logged once by the pod).
  void store_failed(const store::Error& e);
  void deleted();
  void offsets_reset(const std::string& to, int32_t shards);
  // How many dead letters the group has now (read with its deadline work, or by describe).
  void dead_letters(int64_t n);
  const group::RecentEvents& recent() const { return recent_; }

 private:
  protocol::GroupKey key_;
  Metrics* metrics_ = nullptr;  // may be null; owned by the gateway's configuration
  bool logEvents_ = true;
  group::RecentEvents recent_;
  std::shared_ptr<Metrics::GroupSlot> slot_;  // the group's place in the metrics
};

}  // namespace rsc::actors
