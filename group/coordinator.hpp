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
};

// One heartbeat (join, leave, liveness, ownership report, revoke ack, assignment delivery).
// `req` has passed protocol::decode_heartbeat_request; the group-dependent checks happen here.
// Errors that are the request's fault (INVALID_REQUEST, UNKNOWN_MEMBER_ID, a stale epoch) change
// nothing.
HeartbeatOutcome heartbeat(const GroupState& g, const protocol::HeartbeatRequest& req, const Config& cfg, Millis now);

// Lease expiry, rebalance-timeout fencing, tombstone cleanup, target recompute.
Outcome tick(const GroupState& g, const Config& cfg, Millis now);

// The stream's shard count grew (or the group first learns it). Shrinking is ignored.
Outcome apply_metadata(const GroupState& g, int32_t shardCount, int32_t metadataVersion, const Config& cfg,
                       Millis now);

// The store was unreachable from `from` to `to`: that time does not count against leases or
// revoke deadlines, and every live member gets one full lease from `to`.
Outcome resume_after_outage(const GroupState& g, Millis from, Millis to);

// The store came back with an older revision than this pod had seen (restart without persistence,
// failover to a lagging replica). Epochs jump past anything this pod saw, and for one lease no
// shard is handed out fresh and epochs the store does not know are fenced.
Outcome recover_from_rollback(const GroupState& g, int32_t seenGroupEpoch, const Config& cfg, Millis now);

// Admin removal: the member is fenced and its shards released.
Outcome fence_member(const GroupState& g, const std::string& memberId, const std::string& reason, const Config& cfg,
                     Millis now);

}  // namespace rsc::group
