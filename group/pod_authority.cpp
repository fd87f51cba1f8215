#include "group/pod_authority.hpp"

#include <algorithm>

#include "group/time_rules.hpp"

namespace rsc::group {

Millis pod_authority_margin(Millis podLeaseMs) { return std::clamp<Millis>(podLeaseMs / 10, 10, 500); }

const PodView::Peer* PodView::owner(const std::string& groupKey, Millis localNow) const {
  return owner_among(groupKey, localNow, nullptr);
}

const PodView::Peer* PodView::owner_among(const std::string& groupKey, Millis localNow, const std::string* leaving) const {
  const Peer* best = nullptr;
  uint64_t bestWeight = 0;
  for (const auto& p : peers) {
    if (p.establishedAt > localNow || (leaving != nullptr && p.id == *leaving)) continue;
    const uint64_t w = rendezvous_weight(p.id, groupKey);
    if (!best || w > bestWeight || (w == bestWeight && p.id < best->id)) {
      best = &p;
      bestWeight = w;
    }
  }
  return best;
}

bool PodView::owns(const std::string& groupKey, Millis localNow) const {
  if (!may_write(localNow)) return false;
  if (alone()) return true;
  const Peer* o = owner(groupKey, localNow);
  return o != nullptr && o->id == self;
}

bool PodView::owns_soon(const std::string& groupKey, Millis localNow, Millis withinMs) const {
  if (localNow >= writableFrom || writableFrom - localNow > withinMs) return false;
  return owns(groupKey, writableFrom);
}

std::string PodView::why_not_serving(const std::string& groupKey, Millis localNow) const {
  if (localNow < writableFrom)
    return "this coordinator pod registered among others and serves no group for " +
           std::to_string(writableFrom - localNow) + "ms more, until every pod has seen it";
  if (!may_write(localNow)) return "this coordinator pod's registration has lapsed (the store did not take its last beats)";
  const auto* o = owner(groupKey, localNow);
  return "group " + groupKey + " is served by pod " + (o ? o->id : std::string("(none)")) + " now; try again";
}

PodView::Placement PodView::place(const std::string& groupKey, Millis localNow, bool synced) const {
  using K = Placement::Kind;
  if (alone() && may_write(localNow)) return {};  // the common case of one pod: no hashing
  if (owns(groupKey, localNow) || owns_soon(groupKey, localNow, kOwnsSoonMs)) return {};
  const auto* o = owner(groupKey, localNow);
  if (o == nullptr) return {K::Nowhere, {}, {}, synced ? "no pod of the registry serves groups yet" : "not connected to the store yet"};
  if (o->id == self) {
    // This pod's window closed (it cannot reach the store, or it is stopping) while the registry it
    // last read still makes it the owner: the group goes to the pod that serves it once this one's
    // registration runs out, so its calls go there, and clients kept on this pod are still served
    // too. That pod judges its own authority: until it owns the group it answers
    // RETRY naming the owner it sees; a forwarded call is never forwarded again.
    const auto* next = owner_among(groupKey, localNow, &self);
    if (next != nullptr && !next->address.empty()) return {K::Elsewhere, next->id, next->address, {}};
    return {K::Nowhere, o->id, {}, "this pod's registration has lapsed (the store did not take its last beats)"};
  }
  if (o->address.empty()) return {K::Nowhere, o->id, {}, "pod " + o->id + " has not published its address yet"};
  return {K::Elsewhere, o->id, o->address, {}};
}

std::shared_ptr<const PodView> PodAuthority::beat(Millis localSent, Millis localReceived, Millis storeNow,
                                                  const std::vector<PodSeen>& live) {
  const auto& prev = *view_;
  PodView v;
  v.self = self_;
  v.term = prev.term;
  const auto me = std::find_if(live.begin(), live.end(), [&](const PodSeen& p) { return p.id == self_; });
  // The beat ran at store time storeNow, between localSent and localReceived: at local time L the
  // store's clock reads at least storeNow + (L - localReceived) and at most storeNow + (L - localSent).
  auto surely_reached = [&](Millis storeT) { return localReceived + (storeT - storeNow); };
  auto surely_before = [&](Millis storeT) { return localSent + (storeT - storeNow); };
  const bool registered = !stopped_ && me != live.end();
  if (registered) {
    // The registration renewed by this beat runs out in the store no earlier than storeNow +
    // lease, which is after localSent + lease on the store's clock.
    v.writableUntil = localSent + lease_ - margin_;
    v.writableFrom = me->since <= 0 ? localReceived : surely_reached(me->since + lease_ + margin_);
  }
  for (const auto& p : live) {
    PodView::Peer peer{p.id, p.address, 0};
    if (p.id == self_) {
      if (!registered) continue;
      peer.establishedAt = v.writableFrom;
    } else {
      peer.establishedAt = p.since <= 0 ? localSent - 1 : surely_before(p.since + lease_ - margin_);
    }
    v.peers.push_back(std::move(peer));
  }
  if (!registered) {  // not registered (or leaving): serves nothing, forwards to the others
    since_.reset();
    lastPeers_.clear();
    view_ = std::make_shared<const PodView>(std::move(v));
    return view_;
  }
  // The term goes on only if nothing that decides an owner changed since the last beat and this
  // pod's window never closed in between.
  std::vector<std::pair<std::string, bool>> peersNow;
  for (const auto& p : v.peers) peersNow.emplace_back(p.id, p.establishedAt <= localReceived);
  std::vector<std::pair<std::string, bool>> peersThen;
  for (const auto& p : prev.peers) peersThen.emplace_back(p.id, p.establishedAt <= localReceived);
  const bool continues = since_ && *since_ == me->since && prev.may_write(localReceived) &&
                         peersThen == lastPeers_ && peersNow == lastPeers_;
  since_ = me->since;
  lastPeers_ = std::move(peersNow);
  if (!continues) v.term = ++terms_;
  view_ = std::make_shared<const PodView>(std::move(v));
  return view_;
}

void PodAuthority::stop() {
  stopped_ = true;
  PodView v;
  v.self = self_;
  v.term = view_->term;
  view_ = std::make_shared<const PodView>(std::move(v));
}

}  // namespace rsc::group
