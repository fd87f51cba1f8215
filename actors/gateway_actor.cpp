// The gateway actor: owns the registry of group actors and routes calls to them.
#include <set>

#include "actors/actors.hpp"
#include "actors/log.hpp"

namespace rsc::actors {
namespace {

struct GatewayState {
  std::size_t index = 0, count = 1;  // this gateway serves the groups whose key hashes to index
  GroupActorConfig cfg;
  caf::actor store;
  std::map<std::string, std::pair<store::GroupKey, caf::actor>> groups;
};

using Self = caf::stateful_actor<GatewayState>*;

caf::actor group_for(Self self, const store::GroupKey& key) {
  auto& st = self->state;
  auto it = st.groups.find(key.str());
  if (it != st.groups.end()) return it->second.second;
  auto a = spawn_group_actor(self->system(), key, st.cfg, st.store);
  self->monitor(a);
  st.groups.emplace(key.str(), std::make_pair(key, a));
  if (st.cfg.metrics) st.cfg.metrics->groups(static_cast<double>(st.groups.size()));
  return a;
}

caf::behavior gateway(Self self, GroupActorConfig cfg, caf::actor store, std::size_t index, std::size_t count) {
  self->state.index = index;
  self->state.count = count;
  self->state.cfg = std::move(cfg);
  self->state.store = std::move(store);
  self->set_down_handler([=](const caf::down_msg& dm) {
    auto& groups = self->state.groups;
    for (auto it = groups.begin(); it != groups.end(); ++it) {
      if (it->second.second.address() == dm.source) {
        log::warn("group " + it->first + ": actor stopped (" + self->system().render(dm.reason) + "); respawned on next use");
        if (self->state.cfg.metrics) self->state.cfg.metrics->forget_group(it->second.first.streamPrefix, it->second.first.consumerGroup);
        groups.erase(it);
        break;
      }
    }
  });
  self->set_exit_handler([=](const caf::exit_msg& em) {
    for (auto& [k, v] : self->state.groups) self->send_exit(v.second, em.reason);
    self->quit(em.reason);
  });
  self->send(self, resume_atom::value);
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
      [=](meta_atom, const protocol::StreamMetadata& m) {
        for (auto& [k, v] : self->state.groups)
          if (v.first.streamPrefix == m.streamPrefix) self->send(v.second, meta_atom::value, m);
      },
      // Every group in the store's index gets an actor here, so this pod shares tick duty and a
      // restarted pod resumes ticking. Repeated: groups created through other pods appear too,
      // and so do stream changes made through them.
      [=](resume_atom) {
        auto me = caf::actor_cast<caf::actor>(self);
        self->send(self->state.store, task_atom::value, StoreTask{[me](store::GroupStore& s) {
                     auto r = s.list_groups();
                     if (!r.ok()) return;
                     caf::anon_send(me, groups_atom::value, *r.value);
                     std::set<std::string> streams;
                     for (const auto& k : *r.value) streams.insert(k.streamPrefix);
                     for (const auto& p : streams) {
                       auto m = s.get_stream(p);
                       if (m.ok() && m.value->has_value()) caf::anon_send(me, meta_atom::value, **m.value);
                     }
                   }});
        self->delayed_send(self, std::chrono::milliseconds(std::max<group::Millis>(1000, 5 * self->state.cfg.tickIntervalMs)),
                           resume_atom::value);
      },
      [=](groups_atom, const std::vector<store::GroupKey>& keys) {
        for (const auto& k : keys)
          if (gateway_index(k, self->state.count) == self->state.index) group_for(self, k);
      },
  };
}

}  // namespace

std::size_t gateway_index(const store::GroupKey& key, std::size_t count) {
  return std::hash<std::string>{}(key.str()) % std::max<std::size_t>(1, count);
}

caf::actor spawn_gateway(caf::actor_system& sys, GroupActorConfig cfg, caf::actor store, std::size_t index,
                         std::size_t count) {
  return sys.spawn(gateway, std::move(cfg), std::move(store), index, count);
}

}  // namespace rsc::actors
