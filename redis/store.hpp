// The group store (SPEC §4): load a group, compare-and-set its next state at an expected
// storeRevision, the per-group mutex, the group index and stream metadata. Two implementations:
// MemoryStore (unit tests; can inject conflicts and faults) and RedisStore (hiredis).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "group/scale.hpp"
#include "protocol/outcomes.hpp"
#include "group/state.hpp"
#include "group/stream_lag.hpp"
#include "protocol/types.hpp"
#include "redis/result.hpp"

namespace rsc::store {

// What a read of a group's state brought (group/state.hpp: the core adopts it).
using Rollback = group::Rollback;
using Loaded = group::Loaded;

struct CasRequest {
  GroupKey key;
  int64_t expectedRevision = 0;
  const group::GroupState* next = nullptr;
  // What to write; nullptr writes every member (used to create or rewrite a group). Members in
  // delta->removed are deleted.
  const group::Delta* delta = nullptr;
  // The mutex, folded into the write: empty = do not look at it. Otherwise the write fails with
  // Locked when another token holds it, and on success, when lockTtlMs > 0, the mutex is taken
  // or extended for lockTtlMs (0: only checked, as heartbeats do: they must not lock other pods out).
  std::string lockToken;
  Millis lockTtlMs = 2000;
  bool returnStateOnConflict = true;  // saves the reload round trip after a conflict
  // The write brings the group's next deadline earlier than the stored state's (or gives a group
  // without one a deadline): the deadline index is lowered to this, in the same round trip, before
  // the write (lowering is always safe, even if the write then loses).
  std::optional<Millis> lowerDeadlineTo;
  // Write nothing: only confirm that the stored revision is still expectedRevision (Written, with
  // that revision) or say what it is now (Conflict, without the state: a plain read of the
  // revision is the cheapest call, and a stale copy is rare; the caller loads it). A pod answers
  // from its copy of the group only once a store call made after the request arrived confirmed it.
  bool verifyOnly = false;
};

enum class CasStatus { Written, Conflict, Locked };
std::string to_string(CasStatus s);

struct CasResult {
  CasStatus status = CasStatus::Written;
  int64_t revision = 0;                  // the new one when Written, the current one otherwise
  std::optional<group::GroupState> current;  // on Conflict, when asked for and the group exists
  Rollback rollback;
};

// Deadline work: one pod at a time does it for a group, holding the group mutex (SET PX with its
// token, taken or extended), and learns in the same round trip whether the group moved since the
// revision it knows.
enum class LeaseStatus { NotHolder, Unchanged, Changed };
struct TickLease {
  LeaseStatus status = LeaseStatus::NotHolder;
  int64_t revision = 0;
  std::optional<Loaded> loaded;  // when Changed
};

struct PodBeat {
  Millis storeTimeMs = 0;
  std::vector<std::string> livePods;
  // Parallel to livePods: when each registration counts from (group::PodSeen::since).
  std::vector<Millis> since;
  std::vector<std::string> addresses;  // parallel too: where each pod takes forwarded calls
  std::vector<GroupKey> due;
};

using StreamPut = group::PutCall;
struct StreamWrite {
  using Outcome = protocol::StreamWriteOutcome;
  protocol::StreamMetadata meta;
  Outcome outcome = Outcome::Same;
};
// What a store answers for a put the rules (group::put_step) decided: the stream written or left
// as it is, or the refusal, in the same words from every store.
Result<StreamWrite> put_result(const std::string& streamPrefix, group::PutStep step);

enum class DeleteStatus { Deleted, Conflict, NotFound };
// What an admin's delete of a group came to.
using protocol::GroupDeletion;
// What an admin's reset of a group's offsets came to: `shards` moved when Reset.
struct OffsetsReset {
  using Outcome = protocol::OffsetsResetOutcome;
  Outcome outcome = Outcome::Reset;
  int32_t shards = 0;
};

// What the coordinator keeps in Redis, as three interfaces: a group's state and what hangs on
// it (the compare-and-set, the lock and deadline work, admin changes, dead letters, its Redis
// consumer groups), the streams (metadata, shard streams, retention), and the pods' registry (who
// is alive, the store's clock, the deadline index), so that a part can be given only the one it
// needs. GroupStore is all three.
class GroupStateStore {
 public:
  virtual ~GroupStateStore() = default;

  virtual Result<Loaded> load(const GroupKey& key) = 0;
  // One round trip for the whole batch: the writes of many groups are pipelined.
  virtual std::vector<Result<CasResult>> compare_and_set(const std::vector<CasRequest>& batch) = 0;
  Result<CasResult> compare_and_set(const CasRequest& r) { return compare_and_set(std::vector<CasRequest>{r}).front(); }

  // Takes or renews the tick lease for `token`; NotHolder while another pod holds it.
  virtual Result<TickLease> tick_lease(const GroupKey& key, const std::string& token, Millis ttl,
                                       int64_t knownRevision) = 0;

  // The end of deadline work: the group's entry in the deadline index becomes `due` (nullopt:
  // removed) unless the index already reflects a newer revision than `revision`, and the mutex
  // is released (when `token` is not empty). One round trip.
  virtual Result<bool> finish_deadline_work(const GroupKey& key, const std::string& token, std::optional<Millis> due,
                                            int64_t revision) = 0;


  // Deletes the group's state at `expectedRevision` (its revision is kept, so that it never goes
  // back), its mutex, and its entries in the group, stream and deadline indexes.
  // `grantsHeldUntilMs` > 0: kept with the revision; a group created under the name again starts
  // with no fresh grants until then (group::grants_held_after_delete).
  virtual Result<DeleteStatus> delete_group(const GroupKey& key, int64_t expectedRevision,
                                            int64_t grantsHeldUntilMs = 0) = 0;
  // Moves the group's position on each of the stream's `shardCount` shard streams to `to` (a Redis
  // entry id, "0" or "$"; XGROUP SETID, the group created there at `to` if missing), guarded like
  // every write of the group: only while its state is still at `expectedRevision` (the state the
  // reset was judged on), which it then moves on by one, so a pod that judged anything on the
  // older state must read it again before it writes. `conflict`: the state had moved on; nothing
  // was moved, judge again.
  struct OffsetsMoved {
    bool conflict = false;
    int32_t shards = 0;
    int64_t revision = 0;  // the group's revision after the reset (or the newer one it found)
  };
  virtual Result<OffsetsMoved> reset_offsets(const GroupKey& key, int32_t shardCount, const std::string& to,
                                             int64_t expectedRevision) {
    (void)key, (void)shardCount, (void)to, (void)expectedRevision;
    return Result<OffsetsMoved>::failure(ErrorKind::Fatal, "this store has no shard streams");
  }
  // The group's dead letters: how many, and the oldest `limit` (0: only how many); groupFound false
  // when there is no such group and no dead letter of one.
  virtual Result<protocol::DeadLetterPage> dead_letters(const GroupKey& key, int64_t limit) {
    (void)key, (void)limit;
    return Result<protocol::DeadLetterPage>::failure(ErrorKind::Fatal, "this store keeps no dead letters");
  }
  // Writes these dead letters (by deadLetterId; none: the oldest `limit`) back to the end of their
  // shard streams, each removed from the dead-letter stream once written: how many were, and the
  // named ids the stream does not hold. Each record written back carries its provenance after its
  // own fields (protocol::kRedriveFieldPrefix + deadLetterId, id, deliveries, error, member).
  virtual Result<protocol::DeadLetterMove> redrive(const GroupKey& key, const std::vector<std::string>& deadLetterIds,
                                                   int64_t limit) {
    (void)key, (void)deadLetterIds, (void)limit;
    return Result<protocol::DeadLetterMove>::failure(ErrorKind::Fatal, "this store keeps no dead letters");
  }
  // Drops these dead letters (none named: the oldest `limit`) for good.
  virtual Result<protocol::DeadLetterMove> discard_dead_letters(const GroupKey& key,
                                                                const std::vector<std::string>& deadLetterIds, int64_t limit) {
    (void)key, (void)deadLetterIds, (void)limit;
    return Result<protocol::DeadLetterMove>::failure(ErrorKind::Fatal, "this store keeps no dead letters");
  }

  // Every group ever written (and not deleted), so a restarted pod finds them.
  virtual Result<std::vector<GroupKey>> list_groups() = 0;

  // The data plane of a group (SPEC §4): every shard stream of the group's stream in [0,
  // shardCount) exists and has the group's Redis consumer group (XGROUP CREATE ... MKSTREAM,
  // starting at `startId`; one that exists already is left alone). Answers how many it created.
  virtual Result<int32_t> provision(const GroupKey& key, int32_t shardCount, const std::string& startId) = 0;

  // Tells the group's subscribers (the member runtimes) something changed: a sharded pub/sub
  // message on the group's channel (KeySpace::notify_channel, the group's slot). Best effort: a
  // lost message only delays a heartbeat. Returns how many subscribers received it (> 0: true).
  virtual Result<bool> notify(const GroupKey& key, const std::string& message) = 0;

  // Rollbacks detected so far (a metric).
  virtual int64_t rollbacks_detected() const = 0;
};

class PodRegistry {
 public:
  virtual ~PodRegistry() = default;

  // This pod is alive for `leaseMs` more (on the store's clock); answers the store's time, the
  // live pods and up to `dueLimit` groups whose deadline has come. An empty podId only reads.
  // `address`: where other pods reach this one (host:port), kept with the registration.
  virtual Result<PodBeat> pod_beat(const std::string& podId, Millis leaseMs, std::size_t dueLimit,
                                   const std::string& address = {}) = 0;
  virtual Result<bool> pod_leave(const std::string& podId) = 0;
  // The group's deadline-index entry becomes due at `at` unless it is due earlier already: its
  // owner's pod runs its deadline work then (how a pod that does not serve a group tells the one
  // that does that something outside the group changed, such as its stream).
  virtual Result<bool> mark_due(const GroupKey& key, Millis at) = 0;
  // Gives every group of the group index that has no entry in the deadline index one, due at
  // `now` (groups written before the index existed, or a write whose index update was lost).
  virtual Result<int64_t> index_missing_deadlines(Millis now) = 0;

  // Is the store reachable (readiness)?
  virtual Result<bool> ping() = 0;
};

class StreamStore {
 public:
  virtual ~StreamStore() = default;

  // How many groups the stream has (the stream's group index).
  virtual Result<int64_t> count_stream_groups(const std::string& streamPrefix) = 0;

  // Each shard stream of the stream as Redis holds it (XINFO GROUPS and XLEN, one round trip):
  // every consumer group's position, whether or not any member is alive (only `onlyGroup`'s when
  // given). nullopt: no such stream.
  virtual Result<std::optional<group::StreamReading>> read_stream(const std::string& streamPrefix,
                                                                  const std::string& onlyGroup = {}) {
    (void)streamPrefix, (void)onlyGroup;
    return Result<std::optional<group::StreamReading>>::failure(ErrorKind::Fatal, "this store has no shard streams");
  }

  // The lag snapshot (group/stream_lag.hpp): what a lag round read, kept for every pod. A write sets
  // the fields given (and when it was read), drops the groups named, and with `replace` every field
  // not given (a pod that does not know what the store holds).
  struct LagSnapshotWrite {
    int64_t atMs = 0;  // store time of the reading
    std::string shards;
    std::vector<std::pair<std::string, std::string>> positions, sums;
    std::vector<std::string> removed;
    bool replace = false;
  };
  virtual Result<bool> write_lag_snapshot(const std::string& streamPrefix, const LagSnapshotWrite& w) {
    (void)streamPrefix, (void)w;
    return Result<bool>::failure(ErrorKind::Fatal, "this store keeps no lag snapshot");
  }
  // What the snapshot holds for these groups: their positions (`sums` false: with the shards'
  // figures) or their sums (`sums` true), nullopt for a group it does not hold; `atMs` nullopt when
  // no round has written it.
  struct LagSnapshotRead {
    std::optional<int64_t> atMs;
    std::string shards;
    std::vector<std::optional<std::string>> values;  // one per group asked, in order
  };
  virtual Result<LagSnapshotRead> read_lag_snapshot(const std::string& streamPrefix, const std::vector<std::string>& groups,
                                                    bool sums) {
    (void)streamPrefix, (void)sums;
    LagSnapshotRead r;
    r.values.resize(groups.size());
    return Result<LagSnapshotRead>::success(std::move(r));
  }

  // A fingerprint of the stream's shards that changes when records are added, deleted or trimmed
  // or a consumer group is created (XINFO STREAM of each, one round trip); "" when unknown.
  virtual Result<std::string> stream_fingerprint(const std::string& streamPrefix) {
    (void)streamPrefix;
    return Result<std::string>::success(std::string());
  }

  // The stream's retention policy (none when never set), and setting it (false: no such stream).
  virtual Result<protocol::Retention> get_retention(const std::string& streamPrefix) {
    (void)streamPrefix;
    return Result<protocol::Retention>::success({});
  }
  virtual Result<bool> set_retention(const std::string& streamPrefix, const protocol::Retention& r) {
    (void)streamPrefix, (void)r;
    return Result<bool>::failure(ErrorKind::Fatal, "this store has no shard streams");
  }
  // The Redis node serving the key of each of the shards [0, count) ("host:port": the master of the
  // key's slot in a cluster, as CLUSTER SLOTS names it; the one node of a single Redis), for the
  // zone rule of a stream's shard racks.
  virtual Result<std::vector<std::string>> shard_nodes(const std::string& streamPrefix, protocol::KeyStyle style,
                                                       int32_t count) {
    (void)streamPrefix, (void)style, (void)count;
    return Result<std::vector<std::string>>::failure(ErrorKind::Fatal, "this store has no Redis nodes");
  }
  // Applies a trim to every shard stream of the stream (group/stream_lag.hpp: trim_for).
  virtual Result<group::TrimOutcome> trim_stream(const std::string& streamPrefix, const group::Trim& t) {
    (void)streamPrefix, (void)t;
    return Result<group::TrimOutcome>::failure(ErrorKind::Fatal, "this store has no shard streams");
  }

  // The stream's groups.
  virtual Result<std::vector<std::string>> list_stream_groups(const std::string& streamPrefix) = 0;
  // Every stream created (POST/PUT, or by a first join) and every stream a group names, sorted.
  virtual Result<std::vector<std::string>> list_streams() = 0;

  virtual Result<std::optional<protocol::StreamMetadata>> get_stream(const std::string& streamPrefix) = 0;
  // Creates the stream or grows it (metadataVersion + 1). Same count: unchanged. Fewer: Invalid.
  // A key style other than the stream's: Invalid (it is chosen once, at creation). With
  // `createOnly` an existing stream is left as it is (outcome Exists).
  virtual Result<StreamWrite> write_stream(const std::string& streamPrefix, const StreamPut& put) = 0;
  // Changes the stream's shard count by group::scale_step's rules, atomically (SPEC §3 rule 9):
  // the step's outcome and the stream as it is after it. NotFound-like: an Invalid error.
  virtual Result<group::ScaleStep> scale_stream(const std::string& streamPrefix, const group::ScaleCall& call) = 0;
  // The streams a shrink may be draining (a superset: an entry is added before the shrink is
  // written, removed once the stream is seen not draining), so that the pods look at those only.
  virtual Result<std::vector<std::string>> draining_streams() = 0;
  virtual Result<bool> forget_draining(const std::string& streamPrefix) = 0;
  // Deletes the shard streams [from, to) of a stream and what rsc keeps beside each (the records
  // retention trimmed unread). Called only while the stream's metadata says their deletion is under
  // way (ScaleOp::DeleteRetired), which holds off any growth that would use them again. Answers how
  // many shard streams existed.
  virtual Result<int64_t> delete_shard_streams(const std::string& streamPrefix, protocol::KeyStyle style, int32_t from,
                                               int32_t to) = 0;
  Result<protocol::StreamMetadata> put_stream(const std::string& streamPrefix, int32_t shardCount) {
    auto r = write_stream(streamPrefix, StreamPut{shardCount, std::nullopt, false});
    if (!r.ok()) return Result<protocol::StreamMetadata>::failure(r.error);
    return Result<protocol::StreamMetadata>::success(r.value->meta);
  }
};

// All three, as one Redis (or MemoryStore) implements them.
class GroupStore : public GroupStateStore, public StreamStore, public PodRegistry {};

// The refusal of a key style other than the stream's.
std::string key_style_fixed(const std::string& streamPrefix, protocol::KeyStyle current);

// A random token of 128 bits, hex.
std::string random_token();


// Remembers, per group, the highest revision and group epoch this process has seen, to detect a
// store that went back in time (restart without persistence, failover to a lagging replica).
class RevisionTracker {
 public:
  explicit RevisionTracker(LogFn log = {}) : log_(std::move(log)) {}
  // Every revision read from or written to the store passes here. A missing group is revision 0.
  Rollback observe(const GroupKey& key, int64_t revision, int32_t groupEpoch);
  int64_t rollbacks() const;
  // Groups remembered: those seen with a revision or epoch above 0 (never a group that does not exist).
  std::size_t remembered() const;

 private:
  struct Seen {
    int64_t revision = 0;
    int32_t groupEpoch = 0;
  };
  mutable std::mutex mu_;
  std::map<std::string, Seen> seen_;
  int64_t rollbacks_ = 0;
  LogFn log_;
};

}  // namespace rsc::store
