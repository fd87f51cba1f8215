// Group state as the coordinator decides on it and the store persists it (SPEC §3).
// Plain values; every change is made by the functions in coordinator.hpp.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "group/shard_set.hpp"
#include "protocol/types.hpp"

namespace rsc::group {

using Millis = int64_t;  // milliseconds on the coordinator's clock; passed in, never read here
using protocol::MemberLifecycleState;

struct Config {
  Millis heartbeatIntervalMs = 3000;
  Millis memberLeaseTtlMs = 15000;
  Millis rebalanceTimeoutMs = 60000;
  // How long an EXPIRED or FENCED member is remembered, so that its next heartbeat is told
  // FENCED_MEMBER_EPOCH rather than UNKNOWN_MEMBER_ID. 0 = max(lease, rebalance timeout).
  Millis tombstoneRetentionMs = 0;
  // Coarse lease renewal. A heartbeat that changes nothing is written only when the member's stored
  // lease (Member::leaseUntilMs) would not cover one more lease from now; a write stores a lease
  // that reaches this much further. Other pods judge expiry by the stored lease, so no member they
  // cannot see renewing is expired early; a dead member is found up to this much later; a member
  // fenced while a stale pod could still answer it keeps its shards from everybody else until its
  // stored lease ends (Member::quarantined). 0: every heartbeat writes.
  Millis leaseRenewalSlackMs = 0;
  // Static members (rule 12): how long the target of a member with an instanceId that left with
  // epoch -2, or died, stays reserved for its instance. 0 = three leases.
  Millis staticSessionTimeoutMs = 0;
  Millis static_session_timeout() const { return staticSessionTimeoutMs > 0 ? staticSessionTimeoutMs : 3 * memberLeaseTtlMs; }

  Millis tombstone_retention() const {
    return tombstoneRetentionMs > 0 ? tombstoneRetentionMs : std::max(memberLeaseTtlMs, rebalanceTimeoutMs);
  }
  // Sooner heartbeats while a member waits for shards held elsewhere.
  Millis pending_heartbeat_interval() const { return std::max<Millis>(1, heartbeatIntervalMs / 4); }
};

// A member's last answer, kept to be replayed for a repeated requestId (rule 10), in a compact
// form: every member of every group held carries one. Its requestId is the member's lastRequestId
// and its memberId the member's id, so neither is kept twice; its assigned and pending shards are
// kept inline while they fit (kInlineShards between them); the parts an ordinary answer does not
// have (a message, the field at fault, an assignment error, longer shard lists, timings past 32
// bits) sit behind one shared, immutable pointer.
struct StoredResponse {
  static constexpr std::size_t kInlineShards = 6;
  struct Rare {
    std::optional<std::string> message;
    std::optional<std::string> errorField;
    std::string assignmentError = "NONE";
    ShardSet assigned, pending;  // when they do not fit inline
    bool shardsHere = false;
    std::optional<std::array<int64_t, 3>> timings;  // interval, rebalance timeout, lease: past 32 bits
  };
  protocol::HeartbeatStatus status = protocol::HeartbeatStatus::OK;
  bool hasAssignment = false;
  uint8_t assignedCount = 0;  // inline: shards[0, assignedCount) then pendingCount pending ones
  uint8_t pendingCount = 0;
  int32_t memberEpoch = 0;
  int32_t groupEpoch = 0;
  int32_t assignmentEpoch = 0;
  int32_t metadataVersion = 0;
  int32_t assignmentMetadataVersion = 0;
  int32_t heartbeatIntervalMs = 0;
  int32_t rebalanceTimeoutMs = 0;
  int32_t memberLeaseTtlMs = 0;
  std::array<int32_t, kInlineShards> shards{};
  std::shared_ptr<const Rare> rare;  // null: an ordinary answer whose shards fit inline

  static StoredResponse of(const protocol::HeartbeatResponse& r);
  // The answer it holds, to `requestId` of `memberId`.
  protocol::HeartbeatResponse expand(const std::string& requestId, const std::string& memberId) const;
  friend bool operator==(const StoredResponse& a, const StoredResponse& b);
};

struct Member {
  std::string id;
  std::string instanceId;     // a static member's stable identity (rule 12); "" for the others
  std::string rackId;         // the rack (zone) it said it is in when it joined; "" for none
  int32_t epoch = 0;          // the epoch issued last
  int32_t previousEpoch = 0;  // accepted too while the last response may have been lost
  // Stored: STARTING, ACTIVE, LEAVING, EXPIRED or FENCED. DRAINING is derived (see lifecycle()).
  MemberLifecycleState state = MemberLifecycleState::STARTING;
  Millis lastHeartbeatMs = 0;
  Millis revokeDeadlineMs = 0;  // 0 = nothing being revoked
  Millis tombstoneUntilMs = 0;  // EXPIRED / FENCED only
  // The lease as stored: nobody expires this member before it (nor before lastHeartbeat + lease).
  // A pod may answer a heartbeat without writing while this covers one more lease.
  Millis leaseUntilMs = 0;
  // Shards a fenced incarnation of this member may still read, on the strength of answers a pod
  // gave from a cache that had not seen the fence (possible while its stored lease covered one more
  // lease): nobody else is given them before quarantineUntilMs.
  ShardSet quarantined;
  Millis quarantineUntilMs = 0;
  ShardSet assigned;            // the member may read these now
  ShardSet revoking;            // asked to give up, not yet acked: still held, nobody else gets them
  ShardSet target;              // what the assignor wants this member to have
  protocol::RuntimeConsumerCapacity capacity;
  std::vector<protocol::ShardProgress> progress;
  std::string lastRequestId;
  std::optional<StoredResponse> lastResponse;  // replayed for a repeated requestId

  bool live() const { return state != MemberLifecycleState::EXPIRED && state != MemberLifecycleState::FENCED; }
  bool leaving() const { return state == MemberLifecycleState::LEAVING; }
  // Shards this member holds: nobody else may read them.
  ShardSet held() const { return set_union(assigned, revoking); }
  ShardSet pending() const { return set_minus(target, assigned); }
  std::size_t pending_count() const { return minus_count(target, assigned); }
};

struct GroupState {
  std::string streamPrefix;
  std::string consumerGroup;
  int32_t groupEpoch = 0;
  int32_t assignmentEpoch = 0;
  int32_t metadataVersion = 0;
  int32_t shardCount = 0;
  int64_t storeRevision = 0;  // owned by the store: incremented by every successful CAS
  // After the store went back to an older revision: until then, epochs the store does not know are
  // fenced, and no shard goes from free to a member (a holder the store forgot must show up or
  // fence itself first).
  Millis rollbackGuardUntilMs = 0;
  // Store outages up to this time (store clock) have been applied to the members' leases and
  // revoke deadlines (group::absorb_outages), so no pod applies the same outage twice.
  Millis outageCoveredUntilMs = 0;
  // Shards [0, provisionedShards) have their stream and this group's Redis consumer group. No
  // state that gives out a shard at or past it is written before they are created.
  int32_t provisionedShards = 0;
  // A shrink of the stream (its draining shards drained): shards [*retireFrom, shardCount) are in
  // no target; once no member holds one (nor may still read one), shardCount becomes *retireFrom.
  std::optional<int32_t> retireFrom;
  // The shard count before the last shrink: a REVOKED report of a shard in [shardCount,
  // retiredBelow) is a member letting go of a shard that no longer exists, not a bad request.
  int32_t retiredBelow = 0;
  // How targets are computed (a change bumps the group epoch: shards move revoke-before-assign).
  protocol::AssignorKind assignor = protocol::AssignorKind::Uniform;
  // The rack (zone) of each shard, by index, for the rack-aware assignor; "" or past the end: none.
  // The group's own (set with its assignor) when it has them, else its stream's (`streamRacks`, a
  // copy of the stream's configuration taken with each metadata version): racks() says which.
  std::vector<std::string> shardRacks;
  std::vector<std::string> streamRacks;
  const std::vector<std::string>& racks() const { return shardRacks.empty() ? streamRacks : shardRacks; }
  // The co-partitioned assignor: the group of another stream this one is linked with (each names
  // the other). Only a declaration: the split is a function of the members, so neither reads the
  // other's state; the link keeps both streams' shard counts from changing (SPEC-free: rsc's own).
  std::optional<protocol::GroupKey> coPartitionedWith;
  std::map<std::string, Member> members;  // ordered: every walk is deterministic
  // Rule 12: the targets of static members that left with -2 or died, by instanceId, kept from
  // everyone else until `untilMs` (store clock) or until the instance rejoins and takes them.
  struct Reservation {
    ShardSet shards;
    Millis untilMs = 0;
    std::string memberId;  // the incarnation that held them
    friend bool operator==(const Reservation& a, const Reservation& b) {
      return a.shards == b.shards && a.untilMs == b.untilMs && a.memberId == b.memberId;
    }
  };
  std::map<std::string, Reservation> reservations;
};

// What a step changed, so the store writes only that (the group's fields and the named members).
struct Delta {
  bool group = false;
  std::set<std::string> upserted;
  std::set<std::string> removed;
  bool empty() const { return !group && upserted.empty() && removed.empty(); }
  // `o` came after: its upserts and removals win. The names of a `Delta&&` are moved over (no
  // node or string made); a const one is copied first.
  void merge(const Delta& o);
  void merge(Delta&& o);
};

// A state change worth one log line.
struct Event {
  enum class Kind {
    JOINED,
    REJOINED,
    LEFT,
    REMOVED,
    REVOKE_REQUESTED,
    REVOKE_ACKED,
    ASSIGNED,
    EPOCH_ADVANCED,
    EXPIRED,
    FENCED,
    GROUP_EPOCH_BUMPED,
    TARGET_COMPUTED,
    METADATA_CHANGED,
    ROLLBACK_GUARD,
    QUARANTINE_ENDED,
    RESERVED,          // a static member's target kept for its instance (rule 12)
    RESERVATION_ENDED,  // ... taken back by the instance, or ended by the timeout
    ASSIGNOR_CHANGED,   // an admin set the group's assignor (or the shards' racks)
  };
  Kind kind;
  std::string member;
  ShardSet shards;
  std::string detail;
};
// The store went back to an older revision than this process had seen for the group.
struct Rollback {
  bool detected = false;
  int64_t seenRevision = 0;
  int32_t seenGroupEpoch = 0;  // feed to recover_from_rollback
};

// A group's state as read from the store.
struct Loaded {
  bool exists = false;
  GroupState state;  // storeRevision set; a fresh state with the key's names when !exists
  Rollback rollback;
};

std::string to_string(Event::Kind k);
std::string to_string(const Event& e);

MemberLifecycleState lifecycle(const Member& m);
// When the member's lease runs out as the store knows it: the later of its last heartbeat plus a
// lease and its stored lease.
Millis lease_end(const Member& m, const Config& cfg);
// Whether `m` keeps `shard` from other members at `now` by quarantine.
bool quarantines(const Member& m, int32_t shard, Millis now);
protocol::GroupStateName group_state(const GroupState& g);
// The shards the assignor spreads: all of them, or those below a shrink in progress.
int32_t assignable_shards(const GroupState& g);
// shard -> member id of the live member holding it (assigned or revoking); empty if free.
std::vector<std::string> shard_owners(const GroupState& g);

}  // namespace rsc::group
