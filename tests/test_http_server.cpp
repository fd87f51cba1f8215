// The HTTP server on its own, with a handler that answers from another thread as the group actors
// do: answers written directly by that thread (POSTs on kept-alive HTTP/1.1 connections) go out
// whole and in order, and the connection's timeouts and shutdown hold as for answers written by
// the I/O thread.
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "http/pod_link.hpp"
#include "http/server.hpp"

namespace {

using rsc::http::HttpRequest;
using rsc::http::HttpResponse;
using rsc::http::Respond;
using Clock = std::chrono::steady_clock;

// Runs answers on one thread of its own, each after its delay, the soonest first (the "actor" side).
class Answerer {
 public:
  Answerer() : t_([this] { run(); }) {}
  ~Answerer() {
    {
      std::lock_guard<std::mutex> l(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    t_.join();
  }
  void later(std::chrono::milliseconds delay, std::function<void()> f) {
    {
      std::lock_guard<std::mutex> l(mu_);
      q_.emplace(Clock::now() + delay, std::move(f));
    }
    cv_.notify_all();
  }

 private:
  void run() {
    std::unique_lock<std::mutex> l(mu_);
    while (!stop_ || !q_.empty()) {
      if (q_.empty()) {
        cv_.wait(l);
        continue;
      }
      auto [at, f] = *q_.begin();
      if (Clock::now() < at) {
        cv_.wait_until(l, at);
        continue;
      }
      q_.erase(q_.begin());
      l.unlock();
      f();
      l.lock();
    }
  }
  std::mutex mu_;
  std::condition_variable cv_;
  std::multimap<Clock::time_point, std::function<void()>> q_;  // the soonest first
  bool stop_ = false;
  std::thread t_;
};

struct Fixture {
  explicit Fixture(int64_t idleMs = 60000, int64_t headerMs = 10000, bool podLink = true, uint16_t port = 0) {
    rsc::http::ServerOptions o;
    o.host = "127.0.0.1";
    o.port = port;
    o.threads = 1;
    o.idleTimeoutMs = idleMs;
    o.headerTimeoutMs = headerMs;
    o.podLink = podLink;
    server = std::make_unique<rsc::http::Server>(o, [this](HttpRequest r, Respond respond) { handle(std::move(r), std::move(respond)); });
    server->start();
  }
  // POST /echo/<ms>: the body back after <ms>, from the answering thread; POST /big: 8 MiB at
  // once; POST /drop: the answer is never given (its callback dropped); GET: answered at once.
  void handle(HttpRequest r, Respond respond) {
    ++handled;
    if (!r.forwardedBy.empty()) ++forwardedHere;
    if (r.method == "GET") return respond(HttpResponse{200, "{\"get\":true}"});
    if (r.target == "/big") {
      return answerer.later(std::chrono::milliseconds(0), [respond] { respond(HttpResponse{200, std::string(8 << 20, 'x')}); });
    }
    if (r.target == "/drop") return answerer.later(std::chrono::milliseconds(0), [respond] {});
    const auto ms = std::stoi(r.target.substr(std::string("/echo/").size()));
    answerer.later(std::chrono::milliseconds(ms), [respond, body = r.body] { respond(HttpResponse{200, body}); });
  }
  int port() const { return server->port(); }

  Answerer answerer;  // outlives the server's callbacks (declared first, destroyed last)
  std::atomic<int> handled{0};
  std::atomic<int> forwardedHere{0};  // requests that came from another pod (X-Rsc-Forwarded-By)
  std::unique_ptr<rsc::http::Server> server;
};

int connect_to(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(static_cast<uint16_t>(port));
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    close(fd);
    return -1;
  }
  timeval tv{5, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  return fd;
}

std::string post(const std::string& target, const std::string& body) {
  return "POST " + target + " HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: " +
         std::to_string(body.size()) + "\r\n\r\n" + body;
}

void send_all(int fd, const std::string& s) {
  std::size_t off = 0;
  while (off < s.size()) {
    const auto n = ::send(fd, s.data() + off, s.size() - off, MSG_NOSIGNAL);
    ASSERT_GT(n, 0);
    off += static_cast<std::size_t>(n);
  }
}

struct Answer {
  int status = 0;
  std::string head, body;
};

// Reads one response (Content-Length framed) from fd; status 0 when the connection ended first.
Answer read_answer(int fd, std::string& buf) {
  Answer a;
  char chunk[65536];
  for (;;) {
    const auto end = buf.find("\r\n\r\n");
    if (end != std::string::npos) {
      a.head = buf.substr(0, end);
      const auto cl = a.head.find("Content-Length: ");
      const std::size_t len = cl == std::string::npos ? 0 : std::stoul(a.head.substr(cl + 16));
      if (buf.size() >= end + 4 + len) {
        a.status = std::stoi(a.head.substr(9, 3));
        a.body = buf.substr(end + 4, len);
        buf.erase(0, end + 4 + len);
        return a;
      }
    }
    const auto n = ::read(fd, chunk, sizeof chunk);
    if (n <= 0) return a;
    buf.append(chunk, static_cast<std::size_t>(n));
  }
}

// read() == 0 within the limit: the server closed the connection.
bool closed_within(int fd, std::chrono::milliseconds limit, std::chrono::milliseconds* took = nullptr) {
  const auto t0 = Clock::now();
  timeval tv{static_cast<time_t>(limit.count() / 1000), static_cast<suseconds_t>((limit.count() % 1000) * 1000)};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  char c;
  const auto n = ::read(fd, &c, 1);
  if (took) *took = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0);
  return n == 0;
}

TEST(HttpServer, AnswersWrittenByTheAnsweringThreadGoOutInTheOrderOfPipelinedRequests) {
  Fixture f;
  const int fd = connect_to(f.port());
  ASSERT_GE(fd, 0);
  // The first takes longest: the second and third wait for it (they are not handed on before).
  send_all(fd, post("/echo/300", "one") + post("/echo/0", "two") + post("/echo/100", "three"));
  std::this_thread::sleep_for(std::chrono::milliseconds(150));
  EXPECT_EQ(f.handled.load(), 1) << "a pipelined request was handed on before the answer before it went out";
  std::string buf;
  for (const char* want : {"one", "two", "three"}) {
    auto a = read_answer(fd, buf);
    ASSERT_EQ(a.status, 200) << want;
    EXPECT_EQ(a.body, want);
    EXPECT_NE(a.head.find("HTTP/1.1 200 OK"), std::string::npos) << a.head;
    EXPECT_NE(a.head.find("Content-Type: application/json"), std::string::npos) << a.head;
  }
  // The connection goes on: a GET (answered by the I/O thread) and a POST again.
  send_all(fd, "GET /x HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_EQ(read_answer(fd, buf).body, "{\"get\":true}");
  send_all(fd, post("/echo/0", "four"));
  EXPECT_EQ(read_answer(fd, buf).body, "four");
  close(fd);
}

TEST(HttpServer, AnAnswerLargerThanTheSocketTakesAtOnceArrivesWholeAndTheConnectionGoesOn) {
  Fixture f;
  const int fd = connect_to(f.port());
  ASSERT_GE(fd, 0);
  send_all(fd, post("/big", "{}") + post("/echo/0", "after"));
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // not read yet: the socket takes part of it
  std::string buf;
  auto a = read_answer(fd, buf);
  ASSERT_EQ(a.status, 200);
  EXPECT_EQ(a.body.size(), std::size_t{8} << 20);
  EXPECT_EQ(a.body.find_first_not_of('x'), std::string::npos);
  EXPECT_EQ(read_answer(fd, buf).body, "after");
  close(fd);
}

TEST(HttpServer, AConnectionIsNotClosedWhileItsAnswerIsAwaitedAndIsClosedOnceIdleForTheIdleTimeout) {
  Fixture f(/*idleMs=*/300);
  const int fd = connect_to(f.port());
  ASSERT_GE(fd, 0);
  send_all(fd, post("/echo/800", "slow"));  // longer than the idle timeout
  std::string buf;
  auto a = read_answer(fd, buf);
  ASSERT_EQ(a.status, 200) << "closed while the answer was awaited";
  EXPECT_EQ(a.body, "slow");
  std::chrono::milliseconds took{};
  EXPECT_TRUE(closed_within(fd, std::chrono::milliseconds(3000), &took)) << "still open 3 s after the answer";
  EXPECT_GE(took.count(), 250) << "closed before the idle timeout";
  close(fd);
}

TEST(HttpServer, ARequestStartedAfterADirectAnswerMustArriveWithinTheHeaderTimeout) {
  Fixture f(/*idleMs=*/60000, /*headerMs=*/400);
  const int fd = connect_to(f.port());
  ASSERT_GE(fd, 0);
  send_all(fd, post("/echo/0", "first"));
  std::string buf;
  ASSERT_EQ(read_answer(fd, buf).body, "first");
  send_all(fd, "POST /echo/0 HTT");  // and then nothing
  std::chrono::milliseconds took{};
  EXPECT_TRUE(closed_within(fd, std::chrono::milliseconds(3000), &took)) << "the idle timeout (60 s) applied";
  EXPECT_LT(took.count(), 2500);
  close(fd);
}

TEST(HttpServer, ADroppedAnswerIsA503AndTheConnectionServesTheNextRequest) {
  Fixture f;
  const int fd = connect_to(f.port());
  ASSERT_GE(fd, 0);
  send_all(fd, post("/drop", "{}"));
  std::string buf;
  auto a = read_answer(fd, buf);
  EXPECT_EQ(a.status, 503);
  EXPECT_NE(a.head.find("Retry-After: 1"), std::string::npos) << a.head;
  send_all(fd, post("/echo/0", "next"));
  EXPECT_EQ(read_answer(fd, buf).body, "next");
  close(fd);
}

TEST(HttpServer, StoppingLetsAnAwaitedAnswerOutWithConnectionCloseThenCloses) {
  Fixture f;
  const int fd = connect_to(f.port());
  ASSERT_GE(fd, 0);
  send_all(fd, post("/echo/400", "last"));
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  std::thread stopper([&] { f.server->stop(5000); });
  std::string buf;
  auto a = read_answer(fd, buf);
  stopper.join();
  ASSERT_EQ(a.status, 200);
  EXPECT_EQ(a.body, "last");
  EXPECT_NE(a.head.find("Connection: close"), std::string::npos) << a.head;
  EXPECT_TRUE(closed_within(fd, std::chrono::milliseconds(2000)));
  EXPECT_EQ(f.server->connections_open(), 0);
  close(fd);
}

TEST(HttpServer, AClientThatHalfClosesAfterItsRequestStillGetsTheAnswer) {
  Fixture f;
  const int fd = connect_to(f.port());
  ASSERT_GE(fd, 0);
  send_all(fd, post("/echo/200", "half"));
  shutdown(fd, SHUT_WR);  // nothing more to send, still reading
  std::string buf;
  auto a = read_answer(fd, buf);
  ASSERT_EQ(a.status, 200) << "the connection closed before the answer";
  EXPECT_EQ(a.body, "half");
  EXPECT_TRUE(closed_within(fd, std::chrono::milliseconds(2000)));
  close(fd);
}

// A request pipelined behind an awaited answer that then stops arriving is not held forever: the
// idle timeout since that answer bounds it.
TEST(HttpServer, APipelinedRequestThatStopsArrivingIsCutOffAtTheIdleTimeout) {
  Fixture f(/*idleMs=*/400, /*headerMs=*/10000);
  const int fd = connect_to(f.port());
  ASSERT_GE(fd, 0);
  send_all(fd, post("/echo/200", "first") + "POST /echo/0 HTT");
  std::string buf;
  ASSERT_EQ(read_answer(fd, buf).body, "first");
  std::chrono::milliseconds took{};
  EXPECT_TRUE(closed_within(fd, std::chrono::milliseconds(3000), &took)) << "the trickling request held the connection";
  close(fd);
}

TEST(HttpServer, AClientThatHangsUpWhileItsAnswerIsAwaitedCostsNothingLater) {
  Fixture f;
  for (int i = 0; i < 20; ++i) {
    const int fd = connect_to(f.port());
    ASSERT_GE(fd, 0);
    send_all(fd, post("/echo/50", "gone"));
    close(fd);  // before the answer: it is dropped (the socket is closed once it is out)
  }
  const int fd = connect_to(f.port());
  ASSERT_GE(fd, 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // the dropped answers come meanwhile
  send_all(fd, post("/echo/0", "mine"));
  std::string buf;
  auto a = read_answer(fd, buf);
  EXPECT_EQ(a.body, "mine");
  EXPECT_EQ(buf, "") << "another connection's answer arrived here";  // fd numbers are reused at once
  close(fd);
  const auto deadline = Clock::now() + std::chrono::seconds(3);
  while (f.server->connections_open() > 0 && Clock::now() < deadline) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(f.server->connections_open(), 0);
}

// ---- Pod-link frames, on their own ----

TEST(PodLinkFrames, ACallAndAnAnswerReadBackAsWrittenAndAPartialFrameIsMore) {
  namespace link = rsc::http::link;
  HttpRequest r;
  r.method = "POST";
  r.target = "/coord/v1/streams/s/groups/g/heartbeat";
  r.contentType = "application/json";
  r.authorization = "Bearer t";
  r.forwardedBy = "pod-a";
  r.body = std::string("{\"memberId\":\"m\"}\0binary", 23);
  HttpResponse a{409, "{\"error\":\"FENCED\"}", "application/json", {{"Rsc-Group-Owner", "http://10.0.0.2:8080"}, {"Retry-After", "1"}}};
  std::string wire;
  link::append_call(wire, 7, r);
  const auto callSize = wire.size();
  link::append_answer(wire, 0xfffffffe, a);
  for (std::size_t cut = 0; cut < callSize; ++cut) {
    std::size_t used = 0;
    uint32_t id = 0;
    HttpRequest back;
    ASSERT_EQ(link::read_call(wire.data(), cut, 1 << 20, used, id, back), link::Read::More) << cut;
  }
  std::size_t used = 0;
  uint32_t id = 0;
  HttpRequest back;
  ASSERT_EQ(link::read_call(wire.data(), wire.size(), 1 << 20, used, id, back), link::Read::Frame);
  EXPECT_EQ(used, callSize);
  EXPECT_EQ(id, 7u);
  EXPECT_EQ(back.method, r.method);
  EXPECT_EQ(back.target, r.target);
  EXPECT_EQ(back.contentType, r.contentType);
  EXPECT_EQ(back.authorization, r.authorization);
  EXPECT_EQ(back.forwardedBy, r.forwardedBy);
  EXPECT_EQ(back.body, r.body);
  HttpResponse ab;
  ASSERT_EQ(link::read_answer(wire.data() + used, wire.size() - used, 1 << 20, used, id, ab), link::Read::Frame);
  EXPECT_EQ(id, 0xfffffffeu);
  EXPECT_EQ(ab.status, 409);
  EXPECT_EQ(ab.body, a.body);
  EXPECT_EQ(ab.contentType, a.contentType);
  EXPECT_EQ(ab.headers, a.headers);
}

TEST(PodLinkFrames, WhatCannotBeAFrameIsMalformed) {
  namespace link = rsc::http::link;
  std::size_t used = 0;
  uint32_t id = 0;
  HttpRequest r;
  HttpResponse a;
  auto call = [&](const HttpRequest& q, std::size_t max = 1 << 20) {
    std::string w;
    link::append_call(w, 1, q);
    return link::read_call(w.data(), w.size(), max, used, id, r);
  };
  HttpRequest ok;
  ok.method = "GET";
  ok.target = "/x";
  EXPECT_EQ(call(ok), link::Read::Frame);
  ok.body = std::string(1000, 'b');
  EXPECT_EQ(call(ok, 500), link::Read::Malformed) << "over the frame limit";
  HttpRequest bad = ok;
  bad.body.clear();
  bad.target = "/x\r\nX-Forged: 1";
  EXPECT_EQ(call(bad), link::Read::Malformed) << "a line break in the target";
  bad.target = "x";
  EXPECT_EQ(call(bad), link::Read::Malformed) << "a target that is not a path";
  // A field longer than its frame, and bytes left over after the last field.
  std::string w;
  link::append_call(w, 1, ok);
  w[11] = '\x7f';  // the method's length
  EXPECT_EQ(link::read_call(w.data(), w.size(), 1 << 20, used, id, r), link::Read::Malformed);
  w.clear();
  link::append_call(w, 1, ok);
  w.push_back('x');
  w[3] = static_cast<char>(w[3] + 1);
  EXPECT_EQ(link::read_call(w.data(), w.size(), 1 << 20, used, id, r), link::Read::Malformed);
  // Answers: a status out of range, a header value that would forge another header.
  auto answer = [&](const HttpResponse& x) {
    std::string out;
    link::append_answer(out, 1, x);
    return link::read_answer(out.data(), out.size(), 1 << 20, used, id, a);
  };
  EXPECT_EQ(answer(HttpResponse{200, "{}"}), link::Read::Frame);
  EXPECT_EQ(answer(HttpResponse{99, "{}"}), link::Read::Malformed);
  EXPECT_EQ(answer(HttpResponse{200, "{}", "application/json", {{"Retry-After", "1\r\nSet-Cookie: x"}}}), link::Read::Malformed);
  EXPECT_EQ(answer(HttpResponse{200, "{}", "application/json", {{"", "1"}}}), link::Read::Malformed);
}

// ---- Forwarding to another pod (http/pod_link.hpp) ----

// A pod that forwards every call to `owner` (as a pod does for a group it does not serve); a call
// that fails is answered 503 with why.
struct Forwarding {
  explicit Forwarding(int ownerPort, bool podLink = true, int64_t forwardTimeoutMs = 2000) : owner(ownerPort) {
    rsc::http::ServerOptions o;
    o.host = "127.0.0.1";
    o.port = 0;
    o.threads = 1;
    o.podId = "pod-a";
    o.forwardTimeoutMs = forwardTimeoutMs;
    o.podLink = podLink;
    server = std::make_unique<rsc::http::Server>(o, [this](HttpRequest r, Respond respond) {
      r.forwarder->forward("127.0.0.1:" + std::to_string(owner), r, respond,
                           [respond](std::string why) { respond(HttpResponse{503, why}); });
    });
    server->start();
  }
  int port() const { return server->port(); }
  int owner;
  std::unique_ptr<rsc::http::Server> server;
};

// `n` clients at once, client i posting /echo/<delay(i)> with body "call-i"; the answers' bodies,
// "" for a call not answered 200.
std::vector<std::string> calls_at_once(int port, int n, const std::function<int(int)>& delay) {
  std::vector<std::string> got(static_cast<std::size_t>(n));
  std::vector<std::thread> ts;
  for (int i = 0; i < n; ++i) {
    ts.emplace_back([&, i] {
      const int fd = connect_to(port);
      if (fd < 0) return;
      send_all(fd, post("/echo/" + std::to_string(delay(i)), "call-" + std::to_string(i)));
      std::string buf;
      auto a = read_answer(fd, buf);
      if (a.status == 200) got[static_cast<std::size_t>(i)] = a.body;
      close(fd);
    });
  }
  for (auto& t : ts) t.join();
  return got;
}

TEST(PodLink, ManyCallsInFlightShareOneConnectionToTheOtherPodAndEachGetsItsOwnAnswer) {
  Fixture owner;
  Forwarding pod(owner.port());
  // Answers come back in another order than the calls went (delays 0..45 ms, shuffled).
  auto got = calls_at_once(pod.port(), 40, [](int i) { return (i * 7) % 10 * 5; });
  for (int i = 0; i < 40; ++i) EXPECT_EQ(got[static_cast<std::size_t>(i)], "call-" + std::to_string(i));
  EXPECT_EQ(owner.forwardedHere.load(), 40) << "each call reached the owner marked as forwarded by a pod";
  // One connection carried them all (over HTTP, each call in flight needs one of its own).
  EXPECT_EQ(owner.server->connections_open(), 1);
  got = calls_at_once(pod.port(), 10, [](int) { return 0; });
  EXPECT_EQ(got[9], "call-9");
  EXPECT_EQ(owner.server->connections_open(), 1) << "the link is kept and reused";
}

TEST(PodLink, WithoutItEachCallInFlightTakesAConnectionOfItsOwn) {
  // The same calls with the link off: what the link saves (and the HTTP path still works).
  Fixture owner;
  Forwarding pod(owner.port(), /*podLink=*/false);
  auto got = calls_at_once(pod.port(), 20, [](int) { return 100; });
  for (int i = 0; i < 20; ++i) EXPECT_EQ(got[static_cast<std::size_t>(i)], "call-" + std::to_string(i));
  EXPECT_GT(owner.server->connections_open(), 1);
}

TEST(PodLink, APodThatDoesNotSpeakItIsCalledOverHttp) {
  // An older pod (or one with the link off) answers the Upgrade as an ordinary request.
  Fixture owner(60000, 10000, /*podLink=*/false);
  Forwarding pod(owner.port());
  auto got = calls_at_once(pod.port(), 10, [](int i) { return i * 3; });
  for (int i = 0; i < 10; ++i) EXPECT_EQ(got[static_cast<std::size_t>(i)], "call-" + std::to_string(i));
  EXPECT_EQ(owner.forwardedHere.load(), 10);
}

TEST(PodLink, ACallAnsweredAfterTheForwardTimeoutFailsAloneAndTheLinkGoesOn) {
  Fixture owner;
  Forwarding pod(owner.port(), true, /*forwardTimeoutMs=*/300);
  std::string late;
  std::thread slow([&] {
    const int fd = connect_to(pod.port());
    send_all(fd, post("/echo/1200", "slow"));
    std::string buf;
    auto a = read_answer(fd, buf);
    late = std::to_string(a.status) + " " + a.body;
    close(fd);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  const auto t0 = Clock::now();
  auto got = calls_at_once(pod.port(), 10, [](int) { return 20; });
  for (int i = 0; i < 10; ++i) EXPECT_EQ(got[static_cast<std::size_t>(i)], "call-" + std::to_string(i)) << "a call beside the late one";
  slow.join();
  const auto took = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0).count();
  EXPECT_EQ(late, "503 did not answer within 300ms");
  EXPECT_LT(took, 1000) << "the late call failed at its deadline, not at its answer";
  got = calls_at_once(pod.port(), 3, [](int) { return 0; });
  EXPECT_EQ(got[2], "call-2");
  EXPECT_EQ(owner.server->connections_open(), 1) << "the link answered meanwhile: it was kept";
}

TEST(PodLink, AfterTheOtherPodRestartsCallsGoOnANewLink) {
  auto owner = std::make_unique<Fixture>();
  const auto port = static_cast<uint16_t>(owner->port());
  Forwarding pod(port);
  EXPECT_EQ(calls_at_once(pod.port(), 5, [](int) { return 0; })[4], "call-4");
  owner->server->stop(1000);
  owner.reset();
  owner = std::make_unique<Fixture>(60000, 10000, true, port);
  auto got = calls_at_once(pod.port(), 5, [](int) { return 0; });
  for (int i = 0; i < 5; ++i) EXPECT_EQ(got[static_cast<std::size_t>(i)], "call-" + std::to_string(i));
  EXPECT_EQ(owner->server->connections_open(), 1);
}

TEST(PodLink, StoppingTheOtherPodLetsTheCallsInFlightBeAnsweredFirst) {
  Fixture owner;
  Forwarding pod(owner.port());
  std::vector<std::string> got;
  std::thread calls([&] { got = calls_at_once(pod.port(), 5, [](int) { return 300; }); });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  owner.server->stop(2000);
  calls.join();
  for (int i = 0; i < 5; ++i) EXPECT_EQ(got[static_cast<std::size_t>(i)], "call-" + std::to_string(i));
}

TEST(PodLink, AMalformedFrameClosesTheLinkAndNothingElse) {
  Fixture owner;
  const int fd = connect_to(owner.port());
  ASSERT_GE(fd, 0);
  send_all(fd, "GET /coord/internal/v1/pod-link HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: rsc-pod-link/1\r\n\r\n");
  std::string head;
  char c;
  while (head.find("\r\n\r\n") == std::string::npos && ::read(fd, &c, 1) == 1) head += c;
  ASSERT_NE(head.find("101 Switching Protocols"), std::string::npos) << head;
  // A frame claiming 4 GiB.
  send_all(fd, std::string("\xff\xff\xff\xff\x00\x00\x00\x01", 8));
  EXPECT_TRUE(closed_within(fd, std::chrono::milliseconds(2000)));
  close(fd);
  EXPECT_EQ(owner.handled.load(), 0);
  const int fd2 = connect_to(owner.port());
  send_all(fd2, post("/echo/0", "still"));
  std::string buf;
  EXPECT_EQ(read_answer(fd2, buf).body, "still");
  close(fd2);
}

}  // namespace
