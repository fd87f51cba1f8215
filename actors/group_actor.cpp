// The group actor: a thin shell around the pure core. It serializes one group's heartbeats, ticks
// and admin calls in its mailbox, keeps the group's state cached, and writes every change through
// the store's CAS with at most one write in flight. It never blocks: store calls are requests
// whose answers come back as messages, and work that arrives meanwhile waits in a queue.
#include <chrono>
#include <deque>
#include <limits>

#include "actors/actors.hpp"
#include "actors/log.hpp"
#include "group/coordinator.hpp"
#include "group/describe.hpp"
#include "protocol/codec.hpp"

namespace rsc::actors {
namespace {

using SteadyClock = std::chrono::steady_clock;
// A store call that has not answered by then is treated as failed (RETRY), never waited on forever.
constexpr auto kStoreTimeout = std::chrono::seconds(30);
// Heartbeats of one group written together in one CAS, at most.
constexpr std::size_t kMaxBatch = 64;
using protocol::HeartbeatStatus;

struct Work {
  enum class Kind { Heartbeat, Tick, Describe, Remove, Metadata };
  Kind kind = Kind::Tick;
  HeartbeatCall hb;
  DescribeCall describe;
  RemoveCall remove;
  protocol::StreamMetadata meta;
  int attempts = 0;
  SteadyClock::time_point arrived = SteadyClock::now();  // for the latency metric
  group::Millis arrivedMs = 0;                            // on the coordinator's clock
  bool verified = false;  // an error answer is given only from a state just read from the store
  // Filled by the step, delivered once the write is stored.
  protocol::HeartbeatResponse response;
  bool removed = false;
};
using WorkPtr = std::shared_ptr<Work>;

struct GroupActorState {
  store::GroupKey key;
  GroupActorConfig cfg;
  caf::actor store;
  std::optional<group::GroupState> g;  // nullopt: load before use
  bool exists = false;
  group::Delta pending;  // changes made when adopting a loaded state, written with the next step
  std::vector<group::Event> pendingEvents;
  bool busy = false;  // a load, lease or write is in flight
  bool justLoaded = false;  // the cache was read from the store for the step about to run
  std::deque<WorkPtr> queue;
  bool tickQueued = false;
  // What the store's past demands, re-applied to every state adopted until a write carries it.
  group::Millis outageSince = 0;
  std::optional<int32_t> rollbackSeenEpoch;
  // This actor expires nobody during its first lease: an outage that ended before it started
  // (a pod restarted meanwhile) is invisible to it, and a healthy member's lease must not be
  // judged by heartbeats the store could not take.
  group::Millis startedAt = 0;
  std::map<std::string, group::Millis> revokeStarted;
};

using Self = caf::stateful_actor<GroupActorState>*;

void pump(Self self);

bool is_join(const Work& w) { return w.kind == Work::Kind::Heartbeat && w.hb.req.memberEpoch == 0; }

// Answers that say "you are not who you think" must not come from a stale cache: another pod
// may have moved the member on.
bool needs_fresh_state(const protocol::HeartbeatResponse& r, const group::Delta& d) {
  if (!d.empty()) return false;  // a write validates the cache through the CAS
  return r.status == HeartbeatStatus::UNKNOWN_MEMBER_ID || r.status == HeartbeatStatus::FENCED_MEMBER_EPOCH ||
         r.status == HeartbeatStatus::INVALID_REQUEST || r.memberEpoch == -1;
}

group::Millis now(Self self) { return self->state.cfg.clock(); }

// The core's config for expiry decisions: with expiry held back during this actor's first lease.
group::Config expiry_config(Self self) {
  auto c = self->state.cfg.core;
  if (now(self) - self->state.startedAt < c.memberLeaseTtlMs) {
    c.tombstoneRetentionMs = c.tombstone_retention();
    c.memberLeaseTtlMs = std::numeric_limits<int32_t>::max();
  }
  return c;
}

protocol::HeartbeatResponse retry_response(Self self, const protocol::HeartbeatRequest& req, const std::string& why) {
  auto r = protocol::error_response(req.requestId, req.memberId, HeartbeatStatus::RETRY, why);
  r.memberEpoch = req.memberEpoch;
  r.heartbeatIntervalMs = self->state.cfg.core.heartbeatIntervalMs;
  r.rebalanceTimeoutMs = self->state.cfg.core.rebalanceTimeoutMs;
  r.memberLeaseTtlMs = self->state.cfg.core.memberLeaseTtlMs;
  return r;
}

void finish(Self self, const WorkPtr& w) {
  auto& m = self->state.cfg.metrics;
  switch (w->kind) {
    case Work::Kind::Heartbeat:
      if (m)
        m->heartbeat(std::string(protocol::to_string(w->response.status)),
                     std::chrono::duration<double>(SteadyClock::now() - w->arrived).count());
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
    default: break;
  }
}

void store_failed(Self self, const store::Error& e) {
  auto& st = self->state;
  if (st.cfg.metrics) st.cfg.metrics->store_error(store::to_string(e.kind));
  if (st.outageSince == 0 && e.kind == store::ErrorKind::Retryable) {
    st.outageSince = now(self);
    log::warn("group " + st.key.str() + ": store unavailable, answering RETRY: " + e.message);
  } else if (e.kind != store::ErrorKind::Retryable) {
    log::error("group " + st.key.str() + ": store error (" + store::to_string(e.kind) + "): " + e.message);
  }
  st.g.reset();
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
  st.g = std::move(l.state);
  st.exists = l.exists;
  st.pending = {};
  st.pendingEvents.clear();
  if (l.rollback.detected) {
    if (st.cfg.metrics) st.cfg.metrics->rollback_detected();
    log::error("group " + st.key.str() + ": storeRevision went back from " + std::to_string(l.rollback.seenRevision) +
               " to " + std::to_string(st.g->storeRevision) + "; fencing epochs the store does not know");
    st.rollbackSeenEpoch = std::max(st.rollbackSeenEpoch.value_or(0), l.rollback.seenGroupEpoch);
  }
  if (st.rollbackSeenEpoch && st.g->groupEpoch <= *st.rollbackSeenEpoch)
    merge(self, group::recover_from_rollback(std::move(*st.g), *st.rollbackSeenEpoch, st.cfg.core, t));
  if (st.outageSince != 0) merge(self, group::resume_after_outage(std::move(*st.g), st.outageSince, t));
  if (stream && stream->metadataVersion > st.g->metadataVersion)
    merge(self, group::apply_metadata(std::move(*st.g), stream->shardCount, stream->metadataVersion, st.cfg.core, t));
}

void log_and_measure(Self self, const std::vector<group::Event>& events, const group::GroupState& g, double computeSeconds) {
  auto& st = self->state;
  auto* m = st.cfg.metrics.get();
  const auto t = now(self);
  for (const auto& e : events) {
    using K = group::Event::Kind;
    if (st.cfg.logEvents) log::info("group " + st.key.str() + ": " + group::to_string(e));
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

// Writes the step's result (and what adopting a loaded state changed), then answers.
using Batch = std::vector<WorkPtr>;

// Writes one step's result (for one work, or for a batch of heartbeats computed one after the
// other on the same state) together with what adopting a loaded state changed; then answers them.
void commit(Self self, const Batch& ws, group::Outcome&& o, double computeSeconds) {
  auto& st = self->state;
  o.delta.merge(st.pending);
  std::vector<group::Event> events = std::move(st.pendingEvents);
  for (auto& e : o.events) events.push_back(std::move(e));
  st.pending = {};
  st.pendingEvents.clear();
  if (o.delta.empty()) {
    st.g = std::move(o.state);
    for (const auto& w : ws) finish(self, w);
    return;
  }
  st.busy = true;
  CasCall call;
  call.key = st.key;
  call.expectedRevision = o.state.storeRevision;
  call.next = std::make_shared<group::GroupState>(std::move(o.state));
  if (st.exists) call.delta = std::make_shared<group::Delta>(std::move(o.delta));  // else: a full first write
  call.lockToken = st.cfg.podToken;  // the mutex is checked, not held (lockTtlMs 0)
  st.g.reset();                      // the cache is the write in flight until the store says so
  auto next = call.next;
  auto ev = std::make_shared<std::vector<group::Event>>(std::move(events));
  self->request(st.store, kStoreTimeout, cas_atom::value, std::move(call))
      .then(
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
                s.g = std::move(*next);
                s.g->storeRevision = r.revision;
                s.exists = true;
                if (s.outageSince != 0)
                  log::info("group " + s.key.str() + ": store reachable again after " +
                            std::to_string(now(self) - s.outageSince) + "ms; leases restarted from recovery");
                s.outageSince = 0;  // the write carried the recovery (every write carries `pending`)
                s.rollbackSeenEpoch.reset();
                log_and_measure(self, *ev, *s.g, computeSeconds);
                for (const auto& w : ws) finish(self, w);
                break;
              case store::CasStatus::Conflict:
              case store::CasStatus::Locked: {
                if (s.cfg.metrics) {
                  if (r.status == store::CasStatus::Conflict)
                    s.cfg.metrics->cas_conflict();
                  else
                    s.cfg.metrics->mutex_contention();
                }
                if (r.current) {  // another pod wrote first: its state comes with the answer
                  store::Loaded l{true, std::move(*r.current), r.rollback};
                  adopt(self, std::move(l), std::nullopt);
                } else {
                  s.g.reset();
                }
                // Redo the step on the fresh state, in the same order; or give up on contention.
                for (auto it = ws.rbegin(); it != ws.rend(); ++it) {
                  const auto& w = *it;
                  if (++w->attempts >= s.cfg.maxCasAttempts) {
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
            const store::Error e{store::ErrorKind::Retryable, "store actor: " + self->system().render(err)};
            for (const auto& w : ws) fail(self, w, {e.kind, "coordinator store unavailable: " + e.message});
            store_failed(self, e);
            pump(self);
          });
}

void commit(Self self, const WorkPtr& w, group::Outcome&& o, double computeSeconds) {
  commit(self, Batch{w}, std::move(o), computeSeconds);
}

void run_step(Self self, const WorkPtr& w) {
  auto& st = self->state;
  if (w->kind != Work::Kind::Heartbeat) st.justLoaded = false;
  const auto t = now(self);
  const auto started = SteadyClock::now();
  auto seconds = [&] { return std::chrono::duration<double>(SteadyClock::now() - started).count(); };
  switch (w->kind) {
    case Work::Kind::Describe: return;  // served by start_describe
    case Work::Kind::Heartbeat: {
      // Expiry is due whenever anything happens to the group, so the tick runs first, in the
      // same write. The heartbeats queued behind this one are computed on the same state and
      // written with it: one CAS for the batch (a busy group is not limited to one round trip
      // per heartbeat).
      const bool fresh = st.justLoaded;
      st.justLoaded = false;
      auto ticked = group::tick(std::move(*st.g), expiry_config(self), t);
      group::Outcome total{std::move(ticked.state), std::move(ticked.delta), std::move(ticked.events)};
      Batch batch;
      WorkPtr next = w;
      while (next) {
        auto hb = group::heartbeat(std::move(total.state), next->hb.req, st.cfg.core, t);
        total.state = std::move(hb.state);
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
        if (batch.size() < kMaxBatch && !st.queue.empty() && st.queue.front()->kind == Work::Kind::Heartbeat &&
            t - st.queue.front()->arrivedMs <= st.cfg.core.memberLeaseTtlMs) {
          next = st.queue.front();
          st.queue.pop_front();
        }
      }
      const double s = seconds();
      if (batch.empty()) {  // only error answers: the tick's findings are written on their own
        auto tickWork = std::make_shared<Work>();
        tickWork->kind = Work::Kind::Tick;
        batch.push_back(tickWork);
      }
      return commit(self, batch, std::move(total), s);
    }
    case Work::Kind::Tick: {
      auto o = group::tick(std::move(*st.g), expiry_config(self), t);
      const double s = seconds();
      return commit(self, w, std::move(o), s);
    }
    case Work::Kind::Remove: {
      auto o = group::fence_member(std::move(*st.g), w->remove.memberId, "removed by admin", st.cfg.core, t);
      w->removed = o.changed();
      const double s = seconds();
      return commit(self, w, std::move(o), s);
    }
    case Work::Kind::Metadata: {
      auto o = group::apply_metadata(std::move(*st.g), w->meta.shardCount, w->meta.metadataVersion, st.cfg.core, t);
      const double s = seconds();
      return commit(self, w, std::move(o), s);
    }
  }
}

// The error half of a store request with nothing of its own to answer: the store actor did not
// reply (timeout, or it stopped), which is a store failure like any other.
auto store_actor_failed(Self self) {
  return [=](caf::error& err) {
    self->state.busy = false;
    store_failed(self, {store::ErrorKind::Retryable, "store actor: " + self->system().render(err)});
    pump(self);
  };
}

void start_load(Self self) {
  auto& st = self->state;
  st.busy = true;
  const bool create = !st.queue.empty() && is_join(*st.queue.front());
  self->request(st.store, kStoreTimeout, load_atom::value, LoadCall{st.key, st.cfg.defaultShardCount, create})
      .then(
          [=](LoadReply& r) {
            self->state.busy = false;
            if (!r.loaded.ok()) return store_failed(self, r.loaded.error), pump(self);
            if (!r.stream.ok()) return store_failed(self, r.stream.error), pump(self);
            adopt(self, std::move(*r.loaded.value), *r.stream.value);
            self->state.justLoaded = true;
            pump(self);
          },
          store_actor_failed(self));
}

// Tick duty: only the pod holding the group's tick lease ticks it; the same round trip says
// whether another pod changed the group since this cache.
void start_tick(Self self, const WorkPtr& w) {
  auto& st = self->state;
  st.busy = true;
  LeaseCall call{st.key, st.cfg.podToken, st.cfg.mutexTtlMs, st.g ? st.g->storeRevision : -1};
  self->request(st.store, kStoreTimeout, lease_atom::value, std::move(call))
      .then(
          [=](LeaseReply& r) {
            auto& s = self->state;
            s.busy = false;
            if (!r.result.ok()) return store_failed(self, r.result.error), pump(self);
            auto& lease = *r.result.value;
            if (lease.status == store::LeaseStatus::NotHolder) return pump(self);
            if (lease.status == store::LeaseStatus::Changed) adopt(self, std::move(*lease.loaded), std::nullopt);
            if (!s.g) return pump(self);
            if (!s.exists && s.g->members.empty() && s.pending.empty()) return pump(self);  // nothing to tick
            run_step(self, w);
            pump(self);
          },
          store_actor_failed(self));
}

// Describe shows the store's state (other pods write too), read without touching this pod's cache.
void start_describe(Self self, const WorkPtr& w) {
  auto& st = self->state;
  st.busy = true;
  self->request(st.store, kStoreTimeout, load_atom::value, LoadCall{st.key, st.cfg.defaultShardCount, false})
      .then(
          [=](LoadReply& r) {
            self->state.busy = false;
            if (!r.loaded.ok()) {
              w->describe.done(store::Result<std::optional<std::string>>::failure(r.loaded.error));
            } else {
              std::optional<std::string> body;
              if (r.loaded.value->exists) body = group::describe_json(r.loaded.value->state, now(self));
              w->describe.done(store::Result<std::optional<std::string>>::success(std::move(body)));
            }
            pump(self);
          },
          [=](caf::error& err) {
            self->state.busy = false;
            w->describe.done(store::Result<std::optional<std::string>>::failure(
                {store::ErrorKind::Retryable, "store actor: " + self->system().render(err)}));
            pump(self);
          });
}

void pump(Self self) {
  auto& st = self->state;
  while (!st.busy && !st.queue.empty()) {
    const auto& front = st.queue.front();
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
    // A group cached before its stream existed is read again (creating the stream) for a join.
    if (st.g && st.g->shardCount == 0 && is_join(*front)) st.g.reset();
    // A heartbeat that waited a whole lease in this queue was given up by its member long ago
    // (it has fenced itself by now): acting on its stale report could only do harm.
    if (front->kind == Work::Kind::Heartbeat && now(self) - front->arrivedMs > st.cfg.core.memberLeaseTtlMs) {
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
}

void enqueue(Self self, WorkPtr w) {
  w->arrivedMs = now(self);
  self->state.queue.push_back(std::move(w));
  pump(self);
}

caf::behavior group_actor(Self self, store::GroupKey key, GroupActorConfig cfg, caf::actor store) {
  self->state.key = std::move(key);
  self->state.cfg = std::move(cfg);
  self->state.store = std::move(store);
  self->state.startedAt = self->state.cfg.clock();
  self->delayed_send(self, std::chrono::milliseconds(self->state.cfg.tickIntervalMs), tick_atom::value);
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
      [=](meta_atom, const protocol::StreamMetadata& m) {
        auto w = std::make_shared<Work>();
        w->kind = Work::Kind::Metadata;
        w->meta = m;
        enqueue(self, std::move(w));
      },
      [=](tick_atom) {
        self->delayed_send(self, std::chrono::milliseconds(self->state.cfg.tickIntervalMs), tick_atom::value);
        if (self->state.tickQueued) return;
        self->state.tickQueued = true;
        auto w = std::make_shared<Work>();
        w->kind = Work::Kind::Tick;
        enqueue(self, std::move(w));
      },
  };
}

}  // namespace

caf::actor spawn_group_actor(caf::actor_system& sys, store::GroupKey key, GroupActorConfig cfg, caf::actor store) {
  return sys.spawn(group_actor, std::move(key), std::move(cfg), std::move(store));
}

}  // namespace rsc::actors
