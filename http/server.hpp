// The HTTP server (Boost.Beast) in front of handle_request. No Asio in this header.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "http/api.hpp"

namespace rsc::http {

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
};

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

  struct Impl;  // public so that the session class in server.cpp may name it

 private:
  std::shared_ptr<Impl> impl_;
};

}  // namespace rsc::http
