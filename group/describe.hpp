// The describe view of a group (GET .../groups/{group}), as JSON text.
#pragma once

#include <string>

#include "group/recent_events.hpp"
#include "group/state.hpp"

namespace rsc::group {

// With `recent`, the answer carries "recentEvents" (oldest first), each with its age.
std::string describe_json(const GroupState& g, Millis now, const RecentEvents* recent = nullptr);

}  // namespace rsc::group
