// GroupStore on Redis via hiredis (synchronous; meant to live in a detached store actor).
// Not thread-safe: one RedisStore per thread or actor.
#pragma once

#include "redis/client.hpp"
#include "redis/keys.hpp"
#include "redis/state_codec.hpp"
#include "redis/store.hpp"

namespace rsc::store {

class RedisStore : public GroupStore {
 public:
  explicit RedisStore(RedisOptions opts);

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
  Result<protocol::DeadLetterPage> dead_letters(const GroupKey& key, int64_t limit) override;
  Result<OffsetsMoved> reset_offsets(const GroupKey& key, int32_t shardCount, const std::string& to,
                                     int64_t expectedRevision) override;
  Result<protocol::DeadLetterMove> redrive(const GroupKey& key, const std::vector<std::string>& deadLetterIds,
                                           int64_t limit) override;
  Result<protocol::DeadLetterMove> discard_dead_letters(const GroupKey& key, const std::vector<std::string>& deadLetterIds,
                                                        int64_t limit) override;
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
  Result<std::string> stream_fingerprint(const std::string& streamPrefix) override;
  Result<bool> write_lag_snapshot(const std::string& streamPrefix, const LagSnapshotWrite& w) override;
  Result<LagSnapshotRead> read_lag_snapshot(const std::string& streamPrefix, const std::vector<std::string>& groups,
                                            bool sums) override;
  Result<protocol::Retention> get_retention(const std::string& streamPrefix) override;
  Result<bool> set_retention(const std::string& streamPrefix, const protocol::Retention& r) override;
  Result<group::TrimOutcome> trim_stream(const std::string& streamPrefix, const group::Trim& t) override;
  Result<std::vector<std::string>> shard_nodes(const std::string& streamPrefix, protocol::KeyStyle style,
                                               int32_t count) override;
  Result<std::optional<group::StreamReading>> read_stream(const std::string& streamPrefix,
                                                          const std::string& onlyGroup = {}) override;
  Result<int32_t> provision(const GroupKey& key, int32_t shardCount, const std::string& startId) override;
  int64_t rollbacks_detected() const override { return tracker_.rollbacks(); }
  // Groups whose revision this store remembers (rollback detection); a group that does not exist is not one.
  std::size_t revisions_remembered() const { return tracker_.remembered(); }

  Result<bool> ping() override;
  Result<bool> notify(const GroupKey& key, const std::string& message) override;
  const KeySpace& keys() const { return keys_; }
  RedisClient& connection() { return conn_; }
  int64_t script_reloads() const { return scriptReloads_; }

 private:
  // The dead letters a redrive or discard names (none named: the oldest `limit`), `move` told which
  // named ids are not there and whether the group exists.
  Result<std::vector<protocol::DeadLetter>> chosen_dead_letters(const GroupKey& key,
                                                                const std::vector<std::string>& deadLetterIds,
                                                                int64_t limit, protocol::DeadLetterMove& move);
  struct Script {
    const char* source;
    std::string sha;
  };
  std::optional<Error> load_scripts(RedisConnection& c);
  std::optional<Error> ensure_scripts();
  // Runs commands (some EVALSHA); on NOSCRIPT reloads the scripts and reruns those, once.
  std::vector<Result<Value>> run(const std::vector<Command>& cmds);
  Command evalsha(const Script& s, std::initializer_list<std::string> keys, std::vector<std::string> args) const;
  // The first words of a script's call (EVALSHA sha numkeys), for a command built in place.
  static void evalsha_head(Command& c, const Script& s, std::size_t keys);

  RedisOptions opts_;
  KeySpace keys_;
  RedisClient conn_;
  // A group's hash as read: absent, deleted (only its revision left) or a state.
  Result<Loaded> loaded_from(const GroupKey& key, const FieldMap& fields);
  Command deadline_command(const GroupKey& key, std::optional<Millis> due, int64_t revision, bool lower) const;

  // A stream's metadata as read with the server's clock (kReadHashWithTime), and its write back
  // only if unchanged since (kHashCas): the rules between the two are group::put_step and scale_step.
  struct StreamMetaRead {
    std::optional<protocol::StreamMetadata> meta;
    std::vector<std::optional<std::string>> fields;  // as read, in kStreamMetaFields order
    int64_t nowMs = 0;                                // the server's clock
  };
  Result<StreamMetaRead> read_stream_meta(const std::string& streamPrefix);
  Result<bool> write_stream_meta(const std::string& streamPrefix, const StreamMetaRead& read,
                                 const protocol::StreamMetadata& after);

  Script cas_, unlock_, setRetention_, trim_, readHashWithTime_, hashCas_, tickLease_, setDeadline_, podBeat_,
      deleteGroup_, bumpRevision_;
  RevisionTracker tracker_;
  int64_t scriptReloads_ = 0;
};

}  // namespace rsc::store
