#include "group/stream_lag.hpp"

#include <algorithm>
#include <cstdio>
#include <set>

namespace rsc::group {

namespace {
// Entry ids "ms-seq", compared as numbers; an id that does not parse is not less.
bool id_less(const std::string& a, const std::string& b) {
  unsigned long long am = 0, as = 0, bm = 0, bs = 0;
  if (std::sscanf(a.c_str(), "%llu-%llu", &am, &as) != 2 || std::sscanf(b.c_str(), "%llu-%llu", &bm, &bs) != 2) return false;
  return am < bm || (am == bm && as < bs);
}

// How many records wait for the group on the shard. Redis's lag is entries added minus entries
// read: records trimmed before the group read them still count in it, though they are gone; the
// trimming counted them (trimmedUnread) and the records left bound it. A group at the last id
// waits for none, and a group behind the first record left waits for all of them (known even when
// Redis cannot tell its lag).
std::optional<int64_t> waiting(const ShardGroupReading& r, const ShardReading& s) {
  if (!s.lastId.empty() && !r.lastDeliveredId.empty() && !id_less(r.lastDeliveredId, s.lastId)) return 0;
  if (s.length && (*s.length == 0 || (!s.firstId.empty() && id_less(r.lastDeliveredId, s.firstId)))) return *s.length;
  if (!r.lag) return std::nullopt;
  const auto lag = std::max<int64_t>(0, *r.lag - r.trimmedUnread);  // those are gone
  return s.length ? std::min(lag, *s.length) : lag;
}
}  // namespace

GroupLag group_lag(const StreamReading& reading, const std::string& group) {
  GroupLag g;
  g.shards.resize(static_cast<std::size_t>(std::max<int32_t>(0, reading.shardCount)));
  for (std::size_t i = 0; i < g.shards.size(); ++i) g.shards[i].shard = static_cast<int32_t>(i);
  for (const auto& s : reading.shards) {
    if (s.shard < 0 || static_cast<std::size_t>(s.shard) >= g.shards.size() || !s.exists) continue;
    g.shards[static_cast<std::size_t>(s.shard)].length = s.length;
    g.shards[static_cast<std::size_t>(s.shard)].trimmed = s.trimmed;
    for (const auto& r : s.groups) {
      if (r.group != group) continue;
      auto& out = g.shards[static_cast<std::size_t>(s.shard)];
      out.onShard = true;
      out.lastDeliveredId = r.lastDeliveredId;
      out.entriesRead = r.entriesRead;
      out.lag = waiting(r, s);
      out.pending = r.pending;
      out.trimmedUnread = r.trimmedUnread;
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
      if (const auto lag = waiting(r, s)) sum.knownLag += *lag, ++sum.unknownShards;
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

void LagRounds::begin(int64_t now) {
  last_ = now;
  queue_.clear();
  read_.clear();
  ok_ = true;
}

bool LagRounds::plan(const std::vector<std::string>& mine) {
  for (const auto& s : mine)
    if (read_.insert(s).second) queue_.push_back(s);
  return !queue_.empty() || !sampled_.empty();
}

std::optional<std::string> LagRounds::next() {
  if (queue_.empty()) return std::nullopt;
  auto s = std::move(queue_.front());
  queue_.pop_front();
  return s;
}

bool LagRounds::groups_due(const std::string& stream, const std::string& fingerprint, int64_t now) const {
  const auto it = groupsRead_.find(stream);
  return groups_read_due(it == groupsRead_.end() ? std::nullopt : std::optional<GroupsRead>(it->second), fingerprint,
                         now, intervalMs_);
}

void LagRounds::groups_read(const std::string& stream, const std::string& fingerprint, int64_t now, bool exists) {
  if (!exists) {  // gone: nothing to compare with next time, its series go at the round's end
    groupsRead_.erase(stream);
    read_.erase(stream);
    return;
  }
  groupsRead_[stream] = GroupsRead{fingerprint, now};
}

LagRounds::End LagRounds::finish() {
  End end;
  for (const auto& s : sampled_)
    if (!read_.count(s)) end.forget.push_back(s), groupsRead_.erase(s);
  end.changed = read_.size() != sampled_.size();
  sampled_ = read_;
  end.sampled = sampled_.size();
  end.ok = ok_;
  return end;
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
