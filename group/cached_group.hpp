// One group as a pod's runtime holds it: its copy of the stored state and every rule about when
// that copy may answer, what a step writes and how, and what a store reply changes. Pure: the
// group actor (actors/group_actor.cpp) owns the queue and the store calls and asks this type what
// to do; times come in as arguments (the coordinator's clock for the group's rules, the pod's own
// monotonic clock for its powers, see group/pod_authority.hpp).
//
// The life of a copy: `next` says what the work at the front of the queue needs (a load, the
// deadline lease, a step on the copy); a load or lease reply is `adopt`ed (what the store's past
// demands is applied at once and written with the next step); a step's outcome is `prepare`d
// (merged after those changes), then `plan_write` decides between answering from the copy, a
// revision check, a write, or holding/refusing the work because this pod does not serve the group;
// `written` or `lost_race` takes the store's answer. `forget` drops everything after a failure.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "group/coordinator.hpp"
#include "group/freshness.hpp"
#include "group/notify.hpp"
#include "group/pod_authority.hpp"
#include "group/time_rules.hpp"
#include "protocol/types.hpp"

namespace rsc::group {

// Heartbeats of one group written together in one compare-and-set, at most.
inline constexpr std::size_t kMaxBatch = 64;

enum class WorkKind { Heartbeat, Tick, Describe, Remove, Metadata, Delete, ResetOffsets, Configure, PostTarget };

// What the rules need of a queued piece of work (the runtime keeps the payload and the callback).
struct Ticket {
  WorkKind kind = WorkKind::Tick;
  bool join = false;          // a heartbeat with member epoch 0, or a configuration (both make the group)
  bool deadlineWork = false;  // a tick started by the deadline index: ends by updating it
  Millis arrivedMs = 0;       // on the coordinator's clock
  uint64_t arrival = 0;       // CopyConfirmation::arrival() when it arrived
  int attempts = 0;           // writes lost to other pods so far
  bool verified = false;      // decided again on a state just read from the store
};

// What the work at the front of the queue needs now.
enum class Next {
  NotSynced,  // no store time yet: nothing can be decided (answered RETRY)
  TooOld,     // a heartbeat that waited longer than a lease (answered RETRY)
  Describe,   // read the store's state for it, leaving the copy alone
  Lease,      // deadline work: take the group mutex, learning whether the group moved
  Load,       // read the group first
  Step,       // decide it on the copy
};

// What a step computed, merged after the changes adopting the copy made, ready to write.
struct Prepared {
  Outcome outcome;
  std::vector<Event> events;
  std::optional<int32_t> provision;  // shard streams to give the Redis consumer group first
};

// How a prepared step reaches the store, or why it does not.
struct WritePlan {
  enum class Kind {
    FromCopy,  // nothing to write and the copy answers: answer now, no store call
    Check,     // nothing to write, but the copy must be confirmed: a revision check
    Write,     // a compare-and-set of `next`
    Hold,      // this pod serves the group in `holdMs`: the work waits (first in the queue)
    Refuse,    // this pod does not serve the group: RETRY with `why`
  };
  Kind kind = Kind::FromCopy;
  int64_t expectedRevision = 0;
  std::shared_ptr<GroupState> next;  // Check, Write
  std::shared_ptr<Delta> delta;      // Write: null = the full first write
  std::optional<Millis> lowerDeadlineTo;
  // Members other than those the work answers that have something new to do: told at once once
  // the write is stored (a steady heartbeat changes nothing anyone waits for: nobody).
  std::vector<std::string> wake;
  std::vector<Event> events;
  // Write: the shard streams to give the Redis consumer group first (0: none). `next` records
  // them as provisioned, so the write must not be made when that fails.
  int32_t provision = 0;
  Millis holdMs = 0;
  std::string why;
};

// What a stored write (or a check that found the copy current) means for its answers.
enum class Stored { Written, Current, Lapsed };

// A store call to retry, or give up on when contended: the error for the caller, or nullopt.
std::optional<std::string> contended(int& attempts, int maxAttempts, const std::string& groupKey);

// Every live member of `g` fenced (an admin's forced delete: written before the delete is judged).
Outcome fence_live_members(GroupState g, const std::string& reason, const Config& cfg, Millis now);

class CachedGroup {
 public:
  CachedGroup() = default;
  // `cfg` outlives this (the runtime's configuration, shared by its groups).
  CachedGroup(std::string key, const Config* cfg) : key_(std::move(key)), cfg_(cfg) {}

  const std::string& key() const { return key_; }
  bool held() const { return g_.has_value(); }
  bool exists() const { return exists_; }
  // An admin call about members or targets (a posted target, a member's removal) for a group that
  // does not exist makes nothing, not even what loading it found (its stream's metadata): it is
  // answered (404) without a write. Only a join or a configuration makes a group.
  bool writes_nothing(WorkKind k) const { return !exists_ && (k == WorkKind::PostTarget || k == WorkKind::Remove); }
  const GroupState& state() const { return *g_; }  // only when held()
  GroupState take() { auto g = std::move(*g_); g_.reset(); return g; }
  CopyConfirmation& calls() { return copy_; }
  std::optional<int64_t> groups_in_stream() const { return groupsInStream_; }
  // A call that would make the group (an admin's configuration) while its stream has the most
  // groups allowed: why it is refused (as a join would be).
  std::optional<std::string> refuse_new(int64_t maxGroupsPerStream, const std::string& stream) const;

  // What the front work needs; a delete not yet judged on a fresh read drops the copy (and is
  // marked verified), as does a join into a group copied before its stream existed.
  Next next(Ticket& front, Millis now, bool synced);

  // A state read from the store (load, lease, lost race) becomes the copy. Returns the rollback
  // when one was detected (recovered from here; the runtime logs and counts it). The rollback's
  // epoch is re-applied to every state adopted until a write carries it; then a grown stream.
  std::optional<Rollback> adopt(Loaded&& l, const std::optional<protocol::StreamMetadata>& stream, Millis now);
  // The deadline lease found the group unchanged since the copy, reading its stream too.
  void stream_read(const std::optional<protocol::StreamMetadata>& stream, Millis now);
  void loaded(std::optional<int64_t> groupsInStream) { groupsInStream_ = groupsInStream; justLoaded_ = true; }
  // Store call `call` read or wrote exactly the copy now held.
  void confirm(uint64_t call, const PodView& view, Millis local);
  // Whether the copy answers a call that arrived at `arrival` as it is.
  bool copy_answers(uint64_t arrival, const PodView& view, Millis local) const;

  // A step is about to run on the copy.
  void begin_step(WorkKind kind);
  // Under a groups-per-stream limit, a join into a group that does not exist yet: the refusal
  // (the copy is dropped: counted again at the next join), or nullopt.
  std::optional<protocol::HeartbeatResponse> refuse_over_limit(const Ticket& t, const protocol::HeartbeatRequest& req,
                                                               int64_t maxGroupsPerStream, const std::string& stream,
                                                               const protocol::Timings& timings);

  // One compare-and-set for a run of heartbeats: the tick first (expiry is due whenever anything
  // happens), then each heartbeat on the state the previous one left.
  class Batch {
   public:
    enum class Fate {
      Batched,   // answered once the batch is stored
      Answered,  // an error answer: given now, independent of the write
      Recheck,   // decided again alone on a state read from the store: stays first in the queue
    };
    struct Beat {
      Fate fate = Fate::Batched;
      protocol::HeartbeatResponse response;
      bool unwritten = false;  // the lease renewal was deferred (counted by the runtime)
    };
    Beat add(Ticket& t, const protocol::HeartbeatRequest& req);
    // Whether the next queued work joins this batch (at most kMaxBatch; a heartbeat; not a join
    // under a groups-per-stream limit into a group that does not exist; not a stale request).
    bool takes(const Ticket* next) const;
    std::size_t size() const { return batched_; }
    // The outcome to write, or nullopt when nothing is stored (the copy is dropped): only error
    // answers for a group that does not exist, or a recheck before anything was batched. With
    // only error answers for an existing group the tick's findings are written alone.
    std::optional<Outcome> finish();

   private:
    friend class CachedGroup;
    Batch(CachedGroup& c, const TimeView& tv, int64_t maxGroupsPerStream);
    CachedGroup& c_;
    Millis now_;
    bool fresh_;
    bool limitApplies_;
    Outcome total_;
    std::size_t batched_ = 0;
    bool stop_ = false;
    bool dropCopy_ = false;
    std::unique_ptr<GroupCounts> counts_;  // of total_.state, while each beat's delta says whom it changed
  };
  Batch batch(const TimeView& tv, int64_t maxGroupsPerStream) { return Batch(*this, tv, maxGroupsPerStream); }

  // The step's outcome after what adopting the copy changed (the step's changes win: a member the
  // step removes stays removed); provisioning first when a shard is about to be handed out.
  Prepared prepare(Outcome&& o);
  // The shard streams' consumer group exists on `count` shards now.
  static void provisioned(Prepared& p, int32_t count);
  // How the prepared step reaches the store. `oldestArrival`: of the works answered from it
  // (nullopt: none but ticks). Only the group's owner writes it.
  // `answered`: the members the work answers (asked only when others may need waking).
  WritePlan plan_write(Prepared&& p, std::optional<uint64_t> oldestArrival, const PodView& view, Millis local,
                       const std::function<std::set<std::string>()>& answered = {});
  // The plan's compare-and-set came back Written at `revision` (call `call`).
  Stored written(int64_t revision, uint64_t call, const PodView& view, Millis local);
  // Another pod wrote first (its state when it came with the answer) or held the mutex.
  std::optional<Rollback> lost_race(std::optional<GroupState>&& current, const Rollback& rollback, uint64_t call,
                                    const PodView& view, Millis local, Millis now);

  // The totals of the copy's members for its gauges (nullopt when not counted since it was read;
  // always known after Stored::Written).
  const MemberTotals* totals() const { return copyCounts_ ? &copyCounts_->totals : nullptr; }
  // The shape and totals of the write in flight, and how many times a step went over the whole
  // group to count them (a steady heartbeat's write goes over none): for tests.
  const GroupCounts* writing_counts() const { return writingCounts_.get(); }
  uint64_t walks() const { return walks_; }

  // The revocations these stored events completed: how long each took since it was asked for.
  std::vector<Millis> handovers_done(const std::vector<Event>& events, Millis now);

  // Deadline work ends by writing this next deadline to the index (nullopt: the entry goes).
  std::optional<Millis> index_deadline(const TimeView& tv) const;
  // The admin's delete was stored: Lapsed when this pod stopped serving the group meanwhile (the
  // delete is then answered RETRY: a pod answering alone may not have seen it).
  Stored deleted(const PodView& view, Millis local);
  // Why this pod may not write the group now (nullopt: it may).
  std::optional<std::string> why_not_writing(const PodView& view, Millis local) const;
  // This pod may not write (or answer) what it computed: read the group again before the next step.
  void drop();
  // A store call failed: nothing of the copy is trusted.
  void forget();

 private:
  void merge(Outcome&& o);
  std::string key_;
  const Config* cfg_ = nullptr;
  std::optional<GroupState> g_;  // nullopt: load before use
  bool exists_ = false;
  Delta pending_;  // changes made when adopting a loaded state, written with the next step
  std::vector<Event> pendingEvents_;
  bool justLoaded_ = false;  // the copy was read from the store for the step about to run
  std::optional<int32_t> rollbackSeenEpoch_;
  // The next deadline of the state at the copy's revision (what the deadline index holds, or
  // earlier): a write that brings it earlier lowers the index.
  std::optional<Millis> storedDeadline_;
  std::optional<int64_t> groupsInStream_;  // for a group that does not exist: from its last load
  CopyConfirmation copy_;
  // The pod's term in which a store call confirmed the copy while this pod owned the group (0: not).
  uint64_t copyTerm_ = 0;
  std::map<std::string, Millis> revokeStarted_;  // member -> when its revocation was asked for
  // The shape and totals (notify.hpp) of the copy, kept on the heap and handed from slot to slot
  // (no allocation on a steady write): an idle group carries one pointer's worth plus the counts.
  using Counts = std::unique_ptr<GroupCounts>;
  // The shape of the copy the step started from; its counts, until the heartbeat batch takes them.
  std::optional<Shape> shapeBefore_;
  Counts countsBefore_;
  // Those of the copy when this pod wrote it (or answered from it) and nothing replaced it since:
  // the next step takes them instead of going over the group again; of the write in flight.
  Counts copyCounts_, writingCounts_;
  // Those after a heartbeat batch, kept beat by beat from the copy's (each beat's delta names the
  // members it changed besides the one heartbeating); null when a beat or the tick changed others:
  // then they are counted over the whole group.
  Counts stepCounts_;
  uint64_t walks_ = 0;
  Counts walk(const GroupState& g);
  // The write in flight.
  std::shared_ptr<GroupState> writing_;
  bool writingCheck_ = false;
  std::optional<Millis> writingDeadline_;
};

}  // namespace rsc::group
