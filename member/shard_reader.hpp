// The member's Redis side of its shards: the consumer group's reads, claims, acks and progress
// (XGROUP CREATE, XREADGROUP, XAUTOCLAIM, XPENDING + XCLAIM, XACK, XINFO GROUPS) through one
// client (a single Redis, or a cluster's masters, each command on the node of its shard's key). It
// moves records; it decides nothing about what may be read (the membership machine does) and never
// retries by itself (the client follows a cluster's MOVED/ASK, which say nothing ran).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "member/record.hpp"
#include "redis/client.hpp"

namespace rsc::member {

class ShardReader {
 public:
  ShardReader(store::RedisOptions redis, std::string group, std::string consumer,
              std::function<std::string(int32_t)> keyOf);

  // Creates the group on the shard's stream (from id 0); "" or why not. A missing stream is not
  // created (no_stream says so): the coordinator creates the streams of shards in use, and a
  // member holding a shard whose stream was deleted must not bring it back.
  // `lost`, when given, says whether a failure was the connection's (no answer from Redis).
  std::string ensure_group(int32_t shard, bool* lost = nullptr);
  static bool no_stream(const std::string& error);
  struct Page {
    bool ok = false;
    std::string error;
    bool lost = false;   // the failure was the connection's: Redis did not answer
    std::string cursor;  // "0-0": nothing more
    std::vector<Record> records;
  };
  // One XAUTOCLAIM page: entries pending for anyone in the group, from `cursor`, now this consumer's,
  // each with its delivery count (read with XPENDING). Redis adds one to the count of each record
  // it claims, unless `justIds` (JUSTID, the fields then read with XRANGE): a record's count is
  // its own attempts, so the claim that brings back a failed record must not charge the records
  // queued behind it, which were never tried.
  Page autoclaim(int32_t shard, const std::string& cursor, int count, bool justIds = false);
  struct Read {
    enum class Outcome { Records, Refused, Lost } outcome = Outcome::Records;
    std::string error;             // Refused: Redis's error (e.g. NOGROUP); Lost: the connection's
    std::vector<std::vector<Record>> batches;  // one per shard asked, in that order; stream order within
  };
  // XREADGROUP of new entries on these shards, blocking up to blockMs. Shards whose keys share a
  // hash slot (all of them on a single Redis) are read by one command. In a cluster, where one
  // command may not span slots, each slot's shards first get a non-blocking read, pipelined per
  // node; when none has anything, a blocking read waits on every slot at once, each on a
  // connection of its own to the slot's master. The first answer ends the wait: the others are
  // released with CLIENT UNBLOCK (they then answer nil, having read nothing, or with what they read
  // meanwhile), and every answer is collected before this returns, so no read outlives the call.
  //
  // `allowedMs`, when given, is asked just before each command goes out: how long this member may
  // still read (the runtime's self-fence rule); below 1 nothing more is sent and the read returns
  // with what it has, and a blocking read waits no longer than it says.
  Read read(const std::vector<int32_t>& shards, int count, int64_t blockMs,
            const std::function<int64_t()>& allowedMs = {});
  // An fd (an eventfd the runtime writes to) that, once readable, ends a blocking read at once:
  // its XREADGROUPs are released with CLIENT UNBLOCK and return what they read so far (a revoked
  // shard is then handed over without waiting out the BLOCK). With one set, a single Redis's
  // blocking read also goes through a connection of its own. The reader drains it after a read.
  void set_interrupt_fd(int fd) { interruptFd_ = fd; }
  // "" when the ack was stored, else why not.
  std::string ack(int32_t shard, const std::string& id);
  // XADD of a dead letter (see runtime.hpp: dead_letter_key) to `key`; "" when stored, else why not.
  // `maxLen` > 0: the stream is trimmed near that many entries (MAXLEN ~), oldest first.
  std::string dead_letter(const std::string& key, const Record& r, const std::string& error, const std::string& member,
                          int64_t atMs, int64_t maxLen = 0);
  // Entries other consumers of the group left pending on the shard, idle for at least minIdleMs,
  // claimed for this consumer (at most 100 at a time).
  std::vector<Record> claim_leftovers(int32_t shard, int64_t minIdleMs);
  struct Progress {
    std::optional<int64_t> pending, lag;
  };
  // This group's pending and lag on the shard (XINFO GROUPS); nullopt when Redis does not say.
  std::optional<Progress> progress(int32_t shard);
  // Why the last claim_leftovers or progress call got no answer at all (the connection's error),
  // "" when it was answered; taken (cleared) by the call.
  std::string take_unanswered() { return std::exchange(unanswered_, std::string()); }

 private:
  store::RedisClient conn_;
  std::string group_, consumer_;
  // A slot's blocking read: its connection (to the slot's master) and that connection's CLIENT ID.
  struct Waiter {
    store::RedisOptions node;  // the slot's master, where CLIENT UNBLOCK goes too
    std::unique_ptr<store::RedisConnection> conn;
    long long clientId = -1;
  };
  Waiter* waiter_for(int slot, const std::string& key);
  store::RedisConnection& control_for(const Waiter& w);
  std::map<int, std::unique_ptr<Waiter>> waiters_;
  std::map<std::string, std::unique_ptr<store::RedisConnection>> controls_;  // per node: CLIENT UNBLOCK
  std::function<std::string(int32_t)> keyOf_;
  int interruptFd_ = -1;
  std::string unanswered_;
  // CLIENT UNBLOCK for a waiter whose answer has not come, until it comes (the XREADGROUP may not
  // have reached Redis yet when the first one is sent), within `untilMs`. Returns the control
  // connection's error when CLIENT UNBLOCK got no answer at all ("" otherwise): Redis is silent, and
  // the read's own answer is not waited for a second command timeout.
  std::string release(Waiter& w, int64_t untilMs);
};

}  // namespace rsc::member
