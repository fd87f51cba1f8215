#include "protocol/outcomes.hpp"

namespace rsc::protocol {

std::string_view to_string(ScaleOutcome o) {
  switch (o) {
    case ScaleOutcome::Grown: return "grown";
    case ScaleOutcome::Draining: return "draining";
    case ScaleOutcome::Same: return "same";
    case ScaleOutcome::Busy: return "busy";
    case ScaleOutcome::NothingToRollBack: return "nothing to roll back";
    case ScaleOutcome::RolledBack: return "rolled back";
    case ScaleOutcome::Retired: return "retired";
    case ScaleOutcome::Stale: return "stale";
    case ScaleOutcome::Deleting: return "deleting";
    case ScaleOutcome::KeysDeleted: return "keys deleted";
    case ScaleOutcome::RacksSet: return "racks set";
    case ScaleOutcome::NoStream: return "no stream";
  }
  return "same";
}

}  // namespace rsc::protocol
