// What Redis itself says of each consumer group's position on a stream's shards (XINFO GROUPS):
// lag and pending whether or not any member is alive. Pure: the Redis store reads the shards, this
// file says what the readings mean. SPEC §8: lag Redis cannot tell is unknown, never 0.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <deque>
#include <string>
#include <unordered_map>
#include <vector>

#include "protocol/types.hpp"

namespace rsc::group {

// One consumer group on one shard stream, as XINFO GROUPS reports it.
struct ShardGroupReading {
  std::string group;
  std::string lastDeliveredId;
  std::optional<int64_t> entriesRead;  // nil: Redis cannot tell
  std::optional<int64_t> lag;          // nil: Redis cannot tell (records deleted or trimmed in the range)
  int64_t pending = 0;                 // delivered to a consumer, not acked yet
  int64_t trimmedUnread = 0;           // records retention trimmed before the group read them
};

// One shard stream as read: whether it exists and the consumer groups on it.
struct ShardReading {
  int32_t shard = 0;
  bool exists = false;
  std::optional<int64_t> length;  // XLEN, when read
  std::vector<ShardGroupReading> groups;
  std::string firstId;  // the first record's id ("" when empty or not read)
  std::string lastId;   // the last id ever generated ("" when not read)
  int64_t trimmed = 0;  // every record retention trimmed from it so far
};

// A stream's shards, read together (one pipelined round trip).
struct StreamReading {
  int32_t shardCount = 0;
  std::vector<ShardReading> shards;
};

// A group's position on one shard.
struct ShardLag {
  int32_t shard = 0;
  bool onShard = false;  // the shard stream has the group's Redis consumer group
  std::string lastDeliveredId;
  std::optional<int64_t> entriesRead;
  std::optional<int64_t> lag;  // unknown when not on the shard or Redis cannot tell
  int64_t pending = 0;
  std::optional<int64_t> length;  // the shard stream's length, when read
  int64_t trimmed = 0;            // records retention trimmed from the shard so far
  int64_t trimmedUnread = 0;      // of those, trimmed before this group read them
};

// A group's position on every shard of its stream, and the sums over them.
struct GroupLag {
  std::vector<ShardLag> shards;  // one per shard, in shard order
  int64_t knownLag = 0;          // the sum over shards whose lag is known: a lower bound
  int32_t unknownShards = 0;     // shards whose lag is unknown
  int64_t pending = 0;
  // The group's lag: known only when it is known on every shard.
  std::optional<int64_t> lag() const { return unknownShards == 0 ? std::optional<int64_t>(knownLag) : std::nullopt; }
};

// `group`'s position on each of the reading's shards (a shard the reading lacks, or without the
// group's consumer group, is unknown).
GroupLag group_lag(const StreamReading& reading, const std::string& group);

// A group's sums over the shards (what /metrics shows per group).
struct LagSums {
  int64_t knownLag = 0;
  int32_t unknownShards = 0;
  int64_t pending = 0;
};

// Every group of the stream: those the reading found on some shard and those in `known` (the
// coordinator's groups of the stream, possibly not on any shard yet: unknown everywhere). One pass
// over the reading: a stream with many groups costs its entries, not groups x entries.
using LagByGroup = std::unordered_map<std::string, LagSums>;
LagByGroup lag_by_group(const StreamReading& reading, const std::vector<std::string>& known);

// ---- The lag snapshot -----------------------------------------------------------------------------
// XINFO GROUPS lists every group of a shard, so reading one group's position costs Redis time that
// grows with the number of groups on the stream. The lag round (which reads them all anyway) keeps
// what it read in the store: one field for the shards' own figures, one per group for its position
// on each shard, and, in a second hash, one short field per group for its sums (lists). Describing
// a group or listing a stream's groups then reads a few fields, at any pod, whatever the number of
// groups; the answer says when the reading was made.
struct LagSnapshotFields {
  std::string shards;                                          // each shard's own figures
  std::vector<std::pair<std::string, std::string>> positions;  // group -> its position on each shard
  std::vector<std::pair<std::string, std::string>> sums;       // group -> its sums (same order)
};
// Every group of the reading and of `known` (unknown everywhere when not on any shard).
// `sums`: lag_by_group(r, known) when the caller has it already (the lag round does, for /metrics).
LagSnapshotFields encode_lag_snapshot(const StreamReading& r, const std::vector<std::string>& known, const LagByGroup& sums);
LagSnapshotFields encode_lag_snapshot(const StreamReading& r, const std::vector<std::string>& known);
// The reading of the shards with `group` alone on them (or nobody, without a position), from the
// fields read back; nullopt when they do not decode (a field written by another version).
std::optional<StreamReading> decode_lag_snapshot(const std::string& shards, const std::string& group,
                                                 const std::optional<std::string>& position);
std::optional<LagSums> decode_lag_sums(const std::string& text);

// What a pod last wrote of a stream's snapshot (a hash of each group's fields), so that a round
// writes only the groups whose figures changed and drops the groups that are gone. Forgotten after
// a failed write: the next write then replaces the whole snapshot.
class LagSnapshotMemory {
 public:
  struct Diff {
    std::vector<std::size_t> changed;  // indices into the fields' positions (and sums)
    std::vector<std::string> removed;  // groups written before and gone now
    bool replace = false;              // nothing known of what the store holds: every other field goes
  };
  Diff diff(const LagSnapshotFields& next) const;
  void written(const LagSnapshotFields& next);
  void forget() { known_ = false, hashes_.clear(); }

 private:
  bool known_ = false;
  std::unordered_map<std::string, uint64_t> hashes_;
};

// Where a describe's Redis figures come from: read now (`live`), or the lag snapshot written at
// `atMs` (store time; nullopt: no round has written it yet, the figures are unknown).
struct LagReadingAge {
  bool live = false;
  std::optional<int64_t> atMs;
};

// Lag sampling runs every `intervalMs` (0: never); `last` is when the previous round ran.
bool lag_round_due(std::optional<int64_t> last, int64_t now, int64_t intervalMs);

// XINFO GROUPS lists every group of a shard: a stream with many groups makes a large reply. A
// round first reads each shard's cheap fingerprint (XINFO STREAM: last id, length, groups, entries
// added, last deletion) and reads the groups again only when it changed (records added, deleted or
// trimmed, a group created) or when the last groups read is `kGroupsReadEvery` rounds old (the
// members' reads and acks show in no fingerprint: lag falling is seen that late at most).
inline constexpr int64_t kGroupsReadEvery = 4;
struct GroupsRead {
  std::string fingerprint;
  int64_t at = 0;
};
bool groups_read_due(const std::optional<GroupsRead>& last, const std::string& fingerprint, int64_t now,
                     int64_t intervalMs);

// How a round applies a stream's retention to each of its shard streams (SPEC §8): nothing, XTRIM
// MAXLEN ~ N, XTRIM MINID ~ (the store's now - the maximum age), or MINID ~ the lowest id some
// group of the shard has not yet read and acked (found by the store atomically with the trim).
// "~": Redis removes whole nodes only, never a record the bound keeps; much cheaper than exact.
struct Trim {
  enum class Mode { None, MaxLen, MinId, ProcessedByAllGroups };
  Mode mode = Mode::None;
  std::string arg;
};
Trim trim_for(const protocol::Retention& r, int64_t storeNowMs);

// What a trim of a stream's shards removed: how many records, and per group how many of them it
// had not read yet (counted record by record; never under processedByAllGroups).
struct TrimOutcome {
  int64_t trimmed = 0;
  std::map<std::string, int64_t> unread;
};
// At most this many records leave one shard in one round (a trim script blocks Redis meanwhile);
// a backlog goes over the next rounds.
inline constexpr int64_t kTrimPerShardRound = 100000;

// The name under which one pod of the live pods samples a stream (rendezvous over the pods).
std::string lag_duty_key(const std::string& streamPrefix);

// A pod's lag sampling, round after round (SPEC §8): when a round starts, which streams it reads,
// whose consumer groups are read again, and whose series leave /metrics when it ends. The pod
// actor runs the store calls (and keeps each beat within its time budget); what is read and what
// is forgotten is decided here. Times are the pod's clock.
class LagRounds {
 public:
  explicit LagRounds(int64_t intervalMs) : intervalMs_(intervalMs) {}

  bool in_progress() const { return !queue_.empty(); }
  // No round in progress and one is due (the first at once).
  bool due(int64_t now) const { return !in_progress() && lag_round_due(last_, now, intervalMs_); }
  // A round begins at `now` (also when listing the streams then fails: the next is an interval later).
  void begin(int64_t now);
  // Its streams: those listed whose duty is this pod's. False: nothing to read and nothing sampled
  // before (the round ends at once, unreported).
  bool plan(const std::vector<std::string>& mine);
  // The next stream of the round, taken off its queue (nullopt: none left).
  std::optional<std::string> next();
  // A read of the round failed: the stream's figures stay as they were, the round reports it.
  void failed() { ok_ = false; }
  // Whether a stream's groups are read again, given its fingerprint as read at `now` (groups_read_due).
  bool groups_due(const std::string& stream, const std::string& fingerprint, int64_t now) const;
  // Its groups were read at `now` with that fingerprint: the stream exists (its figures follow) or
  // is gone (its series go when the round ends).
  void groups_read(const std::string& stream, const std::string& fingerprint, int64_t now, bool exists);

  struct End {
    std::vector<std::string> forget;  // streams whose series leave /metrics
    std::size_t sampled = 0;          // streams whose series this pod exports from now on
    bool changed = false;             // ... a different number than before (worth a log line)
    bool ok = true;                   // the round went without a failed read
  };
  // Once next() has nothing left.
  End finish();

 private:
  int64_t intervalMs_;
  std::optional<int64_t> last_;
  std::deque<std::string> queue_;
  std::set<std::string> read_;     // this round: streams whose duty is this pod's
  std::set<std::string> sampled_;  // streams whose series this pod exports
  std::map<std::string, GroupsRead> groupsRead_;
  bool ok_ = true;
};

}  // namespace rsc::group
