// The group actor: a thin shell around the pure core. It serializes one group's heartbeats,
// deadline work and admin calls in its mailbox, keeps the group's state cached, and writes every
// change through the store's CAS with at most one write in flight. It never blocks: store calls
// are requests whose answers come back as messages, and work that arrives meanwhile waits in a
// queue. It has no timer of its own but the one that retires it when idle: its deadline work is
// started by the pod (actors/pod_actor.cpp) when the store's deadline index says it is due.
#include <chrono>
#include <list>
#include <limits>
#include <tuple>

#include "actors/actors.hpp"
#include "log/log.hpp"
#include "group/coordinator.hpp"
#include "group/describe.hpp"
#include "group/freshness.hpp"
#include "group/notify.hpp"
#include "group/time_rules.hpp"
#include "protocol/codec.hpp"

namespace rsc::actors {
namespace {

using SteadyClock = std::chrono::steady_clock;
// Heartbeats of one group written together in one CAS, at most.
constexpr std::size_t kMaxBatch = 64;
using protocol::HeartbeatStatus;

struct Work {
  enum class Kind { Heartbeat, Tick, Describe, Remove, Metadata, Delete };
  Kind kind = Kind::Tick;
  HeartbeatCall hb;
  DescribeCall describe;
  RemoveCall remove;
  DeleteCall del;
  bool deadlineWork = false;  // a Tick started by the deadline index: ends by updating it
  protocol::StreamMetadata meta;
  int attempts = 0;
  SteadyClock::time_point arrived = SteadyClock::now();  // for the latency metric
  group::Millis arrivedMs = 0;                            // on the coordinator's clock
  uint64_t arrival = 0;  // group::CopyConfirmation::arrival() when it arrived
  bool verified = false;  // an error answer is given only from a state just read from the store
  // Filled by the step, delivered once the write is stored.
  protocol::HeartbeatResponse response;
  bool unwritten = false;  // the core deferred this member's lease renewal (counted when answered)
  bool removed = false;
};
using WorkPtr = std::shared_ptr<Work>;

struct GroupActorState {
  store::GroupKey key;
  std::string keyStr;  // key.str(), asked for on every answer
  // Shared by every group actor of the gateway (one copy per group held was 220 bytes and a few
  // allocations more per group).
  std::shared_ptr<const GroupActorConfig> cfg;
  caf::actor store;
  caf::actor gateway;  // asked before this actor retires
  std::optional<group::GroupState> g;  // nullopt: load before use
  bool exists = false;
  group::Delta pending;  // changes made when adopting a loaded state, written with the next step
  std::vector<group::Event> pendingEvents;
  bool busy = false;  // a load, lease or write is in flight
  bool justLoaded = false;  // the cache was read from the store for the step about to run
  std::list<WorkPtr> queue;  // a deque allocates 576 bytes even empty: one per group held
  bool tickQueued = false;
  // What the store's past demands, re-applied to every state adopted until a write carries it.
  std::optional<int32_t> rollbackSeenEpoch;
  // The next deadline of the state at the cached revision (what the deadline index holds, or
  // earlier): a write that brings it earlier lowers the index.
  std::optional<group::Millis> storedDeadline;
  std::optional<int64_t> groupsInStream;  // for a group that does not exist: from its last load
  std::map<std::string, group::Millis> revokeStarted;
  group::RecentEvents recent;  // what this pod saw happen, for describe
  // Retirement: an idle actor leaves memory.
  group::Millis lastActivity = 0;
  bool retireTimer = false;
  bool retiring = false;  // the gateway forgot this actor: finish what is queued, then quit
  // Store calls numbered, and which of them confirmed the cached copy (group/freshness.hpp).
  group::CopyConfirmation copy;
  // The pod's term (group/pod_authority.hpp) in which a store call confirmed the copy while the
  // pod was the only one writing groups; 0: not confirmed so.
  uint64_t copyTerm = 0;
  // The store request in flight (0: none) and the watchdog that gives it up; the number of the
  // call whose reply is being handled (what a reply confirms, group/freshness.hpp).
  uint64_t asking = 0;
  uint64_t replying = 0;
  group::Millis askedAt = 0;  // on the pod's local clock (a fake one in tests)
  std::function<void()> giveUp;
  bool watchdog = false;
  std::optional<uint64_t> shapeBefore;  // group::shape_signature of the cache the step started from
};

using Self = caf::stateful_actor<GroupActorState>*;

void pump(Self self);
void arm_watchdog(Self self, group::Millis in);

// A store request without CAF's per-request timeout (a clock entry per request wakes CAF's clock
// thread once per heartbeat): the actor's watchdog gives the request up after the store deadline
// (it then gets the error half, as for a timeout), and a reply that comes after that is dropped.
// At most one request is in flight per group actor.
// While onReply runs, state.replying is the call's number (group::CopyConfirmation).
template <class Reply, class Args, class OnReply, class OnError>
void ask_store(Self self, Args args, OnReply onReply, OnError onError) {
  auto& st = self->state;
  const uint64_t seq = st.copy.next_call();
  st.asking = seq;
  st.askedAt = st.cfg->pod->local_now();
  st.giveUp = [onError]() mutable {
    caf::error e = caf::make_error(caf::sec::request_timeout);
    onError(e);
  };
  arm_watchdog(self, st.cfg->storeDeadlineMs);
  std::apply([&](auto&&... xs) { return self->request(st.store, caf::infinite, std::forward<decltype(xs)>(xs)...); },
             std::move(args))
      .then(
          [=](Reply& r) mutable {
            if (self->state.asking != seq) return;  // given up already
            self->state.asking = 0;
            self->state.giveUp = nullptr;
            self->state.replying = seq;
            onReply(r);
          },
          [=](caf::error& e) mutable {
            if (self->state.asking != seq) return;
            self->state.asking = 0;
            self->state.giveUp = nullptr;
            onError(e);
          });
}

// What an operator reads when a store request failed in the actor system rather than in Redis.
std::string store_actor_error(Self self, const caf::error& err) {
  if (err == caf::sec::request_timeout)
    return "the store did not answer within " + std::to_string(self->state.cfg->storeDeadlineMs) + "ms";
  return "store actor: " + self->system().render(err);
}

bool is_join(const Work& w) { return w.kind == Work::Kind::Heartbeat && w.hb.req.memberEpoch == 0; }

// Answers that say "you are not who you think" must not come from a stale cache: another pod
// may have moved the member on.
bool needs_fresh_state(const protocol::HeartbeatResponse& r, const group::Delta& d) {
  if (!d.empty()) return false;  // a write validates the cache through the CAS
  return r.status == HeartbeatStatus::UNKNOWN_MEMBER_ID || r.status == HeartbeatStatus::FENCED_MEMBER_EPOCH ||
         r.status == HeartbeatStatus::INVALID_REQUEST || r.memberEpoch == -1;
}

group::Millis now(Self self) { return self->state.cfg->pod->now(); }
group::TimeView time_view(Self self) { return self->state.cfg->pod->time_view(self->state.cfg->core); }
SteadyTime give_up_at(Self self) { return SteadyClock::now() + std::chrono::milliseconds(self->state.cfg->storeDeadlineMs); }

// What this pod may do with the group now (group/pod_authority.hpp): only the group's owner
// writes it, and the owner answers from its copy once confirmed in the current term.
struct Powers {
  std::shared_ptr<const group::PodView> view;
  group::Millis local = 0;
  bool owner = false;
  bool may_write() const { return owner; }
  // Why a write is not made, for the RETRY answer.
  std::string why_not(const std::string& key) const {
    if (local < view->writableFrom)
      return "this coordinator pod registered among others and serves no group for " +
             std::to_string(view->writableFrom - local) + "ms more, until every pod has seen it";
    if (!view->may_write(local))
      return "this coordinator pod's registration has lapsed (the store did not take its last beats)";
    const auto* o = view->owner(key, local);
    return "group " + key + " is served by pod " + (o ? o->id : std::string("(none)")) + " now; try again";
  }
};
Powers powers(Self self) {
  const auto& pod = self->state.cfg->pod;
  Powers p{pod->pod_view(), pod->local_now()};
  p.owner = p.view->owns(self->state.keyStr, p.local);
  return p;
}

// The store call being handled read or wrote exactly the copy now held.
void confirm(Self self) {
  auto& st = self->state;
  st.copy.confirmed_by(st.replying);
  const auto p = powers(self);
  st.copyTerm = p.owner ? p.view->term : 0;
}

// Whether the copy answers a call as it is: the group's owner that confirmed its copy in the
// current term knows no other pod wrote it since; otherwise a call made after the work arrived
// must have confirmed it (group/freshness.hpp).
bool copy_answers(Self self, const Powers& p, uint64_t arrival) {
  const auto& st = self->state;
  if (st.copyTerm != 0 && st.copyTerm == p.view->term && p.owner) return true;
  return st.copy.may_answer(arrival);
}

protocol::Timings timings(Self self) {
  const auto& c = self->state.cfg->core;
  return {c.heartbeatIntervalMs, c.rebalanceTimeoutMs, c.memberLeaseTtlMs};
}

protocol::HeartbeatResponse retry_response(Self self, const protocol::HeartbeatRequest& req, const std::string& why) {
  return protocol::refusal(req.requestId, req.memberId, HeartbeatStatus::RETRY, why, timings(self), {}, req.memberEpoch);
}

void finish(Self self, const WorkPtr& w) {
  auto& m = self->state.cfg->metrics;
  switch (w->kind) {
    case Work::Kind::Heartbeat:
      if (m) {
        m->heartbeat(w->response.status,
                     std::chrono::duration<double>(SteadyClock::now() - w->arrived).count());
        if (w->unwritten) m->heartbeats_unwritten(1);
      }
      w->hb.done(std::move(w->response));
      break;
    case Work::Kind::Remove: w->remove.done(store::Result<bool>::success(w->removed)); break;
    default: break;
  }
}

// The store could not answer: every waiting call is answered (RETRY or an error) rather than
// left hanging, and the cached state is dropped (it may be ahead of or behind the store).
void fail(Self self, const WorkPtr& w, const store::Error& e) {
  switch (w->kind) {
    case Work::Kind::Heartbeat: {
      w->response = retry_response(self, w->hb.req, e.message);
      finish(self, w);
      break;
    }
    case Work::Kind::Describe: w->describe.done(store::Result<std::optional<std::string>>::failure(e)); break;
    case Work::Kind::Remove: w->remove.done(store::Result<bool>::failure(e)); break;
    case Work::Kind::Delete: w->del.done(store::Result<store::GroupDeletion>::failure(e)); break;
    default: break;
  }
}

void store_failed(Self self, const store::Error& e) {
  auto& st = self->state;
  if (st.cfg->metrics) st.cfg->metrics->store_error(store::to_string(e.kind));
  // An unreachable store is the pod's news (actors/pod_context.cpp logs it once); other errors
  // are this group's.
  if (e.kind != store::ErrorKind::Retryable)
    log::error("group " + st.key.str() + ": store error (" + store::to_string(e.kind) + "): " + e.message);
  st.g.reset();
  st.copy.forget();
  st.copyTerm = 0;
  st.storedDeadline.reset();
  st.pending = {};
  st.pendingEvents.clear();
  auto waiting = std::move(st.queue);
  st.queue.clear();
  st.tickQueued = false;
  const store::Error answer{e.kind, "coordinator store unavailable: " + e.message};
  for (auto& w : waiting) fail(self, w, answer);
}

void merge(Self self, group::Outcome&& o) {
  auto& st = self->state;
  st.g = std::move(o.state);
  st.pending.merge(o.delta);
  for (auto& e : o.events) st.pendingEvents.push_back(std::move(e));
}

// A state read from the store becomes the cache; what the store's past demands (a rollback, an
// outage just ended, a grown stream) is applied at once and written with the next step.
void adopt(Self self, store::Loaded&& l, const std::optional<protocol::StreamMetadata>& stream) {
  auto& st = self->state;
  const auto t = now(self);
  st.storedDeadline = group::next_deadline(l.state, st.cfg->core);
  st.g = std::move(l.state);
  st.exists = l.exists;
  st.pending = {};
  st.pendingEvents.clear();
  if (l.rollback.detected) {
    if (st.cfg->metrics) st.cfg->metrics->rollback_detected();
    log::error("group " + st.key.str() + ": storeRevision went back from " + std::to_string(l.rollback.seenRevision) +
               " to " + std::to_string(st.g->storeRevision) + "; fencing epochs the store does not know");
    st.rollbackSeenEpoch = std::max(st.rollbackSeenEpoch.value_or(0), l.rollback.seenGroupEpoch);
  }
  if (st.rollbackSeenEpoch && st.g->groupEpoch <= *st.rollbackSeenEpoch)
    merge(self, group::recover_from_rollback(std::move(*st.g), *st.rollbackSeenEpoch, st.cfg->core, t));
  if (stream && stream->metadataVersion > st.g->metadataVersion)
    merge(self, group::apply_metadata(std::move(*st.g), stream->shardCount, stream->metadataVersion, st.cfg->core, t));
}

void log_and_measure(Self self, const std::vector<group::Event>& events, const group::GroupState& g, double computeSeconds) {
  auto& st = self->state;
  auto* m = st.cfg->metrics.get();
  const auto t = now(self);
  st.recent.record(events, g.groupEpoch, t);
  for (const auto& e : events) {
    using K = group::Event::Kind;
    if (st.cfg->logEvents) log::info("group " + st.key.str() + ": " + group::to_string(e));
    if (!m) continue;
    switch (e.kind) {
      case K::GROUP_EPOCH_BUMPED: m->rebalance(); break;
      case K::FENCED: m->fenced(); break;
      case K::EXPIRED: m->expired(); break;
      case K::TARGET_COMPUTED: m->assignment_computed(computeSeconds); break;
      case K::REVOKE_REQUESTED: st.revokeStarted.emplace(e.member, t); break;
      case K::REVOKE_ACKED: {
        auto it = st.revokeStarted.find(e.member);
        auto mem = g.members.find(e.member);
        if (it != st.revokeStarted.end() && (mem == g.members.end() || mem->second.revoking.empty())) {
          m->revocation(static_cast<double>(t - it->second) / 1000.0);
          st.revokeStarted.erase(it);
        }
        break;
      }
      default: break;
    }
  }
  if (m) m->publish_group(st.key.streamPrefix, st.key.consumerGroup, g);
}

using Batch = std::vector<WorkPtr>;

void finish_deadline_work(Self self);

// After a write is stored (or when there was nothing to write).
void after_stored(Self self, const Batch& ws) {
  bool deadline = false;
  for (const auto& w : ws) {
    deadline = deadline || w->deadlineWork;
    finish(self, w);
  }
  if (deadline) finish_deadline_work(self);
}

// Writes one step's result (for one work, or for a batch of heartbeats computed one after the
// other on the same state) together with what adopting a loaded state changed; then answers them.
// `lockToken` non-empty: the write needs the group mutex to be free or ours (deadline work).
void write(Self self, const Batch& ws, group::Outcome&& o, std::vector<group::Event>&& events, double computeSeconds,
           const std::string& lockToken);

void commit(Self self, const Batch& ws, group::Outcome&& o, double computeSeconds, const std::string& lockToken = {}) {
  auto& st = self->state;
  // What adopting the loaded state changed came first: the step's changes win (a member the step
  // removes stays removed).
  group::Delta total = std::move(st.pending);
  total.merge(o.delta);
  o.delta = std::move(total);
  std::vector<group::Event> events = std::move(st.pendingEvents);
  for (auto& e : o.events) events.push_back(std::move(e));
  st.pending = {};
  st.pendingEvents.clear();
  const auto provision = group::provisioning_due(o.state, events);
  if (!provision) return write(self, ws, std::move(o), std::move(events), computeSeconds, lockToken);
  // The shard streams and the Redis consumer group come first: no state that hands out a shard
  // is stored before members can read it. Failing, the batch is answered RETRY (nothing written).
  st.busy = true;
  auto held = std::make_shared<std::pair<group::Outcome, std::vector<group::Event>>>(std::move(o), std::move(events));
  const int32_t count = *provision;
  auto failed = [=](const store::Error& e) {
    auto& s = self->state;
    s.busy = false;
    const std::string why = "could not create the shard streams' consumer group " + s.key.consumerGroup + ": " + e.message;
    for (const auto& w : ws) fail(self, w, {store::ErrorKind::Retryable, why});
    store_failed(self, {e.kind, why});  // drops the cache (the step was computed on it) and logs
    pump(self);
  };
  ask_store<ProvisionReply>(
      self,
      std::make_tuple(provision_atom::value,
                      ProvisionCall{st.key, count, st.cfg->start_id(st.key), give_up_at(self)}),
      [=](ProvisionReply& r) {
        if (!r.result.ok()) return failed(r.result.error);
        auto& s = self->state;
        s.busy = false;
        if (*r.result.value > 0)
          log::info("group " + s.key.str() + ": created the consumer group on " + std::to_string(*r.result.value) +
                    " of " + std::to_string(count) + " shard streams (start " + s.cfg->start_id(s.key) + ")");
        held->first.state.provisionedShards = count;
        held->first.delta.group = true;
        write(self, ws, std::move(held->first), std::move(held->second), computeSeconds, lockToken);
      },
      [=](caf::error& err) { failed({store::ErrorKind::Retryable, store_actor_error(self, err)}); });
}

// Best effort, not waited for: a lost message only means the member learns at its next heartbeat.
void notify_members(Self self, const std::vector<std::string>& members) {
  auto& st = self->state;
  const std::string message = group::notification_message(st.g ? st.g->groupEpoch : 0, members);
  self->send(st.store, task_atom::value, StoreTask{[key = st.key, message](store::GroupStore& s) { s.notify(key, message); }});
  if (st.cfg->metrics) st.cfg->metrics->notified(members.size());
}

// A write this pod may not make (or whose answer it may not give): every work of the batch gets
// RETRY, and the copy (which the step changed) is read again before the next.
void refuse_write(Self self, const Batch& ws, const std::string& why) {
  auto& st = self->state;
  st.busy = false;
  st.g.reset();
  st.copyTerm = 0;
  st.storedDeadline.reset();
  for (const auto& w : ws) {
    if (w->kind == Work::Kind::Metadata) {
      // Nobody waits for this one: the group's owner learns of the stream through its deadline
      // work, due now (it reads the stream with the deadline lease).
      self->send(st.store, task_atom::value,
                 StoreTask{[key = st.key, at = now(self)](store::GroupStore& s) { s.mark_due(key, at); }});
      continue;
    }
    fail(self, w, {store::ErrorKind::Retryable, why});
  }
}

// The batch waits, first in the queue, until this pod serves the group (it is decided again then,
// on the store's state: what it computed was on a copy this pod may not write).
void hold_until_owner(Self self, const Batch& ws, group::Millis inMs) {
  auto& st = self->state;
  st.g.reset();
  st.copyTerm = 0;
  st.storedDeadline.reset();
  for (auto it = ws.rbegin(); it != ws.rend(); ++it) {
    if ((*it)->kind == Work::Kind::Tick && !(*it)->deadlineWork) continue;  // a tick redone with the next step anyway
    st.queue.push_front(*it);
    if ((*it)->kind == Work::Kind::Tick) st.tickQueued = true;
  }
  st.busy = true;
  self->delayed_send(self, std::chrono::milliseconds(std::max<group::Millis>(1, inMs + 1)), resume_atom::value);
}

void write(Self self, const Batch& ws, group::Outcome&& o, std::vector<group::Event>&& events, double computeSeconds,
           const std::string& lockToken) {
  auto& st = self->state;
  // Nothing to write: the answers come from the copy, once a call made after each arrived has
  // confirmed it; else the store is asked whether the copy is still its state (group/freshness.hpp).
  bool verify = false;
  const auto p = powers(self);
  if (o.delta.empty()) {
    for (const auto& w : ws)
      if (w->kind != Work::Kind::Tick && !copy_answers(self, p, w->arrival)) verify = true;
    if (!verify) {
      st.g = std::move(o.state);
      return after_stored(self, ws);
    }
  }
  // Only the group's owner writes it (group/pod_authority.hpp): an owner answering from its copy
  // would not see another pod's change. A pod about to own it holds the batch until it does.
  if (!verify && !p.may_write()) {
    if (p.view->owns_soon(st.keyStr, p.local, group::kOwnsSoonMs)) return hold_until_owner(self, ws, p.view->writableFrom - p.local);
    return refuse_write(self, ws, p.why_not(st.keyStr));
  }
  st.busy = true;
  CasCall call;
  call.key = st.key;
  call.verifyOnly = verify;
  call.expectedRevision = o.state.storeRevision;
  // The deadline index must never be later than the stored state's next deadline.
  const auto after = group::next_deadline(o.state, st.cfg->core);
  if (!verify && after && (!st.exists || !st.storedDeadline || *after < *st.storedDeadline)) call.lowerDeadlineTo = *after;
  call.next = std::make_shared<group::GroupState>(std::move(o.state));
  if (st.exists) call.delta = std::make_shared<group::Delta>(std::move(o.delta));  // else: a full first write
  call.lockToken = lockToken;  // checked, never taken here (lockTtlMs 0)
  call.deadline = give_up_at(self);
  // Members with something new to do hear of it at once once this is stored (the heartbeats
  // in this batch are answered anyway). A steady heartbeat changes nothing anyone waits for, and
  // costs nothing here.
  // (The step took the cache by move, so the state before it is known only by its signature.)
  std::shared_ptr<std::vector<std::string>> wake;
  const auto shapeBefore = std::exchange(st.shapeBefore, std::nullopt);
  if (!verify && (!shapeBefore || *shapeBefore != group::shape_signature(*call.next))) {
    std::set<std::string> answered;
    for (const auto& w : ws)
      if (w->kind == Work::Kind::Heartbeat) answered.insert(w->hb.req.memberId);
    auto names = group::members_to_wake(nullptr, *call.next, answered);
    if (!names.empty()) wake = std::make_shared<std::vector<std::string>>(std::move(names));
  }
  st.g.reset();  // the cache is the write in flight until the store says so
  auto next = call.next;
  auto ev = std::make_shared<std::vector<group::Event>>(std::move(events));
  ask_store<CasReply>(self, std::make_tuple(cas_atom::value, std::move(call)),
          [=](CasReply& reply) {
            auto& s = self->state;
            s.busy = false;
            if (!reply.result.ok()) {
              for (const auto& w : ws)
                fail(self, w, {reply.result.error.kind, "coordinator store unavailable: " + reply.result.error.message});
              store_failed(self, reply.result.error);
              return pump(self);
            }
            auto& r = *reply.result.value;
            switch (r.status) {
              case store::CasStatus::Written:
                if (!verify && !powers(self).may_write()) {
                  // Stored, but the pod's window closed meanwhile: another pod may already answer
                  // alone from a copy without it. Nobody is told of it here; the members ask again.
                  refuse_write(self, ws, "this coordinator pod's registration lapsed while it wrote");
                  return pump(self);
                }
                s.g = std::move(*next);
                s.g->storeRevision = r.revision;
                confirm(self);
                if (verify) {  // the copy was current: nothing was written
                  if (s.cfg->metrics) s.cfg->metrics->copy_check(true);
                  after_stored(self, ws);
                  break;
                }
                s.exists = true;
                s.storedDeadline = after;
                s.rollbackSeenEpoch.reset();
                log_and_measure(self, *ev, *s.g, computeSeconds);
                if (wake) notify_members(self, *wake);
                after_stored(self, ws);
                break;
              case store::CasStatus::Conflict:
              case store::CasStatus::Locked: {
                if (s.cfg->metrics) {
                  if (verify)
                    s.cfg->metrics->copy_check(false);
                  else if (r.status == store::CasStatus::Conflict)
                    s.cfg->metrics->cas_conflict();
                  else
                    s.cfg->metrics->mutex_contention();
                }
                if (r.current) {  // another pod wrote first: its state comes with the answer (not with a check)
                  store::Loaded l{true, std::move(*r.current), r.rollback};
                  adopt(self, std::move(l), std::nullopt);
                  confirm(self);
                } else {
                  s.g.reset();
                }
                // Redo the step on the fresh state, in the same order; or give up on contention.
                for (auto it = ws.rbegin(); it != ws.rend(); ++it) {
                  const auto& w = *it;
                  if (++w->attempts >= s.cfg->maxCasAttempts) {
                    const store::Error e{store::ErrorKind::Retryable,
                                         "group " + s.key.str() + " is contended: " + std::to_string(w->attempts) +
                                             " write attempts lost to other pods"};
                    fail(self, w, e);
                  } else {
                    s.queue.push_front(w);
                    if (w->kind == Work::Kind::Tick) s.tickQueued = true;
                  }
                }
                break;
              }
            }
            pump(self);
          },
          [=](caf::error& err) {
            self->state.busy = false;
            const store::Error e{store::ErrorKind::Retryable, store_actor_error(self, err)};
            for (const auto& w : ws) fail(self, w, {e.kind, "coordinator store unavailable: " + e.message});
            store_failed(self, e);
            pump(self);
          });
}

void commit(Self self, const WorkPtr& w, group::Outcome&& o, double computeSeconds, const std::string& lockToken = {}) {
  commit(self, Batch{w}, std::move(o), computeSeconds, lockToken);
}

// The error half of a store request with nothing of its own to answer: the store actor did not
// reply (timeout, or it stopped), which is a store failure like any other.
auto store_actor_failed(Self self) {
  return [=](caf::error& err) {
    self->state.busy = false;
    store_failed(self, {store::ErrorKind::Retryable, store_actor_error(self, err)});
    pump(self);
  };
}

// Deadline work ends by writing the group's next deadline to the index (from the revision just
// judged) and releasing the group mutex, in one round trip.
void finish_deadline_work(Self self) {
  auto& st = self->state;
  if (!st.g) return;
  const auto tv = time_view(self);
  FinishCall call{st.key, st.cfg->podToken,
                  st.exists ? group::next_deadline(*st.g, st.cfg->core, tv.expiryHeldUntil) : std::nullopt,
                  st.g->storeRevision};
  st.busy = true;
  ask_store<FinishReply>(self, std::make_tuple(finish_atom::value, std::move(call)),
          [=](FinishReply& r) {
            self->state.busy = false;
            if (!r.result.ok()) return store_failed(self, r.result.error), pump(self);
            if (self->state.cfg->metrics) self->state.cfg->metrics->deadline_work("done");
            pump(self);
          },
          store_actor_failed(self));
}

// The admin's delete, once judged on a state just read from the store.
void start_delete(Self self, const WorkPtr& w) {
  auto& st = self->state;
  if (const auto p = powers(self); !p.may_write()) return refuse_write(self, {w}, p.why_not(st.keyStr));
  st.busy = true;
  const int64_t held = group::grants_held_after_delete(*st.g, now(self));
  ask_store<DeleteStoreReply>(self, std::make_tuple(delete_atom::value, DeleteStoreCall{st.key, st.g->storeRevision, held}),
          [=](DeleteStoreReply& r) {
            auto& s = self->state;
            s.busy = false;
            if (!r.result.ok()) {
              fail(self, w, r.result.error);
              store_failed(self, r.result.error);
              return pump(self);
            }
            if (*r.result.value == store::DeleteStatus::Deleted && !powers(self).may_write()) {
              // Deleted, but told to nobody: a pod answering alone may not have seen it yet.
              refuse_write(self, {w}, "this coordinator pod's registration lapsed while it deleted the group");
              return pump(self);
            }
            switch (*r.result.value) {
              case store::DeleteStatus::Deleted:
                log::info("group " + s.key.str() + ": deleted by admin");
                s.g.reset();
                s.exists = false;
                s.storedDeadline.reset();
                if (s.cfg->metrics) s.cfg->metrics->forget_group(s.key.streamPrefix, s.key.consumerGroup);
                w->del.done(store::Result<store::GroupDeletion>::success(store::GroupDeletion::Deleted));
                break;
              case store::DeleteStatus::NotFound:
                s.g.reset();
                w->del.done(store::Result<store::GroupDeletion>::success(store::GroupDeletion::NotFound));
                break;
              case store::DeleteStatus::Conflict:  // written meanwhile: judge again on a fresh read
                s.g.reset();
                if (++w->attempts >= s.cfg->maxCasAttempts) {
                  fail(self, w, {store::ErrorKind::Retryable, "group " + s.key.str() + " is contended; try again"});
                } else {
                  w->verified = false;
                  s.queue.push_front(w);
                }
                break;
            }
            pump(self);
          },
          store_actor_failed(self));
}

void run_step(Self self, const WorkPtr& w) {
  auto& st = self->state;
  if (w->kind != Work::Kind::Heartbeat) st.justLoaded = false;
  // What the members' to-dos depend on, taken before the step consumes the cache (commit
  // compares). Not known when adopting a loaded state changed it: then every member with
  // something to do is told.
  st.shapeBefore.reset();
  if (st.g && st.pending.empty()) st.shapeBefore = group::shape_signature(*st.g);
  const auto tv = time_view(self);
  const auto t = tv.now;
  const auto started = SteadyClock::now();
  auto seconds = [&] { return std::chrono::duration<double>(SteadyClock::now() - started).count(); };
  switch (w->kind) {
    case Work::Kind::Describe: return;  // served by start_describe
    case Work::Kind::Heartbeat: {
      // The join of a group that does not exist yet may be refused by the groups-per-stream limit.
      if (!st.exists && is_join(*w) && st.groupsInStream) {
        if (auto refusal = group::refuse_new_group(static_cast<std::size_t>(*st.groupsInStream),
                                                   st.cfg->maxGroupsPerStream, st.key.streamPrefix)) {
          auto r = protocol::refusal(w->hb.req.requestId, w->hb.req.memberId, HeartbeatStatus::INVALID_REQUEST,
                                     *refusal, timings(self), "consumerGroup");
          w->response = std::move(r);
          st.g.reset();  // counted again at the next join
          st.pending = {};
          st.pendingEvents.clear();
          return finish(self, w);
        }
      }
      // Expiry is due whenever anything happens to the group, so the tick runs first, in the
      // same write. The heartbeats queued behind this one are computed on the same state and
      // written with it: one CAS for the batch (a busy group is not limited to one round trip
      // per heartbeat).
      const bool fresh = st.justLoaded;
      st.justLoaded = false;
      auto ticked = group::tick(std::move(*st.g), st.cfg->core, tv);
      group::Outcome total{std::move(ticked.state), std::move(ticked.delta), std::move(ticked.events)};
      Batch batch;
      WorkPtr next = w;
      while (next) {
        auto hb = group::heartbeat(std::move(total.state), next->hb.req, st.cfg->core, t);
        total.state = std::move(hb.state);
        next->unwritten = hb.leaseRenewalDeferred;
        if (needs_fresh_state(hb.response, hb.delta)) {
          if (!next->verified && !fresh) {
            // Decide this one again on a state read from the store: alone, after the batch.
            next->verified = true;
            if (batch.empty()) {
              st.g.reset();  // nothing computed yet worth keeping: read the store, then decide
              st.pending = {};
              st.pendingEvents.clear();
              st.queue.push_front(next);
              return;
            }
            st.queue.push_front(next);
            break;
          }
          // Answered now: an error answer does not wait for (or depend on) the write.
          next->response = std::move(hb.response);
          finish(self, next);
        } else {
          next->response = std::move(hb.response);
          total.delta.merge(hb.delta);
          for (auto& e : hb.events) total.events.push_back(std::move(e));
          batch.push_back(next);
        }
        next.reset();
        // Under a groups-per-stream limit, a join into a group that does not exist yet goes
        // first in a batch of its own: the limit is checked for it above.
        const bool limitApplies = !st.exists && st.cfg->maxGroupsPerStream > 0;
        if (batch.size() < kMaxBatch && !st.queue.empty() && st.queue.front()->kind == Work::Kind::Heartbeat &&
            !(limitApplies && is_join(*st.queue.front())) &&
            !group::request_too_old(st.queue.front()->arrivedMs, t, st.cfg->core)) {
          next = st.queue.front();
          st.queue.pop_front();
        }
      }
      const double s = seconds();
      if (batch.empty() && !st.exists) {  // only refusals for a group that does not exist: store nothing
        st.g.reset();
        st.pending = {};
        st.pendingEvents.clear();
        return;
      }
      if (batch.empty()) {  // only error answers: the tick's findings are written on their own
        auto tickWork = std::make_shared<Work>();
        tickWork->kind = Work::Kind::Tick;
        batch.push_back(tickWork);
      }
      return commit(self, batch, std::move(total), s);
    }
    case Work::Kind::Tick: {
      auto o = group::tick(std::move(*st.g), st.cfg->core, tv);
      const double s = seconds();
      return commit(self, w, std::move(o), s, w->deadlineWork ? st.cfg->podToken : std::string());
    }
    case Work::Kind::Remove: {
      auto o = group::fence_member(std::move(*st.g), w->remove.memberId, "removed by admin", st.cfg->core, t);
      w->removed = o.changed();
      const double s = seconds();
      return commit(self, w, std::move(o), s);
    }
    case Work::Kind::Metadata: {
      auto o = group::apply_metadata(std::move(*st.g), w->meta.shardCount, w->meta.metadataVersion, st.cfg->core, t);
      const double s = seconds();
      return commit(self, w, std::move(o), s);
    }
    case Work::Kind::Delete: {
      switch (group::judge_delete(st.exists, *st.g, w->del.fenceMembers)) {
        case group::DeleteVerdict::NotFound:
          return w->del.done(store::Result<store::GroupDeletion>::success(store::GroupDeletion::NotFound));
        case group::DeleteVerdict::HasLiveMembers:
          return w->del.done(store::Result<store::GroupDeletion>::success(store::GroupDeletion::HasLiveMembers));
        case group::DeleteVerdict::Delete: return start_delete(self, w);
        case group::DeleteVerdict::FenceThenDelete: {
          // Every live member is fenced first (written), then the delete is judged again.
          group::Outcome o{std::move(*st.g), {}, {}};
          std::vector<std::string> live;
          for (const auto& [id, m] : o.state.members)
            if (m.live()) live.push_back(id);
          for (const auto& id : live) {
            auto f = group::fence_member(std::move(o.state), id, "group deleted by admin", st.cfg->core, t);
            o.state = std::move(f.state);
            o.delta.merge(f.delta);
            for (auto& e : f.events) o.events.push_back(std::move(e));
          }
          w->del.fenceMembers = false;
          st.queue.push_front(w);
          auto fenceWork = std::make_shared<Work>();
          fenceWork->kind = Work::Kind::Tick;
          return commit(self, fenceWork, std::move(o), seconds());
        }
      }
      return;
    }
  }
}

void start_load(Self self) {
  auto& st = self->state;
  st.busy = true;
  LoadCall call{st.key, st.cfg->defaultShardCount, false, st.cfg->maxGroupsPerStream > 0, give_up_at(self)};
  call.createStream = !st.queue.empty() && is_join(*st.queue.front());
  ask_store<LoadReply>(self, std::make_tuple(load_atom::value, std::move(call)),
          [=](LoadReply& r) {
            self->state.busy = false;
            if (!r.loaded.ok()) return store_failed(self, r.loaded.error), pump(self);
            if (!r.stream.ok()) return store_failed(self, r.stream.error), pump(self);
            self->state.groupsInStream = r.groupsInStream;
            adopt(self, std::move(*r.loaded.value), *r.stream.value);
            confirm(self);
            self->state.justLoaded = true;
            pump(self);
          },
          store_actor_failed(self));
}

// Deadline work: the pod's deadline index said this group is due and this pod has the duty.
// Holding the group mutex (so no other pod judges the same deadlines at the same time), it learns
// in the same round trip whether another pod changed the group since this cache.
void start_tick(Self self, const WorkPtr& w) {
  auto& st = self->state;
  st.busy = true;
  LeaseCall call{st.key, st.cfg->podToken, st.cfg->mutexTtlMs, st.g ? st.g->storeRevision : -1, give_up_at(self)};
  ask_store<LeaseReply>(self, std::make_tuple(lease_atom::value, std::move(call)),
          [=](LeaseReply& r) {
            auto& s = self->state;
            s.busy = false;
            if (!r.result.ok()) {
              if (s.cfg->metrics) s.cfg->metrics->deadline_work("failed");
              return store_failed(self, r.result.error), pump(self);
            }
            auto& lease = *r.result.value;
            if (lease.status == store::LeaseStatus::NotHolder) {
              if (s.cfg->metrics) s.cfg->metrics->deadline_work("held_elsewhere");
              return pump(self);
            }
            if (lease.status == store::LeaseStatus::Changed) adopt(self, std::move(*lease.loaded), r.stream);
            if (!s.g) return pump(self);
            if (lease.status != store::LeaseStatus::Changed && r.stream && r.stream->metadataVersion > s.g->metadataVersion)
              merge(self, group::apply_metadata(std::move(*s.g), r.stream->shardCount, r.stream->metadataVersion,
                                                s.cfg->core, now(self)));
            confirm(self);  // unchanged since the copy, or the copy just read
            if (!s.exists) {
              finish_deadline_work(self);  // a deleted group: its index entry goes
              return pump(self);
            }
            run_step(self, w);
            pump(self);
          },
          store_actor_failed(self));
}

// Describe shows the store's state (other pods write too), read without touching this pod's cache.
void start_describe(Self self, const WorkPtr& w) {
  auto& st = self->state;
  st.busy = true;
  ask_store<LoadReply>(self,
                       std::make_tuple(load_atom::value,
                                       LoadCall{st.key, st.cfg->defaultShardCount, false, false, give_up_at(self)}),
          [=](LoadReply& r) {
            self->state.busy = false;
            if (!r.loaded.ok()) {
              w->describe.done(store::Result<std::optional<std::string>>::failure(r.loaded.error));
            } else {
              std::optional<std::string> body;
              if (r.loaded.value->exists) body = group::describe_json(r.loaded.value->state, now(self), &self->state.recent);
              w->describe.done(store::Result<std::optional<std::string>>::success(std::move(body)));
            }
            pump(self);
          },
          [=](caf::error& err) {
            self->state.busy = false;
            w->describe.done(store::Result<std::optional<std::string>>::failure(
                {store::ErrorKind::Retryable, store_actor_error(self, err)}));
            pump(self);
          });
}

void pump(Self self) {
  auto& st = self->state;
  while (!st.busy && !st.queue.empty()) {
    const auto& front = st.queue.front();
    if (!st.cfg->pod->synced()) {  // no store time yet: nothing can be decided
      auto w = front;
      st.queue.pop_front();
      if (w->kind == Work::Kind::Tick) st.tickQueued = false;
      fail(self, w, {store::ErrorKind::Retryable, "coordinator store unavailable: not connected to the store yet"});
      continue;
    }
    if (front->kind == Work::Kind::Tick) {
      auto w = front;
      st.queue.pop_front();
      st.tickQueued = false;
      if (w->attempts > 0 && st.g) {  // a tick that lost a write race: redo it on the fresh state
        run_step(self, w);
        continue;
      }
      start_tick(self, w);
      return;
    }
    if (front->kind == Work::Kind::Describe) {
      auto w = front;
      st.queue.pop_front();
      return start_describe(self, w);
    }
    if (front->kind == Work::Kind::Delete && !front->verified) {  // judged on a fresh read only
      front->verified = true;
      st.g.reset();
      return start_load(self);
    }
    // A group cached before its stream existed is read again (creating the stream) for a join.
    if (st.g && st.g->shardCount == 0 && is_join(*front)) st.g.reset();
    if (front->kind == Work::Kind::Heartbeat && group::request_too_old(front->arrivedMs, now(self), st.cfg->core)) {
      auto w = front;
      st.queue.pop_front();
      w->response = retry_response(self, w->hb.req, "the request waited longer than a lease; send a fresh one");
      finish(self, w);
      continue;
    }
    if (!st.g) return start_load(self);
    auto w = front;
    st.queue.pop_front();
    run_step(self, w);
  }
  if (st.retiring && !st.busy && st.queue.empty()) self->quit();
}

void arm_watchdog(Self self, group::Millis in) {
  auto& st = self->state;
  if (st.watchdog) return;
  st.watchdog = true;
  self->delayed_send(self, std::chrono::milliseconds(std::max<group::Millis>(1, in)), watchdog_atom::value);
}

// An idle actor asks the gateway to forget it, then quits (group/time_rules: should_retire).
void arm_retirement(Self self, group::Millis in) {
  auto& st = self->state;
  if (st.retireTimer || st.cfg->retireAfterMs <= 0) return;
  st.retireTimer = true;
  self->delayed_send(self, std::chrono::milliseconds(std::max<group::Millis>(1, in)), retire_atom::value);
}

void active(Self self, group::Millis t) {
  auto& st = self->state;
  st.lastActivity = t;
  arm_retirement(self, st.cfg->retireAfterMs);
}

void enqueue(Self self, WorkPtr w) {
  const auto t = now(self);  // the pod's clock is shared by all its actors: read once per message
  active(self, t);
  w->arrivedMs = t;
  w->arrival = self->state.copy.arrival();
  self->state.queue.push_back(std::move(w));
  pump(self);
}

caf::behavior group_actor(Self self, store::GroupKey key, std::shared_ptr<const GroupActorConfig> cfg, caf::actor store,
                          caf::actor gateway) {
  self->state.key = std::move(key);
  self->state.keyStr = self->state.key.str();
  self->state.cfg = std::move(cfg);
  self->state.store = std::move(store);
  self->state.gateway = std::move(gateway);
  active(self, now(self));
  return {
      [=](hb_atom, HeartbeatCall& c) {
        auto w = std::make_shared<Work>();
        w->kind = Work::Kind::Heartbeat;
        w->hb = std::move(c);
        enqueue(self, std::move(w));
      },
      [=](describe_atom, DescribeCall& c) {
        auto w = std::make_shared<Work>();
        w->kind = Work::Kind::Describe;
        w->describe = std::move(c);
        enqueue(self, std::move(w));
      },
      [=](remove_atom, RemoveCall& c) {
        auto w = std::make_shared<Work>();
        w->kind = Work::Kind::Remove;
        w->remove = std::move(c);
        enqueue(self, std::move(w));
      },
      [=](delete_atom, DeleteCall& c) {
        auto w = std::make_shared<Work>();
        w->kind = Work::Kind::Delete;
        w->del = std::move(c);
        enqueue(self, std::move(w));
      },
      [=](meta_atom, const protocol::StreamMetadata& m) {
        auto w = std::make_shared<Work>();
        w->kind = Work::Kind::Metadata;
        w->meta = m;
        enqueue(self, std::move(w));
      },
      // The pod found this group due in the deadline index, and the duty is this pod's.
      [=](due_atom) {
        if (self->state.tickQueued) return;
        self->state.tickQueued = true;
        auto w = std::make_shared<Work>();
        w->kind = Work::Kind::Tick;
        w->deadlineWork = true;
        enqueue(self, std::move(w));
      },
      // This pod serves the group now (hold_until_owner): what waited goes on.
      [=](resume_atom) {
        self->state.busy = false;
        pump(self);
      },
      [=](watchdog_atom) {
        auto& st = self->state;
        st.watchdog = false;
        if (st.asking == 0) return;
        const auto waited = st.cfg->pod->local_now() - st.askedAt;
        if (waited < st.cfg->storeDeadlineMs) return arm_watchdog(self, st.cfg->storeDeadlineMs - waited);
        auto giveUp = std::move(st.giveUp);
        st.giveUp = nullptr;
        st.asking = 0;
        if (giveUp) giveUp();
      },
      [=](retire_atom) {
        auto& st = self->state;
        st.retireTimer = false;
        const auto t = now(self);
        if (group::should_retire(st.lastActivity, t, st.cfg->retireAfterMs) && !st.busy && st.queue.empty()) {
          self->send(st.gateway, retire_atom::value, st.key, caf::actor_cast<caf::actor>(self));
        } else {
          arm_retirement(self, st.lastActivity + st.cfg->retireAfterMs - t);
        }
      },
      // The gateway forgot this actor: nothing new reaches it.
      [=](retired_atom) {
        self->state.retiring = true;
        pump(self);
      },
  };
}

}  // namespace

caf::actor spawn_group_actor(caf::actor_system& sys, store::GroupKey key, std::shared_ptr<const GroupActorConfig> cfg,
                             caf::actor store, caf::actor gateway) {
  return sys.spawn(group_actor, std::move(key), std::move(cfg), std::move(store), std::move(gateway));
}

caf::actor spawn_group_actor(caf::actor_system& sys, store::GroupKey key, GroupActorConfig cfg, caf::actor store,
                             caf::actor gateway) {
  return spawn_group_actor(sys, std::move(key), std::make_shared<const GroupActorConfig>(std::move(cfg)),
                           std::move(store), std::move(gateway));
}

}  // namespace rsc::actors
