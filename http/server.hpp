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
  // The oldest protocol spoken, served and forwarded with: "1.2" (default) or "1.3".
  std::string minVersion;
  // TLS 1.2's suites (an OpenSSL cipher list; TLS 1.3's are all forward secret and AEAD). Default
  // kDefaultTls12Ciphers: ECDHE key exchange with AES-GCM or ChaCha20-Poly1305 only, so neither a
  // static-RSA key exchange nor a CBC suite is ever agreed.
  std::string ciphers;
  bool enabled() const { return !certFile.empty(); }
};
inline constexpr const char* kDefaultTls12Ciphers = "ECDHE+AESGCM:ECDHE+CHACHA20:!aNULL";

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
  // Forwarded calls travel over one pod link per other pod (http/pod_link.hpp: many calls in flight
  // on one connection, answers in any order, batched writes) instead of one HTTP exchange each.
  // Off: neither opened nor accepted (every forwarded call is an HTTP exchange of its own).
  bool podLink = true;
  ServerTls tls;
  // HTTPS: told of the served certificate at start and at each reload (its file and the end of its
  // validity, Unix seconds), and of each failed handshake (handshake_failure_reason's words).
  std::function<void(const std::string& certFile, int64_t notAfterUnixSeconds)> onCertificate;
  std::function<void(const std::string& reason)> onHandshakeFailure;
};

// "" when the HTTPS files load (certificate, key matching it, client CA) and the version and cipher
// settings are usable, else why not, naming the file or the setting.
std::string check_server_tls(const ServerTls& t);
// Sets t's minimum version and TLS 1.2 suites on an OpenSSL context (an SSL_CTX*, here untyped so
// that this header needs no OpenSSL): "" when done, else why not, naming the setting.
std::string apply_tls_policy(void* sslCtx, const ServerTls& t);
// The end of validity (Unix seconds) of the certificate an OpenSSL context serves; 0 when none.
int64_t certificate_not_after(void* sslCtx);
// A failed handshake's reason in a few fixed words, for a metric's label: timeout, plain_http,
// no_client_certificate, client_certificate_rejected, server_certificate_rejected (the client
// refused ours), protocol_version, no_shared_cipher, other.
std::string handshake_failure_reason(const std::string& message);
// The line to log about a certificate that expires within `warnDays` (or has expired); "" when it
// has longer.
std::string certificate_expiry_warning(const std::string& file, int64_t notAfterUnixSeconds, int64_t nowUnixSeconds,
                                       int64_t warnDays);

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
