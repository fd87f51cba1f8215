// The work a group actor queues (actors/group_actor.cpp), and how each kind is answered. Only
// the group actor's files include this header (through actors/group_actor_parts.hpp).
#pragma once

#include <algorithm>
#include <chrono>
#include <limits>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <variant>
#include <vector>

#include "actors/messages.hpp"
#include "group/cached_group.hpp"
#include "protocol/codec.hpp"

namespace rsc::actors::work {

using SteadyClock = std::chrono::steady_clock;

// The kinds of work, in group::WorkKind's order.
struct Beat {
  HeartbeatCall call;
  protocol::HeartbeatResponse response;  // filled by the step, given once stored
  bool unwritten = false;                // the core deferred the lease renewal (counted when answered)
};
struct Tick {};
struct Describe {
  DescribeCall call;
};
struct Remove {
  RemoveCall call;
  bool removed = false;
};
struct Metadata {
  protocol::StreamMetadata meta;
};
struct Delete {
  DeleteCall call;
};
struct Reset {
  ResetCall call;
};
struct Configure {
  ConfigureCall call;
  protocol::GroupConfigSet set;  // filled by the step, given once stored
};
struct PostTarget {
  TargetCall call;
  protocol::TargetPosted answer;  // filled by the step, given once stored
};
using Payload = std::variant<Beat, Tick, Describe, Remove, Metadata, Delete, Reset, Configure, PostTarget>;
static_assert(std::variant_size_v<Payload> == static_cast<std::size_t>(group::WorkKind::PostTarget) + 1);

struct Work {
  Payload what;
  group::Ticket t;  // what the rules need of it (group/cached_group.hpp)
  SteadyClock::time_point arrived = SteadyClock::now();  // for the latency metric
};
using WorkPtr = std::shared_ptr<Work>;
using Batch = std::vector<WorkPtr>;

template <class P>
WorkPtr make(P&& p) {
  auto w = std::make_shared<Work>();
  w->what = std::forward<P>(p);
  w->t.kind = static_cast<group::WorkKind>(w->what.index());
  if (const auto* b = std::get_if<Beat>(&w->what)) w->t.join = b->call.req.memberEpoch == 0;
  w->t.join = w->t.join || std::holds_alternative<Configure>(w->what);
  return w;
}

// Gives the work the answer its step filled in (a heartbeat's latency counted).
inline void answer(Work& w, Metrics* m) {
  if (auto* b = std::get_if<Beat>(&w.what)) {
    if (m) {
      m->heartbeat(b->response.status, std::chrono::duration<double>(SteadyClock::now() - w.arrived).count());
      if (b->unwritten) m->heartbeats_unwritten(1);
    }
    b->call.done(std::move(b->response));
  } else if (auto* r = std::get_if<Remove>(&w.what)) {
    r->call.done(store::Result<bool>::success(r->removed));
  } else if (auto* c = std::get_if<Configure>(&w.what)) {
    c->call.done(store::Result<protocol::GroupConfigSet>::success(std::move(c->set)));
  } else if (auto* p = std::get_if<PostTarget>(&w.what)) {
    p->call.done(store::Result<protocol::TargetPosted>::success(std::move(p->answer)));
  }
}

// A heartbeat answered RETRY (protocol::refusal: the one builder of refused answers).
inline void retry(Work& w, const std::string& why, const protocol::Timings& t, Metrics* m) {
  auto& b = std::get<Beat>(w.what);
  b.response = protocol::refusal(b.call.req.requestId, b.call.req.memberId, protocol::HeartbeatStatus::RETRY, why, t,
                                 {}, b.call.req.memberEpoch);
  answer(w, m);
}

// Every call is answered (RETRY or an error) rather than left hanging.
inline void fail(Work& w, const store::Error& e, const protocol::Timings& t, Metrics* m) {
  if (std::holds_alternative<Beat>(w.what)) return retry(w, e.message, t, m);
  if (auto* d = std::get_if<Describe>(&w.what)) return d->call.done(store::Result<std::optional<std::string>>::failure(e));
  if (auto* r = std::get_if<Remove>(&w.what)) return r->call.done(store::Result<bool>::failure(e));
  if (auto* d = std::get_if<Delete>(&w.what)) return d->call.done(store::Result<store::GroupDeletion>::failure(e));
  if (auto* r = std::get_if<Reset>(&w.what)) return r->call.done(store::Result<store::OffsetsReset>::failure(e));
  if (auto* c = std::get_if<Configure>(&w.what)) return c->call.done(store::Result<protocol::GroupConfigSet>::failure(e));
  if (auto* p = std::get_if<PostTarget>(&w.what)) return p->call.done(store::Result<protocol::TargetPosted>::failure(e));
}

// The oldest arrival of the batch's work other than ticks (the copy must be at least as fresh).
inline std::optional<uint64_t> oldest_arrival(const Batch& ws) {
  std::optional<uint64_t> oldest;
  for (const auto& w : ws)
    if (w->t.kind != group::WorkKind::Tick) oldest = std::min(oldest.value_or(std::numeric_limits<uint64_t>::max()), w->t.arrival);
  return oldest;
}

// The members whose heartbeats are in the batch (answered anyway: not woken).
inline std::set<std::string> members_in(const Batch& ws) {
  std::set<std::string> ids;
  for (const auto& w : ws)
    if (const auto* b = std::get_if<Beat>(&w->what)) ids.insert(b->call.req.memberId);
  return ids;
}

// A delete and an offsets reset are judged by the same rule (group::judge_delete): whether the
// admin asked for live members to be fenced, and what the fencing writes on them.
inline bool& fence_members(Work& w) {
  if (auto* d = std::get_if<Delete>(&w.what)) return d->call.fenceMembers;
  return std::get<Reset>(w.what).call.fenceMembers;
}
inline const char* fence_reason(const Work& w) {
  return std::holds_alternative<Delete>(w.what) ? "group deleted by admin" : "offsets reset by admin";
}
// Answers a verdict that needs no store call (not found; has live members): false for the others.
inline bool answer_verdict(Work& w, group::DeleteVerdict v) {
  using V = group::DeleteVerdict;
  if (v != V::NotFound && v != V::HasLiveMembers) return false;
  const bool missing = v == V::NotFound;
  if (auto* d = std::get_if<Delete>(&w.what)) {
    using D = store::GroupDeletion;
    d->call.done(store::Result<D>::success(missing ? D::NotFound : D::HasLiveMembers));
  } else {
    using O = store::OffsetsReset::Outcome;
    std::get<Reset>(w.what).call.done(store::Result<store::OffsetsReset>::success({missing ? O::NotFound : O::HasLiveMembers, 0}));
  }
  return true;
}

}  // namespace rsc::actors::work
