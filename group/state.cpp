#include "group/state.hpp"

#include <algorithm>
#include <limits>
#include <tuple>

#include "protocol/codec.hpp"

namespace rsc::group {
namespace {
bool fits32(int64_t v) {
  return v >= std::numeric_limits<int32_t>::min() && v <= std::numeric_limits<int32_t>::max();
}
}  // namespace

StoredResponse StoredResponse::of(const protocol::HeartbeatResponse& response) {
  const auto r = protocol::view_of(response);
  StoredResponse s;
  s.status = r.status;
  s.memberEpoch = r.memberEpoch;
  s.groupEpoch = r.groupEpoch;
  s.assignmentEpoch = r.assignmentEpoch;
  s.metadataVersion = r.metadataVersion;
  s.hasAssignment = r.hasAssignment;
  s.assignmentMetadataVersion = r.assignmentMetadataVersion;
  const bool timingsFit = fits32(r.heartbeatIntervalMs) && fits32(r.rebalanceTimeoutMs) && fits32(r.memberLeaseTtlMs);
  if (timingsFit) {
    s.heartbeatIntervalMs = static_cast<int32_t>(r.heartbeatIntervalMs);
    s.rebalanceTimeoutMs = static_cast<int32_t>(r.rebalanceTimeoutMs);
    s.memberLeaseTtlMs = static_cast<int32_t>(r.memberLeaseTtlMs);
  }
  const bool shardsFit = r.assignedCount + r.pendingCount <= kInlineShards;
  if (shardsFit) {
    s.assignedCount = static_cast<uint8_t>(r.assignedCount);
    s.pendingCount = static_cast<uint8_t>(r.pendingCount);
    std::copy_n(r.assignedShards, r.assignedCount, s.shards.begin());
    std::copy_n(r.pendingShards, r.pendingCount, s.shards.begin() + static_cast<std::ptrdiff_t>(r.assignedCount));
  }
  const bool errorNone = !r.hasAssignment || r.assignmentError == "NONE";
  if (r.message || r.errorField || !timingsFit || !shardsFit || !errorNone) {  // the rare part, built only then
    Rare rare;
    if (r.message) rare.message = *r.message;
    if (r.errorField) rare.errorField = *r.errorField;
    if (!errorNone) rare.assignmentError = std::string(r.assignmentError);
    if (!shardsFit) {
      rare.assigned.assign(r.assignedShards, r.assignedShards + r.assignedCount);
      rare.pending.assign(r.pendingShards, r.pendingShards + r.pendingCount);
      rare.shardsHere = true;
    }
    if (!timingsFit) rare.timings = std::array<int64_t, 3>{r.heartbeatIntervalMs, r.rebalanceTimeoutMs, r.memberLeaseTtlMs};
    s.rare = std::make_shared<const Rare>(std::move(rare));
  }
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
  return protocol::to_response(view(requestId, memberId));
}

// Equal when they answer the same (whichever way each holds its parts).
bool operator==(const StoredResponse& a, const StoredResponse& b) {
  return a.expand("", "") == b.expand("", "");
}

}  // namespace rsc::group
