// One member's way to its target: revoke before assign (SPEC §3 rules 5 and 6).
// This is the only place that moves shards between a member's assigned, revoking and target sets.
#pragma once

#include <functional>

#include "group/state.hpp"
#include "protocol/types.hpp"

namespace rsc::group {

// Revoke acks in both forms: a revokingShards entry REVOKED with inFlight 0, or (when
// `implicitAcks`) a revoking shard the member no longer reports at all. Returns the acked shards.
ShardSet process_revoke_acks(Member& m, const protocol::HeartbeatRequest& req, bool implicitAcks);

struct ReconcileResult {
  protocol::HeartbeatStatus status = protocol::HeartbeatStatus::OK;
  ShardSet newlyRevoked;
  ShardSet newlyAssigned;
  bool epochAdvanced = false;
};

// Moves shards the target dropped to `revoking` (REVOKE_PENDING, epoch kept, deadline set once).
// With nothing left to revoke: grants target shards nobody else holds (`heldByOther`), the rest
// stay pending, and the epoch advances to `assignmentEpoch`. `grantsAllowed` false holds grants
// back (after a store rollback).
ReconcileResult reconcile_member(Member& m, int32_t assignmentEpoch, const std::function<bool(int32_t)>& heldByOther,
                                 bool grantsAllowed, const Config& cfg, Millis now);

}  // namespace rsc::group
