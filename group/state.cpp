#include "group/state.hpp"

#include <algorithm>
#include <limits>
#include <tuple>


namespace rsc::group {
namespace {
bool fits32(int64_t v) {
  return v >= std::numeric_limits<int32_t>::min() && v <= std::numeric_limits<int32_t>::max();
}
}  // namespace

StoredResponse StoredResponse::of(const protocol::HeartbeatResponse& r) {
  StoredResponse s;
  s.status = r.status;
  s.memberEpoch = r.memberEpoch;
  s.groupEpoch = r.groupEpoch;
  s.assignmentEpoch = r.assignmentEpoch;
  s.metadataVersion = r.metadataVersion;
  s.hasAssignment = r.assignment.has_value();
  static const std::vector<int32_t> kNone;
  const auto& assigned = r.assignment ? r.assignment->assignedShards : kNone;
  const auto& pending = r.assignment ? r.assignment->pendingShards : kNone;
  if (r.assignment) s.assignmentMetadataVersion = r.assignment->metadataVersion;
  const bool timingsFit = fits32(r.heartbeatIntervalMs) && fits32(r.rebalanceTimeoutMs) && fits32(r.memberLeaseTtlMs);
  if (timingsFit) {
    s.heartbeatIntervalMs = static_cast<int32_t>(r.heartbeatIntervalMs);
    s.rebalanceTimeoutMs = static_cast<int32_t>(r.rebalanceTimeoutMs);
    s.memberLeaseTtlMs = static_cast<int32_t>(r.memberLeaseTtlMs);
  }
  const bool shardsFit = assigned.size() + pending.size() <= kInlineShards;
  if (shardsFit) {
    s.assignedCount = static_cast<uint8_t>(assigned.size());
    s.pendingCount = static_cast<uint8_t>(pending.size());
    std::copy(assigned.begin(), assigned.end(), s.shards.begin());
    std::copy(pending.begin(), pending.end(), s.shards.begin() + static_cast<std::ptrdiff_t>(assigned.size()));
  }
  const bool errorNone = !r.assignment || r.assignment->error == "NONE";
  if (r.message || r.errorField || !timingsFit || !shardsFit || !errorNone) {  // the rare part, built only then
    Rare rare;
    rare.message = r.message;
    rare.errorField = r.errorField;
    if (!errorNone) rare.assignmentError = r.assignment->error;
    if (!shardsFit) {
      rare.assigned = assigned;
      rare.pending = pending;
      rare.shardsHere = true;
    }
    if (!timingsFit) rare.timings = std::array<int64_t, 3>{r.heartbeatIntervalMs, r.rebalanceTimeoutMs, r.memberLeaseTtlMs};
    s.rare = std::make_shared<const Rare>(std::move(rare));
  }
  return s;
}

protocol::HeartbeatResponse StoredResponse::expand(const std::string& requestId, const std::string& memberId) const {
  protocol::HeartbeatResponse r;
  r.responseTo = requestId;
  r.memberId = memberId;
  r.status = status;
  r.memberEpoch = memberEpoch;
  r.groupEpoch = groupEpoch;
  r.assignmentEpoch = assignmentEpoch;
  r.metadataVersion = metadataVersion;
  if (rare && rare->timings) {
    r.heartbeatIntervalMs = (*rare->timings)[0];
    r.rebalanceTimeoutMs = (*rare->timings)[1];
    r.memberLeaseTtlMs = (*rare->timings)[2];
  } else {
    r.heartbeatIntervalMs = heartbeatIntervalMs;
    r.rebalanceTimeoutMs = rebalanceTimeoutMs;
    r.memberLeaseTtlMs = memberLeaseTtlMs;
  }
  if (hasAssignment) {
    protocol::Assignment a;
    if (rare && rare->shardsHere) {
      a.assignedShards = rare->assigned;
      a.pendingShards = rare->pending;
    } else {
      a.assignedShards.assign(shards.begin(), shards.begin() + assignedCount);
      a.pendingShards.assign(shards.begin() + assignedCount, shards.begin() + assignedCount + pendingCount);
    }
    if (rare) a.error = rare->assignmentError;
    a.metadataVersion = assignmentMetadataVersion;
    r.assignment = std::move(a);
  }
  if (rare) {
    r.message = rare->message;
    r.errorField = rare->errorField;
  }
  return r;
}

// Equal when they answer the same (whichever way each holds its parts).
bool operator==(const StoredResponse& a, const StoredResponse& b) {
  return a.expand("", "") == b.expand("", "");
}

}  // namespace rsc::group
