#include "group/pod_authority.hpp"

#include <algorithm>

namespace rsc::group {

Millis pod_authority_margin(Millis podLeaseMs) { return std::clamp<Millis>(podLeaseMs / 10, 10, 500); }

const PodView& PodAuthority::beat(const std::string& self, Millis localSent, Millis localReceived, Millis storeNow,
                                  const std::vector<PodSeen>& live) {
  // Sole through the moment this beat came back: the window it opens continues the same term.
  const bool wasSole = view_.sole(localReceived);
  PodView v;
  v.term = view_.term;
  const auto me = std::find_if(live.begin(), live.end(), [&](const PodSeen& p) { return p.id == self; });
  if (stopped_ || me == live.end()) {
    since_.reset();
    view_ = v;  // not registered (or leaving): neither writes nor answers alone
    return view_;
  }
  // The beat ran at store time storeNow, between localSent and localReceived: at local time L the
  // store's clock reads at least storeNow + (L - localReceived) and at most storeNow + (L - localSent).
  auto surely_reached = [&](Millis storeT) { return localReceived + (storeT - storeNow); };
  auto surely_before = [&](Millis storeT) { return localSent + (storeT - storeNow); };
  // The registration renewed by this beat runs out in the store no earlier than storeNow + lease,
  // which is after localSent + lease on the store's clock.
  v.writableUntil = localSent + lease_ - margin_;
  v.writableFrom = me->since <= 0 ? localReceived : surely_reached(me->since + lease_ + margin_);
  // Alone until the first other registered pod could count itself established (it waits for
  // since + lease + margin on its own reading of the store's clock).
  v.soleUntil = v.writableUntil;
  for (const auto& p : live)
    if (p.id != self) v.soleUntil = std::min(v.soleUntil, p.since <= 0 ? localSent - 1 : surely_before(p.since + lease_ - margin_));
  const bool opens = std::max(v.writableFrom, localReceived) < std::min(v.soleUntil, v.writableUntil);
  const bool sameRegistration = since_ && *since_ == me->since;
  since_ = me->since;
  if (opens && !(wasSole && sameRegistration && v.sole(localReceived))) v.term = ++terms_;
  view_ = v;
  return view_;
}

void PodAuthority::stop() {
  stopped_ = true;
  const auto term = view_.term;
  view_ = PodView{};
  view_.term = term;
}

}  // namespace rsc::group
