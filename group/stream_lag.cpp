#include "group/stream_lag.hpp"

#include <algorithm>
#include <set>

namespace rsc::group {

GroupLag group_lag(const StreamReading& reading, const std::string& group) {
  GroupLag g;
  g.shards.resize(static_cast<std::size_t>(std::max<int32_t>(0, reading.shardCount)));
  for (std::size_t i = 0; i < g.shards.size(); ++i) g.shards[i].shard = static_cast<int32_t>(i);
  for (const auto& s : reading.shards) {
    if (s.shard < 0 || static_cast<std::size_t>(s.shard) >= g.shards.size() || !s.exists) continue;
    g.shards[static_cast<std::size_t>(s.shard)].length = s.length;
    for (const auto& r : s.groups) {
      if (r.group != group) continue;
      auto& out = g.shards[static_cast<std::size_t>(s.shard)];
      out.onShard = true;
      out.lastDeliveredId = r.lastDeliveredId;
      out.entriesRead = r.entriesRead;
      out.lag = r.lag;
      out.pending = r.pending;
    }
  }
  for (const auto& s : g.shards) {
    g.pending += s.pending;
    if (s.lag) g.knownLag += *s.lag;
    else ++g.unknownShards;
  }
  return g;
}

LagByGroup lag_by_group(const StreamReading& reading, const std::vector<std::string>& known) {
  const auto shards = std::max<int32_t>(0, reading.shardCount);
  LagByGroup out;
  out.reserve(known.size() + (reading.shards.empty() ? 0 : reading.shards.front().groups.size()));
  for (const auto& n : known) out[n];
  // unknownShards counts the shards where the lag is known until the end.
  for (const auto& s : reading.shards) {
    if (s.shard < 0 || s.shard >= shards || !s.exists) continue;
    for (const auto& r : s.groups) {
      auto& sum = out[r.group];
      sum.pending += r.pending;
      if (r.lag) sum.knownLag += *r.lag, ++sum.unknownShards;
    }
  }
  for (auto& [name, sum] : out) sum.unknownShards = shards - sum.unknownShards;
  return out;
}

bool lag_round_due(std::optional<int64_t> last, int64_t now, int64_t intervalMs) {
  if (intervalMs <= 0) return false;
  return !last || now - *last >= intervalMs;
}

bool groups_read_due(const std::optional<GroupsRead>& last, const std::string& fingerprint, int64_t now,
                     int64_t intervalMs) {
  if (!last || last->fingerprint != fingerprint || fingerprint.empty()) return true;
  return now - last->at >= kGroupsReadEvery * intervalMs;
}

Trim trim_for(const protocol::Retention& r, int64_t storeNowMs) {
  using K = protocol::Retention::Kind;
  switch (r.kind) {
    case K::MaxLen: return {Trim::Mode::MaxLen, std::to_string(r.value)};
    case K::MaxAgeMs: return {Trim::Mode::MinId, std::to_string(std::max<int64_t>(0, storeNowMs - r.value)) + "-0"};
    case K::ProcessedByAllGroups: return {Trim::Mode::ProcessedByAllGroups, ""};
    case K::None: break;
  }
  return {};
}

std::string lag_duty_key(const std::string& streamPrefix) { return "lag-sampling/" + streamPrefix; }

}  // namespace rsc::group
