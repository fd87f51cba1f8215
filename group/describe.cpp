#include "group/describe.hpp"

#include <nlohmann/json.hpp>

#include "group/coordinator.hpp"
#include "protocol/codec.hpp"

namespace rsc::group {

namespace {
bool read_in_rack(const GroupState& g, const Member& m, int32_t s) {
  const auto& racks = g.racks();
  return !m.rackId.empty() && static_cast<std::size_t>(s) < racks.size() && racks[static_cast<std::size_t>(s)] == m.rackId;
}
}  // namespace

int32_t cross_rack_shards(const GroupState& g) {
  int32_t n = 0;
  for (const auto& [id, m] : g.members)
    if (m.live())
      for (int32_t s : m.assigned) n += read_in_rack(g, m, s) ? 0 : 1;
  return n;
}

RackLocality rack_locality(const GroupState& g) {
  RackLocality r;
  for (const auto& [id, m] : g.members) {
    if (!m.live()) continue;
    int32_t in = 0;
    for (int32_t s : m.assigned) {
      const bool local = read_in_rack(g, m, s);
      in += local ? 1 : 0;
      r.crossRack += local ? 0 : 1;
    }
    r.inRack.emplace(id, in);
  }
  return r;
}

std::string describe_json(const GroupState& g, Millis now, const RecentEvents* recent, const GroupLag* redis,
                          const protocol::StreamMetadata* stream, const LagReadingAge* age) {
  using json = nlohmann::json;
  json members = json::array();
  const bool racked = !g.racks().empty();
  const RackLocality locality = racked ? rack_locality(g) : RackLocality{};
  for (const auto& [id, m] : g.members) {
    json progress = json::array();
    for (const auto& p : m.progress) {
      json e{{"shardIndex", p.shardIndex}};
      e["lastDeliveredId"] = p.lastDeliveredId ? json(*p.lastDeliveredId) : json(nullptr);
      e["pending"] = p.pending ? json(*p.pending) : json(nullptr);
      e["lag"] = p.lag ? json(*p.lag) : json(nullptr);
      progress.push_back(std::move(e));
    }
    json mj{{"memberId", id},
            {"state", protocol::to_string(lifecycle(m))},
            {"memberEpoch", m.epoch},
            {"previousEpoch", m.previousEpoch},
            {"assignedShards", m.assigned},
            {"pendingShards", m.live() ? m.pending() : ShardSet{}},
            {"revokingShards", m.revoking},
            {"targetShards", m.target},
            {"lastHeartbeatAgoMs", now - m.lastHeartbeatMs},
            {"runtimeConsumerCapacity",
             {{"runtimeMaxConcurrency", m.capacity.runtimeMaxConcurrency},
              {"availableConcurrency", m.capacity.availableConcurrency}}},
            {"shardProgress", std::move(progress)}};
    if (!m.instanceId.empty()) mj["instanceId"] = m.instanceId;
    if (!m.rackId.empty()) mj["rackId"] = m.rackId;
    if (auto it = locality.inRack.find(id); it != locality.inRack.end()) mj["inRackShards"] = it->second;
    if (m.revokeDeadlineMs != 0) mj["revokeDeadlineInMs"] = m.revokeDeadlineMs - now;
    if (m.live() && m.leaseUntilMs != 0) mj["storedLeaseEndsInMs"] = m.leaseUntilMs - now;
    if (!m.quarantined.empty()) {
      mj["quarantinedShards"] = m.quarantined;
      mj["quarantineEndsInMs"] = m.quarantineUntilMs - now;
    }
    members.push_back(std::move(mj));
  }
  json owners = json::array();
  const auto o = shard_owners(g);
  for (std::size_t s = 0; s < o.size(); ++s)
    owners.push_back({{"shardIndex", s}, {"owner", o[s].empty() ? json(nullptr) : json(o[s])}});
  // Per shard, everything a person asks about it: who reads it, who is giving it up, who waits
  // for it, and the progress its reader (else whoever last reported it) gave.
  struct ShardView {
    std::string owner, revokingBy, pendingFor;
    const protocol::ShardProgress* progress = nullptr;
    bool ownersReport = false;
  };
  std::vector<ShardView> views(static_cast<std::size_t>(std::max<int32_t>(0, g.shardCount)));
  for (std::size_t s = 0; s < o.size() && s < views.size(); ++s) views[s].owner = o[s];
  for (const auto& [id, m] : g.members) {
    if (m.live())
      for (auto s : m.revoking)
        if (s >= 0 && static_cast<std::size_t>(s) < views.size()) views[s].revokingBy = id;
    if (m.live())
      for (auto s : m.pending())
        if (s >= 0 && static_cast<std::size_t>(s) < views.size()) views[s].pendingFor = id;
    for (const auto& p : m.progress) {
      if (p.shardIndex < 0 || static_cast<std::size_t>(p.shardIndex) >= views.size()) continue;
      auto& v = views[p.shardIndex];
      const bool fromOwner = id == v.owner;
      if (v.progress == nullptr || (fromOwner && !v.ownersReport)) {
        v.progress = &p;
        v.ownersReport = fromOwner;
      }
    }
  }
  json shards = json::array();
  int32_t unassigned = 0;  // by an external assignor's choice
  for (std::size_t s = 0; s < views.size(); ++s) {
    const auto& v = views[s];
    const char* state = !v.revokingBy.empty() ? "REVOKING" : !v.owner.empty() ? "OWNED" : !v.pendingFor.empty() ? "PENDING" : "UNASSIGNED";
    auto opt = [](const std::string& x) { return x.empty() ? json(nullptr) : json(x); };
    json e{{"shardIndex", s}, {"state", state}, {"owner", opt(v.owner)}, {"revokingBy", opt(v.revokingBy)},
           {"pendingFor", opt(v.pendingFor)}};
    const auto* p = v.progress;
    e["lastDeliveredId"] = p && p->lastDeliveredId ? json(*p->lastDeliveredId) : json(nullptr);
    e["pending"] = p && p->pending ? json(*p->pending) : json(nullptr);
    e["lag"] = p && p->lag ? json(*p->lag) : json(nullptr);
    // Its phase in a change of the stream's shard count (rule 9) and what that waits for.
    const auto si = static_cast<int32_t>(s);
    if (g.retireFrom && si >= *g.retireFrom) {
      e["phase"] = "RETIRING";
      e["waitingFor"] = v.owner.empty() ? "nothing: retired at the next tick"
                                        : "its holder " + v.owner + " to hand it back (drained by every group)";
    } else if (stream != nullptr && stream->metadataVersion > g.metadataVersion && si >= stream->readShardCount()) {
      // The stream (read after the group) retired it; the group learns that at its next step.
      // Never shown ACTIVE meanwhile.
      e["phase"] = "RETIRING";
      e["waitingFor"] = "the group to learn the stream's metadata version " + std::to_string(stream->metadataVersion) +
                        " (it has " + std::to_string(g.metadataVersion) + "), at its next step";
    } else if (stream != nullptr && si >= stream->shardCount && si < stream->readShardCount()) {
      e["phase"] = "DRAINING";
      std::string wait = "every consumer group to read and ack it (no longer routed to)";
      if (redis != nullptr && s < redis->shards.size() && redis->shards[s].onShard) {
        const auto& r = redis->shards[s];
        wait = "this group: " + std::to_string(r.pending) + " pending, " +
               (r.lag ? std::to_string(*r.lag) : std::string("unknown")) + " unread; and every other group";
      }
      e["waitingFor"] = wait;
    } else {
      e["phase"] = "ACTIVE";
    }
    for (const auto& [inst, r] : g.reservations)
      if (contains(r.shards, si)) e["reservedFor"] = inst;
    if (std::string(state) == "UNASSIGNED" && !e.contains("reservedFor") && g.assignor == protocol::AssignorKind::External) {
      e["unassignedReason"] = "the external assignor's last posted target gives it to no live member (PUT .../target)";
      ++unassigned;
    }
    if (redis != nullptr && s < redis->shards.size()) {
      const auto& r = redis->shards[s];
      e["redis"] = r.onShard ? json{{"lastDeliveredId", r.lastDeliveredId},
                                    {"entriesRead", r.entriesRead ? json(*r.entriesRead) : json(nullptr)},
                                    {"lag", r.lag ? json(*r.lag) : json(nullptr)},
                                    {"pending", r.pending},
                                    {"length", r.length ? json(*r.length) : json(nullptr)},
                                    {"trimmed", r.trimmed},
                                    {"trimmedUnread", r.trimmedUnread}}
                             : json(nullptr);
    }
    shards.push_back(std::move(e));
  }
  json target = json::object();
  for (const auto& [id, m] : g.members)
    if (m.live() && !m.leaving()) target[id] = m.target;
  json j{{"streamPrefix", g.streamPrefix},
         {"consumerGroup", g.consumerGroup},
         {"state", protocol::to_string(group_state(g))},
         {"groupEpoch", g.groupEpoch},
         {"assignmentEpoch", g.assignmentEpoch},
         {"assignor", protocol::to_string(g.assignor)},
         {"metadataVersion", g.metadataVersion},
         {"shardCount", g.shardCount},
         {"storeRevision", g.storeRevision},
         {"members", std::move(members)},
         {"targetAssignment", std::move(target)},
         {"shardOwners", std::move(owners)},
         {"shards", std::move(shards)}};
  if (g.assignor == protocol::AssignorKind::External) j["unassignedShards"] = unassigned;
  if (g.coPartitionedWith)
    j["coPartitionedWith"] = {{"prefix", g.coPartitionedWith->streamPrefix}, {"group", g.coPartitionedWith->consumerGroup}};
  if (racked) {
    j["shardRacks"] = g.racks();
    j["shardRacksOf"] = g.shardRacks.empty() ? "stream" : "group";
    j["crossRackShards"] = locality.crossRack;
  }
  if (g.rollbackGuardUntilMs > now) j["rollbackGuardInMs"] = g.rollbackGuardUntilMs - now;
  if (stream != nullptr) {
    j["routedShardCount"] = stream->shardCount;
    j["drainingShards"] = stream->drainingShards();
    j["activeMigration"] = stream->migration && stream->drainingShards() > 0 ? protocol::to_json(*stream->migration) : json(nullptr);
    if (stream->retiredKeys() > 0) j["retiredShardKeys"] = protocol::to_json(*stream)["retiredShardKeys"];
  }
  if (g.retireFrom) j["retiringFrom"] = *g.retireFrom;
  if (!g.reservations.empty()) {
    json rs = json::array();
    for (const auto& [inst, r] : g.reservations)
      rs.push_back({{"instanceId", inst}, {"shards", r.shards}, {"memberId", r.memberId}, {"endsInMs", r.untilMs - now}});
    j["reservations"] = std::move(rs);
  }
  if (age != nullptr) {
    j["redisLagSource"] = age->live ? "live" : "lag-round";
    j["redisLagReadAt"] = !age->live && age->atMs ? json(*age->atMs) : json(nullptr);
    j["redisLagAgeMs"] = !age->live && age->atMs ? json(std::max<Millis>(0, now - *age->atMs)) : json(nullptr);
  }
  if (redis != nullptr) {
    const auto lag = redis->lag();
    j["redisLag"] = {{"records", lag ? json(*lag) : json(nullptr)},
                     {"knownRecords", redis->knownLag},
                     {"unknownShards", redis->unknownShards},
                     {"pending", redis->pending}};
  }
  if (recent != nullptr) {
    json events = json::array();
    for (const auto& r : recent->items()) {
      json e{{"agoMs", now - r.atMs}, {"kind", to_string(r.event.kind)}, {"groupEpoch", r.groupEpoch}};
      if (!r.event.member.empty()) e["memberId"] = r.event.member;
      if (!r.event.shards.empty()) e["shards"] = r.event.shards;
      if (!r.event.detail.empty()) e["detail"] = r.event.detail;
      events.push_back(std::move(e));
    }
    j["recentEvents"] = std::move(events);
  }
  return protocol::dump(j);
}

}  // namespace rsc::group
