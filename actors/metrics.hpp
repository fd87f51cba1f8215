// The coordinator's Prometheus metrics (prometheus-cpp). Label cardinality is bounded: status,
// state and error kind, plus stream and group for the per-group gauges; never a member id.
#pragma once

#include <map>
#include <memory>
#include <string>

#include "group/notify.hpp"
#include "group/state.hpp"
#include "group/stream_lag.hpp"

namespace prometheus {
class Registry;
class Counter;
class Gauge;
class Histogram;
template <typename T>
class Family;
}  // namespace prometheus

namespace rsc::actors {

class Metrics {
 public:
  Metrics();
  ~Metrics();

  void heartbeat(protocol::HeartbeatStatus status, double seconds);
  void heartbeats_unwritten(std::size_t n);  // accepted while the stored lease still covered them
  void rebalance();  // a group epoch bump
  void assignment_computed(double seconds);
  void cas_conflict();
  void forwarded(bool answered);  // a group call sent on to the pod that serves the group
  void copy_check(bool current);  // a revision check before answering from the pod's copy
  void mutex_contention();
  void store_error(const std::string& kind);
  void rollback_detected();
  void fenced();
  void expired();
  void notified(std::size_t members);
  void revocation(double seconds);
  void group_actor_started();
  void group_actor_stopped(bool retired);
  void deadline_work(const std::string& result);
  void live_pods(double n);
  void store_outage();
  void store_down(bool down);
  void clock_offset(double seconds);

  // What a stored step's events count: rebalances, fencings, expiries, assignments computed.
  void group_events(const std::vector<group::Event>& events, double computeSeconds);
  // Replaces this group's contribution to the member-state totals and its per-group gauges.
  // `slot` is the group's place here, kept by its caller between calls (null at first): a group
  // that writes often is found without building and hashing its name each time. A slot whose
  // group was forgotten since is replaced.
  struct GroupSlot;
  // `totals` are g's members' (group::count_group), kept by the group's copy; without them they
  // are counted here.
  void publish_group(std::shared_ptr<GroupSlot>& slot, const std::string& stream, const std::string& group,
                     const group::GroupState& g, const group::MemberTotals& totals);
  void publish_group(std::shared_ptr<GroupSlot>& slot, const std::string& stream, const std::string& group,
                     const group::GroupState& g);
  void forget_group(const std::string& stream, const std::string& group);
  // The group's dead letters now (rsc_group_dead_letters; a group not read yet has no series).
  void dead_letters(const std::string& stream, const std::string& group, int64_t n);
  // What the stream's last lag sample found (this pod samples it): replaces the stream's series
  // (rsc_stream_group_lag, _lag_unknown_shards, _pending per group; rsc_stream_length).
  void stream_lag(const std::string& stream, group::LagByGroup byGroup,
                  std::optional<int64_t> length);
  // Another pod samples the stream now, or it is gone: its series leave this pod's /metrics.
  void forget_stream_lag(const std::string& stream);
  void lag_round(bool ok, double seconds);  // a sampling round of this pod: counted and timed
  // What applying the stream's retention trimmed (rsc_stream_trimmed_records_total and, per group,
  // rsc_stream_trimmed_unread_records_total).
  void trimmed(const std::string& stream, const group::TrimOutcome& t);

  // HTTPS: a handshake that failed, by reason (http::handshake_failure_reason's few words), and
  // the served certificate's end of validity (rsc_tls_certificate_expiry_seconds: the seconds left
  // at each scrape, negative once it has expired).
  void tls_handshake_failed(const std::string& reason);
  // rsc_build_info{version, commit} 1 (once, at start).
  void build_info(const std::string& version, const std::string& commit);
  void tls_certificate(const std::string& file, int64_t notAfterUnixSeconds);

  std::string text() const;  // the exposition format for GET /metrics

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace rsc::actors
