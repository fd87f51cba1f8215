#include "group/reconcile.hpp"

#include <set>

namespace rsc::group {

using protocol::HeartbeatStatus;
using protocol::ShardAssignmentState;

ShardSet process_revoke_acks(Member& m, const protocol::HeartbeatRequest& req, bool implicitAcks) {
  ShardSet acked;
  if (m.revoking.empty()) return acked;
  std::set<int32_t> stillHeld;
  for (const auto& o : req.ownedShards) stillHeld.insert(o.shardIndex);
  for (const auto& r : req.revokingShards) {
    if (r.state == ShardAssignmentState::REVOKED && r.inFlight == 0) {
      if (contains(m.revoking, r.shardIndex)) acked.push_back(r.shardIndex);
    } else {
      stillHeld.insert(r.shardIndex);
    }
  }
  if (implicitAcks) {
    for (int32_t s : m.revoking)
      if (stillHeld.count(s) == 0) acked.push_back(s);
  }
  acked = normalized(std::move(acked));
  m.revoking = set_minus(m.revoking, acked);
  if (m.revoking.empty()) m.revokeDeadlineMs = 0;
  return acked;
}

ReconcileResult reconcile_member(Member& m, int32_t assignmentEpoch, const std::function<bool(int32_t)>& heldByOther,
                                 bool grantsAllowed, const Config& cfg, Millis now) {
  ReconcileResult r;
  // 1. Shards the target no longer has for this member: stop reading them first.
  r.newlyRevoked = set_minus(m.assigned, m.target);
  if (!r.newlyRevoked.empty()) {
    m.assigned = set_minus(m.assigned, r.newlyRevoked);
    m.revoking = set_union(m.revoking, r.newlyRevoked);
  }
  if (!m.revoking.empty()) {
    // The member has a full rebalance timeout for every revocation it is told of: a new one
    // restarts the clock (for the older shards too: later, never sooner).
    if (m.revokeDeadlineMs == 0 || !r.newlyRevoked.empty()) m.revokeDeadlineMs = now + cfg.rebalanceTimeoutMs;
    r.status = HeartbeatStatus::REVOKE_PENDING;
    return r;
  }
  m.revokeDeadlineMs = 0;
  // 2. Nothing left to revoke: take what is free, the rest stays pending.
  if (grantsAllowed) {
    for (int32_t s : set_minus(m.target, m.assigned)) {
      if (heldByOther(s)) continue;
      r.newlyAssigned.push_back(s);
    }
    if (!r.newlyAssigned.empty()) m.assigned = set_union(m.assigned, r.newlyAssigned);
  }
  // 3. ...and the member moves to the epoch of the target it now follows.
  if (m.epoch != assignmentEpoch) {
    m.previousEpoch = m.epoch;
    m.epoch = assignmentEpoch;
    r.epochAdvanced = true;
  }
  r.status = HeartbeatStatus::OK;
  return r;
}

}  // namespace rsc::group
