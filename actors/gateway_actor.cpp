// The gateway actor: owns the registry of group actors and routes calls to them.
#include <set>

#include "actors/actors.hpp"
#include "actors/store_watch.hpp"
#include "log/log.hpp"

namespace rsc::actors {
namespace {

// A group whose actor is retiring: forgotten for new calls, but still finishing what its mailbox
// held. Calls for the group wait here until it is gone, then go to a new actor: never two actors
// (two copies of the group, each answering from its own) at once.
struct Retiring {
  store::GroupKey key;
  caf::actor actor;
  std::vector<std::function<void(const caf::actor&)>> waiting;  // in arrival order
};

struct GatewayState {
  std::size_t index = 0, count = 1;  // this gateway serves the groups whose key hashes to index
  std::shared_ptr<const GroupActorConfig> cfg;  // shared with every group actor spawned
  caf::actor store;
  std::map<std::string, std::pair<store::GroupKey, caf::actor>> groups;
  std::map<std::string, Retiring> retiring;
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

// A call for the group `key`: to its actor, or, while its previous actor is still retiring, held
// until that one is gone.
template <class Atom, class Payload>
void route(Self self, const store::GroupKey& key, Atom atom, Payload&& p) {
  auto& st = self->state;
  if (auto it = st.retiring.find(key.str()); it != st.retiring.end()) {
    auto held = std::make_shared<std::decay_t<Payload>>(std::forward<Payload>(p));
    it->second.waiting.emplace_back([self, atom, held](const caf::actor& a) { self->send(a, atom, std::move(*held)); });
    return;
  }
  self->send(group_for(self, key), atom, std::forward<Payload>(p));
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
    auto& ret = self->state.retiring;
    for (auto it = ret.begin(); it != ret.end(); ++it) {
      if (it->second.actor.address() != dm.source) continue;
      // Gone: what waited for it goes to a new actor, in order.
      auto waiting = std::move(it->second.waiting);
      const store::GroupKey key = it->second.key;
      ret.erase(it);
      if (!waiting.empty()) {
        const caf::actor next = group_for(self, key);
        for (auto& send : waiting) send(next);
      }
      return;
    }
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
    for (auto& [k, r] : self->state.retiring) self->send_exit(r.actor, em.reason);
    self->quit(em.reason);
  });
  return {
      [=](hb_atom, const store::GroupKey& key, HeartbeatCall& c) { route(self, key, hb_atom::value, std::move(c)); },
      [=](describe_atom, const store::GroupKey& key, DescribeCall& c) { route(self, key, describe_atom::value, std::move(c)); },
      [=](remove_atom, const store::GroupKey& key, RemoveCall& c) { route(self, key, remove_atom::value, std::move(c)); },
      [=](reset_atom, const store::GroupKey& key, ResetCall& c) { route(self, key, reset_atom::value, std::move(c)); },
      [=](configure_atom, const store::GroupKey& key, ConfigureCall& c) { route(self, key, configure_atom::value, std::move(c)); },
      [=](target_atom, const store::GroupKey& key, TargetCall& c) { route(self, key, target_atom::value, std::move(c)); },
      [=](delete_atom, const store::GroupKey& key, DeleteCall& c) { route(self, key, delete_atom::value, std::move(c)); },
      // A stream grew: each of its groups learns it (spawned here if this pod had none).
      [=](meta_atom, const store::GroupKey& key, const protocol::StreamMetadata& m) {
        route(self, key, meta_atom::value, protocol::StreamMetadata(m));
      },
      [=](due_atom, const store::GroupKey& key) {
        if (auto it = self->state.retiring.find(key.str()); it != self->state.retiring.end()) {
          it->second.waiting.emplace_back([self](const caf::actor& a) { self->send(a, due_atom::value); });
          return;
        }
        self->send(group_for(self, key), due_atom::value);
      },
      // An idle group actor asks to leave memory: it is forgotten here first, so nothing new
      // reaches it; what the mailbox already holds it finishes before it quits, and calls for the
      // group meanwhile wait for it to be gone (still monitored: its down message ends the wait).
      [=](retire_atom, const store::GroupKey& key, const caf::actor& who) {
        auto& groups = self->state.groups;
        auto it = groups.find(key.str());
        if (it == groups.end() || it->second.second != who) return;
        if (self->state.directory) self->state.directory->erase(key.str(), who);  // before "retired"
        groups.erase(it);
        auto& r = self->state.retiring[key.str()];
        r.key = key;
        r.actor = who;
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
