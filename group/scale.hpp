// Changing a stream's shard count (SPEC §3 rule 9), decided here and nowhere else: the store runs
// the same rules atomically (a Lua script beside the stream's metadata; the in-memory store calls
// scale_step itself), and the pod whose duty the stream is judges, from what Redis says of every
// consumer group on the draining shards, when a shrink may retire them.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "group/stream_lag.hpp"
#include "protocol/outcomes.hpp"
#include "protocol/types.hpp"

namespace rsc::group {

// Scale: a new count (more: at once; fewer: its removed shards drain first). Rollback: undo a
// shrink still draining. Retire: end a shrink whose shards are drained, if the stream is still at
// `expectedVersion` (whoever judged the drain judged that version). DeleteRetired: begin deleting
// the retired shards' streams (at `expectedVersion`: no growth since it was judged put them back in
// use), which holds every count change off until RetiredDeleted says the keys are gone. SetRacks:
// the shards' racks (`racks`, worked out by `racksFrom` or listed when ""), any time: a change bumps
// metadataVersion, so that every group of the stream learns it the way it learns a new count.
enum class ScaleOp { Scale, Rollback, Retire, DeleteRetired, RetiredDeleted, SetRacks };
struct ScaleCall {
  ScaleOp op = ScaleOp::Scale;
  int32_t target = 0;
  int32_t expectedVersion = 0;
  std::string requestedBy, reason;
  std::vector<std::string> racks;
  std::string racksFrom;
};
// What a step came to (protocol/outcomes.hpp: declared once for the store and the HTTP layer).
using protocol::ScaleOutcome;
using protocol::to_string;
struct ScaleStep {
  ScaleOutcome outcome = ScaleOutcome::Same;
  protocol::StreamMetadata meta;  // after the step
  bool changed() const {
    return outcome == ScaleOutcome::Grown || outcome == ScaleOutcome::Draining || outcome == ScaleOutcome::RolledBack ||
           outcome == ScaleOutcome::Retired || outcome == ScaleOutcome::RacksSet;
  }
};
// `now`: the store's clock (the migration's createdAt/updatedAt). A change of routing bumps
// metadataVersion and names the migration "v<new version>"; the deletion of retired keys does not
// (nobody routes to or reads them).
ScaleStep scale_step(protocol::StreamMetadata m, const ScaleCall& c, int64_t now);
// Creating or growing a stream (POST or PUT on it): never a shrink (scale does that), the key style
// chosen once, no growth while a shrink drains or retired shards' streams are being deleted. The
// Redis store runs the same rules atomically (its kPutStream script); the in-memory store calls
// put_step itself, and both answer a refusal in the same words (store::put_result).
enum class PutOutcome { Created, Grown, Same, Exists, Shrink, Style, Busy, Deleting };
struct PutCall {
  int32_t shardCount = 0;
  std::optional<protocol::KeyStyle> keyStyle;  // nullopt: the stream's, or plain for a new one
  bool createOnly = false;                     // POST: an existing stream is left alone
};
struct PutStep {
  PutOutcome outcome = PutOutcome::Same;
  protocol::StreamMetadata meta;  // the stream after the put (as it is, when nothing changed)
  bool changed() const { return outcome == PutOutcome::Created || outcome == PutOutcome::Grown; }
};
PutStep put_step(const std::optional<protocol::StreamMetadata>& current, const std::string& streamPrefix,
                 const PutCall& call);

// A growth to `n` shards (scale or PUT) puts retired shard streams below n back in use: they are
// no longer retired (their records were all read; each group's Redis consumer group is still there).
void grown_over_retired(protocol::StreamMetadata& m, int32_t n);

// What the pod whose duty the stream is does about its retired shards' streams. `deleteAfterMs`
// < 0: keep them forever (the default); else delete them that long after the last retirement.
enum class RetiredKeysAction {
  Forget,  // nothing retired to delete (or kept forever): stop watching the stream
  Wait,    // due at `dueAtMs`
  Delete,  // now (or again: a deletion that began and did not finish, a pod died meanwhile)
};
struct RetiredKeysStep {
  RetiredKeysAction action = RetiredKeysAction::Forget;
  int64_t dueAtMs = 0;
  int32_t from = 0, to = 0;  // the shard streams [from, to)
};
RetiredKeysStep retired_keys_step(const protocol::StreamMetadata& m, int64_t now, int64_t deleteAfterMs);

// What keeps one draining shard from retiring: a consumer group with records delivered and not
// acked (pending), or not yet read (unread: nullopt when Redis cannot tell, which also blocks).
struct DrainWait {
  int32_t shard = 0;
  std::string group;
  int64_t pending = 0;
  std::optional<int64_t> unread;
};
struct DrainVerdict {
  bool draining = false;  // a shrink is in progress
  bool drained = false;   // ... and may retire now
  int64_t graceLeftMs = 0;  // the producers' time to learn the new routing, still to run
  std::vector<DrainWait> waiting;
};
// A shrink may retire its shards once `graceMs` has passed since it started (producers that route
// with an older copy still write to them meanwhile, and those records are read) and Redis shows,
// for every consumer group on every draining shard, nothing pending and nothing unread (SPEC §3
// rule 9). Judged on Redis alone: a group with no live member blocks only if it has records there
// it has not read or acked. A shard stream that does not exist holds nothing. `reading` covers the
// shards [0, m.readShardCount()) or at least the draining ones.
DrainVerdict drain_verdict(const protocol::StreamMetadata& m, const StreamReading& reading, int64_t now, int64_t graceMs);
// Whether a pod reads the list of draining streams now: every beat while it watches a draining
// stream, else every `idleIntervalMs` (so that streams at rest cost the store nearly nothing; a
// shrink is noticed that late at most, well within its producers' grace).
inline constexpr int64_t kDrainingReadIntervalMs = 10000;
// `wakeAt`: a retired shards' deletion due then, read no later.
bool draining_read_due(std::optional<int64_t> lastRead, int64_t now, bool watching,
                       std::optional<int64_t> wakeAt = std::nullopt, int64_t idleIntervalMs = kDrainingReadIntervalMs);

// One stream's shrink, as the pod whose duty it is carries it through a round: each step says what
// to do next from what the pod has learned so far this round, until it waits (for a drain, or for
// the retired shards' deletion time) or forgets the stream (nothing left to do). The pod runs the
// commands and feeds back what they gave; every decision is here.
enum class ShrinkAction {
  Forget,         // nothing left to do for this stream: stop watching it
  WaitUntil,      // the retired shards' streams are deleted at `dueAtMs` (Redis's clock)
  ReadShards,     // read the draining shards (every consumer group on each)
  Watch,          // not drained yet (`verdict` says what it waits for): look again next round
  Retire,         // drained: retire the shards (ScaleOp::Retire at `expectedVersion`)
  MarkDeleting,   // hold count changes off while the retired shards' streams go (ScaleOp::DeleteRetired)
  DeleteKeys,     // delete the shard streams [from, to)
  RecordDeleted,  // record that they are gone (ScaleOp::RetiredDeleted): count changes may go on
};
// What the pod has learned of the stream in this round.
struct ShrinkProgress {
  std::optional<protocol::StreamMetadata> meta;  // as last read or written; nullopt: no such stream
  std::optional<StreamReading> reading;          // the draining shards, once read in this round
  bool keysDeleted = false;                      // DeleteKeys done in this round
};
struct ShrinkStep {
  ShrinkAction action = ShrinkAction::Forget;
  int64_t dueAtMs = 0;          // WaitUntil
  int32_t expectedVersion = 0;  // Retire, MarkDeleting
  int32_t from = 0, to = 0;     // the shards retiring (Watch, Retire) or retired (the rest)
  DrainVerdict verdict;         // Watch
};
ShrinkStep shrink_step(const ShrinkProgress& p, int64_t now, int64_t graceMs, int64_t deleteRetiredAfterMs);
std::string_view to_string(ShrinkAction a);

// "shard 5: group billing 3 pending, 12 unread; ..." (at most a few shards named).
std::string to_string(const DrainVerdict& v);

}  // namespace rsc::group
