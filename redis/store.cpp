#include "redis/store.hpp"

#include <random>

namespace rsc::store {

std::string to_string(CasStatus s) {
  switch (s) {
    case CasStatus::Written: return "written";
    case CasStatus::Conflict: return "conflict";
    case CasStatus::Locked: return "locked";
  }
  return "?";
}

std::string key_style_fixed(const std::string& streamPrefix, protocol::KeyStyle current) {
  return "stream " + streamPrefix + " names its shard keys " + protocol::stream_key_pattern(streamPrefix, current) +
         " (keyStyle " + std::string(protocol::to_string(current)) +
         "); the key style is chosen when a stream is created and never changes";
}

Result<StreamWrite> put_result(const std::string& streamPrefix, group::PutStep step) {
  using R = Result<StreamWrite>;
  using O = group::PutOutcome;
  const auto& m = step.meta;
  switch (step.outcome) {
    case O::Shrink:
      return R::failure(ErrorKind::Invalid, "stream " + streamPrefix + " has " + std::to_string(m.shardCount) +
                                                " shards; shard counts only grow");
    case O::Style: return R::failure(ErrorKind::Invalid, key_style_fixed(streamPrefix, m.keyStyle));
    case O::Busy: return R::success({std::move(step.meta), StreamWrite::Outcome::Busy});
    case O::Deleting: return R::failure(ErrorKind::Retryable, protocol::retired_keys_deleting(streamPrefix));
    case O::Created: return R::success({std::move(step.meta), StreamWrite::Outcome::Created});
    case O::Grown: return R::success({std::move(step.meta), StreamWrite::Outcome::Grown});
    case O::Exists: return R::success({std::move(step.meta), StreamWrite::Outcome::Exists});
    case O::Same: break;
  }
  return R::success({std::move(step.meta), StreamWrite::Outcome::Same});
}

std::string random_token() {
  static thread_local std::mt19937_64 rng{std::random_device{}() ^ (static_cast<uint64_t>(std::random_device{}()) << 32)};
  static const char* hex = "0123456789abcdef";
  std::string s;
  for (int w = 0; w < 2; ++w) {  // 2 x 64 bits
    uint64_t x = rng();
    for (int i = 0; i < 16; ++i, x >>= 4) s += hex[x & 15];
  }
  return s;
}

Rollback RevisionTracker::observe(const GroupKey& key, int64_t revision, int32_t groupEpoch) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = seen_.find(key.str());
  // A group never written (revision 0, epoch 0) teaches nothing: it is not remembered, so asking
  // about any number of groups that do not exist costs no memory.
  if (it == seen_.end() && revision <= 0 && groupEpoch <= 0) return {};
  if (it == seen_.end()) it = seen_.emplace(key.str(), Seen{}).first;
  auto& seen = it->second;
  Rollback r;
  if (revision < seen.revision) {
    r.detected = true;
    r.seenRevision = seen.revision;
    r.seenGroupEpoch = std::max(seen.groupEpoch, groupEpoch);
    ++rollbacks_;
    if (log_)
      log_("store: revision rollback detected for group " + key.str() + ": store has revision " +
           std::to_string(revision) + ", this pod saw " + std::to_string(seen.revision) +
           "; members with epochs the store does not know will be fenced");
  }
  seen.revision = revision;  // accept the store's present; the epoch high-water mark stays
  seen.groupEpoch = std::max(seen.groupEpoch, groupEpoch);
  return r;
}

std::size_t RevisionTracker::remembered() const {
  std::lock_guard<std::mutex> lock(mu_);
  return seen_.size();
}

int64_t RevisionTracker::rollbacks() const {
  std::lock_guard<std::mutex> lock(mu_);
  return rollbacks_;
}

}  // namespace rsc::store
