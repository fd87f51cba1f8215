// The coordinator service: the CAF actor system with its store, gateway and group actors, seen
// from outside as an http::Backend. This header includes no CAF.
#pragma once

#include <algorithm>
#include <functional>
#include <map>
#include <memory>
#include <thread>

#include "actors/metrics.hpp"
#include "http/api.hpp"
#include "redis/connection.hpp"
#include "redis/store.hpp"

namespace rsc::actors {

// The scheduler threads a pod runs: `configured`, or when 0 half the cores (at least one).
inline int scheduler_threads(int configured) {
  if (configured > 0) return configured;
  return std::max(1, static_cast<int>(std::thread::hardware_concurrency() / 2));
}

struct ServiceConfig {
  group::Config core;
  // How often the pod renews its lease and looks for due deadlines (at most every 500 ms, so that
  // readiness follows the store within a second).
  group::Millis tickIntervalMs = 1000;
  group::Millis mutexTtlMs = 2000;
  int32_t defaultShardCount = 16;
  int maxCasAttempts = 5;
  int storeConnections = 1;  // store actors, each with its own connection; groups hash over them
  // CAF worker threads that run the group actors; 0: half the cores, at least one (the HTTP
  // threads, the store actors' threads and, on a small machine, Redis need the rest).
  int schedulerThreads = 0;
  bool logEvents = true;
  group::Millis podLeaseMs = 5000;       // a pod that has not renewed for this long is gone
  std::string address;                   // where other pods reach this one (ip:port), if known yet
  group::Millis storeDeadlineMs = 1000;  // a heartbeat's store call not answered by then: RETRY
  group::Millis storeStallMs = 500;      // a round trip slower than this is an outage
  // /readyz stays ready through a store outage this long (heartbeats answer RETRY meanwhile; every
  // pod shares the store, so emptying the Service helps nobody). -1: one member lease; 0: not ready
  // at the first sign of an outage.
  group::Millis readyStoreGraceMs = -1;
  group::Millis groupRetireAfterMs = 0;  // an idle group actor leaves memory; 0 = 3 leases
  group::Millis lagIntervalMs = 10000;   // lag sampling from Redis (XINFO GROUPS) per stream; 0 = off
  // A shrink's removed shards retire no sooner than this after it started (producers that route
  // with an older copy still write to them meanwhile; twice the reference client's 5 s refresh).
  group::Millis scaleInGraceMs = 10000;
  group::Millis retiredShardTtlMs = -1;  // retired shards' streams deleted this long after (< 0: kept)
  int64_t maxGroupsPerStream = 0;        // 0 = no limit
  std::string consumerGroupStartId = "0";  // where a group's Redis consumer groups start: 0 or $
  std::map<std::string, std::string> consumerGroupStartFor;  // per group ("<prefix>/<group>")
  // The zone of each Redis node ("host:port" as CLUSTER SLOTS names it), for a stream's shard racks
  // worked out from the node serving each shard (PUT .../racks {"from": "cluster-node-zone"}).
  std::map<std::string, std::string> redisNodeZones;
  group::Millis beat_ms() const {
    return std::max<group::Millis>(50, std::min<group::Millis>({tickIntervalMs, 500, podLeaseMs / 3}));
  }
  group::Millis retire_after_ms() const {
    return groupRetireAfterMs > 0 ? groupRetireAfterMs : 3 * core.memberLeaseTtlMs;
  }
};

class Service : public http::Backend {
 public:
  // `makeStore` is called once per store actor, once for the pod actor and once for readiness
  // probes; each store must report its round trips to the observer it is given (the pod's view of
  // the store's availability), and use `commandTimeoutMs` when it is not 0.
  using MakeStore = std::function<std::shared_ptr<store::GroupStore>(std::shared_ptr<store::CallObserver>,
                                                                     group::Millis commandTimeoutMs)>;
  Service(ServiceConfig cfg, MakeStore makeStore, std::shared_ptr<Metrics> metrics);
  ~Service() override;  // stops every actor
  // Waits (at most `timeoutMs`) until the pod knows the store's clock; false if it does not yet
  // (the store is unreachable: heartbeats get RETRY until it is).
  bool wait_for_store(group::Millis timeoutMs);

  http::Placement place(const protocol::GroupKey& key) override;
  void forwarded(bool answered) override;
  // Where the other pods (and clients following kGroupOwnerHeader) reach this pod: host:port, over
  // https when `https`.
  void set_address(std::string address, bool https = false);
  const std::string& pod_id() const;
  void heartbeat(const protocol::GroupKey& key, protocol::HeartbeatRequest req,
                 std::function<void(protocol::HeartbeatResponse)> done) override;
  void write_stream(const std::string& prefix, const protocol::StreamRequest& req, bool createOnly,
                    std::function<void(http::Answer<http::StreamWritten>)> done) override;
  void producer_routing(const protocol::GroupKey& key,
                        std::function<void(http::Answer<std::optional<protocol::StreamMetadata>>)> done) override;
  void get_stream(const std::string& prefix,
                  std::function<void(http::Answer<std::optional<protocol::StreamMetadata>>)> done) override;
  void list_groups(const std::string& prefix, const http::GroupPage& page, std::function<void(http::Answer<http::StreamGroups>)> done) override;
  void list_streams(std::function<void(http::Answer<std::vector<std::string>>)> done) override;
  void describe(const protocol::GroupKey& key, bool fresh,
                std::function<void(http::Answer<std::optional<std::string>>)> done) override;
  void audit(const std::string& line) override;
  void remove_member(const protocol::GroupKey& key, const std::string& memberId,
                     std::function<void(http::Answer<bool>)> done) override;
  void delete_group(const protocol::GroupKey& key, bool fenceMembers,
                    std::function<void(http::Answer<http::Deletion>)> done) override;
  void configure_group(const protocol::GroupKey& key, protocol::GroupConfig config,
                       std::function<void(http::Answer<protocol::GroupConfigSet>)> done) override;
  void post_target(const protocol::GroupKey& key, protocol::PostedTarget target,
                   std::function<void(http::Answer<protocol::TargetPosted>)> done) override;
  void get_retention(const std::string& prefix,
                     std::function<void(http::Answer<std::optional<protocol::Retention>>)> done) override;
  void set_retention(const std::string& prefix, protocol::Retention r, std::function<void(http::Answer<bool>)> done) override;
  void scale_stream(const std::string& prefix, const http::ScaleAsk& ask,
                    std::function<void(http::Answer<http::ScaleDone>)> done) override;
  void set_stream_racks(const std::string& prefix, const protocol::StreamRacksRequest& req,
                        std::function<void(http::Answer<http::ScaleDone>)> done) override;
  void reset_offsets(const protocol::GroupKey& key, std::string position, bool fenceMembers,
                     std::function<void(http::Answer<http::OffsetsReset>)> done) override;
  void dead_letters(const protocol::GroupKey& key, int64_t limit,
                    std::function<void(http::Answer<protocol::DeadLetterPage>)> done) override;
  void redrive(const protocol::GroupKey& key, std::vector<std::string> deadLetterIds, int64_t limit,
               std::function<void(http::Answer<protocol::DeadLetterMove>)> done) override;
  void discard_dead_letters(const protocol::GroupKey& key, std::vector<std::string> deadLetterIds, int64_t limit,
                            std::function<void(http::Answer<protocol::DeadLetterMove>)> done) override;
  void ready(std::function<void(bool, std::string)> done) override;
  std::string metrics_text() override;
  Timings timings() const override;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace rsc::actors
