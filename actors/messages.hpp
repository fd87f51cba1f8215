// The messages between the gateway, group and store actors (CAF 0.17). Local only: the payload
// types are whitelisted, never serialized.
#pragma once

#include <caf/all.hpp>

#include <chrono>
#include <functional>
#include <type_traits>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "actors/metrics.hpp"
#include "actors/pod_context.hpp"
#include "group/freshness.hpp"
#include "group/state.hpp"
#include "protocol/types.hpp"
#include "redis/store.hpp"

namespace rsc::actors {

using hb_atom = caf::atom_constant<caf::atom("hb")>;
using describe_atom = caf::atom_constant<caf::atom("describe")>;
using remove_atom = caf::atom_constant<caf::atom("remove")>;
using meta_atom = caf::atom_constant<caf::atom("meta")>;
using load_atom = caf::atom_constant<caf::atom("load")>;
using cas_atom = caf::atom_constant<caf::atom("cas")>;
using lease_atom = caf::atom_constant<caf::atom("lease")>;
using task_atom = caf::atom_constant<caf::atom("task")>;
using flush_atom = caf::atom_constant<caf::atom("flush")>;
using resume_atom = caf::atom_constant<caf::atom("resume")>;
using due_atom = caf::atom_constant<caf::atom("due")>;
using delete_atom = caf::atom_constant<caf::atom("delete")>;
using reset_atom = caf::atom_constant<caf::atom("reset")>;
using retire_atom = caf::atom_constant<caf::atom("retire")>;
using retired_atom = caf::atom_constant<caf::atom("retired")>;
using finish_atom = caf::atom_constant<caf::atom("finish")>;
using beat_atom = caf::atom_constant<caf::atom("beat")>;
using watchdog_atom = caf::atom_constant<caf::atom("watchdog")>;
using sweep_atom = caf::atom_constant<caf::atom("sweep")>;
using configure_atom = caf::atom_constant<caf::atom("configure")>;
using target_atom = caf::atom_constant<caf::atom("target")>;


class StoreWatch;

struct GroupActorConfig {
  group::Config core;
  group::Millis mutexTtlMs = 2000;  // how long deadline work may hold the group mutex
  int32_t defaultShardCount = 16;
  int maxCasAttempts = 5;
  // A store call not answered within this is given up: heartbeats get RETRY (SPEC §3 rule 8:
  // the pod treats the time as an outage).
  group::Millis storeDeadlineMs = 1000;
  group::Millis retireAfterMs = 45000;  // an idle group actor leaves memory after this (0: never)
  int64_t maxGroupsPerStream = 0;       // 0: no limit
  std::shared_ptr<PodContext> pod;      // the store's clock, availability, tick duty
  std::shared_ptr<Metrics> metrics;     // may be null
  // The gateway's one timer for its actors' store calls (actors/store_watch.hpp); null: each
  // group actor keeps a timer of its own.
  std::shared_ptr<StoreWatch> storeWatch;
  std::string podToken;                 // this pod's mutex token
  bool logEvents = true;
  std::string consumerGroupStartId = "0";  // where a new Redis consumer group starts reading
  std::map<std::string, std::string> consumerGroupStartFor;  // "<prefix>/<group>" -> "0" | "$"
  // The timings every answer carries (the member paces itself by them).
  protocol::Timings timings() const { return {core.heartbeatIntervalMs, core.rebalanceTimeoutMs, core.memberLeaseTtlMs}; }
  const std::string& start_id(const store::GroupKey& key) const {
    auto it = consumerGroupStartFor.find(key.str());
    return it == consumerGroupStartFor.end() ? consumerGroupStartId : it->second;
  }
};

// To a group actor.
struct HeartbeatCall {
  protocol::HeartbeatRequest req;
  std::function<void(protocol::HeartbeatResponse)> done;
};
struct DescribeCall {
  std::function<void(store::Result<std::optional<std::string>>)> done;
  bool fresh = false;  // the shard streams read now, not the lag snapshot (http::Backend::describe)
};
struct RemoveCall {
  std::string memberId;
  std::function<void(store::Result<bool>)> done;
};
// An admin's reset of the group's position on every shard (`to`: a Redis id, "0" or "$").
struct ResetCall {
  std::string to;
  bool fenceMembers = false;
  std::function<void(store::Result<store::OffsetsReset>)> done;
};
struct DeleteCall {
  bool fenceMembers = false;
  std::function<void(store::Result<store::GroupDeletion>)> done;
};
// An admin's choice of the group's assignor and shard racks (PUT .../groups/{group}).
struct ConfigureCall {
  protocol::GroupConfig config;
  std::function<void(store::Result<protocol::GroupConfigSet>)> done;
  // A link: the group's stream as the check read it from the store (both streams then had its
  // shard count): the group learns it first if its copy is older, then group::link_outdated.
  std::optional<protocol::StreamMetadata> linkStream;
};

// An admin's (or a controller's) target for an external group (PUT .../groups/{group}/target).
struct TargetCall {
  protocol::PostedTarget posted;
  std::function<void(store::Result<protocol::TargetPosted>)> done;
};

// To the store actor.
struct LoadCall {
  store::GroupKey key;
  int32_t defaultShardCount = 16;
  bool createStream = false;  // a heartbeat creates a missing stream; a describe must not
  bool countGroups = false;   // for a group that does not exist: how many the stream has
  int64_t giveUpAt = group::kNeverGiveUp;  // pod-local ms: not run from then on (group::store_call_abandoned)
  bool readStream = false;    // describe: the group's position on the shards too (best effort) ...
  bool freshReading = false;  // ... read from the shard streams now, not the lag snapshot
};
struct LoadReply {
  store::Result<store::Loaded> loaded;
  store::Result<protocol::StreamMetadata> stream;  // created with the default count if missing
  std::optional<int64_t> groupsInStream;
  std::optional<group::StreamReading> reading;  // readStream: when it could be read
  group::LagReadingAge readingAge;              // readStream: where it comes from, and when it was read
};
struct CasCall {
  store::GroupKey key;
  int64_t expectedRevision = 0;
  std::shared_ptr<group::GroupState> next;
  std::shared_ptr<group::Delta> delta;  // null = full write
  std::string lockToken;
  group::Millis lockTtlMs = 0;  // 0: the mutex is checked, not taken (see store::CasRequest)
  std::optional<group::Millis> lowerDeadlineTo;
  int64_t giveUpAt = group::kNeverGiveUp;
  bool verifyOnly = false;  // see store::CasRequest
  // The shard streams to give the Redis consumer group (from startId) before the write; when
  // that fails, nothing is written (group::WritePlan::provision).
  int32_t provisionShards = 0;
  std::string startId = "0";
};
struct CasReply {
  store::Result<store::CasResult> result;
};
struct LeaseCall {
  store::GroupKey key;
  std::string token;
  group::Millis ttl = 2000;
  int64_t knownRevision = -1;
  int64_t giveUpAt = group::kNeverGiveUp;
};
struct LeaseReply {
  store::Result<store::TickLease> result;
  // The group's stream as it is now (read while the lease is this pod's): a stream that grew
  // reaches the group's owner through its deadline work.
  std::optional<protocol::StreamMetadata> stream;
  // How many dead letters the group has (for /metrics; refreshed with each deadline work).
  std::optional<int64_t> deadLetters;
};
struct FinishCall {
  store::GroupKey key;
  std::string token;
  std::optional<group::Millis> due;
  int64_t revision = 0;
};
struct FinishReply {
  store::Result<bool> result;
};
struct DeleteStoreCall {
  store::GroupKey key;
  int64_t expectedRevision = 0;
  int64_t grantsHeldUntilMs = 0;  // group::grants_held_after_delete
};
struct ResetStoreCall {
  store::GroupKey key;
  int32_t shardCount = 0;
  std::string to;
  int64_t expectedRevision = 0;  // the state the reset was judged on
};
struct ResetStoreReply {
  store::Result<store::GroupStore::OffsetsMoved> result;
};
struct DeleteStoreReply {
  store::Result<store::DeleteStatus> result;
};
// Any other store work, run on the store actor's thread; it answers through its own callback.
// A task takes the part of the store it uses (store::GroupStateStore, StreamStore or PodRegistry,
// or group state and streams together); only the store actor holds the whole.
struct StoreTask {
  StoreTask() = default;
  template <typename F, typename = std::enable_if_t<!std::is_same_v<std::decay_t<F>, StoreTask>>>
  StoreTask(F f) : run(bind(std::move(f))) {}
  std::function<void(store::GroupStore&)> run;

 private:
  template <typename F>
  static std::function<void(store::GroupStore&)> bind(F f) {
    if constexpr (std::is_invocable_v<F&, store::GroupStateStore&, store::StreamStore&>) {
      return [f = std::move(f)](store::GroupStore& s) mutable { f(s, s); };
    } else {
      static_assert(std::is_invocable_v<F&, store::GroupStateStore&> || std::is_invocable_v<F&, store::StreamStore&> ||
                        std::is_invocable_v<F&, store::PodRegistry&>,
                    "a store task takes the part of the store it uses, not the whole GroupStore");
      return [f = std::move(f)](store::GroupStore& s) mutable { f(s); };
    }
  }
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
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(rsc::actors::DeleteCall)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(rsc::actors::ResetCall)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(rsc::actors::ConfigureCall)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(rsc::actors::TargetCall)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(rsc::actors::ResetStoreCall)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(rsc::actors::ResetStoreReply)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(rsc::actors::FinishCall)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(rsc::actors::FinishReply)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(rsc::actors::DeleteStoreCall)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(rsc::actors::DeleteStoreReply)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(std::vector<rsc::store::GroupKey>)
