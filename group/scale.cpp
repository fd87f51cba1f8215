#include "group/scale.hpp"

#include <algorithm>

namespace rsc::group {

using protocol::Migration;
using protocol::MigrationState;

ScaleStep scale_step(protocol::StreamMetadata m, const ScaleCall& c, int64_t now) {
  ScaleStep out;
  const bool draining = m.drainingShards() > 0;
  auto moved = [&](ScaleOutcome o) {
    ++m.metadataVersion;
    out.outcome = o;
    out.meta = std::move(m);
    return out;
  };
  auto unchanged = [&](ScaleOutcome o) {
    out.outcome = o;
    out.meta = std::move(m);
    return out;
  };
  switch (c.op) {
    case ScaleOp::Scale: {
      if (draining || m.deletingRetired) return unchanged(ScaleOutcome::Busy);
      if (c.target == m.shardCount) return unchanged(ScaleOutcome::Same);
      Migration g;
      g.reshardingId = "v" + std::to_string(m.metadataVersion + 1);
      g.fromShardCount = m.shardCount;
      g.toShardCount = c.target;
      g.state = c.target < m.shardCount ? MigrationState::DRAINING : MigrationState::DEPRECATED;
      g.createdAtMs = g.updatedAtMs = now;
      g.requestedBy = c.requestedBy;
      g.reason = c.reason;
      const bool shrink = c.target < m.shardCount;
      if (!shrink) grown_over_retired(m, c.target);
      m.shardCount = c.target;
      m.migration = std::move(g);
      return moved(shrink ? ScaleOutcome::Draining : ScaleOutcome::Grown);
    }
    case ScaleOp::Rollback: {
      if (!draining) return unchanged(ScaleOutcome::NothingToRollBack);
      m.shardCount = m.migration->fromShardCount;
      m.migration->state = MigrationState::ROLLED_BACK;
      m.migration->updatedAtMs = now;
      return moved(ScaleOutcome::RolledBack);
    }
    case ScaleOp::Retire: {
      if (!draining || m.metadataVersion != c.expectedVersion) return unchanged(ScaleOutcome::Stale);
      m.retiredKeysTo = std::max(m.retiredKeysTo, m.migration->fromShardCount);
      m.retiredAtMs = now;
      m.migration->state = MigrationState::DEPRECATED;
      m.migration->updatedAtMs = now;
      return moved(ScaleOutcome::Retired);
    }
    case ScaleOp::DeleteRetired: {
      if (draining || m.deletingRetired || m.retiredKeys() == 0 || m.metadataVersion != c.expectedVersion)
        return unchanged(ScaleOutcome::Stale);
      m.deletingRetired = true;
      return unchanged(ScaleOutcome::Deleting);
    }
    case ScaleOp::RetiredDeleted: {
      if (!m.deletingRetired) return unchanged(ScaleOutcome::Stale);
      m.deletingRetired = false;
      m.retiredKeysTo = 0;
      m.retiredAtMs = 0;
      return unchanged(ScaleOutcome::KeysDeleted);
    }
    case ScaleOp::SetRacks: {
      if (m.shardRacks == c.racks && m.shardRacksFrom == c.racksFrom) return unchanged(ScaleOutcome::Same);
      m.shardRacks = c.racks;
      m.shardRacksFrom = c.racksFrom;
      return moved(ScaleOutcome::RacksSet);
    }
  }
  return unchanged(ScaleOutcome::Same);
}

PutStep put_step(const std::optional<protocol::StreamMetadata>& current, const std::string& streamPrefix,
                 const PutCall& call) {
  PutStep s;
  if (!current) {
    s.outcome = PutOutcome::Created;
    s.meta = protocol::StreamMetadata{streamPrefix, call.shardCount, 1, call.keyStyle.value_or(protocol::KeyStyle::Plain),
                                      std::nullopt};
    return s;
  }
  s.meta = *current;
  auto& m = s.meta;
  if (call.createOnly) s.outcome = PutOutcome::Exists;
  else if (call.keyStyle && *call.keyStyle != m.keyStyle) s.outcome = PutOutcome::Style;
  else if (call.shardCount < m.shardCount) s.outcome = PutOutcome::Shrink;
  else if (call.shardCount == m.shardCount) s.outcome = PutOutcome::Same;
  else if (m.drainingShards() > 0) s.outcome = PutOutcome::Busy;
  else if (m.deletingRetired) s.outcome = PutOutcome::Deleting;
  else {
    grown_over_retired(m, call.shardCount);
    m.shardCount = call.shardCount;
    ++m.metadataVersion;
    s.outcome = PutOutcome::Grown;
  }
  return s;
}

void grown_over_retired(protocol::StreamMetadata& m, int32_t n) {
  if (m.retiredKeysTo > n) return;  // some are still retired, above the new count
  m.retiredKeysTo = 0;
  m.retiredAtMs = 0;
}

RetiredKeysStep retired_keys_step(const protocol::StreamMetadata& m, int64_t now, int64_t deleteAfterMs) {
  RetiredKeysStep s;
  s.from = m.readShardCount();
  s.to = m.retiredKeysTo;
  if (m.deletingRetired) {  // begun: finish it, whatever this pod's setting (the count is held meanwhile)
    s.action = RetiredKeysAction::Delete;
    return s;
  }
  if (deleteAfterMs < 0 || m.retiredKeys() == 0 || m.drainingShards() > 0) return s;  // Forget
  s.dueAtMs = m.retiredAtMs + deleteAfterMs;
  s.action = now >= s.dueAtMs ? RetiredKeysAction::Delete : RetiredKeysAction::Wait;
  return s;
}

ShrinkStep shrink_step(const ShrinkProgress& p, int64_t now, int64_t graceMs, int64_t deleteRetiredAfterMs) {
  ShrinkStep s;
  if (!p.meta) return s;  // Forget: the stream is gone
  const auto& m = *p.meta;
  if (m.drainingShards() > 0) {
    s.from = m.shardCount;
    s.to = m.readShardCount();
    if (!p.reading) {
      s.action = ShrinkAction::ReadShards;
      return s;
    }
    s.verdict = drain_verdict(m, *p.reading, now, graceMs);
    s.action = s.verdict.drained ? ShrinkAction::Retire : ShrinkAction::Watch;
    s.expectedVersion = m.metadataVersion;
    return s;
  }
  const auto keys = retired_keys_step(m, now, deleteRetiredAfterMs);
  s.from = keys.from;
  s.to = keys.to;
  switch (keys.action) {
    case RetiredKeysAction::Forget:
      return s;
    case RetiredKeysAction::Wait:
      s.action = ShrinkAction::WaitUntil;
      s.dueAtMs = keys.dueAtMs;
      return s;
    case RetiredKeysAction::Delete:
      // Marked first (a pod that dies after it leaves the mark: whoever looks next finishes), then
      // deleted, then recorded.
      s.action = !m.deletingRetired ? ShrinkAction::MarkDeleting
                 : p.keysDeleted    ? ShrinkAction::RecordDeleted
                                    : ShrinkAction::DeleteKeys;
      s.expectedVersion = m.metadataVersion;
      return s;
  }
  return s;
}

std::string_view to_string(ShrinkAction a) {
  switch (a) {
    case ShrinkAction::Forget: return "forget";
    case ShrinkAction::WaitUntil: return "wait";
    case ShrinkAction::ReadShards: return "read shards";
    case ShrinkAction::Watch: return "watch";
    case ShrinkAction::Retire: return "retire";
    case ShrinkAction::MarkDeleting: return "mark deleting";
    case ShrinkAction::DeleteKeys: return "delete keys";
    case ShrinkAction::RecordDeleted: return "record deleted";
  }
  return "?";
}

namespace {
// Stream ids "ms-seq" compared as numbers ("" is before everything).
std::pair<uint64_t, uint64_t> id_parts(const std::string& id) {
  const auto dash = id.find('-');
  auto num = [](const std::string& s) {
    uint64_t v = 0;
    for (char ch : s) {
      if (ch < '0' || ch > '9') return v;
      v = v * 10 + static_cast<uint64_t>(ch - '0');
    }
    return v;
  };
  if (id.empty()) return {0, 0};
  return {num(id.substr(0, dash)), dash == std::string::npos ? 0 : num(id.substr(dash + 1))};
}
}  // namespace

DrainVerdict drain_verdict(const protocol::StreamMetadata& m, const StreamReading& reading, int64_t now, int64_t graceMs) {
  DrainVerdict v;
  const int32_t from = m.shardCount, to = m.readShardCount();
  if (to <= from) return v;
  v.draining = true;
  const int64_t started = m.migration ? m.migration->createdAtMs : 0;
  v.graceLeftMs = std::max<int64_t>(0, started + graceMs - now);
  for (int32_t s = from; s < to; ++s) {
    auto it = std::find_if(reading.shards.begin(), reading.shards.end(), [&](const ShardReading& r) { return r.shard == s; });
    if (it == reading.shards.end()) {  // not read: nothing can be said of it
      v.waiting.push_back({s, "", 0, std::nullopt});
      continue;
    }
    if (!it->exists) continue;
    for (const auto& g : it->groups) {
      std::optional<int64_t> unread = g.lag;
      // Redis cannot tell the lag (records deleted or trimmed in the range): nothing is unread
      // when the group's last delivered id is the stream's last id.
      if (!unread && !it->lastId.empty() && id_parts(g.lastDeliveredId) >= id_parts(it->lastId)) unread = 0;
      if (g.pending > 0 || !unread || *unread > 0) v.waiting.push_back({s, g.group, g.pending, unread});
    }
  }
  v.drained = v.waiting.empty() && v.graceLeftMs == 0;
  return v;
}

bool draining_read_due(std::optional<int64_t> lastRead, int64_t now, bool watching, std::optional<int64_t> wakeAt,
                       int64_t idleIntervalMs) {
  return watching || !lastRead || now - *lastRead >= idleIntervalMs || (wakeAt && now >= *wakeAt);
}

std::string to_string(const DrainVerdict& v) {
  if (!v.draining) return "no shard is draining";
  std::string out;
  if (v.graceLeftMs > 0) out = "producers' grace: " + std::to_string(v.graceLeftMs) + "ms left";
  std::size_t named = 0;
  for (const auto& w : v.waiting) {
    if (named == 4) {
      out += "; and " + std::to_string(v.waiting.size() - named) + " more";
      break;
    }
    out += (out.empty() ? "" : "; ") + std::string("shard ") + std::to_string(w.shard) + ": ";
    if (w.group.empty()) out += "not read";
    else
      out += "group " + w.group + " " + std::to_string(w.pending) + " pending, " +
             (w.unread ? std::to_string(*w.unread) : std::string("unknown")) + " unread";
    ++named;
  }
  if (out.empty()) out = "drained";
  return out;
}

}  // namespace rsc::group
