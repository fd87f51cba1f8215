// The admin's calls on one group, run by its actor (actors/group_actor.cpp) in its queue like any
// work: describe (read from the store, the copy untouched), remove a member, delete the group,
// reset its positions. Whether a delete or reset may go ahead is the core's (group::judge_delete);
// this file asks the store and answers.
#include <variant>

#include "actors/group_actor_parts.hpp"
#include "group/co_partition.hpp"
#include "group/describe.hpp"

namespace rsc::actors::group_parts {
namespace {

// The admin's delete, judged on a state just read from the store.
void start_delete(Self self, const WorkPtr& w) {
  auto& st = self->state;
  if (auto why = st.c.why_not_writing(*view(self), local(self))) return refuse(self, {w}, *why);
  const DeleteStoreCall call{st.key, st.c.state().storeRevision, group::grants_held_after_delete(st.c.state(), now(self))};
  ask<DeleteStoreReply>(self, {w}, std::make_tuple(delete_atom::value, call), [=](DeleteStoreReply& r) {
        auto& s = self->state;
        if (!r.result.ok()) return store_failed(self, r.result.error, {w});
        auto& del = std::get<Delete>(w->what).call;
        using D = store::GroupDeletion;
        switch (*r.result.value) {
          case store::DeleteStatus::Deleted:
            if (s.c.deleted(*view(self), local(self)) == group::Stored::Lapsed)
              return refuse(self, {w}, "this coordinator pod's registration lapsed while it deleted the group");
            s.report.deleted();
            return del.done(store::Result<D>::success(D::Deleted));
          case store::DeleteStatus::NotFound: s.c.drop(); return del.done(store::Result<D>::success(D::NotFound));
          case store::DeleteStatus::Conflict:  // written meanwhile: judged again on a fresh read
            s.c.drop();
            w->t.verified = false;
            return redo(self, {w});
        }
      });
}

// The admin's reset of the group's position on every shard, judged like a delete (no live member)
// on a state just read from the store.
void start_reset(Self self, const WorkPtr& w) {
  auto& st = self->state;
  if (auto why = st.c.why_not_writing(*view(self), local(self))) return refuse(self, {w}, *why);
  const auto& to = std::get<Reset>(w->what).call.to;
  const ResetStoreCall call{st.key, st.c.state().shardCount, to, st.c.state().storeRevision};
  ask<ResetStoreReply>(self, {w}, std::make_tuple(reset_atom::value, call),
      [=](ResetStoreReply& r) {
        auto& s = self->state;
        auto& reset = std::get<Reset>(w->what).call;
        if (!r.result.ok() && r.result.error.kind == store::ErrorKind::Retryable) return store_failed(self, r.result.error, {w});
        s.c.drop();  // the stored revision moved on (or had): the next work reads the state again
        if (!r.result.ok()) return reset.done(store::Result<store::OffsetsReset>::failure(r.result.error));
        if (r.result.value->conflict) {  // written meanwhile: judged again on a fresh read, like a delete
          w->t.verified = false;
          return redo(self, {w});
        }
        s.report.offsets_reset(reset.to, r.result.value->shards);
        reset.done(store::Result<store::OffsetsReset>::success({store::OffsetsReset::Outcome::Reset, r.result.value->shards}));
      });
}

}  // namespace

void start_describe(Self self, const WorkPtr& w) {
  auto& st = self->state;
  using R = store::Result<std::optional<std::string>>;
  auto done = [w](R r) { std::get<Describe>(w->what).call.done(std::move(r)); };
  ask<LoadReply>(self, std::make_tuple(load_atom::value, LoadCall{st.key, st.cfg->defaultShardCount, false, false, give_up_at(self), true,
                                                                std::get<Describe>(w->what).call.fresh}),
      [=](LoadReply& r) {
        if (!r.loaded.ok()) return done(R::failure(r.loaded.error));
        std::optional<std::string> body;
        std::optional<group::GroupLag> lag;
        if (r.reading) lag = group::group_lag(*r.reading, self->state.key.consumerGroup);
        if (r.loaded.value->exists)
          body = group::describe_json(r.loaded.value->state, now(self), &self->state.report.recent(), lag ? &*lag : nullptr,
                                      r.stream.ok() ? &*r.stream.value : nullptr, &r.readingAge);
        done(R::success(std::move(body)));
      }, [=](const store::Error& e) { done(R::failure(e)); });
}

void run_admin_step(Self self, const WorkPtr& w, group::Millis t, double computeSeconds) {
  auto& st = self->state;
  auto& cfg = st.cfg->core;
  if (auto* c = std::get_if<Configure>(&w->what)) {
    if (auto why = st.c.refuse_new(st.cfg->maxGroupsPerStream, st.key.streamPrefix)) {
      st.c.drop();  // counted again at the next call
      return c->call.done(store::Result<protocol::GroupConfigSet>::failure(store::ErrorKind::Invalid, *why));
    }
    // A pod's copy may not have learned a change of the stream yet (told to other pods' groups
    // moments later): judged on what the store said at the check.
    st.c.stream_read(c->call.linkStream, t);
    const auto checked = c->call.linkStream ? std::optional<int32_t>(c->call.linkStream->shardCount) : std::nullopt;
    if (auto why = group::link_outdated(st.c.state(), c->call.config, checked))
      return c->call.done(store::Result<protocol::GroupConfigSet>::failure(store::ErrorKind::Invalid, *why));
    const bool exists = st.c.exists();
    auto o = group::set_assignor(st.c.take(), c->call.config, cfg, t, exists);
    c->set = {o.changed(), !exists, o.state.groupEpoch, o.state.assignor, o.state.shardRacks, o.state.coPartitionedWith, std::nullopt};
    return commit(self, {w}, std::move(o), computeSeconds);
  }
  if (auto* p = std::get_if<PostTarget>(&w->what)) {
    const bool exists = st.c.exists();
    auto v = group::set_target(st.c.take(), exists, p->call.posted, cfg, t);
    p->answer = std::move(v.answer);
    if (st.c.writes_nothing(w->t.kind)) return st.c.drop(), answer(*w, st.cfg->metrics.get());
    return commit(self, {w}, std::move(v.outcome), computeSeconds);
  }
  if (auto* r = std::get_if<Remove>(&w->what)) {
    auto o = group::fence_member(st.c.take(), r->call.memberId, "removed by admin", cfg, t);
    r->removed = o.changed();
    if (st.c.writes_nothing(w->t.kind)) return st.c.drop(), answer(*w, st.cfg->metrics.get());
    return commit(self, {w}, std::move(o), computeSeconds);
  }
  // A delete or an offsets reset: judged by the same rule (group::judge_delete).
  const auto verdict = group::judge_delete(st.c.exists(), st.c.state(), fence_members(*w));
  if (answer_verdict(*w, verdict)) return;
  if (verdict == group::DeleteVerdict::Delete) return std::holds_alternative<Delete>(w->what) ? start_delete(self, w) : start_reset(self, w);
  fence_members(*w) = false;  // the fencing is written, then the work is judged again
  st.queue.push_front(w);
  commit(self, {make(Tick{})}, group::fence_live_members(st.c.take(), fence_reason(*w), cfg, t), computeSeconds);
}

}  // namespace rsc::actors::group_parts
