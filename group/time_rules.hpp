// The rules about time that the coordinator's shells must not decide on their own: which clock
// leases are judged by, when the store counts as unreachable, when a group's next deadline falls,
// which pod does a group's deadline work, when a request is too old to act on and when an idle
// group leaves memory. Pure: every function takes the times it needs; nothing here reads a clock.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "group/coordinator.hpp"

namespace rsc::group {

// --- Store outages --------------------------------------------------------------------------

// The store could take no heartbeat from `from` to `to` (store-clock milliseconds).
struct Outage {
  Millis from = 0;
  Millis to = 0;
};

// What a pod knows, at `now`, that bears on judging leases.
struct TimeView {
  Millis now = 0;
  // No lease expiry or revoke fencing before this: a pod cannot tell an outage that ended before
  // it started from dead members, so it judges nobody during its first lease (see first_lease_end).
  Millis expiryHeldUntil = 0;
  // The store is not answering right now: nobody is judged until it is back.
  bool outageOngoing = false;
  // Outages that have ended, oldest first; absorbed into a group before it is judged.
  std::vector<Outage> outages;
};

// The end of a pod's first lease: it starts judging leases then.
Millis first_lease_end(Millis podStartedAt, const Config& cfg);
bool expiry_allowed(const TimeView& tv);

// Applies ended outages to a group: every live member whose last heartbeat precedes an outage's
// end gets a full lease from that end, and pending revoke deadlines move by the outage's length.
// Idempotent: the group remembers (outageCoveredUntilMs) how far outages were absorbed, so pods
// that saw the same outage do not extend a deadline twice.
Outcome absorb_outages(GroupState g, const std::vector<Outage>& outages);

// The tick as a pod runs it: outages absorbed first, expiry and revoke fencing only when allowed
// (tombstones, target recompute and the rollback guard regardless).
Outcome tick(GroupState g, const Config& cfg, const TimeView& tv);

// When the group next needs its deadline work (a lease running out, a revoke deadline, a
// tombstone to drop, the rollback guard to lift, a target to recompute), or nullopt when nothing
// is ever due until something happens to it. Judgements held back by `expiryHeldUntil` fall due
// no earlier than then.
std::optional<Millis> next_deadline(const GroupState& g, const Config& cfg, Millis expiryHeldUntil = 0);

// A request that waited in a pod longer than a lease was given up by its member (it has fenced
// itself by now): acting on its stale report could only do harm.
bool request_too_old(Millis arrivedAt, Millis now, const Config& cfg);

// --- Tracking the store's availability ------------------------------------------------------

// Round trips to the store as a pod sees them, on the store's clock. A round trip that failed,
// or that took longer than `stallMs`, is an outage dated from the last reply the pod had before
// it (the store was last known to take writes then) to the first good reply after it.
class StoreAvailability {
 public:
  explicit StoreAvailability(Millis stallMs = 500, std::size_t keep = 64) : stallMs_(stallMs), keep_(keep) {}

  // A call went out; returns its id.
  uint64_t began(Millis at);
  // Its answer came back (ok) or it failed (I/O error, timeout, a store that is loading or busy).
  void ended(uint64_t id, Millis at, bool ok);

  // A call outstanding longer than the stall limit, or a failure not yet followed by a good reply.
  bool ongoing(Millis now) const;
  // Since when the store has not answered (meaningful while ongoing()).
  Millis down_since(Millis now) const;
  Millis last_reply() const { return lastReply_; }
  const std::deque<Outage>& outages() const { return outages_; }
  std::vector<Outage> outages_vector() const { return {outages_.begin(), outages_.end()}; }
  int64_t outage_count() const { return count_; }

 private:
  void record(Millis from, Millis to);

  Millis stallMs_;
  std::size_t keep_;
  uint64_t next_ = 1;
  std::map<uint64_t, std::pair<Millis, Millis>> inflight_;  // id -> (sent at, last reply before it)
  Millis lastReply_ = 0;
  std::optional<Millis> failedSince_;  // a failure since the last good reply: down since then
  std::deque<Outage> outages_;
  int64_t count_ = 0;
};

// Readiness (GET /readyz) against the store. Every pod shares the store, so taking a pod out of its
// Service for a store outage helps no member: an outage (or a failed readiness probe of the store)
// shorter than `graceMs` leaves the pod ready, its heartbeats answering RETRY meanwhile, and a short
// Redis blip does not empty the Service. Not ready: never synced with the store, an outage longer
// than the grace, no reply for longer than max(freshMs, graceMs), or (graceMs 0) any outage or
// failed probe at once.
struct ReadyVerdict {
  bool ready = false;
  std::string why;  // the reason when not ready; when ready despite an outage, what is going on
};
ReadyVerdict judge_ready(bool synced, const StoreAvailability& a, Millis now, Millis freshMs, Millis graceMs,
                         const std::optional<std::string>& probeFailure = std::nullopt);

// --- One clock for leases --------------------------------------------------------------------

// Every pod judges leases on the store's clock: a pod tracks its offset to the store's TIME from
// round trips (the sample with the smallest round trip of the recent ones wins, as NTP does), on
// its own monotonic clock, so neither its wall clock's skew nor a step of it changes a decision.
class StoreClock {
 public:
  explicit StoreClock(std::size_t window = 8) : window_(window) {}
  // A round trip sent at `localSent` and answered at `localReceived` (local monotonic ms) carried
  // the store's time `storeTime` (ms).
  void observe(Millis localSent, Millis localReceived, Millis storeTime);
  bool synced() const { return !samples_.empty(); }
  // The store's time now; never goes back.
  Millis now(Millis localNow);
  Millis offset() const { return offset_; }
  Millis uncertainty() const { return uncertainty_; }

 private:
  struct Sample {
    Millis rtt;
    Millis offset;
  };
  std::size_t window_;
  std::deque<Sample> samples_;
  Millis offset_ = 0;
  Millis uncertainty_ = 0;
  Millis last_ = 0;
};

// --- Who does a group's deadline work --------------------------------------------------------

// Rendezvous hashing: the live pod with the highest hash of (pod, group). When a pod goes, only
// its groups move; when one comes, it takes about 1/n of each other's.
std::string duty_pod(const std::string& groupKey, const std::vector<std::string>& livePods);
// The weight of a pod for a group in that choice (higher wins; ties go to the smaller pod id).
uint64_t rendezvous_weight(const std::string& pod, const std::string& groupKey);

// --- A group's lifecycle in a pod -------------------------------------------------------------

// A group actor with nothing to do for `retireAfterMs` leaves memory (a later request loads it).
bool should_retire(Millis lastActivity, Millis now, Millis retireAfterMs);

// The join of a group that does not exist yet, on a stream that already has `existingGroups`:
// refused (with the message) when `limit` > 0 and the stream is full.
std::optional<std::string> refuse_new_group(std::size_t existingGroups, int64_t limit, const std::string& stream);

// Whether a write must wait for the group's shard streams and Redis consumer groups: when it
// hands a member a shard at or past what was provisioned (an ASSIGNED event among the step's
// events). Then all of [0, shardCount) is created first; a write that hands nothing out (a steady
// heartbeat, expiry, a leave, a fence) never waits, so a failing Redis command holds up only the
// handing out of shards, not the group's other work.
std::optional<int32_t> provisioning_due(const GroupState& after, const std::vector<Event>& events);

// Deleting a group: refused while it has live members, unless they are to be fenced first.
enum class DeleteVerdict { Delete, FenceThenDelete, HasLiveMembers, NotFound };
DeleteVerdict judge_delete(bool exists, const GroupState& g, bool fenceMembers);

// What a deleted group leaves behind for the group that may be created under its name: until
// then no shard is handed out fresh (members fenced by the delete may still read on answers a
// pod gave from a cache that had not seen it, see Member::quarantined). 0: nothing to wait for.
Millis grants_held_after_delete(const GroupState& g, Millis now);

}  // namespace rsc::group
