// The messages between the gateway, group and store actors (CAF 0.17). Local only: the payload
// types are whitelisted, never serialized.
#pragma once

#include <caf/all.hpp>

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "actors/metrics.hpp"
#include "group/state.hpp"
#include "protocol/types.hpp"
#include "redis/store.hpp"

namespace rsc::actors {

using hb_atom = caf::atom_constant<caf::atom("hb")>;
using describe_atom = caf::atom_constant<caf::atom("describe")>;
using remove_atom = caf::atom_constant<caf::atom("remove")>;
using meta_atom = caf::atom_constant<caf::atom("meta")>;
using tick_atom = caf::atom_constant<caf::atom("tick")>;
using load_atom = caf::atom_constant<caf::atom("load")>;
using cas_atom = caf::atom_constant<caf::atom("cas")>;
using lease_atom = caf::atom_constant<caf::atom("lease")>;
using task_atom = caf::atom_constant<caf::atom("task")>;
using flush_atom = caf::atom_constant<caf::atom("flush")>;
using resume_atom = caf::atom_constant<caf::atom("resume")>;
using groups_atom = caf::atom_constant<caf::atom("groups")>;

using Clock = std::function<group::Millis()>;

struct GroupActorConfig {
  group::Config core;
  group::Millis tickIntervalMs = 1000;
  group::Millis mutexTtlMs = 2000;  // the tick-duty lease; must exceed the tick interval
  int32_t defaultShardCount = 16;
  int maxCasAttempts = 5;
  Clock clock;                       // wall-clock milliseconds, shared by all pods
  std::shared_ptr<Metrics> metrics;  // may be null
  std::string podToken;              // this pod's mutex / lease token
  bool logEvents = true;
};

// To a group actor.
struct HeartbeatCall {
  protocol::HeartbeatRequest req;
  std::function<void(protocol::HeartbeatResponse)> done;
};
struct DescribeCall {
  std::function<void(store::Result<std::optional<std::string>>)> done;
};
struct RemoveCall {
  std::string memberId;
  std::function<void(store::Result<bool>)> done;
};

// To the store actor.
struct LoadCall {
  store::GroupKey key;
  int32_t defaultShardCount = 16;
  bool createStream = false;  // a heartbeat creates a missing stream; a describe must not
};
struct LoadReply {
  store::Result<store::Loaded> loaded;
  store::Result<protocol::StreamMetadata> stream;  // created with the default count if missing
};
struct CasCall {
  store::GroupKey key;
  int64_t expectedRevision = 0;
  std::shared_ptr<group::GroupState> next;
  std::shared_ptr<group::Delta> delta;  // null = full write
  std::string lockToken;
  group::Millis lockTtlMs = 0;  // 0: the mutex is checked, not taken (see store::CasRequest)
};
struct CasReply {
  store::Result<store::CasResult> result;
};
struct LeaseCall {
  store::GroupKey key;
  std::string token;
  group::Millis ttl = 2000;
  int64_t knownRevision = -1;
};
struct LeaseReply {
  store::Result<store::TickLease> result;
};
// Any other store work, run on the store actor's thread; it answers through its own callback.
struct StoreTask {
  std::function<void(store::GroupStore&)> run;
};

}  // namespace rsc::actors

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(rsc::store::GroupKey)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(rsc::protocol::StreamMetadata)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(rsc::actors::HeartbeatCall)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(rsc::actors::DescribeCall)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(rsc::actors::RemoveCall)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(rsc::actors::LoadCall)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(rsc::actors::LoadReply)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(rsc::actors::CasCall)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(rsc::actors::CasReply)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(rsc::actors::LeaseCall)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(rsc::actors::LeaseReply)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(rsc::actors::StoreTask)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(std::vector<rsc::store::GroupKey>)
