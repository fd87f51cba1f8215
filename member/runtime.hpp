// The member runtime (SPEC §6): what an application links to consume a sharded stream through the
// coordinator. It heartbeats, reads only the shards it is given, drains and acks revocations,
// rejoins when fenced, and fences itself when it cannot prove it is still a member.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "member/http_client.hpp"
#include "member/membership.hpp"
#include "member/record.hpp"
#include "redis/redis_options.hpp"

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
  std::string coordinator;     // the URL it went to (the configured one, or the group's owner pod)
};

struct RuntimeOptions {
  std::string coordinatorUrl = "http://127.0.0.1:8080";  // or https://...
  ClientTls coordinatorTls;  // for https://: the CA to verify the coordinator with, a client certificate
  // Send the group's heartbeats straight to the pod that owns it, as each answer names it (header
  // Rsc-Group-Owner), falling back to coordinatorUrl at once when that pod does not answer. Off:
  // every call goes to coordinatorUrl (for networks where only the Service is reachable; the pods
  // then forward the calls to the owner).
  bool followOwner = true;
  std::string token;  // bearer token, if the coordinator wants one
  // Or the file that holds it (a mounted Secret): read at start and again whenever the coordinator
  // refuses the token, so a token rotated in the file and at the coordinator needs no restart.
  std::string tokenFile;
  store::RedisOptions redis;
  // A member that cannot read its shards must not hold them: it joins only after Redis answered a
  // PING through these settings (a wrong CA, password or address keeps it out, with one log line
  // naming Redis and the reason, then a summary at most every 30 s), and when Redis fails for a
  // whole lease while it holds shards it hands them back (a leave) and joins again once Redis
  // answers. Off: it joins at once and keeps its shards however its reads fare.
  bool checkRedis = true;
  // How shard streams are named, "{shardIndex}" standing for the index ("orders:{shardIndex}").
  // Empty: learned from the coordinator (GET /coord/v1/streams/{prefix}) before anything is read.
  std::string streamKeyPattern;
  std::string streamPrefix;
  std::string group;
  // Empty: member_id_from_environment(). A static member's id is always "<memberId or
  // instanceId>.<random>", one per process (see instanceId).
  std::string memberId;
  // Static membership (KIP-345): a stable id across restarts (a StatefulSet pod's name). A restart
  // within the coordinator's static session timeout gets the same shards back with no rebalance;
  // a graceful stop sends -2 rather than -1. Empty: a plain member.
  std::string instanceId;
  // The rack (zone) this process runs in, sent when it joins: a group with the rack-aware assignor
  // gives it shards of its rack where it can. Empty: none (a Kubernetes pod takes its node's
  // topology.kubernetes.io/zone, see deploy/k8s).
  std::string rackId;
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
  // The member was refused for good (UNRELEASED_INSTANCE_ID for longer than a lease: another live
  // process holds its instance): it reads nothing and sends nothing more; the process should stop
  // (rsc-consume exits 3).
  // Called once, from the heartbeat thread, with why (it names the instance).
  std::function<void(const std::string&)> onFatal;

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
  //  - onLeftPending: a read came back after the shard stopped being this member's (the process
  //    was paused while it was on its way, past the self-fence deadline): these records were not
  //    started and stay pending for the next owner, which gets them later than newer ones (the one
  //    per-key order break a pause can cause). Called on a worker thread.
  std::function<void(int32_t shard, const std::vector<std::string>& ids)> onLeftPending;

  // A record whose handler fails is tried again after a backoff (nothing later on its shard is
  // processed meanwhile; the member's other shards go on), up to retry.maxDeliveries deliveries as
  // Redis counts them; then it is written to the group's dead-letter stream and acked.
  RetryPolicy retry;
  // The dead-letter stream; empty: dead_letter_key(redis.ns, streamPrefix, group).
  std::string deadLetterKey;
};

// The handler runs once per record; the record is acked when it returns. `startNs` is taken
// before the self-fence check that allowed the call. To fail, it throws: RetryLater (or any other
// exception) counts as a failed attempt and the record is tried again after a backoff, until its
// deliveries reach the policy's maximum; DeadLetterNow sends it to the dead-letter stream at once.
using Handler = std::function<void(const Record&, int64_t startNs)>;
struct RetryLater : std::runtime_error {
  using std::runtime_error::runtime_error;
};
struct DeadLetterNow : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// The group's dead-letter stream: "<ns>:{<prefix>/<group>}:dead" (the group's hash tag: one
// Cluster slot with its state). Each entry: id, shard, stream (the shard stream's key),
// deliveries, error, member, at (ms since the epoch), then the record's fields as "field:<name>".
std::string dead_letter_key(const std::string& ns, const std::string& streamPrefix, const std::string& group);

// A member id of its own for this process: "<host name>:<pid>:<6 random hex digits>".
std::string member_id_from_environment();
// env POD_IP, else the host's first non-loopback IPv4 address, else 127.0.0.1.
std::string address_from_environment();

class Runtime {
 public:
  Runtime(RuntimeOptions opts, Handler handler);
  ~Runtime();  // stops without leaving (like a crash, but joins the threads)

  void start();
  // Graceful: leave with epoch -1, stop reading, drain, report every shard revoked; returns
  // when the coordinator has let go (true) or after timeoutMs (false).
  bool shutdown(int64_t timeoutMs = 10000);

  // processed, heartbeats, heartbeatFailures, rejoins, selfFences, notifications (change
  // notifications naming this member, each made it heartbeat at once), failedAttempts, retried,
  // deadLettered, and:
  struct Stats : MembershipCounters {
    int32_t epoch = 0;
    std::vector<int32_t> owned;
  };
  Stats stats() const;
  const std::string& member_id() const;
  // Why the member had to stop for good (see RuntimeOptions::onFatal); "" while it goes on.
  std::string fatal() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace rsc::member
