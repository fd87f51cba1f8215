// The describe view of a group (GET .../groups/{group}), as JSON text.
#pragma once

#include <string>

#include "group/state.hpp"

namespace rsc::group {

std::string describe_json(const GroupState& g, Millis now);

}  // namespace rsc::group
