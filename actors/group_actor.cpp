// The group actor runs one group: it serializes the group's heartbeats, deadline work and admin
// calls in its mailbox, asks the store with at most one request in flight (given up after the
// store deadline, on the pod's clock), counts and logs, and retires when idle. What any of that
// means for the group is decided by group::CachedGroup (group/cached_group.hpp), which holds the
// copy of the group's state; this file only moves work, replies and answers. It has no timer of
// its own but the retirement and store watchdogs: deadline work is started by the pod
// (actors/pod_actor.cpp) when the store's deadline index says it is due.
#include <algorithm>
#include <chrono>
#include <variant>

#include "actors/group_actor_parts.hpp"
#include "group/notify.hpp"
#include "log/log.hpp"
#include "protocol/codec.hpp"

namespace rsc::actors {
namespace group_parts {

using group::WorkKind;

static void finish(Self self, Work& w) { answer(w, self->state.cfg->metrics.get()); }

// The store could not answer: the copy is forgotten and everything waiting is answered.
void store_failed(Self self, const store::Error& e, const Batch& inFlight) {
  auto& st = self->state;
  st.report.store_failed(e);
  st.c.forget();
  Batch waiting(inFlight);
  waiting.insert(waiting.end(), st.queue.begin(), st.queue.end());
  st.queue.clear();
  st.tickQueued = false;
  const store::Error why{e.kind, "coordinator store unavailable: " + e.message};
  for (auto& w : waiting) fail(self, *w, why);
}

static void finish_deadline_work(Self self) {
  auto& st = self->state;
  if (!st.c.held()) return;
  FinishCall call{st.key, st.cfg->podToken, st.c.index_deadline(st.cfg->pod->time_view(st.cfg->core)),
                  st.c.state().storeRevision};
  ask<FinishReply>(self, {}, std::make_tuple(finish_atom::value, std::move(call)), [=](FinishReply& r) {
    if (!r.result.ok()) return store_failed(self, r.result.error);
    if (self->state.cfg->metrics) self->state.cfg->metrics->deadline_work("done");
  });
}

// The batch is answered; deadline work among it is finished (the deadline index updated).
static void answered(Self self, const Batch& ws) {
  for (const auto& w : ws) finish(self, *w);
  if (std::any_of(ws.begin(), ws.end(), [](const WorkPtr& w) { return w->t.deadlineWork; })) finish_deadline_work(self);
}

// Work this pod may not do for the group now: RETRY; a grown stream is left to the group's owner,
// which reads it with its deadline work, due now.
void refuse(Self self, const Batch& ws, const std::string& why) {
  auto& st = self->state;
  for (const auto& w : ws) {
    if (w->t.kind != WorkKind::Metadata) fail(self, *w, retryable(why));
    else self->send(st.store, task_atom::value, StoreTask{[key = st.key, at = now(self)](store::PodRegistry& s) { s.mark_due(key, at); }});
  }
}

// The batch goes first in the queue again, in its order.
static void requeue(Self self, const Batch& ws) {
  auto& st = self->state;
  for (auto it = ws.rbegin(); it != ws.rend(); ++it) {
    st.queue.push_front(*it);
    st.tickQueued = st.tickQueued || (*it)->t.kind == WorkKind::Tick;
  }
}

// The work waits, first in the queue, until this pod serves the group; then it is decided again
// (a tick that is not deadline work is redone with the next step anyway).
static void hold(Self self, const Batch& ws, group::Millis ms) {
  Batch kept;
  for (const auto& w : ws)
    if (w->t.kind != WorkKind::Tick || w->t.deadlineWork) kept.push_back(w);
  requeue(self, kept);
  self->state.busy = true;
  self->delayed_send(self, std::chrono::milliseconds(ms), resume_atom::value);
}

// Work that lost a race with another pod goes first again, or is given up on when contended.
void redo(Self self, const Batch& ws) {
  Batch again;
  for (const auto& w : ws) {
    if (auto why = group::contended(w->t.attempts, self->state.cfg->maxCasAttempts, self->state.key.str())) fail(self, *w, retryable(*why));
    else again.push_back(w);
  }
  requeue(self, again);
}

// The step's outcome goes to the store, or is answered from the copy (group::WritePlan); a write
// that hands a shard out first has the store actor give the shard streams their consumer group.
// What a write's reply needs, in one allocation shared by the reply's handlers (each CAF and
// std::function copy of them would otherwise copy the batch).
struct InFlightWrite {
  Batch ws;
  std::vector<std::string> wake;
  std::vector<group::Event> events;
  double computeSeconds = 0;
  bool check = false;
};

void commit(Self self, Batch ws, group::Outcome&& o, double computeSeconds, const std::string& lockToken) {
  auto& st = self->state;
  auto plan = st.c.plan_write(st.c.prepare(std::move(o)), oldest_arrival(ws), *view(self), local(self), [&ws] { return members_in(ws); });
  using K = group::WritePlan::Kind;
  if (plan.kind == K::FromCopy) return answered(self, ws);
  if (plan.kind == K::Hold) return hold(self, ws, plan.holdMs);
  if (plan.kind == K::Refuse) return refuse(self, ws, plan.why);
  const bool check = plan.kind == K::Check;
  CasCall call{st.key, plan.expectedRevision, plan.next, plan.delta, lockToken, 0, plan.lowerDeadlineTo,
               give_up_at(self), check, plan.provision, st.cfg->start_id(st.key)};
  auto f = std::make_shared<InFlightWrite>(InFlightWrite{std::move(ws), std::move(plan.wake), std::move(plan.events), computeSeconds, check});
  ask_held<CasReply>(self, f, std::make_tuple(cas_atom::value, std::move(call)), [self, f](CasReply& reply) {
        auto& s = self->state;
        const Batch& written = f->ws;
        if (!reply.result.ok()) return store_failed(self, reply.result.error, written);
        auto& r = *reply.result.value;
        auto* m = s.cfg->metrics.get();
        if (r.status == store::CasStatus::Written) {
          switch (s.c.written(r.revision, s.asker.line.replying(), *view(self), local(self))) {
            case group::Stored::Lapsed: return refuse(self, written, "this coordinator pod's registration lapsed while it wrote");
            case group::Stored::Current: if (m) m->copy_check(true); return answered(self, written);
            case group::Stored::Written: break;
          }
          s.report.stored(f->events, s.c, f->computeSeconds, now(self));
          if (!f->wake.empty()) {  // best effort: a lost message only means the member learns at its next heartbeat
            const auto message = group::notification_message(s.c.state().groupEpoch, f->wake);
            self->send(s.store, task_atom::value, StoreTask{[key = s.key, message](store::GroupStateStore& gs) { gs.notify(key, message); }});
            if (m) m->notified(f->wake.size());
          }
          return answered(self, written);
        }
        if (m) f->check ? m->copy_check(false) : r.status == store::CasStatus::Conflict ? m->cas_conflict() : m->mutex_contention();
        s.report.rollback(s.c.lost_race(std::move(r.current), r.rollback, s.asker.line.replying(), *view(self), local(self), now(self)), s.c);
        redo(self, written);
      });
}

// Heartbeats queued behind the first are computed on the same state and written with it.
static void step_heartbeats(Self self, WorkPtr w, const group::TimeView& tv, double computeSeconds) {
  auto& st = self->state;
  auto& first = std::get<Beat>(w->what);
  if (auto r = st.c.refuse_over_limit(w->t, first.call.req, st.cfg->maxGroupsPerStream, st.key.streamPrefix, st.cfg->timings())) {
    first.response = std::move(*r);
    return finish(self, *w);
  }
  auto batch = st.c.batch(tv, st.cfg->maxGroupsPerStream);
  Batch ws;
  for (WorkPtr next = std::move(w); next;) {
    auto& b = std::get<Beat>(next->what);
    auto beat = batch.add(next->t, b.call.req);
    b.response = std::move(beat.response);
    b.unwritten = beat.unwritten;
    using F = group::CachedGroup::Batch::Fate;
    if (beat.fate == F::Batched) ws.push_back(next);
    else if (beat.fate == F::Answered) finish(self, *next);
    else st.queue.push_front(next);
    next.reset();
    if (batch.takes(st.queue.empty() ? nullptr : &st.queue.front()->t)) next = st.queue.front(), st.queue.pop_front();
  }
  auto o = batch.finish();
  if (!o) return;
  if (ws.empty()) ws.push_back(make(Tick{}));  // only error answers: the tick's findings alone
  commit(self, std::move(ws), std::move(*o), computeSeconds);
}

static void run_step(Self self, const WorkPtr& w) {
  auto& st = self->state;
  auto& cfg = st.cfg->core;
  st.c.begin_step(w->t.kind);
  const auto tv = st.cfg->pod->time_view(cfg);
  const auto started = SteadyClock::now();
  auto seconds = [&] { return std::chrono::duration<double>(SteadyClock::now() - started).count(); };
  if (std::holds_alternative<Beat>(w->what)) return step_heartbeats(self, w, tv, seconds());
  if (std::holds_alternative<Tick>(w->what))
    return commit(self, {w}, group::tick(st.c.take(), cfg, tv), seconds(), w->t.deadlineWork ? st.cfg->podToken : std::string());
  if (auto* m = std::get_if<Metadata>(&w->what))
    return commit(self, {w}, group::apply_metadata(st.c.take(), m->meta.readShardCount(), m->meta.metadataVersion, cfg, tv.now,
                                                       &m->meta.shardRacks),
                  seconds());
  run_admin_step(self, w, tv.now, seconds());
}

static void start_load(Self self) {
  auto& st = self->state;
  LoadCall call{st.key, st.cfg->defaultShardCount, st.queue.front()->t.join, st.cfg->maxGroupsPerStream > 0, give_up_at(self)};
  ask<LoadReply>(self, {}, std::make_tuple(load_atom::value, std::move(call)), [=](LoadReply& r) {
        auto& s = self->state;
        if (!r.loaded.ok()) return store_failed(self, r.loaded.error);
        if (!r.stream.ok()) return store_failed(self, r.stream.error);
        s.report.rollback(s.c.adopt(std::move(*r.loaded.value), *r.stream.value, now(self)), s.c);
        s.c.confirm(s.asker.line.replying(), *view(self), local(self));
        s.c.loaded(r.groupsInStream);
      });
}

// Deadline work: holding the group mutex (no other pod judges the same deadlines meanwhile), the
// pod learns in the same round trip whether another pod changed the group since its copy.
static void start_tick(Self self, const WorkPtr& w) {
  auto& st = self->state;
  LeaseCall call{st.key, st.cfg->podToken, st.cfg->mutexTtlMs, st.c.held() ? st.c.state().storeRevision : -1, give_up_at(self)};
  ask<LeaseReply>(self, {}, std::make_tuple(lease_atom::value, std::move(call)), [=](LeaseReply& r) {
        auto& s = self->state;
        auto* m = s.cfg->metrics.get();
        if (!r.result.ok()) {
          if (m) m->deadline_work("failed");
          return store_failed(self, r.result.error);
        }
        auto& lease = *r.result.value;
        if (r.deadLetters) s.report.dead_letters(*r.deadLetters);
        if (lease.status == store::LeaseStatus::NotHolder) {
          if (m) m->deadline_work("held_elsewhere");
          return;
        }
        if (lease.status == store::LeaseStatus::Changed) s.report.rollback(s.c.adopt(std::move(*lease.loaded), r.stream, now(self)), s.c);
        else s.c.stream_read(r.stream, now(self));
        if (!s.c.held()) return;
        s.c.confirm(s.asker.line.replying(), *view(self), local(self));
        if (!s.c.exists()) return finish_deadline_work(self);  // a deleted group: its index entry goes
        run_step(self, w);
      });
}

void pump(Self self) {
  auto& st = self->state;
  while (!st.busy && !st.queue.empty()) {
    auto w = st.queue.front();
    const auto next = st.c.next(w->t, now(self), st.cfg->pod->synced());
    if (next == group::Next::Load) return start_load(self);
    st.queue.pop_front();
    if (w->t.kind == WorkKind::Tick) st.tickQueued = false;
    switch (next) {
      case group::Next::NotSynced: fail(self, *w, retryable("coordinator store unavailable: not connected to the store yet")); break;
      case group::Next::TooOld: fail(self, *w, retryable("the request waited longer than a lease; send a fresh one")); break;
      case group::Next::Describe: return start_describe(self, w);
      case group::Next::Lease: return start_tick(self, w);
      default: run_step(self, w); break;
    }
  }
  if (st.retiring && !st.busy && st.queue.empty()) self->quit();
}

// An idle actor asks the gateway to forget it, then quits (group/time_rules: should_retire).
static void arm_retirement(Self self, group::Millis in) {
  auto& st = self->state;
  if (st.retireTimer || st.cfg->retireAfterMs <= 0) return;
  st.retireTimer = true;
  self->delayed_send(self, std::chrono::milliseconds(std::max<group::Millis>(1, in)), retire_atom::value);
}

template <class P>
static void enqueue(Self self, P&& payload, bool deadlineWork = false) {
  auto& st = self->state;
  auto w = make(std::forward<P>(payload));
  const auto t = now(self);  // the pod's clock is shared by all its actors: read once per message
  st.lastActivity = t;
  arm_retirement(self, st.cfg->retireAfterMs);
  w->t.deadlineWork = deadlineWork;
  w->t.arrivedMs = t;
  w->t.arrival = st.c.calls().arrival();
  st.queue.push_back(std::move(w));
  pump(self);
}

static caf::behavior group_actor(Self self, store::GroupKey key, std::shared_ptr<const GroupActorConfig> cfg, caf::actor store,
                          caf::actor gateway) {
  auto& st = self->state;
  st.key = std::move(key);
  st.cfg = std::move(cfg);
  st.c = group::CachedGroup(st.key.str(), &st.cfg->core);
  st.report = GroupReport(st.key, st.cfg->metrics.get(), st.cfg->logEvents);
  st.store = std::move(store);
  st.gateway = std::move(gateway);
  st.lastActivity = now(self);
  arm_retirement(self, st.cfg->retireAfterMs);
  return {
      [=](hb_atom, HeartbeatCall& c) { enqueue(self, Beat{std::move(c), {}, false}); },
      [=](describe_atom, DescribeCall& c) { enqueue(self, Describe{std::move(c)}); },
      [=](remove_atom, RemoveCall& c) { enqueue(self, Remove{std::move(c), false}); },
      [=](delete_atom, DeleteCall& c) { enqueue(self, Delete{std::move(c)}); },
      [=](reset_atom, ResetCall& c) { enqueue(self, Reset{std::move(c)}); },
      [=](configure_atom, ConfigureCall& c) { enqueue(self, Configure{std::move(c), {}}); },
      [=](target_atom, TargetCall& c) { enqueue(self, PostTarget{std::move(c), {}}); },
      [=](meta_atom, const protocol::StreamMetadata& m) { enqueue(self, Metadata{m}); },
      // The pod found this group due in the deadline index, and the duty is this pod's.
      [=](due_atom) { if (!std::exchange(self->state.tickQueued, true)) enqueue(self, Tick{}, true); },
      // This pod serves the group now (hold): what waited goes on.
      [=](resume_atom) { self->state.busy = false, pump(self); },
      [=](watchdog_atom) { if (store_watchdog_fired(self, local(self), self->state.cfg->storeDeadlineMs)) pump(self); },
      [=](retire_atom) {
        auto& s = self->state;
        s.retireTimer = false;
        const auto t = now(self);
        if (group::should_retire(s.lastActivity, t, s.cfg->retireAfterMs) && !s.busy && s.queue.empty())
          self->send(s.gateway, retire_atom::value, s.key, caf::actor_cast<caf::actor>(self));
        else
          arm_retirement(self, s.lastActivity + s.cfg->retireAfterMs - t);
      },
      // The gateway forgot this actor: nothing new reaches it.
      [=](retired_atom) { self->state.retiring = true, pump(self); },
  };
}

}  // namespace group_parts

caf::actor spawn_group_actor(caf::actor_system& sys, store::GroupKey key, std::shared_ptr<const GroupActorConfig> cfg,
                             caf::actor store, caf::actor gateway) {
  return sys.spawn(group_parts::group_actor, std::move(key), std::move(cfg), std::move(store), std::move(gateway));
}

caf::actor spawn_group_actor(caf::actor_system& sys, store::GroupKey key, GroupActorConfig cfg, caf::actor store,
                             caf::actor gateway) {
  return spawn_group_actor(sys, std::move(key), std::make_shared<const GroupActorConfig>(std::move(cfg)),
                           std::move(store), std::move(gateway));
}

}  // namespace rsc::actors
