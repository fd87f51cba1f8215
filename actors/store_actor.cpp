// The store actor: the only owner of a GroupStore (and so of its hiredis connection).
#include "actors/actors.hpp"
#include "log/log.hpp"

namespace rsc::actors {
namespace {

struct PendingCas {
  CasCall call;
  caf::response_promise rp;
};


template <typename T>
store::Result<T> gone() {
  return store::Result<T>::failure(store::ErrorKind::Retryable, "the call waited past its deadline; not run");
}

// A write that hands a shard out for the first time needs the shard streams and the group's
// Redis consumer group: made first (idempotent), and on failure the write is not made.
std::optional<store::Error> provision(store::GroupStore& s, const CasCall& c) {
  if (c.provisionShards <= 0) return std::nullopt;
  auto r = s.provision(c.key, c.provisionShards, c.startId);
  if (!r.ok())
    return store::Error{r.error.kind, "could not create the shard streams' consumer group " + c.key.consumerGroup + ": " + r.error.message};
  if (*r.value > 0)
    log::info("group " + c.key.str() + ": created the consumer group on " + std::to_string(*r.value) + " of " +
              std::to_string(c.provisionShards) + " shard streams (start " + c.startId + ")");
  return std::nullopt;
}

struct StoreState {
  std::shared_ptr<store::GroupStore> store;
  std::function<group::Millis()> localNow;  // the pod's local clock, the one its askers give up on
  // A call whose asker stopped waiting (it answered RETRY already) is not run.
  bool gave_up(int64_t giveUpAt) const { return group::store_call_abandoned(localNow(), giveUpAt); }
  std::vector<PendingCas> pending;
  bool flushScheduled = false;
  // Buffers a flush reuses (cleared, their capacity kept): a batch allocates no vectors.
  std::vector<PendingCas> flushing;
  std::vector<store::CasRequest> requests;
};

caf::behavior store_actor(caf::stateful_actor<StoreState>* self, std::shared_ptr<store::GroupStore> backend,
                          std::function<group::Millis()> localNow) {
  self->state.store = std::move(backend);
  self->state.localNow = std::move(localNow);
  return {
      [=](load_atom, const LoadCall& c) -> LoadReply {
        auto& s = *self->state.store;
        if (self->state.gave_up(c.giveUpAt)) return LoadReply{gone<store::Loaded>(), gone<protocol::StreamMetadata>(), {}, {}, {}};
        LoadReply r{s.load(c.key), store::Result<protocol::StreamMetadata>::failure(store::ErrorKind::Fatal, ""), {}, {}, {}};
        if (!r.loaded.ok()) {
          r.stream = store::Result<protocol::StreamMetadata>::failure(r.loaded.error);
          return r;
        }
        auto meta = s.get_stream(c.key.streamPrefix);
        if (!meta.ok()) {
          r.stream = store::Result<protocol::StreamMetadata>::failure(meta.error);
        } else if (meta.value->has_value()) {
          r.stream = store::Result<protocol::StreamMetadata>::success(**meta.value);
        } else if (c.createStream) {
          // A group on a stream nobody configured: the stream gets the default shard count.
          r.stream = s.put_stream(c.key.streamPrefix, c.defaultShardCount);
        } else {
          r.stream = store::Result<protocol::StreamMetadata>::success(protocol::StreamMetadata{c.key.streamPrefix, 0, 0, protocol::KeyStyle::Plain, std::nullopt});
        }
        if (c.countGroups && r.stream.ok() && !r.loaded.value->exists) {
          auto n = s.count_stream_groups(c.key.streamPrefix);
          if (!n.ok()) {
            r.loaded = store::Result<store::Loaded>::failure(n.error);
            return r;
          }
          r.groupsInStream = *n.value;
        }
        if (c.readStream && r.loaded.value->exists && c.freshReading) {
          auto read = s.read_stream(c.key.streamPrefix, c.key.consumerGroup);
          if (read.ok() && read.value->has_value()) r.reading = std::move(**read.value);
          r.readingAge.live = true;
        } else if (c.readStream && r.loaded.value->exists) {  // a few fields, whatever the number of groups
          auto snap = s.read_lag_snapshot(c.key.streamPrefix, {c.key.consumerGroup}, false);
          if (snap.ok() && snap.value->atMs) {
            r.readingAge.atMs = snap.value->atMs;
            r.reading = group::decode_lag_snapshot(snap.value->shards, c.key.consumerGroup, snap.value->values.front());
          }
        }
        return r;
      },
      // Writes that arrive together go out as one pipeline: the flush message queues behind them.
      [=](cas_atom, CasCall& c) -> caf::response_promise {
        auto rp = self->make_response_promise();
        self->state.pending.push_back({std::move(c), rp});
        if (!self->state.flushScheduled) {
          self->state.flushScheduled = true;
          self->send(self, flush_atom::value);
        }
        return rp;
      },
      [=](flush_atom) {
        auto& st = self->state;
        auto& batch = st.flushing;  // the calls that came; then, compacted in place, those to write
        batch.swap(st.pending);     // pending takes the empty buffer of the last flush
        st.flushScheduled = false;
        std::size_t kept = 0;
        for (auto& p : batch) {
          if (self->state.gave_up(p.call.giveUpAt))  // its group stopped waiting (and answered RETRY): not written
            p.rp.deliver(CasReply{gone<store::CasResult>()});
          else if (auto e = provision(*st.store, p.call))  // the data plane first, or no write
            p.rp.deliver(CasReply{store::Result<store::CasResult>::failure(*e)});
          else {
            if (&batch[kept] != &p) batch[kept] = std::move(p);
            ++kept;
          }
        }
        batch.erase(batch.begin() + static_cast<std::ptrdiff_t>(kept), batch.end());
        auto& reqs = st.requests;
        reqs.clear();
        for (auto& p : batch) {
          store::CasRequest& r = reqs.emplace_back();
          r.key = std::move(p.call.key);  // the call is only answered from here on
          r.expectedRevision = p.call.expectedRevision;
          r.next = p.call.next.get();
          r.delta = p.call.delta.get();
          r.lockToken = std::move(p.call.lockToken);
          r.lockTtlMs = p.call.lockTtlMs;
          r.lowerDeadlineTo = p.call.lowerDeadlineTo;
          r.verifyOnly = p.call.verifyOnly;
        }
        if (!batch.empty()) {
          auto results = st.store->compare_and_set(reqs);
          for (std::size_t i = 0; i < batch.size(); ++i) batch[i].rp.deliver(CasReply{std::move(results[i])});
        }
        batch.clear();
        reqs.clear();
      },
      [=](lease_atom, const LeaseCall& c) -> LeaseReply {
        if (self->state.gave_up(c.giveUpAt)) return LeaseReply{gone<store::TickLease>(), std::nullopt, std::nullopt};
        LeaseReply reply{self->state.store->tick_lease(c.key, c.token, c.ttl, c.knownRevision), std::nullopt, std::nullopt};
        if (reply.result.ok() && reply.result.value->status != store::LeaseStatus::NotHolder) {
          auto m = self->state.store->get_stream(c.key.streamPrefix);
          if (m.ok()) reply.stream = *m.value;  // best effort: a failed read leaves the stream as cached
          auto d = self->state.store->dead_letters(c.key, 0);
          if (d.ok()) reply.deadLetters = d.value->total;  // best effort too
        }
        return reply;
      },
      [=](finish_atom, const FinishCall& c) -> FinishReply {
        return FinishReply{self->state.store->finish_deadline_work(c.key, c.token, c.due, c.revision)};
      },
      [=](delete_atom, const DeleteStoreCall& c) -> DeleteStoreReply {
        return DeleteStoreReply{self->state.store->delete_group(c.key, c.expectedRevision, c.grantsHeldUntilMs)};
      },
      [=](reset_atom, const ResetStoreCall& c) -> ResetStoreReply {
        return ResetStoreReply{self->state.store->reset_offsets(c.key, c.shardCount, c.to, c.expectedRevision)};
      },
      [=](task_atom, const StoreTask& t) { t.run(*self->state.store); },
  };
}

}  // namespace

caf::actor spawn_store_actor(caf::actor_system& sys, std::shared_ptr<store::GroupStore> store, bool detached,
                             std::function<group::Millis()> localNow) {
  if (detached) return sys.spawn<caf::detached>(store_actor, std::move(store), std::move(localNow));
  return sys.spawn(store_actor, std::move(store), std::move(localNow));
}

}  // namespace rsc::actors
