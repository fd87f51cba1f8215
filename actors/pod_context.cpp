#include "actors/pod_context.hpp"

#include <algorithm>
#include <chrono>
#include <cstdlib>

#include "log/log.hpp"
#include "actors/metrics.hpp"

namespace rsc::actors {

PodContext::PodContext(Options o)
    : opts_(std::move(o)),
      avail_(opts_.stallMs),
      authority_(opts_.podId, opts_.podLeaseMs, group::pod_authority_margin(opts_.podLeaseMs)),
      view_(authority_.view()) {
  if (!opts_.localClock)
    opts_.localClock = [] {
      return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch())
          .count();
    };
}

void PodContext::clock_sample(group::Millis localSent, group::Millis localReceived, group::Millis storeTime) {
  std::lock_guard<std::mutex> lock(mu_);
  const bool first = !clock_.synced();
  clock_.observe(localSent, localReceived, storeTime);
  synced_.store(true, std::memory_order_release);
  if (first) {
    startedAt_ = clock_.now(opts_.localClock());
    // The host's wall clock is only reported: leases are judged on the store's.
    const group::Millis wall = std::chrono::duration_cast<std::chrono::milliseconds>(
                                   std::chrono::system_clock::now().time_since_epoch())
                                   .count();
    const group::Millis skew = wall - startedAt_;
    if (opts_.log) {
      log::info("pod " + opts_.podId + ": on the store's clock (+-" + std::to_string(clock_.uncertainty()) +
                "ms); judging no lease before " + std::to_string(startedAt_) + " + one lease");
      const std::string text = "pod " + opts_.podId + ": this host's wall clock is " + std::to_string(std::abs(skew)) +
                               "ms " + (skew >= 0 ? "ahead of" : "behind") +
                               " the store's (leases are judged on the store's clock, so this changes no decision)";
      if (std::abs(skew) > 1000)
        log::warn(text);
      else
        log::info(text);
    }
  }
  if (opts_.metrics) {
    // The store's clock against this host's wall clock (the clock an operator compares), not the
    // monotonic clock the offset is kept on: near 0 when the hosts keep time.
    const group::Millis wallNow = std::chrono::duration_cast<std::chrono::milliseconds>(
                                      std::chrono::system_clock::now().time_since_epoch())
                                      .count();
    opts_.metrics->clock_offset(static_cast<double>(clock_.now(opts_.localClock()) - wallNow) / 1000.0);
  }
}

bool PodContext::synced() const { return synced_.load(std::memory_order_acquire); }

group::Millis PodContext::now_locked() { return clock_.now(opts_.localClock()); }

group::Millis PodContext::now() {
  std::lock_guard<std::mutex> lock(mu_);
  return now_locked();
}

uint64_t PodContext::call_began() {
  std::lock_guard<std::mutex> lock(mu_);
  if (!clock_.synced()) return 0;  // no store time to date it by yet (nothing is judged before)
  return avail_.began(now_locked());
}

void PodContext::call_ended(uint64_t id, bool ok) {
  std::lock_guard<std::mutex> lock(mu_);
  if (id == 0) return;
  const auto t = now_locked();
  const auto before = avail_.outage_count();
  const auto lastBefore = avail_.outages().empty() ? group::Outage{} : avail_.outages().back();
  avail_.ended(id, t, ok);
  if (!ok && !downLogged_) {
    downLogged_ = true;
    if (opts_.metrics) opts_.metrics->store_down(true);
    if (opts_.log)
      log::warn("pod " + opts_.podId + ": the store does not answer; heartbeats get RETRY and no lease runs until it does");
  }
  const bool grew = avail_.outage_count() > before ||
                    (!avail_.outages().empty() && avail_.outages().back().to != lastBefore.to && ok);
  if (ok && grew) {
    const auto& o = avail_.outages().back();
    if (avail_.outage_count() > before && opts_.metrics) opts_.metrics->store_outage();
    if (opts_.metrics) opts_.metrics->store_down(false);
    downLogged_ = false;
    // One line per outage: later replies of calls sent during it stretch its end by a few ms each.
    const bool isNew = avail_.outage_count() > before;
    if (opts_.log && (isNew || o.to - lastBefore.to >= 500))
      log::warn("pod " + opts_.podId + ": store outage from " + std::to_string(o.from) + " to " + std::to_string(o.to) +
                " (" + std::to_string(o.to - o.from) + "ms): that time does not count against any lease");
  }
}

group::TimeView PodContext::time_view(const group::Config& core) {
  std::lock_guard<std::mutex> lock(mu_);
  group::TimeView tv;
  tv.now = now_locked();
  tv.expiryHeldUntil = clock_.synced() ? group::first_lease_end(startedAt_, core) : tv.now + core.memberLeaseTtlMs;
  tv.outageOngoing = avail_.ongoing(tv.now) || !clock_.synced();
  tv.outages = avail_.outages_vector();
  return tv;
}

void PodContext::set_live_pods(std::vector<std::string> pods) {
  std::lock_guard<std::mutex> lock(mu_);
  live_ = std::move(pods);
  if (opts_.metrics) opts_.metrics->live_pods(static_cast<double>(live_.size()));
}

bool PodContext::has_duty(const std::string& groupKey) const {
  std::lock_guard<std::mutex> lock(mu_);
  return view_->owns(groupKey, opts_.localClock());  // the group's owner does its deadline work
}

void PodContext::registry_seen(group::Millis localSent, group::Millis localReceived, group::Millis storeNow,
                               const std::vector<group::PodSeen>& live) {
  std::lock_guard<std::mutex> lock(mu_);
  view_ = authority_.beat(localSent, localReceived, storeNow, live);
  const auto& v = *view_;
  const int mode = !v.may_write(localReceived) ? 0 : v.alone() ? 2 : 1;
  if (mode == lastMode_ || !opts_.log) return;
  lastMode_ = mode;
  if (mode == 2)
    log::info("pod " + opts_.podId + ": the only live pod: serves every group from its own copies (term " +
              std::to_string(v.term) + ")");
  else if (mode == 1)
    log::info("pod " + opts_.podId + ": " + std::to_string(live.size()) +
              " live pods: serves the groups it owns, forwards the others' calls to their owners (term " +
              std::to_string(v.term) + ")");
  else if (v.writableFrom > localReceived)
    log::info("pod " + opts_.podId + ": registered among " + std::to_string(live.size() - 1) +
              " other pod(s): forwards every call for " + std::to_string(v.writableFrom - localReceived) +
              "ms, until every pod has seen it, then serves its share of the groups");
  else
    log::warn("pod " + opts_.podId + ": not in the pod registry: serves no group until it is again");
}

std::shared_ptr<const group::PodView> PodContext::pod_view() const {
  std::lock_guard<std::mutex> lock(mu_);
  return view_;
}

void PodContext::stop_authority() {
  std::lock_guard<std::mutex> lock(mu_);
  authority_.stop();
  view_ = authority_.view();
}

void PodContext::set_address(std::string address) {
  std::lock_guard<std::mutex> lock(mu_);
  address_ = std::move(address);
}

std::string PodContext::address() const {
  std::lock_guard<std::mutex> lock(mu_);
  return address_;
}

group::ReadyVerdict PodContext::ready(group::Millis freshMs, group::Millis graceMs,
                                     const std::optional<std::string>& probeFailure) {
  std::lock_guard<std::mutex> lock(mu_);
  return group::judge_ready(clock_.synced(), avail_, clock_.synced() ? now_locked() : 0, freshMs, graceMs, probeFailure);
}

}  // namespace rsc::actors
