// rsc-coordinator's configuration: defaults (SPEC §5), then the config file, then environment
// variables, then flags.
#pragma once

#include <optional>
#include <string>
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

}  // namespace rsc::server
