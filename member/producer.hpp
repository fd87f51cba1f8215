// rsc::member::Producer: writes records to a sharded stream the way the coordinator routes them,
// and follows the stream when its shard count changes (SPEC §3 rule 9).
//
// It reads the stream's routing from the coordinator (GET .../groups/{group}/producer-routing:
// shard count, key pattern, metadataVersion; the coordinator makes sure every shard stream and the
// group's consumer group exist), caches it, and routes each record by its key with the same rule as
// the endpoint (Murmur3 x86 32-bit, seed 0, unbiased; protocol/partition.hpp). Each record is
// written with XADD ... NOMKSTREAM [MAXLEN ~ N]: a shard stream that does not exist is never
// created by a producer. The routing is read again every refreshIntervalMs and at once after a
// write refused because its shard stream does not exist; records that failed are sent again in
// their order (re-routed with the routing read meanwhile), with backoff, for up to retryBudgetMs.
//
// Ordering: the records of one key are written in the order given while the shard count stays
// the same. When it changes, a key may move to another shard: its records written before the
// change (on a draining shard) and after it (on the new shard) are read by different readers and
// may be processed out of order; a producer that must keep one key's order across a change pauses
// until the draining shards are retired (the stream's drainingShards is 0).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "member/http_client.hpp"
#include "redis/redis_options.hpp"

namespace rsc::member {

struct ProducerOptions {
  std::string coordinatorUrl = "http://127.0.0.1:8080";  // or https://...
  ClientTls coordinatorTls;
  std::string token;  // bearer token, if the coordinator wants one
  // Or the file that holds it: read at start and again whenever the coordinator refuses the token.
  std::string tokenFile;
  std::string streamPrefix;
  // The consumer group the routing is asked for (producer-routing; the coordinator then makes
  // sure the shard streams and the group's consumer groups exist). Empty: GET
  // /coord/v1/streams/{prefix}, which provisions nothing: set createMissingStreams then.
  std::string group;
  store::RedisOptions redis;
  // No coordinator: this many shards named by this pattern ("{shardIndex}" stands for the index),
  // never refreshed.
  int32_t fixedShardCount = 0;
  std::string fixedKeyPattern;
  std::string partitioner = "murmur3";  // or "fnv1a"
  bool createMissingStreams = false;    // XADD without NOMKSTREAM (a missing shard stream is made)
  int64_t refreshIntervalMs = 1000;
  int64_t maxLen = 0;  // > 0: XADD ... MAXLEN ~ maxLen
  // With maxLen 0: when the stream's retention is maxLen N, XADD ... MAXLEN ~ N (read with the
  // routing), so the bound holds between the coordinator's trim rounds.
  bool maxLenFromRetention = true;
  int64_t retryBudgetMs = 30000;
  int64_t httpTimeoutMs = 5000;
  std::function<void(const std::string&)> log;
};

struct ProducerRecord {
  std::string key;                                          // routes the record
  std::vector<std::pair<std::string, std::string>> fields;  // written as the entry's fields, in order
};

struct SendResult {
  int64_t written = 0;  // of the records given, in their order (a prefix)
  bool ok = true;
  std::string error;  // when !ok: why the rest was not written
  std::vector<int32_t> shards;  // per written record: the shard it went to
};

struct ProducerStats {
  int64_t written = 0;
  int64_t routingReads = 0;
  int64_t routingChanges = 0;  // a new metadataVersion learned
  int64_t refusedNoStream = 0;  // writes refused because the shard stream did not exist
  int64_t resends = 0;
  int32_t shardCount = 0;
  int32_t metadataVersion = 0;
};

class Producer {
 public:
  explicit Producer(ProducerOptions o);
  ~Producer();
  Producer(const Producer&) = delete;
  Producer& operator=(const Producer&) = delete;
  // Writes `records` in their order (pipelined per Redis node). Thread-safe: one send at a time.
  SendResult send(const std::vector<ProducerRecord>& records);
  ProducerStats stats() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace rsc::member
