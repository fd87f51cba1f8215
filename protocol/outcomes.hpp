// What an administrative call came to, and where a group's calls are served: declared once here,
// for the layers that decide them (group/, the store) and the HTTP layer that answers them
// (http/ maps each to its status code; nothing here knows HTTP).
#pragma once

#include <string_view>

namespace rsc::protocol {

// A stream's PUT or POST.
// Busy: a growth asked while a shrink still drains (one shard count change at a time): nothing
// written, answered as a second scale is (409 ACTIVE_MIGRATION_EXISTS).
enum class StreamWriteOutcome { Created, Grown, Same, Exists, Busy };

// An admin's delete of a group.
enum class GroupDeletion { Deleted, NotFound, HasLiveMembers };

// An admin's reset of a group's position on every shard.
enum class OffsetsResetOutcome { Reset, NotFound, HasLiveMembers };

// A change of a stream's shard count, a rollback, or a step of a shrink's retirement.
enum class ScaleOutcome {
  Grown,              // more shards, routed and read at once
  Draining,           // fewer routed at once; the removed ones still read until drained
  Same,               // the count asked is the count it has
  Busy,               // a shrink is still draining: one change at a time
  NothingToRollBack,  // no shrink is draining
  RolledBack,         // the draining shards are routed again
  Retired,            // the drained shards are no longer read
  Stale,              // the stream moved since the drain (or the deletion) was judged
  Deleting,           // the retired shards' streams may be deleted now; no count change until done
  KeysDeleted,        // ... and they are gone
  RacksSet,           // the shards' racks changed (the count did not)
  NoStream,           // there is no such stream (a caller's finding; the scale step never returns it)
};
// "grown", "draining", "same", "busy", "nothing to roll back", "rolled back", "retired", "stale",
// "deleting", "keys deleted", "racks set", "no stream": the spelling of logs and of the scale answer's "outcome".
std::string_view to_string(ScaleOutcome o);

// Where a group's calls are served: by this pod, by another one (forwarded there), or by none now.
enum class PlacementKind { Here, Elsewhere, Nowhere };

}  // namespace rsc::protocol
