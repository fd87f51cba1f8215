// rsc-produce: writes records to a sharded stream through rsc::member::Producer (member/producer.hpp):
// routed by the coordinator's producer-routing, following changes of the shard count.
//   rsc-produce --redis HOST:PORT[,HOST:PORT...] [--redis-cluster] --stream PREFIX
//               (--count N | --stdin)
//               [--coordinator URL [--group G] | --shards N --key-pattern P]
//               [--partitioner murmur3|fnv1a] [--rate R] [--key-space K] [--seed S] [--retry-ms T]
//               [--refresh-ms T] [--max-len N] [--token T]
// --count N: synthetic records {key: k<random below K>, seq: S..S+N-1 (--seq-start S, default 0)}, so the records of one key
// are in increasing seq. --stdin: one record per line "KEY<TAB>DATA" (DATA, e.g. JSON, written as
// the field "data", the key as "key"), until end of input; a line without a tab is refused.
// With --group the routing is GET .../groups/G/producer-routing (the coordinator makes sure every
// shard stream and G's consumer group exist) and each XADD is NOMKSTREAM; without --group it is
// GET /coord/v1/streams/PREFIX and a missing shard stream is created. The routing is read again
// every --refresh-ms (default 1000) and when a write finds its shard stream missing; failed
// records are sent again in order, with backoff, for up to --retry-ms (default 30000). Whenever it
// stops it prints how many records it wrote (a record whose answer was lost with the connection is
// sent again, so it may be written twice). With --shards, --key-pattern must say how the shard
// streams are named (no coordinator, never refreshed).
#include <unistd.h>

#include <cerrno>
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

#include "member/bearer_token.hpp"
#include "member/http_client.hpp"
#include "member/producer.hpp"
#include "protocol/codec.hpp"
#include "protocol/partition.hpp"
#include "redis/client.hpp"
#include "redis/options.hpp"
#include "redis/transport.hpp"

using namespace rsc;

namespace {

volatile std::sig_atomic_t stopSignal = 0;
void on_signal(int sig) { stopSignal = sig; }

// `why` empty: the help asked for (stdout, exit 0); else a usage error (stderr, exit 2).
[[noreturn]] void usage(const std::string& why) {
  std::ostream& os = why.empty() ? std::cout : std::cerr;
  if (!why.empty()) os << "rsc-produce: " << why << "\n";
  os << "usage: rsc-produce --redis HOST:PORT[,HOST:PORT...] [--redis-cluster] --stream PREFIX (--count N | --stdin)\n"
               "                   [--coordinator URL [--group G] | --shards N --key-pattern P]\n"
               "                   [--partitioner murmur3|fnv1a] [--rate R] [--key-space K] [--seed S] [--retry-ms T]\n"
               "                   [--refresh-ms T] [--max-len N] [--token T | --token-file F] [--seq-start S]\n"
               "--stdin: one record per line, KEY<TAB>DATA (fields key and data).\n"
               "                   " << member::kClientTlsFlagsUsage << "\n"
            << "                   " << store::kRedisFlagsUsage << "\n"
            << "--token-file F (or RSC_TOKEN_FILE): the token from a file, kept out of the command line; read again\n"
               "when the coordinator refuses it.\n"
               "Environment: RSC_TOKEN, RSC_TOKEN_FILE, RSC_REDIS_USER, RSC_REDIS_PASSWORD, RSC_REDIS_PASSWORD_FILE, RSC_REDIS_TLS and\n"
               "RSC_REDIS_TLS_{CA_FILE,CA_DIR,CERT_FILE,KEY_FILE,SERVER_NAME}; flags override them.\n";
  std::exit(why.empty() ? 0 : 2);
}

// Whole lines from stdin as they arrive: each read() hands over what is there, so a slow pipe is
// written as it comes and a fast one in batches.
class LineReader {
 public:
  // Up to `max` lines; blocks for the first; false at end of input with nothing left.
  bool next(std::vector<std::string>& out, std::size_t max) {
    out.clear();
    for (;;) {
      for (std::size_t nl; out.size() < max && (nl = buf_.find('\n')) != std::string::npos;) {
        out.push_back(buf_.substr(0, nl));
        buf_.erase(0, nl + 1);
      }
      if (!out.empty()) return true;
      if (eof_) {
        if (buf_.empty()) return false;
        out.push_back(std::move(buf_));  // a last line without a newline
        buf_.clear();
        return true;
      }
      char chunk[65536];
      const ssize_t n = ::read(0, chunk, sizeof chunk);
      if (n < 0 && errno == EINTR) {
        if (stopSignal) return false;
        continue;
      }
      if (n <= 0) eof_ = true;
      else buf_.append(chunk, static_cast<std::size_t>(n));
    }
  }

 private:
  std::string buf_;
  bool eof_ = false;
};

}  // namespace

int main(int argc, char** argv) {
  std::string redis, stream, coordinator, group, pattern, partitioner = "murmur3";
  bool redisCluster = false, fromStdin = false;
  long shards = 0, count = -1, rate = 0, keySpace = 100, seed = 1, retryMs = 30000, refreshMs = 1000, maxLen = 0,
       seqStart = 0;
  store::RedisOptions o;
  if (auto e = store::apply_redis_env(o, [](const char* n) { return std::getenv(n); }); !e.empty()) usage(e);
  member::ProducerOptions po;
  member::TokenSource token;
  if (auto e = member::apply_token_env(token, [](const char* n) { return std::getenv(n); }); !e.empty()) usage(e);
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
    else if (a == "--stdin") fromStdin = true;
    else if (a == "--rate") rate = num();
    else if (a == "--key-space") keySpace = num();
    else if (a == "--seed") seed = num();
    else if (a == "--retry-ms") retryMs = num();
    else if (a == "--refresh-ms") refreshMs = num();
    else if (a == "--max-len") maxLen = num();
    else if (a == "--seq-start") seqStart = num();
    else if (std::string tokenError; member::apply_token_flag(token, a, val, tokenError)) {
      if (!tokenError.empty()) usage(tokenError);
    }
    else if (member::apply_client_tls_flag(po.coordinatorTls, a, val)) {}
    else if (a == "--help" || a == "-h") usage("");
    else if (a == "--version") {
      std::cout << "rsc-produce " << RSC_VERSION << " (commit " << RSC_COMMIT << ")\n";
      return 0;
    }
    else if (std::string error; store::apply_redis_flag(o, a, val, error)) {
      if (!error.empty()) usage(error);
    } else usage("unknown argument " + a);
  }
  if (redis.empty() || stream.empty() || (count < 0 && !fromStdin)) usage("--redis, --stream and --count (or --stdin) are required");
  if (fromStdin && count >= 0) usage("--count and --stdin exclude each other");
  po.token = token.token;
  po.tokenFile = token.file;
  // A file that cannot be read fails here, naming it, not after the retries of every write.
  if (auto e = store::check_tls_files(o.tls); !e.empty()) usage(e);
  if (auto e = member::check_client_tls_files(po.coordinatorTls); !e.empty()) usage(e);
  if (keySpace <= 0) usage("--key-space must be positive");
  if (partitioner != "murmur3" && partitioner != "fnv1a") usage("--partitioner: murmur3 or fnv1a, not '" + partitioner + "'");
  if (auto e = store::set_redis_nodes(o, redis); !e.empty()) usage("--redis: " + e);
  if (redisCluster) o.cluster = true;
  if (shards == 0 && coordinator.empty()) usage("give --shards N or --coordinator URL");
  if (shards > protocol::kMaxShardCount) usage("at most " + std::to_string(protocol::kMaxShardCount) + " shards");
  // Without a coordinator the keys must be named: streams differ (orders:3 or {orders:3}), and a
  // guess would write where nobody reads.
  if (shards > 0 && pattern.empty()) usage("--shards needs --key-pattern (e.g. '" + stream + ":{shardIndex}'), or use --coordinator");
  if (shards > 0 && pattern.find("{shardIndex}") == std::string::npos) usage("--key-pattern must contain {shardIndex}");
  if (refreshMs <= 0) usage("--refresh-ms must be positive");
  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);

  po.coordinatorUrl = coordinator;
  po.streamPrefix = stream;
  po.group = group;
  po.redis = o;
  po.refreshIntervalMs = refreshMs;
  po.maxLen = maxLen;
  po.retryBudgetMs = retryMs;
  po.partitioner = partitioner;
  po.fixedShardCount = static_cast<int32_t>(shards);
  po.fixedKeyPattern = pattern;
  po.createMissingStreams = group.empty();
  po.log = [](const std::string& line) { std::cerr << "rsc-produce: " << line << "\n"; };
  member::Producer producer(po);

  std::mt19937_64 rng(static_cast<uint64_t>(seed));
  const auto t0 = std::chrono::steady_clock::now();
  const long batch = rate > 0 ? std::max<long>(1, rate / 50) : 200;
  long sent = 0, lineNo = 0;
  auto stop = [&](const std::string& why) {
    std::cout << "rsc-produce: stopped after writing " << sent << (fromStdin ? std::string() : " of " + std::to_string(count))
              << " records: " << why << "\n";
    return 1;
  };
  LineReader lines;
  std::vector<std::string> got;
  std::vector<member::ProducerRecord> records;
  for (;;) {
    if (stopSignal) return stop(stopSignal == SIGINT ? "SIGINT" : "SIGTERM");
    records.clear();
    if (fromStdin) {
      if (!lines.next(got, static_cast<std::size_t>(batch))) break;
      for (auto& line : got) {
        ++lineNo;
        if (!line.empty() && line.back() == '\r') line.pop_back();
        const auto tab = line.find('\t');
        if (tab == std::string::npos || tab == 0)
          return stop("line " + std::to_string(lineNo) + " is not KEY<TAB>DATA");
        const std::string key = line.substr(0, tab);
        records.push_back({key, {{"key", key}, {"data", line.substr(tab + 1)}}});
      }
    } else {
      if (sent >= count) break;
      for (long i = 0; i < batch && sent + i < count; ++i) {
        const std::string key = "k" + std::to_string(rng() % static_cast<uint64_t>(keySpace));
        records.push_back({key, {{"key", key}, {"seq", std::to_string(seqStart + sent + i)}}});
      }
    }
    const auto r = producer.send(records);
    sent += r.written;
    if (!r.ok) return stop(r.error);
    if (rate > 0) {  // pace to the rate
      const auto due = t0 + std::chrono::microseconds(sent * 1'000'000 / rate);
      std::this_thread::sleep_until(due);
    }
  }
  const auto st = producer.stats();
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::cout << "rsc-produce: " << sent << " records to " << st.shardCount << " shards of " << stream << " (metadata version "
            << st.metadataVersion << ", " << partitioner << ") in " << secs << "s; routing read " << st.routingReads
            << " times, changed " << st.routingChanges << " times, " << st.refusedNoStream
            << " writes refused for a missing shard stream\n";
  return 0;
}
