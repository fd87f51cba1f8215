// Listener and session after Beast's advanced server example: do_x/on_x pairs, one fail(),
// expires_after timeouts, a body limit; one io_context per thread instead of a strand per
// connection.
#include "http/server.hpp"
#include "http/pod_link.hpp"
#include "tls/files.hpp"

#include <boost/asio/dispatch.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>

#include <arpa/inet.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <map>
#include <chrono>
#include <mutex>
#include <optional>
#include <set>
#include <thread>
#include <unordered_map>
#include <vector>

#include "log/log.hpp"

namespace rsc::http {

namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;

class SessionBase;
class PodForwarder;
using SslCtx = std::shared_ptr<net::ssl::context>;
using TlsStream = beast::ssl_stream<beast::tcp_stream>;

namespace {

// The server's TLS context: its certificate chain and key, and with a client CA, mutual TLS.
SslCtx make_server_context(const ServerTls& t) {
  auto c = std::make_shared<net::ssl::context>(net::ssl::context::tls_server);
  c->set_options(net::ssl::context::default_workarounds | net::ssl::context::no_sslv2 | net::ssl::context::no_sslv3 |
                 net::ssl::context::no_tlsv1 | net::ssl::context::no_tlsv1_1);
  if (t.keyFile.empty()) throw std::runtime_error("a certificate needs its key file too");
  if (auto e = apply_tls_policy(c->native_handle(), t); !e.empty()) throw std::runtime_error(e);
  for (const auto& [what, path] : {std::pair<std::string, std::string>{"certificate", t.certFile}, {"key", t.keyFile}})
    if (auto p = tls::file_problem(path); !p.empty()) throw std::runtime_error(what + " " + p);
  beast::error_code ec;
  c->use_certificate_chain_file(t.certFile, ec);
  if (ec) throw std::runtime_error("certificate " + t.certFile + ": " + ec.message());
  c->use_private_key_file(t.keyFile, net::ssl::context::pem, ec);
  if (ec)
    throw std::runtime_error(ec.message().find("mismatch") != std::string::npos
                                 ? "key " + t.keyFile + " does not match the certificate " + t.certFile
                                 : "key " + t.keyFile + ": " + ec.message());
  if (!t.clientCaFile.empty()) {
    if (auto p = tls::file_problem(t.clientCaFile); !p.empty()) throw std::runtime_error("client CA " + p);
    c->load_verify_file(t.clientCaFile, ec);
    if (ec) throw std::runtime_error("client CA " + t.clientCaFile + ": " + ec.message());
    c->set_verify_mode(net::ssl::verify_peer | net::ssl::verify_fail_if_no_peer_cert);
    if (STACK_OF(X509_NAME)* names = SSL_load_client_CA_file(t.clientCaFile.c_str()))
      SSL_CTX_set_client_CA_list(c->native_handle(), names);
  }
  return c;
}

// Whether the client certificate a connection presented at its handshake is still trusted by the
// client CA of `ctx` (a reload's): true when none was presented (no mutual TLS then).
bool client_still_trusted(SSL* ssl, SSL_CTX* ctx) {
  X509* cert = SSL_get0_peer_certificate(ssl);
  if (cert == nullptr) return true;
  std::unique_ptr<X509_STORE_CTX, void (*)(X509_STORE_CTX*)> v(X509_STORE_CTX_new(), X509_STORE_CTX_free);
  if (!v || X509_STORE_CTX_init(v.get(), SSL_CTX_get_cert_store(ctx), cert, SSL_get_peer_cert_chain(ssl)) != 1) return false;
  X509_STORE_CTX_set_purpose(v.get(), X509_PURPOSE_SSL_CLIENT);
  return X509_verify_cert(v.get()) == 1;
}

// What a pod forwards to other pods with: it verifies them and presents its own certificate.
SslCtx make_client_context(const ServerTls& t) {
  auto c = std::make_shared<net::ssl::context>(net::ssl::context::tls_client);
  c->set_options(net::ssl::context::default_workarounds | net::ssl::context::no_sslv2 | net::ssl::context::no_sslv3 |
                 net::ssl::context::no_tlsv1 | net::ssl::context::no_tlsv1_1);
  c->set_verify_mode(net::ssl::verify_peer);
  if (auto e = apply_tls_policy(c->native_handle(), t); !e.empty()) throw std::runtime_error(e);
  beast::error_code ec;
  const std::string& ca = !t.peerCaFile.empty() ? t.peerCaFile : t.clientCaFile;
  if (!ca.empty()) {
    if (auto p = tls::file_problem(ca); !p.empty()) throw std::runtime_error("peer CA " + p);
    c->load_verify_file(ca, ec);
    if (ec) throw std::runtime_error("peer CA " + ca + ": " + ec.message());
  } else {
    c->set_default_verify_paths(ec);
  }
  if (t.enabled()) {
    c->use_certificate_chain_file(t.certFile, ec);
    if (!ec) c->use_private_key_file(t.keyFile, net::ssl::context::pem, ec);
    if (ec) throw std::runtime_error("certificate " + t.certFile + ": " + ec.message());
  }
  return c;
}

// The files' modification times and inodes: a rotation (a Secret's files swapped) changes it.
std::string tls_stamp(const ServerTls& t) {
  std::string out;
  for (const auto* path : {&t.certFile, &t.keyFile, &t.clientCaFile, &t.peerCaFile}) {
    struct stat st{};
    if (!path->empty() && ::stat(path->c_str(), &st) == 0)
      out += std::to_string(st.st_mtim.tv_sec) + "." + std::to_string(st.st_mtim.tv_nsec) + "." + std::to_string(st.st_ino);
    out += "|";
  }
  return out;
}

// Checks the name (or IP address) of the certificate a pod is given by the pod it forwards to.
void expect_peer(TlsStream& s, const std::string& name) {
  SSL* ssl = s.native_handle();
  in6_addr a6{};
  in_addr a4{};
  if (::inet_pton(AF_INET, name.c_str(), &a4) == 1 || ::inet_pton(AF_INET6, name.c_str(), &a6) == 1) {
    X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), name.c_str());
  } else {
    SSL_set_tlsext_host_name(ssl, name.c_str());
    SSL_set1_host(ssl, name.c_str());
  }
}

}  // namespace


struct Server::Impl : std::enable_shared_from_this<Server::Impl> {
  ServerOptions opts;
  Handler handler;
  // One io_context per thread, connections spread over them: threads that share one io_context
  // contend for its queue and its epoll set on every event (measured: GET /healthz cost twice the
  // CPU with two threads on one context than with one).
  std::vector<std::unique_ptr<net::io_context>> iocs;
  std::vector<std::unique_ptr<PodForwarder>> forwarders;  // one per io_context, used on its thread only
  std::size_t nextIoc = 0;
  net::io_context& ioc() { return *iocs.front(); }
  std::unique_ptr<tcp::acceptor> acceptor;
  std::vector<std::thread> threads;
  std::atomic<bool> stopping{false};
  std::atomic<int64_t> inFlight{0};
  std::atomic<int64_t> open{0};
  std::mutex mu;
  std::set<std::weak_ptr<SessionBase>, std::owner_less<std::weak_ptr<SessionBase>>> sessions;
  // HTTPS: the contexts new connections (and new forwarded connections) get; replaced on a reload.
  std::mutex tlsMu;
  SslCtx serverCtx, clientCtx;
  std::string tlsStamp;
  std::atomic<int64_t> tlsReloads{0};
  std::unique_ptr<net::steady_timer> tlsWatch;
  struct Told {
    std::chrono::steady_clock::time_point at;
    int64_t since = 0;  // failures of this kind not logged since
  };
  std::map<std::string, Told> tlsTold;  // per reason
  SslCtx server_ctx() {
    std::lock_guard<std::mutex> lock(tlsMu);
    return serverCtx;
  }
  SslCtx client_ctx() {
    std::lock_guard<std::mutex> lock(tlsMu);
    return clientCtx;
  }
  std::string reload_tls();
  void watch_tls();
  // After a reload under mutual TLS: open connections whose client certificate the client CA now
  // in use no longer trusts are closed (after the answer in progress, if any), with one line.
  void recheck_clients();
  // A failed handshake: one log line naming the peer and the reason, then at most one per 5 s for
  // that reason, with a count (no flood).
  void tls_problem(const std::string& peer, const std::string& why);
  uint16_t boundPort = 0;
  int64_t maxConnections = 0;
  std::unique_ptr<net::steady_timer> acceptPause;  // after an accept error: a pause, not a spin
  // Log lines about refused or failed accepts, at most one per interval with a count.
  std::chrono::steady_clock::time_point lastAcceptLog{};
  int64_t acceptProblems = 0;

  void do_accept();
  void accept_problem(const std::string& what);
  // Registers a connection for stop() and the client-CA recheck.
  void track(const std::shared_ptr<SessionBase>& s) {
    std::lock_guard<std::mutex> lock(mu);
    for (auto it = sessions.begin(); it != sessions.end();) it = it->expired() ? sessions.erase(it) : std::next(it);
    sessions.insert(s);
  }
  // The most a pod-link frame may hold: a request body at its limit, and room for the rest.
  std::size_t max_frame() const { return opts.bodyLimit + 64 * 1024; }
};

void Server::Impl::accept_problem(const std::string& what) {
  ++acceptProblems;
  const auto now = std::chrono::steady_clock::now();
  if (now - lastAcceptLog < std::chrono::seconds(5)) return;
  lastAcceptLog = now;
  log::warn("http accept: " + what + " (" + std::to_string(acceptProblems) + " such since the last line)");
  acceptProblems = 0;
}

std::string Server::Impl::reload_tls() {
  std::string stamp = tls_stamp(opts.tls);
  try {
    auto server = make_server_context(opts.tls);
    auto client = make_client_context(opts.tls);
    const int64_t notAfter = certificate_not_after(server->native_handle());
    {
      std::lock_guard<std::mutex> lock(tlsMu);
      serverCtx = std::move(server);
      clientCtx = std::move(client);
      tlsStamp = std::move(stamp);
    }
    if (opts.onCertificate) opts.onCertificate(opts.tls.certFile, notAfter);
    if (!opts.tls.clientCaFile.empty()) recheck_clients();
  } catch (const std::exception& e) {
    std::lock_guard<std::mutex> lock(tlsMu);
    tlsStamp = std::move(stamp);  // told once per change, not every second
    return e.what();
  }
  ++tlsReloads;
  return {};
}

void Server::Impl::watch_tls() {
  tlsWatch->expires_after(std::chrono::seconds(1));
  tlsWatch->async_wait([self = shared_from_this()](beast::error_code ec) {
    if (ec || self->stopping) return;
    bool changed;
    {
      std::lock_guard<std::mutex> lock(self->tlsMu);
      changed = tls_stamp(self->opts.tls) != self->tlsStamp;
    }
    if (changed) {
      const auto e = self->reload_tls();
      if (e.empty()) log::info("https: certificate files changed; new connections use them");
      else log::error("https: certificate files changed but cannot be used (" + e + "); the previous ones stay");
    }
    self->watch_tls();
  });
}

void Server::Impl::tls_problem(const std::string& peer, const std::string& why) {
  if (opts.onHandshakeFailure) opts.onHandshakeFailure(handshake_failure_reason(why));
  std::lock_guard<std::mutex> lock(tlsMu);
  const auto now = std::chrono::steady_clock::now();
  if (tlsTold.size() > 64) tlsTold.clear();
  auto [it, fresh] = tlsTold.try_emplace(why);
  auto& t = it->second;
  if (!fresh && now - t.at < std::chrono::seconds(5)) {
    ++t.since;
    return;
  }
  log::warn("https: TLS handshake with " + peer + " failed: " + why +
            (t.since > 0 ? " (and " + std::to_string(t.since) + " more such since the last line)" : ""));
  t.at = now;
  t.since = 0;
}

namespace {
void fail(beast::error_code ec, const char* what) {
  if (ec == net::error::operation_aborted || ec == beast::error::timeout || ec == bhttp::error::end_of_stream ||
      ec == net::error::eof || ec == net::error::connection_reset || ec == net::error::bad_descriptor)
    return;  // normal endings of a connection
  log::warn(std::string("http ") + what + ": " + ec.message());
}
}  // namespace

// Calls forwarded to the pod that serves their group. Runs on one io_context's thread: no lock.
//
// Over a pod link (pod_link.hpp) when the other pod speaks it: one connection per pod address,
// every call a frame with its number, answers in any order; the calls forwarded while the I/O
// thread handles one batch of events go out in one write. A link that breaks after it has answered
// (the other pod restarted) sends each call it still held once more on a new one; a call not
// answered within the forward timeout fails, and a link that heard nothing for that long with
// calls waiting is given up; one idle for kLinkIdleClose is closed. A pod that refuses the link (an
// older version) is called over HTTP for a minute, then asked again.
//
// Over HTTP otherwise (opts.podLink off, or that older pod): kept-alive connections pooled per
// pod address. A pooled connection that turns out to be closed (the other pod restarted, or closed
// it idle) is given up and the call sent once more on a new one; any other failure goes to the
// caller, which answers RETRY. The pool keeps at most kMaxIdle connections per pod and closes one
// idle for kIdleClose: under load they are reused at once, and a burst (a store stall holds many
// calls at once) leaves no descriptors behind.
class PodForwarder : public Forwarder {
 public:
  static constexpr std::size_t kMaxIdle = 8;
  static constexpr auto kIdleClose = std::chrono::milliseconds(1000);
  // A link idle this long is closed (under load a link is never idle; a quiet pod holds no
  // descriptors for links it does not use, as the HTTP pool holds none for connections).
  static constexpr auto kLinkIdleClose = std::chrono::milliseconds(1000);
  static constexpr auto kHttpOnlyFor = std::chrono::seconds(60);
  // The largest answer frame taken from another pod (a describe of a large group is far larger than
  // any request; a frame claiming more means the link is broken).
  static constexpr std::size_t kMaxAnswerFrame = 64u << 20;

  // `clientCtx`: the current context to forward over TLS with (null: plain HTTP).
  PodForwarder(net::io_context& ioc, const ServerOptions& opts, std::function<SslCtx()> clientCtx)
      : ioc_(ioc), opts_(opts), sweep_(ioc), clientCtx_(std::move(clientCtx)) {}

  void forward(const std::string& address, const HttpRequest& req, Respond respond,
               std::function<void(std::string)> failed) override {
    auto call = std::make_shared<Call>();
    call->address = address;
    call->respond = std::move(respond);
    call->failed = std::move(failed);
    const auto colon = address.rfind(':');
    if (colon == std::string::npos || colon == 0 || colon + 1 >= address.size())
      return call->failed("has no usable address ('" + address + "')");
    std::string host = address.substr(0, colon);
    if (host.size() > 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
    const auto port = static_cast<unsigned short>(std::atoi(address.c_str() + colon + 1));
    beast::error_code ec;
    const auto ip = net::ip::make_address(host, ec);
    if (ec) call->hostName = host;  // a name (a headless Service's pod record): resolved at connect
    else call->endpoint = tcp::endpoint(ip, port);
    call->port = port;
    call->call.method = req.method;
    call->call.target = req.target;
    call->call.contentType = req.contentType;
    call->call.authorization = req.authorization;
    call->call.forwardedBy = opts_.podId;
    call->call.body = req.body;
    if (use_link(address)) return link_send(call);
    http_send(call);
  }

 private:
  // A connection to another pod: TLS when the pods speak HTTPS, else plain TCP (no TLS object made:
  // a plain pod never initializes OpenSSL).
  struct Upstream {
    Upstream(net::io_context& ioc, const SslCtx& c) : ctx(c), tls(c != nullptr) {
      if (tls) ss.emplace(ioc, *ctx);
      else plain.emplace(ioc);
    }
    SslCtx ctx;  // kept while the connection lives (a reload makes new ones)
    bool tls;
    std::optional<TlsStream> ss;
    std::optional<beast::tcp_stream> plain;
    beast::flat_buffer buffer;
    bool connected = false;
    std::chrono::steady_clock::time_point idleSince;
    beast::tcp_stream& tcp() { return tls ? ss->next_layer() : *plain; }
  };
  std::shared_ptr<Upstream> fresh() { return std::make_shared<Upstream>(ioc_, clientCtx_()); }
  struct Call {
    std::string address;
    tcp::endpoint endpoint;
    std::string hostName;  // the address names a host rather than an IP: resolved first
    bool resolved = false;
    unsigned short port = 0;
    HttpRequest call;  // what is forwarded (X-Rsc-Forwarded-By: this pod)
    bhttp::request<bhttp::string_body> req;  // over HTTP
    bhttp::response<bhttp::string_body> res;
    Respond respond;
    std::function<void(std::string)> failed;
    std::chrono::steady_clock::time_point deadline;  // over a link
    bool resent = false;                             // ... sent once more after its link broke
  };

  // Over HTTP: the Beast request, then a pooled connection.
  void http_send(const std::shared_ptr<Call>& call) {
    auto& r = call->req;
    r.method_string(call->call.method);
    r.target(call->call.target);
    r.version(11);
    r.set(bhttp::field::host, call->address);
    if (!call->call.contentType.empty()) r.set(bhttp::field::content_type, call->call.contentType);
    if (!call->call.authorization.empty()) r.set(bhttp::field::authorization, call->call.authorization);
    r.set(kForwardedByHeader, call->call.forwardedBy);
    r.keep_alive(true);
    r.body() = call->call.body;  // copied: a call that fails here may be sent again over a link
    r.prepare_payload();
    send(call, take(call->address));
  }

  // One pod link: its connection, the calls sent on it and not yet answered, and what waits to
  // be written.
  struct Link {
    std::string address;
    std::shared_ptr<Upstream> up;
    bool open = false;      // the other pod agreed (101)
    bool dead = false;
    bool answered = false;  // it has answered a call: a break now means the other pod went away
    bool writing = false, flushQueued = false;
    std::string out, wbuf;
    uint32_t nextId = 1;
    std::unordered_map<uint32_t, std::shared_ptr<Call>> calls;
    std::chrono::steady_clock::time_point lastRead, lastUsed;
    bhttp::response<bhttp::string_body> upgrade;  // the other pod's answer to the Upgrade
  };

  bool use_link(const std::string& address) {
    if (!opts_.podLink) return false;
    auto it = httpOnlyUntil_.find(address);
    if (it == httpOnlyUntil_.end()) return true;
    if (std::chrono::steady_clock::now() < it->second) return false;
    httpOnlyUntil_.erase(it);
    return true;
  }

  void link_send(const std::shared_ptr<Call>& call) {
    const auto now = std::chrono::steady_clock::now();
    auto& l = links_[call->address];
    if (!l || l->dead) l = open_link(call);
    uint32_t id = l->nextId++;
    if (id == 0) id = l->nextId++;
    call->deadline = now + std::chrono::milliseconds(opts_.forwardTimeoutMs);
    l->calls.emplace(id, call);
    link::append_call(l->out, id, call->call);
    l->lastUsed = now;
    if (l->open) queue_flush(l);
    sweep_later();
  }

  // Connects (resolving a name, then TLS when the pods speak HTTPS) and asks for the link; the calls
  // wait in `out` meanwhile.
  std::shared_ptr<Link> open_link(const std::shared_ptr<Call>& first) {
    auto l = std::make_shared<Link>();
    l->address = first->address;
    l->up = fresh();
    l->up->tcp().expires_after(std::chrono::milliseconds(opts_.forwardTimeoutMs));
    auto connect = [this, l](tcp::endpoint ep, std::string verifyName) {
      l->up->tcp().async_connect(ep, [this, l, verifyName](beast::error_code ec) {
        if (ec) return link_broken(l, ec == beast::error::timeout ? late() : "could not be reached (connect: " + ec.message() + ")", false);
        beast::error_code ignored;
        l->up->tcp().socket().set_option(tcp::no_delay(true), ignored);
        if (!l->up->tls) return ask_link(l);
        expect_peer(*l->up->ss, verifyName);
        l->up->ss->async_handshake(net::ssl::stream_base::client, [this, l](beast::error_code hec) {
          if (hec) return link_broken(l, "could not be reached (TLS handshake: " + hec.message() + ")", false);
          ask_link(l);
        });
      });
    };
    // The other pod's certificate must name opts.tls.peerName, or else the address forwarded to.
    if (first->hostName.empty()) {
      connect(first->endpoint, !opts_.tls.peerName.empty() ? opts_.tls.peerName : first->endpoint.address().to_string());
    } else {
      auto resolver = std::make_shared<tcp::resolver>(ioc_);
      const std::string name = first->hostName;
      resolver->async_resolve(name, std::to_string(first->port),
                              [this, l, resolver, name, connect](beast::error_code ec, tcp::resolver::results_type found) {
                                if (ec || found.empty())
                                  return link_broken(l, "could not be reached (resolve: " + (ec ? ec.message() : std::string("no address")) + ")", false);
                                connect(*found.begin(), !opts_.tls.peerName.empty() ? opts_.tls.peerName : name);
                              });
    }
    return l;
  }

  template <class F>
  void on_stream(Link& l, F&& f) {
    if (l.up->tls) f(*l.up->ss);
    else f(l.up->tcp());
  }

  void ask_link(const std::shared_ptr<Link>& l) {
    auto ask = std::make_shared<std::string>(std::string("GET ") + link::kTarget + " HTTP/1.1\r\nHost: " + l->address +
                                             "\r\nConnection: Upgrade\r\nUpgrade: " + link::kProtocol + "\r\n\r\n");
    on_stream(*l, [this, l, ask](auto& stream) {
      net::async_write(stream, net::buffer(*ask), [this, l, ask, &stream](beast::error_code ec, std::size_t) {
        if (ec) return link_broken(l, "could not be reached (write: " + ec.message() + ")", false);
        bhttp::async_read(stream, l->up->buffer, l->upgrade, [this, l](beast::error_code rec, std::size_t) {
          if (rec) return link_broken(l, "could not be reached (read: " + rec.message() + ")", false);
          if (l->upgrade.result_int() != 101 || !beast::iequals(l->upgrade[bhttp::field::upgrade], link::kProtocol))
            return refused_link(l);
          l->up->tcp().expires_never();  // calls have deadlines of their own (the sweep)
          l->open = true;
          l->lastRead = std::chrono::steady_clock::now();
          read_answers(l);
          queue_flush(l);
        });
      });
    });
  }

  // An older pod: its calls (none sent yet) go over HTTP, and so do the next ones for a while.
  void refused_link(const std::shared_ptr<Link>& l) {
    log::info("forwarding: the pod at " + l->address + " does not speak the pod link (answered " +
              std::to_string(l->upgrade.result_int()) + "); its calls go over HTTP");
    httpOnlyUntil_[l->address] = std::chrono::steady_clock::now() + kHttpOnlyFor;
    auto calls = std::move(l->calls);
    l->calls.clear();
    end_link(l);
    for (auto& [id, call] : calls) http_send(call);
  }

  void queue_flush(const std::shared_ptr<Link>& l) {
    if (l->flushQueued || l->writing) return;
    l->flushQueued = true;
    // Posted: calls forwarded by the handlers that run before it join this write.
    net::post(ioc_, [this, l] {
      l->flushQueued = false;
      flush(l);
    });
  }

  void flush(const std::shared_ptr<Link>& l) {
    if (l->dead || !l->open || l->writing || l->out.empty()) return;
    l->wbuf.clear();
    l->wbuf.swap(l->out);
    l->writing = true;
    on_stream(*l, [this, l](auto& stream) {
      net::async_write(stream, net::buffer(l->wbuf), [this, l](beast::error_code ec, std::size_t) {
        l->writing = false;
        if (ec) return link_broken(l, "could not be reached (write: " + ec.message() + ")", true);
        flush(l);
      });
    });
  }

  void read_answers(const std::shared_ptr<Link>& l) {
    on_stream(*l, [this, l](auto& stream) {
      stream.async_read_some(l->up->buffer.prepare(64 * 1024), [this, l](beast::error_code ec, std::size_t n) {
        if (l->dead) return;
        if (ec) return link_broken(l, "could not be reached (read: " + ec.message() + ")", true);
        l->up->buffer.commit(n);
        l->lastRead = std::chrono::steady_clock::now();
        for (;;) {
          const auto data = l->up->buffer.data();
          std::size_t used = 0;
          uint32_t id = 0;
          HttpResponse out;
          const auto got = link::read_answer(static_cast<const char*>(data.data()), data.size(),
                                             kMaxAnswerFrame, used, id, out);
          if (got == link::Read::More) break;
          if (got == link::Read::Malformed) return link_broken(l, "answered with a malformed frame", false);
          l->up->buffer.consume(used);
          auto it = l->calls.find(id);
          if (it == l->calls.end()) continue;  // answered after its deadline: already failed
          auto call = std::move(it->second);
          l->calls.erase(it);
          l->answered = true;
          call->respond(std::move(out));
        }
        read_answers(l);
      });
    });
  }

  void end_link(const std::shared_ptr<Link>& l) {
    l->dead = true;
    beast::error_code ignored;
    l->up->tcp().socket().close(ignored);
    auto it = links_.find(l->address);
    if (it != links_.end() && it->second == l) links_.erase(it);
  }

  // The link cannot go on: each call it held is sent once more on a new link when the link had
  // answered before (`resend`: the other pod went away, as a pooled HTTP connection found closed),
  // or fails with `why`.
  void link_broken(const std::shared_ptr<Link>& l, const std::string& why, bool resend) {
    if (l->dead) return;
    auto calls = std::move(l->calls);
    l->calls.clear();
    const bool again = resend && l->answered;
    end_link(l);
    if (!calls.empty() && !again) log::warn("forwarding: the pod link to " + l->address + " broke: " + why);
    for (auto& [id, call] : calls) {
      if (again && !call->resent) {
        call->resent = true;
        link_send(call);
      } else {
        call->failed(why);
      }
    }
  }

  // The most recently used idle connection to the address, or a new one.
  std::shared_ptr<Upstream> take(const std::string& address) {
    auto& idle = idle_[address];
    const auto now = std::chrono::steady_clock::now();
    while (!idle.empty()) {
      auto up = std::move(idle.back());
      idle.pop_back();
      if (now - up->idleSince < kIdleClose) return up;
      close(*up);
    }
    return fresh();
  }

  void put_back(const std::string& address, std::shared_ptr<Upstream> up) {
    auto& idle = idle_[address];
    if (idle.size() >= kMaxIdle) return close(*up);
    up->idleSince = std::chrono::steady_clock::now();
    idle.push_back(std::move(up));
    sweep_later();
  }

  static void close(Upstream& up) {
    beast::error_code ignored;
    up.tcp().socket().close(ignored);
  }

  // Every 100 ms while anything is pooled or linked: pooled connections idle for kIdleClose are
  // closed; calls on links past their deadline fail, a link that heard nothing for the forward
  // timeout while calls waited is given up, and one idle for kLinkIdleClose is closed.
  void sweep_later() {
    if (sweeping_) return;
    sweeping_ = true;
    sweep_.expires_after(std::chrono::milliseconds(100));
    sweep_.async_wait([this](beast::error_code ec) {
      sweeping_ = false;
      if (ec) return;
      const auto now = std::chrono::steady_clock::now();
      bool any = false;
      for (auto& [address, idle] : idle_) {
        // Oldest first: the pool is used from the back.
        std::size_t keep = 0;
        while (keep < idle.size() && now - idle[keep]->idleSince >= kIdleClose) close(*idle[keep++]);
        idle.erase(idle.begin(), idle.begin() + static_cast<long>(keep));
        any = any || !idle.empty();
      }
      const auto timeout = std::chrono::milliseconds(opts_.forwardTimeoutMs);
      std::vector<std::shared_ptr<Link>> all;
      for (auto& [address, l] : links_) all.push_back(l);
      for (auto& l : all) {
        std::vector<std::shared_ptr<Call>> expired;
        for (auto it = l->calls.begin(); it != l->calls.end();) {
          if (it->second->deadline <= now) {
            expired.push_back(std::move(it->second));
            it = l->calls.erase(it);
          } else {
            ++it;
          }
        }
        if (!expired.empty() && (!l->open || now - l->lastRead >= timeout)) link_broken(l, late(), false);
        else if (l->calls.empty() && l->out.empty() && !l->writing && now - l->lastUsed >= kLinkIdleClose) end_link(l);
        for (auto& call : expired) call->failed(late());
      }
      if (any || !links_.empty()) sweep_later();
    });
  }

  // Why a call that ran out of time failed.
  std::string late() const { return "did not answer within " + std::to_string(opts_.forwardTimeoutMs) + "ms"; }

  void send(const std::shared_ptr<Call>& call, std::shared_ptr<Upstream> up) {
    const bool reused = up->connected;
    auto onError = [this, call, up, reused](beast::error_code ec, const char* what) {
      beast::error_code ignored;
      up->tcp().socket().close(ignored);
      if (reused && ec != beast::error::timeout) return send(call, fresh());
      call->failed(ec == beast::error::timeout ? late()
                                               : std::string("could not be reached (") + what + ": " + ec.message() + ")");
    };
    // The request and its answer on the connection's stream (TLS or TCP alone).
    auto io = [this, call, up, onError](auto& stream) {
      bhttp::async_write(stream, call->req, [this, call, up, onError, &stream](beast::error_code ec, std::size_t) {
        if (ec) return onError(ec, "write");
        call->res = {};
        bhttp::async_read(stream, up->buffer, call->res, [this, call, up, onError](beast::error_code rec, std::size_t) {
          if (rec) return onError(rec, "read");
          up->tcp().expires_never();
          HttpResponse out;
          out.status = static_cast<int>(call->res.result_int());
          out.contentType = std::string(call->res[bhttp::field::content_type]);
          for (auto field : {bhttp::field::retry_after, bhttp::field::www_authenticate, bhttp::field::allow}) {
            auto it = call->res.find(field);
            if (it != call->res.end()) out.headers.emplace_back(std::string(it->name_string()), std::string(it->value()));
          }
          if (auto it = call->res.find(kGroupOwnerHeader); it != call->res.end())
            out.headers.emplace_back(kGroupOwnerHeader, std::string(it->value()));
          out.body = std::move(call->res.body());
          if (call->res.keep_alive())
            put_back(call->address, up);
          else
            close(*up);
          call->respond(std::move(out));
        });
      });
    };
    auto exchange = [this, up, io] {
      up->tcp().expires_after(std::chrono::milliseconds(opts_.forwardTimeoutMs));
      if (up->tls) io(*up->ss);
      else io(up->tcp());
    };
    if (up->connected) return exchange();
    up->tcp().expires_after(std::chrono::milliseconds(opts_.forwardTimeoutMs));
    if (!call->hostName.empty() && !call->resolved) {
      // Resolved on each new connection (a pod that restarts keeps its name, not its IP).
      auto resolver = std::make_shared<tcp::resolver>(ioc_);
      return resolver->async_resolve(
          call->hostName, std::to_string(call->port),
          [this, resolver, call, up, onError](beast::error_code ec, tcp::resolver::results_type found) {
            if (ec || found.empty()) return onError(ec ? ec : net::error::host_not_found, "resolve");
            call->endpoint = *found.begin();
            call->resolved = true;
            send(call, up);
          });
    }
    up->tcp().async_connect(call->endpoint, [this, call, up, exchange, onError](beast::error_code ec) {
      if (ec) return onError(ec, "connect");
      beast::error_code ignored;
      up->tcp().socket().set_option(tcp::no_delay(true), ignored);
      if (!up->tls) {
        up->connected = true;
        return exchange();
      }
      // The other pod's certificate must name opts.tls.peerName, or else the address forwarded to.
      expect_peer(*up->ss, !opts_.tls.peerName.empty() ? opts_.tls.peerName
                           : !call->hostName.empty()   ? call->hostName
                                                       : call->endpoint.address().to_string());
      up->ss->async_handshake(net::ssl::stream_base::client, [up, exchange, onError](beast::error_code hec) {
        if (hec) return onError(hec, "TLS handshake");
        up->connected = true;
        exchange();
      });
    });
  }

  net::io_context& ioc_;
  const ServerOptions& opts_;
  std::map<std::string, std::vector<std::shared_ptr<Upstream>>> idle_;
  net::steady_timer sweep_;
  bool sweeping_ = false;
  std::map<std::string, std::shared_ptr<Link>> links_;  // per pod address
  std::map<std::string, std::chrono::steady_clock::time_point> httpOnlyUntil_;
  std::function<SslCtx()> clientCtx_;
};

class SessionBase {
 public:
  virtual ~SessionBase() = default;
  // From Server::stop: an idle connection is closed now, a busy one after its response.
  virtual void shutdown() = 0;
  // After the client CA changed (HTTPS): a connection whose client certificate `ctx` no longer
  // trusts is closed as shutdown() closes it, counted in `closed`.
  virtual void recheck_client(SslCtx ctx, std::shared_ptr<std::atomic<int64_t>> closed) = 0;
};

// The answering end of a pod link (pod_link.hpp), after a Session agreed to the Upgrade: each call
// frame read goes to the handler as a request does (never forwarded again), and each answer is
// written by the thread that has it, as a direct HTTP answer is (plain TCP), or by the I/O thread
// (TLS); answers that meet a write in progress go out together after it, in one write.
template <class Stream>
class LinkSession : public SessionBase, public std::enable_shared_from_this<LinkSession<Stream>> {
  static constexpr bool kTls = std::is_same_v<Stream, TlsStream>;
  using std::enable_shared_from_this<LinkSession<Stream>>::shared_from_this;

 public:
  LinkSession(Stream&& s, SslCtx ctx, beast::flat_buffer&& in, std::shared_ptr<Server::Impl> server, std::string peer)
      : ctx_(std::move(ctx)), stream_(std::move(s)), in_(std::move(in)), server_(std::move(server)),
        peer_(std::move(peer)), guard_(stream_.get_executor()) {
    ++server_->open;
    // Answers follow each other while earlier ones are unacknowledged: Nagle would hold them for
    // the other side's delayed ACK.
    beast::error_code ignored;
    beast::get_lowest_layer(stream_).socket().set_option(tcp::no_delay(true), ignored);
  }
  ~LinkSession() override { --server_->open; }

  // On the connection's I/O thread: the 101 goes out, then frames are read.
  void start(std::string greeting) {
    lastRead_ = std::chrono::steady_clock::now();
    {
      std::lock_guard<std::mutex> lock(mu_);
      out_ = std::move(greeting);
      writing_ = true;
    }
    flush();
    arm_guard(server_->opts.idleTimeoutMs);
    if (take_frames()) read();
  }

  void shutdown() override {
    net::post(stream_.get_executor(), [self = shared_from_this()] {
      self->closing_ = true;
      self->close_if_done();
    });
  }

  void recheck_client(SslCtx ctx, std::shared_ptr<std::atomic<int64_t>> closed) override {
    if constexpr (kTls) {
      net::post(stream_.get_executor(), [self = shared_from_this(), ctx = std::move(ctx), closed = std::move(closed)] {
        if (client_still_trusted(self->stream_.native_handle(), ctx->native_handle())) return;
        ++*closed;
        self->closing_ = true;
        self->close_if_done();
      });
    }
  }

  // From any thread, once per call: the answer frame is written now if the socket takes it whole
  // and nothing is being written; else it joins what the I/O thread writes next.
  void answer(uint32_t id, const HttpResponse& res) {
    std::string frame;
    frame.reserve(res.body.size() + 96);
    link::append_answer(frame, id, res);
    --server_->inFlight;
    {
      std::lock_guard<std::mutex> lock(mu_);
      --inflight_;  // under the lock: close_if_done never closes between this and the write
      if (!open_) return;
      if (writing_) {
        out_.append(frame);
        return;
      }
      std::size_t sent = 0;
      if constexpr (!kTls) {
        const int fd = beast::get_lowest_layer(stream_).socket().native_handle();
        while (sent < frame.size()) {
          const auto n = ::send(fd, frame.data() + sent, frame.size() - sent, MSG_DONTWAIT | MSG_NOSIGNAL);
          if (n > 0) sent += static_cast<std::size_t>(n);
          else if (n < 0 && errno == EINTR) continue;
          else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
          else {
            broken_ = true;
            break;
          }
        }
        // Written whole: the I/O thread is not woken, unless a shutdown waits for this answer.
        if (sent == frame.size() && !(closing_ && inflight_ == 0)) return;
      }
      if (!broken_ && sent < frame.size()) out_.assign(frame, sent, std::string::npos);
      writing_ = true;
    }
    net::post(stream_.get_executor(), [self = shared_from_this()] {
      if (self->broken_) return self->do_close();
      self->flush();
    });
  }

 private:
  // On the I/O thread: what was queued is written; when nothing is left, writing_ ends.
  void flush() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!open_) return;
      wbuf_.clear();
      wbuf_.swap(out_);
      if (wbuf_.empty()) writing_ = false;
    }
    if (wbuf_.empty()) return close_if_done();
    net::async_write(stream_, net::buffer(wbuf_), [self = shared_from_this()](beast::error_code ec, std::size_t) {
      if (ec) {
        if (ec != net::error::operation_aborted) fail(ec, "pod link write");
        return self->do_close();
      }
      self->flush();
    });
  }

  void read() {
    stream_.async_read_some(in_.prepare(64 * 1024), [self = shared_from_this()](beast::error_code ec, std::size_t n) {
      if (ec) {
        if (ec != net::error::eof && ec != net::error::operation_aborted && ec != net::error::connection_reset &&
            ec != net::ssl::error::stream_truncated)
          fail(ec, "pod link read");
        return self->do_close();
      }
      self->in_.commit(n);
      self->lastRead_ = std::chrono::steady_clock::now();
      if (self->take_frames()) self->read();
    });
  }

  // Every whole frame read so far goes to the handler; false when the link was closed.
  bool take_frames() {
    for (;;) {
      const auto data = in_.data();
      std::size_t used = 0;
      uint32_t id = 0;
      HttpRequest r;
      const auto got =
          link::read_call(static_cast<const char*>(data.data()), data.size(), server_->max_frame(), used, id, r);
      if (got == link::Read::More) return true;
      if (got == link::Read::Malformed) {
        log::warn("pod link from " + peer_ + ": a malformed frame; the link is closed");
        do_close();
        return false;
      }
      in_.consume(used);
      dispatch(id, std::move(r));
    }
  }

  void dispatch(uint32_t id, HttpRequest r) {
    ++server_->inFlight;
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++inflight_;
    }
    if (server_->stopping || closing_) {
      auto res = plain_error(503, "RETRY", "this pod is stopping; retry");
      res.headers.emplace_back("Retry-After", "1");
      return answer(id, res);
    }
    r.forwarder = nullptr;  // a call that came over a link is served here or refused, never sent on
    // Exactly one answer per call; a call whose answer is dropped (an actor stopped with it in its
    // mailbox) is answered 503 so that the forwarding pod's caller is not left waiting.
    struct Pending {
      std::shared_ptr<LinkSession> self;
      uint32_t id = 0;
      std::atomic<bool> answered{false};
      void answer(const HttpResponse& res) {
        if (!answered.exchange(true)) self->answer(id, res);
      }
      ~Pending() {
        if (answered) return;
        auto r = plain_error(503, "RETRY", "the coordinator dropped this request; retry");
        r.headers.emplace_back("Retry-After", "1");
        answer(r);
      }
    };
    auto pending = std::make_shared<Pending>();
    pending->self = shared_from_this();
    pending->id = id;
    server_->handler(std::move(r), [pending](HttpResponse res) { pending->answer(res); });
  }

  // On the I/O thread: a link being shut down closes once every call on it is answered and written.
  void close_if_done() {
    if (!closing_) return;
    std::lock_guard<std::mutex> lock(mu_);
    if (writing_ || inflight_ > 0) return;  // flush() looks again when the write ends
    close_locked();
  }

  // A link idle (nothing read, nothing awaited) for the idle timeout is closed; the forwarding pod
  // opens a new one when it needs one.
  void arm_guard(int64_t ms) {
    guard_.expires_after(std::chrono::milliseconds(std::max<int64_t>(1, ms)));
    guard_.async_wait([self = shared_from_this()](beast::error_code ec) {
      if (ec) return;
      const auto idle = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - self->lastRead_).count();
      const auto left = self->server_->opts.idleTimeoutMs - idle;
      bool awaited;
      {
        std::lock_guard<std::mutex> lock(self->mu_);
        awaited = self->inflight_ > 0;
      }
      if (awaited || left > 0) return self->arm_guard(std::max<int64_t>(left, 100));
      self->do_close();
    });
  }

  void do_close() {
    std::lock_guard<std::mutex> lock(mu_);  // no answer is being written by another thread meanwhile
    close_locked();
  }
  void close_locked() {
    if (!open_) return;
    open_ = false;
    guard_.cancel();
    beast::error_code ec;
    beast::get_lowest_layer(stream_).socket().shutdown(tcp::socket::shutdown_both, ec);
    beast::get_lowest_layer(stream_).socket().close(ec);
  }

  SslCtx ctx_;
  Stream stream_;
  beast::flat_buffer in_;
  std::shared_ptr<Server::Impl> server_;
  std::string peer_;
  net::steady_timer guard_;
  std::chrono::steady_clock::time_point lastRead_;
  std::atomic<bool> closing_{false};  // shut down (or its client no longer trusted): close once answered
  int64_t inflight_ = 0;              // calls read and not yet answered (under mu_)
  std::atomic<bool> broken_{false};    // a direct write failed: the I/O thread closes the link
  // Shared with the answering threads.
  std::mutex mu_;
  bool open_ = true;
  bool writing_ = false;  // the I/O thread owns the socket's writes (out_ joins them)
  std::string out_;       // answers waiting for the write in progress
  std::string wbuf_;      // the write in progress (I/O thread)
};

// One connection: plain (Stream = beast::tcp_stream) or HTTPS (TlsStream, its handshake first,
// within the header timeout).
template <class Stream>
class Session : public SessionBase, public std::enable_shared_from_this<Session<Stream>> {
  static constexpr bool kTls = std::is_same_v<Stream, TlsStream>;
  using std::enable_shared_from_this<Session<Stream>>::shared_from_this;

 public:
  Session(tcp::socket&& socket, std::shared_ptr<Server::Impl> server, Forwarder* forwarder)
      : stream_(std::move(socket)), ex_(stream_.get_executor()), server_(std::move(server)), forwarder_(forwarder) {
    ++server_->open;
  }
  Session(tcp::socket&& socket, SslCtx ctx, std::shared_ptr<Server::Impl> server, Forwarder* forwarder)
      : ctx_(std::move(ctx)), stream_(std::move(socket), *ctx_), ex_(stream_.get_executor()), server_(std::move(server)),
        forwarder_(forwarder) {
    ++server_->open;
  }
  ~Session() override { --server_->open; }

  void run() {
    net::dispatch(stream_.get_executor(), [self = shared_from_this()] {
      if constexpr (kTls) self->do_handshake();
      else self->do_read();
    });
  }

  void shutdown() override {
    net::post(ex_, [self = shared_from_this()] {
      if (self->moved_) return;  // it is a pod link now, shut down as one
      bool awaiting;
      {
        std::lock_guard<std::mutex> lock(self->mu_);
        awaiting = self->awaiting_;
      }
      if (!self->busy_ && !awaiting) self->do_close();  // an awaited answer closes it when written
    });
  }

  void recheck_client(SslCtx ctx, std::shared_ptr<std::atomic<int64_t>> closed) override {
    if constexpr (kTls) {
      net::post(ex_, [self = shared_from_this(), ctx = std::move(ctx), closed = std::move(closed)] {
        if (self->moved_) return;
        bool awaiting, open;
        {
          std::lock_guard<std::mutex> lock(self->mu_);
          awaiting = self->awaiting_;
          open = self->open_;
        }
        if (!self->handshaken_ || !open || client_still_trusted(self->stream_.native_handle(), ctx->native_handle()))
          return;
        ++*closed;
        self->untrusted_ = true;  // no further request on it
        if (!self->busy_ && !awaiting) self->do_close();
      });
    }
  }

 private:
  beast::tcp_stream& lowest() { return beast::get_lowest_layer(stream_); }

  std::string peer() {
    beast::error_code ec;
    const auto ep = lowest().socket().remote_endpoint(ec);
    return ec ? std::string("a client") : ep.address().to_string() + ":" + std::to_string(ep.port());
  }

  // A client that never completes its handshake costs the header timeout, as a slow HTTP one.
  void do_handshake() {
    lowest().expires_after(std::chrono::milliseconds(server_->opts.headerTimeoutMs));
    stream_.async_handshake(net::ssl::stream_base::server, [self = shared_from_this()](beast::error_code ec) {
      if (!ec) {
        self->handshaken_ = true;
        return self->do_read();
      }
      std::string why = ec == beast::error::timeout ? "no handshake within the header timeout" : ec.message();
      if (why.find("http request") != std::string::npos) why += " (a plain-HTTP client on the HTTPS port?)";
      if (ec != net::error::eof && ec != net::error::connection_reset)
        self->server_->tls_problem(self->peer(), why);
      self->do_close();
    });
  }

  // Waiting for a request's first byte, a connection may idle (a new one for the header timeout,
  // a kept-alive one for the idle timeout); once a request has started arriving, all of it must
  // arrive within the header timeout, whatever request number it is.
  void do_read() {
    if (server_->stopping || untrusted_) return do_close();
    parser_.emplace();
    parser_->body_limit(server_->opts.bodyLimit);
    parser_->header_limit(64 * 1024);
    if (buffer_.size() > 0) return read_request();  // pipelined: it has started already
    lowest().expires_after(std::chrono::milliseconds(first_ ? server_->opts.headerTimeoutMs : server_->opts.idleTimeoutMs));
    first_ = false;
    stream_.async_read_some(buffer_.prepare(4096), [self = shared_from_this()](beast::error_code ec, std::size_t n) {
      if (ec) {
        if (ec == beast::error::timeout) return self->do_close();
        fail(ec, "read");
        return self->do_close();
      }
      self->buffer_.commit(n);
      self->read_request();
    });
  }

  void read_request() {
    first_ = false;
    reading_ = true;
    bool awaiting;
    {
      std::lock_guard<std::mutex> lock(mu_);
      awaiting = awaiting_;
    }
    // Pipelined behind a direct answer: no Beast timer (see read_next); the guard bounds the read
    // by the idle timeout since that answer instead.
    untimedRead_ = awaiting;
    if (awaiting) lowest().expires_never();
    else lowest().expires_after(std::chrono::milliseconds(server_->opts.headerTimeoutMs));
    bhttp::async_read(stream_, buffer_, *parser_, beast::bind_front_handler(&Session::on_read, shared_from_this()));
  }

  void on_read(beast::error_code ec, std::size_t) {
    if (ec) {
      // The read behind a directly answered request failed (the client closed, or pipelined a bad
      // request): the answer still goes out, then the connection closes.
      std::lock_guard<std::mutex> lock(mu_);
      if (awaiting_) {
        closeAfter_ = true;
        return;
      }
    }
    if (ec == bhttp::error::body_limit) {
      return send_now(plain_error(413, "PAYLOAD_TOO_LARGE",
                                  "request body is over the limit of " + std::to_string(server_->opts.bodyLimit) + " bytes"),
                      false);
    }
    if (ec == bhttp::error::header_limit) return send_now(plain_error(431, "HEADERS_TOO_LARGE", "request headers too large"), false);
    if (ec == beast::error::timeout) return do_close();
    if (ec == bhttp::error::end_of_stream || ec) {
      if (ec && ec != bhttp::error::end_of_stream && ec != net::error::eof && ec != net::error::operation_aborted &&
          ec != net::error::connection_reset && buffer_.size() > 0)
        return send_now(plain_error(400, "BAD_REQUEST", "malformed HTTP request: " + ec.message()), false);
      fail(ec, "read");
      return do_close();
    }
    auto req = parser_->release();
    if (req.method() == bhttp::verb::get && req.target() == link::kTarget && server_->opts.podLink &&
        beast::iequals(req[bhttp::field::upgrade], link::kProtocol)) {
      std::lock_guard<std::mutex> lock(mu_);
      if (!awaiting_ && !server_->stopping && !untrusted_) return become_link();
    }
    HttpRequest r;
    r.method = std::string(req.method_string());
    r.target = std::string(req.target());
    r.contentType = std::string(req[bhttp::field::content_type]);
    r.authorization = std::string(req[bhttp::field::authorization]);
    r.forwardedBy = std::string(req[kForwardedByHeader]);
    r.forwarder = forwarder_;
    r.body = std::move(req.body());
    Request next{std::move(r), req.keep_alive(), req.version()};
    {
      std::lock_guard<std::mutex> lock(mu_);
      // A request pipelined behind one still being answered waits for that answer (answers go
      // out in order); the next read starts when it is dispatched.
      if (awaiting_) {
        stash_.emplace(std::move(next));
        return;
      }
    }
    dispatch(std::move(next));
  }

  struct Request {
    HttpRequest r;
    bool keepAlive;
    unsigned version;
  };

  // Another pod asked for a pod link (under mu_, nothing awaited): the connection, with what has
  // been read past the request, becomes a LinkSession; this session ends.
  void become_link() {
    lowest().expires_never();
    open_ = false;  // the guard, if armed, leaves the moved connection alone
    moved_ = true;
    if (guard_) guard_->cancel();
    const std::string who = peer();
    auto l = std::make_shared<LinkSession<Stream>>(std::move(stream_), std::move(ctx_), std::move(buffer_), server_, who);
    server_->track(l);
    l->start(std::string("HTTP/1.1 101 Switching Protocols\r\nUpgrade: ") + link::kProtocol +
             "\r\nConnection: Upgrade\r\n\r\n");
  }

  // A POST on a kept-alive HTTP/1.1 connection without TLS (a heartbeat) is answered directly by
  // the thread that has the answer: the next request's read is started first, and the answer is
  // written to the socket from that thread, without waking this connection's I/O thread (a
  // hand-over measured at about a tenth of a heartbeat's CPU). Everything else is answered on the
  // I/O thread, as before.
  bool direct(const Request& q) const {
    return !kTls && q.keepAlive && q.version == 11 && q.r.method == "POST" && !server_->stopping;
  }

  void dispatch(Request q) {
    reading_ = false;
    untimedRead_ = false;
    keepAlive_ = q.keepAlive;
    version_ = q.version;
    ++server_->inFlight;
    lowest().expires_never();  // waiting for the coordinator, not for the client
    const bool fast = direct(q);
    if (fast) {
      {
        std::lock_guard<std::mutex> lock(mu_);
        awaiting_ = true;
      }
      arm_guard(server_->opts.idleTimeoutMs);
      read_next();
    } else {
      busy_ = true;
    }
    // Exactly one answer per request: the first call wins, and if every copy of the callback is
    // dropped unanswered (an actor stopped with the request in its mailbox) the client still gets
    // a 503 instead of a hang.
    struct Pending {
      std::shared_ptr<Session> self;
      bool fast = false;
      bool keepAlive = false;
      std::atomic<bool> answered{false};
      void answer(HttpResponse res) {
        if (answered.exchange(true)) return;
        if (fast) return self->answer_directly(std::move(res));
        net::post(self->stream_.get_executor(), [s = self, res = std::move(res), k = keepAlive]() mutable {
          --s->server_->inFlight;
          s->send_now(std::move(res), k);
        });
      }
      ~Pending() {
        if (!answered) {
          auto r = plain_error(503, "RETRY", "the coordinator dropped this request; retry");
          r.headers.emplace_back("Retry-After", "1");
          answer(std::move(r));
        }
      }
    };
    auto pending = std::make_shared<Pending>();
    pending->self = shared_from_this();
    pending->fast = fast;
    pending->keepAlive = q.keepAlive;
    server_->handler(std::move(q.r), [pending](HttpResponse res) { pending->answer(std::move(res)); });
  }

  // The read of the request after a directly answered one: no Beast timer while an answer is
  // awaited (its expiry would close the socket under the answering thread); the guard timer keeps
  // the idle timeout instead.
  void read_next() {
    parser_.emplace();
    parser_->body_limit(server_->opts.bodyLimit);
    parser_->header_limit(64 * 1024);
    if (buffer_.size() > 0) return read_request();  // pipelined: it has started already
    stream_.async_read_some(buffer_.prepare(4096), [self = shared_from_this()](beast::error_code ec, std::size_t n) {
      if (ec) {
        {
          // A client that half-closes after its request still gets the answer awaited.
          std::lock_guard<std::mutex> lock(self->mu_);
          if (self->awaiting_) {
            self->closeAfter_ = true;
            return;
          }
        }
        if (ec != net::error::operation_aborted) fail(ec, "read");
        return self->do_close();
      }
      self->buffer_.commit(n);
      self->read_request();
    });
  }

  // From any thread, once per directly answered request: the answer is written now if the socket
  // takes it whole (the usual case); the rest, if any, by the I/O thread.
  void answer_directly(HttpResponse res) {
    bool closing = server_->stopping || untrusted_;
    std::string out;
    out.reserve(res.body.size() + 160);
    const auto status = static_cast<bhttp::status>(res.status);
    const auto reason = bhttp::obsolete_reason(status);
    out.append("HTTP/1.1 ").append(std::to_string(res.status)).append(" ").append(reason.data(), reason.size());
    out.append("\r\nServer: rsc-coordinator\r\nContent-Type: ").append(res.contentType).append("\r\n");
    for (const auto& [k, v] : res.headers) out.append(k).append(": ").append(v).append("\r\n");
    if (closing) out.append("Connection: close\r\n");
    out.append("Content-Length: ").append(std::to_string(res.body.size())).append("\r\n\r\n").append(res.body);
    std::size_t sent = 0;
    bool broken = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!open_) {
        awaiting_ = false;
        --server_->inFlight;
        return;
      }
      const int fd = lowest().socket().native_handle();
      while (sent < out.size()) {
        const auto n = ::send(fd, out.data() + sent, out.size() - sent, MSG_DONTWAIT | MSG_NOSIGNAL);
        if (n > 0) sent += static_cast<std::size_t>(n);
        else if (n < 0 && errno == EINTR) continue;
        else {
          broken = !(n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK));
          break;
        }
      }
      closing = closing || closeAfter_;
      if (sent == out.size()) {
        awaiting_ = false;
        answeredAt_ = now_ms();
        --server_->inFlight;
        if (!stash_ && !closing) return;
      }
    }
    auto self = shared_from_this();
    if (sent == out.size() || broken) {
      if (broken) {
        std::lock_guard<std::mutex> lock(mu_);
        awaiting_ = false;
        --server_->inFlight;
      }
      return net::post(stream_.get_executor(), [self, broken, closing] {
        if (broken || closing) return self->do_close();
        self->resume();
      });
    }
    auto rest = std::make_shared<std::string>(out.substr(sent));
    net::post(stream_.get_executor(), [self, rest, closing] {
      net::async_write(self->lowest().socket(), net::buffer(*rest), [self, rest, closing](beast::error_code ec, std::size_t) {
        bool close = closing;
        {
          std::lock_guard<std::mutex> lock(self->mu_);
          self->awaiting_ = false;
          self->answeredAt_ = now_ms();
          close = close || self->closeAfter_;
        }
        --self->server_->inFlight;
        if (ec) fail(ec, "write");
        if (ec || close) return self->do_close();
        self->resume();
      });
    });
  }

  // On the I/O thread, after a direct answer: a request that waited behind it is dispatched.
  void resume() {
    std::optional<Request> next;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (awaiting_ || !stash_) return;
      next = std::move(stash_);
      stash_.reset();
    }
    dispatch(std::move(*next));
  }

  static int64_t now_ms() {
    return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch()).count();
  }

  // The idle timeout of a connection answered directly (its I/O thread is not told when the
  // answer went out): the guard looks when the timeout could have passed, and closes the
  // connection only when no answer is awaited, no request is being read or answered the usual
  // way, and the last answer is older than the timeout.
  void arm_guard(int64_t ms) {
    if (guardArmed_) return;
    guardArmed_ = true;
    if (!guard_) guard_.emplace(stream_.get_executor());
    guard_->expires_after(std::chrono::milliseconds(std::max<int64_t>(1, ms)));
    guard_->async_wait([self = shared_from_this()](beast::error_code ec) {
      self->guardArmed_ = false;
      if (ec) return;
      if (self->busy_ || (self->reading_ && !self->untimedRead_)) return;  // Beast's timers apply then
      int64_t since = 0;
      {
        std::lock_guard<std::mutex> lock(self->mu_);
        if (!self->open_) return;
        if (self->awaiting_) return self->arm_guard(self->server_->opts.idleTimeoutMs);
        since = self->answeredAt_;
      }
      const auto left = since + self->server_->opts.idleTimeoutMs - now_ms();
      if (left > 0) return self->arm_guard(left);
      self->do_close();
    });
  }

  void send_now(HttpResponse res, bool keepAlive) {
    busy_ = true;
    auto msg = std::make_shared<bhttp::response<bhttp::string_body>>(static_cast<bhttp::status>(res.status), version_ ? version_ : 11);
    msg->set(bhttp::field::server, "rsc-coordinator");
    msg->set(bhttp::field::content_type, res.contentType);
    for (const auto& [k, v] : res.headers) msg->set(k, v);
    msg->keep_alive(keepAlive && !server_->stopping && !untrusted_);
    msg->body() = std::move(res.body);
    msg->prepare_payload();
    lowest().expires_after(std::chrono::milliseconds(server_->opts.headerTimeoutMs));
    bhttp::async_write(stream_, *msg,
                       [self = shared_from_this(), msg](beast::error_code ec, std::size_t) { self->on_write(ec, msg->need_eof()); });
  }

  void on_write(beast::error_code ec, bool close) {
    busy_ = false;
    if (ec) {
      fail(ec, "write");
      return do_close();
    }
    if (close) return do_linger();
    do_read();
  }

  // Closing with unread input (a refused body) would reset the connection and could destroy the
  // answer before the client reads it: stop sending, drain briefly, then close.
  void do_linger() {
    if constexpr (kTls) return do_close();  // no half-close under TLS: the answer was written whole
    beast::error_code ec;
    lowest().socket().shutdown(tcp::socket::shutdown_send, ec);
    lowest().expires_after(std::chrono::milliseconds(1000));
    drain_.resize(16 * 1024);
    stream_.async_read_some(net::buffer(drain_), [self = shared_from_this()](beast::error_code e, std::size_t) {
      if (e) return self->do_close();
      self->do_linger_more();
    });
  }
  void do_linger_more() {
    stream_.async_read_some(net::buffer(drain_), [self = shared_from_this()](beast::error_code e, std::size_t) {
      if (e) return self->do_close();
      self->do_linger_more();
    });
  }

  void do_close() {
    std::lock_guard<std::mutex> lock(mu_);  // no direct answer is being written meanwhile
    open_ = false;
    if (guard_) guard_->cancel();
    beast::error_code ec;
    lowest().socket().shutdown(tcp::socket::shutdown_send, ec);
    lowest().socket().close(ec);
  }

  SslCtx ctx_;  // HTTPS: the context this connection was made with (a reload makes new ones)
  Stream stream_;
  net::any_io_executor ex_;  // the connection's I/O thread (kept: the stream moves to a pod link)
  bool moved_ = false;       // it did (I/O thread)
  beast::flat_buffer buffer_;
  std::vector<char> drain_;
  std::optional<bhttp::request_parser<bhttp::string_body>> parser_;
  std::shared_ptr<Server::Impl> server_;
  Forwarder* forwarder_;
  bool keepAlive_ = false;
  bool busy_ = false;  // a request answered the usual way is in progress
  bool handshaken_ = false;             // HTTPS: the handshake completed (a client certificate, if any, verified)
  std::atomic<bool> untrusted_{false};  // its client certificate is no longer trusted: close after this answer
  bool first_ = true;
  bool reading_ = false;  // a request has started arriving
  bool untimedRead_ = false;  // ... while an answer was awaited (no Beast timer on it)
  // Shared with the thread answering directly (the rest are the I/O thread's alone).
  std::mutex mu_;
  bool open_ = true;
  bool awaiting_ = false;          // a directly answered request waits for its answer
  std::optional<Request> stash_;   // a request read meanwhile
  bool closeAfter_ = false;        // the read meanwhile failed: close once the answer is out
  int64_t answeredAt_ = 0;         // when the last direct answer went out (steady ms)
  std::optional<net::steady_timer> guard_;
  bool guardArmed_ = false;
  unsigned version_ = 11;
};

void Server::Impl::recheck_clients() {
  std::vector<std::shared_ptr<SessionBase>> live;
  {
    std::lock_guard<std::mutex> lock(mu);
    for (auto& w : sessions)
      if (auto s = w.lock()) live.push_back(std::move(s));
  }
  if (live.empty()) return;
  // Told once every connection has been looked at (the last holder of the count says it).
  struct Tally : std::atomic<int64_t> {
    Tally() : std::atomic<int64_t>(0) {}
    ~Tally() {
      if (load() > 0)
        log::warn("https: the client CA changed: closed " + std::to_string(load()) +
                  " open connection(s) whose client certificate it no longer trusts");
    }
  };
  std::shared_ptr<std::atomic<int64_t>> closed = std::make_shared<Tally>();
  const SslCtx ctx = server_ctx();
  for (auto& s : live) s->recheck_client(ctx, closed);
}

void Server::Impl::do_accept() {
  // Each io_context is run by exactly one thread, so a connection's handlers never run
  // concurrently and need no strand (a strand costs a lock and a queue hop per handler).
  const std::size_t index = nextIoc++ % iocs.size();
  auto& target = *iocs[index];
  acceptor->async_accept(target, [self = shared_from_this(), index](beast::error_code ec, tcp::socket socket) {
    if (self->stopping) return;
    if (ec) {
      if (ec == net::error::operation_aborted) return;
      // Out of file descriptors (or another transient failure): pause before trying again, or the
      // loop would spin on the same error.
      self->accept_problem(ec.message() + "; pausing accepts for 100 ms");
      self->acceptPause->expires_after(std::chrono::milliseconds(100));
      self->acceptPause->async_wait([self](beast::error_code e) {
        if (!e && !self->stopping) self->do_accept();
      });
      return;
    }
    if (self->open >= self->maxConnections) {
      beast::error_code ignored;
      socket.close(ignored);
      self->accept_problem("over the connection limit (" + std::to_string(self->maxConnections) +
                           "); new connections are closed");
    } else {
      std::shared_ptr<SessionBase> s;
      if (self->opts.tls.enabled()) {
        auto tls = std::make_shared<Session<TlsStream>>(std::move(socket), self->server_ctx(), self, self->forwarders[index].get());
        tls->run();
        s = tls;
      } else {
        auto plain = std::make_shared<Session<beast::tcp_stream>>(std::move(socket), self, self->forwarders[index].get());
        plain->run();
        s = plain;
      }
      self->track(s);
    }
    self->do_accept();
  });
}

Server::Server(ServerOptions opts, Handler handler) : impl_(std::make_shared<Impl>()) {
  impl_->opts = std::move(opts);
  impl_->handler = std::move(handler);
  for (int i = 0; i < std::max(1, impl_->opts.threads); ++i) {
    impl_->iocs.push_back(std::make_unique<net::io_context>(1));
    std::weak_ptr<Impl> weak = impl_;
    impl_->forwarders.push_back(std::make_unique<PodForwarder>(*impl_->iocs.back(), impl_->opts, [weak]() -> SslCtx {
      auto impl = weak.lock();
      return impl && impl->opts.tls.enabled() ? impl->client_ctx() : nullptr;
    }));
  }
}

Server::~Server() { stop(0); }

void Server::start() {
  // As many file descriptors as the hard limit allows, and a connection limit well below it.
  rlimit lim{};
  if (getrlimit(RLIMIT_NOFILE, &lim) == 0) {
    if (lim.rlim_cur < lim.rlim_max) {
      rlimit raised = lim;
      raised.rlim_cur = lim.rlim_max;
      if (setrlimit(RLIMIT_NOFILE, &raised) == 0) lim = raised;
    }
  }
  const int64_t fds = lim.rlim_cur == RLIM_INFINITY ? 1 << 20 : static_cast<int64_t>(lim.rlim_cur);
  impl_->maxConnections = impl_->opts.maxConnections > 0 ? impl_->opts.maxConnections : std::max<int64_t>(16, fds * 3 / 4);
  if (impl_->opts.tls.enabled()) {
    if (auto e = impl_->reload_tls(); !e.empty()) throw std::runtime_error("https: " + e);
  }
  beast::error_code ec;
  auto address = net::ip::make_address(impl_->opts.host, ec);
  if (ec) throw std::runtime_error("invalid listen address '" + impl_->opts.host + "': " + ec.message());
  tcp::endpoint ep{address, impl_->opts.port};
  impl_->acceptor = std::make_unique<tcp::acceptor>(net::make_strand(impl_->ioc()));
  impl_->acceptor->open(ep.protocol(), ec);
  if (!ec) impl_->acceptor->set_option(net::socket_base::reuse_address(true), ec);
  if (!ec) impl_->acceptor->bind(ep, ec);
  if (!ec) impl_->acceptor->listen(net::socket_base::max_listen_connections, ec);
  if (ec)
    throw std::runtime_error("cannot listen on " + impl_->opts.host + ":" + std::to_string(impl_->opts.port) + ": " +
                             ec.message());
  impl_->boundPort = impl_->acceptor->local_endpoint().port();
  impl_->acceptPause = std::make_unique<net::steady_timer>(impl_->acceptor->get_executor());
  log::info("http: at most " + std::to_string(impl_->maxConnections) + " connections (file descriptor limit " +
            std::to_string(fds) + ")");
  impl_->do_accept();
  if (impl_->opts.tls.enabled()) {
    impl_->tlsWatch = std::make_unique<net::steady_timer>(impl_->acceptor->get_executor());
    impl_->watch_tls();
  }
  for (auto& ioc : impl_->iocs) {
    auto* c = ioc.get();
    impl_->threads.emplace_back([impl = impl_, c] {
      auto guard = net::make_work_guard(*c);  // a context with no connection yet keeps running
      c->run();
    });
  }
}

uint16_t Server::port() const { return impl_->boundPort; }
std::string Server::reload_tls() { return impl_->opts.tls.enabled() ? impl_->reload_tls() : "HTTPS is not configured"; }
int64_t Server::tls_reloads() const { return impl_->tlsReloads; }
int64_t Server::connections_open() const { return impl_->open; }

void Server::stop(int64_t graceMs) {
  if (impl_->threads.empty()) return;
  if (!impl_->stopping.exchange(true)) {
    net::post(impl_->ioc(), [impl = impl_] {
      beast::error_code ec;
      if (impl->acceptor) impl->acceptor->close(ec);
      if (impl->acceptPause) impl->acceptPause->cancel();
      if (impl->tlsWatch) impl->tlsWatch->cancel();
    });
    std::vector<std::shared_ptr<SessionBase>> live;
    {
      std::lock_guard<std::mutex> lock(impl_->mu);
      for (auto& w : impl_->sessions)
        if (auto s = w.lock()) live.push_back(std::move(s));
    }
    for (auto& s : live) s->shutdown();
    live.clear();
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(graceMs);
    while ((impl_->inFlight > 0 || impl_->open > 0) && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  for (auto& ioc : impl_->iocs) ioc->stop();
  for (auto& t : impl_->threads)
    if (t.joinable()) t.join();
  impl_->threads.clear();
  // Handlers still queued hold the Impl (and sessions): close the listener and run them to
  // completion so the port and the memory are released.
  beast::error_code ec;
  if (impl_->acceptor) impl_->acceptor->close(ec);
  for (auto& ioc : impl_->iocs) {
    ioc->restart();
    ioc->poll();
  }
}

}  // namespace rsc::http
