// The last things that happened to a group, as this pod saw them: a small ring of events (joins,
// leaves, rebalances, handovers, fencings, expiries) with the time and the group epoch after
// each. Kept in memory only; describe and the status page show it.
#pragma once

#include <cstddef>
#include <deque>
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
  static constexpr std::size_t kDefaultCapacity = 64;
  explicit RecentEvents(std::size_t capacity = kDefaultCapacity) : capacity_(capacity) {}
  // Records the events of one stored step; bookkeeping kinds (a target computed, an epoch
  // advanced) are left out, and the oldest events make room for new ones.
  void record(const std::vector<Event>& events, int32_t groupEpoch, Millis now);
  // Oldest first.
  const std::deque<RecentEvent>& items() const { return items_; }
  static bool worth_showing(Event::Kind k);

 private:
  std::size_t capacity_;
  std::deque<RecentEvent> items_;
};

}  // namespace rsc::group
