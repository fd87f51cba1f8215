// rsc-rebalance: how long a join and a graceful leave take to converge, with the real member
// runtime against a running coordinator, with change notifications off and on, side by side.
//   rsc-rebalance --coordinator URL[,URL...] --redis HOST:PORT [--members M] [--shards S] [--trials T]
//                 [--background-groups B] [--modes off,on]
// Each trial, per mode: a fresh group of M members on a stream of S shards settles; then one
// member joins and the time until the group has converged (every shard owned by one member,
// nothing pending or revoking, M+1 members) is taken, with the time from the last revoke ack (the
// old owners' heartbeats that handed shards back) to the newcomer holding all its shards; then one
// member leaves gracefully and the time until the M others own everything is taken. With
// --background-groups B, B other groups (one member, then a second one joining at the same moment
// as the measured join and leaving with the measured leave; on a stream of 4 shards) rebalance at
// the same time. Records are not produced: drain time is ~0, so convergence is the protocol's
// own delay. Prints median and max per mode and their ratio.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <iostream>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "member/http_client.hpp"
#include "member/runtime.hpp"
#include "redis/client.hpp"
#include "redis/options.hpp"

using namespace rsc;
using nlohmann::json;

namespace {

struct Args {
  std::string coordinator;
  store::RedisOptions redis;  // --redis and the --redis-* flags
  member::ClientTls coordinatorTls;
  int members = 5, shards = 16, trials = 5, background = 0;
  std::vector<bool> modes{false, true};
};

[[noreturn]] void usage(const std::string& why) {
  std::cerr << "rsc-rebalance: " << why
            << "\nusage: rsc-rebalance --coordinator URL --redis HOST:PORT [--members M] [--shards S] [--trials T]\n"
               "                     [--background-groups B] [--modes off,on]\n"
            << "                     " << member::kClientTlsFlagsUsage << "\n"
            << "                     " << store::kRedisFlagsUsage << "\n";
  std::exit(2);
}

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

// Everything one group's members saw, for the ack-to-readable figure.
struct Watch {
  std::mutex mu;
  int64_t lastAckNs = 0;       // sentNs of the last heartbeat that handed shards back
  int64_t newcomerFullNs = 0;  // receivedNs of the answer that gave the newcomer its last shard
  std::string newcomer;
  std::size_t newcomerWants = 0;
};

class Group {
 public:
  Group(const Args& a, std::string stream, std::string name, bool notify, std::shared_ptr<Watch> watch = {})
      : a_(a), stream_(std::move(stream)), name_(std::move(name)), notify_(notify), watch_(std::move(watch)) {}
  ~Group() {
    for (auto& m : members_) m.reset();  // stop without leaving
  }
  member::RuntimeOptions options(const std::string& id) {
    member::RuntimeOptions o;
    // Members spread over the pods: the pod a change happens on is often not the one an owner
    // talks to, so notifications must cross pods (they go through Redis).
    std::vector<std::string> urls;
    for (std::size_t at = 0, comma; at <= a_.coordinator.size(); at = comma + 1) {
      comma = a_.coordinator.find(',', at);
      if (comma == std::string::npos) comma = a_.coordinator.size();
      urls.push_back(a_.coordinator.substr(at, comma - at));
    }
    o.coordinatorUrl = urls[next_++ % urls.size()];
    o.redis = a_.redis;
    o.coordinatorTls = a_.coordinatorTls;
    o.streamPrefix = stream_;
    o.group = name_;
    o.memberId = id;
    o.maxBlockMs = 200;
    o.listenForChanges = notify_;
    o.log = [](const std::string&) {};
    if (watch_) {
      auto w = watch_;
      o.onHeartbeat = [w, id](const member::HeartbeatEvent& e) {
        std::lock_guard<std::mutex> lock(w->mu);
        if (e.revokedReported > 0) w->lastAckNs = std::max(w->lastAckNs, e.sentNs);
        if (id == w->newcomer && w->newcomerFullNs == 0 && e.owned.size() >= w->newcomerWants && w->newcomerWants > 0)
          w->newcomerFullNs = e.receivedNs;
      };
    }
    return o;
  }
  void add(const std::string& id) {
    members_.push_back(std::make_unique<member::Runtime>(options(id), [](const member::Record&, int64_t) {}));
    ids_.push_back(id);
    members_.back()->start();
  }
  // Graceful leave of the last member; returns when the coordinator let it go.
  bool leave_last() {
    bool ok = members_.back()->shutdown(20000);
    members_.pop_back();
    ids_.pop_back();
    return ok;
  }
  std::size_t size() const { return members_.size(); }
  const std::string& name() const { return name_; }

 private:
  const Args& a_;
  std::string stream_, name_;
  bool notify_;
  std::shared_ptr<Watch> watch_;
  std::vector<std::unique_ptr<member::Runtime>> members_;
  std::vector<std::string> ids_;
  std::size_t next_ = 0;
};

// Converged: the group is STABLE, `live` members are in it, each shard OWNED by one of them.
bool converged(member::HttpClient& http, const std::string& stream, const std::string& group, std::size_t live) {
  auto r = http.request("GET", "/coord/v1/streams/" + stream + "/groups/" + group, "");
  if (r.status != 200) return false;
  const auto d = json::parse(r.body, nullptr, false);
  if (!d.is_object() || d.value("state", "") != "STABLE") return false;
  std::size_t n = 0;
  for (const auto& m : d.value("members", json::array()))
    if (m.value("state", "") == "ACTIVE") ++n;
  if (n != live) return false;
  for (const auto& s : d.value("shards", json::array()))
    if (s.value("state", "") != "OWNED" || !s.value("pendingFor", json()).is_null()) return false;
  return !d.value("shards", json::array()).empty();
}

bool verbose = false;

// One line about where a group stands: its state, and per member its state, epoch and shards.
void show(member::HttpClient& http, const std::string& stream, const std::string& group) {
  auto r = http.request("GET", "/coord/v1/streams/" + stream + "/groups/" + group, "");
  const auto d = json::parse(r.body, nullptr, false);
  if (!d.is_object()) return;
  std::string line = group + " " + d.value("state", "?") + " assignmentEpoch " + std::to_string(d.value("assignmentEpoch", 0));
  for (const auto& m : d.value("members", json::array()))
    line += " | " + m.value("memberId", "?") + " " + m.value("state", "?") + " e" + std::to_string(m.value("memberEpoch", 0)) +
            " a" + m.value("assignedShards", json::array()).dump() + " p" + m.value("pendingShards", json::array()).dump() +
            " r" + m.value("revokingShards", json::array()).dump() + " hb " +
            std::to_string(m.value("lastHeartbeatAgoMs", 0)) + "ms ago";
  std::fprintf(stderr, "    slow: %s\n", line.c_str());
}

double wait_converged(member::HttpClient& http, const std::string& stream, const std::string& group, std::size_t live,
                      std::chrono::steady_clock::time_point t0, double limitMs = 30000) {
  bool shown = false;
  while (ms_since(t0) < limitMs) {
    if (converged(http, stream, group, live)) return ms_since(t0);
    if (verbose && !shown && ms_since(t0) > 1500) {
      shown = true;
      show(http, stream, group);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return -1;
}

struct Figures {
  std::vector<double> join, leave, ackToReadable;
};

std::string summary(std::vector<double> v) {
  if (v.empty()) return "-";
  std::sort(v.begin(), v.end());
  char buf[96];
  std::snprintf(buf, sizeof buf, "median %7.0f ms  max %7.0f ms", v[v.size() / 2], v.back());
  return buf;
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  bool redisGiven = false;
  for (int i = 1; i < argc; ++i) {
    const std::string k = argv[i];
    auto v = [&]() -> std::string {
      if (i + 1 >= argc) usage(k + " needs a value");
      return argv[++i];
    };
    if (k == "--coordinator") a.coordinator = v();
    else if (k == "--redis") {
      if (auto e = store::set_redis_nodes(a.redis, v()); !e.empty()) usage("--redis: " + e);
      redisGiven = true;
    }
    else if (member::apply_client_tls_flag(a.coordinatorTls, k, v)) {}
    else if (std::string error; store::apply_redis_flag(a.redis, k, v, error)) {
      if (!error.empty()) usage(error);
    }
    else if (k == "--members") a.members = std::atoi(v().c_str());
    else if (k == "--shards") a.shards = std::atoi(v().c_str());
    else if (k == "--trials") a.trials = std::atoi(v().c_str());
    else if (k == "--background-groups") a.background = std::atoi(v().c_str());
    else if (k == "--verbose") verbose = true;
    else if (k == "--modes") {
      const auto m = v() + ",";
      a.modes.clear();
      for (std::size_t at = 0, comma; (comma = m.find(',', at)) != std::string::npos; at = comma + 1) {
        const auto word = m.substr(at, comma - at);
        if (word != "on" && word != "off") usage("--modes: a list of on and off, not '" + word + "'");
        a.modes.push_back(word == "on");
      }
    } else usage("unknown argument " + k);
  }
  if (a.coordinator.empty() || !redisGiven) usage("--coordinator and --redis are required");
  if (a.members < 1 || a.shards < a.members + 1 || a.trials < 1 || a.background < 0) usage("bad sizes");
  std::string err;
  member::HttpClient http(member::parse_url(a.coordinator.substr(0, a.coordinator.find(',')), &err), 5000,
                          a.coordinatorTls);
  if (!err.empty()) usage(err);
  const std::string stream = "rebalance";
  auto put = http.request("PUT", "/coord/v1/streams/" + stream, json{{"shardCount", a.shards}}.dump());
  if (put.status != 200) {
    std::cerr << "rsc-rebalance: PUT stream answered " << put.status << " " << put.body << "\n";
    return 1;
  }
  // The other groups read a stream of 4 shards: every member polls each of its shards (reads,
  // XINFO, XPENDING), and 200 members on 16 shards each would make this process, not the
  // coordinator, the bottleneck of a 2-core machine.
  const std::string bgStream = "rebalance-bg";
  if (a.background > 0) {
    auto bgPut = http.request("PUT", "/coord/v1/streams/" + bgStream, json{{"shardCount", 4}}.dump());
    if (bgPut.status != 200) {
      std::cerr << "rsc-rebalance: PUT stream answered " << bgPut.status << " " << bgPut.body << "\n";
      return 1;
    }
  }
  std::cout << "rsc-rebalance: " << a.members << " members + 1 joining, " << a.shards << " shards, " << a.trials
            << " trials per mode, " << a.background << " other groups rebalancing at the same time\n";
  std::vector<Figures> figures(a.modes.size());
  int failures = 0;
  for (int t = 0; t < a.trials; ++t) {
    for (std::size_t mi = 0; mi < a.modes.size(); ++mi) {
      const bool notify = a.modes[mi];
      const std::string tag = std::string(notify ? "on" : "off") + "-" + std::to_string(t);
      // Background groups: one member each, settled before the trial.
      std::vector<std::unique_ptr<Group>> bg;
      for (int b = 0; b < a.background; ++b) {
        bg.push_back(std::make_unique<Group>(a, bgStream, "bg-" + tag + "-" + std::to_string(b), notify));
        bg.back()->add("b0");
      }
      auto watch = std::make_shared<Watch>();
      Group g(a, stream, "g-" + tag, notify, watch);
      for (int m = 0; m < a.members; ++m) g.add("m" + std::to_string(m));
      const auto settle = std::chrono::steady_clock::now();
      if (wait_converged(http, stream, g.name(), static_cast<std::size_t>(a.members), settle, 60000) < 0) {
        std::cerr << "rsc-rebalance: group " << g.name() << " did not settle\n";
        return 1;
      }
      for (auto& b : bg)
        if (wait_converged(http, bgStream, b->name(), 1, std::chrono::steady_clock::now(), 60000) < 0) {
          std::cerr << "rsc-rebalance: group " << b->name() << " did not settle\n";
          return 1;
        }
      // Let every member reach the middle of its heartbeat interval, as in a group at rest.
      std::this_thread::sleep_for(std::chrono::milliseconds(1000 + 97 * t % 1000));
      {
        std::lock_guard<std::mutex> lock(watch->mu);
        watch->newcomer = "new";
        watch->newcomerWants = static_cast<std::size_t>(a.shards / (a.members + 1));
        watch->lastAckNs = 0;
      }
      const auto t0 = std::chrono::steady_clock::now();
      const int64_t t0ns = member::mono_ns();
      for (auto& b : bg) b->add("b1");
      g.add("new");
      const double join = wait_converged(http, stream, g.name(), static_cast<std::size_t>(a.members + 1), t0);
      double ackToReadable = -1;
      {
        std::lock_guard<std::mutex> lock(watch->mu);
        if (watch->lastAckNs > t0ns && watch->newcomerFullNs > 0)
          ackToReadable = static_cast<double>(watch->newcomerFullNs - watch->lastAckNs) / 1e6;
      }
      // A graceful leave, the background groups leaving at the same moment.
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
      const auto t1 = std::chrono::steady_clock::now();
      std::vector<std::future<bool>> leaving;
      for (auto& b : bg) leaving.push_back(std::async(std::launch::async, [&b] { return b->leave_last(); }));
      auto leaver = std::async(std::launch::async, [&g] { return g.leave_last(); });
      const double leave = wait_converged(http, stream, g.name(), static_cast<std::size_t>(a.members), t1);
      leaver.get();
      for (auto& f : leaving) f.get();
      if (join < 0 || leave < 0) {
        ++failures;
        std::cerr << "rsc-rebalance: trial " << tag << " did not converge (join " << join << ", leave " << leave << ")\n";
      } else {
        figures[mi].join.push_back(join);
        figures[mi].leave.push_back(leave);
        if (ackToReadable >= 0) figures[mi].ackToReadable.push_back(ackToReadable);
      }
      std::printf("  trial %-5s join %7.0f ms  leave %7.0f ms  last revoke ack -> newcomer readable %6.0f ms\n",
                  tag.c_str(), join, leave, ackToReadable);
      std::fflush(stdout);
    }
  }
  std::printf("\n== join and graceful leave to converged (%d members + 1, %d shards, %d other groups rebalancing)\n",
              a.members, a.shards, a.background);
  for (std::size_t mi = 0; mi < a.modes.size(); ++mi) {
    std::printf("notifications %-3s  join: %s   leave: %s   ack->readable: %s\n", a.modes[mi] ? "on" : "off",
                summary(figures[mi].join).c_str(), summary(figures[mi].leave).c_str(),
                summary(figures[mi].ackToReadable).c_str());
  }
  if (a.modes.size() == 2 && median(figures[1].join) > 0 && median(figures[1].leave) > 0)
    std::printf("ratio off/on (median): join %.1fx, leave %.1fx\n", median(figures[0].join) / median(figures[1].join),
                median(figures[0].leave) / median(figures[1].leave));
  return failures == 0 ? 0 : 1;
}
