// The last things that happened to a group, as this pod saw them: a small ring of events (joins,
// leaves, rebalances, handovers, fencings, expiries) with the time and the group epoch after
// each. Kept in memory only; describe and the status page show it.
//
// Every group a pod serves holds one, so it is packed: the events are serialized into one buffer
// of at most `bytes` bytes (1 KiB by default: 10 to 20 events, each with its member, shards and
// detail) and the oldest leave to make room. Reading them back (describe) unpacks them.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "group/state.hpp"

namespace rsc::group {

struct RecentEvent {
  Millis atMs = 0;
  Event event;
  int32_t groupEpoch = 0;  // after the step that produced it
};

class RecentEvents {
 public:
  static constexpr std::size_t kDefaultCapacity = 64;  // events
  static constexpr std::size_t kDefaultBytes = 1024;   // packed bytes
  // What one packed event keeps at most; longer lists and texts are cut (the detail says so).
  static constexpr std::size_t kMaxShards = 32;
  static constexpr std::size_t kMaxText = 160;

  explicit RecentEvents(std::size_t capacity = kDefaultCapacity, std::size_t bytes = kDefaultBytes);
  // Records the events of one stored step; bookkeeping kinds (a target computed, an epoch
  // advanced) are left out, and the oldest events make room for new ones.
  void record(const std::vector<Event>& events, int32_t groupEpoch, Millis now);
  // Oldest first.
  std::vector<RecentEvent> items() const;
  std::size_t size() const { return count_; }
  std::size_t packed_bytes() const { return buf_.size(); }
  static bool worth_showing(Event::Kind k);

 private:
  void push(const Event& e, int32_t groupEpoch, Millis now);
  void pop_oldest();

  std::size_t capacity_;
  std::size_t bytes_;
  std::size_t count_ = 0;
  std::string buf_;  // records back to back, oldest first; each starts with its own length
};

}  // namespace rsc::group
