#include "group/state.hpp"

#include <tuple>

namespace rsc::group {

StoredResponse StoredResponse::of(const protocol::HeartbeatResponse& r) {
  StoredResponse s;
  s.status = r.status;
  s.memberEpoch = r.memberEpoch;
  s.groupEpoch = r.groupEpoch;
  s.assignmentEpoch = r.assignmentEpoch;
  s.metadataVersion = r.metadataVersion;
  s.heartbeatIntervalMs = r.heartbeatIntervalMs;
  s.rebalanceTimeoutMs = r.rebalanceTimeoutMs;
  s.memberLeaseTtlMs = r.memberLeaseTtlMs;
  std::string assignmentError = "NONE";
  if (r.assignment) {
    s.hasAssignment = true;
    s.assigned = r.assignment->assignedShards;
    s.pending = r.assignment->pendingShards;
    s.assignmentMetadataVersion = r.assignment->metadataVersion;
    assignmentError = r.assignment->error;
  }
  if (r.message || r.errorField || assignmentError != "NONE")
    s.rare = std::make_shared<const Rare>(Rare{r.message, r.errorField, std::move(assignmentError)});
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
  r.heartbeatIntervalMs = heartbeatIntervalMs;
  r.rebalanceTimeoutMs = rebalanceTimeoutMs;
  r.memberLeaseTtlMs = memberLeaseTtlMs;
  if (hasAssignment) {
    protocol::Assignment a;
    a.assignedShards = assigned;
    a.pendingShards = pending;
    a.metadataVersion = assignmentMetadataVersion;
    if (rare) a.error = rare->assignmentError;
    r.assignment = std::move(a);
  }
  if (rare) {
    r.message = rare->message;
    r.errorField = rare->errorField;
  }
  return r;
}

protocol::ResponseView StoredResponse::view(const std::string& requestId, const std::string& memberId) const {
  protocol::ResponseView v;
  v.responseTo = requestId;
  v.memberId = memberId;
  v.status = status;
  v.memberEpoch = memberEpoch;
  v.groupEpoch = groupEpoch;
  v.assignmentEpoch = assignmentEpoch;
  v.metadataVersion = metadataVersion;
  v.heartbeatIntervalMs = heartbeatIntervalMs;
  v.rebalanceTimeoutMs = rebalanceTimeoutMs;
  v.memberLeaseTtlMs = memberLeaseTtlMs;
  v.hasAssignment = hasAssignment;
  v.assignedShards = &assigned;
  v.pendingShards = &pending;
  v.assignmentError = rare ? std::string_view(rare->assignmentError) : std::string_view("NONE");
  v.assignmentMetadataVersion = assignmentMetadataVersion;
  if (rare && rare->message) v.message = &*rare->message;
  if (rare && rare->errorField) v.errorField = &*rare->errorField;
  return v;
}

bool operator==(const StoredResponse& a, const StoredResponse& b) {
  static const StoredResponse::Rare none;
  const auto& ra = a.rare ? *a.rare : none;
  const auto& rb = b.rare ? *b.rare : none;
  return std::tie(a.status, a.hasAssignment, a.memberEpoch, a.groupEpoch, a.assignmentEpoch, a.metadataVersion,
                  a.assignmentMetadataVersion, a.heartbeatIntervalMs, a.rebalanceTimeoutMs, a.memberLeaseTtlMs,
                  a.assigned, a.pending, ra.message, ra.errorField, ra.assignmentError) ==
         std::tie(b.status, b.hasAssignment, b.memberEpoch, b.groupEpoch, b.assignmentEpoch, b.metadataVersion,
                  b.assignmentMetadataVersion, b.heartbeatIntervalMs, b.rebalanceTimeoutMs, b.memberLeaseTtlMs,
                  b.assigned, b.pending, rb.message, rb.errorField, rb.assignmentError);
}

}  // namespace rsc::group
