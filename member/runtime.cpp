#include "member/runtime.hpp"
#include "redis/connection.hpp"
#include "redis/keys.hpp"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <mutex>
#include <nlohmann/json.hpp>
#include <cstdio>
#include <random>
#include <thread>

#include "member/heartbeat_client.hpp"
#include "member/membership.hpp"
#include "member/shard_reader.hpp"

namespace rsc::member {

using nlohmann::json;
using store::Value;

int64_t mono_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

std::string dead_letter_key(const std::string& ns, const std::string& streamPrefix, const std::string& group) {
  store::KeySpace keys;
  keys.ns = ns;
  return keys.dead_letters({streamPrefix, group});
}

namespace {
std::string incarnation() {
  std::random_device rd;
  char buf[17];
  snprintf(buf, sizeof buf, "%08x%08x", rd(), rd());
  return buf;
}
}  // namespace

std::string member_id_from_environment() {
  // The host's name (a pod's name in Kubernetes), the process id and a random part: unique per
  // process, so that two consumers on one host never share an id (and fence each other), and an
  // operator reading a group sees where each member runs.
  char host[256] = {};
  std::string name;
  if (::gethostname(host, sizeof host - 1) == 0) name = host;
  for (char& c : name) {
    const bool ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' ||
                    c == '_' || c == '-';
    if (!ok) c = '-';
  }
  if (name.size() > 96) name.resize(96);
  if (name.empty()) name = address_from_environment();
  return name + ":" + std::to_string(::getpid()) + ":" + incarnation().substr(0, 6);
}

std::string address_from_environment() {
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
  return ip;
}

// The I/O shell around the membership machine: one heartbeat thread, one notification listener,
// `concurrency` worker threads, all calling the machine under one lock. Every decision about the
// membership (statuses, epochs, the self-fence clock, what may be read) is the machine's.
struct Runtime::Impl {
  RuntimeOptions opts;
  Handler handler;
  std::string memberId;

  mutable std::mutex mu;
  std::condition_variable cv;
  std::unique_ptr<Membership> m;  // guarded by mu
  uint64_t eventsSeen = 0;        // guarded by mu: m->events_queued() when last announced
  std::atomic<bool> stopping{false};
  std::vector<std::thread> threads;
  // Per worker: written to when its read must return at once (Membership::take_interrupts).
  std::vector<int> interruptFds;
  // Set once (under mu) before any shard is read, never changed after.
  std::string keyPattern;
  std::string deadLetterKey;  // set before the threads start

  ~Impl() {
    for (int fd : interruptFds)
      if (fd >= 0) ::close(fd);
  }

  std::string stream_key(int32_t shard) const { return protocol::expand_key_pattern(keyPattern, shard); }

  void log(const std::string& line) const {
    if (opts.log) opts.log("member " + memberId + ": " + line);
  }
  // Under the lock: what the machine has to say, and a wake-up for the heartbeat thread when it
  // has shard events for the user (a worker noticed a self-fence).
  void after_machine() {
    for (const auto& line : m->take_log()) log(line);
    for (int w : m->take_interrupts()) {
      if (w < 0 || static_cast<std::size_t>(w) >= interruptFds.size() || interruptFds[w] < 0) continue;
      const uint64_t one = 1;
      [[maybe_unused]] const ssize_t n = ::write(interruptFds[w], &one, sizeof one);  // fails only when already signalled
    }
    if (m->events_queued() != eventsSeen) {  // only new ones: idle workers must not wake each other
      eventsSeen = m->events_queued();
      cv.notify_all();
    }
  }

  // Heartbeat thread, lock not held: the user's callbacks, in order. onRevoking returns before
  // the revoked shards are reported, because this thread sends the next request only after.
  void deliver_events() {
    std::vector<ShardEvent> due;
    {
      std::lock_guard<std::mutex> lock(mu);
      due = m->take_events();
    }
    for (const auto& e : due) {
      const auto& f = e.kind == ShardEvent::Kind::Assigned   ? opts.onAssigned
                      : e.kind == ShardEvent::Kind::Revoking ? opts.onRevoking
                                                             : opts.onLost;
      if (!f) continue;
      try {
        f(e.shards);
      } catch (const std::exception& ex) {
        log(std::string("a shard callback threw: ") + ex.what());
      } catch (...) {
        log("a shard callback threw");
      }
    }
  }

  bool learn_key_pattern(HeartbeatClient& client) {
    std::string why;
    auto p = client.key_pattern(&why);
    if (!p) {
      log("cannot learn the stream's key pattern yet (" + why + ")");
      return false;
    }
    std::lock_guard<std::mutex> lock(mu);
    keyPattern = *p;
    log("shard streams are " + keyPattern);
    cv.notify_all();
    return true;
  }

  // ---- heartbeat -------------------------------------------------------------------------

  void heartbeat_loop() {
    TokenSource token{opts.token, opts.tokenFile};
    if (const auto e = token.load(); !e.empty()) log(e + " (read again when the coordinator refuses a call)");
    HeartbeatClient client(opts.coordinatorUrl, opts.httpTimeoutMs, std::move(token), opts.streamPrefix, opts.group,
                           memberId, opts.coordinatorTls);
    bool patternKnown = !keyPattern.empty();  // this thread's own copy of "keyPattern is set"
    bool reconnect = false;                   // the machine asked for a new connection (Reaction::reconnect)
    std::unique_ptr<store::RedisClient> probe;   // checks Redis answers before a join
    while (!stopping) {
      deliver_events();  // before the request: a revoked shard goes back only after onRevoking
      protocol::HeartbeatRequest req;
      bool mustProbe = false;
      {
        std::lock_guard<std::mutex> lock(mu);
        if (m->left() || !m->fatal().empty()) break;
        mustProbe = m->must_probe();
        if (!mustProbe) req = m->next_request(mono_ns());
        after_machine();
      }
      if (mustProbe) {
        if (!probe) probe = std::make_unique<store::RedisClient>(opts.redis);
        const auto pong = probe->command({"PING"});
        const bool answered = pong.ok() && !pong.value->is_error();
        const int64_t wait = data_plane(answered, pong.ok() ? pong.value->str : pong.error.message);
        if (answered) probe.reset();  // not needed again unless the member steps out
        if (wait > 0) {
          std::unique_lock<std::mutex> lock(mu);
          cv.wait_for(lock, std::chrono::milliseconds(wait), [&] { return stopping.load() || m->left(); });
        }
        continue;
      }
      HeartbeatEvent ev;
      for (const auto& r : req.revokingShards) ev.revokedReported += r.state == protocol::ShardAssignmentState::REVOKED;
      std::string target;
      {
        std::lock_guard<std::mutex> lock(mu);
        target = m->coordinator();
      }
      ev.sentNs = mono_ns();
      auto answer = client.heartbeat(req, target, std::exchange(reconnect, false));
      ev.receivedNs = mono_ns();
      ev.httpStatus = answer.httpStatus;
      ev.coordinator = target;
      Membership::Reaction reaction;
      {
        std::lock_guard<std::mutex> lock(mu);
        reaction = answer.response ? m->on_response(*answer.response, ev.sentNs, answer.owner)
                                   : m->on_no_answer(answer.error + " from " + target, ev.receivedNs);
        reconnect = reaction.reconnect;
        after_machine();
        ev.status = answer.response ? std::string(protocol::to_string(answer.response->status)) : "";
        ev.epoch = m->epoch();
        ev.owned = m->owned();
      }
      cv.notify_all();
      std::string fatal;
      {
        std::lock_guard<std::mutex> lock(mu);
        fatal = m->fatal();
      }
      if (!fatal.empty()) {
        deliver_events();  // onLost first
        if (opts.onHeartbeat) opts.onHeartbeat(ev);
        log("must stop: " + fatal);
        if (opts.onFatal) opts.onFatal(fatal);
        break;
      }
      if (reaction.answered && !patternKnown) patternKnown = learn_key_pattern(client);
      if (opts.onHeartbeat) opts.onHeartbeat(ev);
      const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(reaction.waitMs);
      std::unique_lock<std::mutex> lock(mu);
      auto called = [&] { return stopping.load() || m->wake_pending() || m->left(); };
      while (!cv.wait_until(lock, until, [&] { return called() || m->events_due(); }) || !called()) {
        if (std::chrono::steady_clock::now() >= until) break;
        lock.unlock();  // only shard events are due (a self-fence): tell the user, keep waiting
        deliver_events();
        lock.lock();
      }
      m->take_wake();
    }
    deliver_events();
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
    store::RedisClient router(opts.redis);  // which node serves the channel (a cluster's slot owner)
    FailurePace pace(100, 5000);  // a Redis that refuses this member: a line, then a summary per 30 s
    while (!stopping) {
      if (!conn) {
        auto where = router.options_for_key(channel);
        store::Result<Value> r = where.ok() ? store::Result<Value>::failure(store::ErrorKind::Retryable, "")
                                            : store::Result<Value>::failure(where.error);
        if (where.ok()) {
          conn = std::make_unique<store::RedisConnection>(*where.value);
          r = conn->command({"SSUBSCRIBE", channel});
        }
        if (!r.ok() || r.value->is_error()) {
          router.forget_map();  // e.g. MOVED: the channel's slot has another master now
          const auto step = pace.failed("cannot listen for changes on " + channel + " (heartbeats keep their interval)",
                                        r.ok() ? r.value->str : r.error.message, mono_ns());
          if (!step.say.empty()) log(step.say);
          conn.reset();
          pause(step.waitMs);
          continue;
        }
        if (const auto line = pace.recovered("listening for changes on " + channel, mono_ns()); !line.empty()) log(line);
      }
      auto msg = conn->next_push(200);
      if (!msg.ok()) {
        conn.reset();
        router.forget_map();
        continue;
      }
      if (!msg.value->has_value()) continue;
      const Value& v = **msg.value;
      if (v.type == Value::Type::Array && !v.elements.empty() && v.elements[0].str == "sunsubscribe") {
        conn.reset();  // the channel's slot moved (a cluster failover or resharding): subscribe there
        router.forget_map();
        continue;
      }
      if (v.type != Value::Type::Array || v.elements.size() != 3 || v.elements[0].str != "smessage") continue;
      const auto j = json::parse(v.elements[2].str, nullptr, false);
      bool named = false;
      if (j.is_object() && j.contains("members") && j["members"].is_array())
        for (const auto& x : j["members"]) named = named || (x.is_string() && x.get<std::string>() == memberId);
      if (!named) continue;
      {
        std::lock_guard<std::mutex> lock(mu);
        m->on_notification();
      }
      cv.notify_all();
    }
  }

  // ---- data plane ------------------------------------------------------------------------

  // Processes records in order while the machine allows each one (the shard is still this
  // member's and the self-fence deadline has not passed, checked at the start time the handler
  // gets). What is not started stays pending in Redis for whoever reads the shard next.
  bool process(ShardReader& reader, int32_t shard, const std::vector<Record>& records) {
    for (std::size_t i = 0; i < records.size(); ++i) {
      const Record& rec = records[i];
      std::optional<int64_t> start;
      std::size_t late = 0;
      {
        std::lock_guard<std::mutex> lock(mu);
        if (stopping) return false;
        const int64_t now = mono_ns();
        start = m->begin_record(shard, now);
        if (!start) late = m->not_started(shard, records.size() - i, now);
        after_machine();
      }
      if (late > 0) left_after_loss(shard, records, i);
      if (!start) return false;
      // A record delivered more often than allowed failed its last attempt before a crash or a
      // handover: it goes to the dead-letter stream without another.
      std::optional<std::string> failure;
      const bool tooOften = over_deliveries(rec.deliveries, opts.retry);
      bool deadLetterNow = tooOften;
      if (tooOften) failure = "delivered " + std::to_string(rec.deliveries) + " times";
      try {
        if (!failure) handler(rec, *start);
      } catch (const DeadLetterNow& e) {
        failure = e.what(), deadLetterNow = true;
      } catch (const std::exception& e) {
        failure = e.what();
      } catch (...) {
        failure = "an exception";
      }
      if (failure) {
        if (!failed(reader, shard, rec, *failure, deadLetterNow, !tooOften)) return false;
        continue;
      }
      const std::string ackError = reader.ack(shard, rec.id);
      if (!ackError.empty())
        log("XACK failed on shard " + std::to_string(shard) + " record " + rec.id + ": " + ackError +
            "; it is processed again before anything after it on this shard");
      std::lock_guard<std::mutex> lock(mu);
      if (!m->record_done(shard, rec.id, ackError.empty())) return false;
    }
    return true;
  }

  // A read that went out in time came back after the shard stopped being ours (the process was
  // paused in between): its records stay pending here and the next owner claims them later, after
  // records it read meanwhile; the operator hears of it, the application too (onLeftPending).
  void left_after_loss(int32_t shard, const std::vector<Record>& records, std::size_t from) {
    std::vector<std::string> ids;
    for (std::size_t k = from; k < records.size(); ++k) ids.push_back(records[k].id);
    log(std::to_string(ids.size()) + " record(s) read on shard " + std::to_string(shard) + " (" + ids.front() +
        (ids.size() > 1 ? " .. " + ids.back() : std::string()) +
        ") came back after the shard stopped being this member's (was the process paused?): not started, "
        "left pending for its next owner (out of order there if it already read past them)");
    if (opts.onLeftPending) opts.onLeftPending(shard, ids);
  }

  // The handler failed (or the record must not be tried again): retried after a backoff, or
  // written to the dead-letter stream and only then acked (a crash between the two leaves a
  // duplicate dead letter, never a loss). false: the shard's batch stops here.
  bool failed(ShardReader& reader, int32_t shard, const Record& rec, const std::string& error, bool now, bool attempted) {
    const auto verdict = judge_failure(rec.deliveries, now, opts.retry);
    const std::string where = "shard " + std::to_string(shard) + " record " + rec.id + " (delivery " +
                              std::to_string(rec.deliveries) + " of " + std::to_string(opts.retry.maxDeliveries) + ")";
    int64_t retryInMs = verdict.retryInMs;
    if (verdict.deadLetter) {
      const auto atMs = std::chrono::duration_cast<std::chrono::milliseconds>(
                            std::chrono::system_clock::now().time_since_epoch()).count();
      std::string e = reader.dead_letter(deadLetterKey, rec, error, memberId, atMs, opts.retry.deadLetterMaxLen);
      if (e.empty()) e = reader.ack(shard, rec.id);
      if (e.empty()) {
        log("dead-lettered " + where + " to " + deadLetterKey + ": " + error);
        std::lock_guard<std::mutex> lock(mu);
        return m->record_dead_lettered(shard, rec.id, attempted);
      }
      log("could not dead-letter " + where + ": " + e + "; tried again");
      retryInMs = std::max<int64_t>(1, opts.retry.backoffMs);
    } else {
      log("handler failed on " + where + ": " + error + "; tried again in " + std::to_string(retryInMs) + "ms");
    }
    std::lock_guard<std::mutex> lock(mu);
    m->record_failed(shard, mono_ns(), retryInMs);
    return false;
  }

  // Takes over what earlier owners (or this member, before a fence) left pending.
  // A Redis call failed in a way that says this member cannot read at all: the machine's
  // backoff before this worker tries again (it lets its shards go first), 0 for any other answer.
  // `sentNs`: when the failed call was sent (0: now).
  int64_t data_plane(bool answered, const std::string& why = {}, int64_t sentNs = 0) {
    std::lock_guard<std::mutex> lock(mu);
    int64_t wait = 0;
    if (answered)
      m->data_plane_ok(mono_ns());
    else
      wait = m->data_plane_failed(why, mono_ns(), sentNs);
    after_machine();
    return wait;
  }

  // Waits up to `ms`, less when the runtime stops.
  void pause(int64_t ms) {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait_for(lock, std::chrono::milliseconds(ms), [&] { return stopping.load(); });
  }

  bool claim(ShardReader& reader, int32_t shard, int64_t& backoffMs) {
    // From id 0: records added before any member existed are delivered too.
    bool lost = false;
    if (auto e = reader.ensure_group(shard, &lost); !e.empty()) {
      if (cannot_read(lost, e)) {
        backoffMs = data_plane(false, e);
        return false;
      }
      if (ShardReader::no_stream(e)) {
        bool first = false;
        {
          std::lock_guard<std::mutex> lock(mu);
          first = m->stream_missing(shard, mono_ns());
        }
        if (first)
          log("shard " + std::to_string(shard) + ": its stream " + stream_key(shard) +
              " does not exist: nothing to read (the coordinator creates the streams of shards in use); looked at again every " +
              std::to_string(Membership::kMissingStreamRetryMs) + "ms");
        return false;
      }
      log("XGROUP CREATE on shard " + std::to_string(shard) + ": " + e);
    }
    // The first page holds one record: the one a failure (or a crash, or a handover) left first,
    // and this claim is its next delivery, which Redis counts. The records behind it were not
    // tried since their own delivery: they are claimed with JUSTID, which leaves their counts
    // alone, so a failing record never uses up the retry allowance of the records after it.
    std::string cursor = "0-0";
    int count = 1;
    bool justIds = false;
    do {
      auto page = reader.autoclaim(shard, cursor, count, justIds);
      if (!page.ok) {
        if (cannot_read(page.lost, page.error)) backoffMs = data_plane(false, page.error);
        return false;
      }
      cursor = page.cursor;
      count = opts.readCount;
      justIds = true;
      if (!process(reader, shard, page.records)) return false;
    } while (cursor != "0-0" && !stopping);
    return true;
  }

  // About once a second per shard: records another consumer of this group still has pending on a
  // shard this member owns are leftovers of an earlier owner (for example one fenced while a read
  // was outstanding, after this member's first claim): claim and process them, only once idle
  // for longer than any read this runtime blocks in. Then pending and lag for the coordinator.
  void refresh_progress(ShardReader& reader, const std::vector<int32_t>& held) {
    std::vector<int32_t> due;
    {
      std::lock_guard<std::mutex> lock(mu);
      due = m->progress_due(held, mono_ns());
    }
    for (int32_t s : due) {
      const int64_t sentNs = mono_ns();
      auto leftovers = reader.claim_leftovers(s, opts.maxBlockMs + 2000);
      if (!leftovers.empty())
        log("claimed " + std::to_string(leftovers.size()) + " leftover record(s) on shard " + std::to_string(s));
      process(reader, s, leftovers);
      if (auto p = reader.progress(s)) {
        std::lock_guard<std::mutex> lock(mu);
        m->set_progress(s, p->pending, p->lag);
      }
      // A silent Redis is counted from this call's send, as a read's is.
      if (auto e = reader.take_unanswered(); !e.empty() && cannot_read(true, e)) {
        data_plane(false, e, sentNs);
        break;
      }
    }
  }

  // A worker reads all the free shards that fall to it in one blocking XREADGROUP, so an idle
  // shard never holds up a busy one; a shard is read by one worker at a time, its records in order.
  void worker_loop(int index) {
    auto ropts = opts.redis;
    ropts.commandTimeoutMs = opts.maxBlockMs + 2000;
    ShardReader reader(ropts, opts.group, memberId, [this](int32_t s) { return stream_key(s); });
    if (static_cast<std::size_t>(index) < interruptFds.size()) reader.set_interrupt_fd(interruptFds[index]);
    while (!stopping) {
      Membership::Lease lease;
      {
        std::unique_lock<std::mutex> lock(mu);
        if (!keyPattern.empty()) {  // nothing is read before the stream's key names are known
          lease = m->take_shards(index, mono_ns());
          after_machine();
        }
        if (lease.shards.empty()) {
          cv.wait_for(lock, std::chrono::milliseconds(20));
          continue;
        }
      }
      std::vector<int32_t> readable;
      int64_t backoffMs = 0;  // Redis cannot be read: wait this long, shards let go, before trying again
      for (int32_t s : lease.shards) {
        if (backoffMs > 0) break;
        const bool mustClaim = std::find(lease.toClaim.begin(), lease.toClaim.end(), s) != lease.toClaim.end();
        if (!mustClaim) {
          readable.push_back(s);
        } else if (claim(reader, s, backoffMs)) {
          std::lock_guard<std::mutex> lock(mu);
          m->claimed(s);
          m->data_plane_ok(mono_ns());
          after_machine();
          readable.push_back(s);
        }  // else: claimed again on the next round
      }
      const int64_t block = Membership::block_ms(lease, mono_ns(), opts.maxBlockMs);
      if (backoffMs > 0) {
        // Nothing read this round: the shards are let go below, then the worker waits.
      } else if (!readable.empty() && block >= 1) {
        const int64_t readSentNs = mono_ns();
        auto r = reader.read(readable, opts.readCount, block,
                             [&] { return Membership::block_ms(lease, mono_ns(), opts.maxBlockMs); });
        if (r.outcome == ShardReader::Read::Outcome::Records) {
          data_plane(true);
          for (std::size_t i = 0; i < readable.size(); ++i) process(reader, readable[i], r.batches[i]);
        } else {
          // Refused (e.g. NOGROUP: create it again), or lost after Redis may have delivered
          // records: claim this member's own pending entries before reading on.
          {
            std::lock_guard<std::mutex> lock(mu);
            for (int32_t s : readable) m->needs_claim(s);
          }
          if (cannot_read(r.outcome == ShardReader::Read::Outcome::Lost, r.error))
            backoffMs = data_plane(false, r.error, readSentNs);  // said by the machine, once and then in summaries
          else
            log("XREADGROUP: " + r.error);
        }
      } else if (readable.empty()) {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
      if (backoffMs == 0) refresh_progress(reader, lease.shards);
      {
        std::lock_guard<std::mutex> lock(mu);
        m->release(lease.shards);
      }
      cv.notify_all();
      if (backoffMs > 0) pause(backoffMs);
    }
  }
};

Runtime::Runtime(RuntimeOptions opts, Handler handler) : impl_(std::make_unique<Impl>()) {
  impl_->opts = std::move(opts);
  impl_->handler = std::move(handler);
  impl_->keyPattern = impl_->opts.streamKeyPattern;
  impl_->deadLetterKey = impl_->opts.deadLetterKey.empty()
                             ? dead_letter_key(impl_->opts.redis.ns, impl_->opts.streamPrefix, impl_->opts.group)
                             : impl_->opts.deadLetterKey;
  impl_->memberId =
      !impl_->opts.memberId.empty() && impl_->opts.instanceId.empty() ? impl_->opts.memberId
      // A static member is its instance: each process start is a new member id of it, so that the
      // coordinator gives it back its shards with no rebalance (a reused id needs a new epoch), and
      // so that two processes of one instance never share an id: the second is then refused
      // (UNRELEASED_INSTANCE_ID) while the first lives, and stops (a given memberId is only the id's
      // first part).
      : !impl_->opts.instanceId.empty()
          ? (impl_->opts.memberId.empty() ? impl_->opts.instanceId : impl_->opts.memberId).substr(0, 119) + "." +
                incarnation().substr(0, 8)
                                        : member_id_from_environment();
  Membership::Options mo;
  mo.memberId = impl_->memberId;
  mo.incarnation = incarnation();
  mo.concurrency = std::max(1, impl_->opts.concurrency);
  mo.selfFenceMarginMs = impl_->opts.selfFenceMarginMs;
  mo.instanceId = impl_->opts.instanceId;
  mo.rackId = impl_->opts.rackId;
  mo.coordinatorUrl = impl_->opts.coordinatorUrl;
  mo.followOwner = impl_->opts.followOwner;
  mo.checkDataPlane = impl_->opts.checkRedis;
  impl_->m = std::make_unique<Membership>(mo);
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
  if (impl_->interruptFds.empty())
    for (int i = 0; i < std::max(1, impl_->opts.concurrency); ++i)
      impl_->interruptFds.push_back(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  impl_->threads.emplace_back([this] { impl_->heartbeat_loop(); });
  if (impl_->opts.listenForChanges) impl_->threads.emplace_back([this] { impl_->notify_loop(); });
  for (int i = 0; i < std::max(1, impl_->opts.concurrency); ++i)
    impl_->threads.emplace_back([this, i] { impl_->worker_loop(i); });
}

bool Runtime::shutdown(int64_t timeoutMs) {
  bool fatal = false;
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    fatal = !impl_->m->fatal().empty();
    if (!fatal) impl_->m->leave();  // a member refused for good has nothing to hand back
    impl_->after_machine();
  }
  impl_->cv.notify_all();
  bool ok = false;
  if (!fatal) {
    std::unique_lock<std::mutex> lock(impl_->mu);
    ok = impl_->cv.wait_for(lock, std::chrono::milliseconds(timeoutMs), [&] { return impl_->m->left(); });
  }
  impl_->stopping = true;
  impl_->cv.notify_all();
  for (auto& t : impl_->threads)
    if (t.joinable()) t.join();
  impl_->threads.clear();
  bool unanswered = false;
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    unanswered = impl_->m->left_unanswered();
  }
  if (!fatal)
    impl_->log(unanswered ? "left without an answer from " + impl_->opts.coordinatorUrl +
                                "; the coordinator will expire this member"
               : ok       ? "left the group"
                          : "leave timed out (" + impl_->opts.coordinatorUrl + "); the coordinator will expire this member");
  return ok && !unanswered;
}

std::string Runtime::fatal() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->m->fatal();
}

Runtime::Stats Runtime::stats() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  Stats s;
  static_cast<MembershipCounters&>(s) = impl_->m->counters();
  s.epoch = impl_->m->epoch();
  s.owned = impl_->m->owned();
  return s;
}

const std::string& Runtime::member_id() const { return impl_->memberId; }

}  // namespace rsc::member
