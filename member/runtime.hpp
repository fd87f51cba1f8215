// The member runtime (SPEC §6): what an application links to consume a sharded stream through the
// coordinator. It heartbeats, reads only the shards it is given, drains and acks revocations,
// rejoins when fenced, and fences itself when it cannot prove it is still a member.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "member/membership.hpp"
#include "member/record.hpp"
#include "redis/connection.hpp"
#include "redis/keys.hpp"

namespace rsc::member {

// CLOCK_MONOTONIC in nanoseconds: comparable across processes on one machine.
int64_t mono_ns();

// A heartbeat's outcome, for logs and tests.
struct HeartbeatEvent {
  int64_t sentNs = 0;
  int64_t receivedNs = 0;
  int httpStatus = 0;
  std::string status;  // the HeartbeatStatus, or "" when no answer came
  int32_t epoch = 0;
  std::vector<int32_t> owned;  // what the member may read after this answer
  int revokedReported = 0;     // shards this request reported REVOKED (drained and handed back)
};

struct RuntimeOptions {
  std::string coordinatorUrl = "http://127.0.0.1:8080";
  std::string token;  // bearer token, if the coordinator wants one
  store::RedisOptions redis;
  // How shard streams are named, "{shardIndex}" standing for the index ("orders:{shardIndex}").
  // Empty: learned from the coordinator (GET /coord/v1/streams/{prefix}) before anything is read.
  std::string streamKeyPattern;
  std::string streamPrefix;
  std::string group;
  std::string memberId;  // empty: member_id_from_environment(concurrency suffix)
  int concurrency = 1;   // worker threads; a shard is read by one worker at a time
  int readCount = 10;
  int64_t maxBlockMs = 500;        // XREADGROUP BLOCK cap (a revoke waits for the read to return)
  int64_t selfFenceMarginMs = 0;   // 0: a quarter of the lease, at least 200 ms
  int64_t httpTimeoutMs = 2000;
  // Listen on the group's change channel (Redis sharded pub/sub) and heartbeat at once when the
  // coordinator says this member has shards to give up or take; off: only at the interval.
  bool listenForChanges = true;
  std::function<void(const std::string&)> log;
  std::function<void(const HeartbeatEvent&)> onHeartbeat;

  // What happens to the member's shards, as Kafka's ConsumerRebalanceListener tells it. Each is
  // called from the runtime's heartbeat thread, one call at a time and never while the runtime
  // holds its lock; a call delays the next heartbeat, so keep it well under the lease.
  //  - onAssigned: the member starts (or, after a self-fence, resumes) reading these shards.
  //  - onRevoking: the member was asked to give these up; reading them has stopped, records
  //    already in the handler finish, and the shards are not handed back before this returns
  //    (flush or commit what you hold for them here).
  //  - onLost: these are no longer the member's and may already be read by another: it was
  //    fenced or unknown (they are dropped), or it fenced itself for want of answered heartbeats
  //    (reading stopped; onAssigned follows if heartbeats are answered again). Do not commit.
  std::function<void(const std::vector<int32_t>&)> onAssigned;
  std::function<void(const std::vector<int32_t>&)> onRevoking;
  std::function<void(const std::vector<int32_t>&)> onLost;
};

// The handler runs once per record; the record is acked when it returns. `startNs` is taken
// before the self-fence check that allowed the call.
using Handler = std::function<void(const Record&, int64_t startNs)>;

// memberId from env POD_IP, else the host's first non-loopback IPv4 address, plus ":" + suffix.
std::string member_id_from_environment(const std::string& suffix);

class Runtime {
 public:
  Runtime(RuntimeOptions opts, Handler handler);
  ~Runtime();  // stops without leaving (like a crash, but joins the threads)

  void start();
  // Graceful: leave with epoch -1, stop reading, drain, report every shard revoked; returns
  // when the coordinator has let go (true) or after timeoutMs (false).
  bool shutdown(int64_t timeoutMs = 10000);

  // processed, heartbeats, heartbeatFailures, rejoins, selfFences, notifications (change
  // notifications naming this member, each made it heartbeat at once), and:
  struct Stats : MembershipCounters {
    int32_t epoch = 0;
    std::vector<int32_t> owned;
  };
  Stats stats() const;
  const std::string& member_id() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace rsc::member
