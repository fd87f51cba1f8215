// The group coordinator's decisions (SPEC §3) as pure functions of (state, input, now).
// Each returns the next state, the Delta the store must write (under its CAS), the response where
// there is one, and the events worth a log line. Nothing here does I/O or reads a clock.
#pragma once

#include <string>
#include <vector>

#include "group/state.hpp"
#include "protocol/types.hpp"

namespace rsc::group {

struct Outcome {
  GroupState state;  // the next state; equal to the input when delta is empty
  Delta delta;
  std::vector<Event> events;
  bool changed() const { return !delta.empty(); }
};

struct HeartbeatOutcome : Outcome {
  protocol::HeartbeatResponse response;
  // Accepted without writing the member: the stored lease still reaches past one more lease
  // (Config::leaseRenewalSlackMs). Counted by the pod, decides nothing there.
  bool leaseRenewalDeferred = false;
};

// Every step takes the state by value: pass an lvalue to keep it (one copy, O(members)), or
// std::move it in when the caller only needs the next state (the steady heartbeat then costs
// O(what changed)). A caller that moved its state in and then fails to persist the outcome must
// reload from the store, as it must after any failed write.

// One heartbeat (join, leave, liveness, ownership report, revoke ack, assignment delivery).
// `req` has passed protocol::decode_heartbeat_request; the group-dependent checks happen here.
// Errors that are the request's fault (INVALID_REQUEST, UNKNOWN_MEMBER_ID, a stale epoch) change
// nothing.
HeartbeatOutcome heartbeat(GroupState g, const protocol::HeartbeatRequest& req, const Config& cfg, Millis now);

// Lease expiry, rebalance-timeout fencing, tombstone cleanup, target recompute. With
// `expiryAllowed` false (the pod cannot judge leases now: see group/time_rules.hpp) nobody is
// expired or fenced for time, and the rest still runs.
Outcome tick(GroupState g, const Config& cfg, Millis now, bool expiryAllowed = true);

// The stream's layout changed (`metadataVersion` newer than the group's): `shardCount` is the
// number of shards the group reads (the stream's routed shards plus those still draining). More:
// every shard assignable at once. Fewer (draining shards drained): the others are revoked like any
// shard and the group's count drops once nobody holds them (tick finishes it). The same: only the
// version moves. An older or equal version is ignored. `streamRacks` (null: not known to have
// changed): the stream's shard racks at that version; new ones bump the group epoch when the group
// is rack-aware and has no racks of its own.
Outcome apply_metadata(GroupState g, int32_t shardCount, int32_t metadataVersion, const Config& cfg,
                       Millis now, const std::vector<std::string>* streamRacks = nullptr);

// The store was unreachable from `from` to `to`: that time does not count against leases or
// revoke deadlines, and every live member gets one full lease from `to`. Idempotent per outage
// (see absorb_outages in group/time_rules.hpp, which takes several).
Outcome resume_after_outage(GroupState g, Millis from, Millis to);

// The store came back with an older revision than this pod had seen (restart without persistence,
// failover to a lagging replica). Epochs jump past anything this pod saw, and for one lease no
// shard is handed out fresh and epochs the store does not know are fenced.
Outcome recover_from_rollback(GroupState g, int32_t seenGroupEpoch, const Config& cfg, Millis now);

// Admin removal: the member is fenced; what it held is given to nobody before its lease ends (it
// may read until it hears of the fence).
Outcome fence_member(GroupState g, const std::string& memberId, const std::string& reason, const Config& cfg,
                     Millis now);

// The group's assignor set (an admin call), and with it the shards' racks (absent: kept). Nothing
// changes when both are as they were; else the group epoch is bumped and targets are computed
// again, carried out revoke-before-assign like any rebalance.
// `exists` false: the group is made (written) with the configuration, whatever it is.
Outcome set_assignor(GroupState g, const protocol::GroupConfig& choice, const Config& cfg, Millis now, bool exists = true);

// A target posted for an `external` group (PUT .../groups/{group}/target): checked (the group
// exists and is external, the target was computed at the current group epoch, it names only live
// members, each shard at most once and only shards the group may hand out), then each live
// member's target becomes what it names (nothing, for one it does not name). Carried out like a
// computed target: revoke before assign, the same timeouts. Refused: nothing changes.
struct TargetVerdict {
  Outcome outcome;
  protocol::TargetPosted answer;
};
TargetVerdict set_target(GroupState g, bool exists, const protocol::PostedTarget& posted, const Config& cfg, Millis now);

}  // namespace rsc::group
