// An in-memory GroupStore for unit tests. It stores the same encoded fields as Redis (so the
// codec is exercised and bad data can be planted) and can inject faults and conflicts.
#pragma once

#include <functional>
#include <map>
#include <mutex>
#include <set>

#include "redis/connection.hpp"
#include "redis/state_codec.hpp"
#include "redis/store.hpp"

namespace rsc::store {

class MemoryStore : public GroupStore {
 public:
  // `clock` gives the store's time in ms (lock and pod leases, deadlines); by default the wall clock.
  explicit MemoryStore(std::function<Millis()> clock = {}, LogFn log = {});

  Result<Loaded> load(const GroupKey& key) override;
  std::vector<Result<CasResult>> compare_and_set(const std::vector<CasRequest>& batch) override;
  using GroupStore::compare_and_set;
  Result<TickLease> tick_lease(const GroupKey& key, const std::string& token, Millis ttl,
                               int64_t knownRevision) override;
  Result<bool> finish_deadline_work(const GroupKey& key, const std::string& token, std::optional<Millis> due,
                                    int64_t revision) override;
  Result<PodBeat> pod_beat(const std::string& podId, Millis leaseMs, std::size_t dueLimit,
                           const std::string& address = {}) override;
  Result<bool> pod_leave(const std::string& podId) override;
  Result<bool> mark_due(const GroupKey& key, Millis at) override;
  Result<int64_t> index_missing_deadlines(Millis now) override;
  Result<DeleteStatus> delete_group(const GroupKey& key, int64_t expectedRevision, int64_t grantsHeldUntilMs = 0) override;
  Result<int64_t> count_stream_groups(const std::string& streamPrefix) override;
  Result<std::vector<GroupKey>> list_groups() override;
  Result<std::vector<std::string>> list_stream_groups(const std::string& streamPrefix) override;
  Result<std::vector<std::string>> list_streams() override;
  Result<std::optional<protocol::StreamMetadata>> get_stream(const std::string& streamPrefix) override;
  Result<group::ScaleStep> scale_stream(const std::string& streamPrefix, const group::ScaleCall& call) override;
  Result<std::vector<std::string>> draining_streams() override;
  Result<bool> forget_draining(const std::string& streamPrefix) override;
  Result<int64_t> delete_shard_streams(const std::string& streamPrefix, protocol::KeyStyle style, int32_t from,
                                       int32_t to) override;
  Result<StreamWrite> write_stream(const std::string& streamPrefix, const StreamPut& put) override;
  Result<bool> write_lag_snapshot(const std::string& streamPrefix, const LagSnapshotWrite& w) override;
  Result<LagSnapshotRead> read_lag_snapshot(const std::string& streamPrefix, const std::vector<std::string>& groups,
                                            bool sums) override;
  Result<int32_t> provision(const GroupKey& key, int32_t shardCount, const std::string& startId) override;
  int64_t rollbacks_detected() const override { return tracker_.rollbacks(); }
  // (shard stream key, consumer group) pairs provisioned so far (tests).
  std::set<std::pair<std::string, std::string>> consumer_groups() const;
  Result<bool> ping() override;
  Result<bool> notify(const GroupKey& key, const std::string& message) override;
  // Every notify() so far: (group, message).
  std::vector<std::pair<std::string, std::string>> notifications() const;

  // Fault injection.
  void fail_next(int calls, ErrorKind kind = ErrorKind::Retryable);  // the next calls fail
  void fail_provisioning(int calls);  // the next provision() calls fail (Fatal, as a WRONGTYPE would)
  void set_unreachable(bool down);                                   // every call fails Retryable
  // Another pod writes first: the group's revision moves on before each of the next n CAS calls.
  void conflict_next(int n);
  void set_raw_field(const GroupKey& key, const std::string& field, const std::string& value);
  FieldMap raw(const GroupKey& key) const;
  void replace_raw(const GroupKey& key, FieldMap fields);  // e.g. restore an older snapshot
  void clear();                                             // a restart without persistence
  int64_t calls() const;
  // Every call is reported to these (as a call that took no time), like a Redis connection does.
  void add_observer(std::shared_ptr<CallObserver> o);
  // The deadline index as stored (tests look at it).
  std::map<std::string, Millis> deadlines() const;

 private:
  bool injected_failure(Error& e);
  struct Lock {
    std::string token;
    Millis expiresAt = 0;
  };
  std::function<Millis()> clock_;
  mutable std::mutex mu_;
  std::map<std::string, FieldMap> groups_;  // by GroupKey::str()
  std::map<std::string, GroupKey> keys_;
  std::map<std::string, Lock> locks_;
  std::map<std::string, Millis> due_;        // the deadline index
  std::map<std::string, int64_t> dueRev_;    // the revisions it reflects
  std::map<std::string, Millis> pods_;       // pod -> lease end
  std::map<std::string, Millis> podSince_;   // pod -> when its registration counts from
  std::map<std::string, std::string> podAddress_;
  void set_deadline_locked(const std::string& g, std::optional<Millis> due, int64_t rev, bool lower);
  std::map<std::string, protocol::StreamMetadata> streams_;
  // The lag snapshot's two hashes per stream (field -> value), as Redis keeps them.
  std::map<std::string, std::map<std::string, std::string>> lagSnapshot_, lagSums_;
  std::set<std::string> draining_;
  std::set<std::pair<std::string, std::string>> consumerGroups_;  // (shard stream key, group)
  int failProvisioning_ = 0;
  std::map<std::pair<std::string, std::string>, std::string> consumerGroupStart_;
  int failNext_ = 0;
  ErrorKind failKind_ = ErrorKind::Retryable;
  bool down_ = false;
  int conflictNext_ = 0;
  std::vector<std::shared_ptr<CallObserver>> observers_;
  std::vector<std::pair<std::string, std::string>> notifications_;
  int64_t calls_ = 0;
  RevisionTracker tracker_;
};


}  // namespace rsc::store
