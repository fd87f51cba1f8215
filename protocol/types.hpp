// Wire types of the heartbeat RPC (SPEC §2) and the stream admin calls.
// Plain values: no I/O, no clock, no framework include.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

namespace rsc::protocol {

inline constexpr int kProtocolVersion = 1;

enum class HeartbeatStatus {
  OK,
  RETRY,
  SYNC_METADATA,
  REVOKE_PENDING,
  UNKNOWN_MEMBER_ID,
  FENCED_MEMBER_EPOCH,
  UNSUPPORTED_PROTOCOL,
  INVALID_REQUEST,
  GROUP_AUTHORIZATION_FAILED,
  // A join with an instanceId another member id holds live (Kafka's UNRELEASED_INSTANCE_ID): nothing
  // changed; join again once that member has left or its lease has ended. rsc's runtime gives up
  // (another process of the instance is running) once it has been refused for longer than a lease.
  UNRELEASED_INSTANCE_ID,
};

enum class ShardAssignmentState { OWNED, REVOKING, DRAINING, REVOKED };

enum class MemberLifecycleState { STARTING, ACTIVE, DRAINING, LEAVING, EXPIRED, FENCED };

// Derived, never stored (SPEC §3 tick).
enum class GroupStateName { EMPTY, ASSIGNING, RECONCILING, STABLE };

// Exact wire spellings.
std::string_view to_string(HeartbeatStatus s);
std::string_view to_string(ShardAssignmentState s);
std::string_view to_string(MemberLifecycleState s);
std::string_view to_string(GroupStateName s);
std::optional<HeartbeatStatus> heartbeat_status_from(std::string_view s);
std::optional<ShardAssignmentState> shard_state_from(std::string_view s);
std::optional<MemberLifecycleState> lifecycle_from(std::string_view s);

struct RuntimeConsumerCapacity {
  int32_t runtimeMaxConcurrency = 0;
  int32_t availableConcurrency = 0;
  friend bool operator==(const RuntimeConsumerCapacity& a, const RuntimeConsumerCapacity& b) {
    return std::tie(a.runtimeMaxConcurrency, a.availableConcurrency) == std::tie(b.runtimeMaxConcurrency, b.availableConcurrency);
  }
  friend bool operator!=(const RuntimeConsumerCapacity& a, const RuntimeConsumerCapacity& b) { return !(a == b); }
};

struct OwnedShard {
  int32_t shardIndex = 0;
  ShardAssignmentState state = ShardAssignmentState::OWNED;
  friend bool operator==(const OwnedShard& a, const OwnedShard& b) {
    return std::tie(a.shardIndex, a.state) == std::tie(b.shardIndex, b.state);
  }
  friend bool operator!=(const OwnedShard& a, const OwnedShard& b) { return !(a == b); }
};

struct RevokingShard {
  int32_t shardIndex = 0;
  ShardAssignmentState state = ShardAssignmentState::DRAINING;
  int32_t inFlight = 0;
  // Kept as the member sent it (null, a string or a number); informational only.
  std::optional<std::string> ackedAt;
  friend bool operator==(const RevokingShard& a, const RevokingShard& b) {
    return std::tie(a.shardIndex, a.state, a.inFlight, a.ackedAt) == std::tie(b.shardIndex, b.state, b.inFlight, b.ackedAt);
  }
  friend bool operator!=(const RevokingShard& a, const RevokingShard& b) { return !(a == b); }
};

struct ShardProgress {
  int32_t shardIndex = 0;
  std::optional<std::string> lastDeliveredId;
  std::optional<int64_t> pending;
  std::optional<int64_t> lag;  // null when Redis cannot tell (entries deleted)
  friend bool operator==(const ShardProgress& a, const ShardProgress& b) {
    return std::tie(a.shardIndex, a.lastDeliveredId, a.pending, a.lag) == std::tie(b.shardIndex, b.lastDeliveredId, b.pending, b.lag);
  }
  friend bool operator!=(const ShardProgress& a, const ShardProgress& b) { return !(a == b); }
};

// A request refused for one of its fields: what the answer's status, errorField and message say.
struct ValidationError {
  HeartbeatStatus status = HeartbeatStatus::INVALID_REQUEST;
  std::string field;    // e.g. "ownedShards[2].shardIndex"; empty for whole-body problems
  std::string message;  // human readable, names the field
};

struct HeartbeatRequest {
  int32_t protocolVersion = kProtocolVersion;
  std::string requestId;
  std::string memberId;
  int32_t memberEpoch = 0;
  int32_t metadataVersion = 0;
  RuntimeConsumerCapacity runtimeConsumerCapacity;
  std::vector<OwnedShard> ownedShards;
  std::vector<RevokingShard> revokingShards;
  std::vector<ShardProgress> shardProgress;
  // On a leave (memberEpoch -1), optionally: the epoch the leaving member last held. A leave is
  // otherwise indistinguishable from one an older incarnation of the id sent and that arrives late;
  // with it, such a leave changes nothing (rsc's runtime sends it; the reference clients do not).
  std::optional<int32_t> leavingMemberEpoch;
  // A static member's stable identity (SPEC §3 rule 12): its target is kept for it across a leave
  // with memberEpoch -2 or a crash, for the static session timeout.
  std::optional<std::string> instanceId;
  // The member's rack (zone), as Kafka's RackId: read when it joins, for the rack-aware assignor.
  std::optional<std::string> rackId;
  friend bool operator==(const HeartbeatRequest& a, const HeartbeatRequest& b) {
    return std::tie(a.protocolVersion, a.requestId, a.memberId, a.memberEpoch, a.metadataVersion, a.runtimeConsumerCapacity, a.ownedShards, a.revokingShards, a.shardProgress, a.leavingMemberEpoch, a.instanceId, a.rackId) == std::tie(b.protocolVersion, b.requestId, b.memberId, b.memberEpoch, b.metadataVersion, b.runtimeConsumerCapacity, b.ownedShards, b.revokingShards, b.shardProgress, b.leavingMemberEpoch, b.instanceId, b.rackId);
  }
  friend bool operator!=(const HeartbeatRequest& a, const HeartbeatRequest& b) { return !(a == b); }
};

struct Assignment {
  std::string error = "NONE";
  std::vector<int32_t> assignedShards;  // on the wire: [{"shardIndex": n}]
  std::vector<int32_t> pendingShards;
  int32_t metadataVersion = 0;
  friend bool operator==(const Assignment& a, const Assignment& b) {
    return std::tie(a.error, a.assignedShards, a.pendingShards, a.metadataVersion) == std::tie(b.error, b.assignedShards, b.pendingShards, b.metadataVersion);
  }
  friend bool operator!=(const Assignment& a, const Assignment& b) { return !(a == b); }
};

struct HeartbeatResponse {
  std::string responseTo;
  HeartbeatStatus status = HeartbeatStatus::OK;
  std::string memberId;
  int32_t memberEpoch = 0;
  int64_t heartbeatIntervalMs = 0;
  int64_t rebalanceTimeoutMs = 0;
  int64_t memberLeaseTtlMs = 0;
  int32_t groupEpoch = 0;
  int32_t assignmentEpoch = 0;
  int32_t metadataVersion = 0;
  std::optional<Assignment> assignment;
  std::optional<std::string> message;  // human-readable, set on every error
  // On an INVALID_REQUEST: the request field at fault ("memberEpoch", "ownedShards[2].shardIndex"),
  // so a client decides what to do from it, never from the message's wording. An rsc addition.
  std::optional<std::string> errorField;
  friend bool operator==(const HeartbeatResponse& a, const HeartbeatResponse& b) {
    return std::tie(a.responseTo, a.status, a.memberId, a.memberEpoch, a.heartbeatIntervalMs, a.rebalanceTimeoutMs, a.memberLeaseTtlMs, a.groupEpoch, a.assignmentEpoch, a.metadataVersion, a.assignment, a.message, a.errorField) == std::tie(b.responseTo, b.status, b.memberId, b.memberEpoch, b.heartbeatIntervalMs, b.rebalanceTimeoutMs, b.memberLeaseTtlMs, b.groupEpoch, b.assignmentEpoch, b.metadataVersion, b.assignment, b.message, b.errorField);
  }
  friend bool operator!=(const HeartbeatResponse& a, const HeartbeatResponse& b) { return !(a == b); }
};

// How a stream's shard keys are named: `prefix:i` (plain, what the reference clients read) or
// `{prefix:i}` (a Redis Cluster hash tag per shard). Chosen when the stream is created, never
// changed; streams created before the choice existed use the hash-tagged form.
enum class KeyStyle { Plain, HashTag };
// A consumer group of a stream: what the coordinator serves, stores and routes by.
struct GroupKey {
  std::string streamPrefix;
  std::string consumerGroup;
  // "stream/group": how the group is named in logs, metrics and the pod's directory of actors.
  void str_into(std::string& out) const { out.assign(streamPrefix).append("/").append(consumerGroup); }
  std::string str() const {
    std::string s;
    str_into(s);
    return s;
  }
  friend bool operator==(const GroupKey& a, const GroupKey& b) {
    return a.streamPrefix == b.streamPrefix && a.consumerGroup == b.consumerGroup;
  }
  friend bool operator<(const GroupKey& a, const GroupKey& b) { return a.str() < b.str(); }
};

// How a group's shards are split among its members (group/assignor.hpp): "uniform" (sticky,
// balanced; the default), "range" (contiguous blocks of shard indices in member-id order) or
// "rack-aware" (uniform's balance, each shard read in its own rack where a member there exists) or
// "external" (the last target an admin's controller posted, PUT .../groups/{group}/target) or
// "co-partitioned" (range's blocks as a function of the members alone, so that groups of streams
// with as many shards and the same members give shard i of each to one member).
enum class AssignorKind { Uniform, Range, RackAware, External, CoPartitioned };
std::string_view to_string(AssignorKind a);
std::optional<AssignorKind> assignor_from(std::string_view s);  // exact spelling
// What an admin sets on a group (PUT .../groups/{group}): its assignor and the shards' racks.
struct GroupConfig {
  AssignorKind assignor = AssignorKind::Uniform;
  std::optional<std::vector<std::string>> shardRacks;  // absent: kept as they are
  // CoPartitioned only: the group of another stream this one is linked with (both are set).
  std::optional<GroupKey> coPartitionedWith;
};
// A target computed outside the coordinator (PUT .../groups/{group}/target): member id -> shards,
// for the group epoch it was computed at.
struct PostedTarget {
  int32_t groupEpoch = 0;
  std::map<std::string, std::vector<int32_t>> target;
};
// What became of a posted target.
struct TargetPosted {
  enum class Outcome { Set, NotFound, StaleEpoch, NotExternal, Invalid };
  Outcome outcome = Outcome::Set;
  std::string message;  // why it was refused
  std::string field;    // Invalid: the field at fault
  int32_t groupEpoch = 0;  // the group's, now
  std::map<std::string, std::vector<int32_t>> target;  // Set: each live member's target now
  std::vector<int32_t> unassigned;                     // Set: shards in nobody's target
};
// What the group has after the call, and whether it changed (the group epoch moved).
struct GroupConfigSet {
  bool changed = false;
  bool created = false;  // the group did not exist: made, empty, with this configuration
  int32_t groupEpoch = 0;
  AssignorKind assignor = AssignorKind::Uniform;
  std::vector<std::string> shardRacks;
  std::optional<GroupKey> coPartitionedWith;
  // With a link: whether the other group names this one back (as the store held it when asked),
  // and whom it names now if it is co-partitioned with another group.
  std::optional<bool> partnerLinked;
  std::optional<GroupKey> partnerCoPartitionedWith;
};
std::string_view to_string(KeyStyle s);                       // "plain" | "hashtag"
std::optional<KeyStyle> key_style_from(std::string_view s);  // exact spelling

// The last change of a stream's shard count (POST .../scale), named as the reference
// implementation names it. Growing is done at once (DEPRECATED: nothing left to do). A shrink is
// DRAINING while the removed shards are still read, until every consumer group of the stream has
// read and acked them; then DEPRECATED (the shards retired); ROLLED_BACK when undone while draining.
enum class MigrationState { PREPARING, ACTIVE, DRAINING, DEPRECATED, ROLLING_BACK, ROLLED_BACK };
std::string_view to_string(MigrationState s);
std::optional<MigrationState> migration_state_from(std::string_view s);
struct Migration {
  std::string reshardingId;
  int32_t fromShardCount = 0;
  int32_t toShardCount = 0;
  MigrationState state = MigrationState::DEPRECATED;
  int64_t createdAtMs = 0;  // Redis's clock
  int64_t updatedAtMs = 0;
  std::string requestedBy, reason;
  friend bool operator==(const Migration& a, const Migration& b) {
    return std::tie(a.reshardingId, a.fromShardCount, a.toShardCount, a.state, a.createdAtMs, a.updatedAtMs,
                    a.requestedBy, a.reason) == std::tie(b.reshardingId, b.fromShardCount, b.toShardCount, b.state,
                                                         b.createdAtMs, b.updatedAtMs, b.requestedBy, b.reason);
  }
};

// The stream's metadata: what GET /coord/v1/streams/{prefix} answers. `shardCount` is what
// producers route to; shards [shardCount, readShardCount()) are draining: no longer routed to,
// still read by every group until drained.
struct StreamMetadata {
  std::string streamPrefix;
  int32_t shardCount = 0;
  int32_t metadataVersion = 0;
  KeyStyle keyStyle = KeyStyle::Plain;
  std::optional<Migration> migration;  // the last change, if any was made through scale
  int32_t drainingShards() const {
    return migration && migration->state == MigrationState::DRAINING && migration->fromShardCount > shardCount
               ? migration->fromShardCount - shardCount
               : 0;
  }
  int32_t readShardCount() const { return shardCount + drainingShards(); }
  // Shard streams [readShardCount(), retiredKeysTo) belong to retired shards: nobody routes to or
  // reads them; they are kept until a pod configured to delete them does (0: none are kept).
  int32_t retiredKeysTo = 0;
  int64_t retiredAtMs = 0;        // when the last shrink retired (Redis's clock)
  bool deletingRetired = false;   // their deletion is under way: no shard count change meanwhile
  int32_t retiredKeys() const { return retiredKeysTo > readShardCount() ? retiredKeysTo - readShardCount() : 0; }
  // The rack (zone) of each shard, by index ("" or past the end: none), for the rack-aware
  // assignor of every group of the stream that has no racks of its own. `shardRacksFrom`: "" when
  // an admin listed them, kShardRacksFromClusterZones when they were worked out from the zone of
  // the Redis Cluster node serving each shard's key.
  std::vector<std::string> shardRacks;
  std::string shardRacksFrom;
  friend bool operator==(const StreamMetadata& a, const StreamMetadata& b) {
    return std::tie(a.streamPrefix, a.shardCount, a.metadataVersion, a.keyStyle, a.migration, a.retiredKeysTo,
                    a.retiredAtMs, a.deletingRetired, a.shardRacks, a.shardRacksFrom) ==
           std::tie(b.streamPrefix, b.shardCount, b.metadataVersion, b.keyStyle, b.migration, b.retiredKeysTo,
                    b.retiredAtMs, b.deletingRetired, b.shardRacks, b.shardRacksFrom);
  }
  friend bool operator!=(const StreamMetadata& a, const StreamMetadata& b) { return !(a == b); }
};
// The refusal of a count change while retired shard streams are being deleted (it takes moments).
std::string retired_keys_deleting(const std::string& streamPrefix);
// "orders:{shardIndex}" or "{orders:{shardIndex}}": "{shardIndex}" stands for the shard's index.
std::string stream_key_pattern(const std::string& prefix, KeyStyle style);
// The Redis key of one shard stream: "orders:3" or "{orders:3}".
std::string shard_stream_key(const std::string& prefix, KeyStyle style, int32_t shard);
// A hash beside a shard stream, in its Cluster slot: per consumer group, the records retention
// trimmed from it before the group read them (Redis's lag still counts those).
std::string trimmed_unread_key(const std::string& shardKey);
// Its field holding every record retention trimmed from the shard ('*' is in no group's name).
inline constexpr const char* kTrimmedTotalField = "*trimmed";
// Any pattern as above with "{shardIndex}" replaced (for patterns learned from a coordinator).
std::string expand_key_pattern(const std::string& pattern, int32_t shard);

// How producers map a record key to a shard (GET .../producer-routing names it): MurmurHash3
// x86 32-bit of the key's bytes, seed 0, made unbiased by rejection (protocol/partition.hpp).
inline constexpr std::string_view kPartitionerName = "murmur3_x86_32-unbiased";

// The body of PUT (`shardCount`) or POST (`initialShardCount`, `requestedBy`, `reason`) on a
// stream; `keyStyle` optional in both.
// A stream's retention policy (SPEC §8): what one pod at a time trims from its shard streams.
struct Retention {
  enum class Kind { None, MaxLen, MaxAgeMs, ProcessedByAllGroups };
  Kind kind = Kind::None;
  int64_t value = 0;  // MaxLen: records per shard; MaxAgeMs: milliseconds
  friend bool operator==(const Retention& a, const Retention& b) { return a.kind == b.kind && a.value == b.value; }
};
std::string_view to_string(Retention::Kind k);  // "none" | "maxLen" | "maxAgeMs" | "processedByAllGroups"
// As kept in the stream's metadata hash: "none", "maxLen:N", "maxAgeMs:N", "processedByAllGroups".
std::string encode_retention(const Retention& r);
std::optional<Retention> decode_retention(std::string_view s);  // "" is none
inline constexpr int64_t kMinRetentionAgeMs = 1000;

// The rule that gives each shard the zone of the Redis Cluster node serving its key (the zones
// of the nodes come from the coordinator's --redis-node-zones).
inline constexpr const char* kShardRacksFromClusterZones = "cluster-node-zone";
// The body of PUT .../streams/{prefix}/racks: the racks listed, or worked out by the rule.
struct StreamRacksRequest {
  std::vector<std::string> shardRacks;  // [] clears them
  bool fromClusterZones = false;
};

struct StreamRequest {
  std::optional<int32_t> shardCount;  // POST may leave it to the coordinator's default
  std::optional<KeyStyle> keyStyle;
  std::optional<Retention> retention;  // set with the stream when given
  std::string requestedBy, reason;    // POST: who asked and why, for the log
};

// The body of POST .../scale (`targetShardCount`, 0 or more) or of a rollback (no count); who
// asked and why, for the audit log and the migration record. `deprecatedAfter` (the reference
// implementation's) is accepted and not used.
struct ScaleRequest {
  int32_t targetShardCount = 0;
  std::string requestedBy, reason;
};

// What every refused heartbeat answer tells the member about when to call again.
struct Timings {
  int64_t heartbeatIntervalMs = 0;
  int64_t rebalanceTimeoutMs = 0;
  int64_t memberLeaseTtlMs = 0;
};


// A record a member gave up on, as the group's dead-letter stream holds it (written by the member
// runtime: member/runtime.hpp, dead_letter_key).
struct DeadLetter {
  std::string deadLetterId;  // its entry id in the dead-letter stream (what a redrive names)
  std::string id;            // the record's entry id in its shard stream
  int32_t shard = 0;
  std::string stream;        // the shard stream's key
  int64_t deliveries = 0;
  std::string error, member;
  int64_t atMs = 0;
  std::vector<std::pair<std::string, std::string>> fields;  // the record's own
};
struct DeadLetterPage {
  bool groupFound = true;  // false: no such group (nothing else is set)
  int64_t total = 0;  // in the dead-letter stream now
  std::vector<DeadLetter> items;  // the oldest first
};
// What a redrive or a discard of dead letters did: how many it moved (written back, or dropped),
// and which of the named ids the dead-letter stream does not hold (nothing is done for those).
struct DeadLetterMove {
  bool groupFound = true;  // false: no such group (nothing was done)
  int64_t moved = 0;
  std::vector<std::string> unknownIds;
};
// The fields a redrive adds to a record written back (after its own): where it came from and why it
// was given up on. A record dead-lettered again keeps only the newest set.
inline constexpr const char* kRedriveFieldPrefix = "rsc:redrive:";

}  // namespace rsc::protocol
