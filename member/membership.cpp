#include "member/membership.hpp"

#include <algorithm>
#include <utility>

namespace rsc::member {

using protocol::HeartbeatStatus;
using protocol::ShardAssignmentState;

Membership::Membership(Options o) : o_(std::move(o)), route_(o_.coordinatorUrl, o_.followOwner) {
  if (o_.concurrency < 1) o_.concurrency = 1;
}

int64_t Membership::margin_ms() const {
  return o_.selfFenceMarginMs > 0 ? o_.selfFenceMarginMs : std::max<int64_t>(200, leaseMs_ / 4);
}

int64_t Membership::deadline_ns() const {
  if (lastOkSentNs_ == 0) return 0;
  return lastOkSentNs_ + (leaseMs_ - margin_ms()) * 1'000'000;
}

bool Membership::may_process(int64_t nowNs) const {
  return !selfFenced_ && !left_ && fatal_.empty() && nowNs < deadline_ns();
}

bool Membership::may_read(int32_t shard, int64_t nowNs) const {
  auto it = shards_.find(shard);
  return it != shards_.end() && !it->second.revoking && !it->second.dropped && may_process(nowNs);
}

std::vector<int32_t> Membership::owned() const {
  std::vector<int32_t> out;
  for (const auto& [s, st] : shards_)
    if (!st.revoking && !st.dropped) out.push_back(s);
  return out;
}

void Membership::event(ShardEvent::Kind k, std::vector<int32_t> shards) {
  if (shards.empty()) return;
  events_.push_back({k, std::move(shards)});
  ++eventsQueued_;
}

std::vector<ShardEvent> Membership::take_events() {
  std::vector<ShardEvent> out;
  out.swap(events_);
  return out;
}

std::vector<std::string> Membership::take_log() {
  std::vector<std::string> out;
  out.swap(log_);
  return out;
}

bool Membership::take_wake() {
  const bool w = wake_;
  wake_ = false;
  return w;
}

// ---- heartbeat ---------------------------------------------------------------------------

protocol::HeartbeatRequest Membership::next_request(int64_t nowNs) {
  // The deadline may pass while no worker looks (all idle or blocked): the user still hears of it.
  if (lastOkSentNs_ != 0 && nowNs >= deadline_ns() && !selfFenced_) self_fence();
  step_out_if_silent(nowNs);  // a worker may still be blocked in a call to the silent Redis
  protocol::HeartbeatRequest r;
  r.memberId = o_.memberId;
  // A static member that steps out because it cannot read gives its shards away (-1): it would
  // otherwise keep them from everyone until it could read again.
  r.memberEpoch = leaving_ ? (o_.instanceId.empty() || steppingOut_ ? -1 : -2) : epoch_;
  // A join goes out again with its requestId until it is answered: the coordinator may have stored
  // it (its answer lost, or RETRY at the store deadline while the write went through), and then
  // replays that answer instead of taking the resend for a new incarnation of this id. Any other
  // request gets a new id: what it reports may have changed since the last send.
  const bool join = r.memberEpoch == 0;
  if (!join || joinRequestId_.empty()) {
    r.requestId = o_.memberId + "-" + o_.incarnation + "-" + std::to_string(++seq_);
    joinRequestId_ = join ? r.requestId : std::string();
  } else {
    r.requestId = joinRequestId_;
  }
  if (!o_.instanceId.empty()) r.instanceId = o_.instanceId;
  if (r.memberEpoch == 0 && !o_.rackId.empty()) r.rackId = o_.rackId;  // read at the join only
  // So that this leave, should it arrive after a newer incarnation of the id joined, changes nothing.
  if (leaving_ && epoch_ > 0) r.leavingMemberEpoch = epoch_;
  r.metadataVersion = metadataVersion_;
  r.runtimeConsumerCapacity = {o_.concurrency, o_.concurrency - busyWorkers_};
  reportedRevoked_.clear();
  for (const auto& [s, st] : shards_) {
    if (st.dropped) continue;
    bool reported = false;
    if (st.revoking) {
      // A shard a worker still holds may have a read outstanding: its records would land in this
      // member's pending list after the ack. It is REVOKED only once the worker let go.
      reported = !st.busy && st.inFlight == 0;
      if (reported) reportedRevoked_.insert(s);
      r.revokingShards.push_back(
          {s, reported ? ShardAssignmentState::REVOKED : ShardAssignmentState::DRAINING, st.inFlight, std::nullopt});
    } else if (!leaving_) {
      r.ownedShards.push_back({s, ShardAssignmentState::OWNED});
    }
    if (!reported && (!st.lastDeliveredId.empty() || st.pending)) {
      protocol::ShardProgress p;
      p.shardIndex = s;
      if (!st.lastDeliveredId.empty()) p.lastDeliveredId = st.lastDeliveredId;
      p.pending = st.pending;
      p.lag = st.lag;
      r.shardProgress.push_back(std::move(p));
    }
  }
  return r;
}

void Membership::self_fence() {
  selfFenced_ = true;
  ++counters_.selfFences;
  for (auto& [s, st] : shards_) st.needsClaim = true;  // our own pending entries, after we recover
  event(ShardEvent::Kind::Lost, owned());
  note("self-fenced: no answered heartbeat for lease minus margin; reading stops");
}

void Membership::drop_all(const std::string& why, int64_t nowNs) {
  if (!selfFenced_) event(ShardEvent::Kind::Lost, owned());  // a self-fence told of them already
  note("drops all shards and rejoins: " + why);
  ++counters_.rejoins;
  // Fenced again and again within a short time: almost always a second process using this member
  // id (each join of one fences the other). Said plainly, once per window.
  fenceTimesNs_.push_back(nowNs);
  while (!fenceTimesNs_.empty() && nowNs - fenceTimesNs_.front() > kRepeatedFenceWindowMs * 1'000'000)
    fenceTimesNs_.erase(fenceTimesNs_.begin());
  if (static_cast<int>(fenceTimesNs_.size()) >= kRepeatedFences && nowNs - lastRepeatNoteNs_ > kRepeatedFenceWindowMs * 1'000'000) {
    lastRepeatNoteNs_ = nowNs;
    note("fenced " + std::to_string(fenceTimesNs_.size()) + " times in " + std::to_string(kRepeatedFenceWindowMs / 1000) +
         " s: another process is probably using member id '" + o_.memberId +
         "' (each of its joins fences this one): give every process its own member id, or leave it unset");
  }
  for (auto it = shards_.begin(); it != shards_.end();) {
    if (it->second.busy) {  // forgotten once its worker lets go
      it->second.dropped = true;
      it->second.revoking = true;
      stop_reading(it->first, it->second);
      ++it;
    } else {
      it = shards_.erase(it);
    }
  }
  epoch_ = 0;
  wake_ = true;
}

Membership::Reaction Membership::not_answered(const std::string& why, int64_t nowNs) {
  // Keep the current shards (the self-fence deadline bounds this) and try again soon.
  ++counters_.heartbeatFailures;
  Reaction out;
  out.waitMs = std::min(backoffMs_, intervalMs_);
  backoffMs_ = std::min<int64_t>(backoffMs_ * 2, 1000);
  // The wait stays short (the lease runs meanwhile); the log says the first failure of a run,
  // then a summary at most every 30 s.
  if (const auto said = heartbeatFailures_.failed("heartbeat failed", why, nowNs).say; !said.empty()) note(said);
  reportedRevoked_.clear();
  return out;
}

Membership::Reaction Membership::on_no_answer(const std::string& why, int64_t nowNs) {
  ++counters_.heartbeats;
  const std::string owner = route_.target();
  if (route_.on_failure(nowNs)) {
    ++counters_.ownerFallbacks;
    note("the group's owner pod " + owner + " did not answer (" + why + "); heartbeating " + route_.target() +
         " at once, on a new connection");
    reportedRevoked_.clear();  // reported again in the request that goes now
    return Reaction{false, 0, true};
  }
  // A leave nobody answers: once what was in the handler has drained there is nothing left to hand
  // back (reading stopped at leave()), so after a few tries the member goes without the answer and
  // the coordinator expires it at its lease end, rather than the stop waiting out its timeout.
  if (leaving_ && ++unansweredLeaves_ >= kUnansweredLeaveAttempts) {
    bool draining = false;
    for (const auto& [s, st] : shards_) draining = draining || (!st.dropped && (st.busy || st.inFlight > 0));
    if (!draining) {
      note("leaves without an answer after " + std::to_string(unansweredLeaves_) + " unanswered tries (" + why +
           "): the coordinator expires this member at its lease end");
      leftUnanswered_ = !steppingOut_;
      finish_leave();
    }
  }
  return not_answered(why, nowNs);
}

Membership::Reaction Membership::on_response(const protocol::HeartbeatResponse& r, int64_t sentNs,
                                             const std::string& ownerHeader) {
  ++counters_.heartbeats;
  const bool wasDirect = route_.direct();
  const bool moved = route_.on_answer(ownerHeader, sentNs);
  // Back on the configured URL, or told there that nobody can be named: a new connection, so a
  // Service that keeps connections on their pod (one cut from the store) places it afresh.
  const bool reconnect = (moved && wasDirect && !route_.direct()) ||
                         (r.status == HeartbeatStatus::RETRY && ownerHeader.empty() && !route_.direct());
  if (r.status == HeartbeatStatus::RETRY) {
    auto out = not_answered("RETRY: " + r.message.value_or(""), sentNs);
    out.reconnect = reconnect;
    return out;
  }
  backoffMs_ = 50;
  if (const auto line = heartbeatFailures_.recovered("heartbeats answered", sentNs); !line.empty()) note(line);
  joinRequestId_.clear();  // answered: the next join is a new request
  if (r.status != HeartbeatStatus::UNRELEASED_INSTANCE_ID) instanceRefusedSinceNs_ = 0;
  const auto revoked = std::move(reportedRevoked_);
  reportedRevoked_.clear();
  Reaction out;
  out.answered = true;
  out.reconnect = reconnect;
  // The epoch was refused as never issued: join again. A coordinator that names no field (one
  // older than errorField) cannot say so; a member that fenced itself reads nothing, so joining
  // again costs it nothing and cannot leave it stuck on an epoch no coordinator takes.
  const bool epochRefused = r.status == HeartbeatStatus::INVALID_REQUEST &&
                            (r.errorField ? *r.errorField == "memberEpoch" : selfFenced_);
  switch (r.status) {
    case HeartbeatStatus::OK:
    case HeartbeatStatus::REVOKE_PENDING:
    case HeartbeatStatus::SYNC_METADATA: {
      // A leave's OK grants nothing to read (the member is gone, or was already: a coordinator
      // answers a leave of a member it expired OK too); only REVOKE_PENDING says the coordinator
      // still holds the shards it drains for it.
      const bool grants = !leaving_ || r.status == HeartbeatStatus::REVOKE_PENDING;
      if (grants) lastOkSentNs_ = std::max(lastOkSentNs_, sentNs);
      lastRefusal_.clear();
      if (const auto line = refusals_.recovered("heartbeats accepted", sentNs); !line.empty()) note(line);
      if (r.memberLeaseTtlMs > 0) leaseMs_ = r.memberLeaseTtlMs;
      if (r.heartbeatIntervalMs > 0) intervalMs_ = r.heartbeatIntervalMs;
      metadataVersion_ = std::max(metadataVersion_, r.metadataVersion);
      if (selfFenced_ && grants) {
        selfFenced_ = false;
        event(ShardEvent::Kind::Assigned, owned());
        note("heartbeat answered again: reading resumes");
      }
      for (int32_t s : revoked) {
        auto it = shards_.find(s);
        if (it != shards_.end() && it->second.revoking && !it->second.busy) shards_.erase(it);
      }
      if (leaving_) {
        bool holding = false;
        for (const auto& [s, st] : shards_) holding = holding || !st.dropped;
        if (r.status == HeartbeatStatus::OK && !holding) finish_leave();
        break;
      }
      if (r.memberEpoch > 0) epoch_ = r.memberEpoch;
      if (!r.assignment) break;
      const std::set<int32_t> target(r.assignment->assignedShards.begin(), r.assignment->assignedShards.end());
      std::vector<int32_t> givingUp, taking;
      for (auto& [s, st] : shards_) {
        if (st.revoking || target.count(s)) continue;
        st.revoking = true;  // stop reading it now; REVOKED once drained
        stop_reading(s, st);
        givingUp.push_back(s);
        note("revoking shard " + std::to_string(s));
      }
      if (r.status != HeartbeatStatus::SYNC_METADATA) {  // SYNC_METADATA: start nothing new
        for (int32_t s : target) {
          if (shards_.count(s)) continue;
          shards_[s] = Shard{};
          taking.push_back(s);
          note("takes shard " + std::to_string(s));
        }
      }
      if (!givingUp.empty() || !taking.empty()) wake_ = true;
      event(ShardEvent::Kind::Revoking, std::move(givingUp));
      event(ShardEvent::Kind::Assigned, std::move(taking));
      break;
    }
    case HeartbeatStatus::UNRELEASED_INSTANCE_ID: {
      // Another member id holds this member's instance live. It may be a crashed process whose
      // lease has not ended (then the join goes through once it has): joins go on at the interval.
      // Refused for longer than a lease, the holder is heartbeating: another process of the
      // instance runs, and this one stops for good (Runtime::fatal).
      if (instanceRefusedSinceNs_ == 0) {
        instanceRefusedSinceNs_ = sentNs;
        note("join refused: " + r.message.value_or("instance " + o_.instanceId + " is in use") +
             "; joining again until that member's lease ends");
      }
      const int64_t lease = r.memberLeaseTtlMs > 0 ? r.memberLeaseTtlMs : leaseMs_;
      const int64_t interval = r.heartbeatIntervalMs > 0 ? r.heartbeatIntervalMs : intervalMs_;
      const int64_t refusedMs = (sentNs - instanceRefusedSinceNs_) / 1'000'000;
      if (refusedMs >= lease + 2 * interval + kInstanceGraceMs) {
        fatal_ = "UNRELEASED_INSTANCE_ID: instance " + o_.instanceId + " is still held by another live member after " +
                 std::to_string(refusedMs) + "ms of refused joins: another process of this instance is running (" +
                 r.message.value_or("") + ")";
        note("stops for good: " + fatal_);
        break;
      }
      out.waitMs = interval;
      return out;
    }
    case HeartbeatStatus::FENCED_MEMBER_EPOCH:
    case HeartbeatStatus::UNKNOWN_MEMBER_ID:
    case HeartbeatStatus::INVALID_REQUEST:
      if (r.status == HeartbeatStatus::INVALID_REQUEST && !epochRefused) {
        note("coordinator rejected a heartbeat" + (r.errorField ? " (field " + *r.errorField + ")" : std::string()) +
             ": " + r.message.value_or(""));
        break;
      }
      if (leaving_) {  // nothing left to hand back: the coordinator no longer knows us
        finish_leave();
        break;
      }
      drop_all(std::string(protocol::to_string(r.status)) + (r.message ? ": " + *r.message : ""), sentNs);
      break;
    default: {
      // Nothing changes (the lease runs out unless an answer grants it again): the first refusal of
      // a kind is said, then summaries (a member with a revoked token would say it at every beat).
      const std::string why = std::string(protocol::to_string(r.status)) + ": " + r.message.value_or("");
      if (why != lastRefusal_) {
        refusals_.reset();  // another kind of refusal: said at once
        lastRefusal_ = why;
      }
      if (const auto said = refusals_.failed("heartbeat refused", why, sentNs).say; !said.empty()) note(said);
      break;
    }
  }
  out.waitMs = take_wake() ? 0 : intervalMs_;
  return out;
}

void Membership::on_notification() {
  ++counters_.notifications;
  wake_ = true;
}

void Membership::leave() {
  if (leaving_) {
    steppingOut_ = false;  // the user's leave: it ends as one, not with a join
    return;
  }
  // Never joined (or out since it handed its shards back, or fenced with no join sent since):
  // nothing to hand back, and the coordinator holds nothing for this member.
  if (epoch_ == 0 && joinRequestId_.empty() && shards_.empty()) {
    leaving_ = true;
    left_ = true;
    out_ = false;
    note("leaves: it holds nothing and no join of it is outstanding");
    return;
  }
  leaving_ = true;
  event(ShardEvent::Kind::Revoking, owned());
  for (auto& [s, st] : shards_) {
    st.revoking = true;
    stop_reading(s, st);
  }
  wake_ = true;
  note("leaving: draining and handing every shard back");
}

void Membership::finish_leave() {
  if (!steppingOut_) {
    left_ = true;
    return;
  }
  // Stepped out: a member again once Redis answers, with a new join (its shards are gone).
  steppingOut_ = false;
  leaving_ = false;
  out_ = true;
  epoch_ = 0;
  lastOkSentNs_ = 0;
  unansweredLeaves_ = 0;
  for (auto it = shards_.begin(); it != shards_.end();) {
    if (it->second.busy) {
      it->second.dropped = true;
      ++it;
    } else {
      it = shards_.erase(it);
    }
  }
  note("handed every shard back; joins again once Redis answers");
}

// ---- the data plane's health -------------------------------------------------------------

bool Membership::must_probe() const {
  return o_.checkDataPlane && !dataPlaneOk_ && epoch_ == 0 && !leaving_ && !left_ && fatal_.empty();
}

int64_t Membership::data_plane_failed(const std::string& why, int64_t nowNs, int64_t sentNs) {
  dataPlaneOk_ = false;
  const bool joined = epoch_ > 0 && !leaving_;
  const int64_t since = sentNs > 0 ? std::min(sentNs, nowNs) : nowNs;
  if (!dataPlane_.failing() || since < dataFailingSinceNs_) dataFailingSinceNs_ = since;
  dataFailingWhy_ = why;
  const auto step = dataPlane_.failed(joined ? "cannot read the shards from Redis" : "does not join: cannot reach Redis", why, nowNs);
  if (!step.say.empty()) note(step.say);
  step_out_if_silent(nowNs);
  return step.waitMs;
}

void Membership::step_out_if_silent(int64_t nowNs) {
  if (!o_.checkDataPlane || !dataPlane_.failing() || dataPlaneOk_ || epoch_ <= 0 || leaving_ || owned().empty()) return;
  const int64_t failingMs = (nowNs - dataFailingSinceNs_) / 1'000'000;
  if (failingMs < leaseMs_) return;
  note("Redis has failed for " + std::to_string(failingMs) + " ms, a whole lease, with no call answered (the latest: " +
       dataFailingWhy_ + "): hands its shards back to members that can read them, and joins again once Redis answers");
  leave();
  steppingOut_ = true;
}

void Membership::data_plane_ok(int64_t nowNs) {
  dataPlaneOk_ = true;
  out_ = false;
  const std::string line = dataPlane_.recovered("Redis answers", nowNs);
  if (!line.empty()) note(line);
}

// ---- data plane --------------------------------------------------------------------------

Membership::Lease Membership::take_shards(int worker, int64_t nowNs) {
  Lease l;
  l.deadlineNs = deadline_ns();
  if (nowNs < l.deadlineNs) {
    for (auto& [s, st] : shards_) {
      if (st.revoking || st.dropped || st.busy || s % o_.concurrency != worker) continue;
      if (st.retryAtNs > nowNs) {  // a failed record's backoff: nothing later on it is read meanwhile
        if (l.retryAtNs == 0 || st.retryAtNs < l.retryAtNs) l.retryAtNs = st.retryAtNs;
        continue;
      }
      st.retryAtNs = 0;
      st.busy = true;
      l.shards.push_back(s);
      if (st.needsClaim) l.toClaim.push_back(s);
    }
    if (!l.shards.empty()) ++busyWorkers_;
  } else if (lastOkSentNs_ != 0 && !selfFenced_) {
    self_fence();
  }
  return l;
}

int64_t Membership::block_ms(const Lease& l, int64_t nowNs, int64_t capMs) {
  const int64_t leftMs = (l.deadlineNs - nowNs) / 1'000'000 - 20;
  const int64_t untilRetryMs = l.retryAtNs != 0 ? std::max<int64_t>(1, (l.retryAtNs - nowNs) / 1'000'000) : capMs;
  return std::min({capMs, leftMs, untilRetryMs});
}

std::optional<int64_t> Membership::begin_record(int32_t shard, int64_t nowNs) {
  auto it = shards_.find(shard);
  if (it == shards_.end() || it->second.revoking || it->second.dropped) return std::nullopt;
  if (nowNs >= deadline_ns()) {
    it->second.needsClaim = true;
    if (!selfFenced_) self_fence();
    return std::nullopt;
  }
  ++it->second.inFlight;
  return nowNs;  // the start time is the time the check used
}

std::size_t Membership::not_started(int32_t shard, std::size_t n, int64_t nowNs) {
  auto it = shards_.find(shard);
  const bool safe = it != shards_.end() && !it->second.dropped && nowNs < deadline_ns();  // revoking, then
  if (safe) return 0;
  counters_.leftAfterLoss += static_cast<int64_t>(n);
  return n;
}

bool Membership::record_done(int32_t shard, const std::string& id, bool acked) {
  ++counters_.processed;
  auto it = shards_.find(shard);
  if (it == shards_.end()) return false;
  --it->second.inFlight;
  it->second.lastDeliveredId = id;
  if (!acked) it->second.needsClaim = true;  // the claim re-reads our pending entries in id order
  return acked;
}

void Membership::record_failed(int32_t shard, int64_t nowNs, int64_t retryInMs) {
  ++counters_.failedAttempts;
  auto it = shards_.find(shard);
  if (it == shards_.end()) return;
  --it->second.inFlight;
  it->second.needsClaim = true;
  if (retryInMs > 0) {
    ++counters_.retried;
    it->second.retryAtNs = nowNs + retryInMs * 1'000'000;
  }
}

bool Membership::record_dead_lettered(int32_t shard, const std::string& id, bool attempted) {
  ++counters_.deadLettered;
  if (attempted) ++counters_.failedAttempts;
  return record_done(shard, id, true);
}

FailureVerdict judge_failure(int64_t deliveries, bool now, const RetryPolicy& p) {
  if (now || deliveries >= p.maxDeliveries) return {true, 0};
  int64_t wait = std::max<int64_t>(1, p.backoffMs);
  for (int64_t d = 1; d < deliveries && wait < p.backoffMaxMs; ++d) wait *= 2;
  return {false, std::min(wait, std::max<int64_t>(1, p.backoffMaxMs))};
}

bool cannot_read(bool lost, const std::string& error) {
  if (lost) return true;
  for (const char* p : {"NOAUTH", "WRONGPASS", "NOPERM"})
    if (error.rfind(p, 0) == 0) return true;
  return false;
}

bool over_deliveries(int64_t deliveries, const RetryPolicy& p) { return deliveries > p.maxDeliveries; }

bool Membership::stream_missing(int32_t shard, int64_t nowNs) {
  auto it = shards_.find(shard);
  if (it == shards_.end()) return false;
  it->second.needsClaim = true;
  it->second.retryAtNs = nowNs + kMissingStreamRetryMs * 1'000'000;
  const bool first = !it->second.missing;
  it->second.missing = true;
  return first;
}

void Membership::claimed(int32_t shard) {
  if (auto it = shards_.find(shard); it != shards_.end()) {
    it->second.needsClaim = false;
    it->second.missing = false;
  }
}

void Membership::needs_claim(int32_t shard) {
  if (auto it = shards_.find(shard); it != shards_.end()) it->second.needsClaim = true;
}

void Membership::release(const std::vector<int32_t>& held) {
  if (held.empty()) return;
  for (int32_t s : held) {
    auto it = shards_.find(s);
    if (it == shards_.end()) continue;
    it->second.busy = false;
    if (it->second.dropped && it->second.inFlight == 0) {
      shards_.erase(it);
    } else if (it->second.revoking && it->second.inFlight == 0) {
      wake_ = true;  // drained: report REVOKED at once
    }
  }
  --busyWorkers_;
}

std::vector<int> Membership::take_interrupts() {
  std::vector<int> out(interrupts_.begin(), interrupts_.end());
  interrupts_.clear();
  counters_.readInterrupts += static_cast<int64_t>(out.size());
  return out;
}

std::vector<int32_t> Membership::progress_due(const std::vector<int32_t>& held, int64_t nowNs) {
  std::vector<int32_t> out;
  for (int32_t s : held) {
    auto it = shards_.find(s);
    if (it == shards_.end() || nowNs - it->second.infoAtNs < 1'000'000'000) continue;
    it->second.infoAtNs = nowNs;
    out.push_back(s);
  }
  return out;
}

void Membership::set_progress(int32_t shard, std::optional<int64_t> pending, std::optional<int64_t> lag) {
  if (auto it = shards_.find(shard); it != shards_.end()) {
    it->second.pending = pending;
    it->second.lag = lag;
  }
}

}  // namespace rsc::member
