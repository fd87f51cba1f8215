#include "group/stream_lag.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <string_view>
#include <unordered_set>

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

namespace {
std::string opt_text(const std::optional<int64_t>& v) { return v ? std::to_string(*v) : std::string(); }
// Splits on `sep` (an empty text is one empty part).
std::vector<std::string> split(const std::string& text, char sep) {
  std::vector<std::string> out;
  std::size_t from = 0;
  for (;;) {
    const auto at = text.find(sep, from);
    out.push_back(text.substr(from, at == std::string::npos ? std::string::npos : at - from));
    if (at == std::string::npos) return out;
    from = at + 1;
  }
}
// An integer field: "" is nullopt; anything else must be a whole number.
bool read_int(const std::string& s, std::optional<int64_t>& out) {
  if (s.empty()) return out.reset(), true;
  char* end = nullptr;
  errno = 0;
  const long long v = std::strtoll(s.c_str(), &end, 10);
  if (errno != 0 || end == s.c_str() || *end != '\0') return false;
  out = v;
  return true;
}
uint64_t fnv(const std::string& a, const std::string& b) {
  uint64_t h = 1469598103934665603ULL;
  for (const auto* s : {&a, &b}) {
    for (unsigned char c : *s) h = (h ^ c) * 1099511628211ULL;
    h = (h ^ 0xff) * 1099511628211ULL;
  }
  return h;
}
}  // namespace

// Shards: "exists,length,firstId,lastId,trimmed" joined by ';'. A group's position: per shard
// "" (not on it) or "lastDeliveredId,entriesRead,lag,pending,trimmedUnread", joined by ';'. Sums:
// "knownLag,unknownShards,pending". Ids and numbers hold none of ',' and ';'.
LagSnapshotFields encode_lag_snapshot(const StreamReading& r, const std::vector<std::string>& known) {
  return encode_lag_snapshot(r, known, lag_by_group(r, known));
}

LagSnapshotFields encode_lag_snapshot(const StreamReading& r, const std::vector<std::string>& known, const LagByGroup& sums) {
  LagSnapshotFields f;
  const auto shards = static_cast<std::size_t>(std::max<int32_t>(0, r.shardCount));
  std::vector<const ShardReading*> byIndex(shards, nullptr);
  for (const auto& s : r.shards)
    if (s.shard >= 0 && static_cast<std::size_t>(s.shard) < shards) byIndex[static_cast<std::size_t>(s.shard)] = &s;
  for (std::size_t i = 0; i < shards; ++i) {
    if (i > 0) f.shards += ';';
    const auto* s = byIndex[i];
    if (s == nullptr || !s->exists) {
      f.shards += "0,,,,0";
      continue;
    }
    f.shards += "1," + opt_text(s->length) + "," + s->firstId + "," + s->lastId + "," + std::to_string(s->trimmed);
  }
  // Each group's per-shard text, built shard by shard in one pass over the reading.
  std::unordered_map<std::string, std::vector<std::string>> cells;
  cells.reserve(known.size());
  for (const auto& n : known) cells[n].resize(shards);
  for (std::size_t i = 0; i < shards; ++i) {
    const auto* s = byIndex[i];
    if (s == nullptr || !s->exists) continue;
    for (const auto& g : s->groups) {
      auto& c = cells[g.group];
      c.resize(shards);
      c[i] = g.lastDeliveredId + "," + opt_text(g.entriesRead) + "," + opt_text(g.lag) + "," + std::to_string(g.pending) +
             "," + std::to_string(g.trimmedUnread);
    }
  }
  std::vector<std::string> names;
  names.reserve(cells.size());
  for (const auto& [n, c] : cells) names.push_back(n);
  std::sort(names.begin(), names.end());
  f.positions.reserve(names.size());
  f.sums.reserve(names.size());
  for (const auto& n : names) {
    std::string text;
    const auto& c = cells[n];
    for (std::size_t i = 0; i < c.size(); ++i) text += (i > 0 ? ";" : "") + c[i];
    f.positions.emplace_back(n, std::move(text));
    const auto it = sums.find(n);
    const LagSums s = it == sums.end() ? LagSums{0, static_cast<int32_t>(shards), 0} : it->second;
    f.sums.emplace_back(n, std::to_string(s.knownLag) + "," + std::to_string(s.unknownShards) + "," + std::to_string(s.pending));
  }
  return f;
}

std::optional<StreamReading> decode_lag_snapshot(const std::string& shards, const std::string& group,
                                                 const std::optional<std::string>& position) {
  StreamReading r;
  const auto parts = split(shards, ';');
  if (shards.empty()) return r;  // a stream of no shards
  for (std::size_t i = 0; i < parts.size(); ++i) {
    const auto f = split(parts[i], ',');
    if (f.size() != 5 || (f[0] != "0" && f[0] != "1")) return std::nullopt;
    ShardReading s;
    s.shard = static_cast<int32_t>(i);
    s.exists = f[0] == "1";
    std::optional<int64_t> trimmed;
    if (!read_int(f[1], s.length) || !read_int(f[4], trimmed)) return std::nullopt;
    s.firstId = f[2];
    s.lastId = f[3];
    s.trimmed = trimmed.value_or(0);
    r.shards.push_back(std::move(s));
  }
  r.shardCount = static_cast<int32_t>(r.shards.size());
  if (!position) return r;
  const auto cells = split(*position, ';');
  if (cells.size() != r.shards.size()) return std::nullopt;  // read at another shard count
  for (std::size_t i = 0; i < cells.size(); ++i) {
    if (cells[i].empty()) continue;
    const auto f = split(cells[i], ',');
    if (f.size() != 5) return std::nullopt;
    ShardGroupReading g;
    g.group = group;
    g.lastDeliveredId = f[0];
    std::optional<int64_t> pending, trimmedUnread;
    if (!read_int(f[1], g.entriesRead) || !read_int(f[2], g.lag) || !read_int(f[3], pending) || !read_int(f[4], trimmedUnread))
      return std::nullopt;
    g.pending = pending.value_or(0);
    g.trimmedUnread = trimmedUnread.value_or(0);
    r.shards[i].groups.push_back(std::move(g));
  }
  return r;
}

std::optional<LagSums> decode_lag_sums(const std::string& text) {
  const auto f = split(text, ',');
  std::optional<int64_t> lag, unknown, pending;
  if (f.size() != 3 || !read_int(f[0], lag) || !read_int(f[1], unknown) || !read_int(f[2], pending) || !lag || !unknown || !pending)
    return std::nullopt;
  return LagSums{*lag, static_cast<int32_t>(*unknown), *pending};
}

LagSnapshotMemory::Diff LagSnapshotMemory::diff(const LagSnapshotFields& next) const {
  Diff d;
  d.replace = !known_;
  std::unordered_set<std::string_view> present;
  present.reserve(next.positions.size());
  for (std::size_t i = 0; i < next.positions.size(); ++i) {
    const auto& [name, text] = next.positions[i];
    present.insert(name);
    const auto it = hashes_.find(name);
    if (d.replace || it == hashes_.end() || it->second != fnv(text, next.sums[i].second)) d.changed.push_back(i);
  }
  if (!d.replace)
    for (const auto& [name, h] : hashes_)
      if (!present.count(name)) d.removed.push_back(name);
  std::sort(d.removed.begin(), d.removed.end());
  return d;
}

void LagSnapshotMemory::written(const LagSnapshotFields& next) {
  known_ = true;
  hashes_.clear();
  hashes_.reserve(next.positions.size());
  for (std::size_t i = 0; i < next.positions.size(); ++i) hashes_[next.positions[i].first] = fnv(next.positions[i].second, next.sums[i].second);
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
