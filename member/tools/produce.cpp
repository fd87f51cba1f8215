// rsc-produce: XADDs records {key, seq} to shard hash(key) % shardCount of a sharded stream.
//   rsc-produce --redis HOST:PORT --stream PREFIX [--shards N | --coordinator URL] --count N
//               [--rate R] [--key-space K] [--seed S]
// hash is 32-bit FNV-1a of the key; seq runs 0..count-1, so records of one key go to one shard in
// increasing seq.
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
#include "redis/connection.hpp"
#include "redis/keys.hpp"

using namespace rsc;

namespace {

uint32_t fnv1a(const std::string& s) {
  uint32_t h = 2166136261u;
  for (unsigned char c : s) {
    h ^= c;
    h *= 16777619u;
  }
  return h;
}

[[noreturn]] void usage(const std::string& why) {
  std::cerr << "rsc-produce: " << why << "\n"
            << "usage: rsc-produce --redis HOST:PORT --stream PREFIX [--shards N | --coordinator URL] --count N\n"
               "                   [--rate R] [--key-space K] [--seed S]\n";
  std::exit(2);
}

}  // namespace

int main(int argc, char** argv) {
  std::string redis, stream, coordinator;
  long shards = 0, count = -1, rate = 0, keySpace = 100, seed = 1;
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
    else if (a == "--stream") stream = val();
    else if (a == "--coordinator") coordinator = val();
    else if (a == "--shards") shards = num();
    else if (a == "--count") count = num();
    else if (a == "--rate") rate = num();
    else if (a == "--key-space") keySpace = num();
    else if (a == "--seed") seed = num();
    else if (a == "--help" || a == "-h") usage("help");
    else usage("unknown argument " + a);
  }
  if (redis.empty() || stream.empty() || count < 0) usage("--redis, --stream and --count are required");
  if (keySpace <= 0) usage("--key-space must be positive");
  const auto colon = redis.rfind(':');
  if (colon == std::string::npos) usage("--redis: expected HOST:PORT");
  if (shards == 0) {
    if (coordinator.empty()) usage("give --shards N or --coordinator URL");
    std::string err;
    member::HttpClient http(member::parse_url(coordinator, &err), 5000);
    if (!err.empty()) usage("--coordinator: " + err);
    auto r = http.request("GET", "/coord/v1/streams/" + stream, "");
    if (r.status != 200) {
      std::cerr << "rsc-produce: cannot read stream " << stream << " from the coordinator (HTTP " << r.status << ") "
                << r.error << r.body << "\n";
      return 1;
    }
    shards = nlohmann::json::parse(r.body).value("shardCount", 0);
  }
  if (shards <= 0) usage("the stream has no shards");

  store::RedisOptions o;
  o.host = redis.substr(0, colon);
  o.port = std::atoi(redis.substr(colon + 1).c_str());
  store::RedisConnection conn(o);
  store::KeySpace keys;
  std::mt19937_64 rng(static_cast<uint64_t>(seed));
  const auto t0 = std::chrono::steady_clock::now();
  const long batch = rate > 0 ? std::max<long>(1, rate / 50) : 200;
  long sent = 0;
  while (sent < count) {
    std::vector<store::Command> cmds;
    for (long i = 0; i < batch && sent + i < count; ++i) {
      const long seq = sent + i;
      const std::string key = "k" + std::to_string(rng() % static_cast<uint64_t>(keySpace));
      const int32_t shard = static_cast<int32_t>(fnv1a(key) % static_cast<uint32_t>(shards));
      cmds.push_back({"XADD", keys.shard_stream(stream, shard), "*", "key", key, "seq", std::to_string(seq)});
    }
    auto replies = conn.pipeline(cmds);
    for (auto& r : replies) {
      if (!r.ok() || r.value->is_error()) {
        std::cerr << "rsc-produce: XADD failed: " << (r.ok() ? r.value->str : r.error.message) << "\n";
        return 1;
      }
    }
    sent += static_cast<long>(cmds.size());
    if (rate > 0) {  // pace to the rate
      const auto due = t0 + std::chrono::microseconds(sent * 1'000'000 / rate);
      std::this_thread::sleep_until(due);
    }
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::cout << "rsc-produce: " << sent << " records to " << shards << " shards of " << stream << " in " << secs << "s\n";
  return 0;
}
