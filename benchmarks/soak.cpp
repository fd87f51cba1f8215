// rsc-soak: a long, mixed, bounded run against running coordinator pods, with its own checks.
//   rsc-soak --coordinator URL[,URL...] --seconds S [--streams N] [--groups-per-stream G]
//            [--members M] [--shards K] [--warmup-seconds W] [--settle-seconds C] [--pids PID[,...]]
//            [--seed X]
// Members are threads speaking the heartbeat protocol (one keep-alive connection each, moving to
// another pod now and then). For S seconds they join, heartbeat, leave gracefully, crash (stop
// without a word, connection dropped) and come back under the same id; an admin thread reads
// streams, groups, metrics and probes, grows one stream's shard count, removes crashed members and
// deletes a scratch group; a hostile thread sends malformed requests and checks each is refused
// with the right status and nothing stored. Faults in Redis (a stall, a restart) come from outside
// (scripts/soak.sh). Then churn stops, every member comes back, and each group must converge.
//
// Checked, and the exit status says whether all held:
//   I1 in the members' own view: a member starts reading a shard (given, or resumed after a
//      self-fence) only when no other member may still read it; a member may read until it lets
//      the shard go, crashes, or its self-fence deadline (last answered heartbeat's send time +
//      lease - margin) passes;
//   epochs a member incarnation is given never go back (I3);
//   every malformed request gets its documented answer (a 4xx, or for a heartbeat decision HTTP 200
//   with the status in the body; RETRY or 503 while the store is away) and creates nothing; no
//   admin or probe call gets a 5xx other than 503;
//   every group converges: STABLE, every shard readable by exactly one member, counts within one;
//   with --pids: each pod's RSS at the end is within 10 % of its RSS after warm-up, and its open
//   descriptors with no client connected are no more at the end than before the run.
#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "benchmarks/proc.hpp"
#include "member/http_client.hpp"

using nlohmann::json;
using Clock = std::chrono::steady_clock;
using rsc::member::HttpClient;
using rsc::member::HttpReply;

using rsc::bench::rss_kib;
using rsc::bench::split;

namespace {

struct Options {
  std::vector<std::string> urls;
  int seconds = 120;
  int streams = 10;
  int groupsPerStream = 5;
  int members = 300;
  int shards = 8;
  int warmupSeconds = 30;
  int settleSeconds = 60;
  std::vector<std::string> pids;
  unsigned seed = 1;
};

[[noreturn]] void usage(const std::string& why) {
  std::cerr << "rsc-soak: " << why << "\n"
            << "usage: rsc-soak --coordinator URL[,URL...] --seconds S [--streams N] [--groups-per-stream G]\n"
            << "                [--members M] [--shards K] [--warmup-seconds W] [--settle-seconds C]\n"
            << "                [--pids PID[,PID...]] [--seed X]\n";
  std::exit(2);
}

double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// ---- process figures -------------------------------------------------------------------------

// What a process has open, by kind ("socket", "anon_inode:[eventfd]", a path), with counts.
std::map<std::string, int> open_fds(const std::string& pid) {
  std::map<std::string, int> out;
  const std::string dir = "/proc/" + pid + "/fd";
  DIR* d = opendir(dir.c_str());
  if (!d) return out;
  while (auto* e = readdir(d)) {
    if (e->d_name[0] == '.') continue;
    char buf[512];
    const auto n = readlink((dir + "/" + e->d_name).c_str(), buf, sizeof buf - 1);
    std::string target = n > 0 ? std::string(buf, static_cast<std::size_t>(n)) : "?";
    if (target.rfind("socket:", 0) == 0 || target.rfind("pipe:", 0) == 0) target = target.substr(0, target.find(':'));
    ++out[target];
  }
  closedir(d);
  return out;
}

int total(const std::map<std::string, int>& fds) {
  int n = 0;
  for (const auto& [k, v] : fds) n += v;
  return n;
}

bool alive(const std::string& pid) { return ::kill(std::atoi(pid.c_str()), 0) == 0; }

// ---- raw HTTP, for requests a well-behaved client cannot send -----------------------------------

struct Target {
  std::string host;
  int port = 0;
};

struct RawReply {
  int status = 0;    // 0: no answer within 5 s
  std::string body;  // what followed the headers
};

// Sends `raw` (which asks for Connection: close) on a fresh connection and reads the answer to EOF.
RawReply raw_exchange(const Target& t, const std::string& raw) {
  RawReply out;
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return out;
  timeval tv{5, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(t.port));
  inet_pton(AF_INET, t.host.c_str(), &addr.sin_addr);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0) {
    for (std::size_t off = 0; off < raw.size();) {
      const auto n = ::send(fd, raw.data() + off, raw.size() - off, MSG_NOSIGNAL);
      if (n <= 0) break;  // the server may answer (413) and close before taking everything
      off += static_cast<std::size_t>(n);
    }
    std::string got;
    char buf[4096];
    for (;;) {
      const auto n = ::recv(fd, buf, sizeof buf, 0);
      if (n <= 0) break;
      got.append(buf, static_cast<std::size_t>(n));
    }
    if (got.rfind("HTTP/1.1 ", 0) == 0 && got.size() >= 12) out.status = std::atoi(got.c_str() + 9);
    const auto end = got.find("\r\n\r\n");
    if (end != std::string::npos) out.body = got.substr(end + 4);
  }
  ::close(fd);
  return out;
}

// ---- shared book of who may read what (the members' view) ---------------------------------------

struct Reading {
  int member = -1;
  bool released = true;
  Clock::time_point validUntil{};  // the holder's self-fence deadline
};

class Book {
 public:
  // `member` may read `shard` of `group` from now on (until `validUntil` unless renewed).
  void take(const std::string& group, int32_t shard, int member, Clock::time_point validUntil) {
    std::lock_guard<std::mutex> lock(mu_);
    auto& r = book_[{group, shard}];
    const auto now = Clock::now();
    if (r.member != member && !r.released && now < r.validUntil) {
      ++violations_;
      if (examples_.size() < 5)
        examples_.push_back(group + " shard " + std::to_string(shard) + " given to m" + std::to_string(member) +
                            " while m" + std::to_string(r.member) + " may read it for another " +
                            std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(r.validUntil - now).count()) +
                            " ms");
    }
    if (r.member != member || r.released) ++takes_;
    r = Reading{member, false, validUntil};
  }
  void release(const std::string& group, int32_t shard, int member) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = book_.find({group, shard});
    if (it != book_.end() && it->second.member == member) it->second.released = true;
  }
  int violations() const {
    std::lock_guard<std::mutex> lock(mu_);
    return violations_;
  }
  long takes() const {
    std::lock_guard<std::mutex> lock(mu_);
    return takes_;
  }
  std::vector<std::string> examples() const {
    std::lock_guard<std::mutex> lock(mu_);
    return examples_;
  }

 private:
  mutable std::mutex mu_;
  std::map<std::pair<std::string, int32_t>, Reading> book_;
  int violations_ = 0;
  long takes_ = 0;
  std::vector<std::string> examples_;
};

// ---- counters ------------------------------------------------------------------------------------

struct Counters {
  std::atomic<long> heartbeats{0}, answered{0}, retries{0}, noAnswer{0}, fenced{0}, unknown{0}, revokePending{0},
      syncMetadata{0}, joins{0}, leaves{0}, crashes{0}, selfFences{0}, epochRegressions{0}, unexpected{0},
      adminCalls{0}, adminUnavailable{0}, adminBad{0}, badRequests{0}, badWrong{0}, badStored{0}, removals{0};
  std::mutex mu;
  std::vector<std::string> notes;  // first few unexpected answers
  std::map<std::string, long> retryWhy;  // RETRY messages, digits folded
  void retry(std::string why) {
    for (auto& ch : why)
      if (ch >= '0' && ch <= '9') ch = 'N';
    std::lock_guard<std::mutex> lock(mu);
    ++retryWhy[why.substr(0, 120)];
  }
  void note(const std::string& s) {
    std::lock_guard<std::mutex> lock(mu);
    if (notes.size() < 12) notes.push_back(s);
  }
};

// ---- one member ----------------------------------------------------------------------------------

enum class Phase { Churn, Settle, Stop };

struct Shared {
  Options opt;
  Book book;
  Counters c;
  std::atomic<Phase> phase{Phase::Churn};
  std::mutex wakeMu;
  std::condition_variable wake;
};

struct Member {
  int index = 0;
  std::string stream, group, id;
  // Guarded by `mu`: the admin thread removes a member only while it is away, and the member does
  // not come back while a removal is being sent.
  std::mutex mu;
  bool away = false;
  // What the member itself believes (its thread only, or under `mu` for `readable`).
  int32_t epoch = 0;
  int32_t metadataVersion = 0;
  std::set<int32_t> assigned;  // the coordinator's last word
  std::set<int32_t> readable;  // what it reads now (assigned unless self-fenced)
  std::set<int32_t> revoked;   // let go, to report once
  int64_t leaseMs = 3000, intervalMs = 1000;
  Clock::time_point lastOkSent{};
  bool selfFenced = false;
  int seq = 0;
  // Its group exists: a join of it was answered (read by the admin thread, which describes only
  // such groups: a describe sent before the group's first join is rightly answered 404).
  std::atomic<bool> joined{false};
};

json heartbeat_body(Member& m, int32_t epoch) {
  json owned = json::array(), revoking = json::array();
  if (epoch != -1)
    for (auto s : m.assigned) owned.push_back({{"shardIndex", s}, {"state", "OWNED"}});
  for (auto s : m.revoked) revoking.push_back({{"shardIndex", s}, {"state", "REVOKED"}, {"inFlight", 0}});
  return {{"protocolVersion", 1},
          {"requestId", m.id + "-" + std::to_string(++m.seq)},
          {"memberId", m.id},
          {"memberEpoch", epoch},
          {"metadataVersion", m.metadataVersion},
          {"runtimeConsumerCapacity", {{"runtimeMaxConcurrency", 1}, {"availableConcurrency", 1}}},
          {"ownedShards", owned},
          {"revokingShards", revoking}};
}

int64_t fence_margin_ms(int64_t leaseMs) { return std::max<int64_t>(200, leaseMs / 4); }

// Stops reading everything (a crash, a fence, a self-fence); what was assigned is kept or not by
// the caller.
void stop_reading(Shared& sh, Member& m) {
  std::lock_guard<std::mutex> lock(m.mu);
  for (auto s : m.readable) sh.book.release(m.stream + "/" + m.group, s, m.index);
  m.readable.clear();
}

void read_assigned(Shared& sh, Member& m) {
  std::lock_guard<std::mutex> lock(m.mu);
  const auto until = m.lastOkSent + std::chrono::milliseconds(m.leaseMs - fence_margin_ms(m.leaseMs));
  for (auto s : m.assigned) sh.book.take(m.stream + "/" + m.group, s, m.index, until);
  for (auto s : m.readable)
    if (!m.assigned.count(s)) sh.book.release(m.stream + "/" + m.group, s, m.index);
  m.readable = m.assigned;
}

void forget(Shared& sh, Member& m) {
  stop_reading(sh, m);
  m.assigned.clear();
  m.revoked.clear();
  m.epoch = 0;
  m.selfFenced = false;
}

struct Answer {
  int http = 0;
  json body;
  std::string status;
};

Answer send(Shared& sh, std::unique_ptr<HttpClient>& http, Member& m, int32_t epoch) {
  const std::string path =
      "/coord/v1/streams/" + m.stream + "/groups/" + m.group + "/members/" + m.id + "/heartbeat";
  auto r = http->request("POST", path, heartbeat_body(m, epoch).dump());
  ++sh.c.heartbeats;
  Answer a;
  a.http = r.status;
  if (r.status != 0) {
    a.body = json::parse(r.body, nullptr, false);
    if (a.body.is_object() && a.body.contains("status") && a.body["status"].is_string())
      a.status = a.body["status"].get<std::string>();
  }
  return a;
}

std::set<int32_t> shard_set(const json& list) {
  std::set<int32_t> out;
  if (list.is_array())
    for (const auto& s : list)
      if (s.is_object() && s.contains("shardIndex")) out.insert(s["shardIndex"].get<int32_t>());
  return out;
}

void member_thread(Shared& sh, Member& m, unsigned seed) {
  std::mt19937 rng(seed);
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  const auto& urls = sh.opt.urls;
  std::string err;
  std::unique_ptr<HttpClient> http;
  auto connect = [&] {
    http = std::make_unique<HttpClient>(rsc::member::parse_url(urls[pick(0, static_cast<int>(urls.size()) - 1)], &err), 3000);
  };
  connect();
  int64_t backoffMs = 50;
  int32_t maxEpoch = 0;
  auto sleep_for = [&](int64_t ms) {
    std::unique_lock<std::mutex> lock(sh.wakeMu);
    const auto before = sh.phase.load();
    sh.wake.wait_for(lock, std::chrono::milliseconds(ms), [&] { return sh.phase.load() != before; });
  };
  // Joins (epoch 0) at once.
  while (sh.phase != Phase::Stop) {
    const bool churn = sh.phase == Phase::Churn;
    // Self-fence, as the runtime does it: reading stops when no heartbeat has been answered for
    // lease minus margin, counted from when that heartbeat was sent.
    if (!m.readable.empty() && m.lastOkSent.time_since_epoch().count() != 0 &&
        Clock::now() > m.lastOkSent + std::chrono::milliseconds(m.leaseMs - fence_margin_ms(m.leaseMs))) {
      stop_reading(sh, m);
      m.selfFenced = true;
      ++sh.c.selfFences;
    }
    if (churn && m.epoch > 0 && pick(0, 299) == 0) {  // crash: stop reading, drop the connection, say nothing
      ++sh.c.crashes;
      forget(sh, m);
      {
        std::lock_guard<std::mutex> lock(m.mu);
        m.away = true;
      }
      http.reset();
      maxEpoch = 0;
      sleep_for(pick(300, 5000));
      {
        std::lock_guard<std::mutex> lock(m.mu);  // waits for a removal being sent
        m.away = false;
      }
      connect();
      continue;
    }
    if (churn && m.epoch > 0 && pick(0, 299) == 0) {  // graceful leave: let everything go, say -1 until heard
      ++sh.c.leaves;
      stop_reading(sh, m);
      for (auto s : m.assigned) m.revoked.insert(s);
      m.assigned.clear();
      for (int i = 0; i < 50 && sh.phase != Phase::Stop; ++i) {
        auto a = send(sh, http, m, -1);
        if (a.status == "OK" || a.status == "UNKNOWN_MEMBER_ID" || a.status == "FENCED_MEMBER_EPOCH") break;
        sleep_for(200);
      }
      forget(sh, m);
      maxEpoch = 0;
      sleep_for(pick(300, 3000));
      continue;
    }
    if (pick(0, 19) == 0) connect();  // move to another pod now and then
    if (m.epoch == 0) ++sh.c.joins;
    const auto sentAt = Clock::now();
    auto a = send(sh, http, m, m.epoch);
    const std::string& st = a.status;
    int64_t waitMs = m.intervalMs;
    if (st == "OK" || st == "REVOKE_PENDING" || st == "SYNC_METADATA") {
      ++sh.c.answered;
      if (st == "REVOKE_PENDING") ++sh.c.revokePending;
      if (st == "SYNC_METADATA") ++sh.c.syncMetadata;
      backoffMs = 50;
      m.lastOkSent = std::max(m.lastOkSent, sentAt);
      m.selfFenced = false;
      const auto& b = a.body;
      if (b.value("memberLeaseTtlMs", 0) > 0) m.leaseMs = b["memberLeaseTtlMs"].get<int64_t>();
      if (b.value("heartbeatIntervalMs", 0) > 0) m.intervalMs = b["heartbeatIntervalMs"].get<int64_t>();
      m.metadataVersion = std::max(m.metadataVersion, b.value("metadataVersion", 0));
      m.revoked.clear();  // reported and heard
      const int32_t e = b.value("memberEpoch", 0);
      if (e > 0) {
        if (e < maxEpoch) {
          ++sh.c.epochRegressions;
          sh.c.note(m.id + ": epoch " + std::to_string(e) + " after " + std::to_string(maxEpoch));
        }
        maxEpoch = std::max(maxEpoch, e);
        m.epoch = e;
        if (e > 0) m.joined = true;
      }
      if (b.contains("assignment") && b["assignment"].is_object()) {
        auto target = shard_set(b["assignment"].value("assignedShards", json::array()));
        std::set<int32_t> next;
        for (auto s : m.assigned) {
          if (target.count(s)) next.insert(s);
          else m.revoked.insert(s);  // stops reading it now, reports it REVOKED next time
        }
        if (st != "SYNC_METADATA") next.insert(target.begin(), target.end());
        if (next != m.assigned || !m.revoked.empty()) waitMs = 0;  // something changed: report it at once
        m.assigned = next;
      }
      read_assigned(sh, m);
    } else if (st == "FENCED_MEMBER_EPOCH" || st == "UNKNOWN_MEMBER_ID") {
      ++(st == "FENCED_MEMBER_EPOCH" ? sh.c.fenced : sh.c.unknown);
      forget(sh, m);
      maxEpoch = 0;
      waitMs = 0;
    } else if (st == "RETRY" || a.http == 0) {
      ++(a.http == 0 ? sh.c.noAnswer : sh.c.retries);
      if (a.http != 0)
        sh.c.retry(a.body.is_object() && a.body.contains("message") && a.body["message"].is_string()
                       ? a.body["message"].get<std::string>()
                       : "");
      waitMs = std::min(backoffMs, m.intervalMs);
      backoffMs = std::min<int64_t>(backoffMs * 2, 1000);
      if (a.http == 0) connect();
    } else {
      ++sh.c.unexpected;
      sh.c.note(m.id + ": HTTP " + std::to_string(a.http) + " " + a.body.dump().substr(0, 200));
      forget(sh, m);
      maxEpoch = 0;
      waitMs = 500;
    }
    if (waitMs > 0) sleep_for(waitMs);
  }
}

// ---- admin and hostile traffic -------------------------------------------------------------------

bool unavailable(int status) { return status == 503 || status == 0; }

void admin_thread(Shared& sh, std::vector<std::unique_ptr<Member>>& members, const std::vector<std::string>& streams) {
  std::mt19937 rng(sh.opt.seed * 7 + 1);
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  std::string err;
  const auto t0 = Clock::now();
  int scratch = 0;
  while (sh.phase == Phase::Churn) {
    HttpClient http(rsc::member::parse_url(sh.opt.urls[pick(0, static_cast<int>(sh.opt.urls.size()) - 1)], &err), 5000);
    const auto& s = streams[pick(0, static_cast<int>(streams.size()) - 1)];
    const auto& mem = *members[pick(0, static_cast<int>(members.size()) - 1)];
    std::string what;
    HttpReply r;
    std::set<int> fine{200};
    switch (pick(0, 8)) {
      case 0: what = "GET stream"; r = http.request("GET", "/coord/v1/streams/" + s, ""); break;
      case 1: what = "GET groups"; r = http.request("GET", "/coord/v1/streams/" + s + "/groups", ""); break;
      case 2:
        if (!mem.joined) continue;
        what = "describe";
        r = http.request("GET", "/coord/v1/streams/" + mem.stream + "/groups/" + mem.group, "");
        break;
      case 3: what = "metrics"; r = http.request("GET", "/metrics", ""); break;
      case 4: what = "healthz"; r = http.request("GET", "/healthz", ""); break;
      case 5: what = "readyz"; r = http.request("GET", "/readyz", ""); break;
      case 6: {  // the same shard count again (idempotent), or once, mid-run, a growth
        const int count = since(t0) > sh.opt.seconds / 2.0 && s == streams[0] ? sh.opt.shards + 4 : sh.opt.shards;
        what = "PUT stream " + std::to_string(count);
        r = http.request("PUT", "/coord/v1/streams/" + s, json{{"shardCount", count}}.dump());
        break;
      }
      case 7: {  // remove a crashed member at once instead of waiting for its lease
        Member* away = nullptr;
        std::unique_lock<std::mutex> lock;
        const auto from = static_cast<std::size_t>(pick(0, static_cast<int>(members.size()) - 1));
        for (std::size_t k = 0; k < members.size() && !away; ++k) {
          auto& cand = *members[(from + k) % members.size()];
          std::unique_lock<std::mutex> l(cand.mu, std::try_to_lock);
          if (l.owns_lock() && cand.away) {
            away = &cand;
            lock = std::move(l);
          }
        }
        if (!away) continue;
        auto& m = *away;
        what = "remove member";
        r = http.request("DELETE", "/coord/v1/streams/" + m.stream + "/groups/" + m.group + "/members/" + m.id, "");
        fine.insert(404);  // already expired, or never got back in
        if (r.status == 200) ++sh.c.removals;
        break;
      }
      case 8: {  // a scratch group: one member joins, then the group is deleted with its members fenced
        const std::string g = "scratch-" + std::to_string(++scratch);
        const std::string id = "admin-" + std::to_string(scratch);
        Member tmp;
        tmp.id = id;
        auto j = http.request("POST", "/coord/v1/streams/" + s + "/groups/" + g + "/members/" + id + "/heartbeat",
                              heartbeat_body(tmp, 0).dump());
        // Every heartbeat decision is HTTP 200: whether the join happened is the body's status. A
        // RETRY (the store away) stored nothing, so there is no group to delete.
        const auto jb = json::parse(j.body, nullptr, false);
        const std::string decision =
            jb.is_object() && jb.contains("status") && jb["status"].is_string() ? jb["status"].get<std::string>() : "";
        if (j.status != 200 || decision != "OK") {
          if (!unavailable(j.status) && decision != "RETRY") {
            ++sh.c.adminBad;
            sh.c.note("scratch join: HTTP " + std::to_string(j.status) + " " + j.body.substr(0, 200));
          }
          continue;
        }
        what = "DELETE scratch group";
        r = http.request("DELETE", "/coord/v1/streams/" + s + "/groups/" + g + "?fenceMembers=true", "");
        break;
      }
    }
    ++sh.c.adminCalls;
    if (unavailable(r.status) && what != "healthz") {
      ++sh.c.adminUnavailable;
    } else if (!fine.count(r.status)) {
      ++sh.c.adminBad;
      sh.c.note(what + ": HTTP " + std::to_string(r.status) + " " + r.body.substr(0, 200));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(pick(50, 250)));
  }
}

struct BadCase {
  std::string name;
  std::string raw;         // the whole request
  int http = 400;          // the HTTP status it must get
  std::string decision;    // for a heartbeat decision (HTTP 200): the status its body must carry
  std::string group;       // a group that must not exist afterwards ("" when none is named)
};

std::string post(const std::string& path, const std::string& body, const std::string& type = "application/json") {
  return "POST " + path + " HTTP/1.1\r\nHost: x\r\nContent-Type: " + type + "\r\nContent-Length: " +
         std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n" + body;
}

std::vector<BadCase> bad_cases(const std::string& stream, int n) {
  const std::string g = "bad-" + std::to_string(n);
  const std::string hb = "/coord/v1/streams/" + stream + "/groups/" + g + "/members/x1/heartbeat";
  Member x;
  x.id = "x1";
  auto valid = heartbeat_body(x, 0);
  auto with = [&](const std::string& k, json v) {
    auto b = valid;
    b[k] = std::move(v);
    return b.dump();
  };
  std::string deep = "{\"protocolVersion\":1,\"x\":" + std::string(200, '[') + std::string(200, ']') + "}";
  const std::string invalid = "INVALID_REQUEST";
  return {
      {"not JSON", post(hb, "{not json"), 400, "", g},
      {"array body", post(hb, "[1,2,3]"), 400, "", g},
      {"protocolVersion 2", post(hb, with("protocolVersion", 2)), 200, "UNSUPPORTED_PROTOCOL", g},
      {"memberId differs from the path", post(hb, with("memberId", "someone-else")), 200, invalid, g},
      {"memberEpoch -7", post(hb, with("memberEpoch", -7)), 200, invalid, g},
      {"epoch as a string", post(hb, with("memberEpoch", "1")), 200, invalid, g},
      {"shard listed twice",
       post(hb, with("ownedShards", json::array({{{"shardIndex", 1}, {"state", "OWNED"}},
                                                 {{"shardIndex", 1}, {"state", "OWNED"}}}))),
       200, invalid, g},
      {"shard out of range", post(hb, with("ownedShards", json::array({{{"shardIndex", 9999}, {"state", "OWNED"}}}))),
       200, invalid, g},
      {"nested 200 deep", post(hb, deep), 400, "", g},
      {"text/plain", post(hb, valid.dump(), "text/plain"), 415, "", g},
      {"body over 1 MiB", post(hb, std::string(1100 * 1024, ' ')), 413, "", g},
      {"bad group name", post("/coord/v1/streams/" + stream + "/groups/bad$name/members/x1/heartbeat", valid.dump()),
       200, invalid, ""},
      {"unknown path", "GET /coord/v1/nothing HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", 404, "", ""},
      {"wrong method", "PATCH /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", 405, "", ""},
      {"negative shard count",
       "PUT /coord/v1/streams/bad-stream-" + std::to_string(n) +
           " HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 19\r\nConnection: close\r\n\r\n"
           "{\"shardCount\": -5 }",
       400, "", ""},
      {"garbage bytes", std::string("\x01\x02\x03 nonsense\r\n\r\n", 16), 400, "", ""},
  };
}

void hostile_thread(Shared& sh, const std::vector<std::string>& streams) {
  std::mt19937 rng(sh.opt.seed * 13 + 5);
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  std::string err;
  int n = 0;
  while (sh.phase == Phase::Churn) {
    const auto& url = sh.opt.urls[pick(0, static_cast<int>(sh.opt.urls.size()) - 1)];
    const auto u = rsc::member::parse_url(url, &err);
    const Target t{u.host, u.port};
    const auto& s = streams[pick(0, static_cast<int>(streams.size()) - 1)];
    auto cases = bad_cases(s, ++n);
    const auto& bc = cases[pick(0, static_cast<int>(cases.size()) - 1)];
    const auto reply = raw_exchange(t, bc.raw);
    ++sh.c.badRequests;
    std::string decision;
    if (reply.status == 200) {
      auto j = json::parse(reply.body, nullptr, false);
      if (j.is_object() && j.contains("status") && j["status"].is_string()) decision = j["status"].get<std::string>();
    }
    const bool storeAway = reply.status == 503 || decision == "RETRY";  // asked the store, which was away
    if (!storeAway && (reply.status != bc.http || decision != bc.decision)) {
      ++sh.c.badWrong;
      sh.c.note("bad request '" + bc.name + "': HTTP " + std::to_string(reply.status) + " " + decision);
    }
    if (!bc.group.empty()) {  // nothing stored: the group it named does not exist
      HttpClient http(u, 5000);
      auto r = http.request("GET", "/coord/v1/streams/" + s + "/groups/" + bc.group, "");
      if (r.status != 404 && !unavailable(r.status)) {
        ++sh.c.badStored;
        sh.c.note("after bad request '" + bc.name + "': GET its group answered " + std::to_string(r.status));
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(pick(20, 120)));
  }
}

// ---- convergence ---------------------------------------------------------------------------------

// Whether every group is STABLE and its members' views split its shards exactly, evenly.
bool converged(Shared& sh, std::vector<std::unique_ptr<Member>>& members, const std::vector<std::string>& streams,
               std::string* why) {
  std::string err;
  HttpClient http(rsc::member::parse_url(sh.opt.urls[0], &err), 5000);
  std::map<std::string, int> counts;
  for (const auto& s : streams) {
    auto r = http.request("GET", "/coord/v1/streams/" + s, "");
    auto j = json::parse(r.body, nullptr, false);
    if (r.status != 200 || !j.is_object()) {
      *why = "GET stream " + s + ": HTTP " + std::to_string(r.status);
      return false;
    }
    counts[s] = j.value("shardCount", 0);
  }
  std::map<std::string, std::vector<Member*>> byGroup;
  for (auto& m : members) byGroup[m->stream + "/" + m->group].push_back(m.get());
  for (auto& [key, ms] : byGroup) {
    auto r = http.request("GET", "/coord/v1/streams/" + ms[0]->stream + "/groups/" + ms[0]->group, "");
    auto j = json::parse(r.body, nullptr, false);
    if (r.status != 200 || !j.is_object() || j.value("state", "") != "STABLE") {
      *why = key + " is " + (j.is_object() ? j.value("state", "?") : "HTTP " + std::to_string(r.status));
      return false;
    }
    std::map<int32_t, int> readers;
    std::size_t lo = SIZE_MAX, hi = 0;
    for (auto* m : ms) {
      std::lock_guard<std::mutex> lock(m->mu);
      for (auto s : m->readable) ++readers[s];
      lo = std::min(lo, m->readable.size());
      hi = std::max(hi, m->readable.size());
    }
    const int count = counts[ms[0]->stream];
    for (int32_t s = 0; s < count; ++s)
      if (readers[s] != 1) {
        *why = key + " shard " + std::to_string(s) + " read by " + std::to_string(readers[s]) + " members";
        return false;
      }
    if (static_cast<int>(readers.size()) != count || hi - lo > 1) {
      *why = key + " split " + std::to_string(lo) + ".." + std::to_string(hi);
      return false;
    }
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  Options opt;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) usage(a + " needs a value");
      return argv[++i];
    };
    auto num = [&]() {
      const auto v = next();
      char* end = nullptr;
      const long n = std::strtol(v.c_str(), &end, 10);
      if (v.empty() || *end || n < 0 || n > 1000000) usage(a + ": expected a number, got '" + v + "'");
      return static_cast<int>(n);
    };
    if (a == "--coordinator") opt.urls = split(next());
    else if (a == "--seconds") opt.seconds = num();
    else if (a == "--streams") opt.streams = std::max(1, num());
    else if (a == "--groups-per-stream") opt.groupsPerStream = std::max(1, num());
    else if (a == "--members") opt.members = std::max(1, num());
    else if (a == "--shards") opt.shards = std::max(1, num());
    else if (a == "--warmup-seconds") opt.warmupSeconds = num();
    else if (a == "--settle-seconds") opt.settleSeconds = num();
    else if (a == "--pids") opt.pids = split(next());
    else if (a == "--seed") opt.seed = static_cast<unsigned>(num());
    else usage("unknown argument " + a);
  }
  if (opt.urls.empty()) usage("--coordinator is required");
  if (opt.warmupSeconds >= opt.seconds) usage("--warmup-seconds must be less than --seconds");

  Shared sh;
  sh.opt = opt;
  std::string err;
  std::vector<std::string> streams;
  {
    HttpClient http(rsc::member::parse_url(opt.urls[0], &err), 5000);
    for (int s = 0; s < opt.streams; ++s) {
      streams.push_back("soak" + std::to_string(s));
      auto r = http.request("PUT", "/coord/v1/streams/" + streams.back(), json{{"shardCount", opt.shards}}.dump());
      if (r.status != 200) {
        std::cerr << "rsc-soak: PUT stream " << streams.back() << " answered " << r.status << " " << r.body << "\n";
        return 1;
      }
    }
  }
  std::map<std::string, long> rssWarm;
  std::map<std::string, std::map<std::string, int>> fdsBefore;
  // Each pod opens some descriptors on first use (a store connection for the store, another for
  // the readiness probe, an event loop per HTTP thread): use every pod a little, let the
  // connections close, then count.
  for (const auto& u : opt.urls)
    for (int i = 0; i < 8; ++i) {
      HttpClient http(rsc::member::parse_url(u, &err), 5000);
      http.request("GET", i % 2 ? "/readyz" : "/coord/v1/streams/" + streams[static_cast<std::size_t>(i) % streams.size()], "");
    }
  std::this_thread::sleep_for(std::chrono::seconds(1));
  for (const auto& p : opt.pids) fdsBefore[p] = open_fds(p);

  std::vector<std::unique_ptr<Member>> members;
  const int groups = opt.streams * opt.groupsPerStream;
  for (int i = 0; i < opt.members; ++i) {
    auto m = std::make_unique<Member>();
    m->index = i;
    const int g = i % groups;
    m->stream = streams[static_cast<std::size_t>(g / opt.groupsPerStream)];
    m->group = "g" + std::to_string(g % opt.groupsPerStream);
    m->id = "m" + std::to_string(i);
    members.push_back(std::move(m));
  }
  const auto t0 = Clock::now();
  std::cout << "rsc-soak: " << opt.members << " members in " << groups << " groups on " << opt.streams << " streams of "
            << opt.shards << " shards, " << opt.urls.size() << " pods, " << opt.seconds << " s of churn\n"
            << std::flush;
  std::vector<std::thread> threads;
  for (auto& m : members) threads.emplace_back(member_thread, std::ref(sh), std::ref(*m), opt.seed * 1000 + m->index);
  std::thread admin(admin_thread, std::ref(sh), std::ref(members), std::cref(streams));
  std::thread hostile(hostile_thread, std::ref(sh), std::cref(streams));

  // Progress every 10 s; the warm-up figures once.
  bool warm = false;
  int crashedPods = 0;
  while (since(t0) < opt.seconds) {
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
    if (!warm && since(t0) >= opt.warmupSeconds) {
      warm = true;
      for (const auto& p : opt.pids) rssWarm[p] = rss_kib(p);
    }
    static int lastReport = 0;
    const int t = static_cast<int>(since(t0));
    if (t / 10 != lastReport / 10) {
      lastReport = t;
      long rss = 0;
      for (const auto& p : opt.pids) rss += rss_kib(p);
      std::cout << "  t=" << t << "s heartbeats " << sh.c.heartbeats << " answered " << sh.c.answered << " retry "
                << sh.c.retries << " no-answer " << sh.c.noAnswer << " crashes " << sh.c.crashes << " leaves "
                << sh.c.leaves << " violations " << sh.book.violations() << " pods RSS " << rss / 1024 << " MiB\n"
                << std::flush;
    }
  }
  for (const auto& p : opt.pids)
    if (!alive(p)) ++crashedPods;

  // Settle: no more churn; everyone comes back and heartbeats until every group converges.
  {
    std::lock_guard<std::mutex> lock(sh.wakeMu);
    sh.phase = Phase::Settle;
  }
  sh.wake.notify_all();
  admin.join();
  hostile.join();
  const auto settleStart = Clock::now();
  std::string why = "not checked";
  bool ok = false;
  while (since(settleStart) < opt.settleSeconds && !(ok = converged(sh, members, streams, &why)))
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  const double settleSeconds = since(settleStart);
  std::map<std::string, long> rssEnd;
  for (const auto& p : opt.pids) rssEnd[p] = rss_kib(p);
  {
    std::lock_guard<std::mutex> lock(sh.wakeMu);
    sh.phase = Phase::Stop;
  }
  sh.wake.notify_all();
  for (auto& t : threads) t.join();
  for (auto& m : members) stop_reading(sh, *m);
  // Every client connection is closed now; give the pods a moment to notice before counting.
  std::this_thread::sleep_for(std::chrono::seconds(2));
  std::map<std::string, std::map<std::string, int>> fdsAfter;
  for (const auto& p : opt.pids) {
    fdsAfter[p] = open_fds(p);
    if (!alive(p)) ++crashedPods;
  }

  auto& c = sh.c;
  std::cout << "\n== rsc-soak summary (" << static_cast<int>(since(t0)) << " s)\n"
            << "heartbeats " << c.heartbeats << ": answered " << c.answered << ", RETRY " << c.retries
            << ", no answer " << c.noAnswer << ", REVOKE_PENDING " << c.revokePending << ", SYNC_METADATA "
            << c.syncMetadata << ", FENCED " << c.fenced << ", UNKNOWN " << c.unknown << ", unexpected "
            << c.unexpected << "\n"
            << "churn: joins " << c.joins << ", graceful leaves " << c.leaves << ", crashes " << c.crashes
            << ", self-fences " << c.selfFences << ", members removed by admin " << c.removals << "\n"
            << "admin calls " << c.adminCalls << " (store away: " << c.adminUnavailable << ", wrong answers "
            << c.adminBad << "); malformed requests " << c.badRequests << " (wrong status " << c.badWrong
            << ", left something stored " << c.badStored << ")\n"
            << "I1 (members' view): " << sh.book.takes() << " shard takes, " << sh.book.violations()
            << " violations; epoch regressions " << c.epochRegressions << "\n"
            << "convergence: " << (ok ? "every group converged" : "NOT converged: " + why) << " after "
            << static_cast<int>(settleSeconds * 1000) << " ms of settling\n";
  bool pass = ok && sh.book.violations() == 0 && c.epochRegressions == 0 && c.unexpected == 0 && c.adminBad == 0 &&
              c.badWrong == 0 && c.badStored == 0 && crashedPods == 0 && c.answered > 0;
  for (const auto& p : opt.pids) {
    const double growth = rssWarm[p] > 0 ? 100.0 * (rssEnd[p] - rssWarm[p]) / rssWarm[p] : 0;
    std::cout << "pod " << p << ": RSS " << rssWarm[p] / 1024.0 << " MiB after warm-up, " << rssEnd[p] / 1024.0
              << " MiB at the end (" << (growth >= 0 ? "+" : "") << growth << " %); open fds with no client "
              << total(fdsBefore[p]) << " before, " << total(fdsAfter[p]) << " after" << (alive(p) ? "" : "; NOT RUNNING")
              << "\n";
    for (const auto& [what, n] : fdsAfter[p])
      if (n > fdsBefore[p][what]) std::cout << "  pod " << p << " has " << n - fdsBefore[p][what] << " more " << what << "\n";
    if (rssWarm[p] <= 0 || rssEnd[p] <= 0 || growth > 10.0 || total(fdsAfter[p]) > total(fdsBefore[p])) pass = false;
  }
  for (const auto& [reason, n] : c.retryWhy) std::cout << "  RETRY x" << n << ": " << reason << "\n";
  for (const auto& n : sh.book.examples()) std::cout << "  I1: " << n << "\n";
  for (const auto& n : c.notes) std::cout << "  note: " << n << "\n";
  std::cout << "result: " << (pass ? "PASS" : "FAIL") << "\n";
  return pass ? 0 : 1;
}
