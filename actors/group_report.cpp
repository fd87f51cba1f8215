#include "actors/group_report.hpp"

#include "log/log.hpp"

namespace rsc::actors {

void GroupReport::stored(const std::vector<group::Event>& events, group::CachedGroup& c, double computeSeconds,
                         group::Millis now) {
  recent_.record(events, c.state().groupEpoch, now);
  if (logEvents_)
    for (const auto& e : events) log::info("group " + key_.str() + ": " + group::to_string(e));
  const auto handovers = c.handovers_done(events, now);
  if (!metrics_) return;
  metrics_->group_events(events, computeSeconds);
  for (auto ms : handovers) metrics_->revocation(static_cast<double>(ms) / 1000.0);
  if (const auto* totals = c.totals()) metrics_->publish_group(slot_, key_.streamPrefix, key_.consumerGroup, c.state(), *totals);
  else metrics_->publish_group(slot_, key_.streamPrefix, key_.consumerGroup, c.state());
}

void GroupReport::rollback(const std::optional<group::Rollback>& r, const group::CachedGroup& c) {
  if (!r) return;
  if (metrics_) metrics_->rollback_detected();
  log::error("group " + key_.str() + ": storeRevision went back from " + std::to_string(r->seenRevision) + " to " +
             std::to_string(c.held() ? c.state().storeRevision : 0) + "; fencing epochs the store does not know");
}

void GroupReport::store_failed(const store::Error& e) {
  if (metrics_) metrics_->store_error(store::to_string(e.kind));
  if (e.kind != store::ErrorKind::Retryable)
    log::error("group " + key_.str() + ": store error (" + store::to_string(e.kind) + "): " + e.message);
}

void GroupReport::dead_letters(int64_t n) {
  if (metrics_) metrics_->dead_letters(key_.streamPrefix, key_.consumerGroup, n);
}

void GroupReport::offsets_reset(const std::string& to, int32_t shards) {
  log::info("group " + key_.str() + ": position reset to " + to + " on " + std::to_string(shards) + " shard streams by admin");
}

void GroupReport::deleted() {
  log::info("group " + key_.str() + ": deleted by admin");
  if (metrics_) metrics_->forget_group(key_.streamPrefix, key_.consumerGroup);
}

}  // namespace rsc::actors
