#include "group/recent_events.hpp"

namespace rsc::group {

bool RecentEvents::worth_showing(Event::Kind k) {
  return k != Event::Kind::TARGET_COMPUTED && k != Event::Kind::EPOCH_ADVANCED;
}

void RecentEvents::record(const std::vector<Event>& events, int32_t groupEpoch, Millis now) {
  if (capacity_ == 0) return;
  for (const auto& e : events) {
    if (!worth_showing(e.kind)) continue;
    if (items_.size() == capacity_) items_.pop_front();
    items_.push_back(RecentEvent{now, e, groupEpoch});
  }
}

}  // namespace rsc::group
