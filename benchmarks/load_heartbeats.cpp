// rsc-load: a closed-loop heartbeat load against running coordinator pods, bounded in time.
//   rsc-load --coordinator URL[,URL...] --groups G --members-per-group M --threads T --seconds S
//            [--stream PREFIX] [--rounds N]
// Every member joins, then each thread sends steady heartbeats (full state, keep-alive
// connections, pods taken round robin) for its members as fast as answers come, for S seconds
// (or until every member has sent N heartbeats: --rounds 1 only joins them all, to set up groups).
// Prints heartbeats/s, latency percentiles and the statuses seen.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <iostream>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "member/http_client.hpp"

using nlohmann::json;
using Clock = std::chrono::steady_clock;

namespace {

struct Member {
  std::string group, id;
  int32_t epoch = 0;
  std::vector<int32_t> owned;
  int seq = 0;
};

std::string body(Member& m) {
  json owned = json::array();
  for (auto s : m.owned) owned.push_back({{"shardIndex", s}, {"state", "OWNED"}});
  return json{{"protocolVersion", 1},
              {"requestId", m.id + "-" + std::to_string(++m.seq)},
              {"memberId", m.id},
              {"memberEpoch", m.epoch},
              {"metadataVersion", 1},
              {"runtimeConsumerCapacity", {{"runtimeMaxConcurrency", 1}, {"availableConcurrency", 1}}},
              {"ownedShards", owned}}
      .dump();
}

[[noreturn]] void usage(const std::string& why) {
  std::cerr << "rsc-load: " << why << "\n"
            << "usage: rsc-load --coordinator URL[,URL...] --groups G --members-per-group M --threads T --seconds S\n";
  std::exit(2);
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> urls;
  int groups = 10, perGroup = 10, threads = 4;
  double seconds = 5;
  std::string stream = "load";
  long rounds = 0;  // 0: until the time is up
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto val = [&]() -> std::string {
      if (i + 1 >= argc) usage(a + " needs a value");
      return argv[++i];
    };
    if (a == "--coordinator") {
      std::string v = val();
      for (std::size_t p = 0; p != std::string::npos;) {
        const auto c = v.find(',', p);
        urls.push_back(v.substr(p, c == std::string::npos ? std::string::npos : c - p));
        p = c == std::string::npos ? c : c + 1;
      }
    } else if (a == "--groups") groups = std::atoi(val().c_str());
    else if (a == "--members-per-group") perGroup = std::atoi(val().c_str());
    else if (a == "--threads") threads = std::atoi(val().c_str());
    else if (a == "--seconds") seconds = std::atof(val().c_str());
    else if (a == "--stream") stream = val();
    else if (a == "--rounds") rounds = std::atol(val().c_str());
    else usage("unknown argument " + a);
  }
  if (urls.empty() || groups <= 0 || perGroup <= 0 || threads <= 0 || seconds <= 0 || seconds > 600)
    usage("bad arguments (seconds at most 600)");

  std::vector<Member> members;
  for (int g = 0; g < groups; ++g)
    for (int m = 0; m < perGroup; ++m) members.push_back({"g" + std::to_string(g), "m" + std::to_string(m), 0, {}, 0});

  std::mutex mu;
  std::map<std::string, long> statuses;
  std::vector<double> latencies;
  std::atomic<long> sent{0};
  const auto t0 = Clock::now();
  const auto until = t0 + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
  std::vector<std::thread> ts;
  for (int t = 0; t < threads; ++t) {
    ts.emplace_back([&, t] {
      std::vector<std::unique_ptr<rsc::member::HttpClient>> clients;
      for (const auto& u : urls) {
        std::string err;
        clients.push_back(std::make_unique<rsc::member::HttpClient>(rsc::member::parse_url(u, &err), 5000));
      }
      std::map<std::string, long> myStatus;
      std::vector<double> myLat;
      std::size_t round = 0;
      while (Clock::now() < until && (rounds <= 0 || static_cast<long>(round) < rounds)) {
        for (std::size_t i = static_cast<std::size_t>(t); i < members.size() && Clock::now() < until;
             i += static_cast<std::size_t>(threads)) {
          Member& m = members[i];
          auto& client = *clients[(round + i) % clients.size()];
          const auto s = Clock::now();
          auto r = client.request("POST", "/coord/v1/streams/" + stream + "/groups/" + m.group + "/members/" + m.id + "/heartbeat",
                                  body(m));
          const double ms = std::chrono::duration<double, std::milli>(Clock::now() - s).count();
          ++sent;
          myLat.push_back(ms);
          auto j = json::parse(r.body, nullptr, false);
          const std::string st = j.is_object() ? j.value("status", "?") : (r.status == 0 ? "NO_ANSWER" : "HTTP_" + std::to_string(r.status));
          ++myStatus[st];
          if (st == "OK" || st == "REVOKE_PENDING") {
            if (j["memberEpoch"].get<int32_t>() > 0) m.epoch = j["memberEpoch"];
            if (j["assignment"].is_object()) {
              m.owned.clear();
              for (const auto& x : j["assignment"]["assignedShards"]) m.owned.push_back(x["shardIndex"]);
            }
          } else if (st == "FENCED_MEMBER_EPOCH" || st == "UNKNOWN_MEMBER_ID") {
            m.epoch = 0;
            m.owned.clear();
          }
        }
        ++round;
      }
      std::lock_guard<std::mutex> lock(mu);
      for (auto& [k, v] : myStatus) statuses[k] += v;
      latencies.insert(latencies.end(), myLat.begin(), myLat.end());
    });
  }
  for (auto& t : ts) t.join();
  const double elapsed = std::chrono::duration<double>(Clock::now() - t0).count();
  std::sort(latencies.begin(), latencies.end());
  auto pct = [&](double p) { return latencies.empty() ? 0.0 : latencies[static_cast<std::size_t>(p * (latencies.size() - 1))]; };
  std::cout << "rsc-load: " << members.size() << " members in " << groups << " groups, " << threads << " threads, "
            << urls.size() << " pod(s), " << elapsed << " s: " << static_cast<long>(sent / elapsed)
            << " heartbeats/s; latency ms p50 " << pct(0.5) << " p90 " << pct(0.9) << " p99 " << pct(0.99)
            << " max " << pct(1.0) << "; statuses:";
  for (const auto& [k, v] : statuses) std::cout << " " << k << "=" << v;
  std::cout << "\n";
  return 0;
}
