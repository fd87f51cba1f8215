// A local Redis Cluster for tests: masters (and a replica each) of redis-server 7 on free loopback
// ports in temp dirs, joined with `redis-cli --cluster create`, stopped by pid with their servers.
// Short node timeout (1 s), so a killed master's replica is promoted within a few seconds.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <iostream>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "redis/client.hpp"
#include "redis/keys.hpp"
#include "redis_server.hpp"

namespace rsc::testing {

class LocalCluster {
 public:
  // `password`: requirepass (and an ACL user "rsc" with it) on every node.
  // `tls`: every node TLS-only (clients and the cluster bus), clients verified (mutual TLS).
  explicit LocalCluster(int masters = 3, int replicasPerMaster = 1, const std::string& password = "", bool tls = false) {
    RedisServerOptions o;
    o.cluster = true;
    o.password = password;
    o.tls = tls;
    o.tlsAuthClients = tls;
    // TLS handshakes on the cluster bus are slow under the sanitizers: a 1 s node timeout there
    // risks a node being failed over while it is only slow, which no test here means to do.
    if (tls) o.clusterNodeTimeoutMs = 3000;
    const int n = masters * (1 + replicasPerMaster);
    for (int i = 0; i < n; ++i) servers_.push_back(std::make_unique<RedisServer>(o));
    std::vector<std::string> args{"redis-cli", "--cluster", "create"};
    for (const auto& s : servers_) args.push_back("127.0.0.1:" + std::to_string(s->port()));
    args.insert(args.end(), {"--cluster-replicas", std::to_string(replicasPerMaster), "--cluster-yes"});
    if (!password.empty()) args.insert(args.end(), {"-a", password, "--no-auth-warning"});
    if (tls) {
      const auto& pki = TestPki::get();
      args.insert(args.end(), {"--tls", "--cacert", pki.ca(), "--cert", pki.clientCert(), "--key", pki.clientKey()});
    }
    run(args);
    wait_healthy(masters, masters * replicasPerMaster);
  }

  std::size_t size() const { return servers_.size(); }
  RedisServer& server(std::size_t i) { return *servers_[i]; }
  // "127.0.0.1:p1,127.0.0.1:p2,...": every node, as --redis takes them.
  std::string seeds() const {
    std::string out;
    for (const auto& s : servers_) out += (out.empty() ? "" : ",") + std::string("127.0.0.1:") + std::to_string(s->port());
    return out;
  }
  store::RedisOptions client_options() const {
    store::RedisOptions o = servers_.front()->client_options();
    store::set_redis_nodes(o, seeds());
    o.cluster = true;
    return o;
  }
  // A connection to one node (no routing): what that node itself says.
  store::RedisConnection node(std::size_t i) const { return servers_[i]->admin(); }

  // The index of the live master serving `key`'s slot (asked of the nodes themselves).
  std::size_t master_of(const std::string& key) {
    const int slot = store::key_slot(key);
    for (std::size_t i = 0; i < servers_.size(); ++i) {
      if (!servers_[i]->running()) continue;
      auto c = node(i);
      auto role = c.command({"ROLE"});
      if (!role.ok() || role.value->elements.empty() || role.value->elements[0].str != "master") continue;
      auto nodes = c.command({"CLUSTER", "NODES"});
      if (!nodes.ok()) continue;
      // "myself,master ... <ranges>": does one of this node's ranges hold the slot?
      for (const auto& line : split(nodes.value->str, '\n')) {
        if (line.find("myself") == std::string::npos) continue;
        const auto parts = split(line, ' ');
        for (std::size_t p = 8; p < parts.size(); ++p) {
          if (parts[p].empty() || parts[p][0] == '[') continue;
          const auto dash = parts[p].find('-');
          const int from = std::stoi(parts[p].substr(0, dash));
          const int to = dash == std::string::npos ? from : std::stoi(parts[p].substr(dash + 1));
          if (slot >= from && slot <= to) return i;
        }
      }
    }
    throw std::runtime_error("no live master serves " + key);
  }
  // After a master was killed: waits until a live master serves `key`'s slot (its replica promoted)
  // and every live node says cluster_state:ok; returns that master.
  std::size_t wait_master_of(const std::string& key, int timeoutMs = 30000) {
    for (int waited = 0;; waited += 50) {
      try {
        const std::size_t m = master_of(key);
        wait_state_ok();
        return m;
      } catch (const std::runtime_error&) {
        if (waited >= timeoutMs) throw;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
  // The index of a live replica of master `m`.
  std::size_t replica_of(std::size_t m) {
    auto id = node(m).command({"CLUSTER", "MYID"});
    for (std::size_t i = 0; i < servers_.size(); ++i) {
      if (i == m || !servers_[i]->running()) continue;
      auto role = node(i).command({"ROLE"});
      if (!role.ok() || role.value->elements.size() < 3 || role.value->elements[0].str != "slave") continue;
      if (role.value->elements[2].integer == servers_[m]->port()) return i;
    }
    throw std::runtime_error("master " + std::to_string(m) + " has no live replica");
  }
  // CLUSTER FAILOVER on replica `r`: it and its master swap roles (no write lost); returns when
  // every live node agrees. A manual failover that gets no majority of votes ends after 5 s without
  // effect (a master votes for the replicas of one master at most once per two node timeouts, and a
  // slow, sanitized run can miss that window): it is asked again, a few times.
  void failover(std::size_t r) {
    // Its master, which must also learn it is a replica now (over TLS the cluster bus takes a
    // moment longer): until then it still claims the slots.
    std::optional<std::size_t> oldMaster;
    if (auto role = node(r).command({"ROLE"}); role.ok() && role.value->elements.size() >= 3)
      for (std::size_t i = 0; i < servers_.size(); ++i)
        if (servers_[i]->port() == role.value->elements[2].integer) oldMaster = i;
    std::string last;
    for (int attempt = 0; attempt < 5; ++attempt) {
      if (is_master(r)) break;
      auto f = node(r).command({"CLUSTER", "FAILOVER"});
      if (!f.ok() || f.value->is_error()) {
        last = f.ok() ? f.value->str : f.error.message;
        if (is_master(r)) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(500));
        continue;
      }
      for (int i = 0; i < 160 && !is_master(r); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(50));
      last = "no role change within 8 s";
    }
    if (!is_master(r)) throw std::runtime_error("CLUSTER FAILOVER on node " + std::to_string(r) + " never took effect: " + last);
    for (int i = 0; oldMaster && i < 200 && is_master(*oldMaster); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    wait_state_ok();
  }
  bool is_master(std::size_t i) {
    auto role = node(i).command({"ROLE"});
    return role.ok() && !role.value->elements.empty() && role.value->elements[0].str == "master";
  }
  // SIGKILL of node `i` (the cluster promotes its replica after the node timeout).
  void kill(std::size_t i) { servers_[i]->crash(); }
  // Every live node says cluster_state:ok and every slot has a master.
  void wait_state_ok(int timeoutMs = 20000) {
    for (int waited = 0; waited < timeoutMs; waited += 50) {
      reap_crashed();
      bool ok = true;
      for (std::size_t i = 0; i < servers_.size() && ok; ++i) {
        if (!servers_[i]->running()) continue;
        auto info = node(i).command({"CLUSTER", "INFO"});
        ok = info.ok() && info.value->str.find("cluster_state:ok") != std::string::npos;
      }
      if (ok && crashed_.empty()) return;
      if (ok) restart_crashed();  // every slot served again without them: they rejoin as replicas
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    // What each node says, and the end of the log of every node that is not ok: enough to tell a
    // slow node from a partition or a slot nobody serves.
    std::string why;
    for (std::size_t i = 0; i < servers_.size(); ++i) {
      if (!servers_[i]->running()) continue;
      auto info = node(i).command({"CLUSTER", "INFO"});
      const std::string state = !info.ok() ? "unreachable: " + info.error.message
                                : info.value->str.find("cluster_state:ok") != std::string::npos ? "ok"
                                                                                                : "not ok";
      why += "node " + std::to_string(i) + " (port " + std::to_string(servers_[i]->port()) + "): " + state + "\n";
      if (state != "ok") why += servers_[i]->log_tail();
    }
    throw std::runtime_error("the cluster did not reach cluster_state:ok within " + std::to_string(timeoutMs) +
                             " ms\n" + why + describe());
  }
  // A node that exited on its own is a crash of redis-server itself (seen once in about fifty runs:
  // redis-server 7.0.15 aborting on the old master during CLUSTER FAILOVER on a loaded machine).
  // It is handled as a supervisor with no persistence would: left down until every slot is served
  // again (a crashed master's replica promoted, as after a kill), then started again, so it rejoins
  // from its nodes.conf as a replica and resyncs (started at once, an empty master would come
  // back with its slots and wipe them). For the coordinators and members under test this is one
  // more Redis fault to survive; what it printed goes to stderr.
  void reap_crashed() {
    for (std::size_t i = 0; i < servers_.size(); ++i) {
      if (!servers_[i]->running() || !servers_[i]->exited()) continue;
      std::cerr << "redis-server node " << i << " (port " << servers_[i]->port()
                << ") exited on its own; it is started again once its slots are served. Its log:\n"
                << servers_[i]->log_tail();
      ++crashes_;
      crashed_.push_back(i);
    }
  }
  void restart_crashed() {
    for (std::size_t i : crashed_) servers_[i]->start();
    crashed_.clear();
  }
  int crashes() const { return crashes_; }  // nodes restarted by restart_crashed()

  // Each live node's view of itself (its CLUSTER NODES line and ROLE), for a failure's message.
  std::string describe() {
    std::string out;
    for (std::size_t i = 0; i < servers_.size(); ++i) {
      if (!servers_[i]->running()) continue;
      auto nodes = node(i).command({"CLUSTER", "NODES"});
      if (!nodes.ok()) continue;
      for (const auto& line : split(nodes.value->str, '\n'))
        if (line.find("myself") != std::string::npos) out += "node " + std::to_string(i) + ": " + line + "\n";
    }
    return out;
  }
  // FLUSHALL on every live master.
  void flush_all() {
    for (std::size_t i = 0; i < servers_.size(); ++i) {
      if (!servers_[i]->running()) continue;
      auto c = node(i);
      auto role = c.command({"ROLE"});
      if (role.ok() && !role.value->elements.empty() && role.value->elements[0].str == "master") c.command({"FLUSHALL"});
    }
  }
  // How often live masters refused a command for spanning slots (INFO errorstats).
  long long crossslot_errors() {
    long long n = 0;
    for (std::size_t i = 0; i < servers_.size(); ++i) {
      if (!servers_[i]->running()) continue;
      auto r = node(i).command({"INFO", "errorstats"});
      if (!r.ok()) continue;
      const auto at = r.value->str.find("errorstat_CROSSSLOT:count=");
      if (at != std::string::npos) n += std::stoll(r.value->str.substr(at + 26));
    }
    return n;
  }

 private:
  static std::vector<std::string> split(const std::string& s, char sep) {
    std::vector<std::string> out;
    std::size_t from = 0;
    for (;;) {
      const auto at = s.find(sep, from);
      out.push_back(s.substr(from, at == std::string::npos ? std::string::npos : at - from));
      if (at == std::string::npos) return out;
      from = at + 1;
    }
  }
  static void run(std::vector<std::string> args) {
    const pid_t pid = fork();
    if (pid < 0) throw std::runtime_error("fork failed");
    if (pid == 0) {
      std::vector<char*> argv;
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      if (!freopen("/dev/null", "w", stdout)) _exit(126);
      execvp(argv[0], argv.data());
      _exit(127);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) throw std::runtime_error("redis-cli --cluster create failed");
  }
  void wait_healthy(int masters, int replicas) {
    wait_state_ok();
    for (int waited = 0; waited < 30000; waited += 50) {
      int m = 0, r = 0;
      for (std::size_t i = 0; i < servers_.size(); ++i) {
        auto role = node(i).command({"ROLE"});
        if (!role.ok() || role.value->elements.empty()) continue;
        if (role.value->elements[0].str == "master") ++m;
        // A replica counts once it is in sync with its master ("connected").
        if (role.value->elements[0].str == "slave" && role.value->elements.size() >= 4 &&
            role.value->elements[3].str == "connected")
          ++r;
      }
      if (m == masters && r == replicas) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    throw std::runtime_error("the cluster's replicas did not sync");
  }

  std::vector<std::unique_ptr<RedisServer>> servers_;
  int crashes_ = 0;
  std::vector<std::size_t> crashed_;  // exited on their own, not started again yet
};

}  // namespace rsc::testing
