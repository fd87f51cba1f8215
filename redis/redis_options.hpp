// How every rsc program and library reaches Redis: address (or a Cluster's seeds), AUTH, timeouts,
// TLS. Only plain settings: what a member or producer application fills in, with nothing of the
// connection behind it (the connection and client are not installed).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "redis/result.hpp"

namespace rsc::store {

struct TlsOptions {
  bool enabled = false;
  std::string caFile;      // PEM bundle of the CAs to trust
  std::string caDir;       // or a directory of them (OpenSSL's hashed names); neither: the system's
  std::string certFile;    // a client certificate chain (mutual TLS), with keyFile
  std::string keyFile;
  std::string serverName;  // sent as SNI and verified; empty: the host connected to (name or IP)
};

// Told of every round trip to the store: how a pod sees the store's availability.
class CallObserver {
 public:
  virtual ~CallObserver() = default;
  virtual uint64_t call_began() = 0;
  // ok: answered (error replies included, but for a Redis that is loading, busy or has no master).
  virtual void call_ended(uint64_t id, bool ok) = 0;
};

struct RedisOptions {
  std::string host = "127.0.0.1";
  int port = 6379;
  std::string user;      // ACL user (Redis 6+); empty = the default user
  std::string password;  // empty = no AUTH
  Millis connectTimeoutMs = 1000;
  Millis commandTimeoutMs = 2000;
  std::string ns = "rsc";  // key namespace
  // Redis Cluster: every command goes to the master serving its key's slot (RedisClient). `seeds`
  // are more nodes to ask for the slot map ("host:port"), beside host:port.
  bool cluster = false;
  std::vector<std::string> seeds;
  int maxRedirects = 5;                  // MOVED/ASK followed per command before giving up
  Millis clusterRetryBudgetMs = 2000;    // TRYAGAIN/CLUSTERDOWN retried with backoff for this long
  TlsOptions tls;  // TLS to every node (a cluster's nodes met through MOVED/ASK too)
  LogFn log;
  std::shared_ptr<CallObserver> observer;  // may be null
};

}  // namespace rsc::store
