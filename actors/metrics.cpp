#include "actors/metrics.hpp"

#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

#include "group/describe.hpp"
#include "redis/store.hpp"

#include <algorithm>
#include <array>
#include <dirent.h>
#include <sys/resource.h>
#include <unistd.h>
#include <fstream>
#include <iterator>
#include <sstream>
#include <chrono>
#include <map>
#include <tuple>
#include <atomic>
#include <mutex>
#include <unordered_map>

namespace rsc::actors {

using prometheus::BuildCounter;
using prometheus::BuildGauge;
using prometheus::BuildHistogram;

namespace {
// The process's own figures under Prometheus's standard process_* names, read from /proc at each
// scrape: CPU seconds, resident and virtual memory, open and allowed file descriptors, start time.
std::vector<prometheus::MetricFamily> process_families() {
  std::vector<prometheus::MetricFamily> out;
  auto one = [&](const char* name, const char* help, prometheus::MetricType type, double v) {
    prometheus::MetricFamily f;
    f.name = name;
    f.help = help;
    f.type = type;
    prometheus::ClientMetric m;
    if (type == prometheus::MetricType::Counter) m.counter.value = v;
    else m.gauge.value = v;
    f.metric.push_back(std::move(m));
    out.push_back(std::move(f));
  };
  std::ifstream statFile("/proc/self/stat");
  const std::string stat((std::istreambuf_iterator<char>(statFile)), std::istreambuf_iterator<char>());
  const auto name = stat.rfind(')');  // the command name may hold spaces: fields follow its ')'
  std::vector<std::string> f;
  if (name != std::string::npos && name + 2 < stat.size()) {
    std::istringstream in(stat.substr(name + 2));
    for (std::string x; in >> x;) f.push_back(x);
  }
  const double tick = static_cast<double>(::sysconf(_SC_CLK_TCK)), page = static_cast<double>(::sysconf(_SC_PAGESIZE));
  if (f.size() > 21) {  // f[i] is field i + 3 of proc(5): utime 14, stime 15, starttime 22, vsize 23, rss 24
    one("process_cpu_seconds_total", "User and system CPU time spent, in seconds", prometheus::MetricType::Counter,
        (std::stod(f[11]) + std::stod(f[12])) / tick);
    one("process_virtual_memory_bytes", "Virtual memory size in bytes", prometheus::MetricType::Gauge, std::stod(f[20]));
    one("process_resident_memory_bytes", "Resident memory size in bytes", prometheus::MetricType::Gauge,
        std::stod(f[21]) * page);
    std::ifstream sys("/proc/stat");
    for (std::string line; std::getline(sys, line);)
      if (line.rfind("btime ", 0) == 0)
        one("process_start_time_seconds", "Start time of the process since the Unix epoch, in seconds",
            prometheus::MetricType::Gauge, std::stod(line.substr(6)) + std::stod(f[19]) / tick);
  }
  double fds = 0;
  if (DIR* d = ::opendir("/proc/self/fd")) {
    while (const dirent* e = ::readdir(d))
      if (e->d_name[0] != '.') ++fds;
    ::closedir(d);
    one("process_open_fds", "Open file descriptors", prometheus::MetricType::Gauge, fds - 1);  // less opendir's own
  }
  rlimit lim{};
  if (::getrlimit(RLIMIT_NOFILE, &lim) == 0)
    one("process_max_fds", "The most file descriptors the process may open", prometheus::MetricType::Gauge,
        static_cast<double>(lim.rlim_cur));
  return out;
}

constexpr std::array<protocol::MemberLifecycleState, 6> kStates{
    protocol::MemberLifecycleState::STARTING, protocol::MemberLifecycleState::ACTIVE,
    protocol::MemberLifecycleState::DRAINING, protocol::MemberLifecycleState::LEAVING,
    protocol::MemberLifecycleState::EXPIRED,  protocol::MemberLifecycleState::FENCED};
}

struct Metrics::Impl {
  std::shared_ptr<prometheus::Registry> registry = std::make_shared<prometheus::Registry>();
  prometheus::Family<prometheus::Counter>& tlsHandshakeFailures =
      BuildCounter()
          .Name("rsc_tls_handshake_failures_total")
          .Help("HTTPS handshakes that failed, by reason (timeout, plain_http, no_client_certificate, "
                "client_certificate_rejected, server_certificate_rejected, protocol_version, no_shared_cipher, other)")
          .Register(*registry);
  std::map<std::string, int64_t> certificateNotAfter;  // by file; under mu
  prometheus::Family<prometheus::Gauge>& buildInfo =
      BuildGauge()
          .Name("rsc_build_info")
          .Help("1, labelled with the running build's version and the commit it was built from")
          .Register(*registry);
  prometheus::Family<prometheus::Counter>& heartbeats =
      BuildCounter().Name("rsc_heartbeats_total").Help("Heartbeats answered, by status").Register(*registry);
  prometheus::Counter& unwritten =
      BuildCounter()
          .Name("rsc_heartbeats_unwritten_total")
          .Help("Heartbeats accepted without a store write: the member's stored lease still reached past one more "
                "lease (--lease-renewal-slack-ms)")
          .Register(*registry)
          .Add({});
  prometheus::Family<prometheus::Histogram>& heartbeatLatency =
      BuildHistogram()
          .Name("rsc_heartbeat_duration_seconds")
          .Help("Time from a heartbeat reaching its group to its answer")
          .Register(*registry);
  prometheus::Histogram& heartbeatHist = heartbeatLatency.Add(
      {}, prometheus::Histogram::BucketBoundaries{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1});
  prometheus::Counter& rebalances = BuildCounter()
                                        .Name("rsc_rebalances_total")
                                        .Help("Group epoch bumps (membership or metadata changes)")
                                        .Register(*registry)
                                        .Add({});
  prometheus::Histogram& assignment = BuildHistogram()
                                          .Name("rsc_assignment_compute_seconds")
                                          .Help("Time of steps that recomputed a target assignment")
                                          .Register(*registry)
                                          .Add({}, prometheus::Histogram::BucketBoundaries{0.00001, 0.0001, 0.001,
                                                                                           0.01, 0.1});
  prometheus::Counter& conflicts =
      BuildCounter().Name("rsc_cas_conflicts_total").Help("storeRevision compare-and-set conflicts").Register(*registry).Add({});
  prometheus::Family<prometheus::Counter>& copyChecks =
      BuildCounter()
          .Name("rsc_copy_checks_total")
          .Help("Revision checks before answering from the pod's copy of a group with nothing to write, by result "
                "(stale: another pod had written; the answer was decided again on the stored state)")
          .Register(*registry);
  prometheus::Counter& copyCurrent = copyChecks.Add({{"result", "current"}});
  prometheus::Counter& copyStale = copyChecks.Add({{"result", "stale"}});
  prometheus::Family<prometheus::Counter>& forwards =
      BuildCounter()
          .Name("rsc_forwarded_calls_total")
          .Help("Group calls this pod forwarded to the pod that serves the group, by result (unreachable: "
                "answered RETRY)")
          .Register(*registry);
  prometheus::Counter& forwardAnswered = forwards.Add({{"result", "answered"}});
  prometheus::Counter& forwardUnreachable = forwards.Add({{"result", "unreachable"}});
  prometheus::Counter& contention = BuildCounter()
                                        .Name("rsc_mutex_contention_total")
                                        .Help("Writes refused because another pod held the group mutex")
                                        .Register(*registry)
                                        .Add({});
  prometheus::Family<prometheus::Counter>& storeErrors =
      BuildCounter().Name("rsc_store_errors_total").Help("Store calls that failed, by kind").Register(*registry);
  prometheus::Counter& rollbacks = BuildCounter()
                                       .Name("rsc_revision_rollbacks_total")
                                       .Help("Groups whose storeRevision went back (store lost writes)")
                                       .Register(*registry)
                                       .Add({});
  prometheus::Counter& fencedTotal =
      BuildCounter().Name("rsc_members_fenced_total").Help("Members fenced").Register(*registry).Add({});
  prometheus::Counter& notifiedTotal = BuildCounter()
                                           .Name("rsc_members_notified_total")
                                           .Help("Members told at once (pub/sub) that they have shards to give up or take")
                                           .Register(*registry)
                                           .Add({});
  prometheus::Counter& expiredTotal =
      BuildCounter().Name("rsc_members_expired_total").Help("Members expired (lease ran out)").Register(*registry).Add({});
  prometheus::Histogram& revocations =
      BuildHistogram()
          .Name("rsc_revocation_duration_seconds")
          .Help("Time from asking a member to revoke shards to its ack")
          .Register(*registry)
          .Add({}, prometheus::Histogram::BucketBoundaries{0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 120});
  prometheus::Gauge& groupCount =
      BuildGauge().Name("rsc_groups").Help("Consumer groups held in this pod's memory (actors)").Register(*registry).Add({});
  prometheus::Counter& retired = BuildCounter()
                                     .Name("rsc_groups_retired_total")
                                     .Help("Group actors dropped from memory after being idle")
                                     .Register(*registry)
                                     .Add({});
  prometheus::Family<prometheus::Counter>& deadlineWork =
      BuildCounter()
          .Name("rsc_deadline_work_total")
          .Help("Due group deadlines this pod looked at (result=done|held_elsewhere|failed)")
          .Register(*registry);
  prometheus::Gauge& livePods =
      BuildGauge().Name("rsc_pods_live").Help("Coordinator pods alive in the pod registry").Register(*registry).Add({});
  prometheus::Counter& outages = BuildCounter()
                                     .Name("rsc_store_outages_total")
                                     .Help("Store outages (no answer, or slower than the stall limit) this pod saw")
                                     .Register(*registry)
                                     .Add({});
  prometheus::Gauge& storeDown =
      BuildGauge().Name("rsc_store_down").Help("1 while the store does not answer").Register(*registry).Add({});
  prometheus::Gauge& clockOffset = BuildGauge()
                                       .Name("rsc_store_clock_offset_seconds")
                                       .Help("The store's clock minus this host's wall clock, in seconds, as "
                                             "estimated from round trips (leases are judged on the store's "
                                             "clock; far from 0: a host keeps bad time)")
                                       .Register(*registry)
                                       .Add({});
  prometheus::Family<prometheus::Gauge>& members =
      BuildGauge().Name("rsc_members").Help("Members by lifecycle state").Register(*registry);
  prometheus::Family<prometheus::Counter>& lagRounds =
      BuildCounter()
          .Name("rsc_lag_sampling_rounds_total")
          .Help("Rounds in which this pod read XINFO GROUPS of the streams it samples (result=ok|failed)")
          .Register(*registry);
  prometheus::Histogram& lagRoundSeconds =
      BuildHistogram()
          .Name("rsc_lag_sampling_round_seconds")
          .Help("How long one lag sampling round of this pod took")
          .Register(*registry)
          .Add({}, prometheus::Histogram::BucketBoundaries{0.001, 0.005, 0.02, 0.1, 0.5, 2, 10});
  prometheus::Family<prometheus::Counter>& trimmed =
      BuildCounter()
          .Name("rsc_stream_trimmed_records_total")
          .Help("Records this pod trimmed from the stream's shard streams under its retention policy")
          .Register(*registry);
  prometheus::Family<prometheus::Counter>& trimmedUnread =
      BuildCounter()
          .Name("rsc_stream_trimmed_unread_records_total")
          .Help("Of those, records the group had not read yet (maxLen and maxAgeMs only; never under "
                "processedByAllGroups)")
          .Register(*registry);
  struct StreamLag {
    group::LagByGroup byGroup;
    std::optional<int64_t> length;
  };
  std::map<std::string, StreamLag> streamLag;  // guarded by mu
  std::mutex mu;
  // What each group contributes. The per-group series are built when /metrics is read, from
  // this compact map: a prometheus-cpp gauge with its label sets costs about 450 bytes, five per
  // group, for every group a pod holds.
  struct GroupGauges {
    std::string stream, group;
    std::array<double, 6> counts{};
    double lag = 0, pending = 0, capMax = 0, capAvail = 0, epoch = 0;
    double deadLetters = -1;  // not read yet
    double pendingShards = 0, revokingShards = 0;  // shards not where the target wants them yet
    double live = 0;                               // live members
    double crossRack = -1;                         // shards read across racks; -1: no shard racks
  };
  std::unordered_map<std::string, std::shared_ptr<GroupSlot>> perGroup;  // by "stream/group"
  // The group's slot for `key`, made (empty) when it has none: under mu.
  std::shared_ptr<GroupSlot>& slot_of(const std::string& stream, const std::string& group);
  std::array<prometheus::Gauge*, 6> stateGauges{};
  std::array<std::atomic<prometheus::Counter*>, 9> statusCounters{};  // by protocol::HeartbeatStatus
};

struct Metrics::GroupSlot {
  Impl::GroupGauges gauges;
  bool listed = true;  // false once forgotten: no longer in perGroup
};

std::shared_ptr<Metrics::GroupSlot>& Metrics::Impl::slot_of(const std::string& stream, const std::string& group) {
  auto [it, fresh] = perGroup.try_emplace(stream + "/" + group);
  if (fresh) {
    it->second = std::make_shared<GroupSlot>();
    it->second->gauges.stream = stream;
    it->second->gauges.group = group;
  }
  return it->second;
}

Metrics::Metrics() : impl_(std::make_unique<Impl>()) {
  // Every kind of store error exists from the start at 0, so rate() over it works (and alert
  // rules and dashboards find the series before the first error).
  for (auto k : {store::ErrorKind::Retryable, store::ErrorKind::Fatal, store::ErrorKind::Corrupt, store::ErrorKind::Invalid})
    impl_->storeErrors.Add({{"kind", store::to_string(k)}});
  for (std::size_t i = 0; i < kStates.size(); ++i)
    impl_->stateGauges[i] = &impl_->members.Add({{"state", std::string(protocol::to_string(kStates[i]))}});
}
Metrics::~Metrics() = default;

void Metrics::heartbeat(protocol::HeartbeatStatus status, double seconds) {
  const auto i = static_cast<std::size_t>(status);
  if (i < impl_->statusCounters.size()) {
    auto* c = impl_->statusCounters[i].load(std::memory_order_acquire);
    if (c == nullptr) {  // the first of this status: created once (a lookup by labels is costly)
      std::lock_guard<std::mutex> lock(impl_->mu);
      c = impl_->statusCounters[i].load(std::memory_order_relaxed);
      if (c == nullptr) {
        c = &impl_->heartbeats.Add({{"status", std::string(protocol::to_string(status))}});
        impl_->statusCounters[i].store(c, std::memory_order_release);
      }
    }
    c->Increment();
  }
  impl_->heartbeatHist.Observe(seconds);
}
void Metrics::heartbeats_unwritten(std::size_t n) { impl_->unwritten.Increment(static_cast<double>(n)); }
void Metrics::rebalance() { impl_->rebalances.Increment(); }
void Metrics::assignment_computed(double seconds) { impl_->assignment.Observe(seconds); }
void Metrics::cas_conflict() { impl_->conflicts.Increment(); }
void Metrics::forwarded(bool answered) { (answered ? impl_->forwardAnswered : impl_->forwardUnreachable).Increment(); }
void Metrics::copy_check(bool current) { (current ? impl_->copyCurrent : impl_->copyStale).Increment(); }
void Metrics::mutex_contention() { impl_->contention.Increment(); }
void Metrics::store_error(const std::string& kind) { impl_->storeErrors.Add({{"kind", kind}}).Increment(); }
void Metrics::rollback_detected() { impl_->rollbacks.Increment(); }
void Metrics::fenced() { impl_->fencedTotal.Increment(); }
void Metrics::expired() { impl_->expiredTotal.Increment(); }
void Metrics::notified(std::size_t members) { impl_->notifiedTotal.Increment(static_cast<double>(members)); }
void Metrics::revocation(double seconds) { impl_->revocations.Observe(seconds); }
void Metrics::group_actor_started() { impl_->groupCount.Increment(); }
void Metrics::group_actor_stopped(bool retired) {
  impl_->groupCount.Decrement();
  if (retired) impl_->retired.Increment();
}
void Metrics::deadline_work(const std::string& result) { impl_->deadlineWork.Add({{"result", result}}).Increment(); }
void Metrics::live_pods(double n) { impl_->livePods.Set(n); }
void Metrics::store_outage() { impl_->outages.Increment(); }
void Metrics::store_down(bool down) { impl_->storeDown.Set(down ? 1 : 0); }
void Metrics::clock_offset(double seconds) { impl_->clockOffset.Set(seconds); }

void Metrics::build_info(const std::string& version, const std::string& commit) {
  impl_->buildInfo.Add({{"version", version}, {"commit", commit}}).Set(1);
}

void Metrics::tls_handshake_failed(const std::string& reason) { impl_->tlsHandshakeFailures.Add({{"reason", reason}}).Increment(); }

void Metrics::tls_certificate(const std::string& file, int64_t notAfterUnixSeconds) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->certificateNotAfter[file] = notAfterUnixSeconds;
}

void Metrics::group_events(const std::vector<group::Event>& events, double computeSeconds) {
  using K = group::Event::Kind;
  for (const auto& e : events) {
    switch (e.kind) {
      case K::GROUP_EPOCH_BUMPED: rebalance(); break;
      case K::FENCED: fenced(); break;
      case K::EXPIRED: expired(); break;
      case K::TARGET_COMPUTED: assignment_computed(computeSeconds); break;
      default: break;
    }
  }
}

void Metrics::publish_group(std::shared_ptr<GroupSlot>& slot, const std::string& stream, const std::string& group,
                            const group::GroupState& g) {
  publish_group(slot, stream, group, g, group::count_group(g).totals);
}

void Metrics::publish_group(std::shared_ptr<GroupSlot>& slot, const std::string& stream, const std::string& group,
                            const group::GroupState& g, const group::MemberTotals& t) {
  Impl::GroupGauges next;
  for (std::size_t i = 0; i < kStates.size(); ++i) next.counts[i] = static_cast<double>(t.byState[static_cast<std::size_t>(kStates[i])]);
  next.lag = static_cast<double>(t.lag);
  next.pending = static_cast<double>(t.pending);
  next.pendingShards = static_cast<double>(t.pendingShards);
  next.revokingShards = static_cast<double>(t.revokingShards);
  next.live = static_cast<double>(t.live);
  next.capMax = static_cast<double>(t.capMax);
  next.capAvail = static_cast<double>(t.capAvail);
  next.epoch = g.groupEpoch;
  next.crossRack = g.racks().empty() ? -1.0 : static_cast<double>(group::cross_rack_shards(g));
  std::lock_guard<std::mutex> lock(impl_->mu);
  if (!slot || !slot->listed) slot = impl_->slot_of(stream, group);
  auto& cur = slot->gauges;
  for (std::size_t i = 0; i < kStates.size(); ++i)
    if (next.counts[i] != cur.counts[i]) impl_->stateGauges[i]->Increment(next.counts[i] - cur.counts[i]);
  cur.counts = next.counts;
  cur.lag = next.lag;
  cur.pending = next.pending;
  cur.capMax = next.capMax;
  cur.capAvail = next.capAvail;
  cur.epoch = next.epoch;
  cur.live = next.live;
  cur.pendingShards = next.pendingShards;
  cur.revokingShards = next.revokingShards;
  cur.crossRack = next.crossRack;
}

void Metrics::dead_letters(const std::string& stream, const std::string& group, int64_t n) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->slot_of(stream, group)->gauges.deadLetters = static_cast<double>(n);
}

void Metrics::stream_lag(const std::string& stream, group::LagByGroup byGroup,
                         std::optional<int64_t> length) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->streamLag[stream] = Impl::StreamLag{std::move(byGroup), length};
}

void Metrics::forget_stream_lag(const std::string& stream) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->streamLag.erase(stream);
}

void Metrics::trimmed(const std::string& stream, const group::TrimOutcome& t) {
  if (t.trimmed > 0) impl_->trimmed.Add({{"stream", stream}}).Increment(static_cast<double>(t.trimmed));
  for (const auto& [g, n] : t.unread)
    if (n > 0) impl_->trimmedUnread.Add({{"stream", stream}, {"group", g}}).Increment(static_cast<double>(n));
}

void Metrics::lag_round(bool ok, double seconds) {
  impl_->lagRounds.Add({{"result", ok ? "ok" : "failed"}}).Increment();
  impl_->lagRoundSeconds.Observe(seconds);
}

// A group that left this pod's memory leaves /metrics too (its member counts and its series).
void Metrics::forget_group(const std::string& stream, const std::string& group) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  auto it = impl_->perGroup.find(stream + "/" + group);
  if (it == impl_->perGroup.end()) return;
  auto& cur = it->second->gauges;
  for (std::size_t i = 0; i < kStates.size(); ++i)
    if (cur.counts[i] != 0) impl_->stateGauges[i]->Decrement(cur.counts[i]);
  it->second->listed = false;  // its holder's next publish lists the group again, from zero
  impl_->perGroup.erase(it);
}

std::string Metrics::text() const {
  auto families = impl_->registry->Collect();
  auto gauge = [](const char* name, const char* help) {
    prometheus::MetricFamily f;
    f.name = name;
    f.help = help;
    f.type = prometheus::MetricType::Gauge;
    return f;
  };
  auto lag = gauge("rsc_group_lag", "Sum of the members' reported lag, per group");
  auto pending = gauge("rsc_group_pending", "Sum of the members' reported pending records, per group");
  auto capacity =
      gauge("rsc_group_capacity", "Sum of the members' reported consumer capacity, per group (kind=max|available)");
  auto epoch = gauge("rsc_group_epoch", "Group epoch, per group");
  auto live = gauge("rsc_group_members_live",
                    "Live members, per group (exported by the pod serving the group while its actor is in memory)");
  auto dead = gauge("rsc_group_dead_letters",
                    "Records the group's members gave up on, in its dead-letter stream (read with the group's "
                    "deadline work and by describe), per group");
  auto unsettled = gauge("rsc_group_shards_unsettled",
                         "Shards not yet where the group's target puts them, per group (kind=pending: waiting for "
                         "their holder to let go; kind=revoking: being let go); 0 once the group converged");
  auto crossRack = gauge("rsc_group_cross_rack_shards",
                         "Shards read by a member of another rack than the shard's (or where either has none), per "
                         "group with shard racks (its own, PUT .../groups/{group} shardRacks, or its stream's, PUT .../racks)");
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    std::vector<const Impl::GroupGauges*> groups;
    groups.reserve(impl_->perGroup.size());
    for (const auto& [k, v] : impl_->perGroup) groups.push_back(&v->gauges);
    std::sort(groups.begin(), groups.end(), [](const auto* a, const auto* b) {
      return std::tie(a->stream, a->group) < std::tie(b->stream, b->group);
    });
    auto sample = [](prometheus::MetricFamily& f, const Impl::GroupGauges& g, double v, const char* kind = nullptr) {
      prometheus::ClientMetric m;
      m.label = {{"group", g.group}, {"stream", g.stream}};
      if (kind) m.label.insert(m.label.begin(), {"kind", kind});
      m.gauge.value = v;
      f.metric.push_back(std::move(m));
    };
    for (const auto* g : groups) {
      sample(lag, *g, g->lag);
      sample(pending, *g, g->pending);
      sample(capacity, *g, g->capAvail, "available");
      sample(capacity, *g, g->capMax, "max");
      sample(epoch, *g, g->epoch);
      sample(live, *g, g->live);
      sample(unsettled, *g, g->pendingShards, "pending");
      sample(unsettled, *g, g->revokingShards, "revoking");
      if (g->deadLetters >= 0) sample(dead, *g, g->deadLetters);
      if (g->crossRack >= 0) sample(crossRack, *g, g->crossRack);
    }
  }
  auto rlag = gauge("rsc_stream_group_lag",
                    "Records on the group's shards not yet delivered to it, as Redis reports them (XINFO GROUPS), "
                    "members or not; summed over the shards whose lag Redis knows (a lower bound while "
                    "rsc_stream_group_lag_unknown_shards > 0); exported by the one pod that samples the stream");
  auto runknown = gauge("rsc_stream_group_lag_unknown_shards",
                        "Shards whose lag for the group Redis cannot tell (records deleted or trimmed in the range, "
                        "or the group not on the shard yet)");
  auto rpending = gauge("rsc_stream_group_pending",
                        "Records delivered to the group's consumers and not acked, as Redis reports them");
  auto rlength = gauge("rsc_stream_length", "Records in the stream's shard streams (XLEN summed)");
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    for (const auto& [stream, sl] : impl_->streamLag) {
      for (const auto& [group, g] : sl.byGroup) {
        auto add = [&, &group = group](prometheus::MetricFamily& f, double v) {
          prometheus::ClientMetric m;
          m.label = {{"group", group}, {"stream", stream}};
          m.gauge.value = v;
          f.metric.push_back(std::move(m));
        };
        add(rlag, static_cast<double>(g.knownLag));
        add(runknown, static_cast<double>(g.unknownShards));
        add(rpending, static_cast<double>(g.pending));
      }
      if (sl.length) {
        prometheus::ClientMetric m;
        m.label = {{"stream", stream}};
        m.gauge.value = static_cast<double>(*sl.length);
        rlength.metric.push_back(std::move(m));
      }
    }
  }
  auto certExpiry = gauge("rsc_tls_certificate_expiry_seconds",
                          "Seconds until the served HTTPS certificate expires (negative: it has), per file");
  {
    const auto now = std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
    std::lock_guard<std::mutex> lock(impl_->mu);
    for (const auto& [file, notAfter] : impl_->certificateNotAfter) {
      prometheus::ClientMetric m;
      m.label = {{"file", file}};
      m.gauge.value = static_cast<double>(notAfter - now);
      certExpiry.metric.push_back(std::move(m));
    }
  }
  for (auto* f : {&lag, &pending, &capacity, &epoch, &live, &unsettled, &dead, &crossRack, &rlag, &runknown, &rpending, &rlength, &certExpiry})
    families.push_back(std::move(*f));
  for (auto& f : process_families()) families.push_back(std::move(f));
  prometheus::TextSerializer s;
  return s.Serialize(families);
}

}  // namespace rsc::actors
