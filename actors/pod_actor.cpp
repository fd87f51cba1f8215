// The pod actor: one per coordinator process, on its own store connection. Every beat it renews
// the pod's lease in the pod registry, reads the store's clock and the live pods, and asks the
// deadline index which groups are due; each due group whose duty is this pod's (rendezvous
// hashing over the live pods, group/time_rules.hpp) gets its deadline work. A group at rest costs
// nothing here: one call per beat serves every group of the pod.
#include <malloc.h>

#include <chrono>
#include <deque>
#include <map>
#include <set>

#include "actors/actors.hpp"
#include "group/scale.hpp"
#include "group/stream_lag.hpp"
#include "log/log.hpp"

namespace rsc::actors {
namespace {

struct PodState {
  // The two parts of the store a pod's own work uses: its registry and the streams.
  std::shared_ptr<store::PodRegistry> pods;
  std::shared_ptr<store::StreamStore> streams;
  std::shared_ptr<PodContext> pod;
  PodActorConfig cfg;
  bool indexed = false;  // groups written before the deadline index existed were indexed
  bool failing = false;
  group::Millis lastOk = 0;  // local send time of the last beat that succeeded
  std::size_t lastLive = 0;
  std::string publishedAddress;  // this pod's address as the registry held it at the last beat
  std::chrono::steady_clock::time_point lastTrim = std::chrono::steady_clock::now();
  // Lag sampling: the rounds (what they read and forget), and when the one in progress started.
  group::LagRounds lag{0};
  // Per sampled stream, what this pod last wrote of its lag snapshot (only changes are written).
  std::map<std::string, group::LagSnapshotMemory> snapshots;
  std::map<std::string, std::string> drainSaid;  // per draining stream, what its last log line said
  std::optional<group::Millis> lastDrainingRead;
  std::optional<group::Millis> retiredWake;  // local clock: the next deletion of retired shard streams due
  std::chrono::steady_clock::time_point lagRoundStart;
};


using Self = caf::stateful_actor<PodState>*;

// Memory freed after a burst (a store outage queues every heartbeat of the pod) stays with the
// allocator unless given back: at most every 30 s, return the free pages to the system, so a
// pod's footprint follows its load rather than its worst moment (the soak measured +1 MiB, 10 %,
// kept for good after a 4 s stall without this).
void trim_memory(Self self) {
  auto& st = self->state;
  const auto now = std::chrono::steady_clock::now();
  if (now - st.lastTrim < std::chrono::seconds(30)) return;
  st.lastTrim = now;
  malloc_trim(0);
}

void beat(Self self) {
  auto& st = self->state;
  const auto sent = st.pod->local_now();
  // The address goes with a beat only while the registry may not hold it: first, changed, or
  // after beats failed or paused for half a pod lease (the registration may have run out, and a
  // new one would start without it).
  std::string address = st.pod->address();
  const bool mayBeNew = st.failing || sent - st.lastOk >= st.cfg.podLeaseMs / 2;
  if (address == st.publishedAddress && !mayBeNew) address.clear();
  auto r = st.pods->pod_beat(st.pod->pod_id(), st.cfg.podLeaseMs, st.cfg.dueLimit, address);
  const auto received = st.pod->local_now();
  if (!r.ok()) {
    if (!st.failing) log::warn("pod " + st.pod->pod_id() + ": pod registry not reachable: " + r.error.message);
    st.failing = true;
    return;
  }
  st.failing = false;
  st.lastOk = sent;
  st.pod->clock_sample(sent, received, r.value->storeTimeMs);
  if (r.value->livePods.size() != st.lastLive)
    log::info("pod " + st.pod->pod_id() + ": " + std::to_string(r.value->livePods.size()) +
              " live pod(s) share the groups' deadline work");
  st.lastLive = r.value->livePods.size();
  std::vector<group::PodSeen> seen;
  st.publishedAddress.clear();
  for (std::size_t i = 0; i < r.value->livePods.size(); ++i) {
    if (r.value->livePods[i] == st.pod->pod_id() && i < r.value->addresses.size())
      st.publishedAddress = r.value->addresses[i];
    seen.push_back({r.value->livePods[i], i < r.value->since.size() ? r.value->since[i] : 0,
                    i < r.value->addresses.size() ? r.value->addresses[i] : std::string()});
  }
  st.pod->registry_seen(sent, received, r.value->storeTimeMs, seen);
  st.pod->set_live_pods(r.value->livePods);
  if (!st.indexed) {
    auto n = st.pods->index_missing_deadlines(r.value->storeTimeMs);
    if (n.ok()) {
      st.indexed = true;
      if (*n.value > 0)
        log::info("pod " + st.pod->pod_id() + ": " + std::to_string(*n.value) + " group(s) added to the deadline index");
    }
  }
  for (const auto& key : r.value->due)
    if (st.pod->has_duty(key.str())) st.cfg.onDue(key);
}

// Lag sampling (SPEC §8): each stream is read by the one live pod whose duty it is (rendezvous
// over the live pods, like a group's deadline work), whether or not its groups have members. A
// round lists the streams, then reads at most lagBudgetMs of them per beat, so that a pod with
// many streams never delays its own registration; at its end, series of streams that are no
// longer this pod's leave /metrics (a stream whose read failed keeps its last figures).
// The reading, kept for every pod's describe and list (group/stream_lag.hpp: only what changed
// since this pod's last write; the whole of it when this pod does not know what the store holds).
void write_snapshot(Self self, const std::string& stream, const group::StreamReading& r, const std::vector<std::string>& known,
                    const group::LagByGroup& sums) {
  auto& st = self->state;
  const auto fields = group::encode_lag_snapshot(r, known, sums);
  auto& memory = st.snapshots[stream];
  const auto diff = memory.diff(fields);
  store::StreamStore::LagSnapshotWrite w;
  w.atMs = st.pod->now();
  w.shards = fields.shards;
  w.replace = diff.replace;
  w.removed = diff.removed;
  w.positions.reserve(diff.changed.size());
  w.sums.reserve(diff.changed.size());
  for (auto i : diff.changed) w.positions.push_back(fields.positions[i]), w.sums.push_back(fields.sums[i]);
  auto written = st.streams->write_lag_snapshot(stream, w);
  if (written.ok()) return memory.written(fields);
  memory.forget();
  log::warn("stream " + stream + ": could not keep its lag reading for describe and lists: " + written.error.message);
}

void sample_lag(Self self) {
  auto& st = self->state;
  auto* m = st.cfg.metrics.get();
  if (m == nullptr) return;
  const auto begin = std::chrono::steady_clock::now();
  if (!st.lag.in_progress()) {
    if (!st.lag.due(st.pod->local_now())) return;
    st.lag.begin(st.pod->local_now());
    auto streams = st.streams->list_streams();
    if (!streams.ok()) return m->lag_round(false, 0);
    std::vector<std::string> mine;
    for (const auto& s : *streams.value)
      if (st.pod->has_duty(group::lag_duty_key(s))) mine.push_back(s);
    if (!st.lag.plan(mine)) return;
    st.lagRoundStart = begin;
  }
  const auto budget = std::chrono::milliseconds(st.cfg.lagBudgetMs);
  while (std::chrono::steady_clock::now() - begin < budget) {
    const auto next = st.lag.next();
    if (!next) break;
    const auto& stream = *next;
    // The stream's retention first (each round: an age bound moves with time, acks move
    // processedByAllGroups); what it trims moves the fingerprint, so the figures follow.
    if (auto retention = st.streams->get_retention(stream); !retention.ok()) {
      st.lag.failed();
    } else if (const auto trim = group::trim_for(*retention.value, st.pod->now()); trim.mode != group::Trim::Mode::None) {
      auto t = st.streams->trim_stream(stream, trim);
      if (t.ok()) m->trimmed(stream, *t.value);
      else st.lag.failed(), log::warn("stream " + stream + ": retention not applied: " + t.error.message);
    }
    auto fingerprint = st.streams->stream_fingerprint(stream);
    if (!fingerprint.ok()) {
      st.lag.failed();
      continue;
    }
    const auto at = st.pod->local_now();
    if (!st.lag.groups_due(stream, *fingerprint.value, at)) continue;  // nothing changed that the last figures do not show
    auto reading = st.streams->read_stream(stream);
    if (!reading.ok()) {
      st.lag.failed();
      continue;
    }
    st.lag.groups_read(stream, *fingerprint.value, at, reading.value->has_value());
    if (!reading.value->has_value()) continue;
    auto groups = st.streams->list_stream_groups(stream);
    const auto& r = **reading.value;
    const auto known = groups.ok() ? *groups.value : std::vector<std::string>{};
    int64_t length = 0;
    for (const auto& shard : r.shards) length += shard.length.value_or(0);
    auto sums = group::lag_by_group(r, known);  // once, for the snapshot and /metrics
    write_snapshot(self, stream, r, known, sums);  // first: once /metrics shows the figures, describe does
    m->stream_lag(stream, std::move(sums), length);
  }
  if (st.lag.in_progress()) return;  // the round goes on at the next beat
  const auto end = st.lag.finish();
  for (const auto& s : end.forget) m->forget_stream_lag(s), st.snapshots.erase(s);
  if (end.changed) log::info("pod " + st.pod->pod_id() + ": samples the lag of " + std::to_string(end.sampled) + " stream(s)");
  m->lag_round(end.ok, std::chrono::duration<double>(std::chrono::steady_clock::now() - st.lagRoundStart).count());
}

// Shrinks in progress (SPEC §3 rule 9): a draining stream whose duty is this pod's is read (XINFO
// GROUPS of its shards, every consumer group) and its draining shards retired once
// group::drain_verdict says so. One log line each time what it waits for changes.

// One step of a stream's count change at `version`: the stream after it when it had the outcome
// wanted; else nothing (a store failure is logged as `failed`; a stream that moved meanwhile is
// judged again later).
std::optional<protocol::StreamMetadata> step_stream(PodState& st, const std::string& stream, group::ScaleOp op,
                                                    int32_t version, group::ScaleOutcome want, const std::string& failed) {
  group::ScaleCall call;
  call.op = op;
  call.expectedVersion = version;
  auto r = st.streams->scale_stream(stream, call);
  if (!r.ok()) {
    log::warn("stream " + stream + ": " + failed + ": " + r.error.message);
    return std::nullopt;
  }
  if (r.value->outcome != want) return std::nullopt;
  return std::move(r.value->meta);
}

// One stream's shrink carried as far as it goes in this round (group::shrink_step decides each
// step; this runs them and feeds back what they gave). The retired shards' streams are marked in
// the stream's metadata first (growth waits), deleted, then unmarked: a pod that dies in between
// leaves the mark, and whichever pod looks next finishes the deletion. Returns whether the stream
// is still being watched (a drain not done).
bool carry_shrink(Self self, const std::string& stream, std::optional<protocol::StreamMetadata> meta) {
  auto& st = self->state;
  group::ShrinkProgress p;
  p.meta = std::move(meta);
  int64_t deleted = 0;
  for (;;) {
    const auto step = group::shrink_step(p, st.pod->now(), st.cfg.scaleInGraceMs, st.cfg.retiredShardTtlMs);
    const std::string range = std::to_string(step.from) + ".." + std::to_string(step.to - 1);
    switch (step.action) {
      case group::ShrinkAction::Forget:
        st.streams->forget_draining(stream);
        return false;
      case group::ShrinkAction::WaitUntil: {
        const auto wake = st.pod->local_now() + (step.dueAtMs - st.pod->now());
        st.retiredWake = st.retiredWake ? std::min(*st.retiredWake, wake) : wake;
        return false;
      }
      case group::ShrinkAction::ReadShards: {
        auto reading = st.streams->read_stream(stream);
        if (!reading.ok() || !reading.value->has_value()) return true;  // read again next round
        p.reading = std::move(**reading.value);
        break;
      }
      case group::ShrinkAction::Watch: {
        auto said = group::to_string(step.verdict);
        if (st.drainSaid[stream] != said) log::info("stream " + stream + ": shards " + range + " drain: waiting for " + said);
        st.drainSaid[stream] = std::move(said);
        return true;
      }
      case group::ShrinkAction::Retire: {
        const auto migration = p.meta->migration ? p.meta->migration->reshardingId : std::string("?");
        auto retired = step_stream(st, stream, group::ScaleOp::Retire, step.expectedVersion, group::ScaleOutcome::Retired,
                                   "shards " + range + " drained but not retired");
        if (!retired) return true;  // a failure, or the stream moved meanwhile: judged again next round
        st.drainSaid.erase(stream);
        log::info("stream " + stream + ": shards " + range + " drained by every consumer group: retired (metadataVersion=" +
                  std::to_string(retired->metadataVersion) + ", migration " + migration + "); their streams are " +
                  (st.cfg.retiredShardTtlMs < 0 ? std::string("kept")
                                                : "deleted in " + std::to_string(st.cfg.retiredShardTtlMs) + "ms"));
        p.meta = std::move(retired);
        p.reading.reset();
        break;
      }
      case group::ShrinkAction::MarkDeleting: {
        auto marked = step_stream(st, stream, group::ScaleOp::DeleteRetired, step.expectedVersion,
                                  group::ScaleOutcome::Deleting, "retired shards " + range + " not deleted");
        if (!marked) return false;
        p.meta = std::move(marked);
        break;
      }
      case group::ShrinkAction::DeleteKeys: {
        auto gone = st.streams->delete_shard_streams(stream, p.meta->keyStyle, step.from, step.to);
        if (!gone.ok()) {
          log::warn("stream " + stream + ": retired shards " + range + ": deleting their streams failed (retried): " +
                    gone.error.message);
          return false;
        }
        deleted = *gone.value;
        p.keysDeleted = true;
        break;
      }
      case group::ShrinkAction::RecordDeleted: {
        auto recorded = step_stream(st, stream, group::ScaleOp::RetiredDeleted, 0, group::ScaleOutcome::KeysDeleted,
                                    "retired shards " + range + " deleted, not yet recorded (retried)");
        if (!recorded) return false;
        log::info("stream " + stream + ": the streams of retired shards " + range + " deleted (" + std::to_string(deleted) +
                  " existed; retired-shard-ttl " + std::to_string(st.cfg.retiredShardTtlMs) + "ms)");
        p.meta = std::move(recorded);
        p.keysDeleted = false;
        break;
      }
    }
  }
}

void retire_drained(Self self) {
  auto& st = self->state;
  const auto at = st.pod->local_now();
  if (!group::draining_read_due(st.lastDrainingRead, at, !st.drainSaid.empty(), st.retiredWake)) return;
  st.lastDrainingRead = at;
  st.retiredWake.reset();
  auto streams = st.streams->draining_streams();
  if (!streams.ok()) return;
  std::set<std::string> watched;
  for (const auto& stream : *streams.value) {
    if (!st.pod->has_duty(group::lag_duty_key(stream))) continue;
    auto meta = st.streams->get_stream(stream);
    if (!meta.ok()) continue;
    if (carry_shrink(self, stream, std::move(*meta.value))) watched.insert(stream);
  }
  for (auto it = st.drainSaid.begin(); it != st.drainSaid.end();)
    it = watched.count(it->first) ? std::next(it) : st.drainSaid.erase(it);
}

caf::behavior pod_actor(Self self, std::shared_ptr<store::GroupStore> store, std::shared_ptr<PodContext> pod,
                        PodActorConfig cfg) {
  self->state.pods = store;
  self->state.streams = std::move(store);
  self->state.pod = std::move(pod);
  self->state.cfg = std::move(cfg);
  self->state.lag = group::LagRounds(self->state.cfg.lagIntervalMs);
  self->set_exit_handler([=](const caf::exit_msg& em) {
    // Leaving the registry at once hands this pod's groups to the others without waiting a lease;
    // it stops writing and answering alone first, so that a pod registering next may start at once.
    self->state.pod->stop_authority();
    auto r = self->state.pods->pod_leave(self->state.pod->pod_id());
    if (r.ok()) log::info("pod " + self->state.pod->pod_id() + ": left the pod registry");
    self->quit(em.reason);
  });
  self->send(self, beat_atom::value);
  return {
      [=](beat_atom) {
        beat(self);
        retire_drained(self);
        sample_lag(self);
        trim_memory(self);
        self->delayed_send(self, std::chrono::milliseconds(self->state.cfg.beatMs), beat_atom::value);
      },
  };
}

}  // namespace

caf::actor spawn_pod_actor(caf::actor_system& sys, std::shared_ptr<store::GroupStore> store,
                           std::shared_ptr<PodContext> pod, PodActorConfig cfg, bool detached) {
  if (detached) return sys.spawn<caf::detached>(pod_actor, std::move(store), std::move(pod), std::move(cfg));
  return sys.spawn(pod_actor, std::move(store), std::move(pod), std::move(cfg));
}

}  // namespace rsc::actors
