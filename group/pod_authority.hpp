// What a pod may do with the groups' state, from its last pod beat (SPEC §3 rule 11). Pure: the
// pod actor feeds each beat's times and the registry it read; the group actors read the view.
//
// Two powers, each a window on the pod's own monotonic clock:
//  - write: a pod writes a group's state (and answers from a write's reply) only while its
//    registration is live and *established*. A registration is established one pod lease after
//    it was made, or at once when no other pod was live then. Every other pod learns of it by
//    then, because any registry snapshot a pod acts on is at most one pod lease old.
//  - sole: a pod that is the only established pod, and whose registration is live, is the only
//    writer there is; it answers from its own copy without asking the store whether another pod
//    changed it (there is none). The window closes before any other registered pod becomes
//    established, and before its own registration can have run out in the store.
// A pod whose sole window lapsed (a beat failed, a freeze, a second pod), or whose registration
// is new (it had run out, or the store lost the registry), starts a new `term` when it is sole
// again: a copy confirmed in an earlier term is checked against the store once more.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "group/state.hpp"

namespace rsc::group {

// A live pod of the registry, as the beat read it.
struct PodSeen {
  std::string id;
  // Store time its registration counts from: established at since + pod lease. <= 0: it was
  // alone when it registered (minus the registration's time; 0 if unknown), established at once.
  Millis since = 0;
};

struct PodView {
  uint64_t term = 0;        // 0: never sole; changes each time the sole window opens anew
  Millis writableFrom = 0;  // local ms: may write in [writableFrom, writableUntil)
  Millis writableUntil = 0;
  Millis soleUntil = 0;  // local ms: sole before this (and while writable)
  bool may_write(Millis localNow) const { return writableFrom <= localNow && localNow < writableUntil; }
  bool sole(Millis localNow) const { return may_write(localNow) && localNow < soleUntil; }
};

class PodAuthority {
 public:
  // `marginMs` absorbs clock-rate drift between pods and the store over one pod lease.
  PodAuthority(Millis podLeaseMs, Millis marginMs) : lease_(podLeaseMs), margin_(marginMs) {}

  // A beat sent at `localSent`, answered at `localReceived` (local monotonic ms), that ran at
  // store time `storeNow` and found these pods live (this one among them, or it is not registered).
  const PodView& beat(const std::string& self, Millis localSent, Millis localReceived, Millis storeNow,
                      const std::vector<PodSeen>& live);
  // Leaving: from now on this pod neither writes nor answers alone (before it leaves the registry).
  void stop();
  const PodView& view() const { return view_; }

  Millis lease() const { return lease_; }
  Millis margin() const { return margin_; }

 private:
  Millis lease_, margin_;
  PodView view_;
  uint64_t terms_ = 0;
  bool stopped_ = false;
  std::optional<Millis> since_;  // this pod's registration as the last beat saw it
};

// The default margin for a pod lease: a tenth of it, between 10 and 500 ms.
Millis pod_authority_margin(Millis podLeaseMs);

}  // namespace rsc::group
