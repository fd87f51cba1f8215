#include "group/state.hpp"

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
  Rare rare;
  bool needRare = r.message || r.errorField;
  rare.message = r.message;
  rare.errorField = r.errorField;
  if (fits32(r.heartbeatIntervalMs) && fits32(r.rebalanceTimeoutMs) && fits32(r.memberLeaseTtlMs)) {
    s.heartbeatIntervalMs = static_cast<int32_t>(r.heartbeatIntervalMs);
    s.rebalanceTimeoutMs = static_cast<int32_t>(r.rebalanceTimeoutMs);
    s.memberLeaseTtlMs = static_cast<int32_t>(r.memberLeaseTtlMs);
  } else {
    rare.timings = std::array<int64_t, 3>{r.heartbeatIntervalMs, r.rebalanceTimeoutMs, r.memberLeaseTtlMs};
    needRare = true;
  }
  if (r.assignment) {
    const auto& a = *r.assignment;
    s.hasAssignment = true;
    s.assignmentMetadataVersion = a.metadataVersion;
    if (a.assignedShards.size() + a.pendingShards.size() <= kInlineShards) {
      s.assignedCount = static_cast<uint8_t>(a.assignedShards.size());
      s.pendingCount = static_cast<uint8_t>(a.pendingShards.size());
      auto at = std::copy(a.assignedShards.begin(), a.assignedShards.end(), s.shards.begin());
      std::copy(a.pendingShards.begin(), a.pendingShards.end(), at);
    } else {
      rare.assigned = a.assignedShards;
      rare.pending = a.pendingShards;
      rare.shardsHere = true;
      needRare = true;
    }
    if (a.error != "NONE") {
      rare.assignmentError = a.error;
      needRare = true;
    }
  }
  if (needRare) s.rare = std::make_shared<const Rare>(std::move(rare));
  return s;
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
  if (rare && rare->timings) {
    v.heartbeatIntervalMs = (*rare->timings)[0];
    v.rebalanceTimeoutMs = (*rare->timings)[1];
    v.memberLeaseTtlMs = (*rare->timings)[2];
  } else {
    v.heartbeatIntervalMs = heartbeatIntervalMs;
    v.rebalanceTimeoutMs = rebalanceTimeoutMs;
    v.memberLeaseTtlMs = memberLeaseTtlMs;
  }
  v.hasAssignment = hasAssignment;
  if (rare && rare->shardsHere) {
    v.assignedShards = rare->assigned.data();
    v.assignedCount = rare->assigned.size();
    v.pendingShards = rare->pending.data();
    v.pendingCount = rare->pending.size();
  } else {
    v.assignedShards = shards.data();
    v.assignedCount = assignedCount;
    v.pendingShards = shards.data() + assignedCount;
    v.pendingCount = pendingCount;
  }
  v.assignmentError = rare ? std::string_view(rare->assignmentError) : std::string_view("NONE");
  v.assignmentMetadataVersion = assignmentMetadataVersion;
  if (rare && rare->message) v.message = &*rare->message;
  if (rare && rare->errorField) v.errorField = &*rare->errorField;
  return v;
}

protocol::HeartbeatResponse StoredResponse::expand(const std::string& requestId, const std::string& memberId) const {
  const auto v = view(requestId, memberId);
  protocol::HeartbeatResponse r;
  r.responseTo = requestId;
  r.memberId = memberId;
  r.status = v.status;
  r.memberEpoch = v.memberEpoch;
  r.groupEpoch = v.groupEpoch;
  r.assignmentEpoch = v.assignmentEpoch;
  r.metadataVersion = v.metadataVersion;
  r.heartbeatIntervalMs = v.heartbeatIntervalMs;
  r.rebalanceTimeoutMs = v.rebalanceTimeoutMs;
  r.memberLeaseTtlMs = v.memberLeaseTtlMs;
  if (v.hasAssignment) {
    protocol::Assignment a;
    a.assignedShards.assign(v.assignedShards, v.assignedShards + v.assignedCount);
    if (v.pendingCount > 0) a.pendingShards.assign(v.pendingShards, v.pendingShards + v.pendingCount);
    a.metadataVersion = v.assignmentMetadataVersion;
    a.error = std::string(v.assignmentError);
    r.assignment = std::move(a);
  }
  if (v.message) r.message = *v.message;
  if (v.errorField) r.errorField = *v.errorField;
  return r;
}

// Equal when they answer the same (whichever way each holds its parts).
bool operator==(const StoredResponse& a, const StoredResponse& b) {
  return a.expand("", "") == b.expand("", "");
}

}  // namespace rsc::group
