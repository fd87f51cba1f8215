#include "group/cached_group.hpp"

#include <algorithm>
#include <utility>

#include "group/notify.hpp"
#include "protocol/codec.hpp"

namespace rsc::group {
namespace {

using protocol::HeartbeatStatus;

// Answers that say "you are not who you think" must not come from a copy that was not just read:
// another pod may have moved the member on. A write validates the copy through its CAS.
bool needs_fresh_state(const protocol::HeartbeatResponse& r, const Delta& d) {
  if (!d.empty()) return false;
  return r.status == HeartbeatStatus::UNKNOWN_MEMBER_ID || r.status == HeartbeatStatus::FENCED_MEMBER_EPOCH ||
         r.status == HeartbeatStatus::UNRELEASED_INSTANCE_ID ||
         r.status == HeartbeatStatus::INVALID_REQUEST || r.memberEpoch < 0;  // a leave (-1, or -2 coming back)
}

}  // namespace

std::optional<std::string> contended(int& attempts, int maxAttempts, const std::string& groupKey) {
  if (++attempts < maxAttempts) return std::nullopt;
  return "group " + groupKey + " is contended: " + std::to_string(attempts) +
         " attempts lost to writes of other pods; try again";
}

Outcome fence_live_members(GroupState g, const std::string& reason, const Config& cfg, Millis now) {
  Outcome o{std::move(g), {}, {}};
  std::vector<std::string> live;
  for (const auto& [id, m] : o.state.members)
    if (m.live()) live.push_back(id);
  for (const auto& id : live) {
    auto f = fence_member(std::move(o.state), id, reason, cfg, now);
    o.state = std::move(f.state);
    o.delta.merge(std::move(f.delta));
    for (auto& e : f.events) o.events.push_back(std::move(e));
  }
  return o;
}

Next CachedGroup::next(Ticket& front, Millis now, bool synced) {
  if (!synced) return Next::NotSynced;
  switch (front.kind) {
    case WorkKind::Tick: return front.attempts > 0 && g_ ? Next::Step : Next::Lease;  // a lost race is redone on the fresh copy
    case WorkKind::Describe: return Next::Describe;
    case WorkKind::Delete:
    case WorkKind::ResetOffsets:
      if (!front.verified) {  // judged on a fresh read only
        front.verified = true;
        g_.reset();
        return Next::Load;
      }
      break;
    default: break;
  }
  // A group copied before its stream existed is read again (creating the stream) for a join;
  // once: a stream scaled to zero shards has none after the read too, and the join is decided.
  if (g_ && g_->shardCount == 0 && front.join && !front.verified) {
    front.verified = true;
    g_.reset();
  }
  if (front.kind == WorkKind::Heartbeat && request_too_old(front.arrivedMs, now, *cfg_)) return Next::TooOld;
  return g_ ? Next::Step : Next::Load;
}

void CachedGroup::merge(Outcome&& o) {
  g_ = std::move(o.state);
  copyCounts_.reset();
  pending_.merge(std::move(o.delta));
  for (auto& e : o.events) pendingEvents_.push_back(std::move(e));
}

std::optional<Rollback> CachedGroup::adopt(Loaded&& l, const std::optional<protocol::StreamMetadata>& stream,
                                           Millis now) {
  storedDeadline_ = next_deadline(l.state, *cfg_);
  g_ = std::move(l.state);
  copyCounts_.reset();
  exists_ = l.exists;
  pending_ = {};
  pendingEvents_.clear();
  std::optional<Rollback> news;
  if (l.rollback.detected) {
    news = l.rollback;
    rollbackSeenEpoch_ = std::max(rollbackSeenEpoch_.value_or(0), l.rollback.seenGroupEpoch);
  }
  if (rollbackSeenEpoch_ && g_->groupEpoch <= *rollbackSeenEpoch_)
    merge(recover_from_rollback(std::move(*g_), *rollbackSeenEpoch_, *cfg_, now));
  stream_read(stream, now);
  return news;
}

void CachedGroup::stream_read(const std::optional<protocol::StreamMetadata>& stream, Millis now) {
  if (g_ && stream && stream->metadataVersion > g_->metadataVersion)
    merge(apply_metadata(std::move(*g_), stream->readShardCount(), stream->metadataVersion, *cfg_, now, &stream->shardRacks));
}

void CachedGroup::confirm(uint64_t call, const PodView& view, Millis local) {
  copy_.confirmed_by(call);
  copyTerm_ = view.owns(key_, local) ? view.term : 0;
}

bool CachedGroup::copy_answers(uint64_t arrival, const PodView& view, Millis local) const {
  // The owner that confirmed its copy in the current term knows no other pod wrote it since.
  if (copyTerm_ != 0 && copyTerm_ == view.term && view.owns(key_, local)) return true;
  return copy_.may_answer(arrival);
}

void CachedGroup::begin_step(WorkKind kind) {
  if (kind != WorkKind::Heartbeat) justLoaded_ = false;
  // What the members' to-dos depend on, taken before the step consumes the copy. Not known when
  // adopting a loaded state changed it: then every member with something to do is told.
  // A copy this pod wrote itself (or answered from) has its counts from that step.
  shapeBefore_.reset();
  countsBefore_.reset();
  stepCounts_.reset();
  auto known = std::move(copyCounts_);
  copyCounts_.reset();
  if (g_ && pending_.empty()) {
    countsBefore_ = known ? std::move(known) : walk(*g_);
    shapeBefore_ = countsBefore_->shape;
  }
}

CachedGroup::Counts CachedGroup::walk(const GroupState& g) {
  ++walks_;
  return std::make_unique<GroupCounts>(count_group(g));
}

namespace {
// The delta changed no member but `id`.
bool only_member(const Delta& d, const std::string& id) {
  for (const auto& n : d.upserted)
    if (n != id) return false;
  for (const auto& n : d.removed)
    if (n != id) return false;
  return true;
}
}  // namespace

std::optional<protocol::HeartbeatResponse> CachedGroup::refuse_over_limit(const Ticket& t,
                                                                          const protocol::HeartbeatRequest& req,
                                                                          int64_t maxGroupsPerStream,
                                                                          const std::string& stream,
                                                                          const protocol::Timings& timings) {
  if (exists_ || !t.join || !groupsInStream_) return std::nullopt;
  auto why = refuse_new_group(static_cast<std::size_t>(*groupsInStream_), maxGroupsPerStream, stream);
  if (!why) return std::nullopt;
  g_.reset();  // counted again at the next join
  pending_ = {};
  pendingEvents_.clear();
  return protocol::refusal(req.requestId, req.memberId, HeartbeatStatus::INVALID_REQUEST, *why, timings,
                           "consumerGroup");
}

std::optional<std::string> CachedGroup::refuse_new(int64_t maxGroupsPerStream, const std::string& stream) const {
  if (exists_ || !groupsInStream_) return std::nullopt;
  return refuse_new_group(static_cast<std::size_t>(*groupsInStream_), maxGroupsPerStream, stream);
}

CachedGroup::Batch::Batch(CachedGroup& c, const TimeView& tv, int64_t maxGroupsPerStream)
    : c_(c), now_(tv.now), fresh_(c.justLoaded_), limitApplies_(!c.exists_ && maxGroupsPerStream > 0) {
  c.justLoaded_ = false;
  total_ = tick(std::move(*c.g_), *c.cfg_, tv);
  // The tick changed no member (nobody expired): the counts are the copy's, kept beat by beat.
  if (c.exists_ && c.countsBefore_ && total_.delta.upserted.empty() && total_.delta.removed.empty())
    counts_ = std::move(c.countsBefore_);
}

CachedGroup::Batch::Beat CachedGroup::Batch::add(Ticket& t, const protocol::HeartbeatRequest& req) {
  const auto before = counts_ ? member_part(total_.state, req.memberId) : MemberPart{};
  auto hb = heartbeat(std::move(total_.state), req, *c_.cfg_, now_);
  total_.state = std::move(hb.state);
  if (counts_) {
    if (only_member(hb.delta, req.memberId)) {
      const auto after = member_part(total_.state, req.memberId);
      counts_->shape.memberSum += after.shape - before.shape;  // mod 2^64
      counts_->totals -= before.totals;
      counts_->totals += after.totals;
    } else {
      counts_.reset();  // the beat changed others too (a join's new targets): counted whole
    }
  }
  Beat b;
  b.unwritten = hb.leaseRenewalDeferred;
  b.response = std::move(hb.response);
  if (needs_fresh_state(b.response, hb.delta)) {
    if (!t.verified && !fresh_) {
      t.verified = true;
      stop_ = true;
      dropCopy_ = batched_ == 0;  // nothing computed yet worth keeping: read the store, then decide
      b.fate = Fate::Recheck;
      return b;
    }
    b.fate = Fate::Answered;
    return b;
  }
  total_.delta.merge(std::move(hb.delta));
  for (auto& e : hb.events) total_.events.push_back(std::move(e));
  ++batched_;
  return b;
}

bool CachedGroup::Batch::takes(const Ticket* next) const {
  return !stop_ && batched_ < kMaxBatch && next != nullptr && next->kind == WorkKind::Heartbeat &&
         !(limitApplies_ && next->join) && !request_too_old(next->arrivedMs, now_, *c_.cfg_);
}

std::optional<Outcome> CachedGroup::Batch::finish() {
  if (dropCopy_ || (batched_ == 0 && !c_.exists_)) {
    c_.g_.reset();
    c_.pending_ = {};
    c_.pendingEvents_.clear();
    c_.stepCounts_.reset();
    return std::nullopt;
  }
  if (counts_) {
    counts_->shape.assignmentEpoch = total_.state.assignmentEpoch;
    counts_->shape.members = total_.state.members.size();
  }
  c_.stepCounts_ = std::move(counts_);
  return std::move(total_);
}

Prepared CachedGroup::prepare(Outcome&& o) {
  if (!pending_.empty()) {  // what came before this step, then the step's changes over it
    stepCounts_.reset();    // (never counted beat by beat: the counts before the step were not known)
    Delta total = std::move(pending_);
    total.merge(std::move(o.delta));
    o.delta = std::move(total);
  }
  Prepared p;
  p.events = std::move(pendingEvents_);
  for (auto& e : o.events) p.events.push_back(std::move(e));
  o.events.clear();
  pending_ = {};
  pendingEvents_.clear();
  p.outcome = std::move(o);
  p.provision = provisioning_due(p.outcome.state, p.events);
  return p;
}

void CachedGroup::provisioned(Prepared& p, int32_t count) {
  p.outcome.state.provisionedShards = count;
  p.outcome.delta.group = true;
  p.provision.reset();
}

WritePlan CachedGroup::plan_write(Prepared&& p, std::optional<uint64_t> oldestArrival, const PodView& view,
                                  Millis local, const std::function<std::set<std::string>()>& answered) {
  WritePlan w;
  auto& o = p.outcome;
  auto counted = std::move(stepCounts_);  // provisioning changes no count
  stepCounts_.reset();
  countsBefore_.reset();
  if (p.provision) w.provision = *p.provision, provisioned(p, *p.provision);
  const bool check = o.delta.empty() && oldestArrival && !copy_answers(*oldestArrival, view, local);
  if (o.delta.empty() && !check) {
    g_ = std::move(o.state);
    copyCounts_ = std::move(counted);  // the next step starts from them
    return w;  // FromCopy
  }
  // Only the group's owner writes it: an owner answering from its copy would not see another
  // pod's change. A pod about to own it holds the work until it does.
  if (!check && !view.owns(key_, local)) {
    drop();
    if (view.owns_soon(key_, local, kOwnsSoonMs)) {
      w.kind = WritePlan::Kind::Hold;
      w.holdMs = std::max<Millis>(1, view.writableFrom - local + 1);
    } else {
      w.kind = WritePlan::Kind::Refuse;
      w.why = view.why_not_serving(key_, local);
    }
    return w;
  }
  w.kind = check ? WritePlan::Kind::Check : WritePlan::Kind::Write;
  w.expectedRevision = o.state.storeRevision;
  // The deadline index must never be later than the stored state's next deadline.
  const auto after = next_deadline(o.state, *cfg_);
  if (!check && after && (!exists_ || !storedDeadline_ || *after < *storedDeadline_)) w.lowerDeadlineTo = *after;
  w.next = std::make_shared<GroupState>(std::move(o.state));
  if (exists_) w.delta = std::make_shared<Delta>(std::move(o.delta));
  // A steady heartbeat changes nothing anyone waits for; a changed shape may give others work.
  const auto before = std::exchange(shapeBefore_, std::nullopt);
  writingCounts_.reset();
  if (!check) writingCounts_ = counted ? std::move(counted) : walk(*w.next);
  if (!check && (!before || *before != writingCounts_->shape))
    w.wake = members_to_wake(nullptr, *w.next, answered ? answered() : std::set<std::string>{});
  w.events = std::move(p.events);
  g_.reset();  // the copy is the write in flight until the store says so
  writing_ = w.next;
  writingCheck_ = check;
  writingDeadline_ = after;
  return w;
}

Stored CachedGroup::written(int64_t revision, uint64_t call, const PodView& view, Millis local) {
  auto next = std::move(writing_);
  // Stored, but this pod's window closed meanwhile: another pod may already answer alone from a
  // copy without it. Nobody is told of it; the members ask again.
  if (!writingCheck_ && !view.owns(key_, local)) {
    drop();
    return Stored::Lapsed;
  }
  g_ = std::move(*next);
  g_->storeRevision = revision;
  confirm(call, view, local);
  if (writingCheck_) return Stored::Current;
  exists_ = true;
  storedDeadline_ = writingDeadline_;
  copyCounts_ = std::move(writingCounts_);
  writingCounts_.reset();
  rollbackSeenEpoch_.reset();
  return Stored::Written;
}

Stored CachedGroup::deleted(const PodView& view, Millis local) {
  if (!view.owns(key_, local)) {  // deleted, but told to nobody: a pod answering alone may not have seen it
    drop();
    return Stored::Lapsed;
  }
  drop();
  exists_ = false;
  return Stored::Written;
}

std::optional<Rollback> CachedGroup::lost_race(std::optional<GroupState>&& current, const Rollback& rollback,
                                               uint64_t call, const PodView& view, Millis local, Millis now) {
  writing_.reset();
  if (!current) {
    g_.reset();
    return std::nullopt;
  }
  auto news = adopt(Loaded{true, std::move(*current), rollback}, std::nullopt, now);
  confirm(call, view, local);
  return news;
}

std::vector<Millis> CachedGroup::handovers_done(const std::vector<Event>& events, Millis now) {
  std::vector<Millis> done;
  for (const auto& e : events) {
    if (e.kind == Event::Kind::REVOKE_REQUESTED) {
      revokeStarted_.emplace(e.member, now);
    } else if (e.kind == Event::Kind::REVOKE_ACKED) {
      auto it = revokeStarted_.find(e.member);
      if (it == revokeStarted_.end() || !g_) continue;
      // Done when the member revokes nothing more (or is gone).
      auto m = g_->members.find(e.member);
      if (m != g_->members.end() && !m->second.revoking.empty()) continue;
      done.push_back(now - it->second);
      revokeStarted_.erase(it);
    }
  }
  return done;
}

std::optional<Millis> CachedGroup::index_deadline(const TimeView& tv) const {
  if (!g_ || !exists_) return std::nullopt;
  return next_deadline(*g_, *cfg_, tv.expiryHeldUntil);
}

std::optional<std::string> CachedGroup::why_not_writing(const PodView& view, Millis local) const {
  if (view.owns(key_, local)) return std::nullopt;
  return view.why_not_serving(key_, local);
}

void CachedGroup::drop() {
  g_.reset();
  copyCounts_.reset();
  stepCounts_.reset();
  copyTerm_ = 0;
  storedDeadline_.reset();
  writing_.reset();
}

void CachedGroup::forget() {
  drop();
  copy_.forget();
  pending_ = {};
  pendingEvents_.clear();
}

}  // namespace rsc::group
