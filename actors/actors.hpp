// Spawning the coordinator's actors. Tests use these with CAF's deterministic scheduler.
#pragma once

#include <caf/all.hpp>

#include <mutex>
#include <unordered_map>

#include "actors/messages.hpp"

namespace rsc::actors {

// Owns a GroupStore (hiredis blocks: spawn it detached in production). CAS calls that arrive
// together are written as one pipelined batch. `localNow`: the pod's local clock (PodContext::
// local_now), on which a call's giveUpAt was set.
caf::actor spawn_store_actor(caf::actor_system& sys, std::shared_ptr<store::GroupStore> store, bool detached,
                             std::function<group::Millis()> localNow);

// One consumer group: serializes its heartbeats, ticks and admin calls; never blocks; at most
// one store write in flight.
// `gateway` is asked before the actor retires (idle for cfg.retireAfterMs); may be null.
caf::actor spawn_group_actor(caf::actor_system& sys, store::GroupKey key, GroupActorConfig cfg, caf::actor store,
                             caf::actor gateway = {});
// The same, sharing one configuration among many actors (what the gateway does).
caf::actor spawn_group_actor(caf::actor_system& sys, store::GroupKey key, std::shared_ptr<const GroupActorConfig> cfg,
                             caf::actor store, caf::actor gateway = {});

// Owns the registry of group actors: spawns one per group on first use (a request, or the pod
// finding the group due in the deadline index) and forgets it when it retires.
// With several gateways (one per store connection) gateway `index` of `count` serves the groups
// for which gateway_index() says so.
// The group actors the gateways hold, readable from any thread: a heartbeat goes from the HTTP
// thread straight to its group actor (one actor hop, not two), and only a group without an actor
// goes through its gateway. Entries change only under the lock, and a send made while holding it
// reaches the actor before the gateway's "retired" does.
class GroupDirectory {
 public:
  // Sends with `send` to the group's actor while it is in the directory; false if it is not.
  bool send_if_present(const std::string& key, const std::function<void(const caf::actor&)>& send) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = actors_.find(key);
    if (it == actors_.end()) return false;
    send(it->second);
    return true;
  }
  void put(const std::string& key, const caf::actor& a) {
    std::lock_guard<std::mutex> lock(mu_);
    actors_[key] = a;
  }
  void erase(const std::string& key, const caf::actor& a) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = actors_.find(key);
    if (it != actors_.end() && it->second == a) actors_.erase(it);
  }

 private:
  std::mutex mu_;
  std::unordered_map<std::string, caf::actor> actors_;
};

caf::actor spawn_gateway(caf::actor_system& sys, GroupActorConfig cfg, caf::actor store, std::size_t index = 0,
                         std::size_t count = 1, std::shared_ptr<GroupDirectory> directory = {});
std::size_t gateway_index(const store::GroupKey& key, std::size_t count);

// The pod: renews its lease in the pod registry, keeps its clock on the store's, and hands every
// due group whose duty is its own to `onDue`, every `beatMs`. Blocking: spawn it detached (tests
// with the deterministic scheduler spawn it attached, over the in-memory store).
struct PodActorConfig {
  group::Millis beatMs = 500;
  group::Millis podLeaseMs = 5000;
  std::size_t dueLimit = 5000;
  std::function<void(const store::GroupKey&)> onDue;
  // Lag sampling (SPEC §8): every lagIntervalMs (0: off) this pod reads XINFO GROUPS of the streams
  // whose sampling duty is its own, at most lagBudgetMs of store calls per beat, into `metrics`.
  group::Millis lagIntervalMs = 0;
  group::Millis lagBudgetMs = 100;
  // Shrinks (SPEC §3 rule 9): each beat this pod looks at the draining streams whose duty is its
  // own and retires their shards once drained, no sooner than scaleInGraceMs after the shrink.
  group::Millis scaleInGraceMs = 10000;
  // Then the retired shards' streams are deleted that long after the retirement (< 0: kept).
  group::Millis retiredShardTtlMs = -1;
  std::shared_ptr<Metrics> metrics;
};
caf::actor spawn_pod_actor(caf::actor_system& sys, std::shared_ptr<store::GroupStore> store,
                           std::shared_ptr<PodContext> pod, PodActorConfig cfg, bool detached);

}  // namespace rsc::actors
