#include "redis/redis_store.hpp"

#include <algorithm>
#include <tuple>
#include <set>
#include <cerrno>
#include <cstdlib>

#include "protocol/codec.hpp"
#include "redis/scripts.hpp"
#include "redis/state_codec.hpp"

namespace rsc::store {
namespace {

template <typename T>
Result<T> reply_failure(const Value& v, const std::string& what) {
  if (v.is_error()) {
    if (v.str.rfind("CORRUPT", 0) == 0) return Result<T>::failure(ErrorKind::Corrupt, what + ": " + v.str);
    auto e = classify_reply_error(v.str);
    e.message = what + ": " + e.message;
    return Result<T>::failure(e);
  }
  return Result<T>::failure(ErrorKind::Fatal, what + ": unexpected reply from Redis");
}

std::optional<FieldMap> field_map(const Value& v) {
  if (v.type != Value::Type::Array || v.elements.size() % 2 != 0) return std::nullopt;
  FieldMap m;
  for (std::size_t i = 0; i + 1 < v.elements.size(); i += 2) m[v.elements[i].str] = v.elements[i + 1].str;
  return m;
}

std::optional<int64_t> as_int(const Value& v) {
  if (v.type == Value::Type::Integer) return v.integer;
  if (v.type == Value::Type::String || v.type == Value::Type::Status) {
    char* end = nullptr;
    const long long x = std::strtoll(v.str.c_str(), &end, 10);
    if (!v.str.empty() && *end == '\0') return x;
  }
  return std::nullopt;
}

}  // namespace

RedisStore::RedisStore(RedisOptions opts)
    : opts_(opts),
      conn_(opts),
      cas_{scripts::kCas, {}},
      unlock_{scripts::kUnlock, {}},
      setRetention_{scripts::kSetRetention, {}},
      trim_{scripts::kTrim, {}},
      readHashWithTime_{scripts::kReadHashWithTime, {}},
      hashCas_{scripts::kHashCas, {}},
      tickLease_{scripts::kTickLease, {}},
      setDeadline_{scripts::kSetDeadline, {}},
      podBeat_{scripts::kPodBeat, {}},
      deleteGroup_{scripts::kDeleteGroup, {}},
      bumpRevision_{scripts::kBumpRevision, {}},
      tracker_(opts.log) {
  keys_.ns = opts_.ns;
  conn_.on_connect([this](RedisConnection& c) { return load_scripts(c); });
}

std::optional<Error> RedisStore::load_scripts(RedisConnection& c) {
  for (Script* s : {&cas_, &unlock_, &setRetention_, &trim_, &readHashWithTime_, &hashCas_, &tickLease_, &setDeadline_, &podBeat_, &deleteGroup_, &bumpRevision_}) {
    auto r = c.command({"SCRIPT", "LOAD", s->source});
    if (!r.ok()) return r.error;
    if (r.value->is_error()) return classify_reply_error(r.value->str);
    s->sha = r.value->str;
  }
  return std::nullopt;
}

void RedisStore::evalsha_head(Command& c, const Script& s, std::size_t keys) {
  c.push_back("EVALSHA");
  c.push_back(s.sha);
  c.push_back(std::to_string(keys));
}

Command RedisStore::evalsha(const Script& s, std::initializer_list<std::string> keys,
                            std::vector<std::string> args) const {
  Command c;
  c.reserve(3 + keys.size() + args.size());
  evalsha_head(c, s, keys.size());
  for (const auto& k : keys) c.push_back(k);
  for (auto& a : args) c.push_back(std::move(a));
  return c;
}

std::vector<Result<Value>> RedisStore::run(const std::vector<Command>& cmds) {
  auto out = conn_.pipeline(cmds);
  std::vector<std::size_t> redo;
  for (std::size_t i = 0; i < out.size(); ++i)
    if (out[i].ok() && out[i].value->is_error() && out[i].value->str.rfind("NOSCRIPT", 0) == 0) redo.push_back(i);
  if (redo.empty()) return out;
  // Scripts are gone (Redis restarted under a live connection, or SCRIPT FLUSH): load, rerun.
  ++scriptReloads_;
  if (opts_.log) opts_.log("store: scripts missing in Redis (NOSCRIPT); reloading");
  // Connect again: every connection loads the scripts as it connects (on each node of a cluster).
  conn_.reconnect();
  std::vector<Command> again;
  for (auto i : redo) again.push_back(cmds[i]);
  auto second = conn_.pipeline(again);
  for (std::size_t k = 0; k < redo.size(); ++k) out[redo[k]] = std::move(second[k]);
  return out;
}

Result<Loaded> RedisStore::loaded_from(const GroupKey& key, const FieldMap& fields) {
  using R = Result<Loaded>;
  Loaded out;
  if (is_remnant(fields)) {
    // Never written, or deleted: a deleted group keeps only its revision (and its grant hold).
    out.state.streamPrefix = key.streamPrefix;
    out.state.consumerGroup = key.consumerGroup;
    out.state.rollbackGuardUntilMs = remnant_grants_held_until(fields);
    if (auto rev = fields.find(kRevisionField); rev != fields.end()) {
      char* end = nullptr;
      out.state.storeRevision = std::strtoll(rev->second.c_str(), &end, 10);
      if (rev->second.empty() || *end != '\0' || out.state.storeRevision < 0)
        return R::failure(ErrorKind::Corrupt, "group " + key.str() + ": field 'rev': '" + rev->second + "' is not a revision");
    }
    out.rollback = tracker_.observe(key, out.state.storeRevision, 0);
    return R::success(std::move(out));
  }
  auto g = decode_group(key, fields);
  if (!g.ok()) return R::failure(g.error);
  out.exists = true;
  out.state = std::move(*g.value);
  out.rollback = tracker_.observe(key, out.state.storeRevision, out.state.groupEpoch);
  return R::success(std::move(out));
}

Result<Loaded> RedisStore::load(const GroupKey& key) {
  using R = Result<Loaded>;
  auto r = run({{"HGETALL", keys_.group_state(key)}}).front();
  if (!r.ok()) return R::failure(r.error);
  auto fields = field_map(*r.value);
  if (!fields) return reply_failure<Loaded>(*r.value, "load " + key.str());
  return loaded_from(key, *fields);
}

Command RedisStore::deadline_command(const GroupKey& key, std::optional<Millis> due, int64_t revision, bool lower) const {
  return evalsha(setDeadline_, {keys_.deadlines(), keys_.deadline_revisions()},
                 {key.str(), due ? std::to_string(*due) : std::string(), std::to_string(revision),
                  lower ? "lower" : "set"});
}

std::vector<Result<CasResult>> RedisStore::compare_and_set(const std::vector<CasRequest>& batch) {
  using R = Result<CasResult>;
  if (auto e = ensure_scripts()) return std::vector<R>(batch.size(), R::failure(*e));
  std::vector<Command> cmds;
  std::vector<std::size_t> casIndex;
  cmds.reserve(batch.size());
  casIndex.reserve(batch.size());
  for (const auto& req : batch) {
    if (req.verifyOnly) {  // a plain read of the revision: the cheapest call (a stale copy is reloaded)
      casIndex.push_back(cmds.size());
      cmds.push_back({"HGET", keys_.group_state(req.key), "rev"});
      continue;
    }
    auto w = field_writes(*req.next, req.delta);
    // Lowering the deadline index goes first: if the write is lost after it, an early deadline
    // only costs one look at the group.
    if (req.lowerDeadlineTo)
      cmds.push_back(deadline_command(req.key, req.lowerDeadlineTo, req.expectedRevision + 1, /*lower=*/true));
    casIndex.push_back(cmds.size());
    // The script's call, built in place (keys and the field values moved in, not copied).
    Command& c = cmds.emplace_back();
    c.reserve(12 + 2 * w.set.size() + w.del.size());
    evalsha_head(c, cas_, 2);
    c.push_back(keys_.group_state(req.key));
    c.push_back(keys_.group_lock(req.key));
    c.push_back(req.lockToken);
    c.push_back(std::to_string(req.lockTtlMs));
    c.push_back(std::to_string(req.expectedRevision));
    c.push_back(req.returnStateOnConflict ? "1" : "0");
    c.push_back(w.full ? "1" : "0");
    c.push_back(std::to_string(w.set.size()));
    for (auto& [f, v] : w.set) {  // moved: a member's record is about a kilobyte
      c.push_back(std::move(f));
      c.push_back(std::move(v));
    }
    c.push_back(std::to_string(w.del.size()));
    for (auto& f : w.del) c.push_back(std::move(f));
    if (req.delta == nullptr && !req.verifyOnly) {  // a new (or recreated) group: make it discoverable (idempotent)
      cmds.push_back({"SADD", keys_.group_index(), req.key.str()});
      cmds.push_back({"SADD", keys_.stream_groups(req.key.streamPrefix), req.key.consumerGroup});
    }
  }
  auto replies = run(cmds);
  std::vector<R> out;
  out.reserve(batch.size());
  for (std::size_t b = 0; b < batch.size(); ++b) {
    const auto& req = batch[b];
    auto& rep = replies[casIndex[b]];
    if (!rep.ok()) {
      out.push_back(R::failure(rep.error));
      continue;
    }
    const Value& v = *rep.value;
    if (req.verifyOnly) {
      CasResult r;
      std::optional<int64_t> rev = v.is_nil() ? std::optional<int64_t>(0) : as_int(v);
      if (!rev || v.is_error()) {
        out.push_back(reply_failure<CasResult>(v, "revision of " + req.key.str()));
        continue;
      }
      r.revision = *rev;
      r.status = *rev == req.expectedRevision ? CasStatus::Written : CasStatus::Conflict;
      r.rollback = tracker_.observe(req.key, r.revision, r.status == CasStatus::Written ? req.next->groupEpoch : 0);
      out.push_back(R::success(std::move(r)));
      continue;
    }
    if (v.type != Value::Type::Array || v.elements.size() < 2) {
      out.push_back(reply_failure<CasResult>(v, "cas " + req.key.str()));
      continue;
    }
    CasResult r;
    const auto& st = v.elements[0].str;
    r.revision = as_int(v.elements[1]).value_or(0);
    int32_t epoch = 0;
    if (st == "OK") {
      r.status = CasStatus::Written;
      epoch = req.next->groupEpoch;
    } else if (st == "CONFLICT") {
      r.status = CasStatus::Conflict;
      if (v.elements.size() > 2) {
        auto fields = field_map(v.elements[2]);
        if (!fields) {
          out.push_back(R::failure(ErrorKind::Fatal, "cas " + req.key.str() + ": malformed conflict reply"));
          continue;
        }
        if (!is_remnant(*fields)) {
          auto g = decode_group(req.key, *fields);
          if (!g.ok()) {
            out.push_back(R::failure(g.error));
            continue;
          }
          epoch = g.value->groupEpoch;
          r.current = std::move(*g.value);
        }
      }
    } else if (st == "LOCKED") {
      r.status = CasStatus::Locked;
    } else {
      out.push_back(R::failure(ErrorKind::Fatal, "cas " + req.key.str() + ": unknown status " + st));
      continue;
    }
    r.rollback = tracker_.observe(req.key, r.revision, epoch);
    out.push_back(R::success(std::move(r)));
  }
  return out;
}

Result<TickLease> RedisStore::tick_lease(const GroupKey& key, const std::string& token, Millis ttl,
                                         int64_t knownRevision) {
  using R = Result<TickLease>;
  if (auto e = ensure_scripts()) return R::failure(*e);
  auto r = run({evalsha(tickLease_, {keys_.group_state(key), keys_.group_lock(key)},
                        {token, std::to_string(ttl), std::to_string(knownRevision)})})
               .front();
  if (!r.ok()) return R::failure(r.error);
  const Value& v = *r.value;
  if (v.type != Value::Type::Array || v.elements.empty()) return reply_failure<TickLease>(v, "tick lease " + key.str());
  TickLease t;
  const auto& st = v.elements[0].str;
  if (st == "LOCKED") return R::success(t);
  if (v.elements.size() < 2) return reply_failure<TickLease>(v, "tick lease " + key.str());
  t.revision = as_int(v.elements[1]).value_or(0);
  if (st == "SAME") {
    t.status = LeaseStatus::Unchanged;
    return R::success(t);
  }
  t.status = LeaseStatus::Changed;
  auto fields = v.elements.size() > 2 ? field_map(v.elements[2]) : std::optional<FieldMap>(FieldMap{});
  if (!fields) return R::failure(ErrorKind::Fatal, "tick lease " + key.str() + ": malformed reply");
  auto l = loaded_from(key, *fields);
  if (!l.ok()) return R::failure(l.error);
  t.loaded = std::move(*l.value);
  return R::success(std::move(t));
}

Result<bool> RedisStore::finish_deadline_work(const GroupKey& key, const std::string& token, std::optional<Millis> due,
                                              int64_t revision) {
  if (auto e = ensure_scripts()) return Result<bool>::failure(*e);
  std::vector<Command> cmds{deadline_command(key, due, revision, /*lower=*/false)};
  if (!token.empty()) cmds.push_back(evalsha(unlock_, {keys_.group_lock(key)}, {token}));
  auto r = run(cmds);
  for (auto& x : r) {
    if (!x.ok()) return Result<bool>::failure(x.error);
    if (x.value->is_error()) return reply_failure<bool>(*x.value, "deadline " + key.str());
  }
  return Result<bool>::success(r.front().value->integer == 1);
}

Result<PodBeat> RedisStore::pod_beat(const std::string& podId, Millis leaseMs, std::size_t dueLimit,
                                     const std::string& address) {
  using R = Result<PodBeat>;
  if (auto e = ensure_scripts()) return R::failure(*e);
  auto r = run({evalsha(podBeat_, {keys_.pods(), keys_.deadlines(), keys_.pods_info()},
                        {podId, std::to_string(leaseMs), std::to_string(dueLimit), address})})
               .front();
  if (!r.ok()) return R::failure(r.error);
  const Value& v = *r.value;
  if (v.type != Value::Type::Array || v.elements.size() != 5 || v.elements[1].type != Value::Type::Array ||
      v.elements[2].type != Value::Type::Array || v.elements[3].type != Value::Type::Array ||
      v.elements[4].type != Value::Type::Array || v.elements[3].elements.size() != v.elements[1].elements.size() ||
      v.elements[4].elements.size() != v.elements[1].elements.size())
    return reply_failure<PodBeat>(v, "pod beat");
  PodBeat b;
  b.storeTimeMs = as_int(v.elements[0]).value_or(0);
  std::vector<std::tuple<std::string, Millis, std::string>> pods;
  for (std::size_t i = 0; i < v.elements[1].elements.size(); ++i)
    pods.emplace_back(v.elements[1].elements[i].str, as_int(v.elements[3].elements[i]).value_or(0),
                      v.elements[4].elements[i].str);
  std::sort(pods.begin(), pods.end());
  for (auto& [id, since, where] : pods) {
    b.livePods.push_back(std::move(id));
    b.since.push_back(since);
    b.addresses.push_back(std::move(where));
  }
  for (const auto& g : v.elements[2].elements) {
    const auto slash = g.str.find('/');
    if (slash != std::string::npos) b.due.push_back({g.str.substr(0, slash), g.str.substr(slash + 1)});
  }
  return R::success(std::move(b));
}

Result<bool> RedisStore::pod_leave(const std::string& podId) {
  auto r = run({{"HDEL", keys_.pods_info(), podId}, {"ZREM", keys_.pods(), podId}})
               .back();
  if (!r.ok()) return Result<bool>::failure(r.error);
  if (r.value->is_error()) return reply_failure<bool>(*r.value, "pod leave");
  return Result<bool>::success(r.value->integer == 1);
}

Result<bool> RedisStore::mark_due(const GroupKey& key, Millis at) {
  auto r = run({{"ZADD", keys_.deadlines(), "LT", std::to_string(at), key.str()}}).front();
  if (!r.ok()) return Result<bool>::failure(r.error);
  if (r.value->is_error()) return reply_failure<bool>(*r.value, "mark due");
  return Result<bool>::success(true);
}

Result<int64_t> RedisStore::index_missing_deadlines(Millis now) {
  using R = Result<int64_t>;
  auto groups = list_groups();
  if (!groups.ok()) return R::failure(groups.error);
  int64_t added = 0;
  constexpr std::size_t kChunk = 500;
  for (std::size_t i = 0; i < groups.value->size(); i += kChunk) {
    Command c{"ZADD", keys_.deadlines(), "NX"};
    for (std::size_t j = i; j < std::min(groups.value->size(), i + kChunk); ++j) {
      c.push_back(std::to_string(now));
      c.push_back((*groups.value)[j].str());
    }
    auto r = run({c}).front();
    if (!r.ok()) return R::failure(r.error);
    if (r.value->is_error()) return reply_failure<int64_t>(*r.value, "index deadlines");
    added += r.value->integer;
  }
  return R::success(added);
}

Result<DeleteStatus> RedisStore::delete_group(const GroupKey& key, int64_t expectedRevision, int64_t grantsHeldUntilMs) {
  using R = Result<DeleteStatus>;
  if (auto e = ensure_scripts()) return R::failure(*e);
  auto r = run({evalsha(deleteGroup_, {keys_.group_state(key), keys_.group_lock(key), keys_.dead_letters(key)},
                        {std::to_string(expectedRevision), std::to_string(grantsHeldUntilMs)})})
               .front();
  if (!r.ok()) return R::failure(r.error);
  const Value& v = *r.value;
  if (v.type != Value::Type::Array || v.elements.size() != 2) return reply_failure<DeleteStatus>(v, "delete " + key.str());
  const auto rev = as_int(v.elements[1]).value_or(0);
  tracker_.observe(key, rev, 0);
  if (v.elements[0].str == "NOTFOUND") return R::success(DeleteStatus::NotFound);
  if (v.elements[0].str == "CONFLICT") return R::success(DeleteStatus::Conflict);
  // The state is gone: now its index entries (other slots, so not in the same script).
  auto rest = run({{"SREM", keys_.group_index(), key.str()},
                   {"SREM", keys_.stream_groups(key.streamPrefix), key.consumerGroup},
                   deadline_command(key, std::nullopt, rev, /*lower=*/false)});
  for (auto& x : rest)
    if (!x.ok()) return R::failure(x.error);
  // And the Redis consumer group on each shard stream (draining ones too), with its count of what
  // retention trimmed unread: XINFO GROUPS and the lag show only groups that exist. A shard stream
  // without it answers an error, which is nothing to undo.
  auto meta = get_stream(key.streamPrefix);
  if (!meta.ok()) return R::failure(meta.error);
  if (meta.value->has_value()) {
    const auto& m = **meta.value;
    int32_t shards = m.readShardCount();
    if (m.migration) shards = std::max({shards, m.migration->fromShardCount, m.migration->toShardCount});
    std::vector<Command> cmds;
    for (int32_t i = 0; i < shards; ++i) {
      const auto stream = protocol::shard_stream_key(key.streamPrefix, m.keyStyle, i);
      cmds.push_back({"XGROUP", "DESTROY", stream, key.consumerGroup});
      cmds.push_back({"HDEL", protocol::trimmed_unread_key(stream), key.consumerGroup});
    }
    for (auto& x : run(cmds))
      if (!x.ok()) return R::failure(x.error);
  }
  return R::success(DeleteStatus::Deleted);
}

Result<int64_t> RedisStore::count_stream_groups(const std::string& streamPrefix) {
  auto r = run({{"SCARD", keys_.stream_groups(streamPrefix)}}).front();
  if (!r.ok()) return Result<int64_t>::failure(r.error);
  if (r.value->type != Value::Type::Integer) return reply_failure<int64_t>(*r.value, "count groups");
  return Result<int64_t>::success(r.value->integer);
}

namespace {
// One XRANGE entry of the dead-letter stream.
std::optional<protocol::DeadLetter> dead_letter_of(const Value& e) {
  if (e.type != Value::Type::Array || e.elements.size() < 2) return std::nullopt;
  auto f = field_map(e.elements[1]);
  if (!f) return std::nullopt;
  protocol::DeadLetter d;
  d.deadLetterId = e.elements[0].str;
  auto num = [](const std::string& v) { return std::strtoll(v.c_str(), nullptr, 10); };
  for (const auto& [k, v] : *f) {
    if (k == "id") d.id = v;
    else if (k == "shard") d.shard = static_cast<int32_t>(num(v));
    else if (k == "stream") d.stream = v;
    else if (k == "deliveries") d.deliveries = num(v);
    else if (k == "error") d.error = v;
    else if (k == "member") d.member = v;
    else if (k == "at") d.atMs = num(v);
  }
  // The record's own fields, in the order the member wrote them.
  const auto& kv = e.elements[1].elements;
  for (std::size_t i = 0; i + 1 < kv.size(); i += 2)
    if (kv[i].str.rfind("field:", 0) == 0) d.fields.emplace_back(kv[i].str.substr(6), kv[i + 1].str);
  return d;
}
}  // namespace

Result<protocol::DeadLetterPage> RedisStore::dead_letters(const GroupKey& key, int64_t limit) {
  using R = Result<protocol::DeadLetterPage>;
  const auto k = keys_.dead_letters(key);
  // The group's state and its dead letters share a slot: one pipeline.
  std::vector<Command> cmds{{"HEXISTS", keys_.group_state(key), "g"}, {"XLEN", k}};
  if (limit > 0) cmds.push_back({"XRANGE", k, "-", "+", "COUNT", std::to_string(limit)});
  auto r = run(cmds);
  for (const auto& x : r)
    if (!x.ok()) return R::failure(x.error);
  for (std::size_t i = 0; i < 2; ++i)
    if (r[i].value->type != Value::Type::Integer) return reply_failure<protocol::DeadLetterPage>(*r[i].value, "dead letters");
  protocol::DeadLetterPage page;
  page.total = r[1].value->integer;
  // A group that is gone but left dead letters (written after it was deleted) still shows them.
  page.groupFound = r[0].value->integer == 1 || page.total > 0;
  if (limit <= 0 || !page.groupFound) return R::success(std::move(page));
  if (r[2].value->type != Value::Type::Array) return reply_failure<protocol::DeadLetterPage>(*r[2].value, "dead letters");
  for (const auto& e : r[2].value->elements)
    if (auto d = dead_letter_of(e)) page.items.push_back(std::move(*d));
  return R::success(std::move(page));
}

Result<std::vector<protocol::DeadLetter>> RedisStore::chosen_dead_letters(const GroupKey& key,
                                                                         const std::vector<std::string>& deadLetterIds,
                                                                         int64_t limit, protocol::DeadLetterMove& move) {
  using R = Result<std::vector<protocol::DeadLetter>>;
  const auto k = keys_.dead_letters(key);
  std::vector<Command> reads{{"HEXISTS", keys_.group_state(key), "g"}, {"XLEN", k}};
  if (deadLetterIds.empty()) {
    reads.push_back({"XRANGE", k, "-", "+", "COUNT", std::to_string(std::max<int64_t>(1, limit))});
  } else {
    for (const auto& id : deadLetterIds) reads.push_back({"XRANGE", k, id, id});
  }
  auto replies = run(reads);
  std::vector<protocol::DeadLetter> chosen;
  for (std::size_t i = 0; i < replies.size(); ++i) {
    auto& r = replies[i];
    if (!r.ok()) return R::failure(r.error);
    if (i < 2) {
      if (r.value->type != Value::Type::Integer) return reply_failure<std::vector<protocol::DeadLetter>>(*r.value, "dead letters");
      continue;
    }
    if (r.value->type != Value::Type::Array) return reply_failure<std::vector<protocol::DeadLetter>>(*r.value, "dead letters");
    bool any = false;
    for (const auto& e : r.value->elements)
      if (auto d = dead_letter_of(e)) chosen.push_back(std::move(*d)), any = true;
    if (!any && !deadLetterIds.empty()) move.unknownIds.push_back(deadLetterIds[i - 2]);
  }
  move.groupFound = replies[0].value->integer == 1 || replies[1].value->integer > 0;
  if (!move.groupFound) chosen.clear(), move.unknownIds.clear();
  return R::success(std::move(chosen));
}

Result<protocol::DeadLetterMove> RedisStore::redrive(const GroupKey& key, const std::vector<std::string>& deadLetterIds,
                                                     int64_t limit) {
  using R = Result<protocol::DeadLetterMove>;
  protocol::DeadLetterMove move;
  auto chosen = chosen_dead_letters(key, deadLetterIds, limit, move);
  if (!chosen.ok()) return R::failure(chosen.error);
  const auto k = keys_.dead_letters(key);
  const std::string prefix = protocol::kRedriveFieldPrefix;
  for (const auto& d : *chosen.value) {
    if (d.stream.empty() || d.fields.empty()) continue;  // nothing to write back
    // Written back first, removed after: a failure in between leaves it in both, never in neither.
    // The record's own fields (a former redrive's marks dropped), then where it came from.
    Command add{"XADD", d.stream, "*"};
    for (const auto& [f, v] : d.fields)
      if (f.rfind(prefix, 0) != 0) add.push_back(f), add.push_back(v);
    for (const auto& [f, v] : std::initializer_list<std::pair<const char*, std::string>>{
             {"deadLetterId", d.deadLetterId}, {"id", d.id}, {"deliveries", std::to_string(d.deliveries)},
             {"error", d.error}, {"member", d.member}})
      add.push_back(prefix + f), add.push_back(v);
    auto a = run({add}).front();
    if (!a.ok()) return R::failure(a.error);
    if (a.value->is_error()) return reply_failure<protocol::DeadLetterMove>(*a.value, "redrive to " + d.stream);
    auto del = run({{"XDEL", k, d.deadLetterId}}).front();
    if (!del.ok()) return R::failure(del.error);
    ++move.moved;
  }
  return R::success(std::move(move));
}

Result<protocol::DeadLetterMove> RedisStore::discard_dead_letters(const GroupKey& key,
                                                                  const std::vector<std::string>& deadLetterIds,
                                                                  int64_t limit) {
  using R = Result<protocol::DeadLetterMove>;
  protocol::DeadLetterMove move;
  auto chosen = chosen_dead_letters(key, deadLetterIds, limit, move);
  if (!chosen.ok()) return R::failure(chosen.error);
  if (chosen.value->empty()) return R::success(std::move(move));
  Command del{"XDEL", keys_.dead_letters(key)};
  for (const auto& d : *chosen.value) del.push_back(d.deadLetterId);
  auto r = run({del}).front();
  if (!r.ok()) return R::failure(r.error);
  if (r.value->type != Value::Type::Integer) return reply_failure<protocol::DeadLetterMove>(*r.value, "discard dead letters");
  move.moved = r.value->integer;
  return R::success(std::move(move));
}

Result<std::vector<GroupKey>> RedisStore::list_groups() {
  using R = Result<std::vector<GroupKey>>;
  auto r = run({{"SMEMBERS", keys_.group_index()}}).front();
  if (!r.ok()) return R::failure(r.error);
  if (r.value->type != Value::Type::Array) return reply_failure<std::vector<GroupKey>>(*r.value, "list groups");
  std::vector<GroupKey> out;
  for (const auto& e : r.value->elements) {
    const auto slash = e.str.find('/');
    if (slash == std::string::npos) continue;  // not ours
    out.push_back({e.str.substr(0, slash), e.str.substr(slash + 1)});
  }
  std::sort(out.begin(), out.end());
  return R::success(std::move(out));
}

Result<std::vector<std::string>> RedisStore::list_streams() {
  using R = Result<std::vector<std::string>>;
  // Streams created before the stream index existed still show through their groups.
  auto r = run({{"SMEMBERS", opts_.ns + ":streams"}, {"SMEMBERS", keys_.group_index()}});
  std::set<std::string> names;
  for (std::size_t i = 0; i < r.size(); ++i) {
    if (!r[i].ok()) return R::failure(r[i].error);
    if (r[i].value->type != Value::Type::Array) return reply_failure<std::vector<std::string>>(*r[i].value, "list streams");
    for (const auto& e : r[i].value->elements) {
      if (i == 0) {
        names.insert(e.str);
      } else if (const auto slash = e.str.find('/'); slash != std::string::npos) {
        names.insert(e.str.substr(0, slash));
      }
    }
  }
  return R::success(std::vector<std::string>(names.begin(), names.end()));
}

// Fields of the snapshot's two hashes: "@at" and "@shards" beside one field per group. Long writes
// go in commands of at most kSnapshotChunk fields, pipelined.
namespace {
constexpr std::size_t kSnapshotChunk = 512;
}

Result<bool> RedisStore::write_lag_snapshot(const std::string& streamPrefix, const LagSnapshotWrite& w) {
  using R = Result<bool>;
  const auto lagKey = keys_.lag_snapshot(streamPrefix), sumKey = keys_.lag_sums(streamPrefix);
  std::vector<Command> cmds;
  if (w.replace) {  // what the store holds that this write does not give goes
    auto held = run({{"HKEYS", lagKey}, {"HKEYS", sumKey}});
    std::set<std::string> keep{"@at", "@shards"};
    for (const auto& [g, text] : w.positions) keep.insert(g);
    for (std::size_t k = 0; k < held.size(); ++k) {
      if (!held[k].ok()) return R::failure(held[k].error);
      Command del{"HDEL", k == 0 ? lagKey : sumKey};
      for (const auto& f : held[k].value->elements)
        if (!keep.count(f.str)) del.push_back(f.str);
      if (del.size() > 2) cmds.push_back(std::move(del));
    }
  }
  const std::string at = std::to_string(w.atMs);
  auto sets = [&](const std::string& key, const std::vector<std::pair<std::string, std::string>>& fields, bool withShards) {
    Command c{"HSET", key, "@at", at};
    if (withShards) c.insert(c.end(), {"@shards", w.shards});
    for (std::size_t i = 0; i < fields.size(); ++i) {
      c.push_back(fields[i].first);
      c.push_back(fields[i].second);
      if ((i + 1) % kSnapshotChunk == 0 && i + 1 < fields.size()) {
        cmds.push_back(std::move(c));
        c = Command{"HSET", key};
      }
    }
    if (c.size() > 2) cmds.push_back(std::move(c));
  };
  sets(lagKey, w.positions, true);
  sets(sumKey, w.sums, false);
  if (!w.removed.empty()) {
    Command a{"HDEL", lagKey}, b{"HDEL", sumKey};
    a.insert(a.end(), w.removed.begin(), w.removed.end());
    b.insert(b.end(), w.removed.begin(), w.removed.end());
    cmds.push_back(std::move(a));
    cmds.push_back(std::move(b));
  }
  for (const auto& r : run(cmds)) {
    if (!r.ok()) return R::failure(r.error);
    if (r.value->is_error()) return reply_failure<bool>(*r.value, "lag snapshot of " + streamPrefix);
  }
  return R::success(true);
}

Result<StreamStore::LagSnapshotRead> RedisStore::read_lag_snapshot(const std::string& streamPrefix,
                                                                   const std::vector<std::string>& groups, bool sums) {
  using R = Result<LagSnapshotRead>;
  Command c{"HMGET", sums ? keys_.lag_sums(streamPrefix) : keys_.lag_snapshot(streamPrefix), "@at", "@shards"};
  c.insert(c.end(), groups.begin(), groups.end());
  auto r = run({c}).front();
  if (!r.ok()) return R::failure(r.error);
  if (r.value->type != Value::Type::Array || r.value->elements.size() != groups.size() + 2)
    return reply_failure<LagSnapshotRead>(*r.value, "lag snapshot of " + streamPrefix);
  LagSnapshotRead out;
  const auto& e = r.value->elements;
  if (e[0].type == Value::Type::String) out.atMs = std::atoll(e[0].str.c_str());
  if (e[1].type == Value::Type::String) out.shards = e[1].str;
  out.values.reserve(groups.size());
  for (std::size_t i = 2; i < e.size(); ++i)
    out.values.push_back(e[i].type == Value::Type::String ? std::optional<std::string>(e[i].str) : std::nullopt);
  return R::success(std::move(out));
}

Result<std::vector<std::string>> RedisStore::list_stream_groups(const std::string& streamPrefix) {
  using R = Result<std::vector<std::string>>;
  auto r = run({{"SMEMBERS", keys_.stream_groups(streamPrefix)}}).front();
  if (!r.ok()) return R::failure(r.error);
  if (r.value->type != Value::Type::Array) return reply_failure<std::vector<std::string>>(*r.value, "list groups");
  std::vector<std::string> out;
  for (const auto& e : r.value->elements) out.push_back(e.str);
  std::sort(out.begin(), out.end());
  return R::success(std::move(out));
}

namespace {
// A stream's metadata hash: the fields its rules read and write (group::put_step, scale_step).
// Its retention sits in the same hash and is written apart (kSetRetention).
const std::vector<std::string> kStreamMetaFields{"shardCount", "metadataVersion", "keyStyle", "migId", "migFrom",
                                                 "migTo", "migState", "migCreated", "migUpdated", "migBy",
                                                 "migReason", "rkTo", "rkAt", "rkDel", "racks", "racksFrom"};

// The fields as read (kStreamMetaFields order; nullopt: absent) as the stream's metadata.
Result<std::optional<protocol::StreamMetadata>> decode_stream_meta(const std::string& streamPrefix,
                                                                   const std::vector<std::optional<std::string>>& f) {
  using R = Result<std::optional<protocol::StreamMetadata>>;
  auto num = [](const std::optional<std::string>& v) -> std::optional<int64_t> {
    if (!v || v->empty()) return std::nullopt;
    char* end = nullptr;
    errno = 0;
    const long long x = std::strtoll(v->c_str(), &end, 10);
    if (errno != 0 || *end != '\0') return std::nullopt;
    return x;
  };
  if (!f[0]) return R::success(std::nullopt);
  auto n = num(f[0]);
  auto ver = num(f[1]);
  if (!n || !ver || *n < 0)
    return R::failure(ErrorKind::Corrupt, "stream " + streamPrefix + ": shardCount/metadataVersion are not numbers");
  // No key style stored: the stream predates the choice, when shard keys were hash-tagged.
  const auto style = !f[2] ? protocol::KeyStyle::HashTag : protocol::key_style_from(*f[2]);
  if (!style) return R::failure(ErrorKind::Corrupt, "stream " + streamPrefix + ": keyStyle '" + *f[2] + "'");
  protocol::StreamMetadata m{streamPrefix, static_cast<int32_t>(*n), static_cast<int32_t>(*ver), *style, std::nullopt};
  if (f[3]) {
    protocol::Migration g;
    g.reshardingId = *f[3];
    const auto from = num(f[4]), to = num(f[5]), created = num(f[7]), updated = num(f[8]);
    const auto state = protocol::migration_state_from(f[6].value_or(""));
    if (!from || !to || !state || !created || !updated)
      return R::failure(ErrorKind::Corrupt, "stream " + streamPrefix + ": its migration fields are not readable");
    g.fromShardCount = static_cast<int32_t>(*from);
    g.toShardCount = static_cast<int32_t>(*to);
    g.state = *state;
    g.createdAtMs = *created;
    g.updatedAtMs = *updated;
    g.requestedBy = f[9].value_or("");
    g.reason = f[10].value_or("");
    m.migration = std::move(g);
  }
  if (f[11]) {
    const auto to = num(f[11]), at = num(f[12]);
    if (!to || !at) return R::failure(ErrorKind::Corrupt, "stream " + streamPrefix + ": its retired shard fields are not readable");
    m.retiredKeysTo = static_cast<int32_t>(*to);
    m.retiredAtMs = *at;
  }
  m.deletingRetired = f[13].value_or("") == "1";
  if (f[14]) {  // "a,,b": a rack per shard by index, "" for none (rack names have no comma)
    for (std::size_t from = 0;;) {
      const auto comma = f[14]->find(',', from);
      auto rack = f[14]->substr(from, comma == std::string::npos ? std::string::npos : comma - from);
      if (!rack.empty() && !protocol::valid_name(rack))
        return R::failure(ErrorKind::Corrupt, "stream " + streamPrefix + ": shard rack '" + rack.substr(0, 140) + "' is not a name");
      m.shardRacks.push_back(std::move(rack));
      if (comma == std::string::npos) break;
      from = comma + 1;
    }
  }
  m.shardRacksFrom = f[15].value_or("");
  return R::success(std::move(m));
}

// The metadata as those fields (kStreamMetaFields order; nullopt: absent).
std::vector<std::optional<std::string>> encode_stream_meta(const protocol::StreamMetadata& m) {
  std::vector<std::optional<std::string>> f(kStreamMetaFields.size());
  f[0] = std::to_string(m.shardCount);
  f[1] = std::to_string(m.metadataVersion);
  f[2] = std::string(protocol::to_string(m.keyStyle));
  if (m.migration) {
    const auto& g = *m.migration;
    f[3] = g.reshardingId;
    f[4] = std::to_string(g.fromShardCount);
    f[5] = std::to_string(g.toShardCount);
    f[6] = std::string(protocol::to_string(g.state));
    f[7] = std::to_string(g.createdAtMs);
    f[8] = std::to_string(g.updatedAtMs);
    f[9] = g.requestedBy;
    f[10] = g.reason;
  }
  if (m.retiredKeysTo > 0) {
    f[11] = std::to_string(m.retiredKeysTo);
    f[12] = std::to_string(m.retiredAtMs);
  }
  if (m.deletingRetired) f[13] = "1";
  if (!m.shardRacks.empty()) {
    std::string racks;
    for (std::size_t i = 0; i < m.shardRacks.size(); ++i) racks += (i == 0 ? "" : ",") + m.shardRacks[i];
    f[14] = std::move(racks);
  }
  if (!m.shardRacksFrom.empty()) f[15] = m.shardRacksFrom;
  return f;
}

std::vector<std::optional<std::string>> optional_strings(const Value& array) {
  std::vector<std::optional<std::string>> out;
  out.reserve(array.elements.size());
  for (const auto& e : array.elements)
    out.push_back(e.is_nil() || e.type == Value::Type::Integer ? std::nullopt : std::optional<std::string>(e.str));
  return out;
}
}  // namespace

Result<std::optional<protocol::StreamMetadata>> RedisStore::get_stream(const std::string& streamPrefix) {
  using R = Result<std::optional<protocol::StreamMetadata>>;
  Command c{"HMGET", keys_.stream_meta(streamPrefix)};
  c.insert(c.end(), kStreamMetaFields.begin(), kStreamMetaFields.end());
  auto r = run({c}).front();
  if (!r.ok()) return R::failure(r.error);
  const Value& v = *r.value;
  if (v.type != Value::Type::Array || v.elements.size() != kStreamMetaFields.size())
    return reply_failure<std::optional<protocol::StreamMetadata>>(v, "stream " + streamPrefix);
  return decode_stream_meta(streamPrefix, optional_strings(v));
}

Result<RedisStore::StreamMetaRead> RedisStore::read_stream_meta(const std::string& streamPrefix) {
  using R = Result<StreamMetaRead>;
  if (auto e = ensure_scripts()) return R::failure(*e);
  auto r = run({evalsha(readHashWithTime_, {keys_.stream_meta(streamPrefix)},
                        std::vector<std::string>(kStreamMetaFields.begin(), kStreamMetaFields.end()))})
               .front();
  if (!r.ok()) return R::failure(r.error);
  const Value& v = *r.value;
  if (v.type != Value::Type::Array || v.elements.size() != 3 || v.elements[2].type != Value::Type::Array ||
      v.elements[2].elements.size() != kStreamMetaFields.size())
    return reply_failure<StreamMetaRead>(v, "stream " + streamPrefix);
  const auto sec = as_int(v.elements[0]), usec = as_int(v.elements[1]);
  if (!sec || !usec) return R::failure(ErrorKind::Corrupt, "stream " + streamPrefix + ": TIME is not readable");
  StreamMetaRead read;
  read.fields = optional_strings(v.elements[2]);
  read.nowMs = *sec * 1000 + *usec / 1000;
  auto meta = decode_stream_meta(streamPrefix, read.fields);
  if (!meta.ok()) return R::failure(meta.error);
  read.meta = std::move(*meta.value);
  return R::success(std::move(read));
}

Result<bool> RedisStore::write_stream_meta(const std::string& streamPrefix, const StreamMetaRead& read,
                                           const protocol::StreamMetadata& after) {
  std::vector<std::string> args{std::to_string(kStreamMetaFields.size())};
  for (std::size_t i = 0; i < kStreamMetaFields.size(); ++i) {
    args.push_back(kStreamMetaFields[i]);
    args.push_back(read.fields[i] ? "=" + *read.fields[i] : std::string("!"));
  }
  const auto fields = encode_stream_meta(after);
  std::vector<std::string> sets, dels;
  for (std::size_t i = 0; i < fields.size(); ++i) {
    if (fields[i]) sets.push_back(kStreamMetaFields[i]), sets.push_back(*fields[i]);
    else if (read.fields[i]) dels.push_back(kStreamMetaFields[i]);
  }
  args.push_back(std::to_string(sets.size() / 2));
  args.insert(args.end(), sets.begin(), sets.end());
  args.insert(args.end(), dels.begin(), dels.end());
  auto r = run({evalsha(hashCas_, {keys_.stream_meta(streamPrefix)}, std::move(args))}).front();
  if (!r.ok()) return Result<bool>::failure(r.error);
  if (r.value->type != Value::Type::Integer) return reply_failure<bool>(*r.value, "stream " + streamPrefix);
  return Result<bool>::success(r.value->integer == 1);
}

Result<std::vector<std::string>> RedisStore::shard_nodes(const std::string& streamPrefix, protocol::KeyStyle style,
                                                         int32_t count) {
  using R = Result<std::vector<std::string>>;
  if (conn_.cluster()) conn_.forget_map();  // the slots' owners as they are now, not as last mapped
  std::vector<std::string> out;
  out.reserve(static_cast<std::size_t>(std::max(count, 0)));
  for (int32_t i = 0; i < count; ++i) {
    auto at = conn_.options_for_key(protocol::shard_stream_key(streamPrefix, style, i));
    if (!at.ok()) return R::failure(at.error);
    out.push_back(at.value->host + ":" + std::to_string(at.value->port));
  }
  return R::success(std::move(out));
}

Result<int64_t> RedisStore::delete_shard_streams(const std::string& streamPrefix, protocol::KeyStyle style, int32_t from,
                                                 int32_t to) {
  using R = Result<int64_t>;
  std::vector<Command> cmds;
  for (int32_t i = from; i < to; ++i) {
    const std::string key = protocol::shard_stream_key(streamPrefix, style, i);
    cmds.push_back({"DEL", key});  // one key per command: on a cluster each goes to its own node
    cmds.push_back({"DEL", protocol::trimmed_unread_key(key)});
  }
  int64_t existed = 0;
  auto replies = run(cmds);
  for (std::size_t i = 0; i < replies.size(); ++i) {
    const auto& r = replies[i];
    if (!r.ok()) return R::failure(r.error);
    if (r.value->is_error()) return reply_failure<int64_t>(*r.value, "DEL " + cmds[i][1]);
    if (i % 2 == 0 && r.value->type == Value::Type::Integer) existed += r.value->integer;
  }
  return R::success(existed);
}

Result<std::vector<std::string>> RedisStore::draining_streams() {
  using R = Result<std::vector<std::string>>;
  auto r = run({{"SMEMBERS", opts_.ns + ":draining-streams"}}).front();
  if (!r.ok()) return R::failure(r.error);
  if (r.value->type != Value::Type::Array) return reply_failure<std::vector<std::string>>(*r.value, "draining streams");
  std::vector<std::string> out;
  for (const auto& e : r.value->elements) out.push_back(e.str);
  std::sort(out.begin(), out.end());
  return R::success(std::move(out));
}

Result<bool> RedisStore::forget_draining(const std::string& streamPrefix) {
  auto r = run({{"SREM", opts_.ns + ":draining-streams", streamPrefix}}).front();
  if (!r.ok()) return Result<bool>::failure(r.error);
  return Result<bool>::success(r.value->type == Value::Type::Integer && r.value->integer > 0);
}

// How many times a stream's write is decided again when others wrote it meanwhile: a count change
// is an admin's call, so more than a few in the same moments on one stream is a fault to report.
constexpr int kStreamWriteAttempts = 8;

Result<group::ScaleStep> RedisStore::scale_stream(const std::string& streamPrefix, const group::ScaleCall& c) {
  using R = Result<group::ScaleStep>;
  // Named among the draining streams before a shrink can be written: a pod that dies between the
  // two leaves an entry the pods drop once they see the stream is not draining, never a shrink
  // no pod looks at.
  if (c.op == group::ScaleOp::Scale) {
    auto added = run({{"SADD", opts_.ns + ":draining-streams", streamPrefix}}).front();
    if (!added.ok()) return R::failure(added.error);
  }
  for (int attempt = 0; attempt < kStreamWriteAttempts; ++attempt) {
    auto read = read_stream_meta(streamPrefix);
    if (!read.ok()) return R::failure(read.error);
    if (!read.value->meta) return R::failure(ErrorKind::Invalid, "stream " + streamPrefix + " does not exist");
    auto step = group::scale_step(*read.value->meta, c, read.value->nowMs);
    if (step.meta == *read.value->meta) return R::success(std::move(step));  // nothing to write
    auto written = write_stream_meta(streamPrefix, *read.value, step.meta);
    if (!written.ok()) return R::failure(written.error);
    if (*written.value) return R::success(std::move(step));
  }
  return R::failure(ErrorKind::Retryable, "stream " + streamPrefix + " was changed by others " +
                                              std::to_string(kStreamWriteAttempts) + " times while this change was decided");
}

Result<StreamWrite> RedisStore::write_stream(const std::string& streamPrefix, const StreamPut& put) {
  using R = Result<StreamWrite>;
  for (int attempt = 0; attempt < kStreamWriteAttempts; ++attempt) {
    auto read = read_stream_meta(streamPrefix);
    if (!read.ok()) return R::failure(read.error);
    auto step = group::put_step(read.value->meta, streamPrefix, put);
    if (step.changed()) {
      auto written = write_stream_meta(streamPrefix, *read.value, step.meta);
      if (!written.ok()) return R::failure(written.error);
      if (!*written.value) continue;  // written by another meanwhile: decide again
    }
    auto listed = run({{"SADD", opts_.ns + ":streams", streamPrefix}}).front();
    if (!listed.ok()) return R::failure(listed.error);
    return put_result(streamPrefix, std::move(step));
  }
  return R::failure(ErrorKind::Retryable, "stream " + streamPrefix + " was changed by others " +
                                              std::to_string(kStreamWriteAttempts) + " times while this write was decided");
}

Result<int32_t> RedisStore::provision(const GroupKey& key, int32_t shardCount, const std::string& startId) {
  using R = Result<int32_t>;
  auto meta = get_stream(key.streamPrefix);
  if (!meta.ok()) return R::failure(meta.error);
  const auto style = meta.value->has_value() ? (*meta.value)->keyStyle : protocol::KeyStyle::Plain;
  std::vector<std::vector<std::string>> cmds;
  cmds.reserve(static_cast<std::size_t>(std::max(0, shardCount)));
  for (int32_t i = 0; i < shardCount; ++i)
    cmds.push_back({"XGROUP", "CREATE", protocol::shard_stream_key(key.streamPrefix, style, i), key.consumerGroup,
                    startId, "MKSTREAM"});
  if (cmds.empty()) return R::success(0);
  auto replies = run(cmds);
  int32_t created = 0;
  for (std::size_t i = 0; i < replies.size(); ++i) {
    const auto& r = replies[i];
    if (!r.ok()) return R::failure(r.error);
    if (r.value->is_error()) {
      if (r.value->str.rfind("BUSYGROUP", 0) == 0) continue;  // there already: fine
      return R::failure(ErrorKind::Fatal, "XGROUP CREATE " + cmds[i][2] + " " + key.consumerGroup + ": " + r.value->str);
    }
    ++created;
  }
  return R::success(created);
}

namespace {
// One entry of XINFO GROUPS (a flat field/value array in RESP2). Redis 7 adds entries-read and
// lag, nil when it cannot tell; older servers lack them: unknown too.
std::optional<group::ShardGroupReading> group_reading(Value& v) {
  if (v.type != Value::Type::Array || v.elements.size() % 2 != 0) return std::nullopt;
  group::ShardGroupReading g;
  bool named = false;
  for (std::size_t i = 0; i + 1 < v.elements.size(); i += 2) {
    const auto& f = v.elements[i].str;
    auto& x = v.elements[i + 1];
    if (f == "name") g.group = std::move(x.str), named = true;
    else if (f == "last-delivered-id") g.lastDeliveredId = std::move(x.str);
    else if (f == "pending") g.pending = as_int(x).value_or(0);
    else if (f == "entries-read") g.entriesRead = x.is_nil() ? std::nullopt : as_int(x);
    else if (f == "lag") g.lag = x.is_nil() ? std::nullopt : as_int(x);
  }
  if (!named) return std::nullopt;
  return g;
}
}  // namespace

Result<protocol::Retention> RedisStore::get_retention(const std::string& streamPrefix) {
  using R = Result<protocol::Retention>;
  auto r = run({{"HGET", keys_.stream_meta(streamPrefix), "retention"}}).front();
  if (!r.ok()) return R::failure(r.error);
  if (r.value->is_nil()) return R::success({});
  if (r.value->is_error()) return reply_failure<protocol::Retention>(*r.value, "retention of " + streamPrefix);
  auto p = protocol::decode_retention(r.value->str);
  if (!p) return R::failure(ErrorKind::Corrupt, "stream " + streamPrefix + ": retention '" + r.value->str + "'");
  return R::success(*p);
}

Result<bool> RedisStore::set_retention(const std::string& streamPrefix, const protocol::Retention& p) {
  if (auto e = ensure_scripts()) return Result<bool>::failure(*e);
  auto r = run({evalsha(setRetention_, {keys_.stream_meta(streamPrefix)}, {protocol::encode_retention(p)})}).front();
  if (!r.ok()) return Result<bool>::failure(r.error);
  if (r.value->type != Value::Type::Integer) return reply_failure<bool>(*r.value, "retention of " + streamPrefix);
  return Result<bool>::success(r.value->integer == 1);
}

Result<group::TrimOutcome> RedisStore::trim_stream(const std::string& streamPrefix, const group::Trim& t) {
  using R = Result<group::TrimOutcome>;
  group::TrimOutcome out;
  if (t.mode == group::Trim::Mode::None) return R::success(out);
  if (auto e = ensure_scripts()) return R::failure(*e);
  auto meta = get_stream(streamPrefix);
  if (!meta.ok()) return R::failure(meta.error);
  if (!meta.value->has_value()) return R::success(out);
  const auto& m = **meta.value;
  const char* mode = t.mode == group::Trim::Mode::MaxLen ? "maxlen" : t.mode == group::Trim::Mode::MinId ? "minid" : "processed";
  std::vector<Command> cmds;
  for (int32_t i = 0; i < m.readShardCount(); ++i) {
    const auto key = protocol::shard_stream_key(streamPrefix, m.keyStyle, i);
    cmds.push_back(evalsha(trim_, {key, protocol::trimmed_unread_key(key)},
                           {mode, t.arg, std::to_string(group::kTrimPerShardRound)}));
  }
  for (auto& r : run(cmds)) {
    if (!r.ok()) return R::failure(r.error);
    const Value& v = *r.value;
    if (v.type != Value::Type::Array || v.elements.empty()) return reply_failure<group::TrimOutcome>(v, "trim " + streamPrefix);
    out.trimmed += as_int(v.elements[0]).value_or(0);
    for (std::size_t i = 1; i + 1 < v.elements.size(); i += 2)
      out.unread[v.elements[i].str] += as_int(v.elements[i + 1]).value_or(0);
  }
  return R::success(std::move(out));
}

Result<std::string> RedisStore::stream_fingerprint(const std::string& streamPrefix) {
  using R = Result<std::string>;
  auto meta = get_stream(streamPrefix);
  if (!meta.ok()) return R::failure(meta.error);
  if (!meta.value->has_value()) return R::success(std::string());
  const auto& m = **meta.value;
  std::vector<Command> cmds;
  for (int32_t i = 0; i < m.readShardCount(); ++i)
    cmds.push_back({"XINFO", "STREAM", protocol::shard_stream_key(streamPrefix, m.keyStyle, i)});
  std::string out = std::to_string(m.readShardCount());
  for (auto& r : run(cmds)) {
    if (!r.ok()) return R::failure(r.error);
    out += '|';
    if (r.value->is_error()) continue;  // no such shard stream (yet)
    const auto& v = r.value->elements;
    for (std::size_t i = 0; i + 1 < v.size(); i += 2) {
      const auto& f = v[i].str;
      if (f == "length" || f == "last-generated-id" || f == "groups" || f == "entries-added" ||
          f == "max-deleted-entry-id")
        out += (v[i + 1].type == Value::Type::Integer ? std::to_string(v[i + 1].integer) : v[i + 1].str) + ',';
    }
  }
  return R::success(std::move(out));
}

// One shard at a time: XINFO GROUPS lists every group of the shard, so a stream with many groups
// makes a large reply; reading shard by shard keeps one such reply in memory at once.
Result<std::optional<group::StreamReading>> RedisStore::read_stream(const std::string& streamPrefix,
                                                                   const std::string& onlyGroup) {
  using R = Result<std::optional<group::StreamReading>>;
  auto meta = get_stream(streamPrefix);
  if (!meta.ok()) return R::failure(meta.error);
  if (!meta.value->has_value()) return R::success(std::nullopt);
  const auto& m = **meta.value;
  group::StreamReading out;
  out.shardCount = m.readShardCount();
  for (int32_t i = 0; i < m.readShardCount(); ++i) {
    const auto key = protocol::shard_stream_key(streamPrefix, m.keyStyle, i);
    auto replies = run({{"XINFO", "STREAM", key}, {"XINFO", "GROUPS", key}, {"HGETALL", protocol::trimmed_unread_key(key)}});
    for (const auto& r : replies)
      if (!r.ok()) return R::failure(r.error);
    group::ShardReading s;
    s.shard = i;
    s.length = 0;  // no such key: empty
    if (const Value& st = *replies[0].value; st.type == Value::Type::Array) {
      for (std::size_t k = 0; k + 1 < st.elements.size(); k += 2) {
        const auto& f = st.elements[k].str;
        const auto& x = st.elements[k + 1];
        if (f == "length") s.length = as_int(x);
        else if (f == "last-generated-id") s.lastId = x.str;
        else if (f == "first-entry" && x.type == Value::Type::Array && !x.elements.empty()) s.firstId = x.elements[0].str;
      }
    }
    Value& info = *replies[1].value;
    if (info.is_error()) {  // "ERR no such key": the shard stream does not exist
      if (info.str.find("no such key") == std::string::npos)
        return reply_failure<std::optional<group::StreamReading>>(info, "XINFO GROUPS " + key);
    } else if (info.type == Value::Type::Array) {
      s.exists = true;
      const auto trimmed = field_map(*replies[2].value).value_or(FieldMap{});
      if (auto it = trimmed.find(protocol::kTrimmedTotalField); it != trimmed.end()) s.trimmed = std::atoll(it->second.c_str());
      if (onlyGroup.empty()) s.groups.reserve(info.elements.size());  // one per group: no regrowth at 10,000
      for (auto& e : info.elements)
        if (auto g = group_reading(e); g && (onlyGroup.empty() || g->group == onlyGroup)) {
          if (auto it = trimmed.find(g->group); it != trimmed.end()) g->trimmedUnread = std::atoll(it->second.c_str());
          s.groups.push_back(std::move(*g));
        }
    }
    out.shards.push_back(std::move(s));
  }
  return R::success(std::move(out));
}

Result<GroupStore::OffsetsMoved> RedisStore::reset_offsets(const GroupKey& key, int32_t shardCount, const std::string& to,
                                                            int64_t expectedRevision) {
  using R = Result<OffsetsMoved>;
  OffsetsMoved out;
  if (auto e = ensure_scripts()) return R::failure(*e);
  // First the guard: the state the reset was judged on is still the stored one, and moves on.
  auto g = run({evalsha(bumpRevision_, {keys_.group_state(key)}, {std::to_string(expectedRevision)})}).front();
  if (!g.ok()) return R::failure(g.error);
  const Value& gv = *g.value;
  if (gv.type != Value::Type::Array || gv.elements.size() != 2) return reply_failure<OffsetsMoved>(gv, "reset " + key.str());
  out.revision = as_int(gv.elements[1]).value_or(0);
  if (gv.elements[0].str == "CONFLICT") {
    out.conflict = true;
    return R::success(out);
  }
  tracker_.observe(key, out.revision, 0);
  auto meta = get_stream(key.streamPrefix);
  if (!meta.ok()) return R::failure(meta.error);
  const auto style = meta.value->has_value() ? (*meta.value)->keyStyle : protocol::KeyStyle::Plain;
  std::vector<Command> cmds;
  for (int32_t i = 0; i < shardCount; ++i)
    cmds.push_back({"XGROUP", "SETID", protocol::shard_stream_key(key.streamPrefix, style, i), key.consumerGroup, to});
  // Redis's lag counts from the new position: what retention trimmed unread before it no longer
  // comes off it.
  for (int32_t i = 0; i < shardCount; ++i)
    cmds.push_back({"HDEL", protocol::trimmed_unread_key(protocol::shard_stream_key(key.streamPrefix, style, i)),
                    key.consumerGroup});
  auto replies = run(cmds);
  replies.resize(static_cast<std::size_t>(shardCount));  // the HDELs' answers: nothing to check
  int32_t moved = 0;
  for (std::size_t i = 0; i < replies.size(); ++i) {
    auto r = std::move(replies[i]);
    if (!r.ok()) return R::failure(r.error);
    if (r.value->is_error() && r.value->str.rfind("NOGROUP", 0) == 0) {  // not provisioned there yet: create it at `to`
      r = run({{"XGROUP", "CREATE", cmds[i][2], key.consumerGroup, to, "MKSTREAM"}}).front();
      if (!r.ok()) return R::failure(r.error);
    }
    if (r.value->is_error()) return reply_failure<OffsetsMoved>(*r.value, "XGROUP SETID " + cmds[i][2] + " " + key.consumerGroup);
    ++moved;
  }
  out.shards = moved;
  return R::success(out);
}

std::optional<Error> RedisStore::ensure_scripts() {
  if (!cas_.sha.empty()) return std::nullopt;  // known once loaded; NOSCRIPT reloads them
  auto p = ping();  // connecting loads the scripts
  if (!p.ok()) return p.error;
  return std::nullopt;
}

Result<bool> RedisStore::notify(const GroupKey& key, const std::string& message) {
  auto r = conn_.command({"SPUBLISH", keys_.notify_channel(key), message});
  if (!r.ok()) return Result<bool>::failure(r.error);
  if (r.value->is_error()) return reply_failure<bool>(*r.value, "notify " + key.str());
  return Result<bool>::success(r.value->integer > 0);
}

Result<bool> RedisStore::ping() {
  auto r = conn_.command({"PING"});
  if (!r.ok()) return Result<bool>::failure(r.error);
  if (r.value->is_error()) return reply_failure<bool>(*r.value, "ping");
  return Result<bool>::success(true);
}

}  // namespace rsc::store
