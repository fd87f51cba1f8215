// Listener and session after Beast's advanced server example: do_x/on_x pairs, one fail(),
// expires_after timeouts, a body limit; one io_context per thread instead of a strand per
// connection.
#include "http/server.hpp"

#include <boost/asio/dispatch.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include <sys/resource.h>

#include <atomic>
#include <cstdlib>
#include <map>
#include <chrono>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "log/log.hpp"

namespace rsc::http {

namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;

class Session;
class PodForwarder;

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
  std::set<std::weak_ptr<Session>, std::owner_less<std::weak_ptr<Session>>> sessions;
  uint16_t boundPort = 0;
  int64_t maxConnections = 0;
  std::unique_ptr<net::steady_timer> acceptPause;  // after an accept error: a pause, not a spin
  // Log lines about refused or failed accepts, at most one per interval with a count.
  std::chrono::steady_clock::time_point lastAcceptLog{};
  int64_t acceptProblems = 0;

  void do_accept();
  void accept_problem(const std::string& what);
};

void Server::Impl::accept_problem(const std::string& what) {
  ++acceptProblems;
  const auto now = std::chrono::steady_clock::now();
  if (now - lastAcceptLog < std::chrono::seconds(5)) return;
  lastAcceptLog = now;
  log::warn("http accept: " + what + " (" + std::to_string(acceptProblems) + " such since the last line)");
  acceptProblems = 0;
}

namespace {
void fail(beast::error_code ec, const char* what) {
  if (ec == net::error::operation_aborted || ec == beast::error::timeout || ec == bhttp::error::end_of_stream ||
      ec == net::error::eof || ec == net::error::connection_reset || ec == net::error::bad_descriptor)
    return;  // normal endings of a connection
  log::warn(std::string("http ") + what + ": " + ec.message());
}
}  // namespace

// Calls forwarded to the pod that serves their group, over kept-alive connections pooled per
// pod address. Runs on one io_context's thread: no lock. A pooled connection that turns out to
// be closed (the other pod restarted, or closed it idle) is given up and the call sent once more
// on a new one; any other failure goes to the caller, which answers RETRY. The pool keeps at most
// kMaxIdle connections per pod and closes one idle for kIdleClose: under load they are reused at
// once, and a burst (a store stall holds many calls at once) leaves no descriptors behind.
class PodForwarder : public Forwarder {
 public:
  static constexpr std::size_t kMaxIdle = 8;
  static constexpr auto kIdleClose = std::chrono::milliseconds(1000);

  PodForwarder(net::io_context& ioc, const ServerOptions& opts) : ioc_(ioc), opts_(opts), sweep_(ioc) {}

  void forward(const std::string& address, const HttpRequest& req, Respond respond,
               std::function<void(std::string)> failed) override {
    auto call = std::make_shared<Call>();
    call->address = address;
    call->respond = std::move(respond);
    call->failed = std::move(failed);
    const auto colon = address.rfind(':');
    beast::error_code ec;
    const auto ip = net::ip::make_address(colon == std::string::npos ? address : address.substr(0, colon), ec);
    if (ec || colon == std::string::npos) return call->failed("has no usable address ('" + address + "')");
    call->endpoint = tcp::endpoint(ip, static_cast<unsigned short>(std::atoi(address.c_str() + colon + 1)));
    auto& r = call->req;
    r.method_string(req.method);
    r.target(req.target);
    r.version(11);
    r.set(bhttp::field::host, address);
    if (!req.contentType.empty()) r.set(bhttp::field::content_type, req.contentType);
    if (!req.authorization.empty()) r.set(bhttp::field::authorization, req.authorization);
    r.set(kForwardedByHeader, opts_.podId);
    r.keep_alive(true);
    r.body() = req.body;
    r.prepare_payload();
    send(call, take(address));
  }

 private:
  struct Upstream {
    explicit Upstream(net::io_context& ioc) : stream(ioc) {}
    beast::tcp_stream stream;
    beast::flat_buffer buffer;
    bool connected = false;
    std::chrono::steady_clock::time_point idleSince;
  };
  struct Call {
    std::string address;
    tcp::endpoint endpoint;
    bhttp::request<bhttp::string_body> req;
    bhttp::response<bhttp::string_body> res;
    Respond respond;
    std::function<void(std::string)> failed;
  };

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
    return std::make_shared<Upstream>(ioc_);
  }

  void put_back(const std::string& address, std::shared_ptr<Upstream> up) {
    auto& idle = idle_[address];
    if (idle.size() >= kMaxIdle) return close(*up);
    up->idleSince = std::chrono::steady_clock::now();
    idle.push_back(std::move(up));
    if (!sweeping_) sweep_later();
  }

  static void close(Upstream& up) {
    beast::error_code ignored;
    up.stream.socket().close(ignored);
  }

  // Every half second while anything is pooled: connections idle for kIdleClose are closed.
  void sweep_later() {
    sweeping_ = true;
    sweep_.expires_after(std::chrono::milliseconds(500));
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
      if (any) sweep_later();
    });
  }

  void send(const std::shared_ptr<Call>& call, std::shared_ptr<Upstream> up) {
    const bool reused = up->connected;
    auto onError = [this, call, up, reused](beast::error_code ec, const char* what) {
      beast::error_code ignored;
      up->stream.socket().close(ignored);
      if (reused && ec != beast::error::timeout) return send(call, std::make_shared<Upstream>(ioc_));
      call->failed(ec == beast::error::timeout ? "did not answer within " + std::to_string(opts_.forwardTimeoutMs) + "ms"
                                               : std::string("could not be reached (") + what + ": " + ec.message() + ")");
    };
    auto exchange = [this, call, up, onError] {
      up->stream.expires_after(std::chrono::milliseconds(opts_.forwardTimeoutMs));
      bhttp::async_write(up->stream, call->req, [this, call, up, onError](beast::error_code ec, std::size_t) {
        if (ec) return onError(ec, "write");
        call->res = {};
        bhttp::async_read(up->stream, up->buffer, call->res, [this, call, up, onError](beast::error_code rec, std::size_t) {
          if (rec) return onError(rec, "read");
          up->stream.expires_never();
          HttpResponse out;
          out.status = static_cast<int>(call->res.result_int());
          out.contentType = std::string(call->res[bhttp::field::content_type]);
          for (auto field : {bhttp::field::retry_after, bhttp::field::www_authenticate, bhttp::field::allow}) {
            auto it = call->res.find(field);
            if (it != call->res.end()) out.headers.emplace_back(std::string(it->name_string()), std::string(it->value()));
          }
          out.body = std::move(call->res.body());
          if (call->res.keep_alive())
            put_back(call->address, up);
          else
            close(*up);
          call->respond(std::move(out));
        });
      });
    };
    if (up->connected) return exchange();
    up->stream.expires_after(std::chrono::milliseconds(opts_.forwardTimeoutMs));
    up->stream.async_connect(call->endpoint, [up, exchange, onError](beast::error_code ec) {
      if (ec) return onError(ec, "connect");
      up->connected = true;
      beast::error_code ignored;
      up->stream.socket().set_option(tcp::no_delay(true), ignored);
      exchange();
    });
  }

  net::io_context& ioc_;
  const ServerOptions& opts_;
  std::map<std::string, std::vector<std::shared_ptr<Upstream>>> idle_;
  net::steady_timer sweep_;
  bool sweeping_ = false;
};

class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(tcp::socket&& socket, std::shared_ptr<Server::Impl> server, Forwarder* forwarder)
      : stream_(std::move(socket)), server_(std::move(server)), forwarder_(forwarder) {
    ++server_->open;
  }
  ~Session() { --server_->open; }

  void run() { net::dispatch(stream_.get_executor(), beast::bind_front_handler(&Session::do_read, shared_from_this())); }

  // From Server::stop: an idle connection is closed now, a busy one after its response.
  void shutdown() {
    net::post(stream_.get_executor(), [self = shared_from_this()] {
      if (!self->busy_) self->do_close();
    });
  }

 private:
  // Waiting for a request's first byte, a connection may idle (a new one for the header timeout,
  // a kept-alive one for the idle timeout); once a request has started arriving, all of it must
  // arrive within the header timeout, whatever request number it is.
  void do_read() {
    if (server_->stopping) return do_close();
    parser_.emplace();
    parser_->body_limit(server_->opts.bodyLimit);
    parser_->header_limit(64 * 1024);
    if (buffer_.size() > 0) return read_request();  // pipelined: it has started already
    stream_.expires_after(std::chrono::milliseconds(first_ ? server_->opts.headerTimeoutMs : server_->opts.idleTimeoutMs));
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
    stream_.expires_after(std::chrono::milliseconds(server_->opts.headerTimeoutMs));
    bhttp::async_read(stream_, buffer_, *parser_, beast::bind_front_handler(&Session::on_read, shared_from_this()));
  }

  void on_read(beast::error_code ec, std::size_t) {
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
    keepAlive_ = req.keep_alive();
    version_ = req.version();
    HttpRequest r;
    r.method = std::string(req.method_string());
    r.target = std::string(req.target());
    r.contentType = std::string(req[bhttp::field::content_type]);
    r.authorization = std::string(req[bhttp::field::authorization]);
    r.forwardedBy = std::string(req[kForwardedByHeader]);
    r.forwarder = forwarder_;
    r.body = std::move(req.body());
    busy_ = true;
    ++server_->inFlight;
    stream_.expires_never();  // waiting for the coordinator, not for the client
    // Exactly one answer per request: the first call wins, and if every copy of the callback is
    // dropped unanswered (an actor stopped with the request in its mailbox) the client still gets
    // a 503 instead of a hang.
    struct Pending {
      std::shared_ptr<Session> self;
      std::atomic<bool> answered{false};
      void answer(HttpResponse res) {
        if (answered.exchange(true)) return;
        net::post(self->stream_.get_executor(), [s = self, res = std::move(res)]() mutable {
          --s->server_->inFlight;
          s->send_now(std::move(res), s->keepAlive_);
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
    server_->handler(std::move(r), [pending](HttpResponse res) { pending->answer(std::move(res)); });
  }

  void send_now(HttpResponse res, bool keepAlive) {
    busy_ = true;
    auto msg = std::make_shared<bhttp::response<bhttp::string_body>>(static_cast<bhttp::status>(res.status), version_ ? version_ : 11);
    msg->set(bhttp::field::server, "rsc-coordinator");
    msg->set(bhttp::field::content_type, res.contentType);
    for (const auto& [k, v] : res.headers) msg->set(k, v);
    msg->keep_alive(keepAlive && !server_->stopping);
    msg->body() = std::move(res.body);
    msg->prepare_payload();
    stream_.expires_after(std::chrono::milliseconds(server_->opts.headerTimeoutMs));
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
    beast::error_code ec;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ec);
    stream_.expires_after(std::chrono::milliseconds(1000));
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
    beast::error_code ec;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ec);
    stream_.socket().close(ec);
  }

  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
  std::vector<char> drain_;
  std::optional<bhttp::request_parser<bhttp::string_body>> parser_;
  std::shared_ptr<Server::Impl> server_;
  Forwarder* forwarder_;
  bool keepAlive_ = false;
  bool busy_ = false;
  bool first_ = true;
  unsigned version_ = 11;
};

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
      auto s = std::make_shared<Session>(std::move(socket), self, self->forwarders[index].get());
      {
        std::lock_guard<std::mutex> lock(self->mu);
        for (auto it = self->sessions.begin(); it != self->sessions.end();)
          it = it->expired() ? self->sessions.erase(it) : std::next(it);
        self->sessions.insert(s);
      }
      s->run();
    }
    self->do_accept();
  });
}

Server::Server(ServerOptions opts, Handler handler) : impl_(std::make_shared<Impl>()) {
  impl_->opts = std::move(opts);
  impl_->handler = std::move(handler);
  for (int i = 0; i < std::max(1, impl_->opts.threads); ++i) {
    impl_->iocs.push_back(std::make_unique<net::io_context>(1));
    impl_->forwarders.push_back(std::make_unique<PodForwarder>(*impl_->iocs.back(), impl_->opts));
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
  for (auto& ioc : impl_->iocs) {
    auto* c = ioc.get();
    impl_->threads.emplace_back([impl = impl_, c] {
      auto guard = net::make_work_guard(*c);  // a context with no connection yet keeps running
      c->run();
    });
  }
}

uint16_t Server::port() const { return impl_->boundPort; }
int64_t Server::connections_open() const { return impl_->open; }

void Server::stop(int64_t graceMs) {
  if (impl_->threads.empty()) return;
  if (!impl_->stopping.exchange(true)) {
    net::post(impl_->ioc(), [impl = impl_] {
      beast::error_code ec;
      if (impl->acceptor) impl->acceptor->close(ec);
      if (impl->acceptPause) impl->acceptPause->cancel();
    });
    std::vector<std::shared_ptr<Session>> live;
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
