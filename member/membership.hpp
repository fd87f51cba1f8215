// The member's membership machine (SPEC §6), pure: no threads, no sockets, no clock of its own.
// Every decision the member runtime makes about its membership lives here, driven by the times the
// shell passes in (CLOCK_MONOTONIC nanoseconds): what the next heartbeat says, what an answer
// changes (statuses, epochs, revocations, rejoins, leaving), when it must fence itself, which
// shards a worker may read and for how long, and whether a record may be started. The runtime
// (member/runtime.cpp) only moves bytes between this, the coordinator and Redis, under one lock.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "member/failure_pace.hpp"
#include "member/owner_follower.hpp"
#include "protocol/types.hpp"

namespace rsc::member {

// What happens to the member's shards, for the user's callbacks (onAssigned / onRevoking / onLost).
struct ShardEvent {
  enum class Kind { Assigned, Revoking, Lost };
  Kind kind = Kind::Assigned;
  std::vector<int32_t> shards;
  friend bool operator==(const ShardEvent& a, const ShardEvent& b) { return a.kind == b.kind && a.shards == b.shards; }
};

struct MembershipCounters {
  int64_t processed = 0;
  int64_t heartbeats = 0;
  int64_t heartbeatFailures = 0;
  int64_t rejoins = 0;
  int64_t selfFences = 0;
  int64_t notifications = 0;
  int64_t readInterrupts = 0;  // outstanding reads cut short because a shard they waited on was given up
  int64_t ownerFallbacks = 0;  // a followed owner did not answer: the heartbeat went again to the configured URL
  int64_t failedAttempts = 0;  // handler calls that failed (threw)
  int64_t retried = 0;         // of those, records left pending to be tried again after a backoff
  int64_t deadLettered = 0;    // records written to the dead-letter stream, then acked
  int64_t leftAfterLoss = 0;  // records a read returned after the shard stopped being this member's
                              // (past the self-fence deadline, or fenced: the process was paused while
                              // the read was on its way): never started, left pending for the next
                              // owner, who claims them later, after newer records
};

// A record whose handler keeps failing must not stop its shard forever (SPEC §6). Redis counts
// its deliveries (XREADGROUP and each claim add one; a crash or a handover does not reset it).
struct RetryPolicy {
  int64_t maxDeliveries = 5;   // attempts before the record goes to the dead-letter stream
  int64_t backoffMs = 100;     // before the 2nd attempt; doubled for each later one
  int64_t backoffMaxMs = 5000;
  // The dead-letter stream is capped near this many entries (XADD MAXLEN ~: the oldest go first);
  // 0: never trimmed.
  int64_t deadLetterMaxLen = 100000;
};
struct FailureVerdict {
  bool deadLetter = false;  // write it to the dead-letter stream and ack it
  int64_t retryInMs = 0;    // else: the shard waits this long, then the record is claimed again
};
// The handler failed on the record's `deliveries`-th delivery (`now`: it said "dead-letter now").
FailureVerdict judge_failure(int64_t deliveries, bool now, const RetryPolicy& p);
// A record delivered more often than the policy allows (a crash between its last failed attempt
// and its dead letter): it goes to the dead-letter stream without another attempt.
bool over_deliveries(int64_t deliveries, const RetryPolicy& p);

// A Redis call of the data plane failed: whether that says the member cannot read at all (no
// answer, or Redis refusing it as a client: authentication, permissions), as opposed to a refusal
// about one stream (NOGROUP, a missing key) that the next claim mends.
bool cannot_read(bool lost, const std::string& error);

class Membership {
 public:
  struct Options {
    std::string memberId;
    std::string incarnation;  // makes requestIds unique across restarts of one memberId
    int concurrency = 1;      // workers; worker i reads the shards s with s % concurrency == i
    int64_t selfFenceMarginMs = 0;  // 0: a quarter of the lease, at least 200 ms
    // A static member's stable identity (a StatefulSet pod's name): sent with every heartbeat; a
    // graceful leave then sends -2 (coming back) and the coordinator keeps its shards for it.
    std::string instanceId;
    // Where heartbeats go: the configured coordinator URL, or (followOwner) the group's owner pod
    // as the last answer named it (OwnerFollower's rules).
    std::string coordinatorUrl;
    bool followOwner = true;
    // The member joins only once its data plane (the Redis it reads the shards from) answered,
    // and hands its shards back when it has failed for a lease: a member that cannot read a shard
    // must not hold it. Off: it joins at once and keeps its shards however reads fare.
    bool checkDataPlane = true;
    std::string rackId;  // sent with a join (Kafka's RackId); empty: none
  };
  explicit Membership(Options o);

  // ---- heartbeat ------------------------------------------------------------------------
  // The next request. Remembers which shards it reports REVOKED, so the answer to it can let
  // them go; one request is outstanding at a time.
  protocol::HeartbeatRequest next_request(int64_t nowNs);
  struct Reaction {
    bool answered = false;   // the coordinator decided (anything but RETRY)
    int64_t waitMs = 0;      // until the next heartbeat (0: at once)
    // The next request goes on a new connection: the route fell back to the configured URL, or a
    // pod there answered RETRY naming no owner (it cannot place the group). A Service that keeps
    // a connection on its pod places a new one afresh, possibly on a pod that serves.
    bool reconnect = false;
  };
  // Where the next request goes (the configured URL or the group's owner pod).
  const std::string& coordinator() const { return route_.target(); }
  const OwnerFollower& route() const { return route_; }
  // The answer to the last request, which was sent at `sentNs` (the self-fence clock counts from
  // the send, never from the arrival); `ownerHeader`: the owner pod it named (Rsc-Group-Owner).
  Reaction on_response(const protocol::HeartbeatResponse& r, int64_t sentNs, const std::string& ownerHeader = {});
  // No answer at all (no coordinator, a timeout, a body that does not decode) at `nowNs`, and why.
  // From a followed owner pod: sent again at once to the configured URL (waitMs 0), which counts
  // as neither a failure nor an unanswered leave.
  Reaction on_no_answer(const std::string& why, int64_t nowNs = 0);
  // A change notification named this member: heartbeat at once.
  void on_notification();
  // Graceful leave: stop reading everything, drain, report it all, send epoch -1 (-2 with an
  // instanceId: its shards wait for it to come back).
  void leave();
  bool left() const { return left_; }
  // Left without the coordinator's answer (kUnansweredLeaveAttempts leaves went unanswered).
  bool left_unanswered() const { return leftUnanswered_; }
  static constexpr int kUnansweredLeaveAttempts = 3;
  // Why this member must stop for good (its joins were refused UNRELEASED_INSTANCE_ID for longer
  // than a lease plus two intervals and kInstanceGraceMs: another live process holds its instance);
  // "" while it may go on. Nothing is sent or read once set.
  const std::string& fatal() const { return fatal_; }
  // Fenced this many times within the window: the log says another process probably uses the id.
  static constexpr int kRepeatedFences = 3;
  static constexpr int64_t kInstanceGraceMs = 1000;
  static constexpr int64_t kRepeatedFenceWindowMs = 30000;
  bool leaving() const { return leaving_; }
  // Something wants a heartbeat before the interval is up (a drained revocation, a notification,
  // a new assignment, a leave). take_wake() reads and clears it.
  bool wake_pending() const { return wake_; }
  bool take_wake();

  // ---- the data plane's health ----------------------------------------------------------
  // The shell must check that Redis answers (a PING through the member's own Redis settings)
  // before the next heartbeat: the member is about to join (its first join, or again after it
  // handed its shards back) and Redis has not answered since it last failed. Nothing is sent
  // meanwhile: a member that cannot read is never given shards.
  bool must_probe() const;
  // A call to Redis (the probe, a read, a claim) failed for a reason that is Redis's or the
  // connection's (it could not connect, TLS, authentication, permissions) at `nowNs`: how long the
  // caller waits before its next try (doubling from kDataPlaneFirstRetryMs up to
  // kDataPlaneMaxRetryMs). A member holding shards whose Redis has failed for a whole lease, with
  // no call answered since, hands them all back (a leave, its shards going to members that can
  // read them; a static member's too) and joins again once the probe passes. `sentNs`: when the
  // failed call was sent (a blocked read fails only at its timeout): the failure counts from there,
  // and the lease is also judged at each heartbeat (next_request), so the shards go back within
  // about one lease plus one heartbeat interval of Redis going silent, not a lease after a long
  // read timed out.
  int64_t data_plane_failed(const std::string& why, int64_t nowNs, int64_t sentNs = 0);
  // A call to Redis was answered at `nowNs`.
  void data_plane_ok(int64_t nowNs);
  // Handed its shards back because Redis failed, and not yet joined again.
  bool stepped_out() const { return steppingOut_ || out_; }
  static constexpr int64_t kDataPlaneFirstRetryMs = 100;
  static constexpr int64_t kDataPlaneMaxRetryMs = 5000;

  // ---- data plane -----------------------------------------------------------------------
  // Past this, nothing may be read or started until a heartbeat is answered again (0: no
  // heartbeat was ever answered, so nothing may be read yet).
  int64_t deadline_ns() const;
  bool may_process(int64_t nowNs) const;
  bool may_read(int32_t shard, int64_t nowNs) const;  // given, not given up, and may_process
  struct Lease {
    std::vector<int32_t> shards;   // this worker reads these now (held until release)
    std::vector<int32_t> toClaim;  // of those, the ones whose pending entries must be claimed first
    int64_t deadlineNs = 0;        // the self-fence deadline when they were taken
    // The earliest time a shard of this worker left out for a failed record's backoff is due
    // (0: none): a read does not block past it.
    int64_t retryAtNs = 0;
  };
  // Takes the free shards that fall to `worker`. Past the deadline it takes nothing and fences
  // the member (once).
  Lease take_shards(int worker, int64_t nowNs);
  // How long an XREADGROUP taken at `nowNs` may block: never past the lease's deadline (minus
  // 20 ms), never more than capMs. Below 1: do not read.
  static int64_t block_ms(const Lease& l, int64_t nowNs, int64_t capMs);
  // A record may start on `shard` at `nowNs` (the returned start time, taken before the check);
  // nullopt: stop this shard's batch (given up, dropped, or past the deadline, which fences).
  std::optional<int64_t> begin_record(int32_t shard, int64_t nowNs);
  // begin_record refused the first of `n` records of a batch: how many of them were left where
  // the shard's next owner may already be reading (past the self-fence deadline, or the shard was
  // dropped by a fence; counted), 0 when it is being revoked (the revoke is reported only after
  // they are pending here, so the next owner claims them before reading on). Such a read went out
  // in time and came back late, so its records may be newer than what the next owner already
  // processed: they reach it later, by a claim.
  std::size_t not_started(int32_t shard, std::size_t n, int64_t nowNs);
  // The handler returned and the ack was (or was not) stored. false: stop the batch, the record
  // is claimed again before anything after it on this shard.
  bool record_done(int32_t shard, const std::string& id, bool acked);
  // The handler threw: not acked, claimed again; the batch stops. With `retryInMs` > 0 (a
  // FailureVerdict) nothing of the shard is read before `nowNs` + that: the record leads the claim.
  void record_failed(int32_t shard, int64_t nowNs = 0, int64_t retryInMs = 0);
  // The record was written to the dead-letter stream and acked: it counts as processed.
  // `attempted`: after a failed handler call (not for one delivered too often to try again).
  bool record_dead_lettered(int32_t shard, const std::string& id, bool attempted = true);
  // The shard's stream does not exist (deleted after its shard retired, or lost with Redis's data):
  // there is nothing to read, and the member does not create it (the coordinator does, for shards
  // in use). Looked at again kMissingStreamRetryMs later. True the first time in a row (say it once).
  bool stream_missing(int32_t shard, int64_t nowNs);
  static constexpr int64_t kMissingStreamRetryMs = 1000;
  void claimed(int32_t shard);           // its pending entries were claimed and processed
  void needs_claim(int32_t shard);       // a read failed: Redis may hold records for us
  void release(const std::vector<int32_t>& shards);  // the worker let go of its lease
  // Workers whose outstanding read must return at once: they hold a shard that was just given
  // up (a revocation, a leave) or dropped (a fence), so what is left of the handover is the drain
  // of records in the handler, not a blocked XREADGROUP. Read and cleared.
  std::vector<int> take_interrupts();
  int worker_of(int32_t shard) const { return static_cast<int>(shard % o_.concurrency); }
  // Shards of `held` whose progress (XINFO, leftovers) is due, at most once a second each.
  std::vector<int32_t> progress_due(const std::vector<int32_t>& held, int64_t nowNs);
  void set_progress(int32_t shard, std::optional<int64_t> pending, std::optional<int64_t> lag);

  // ---- for the shell --------------------------------------------------------------------
  std::vector<ShardEvent> take_events();  // in order; the shell calls the user's callbacks
  bool events_due() const { return !events_.empty(); }
  // How many shard events were ever queued: the shell wakes the heartbeat thread when it grows.
  uint64_t events_queued() const { return eventsQueued_; }
  std::vector<std::string> take_log();
  int32_t epoch() const { return epoch_; }
  bool self_fenced() const { return selfFenced_; }
  std::vector<int32_t> owned() const;  // neither given up nor dropped
  const MembershipCounters& counters() const { return counters_; }
  int64_t lease_ms() const { return leaseMs_; }
  int64_t interval_ms() const { return intervalMs_; }

 private:
  struct Shard {
    bool revoking = false;    // stop reading; REVOKED once no worker holds it and inFlight is 0
    bool dropped = false;     // fenced: forget it once the worker lets go, report nothing
    bool busy = false;        // a worker holds it
    bool needsClaim = true;   // claim what earlier owners (or this member before a fence) left pending
    int inFlight = 0;         // records inside the handler
    int64_t retryAtNs = 0;    // a failed record waits: the shard is not taken before this
    bool missing = false;     // its stream did not exist at the last claim
    std::string lastDeliveredId;
    std::optional<int64_t> pending, lag;
    int64_t infoAtNs = 0;
  };
  void event(ShardEvent::Kind k, std::vector<int32_t> shards);
  void note(std::string line) { log_.push_back(std::move(line)); }
  void self_fence();
  void drop_all(const std::string& why, int64_t nowNs);
  Reaction not_answered(const std::string& why, int64_t nowNs);
  void finish_leave();
  int64_t margin_ms() const;

  Options o_;
  OwnerFollower route_;
  std::map<int32_t, Shard> shards_;
  int32_t epoch_ = 0;
  int32_t metadataVersion_ = 0;
  int64_t lastOkSentNs_ = 0;
  int64_t leaseMs_ = 15000;
  int64_t intervalMs_ = 3000;
  int64_t backoffMs_ = 50;
  int64_t seq_ = 0;
  int busyWorkers_ = 0;
  bool leaving_ = false;
  bool left_ = false;
  bool wake_ = false;
  bool selfFenced_ = false;
  bool leftUnanswered_ = false;
  bool dataPlaneOk_ = false;   // Redis answered the last call to it
  bool steppingOut_ = false;   // leaving because Redis failed: joins again afterwards
  bool out_ = false;           // stepped out: waits for Redis before joining again
  FailurePace dataPlane_{kDataPlaneFirstRetryMs, kDataPlaneMaxRetryMs};
  int64_t dataFailingSinceNs_ = 0;  // the earliest send of a call in the current run of failures
  std::string dataFailingWhy_;       // the latest failure's reason
  void step_out_if_silent(int64_t nowNs);
  FailurePace heartbeatFailures_{50, 1000};  // for the log only: not_answered() paces the calls
  // Heartbeats the coordinator refused for a reason that changes nothing here (its token, a
  // protocol version): said once per kind, then in summaries; for the log only.
  FailurePace refusals_{1000, 1000, "asking again at each heartbeat"};
  std::string lastRefusal_;
  int unansweredLeaves_ = 0;
  int64_t instanceRefusedSinceNs_ = 0;  // the first join refused UNRELEASED_INSTANCE_ID in a row
  std::string fatal_;
  std::string joinRequestId_;  // the unanswered join's requestId, sent again until it is answered
  std::vector<int64_t> fenceTimesNs_;  // recent drop_all()s, for kRepeatedFences
  int64_t lastRepeatNoteNs_ = INT64_MIN / 2;
  std::set<int32_t> reportedRevoked_;
  std::set<int> interrupts_;
  void stop_reading(int32_t shard, Shard& st) {
    if (st.busy) interrupts_.insert(worker_of(shard));
  }
  std::vector<ShardEvent> events_;
  uint64_t eventsQueued_ = 0;
  std::vector<std::string> log_;
  MembershipCounters counters_;
};

}  // namespace rsc::member
