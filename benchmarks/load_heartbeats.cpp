// rsc-load: a heartbeat load against running coordinator pods, bounded in time.
//   rsc-load --coordinator URL[,URL...] --groups G --members-per-group M --threads T --seconds S
//            [--stream PREFIX] [--rounds N] [--interval-ms I] [--healthz-seconds H]
//            [--redis HOST:PORT] [--pids PID[,PID...]]
//            [--coordinator-ca-file F] [--coordinator-cert-file F --coordinator-key-file F] (https://)
//            [--redis-tls-* ...] (the --redis-* flags of every rsc program, for --redis)
//            [--progress none|still|moving] [--settle-rounds N] [--follow-owner]
// Phases, each bounded: every member joins; then, when H > 0, GET /healthz as fast as answers come
// on the same connections for H seconds (the HTTP baseline of this run); then steady heartbeats
// (full state, keep-alive connections, pods taken round robin) for S seconds, as fast as answers
// come, or each member every I ms (--interval-ms, an offered rate like real members'), or until
// every member has sent N heartbeats (--rounds 1 only joins them, to set up groups).
// Prints heartbeats/s, /healthz req/s and their ratio, latency percentiles, statuses, and with
// --redis the Redis commands and socket reads per heartbeat (INFO stats around the phase), with
// --pids the coordinators' RSS before the joins, after them (per member) and after the load.
// --progress shapes each heartbeat as the member runtime sends it: its `revokingShards` and a
// `shardProgress` entry per owned shard whose lastDeliveredId stays put (`still`: an idle consumer)
// or moves on with every heartbeat (`moving`: records flowing, so every heartbeat changes what the
// coordinator stores); `none` (the default) sends no progress. The last line, `rsc-load: row ...`,
// has the figures as key=value pairs for scripts (scripts/bench-members.sh). --settle-rounds N:
// after the joins, every member heartbeats N times before anything is measured, so that the
// groups' rebalances (revocations, handovers) are over and the measured heartbeats are steady ones.
// --follow-owner: each member sends its next heartbeat to the pod its last answer named
// (Rsc-Group-Owner), as rsc's member runtime does, falling back to its round-robin pod at once when
// that pod does not answer; without it the pods are taken round robin (a Service, or a client that
// ignores the header). `followed=` counts the heartbeats sent to a named owner.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <unistd.h>
#include <vector>

#include "benchmarks/proc.hpp"
#include "member/http_client.hpp"
#include "member/owner_follower.hpp"
#include "redis/client.hpp"
#include "redis/connection.hpp"
#include "redis/options.hpp"

using nlohmann::json;
using Clock = std::chrono::steady_clock;

using rsc::bench::cpu_seconds;
using rsc::bench::rss_kib;
using rsc::bench::split;
using rsc::bench::thread_figures;

namespace {

struct Member {
  std::string group, id;
  int32_t epoch = 0;
  std::vector<int32_t> owned;
  int seq = 0;
  // The request without its requestId, rebuilt only when the epoch or the shards change: a load
  // generator that built a JSON document per request would spend more of the shared cores on a
  // heartbeat than on a /healthz and skew their ratio (wrk with a Lua script does not).
  std::string head, tail;
  std::string owner;  // --follow-owner: the pod the last answer named ("" none)
};

enum class Progress { None, Still, Moving };

void rebuild(Member& m) {
  json owned = json::array();
  for (auto s : m.owned) owned.push_back({{"shardIndex", s}, {"state", "OWNED"}});
  const std::string mark = "\x01";
  const std::string all = json{{"protocolVersion", 1},
                               {"requestId", mark},
                               {"memberId", m.id},
                               {"memberEpoch", m.epoch},
                               {"metadataVersion", 1},
                               {"runtimeConsumerCapacity", {{"runtimeMaxConcurrency", 1}, {"availableConcurrency", 1}}},
                               {"ownedShards", owned},
                               {"revokingShards", json::array()}}
                              .dump();
  const std::string quoted = json(mark).dump();
  const auto at = all.find(quoted);
  m.head = all.substr(0, at + 1);
  m.tail = all.substr(at + quoted.size() - 1);
  m.tail.pop_back();  // the closing brace: shardProgress goes before it
}

std::string body(Member& m, Progress progress) {
  if (m.head.empty()) rebuild(m);
  const auto seq = std::to_string(++m.seq);
  std::string b = m.head + m.id + "-" + seq + m.tail;
  if (progress != Progress::None) {
    // As the runtime reports a shard it reads: the last id it delivered, nothing pending, no lag.
    const std::string id = progress == Progress::Moving ? "1700000000000-" + seq : "1700000000000-0";
    b += ",\"shardProgress\":[";
    for (std::size_t i = 0; i < m.owned.size(); ++i) {
      if (i) b += ',';
      b += "{\"shardIndex\":" + std::to_string(m.owned[i]) + ",\"lastDeliveredId\":\"" + id + "\",\"pending\":0,\"lag\":0}";
    }
    b += ']';
  }
  b += '}';
  return b;
}

// What the load needs of an answer. The coordinator writes its answers in one fixed key order
// (assignment first, status last), so they are scanned rather than parsed into a document (as wrk
// with a Lua script would); anything else is parsed in full.
struct Answer {
  std::string status;
  int32_t memberEpoch = 0;
  std::optional<std::vector<int32_t>> assigned;
};

Answer read_answer(const rsc::member::HttpReply& r) {
  Answer a;
  const std::string& b = r.body;
  static const std::string head = "{\"assignment\":{\"assignedShards\":[";
  static const std::string ref = "{\"shardIndex\":";
  static const std::string epochKey = ",\"memberEpoch\":";
  static const std::string statusKey = ",\"status\":\"";
  const auto st = b.rfind(statusKey);
  const auto ep = b.find(epochKey);
  if (r.status == 200 && b.compare(0, head.size(), head) == 0 && st != std::string::npos && ep != std::string::npos) {
    std::vector<int32_t> shards;
    std::size_t at = head.size();
    while (b.compare(at, ref.size(), ref) == 0) {
      char* end = nullptr;
      shards.push_back(static_cast<int32_t>(std::strtol(b.c_str() + at + ref.size(), &end, 10)));
      at = static_cast<std::size_t>(end - b.c_str()) + 1;  // past the '}'
      if (at < b.size() && b[at] == ',') ++at;
    }
    a.assigned = std::move(shards);
    a.memberEpoch = static_cast<int32_t>(std::strtol(b.c_str() + ep + epochKey.size(), nullptr, 10));
    const auto from = st + statusKey.size();
    a.status = b.substr(from, b.find('"', from) - from);
    return a;
  }
  auto j = json::parse(b, nullptr, false);
  if (!j.is_object()) {
    a.status = r.status == 0 ? "NO_ANSWER" : "HTTP_" + std::to_string(r.status);
    return a;
  }
  a.status = j.value("status", "?");
  if (j.contains("memberEpoch") && j["memberEpoch"].is_number_integer()) a.memberEpoch = j["memberEpoch"];
  if (j.contains("assignment") && j["assignment"].is_object()) {
    a.assigned.emplace();
    for (const auto& x : j["assignment"]["assignedShards"]) a.assigned->push_back(x["shardIndex"]);
  }
  return a;
}

[[noreturn]] void usage(const std::string& why) {
  std::cerr << "rsc-load: " << why << "\n"
            << "usage: rsc-load --coordinator URL[,URL...] --groups G --members-per-group M --threads T --seconds S\n"
            << "                [--stream P] [--rounds N] [--interval-ms I] [--healthz-seconds H] [--settle-rounds N]\n"
            << "                [--follow-owner]\n"
            << "                [--redis HOST:PORT] [--pids PID[,PID...]] [--progress none|still|moving]\n"
            << "                " << rsc::member::kClientTlsFlagsUsage << "\n"
            << "                " << rsc::store::kRedisFlagsUsage << "\n";
  std::exit(2);
}

struct RedisCounters {
  long long commands = -1, reads = -1;
  double cpu = -1;
  std::map<std::string, long long> calls;  // by command (INFO commandstats)
};
RedisCounters redis_counters(rsc::store::RedisConnection* c) {
  RedisCounters out;
  if (!c) return out;
  auto r = c->command({"INFO", "stats"});
  if (!r.ok()) return out;
  std::istringstream in(r.value->str);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("total_commands_processed:", 0) == 0) out.commands = std::atoll(line.c_str() + 25);
    if (line.rfind("total_reads_processed:", 0) == 0) out.reads = std::atoll(line.c_str() + 22);
  }
  auto stats = c->command({"INFO", "commandstats"});
  if (stats.ok()) {
    std::istringstream sin(stats.value->str);
    while (std::getline(sin, line))
      if (line.rfind("cmdstat_", 0) == 0 && line.find(":calls=") != std::string::npos)
        out.calls[line.substr(8, line.find(':') - 8)] = std::atoll(line.c_str() + line.find(":calls=") + 7);
  }
  auto cpu = c->command({"INFO", "cpu"});
  if (cpu.ok()) {
    std::istringstream cin(cpu.value->str);
    out.cpu = 0;
    while (std::getline(cin, line))
      if (line.rfind("used_cpu_sys:", 0) == 0 || line.rfind("used_cpu_user:", 0) == 0)
        out.cpu += std::atof(line.c_str() + line.find(':') + 1);
  }
  return out;
}

struct Tally {
  std::map<std::string, long> statuses;
  std::vector<double> latencies;
  long sent = 0;
  long followed = 0;   // sent straight to the owner an earlier answer named (--follow-owner)
  long fallbacks = 0;  // of those, sent again to the round-robin pod because the owner did not answer
};

double pct(std::vector<double>& v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[static_cast<std::size_t>(p * static_cast<double>(v.size() - 1))];
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> urls, pids;
  int groups = 10, perGroup = 10, threads = 4;
  double seconds = 5, healthzSeconds = 0;
  long rounds = 0, intervalMs = 0, settleRounds = 0;
  bool followOwner = false;
  std::string stream = "load", redisAddr;
  Progress progress = Progress::None;
  rsc::member::ClientTls tls;
  rsc::store::RedisOptions redisOptions;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto val = [&]() -> std::string {
      if (i + 1 >= argc) usage(a + " needs a value");
      return argv[++i];
    };
    if (a == "--coordinator") urls = split(val());
    else if (a == "--groups") groups = std::atoi(val().c_str());
    else if (a == "--members-per-group") perGroup = std::atoi(val().c_str());
    else if (a == "--threads") threads = std::atoi(val().c_str());
    else if (a == "--seconds") seconds = std::atof(val().c_str());
    else if (a == "--healthz-seconds") healthzSeconds = std::atof(val().c_str());
    else if (a == "--stream") stream = val();
    else if (a == "--rounds") rounds = std::atol(val().c_str());
    else if (a == "--interval-ms") intervalMs = std::atol(val().c_str());
    else if (a == "--settle-rounds") settleRounds = std::atol(val().c_str());
    else if (a == "--follow-owner") followOwner = true;
    else if (a == "--redis") redisAddr = val();
    else if (a == "--pids") pids = split(val());
    else if (a == "--progress") {
      const auto v = val();
      if (v == "none") progress = Progress::None;
      else if (v == "still") progress = Progress::Still;
      else if (v == "moving") progress = Progress::Moving;
      else usage("--progress is none, still or moving, not '" + v + "'");
    }
    else if (rsc::member::apply_client_tls_flag(tls, a, val)) {}
    else if (std::string error; rsc::store::apply_redis_flag(redisOptions, a, val, error)) {
      if (!error.empty()) usage(error);
    } else usage("unknown argument " + a);
  }
  if (urls.empty() || groups <= 0 || perGroup <= 0 || threads <= 0 || seconds <= 0 || seconds > 600 ||
      healthzSeconds < 0 || healthzSeconds > 600 || intervalMs < 0 || settleRounds < 0 || settleRounds > 100)
    usage("bad arguments (seconds at most 600)");

  std::unique_ptr<rsc::store::RedisConnection> redis;
  if (!redisAddr.empty()) {
    if (auto e = rsc::store::set_redis_nodes(redisOptions, redisAddr); !e.empty()) usage("--redis: " + e);
    redis = std::make_unique<rsc::store::RedisConnection>(redisOptions);  // the first node's counters
  }

  std::vector<Member> members;
  for (int g = 0; g < groups; ++g)
    for (int m = 0; m < perGroup; ++m) {
      Member one;
      one.group = "g" + std::to_string(g);
      one.id = "m" + std::to_string(m);
      members.push_back(std::move(one));
    }

  // One keep-alive client per thread and pod, for the whole run.
  std::vector<std::vector<std::unique_ptr<rsc::member::HttpClient>>> clients(static_cast<std::size_t>(threads));
  for (auto& c : clients)
    for (const auto& u : urls) {
      std::string err;
      c.push_back(std::make_unique<rsc::member::HttpClient>(rsc::member::parse_url(u, &err), 5000, tls));
    }

  // --follow-owner: a thread's connections to pods that are not among the URLs given, by base URL.
  std::vector<std::map<std::string, std::unique_ptr<rsc::member::HttpClient>>> ownerClients(static_cast<std::size_t>(threads));
  auto client_for = [&](int t, const std::string& url) -> rsc::member::HttpClient& {
    for (std::size_t i = 0; i < urls.size(); ++i)
      if (urls[i] == url) return *clients[static_cast<std::size_t>(t)][i];
    auto& mine = ownerClients[static_cast<std::size_t>(t)][url];
    if (!mine) {
      std::string err;
      mine = std::make_unique<rsc::member::HttpClient>(rsc::member::parse_url(url, &err), 5000, tls);
    }
    return *mine;
  };
  auto beat = [&](int t, Member& m, std::size_t pick, Tally& tally) {
    const std::string& configured = urls[pick % urls.size()];
    // The rules of member/owner_follower.hpp, with the member's round-robin pod as its configured URL.
    rsc::member::OwnerFollower route(configured, followOwner);
    route.on_answer(m.owner, 0);
    const auto s = Clock::now();
    const std::string path = "/coord/v1/streams/" + stream + "/groups/" + m.group + "/members/" + m.id + "/heartbeat";
    const bool direct = route.direct();
    auto r = client_for(t, route.target()).request("POST", path, body(m, progress));
    if (r.status == 0 && route.on_failure(0)) {
      ++tally.fallbacks;
      r = client_for(t, route.target()).request("POST", path, body(m, progress));
    }
    if (followOwner) m.owner = r.status == 0 ? "" : r.groupOwner;
    tally.latencies.push_back(std::chrono::duration<double, std::milli>(Clock::now() - s).count());
    ++tally.sent;
    tally.followed += direct;
    const auto a = read_answer(r);
    ++tally.statuses[a.status];
    const auto before = std::make_pair(m.epoch, m.owned);
    if (a.status == "OK" || a.status == "REVOKE_PENDING") {
      if (a.memberEpoch > 0) m.epoch = a.memberEpoch;
      if (a.assigned) m.owned = *a.assigned;
    } else if (a.status == "FENCED_MEMBER_EPOCH" || a.status == "UNKNOWN_MEMBER_ID") {
      m.epoch = 0;
      m.owned.clear();
    }
    if (before != std::make_pair(m.epoch, m.owned)) m.head.clear();
  };
  auto run_threads = [&](const std::function<void(int, Tally&)>& body) {
    std::vector<Tally> tallies(static_cast<std::size_t>(threads));
    std::vector<std::thread> ts;
    for (int t = 0; t < threads; ++t) ts.emplace_back([&, t] { body(t, tallies[static_cast<std::size_t>(t)]); });
    for (auto& t : ts) t.join();
    Tally all;
    for (auto& x : tallies) {
      for (auto& [k, v] : x.statuses) all.statuses[k] += v;
      all.latencies.insert(all.latencies.end(), x.latencies.begin(), x.latencies.end());
      all.sent += x.sent;
      all.followed += x.followed;
      all.fallbacks += x.fallbacks;
    }
    return all;
  };

  // 1. Joins (paced runs join in their first round instead: a member that joined then waits for
  // its next heartbeat no longer than the interval, as a real one would).
  const long rssBefore = rss_kib(pids);
  const auto j0 = Clock::now();
  auto joins = run_threads([&](int t, Tally& tally) {
    if (intervalMs > 0 && rounds != 1) return;
    for (std::size_t i = static_cast<std::size_t>(t); i < members.size(); i += static_cast<std::size_t>(threads))
      beat(t, members[i], i, tally);
  });
  const double joinSeconds = std::chrono::duration<double>(Clock::now() - j0).count();
  const long rssJoined = rss_kib(pids);
  if (joins.sent > 0) {
    std::cout << "rsc-load: " << members.size() << " members in " << groups << " groups joined in " << joinSeconds
              << " s; statuses:";
    for (const auto& [k, v] : joins.statuses) std::cout << " " << k << "=" << v;
    std::cout << "\n";
  }
  if (rounds == 1) return 0;
  if (settleRounds > 0) {
    const auto s0 = Clock::now();
    auto settled = run_threads([&](int t, Tally& tally) {
      for (long r = 0; r < settleRounds; ++r)
        for (std::size_t i = static_cast<std::size_t>(t); i < members.size(); i += static_cast<std::size_t>(threads))
          beat(t, members[i], i + static_cast<std::size_t>(r), tally);
    });
    std::cout << "rsc-load: " << settleRounds << " settling round(s) of every member in "
              << std::chrono::duration<double>(Clock::now() - s0).count() << " s; statuses:";
    for (const auto& [k, v] : settled.statuses) std::cout << " " << k << "=" << v;
    std::cout << "\n";
  }

  // 2. The HTTP baseline on the same connections.
  double healthzPerSecond = 0, healthzCpuUs = 0, healthzSelfUs = 0;
  if (healthzSeconds > 0) {
    const double cpu0 = cpu_seconds(pids);
    const double self0 = cpu_seconds({"self"});
    const auto until = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(healthzSeconds));
    const auto h0 = Clock::now();
    auto h = run_threads([&](int t, Tally& tally) {
      std::size_t n = 0;
      while (Clock::now() < until) {
        auto r = clients[static_cast<std::size_t>(t)][n++ % urls.size()]->request("GET", "/healthz", "");
        ++tally.sent;
        ++tally.statuses[r.status == 200 ? "200" : "HTTP_" + std::to_string(r.status)];
      }
    });
    healthzPerSecond = static_cast<double>(h.sent) / std::chrono::duration<double>(Clock::now() - h0).count();
    if (h.sent > 0) {
      healthzCpuUs = (cpu_seconds(pids) - cpu0) * 1e6 / static_cast<double>(h.sent);
      healthzSelfUs = (cpu_seconds({"self"}) - self0) * 1e6 / static_cast<double>(h.sent);
    }
  }

  // The calls the pods forwarded to a group's owner (their /metrics), summed over the pods given.
  auto forwarded_total = [&]() -> double {
    double sum = 0;
    for (std::size_t i = 0; i < urls.size(); ++i) {
      auto r = clients[0][i]->request("GET", "/metrics", "");
      if (r.status != 200) return -1;
      std::istringstream lines(r.body);
      for (std::string line; std::getline(lines, line);)
        if (line.rfind("rsc_forwarded_calls_total{", 0) == 0) sum += std::atof(line.substr(line.rfind(' ') + 1).c_str());
    }
    return sum;
  };

  // 3. Steady heartbeats.
  const double forwarded0 = forwarded_total();
  const auto c0 = redis_counters(redis.get());
  const double cpu0 = cpu_seconds(pids);
  const double self0 = cpu_seconds({"self"});
  const auto threads0 = thread_figures(pids);
  const auto t0 = Clock::now();
  const auto until = t0 + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
  auto load = run_threads([&](int t, Tally& tally) {
    std::size_t round = 0;
    while (Clock::now() < until && (rounds <= 0 || static_cast<long>(round) < rounds - 1)) {
      // Paced: this thread's members are spread evenly over the interval.
      const auto roundStart = t0 + std::chrono::milliseconds(intervalMs * static_cast<long>(round));
      std::size_t k = 0;
      const std::size_t mine = (members.size() + static_cast<std::size_t>(threads) - 1 - static_cast<std::size_t>(t)) /
                               static_cast<std::size_t>(threads);
      for (std::size_t i = static_cast<std::size_t>(t); i < members.size() && Clock::now() < until;
           i += static_cast<std::size_t>(threads), ++k) {
        if (intervalMs > 0) {
          const auto due = roundStart + std::chrono::microseconds(intervalMs * 1000 * static_cast<long>(k) /
                                                                   static_cast<long>(std::max<std::size_t>(1, mine)));
          if (due >= until) break;
          std::this_thread::sleep_until(due);
        }
        beat(t, members[i], round + i, tally);
      }
      ++round;
    }
  });
  const double elapsed = std::chrono::duration<double>(Clock::now() - t0).count();
  const double cpu1 = cpu_seconds(pids);
  const double self1 = cpu_seconds({"self"});
  const auto threads1 = thread_figures(pids);
  const auto c1 = redis_counters(redis.get());
  const long rssAfter = rss_kib(pids);
  const double forwarded1 = forwarded_total();
  const double forwardedPerHb = forwarded0 < 0 || forwarded1 < 0 || load.sent == 0
                                    ? -1.0
                                    : (forwarded1 - forwarded0) / static_cast<double>(load.sent);

  const double hbPerSecond = static_cast<double>(load.sent) / elapsed;
  long errors = 0;
  for (const auto& [k, v] : load.statuses)
    if (k != "OK" && k != "REVOKE_PENDING") errors += v;
  std::cout << "rsc-load: " << members.size() << " members in " << groups << " groups, " << threads << " threads, "
            << urls.size() << " pod(s), " << elapsed << " s: " << static_cast<long>(hbPerSecond)
            << " heartbeats/s; latency ms p50 " << pct(load.latencies, 0.5) << " p90 " << pct(load.latencies, 0.9)
            << " p99 " << pct(load.latencies, 0.99) << " max " << pct(load.latencies, 1.0) << "; statuses:";
  for (const auto& [k, v] : load.statuses) std::cout << " " << k << "=" << v;
  std::cout << "\n";
  if (intervalMs > 0)
    std::cout << "  offered " << static_cast<long>(static_cast<double>(members.size()) * 1000.0 / static_cast<double>(intervalMs))
              << " heartbeats/s (every member every " << intervalMs << " ms)\n";
  if (intervalMs > 0 && hbPerSecond > 0) {
    // Answers arriving slower than asked stretch every member's gap between heartbeats; past the
    // pods' lease (scripts/load.sh gives them 5 intervals) members expire while their heartbeats
    // still wait here.
    const double gapMs = std::max(static_cast<double>(intervalMs), static_cast<double>(members.size()) * 1000.0 / hbPerSecond);
    std::cout << "  each member heard from every " << static_cast<long>(gapMs) << " ms on average (asked: every "
              << intervalMs << " ms)\n";
  }
  std::cout << "  errors " << errors << "\n";
  std::cout << "  forwarded by a pod to the group's owner: " << forwardedPerHb << " per heartbeat";
  if (followOwner)
    std::cout << "; sent straight to the owner an answer named: " << load.followed << " of " << load.sent << " ("
              << load.fallbacks << " sent again elsewhere because it did not answer)";
  std::cout << "\n";
  if (healthzSeconds > 0)
    std::cout << "  healthz " << static_cast<long>(healthzPerSecond) << " req/s on the same connections; heartbeat/healthz "
              << hbPerSecond / healthzPerSecond << "\n";
  if (!pids.empty() && load.sent > 0) {
    const double hbCpuUs = (cpu1 - cpu0) * 1e6 / static_cast<double>(load.sent);
    std::cout << "  coordinator CPU " << hbCpuUs << " us per heartbeat";
    if (healthzCpuUs > 0) std::cout << ", " << healthzCpuUs << " us per /healthz (ratio " << healthzCpuUs / hbCpuUs << ")";
    std::cout << "\n";
  }
  long switches = 0;
  for (const auto& [id, f1] : threads1) {
    const auto f0 = threads0.find(id);
    switches += f1.switches - (f0 == threads0.end() ? 0 : f0->second.switches);
  }
  if (!pids.empty() && load.sent > 0) {
    // Where the coordinators' CPU went, thread by thread (the busiest first), and how often each
    // thread was switched off its core: a heartbeat crossing threads pays a wake-up at each.
    std::vector<std::pair<double, std::string>> busiest;
    for (const auto& [id, f1] : threads1) {
      const auto f0 = threads0.find(id);
      const double cpu = f1.cpu - (f0 == threads0.end() ? 0 : f0->second.cpu);
      const long sw = f1.switches - (f0 == threads0.end() ? 0 : f0->second.switches);
      if (cpu <= 0 && sw <= 0) continue;
      std::ostringstream one;
      one << f1.name << " " << id.substr(id.find('/') + 1) << ": " << cpu * 1e6 / static_cast<double>(load.sent) << " us, "
          << static_cast<double>(sw) / static_cast<double>(load.sent) << " switches";
      busiest.emplace_back(cpu, one.str());
    }
    std::sort(busiest.rbegin(), busiest.rend());
    std::cout << "  coordinator threads per heartbeat (" << static_cast<double>(switches) / static_cast<double>(load.sent)
              << " context switches in all):";
    for (std::size_t i = 0; i < busiest.size() && i < 8; ++i) std::cout << (i ? "; " : " ") << busiest[i].second;
    std::cout << "\n";
  }
  if (load.sent > 0) {
    // The load generator shares the cores: what it spends per request is not the coordinator's.
    std::cout << "  load generator CPU " << (self1 - self0) * 1e6 / static_cast<double>(load.sent) << " us per heartbeat";
    if (healthzSelfUs > 0) std::cout << ", " << healthzSelfUs << " us per /healthz";
    std::cout << "\n";
  }
  if (redis && c0.commands >= 0 && c1.commands >= 0 && load.sent > 0)
    std::cout << "  redis " << static_cast<double>(c1.commands - c0.commands - 1) / static_cast<double>(load.sent)
              << " commands, " << static_cast<double>(c1.reads - c0.reads - 1) / static_cast<double>(load.sent)
              << " socket reads and " << (c1.cpu - c0.cpu) * 1e6 / static_cast<double>(load.sent)
              << " us of CPU per heartbeat\n";
  if (redis && !c1.calls.empty() && load.sent > 0) {
    // Which commands (scripts' own calls included): the store's part of a heartbeat, by name.
    std::vector<std::pair<long long, std::string>> byCount;
    for (const auto& [name, n] : c1.calls) {
      const auto was = c0.calls.find(name);
      const long long d = n - (was == c0.calls.end() ? 0 : was->second);
      if (d > 0 && name != "info") byCount.emplace_back(d, name);
    }
    std::sort(byCount.rbegin(), byCount.rend());
    std::cout << "  redis calls per heartbeat by command:";
    for (std::size_t i = 0; i < byCount.size() && i < 8; ++i)
      std::cout << " " << byCount[i].second << "=" << static_cast<double>(byCount[i].first) / static_cast<double>(load.sent);
    std::cout << "\n";
  }
  if (!pids.empty() && joins.sent == 0)
    std::cout << "  rss KiB: " << rssBefore << " before the run, " << rssAfter << " after it ("
              << static_cast<double>(rssAfter - rssBefore) * 1024.0 / static_cast<double>(members.size())
              << " bytes per member)\n";
  else if (!pids.empty())
    std::cout << "  rss KiB: " << rssBefore << " before the joins, " << rssJoined << " after them ("
              << static_cast<double>(rssJoined - rssBefore) * 1024.0 / static_cast<double>(members.size())
              << " bytes per member), " << rssAfter << " after the load ("
              << (rssJoined > 0 ? 100.0 * static_cast<double>(rssAfter - rssJoined) / static_cast<double>(rssJoined) : 0.0)
              << " % since the joins)\n";
  // One line for scripts: the figures of this run as key=value pairs (-1: not measured).
  const double sentD = static_cast<double>(std::max<long>(1, load.sent));
  const long expired = (load.statuses.count("FENCED_MEMBER_EPOCH") ? load.statuses["FENCED_MEMBER_EPOCH"] : 0) +
                       (load.statuses.count("UNKNOWN_MEMBER_ID") ? load.statuses["UNKNOWN_MEMBER_ID"] : 0);
  const long rssGrown = joins.sent == 0 ? rssAfter - rssBefore : rssJoined - rssBefore;
  std::cout << "rsc-load: row members=" << members.size() << " groups=" << groups << " pods=" << urls.size()
            << " hbps=" << static_cast<long>(hbPerSecond)
            << " cpu_us=" << (pids.empty() ? -1.0 : (cpu1 - cpu0) * 1e6 / sentD)
            << " redis_calls=" << (redis && c0.commands >= 0 && c1.commands >= 0 ? static_cast<double>(c1.commands - c0.commands - 1) / sentD : -1.0)
            << " redis_cpu_us=" << (redis && c0.cpu >= 0 && c1.cpu >= 0 ? (c1.cpu - c0.cpu) * 1e6 / sentD : -1.0)
            << " load_cpu_us=" << (self1 - self0) * 1e6 / sentD << " p50_ms=" << pct(load.latencies, 0.5)
            << " p99_ms=" << pct(load.latencies, 0.99)
            << " bytes_per_member=" << (pids.empty() ? -1.0 : static_cast<double>(rssGrown) * 1024.0 / static_cast<double>(members.size()))
            << " switches=" << (pids.empty() ? -1.0 : static_cast<double>(switches) / sentD) << " errors=" << errors
            << " expired=" << expired << " forwarded=" << forwardedPerHb << " followed=" << load.followed
            << " fallbacks=" << load.fallbacks << "\n";
  return errors == 0 ? 0 : 1;
}
