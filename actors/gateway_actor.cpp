// The gateway actor: owns the registry of group actors and routes calls to them.
#include <set>

#include "actors/actors.hpp"
#include "actors/store_watch.hpp"
#include "log/log.hpp"

namespace rsc::actors {
namespace {

struct GatewayState {
  std::size_t index = 0, count = 1;  // this gateway serves the groups whose key hashes to index
  std::shared_ptr<const GroupActorConfig> cfg;  // shared with every group actor spawned
  caf::actor store;
  std::map<std::string, std::pair<store::GroupKey, caf::actor>> groups;
  std::shared_ptr<GroupDirectory> directory;  // may be null
};

using Self = caf::stateful_actor<GatewayState>*;

caf::actor group_for(Self self, const store::GroupKey& key) {
  auto& st = self->state;
  auto it = st.groups.find(key.str());
  if (it != st.groups.end()) return it->second.second;
  auto a = spawn_group_actor(self->system(), key, st.cfg, st.store, caf::actor_cast<caf::actor>(self));
  self->monitor(a);
  st.groups.emplace(key.str(), std::make_pair(key, a));
  if (st.directory) st.directory->put(key.str(), a);
  if (st.cfg->metrics) st.cfg->metrics->group_actor_started();
  return a;
}

// Wakes at the earliest deadline of the store calls in flight (actors/store_watch.hpp).
caf::behavior store_sweeper(caf::event_based_actor* self, std::weak_ptr<StoreWatch> watch, std::shared_ptr<PodContext> pod,
                            int64_t deadlineMs) {
  return {
      [=](sweep_atom) {
        auto w = watch.lock();
        if (!w) return self->quit();
        int64_t next = 0;
        for (auto& addr : w->overdue(pod->local_now(), deadlineMs, next))
          if (auto a = caf::actor_cast<caf::actor>(addr)) self->send(a, watchdog_atom::value);
        if (next > 0) self->delayed_send(self, std::chrono::milliseconds(next), sweep_atom::value);
      },
  };
}

caf::behavior gateway(Self self, GroupActorConfig cfg, caf::actor store, std::size_t index, std::size_t count,
                      std::shared_ptr<GroupDirectory> directory) {
  if (!cfg.storeWatch && cfg.pod) {  // one timer for the store calls of all this gateway's groups
    cfg.storeWatch = std::make_shared<StoreWatch>();
    cfg.storeWatch->sweeper = spawn_store_sweeper(self->system(), self, cfg.storeWatch, cfg.pod, cfg.storeDeadlineMs);
  }
  self->state.directory = std::move(directory);
  self->state.index = index;
  self->state.count = count;
  self->state.cfg = std::make_shared<const GroupActorConfig>(std::move(cfg));
  self->state.store = std::move(store);
  self->set_down_handler([=](const caf::down_msg& dm) {
    auto& groups = self->state.groups;
    for (auto it = groups.begin(); it != groups.end(); ++it) {
      if (it->second.second.address() == dm.source) {
        log::warn("group " + it->first + ": actor stopped (" + self->system().render(dm.reason) + "); respawned on next use");
        if (self->state.directory) self->state.directory->erase(it->first, it->second.second);
        if (self->state.cfg->metrics) {
          self->state.cfg->metrics->forget_group(it->second.first.streamPrefix, it->second.first.consumerGroup);
          self->state.cfg->metrics->group_actor_stopped(false);
        }
        groups.erase(it);
        break;
      }
    }
  });
  self->set_exit_handler([=](const caf::exit_msg& em) {
    for (auto& [k, v] : self->state.groups) self->send_exit(v.second, em.reason);
    self->quit(em.reason);
  });
  return {
      [=](hb_atom, const store::GroupKey& key, HeartbeatCall& c) {
        self->send(group_for(self, key), hb_atom::value, std::move(c));
      },
      [=](describe_atom, const store::GroupKey& key, DescribeCall& c) {
        self->send(group_for(self, key), describe_atom::value, std::move(c));
      },
      [=](remove_atom, const store::GroupKey& key, RemoveCall& c) {
        self->send(group_for(self, key), remove_atom::value, std::move(c));
      },
      [=](reset_atom, const store::GroupKey& key, ResetCall& c) {
        self->send(group_for(self, key), reset_atom::value, std::move(c));
      },
      [=](delete_atom, const store::GroupKey& key, DeleteCall& c) {
        self->send(group_for(self, key), delete_atom::value, std::move(c));
      },
      // A stream grew: each of its groups learns it (spawned here if this pod had none).
      [=](meta_atom, const store::GroupKey& key, const protocol::StreamMetadata& m) {
        self->send(group_for(self, key), meta_atom::value, m);
      },
      [=](due_atom, const store::GroupKey& key) { self->send(group_for(self, key), due_atom::value); },
      // An idle group actor asks to leave memory: it is forgotten here first, so nothing new
      // reaches it; what the mailbox already holds it finishes before it quits.
      [=](retire_atom, const store::GroupKey& key, const caf::actor& who) {
        auto& groups = self->state.groups;
        auto it = groups.find(key.str());
        if (it == groups.end() || it->second.second != who) return;
        self->demonitor(who);
        if (self->state.directory) self->state.directory->erase(key.str(), who);  // before "retired"
        groups.erase(it);
        if (self->state.cfg->metrics) {
          self->state.cfg->metrics->forget_group(key.streamPrefix, key.consumerGroup);
          self->state.cfg->metrics->group_actor_stopped(true);
        }
        self->send(who, retired_atom::value);
      },
  };
}

}  // namespace

caf::actor spawn_store_sweeper(caf::actor_system& sys, caf::event_based_actor* self, const std::shared_ptr<StoreWatch>& watch,
                               std::shared_ptr<PodContext> pod, int64_t deadlineMs) {
  std::weak_ptr<StoreWatch> w = watch;
  if (self) return self->spawn<caf::linked>(store_sweeper, std::move(w), std::move(pod), deadlineMs);
  return sys.spawn(store_sweeper, std::move(w), std::move(pod), deadlineMs);
}

std::size_t gateway_index(const store::GroupKey& key, std::size_t count) {
  return std::hash<std::string>{}(key.str()) % std::max<std::size_t>(1, count);
}

caf::actor spawn_gateway(caf::actor_system& sys, GroupActorConfig cfg, caf::actor store, std::size_t index,
                         std::size_t count, std::shared_ptr<GroupDirectory> directory) {
  return sys.spawn(gateway, std::move(cfg), std::move(store), index, count, std::move(directory));
}

}  // namespace rsc::actors
