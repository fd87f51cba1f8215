#include "member/runtime.hpp"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <time.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <map>
#include <mutex>
#include <optional>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "member/http_client.hpp"
#include "protocol/codec.hpp"

namespace rsc::member {

using nlohmann::json;
using protocol::HeartbeatStatus;
using store::Value;

int64_t mono_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

std::string Record::field(const std::string& name) const {
  for (const auto& [k, v] : fields)
    if (k == name) return v;
  return {};
}

std::string member_id_from_environment(const std::string& suffix) {
  std::string ip;
  if (const char* p = std::getenv("POD_IP"); p != nullptr && *p) ip = p;
  if (ip.empty()) {
    ifaddrs* list = nullptr;
    if (getifaddrs(&list) == 0) {
      for (ifaddrs* i = list; i != nullptr; i = i->ifa_next) {
        if (i->ifa_addr == nullptr || i->ifa_addr->sa_family != AF_INET) continue;
        const auto* a = reinterpret_cast<const sockaddr_in*>(i->ifa_addr);
        if ((ntohl(a->sin_addr.s_addr) >> 24) == 127) continue;
        char buf[INET_ADDRSTRLEN];
        inet_ntop(AF_INET, &a->sin_addr, buf, sizeof buf);
        ip = buf;
        break;
      }
      freeifaddrs(list);
    }
  }
  if (ip.empty()) ip = "127.0.0.1";
  return ip + ":" + suffix;
}

namespace {

struct ShardState {
  bool revoking = false;    // stop reading; report REVOKED once no worker holds it and inFlight is 0
  bool dropped = false;     // fenced: forget it once the worker lets go, report nothing
  bool busy = false;        // a worker is reading or processing it
  bool needsClaim = true;   // claim what earlier owners (or this member before a fence) left pending
  int inFlight = 0;         // records inside the handler
  std::string lastDeliveredId;
  std::optional<int64_t> pending, lag;  // from XINFO GROUPS, refreshed about once a second
  int64_t infoAtNs = 0;
};

std::vector<Record> entries(const Value& v, int32_t shard) {
  std::vector<Record> out;
  if (v.type != Value::Type::Array) return out;
  for (const auto& e : v.elements) {
    if (e.type != Value::Type::Array || e.elements.size() != 2) continue;
    if (e.elements[1].type != Value::Type::Array) continue;  // deleted entry
    Record r;
    r.shard = shard;
    r.id = e.elements[0].str;
    const auto& f = e.elements[1].elements;
    for (std::size_t i = 0; i + 1 < f.size(); i += 2) r.fields.emplace_back(f[i].str, f[i + 1].str);
    out.push_back(std::move(r));
  }
  return out;
}

}  // namespace

struct Runtime::Impl {
  RuntimeOptions opts;
  Handler handler;
  std::string memberId;

  mutable std::mutex mu;
  std::condition_variable cv;
  std::map<int32_t, ShardState> shards;
  int32_t epoch = 0;
  int32_t metadataVersion = 0;
  int64_t lastOkSentNs = 0;  // self-fence clock: when the last answered heartbeat was sent
  int64_t leaseMs = 15000;
  int64_t intervalMs = 3000;
  bool leaving = false;
  bool left = false;
  bool wake = false;
  bool selfFenced = false;
  // Shard events for the user's callbacks, delivered by the heartbeat thread outside the lock.
  struct Callback {
    enum Kind { Assigned, Revoking, Lost } kind;
    std::vector<int32_t> shards;
  };
  std::vector<Callback> callbacks;
  bool callbacksDue = false;
  int busyWorkers = 0;
  std::atomic<bool> stopping{false};
  Stats stats;
  std::vector<std::thread> threads;

  void log(const std::string& m) const {
    if (opts.log) opts.log("member " + memberId + ": " + m);
  }

  int64_t margin_ms() const {
    return opts.selfFenceMarginMs > 0 ? opts.selfFenceMarginMs : std::max<int64_t>(200, leaseMs / 4);
  }
  // Past this, nothing may be read or started until a heartbeat is answered again.
  int64_t deadline_ns() const {
    if (lastOkSentNs == 0) return 0;
    return lastOkSentNs + (leaseMs - margin_ms()) * 1'000'000;
  }

  // Set once (under mu) before any shard is read, never changed after.
  std::string keyPattern;
  std::string stream_key(int32_t shard) const { return protocol::expand_key_pattern(keyPattern, shard); }

  // The stream's key pattern, from the coordinator; false while it cannot be had.
  bool learn_key_pattern(HttpClient& http) {
    auto reply = http.request("GET", "/coord/v1/streams/" + opts.streamPrefix, "", opts.token);
    if (reply.status != 200) {
      log("cannot learn the stream's key pattern yet (HTTP " + std::to_string(reply.status) + ")");
      return false;
    }
    auto m = protocol::decode_stream_metadata(reply.body);
    if (!m.ok()) {
      log("the coordinator's stream metadata does not decode: " + m.error.message);
      return false;
    }
    std::lock_guard<std::mutex> lock(mu);
    keyPattern = protocol::stream_key_pattern(opts.streamPrefix, m.value->keyStyle);
    log("shard streams are " + keyPattern);
    cv.notify_all();
    return true;
  }

  // ---- heartbeat -------------------------------------------------------------------------

  json build_request(std::set<int32_t>& reportedRevoked) {
    json owned = json::array(), revoking = json::array(), progress = json::array();
    for (auto& [s, st] : shards) {
      if (st.dropped) continue;
      if (st.revoking) {
        const bool done = !st.busy && st.inFlight == 0;
        if (done) reportedRevoked.insert(s);
        revoking.push_back({{"shardIndex", s},
                            {"state", done ? "REVOKED" : "DRAINING"},
                            {"inFlight", st.inFlight},
                            {"ackedAt", nullptr}});
      } else if (!leaving) {
        owned.push_back({{"shardIndex", s}, {"state", "OWNED"}});
      }
      if (!(st.revoking && reportedRevoked.count(s)) && (!st.lastDeliveredId.empty() || st.pending)) {
        json p{{"shardIndex", s}};
        if (!st.lastDeliveredId.empty()) p["lastDeliveredId"] = st.lastDeliveredId;
        if (st.pending) p["pending"] = *st.pending;
        p["lag"] = st.lag ? json(*st.lag) : json(nullptr);
        progress.push_back(std::move(p));
      }
    }
    static std::atomic<int64_t> seq{0};
    return {{"protocolVersion", 1},
            {"requestId", memberId + "-" + std::to_string(++seq) + "-" + std::to_string(mono_ns() % 1000000)},
            {"memberId", memberId},
            {"memberEpoch", leaving ? -1 : epoch},
            {"metadataVersion", metadataVersion},
            {"runtimeConsumerCapacity",
             {{"runtimeMaxConcurrency", opts.concurrency}, {"availableConcurrency", opts.concurrency - busyWorkers}}},
            {"ownedShards", owned},
            {"revokingShards", revoking},
            {"shardProgress", progress}};
  }

  // Under the lock: queues a callback (nothing when no shards or no such callback).
  void queue(Callback::Kind kind, std::vector<int32_t> list) {
    if (list.empty()) return;
    const auto& f = kind == Callback::Assigned ? opts.onAssigned : kind == Callback::Revoking ? opts.onRevoking : opts.onLost;
    if (!f) return;
    callbacks.push_back({kind, std::move(list)});
    callbacksDue = true;
  }
  // Under the lock: the shards being read (neither given up nor dropped).
  std::vector<int32_t> reading() const {
    std::vector<int32_t> out;
    for (const auto& [s, st] : shards)
      if (!st.revoking && !st.dropped) out.push_back(s);
    return out;
  }
  // Heartbeat thread, lock not held: calls what was queued, in order.
  void deliver_callbacks() {
    std::vector<Callback> due;
    {
      std::lock_guard<std::mutex> lock(mu);
      due.swap(callbacks);
      callbacksDue = false;
    }
    for (const auto& c : due) {
      const auto& f = c.kind == Callback::Assigned ? opts.onAssigned : c.kind == Callback::Revoking ? opts.onRevoking : opts.onLost;
      try {
        f(c.shards);
      } catch (const std::exception& e) {
        log(std::string("a shard callback threw: ") + e.what());
      } catch (...) {
        log("a shard callback threw");
      }
    }
  }
  // Under the lock, where the runtime fences itself: everything it reads is lost for now.
  void self_fence() {
    selfFenced = true;
    ++stats.selfFences;
    for (auto& [s, st] : shards) st.needsClaim = true;
    queue(Callback::Lost, reading());
    log("self-fenced: no answered heartbeat for lease minus margin; reading stops");
  }

  // Stop every read and forget every shard (fenced, unknown, or an epoch the coordinator rejects).
  void drop_all(const std::string& why) {
    if (!selfFenced) queue(Callback::Lost, reading());  // a self-fence told of them already
    log("drops all shards and rejoins: " + why);
    ++stats.rejoins;
    for (auto it = shards.begin(); it != shards.end();) {
      if (it->second.busy) {
        it->second.dropped = true;
        it->second.revoking = true;
        ++it;
      } else {
        it = shards.erase(it);
      }
    }
    epoch = 0;
  }

  void apply(const protocol::HeartbeatResponse& r, int64_t sentNs, const std::set<int32_t>& reportedRevoked) {
    switch (r.status) {
      case HeartbeatStatus::OK:
      case HeartbeatStatus::REVOKE_PENDING:
      case HeartbeatStatus::SYNC_METADATA: {
        lastOkSentNs = std::max(lastOkSentNs, sentNs);
        if (selfFenced) {
          selfFenced = false;
          queue(Callback::Assigned, reading());
          log("heartbeat answered again: reading resumes");
        }
        if (r.memberLeaseTtlMs > 0) leaseMs = r.memberLeaseTtlMs;
        if (r.heartbeatIntervalMs > 0) intervalMs = r.heartbeatIntervalMs;
        metadataVersion = std::max(metadataVersion, r.metadataVersion);
        for (int32_t s : reportedRevoked) {
          auto it = shards.find(s);
          if (it != shards.end() && it->second.revoking && !it->second.busy) shards.erase(it);
        }
        if (leaving) {
          bool holding = false;
          for (auto& [s, st] : shards) holding = holding || !st.dropped;
          if (r.status == HeartbeatStatus::OK && !holding) left = true;
          return;
        }
        if (r.memberEpoch > 0) epoch = r.memberEpoch;
        if (!r.assignment) return;
        const std::set<int32_t> target(r.assignment->assignedShards.begin(), r.assignment->assignedShards.end());
        bool changed = false;
        std::vector<int32_t> givingUp, taking;
        for (auto& [s, st] : shards) {
          if (!st.revoking && !target.count(s)) {
            st.revoking = true;  // stop reading it now; REVOKED once drained
            changed = true;
            givingUp.push_back(s);
            log("revoking shard " + std::to_string(s));
          }
        }
        if (r.status != HeartbeatStatus::SYNC_METADATA) {  // SYNC_METADATA: start nothing new
          for (int32_t s : target) {
            if (shards.count(s)) continue;
            shards[s] = ShardState{};
            changed = true;
            taking.push_back(s);
            log("takes shard " + std::to_string(s));
          }
        }
        queue(Callback::Revoking, std::move(givingUp));
        queue(Callback::Assigned, std::move(taking));
        if (changed) wake = true;
        return;
      }
      case HeartbeatStatus::FENCED_MEMBER_EPOCH:
      case HeartbeatStatus::UNKNOWN_MEMBER_ID:
        if (leaving) {
          left = true;
          return;
        }
        drop_all(std::string(protocol::to_string(r.status)) + (r.message ? ": " + *r.message : ""));
        wake = true;
        return;
      case HeartbeatStatus::INVALID_REQUEST:
        if (r.message && r.message->find("memberEpoch") != std::string::npos) {
          if (leaving) {
            left = true;
            return;
          }
          drop_all("INVALID_REQUEST: " + *r.message);
          wake = true;
        } else {
          log("coordinator rejected a heartbeat: " + r.message.value_or(""));
        }
        return;
      default:
        log("heartbeat answered " + std::string(protocol::to_string(r.status)) + ": " + r.message.value_or(""));
        return;
    }
  }

  void heartbeat_loop() {
    std::string err;
    HttpClient http(parse_url(opts.coordinatorUrl, &err), opts.httpTimeoutMs);
    const std::string path = "/coord/v1/streams/" + opts.streamPrefix + "/groups/" + opts.group + "/members/" +
                             memberId + "/heartbeat";
    int64_t backoffMs = 50;
    bool patternKnown = !keyPattern.empty();  // this thread's own copy of "keyPattern is set"
    while (!stopping) {
      deliver_callbacks();  // before the request: a revoked shard goes back only after onRevoking
      std::set<int32_t> reportedRevoked;
      std::string body;
      {
        std::lock_guard<std::mutex> lock(mu);
        if (left) break;
        body = build_request(reportedRevoked).dump();
      }
      HeartbeatEvent ev;
      ev.revokedReported = static_cast<int>(reportedRevoked.size());
      ev.sentNs = mono_ns();
      auto reply = http.request("POST", path, body, opts.token);
      ev.receivedNs = mono_ns();
      ev.httpStatus = reply.status;
      std::optional<protocol::HeartbeatResponse> resp;
      if (reply.status != 0) {
        auto d = protocol::decode_heartbeat_response(reply.body);
        if (d.ok()) resp = std::move(*d.value);
      }
      int64_t waitMs = 0;
      {
        std::lock_guard<std::mutex> lock(mu);
        ++stats.heartbeats;
        const bool answered = resp && resp->status != HeartbeatStatus::RETRY;
        if (!answered) {
          // RETRY or no coordinator: keep the current shards (the self-fence bounds this) and retry.
          ++stats.heartbeatFailures;
          waitMs = std::min(backoffMs, intervalMs);
          backoffMs = std::min<int64_t>(backoffMs * 2, 1000);
          if (stats.heartbeatFailures % 20 == 1)
            log("heartbeat failed (" + (resp ? std::string("RETRY: ") + resp->message.value_or("") : reply.error) +
                "); retrying");
        } else {
          backoffMs = 50;
          apply(*resp, ev.sentNs, reportedRevoked);
          waitMs = wake ? 0 : intervalMs;
          wake = false;
        }
        ev.status = resp ? std::string(protocol::to_string(resp->status)) : "";
        ev.epoch = epoch;
        for (auto& [s, st] : shards)
          if (!st.revoking) ev.owned.push_back(s);
        stats.epoch = epoch;
        stats.owned = ev.owned;
      }
      cv.notify_all();
      if (resp && resp->status != HeartbeatStatus::RETRY && !patternKnown) patternKnown = learn_key_pattern(http);
      if (opts.onHeartbeat) opts.onHeartbeat(ev);
      const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(waitMs);
      std::unique_lock<std::mutex> lock(mu);
      while (!cv.wait_until(lock, until, [&] { return stopping.load() || wake || left || callbacksDue; }) ||
             !(stopping.load() || wake || left)) {
        if (std::chrono::steady_clock::now() >= until) break;
        lock.unlock();  // only callbacks are due (a self-fence): tell the user, keep waiting
        deliver_callbacks();
        lock.lock();
      }
      wake = false;
    }
    deliver_callbacks();
    cv.notify_all();
  }

  // Listens on the group's change channel: a message naming this member makes it heartbeat now
  // instead of at its next interval. Never needed for safety (the heartbeat alone grants shards):
  // while Redis is away or a message is lost, heartbeats keep their interval.
  void notify_loop() {
    store::KeySpace keys;
    keys.ns = opts.redis.ns;
    const std::string channel = keys.notify_channel({opts.streamPrefix, opts.group});
    std::unique_ptr<store::RedisConnection> conn;
    int failures = 0;
    while (!stopping) {
      if (!conn) {
        conn = std::make_unique<store::RedisConnection>(opts.redis);
        auto r = conn->command({"SSUBSCRIBE", channel});
        if (!r.ok() || r.value->is_error()) {
          if (failures++ % 20 == 0)
            log("cannot listen for changes on " + channel + " (" + (r.ok() ? r.value->str : r.error.message) +
                "); heartbeats keep their interval");
          conn.reset();
          for (int i = 0; i < 10 && !stopping; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(50));
          continue;
        }
        failures = 0;
      }
      auto m = conn->next_push(200);
      if (!m.ok()) {
        conn.reset();
        continue;
      }
      if (!m.value->has_value()) continue;
      const Value& v = **m.value;
      if (v.type != Value::Type::Array || v.elements.size() != 3 || v.elements[0].str != "smessage") continue;
      const auto j = json::parse(v.elements[2].str, nullptr, false);
      bool named = false;
      if (j.is_object() && j.contains("members") && j["members"].is_array())
        for (const auto& x : j["members"]) named = named || (x.is_string() && x.get<std::string>() == memberId);
      if (!named) continue;
      {
        std::lock_guard<std::mutex> lock(mu);
        wake = true;
        ++stats.notifications;
      }
      cv.notify_all();
    }
  }

  // ---- data plane ------------------------------------------------------------------------

  // Processes records in order while this member may: the shard is still its own, and the
  // self-fence deadline has not passed (checked with the start time taken first). What is not
  // started stays pending in Redis for whoever reads the shard next.
  bool process(store::RedisConnection& conn, int32_t shard, std::vector<Record>& records) {
    for (auto& rec : records) {
      int64_t start = 0;
      {
        std::lock_guard<std::mutex> lock(mu);
        auto& st = shards[shard];
        if (st.revoking || st.dropped || stopping) return false;
        start = mono_ns();
        if (start >= deadline_ns()) {
          st.needsClaim = true;  // our own pending entries must be claimed after we recover
          if (!selfFenced) {
            self_fence();
            cv.notify_all();  // the heartbeat thread tells the user (onLost)
          }
          return false;
        }
        ++st.inFlight;
      }
      try {
        handler(rec, start);
      } catch (...) {
        // Not acked: the record stays pending and is claimed again (by this member or the next).
        std::string why = "an exception";
        try {
          throw;
        } catch (const std::exception& e) {
          why = e.what();
        } catch (...) {
        }
        log("handler threw on shard " + std::to_string(shard) + " record " + rec.id + ": " + why);
        std::lock_guard<std::mutex> lock(mu);
        auto& st = shards[shard];
        --st.inFlight;
        st.needsClaim = true;
        return false;
      }
      auto ack = conn.command({"XACK", stream_key(shard), opts.group, rec.id});
      const bool acked = ack.ok() && !ack.value->is_error();
      if (!acked)
        log("XACK failed on shard " + std::to_string(shard) + " record " + rec.id +
            (ack.ok() ? ": " + ack.value->str : ": " + ack.error.message) +
            "; it is processed again before anything after it on this shard");
      std::lock_guard<std::mutex> lock(mu);
      auto& st = shards[shard];
      --st.inFlight;
      st.lastDeliveredId = rec.id;
      ++stats.processed;
      if (!acked) {
        // The rest of the batch waits: the claim re-reads this member's pending entries in id
        // order, so this record comes again before any later record of its keys.
        st.needsClaim = true;
        return false;
      }
    }
    return true;
  }

  // Records another consumer of this group still has pending on a shard this member owns are
  // leftovers of an earlier owner (for example one that was fenced while a read was outstanding,
  // after this member's first claim): claim and process them. Only entries idle for longer than
  // any read this runtime blocks in, so nothing a live reader could still be handed is taken.
  void sweep_leftovers(store::RedisConnection& conn, int32_t shard) {
    const std::string minIdle = std::to_string(opts.maxBlockMs + 2000);
    auto p = conn.command({"XPENDING", stream_key(shard), opts.group, "IDLE", minIdle, "-", "+", "100"});
    if (!p.ok() || p.value->type != Value::Type::Array || p.value->elements.empty()) return;
    store::Command claimCmd{"XCLAIM", stream_key(shard), opts.group, memberId, minIdle};
    for (const auto& e : p.value->elements)
      if (e.type == Value::Type::Array && e.elements.size() >= 2 && e.elements[1].str != memberId)
        claimCmd.push_back(e.elements[0].str);
    if (claimCmd.size() == 5) return;
    auto c = conn.command(claimCmd);
    if (!c.ok() || c.value->type != Value::Type::Array) return;
    auto recs = entries(*c.value, shard);
    if (!recs.empty()) log("claimed " + std::to_string(recs.size()) + " leftover record(s) on shard " + std::to_string(shard));
    process(conn, shard, recs);
  }

  // pending and lag of this group on each shard, for the coordinator's metrics (XINFO GROUPS).
  void refresh_progress(store::RedisConnection& conn, const std::vector<int32_t>& mine) {
    const int64_t now = mono_ns();
    for (int32_t s : mine) {
      {
        std::lock_guard<std::mutex> lock(mu);
        if (now - shards[s].infoAtNs < 1'000'000'000) continue;
        shards[s].infoAtNs = now;
      }
      sweep_leftovers(conn, s);
      auto r = conn.command({"XINFO", "GROUPS", stream_key(s)});
      if (!r.ok() || r.value->type != Value::Type::Array) continue;
      for (const auto& g : r.value->elements) {
        std::optional<int64_t> pending, lag;
        bool ours = false;
        for (std::size_t i = 0; i + 1 < g.elements.size(); i += 2) {
          const auto& k = g.elements[i].str;
          const auto& v = g.elements[i + 1];
          if (k == "name") ours = v.str == opts.group;
          if (k == "pending" && v.type == Value::Type::Integer) pending = v.integer;
          if (k == "lag" && v.type == Value::Type::Integer) lag = v.integer;
        }
        if (!ours) continue;
        std::lock_guard<std::mutex> lock(mu);
        shards[s].pending = pending;
        shards[s].lag = lag;
      }
    }
  }

  void ensure_group(store::RedisConnection& conn, int32_t shard) {
    // From id 0: records added before any member existed are delivered too.
    auto r = conn.command({"XGROUP", "CREATE", stream_key(shard), opts.group, "0", "MKSTREAM"});
    if (r.ok() && r.value->is_error() && r.value->str.rfind("BUSYGROUP", 0) != 0)
      log("XGROUP CREATE on shard " + std::to_string(shard) + ": " + r.value->str);
  }

  // Takes over what earlier owners (or this member, before a fence) left pending.
  bool claim(store::RedisConnection& conn, int32_t shard) {
    ensure_group(conn, shard);
    std::string cursor = "0-0";
    do {
      auto r = conn.command({"XAUTOCLAIM", stream_key(shard), opts.group, memberId, "0", cursor, "COUNT",
                             std::to_string(opts.readCount)});
      if (!r.ok() || r.value->is_error() || r.value->type != Value::Type::Array || r.value->elements.size() < 2)
        return false;
      cursor = r.value->elements[0].str;
      auto recs = entries(r.value->elements[1], shard);
      if (!process(conn, shard, recs)) return false;
    } while (cursor != "0-0" && !stopping);
    return true;
  }

  // A worker reads all the free shards that fall to it (shard % concurrency) in one blocking
  // XREADGROUP, so an idle shard never holds up a busy one; a shard is read by one worker at a time
  // and its records are processed in order.
  void worker_loop(int index) {
    auto ropts = opts.redis;
    ropts.commandTimeoutMs = opts.maxBlockMs + 2000;
    store::RedisConnection conn(ropts);
    const int n = std::max(1, opts.concurrency);
    while (!stopping) {
      std::vector<int32_t> mine, toClaim;
      int64_t deadline = 0;
      {
        std::unique_lock<std::mutex> lock(mu);
        deadline = deadline_ns();
        if (keyPattern.empty()) {
          // Nothing is read before the stream's key names are known.
        } else if (mono_ns() < deadline) {
          for (auto& [s, st] : shards) {
            if (st.revoking || st.dropped || st.busy || s % n != index) continue;
            st.busy = true;
            mine.push_back(s);
            if (st.needsClaim) toClaim.push_back(s);
          }
          if (!mine.empty()) ++busyWorkers;
        } else if (lastOkSentNs != 0 && !selfFenced) {
          self_fence();
          cv.notify_all();  // the heartbeat thread tells the user (onLost)
        }
        if (mine.empty()) {
          cv.wait_for(lock, std::chrono::milliseconds(20));
          continue;
        }
      }
      std::set<int32_t> readable(mine.begin(), mine.end());
      for (int32_t s : toClaim) {
        if (claim(conn, s)) {
          std::lock_guard<std::mutex> lock(mu);
          shards[s].needsClaim = false;
        } else {
          readable.erase(s);  // try again on the next round
        }
      }
      // BLOCK never outlasts the self-fence deadline, and is capped so a revoke is not held up.
      const int64_t leftMs = (deadline - mono_ns()) / 1'000'000 - 20;
      const int64_t block = std::min(opts.maxBlockMs, leftMs);
      if (!readable.empty() && block >= 1) {
        store::Command cmd{"XREADGROUP", "GROUP", opts.group, memberId, "COUNT", std::to_string(opts.readCount),
                           "BLOCK", std::to_string(block), "STREAMS"};
        for (int32_t s : readable) cmd.push_back(stream_key(s));
        for (std::size_t i = 0; i < readable.size(); ++i) cmd.push_back(">");
        auto r = conn.command(cmd);
        if (r.ok() && r.value->type == Value::Type::Array) {
          for (const auto& streamReply : r.value->elements) {
            if (streamReply.type != Value::Type::Array || streamReply.elements.size() != 2) continue;
            const std::string& key = streamReply.elements[0].str;
            for (int32_t s : readable) {
              if (stream_key(s) != key) continue;
              auto recs = entries(streamReply.elements[1], s);
              process(conn, s, recs);
            }
          }
        } else if (r.ok() && r.value->is_error()) {
          log("XREADGROUP: " + r.value->str);
          std::lock_guard<std::mutex> lock(mu);
          for (int32_t s : readable) shards[s].needsClaim = true;  // e.g. NOGROUP: create it again
        } else if (!r.ok()) {
          // Redis may have delivered records before the reply was lost: claim our own pending.
          log("redis: " + r.error.message);
          {
            std::lock_guard<std::mutex> lock(mu);
            for (int32_t s : readable) shards[s].needsClaim = true;
          }
          std::this_thread::sleep_for(std::chrono::milliseconds(100));
        }
      } else if (readable.empty()) {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
      refresh_progress(conn, mine);
      {
        std::lock_guard<std::mutex> lock(mu);
        for (int32_t s : mine) {
          auto it = shards.find(s);
          if (it == shards.end()) continue;
          it->second.busy = false;
          if (it->second.dropped && it->second.inFlight == 0) {
            shards.erase(it);
          } else if (it->second.revoking && it->second.inFlight == 0) {
            wake = true;  // drained: report REVOKED at once
          }
        }
        --busyWorkers;
      }
      cv.notify_all();
    }
  }
};

Runtime::Runtime(RuntimeOptions opts, Handler handler) : impl_(std::make_unique<Impl>()) {
  impl_->opts = std::move(opts);
  impl_->handler = std::move(handler);
  impl_->keyPattern = impl_->opts.streamKeyPattern;
  impl_->memberId =
      impl_->opts.memberId.empty() ? member_id_from_environment(std::to_string(impl_->opts.concurrency)) : impl_->opts.memberId;
}

Runtime::~Runtime() {
  impl_->stopping = true;
  impl_->cv.notify_all();
  for (auto& t : impl_->threads)
    if (t.joinable()) t.join();
}

void Runtime::start() {
  impl_->log("starts: stream " + impl_->opts.streamPrefix + ", group " + impl_->opts.group + ", " +
             std::to_string(impl_->opts.concurrency) + " worker(s)");
  impl_->threads.emplace_back([this] { impl_->heartbeat_loop(); });
  if (impl_->opts.listenForChanges) impl_->threads.emplace_back([this] { impl_->notify_loop(); });
  for (int i = 0; i < std::max(1, impl_->opts.concurrency); ++i)
    impl_->threads.emplace_back([this, i] { impl_->worker_loop(i); });
}

bool Runtime::shutdown(int64_t timeoutMs) {
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    impl_->leaving = true;
    impl_->queue(Impl::Callback::Revoking, impl_->reading());
    for (auto& [s, st] : impl_->shards) st.revoking = true;
    impl_->wake = true;
  }
  impl_->log("leaving: draining and handing every shard back");
  impl_->cv.notify_all();
  bool ok = false;
  {
    std::unique_lock<std::mutex> lock(impl_->mu);
    ok = impl_->cv.wait_for(lock, std::chrono::milliseconds(timeoutMs), [&] { return impl_->left; });
  }
  impl_->stopping = true;
  impl_->cv.notify_all();
  for (auto& t : impl_->threads)
    if (t.joinable()) t.join();
  impl_->threads.clear();
  impl_->log(ok ? "left the group" : "leave timed out; the coordinator will expire this member");
  return ok;
}

Runtime::Stats Runtime::stats() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->stats;
}

const std::string& Runtime::member_id() const { return impl_->memberId; }

}  // namespace rsc::member
