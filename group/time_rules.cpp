#include "group/time_rules.hpp"

#include <algorithm>
#include <limits>

namespace rsc::group {

// --- Store outages --------------------------------------------------------------------------

Millis first_lease_end(Millis podStartedAt, const Config& cfg) { return podStartedAt + cfg.memberLeaseTtlMs; }

bool expiry_allowed(const TimeView& tv) { return !tv.outageOngoing && tv.now >= tv.expiryHeldUntil; }

Outcome absorb_outages(GroupState g, const std::vector<Outage>& outages) {
  Outcome total;
  total.state = std::move(g);
  for (const auto& o : outages) {
    if (o.to <= total.state.outageCoveredUntilMs || o.to <= o.from) continue;
    auto step = resume_after_outage(std::move(total.state), o.from, o.to);
    total.state = std::move(step.state);
    total.delta.merge(std::move(step.delta));
  }
  return total;
}

Outcome tick(GroupState g, const Config& cfg, const TimeView& tv) {
  auto absorbed = absorb_outages(std::move(g), tv.outages);
  auto ticked = tick(std::move(absorbed.state), cfg, tv.now, expiry_allowed(tv));
  // The absorption came first: the tick's changes win (a member it removes stays removed).
  absorbed.delta.merge(std::move(ticked.delta));
  ticked.delta = std::move(absorbed.delta);
  return ticked;
}

std::optional<Millis> next_deadline(const GroupState& g, const Config& cfg, Millis expiryHeldUntil) {
  std::optional<Millis> due;
  auto at = [&](Millis t) { due = due ? std::min(*due, t) : t; };
  // Judgements of time (lease, revoke deadline) wait for the pod to be allowed to judge.
  auto judged_at = [&](Millis t) { at(std::max(t, expiryHeldUntil)); };
  for (const auto& [id, m] : g.members) {
    if (m.quarantineUntilMs != 0) at(m.quarantineUntilMs);
    if (!m.live()) {
      at(m.tombstoneUntilMs);
      continue;
    }
    // tick expires when now > the lease's end, and fences when now > revokeDeadline.
    judged_at(lease_end(m, cfg) + 1);
    if (!m.revoking.empty() && m.revokeDeadlineMs != 0) judged_at(m.revokeDeadlineMs + 1);
  }
  if (g.rollbackGuardUntilMs != 0) at(g.rollbackGuardUntilMs);
  if (g.groupEpoch > g.assignmentEpoch) at(0);  // due at once
  return due;
}

bool request_too_old(Millis arrivedAt, Millis now, const Config& cfg) {
  return now - arrivedAt > cfg.memberLeaseTtlMs;
}

// --- Tracking the store's availability ------------------------------------------------------

uint64_t StoreAvailability::began(Millis at) {
  const uint64_t id = next_++;
  inflight_.emplace(id, std::make_pair(at, lastReply_));
  return id;
}

void StoreAvailability::record(Millis from, Millis to) {
  if (to <= from) return;
  // Overlapping or touching outages (several connections saw the same one) are one outage.
  if (!outages_.empty() && from <= outages_.back().to) {
    outages_.back().from = std::min(outages_.back().from, from);
    outages_.back().to = std::max(outages_.back().to, to);
    return;
  }
  outages_.push_back({from, to});
  ++count_;
  while (outages_.size() > keep_) outages_.pop_front();
}

void StoreAvailability::ended(uint64_t id, Millis at, bool ok) {
  auto it = inflight_.find(id);
  if (it == inflight_.end()) return;
  const auto [sentAt, replyBefore] = it->second;
  inflight_.erase(it);
  // The store was last known to take writes at the last reply before this call (or when the
  // call went out, for a pod that never had a reply).
  const Millis lastKnownUp = replyBefore != 0 ? std::min(replyBefore, sentAt) : sentAt;
  if (!ok) {
    if (!failedSince_) failedSince_ = lastKnownUp;
    return;
  }
  if (failedSince_) {
    record(std::min(*failedSince_, lastKnownUp), at);
    failedSince_.reset();
  } else if (at - sentAt > stallMs_) {
    record(lastKnownUp, at);
  }
  lastReply_ = std::max(lastReply_, at);
}

bool StoreAvailability::ongoing(Millis now) const {
  if (failedSince_) return true;
  for (const auto& [id, call] : inflight_)
    if (now - call.first > stallMs_) return true;
  return false;
}

Millis StoreAvailability::down_since(Millis now) const {
  Millis since = now;
  if (failedSince_) since = std::min(since, *failedSince_);
  for (const auto& [id, call] : inflight_)
    if (now - call.first > stallMs_) since = std::min(since, call.second != 0 ? std::min(call.second, call.first) : call.first);
  return since;
}

ReadyVerdict judge_ready(bool synced, const StoreAvailability& a, Millis now, Millis freshMs, Millis graceMs,
                         const std::optional<std::string>& probeFailure) {
  if (!synced) return {false, "not yet connected to the store"};
  const Millis silent = now - a.last_reply();
  const Millis down = a.ongoing(now) ? now - a.down_since(now) : (probeFailure ? 0 : -1);
  if (down > graceMs || (graceMs == 0 && down >= 0)) {
    std::string why = down > 0 ? "the store has not answered for " + std::to_string(down) + "ms"
                               : "the store did not answer";
    if (probeFailure) why += " (" + *probeFailure + ")";
    if (graceMs > 0) why += ", longer than the readiness grace of " + std::to_string(graceMs) + "ms";
    return {false, why};
  }
  if (silent > std::max(freshMs, graceMs)) return {false, "no answer from the store for " + std::to_string(silent) + "ms"};
  if (down >= 0)
    return {true, "the store has not answered for " + std::to_string(down) + "ms; ready for up to " +
                      std::to_string(graceMs) + "ms of it (heartbeats answer RETRY meanwhile)"};
  return {true, ""};
}

// --- One clock for leases --------------------------------------------------------------------

void StoreClock::observe(Millis localSent, Millis localReceived, Millis storeTime) {
  const Millis rtt = std::max<Millis>(0, localReceived - localSent);
  // The store read its clock somewhere within the round trip: assume its middle.
  const Millis offset = storeTime - (localSent + rtt / 2);
  samples_.push_back({rtt, offset});
  while (samples_.size() > window_) samples_.pop_front();
  const auto best = std::min_element(samples_.begin(), samples_.end(),
                                     [](const Sample& a, const Sample& b) { return a.rtt < b.rtt; });
  offset_ = best->offset;
  uncertainty_ = best->rtt / 2 + 1;
}

Millis StoreClock::now(Millis localNow) {
  last_ = std::max(last_, localNow + offset_);
  return last_;
}

// --- Who does a group's deadline work --------------------------------------------------------

namespace {
uint64_t fnv1a64(const std::string& a, const std::string& b) {
  uint64_t h = 1469598103934665603ull;
  auto mix = [&](const std::string& s) {
    for (unsigned char c : s) {
      h ^= c;
      h *= 1099511628211ull;
    }
  };
  mix(a);
  h ^= 0xff;
  h *= 1099511628211ull;
  mix(b);
  // Finalizer (splitmix64): FNV's low bits alone spread poorly over similar names.
  h ^= h >> 30;
  h *= 0xbf58476d1ce4e5b9ull;
  h ^= h >> 27;
  h *= 0x94d049bb133111ebull;
  h ^= h >> 31;
  return h;
}
}  // namespace

uint64_t rendezvous_weight(const std::string& pod, const std::string& groupKey) { return fnv1a64(pod, groupKey); }

std::string duty_pod(const std::string& groupKey, const std::vector<std::string>& livePods) {
  std::string best;
  uint64_t bestHash = 0;
  for (const auto& p : livePods) {
    const uint64_t h = fnv1a64(p, groupKey);
    if (best.empty() || h > bestHash || (h == bestHash && p < best)) {
      best = p;
      bestHash = h;
    }
  }
  return best;
}

// --- A group's lifecycle in a pod -------------------------------------------------------------

bool should_retire(Millis lastActivity, Millis now, Millis retireAfterMs) {
  return retireAfterMs > 0 && now - lastActivity >= retireAfterMs;
}

std::optional<std::string> refuse_new_group(std::size_t existingGroups, int64_t limit, const std::string& stream) {
  if (limit <= 0 || static_cast<int64_t>(existingGroups) < limit) return std::nullopt;
  return "consumerGroup: stream '" + stream + "' already has " + std::to_string(existingGroups) +
         " groups, the limit (max-groups-per-stream) is " + std::to_string(limit) +
         "; delete an unused group or raise the limit";
}

std::optional<int32_t> provisioning_due(const GroupState& after, const std::vector<Event>& events) {
  if (after.shardCount <= after.provisionedShards) return std::nullopt;
  for (const auto& e : events) {
    if (e.kind != Event::Kind::ASSIGNED) continue;
    for (int32_t s : e.shards)
      if (s >= after.provisionedShards) return after.shardCount;
  }
  return std::nullopt;
}

Millis grants_held_after_delete(const GroupState& g, Millis now) {
  Millis until = 0;
  for (const auto& [id, m] : g.members)
    if (!m.quarantined.empty() && m.quarantineUntilMs > now) until = std::max(until, m.quarantineUntilMs);
  return until;
}

DeleteVerdict judge_delete(bool exists, const GroupState& g, bool fenceMembers) {
  if (!exists) return DeleteVerdict::NotFound;
  for (const auto& [id, m] : g.members)
    if (m.live()) return fenceMembers ? DeleteVerdict::FenceThenDelete : DeleteVerdict::HasLiveMembers;
  return DeleteVerdict::Delete;
}

}  // namespace rsc::group
