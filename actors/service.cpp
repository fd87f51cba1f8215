#include "actors/service.hpp"
#include <algorithm>
#include <atomic>
#include <memory>

#include <nlohmann/json.hpp>

#include <chrono>
#include <map>
#include <mutex>
#include <thread>

#include "actors/actors.hpp"
#include "group/co_partition.hpp"
#include "group/rack_zones.hpp"
#include "group/stream_lag.hpp"
#include "log/log.hpp"

namespace rsc::actors {

struct Service::Impl {
  caf::actor_system_config cfg;
  std::unique_ptr<caf::actor_system> sys;
  std::shared_ptr<PodContext> pod;
  group::Config core;
  group::Millis readyFreshMs = 1000;
  group::Millis readyGraceMs = 0;
  caf::actor podActor;
  caf::actor probe;  // readiness pings, on a connection of their own with a short timeout
  std::vector<caf::actor> stores;
  std::vector<caf::actor> gateways;  // groups hash to a gateway, each with its own store actor
  std::shared_ptr<GroupDirectory> directory = std::make_shared<GroupDirectory>();
  std::shared_ptr<Metrics> metrics;

  const caf::actor& gateway_for(const store::GroupKey& key) const {
    return gateways[gateway_index(key, gateways.size())];
  }
  const caf::actor& any_store() const { return stores.front(); }

  int32_t defaultShardCount = 16;
  std::map<std::string, std::string> redisNodeZones;
  GroupActorConfig groupStart;  // for start_id(): where a group's consumer groups start
  std::atomic<bool> https{false};  // the pods serve https: the owner URLs say so
  // This pod's own owner URL, made once per set_address (read with std::atomic_load on every call
  // about a group this pod serves: no lock, no string built per heartbeat).
  std::shared_ptr<const std::string> selfUrl = std::make_shared<const std::string>();
};

Service::Service(ServiceConfig cfg, MakeStore makeStore, std::shared_ptr<Metrics> metrics)
    : impl_(std::make_unique<Impl>()) {
  impl_->metrics = metrics;
  impl_->cfg.set("scheduler.max-threads", static_cast<size_t>(scheduler_threads(cfg.schedulerThreads)));
  impl_->cfg.set("logger.file-verbosity", caf::atom("quiet"));
  impl_->cfg.set("logger.console-verbosity", caf::atom("quiet"));
  // An idle scheduler thread wakes every relaxed-sleep-duration to look for work to steal
  // (10 ms by default): 200 wake-ups a second on an idle pod. Work sent to a sleeping thread
  // wakes it at once, so a longer sleep costs no latency.
  impl_->cfg.set("work-stealing.relaxed-sleep-duration", caf::timespan{std::chrono::milliseconds(250)});
  // Before that sleep, a worker polls for work: 100 spins, then 500 polls 50 us apart (25 ms of
  // nanosleep calls) by default. On a machine shared with Redis and the HTTP threads the polling
  // costs more than the wake-up it saves; a short spin then the (notified) sleep.
  impl_->cfg.set("work-stealing.aggressive-poll-attempts", size_t{10});
  impl_->cfg.set("work-stealing.moderate-poll-attempts", size_t{0});
  impl_->sys = std::make_unique<caf::actor_system>(impl_->cfg);
  GroupActorConfig g;
  g.core = cfg.core;
  g.consumerGroupStartId = cfg.consumerGroupStartId;
  g.consumerGroupStartFor = cfg.consumerGroupStartFor;
  impl_->groupStart = g;
  impl_->defaultShardCount = cfg.defaultShardCount;
  impl_->redisNodeZones = cfg.redisNodeZones;
  impl_->core = cfg.core;
  g.mutexTtlMs = cfg.mutexTtlMs;
  g.defaultShardCount = cfg.defaultShardCount;
  g.maxCasAttempts = cfg.maxCasAttempts;
  g.storeDeadlineMs = cfg.storeDeadlineMs;
  g.retireAfterMs = cfg.retire_after_ms();
  g.maxGroupsPerStream = cfg.maxGroupsPerStream;
  g.metrics = metrics;
  g.podToken = store::random_token();
  g.logEvents = cfg.logEvents;
  PodContext::Options po;
  po.podId = "pod-" + g.podToken.substr(0, 12);
  po.stallMs = cfg.storeStallMs;
  po.podLeaseMs = cfg.podLeaseMs;
  po.metrics = metrics;
  impl_->pod = std::make_shared<PodContext>(po);
  impl_->pod->set_address(cfg.address);
  impl_->selfUrl = std::make_shared<const std::string>(http::owner_url(false, cfg.address));
  g.pod = impl_->pod;
  impl_->readyFreshMs = std::max<group::Millis>(1000, 2 * cfg.beat_ms());
  impl_->readyGraceMs = cfg.readyStoreGraceMs < 0 ? cfg.core.memberLeaseTtlMs : cfg.readyStoreGraceMs;
  // One gateway per store connection: a group always meets the same store actor, whose
  // pipelined batches carry the writes of all the groups behind it.
  const auto n = static_cast<std::size_t>(std::max(1, cfg.storeConnections));
  // The store actors judge a call's giveUpAt on the clock its asker set it by.
  const std::function<group::Millis()> localNow = [pod = impl_->pod] { return pod->local_now(); };
  for (std::size_t i = 0; i < n; ++i) {
    auto st = spawn_store_actor(*impl_->sys, makeStore(impl_->pod, 0), /*detached=*/true, localNow);
    impl_->stores.push_back(st);
    impl_->gateways.push_back(spawn_gateway(*impl_->sys, g, st, i, n, impl_->directory));
  }
  PodActorConfig pc;
  pc.beatMs = cfg.beat_ms();
  pc.podLeaseMs = cfg.podLeaseMs;
  pc.lagIntervalMs = cfg.lagIntervalMs;
  pc.scaleInGraceMs = cfg.scaleInGraceMs;
  pc.retiredShardTtlMs = cfg.retiredShardTtlMs;
  pc.metrics = metrics;
  auto gateways = impl_->gateways;
  pc.onDue = [gateways](const store::GroupKey& key) {
    caf::anon_send(gateways[gateway_index(key, gateways.size())], due_atom::value, key);
  };
  impl_->podActor = spawn_pod_actor(*impl_->sys, makeStore(impl_->pod, 0), impl_->pod, pc, /*detached=*/true);
  impl_->probe = spawn_store_actor(*impl_->sys, makeStore(impl_->pod, 700), /*detached=*/true, localNow);
}

Service::~Service() {
  caf::anon_send_exit(impl_->podActor, caf::exit_reason::user_shutdown);
  caf::anon_send_exit(impl_->probe, caf::exit_reason::user_shutdown);
  for (auto& gw : impl_->gateways) caf::anon_send_exit(gw, caf::exit_reason::user_shutdown);
  for (auto& st : impl_->stores) caf::anon_send_exit(st, caf::exit_reason::user_shutdown);
  impl_->sys->await_all_actors_done();
}

bool Service::wait_for_store(group::Millis timeoutMs) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeoutMs);
  while (!impl_->pod->synced()) {
    if (std::chrono::steady_clock::now() >= until) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return true;
}

namespace {

// The store's answers, as the HTTP layer names them.
http::Problem problem(const store::Error& e) {
  using K = http::Problem::Kind;
  switch (e.kind) {
    case store::ErrorKind::Retryable: return {K::Unavailable, e.message};
    case store::ErrorKind::Invalid: return {K::Conflict, e.message};
    case store::ErrorKind::Corrupt: return {K::Corrupt, e.message};
    case store::ErrorKind::Fatal: break;
  }
  return {K::Failed, e.message};
}
template <class T>
http::Answer<T> answer(store::Result<T>&& r) {
  if (!r.ok()) return http::Answer<T>::failure(problem(r.error));
  return http::Answer<T>::success(std::move(*r.value));
}
}  // namespace

http::Placement Service::place(const store::GroupKey& key) {
  const auto view = impl_->pod->pod_view();
  auto p = view->place(key.str(), impl_->pod->local_now(), impl_->pod->synced());
  http::Placement out{p.kind, std::move(p.podId), std::move(p.address),
                      std::move(p.why), {}, view->term};
  if (out.kind == http::Placement::Kind::Here) {
    out.podId = view->self;
    out.ownerUrl = std::atomic_load(&impl_->selfUrl);
  } else if (out.kind == http::Placement::Kind::Elsewhere) {
    out.ownerUrl = std::make_shared<const std::string>(http::owner_url(impl_->https, out.address));
  }
  return out;
}

void Service::forwarded(bool answered) {
  if (impl_->metrics) impl_->metrics->forwarded(answered);
}

void Service::set_address(std::string address, bool https) {
  impl_->https = https;
  std::atomic_store(&impl_->selfUrl, std::shared_ptr<const std::string>(std::make_shared<const std::string>(http::owner_url(https, address))));
  impl_->pod->set_address(std::move(address));
}
const std::string& Service::pod_id() const { return impl_->pod->pod_id(); }

void Service::heartbeat(const store::GroupKey& key, protocol::HeartbeatRequest req,
                        std::function<void(protocol::HeartbeatResponse)> done) {
  HeartbeatCall call{std::move(req), std::move(done)};
  thread_local std::string name;  // the directory's key, built in a buffer this thread keeps
  key.str_into(name);
  if (impl_->directory->send_if_present(
          name, [&](const caf::actor& a) { caf::anon_send(a, hb_atom::value, std::move(call)); }))
    return;
  caf::anon_send(impl_->gateway_for(key), hb_atom::value, key, std::move(call));
}

namespace {
// The stream's new metadata (count, racks), told now to this pod's copy of each of its groups; the
// copies on other pods learn it at their next write or tick.
void tell_groups(const std::vector<caf::actor>& gateways, const std::string& prefix, const std::vector<std::string>& groups,
                 const protocol::StreamMetadata& m) {
  for (const auto& g : groups) {
    const store::GroupKey key{prefix, g};
    caf::anon_send(gateways[gateway_index(key, gateways.size())], meta_atom::value, key, m);
  }
}
// Why the stream's shard count may not change now (group::scale_refusal over its groups as stored).
std::optional<http::Problem> co_partition_guard(store::GroupStateStore& groups, store::StreamStore& s, const std::string& prefix) {
  auto names = s.list_stream_groups(prefix);
  if (!names.ok()) return problem(names.error);
  std::vector<group::Loaded> loaded;
  for (const auto& g : *names.value) {
    auto l = groups.load({prefix, g});
    if (!l.ok()) return problem(l.error);
    loaded.push_back(std::move(*l.value));
  }
  if (auto why = group::scale_refusal(prefix, loaded)) return http::Problem{http::Problem::Kind::Conflict, *why};
  return std::nullopt;
}
}  // namespace

void Service::write_stream(const std::string& prefix, const protocol::StreamRequest& req, bool createOnly,
                           std::function<void(http::Answer<http::StreamWritten>)> done) {
  auto gateways = impl_->gateways;
  const store::StreamPut put{req.shardCount.value_or(impl_->defaultShardCount), req.keyStyle, createOnly};
  const std::string who = req.requestedBy.empty() ? std::string() : " requested by " + req.requestedBy +
                                                                        (req.reason.empty() ? "" : " (" + req.reason + ")");
  caf::anon_send(impl_->any_store(), task_atom::value, StoreTask{[=](store::GroupStateStore& gs, store::StreamStore& s) {
                   if (req.shardCount && !createOnly) {  // a growth of a linked stream is refused
                     auto before = s.get_stream(prefix);
                     if (!before.ok()) return done(http::Answer<http::StreamWritten>::failure(problem(before.error)));
                     if (before.value->has_value() && (*before.value)->shardCount != *req.shardCount)
                       if (auto no = co_partition_guard(gs, s, prefix)) return done(http::Answer<http::StreamWritten>::failure(*no));
                   }
                   auto r = s.write_stream(prefix, put);
                   using WO = store::StreamWrite::Outcome;
                   if (r.ok() && (r.value->outcome == WO::Created || r.value->outcome == WO::Grown)) {
                     const auto& m = r.value->meta;
                     log::info("stream " + prefix + ": shardCount=" + std::to_string(m.shardCount) +
                               " metadataVersion=" + std::to_string(m.metadataVersion) +
                               " keys=" + protocol::stream_key_pattern(prefix, m.keyStyle) + who);
                     // Every group of the stream learns it now (those cached on other pods at
                     // their next write, through the CAS).
                     auto groups = s.list_stream_groups(prefix);
                     if (groups.ok()) tell_groups(gateways, prefix, *groups.value, m);
                   }
                   if (!r.ok()) return done(http::Answer<http::StreamWritten>::failure(problem(r.error)));
                   if (req.retention && r.value->outcome != WO::Exists && r.value->outcome != WO::Busy) {  // set with it
                     auto set = s.set_retention(prefix, *req.retention);
                     if (!set.ok()) return done(http::Answer<http::StreamWritten>::failure(problem(set.error)));
                     log::info("stream " + prefix + ": retention " + protocol::encode_retention(*req.retention));
                   }
                   done(http::Answer<http::StreamWritten>::success(
                       {r.value->meta, r.value->outcome}));
                 }});
}

void Service::producer_routing(const protocol::GroupKey& key,
                               std::function<void(http::Answer<std::optional<protocol::StreamMetadata>>)> done) {
  using R = http::Answer<std::optional<protocol::StreamMetadata>>;
  const std::string startId = impl_->groupStart.start_id(key);
  caf::anon_send(impl_->any_store(), task_atom::value, StoreTask{[=](store::GroupStateStore& groups, store::StreamStore& s) {
                   auto meta = s.get_stream(key.streamPrefix);
                   if (!meta.ok() || !meta.value->has_value()) return done(answer(std::move(meta)));
                   const auto& m = **meta.value;
                   // Producers write with NOMKSTREAM: the shard streams and the group's consumer
                   // group must exist before the first record. Every time (a stream deleted or a
                   // Redis restarted empty is repaired; what exists costs a BUSYGROUP answer).
                   auto p = groups.provision(key, m.shardCount, startId);
                   if (!p.ok()) return done(R::failure(problem(p.error)));
                   if (*p.value > 0)
                     log::info("group " + key.str() + ": created the consumer group on " + std::to_string(*p.value) +
                               " of " + std::to_string(m.shardCount) + " shard streams for producers");
                   done(answer(std::move(meta)));
                 }});
}

void Service::get_stream(const std::string& prefix,
                         std::function<void(http::Answer<std::optional<protocol::StreamMetadata>>)> done) {
  caf::anon_send(impl_->any_store(), task_atom::value,
                 StoreTask{[=](store::StreamStore& s) { done(answer(s.get_stream(prefix))); }});
}

void Service::get_retention(const std::string& prefix,
                            std::function<void(http::Answer<std::optional<protocol::Retention>>)> done) {
  caf::anon_send(impl_->any_store(), task_atom::value, StoreTask{[=](store::StreamStore& s) {
                   using A = http::Answer<std::optional<protocol::Retention>>;
                   auto meta = s.get_stream(prefix);
                   if (!meta.ok()) return done(A::failure(problem(meta.error)));
                   if (!meta.value->has_value()) return done(A::success(std::nullopt));
                   auto r = s.get_retention(prefix);
                   if (!r.ok()) return done(A::failure(problem(r.error)));
                   done(A::success(*r.value));
                 }});
}

void Service::scale_stream(const std::string& prefix, const http::ScaleAsk& ask,
                           std::function<void(http::Answer<http::ScaleDone>)> done) {
  auto gateways = impl_->gateways;
  caf::anon_send(impl_->any_store(), task_atom::value, StoreTask{[=](store::GroupStateStore& gs, store::StreamStore& s) {
                   using A = http::Answer<http::ScaleDone>;
                   auto meta = s.get_stream(prefix);
                   if (!meta.ok()) return done(A::failure(problem(meta.error)));
                   if (!meta.value->has_value()) return done(A::success(http::ScaleDone{protocol::ScaleOutcome::NoStream, {}, {}}));
                   if (!ask.rollback && ask.request.targetShardCount != (*meta.value)->shardCount)
                     if (auto no = co_partition_guard(gs, s, prefix)) return done(A::failure(*no));
                   group::ScaleCall call;
                   call.op = ask.rollback ? group::ScaleOp::Rollback : group::ScaleOp::Scale;
                   call.target = ask.request.targetShardCount;
                   call.requestedBy = ask.request.requestedBy;
                   call.reason = ask.request.reason;
                   auto r = s.scale_stream(prefix, call);
                   if (!r.ok()) return done(A::failure(problem(r.error)));
                   auto groups = s.list_stream_groups(prefix);
                   if (!groups.ok()) return done(A::failure(problem(groups.error)));
                   const auto& step = *r.value;
                   // Not (or no longer) draining, and no retired shard streams left to delete.
                   if (step.meta.drainingShards() == 0 && step.meta.retiredKeys() == 0) s.forget_draining(prefix);
                   if (step.changed()) {
                     const auto& m = step.meta;
                     log::info("stream " + prefix + ": scale " + std::string(group::to_string(step.outcome)) +
                               ": shardCount=" + std::to_string(m.shardCount) +
                               (m.drainingShards() > 0 ? " (shards " + std::to_string(m.shardCount) + ".." +
                                                             std::to_string(m.readShardCount() - 1) + " drain first)"
                                                       : std::string()) +
                               " metadataVersion=" + std::to_string(m.metadataVersion) +
                               (m.migration ? " migration=" + m.migration->reshardingId : std::string()) +
                               (call.requestedBy.empty() ? std::string() : " requested by " + call.requestedBy) +
                               (call.reason.empty() ? std::string() : " (" + call.reason + ")"));
                     // This pod's copies of the groups learn it now, the others' at their next tick.
                     tell_groups(gateways, prefix, *groups.value, m);
                   }
                   done(A::success(http::ScaleDone{step.outcome, step.meta, *groups.value}));
                 }});
}

void Service::set_stream_racks(const std::string& prefix, const protocol::StreamRacksRequest& req,
                               std::function<void(http::Answer<http::ScaleDone>)> done) {
  auto gateways = impl_->gateways;
  const auto zones = impl_->redisNodeZones;
  caf::anon_send(impl_->any_store(), task_atom::value, StoreTask{[=](store::StreamStore& s) {
                   using A = http::Answer<http::ScaleDone>;
                   auto meta = s.get_stream(prefix);
                   if (!meta.ok()) return done(A::failure(problem(meta.error)));
                   if (!meta.value->has_value()) return done(A::success(http::ScaleDone{protocol::ScaleOutcome::NoStream, {}, {}}));
                   group::ScaleCall call;
                   call.op = group::ScaleOp::SetRacks;
                   call.racks = req.shardRacks;
                   if (req.fromClusterZones) {
                     const auto& m = **meta.value;
                     auto nodes = s.shard_nodes(prefix, m.keyStyle, m.readShardCount());
                     if (!nodes.ok()) return done(A::failure(problem(nodes.error)));
                     auto worked = group::racks_from_zones(*nodes.value, zones);
                     if (!worked.refusal.empty())
                       return done(A::failure(http::Problem{http::Problem::Kind::Conflict, "stream " + prefix + ": " + worked.refusal}));
                     call.racks = std::move(worked.racks);
                     call.racksFrom = protocol::kShardRacksFromClusterZones;
                   }
                   auto r = s.scale_stream(prefix, call);
                   if (!r.ok()) return done(A::failure(problem(r.error)));
                   auto groups = s.list_stream_groups(prefix);
                   if (!groups.ok()) return done(A::failure(problem(groups.error)));
                   const auto& step = *r.value;
                   if (step.changed()) {
                     const auto& m = step.meta;
                     log::info("stream " + prefix + ": shard racks of " + std::to_string(m.shardRacks.size()) + " shard(s)" +
                               (m.shardRacksFrom.empty() ? std::string() : " from " + m.shardRacksFrom) +
                               " metadataVersion=" + std::to_string(m.metadataVersion));
                     tell_groups(gateways, prefix, *groups.value, m);
                   }
                   done(A::success(http::ScaleDone{step.outcome, step.meta, *groups.value}));
                 }});
}

void Service::set_retention(const std::string& prefix, protocol::Retention r, std::function<void(http::Answer<bool>)> done) {
  caf::anon_send(impl_->any_store(), task_atom::value, StoreTask{[=](store::StreamStore& s) {
                   auto set = s.set_retention(prefix, r);
                   if (set.ok() && *set.value)
                     log::info("stream " + prefix + ": retention " + protocol::encode_retention(r));
                   done(answer(std::move(set)));
                 }});
}

void Service::list_groups(const std::string& prefix, const http::GroupPage& page,
                          std::function<void(http::Answer<http::StreamGroups>)> done) {
  caf::anon_send(impl_->any_store(), task_atom::value, StoreTask{[=](store::StreamStore& s) {
                   using A = http::Answer<http::StreamGroups>;
                   auto names = s.list_stream_groups(prefix);  // sorted
                   if (!names.ok()) return done(A::failure(problem(names.error)));
                   http::StreamGroups out;
                   auto& all = *names.value;
                   out.total = all.size();
                   auto from = std::upper_bound(all.begin(), all.end(), page.after);
                   if (page.after.empty()) from = all.begin();
                   auto to = all.end();
                   if (page.limit && all.end() - from > *page.limit) to = from + *page.limit;
                   out.groups.assign(std::make_move_iterator(from), std::make_move_iterator(to));
                   if (to != all.end() && !out.groups.empty()) out.nextAfter = out.groups.back();
                   // Where each group stands: its sums in the lag snapshot (a field per group, what
                   // the last lag round read), never a reading of every group's shards per call.
                   auto sums = s.read_lag_snapshot(prefix, out.groups, true);
                   if (!sums.ok()) {
                     log::warn("stream " + prefix + ": could not read its lag snapshot for the groups' lag: " + sums.error.message);
                   } else {
                     out.lagReadAtMs = sums.value->atMs;
                     const int32_t shards = [&] {
                       auto meta = s.get_stream(prefix);
                       return meta.ok() && meta.value->has_value() ? (*meta.value)->readShardCount() : 0;
                     }();
                     for (std::size_t i = 0; i < out.groups.size(); ++i) {
                       const auto sum = sums.value->values[i] ? group::decode_lag_sums(*sums.value->values[i]) : std::nullopt;
                       if (sum) out.positions.push_back({out.groups[i], sum->unknownShards == 0 ? std::optional<int64_t>(sum->knownLag) : std::nullopt,
                                                         sum->pending, sum->unknownShards});
                       else out.positions.push_back({out.groups[i], std::nullopt, 0, shards});  // not read yet: unknown
                     }
                   }
                   done(A::success(std::move(out)));
                 }});
}

void Service::list_streams(std::function<void(http::Answer<std::vector<std::string>>)> done) {
  caf::anon_send(impl_->any_store(), task_atom::value, StoreTask{[=](store::StreamStore& s) { done(answer(s.list_streams())); }});
}

void Service::audit(const std::string& line) { log::info(line); }

void Service::describe(const protocol::GroupKey& key, bool fresh,
                       std::function<void(http::Answer<std::optional<std::string>>)> done) {
  // The group's view (its actor), then how many dead letters it has (the store): added to it.
  auto store = impl_->any_store();
  auto metrics = impl_->metrics;
  caf::anon_send(impl_->gateway_for(key), describe_atom::value, key,
                 DescribeCall{[done, key, store, metrics](store::Result<std::optional<std::string>> r) {
                   if (!r.ok() || !r.value->has_value()) return done(answer(std::move(r)));
                   auto body = std::make_shared<std::string>(std::move(**r.value));
                   caf::anon_send(store, task_atom::value, StoreTask{[done, key, body, metrics](store::GroupStateStore& s) {
                                    auto j = nlohmann::json::parse(*body, nullptr, false);
                                    auto dead = s.dead_letters(key, 0);
                                    if (dead.ok() && metrics) metrics->dead_letters(key.streamPrefix, key.consumerGroup, dead.value->total);
                                    if (j.is_object() && dead.ok()) {
                                      j["deadLetters"] = dead.value->total;
                                      *body = j.dump();
                                    }
                                    done(http::Answer<std::optional<std::string>>::success(std::move(*body)));
                                  }});
                 },
                              fresh});
}

void Service::remove_member(const protocol::GroupKey& key, const std::string& memberId,
                            std::function<void(http::Answer<bool>)> done) {
  caf::anon_send(impl_->gateway_for(key), remove_atom::value, key,
                 RemoveCall{memberId, [done](store::Result<bool> r) { done(answer(std::move(r))); }});
}

void Service::delete_group(const protocol::GroupKey& key, bool fenceMembers,
                           std::function<void(http::Answer<http::Deletion>)> done) {
  caf::anon_send(impl_->gateway_for(key), delete_atom::value, key,
                 DeleteCall{fenceMembers, [done](store::Result<store::GroupDeletion> r) {
                              if (!r.ok()) return done(http::Answer<http::Deletion>::failure(problem(r.error)));
                              done(http::Answer<http::Deletion>::success(*r.value));
                            }});
}

void Service::reset_offsets(const protocol::GroupKey& key, std::string position, bool fenceMembers,
                            std::function<void(http::Answer<http::OffsetsReset>)> done) {
  caf::anon_send(impl_->gateway_for(key), reset_atom::value, key,
                 ResetCall{std::move(position), fenceMembers, [done](store::Result<store::OffsetsReset> r) {
                             using A = http::Answer<http::OffsetsReset>;
                             if (!r.ok()) return done(A::failure(problem(r.error)));
                             done(A::success({r.value->outcome, r.value->shards}));
                           }});
}

void Service::configure_group(const protocol::GroupKey& key, protocol::GroupConfig config,
                              std::function<void(http::Answer<protocol::GroupConfigSet>)> done) {
  if (!config.coPartitionedWith) {
    caf::anon_send(impl_->gateway_for(key), configure_atom::value, key,
                   ConfigureCall{std::move(config), [done](store::Result<protocol::GroupConfigSet> r) { done(answer(std::move(r))); }});
    return;
  }
  // A link: both streams read (group::link_refusal decides), and the other group, to say whether it
  // names this one back; then this group alone is set (the other is set by its own call, at its owner).
  const caf::actor gateway = impl_->gateway_for(key);
  caf::anon_send(impl_->any_store(), task_atom::value, StoreTask{[=](store::GroupStateStore& groups, store::StreamStore& s) {
                   using A = http::Answer<protocol::GroupConfigSet>;
                   const protocol::GroupKey& with = *config.coPartitionedWith;
                   auto own = s.get_stream(key.streamPrefix);
                   if (!own.ok()) return done(A::failure(problem(own.error)));
                   auto other = s.get_stream(with.streamPrefix);
                   if (!other.ok()) return done(A::failure(problem(other.error)));
                   if (auto why = group::link_refusal(key, with, *own.value, *other.value))
                     return done(A::failure(http::Problem::Kind::Conflict, *why));
                   auto partner = groups.load(with);
                   if (!partner.ok()) return done(A::failure(problem(partner.error)));
                   const auto seen = group::partner_view(*partner.value, key);
                   if (auto why = group::partner_refusal(seen, key, with))  // before anything changes
                     return done(A::failure(http::Problem::Kind::Conflict, *why));
                   caf::anon_send(gateway, configure_atom::value, key,
                                  ConfigureCall{config,
                                                [done, seen](store::Result<protocol::GroupConfigSet> r) {
                                                  if (r.ok()) r.value->partnerLinked = seen.linksBack, r.value->partnerCoPartitionedWith = seen.names;
                                                  done(answer(std::move(r)));
                                                },
                                                *own.value});
                 }});
}

void Service::post_target(const protocol::GroupKey& key, protocol::PostedTarget target,
                          std::function<void(http::Answer<protocol::TargetPosted>)> done) {
  caf::anon_send(impl_->gateway_for(key), target_atom::value, key,
                 TargetCall{std::move(target), [done](store::Result<protocol::TargetPosted> r) { done(answer(std::move(r))); }});
}

void Service::dead_letters(const protocol::GroupKey& key, int64_t limit,
                           std::function<void(http::Answer<protocol::DeadLetterPage>)> done) {
  caf::anon_send(impl_->any_store(), task_atom::value,
                 StoreTask{[=](store::GroupStateStore& s) { done(answer(s.dead_letters(key, limit))); }});
}

void Service::redrive(const protocol::GroupKey& key, std::vector<std::string> deadLetterIds, int64_t limit,
                      std::function<void(http::Answer<protocol::DeadLetterMove>)> done) {
  caf::anon_send(impl_->any_store(), task_atom::value, StoreTask{[=](store::GroupStateStore& s) {
                   auto r = s.redrive(key, deadLetterIds, limit);
                   if (r.ok() && r.value->moved > 0)
                     log::info("group " + key.str() + ": " + std::to_string(r.value->moved) +
                               " dead letter(s) written back to their shard streams");
                   done(answer(std::move(r)));
                 }});
}

void Service::discard_dead_letters(const protocol::GroupKey& key, std::vector<std::string> deadLetterIds, int64_t limit,
                                   std::function<void(http::Answer<protocol::DeadLetterMove>)> done) {
  caf::anon_send(impl_->any_store(), task_atom::value, StoreTask{[=](store::GroupStateStore& s) {
                   auto r = s.discard_dead_letters(key, deadLetterIds, limit);
                   if (r.ok() && r.value->moved > 0)
                     log::info("group " + key.str() + ": " + std::to_string(r.value->moved) + " dead letter(s) discarded");
                   done(answer(std::move(r)));
                 }});
}

// Within a second, whatever the store does: a store the pod already knows to be down is answered
// at once; otherwise a ping on the probe's own connection (700 ms timeout), and a probe that
// queued behind a stalled ping answers from what the pod knows by then.
void Service::ready(std::function<void(bool, std::string)> done) {
  auto pod = impl_->pod;
  const auto fresh = impl_->readyFreshMs, grace = impl_->readyGraceMs;
  auto known = pod->ready(fresh, grace);
  if (!known.ready) return done(false, known.why);
  const auto asked = std::chrono::steady_clock::now();
  caf::anon_send(impl_->probe, task_atom::value, StoreTask{[=](store::PodRegistry& s) {
                   if (std::chrono::steady_clock::now() - asked > std::chrono::milliseconds(200)) {
                     auto v = pod->ready(fresh, grace);  // the probe queue is behind: what is known
                     return done(v.ready, v.why);
                   }
                   auto r = s.ping();
                   if (r.ok()) return done(true, "");
                   auto v = pod->ready(fresh, grace, r.error.message);
                   done(v.ready, v.why);
                 }});
}

http::Backend::Timings Service::timings() const {
  const auto& c = impl_->core;
  return {c.heartbeatIntervalMs, c.rebalanceTimeoutMs, c.memberLeaseTtlMs};
}

std::string Service::metrics_text() { return impl_->metrics ? impl_->metrics->text() : std::string(); }

}  // namespace rsc::actors
