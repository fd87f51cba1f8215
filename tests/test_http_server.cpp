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
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

#include "http/server.hpp"

namespace {

using rsc::http::HttpRequest;
using rsc::http::HttpResponse;
using rsc::http::Respond;
using Clock = std::chrono::steady_clock;

// Runs answers on one thread of its own, each after its delay (the "actor" side).
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
      q_.push_back({Clock::now() + delay, std::move(f)});
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
      auto [at, f] = q_.front();
      if (Clock::now() < at) {
        cv_.wait_until(l, at);
        continue;
      }
      q_.pop_front();
      l.unlock();
      f();
      l.lock();
    }
  }
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::pair<Clock::time_point, std::function<void()>>> q_;
  bool stop_ = false;
  std::thread t_;
};

struct Fixture {
  explicit Fixture(int64_t idleMs = 60000, int64_t headerMs = 10000) {
    rsc::http::ServerOptions o;
    o.host = "127.0.0.1";
    o.port = 0;
    o.threads = 1;
    o.idleTimeoutMs = idleMs;
    o.headerTimeoutMs = headerMs;
    server = std::make_unique<rsc::http::Server>(o, [this](HttpRequest r, Respond respond) { handle(std::move(r), std::move(respond)); });
    server->start();
  }
  // POST /echo/<ms>: the body back after <ms>, from the answering thread; POST /big: 8 MiB at
  // once; POST /drop: the answer is never given (its callback dropped); GET: answered at once.
  void handle(HttpRequest r, Respond respond) {
    ++handled;
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

}  // namespace
