// How an actor asks the store actor with at most one call in flight, given up after a deadline on
// the pod's clock (group::StoreCallLine says when). No CAF per-request timeout: its clock entry per
// request woke CAF's clock thread once per heartbeat. A late reply of a call given up is dropped.
// Only the group actor (actors/group_actor_parts.hpp) includes this header; its state has `asker`
// and `busy`.
#pragma once

#include <algorithm>
#include <chrono>
#include <functional>
#include <string>
#include <tuple>
#include <utility>

#include "actors/messages.hpp"
#include "actors/store_watch.hpp"
#include "group/freshness.hpp"
#include "redis/result.hpp"

namespace rsc::actors {

struct StoreAsker {
  group::StoreCallLine line;
  std::function<void()> giveUp;  // the error half of the call in flight, run when it is given up
  bool watchdog = false;         // a watchdog message is on its way
};

template <class Self>
void arm_store_watchdog(Self self, int64_t in) {
  auto& a = self->state.asker;
  if (std::exchange(a.watchdog, true)) return;
  self->delayed_send(self, std::chrono::milliseconds(std::max<int64_t>(1, in)), watchdog_atom::value);
}

// The watchdog message came at local time `now`: the call in flight is given up when its deadline
// passed (its error half runs; true), else the watchdog waits for the rest.
// With the gateway's watch, the watchdog message comes from its sweeper (which looks again while
// the call is in flight); without one, from this actor's own timer.
template <class Self>
bool store_watchdog_fired(Self self, int64_t now, int64_t deadlineMs) {
  auto& a = self->state.asker;
  auto* watch = self->state.cfg->storeWatch.get();
  if (!watch) a.watchdog = false;
  const auto in = a.line.give_up_in(now, deadlineMs);
  if (in > 0 && !watch) arm_store_watchdog(self, in);
  if (in != 0) return false;
  if (watch) watch->ended(self->id());
  self->state.busy = false;
  if (auto giveUp = std::exchange(a.giveUp, nullptr)) giveUp();
  return true;
}

// A store call begins at local time `now`: watched by the gateway's sweeper, or by a timer of the
// actor's own.
template <class Self>
void watch_store_call(Self self, int64_t now, int64_t deadlineMs) {
  auto* watch = self->state.cfg->storeWatch.get();
  if (!watch) return arm_store_watchdog(self, deadlineMs);
  if (watch->began(self->id(), self->address(), now))
    self->delayed_send(watch->sweeper, std::chrono::milliseconds(std::max<int64_t>(1, deadlineMs)), sweep_atom::value);
}

// Call number `seq`, made at local time `now`: `args` go to `store`; one of onReply(Reply&) and
// onError(const store::Error&) runs, then after(self). While onReply runs, line.replying() is `seq`.
template <class Reply, class Self, class Args, class OnReply, class OnError, class After>
void ask_store(Self self, const caf::actor& store, uint64_t seq, int64_t now, int64_t deadlineMs, Args args,
               OnReply onReply, OnError onError, After after) {
  auto& st = self->state;
  st.asker.line.begin(seq, now);
  st.busy = true;
  st.asker.giveUp = [=]() mutable {
    onError(store::Error{store::ErrorKind::Retryable, "the store did not answer within " + std::to_string(deadlineMs) + "ms"});
  };
  watch_store_call(self, now, deadlineMs);
  auto awaited = [self, seq] {
    auto& s = self->state;
    if (!s.asker.line.replied(seq)) return false;
    if (auto* watch = s.cfg->storeWatch.get()) watch->ended(self->id());
    s.asker.giveUp = nullptr, s.busy = false;
    return true;
  };
  std::apply([&](auto&&... xs) { return self->request(store, caf::infinite, std::forward<decltype(xs)>(xs)...); },
             std::move(args))
      .then([=](Reply& r) mutable { if (awaited()) onReply(r), after(self); },
            [=](caf::error& e) mutable {
              if (awaited()) onError(store::Error{store::ErrorKind::Retryable, "store actor: " + self->system().render(e)}), after(self);
            });
}

}  // namespace rsc::actors
