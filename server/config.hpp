// rsc-coordinator's configuration: defaults (SPEC §5), then the config file, then environment
// variables, then flags.
#pragma once

#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "actors/service.hpp"
#include "http/api.hpp"
#include "http/server.hpp"
#include "redis/connection.hpp"

namespace rsc::server {

struct Config {
  http::ServerOptions http;
  store::RedisOptions redis;
  actors::ServiceConfig service;
  http::AuthConfig auth;
  int64_t shutdownGraceMs = 10000;
  // --lease-renewal-slack-ms as given; unset: a fifth of the lease (resolved into service.core).
  std::optional<int64_t> leaseRenewalSlackMs;
  // --pod-lease-ms as given; unset: a third of the member lease, at most 5 s (service.podLeaseMs).
  std::optional<int64_t> podLeaseMs;
  // --advertise HOST:PORT (an IP or a host name): where other pods and following clients reach
  // this one; empty: the listen address (127.0.0.1
  // when it listens on all interfaces) and the port it listens on.
  std::string advertise;
  // --probe-listen HOST:PORT: /healthz and /readyz also over plain HTTP there (kubelet probes while
  // the API port wants client certificates); nothing else is served on it.
  std::optional<std::pair<std::string, uint16_t>> probeListen;
  // --tls-expiry-warning-days N: a served certificate that expires within N days is said at load
  // and then daily (rsc_tls_certificate_expiry_seconds tells the seconds left either way).
  int64_t tlsExpiryWarningDays = 14;
};

struct Parsed {
  std::optional<Config> config;
  std::string error;  // a message naming the flag, variable or file field
  bool help = false;
  bool version = false;  // --version: print it, exit
  bool checkOnly = false;  // --check-config: validate everything, print the summary, exit
};

// `env` looks a variable up (std::getenv in the binary, a map in tests).
Parsed parse(const std::vector<std::string>& args, const std::function<const char*(const char*)>& env);
std::string usage();
std::string summary(const Config& c);  // one line for the log, without secrets

// The tokens, with those read from files (auth.tokens[].tokenFile, e.g. a mounted Secret) read
// again while the coordinator runs: a rotated file takes effect without a restart. A file that
// cannot be read, or holds fewer than 16 characters, leaves the token it held before in force.
class TokenFiles {
 public:
  explicit TokenFiles(http::AuthConfig initial);
  // What requests are authorized with now (a snapshot: a later change makes a new one).
  std::shared_ptr<const http::AuthConfig> current() const;
  bool watching() const;  // some token comes from a file
  // Reads every token file again; the lines to log: each change, and each problem once until it
  // changes or clears (empty when all is as before). Never a token itself.
  std::vector<std::string> check();
  int64_t reloads() const;  // how many checks changed a token

 private:
  mutable std::mutex mu_;
  std::shared_ptr<const http::AuthConfig> current_;
  std::vector<std::string> told_;  // per token: the problem last said, empty when none
  int64_t reloads_ = 0;
};

}  // namespace rsc::server
