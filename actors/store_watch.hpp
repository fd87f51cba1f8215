// One timer for all the group actors of a gateway that wait on a store call, instead of one timer
// per call: each per-call delayed message woke CAF's clock thread, about 4 µs of a written
// heartbeat's CPU. A group actor starting a call notes it here; the sweeper actor wakes
// at the earliest deadline among the calls still in flight and sends `watchdog` to the actors whose
// call is overdue, which give it up as before (actors/store_asker.hpp decides, on its own line).
// A group actor spawned without a watch (tests of one actor) keeps a timer of its own.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "actors/messages.hpp"

namespace rsc::actors {

class StoreWatch {
 public:
  // Actor `who` (its id `id`) began a store call at local time `now`. True when no sweep is on its
  // way: the caller then sends the sweeper one, due at the call's deadline.
  bool began(caf::actor_id id, caf::actor_addr who, int64_t now) {
    std::lock_guard<std::mutex> lock(mu_);
    calls_[id] = Call{std::move(who), now, true};  // an actor's entry is reused until a sweep prunes it
    return !std::exchange(armed_, true);
  }
  // Its call was answered or given up. The entry stays, closed, until the next sweep: an actor
  // writing again before then allocates nothing (a written heartbeat made and freed one each).
  void ended(caf::actor_id id) {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = calls_.find(id); it != calls_.end()) {
      it->second.open = false;
      it->second.who = nullptr;
    }
  }
  // A sweep at local time `now`: the actors whose call is `deadlineMs` old or more (forgotten
  // here: each gives its call up), and in `next` how long until the next call in flight reaches
  // its deadline (0: none in flight; the next began() arms a sweep again).
  std::vector<caf::actor_addr> overdue(int64_t now, int64_t deadlineMs, int64_t& next) {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<caf::actor_addr> out;
    next = 0;
    for (auto it = calls_.begin(); it != calls_.end();) {
      if (!it->second.open) {  // ended since: pruned
        it = calls_.erase(it);
        continue;
      }
      const int64_t due = it->second.since + deadlineMs;
      if (due <= now) {
        out.push_back(std::move(it->second.who));
        it = calls_.erase(it);
        continue;
      }
      next = next == 0 ? due - now : std::min(next, due - now);
      ++it;
    }
    armed_ = next > 0;
    return out;
  }
  std::size_t in_flight() {
    std::lock_guard<std::mutex> lock(mu_);
    return static_cast<std::size_t>(std::count_if(calls_.begin(), calls_.end(), [](const auto& c) { return c.second.open; }));
  }
  std::size_t entries() {  // open or closed and not yet pruned
    std::lock_guard<std::mutex> lock(mu_);
    return calls_.size();
  }
  caf::actor sweeper;  // set once, before any group actor uses the watch

 private:
  struct Call {
    caf::actor_addr who;  // weak: an actor that stopped with a call in flight is not kept alive
    int64_t since = 0;
    bool open = false;  // a call in flight (false: ended, kept for reuse until the next sweep)
  };
  std::mutex mu_;
  std::unordered_map<caf::actor_id, Call> calls_;
  bool armed_ = false;
};

// The sweeper of `watch` (which it does not keep alive), sweeping on `pod`'s local clock. `self`
// spawns it linked (it stops with the gateway); with no `self` it is spawned alone (tests stop it).
caf::actor spawn_store_sweeper(caf::actor_system& sys, caf::event_based_actor* self, const std::shared_ptr<StoreWatch>& watch,
                               std::shared_ptr<PodContext> pod, int64_t deadlineMs);

}  // namespace rsc::actors
