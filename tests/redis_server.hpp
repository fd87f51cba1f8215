// Starts a private redis-server for a test: a free loopback port, a temp dir, stopped by pid.
#pragma once

#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <netinet/in.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <deque>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "redis/connection.hpp"
#include "tls_pki.hpp"

namespace rsc::testing {

// A loopback port nothing listens on now (the kernel's pick; a race is possible but rare).
inline int free_loopback_port() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) throw std::runtime_error("bind failed");
  socklen_t len = sizeof a;
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  close(fd);
  return ntohs(a.sin_port);
}

struct RedisServerOptions {
  bool persistence = false;  // AOF with fsync always: survives a restart
  std::string password;      // requirepass for the default user, and an ACL user "rsc" with it
  bool cluster = false;      // cluster-enabled, its nodes file in the server's directory
  int clusterNodeTimeoutMs = 1000;  // how soon an unreachable master is failed over
  // TLS only (the plain port off), with the test PKI's server certificate; clients (and a cluster's
  // nodes among themselves) verify it against its CA.
  bool tls = false;
  bool tlsAuthClients = false;  // mutual TLS: a client must present a certificate of that CA
  std::string tlsCert, tlsKey;  // another server certificate (default: the PKI's good one)
};

class RedisServer {
 public:
  using Options = RedisServerOptions;
  explicit RedisServer(Options o = {}) : opts_(o) {
    char tmpl[] = "/tmp/rsc-redis-XXXXXX";
    if (mkdtemp(tmpl) == nullptr) throw std::runtime_error("mkdtemp failed");
    dir_ = tmpl;
    port_ = free_loopback_port();
    try {
      start();
    } catch (...) {
      std::error_code ec;
      std::filesystem::remove_all(dir_, ec);
      throw;
    }
  }
  ~RedisServer() {
    stop();
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  RedisServer(const RedisServer&) = delete;
  RedisServer& operator=(const RedisServer&) = delete;

  int port() const { return port_; }
  int bus_port() const { return busPort_; }  // cluster mode only
  // Freeze and thaw the server (a stalled Redis).
  void pause() { ::kill(pid_, SIGSTOP); }
  void resume() { ::kill(pid_, SIGCONT); }
  bool running() const { return pid_ > 0; }

  store::RedisOptions client_options() const {
    store::RedisOptions o;
    o.port = port_;
    o.password = opts_.password;
    o.connectTimeoutMs = 500;
    o.commandTimeoutMs = 2000;
    if (opts_.tls) {
      const auto& pki = TestPki::get();
      o.tls.enabled = true;
      o.tls.caFile = pki.ca();
      o.tls.certFile = pki.clientCert();
      o.tls.keyFile = pki.clientKey();
    }
    return o;
  }

  void start() {
    if (pid_ > 0) return;
    std::vector<std::string> args{"redis-server", "--port", opts_.tls ? "0" : std::to_string(port_), "--bind", "127.0.0.1",
                                  "--dir", dir_, "--save", "", "--daemonize", "no", "--logfile",
                                  dir_ + "/redis.log", "--busy-reply-threshold", "100"};
    if (!opts_.password.empty()) {
      args.insert(args.end(), {"--requirepass", opts_.password});
      if (opts_.cluster) args.insert(args.end(), {"--masterauth", opts_.password});  // replicas sync
    }
    if (opts_.cluster) {
      // The cluster bus port defaults to port + 10000, which may be taken or past 65535.
      if (busPort_ == 0) busPort_ = free_loopback_port();
      args.insert(args.end(), {"--cluster-enabled", "yes", "--cluster-config-file", dir_ + "/nodes.conf",
                               "--cluster-port", std::to_string(busPort_), "--cluster-node-timeout",
                               std::to_string(opts_.clusterNodeTimeoutMs)});
    }
    if (opts_.tls) {
      const auto& pki = TestPki::get();
      args.insert(args.end(), {"--tls-port", std::to_string(port_), "--tls-cert-file",
                               opts_.tlsCert.empty() ? pki.serverCert() : opts_.tlsCert, "--tls-key-file",
                               opts_.tlsKey.empty() ? pki.serverKey() : opts_.tlsKey, "--tls-ca-cert-file", pki.ca(),
                               "--tls-auth-clients", opts_.tlsAuthClients ? "yes" : "no"});
      if (opts_.cluster) args.insert(args.end(), {"--tls-cluster", "yes", "--tls-replication", "yes"});
    }
    if (opts_.persistence) {
      args.insert(args.end(), {"--appendonly", "yes", "--appendfsync", "always"});
    } else {
      args.insert(args.end(), {"--appendonly", "no"});
    }
    pid_ = fork();
    if (pid_ < 0) throw std::runtime_error("fork failed");
    if (pid_ == 0) {
      prctl(PR_SET_PDEATHSIG, SIGTERM);  // never outlive a crashed test
      std::vector<char*> argv;
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      execvp("redis-server", argv.data());
      _exit(127);
    }
    wait_ready();
    if (!opts_.password.empty()) {
      store::RedisConnection c(client_options());
      c.command({"ACL", "SETUSER", "rsc", "on", ">" + opts_.password, "~*", "&*", "+@all"});
    }
  }

  // SIGTERM and wait (redis-server saves nothing here unless persistence is on).
  void stop() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGTERM);
    for (int i = 0; i < 500; ++i) {
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    ::kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }

  // SIGKILL: a crash (nothing saved, clients see the connection drop).
  void crash() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }

  void restart() {
    stop();
    start();
  }

  // The last `lines` lines of the server's log, for a failure's message.
  // A crash report is given from its start instead (the assertion and the stack come first).
  std::string log_tail(std::size_t lines = 12) const {
    std::ifstream in(dir_ + "/redis.log");
    std::deque<std::string> last;
    std::vector<std::string> crash;
    for (std::string line; std::getline(in, line);) {
      if (line.find("REDIS BUG REPORT START") != std::string::npos) crash.clear(), crash.push_back(line);
      else if (!crash.empty() && crash.size() < 60) crash.push_back(line);
      last.push_back(line);
      if (last.size() > lines) last.pop_front();
    }
    std::string out;
    for (const auto& l : crash.empty() ? std::vector<std::string>(last.begin(), last.end()) : crash) out += "    " + l + "\n";
    return out;
  }
  // Whether the server exited on its own (a crash), reaped if so.
  bool exited() {
    if (pid_ <= 0) return false;
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) != pid_) return false;
    pid_ = -1;
    return true;
  }

  // An admin connection for test set-up (FLUSHALL, DUMP/RESTORE, INFO...).
  store::RedisConnection admin() const { return store::RedisConnection(client_options()); }

 private:
  void wait_ready() {
    // A server with a certificate the client refuses (a bad-input test) is ready once it accepts.
    const bool acceptOnly = opts_.tls && !opts_.tlsCert.empty();
    for (int i = 0; i < 500; ++i) {
      if (acceptOnly) {
        int fd = socket(AF_INET, SOCK_STREAM, 0);
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        a.sin_port = htons(static_cast<uint16_t>(port_));
        const bool up = ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
        ::close(fd);
        if (up) return;
      } else {
        store::RedisConnection c(client_options());
        auto r = c.command({"PING"});
        if (r.ok() && !r.value->is_error()) return;
      }
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        throw std::runtime_error("redis-server exited at start; see " + dir_ + "/redis.log");
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    throw std::runtime_error("redis-server did not answer PING within 5s");
  }

  Options opts_;
  std::string dir_;
  int port_ = 0;
  int busPort_ = 0;
  pid_t pid_ = -1;
};

}  // namespace rsc::testing
