#include "redis/memory_store.hpp"

#include <chrono>
#include <algorithm>
#include <cstdlib>

namespace rsc::store {

MemoryStore::MemoryStore(std::function<Millis()> clock, LogFn log) : clock_(std::move(clock)), tracker_(std::move(log)) {
  if (!clock_)
    clock_ = [] {
      return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
          .count();
    };
}

bool MemoryStore::injected_failure(Error& e) {
  ++calls_;
  bool failed = false;
  if (down_) {
    e = {ErrorKind::Retryable, "memory store: unreachable (injected)"};
    failed = true;
  } else if (failNext_ > 0) {
    --failNext_;
    e = {failKind_, "memory store: injected " + to_string(failKind_) + " failure"};
    failed = true;
  }
  for (const auto& o : observers_) o->call_ended(o->call_began(), !failed || e.kind != ErrorKind::Retryable);
  return failed;
}

void MemoryStore::add_observer(std::shared_ptr<CallObserver> o) {
  std::lock_guard<std::mutex> lock(mu_);
  observers_.push_back(std::move(o));
}

Result<Loaded> MemoryStore::load(const GroupKey& key) {
  std::lock_guard<std::mutex> lock(mu_);
  Error e;
  if (injected_failure(e)) return Result<Loaded>::failure(e);
  Loaded out;
  auto it = groups_.find(key.str());
  if (it == groups_.end() || is_remnant(it->second)) {
    out.state.streamPrefix = key.streamPrefix;
    out.state.consumerGroup = key.consumerGroup;
    if (it != groups_.end()) out.state.rollbackGuardUntilMs = remnant_grants_held_until(it->second);
    if (it != groups_.end() && it->second.count(kRevisionField))
      out.state.storeRevision = std::atoll(it->second.at(kRevisionField).c_str());  // deleted: the revision stays
    out.rollback = tracker_.observe(key, out.state.storeRevision, 0);
    return Result<Loaded>::success(std::move(out));
  }
  auto decoded = decode_group(key, it->second);
  if (!decoded.ok()) return Result<Loaded>::failure(decoded.error);
  out.exists = true;
  out.state = std::move(*decoded.value);
  out.rollback = tracker_.observe(key, out.state.storeRevision, out.state.groupEpoch);
  return Result<Loaded>::success(std::move(out));
}

std::vector<Result<CasResult>> MemoryStore::compare_and_set(const std::vector<CasRequest>& batch) {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<Result<CasResult>> out;
  for (const auto& req : batch) {
    Error e;
    if (injected_failure(e)) {
      out.push_back(Result<CasResult>::failure(e));
      continue;
    }
    const std::string k = req.key.str();
    auto& fields = groups_[k];
    if (req.lowerDeadlineTo) set_deadline_locked(k, req.lowerDeadlineTo, req.expectedRevision + 1, true);
    auto revOf = [&]() -> std::optional<int64_t> {
      auto it = fields.find(kRevisionField);
      if (it == fields.end()) return 0;
      char* end = nullptr;
      const long long v = std::strtoll(it->second.c_str(), &end, 10);
      if (it->second.empty() || *end != '\0') return std::nullopt;
      return v;
    };
    if (!revOf()) {
      out.push_back(Result<CasResult>::failure(ErrorKind::Corrupt, "group " + k + ": field 'rev' is not a revision"));
      continue;
    }
    if (conflictNext_ > 0 && !fields.empty()) {
      --conflictNext_;
      fields[kRevisionField] = std::to_string(*revOf() + 1);
    }
    CasResult r;
    int64_t rev = *revOf();
    auto& l = locks_[k];
    const Millis now = clock_();
    const bool lockedByOther = !req.lockToken.empty() && !l.token.empty() && l.expiresAt > now && l.token != req.lockToken;
    if (lockedByOther) {
      r.status = CasStatus::Locked;
      r.revision = rev;
    } else if (rev != req.expectedRevision) {
      r.status = CasStatus::Conflict;
      r.revision = rev;
      if (req.returnStateOnConflict && !req.verifyOnly && fields.count(kGroupField)) {
        auto decoded = decode_group(req.key, fields);
        if (!decoded.ok()) {
          out.push_back(Result<CasResult>::failure(decoded.error));
          continue;
        }
        r.current = std::move(*decoded.value);
      }
    } else if (req.verifyOnly) {  // the copy is current: nothing to write
      r.status = CasStatus::Written;
      r.revision = rev;
    } else {
      auto w = field_writes(*req.next, req.delta);
      if (w.full) fields.clear();
      for (auto& [f, v] : w.set) fields[f] = v;
      for (auto& f : w.del) fields.erase(f);
      r.status = CasStatus::Written;
      r.revision = rev + 1;
      if (req.delta == nullptr) keys_.emplace(k, req.key);  // a new group joins the index
      fields[kRevisionField] = std::to_string(r.revision);
      if (!req.lockToken.empty() && req.lockTtlMs > 0) l = Lock{req.lockToken, now + req.lockTtlMs};
    }
    if (fields.empty()) groups_.erase(k);
    const int32_t epoch = r.status == CasStatus::Written ? req.next->groupEpoch : (r.current ? r.current->groupEpoch : 0);
    r.rollback = tracker_.observe(req.key, r.revision, epoch);
    out.push_back(Result<CasResult>::success(std::move(r)));
  }
  return out;
}

Result<TickLease> MemoryStore::tick_lease(const GroupKey& key, const std::string& token, Millis ttl,
                                          int64_t knownRevision) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    Error e;
    if (injected_failure(e)) return Result<TickLease>::failure(e);
    auto& t = locks_[key.str()];
    const Millis now = clock_();
    if (!t.token.empty() && t.expiresAt > now && t.token != token) return Result<TickLease>::success(TickLease{});
    t = Lock{token, now + ttl};
    auto it = groups_.find(key.str());
    int64_t rev = 0;
    if (it != groups_.end() && it->second.count(kRevisionField)) rev = std::atoll(it->second.at(kRevisionField).c_str());
    if (rev == knownRevision) return Result<TickLease>::success(TickLease{LeaseStatus::Unchanged, rev, std::nullopt});
    --calls_;  // the load below is part of this call
  }
  auto l = load(key);
  if (!l.ok()) return Result<TickLease>::failure(l.error);
  TickLease t{LeaseStatus::Changed, l.value->state.storeRevision, std::move(*l.value)};
  return Result<TickLease>::success(std::move(t));
}

void MemoryStore::set_deadline_locked(const std::string& g, std::optional<Millis> due, int64_t rev, bool lower) {
  auto seen = dueRev_.find(g);
  const int64_t seenRev = seen == dueRev_.end() ? -1 : seen->second;
  if (lower) {
    auto cur = due_.find(g);
    if (cur == due_.end() || *due < cur->second) due_[g] = *due;
    if (rev > seenRev) dueRev_[g] = rev;
    return;
  }
  if (seenRev > rev) return;
  if (!due) {
    due_.erase(g);
    dueRev_.erase(g);
  } else {
    due_[g] = *due;
    dueRev_[g] = rev;
  }
}

Result<bool> MemoryStore::finish_deadline_work(const GroupKey& key, const std::string& token, std::optional<Millis> due,
                                               int64_t revision) {
  std::lock_guard<std::mutex> lock(mu_);
  Error e;
  if (injected_failure(e)) return Result<bool>::failure(e);
  const auto seen = dueRev_.find(key.str());
  const bool applied = seen == dueRev_.end() || seen->second <= revision;
  set_deadline_locked(key.str(), due, revision, false);
  if (!token.empty()) {
    auto& l = locks_[key.str()];
    if (l.token == token) l = Lock{};
  }
  return Result<bool>::success(applied);
}

Result<PodBeat> MemoryStore::pod_beat(const std::string& podId, Millis leaseMs, std::size_t dueLimit,
                                      const std::string& address) {
  std::lock_guard<std::mutex> lock(mu_);
  Error e;
  if (injected_failure(e)) return Result<PodBeat>::failure(e);
  PodBeat b;
  b.storeTimeMs = clock_();
  for (auto it = pods_.begin(); it != pods_.end();) {
    if (it->second <= b.storeTimeMs) {
      podSince_.erase(it->first);
      podAddress_.erase(it->first);
      it = pods_.erase(it);
    } else {
      ++it;
    }
  }
  if (!podId.empty()) {
    if (!pods_.count(podId)) podSince_[podId] = pods_.empty() ? -b.storeTimeMs : b.storeTimeMs;
    pods_[podId] = b.storeTimeMs + leaseMs;
    if (!address.empty()) podAddress_[podId] = address;
  }
  for (const auto& [id, until] : pods_) {
    b.livePods.push_back(id);
    auto s = podSince_.find(id);
    b.since.push_back(s == podSince_.end() ? 0 : s->second);
    auto a = podAddress_.find(id);
    b.addresses.push_back(a == podAddress_.end() ? std::string() : a->second);
  }
  std::vector<std::pair<Millis, std::string>> due;
  for (const auto& [g, t] : due_)
    if (t <= b.storeTimeMs) due.emplace_back(t, g);
  std::sort(due.begin(), due.end());
  for (const auto& [t, g] : due) {
    if (b.due.size() >= dueLimit) break;
    const auto slash = g.find('/');
    b.due.push_back({g.substr(0, slash), g.substr(slash + 1)});
  }
  return Result<PodBeat>::success(std::move(b));
}

Result<bool> MemoryStore::pod_leave(const std::string& podId) {
  std::lock_guard<std::mutex> lock(mu_);
  Error e;
  if (injected_failure(e)) return Result<bool>::failure(e);
  podSince_.erase(podId);
  podAddress_.erase(podId);
  return Result<bool>::success(pods_.erase(podId) == 1);
}

Result<bool> MemoryStore::mark_due(const GroupKey& key, Millis at) {
  std::lock_guard<std::mutex> lock(mu_);
  Error e;
  if (injected_failure(e)) return Result<bool>::failure(e);
  auto it = due_.find(key.str());
  if (it == due_.end())
    due_.emplace(key.str(), at);
  else
    it->second = std::min(it->second, at);
  return Result<bool>::success(true);
}

Result<int64_t> MemoryStore::index_missing_deadlines(Millis now) {
  std::lock_guard<std::mutex> lock(mu_);
  Error e;
  if (injected_failure(e)) return Result<int64_t>::failure(e);
  int64_t added = 0;
  for (const auto& [k, key] : keys_)
    if (due_.emplace(k, now).second) ++added;
  return Result<int64_t>::success(added);
}

Result<DeleteStatus> MemoryStore::delete_group(const GroupKey& key, int64_t expectedRevision, int64_t grantsHeldUntilMs) {
  std::lock_guard<std::mutex> lock(mu_);
  Error e;
  if (injected_failure(e)) return Result<DeleteStatus>::failure(e);
  auto it = groups_.find(key.str());
  if (it == groups_.end() || !it->second.count(kGroupField)) return Result<DeleteStatus>::success(DeleteStatus::NotFound);
  const int64_t rev = std::atoll(it->second[kRevisionField].c_str());
  if (rev != expectedRevision) return Result<DeleteStatus>::success(DeleteStatus::Conflict);
  it->second.clear();
  it->second[kRevisionField] = std::to_string(rev + 1);
  if (grantsHeldUntilMs > 0) it->second[kDeletedGrantsHeldField] = std::to_string(grantsHeldUntilMs);
  locks_.erase(key.str());
  keys_.erase(key.str());
  set_deadline_locked(key.str(), std::nullopt, rev + 1, false);
  tracker_.observe(key, rev + 1, 0);
  return Result<DeleteStatus>::success(DeleteStatus::Deleted);
}

Result<int64_t> MemoryStore::count_stream_groups(const std::string& streamPrefix) {
  std::lock_guard<std::mutex> lock(mu_);
  Error e;
  if (injected_failure(e)) return Result<int64_t>::failure(e);
  int64_t n = 0;
  for (const auto& [k, key] : keys_) n += key.streamPrefix == streamPrefix;
  return Result<int64_t>::success(n);
}

std::map<std::string, Millis> MemoryStore::deadlines() const {
  std::lock_guard<std::mutex> lock(mu_);
  return due_;
}

Result<std::vector<GroupKey>> MemoryStore::list_groups() {
  std::lock_guard<std::mutex> lock(mu_);
  Error e;
  if (injected_failure(e)) return Result<std::vector<GroupKey>>::failure(e);
  std::vector<GroupKey> out;
  for (const auto& [k, key] : keys_) out.push_back(key);
  return Result<std::vector<GroupKey>>::success(std::move(out));
}

Result<std::vector<std::string>> MemoryStore::list_streams() {
  std::lock_guard<std::mutex> lock(mu_);
  Error e;
  if (injected_failure(e)) return Result<std::vector<std::string>>::failure(e);
  std::set<std::string> names;
  for (const auto& [name, meta] : streams_) names.insert(name);
  for (const auto& [k, key] : keys_) names.insert(key.streamPrefix);
  return Result<std::vector<std::string>>::success(std::vector<std::string>(names.begin(), names.end()));
}

Result<std::vector<std::string>> MemoryStore::list_stream_groups(const std::string& streamPrefix) {
  std::lock_guard<std::mutex> lock(mu_);
  Error e;
  if (injected_failure(e)) return Result<std::vector<std::string>>::failure(e);
  std::vector<std::string> out;
  for (const auto& [k, key] : keys_)
    if (key.streamPrefix == streamPrefix) out.push_back(key.consumerGroup);
  return Result<std::vector<std::string>>::success(std::move(out));
}

Result<std::optional<protocol::StreamMetadata>> MemoryStore::get_stream(const std::string& streamPrefix) {
  using R = Result<std::optional<protocol::StreamMetadata>>;
  std::lock_guard<std::mutex> lock(mu_);
  Error e;
  if (injected_failure(e)) return R::failure(e);
  auto it = streams_.find(streamPrefix);
  if (it == streams_.end()) return R::success(std::nullopt);
  return R::success(it->second);
}

Result<StreamWrite> MemoryStore::write_stream(const std::string& streamPrefix, const StreamPut& put) {
  using R = Result<StreamWrite>;
  std::lock_guard<std::mutex> lock(mu_);
  Error e;
  if (injected_failure(e)) return R::failure(e);
  auto it = streams_.find(streamPrefix);
  auto step = group::put_step(it == streams_.end() ? std::nullopt : std::optional<protocol::StreamMetadata>(it->second),
                              streamPrefix, put);
  if (step.changed()) streams_[streamPrefix] = step.meta;
  return put_result(streamPrefix, std::move(step));
}

Result<bool> MemoryStore::write_lag_snapshot(const std::string& streamPrefix, const LagSnapshotWrite& w) {
  std::lock_guard<std::mutex> lock(mu_);
  Error e;
  if (injected_failure(e)) return Result<bool>::failure(e);
  auto& lag = lagSnapshot_[streamPrefix];
  auto& sums = lagSums_[streamPrefix];
  if (w.replace) lag.clear(), sums.clear();
  lag["@at"] = sums["@at"] = std::to_string(w.atMs);
  lag["@shards"] = w.shards;
  for (const auto& [g, v] : w.positions) lag[g] = v;
  for (const auto& [g, v] : w.sums) sums[g] = v;
  for (const auto& g : w.removed) lag.erase(g), sums.erase(g);
  return Result<bool>::success(true);
}

Result<StreamStore::LagSnapshotRead> MemoryStore::read_lag_snapshot(const std::string& streamPrefix,
                                                                    const std::vector<std::string>& groups, bool sums) {
  std::lock_guard<std::mutex> lock(mu_);
  Error e;
  if (injected_failure(e)) return Result<LagSnapshotRead>::failure(e);
  LagSnapshotRead out;
  const auto& all = sums ? lagSums_ : lagSnapshot_;
  const auto it = all.find(streamPrefix);
  auto field = [&](const std::string& f) -> std::optional<std::string> {
    if (it == all.end()) return std::nullopt;
    const auto v = it->second.find(f);
    return v == it->second.end() ? std::nullopt : std::optional<std::string>(v->second);
  };
  if (const auto at = field("@at")) out.atMs = std::atoll(at->c_str());
  out.shards = field("@shards").value_or("");
  for (const auto& g : groups) out.values.push_back(field(g));
  return Result<LagSnapshotRead>::success(std::move(out));
}

Result<group::ScaleStep> MemoryStore::scale_stream(const std::string& streamPrefix, const group::ScaleCall& call) {
  using R = Result<group::ScaleStep>;
  std::lock_guard<std::mutex> lock(mu_);
  Error e;
  if (injected_failure(e)) return R::failure(e);
  auto it = streams_.find(streamPrefix);
  if (it == streams_.end()) return R::failure(ErrorKind::Invalid, "stream " + streamPrefix + " does not exist");
  if (call.op == group::ScaleOp::Scale) draining_.insert(streamPrefix);
  auto step = group::scale_step(it->second, call, clock_ ? clock_() : 0);
  it->second = step.meta;
  return R::success(std::move(step));
}

Result<std::vector<std::string>> MemoryStore::draining_streams() {
  std::lock_guard<std::mutex> lock(mu_);
  Error e;
  if (injected_failure(e)) return Result<std::vector<std::string>>::failure(e);
  return Result<std::vector<std::string>>::success(std::vector<std::string>(draining_.begin(), draining_.end()));
}

Result<bool> MemoryStore::forget_draining(const std::string& streamPrefix) {
  std::lock_guard<std::mutex> lock(mu_);
  return Result<bool>::success(draining_.erase(streamPrefix) > 0);
}

Result<int64_t> MemoryStore::delete_shard_streams(const std::string& streamPrefix, protocol::KeyStyle style, int32_t from,
                                                  int32_t to) {
  std::lock_guard<std::mutex> lock(mu_);
  Error e;
  if (injected_failure(e)) return Result<int64_t>::failure(e);
  int64_t existed = 0;
  for (int32_t i = from; i < to; ++i) {
    const std::string key = protocol::shard_stream_key(streamPrefix, style, i);
    bool had = false;
    for (auto it = consumerGroups_.begin(); it != consumerGroups_.end();)
      if (it->first == key) {
        consumerGroupStart_.erase(*it);
        it = consumerGroups_.erase(it);
        had = true;
      } else {
        ++it;
      }
    existed += had ? 1 : 0;
  }
  return Result<int64_t>::success(existed);
}

Result<int32_t> MemoryStore::provision(const GroupKey& key, int32_t shardCount, const std::string& startId) {
  using R = Result<int32_t>;
  std::lock_guard<std::mutex> lock(mu_);
  Error e;
  if (injected_failure(e)) return R::failure(e);
  if (failProvisioning_ > 0) {
    --failProvisioning_;
    return R::failure(ErrorKind::Fatal, "XGROUP CREATE " + key.streamPrefix + ": WRONGTYPE (injected)");
  }
  auto it = streams_.find(key.streamPrefix);
  const auto style = it == streams_.end() ? protocol::KeyStyle::Plain : it->second.keyStyle;
  int32_t created = 0;
  for (int32_t i = 0; i < shardCount; ++i)
    if (consumerGroups_.emplace(protocol::shard_stream_key(key.streamPrefix, style, i), key.consumerGroup).second) {
      ++created;
      consumerGroupStart_[{protocol::shard_stream_key(key.streamPrefix, style, i), key.consumerGroup}] = startId;
    }
  return R::success(created);
}

void MemoryStore::fail_provisioning(int calls) {
  std::lock_guard<std::mutex> lock(mu_);
  failProvisioning_ = calls;
}

std::set<std::pair<std::string, std::string>> MemoryStore::consumer_groups() const {
  std::lock_guard<std::mutex> lock(mu_);
  return consumerGroups_;
}

Result<bool> MemoryStore::notify(const GroupKey& key, const std::string& message) {
  std::lock_guard<std::mutex> lock(mu_);
  Error e;
  if (injected_failure(e)) return Result<bool>::failure(e);
  notifications_.emplace_back(key.str(), message);
  return Result<bool>::success(false);
}

std::vector<std::pair<std::string, std::string>> MemoryStore::notifications() const {
  std::lock_guard<std::mutex> lock(mu_);
  return notifications_;
}

Result<bool> MemoryStore::ping() {
  std::lock_guard<std::mutex> lock(mu_);
  Error e;
  if (injected_failure(e)) return Result<bool>::failure(e);
  return Result<bool>::success(true);
}

void MemoryStore::fail_next(int calls, ErrorKind kind) {
  std::lock_guard<std::mutex> lock(mu_);
  failNext_ = calls;
  failKind_ = kind;
}
void MemoryStore::set_unreachable(bool down) {
  std::lock_guard<std::mutex> lock(mu_);
  down_ = down;
}
void MemoryStore::conflict_next(int n) {
  std::lock_guard<std::mutex> lock(mu_);
  conflictNext_ = n;
}
void MemoryStore::set_raw_field(const GroupKey& key, const std::string& field, const std::string& value) {
  std::lock_guard<std::mutex> lock(mu_);
  groups_[key.str()][field] = value;
  keys_.emplace(key.str(), key);
}
FieldMap MemoryStore::raw(const GroupKey& key) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = groups_.find(key.str());
  return it == groups_.end() ? FieldMap{} : it->second;
}
void MemoryStore::replace_raw(const GroupKey& key, FieldMap fields) {
  std::lock_guard<std::mutex> lock(mu_);
  if (fields.empty())
    groups_.erase(key.str());
  else
    groups_[key.str()] = std::move(fields);
}
void MemoryStore::clear() {
  std::lock_guard<std::mutex> lock(mu_);
  groups_.clear();
  keys_.clear();
  locks_.clear();
  due_.clear();
  dueRev_.clear();
  pods_.clear();
  streams_.clear();
}
int64_t MemoryStore::calls() const {
  std::lock_guard<std::mutex> lock(mu_);
  return calls_;
}

}  // namespace rsc::store
