#include "member/shard_reader.hpp"

#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <utility>

#include "redis/cluster.hpp"
#include "redis/keys.hpp"

namespace rsc::member {

using store::Value;

std::string Record::field(const std::string& name) const {
  for (const auto& [k, v] : fields)
    if (k == name) return v;
  return {};
}

namespace {

// [[id, [field, value, ...]], ...]; a deleted entry (nil fields) is skipped.
void append_entries(const Value& v, int32_t shard, std::vector<Record>& out) {
  if (v.type != Value::Type::Array) return;
  for (const auto& e : v.elements) {
    if (e.type != Value::Type::Array || e.elements.size() != 2) continue;
    if (e.elements[1].type != Value::Type::Array) continue;
    Record r;
    r.shard = shard;
    r.id = e.elements[0].str;
    const auto& f = e.elements[1].elements;
    for (std::size_t i = 0; i + 1 < f.size(); i += 2) r.fields.emplace_back(f[i].str, f[i + 1].str);
    out.push_back(std::move(r));
  }
}

std::string why(const store::Result<Value>& r) {
  if (!r.ok()) return r.error.message;
  return r.value->is_error() ? r.value->str : std::string();
}

}  // namespace

ShardReader::ShardReader(store::RedisOptions redis, std::string group, std::string consumer,
                         std::function<std::string(int32_t)> keyOf)
    : conn_(std::move(redis)), group_(std::move(group)), consumer_(std::move(consumer)), keyOf_(std::move(keyOf)) {}

ShardReader::Waiter* ShardReader::waiter_for(int slot, const std::string& key) {
  auto it = waiters_.find(slot);
  if (it != waiters_.end()) return it->second.get();
  auto where = conn_.options_for_key(key);
  if (!where.ok()) return nullptr;
  auto w = std::make_unique<Waiter>();
  w->node = *where.value;
  w->conn = std::make_unique<store::RedisConnection>(w->node);
  Waiter* raw = w.get();
  w->conn->on_connect([raw](store::RedisConnection& c) -> std::optional<store::Error> {
    auto id = c.command({"CLIENT", "ID"});
    if (!id.ok()) return id.error;
    raw->clientId = id.value->type == Value::Type::Integer ? id.value->integer : -1;
    return std::nullopt;
  });
  return waiters_.emplace(slot, std::move(w)).first->second.get();
}

store::RedisConnection& ShardReader::control_for(const Waiter& w) {
  auto& c = controls_[w.node.host + ":" + std::to_string(w.node.port)];
  if (!c) c = std::make_unique<store::RedisConnection>(w.node);
  return *c;
}

std::string ShardReader::ensure_group(int32_t shard, bool* lost) {
  auto r = conn_.command({"XGROUP", "CREATE", keyOf_(shard), group_, "0"});
  if (lost != nullptr) *lost = !r.ok();
  const std::string e = why(r);
  if (e.rfind("BUSYGROUP", 0) == 0) return {};  // it exists: fine
  return e;
}

bool ShardReader::no_stream(const std::string& error) {
  return error.find("requires the key to exist") != std::string::npos;
}

ShardReader::Page ShardReader::autoclaim(int32_t shard, const std::string& cursor, int count, bool justIds) {
  Page p;
  const std::string key = keyOf_(shard);
  store::Command cmd{"XAUTOCLAIM", key, group_, consumer_, "0", cursor, "COUNT", std::to_string(count)};
  if (justIds) cmd.push_back("JUSTID");  // Redis then leaves the delivery counts as they are
  auto r = conn_.command(cmd);
  if (!r.ok() || r.value->is_error() || r.value->type != Value::Type::Array || r.value->elements.size() < 2) {
    p.error = r.ok() ? (r.value->is_error() ? r.value->str : "unexpected XAUTOCLAIM reply") : r.error.message;
    p.lost = !r.ok();
    return p;
  }
  p.ok = true;
  p.cursor = r.value->elements[0].str;
  std::vector<std::string> ids;
  if (justIds) {
    for (const auto& e : r.value->elements[1].elements)
      if (e.type != Value::Type::Array) ids.push_back(e.str);
  } else {
    append_entries(r.value->elements[1], shard, p.records);
    for (const auto& rec : p.records) ids.push_back(rec.id);
  }
  if (ids.empty()) return p;
  // The records' fields (JUSTID named only their ids) and their delivery counts, in one round trip.
  std::vector<store::Command> cmds;
  if (justIds)
    for (const auto& id : ids) cmds.push_back({"XRANGE", key, id, id});
  cmds.push_back({"XPENDING", key, group_, ids.front(), ids.back(), std::to_string(ids.size()), consumer_});
  auto replies = conn_.pipeline(cmds);
  for (std::size_t i = 0; i + 1 < replies.size(); ++i) {
    const auto& x = replies[i];
    if (!x.ok() || x.value->is_error()) {
      p.ok = false;
      p.error = x.ok() ? x.value->str : x.error.message;
      p.lost = !x.ok();
      return p;
    }
    append_entries(*x.value, shard, p.records);  // a record deleted meanwhile has none: skipped
  }
  const auto& d = replies.back();
  if (!d.ok() || d.value->type != Value::Type::Array) {
    p.ok = false;
    p.error = d.ok() ? (d.value->is_error() ? d.value->str : "unexpected XPENDING reply") : d.error.message;
    p.lost = !d.ok();
    return p;
  }
  std::map<std::string, int64_t> deliveries;
  for (const auto& e : d.value->elements)
    if (e.type == Value::Type::Array && e.elements.size() >= 4 && e.elements[3].type == Value::Type::Integer)
      deliveries[e.elements[0].str] = e.elements[3].integer;
  for (auto& rec : p.records)
    if (auto it = deliveries.find(rec.id); it != deliveries.end()) rec.deliveries = it->second;
  return p;
}

namespace {
store::Command xreadgroup(const std::string& group, const std::string& consumer, int count, std::optional<int64_t> blockMs,
                          const std::vector<std::string>& keys) {
  store::Command cmd{"XREADGROUP", "GROUP", group, consumer, "COUNT", std::to_string(count)};
  if (blockMs) {
    cmd.push_back("BLOCK");
    cmd.push_back(std::to_string(*blockMs));
  }
  cmd.push_back("STREAMS");
  for (const auto& k : keys) cmd.push_back(k);
  for (std::size_t i = 0; i < keys.size(); ++i) cmd.push_back(">");
  return cmd;
}
}  // namespace

ShardReader::Read ShardReader::read(const std::vector<int32_t>& shards, int count, int64_t blockMs,
                                    const std::function<int64_t()>& allowedMs) {
  Read out;
  out.batches.resize(shards.size());
  // The check right before a send keeps the window in which a pause (SIGSTOP, a stall) can turn an
  // allowed read into a late one as short as a process can make it.
  auto allowed = [&](int64_t wantMs) { return allowedMs ? std::min(wantMs, allowedMs()) : wantMs; };
  std::vector<std::string> keys;
  keys.reserve(shards.size());
  for (int32_t s : shards) keys.push_back(keyOf_(s));
  // Shards by hash slot (one group for a single Redis: any command may name any keys there).
  std::vector<std::vector<std::size_t>> bySlot;
  std::vector<int> slots;  // bySlot[i]'s slot
  {
    for (std::size_t i = 0; i < keys.size(); ++i) {
      const int slot = conn_.cluster() ? store::key_slot(keys[i]) : 0;
      auto it = std::find(slots.begin(), slots.end(), slot);
      if (it == slots.end()) {
        slots.push_back(slot);
        bySlot.emplace_back();
        it = slots.end() - 1;
      }
      bySlot[static_cast<std::size_t>(it - slots.begin())].push_back(i);
    }
  }
  auto keys_of = [&](const std::vector<std::size_t>& idx) {
    std::vector<std::string> ks;
    for (auto i : idx) ks.push_back(keys[i]);
    return ks;
  };
  // Puts each stream's entries with its shard; false (and `out` says why) on a failure.
  auto take = [&](const store::Result<Value>& r) {
    if (!r.ok()) {
      out.outcome = Read::Outcome::Lost;
      out.error = r.error.message;
      return false;
    }
    if (r.value->is_error()) {
      out.outcome = Read::Outcome::Refused;
      out.error = r.value->str;
      return false;
    }
    if (r.value->type != Value::Type::Array) return true;  // nil: nothing new
    for (std::size_t i = 0; i < shards.size(); ++i)
      for (const auto& streamReply : r.value->elements)
        if (streamReply.type == Value::Type::Array && streamReply.elements.size() == 2 &&
            streamReply.elements[0].str == keys[i])
          append_entries(streamReply.elements[1], shards[i], out.batches[i]);
    return true;
  };
  if (bySlot.size() == 1 && interruptFd_ < 0) {
    blockMs = allowed(blockMs);
    if (blockMs < 1) return out;
    if (!take(conn_.command(xreadgroup(group_, consumer_, count, blockMs, keys)))) out.batches.clear();
    return out;
  }
  if (bySlot.size() > 1) {
    if (allowed(blockMs) < 1) return out;
    std::vector<store::Command> now;
    for (const auto& idx : bySlot) now.push_back(xreadgroup(group_, consumer_, count, std::nullopt, keys_of(idx)));
    bool any = false;
    for (const auto& r : conn_.pipeline(now)) {
      if (!take(r)) {
        out.batches.clear();
        return out;
      }
    }
    for (const auto& b : out.batches) any = any || !b.empty();
    if (any) return out;
  }

  // Nothing yet: block on every slot at once, one connection each.
  blockMs = allowed(blockMs);
  if (blockMs < 1) return out;
  std::vector<Waiter*> waits;
  for (std::size_t g = 0; g < bySlot.size(); ++g) {
    const auto& idx = bySlot[g];
    Waiter* w = waiter_for(slots[g], keys[idx.front()]);
    if (w == nullptr) {
      out.outcome = Read::Outcome::Lost;
      out.error = "redis cluster: no slot map";
      out.batches.clear();
      return out;
    }
    w->conn->send({xreadgroup(group_, consumer_, count, blockMs, keys_of(idx))});
    waits.push_back(w);
  }
  std::vector<pollfd> fds;
  for (Waiter* w : waits) fds.push_back(pollfd{w->conn->fd(), POLLIN, 0});
  // A failed send left fd -1 (poll ignores it) and answers at once in receive().
  bool failedSend = false;
  for (const auto& f : fds) failedSend = failedSend || f.fd < 0;
  if (interruptFd_ >= 0) fds.push_back(pollfd{interruptFd_, POLLIN, 0});
  if (!failedSend) ::poll(fds.data(), fds.size(), static_cast<int>(blockMs + 100));
  std::vector<std::string> silent(waits.size());  // no answer to CLIENT UNBLOCK either: not waited for
  for (std::size_t i = 0; i < waits.size(); ++i) {
    if (fds[i].fd < 0 || (fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
    silent[i] = release(*waits[i], blockMs + 100);
  }
  if (interruptFd_ >= 0) {  // drained: an interrupt ends one read
    uint64_t n = 0;
    while (::read(interruptFd_, &n, sizeof n) > 0) {
    }
  }
  bool moved = false;
  for (std::size_t i = 0; i < waits.size(); ++i) {
    Waiter* w = waits[i];
    if (!silent[i].empty()) {  // Redis answers neither: lost (what it may yet deliver is claimed later)
      if (out.outcome == Read::Outcome::Records) {
        out.outcome = Read::Outcome::Lost;
        out.error = silent[i];
      }
      continue;
    }
    auto r = w->conn->receive();
    const auto& reply = r.front();
    if (reply.ok() && reply.value->is_error() && store::cluster::parse_redirect(reply.value->str, w->node.host)) {
      moved = true;  // nothing was read there; the slot has another master now
      continue;
    }
    if (out.outcome == Read::Outcome::Records && !take(reply)) continue;  // the first failure is kept
  }
  if (moved || out.outcome != Read::Outcome::Records) {
    waiters_.clear();  // connect again, to the masters the map names next
    controls_.clear();
    conn_.forget_map();
  }
  if (out.outcome != Read::Outcome::Records) out.batches.clear();
  return out;
}

std::string ShardReader::release(Waiter& w, int64_t untilMs) {
  if (w.clientId < 0) return {};
  for (int64_t waited = 0; waited <= untilMs; waited += 2) {
    auto r = control_for(w).command({"CLIENT", "UNBLOCK", std::to_string(w.clientId)});
    if (!r.ok()) return r.error.message;
    if (r.value->type == Value::Type::Integer && r.value->integer == 1) return {};
    // Not blocked (yet, or any more): its answer is on the way, or the read is still on its way.
    pollfd f{w.conn->fd(), POLLIN, 0};
    if (f.fd < 0 || ::poll(&f, 1, 2) != 0) return {};
  }
  return {};
}

std::string ShardReader::ack(int32_t shard, const std::string& id) {
  auto r = conn_.command({"XACK", keyOf_(shard), group_, id});
  return why(r);
}

std::string ShardReader::dead_letter(const std::string& key, const Record& r, const std::string& error,
                                     const std::string& member, int64_t atMs, int64_t maxLen) {
  store::Command cmd{"XADD", key};
  if (maxLen > 0) cmd.insert(cmd.end(), {"MAXLEN", "~", std::to_string(maxLen)});
  cmd.insert(cmd.end(), {"*", "id", r.id, "shard", std::to_string(r.shard), "stream", keyOf_(r.shard), "deliveries",
                         std::to_string(r.deliveries), "error", error, "member", member, "at", std::to_string(atMs)});
  for (const auto& [k, v] : r.fields) {
    cmd.push_back("field:" + k);
    cmd.push_back(v);
  }
  return why(conn_.command(cmd));
}

std::vector<Record> ShardReader::claim_leftovers(int32_t shard, int64_t minIdleMs) {
  std::vector<Record> out;
  const std::string minIdle = std::to_string(minIdleMs);
  auto p = conn_.command({"XPENDING", keyOf_(shard), group_, "IDLE", minIdle, "-", "+", "100"});
  if (!p.ok()) unanswered_ = p.error.message;
  if (!p.ok() || p.value->type != Value::Type::Array || p.value->elements.empty()) return out;
  store::Command claimCmd{"XCLAIM", keyOf_(shard), group_, consumer_, minIdle};
  std::map<std::string, int64_t> count;
  for (const auto& e : p.value->elements)
    if (e.type == Value::Type::Array && e.elements.size() >= 4 && e.elements[1].str != consumer_) {
      claimCmd.push_back(e.elements[0].str);
      if (e.elements[3].type == Value::Type::Integer) count[e.elements[0].str] = e.elements[3].integer + 1;  // XCLAIM adds one
    }
  if (claimCmd.size() == 5) return out;
  auto c = conn_.command(claimCmd);
  if (!c.ok()) unanswered_ = c.error.message;
  if (c.ok() && c.value->type == Value::Type::Array) append_entries(*c.value, shard, out);
  for (auto& rec : out)
    if (auto it = count.find(rec.id); it != count.end()) rec.deliveries = it->second;
  return out;
}

std::optional<ShardReader::Progress> ShardReader::progress(int32_t shard) {
  auto r = conn_.command({"XINFO", "GROUPS", keyOf_(shard)});
  if (!r.ok()) unanswered_ = r.error.message;
  if (!r.ok() || r.value->type != Value::Type::Array) return std::nullopt;
  for (const auto& g : r.value->elements) {
    Progress p;
    bool ours = false;
    for (std::size_t i = 0; i + 1 < g.elements.size(); i += 2) {
      const auto& k = g.elements[i].str;
      const auto& v = g.elements[i + 1];
      if (k == "name") ours = v.str == group_;
      if (k == "pending" && v.type == Value::Type::Integer) p.pending = v.integer;
      if (k == "lag" && v.type == Value::Type::Integer) p.lag = v.integer;
    }
    if (ours) return p;
  }
  return std::nullopt;
}

}  // namespace rsc::member
