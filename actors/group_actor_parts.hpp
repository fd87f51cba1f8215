// What the group actor's two files share: actors/group_actor.cpp (the queue, heartbeats, deadline
// work and writes) and actors/group_admin.cpp (the admin's calls: describe, remove, delete, reset).
// Only those two files include this header.
#pragma once

#include <chrono>
#include <list>
#include <memory>
#include <string>
#include <tuple>
#include <utility>

#include "actors/actors.hpp"
#include "actors/group_report.hpp"
#include "actors/group_work.hpp"
#include "actors/store_asker.hpp"
#include "group/cached_group.hpp"

namespace rsc::actors::group_parts {

using namespace work;

struct GroupActorState {
  store::GroupKey key;
  std::shared_ptr<const GroupActorConfig> cfg;  // shared by every group actor of the gateway
  caf::actor store;
  caf::actor gateway;  // asked before this actor retires
  group::CachedGroup c;
  std::list<WorkPtr> queue;  // a deque allocates 576 bytes even empty: one per group held
  bool busy = false;         // a store call is in flight, or work is held (hold)
  bool tickQueued = false;
  GroupReport report;  // log lines, metrics, recent events
  group::Millis lastActivity = 0;
  bool retireTimer = false;
  bool retiring = false;  // the gateway forgot this actor: finish what is queued, then quit
  StoreAsker asker;       // the store call in flight (actors/store_asker.hpp)
};
using Self = caf::stateful_actor<GroupActorState>*;

// actors/group_actor.cpp
void pump(Self self);
// The store could not answer: the copy is forgotten and everything waiting is answered.
void store_failed(Self self, const store::Error& e, const Batch& inFlight = {});
// Work this pod may not do for the group now: RETRY (a grown stream is left to the group's owner).
void refuse(Self self, const Batch& ws, const std::string& why);
// Work that lost a race with another pod goes first again, or is given up on when contended.
void redo(Self self, const Batch& ws);
// The step's outcome goes to the store, or is answered from the copy (group::WritePlan).
void commit(Self self, Batch ws, group::Outcome&& o, double computeSeconds, const std::string& lockToken = {});

// actors/group_admin.cpp
// Describe shows the store's state (other pods write too), read without touching the copy.
void start_describe(Self self, const WorkPtr& w);
// A remove, delete or offsets reset, decided on the copy the step runs on.
void run_admin_step(Self self, const WorkPtr& w, group::Millis now, double computeSeconds);

inline group::Millis now(Self self) { return self->state.cfg->pod->now(); }
inline group::Millis local(Self self) { return self->state.cfg->pod->local_now(); }
inline std::shared_ptr<const group::PodView> view(Self self) { return self->state.cfg->pod->pod_view(); }
// When a store call asked now is given up (the pod's local clock, as the store watchdog's).
inline int64_t give_up_at(Self self) { return group::give_up_at(local(self), self->state.cfg->storeDeadlineMs); }
inline store::Error retryable(std::string why) { return {store::ErrorKind::Retryable, std::move(why)}; }
inline void fail(Self self, Work& w, const store::Error& e) {
  work::fail(w, e, self->state.cfg->timings(), self->state.cfg->metrics.get());
}

// One store call at a time, given up after the store deadline; then the queue goes on. Without an
// error half, a failure fails the batch `ws` (store_failed).
template <class Reply, class Args, class OnReply, class OnError>
void ask(Self self, Args args, OnReply onReply, OnError onError) {
  auto& st = self->state;
  ask_store<Reply>(self, st.store, st.c.calls().next_call(), local(self), st.cfg->storeDeadlineMs, std::move(args),
                   std::move(onReply), std::move(onError), pump);
}
template <class Reply, class Args, class OnReply>
void ask(Self self, const Batch& ws, Args args, OnReply onReply) {
  ask<Reply>(self, std::move(args), std::move(onReply), [=](const store::Error& e) { store_failed(self, e, ws); });
}
// The same for a batch held by `held` (a shared pointer to something with a `ws`): the handlers'
// copies share it instead of each copying the batch.
template <class Reply, class Held, class Args, class OnReply>
void ask_held(Self self, std::shared_ptr<Held> held, Args args, OnReply onReply) {
  ask<Reply>(self, std::move(args), std::move(onReply), [held = std::move(held), self](const store::Error& e) { store_failed(self, e, held->ws); });
}

}  // namespace rsc::actors::group_parts
