// The Redis client every part of rsc talks through: a single Redis or a Redis Cluster behind one
// API, so that no caller branches on the mode.
//
// A single Redis is one RedisConnection. A cluster keeps one connection per master and a slot map
// read with CLUSTER SLOTS from any known node (the seeds first time); each command goes to the
// master serving its key's slot (cluster::routing_key), a pipeline is split into one pipeline per
// node, and replies come back in the order asked. Refusals that guarantee the command did not run
// are handled here: MOVED (the map is updated and refreshed, the command re-sent), ASK (ASKING and
// the command, once, to the named node), TRYAGAIN and CLUSTERDOWN (re-sent with backoff within
// clusterRetryBudgetMs, after which the refusal is the answer: a retryable error for the caller).
// An I/O failure is never re-sent (the command may have run): it is the caller's retryable error,
// and the map is re-read before the next command, which finds a promoted replica.
//
// Order: commands for one node keep their order; commands for different nodes have none, as in
// any cluster client. Not thread-safe: one client per thread.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "redis/connection.hpp"

namespace rsc::store {
namespace cluster {
class SlotMap;
}

// "HOST:PORT", or a cluster's seed nodes "HOST:PORT,HOST:PORT,...": the first becomes host:port,
// all become seeds, and several set cluster mode. "" when set, else why not (nothing is changed).
std::string set_redis_nodes(RedisOptions& o, const std::string& text);

class RedisClient {
 public:
  explicit RedisClient(RedisOptions opts);
  ~RedisClient();
  RedisClient(const RedisClient&) = delete;
  RedisClient& operator=(const RedisClient&) = delete;

  Result<Value> command(const Command& cmd);
  std::vector<Result<Value>> pipeline(const std::vector<Command>& cmds);

  // Called after every (re)connect of every connection (e.g. to load scripts on each node).
  void on_connect(std::function<std::optional<Error>(RedisConnection&)> f);
  // Drops every connection: the next command connects again (and runs on_connect again).
  void reconnect();
  // Options for a connection of the caller's own to the node serving `key` (a sharded pub/sub
  // channel): the configured node for a single Redis, the slot's master in a cluster.
  Result<RedisOptions> options_for_key(const std::string& key);

  bool cluster() const { return opts_.cluster; }
  const RedisOptions& options() const { return opts_; }
  int64_t round_trips() const;
  int64_t commands_sent() const;
  int64_t redirects() const { return redirects_; }
  int64_t map_refreshes() const { return refreshes_; }
  // Read the slot map again before the next command (a sharded subscription was moved).
  void forget_map() { stale_ = true; }
  // The masters of the cluster as last mapped ("host:port"); the configured node for a single Redis.
  std::vector<std::string> nodes() const;

 private:
  std::vector<Result<Value>> cluster_pipeline(const std::vector<Command>& cmds);
  std::optional<Error> refresh();
  RedisConnection& connection_to(const std::string& host, int port);

  RedisOptions opts_;
  std::unique_ptr<RedisConnection> single_;
  std::map<std::string, std::unique_ptr<RedisConnection>> nodes_;
  std::unique_ptr<cluster::SlotMap> map_;
  bool stale_ = true;
  std::function<std::optional<Error>(RedisConnection&)> onConnect_;
  int64_t redirects_ = 0;
  int64_t refreshes_ = 0;
  int64_t retiredTrips_ = 0, retiredCommands_ = 0;  // of connections dropped by reconnect()
};

}  // namespace rsc::store
