#include "group/coordinator.hpp"

#include <algorithm>
#include <cstdint>
#include <set>
#include <sstream>

#include "group/assignor.hpp"
#include "group/reconcile.hpp"

namespace rsc::group {

using protocol::HeartbeatRequest;
using protocol::HeartbeatResponse;
using protocol::HeartbeatStatus;
using LS = protocol::MemberLifecycleState;

// ---------------------------------------------------------------------------------------------
// State helpers shared with describe and the store.

void Delta::merge(const Delta& o) { merge(Delta(o)); }

void Delta::merge(Delta&& o) {
  group = group || o.group;
  for (const auto& id : o.upserted) removed.erase(id);
  upserted.merge(o.upserted);  // set::merge moves the nodes; names already here stay in `o`
  for (const auto& id : o.removed) upserted.erase(id);
  removed.merge(o.removed);
}

std::string to_string(Event::Kind k) {
  switch (k) {
    case Event::Kind::JOINED: return "joined";
    case Event::Kind::REJOINED: return "rejoined";
    case Event::Kind::LEFT: return "leaving";
    case Event::Kind::REMOVED: return "removed";
    case Event::Kind::REVOKE_REQUESTED: return "revoke";
    case Event::Kind::REVOKE_ACKED: return "ack";
    case Event::Kind::ASSIGNED: return "assigned";
    case Event::Kind::EPOCH_ADVANCED: return "epoch";
    case Event::Kind::EXPIRED: return "expired";
    case Event::Kind::FENCED: return "fenced";
    case Event::Kind::GROUP_EPOCH_BUMPED: return "group-epoch";
    case Event::Kind::TARGET_COMPUTED: return "target";
    case Event::Kind::METADATA_CHANGED: return "metadata";
    case Event::Kind::ROLLBACK_GUARD: return "rollback";
    case Event::Kind::QUARANTINE_ENDED: return "quarantine-ended";
    case Event::Kind::RESERVED: return "reserved";
    case Event::Kind::RESERVATION_ENDED: return "reservation-ended";
    case Event::Kind::ASSIGNOR_CHANGED: return "assignor";
  }
  return "?";
}

std::string to_string(const Event& e) {
  std::ostringstream os;
  os << to_string(e.kind);
  if (!e.member.empty()) os << " member=" << e.member;
  if (!e.shards.empty()) {
    os << " shards=[";
    for (std::size_t i = 0; i < e.shards.size(); ++i) os << (i ? "," : "") << e.shards[i];
    os << "]";
  }
  if (!e.detail.empty()) os << " " << e.detail;
  return os.str();
}

MemberLifecycleState lifecycle(const Member& m) {
  if ((m.state == LS::ACTIVE || m.state == LS::STARTING) && !m.revoking.empty()) return LS::DRAINING;
  return m.state;
}

Millis lease_end(const Member& m, const Config& cfg) {
  return std::max(m.lastHeartbeatMs + cfg.memberLeaseTtlMs, m.leaseUntilMs);
}

bool quarantines(const Member& m, int32_t shard, Millis now) {
  return now < m.quarantineUntilMs && contains(m.quarantined, shard);
}

protocol::GroupStateName group_state(const GroupState& g) {
  using GS = protocol::GroupStateName;
  bool any = false;
  bool reconciling = false;
  for (const auto& [id, m] : g.members) {
    if (!m.live()) continue;
    any = true;
    if (m.leaving() || !m.revoking.empty() || m.epoch != g.assignmentEpoch || m.assigned != m.target)
      reconciling = true;
  }
  if (!any) return GS::EMPTY;
  if (g.groupEpoch > g.assignmentEpoch) return GS::ASSIGNING;
  return reconciling ? GS::RECONCILING : GS::STABLE;
}

int32_t assignable_shards(const GroupState& g) { return g.retireFrom ? std::min(*g.retireFrom, g.shardCount) : g.shardCount; }

std::vector<std::string> shard_owners(const GroupState& g) {
  std::vector<std::string> owners(static_cast<std::size_t>(std::max(0, g.shardCount)));
  for (const auto& [id, m] : g.members) {
    if (!m.live()) continue;
    for (int32_t s : m.assigned)
      if (s >= 0 && s < g.shardCount) owners[static_cast<std::size_t>(s)] = id;
    for (int32_t s : m.revoking)
      if (s >= 0 && s < g.shardCount) owners[static_cast<std::size_t>(s)] = id;
  }
  return owners;
}

// ---------------------------------------------------------------------------------------------
// A step: a working copy of the state plus what changed.

namespace {

std::string epoch_text(int32_t e) { return "epoch=" + std::to_string(e); }

class Step {
 public:
  Step(GroupState g, const Config& cfg, Millis now) : cfg_(cfg), now_(now) { out_.state = std::move(g); }

  GroupState& g() { return out_.state; }
  const Config& cfg() const { return cfg_; }
  Millis now() const { return now_; }

  Member* find(const std::string& id) {
    auto it = g().members.find(id);
    return it == g().members.end() ? nullptr : &it->second;
  }
  Member& touch(Member& m) {
    out_.delta.upserted.insert(m.id);
    out_.delta.removed.erase(m.id);
    return m;
  }
  void touch_group() { out_.delta.group = true; }
  // The member was heard from and its record is written: the stored lease reaches a slack past
  // one lease from now (see Config::leaseRenewalSlackMs).
  void renew(Member& m) {
    m.leaseUntilMs = std::max(m.leaseUntilMs, now_ + cfg_.memberLeaseTtlMs + cfg_.leaseRenewalSlackMs);
    touch(m);
  }
  // A heartbeat of `m` (whose record was `before`) that only renewed its lease, in a step that
  // changed nothing else, need not be written while the stored lease reaches past one more lease
  // from now: every pod judges expiry by the stored lease.
  bool renewal_can_wait(const Member& before, const Member& m) const {
    if (before.leaseUntilMs <= now_ + cfg_.memberLeaseTtlMs) return false;  // strictly: slack 0 writes every one
    const Delta& d = out_.delta;
    if (d.group || !d.removed.empty() || !out_.events.empty()) return false;
    if (!d.upserted.empty() && !(d.upserted.size() == 1 && *d.upserted.begin() == m.id)) return false;
    return same_record(before, m);
  }

  // Equal but for what a heartbeat that changes nothing changes: the time it was heard, its
  // requestId and answer.
  static bool same_record(const Member& a, const Member& b) {
    return a.epoch == b.epoch && a.previousEpoch == b.previousEpoch && a.state == b.state &&
           a.revokeDeadlineMs == b.revokeDeadlineMs && a.tombstoneUntilMs == b.tombstoneUntilMs &&
           a.leaseUntilMs == b.leaseUntilMs && a.assigned == b.assigned && a.revoking == b.revoking &&
           a.target == b.target && a.quarantined == b.quarantined && a.quarantineUntilMs == b.quarantineUntilMs &&
           a.capacity == b.capacity && a.progress == b.progress;
  }
  void event(Event::Kind k, const std::string& member, ShardSet shards = {}, std::string detail = {}) {
    out_.events.push_back(Event{k, member, std::move(shards), std::move(detail)});
  }

  void bump_group_epoch(const std::string& why) {
    ++g().groupEpoch;
    touch_group();
    event(Event::Kind::GROUP_EPOCH_BUMPED, "", {}, epoch_text(g().groupEpoch) + " (" + why + ")");
  }

  // The member is gone from the group. A record whose quarantine still runs stays as a tombstone
  // until it ends: the shards an older incarnation may still read stay held from everyone.
  void erase(const std::string& id) {
    auto it = g().members.find(id);
    if (it != g().members.end() && it->second.quarantineUntilMs > now_ && !it->second.quarantined.empty()) {
      Member& m = it->second;
      to_tombstone(m, LS::FENCED, m.quarantineUntilMs);
      return;
    }
    // A static member that left for now (-2) stays known while its shards are reserved: its id
    // coming back gets a new epoch (a late leave of the old incarnation must not match it).
    if (it != g().members.end() && !it->second.instanceId.empty()) {
      auto r = g().reservations.find(it->second.instanceId);
      if (r != g().reservations.end() && r->second.memberId == id) {
        to_tombstone(it->second, LS::FENCED, std::max(r->second.untilMs, now_ + cfg_.tombstone_retention()));
        return;
      }
    }
    g().members.erase(id);
    out_.delta.upserted.erase(id);
    out_.delta.removed.insert(id);
  }

  // `m` holds nothing any more and is dead under `state` until `until` (its next heartbeat is told so).
  void to_tombstone(Member& m, LS state, Millis until) {
    m.state = state;
    m.assigned.clear();
    m.revoking.clear();
    m.target.clear();
    m.revokeDeadlineMs = 0;
    m.progress.clear();
    m.lastRequestId.clear();
    m.lastResponse.reset();
    m.tombstoneUntilMs = until;
    touch(m);
  }

  // `m` may still read what it holds until its lease ends, as far as any pod knows (SPEC I1: a
  // member reads until it hears it was fenced or reaches its self-fence deadline, which is at most
  // a lease after the request of its last OK answer; an answer a pod gave without writing is
  // covered by the stored lease). Nobody, this member id included, gets those
  // shards before then. Returns what was held, if anything.
  ShardSet hold_until_lease_end(Member& m) {
    const ShardSet held = m.held();
    const Millis until = lease_end(m, cfg_);
    if (held.empty() || until <= now_) return {};
    m.quarantined = set_union(m.quarantined, held);
    m.quarantineUntilMs = std::max(m.quarantineUntilMs, until);
    return held;
  }

  // The member stops counting: its shards are free at once, its epoch is dead.
  void kill(Member& m, LS state, const std::string& why, bool bump = true) {
    const ShardSet released = m.held();
    // A live member learns of its fence only at its next answer (which may be lost): until its
    // lease ends it may read on, so nobody gets these shards before then. An expired member's
    // lease has ended: nothing is held.
    hold_until_lease_end(m);
    to_tombstone(m, state, std::max(now_ + cfg_.tombstone_retention(), m.quarantineUntilMs));
    event(state == LS::EXPIRED ? Event::Kind::EXPIRED : Event::Kind::FENCED, m.id, released,
          epoch_text(m.epoch) + " " + why);
    if (bump) bump_group_epoch(std::string(state == LS::EXPIRED ? "expired " : "fenced ") + m.id);
  }

  // Rule 12: `m`'s target kept for its instance for the static session timeout (the shards it
  // still holds stay held by it, or by its quarantine, until released).
  void reserve(const Member& m, const std::string& why) {
    ShardSet shards;
    for (int32_t s : m.target)
      if (s < assignable_shards(g())) shards.push_back(s);
    auto& r = g().reservations[m.instanceId];
    r.shards = std::move(shards);
    r.untilMs = now_ + cfg_.static_session_timeout();
    r.memberId = m.id;
    touch_group();
    event(Event::Kind::RESERVED, m.id, r.shards,
          "instance " + m.instanceId + " " + why + "; reserved for " + std::to_string(cfg_.static_session_timeout()) + "ms");
  }
  // The live members' targets differ in size by at most one (I2).
  bool balanced() const {
    std::size_t lo = SIZE_MAX, hi = 0;
    for (const auto& [id, m] : out_.state.members) {
      if (!m.live() || m.leaving()) continue;
      lo = std::min(lo, m.target.size());
      hi = std::max(hi, m.target.size());
    }
    return hi <= lo + 1 || lo == SIZE_MAX;
  }
  ShardSet reserved_shards() const {
    ShardSet out;
    for (const auto& [inst, r] : out_.state.reservations) out = set_union(out, r.shards);
    return out;
  }
  // The instance rejoined: its reservation is its new incarnation's target.
  std::optional<ShardSet> take_reservation(const std::string& instanceId, const std::string& memberId) {
    auto it = g().reservations.find(instanceId);
    if (it == g().reservations.end()) return std::nullopt;
    ShardSet shards = std::move(it->second.shards);
    g().reservations.erase(it);
    touch_group();
    event(Event::Kind::RESERVATION_ENDED, memberId, shards, "instance " + instanceId + " rejoined: its shards back");
    return shards;
  }

  // Whether `self` may not be given `shard`: another member holds it, or an incarnation (of
  // another id, or an older one of this id) may still read it.
  bool held_by_other(const std::string& self, int32_t shard) const {
    for (const auto& [id, m] : out_.state.members) {
      if (quarantines(m, shard, now_)) return true;
      if (id == self) continue;
      if (!m.live()) continue;
      if (contains(m.assigned, shard) || contains(m.revoking, shard)) return true;
    }
    return false;
  }

  bool grants_allowed() const { return now_ >= out_.state.rollbackGuardUntilMs; }

  // The group's assignor over the free shards (`free[i]` is the shard at position i of the spec).
  std::map<std::string, ShardSet> assign(const AssignmentSpec& spec, const std::vector<int32_t>& free) {
    switch (g().assignor) {
      case protocol::AssignorKind::Range: return assign_range(spec);
      case protocol::AssignorKind::RackAware: return assign_rack_aware(spec, racks_of(spec, free));
      case protocol::AssignorKind::External: return keep_posted(spec);
      case protocol::AssignorKind::CoPartitioned: {
        std::map<std::string, std::string> order;
        for (const auto& id : spec.members) order.emplace(id, g().members.at(id).instanceId);
        return assign_co_partitioned(spec, order);
      }
      case protocol::AssignorKind::Uniform: break;
    }
    return assign_uniform_sticky(spec);
  }
  // The external assignor: what the last posted target gives each member still here (its shards
  // that are still assignable and not reserved), nothing to a member that joined since; a shard of
  // a member that left is nobody's until a new target names it.
  static std::map<std::string, ShardSet> keep_posted(const AssignmentSpec& spec) {
    std::map<std::string, ShardSet> out;
    std::set<int32_t> taken;
    for (const auto& id : spec.members) {
      ShardSet keep;
      if (auto it = spec.current.find(id); it != spec.current.end())
        for (int32_t s : it->second)
          if (taken.insert(s).second) keep.push_back(s);
      out.emplace(id, std::move(keep));
    }
    return out;
  }
  Racks racks_of(const AssignmentSpec& spec, const std::vector<int32_t>& free) {
    Racks r;
    for (const auto& id : spec.members) r.member.emplace(id, g().members.at(id).rackId);
    r.shard.reserve(free.size());
    for (int32_t s : free)
      r.shard.push_back(static_cast<std::size_t>(s) < g().racks().size() ? g().racks()[static_cast<std::size_t>(s)] : std::string());
    return r;
  }

  // Rule 4: target recomputed when the group epoch moved past the assignment epoch.
  void maybe_recompute_target() {
    if (g().groupEpoch <= g().assignmentEpoch) return;
    AssignmentSpec spec;
    // Reserved shards (rule 12) are in nobody's target: the others are spread over the positions
    // of the free ones.
    const ShardSet reserved = reserved_shards();
    std::vector<int32_t> free;
    std::map<int32_t, int32_t> position;
    for (int32_t s = 0; s < assignable_shards(g()); ++s)
      if (!contains(reserved, s)) {
        position.emplace(s, static_cast<int32_t>(free.size()));
        free.push_back(s);
      }
    spec.shardCount = static_cast<int32_t>(free.size());
    for (const auto& [id, m] : g().members) {
      if (!m.live() || m.leaving()) continue;
      spec.members.push_back(id);
      ShardSet current;
      for (int32_t s : m.target)
        if (auto it = position.find(s); it != position.end()) current.push_back(it->second);
      spec.current.emplace(id, std::move(current));
    }
    auto target = assign(spec, free);
    for (auto& [id, shards] : target)
      for (auto& s : shards) s = free[static_cast<std::size_t>(s)];
    for (auto& [id, m] : g().members) {
      auto it = target.find(id);
      const ShardSet& t = it == target.end() ? ShardSet{} : it->second;
      if (m.target != t) {
        m.target = t;
        touch(m);
      }
    }
    g().assignmentEpoch = g().groupEpoch;
    touch_group();
    event(Event::Kind::TARGET_COMPUTED, "", {},
          epoch_text(g().assignmentEpoch) + " members=" + std::to_string(spec.members.size()) +
              " shards=" + std::to_string(spec.shardCount));
  }

  ReconcileResult reconcile(Member& m) {
    const std::string self = m.id;
    auto r = reconcile_member(
        m, g().assignmentEpoch, [&](int32_t s) { return held_by_other(self, s); }, grants_allowed(), cfg_, now_);
    if (!r.newlyRevoked.empty())
      event(Event::Kind::REVOKE_REQUESTED, m.id, r.newlyRevoked,
            "deadline=+" + std::to_string(m.revokeDeadlineMs - now_) + "ms");
    if (!r.newlyAssigned.empty()) event(Event::Kind::ASSIGNED, m.id, r.newlyAssigned);
    if (r.epochAdvanced) event(Event::Kind::EPOCH_ADVANCED, m.id, {}, epoch_text(m.epoch));
    return r;
  }

  // Lease expiry, rebalance timeouts and tombstones (rules 7 and 8).
  void expire_and_fence(bool expiryAllowed) {
    std::vector<std::string> drop;
    for (auto& [id, m] : g().members) {
      if (m.quarantineUntilMs != 0 && now_ >= m.quarantineUntilMs) {
        event(Event::Kind::QUARANTINE_ENDED, id, m.quarantined, "its stored lease has run out");
        m.quarantined.clear();
        m.quarantineUntilMs = 0;
        touch(m);
      }
      if (!m.live()) {
        if (now_ >= m.tombstoneUntilMs) drop.push_back(id);
        continue;
      }
      if (!expiryAllowed) continue;
      if (now_ > lease_end(m, cfg_)) {
        if (m.leaving()) {
          event(Event::Kind::REMOVED, id, m.held(), "leaving member went silent");
          drop.push_back(id);
        } else if (!m.instanceId.empty()) {
          // A static member that died: its target waits for its instance (rule 12), nothing moves.
          reserve(m, "died");
          kill(m, LS::EXPIRED, "no heartbeat for " + std::to_string(now_ - m.lastHeartbeatMs) + "ms", /*bump=*/false);
        } else {
          kill(m, LS::EXPIRED, "no heartbeat for " + std::to_string(now_ - m.lastHeartbeatMs) + "ms");
        }
      } else if (!m.revoking.empty() && m.revokeDeadlineMs != 0 && now_ > m.revokeDeadlineMs) {
        if (m.leaving()) {
          // It is alive and may still be draining: what it holds waits for its lease to end.
          const ShardSet held = hold_until_lease_end(m);
          event(Event::Kind::REMOVED, id, m.held(),
                "leaving member missed its revoke deadline" +
                    (held.empty() ? std::string() : "; held until its lease ends in " +
                                                        std::to_string(m.quarantineUntilMs - now_) + "ms"));
          drop.push_back(id);
        } else {
          kill(m, LS::FENCED, "revoke not acked within rebalance timeout");
        }
      }
    }
    for (const auto& id : drop) erase(id);
    if (!expiryAllowed) return;
    for (auto it = g().reservations.begin(); it != g().reservations.end();) {
      if (now_ < it->second.untilMs) {
        ++it;
        continue;
      }
      const std::string instance = it->first;
      event(Event::Kind::RESERVATION_ENDED, it->second.memberId, it->second.shards,
            "instance " + instance + " did not return within " + std::to_string(cfg_.static_session_timeout()) +
                "ms: its shards go to the others");
      it = g().reservations.erase(it);
      touch_group();
      bump_group_epoch("reservation of " + instance + " ended");
    }
  }

  // Rule 9, the end of a shrink: once no member holds a retiring shard (assigned, being revoked,
  // or kept from others because an incarnation may still read it), the group's shards end below
  // them. What members still remember of them (targets, progress, quarantines) goes with them.
  void maybe_finish_retiring() {
    if (!g().retireFrom) return;
    const int32_t from = *g().retireFrom;
    for (const auto& [id, m] : g().members)
      for (int32_t s = from; s < g().shardCount; ++s)
        if ((m.live() && (contains(m.assigned, s) || contains(m.revoking, s))) || quarantines(m, s, now_)) return;
    const int32_t before = g().shardCount;
    for (auto& [id, m] : g().members) {
      auto below = [&](const ShardSet& set) {
        ShardSet out;
        for (int32_t s : set)
          if (s < from) out.push_back(s);
        return out;
      };
      const ShardSet target = below(m.target), quarantined = below(m.quarantined);
      std::vector<protocol::ShardProgress> progress;
      for (const auto& p : m.progress)
        if (p.shardIndex < from) progress.push_back(p);
      if (target != m.target || quarantined != m.quarantined || progress.size() != m.progress.size()) {
        m.target = target;
        m.quarantined = quarantined;
        m.progress = std::move(progress);
        touch(m);
      }
    }
    for (auto& [inst, r] : g().reservations) {
      ShardSet kept;
      for (int32_t s : r.shards)
        if (s < from) kept.push_back(s);
      r.shards = std::move(kept);
    }
    g().retiredBelow = std::max(g().retiredBelow, before);
    g().shardCount = from;
    g().provisionedShards = std::min(g().provisionedShards, from);
    g().retireFrom.reset();
    touch_group();
    event(Event::Kind::METADATA_CHANGED, "", {},
          "shards " + std::to_string(from) + ".." + std::to_string(before - 1) + " retired: shardCount " +
              std::to_string(before) + " -> " + std::to_string(from));
  }

  Outcome take() { return std::move(out_); }
  HeartbeatOutcome take_with(HeartbeatResponse resp) {
    HeartbeatOutcome h;
    static_cast<Outcome&>(h) = std::move(out_);
    h.response = std::move(resp);
    return h;
  }

 private:
  const Config& cfg_;
  Millis now_;
  Outcome out_;
};

HeartbeatResponse base_response(const GroupState& g, const HeartbeatRequest& req, const Config& cfg) {
  HeartbeatResponse r;
  r.responseTo = req.requestId;
  r.memberId = req.memberId;
  r.memberEpoch = req.memberEpoch;
  r.heartbeatIntervalMs = cfg.heartbeatIntervalMs;
  r.rebalanceTimeoutMs = cfg.rebalanceTimeoutMs;
  r.memberLeaseTtlMs = cfg.memberLeaseTtlMs;
  r.groupEpoch = g.groupEpoch;
  r.assignmentEpoch = g.assignmentEpoch;
  r.metadataVersion = g.metadataVersion;
  return r;
}

HeartbeatResponse error(const GroupState& g, const HeartbeatRequest& req, const Config& cfg, HeartbeatStatus s,
                        std::string message, std::string field = {}) {
  auto r = base_response(g, req, cfg);
  r.status = s;
  r.message = std::move(message);
  if (!field.empty()) r.errorField = std::move(field);
  return r;
}

protocol::Assignment assignment_of(const Member& m, const GroupState& g) {
  protocol::Assignment a;
  a.assignedShards = m.assigned;
  a.pendingShards = m.pending();
  a.metadataVersion = g.metadataVersion;
  return a;
}

std::vector<int32_t> owned_indexes(const HeartbeatRequest& req) {
  std::vector<int32_t> v;
  v.reserve(req.ownedShards.size());
  for (const auto& o : req.ownedShards) v.push_back(o.shardIndex);
  return normalized(std::move(v));
}

// Progress is kept only for shards the member holds (rule 3 fences the rest). Written over the
// member's previous progress: its entries' strings keep their buffers from one heartbeat to the next.
void keep_held_progress(Member& m, const HeartbeatRequest& req) {
  std::size_t n = 0;
  for (const auto& p : req.shardProgress) {
    if (!contains(m.assigned, p.shardIndex) && !contains(m.revoking, p.shardIndex)) continue;
    if (n < m.progress.size()) m.progress[n] = p;
    else m.progress.push_back(p);
    ++n;
  }
  m.progress.resize(n);
  std::sort(m.progress.begin(), m.progress.end(), [](const auto& a, const auto& b) { return a.shardIndex < b.shardIndex; });
}

std::optional<protocol::ValidationError> out_of_range(const HeartbeatRequest& req, int32_t shardCount) {
  auto bad = [&](const char* list, std::size_t i, int32_t s) {
    const std::string field = std::string(list) + "[" + std::to_string(i) + "].shardIndex";
    return protocol::ValidationError{HeartbeatStatus::INVALID_REQUEST, field,
                                     field + ": shard " + std::to_string(s) + " is outside [0, " +
                                         std::to_string(shardCount) + ")"};
  };
  for (std::size_t i = 0; i < req.ownedShards.size(); ++i)
    if (req.ownedShards[i].shardIndex >= shardCount) return bad("ownedShards", i, req.ownedShards[i].shardIndex);
  for (std::size_t i = 0; i < req.revokingShards.size(); ++i)
    if (req.revokingShards[i].shardIndex >= shardCount)
      return bad("revokingShards", i, req.revokingShards[i].shardIndex);
  for (std::size_t i = 0; i < req.shardProgress.size(); ++i)
    if (req.shardProgress[i].shardIndex >= shardCount)
      return bad("shardProgress", i, req.shardProgress[i].shardIndex);
  return std::nullopt;
}

// Remembers the response for a repeated requestId (rule 10).
HeartbeatOutcome finish(Step& st, Member* m, HeartbeatResponse resp) {
  if (m != nullptr) {
    m->lastRequestId = resp.responseTo;
    m->lastResponse = StoredResponse::of(resp);
    st.touch(*m);
  }
  return st.take_with(std::move(resp));
}

// The live (not leaving) member other than `except` that holds static instance `instance`.
std::optional<std::string> live_holder_of(const GroupState& g, const std::string& instance, const std::string& except) {
  for (const auto& [id, o] : g.members)
    if (id != except && o.live() && !o.leaving() && o.instanceId == instance) return id;
  return std::nullopt;
}

// Rule 12: one live process per instance (Kafka's UNRELEASED_INSTANCE_ID). A join under another
// member id while the instance's holder is live (not leaving) is refused with nothing changed: the
// holder may be a second process of the instance, or a crashed one whose lease has not ended yet;
// a join again once that lease ends takes its reservation.
HeartbeatResponse instance_in_use(Step& st, const HeartbeatRequest& req, const std::string& instance,
                                  const Member& holder) {
  const Millis leaseLeft = std::max<Millis>(0, std::max(holder.leaseUntilMs, holder.lastHeartbeatMs + st.cfg().memberLeaseTtlMs) - st.now());
  return error(st.g(), req, st.cfg(), HeartbeatStatus::UNRELEASED_INSTANCE_ID,
               "instance " + instance + " is held by live member '" + holder.id + "' (its lease ends in " +
                   std::to_string(leaseLeft) +
                   "ms unless it heartbeats): join again once it has left or its lease has ended; if it keeps "
                   "heartbeating, another process of this instance is running",
               "instanceId");
}

HeartbeatOutcome join(Step& st, const HeartbeatRequest& req) {
  auto& g = st.g();
  // Rule 12: a static member's instance takes back its reservation (or the target of an incarnation
  // still draining its -2 leave), with no group-epoch bump and nobody else's shards moved; while
  // another member id holds the instance live, the join is refused.
  std::optional<ShardSet> inherited;
  const std::string instance = req.instanceId.value_or(std::string());
  // Epochs tell incarnations of one id apart: an id the group knows (a record in any state, or the
  // incarnation a reservation is for: an old process may still send its epoch, or a late leave
  // of it arrive) always gets a new epoch, so the group epoch moves; the target is kept (the
  // reservation's, or its own), and the sticky assignor moves nobody else.
  bool knownId = st.find(req.memberId) != nullptr;
  for (const auto& [inst, r] : g.reservations) knownId = knownId || r.memberId == req.memberId;
  if (!instance.empty()) {
    if (auto holder = live_holder_of(g, instance, req.memberId))
      return st.take_with(instance_in_use(st, req, instance, g.members.at(*holder)));
    inherited = st.take_reservation(instance, req.memberId);
  }
  Member* m = st.find(req.memberId);
  if (m != nullptr) {
    // A known id joins again. The coordinator cannot tell a restart from a join the same process
    // retried (and that reached a pod late) or from a second process using the id: the old
    // incarnation is fenced, and may read what it held until its lease ends (it hears of the fence
    // only at its next heartbeat, if ever). Its shards are held from everybody, this id included,
    // until then.
    const std::string oldState(protocol::to_string(lifecycle(*m)));
    const ShardSet held = m->live() ? st.hold_until_lease_end(*m) : ShardSet{};
    st.event(Event::Kind::REJOINED, m->id, m->held(),
             "old " + epoch_text(m->epoch) + " state=" + oldState +
                 (held.empty() ? std::string()
                               : " held until its lease ends in " + std::to_string(m->quarantineUntilMs - st.now()) + "ms"));
    ShardSet keepTarget = inherited ? *inherited : m->target;  // stickiness: the same id tends to get its shards back
    // A quarantine outlives the incarnation.
    ShardSet quarantined = std::move(m->quarantined);
    const Millis quarantineUntil = m->quarantineUntilMs;
    *m = Member{};
    m->id = req.memberId;
    m->target = std::move(keepTarget);
    m->quarantined = std::move(quarantined);
    m->quarantineUntilMs = quarantineUntil;
  } else {
    Member fresh;
    fresh.id = req.memberId;
    m = &g.members.emplace(req.memberId, std::move(fresh)).first->second;
    st.event(Event::Kind::JOINED, m->id);
  }
  m->state = LS::STARTING;
  m->instanceId = instance;
  m->rackId = req.rackId.value_or(std::string());
  m->lastHeartbeatMs = st.now();
  m->capacity = req.runtimeConsumerCapacity;
  st.renew(*m);
  if (inherited) {
    ShardSet target;
    for (int32_t s : *inherited)
      if (s < assignable_shards(g)) target.push_back(s);
    m->target = std::move(target);  // the sticky start of a recompute, if one is needed
  }
  // Without a recompute only when the incarnation is new and the group stays balanced (members
  // came or went while the instance was away: then the assignor moves what the balance needs).
  if (!inherited || knownId || !st.balanced()) st.bump_group_epoch("join " + m->id);
  st.maybe_recompute_target();
  auto rr = st.reconcile(*m);
  auto resp = base_response(g, req, st.cfg());
  resp.status = rr.status;
  resp.memberEpoch = m->epoch;
  resp.groupEpoch = g.groupEpoch;
  resp.assignmentEpoch = g.assignmentEpoch;
  resp.assignment = assignment_of(*m, g);
  if (!resp.assignment->pendingShards.empty()) resp.heartbeatIntervalMs = st.cfg().pending_heartbeat_interval();
  return finish(st, m, std::move(resp));
}

// `temporary`: epoch -2, a static member leaving that will come back (rule 12).
HeartbeatOutcome leave(Step& st, const HeartbeatRequest& req, bool temporary) {
  auto& g = st.g();
  Member* m = st.find(req.memberId);
  if (temporary && m != nullptr && m->live() && !m->leaving() && m->instanceId != req.instanceId.value_or(std::string()))
    return st.take_with(error(g, req, st.cfg(), HeartbeatStatus::INVALID_REQUEST,
                              m->instanceId.empty()
                                  ? "memberEpoch -2: member '" + m->id + "' joined without an instanceId; leave with -1"
                                  : "instanceId: member '" + m->id + "' joined as instance '" + m->instanceId + "'",
                              m->instanceId.empty() ? "memberEpoch" : "instanceId"));
  auto resp = base_response(g, req, st.cfg());
  resp.memberEpoch = temporary ? -2 : -1;
  resp.assignment = protocol::Assignment{};
  resp.assignment->metadataVersion = g.metadataVersion;
  if (m == nullptr || !m->live()) {
    // Gone already (removed, expired or fenced): leaving again is a no-op.
    return st.take_with(std::move(resp));
  }
  // A leave that names the epoch it leaves from is judged like any epoch (rule 3): one an older
  // incarnation held means the leave was sent before this incarnation joined and arrives late; it
  // must not release what this incarnation reads.
  if (req.leavingMemberEpoch && *req.leavingMemberEpoch != m->epoch && *req.leavingMemberEpoch != m->previousEpoch) {
    const int32_t e = *req.leavingMemberEpoch;
    if (e < m->epoch)
      return st.take_with(error(g, req, st.cfg(), HeartbeatStatus::FENCED_MEMBER_EPOCH,
                                "leavingMemberEpoch " + std::to_string(e) + " is from an older incarnation (current " +
                                    std::to_string(m->epoch) + "); the leave changes nothing"));
    if (g.rollbackGuardUntilMs <= st.now())  // after a rollback the store may not know the epoch
      return st.take_with(error(g, req, st.cfg(), HeartbeatStatus::INVALID_REQUEST,
                                "leavingMemberEpoch: " + std::to_string(e) + " was never issued to this member (current " +
                                    std::to_string(m->epoch) + ")",
                                "leavingMemberEpoch"));
  }
  if (!m->leaving()) {
    if (temporary) st.reserve(*m, "left for now (-2)");
    m->state = LS::LEAVING;
    m->revoking = m->held();
    m->assigned.clear();
    m->target.clear();
    st.event(Event::Kind::LEFT, m->id, m->revoking);
    if (!temporary) st.bump_group_epoch("leave " + m->id);
  }
  m->lastHeartbeatMs = st.now();
  m->capacity = req.runtimeConsumerCapacity;
  keep_held_progress(*m, req);
  // A leaving member reports its full state, so what it no longer mentions is released.
  const auto acked = process_revoke_acks(*m, req, /*implicitAcks=*/true);
  if (!acked.empty()) st.event(Event::Kind::REVOKE_ACKED, m->id, acked);
  st.renew(*m);
  if (m->revoking.empty()) {
    st.event(Event::Kind::REMOVED, m->id, {}, "left the group");
    st.erase(req.memberId);
    m = nullptr;
  } else {
    if (m->revokeDeadlineMs == 0) m->revokeDeadlineMs = st.now() + st.cfg().rebalanceTimeoutMs;
    resp.status = HeartbeatStatus::REVOKE_PENDING;
  }
  st.maybe_recompute_target();
  resp.groupEpoch = g.groupEpoch;
  resp.assignmentEpoch = g.assignmentEpoch;
  return finish(st, m, std::move(resp));
}

HeartbeatOutcome member_heartbeat(Step& st, const HeartbeatRequest& req) {
  auto& g = st.g();
  const auto& cfg = st.cfg();
  Member* m = st.find(req.memberId);
  if (m == nullptr)
    return st.take_with(error(g, req, cfg, HeartbeatStatus::UNKNOWN_MEMBER_ID,
                              "member '" + req.memberId + "' is not in the group; rejoin with memberEpoch 0"));
  if (req.memberEpoch > m->epoch && g.rollbackGuardUntilMs <= st.now())
    return st.take_with(error(g, req, cfg, HeartbeatStatus::INVALID_REQUEST,
                              "memberEpoch: " + std::to_string(req.memberEpoch) +
                                  " was never issued to this member (current " + std::to_string(m->epoch) + ")",
                              "memberEpoch"));
  if (!m->live())
    return st.take_with(error(g, req, cfg, HeartbeatStatus::FENCED_MEMBER_EPOCH,
                              "member was " + std::string(protocol::to_string(m->state)) + " at " +
                                  epoch_text(m->epoch) + "; rejoin with memberEpoch 0"));
  if (m->leaving())
    return st.take_with(error(g, req, cfg, HeartbeatStatus::FENCED_MEMBER_EPOCH,
                              "member is leaving; only memberEpoch -1 or a rejoin with 0 is accepted"));

  // Rule 3: the epoch check.
  if (req.memberEpoch > m->epoch) {
    if (st.now() < g.rollbackGuardUntilMs) {
      // The store went back in time: this epoch was issued by state it lost. Not trusted.
      st.kill(*m, LS::FENCED, "presented " + epoch_text(req.memberEpoch) + " the store does not know (rollback)");
      st.maybe_recompute_target();
      return st.take_with(error(g, req, cfg, HeartbeatStatus::FENCED_MEMBER_EPOCH,
                                "memberEpoch " + std::to_string(req.memberEpoch) +
                                    " is unknown after a store rollback; rejoin with memberEpoch 0"));
    }
    return st.take_with(error(g, req, cfg, HeartbeatStatus::INVALID_REQUEST,
                              "memberEpoch: " + std::to_string(req.memberEpoch) +
                                  " was never issued to this member (current " + std::to_string(m->epoch) + ")",
                              "memberEpoch"));
  }
  const auto owned = owned_indexes(req);
  if (req.memberEpoch < m->epoch) {
    const bool lostResponse = req.memberEpoch == m->previousEpoch && is_subset(owned, m->assigned);
    if (!lostResponse)
      return st.take_with(error(g, req, cfg, HeartbeatStatus::FENCED_MEMBER_EPOCH,
                                "memberEpoch " + std::to_string(req.memberEpoch) + " is stale (current " +
                                    std::to_string(m->epoch) + "); rejoin with memberEpoch 0"));
  }

  // Rule 3, second half: reading what the coordinator did not give this member is fenced. Shards
  // beyond this coordinator's view are judged below (SYNC_METADATA or INVALID_REQUEST).
  for (int32_t s : owned) {
    if (s >= g.shardCount || contains(m->assigned, s) || contains(m->revoking, s)) continue;
    const auto owners = shard_owners(g);
    const std::string& other = owners[static_cast<std::size_t>(s)];
    st.kill(*m, LS::FENCED,
            "reported OWNED shard " + std::to_string(s) + (other.empty() ? " it was not given" : " held by " + other));
    st.maybe_recompute_target();
    return st.take_with(error(g, req, cfg, HeartbeatStatus::FENCED_MEMBER_EPOCH,
                              "ownedShards: shard " + std::to_string(s) + " is not assigned to this member" +
                                  (other.empty() ? "" : " (held by " + other + ")") + "; rejoin with memberEpoch 0"));
  }
  for (const auto& p : req.shardProgress) {
    if (p.shardIndex >= g.shardCount || contains(m->assigned, p.shardIndex) || contains(m->revoking, p.shardIndex))
      continue;
    st.kill(*m, LS::FENCED, "reported progress on shard " + std::to_string(p.shardIndex) + " it does not hold");
    st.maybe_recompute_target();
    return st.take_with(error(g, req, cfg, HeartbeatStatus::FENCED_MEMBER_EPOCH,
                              "shardProgress: shard " + std::to_string(p.shardIndex) +
                                  " is neither owned nor being revoked by this member; rejoin with memberEpoch 0"));
  }

  // Rule 9: a member that knows a newer stream layout than this coordinator waits for it to sync.
  if (req.metadataVersion > g.metadataVersion) {
    m->lastHeartbeatMs = st.now();
    st.renew(*m);
    auto resp = base_response(g, req, cfg);
    resp.status = HeartbeatStatus::SYNC_METADATA;
    resp.memberEpoch = m->epoch;
    resp.assignment = assignment_of(*m, g);
    resp.message = "member metadataVersion " + std::to_string(req.metadataVersion) + " is ahead of the coordinator's " +
                   std::to_string(g.metadataVersion) + "; keep only the assigned shards and start nothing new";
    return st.take_with(std::move(resp));
  }
  if (auto bad = out_of_range(req, g.shardCount))
    return st.take_with(error(g, req, cfg, HeartbeatStatus::INVALID_REQUEST, bad->message, bad->field));

  // Accepted.
  // Only a member that reports exactly what this copy of the group says it reads, and whose
  // stored lease reaches past one more lease, may be answered without a write: the answer then
  // gives it nothing it does not read already. (A member that let a shard go, perhaps acked at
  // another pod, answered from a copy that predates that would be handed the shard back; the
  // write's revision check sees the copy is stale instead.) Only then is the record kept to compare.
  std::optional<Member> before;
  if (req.memberEpoch == m->epoch && owned == m->assigned && m->revoking.empty() && req.revokingShards.empty() &&
      m->leaseUntilMs > st.now() + cfg.memberLeaseTtlMs)
    before = *m;
  m->lastHeartbeatMs = st.now();
  m->capacity = req.runtimeConsumerCapacity;
  keep_held_progress(*m, req);
  if (m->state == LS::STARTING) m->state = LS::ACTIVE;
  // A shard missing from the report counts as acked only when the report is at the current epoch:
  // a report at the previous epoch may predate the revocation.
  const auto acked = process_revoke_acks(*m, req, /*implicitAcks=*/req.memberEpoch == m->epoch);
  if (!acked.empty()) st.event(Event::Kind::REVOKE_ACKED, m->id, acked);
  st.maybe_recompute_target();
  const auto rr = st.reconcile(*m);

  auto resp = base_response(g, req, cfg);
  resp.status = rr.status;
  resp.memberEpoch = m->epoch;
  const auto pending = m->pending();
  // In step or not, the answer names everything the member may read (clients that replace their
  // assignment with each answer's, as the reference clients do, stay right).
  resp.assignment = assignment_of(*m, g);
  if (!pending.empty()) resp.heartbeatIntervalMs = cfg.pending_heartbeat_interval();
  m->lastRequestId = resp.responseTo;
  m->lastResponse = StoredResponse::of(resp);
  // Nothing to write when only the lease was renewed and the stored one still covers it: the
  // cache keeps the answer (a repeat of this requestId here gets it again; elsewhere the same
  // unchanged state answers it alike).
  const bool deferred = before && st.renewal_can_wait(*before, *m);
  if (!deferred) st.renew(*m);
  auto out = st.take_with(std::move(resp));
  out.leaseRenewalDeferred = deferred;
  return out;
}

}  // namespace

// ---------------------------------------------------------------------------------------------

// A member that let go of a shard the group has since retired still reports it REVOKED (its
// answer may have been lost): that report is about nothing, not a bad request. Such entries (and
// their progress) are left out; anything else outside the group's shards is judged as before.
std::optional<HeartbeatRequest> without_retired(const GroupState& g, const HeartbeatRequest& req) {
  auto retired = [&](int32_t s) { return s >= g.shardCount && s < g.retiredBelow; };
  bool any = false;
  for (const auto& r : req.revokingShards) any = any || (retired(r.shardIndex) && r.state == protocol::ShardAssignmentState::REVOKED);
  if (!any) return std::nullopt;
  HeartbeatRequest out = req;
  ShardSet dropped;
  out.revokingShards.clear();
  for (const auto& r : req.revokingShards) {
    if (retired(r.shardIndex) && r.state == protocol::ShardAssignmentState::REVOKED) dropped.push_back(r.shardIndex);
    else out.revokingShards.push_back(r);
  }
  dropped = normalized(std::move(dropped));
  out.shardProgress.clear();
  for (const auto& p : req.shardProgress)
    if (!contains(dropped, p.shardIndex)) out.shardProgress.push_back(p);
  return out;
}

HeartbeatOutcome heartbeat(GroupState g, const HeartbeatRequest& original, const Config& cfg, Millis now) {
  const auto stripped = without_retired(g, original);
  const HeartbeatRequest& req = stripped ? *stripped : original;
  // Rule 10 first: a repeated requestId changes nothing and gets the same answer.
  if (auto it = g.members.find(req.memberId); it != g.members.end()) {
    const Member& m = it->second;
    if (m.lastResponse && !m.lastRequestId.empty() && m.lastRequestId == req.requestId) {
      HeartbeatOutcome h;
      h.response = m.lastResponse->expand(m.lastRequestId, m.id);
      // Stored by a build that answered null when nothing changed: that meant "what you have".
      const bool accepted = h.response.status == HeartbeatStatus::OK ||
                            h.response.status == HeartbeatStatus::REVOKE_PENDING ||
                            h.response.status == HeartbeatStatus::SYNC_METADATA;
      if (!h.response.assignment && accepted) h.response.assignment = assignment_of(m, g);
      h.state = std::move(g);
      return h;
    }
  }
  Step st(std::move(g), cfg, now);
  // A shard outside the stream is invalid for a join or a leave too (a positive epoch is judged in
  // member_heartbeat, where a member ahead on metadata is told to sync instead).
  if (req.memberEpoch <= 0) {
    if (auto bad = out_of_range(req, st.g().shardCount))
      return st.take_with(error(st.g(), req, cfg, HeartbeatStatus::INVALID_REQUEST, bad->message, bad->field));
  }
  if (req.memberEpoch == 0) return join(st, req);
  if (req.memberEpoch == -1) return leave(st, req, false);
  if (req.memberEpoch == -2 && req.instanceId) return leave(st, req, true);
  if (req.memberEpoch == -2)
    return st.take_with(error(st.g(), req, cfg, HeartbeatStatus::INVALID_REQUEST,
                              "memberEpoch -2 (leave, coming back) needs the member's instanceId", "instanceId"));
  if (req.memberEpoch < -2)
    return st.take_with(error(st.g(), req, cfg, HeartbeatStatus::INVALID_REQUEST, "memberEpoch: must be at least -2",
                                  "memberEpoch"));
  return member_heartbeat(st, req);
}

Outcome tick(GroupState g, const Config& cfg, Millis now, bool expiryAllowed) {
  Step st(std::move(g), cfg, now);
  st.expire_and_fence(expiryAllowed);
  st.maybe_recompute_target();
  st.maybe_finish_retiring();
  if (st.g().rollbackGuardUntilMs != 0 && now >= st.g().rollbackGuardUntilMs) {
    st.g().rollbackGuardUntilMs = 0;
    st.touch_group();
    st.event(Event::Kind::ROLLBACK_GUARD, "", {}, "guard lifted: shards may be handed out again");
  }
  return st.take();
}

Outcome apply_metadata(GroupState g, int32_t shardCount, int32_t metadataVersion, const Config& cfg, Millis now,
                       const std::vector<std::string>* streamRacks) {
  Step st(std::move(g), cfg, now);
  auto& s = st.g();
  if (metadataVersion <= s.metadataVersion || shardCount < 0) return st.take();  // not newer
  const int32_t oldCount = s.shardCount;
  const bool wasRetiring = s.retireFrom.has_value();
  s.metadataVersion = metadataVersion;
  st.touch_group();
  const std::string version = " metadataVersion=" + std::to_string(metadataVersion);
  // The stream's racks changed: they are the group's unless it has its own, and they move shards
  // only under the rack-aware assignor (revoke before assign, like any rebalance).
  bool racksMove = false;
  if (streamRacks != nullptr && *streamRacks != s.streamRacks) {
    s.streamRacks = *streamRacks;
    const bool used = s.shardRacks.empty();
    racksMove = used && s.assignor == protocol::AssignorKind::RackAware;
    st.event(Event::Kind::METADATA_CHANGED, "", {},
             "the stream's shard racks: " + std::to_string(s.streamRacks.size()) + " shard(s)" +
                 (used ? std::string() : " (not used: the group has racks of its own)") + version);
  }
  if (shardCount != oldCount && s.coPartitionedWith) {
    // A scale that slipped past the link's guard (made between the link's check of the shard counts
    // and its write): the blocks would no longer line up with the other stream's, so the link ends
    // here, loudly, and the group keeps range's blocks.
    st.event(Event::Kind::ASSIGNOR_CHANGED, "", {},
             "co-partitioned -> range: the stream went from " + std::to_string(oldCount) + " to " + std::to_string(shardCount) +
                 " shards while co-partitioned with " + s.coPartitionedWith->str() + "; the link is ended");
    s.assignor = protocol::AssignorKind::Range;
    s.coPartitionedWith.reset();
  }
  if (shardCount > oldCount || (shardCount == oldCount && wasRetiring)) {
    // Growth (or a shrink in progress undone by a growth back): every shard is assignable.
    s.shardCount = shardCount;
    s.retireFrom.reset();
    st.event(Event::Kind::METADATA_CHANGED, "", {},
             "shardCount " + std::to_string(oldCount) + " -> " + std::to_string(shardCount) + version);
    st.bump_group_epoch("metadata");
  } else if (shardCount < oldCount) {
    // A shrink whose shards were drained: taken back from the members like any revocation
    // (revoke before assign), and gone once nobody holds them.
    if (s.retireFrom == shardCount) {  // retiring already: only new racks can move anything
      if (!racksMove) return st.take();
      st.bump_group_epoch("shard racks");
    } else {
      s.retireFrom = shardCount;
      st.event(Event::Kind::METADATA_CHANGED, "", {},
               "shards " + std::to_string(shardCount) + ".." + std::to_string(oldCount - 1) + " retiring" + version);
      st.bump_group_epoch("metadata");
    }
  } else {
    // The same shards (a shrink started, or rolled back, while its shards are still read, or new
    // racks): the members learn the new version with their next answers; nothing moves unless the
    // racks the rack-aware assignor places by changed.
    st.event(Event::Kind::METADATA_CHANGED, "", {}, "shardCount " + std::to_string(shardCount) + version);
    if (!racksMove) return st.take();
    st.bump_group_epoch("shard racks");
  }
  st.maybe_recompute_target();
  st.maybe_finish_retiring();
  return st.take();
}

Outcome resume_after_outage(GroupState g, Millis from, Millis to) {
  Config unused;
  Step st(std::move(g), unused, to);
  if (to <= st.g().outageCoveredUntilMs) return st.take();  // absorbed already (by this pod or another)
  // Only the part not absorbed yet moves revoke deadlines.
  const Millis outage = std::max<Millis>(0, to - std::max(from, st.g().outageCoveredUntilMs));
  for (auto& [id, m] : st.g().members) {
    if (!m.live()) continue;
    bool changed = false;
    if (m.lastHeartbeatMs < to) {
      m.lastHeartbeatMs = to;
      changed = true;
    }
    if (m.revokeDeadlineMs != 0 && outage > 0) {
      m.revokeDeadlineMs += outage;
      changed = true;
    }
    if (changed) st.touch(m);
  }
  st.g().outageCoveredUntilMs = to;
  st.touch_group();
  return st.take();
}

Outcome recover_from_rollback(GroupState g, int32_t seenGroupEpoch, const Config& cfg, Millis now) {
  Step st(std::move(g), cfg, now);
  auto& s = st.g();
  // Epochs issued from here on must be new: skip past everything this pod saw.
  s.groupEpoch = std::max(s.groupEpoch, seenGroupEpoch);
  // A member may read for a lease after its last answer, and a pod that has not seen the rollback
  // may answer without writing for the renewal slack more.
  const Millis guard = cfg.memberLeaseTtlMs + cfg.leaseRenewalSlackMs;
  s.rollbackGuardUntilMs = now + guard;
  st.event(Event::Kind::ROLLBACK_GUARD, "", {},
           "store went back in time; no fresh grants for " + std::to_string(guard) + "ms");
  st.bump_group_epoch("rollback");
  st.maybe_recompute_target();
  return st.take();
}

Outcome fence_member(GroupState g, const std::string& memberId, const std::string& reason, const Config& cfg,
                     Millis now) {
  Step st(std::move(g), cfg, now);
  Member* m = st.find(memberId);
  if (m == nullptr || !m->live()) return st.take();
  if (m->leaving()) {
    // It may still be draining what it holds: held until its lease ends, like any fence.
    st.hold_until_lease_end(*m);
    st.event(Event::Kind::REMOVED, m->id, m->held(), reason);
    st.erase(memberId);
  } else {
    st.kill(*m, LS::FENCED, reason);
  }
  st.maybe_recompute_target();
  return st.take();
}

TargetVerdict set_target(GroupState g, bool exists, const protocol::PostedTarget& posted, const Config& cfg, Millis now) {
  using O = protocol::TargetPosted::Outcome;
  Step st(std::move(g), cfg, now);
  protocol::TargetPosted a;
  a.groupEpoch = st.g().groupEpoch;
  auto refuse = [&](O why, std::string message, std::string field = {}) {
    a.outcome = why;
    a.message = std::move(message);
    a.field = std::move(field);
    return TargetVerdict{st.take(), std::move(a)};
  };
  const std::string key = st.g().streamPrefix + "/" + st.g().consumerGroup;
  if (!exists) return refuse(O::NotFound, "no group " + key);
  if (st.g().assignor != protocol::AssignorKind::External)
    return refuse(O::NotExternal,
                  "group " + key + "'s assignor is " + std::string(protocol::to_string(st.g().assignor)) +
                      ": a posted target is for an external one (PUT the group {\"assignor\": \"external\"} first)",
                  "assignor");
  if (posted.groupEpoch != st.g().groupEpoch)
    return refuse(O::StaleEpoch, "the target was computed for group epoch " + std::to_string(posted.groupEpoch) +
                                     "; the group is at " + std::to_string(st.g().groupEpoch) +
                                     " (its members or shards changed since): compute it again from describe");
  const ShardSet reserved = st.reserved_shards();
  const int32_t shards = assignable_shards(st.g());
  std::map<int32_t, std::string> given;
  for (const auto& [id, list] : posted.target) {
    const std::string field = "targetAssignment." + id;
    const Member* m = st.find(id);
    if (m == nullptr || !m->live() || m->leaving())
      return refuse(O::Invalid, field + ": '" + id + "' is not a live member of the group (describe lists them)", field);
    for (int32_t s : list) {
      if (s < 0 || s >= shards)
        return refuse(O::Invalid, field + ": shard " + std::to_string(s) + " is not one of the group's " + std::to_string(shards) + " shards", field);
      if (contains(reserved, s))
        return refuse(O::Invalid, field + ": shard " + std::to_string(s) + " is reserved for a static member that left for now", field);
      if (auto [it, fresh] = given.emplace(s, id); !fresh)
        return refuse(O::Invalid, field + ": shard " + std::to_string(s) + " is given to '" + it->second + "' too", field);
    }
  }
  int32_t moved = 0;
  for (auto& [id, m] : st.g().members) {
    if (!m.live() || m.leaving()) continue;
    ShardSet next;
    if (auto it = posted.target.find(id); it != posted.target.end()) next = ShardSet(it->second.begin(), it->second.end());
    std::sort(next.begin(), next.end());
    if (m.target != next) {
      m.target = std::move(next);
      st.touch(m);
      ++moved;
    }
    a.target[id] = m.target;
  }
  for (int32_t s = 0; s < shards; ++s)
    if (!given.count(s) && !contains(reserved, s)) a.unassigned.push_back(s);  // reserved: their instance's
  if (moved > 0)
    st.event(Event::Kind::TARGET_COMPUTED, "", {},
             "posted for " + epoch_text(st.g().groupEpoch) + ": " + std::to_string(moved) + " member target(s) changed, " +
                 std::to_string(a.unassigned.size()) + " shard(s) unassigned");
  return TargetVerdict{st.take(), std::move(a)};
}

Outcome set_assignor(GroupState g, const protocol::GroupConfig& choice, const Config& cfg, Millis now, bool exists) {
  Step st(std::move(g), cfg, now);
  const auto racks = choice.shardRacks.value_or(st.g().shardRacks);
  // A link is with the group named, and only while the assignor is co-partitioned.
  const auto link = choice.assignor == protocol::AssignorKind::CoPartitioned ? choice.coPartitionedWith : std::nullopt;
  if (!exists) st.touch_group();  // made, with this configuration, even when it is the default one
  if (st.g().assignor == choice.assignor && st.g().shardRacks == racks && st.g().coPartitionedWith == link) return st.take();
  st.event(Event::Kind::ASSIGNOR_CHANGED, "", {},
           std::string(protocol::to_string(st.g().assignor)) + " -> " + std::string(protocol::to_string(choice.assignor)) +
               " shardRacks=" + std::to_string(racks.size()) + (link ? " with " + link->str() : std::string()));
  st.g().assignor = choice.assignor;
  st.g().shardRacks = racks;
  st.g().coPartitionedWith = link;
  st.touch_group();
  st.bump_group_epoch(std::string("assignor ") + std::string(protocol::to_string(choice.assignor)));
  st.maybe_recompute_target();
  return st.take();
}

}  // namespace rsc::group
