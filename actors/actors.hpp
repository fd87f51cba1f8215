// Spawning the coordinator's actors. Tests use these with CAF's deterministic scheduler.
#pragma once

#include <caf/all.hpp>

#include "actors/messages.hpp"

namespace rsc::actors {

// Owns a GroupStore (hiredis blocks: spawn it detached in production). CAS calls that arrive
// together are written as one pipelined batch.
caf::actor spawn_store_actor(caf::actor_system& sys, std::shared_ptr<store::GroupStore> store, bool detached);

// One consumer group: serializes its heartbeats, ticks and admin calls; never blocks; at most
// one store write in flight.
caf::actor spawn_group_actor(caf::actor_system& sys, store::GroupKey key, GroupActorConfig cfg, caf::actor store);

// Owns the registry of group actors: spawns one per group on first use and for every group in
// the store's index (at start and periodically, so tick duty spreads over pods).
// With several gateways (one per store connection) gateway `index` of `count` serves the groups
// for which gateway_index() says so.
caf::actor spawn_gateway(caf::actor_system& sys, GroupActorConfig cfg, caf::actor store, std::size_t index = 0,
                         std::size_t count = 1);
std::size_t gateway_index(const store::GroupKey& key, std::size_t count);

}  // namespace rsc::actors
