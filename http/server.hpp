// The HTTP server (Boost.Beast) in front of handle_request. No Asio in this header.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "http/api.hpp"

namespace rsc::http {

// HTTPS: with a certificate and key, every connection on the listen port is TLS (and the pods
// forward each other's calls over TLS). The files are read at start (an unusable one refuses the
// start) and again when they change or on reload_tls(): new connections get the new certificate,
// open ones keep theirs.
struct ServerTls {
  std::string certFile, keyFile;  // both, or neither (plain HTTP)
  std::string clientCaFile;       // mutual TLS: every client must present a certificate of this CA
  std::string peerCaFile;         // what a pod verifies the other pods with (default: clientCaFile, else the system's)
  std::string peerName;           // the name verified on the other pods' certificates (default: their address)
  bool enabled() const { return !certFile.empty(); }
};

struct ServerOptions {
  std::string host = "0.0.0.0";
  uint16_t port = 8080;  // 0: an ephemeral port (see Server::port())
  int threads = 2;
  std::size_t bodyLimit = 1 << 20;  // 1 MiB: larger bodies get 413
  int64_t headerTimeoutMs = 10000;  // a request must arrive whole within this
  // Open connections at most; more are closed as soon as they are accepted. 0: three quarters of
  // the file descriptor limit (raised to its hard limit at start where allowed).
  int64_t maxConnections = 0;
  int64_t idleTimeoutMs = 60000;    // keep-alive connections idle longer are closed
  // Forwarding a group's calls to the pod that serves it (HttpRequest::forwarder): this pod's id
  // (sent in X-Rsc-Forwarded-By) and how long the other pod has to answer.
  std::string podId;
  int64_t forwardTimeoutMs = 2000;
  ServerTls tls;
};

// "" when the HTTPS files load (certificate, key matching it, client CA), else why not, naming the file.
std::string check_server_tls(const ServerTls& t);

class Server {
 public:
  using Handler = std::function<void(HttpRequest, Respond)>;
  Server(ServerOptions opts, Handler handler);
  ~Server();

  // Binds, listens and starts the I/O threads. Throws with a readable message when it cannot bind.
  void start();
  uint16_t port() const;
  // Stops accepting, lets in-flight requests finish (up to graceMs), closes every connection.
  void stop(int64_t graceMs = 5000);
  int64_t connections_open() const;
  // Reads the certificate files again (SIGHUP); "" when the new ones are in use, else why not (the
  // old ones stay). Also done by itself within a second of a file changing.
  std::string reload_tls();
  int64_t tls_reloads() const;

  struct Impl;  // public so that the session class in server.cpp may name it

 private:
  std::shared_ptr<Impl> impl_;
};

}  // namespace rsc::http
