// rsc-produce: XADDs records {key, seq} to the shard of each key of a sharded stream.
//   rsc-produce --redis HOST:PORT[,HOST:PORT...] [--redis-cluster] --stream PREFIX --count N
//               [--coordinator URL [--group G] | --shards N [--key-pattern P]]
//               [--partitioner murmur3|fnv1a] [--rate R] [--key-space K] [--seed S] [--retry-ms T]
// With --coordinator the layout comes from it: GET .../groups/G/producer-routing when --group is
// given (the coordinator then makes sure every shard stream and G's consumer group exist), else
// GET /coord/v1/streams/PREFIX. The shard of a key is murmur3 (the reference clients' rule,
// protocol/partition.hpp) unless --partitioner fnv1a. seq runs 0..count-1, so the records of one
// key go to one shard in increasing seq. A failed XADD is retried with backoff for up to
// --retry-ms (default 30000) before giving up, resending the failed records in order (in a Redis
// Cluster each XADD goes to its shard's node, pipelined per node); whenever it stops it prints how many records it wrote (a record whose answer was lost
// with the connection is sent again, so it may be written twice). With --shards, --key-pattern
// must say how the shard streams are named.
#include <csignal>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "member/http_client.hpp"
#include "protocol/codec.hpp"
#include "protocol/partition.hpp"
#include "redis/client.hpp"
#include "redis/options.hpp"

using namespace rsc;

namespace {

volatile std::sig_atomic_t stopSignal = 0;
void on_signal(int sig) { stopSignal = sig; }

[[noreturn]] void usage(const std::string& why) {
  std::cerr << "rsc-produce: " << why << "\n"
            << "usage: rsc-produce --redis HOST:PORT[,HOST:PORT...] [--redis-cluster] --stream PREFIX --count N\n"
               "                   [--coordinator URL [--group G] | --shards N [--key-pattern P]]\n"
               "                   [--partitioner murmur3|fnv1a] [--rate R] [--key-space K] [--seed S] [--retry-ms T]\n"
               "                   " << member::kClientTlsFlagsUsage << "\n"
            << "                   " << store::kRedisFlagsUsage << "\n"
            << "Environment: RSC_REDIS_USER, RSC_REDIS_PASSWORD, RSC_REDIS_PASSWORD_FILE, RSC_REDIS_TLS and\n"
               "RSC_REDIS_TLS_{CA_FILE,CA_DIR,CERT_FILE,KEY_FILE,SERVER_NAME}; flags override them.\n";
  std::exit(2);
}

struct Layout {
  long shards = 0;
  std::string pattern;  // "{shardIndex}" stands for the index
  std::string partitioner;
};

// The layout from the coordinator; exits with a message when it cannot be had.
Layout from_coordinator(const std::string& url, const std::string& stream, const std::string& group,
                        const member::ClientTls& coordinatorTls) {
  std::string err;
  member::HttpClient http(member::parse_url(url, &err), 5000, coordinatorTls);
  if (!err.empty()) usage("--coordinator: " + err);
  const std::string path = group.empty() ? "/coord/v1/streams/" + stream
                                         : "/coord/v1/streams/" + stream + "/groups/" + group + "/producer-routing";
  auto r = http.request("GET", path, "");
  auto j = nlohmann::json::parse(r.body, nullptr, false);
  if (r.status != 200 || !j.is_object()) {
    std::cerr << "rsc-produce: GET " << path << " answered HTTP " << r.status << " " << r.error << r.body << "\n";
    std::exit(1);
  }
  Layout l;
  l.shards = j.value("shardCount", 0);
  l.partitioner = j.value("partitioner", "");
  if (j.contains("streamKeyPattern") && j["streamKeyPattern"].is_string()) {
    l.pattern = j["streamKeyPattern"].get<std::string>();
  } else {  // a coordinator that does not say used hash-tagged keys
    l.pattern = protocol::stream_key_pattern(stream, protocol::KeyStyle::HashTag);
  }
  return l;
}

}  // namespace

int main(int argc, char** argv) {
  std::string redis, stream, coordinator, group, pattern, partitioner = "murmur3";
  bool redisCluster = false;
  long shards = 0, count = -1, rate = 0, keySpace = 100, seed = 1, retryMs = 30000;
  store::RedisOptions o;
  if (auto e = store::apply_redis_env(o, [](const char* n) { return std::getenv(n); }); !e.empty()) usage(e);
  member::ClientTls coordinatorTls;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto val = [&]() -> std::string {
      if (i + 1 >= argc) usage(a + " needs a value");
      return argv[++i];
    };
    auto num = [&]() -> long {
      const auto v = val();
      char* end = nullptr;
      const long x = std::strtol(v.c_str(), &end, 10);
      if (v.empty() || *end != '\0' || x < 0) usage(a + ": '" + v + "' is not a non-negative number");
      return x;
    };
    if (a == "--redis") redis = val();
    else if (a == "--redis-cluster") redisCluster = true;
    else if (a == "--stream") stream = val();
    else if (a == "--coordinator") coordinator = val();
    else if (a == "--group") group = val();
    else if (a == "--shards") shards = num();
    else if (a == "--key-pattern") pattern = val();
    else if (a == "--partitioner") partitioner = val();
    else if (a == "--count") count = num();
    else if (a == "--rate") rate = num();
    else if (a == "--key-space") keySpace = num();
    else if (a == "--seed") seed = num();
    else if (a == "--retry-ms") retryMs = num();
    else if (member::apply_client_tls_flag(coordinatorTls, a, val)) {}
    else if (a == "--help" || a == "-h") usage("help");
    else if (std::string error; store::apply_redis_flag(o, a, val, error)) {
      if (!error.empty()) usage(error);
    } else usage("unknown argument " + a);
  }
  if (redis.empty() || stream.empty() || count < 0) usage("--redis, --stream and --count are required");
  if (keySpace <= 0) usage("--key-space must be positive");
  if (partitioner != "murmur3" && partitioner != "fnv1a") usage("--partitioner: murmur3 or fnv1a, not '" + partitioner + "'");
  if (auto e = store::set_redis_nodes(o, redis); !e.empty()) usage("--redis: " + e);
  if (redisCluster) o.cluster = true;
  if (shards == 0) {
    if (coordinator.empty()) usage("give --shards N or --coordinator URL");
    const auto l = from_coordinator(coordinator, stream, group, coordinatorTls);
    shards = l.shards;
    pattern = l.pattern;
    if (!l.partitioner.empty() && l.partitioner != protocol::kPartitionerName && partitioner == "murmur3")
      std::cerr << "rsc-produce: the coordinator names partitioner '" << l.partitioner << "'; using murmur3\n";
  }
  if (shards <= 0) usage("the stream has no shards");
  if (shards > protocol::kMaxShardCount) usage("at most " + std::to_string(protocol::kMaxShardCount) + " shards");
  // Without a coordinator the keys must be named: streams differ (orders:3 or {orders:3}), and a
  // guess would write where nobody reads.
  if (pattern.empty()) usage("--shards needs --key-pattern (e.g. '" + stream + ":{shardIndex}'), or use --coordinator");
  if (pattern.find("{shardIndex}") == std::string::npos) usage("--key-pattern must contain {shardIndex}");
  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);

  store::RedisClient conn(o);  // a single Redis, or a cluster: each XADD on its shard's node
  std::mt19937_64 rng(static_cast<uint64_t>(seed));
  const auto t0 = std::chrono::steady_clock::now();
  const long batch = rate > 0 ? std::max<long>(1, rate / 50) : 200;
  long sent = 0;
  std::vector<store::Command> todo;
  auto stop = [&](const std::string& why) {
    std::cout << "rsc-produce: stopped after writing " << sent << " of " << count << " records: " << why << "\n";
    return 1;
  };
  while (sent < count) {
    if (stopSignal) return stop(stopSignal == SIGINT ? "SIGINT" : "SIGTERM");
    if (todo.empty()) {
      for (long i = 0; i < batch && sent + i < count; ++i) {
        const long seq = sent + i;
        const std::string key = "k" + std::to_string(rng() % static_cast<uint64_t>(keySpace));
        const auto n = static_cast<uint32_t>(shards);
        const uint32_t shard = partitioner == "fnv1a" ? protocol::fnv1a_shard(key, n) : protocol::murmur3_unbiased_shard(key, n);
        todo.push_back({"XADD", protocol::expand_key_pattern(pattern, static_cast<int32_t>(shard)), "*", "key", key, "seq",
                        std::to_string(seq)});
      }
    }
    // Send; what failed is sent again (in order) with backoff, for up to retryMs in a row.
    const auto firstFailure = std::chrono::steady_clock::now();
    int64_t backoffMs = 50;
    for (;;) {
      // What failed is sent again in the order given. A failure on one node fails everything after
      // it on that node (one pipeline per node), so the records of one shard keep their order.
      auto replies = conn.pipeline(todo);
      std::vector<store::Command> failed;
      std::string why;
      for (std::size_t i = 0; i < replies.size(); ++i) {
        if (replies[i].ok() && !replies[i].value->is_error()) {
          ++sent;
          continue;
        }
        if (why.empty()) why = replies[i].ok() ? replies[i].value->str : replies[i].error.message;
        failed.push_back(std::move(todo[i]));
      }
      todo = std::move(failed);
      if (todo.empty()) break;
      if (stopSignal) return stop(stopSignal == SIGINT ? "SIGINT" : "SIGTERM");
      if (std::chrono::steady_clock::now() - firstFailure > std::chrono::milliseconds(retryMs))
        return stop("XADD still failing after " + std::to_string(retryMs) + " ms: " + why);
      std::cerr << "rsc-produce: XADD failed (" << why << "); retrying " << todo.size() << " records in " << backoffMs
                << " ms\n";
      std::this_thread::sleep_for(std::chrono::milliseconds(backoffMs));
      backoffMs = std::min<int64_t>(backoffMs * 2, 1000);
    }
    if (rate > 0) {  // pace to the rate
      const auto due = t0 + std::chrono::microseconds(sent * 1'000'000 / rate);
      std::this_thread::sleep_until(due);
    }
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::cout << "rsc-produce: " << sent << " records to " << shards << " shards of " << stream << " (" << pattern
            << ", " << partitioner << ") in " << secs << "s\n";
  return 0;
}
