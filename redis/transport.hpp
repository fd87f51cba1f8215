// The byte stream under a Redis connection: TCP, or TLS over TCP (OpenSSL, Debian's libssl3).
//
// Debian 12's hiredis is 0.14, which has no TLS. rsc keeps hiredis for what it is good at, the
// RESP reader (redisReader), and owns the socket: connect with a deadline, TCP_NODELAY, keepalive,
// a send/receive timeout, and, when asked, a TLS session on that socket that verifies the server's
// certificate (CA file or directory, else the system's) and name (SNI), optionally presenting a
// client certificate (mutual TLS). Plain TCP is the same system calls hiredis made.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "redis/redis_options.hpp"

namespace rsc::store {


// "" when the files can be used (they exist and load; a key matches its certificate), else why
// not, naming the file: for --check-config and for a clear error before any connection.
std::string check_tls_files(const TlsOptions& t);

class Transport {
 public:
  ~Transport();
  Transport(const Transport&) = delete;
  Transport& operator=(const Transport&) = delete;

  // Connects to host:port within connectTimeoutMs (resolution, TCP and the TLS handshake), then
  // gives every read and write ioTimeoutMs. nullptr and `why` (one line naming the peer) on failure.
  static std::unique_ptr<Transport> open(const std::string& host, int port, const TlsOptions& tls, int64_t connectTimeoutMs,
                                         int64_t ioTimeoutMs, std::string& why);

  // All of it; false: failed (why()).
  bool write_all(const char* data, std::size_t n);
  // At least one byte (waiting up to the I/O timeout); 0 on a failure, a timeout or the peer's close.
  std::size_t read_some(char* buf, std::size_t n);
  // After a failed write on a TLS session: the reason the server sent (an alert, e.g. "tlsv13 alert
  // certificate required"), read within a few milliseconds if it came; "" when none did.
  std::string alert_after_failure();
  // Decrypted bytes already inside the TLS session: a poll on fd() would not see them.
  bool buffered() const;
  int fd() const { return fd_; }
  bool tls() const { return ssl_ != nullptr; }
  const std::string& why() const { return why_; }
  bool timed_out() const { return timedOut_; }

 private:
  Transport() = default;
  int fd_ = -1;
  void* ssl_ = nullptr;  // SSL*
  std::string peer_;
  std::string why_;
  bool timedOut_ = false;
};

}  // namespace rsc::store
