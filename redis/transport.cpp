#include "redis/transport.hpp"
#include "tls/files.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <map>
#include <mutex>

namespace rsc::store {
namespace {

using Clock = std::chrono::steady_clock;

SSL* as_ssl(void* p) { return static_cast<SSL*>(p); }

int left_ms(Clock::time_point deadline) {
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return static_cast<int>(std::max<int64_t>(0, ms));
}

void set_io_timeout(int fd, int64_t ms) {
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(ms / 1000);
  tv.tv_usec = static_cast<suseconds_t>((ms % 1000) * 1000);
  if (ms > 0 && tv.tv_sec == 0 && tv.tv_usec == 0) tv.tv_usec = 1000;
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
}

// As hiredis did: no Nagle delay, and keepalive probes after 15 s idle.
void tune(int fd) {
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  ::setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof one);
  int idle = 15, interval = 5, count = 3;
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof idle);
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &interval, sizeof interval);
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &count, sizeof count);
}

bool is_ip(const std::string& s) {
  in6_addr a6{};
  in_addr a4{};
  return ::inet_pton(AF_INET, s.c_str(), &a4) == 1 || ::inet_pton(AF_INET6, s.c_str(), &a6) == 1;
}

struct FreeCtx {
  void operator()(SSL_CTX* c) const { SSL_CTX_free(c); }
};
using CtxPtr = std::shared_ptr<SSL_CTX>;

CtxPtr build_context(const TlsOptions& t, std::string& why) {
  CtxPtr c(SSL_CTX_new(TLS_client_method()), FreeCtx{});
  if (!c) {
    why = "cannot make a TLS context: " + tls::openssl_reasons();
    return nullptr;
  }
  SSL_CTX_set_min_proto_version(c.get(), TLS1_2_VERSION);
  SSL_CTX_set_verify(c.get(), SSL_VERIFY_PEER, nullptr);
  SSL_CTX_set_mode(c.get(), SSL_MODE_AUTO_RETRY);
  ERR_clear_error();
  if (!t.caFile.empty() || !t.caDir.empty()) {
    for (const auto& [path, dir] : {std::pair{t.caFile, false}, std::pair{t.caDir, true}})
      if (!path.empty())
        if (auto p = tls::file_problem(path, dir); !p.empty()) {
          why = "CA " + p;
          return nullptr;
        }
    if (SSL_CTX_load_verify_locations(c.get(), t.caFile.empty() ? nullptr : t.caFile.c_str(),
                                      t.caDir.empty() ? nullptr : t.caDir.c_str()) != 1) {
      why = "cannot load the CA " + (t.caFile.empty() ? t.caDir : t.caFile) + ": " + tls::openssl_reasons();
      return nullptr;
    }
  } else if (SSL_CTX_set_default_verify_paths(c.get()) != 1) {
    why = "cannot load the system's CAs: " + tls::openssl_reasons();
    return nullptr;
  }
  if (!t.certFile.empty() || !t.keyFile.empty()) {
    if (t.certFile.empty() || t.keyFile.empty()) {
      why = "a client certificate needs both a certificate file and a key file";
      return nullptr;
    }
    for (const auto& path : {t.certFile, t.keyFile})
      if (auto p = tls::file_problem(path, false); !p.empty()) {
        why = "client certificate " + p;
        return nullptr;
      }
    if (SSL_CTX_use_certificate_chain_file(c.get(), t.certFile.c_str()) != 1) {
      why = "cannot load the client certificate " + t.certFile + ": " + tls::openssl_reasons();
      return nullptr;
    }
    if (SSL_CTX_use_PrivateKey_file(c.get(), t.keyFile.c_str(), SSL_FILETYPE_PEM) != 1) {
      const auto errors = tls::openssl_reasons();
      why = errors.find("key values mismatch") != std::string::npos
                ? "the client key " + t.keyFile + " does not match the certificate " + t.certFile
                : "cannot load the client key " + t.keyFile + ": " + errors;
      return nullptr;
    }
    if (SSL_CTX_check_private_key(c.get()) != 1) {
      why = "the client key " + t.keyFile + " does not match the certificate " + t.certFile;
      return nullptr;
    }
  }
  return c;
}

// One context per set of files and their modification times: a connection made after a file was
// replaced (cert-manager rotating a client certificate) uses the new one; the others share it.
CtxPtr context_for(const TlsOptions& t, std::string& why) {
  std::string key;
  for (const auto* path : {&t.caFile, &t.caDir, &t.certFile, &t.keyFile}) {
    struct stat st{};
    key += *path + '|';
    if (!path->empty() && ::stat(path->c_str(), &st) == 0)
      key += std::to_string(st.st_mtim.tv_sec) + '.' + std::to_string(st.st_mtim.tv_nsec) + '.' + std::to_string(st.st_ino);
    key += '|';
  }
  static std::mutex mu;
  // Never destroyed: freeing contexts after OpenSSL's own exit handler ran would touch freed state.
  static auto* cache = new std::map<std::string, CtxPtr>;
  std::lock_guard<std::mutex> lock(mu);
  if (auto it = cache->find(key); it != cache->end()) return it->second;
  auto c = build_context(t, why);
  if (!c) return nullptr;
  if (cache->size() >= 16) cache->clear();  // rotations: the live connections keep their own reference
  cache->emplace(key, c);
  return c;
}

// A write on a connection the peer closed raises SIGPIPE, which kills a process that did not
// ignore it (the member library runs in the user's). OpenSSL's socket BIO writes with write(2),
// and not only from SSL_write: SSL_read and SSL_connect send alerts. So every TLS connection
// writes through this BIO: the socket BIO with send(..., MSG_NOSIGNAL) as its write.
int send_nosignal(BIO* b, const char* data, int len) {
  int fd = -1;
  BIO_get_fd(b, &fd);
  errno = 0;
  const ssize_t r = ::send(fd, data, static_cast<std::size_t>(len), MSG_NOSIGNAL);
  BIO_clear_retry_flags(b);
  if (r <= 0 && BIO_sock_should_retry(static_cast<int>(r))) BIO_set_retry_write(b);
  return static_cast<int>(r);
}

const BIO_METHOD* socket_without_sigpipe() {
  static const BIO_METHOD* method = [] {
    const BIO_METHOD* plain = BIO_s_socket();
    BIO_METHOD* m = BIO_meth_new(BIO_TYPE_SOCKET, "socket without SIGPIPE");
    if (m == nullptr) return static_cast<const BIO_METHOD*>(nullptr);
    BIO_meth_set_write(m, send_nosignal);
    BIO_meth_set_read(m, BIO_meth_get_read(plain));
    BIO_meth_set_puts(m, BIO_meth_get_puts(plain));
    BIO_meth_set_ctrl(m, BIO_meth_get_ctrl(plain));
    BIO_meth_set_create(m, BIO_meth_get_create(plain));
    BIO_meth_set_destroy(m, BIO_meth_get_destroy(plain));
    return static_cast<const BIO_METHOD*>(m);
  }();
  return method;
}

std::string handshake_failure(SSL* ssl, int rc) {
  const long verify = SSL_get_verify_result(ssl);
  const int e = SSL_get_error(ssl, rc);
  const int err = errno;
  std::string queued = tls::openssl_reasons();
  if (verify != X509_V_OK) return "certificate verify failed: " + std::string(X509_verify_cert_error_string(verify));
  if (!queued.empty()) {
    if (queued.find("wrong version number") != std::string::npos || queued.find("packet length too long") != std::string::npos)
      queued += " (the server does not speak TLS on this port?)";
    return queued;
  }
  if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE || (e == SSL_ERROR_SYSCALL && (err == EAGAIN || err == EWOULDBLOCK)))
    return "no answer within the connect timeout (the server does not speak TLS on this port?)";
  if (e == SSL_ERROR_SYSCALL || e == SSL_ERROR_ZERO_RETURN)
    return err != 0 ? std::string(std::strerror(err)) : "the server closed the connection (the server does not speak TLS on this port?)";
  return "TLS error " + std::to_string(e);
}

}  // namespace

std::string check_tls_files(const TlsOptions& t) {
  if (!t.enabled) return {};
  std::string why;
  return build_context(t, why) ? std::string() : why;
}

Transport::~Transport() {
  if (ssl_ != nullptr) SSL_free(as_ssl(ssl_));
  if (fd_ >= 0) ::close(fd_);
}

std::unique_ptr<Transport> Transport::open(const std::string& host, int port, const TlsOptions& tls, int64_t connectTimeoutMs,
                                           int64_t ioTimeoutMs, std::string& why) {
  const auto deadline = Clock::now() + std::chrono::milliseconds(connectTimeoutMs);
  const std::string peer = "redis " + host + ":" + std::to_string(port);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (const int rc = ::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found); rc != 0) {
    why = peer + ": connect: cannot resolve the host: " + ::gai_strerror(rc);
    return nullptr;
  }
  std::unique_ptr<addrinfo, void (*)(addrinfo*)> addrs(found, ::freeaddrinfo);
  int fd = -1;
  std::string err = "no address";
  for (const addrinfo* a = found; a != nullptr; a = a->ai_next) {
    fd = ::socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) {
      err = std::strerror(errno);
      continue;
    }
    if (::connect(fd, a->ai_addr, a->ai_addrlen) == 0) break;
    if (errno == EINPROGRESS) {
      pollfd p{fd, POLLOUT, 0};
      int n;
      do n = ::poll(&p, 1, left_ms(deadline));
      while (n < 0 && errno == EINTR);
      if (n == 1) {
        int so = 0;
        socklen_t len = sizeof so;
        ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &so, &len);
        if (so == 0) break;
        err = std::strerror(so);
      } else {
        err = n == 0 ? "timed out" : std::strerror(errno);
      }
    } else {
      err = std::strerror(errno);
    }
    ::close(fd);
    fd = -1;
  }
  if (fd < 0) {
    why = peer + ": connect: " + err;
    return nullptr;
  }
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  tune(fd);
  std::unique_ptr<Transport> t(new Transport);
  t->fd_ = fd;
  t->peer_ = peer;
  if (tls.enabled) {
    auto ctx = context_for(tls, why);
    if (!ctx) {
      why = peer + ": TLS: " + why;
      return nullptr;
    }
    SSL* ssl = SSL_new(ctx.get());  // holds its own reference to the context
    if (ssl == nullptr) {
      why = peer + ": TLS: " + tls::openssl_reasons();
      return nullptr;
    }
    t->ssl_ = ssl;
    BIO* bio = socket_without_sigpipe() != nullptr ? BIO_new(socket_without_sigpipe()) : nullptr;
    if (bio == nullptr) {
      why = peer + ": TLS: " + tls::openssl_reasons();
      return nullptr;
    }
    BIO_set_fd(bio, fd, BIO_NOCLOSE);
    SSL_set_bio(ssl, bio, bio);  // the SSL owns it now
    const std::string& name = tls.serverName.empty() ? host : tls.serverName;
    if (is_ip(name)) {
      X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), name.c_str());
    } else {
      SSL_set_tlsext_host_name(ssl, name.c_str());
      SSL_set1_host(ssl, name.c_str());
    }
    set_io_timeout(fd, std::max(1, left_ms(deadline)));
    ERR_clear_error();
    errno = 0;
    const int rc = SSL_connect(ssl);
    if (rc != 1) {
      why = peer + ": TLS handshake failed: " + handshake_failure(ssl, rc);
      return nullptr;
    }
  }
  set_io_timeout(fd, ioTimeoutMs);
  return t;
}

bool Transport::write_all(const char* data, std::size_t n) {
  while (n > 0) {
    if (ssl_ != nullptr) {
      ERR_clear_error();
      const int r = SSL_write(as_ssl(ssl_), data, static_cast<int>(std::min<std::size_t>(n, 1 << 30)));
      if (r <= 0) {
        const int e = SSL_get_error(as_ssl(ssl_), r);
        timedOut_ = e == SSL_ERROR_WANT_WRITE || e == SSL_ERROR_WANT_READ;
        why_ = timedOut_ ? "timed out" : e == SSL_ERROR_SSL ? "TLS: " + tls::openssl_reasons() : errno ? std::strerror(errno) : "closed by the server";
        return false;
      }
      data += r;
      n -= static_cast<std::size_t>(r);
      continue;
    }
    const ssize_t r = ::send(fd_, data, n, MSG_NOSIGNAL);
    if (r < 0) {
      if (errno == EINTR) continue;
      timedOut_ = errno == EAGAIN || errno == EWOULDBLOCK;
      why_ = timedOut_ ? "timed out" : std::strerror(errno);
      return false;
    }
    data += r;
    n -= static_cast<std::size_t>(r);
  }
  return true;
}

std::size_t Transport::read_some(char* buf, std::size_t n) {
  if (ssl_ != nullptr) {
    ERR_clear_error();
    errno = 0;
    const int r = SSL_read(as_ssl(ssl_), buf, static_cast<int>(std::min<std::size_t>(n, 1 << 30)));
    if (r > 0) return static_cast<std::size_t>(r);
    const int e = SSL_get_error(as_ssl(ssl_), r);
    const int err = errno;
    timedOut_ = e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE || (e == SSL_ERROR_SYSCALL && (err == EAGAIN || err == EWOULDBLOCK));
    if (timedOut_) why_ = "timed out";
    else if (e == SSL_ERROR_ZERO_RETURN) why_ = "closed by the server";
    else if (e == SSL_ERROR_SSL) why_ = "TLS: " + tls::openssl_reasons();
    else why_ = err != 0 ? std::strerror(err) : "closed by the server";
    return 0;
  }
  for (;;) {
    const ssize_t r = ::recv(fd_, buf, n, 0);
    if (r > 0) return static_cast<std::size_t>(r);
    if (r < 0 && errno == EINTR) continue;
    timedOut_ = r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
    why_ = r == 0 ? "closed by the server" : timedOut_ ? "timed out" : std::strerror(errno);
    return 0;
  }
}

std::string Transport::alert_after_failure() {
  if (ssl_ == nullptr) return {};
  set_io_timeout(fd_, 50);
  ERR_clear_error();
  char b;
  const int r = SSL_read(as_ssl(ssl_), &b, 1);
  if (r <= 0 && SSL_get_error(as_ssl(ssl_), r) == SSL_ERROR_SSL) return "TLS: " + tls::openssl_reasons();
  return {};
}

bool Transport::buffered() const { return ssl_ != nullptr && SSL_pending(as_ssl(ssl_)) > 0; }

}  // namespace rsc::store
