// What one coordinator pod knows that is not a group's: the store's clock, the store's
// availability, the live pods and its own identity. Shared by the pod's actors and its store
// connections (thread-safe); the rules it applies are group/time_rules.hpp's. No CAF here.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "group/pod_authority.hpp"
#include "group/time_rules.hpp"
#include "redis/connection.hpp"

namespace rsc::actors {

class Metrics;

class PodContext : public store::CallObserver {
 public:
  struct Options {
    std::string podId;
    group::Millis stallMs = 500;  // a round trip slower than this is an outage
    // Local monotonic milliseconds; the default reads std::chrono::steady_clock.
    std::function<group::Millis()> localClock;
    std::shared_ptr<Metrics> metrics;  // may be null
    bool log = true;
    group::Millis podLeaseMs = 5000;  // the pod registry's lease (what group::PodAuthority reasons with)
  };
  explicit PodContext(Options o);

  const std::string& pod_id() const { return opts_.podId; }

  // --- the store's clock
  // A round trip sent and answered at these local times carried the store's time.
  void clock_sample(group::Millis localSent, group::Millis localReceived, group::Millis storeTime);
  bool synced() const;
  group::Millis now();  // the store's time as this pod estimates it; never goes back
  group::Millis local_now() const { return opts_.localClock(); }

  // --- the store's availability (every connection of the pod reports here)
  uint64_t call_began() override;
  void call_ended(uint64_t id, bool ok) override;
  // What this pod knows, now, for judging leases (SPEC §3 rule 8).
  group::TimeView time_view(const group::Config& core);

  // --- tick duty
  void set_live_pods(std::vector<std::string> pods);
  bool has_duty(const std::string& groupKey) const;

  // --- which pod serves which group, and what this pod may do (group/pod_authority.hpp)
  // A pod beat sent and answered at these local times, run at store time `storeNow`.
  void registry_seen(group::Millis localSent, group::Millis localReceived, group::Millis storeNow,
                     const std::vector<group::PodSeen>& live);
  std::shared_ptr<const group::PodView> pod_view() const;
  // Leaving: no more writes, no group served, before the pod leaves the registry.
  void stop_authority();
  // Where other pods reach this one (set once the HTTP server listens).
  void set_address(std::string address);
  std::string address() const;

  // --- readiness: synced, the store answering, and a reply within `freshMs`.
  // Whether /readyz answers ready (group::judge_ready on this pod's view of the store).
  group::ReadyVerdict ready(group::Millis freshMs, group::Millis graceMs,
                            const std::optional<std::string>& probeFailure = std::nullopt);

 private:
  group::Millis now_locked();
  Options opts_;
  mutable std::mutex mu_;
  group::StoreClock clock_;
  std::atomic<bool> synced_{false};  // read on every message of every group actor: no lock
  group::StoreAvailability avail_;
  group::Millis startedAt_ = 0;
  bool downLogged_ = false;
  std::vector<std::string> live_;
  group::PodAuthority authority_;
  std::shared_ptr<const group::PodView> view_;  // authority_'s, swapped under mu_
  std::string address_;
  int lastMode_ = -1;  // what was last logged: 0 not writable, 1 among others, 2 alone
};

}  // namespace rsc::actors
