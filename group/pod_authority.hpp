// Which pod serves a group, and what a pod may do with the groups' state, from its last pod beat
// (SPEC §3 rule 11). Pure: the pod actor feeds each beat's times and the registry it read; the
// HTTP layer and the group actors read the view.
//
// Each group has one owner at a time, as in Kafka: among the *established* pods, the one with the
// highest rendezvous weight for the group. Only the owner writes the group's state and answers its
// members; another pod forwards their calls to it. Because nobody else writes the group, the owner
// answers from its own copy without asking the store. Windows on the pod's own monotonic clock
// make the handovers safe:
//  - a pod writes only while its registration is live and established: one pod lease after it was
//    made (every other pod has seen it by then: any registry snapshot a pod acts on is at most one
//    pod lease old), or at once when no other pod was live then;
//  - a pod counts another as established a margin *before* that one counts itself (and itself a
//    margin after): a group moving to a newcomer leaves its old owner before the newcomer takes it;
//  - a pod's registration runs out in the store after its window closes: a group moving away from
//    a pod that died or froze reaches the next owner only after the dead one stopped.
// When the live or established pods change, or a window lapsed, or the registration is new, the
// view starts a new `term`: a copy confirmed in an earlier term is checked with the store once.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "group/state.hpp"
#include "protocol/outcomes.hpp"

namespace rsc::group {

// A live pod of the registry, as the beat read it.
struct PodSeen {
  std::string id;
  // Store time its registration counts from: established at since + pod lease. <= 0: it was
  // alone when it registered (minus the registration's time; 0 if unknown), established at once.
  Millis since = 0;
  std::string address;  // where other pods forward its groups' calls ("" unknown)
};

struct PodView {
  struct Peer {
    std::string id;
    std::string address;
    Millis establishedAt = 0;  // local ms (for others the earliest it may be, for this pod the latest)
  };
  std::string self;
  uint64_t term = 0;
  Millis writableFrom = 0;  // local ms: this pod may write in [writableFrom, writableUntil)
  Millis writableUntil = 0;
  std::vector<Peer> peers;  // every live pod, this one included when registered

  bool may_write(Millis localNow) const { return writableFrom <= localNow && localNow < writableUntil; }
  // The pod serving `groupKey` at local time t (nullptr: none established).
  const Peer* owner(const std::string& groupKey, Millis localNow) const;
  // The same among the pods other than `leaving` (nullptr: all of them).
  const Peer* owner_among(const std::string& groupKey, Millis localNow, const std::string* leaving) const;
  // This pod serves the group now: it writes it and answers from its copy.
  bool owns(const std::string& groupKey, Millis localNow) const;
  // This pod, still waiting to count itself established, will serve the group within `withinMs`:
  // its calls wait here rather than bounce between two pods that each see the other as the owner
  // for the margins' width (the old owner let the group go a margin before this pod's wait ends).
  bool owns_soon(const std::string& groupKey, Millis localNow, Millis withinMs) const;
  // No other pod is live: every group is this pod's (what the check-free answer needs, cheaply).
  bool alone() const { return peers.size() == 1 && peers.front().id == self; }
  // Why this pod does not write the group now, for the RETRY answer.
  std::string why_not_serving(const std::string& groupKey, Millis localNow) const;

  // Where a call for the group is served: here (this pod serves it, or will within kOwnsSoonMs and
  // holds what needs a write until then), at another pod's address, or nowhere for now (why). A pod
  // whose own window closed while it still counts as the owner sends the call to the pod that takes
  // its groups next (the owner among the others).
  struct Placement {
    using Kind = protocol::PlacementKind;
    Kind kind = Kind::Here;
    std::string podId;
    std::string address;
    std::string why;
  };
  Placement place(const std::string& groupKey, Millis localNow, bool synced) const;
};

class PodAuthority {
 public:
  // `marginMs` absorbs clock-rate drift between pods and the store over one pod lease.
  PodAuthority(std::string self, Millis podLeaseMs, Millis marginMs)
      : self_(std::move(self)), lease_(podLeaseMs), margin_(marginMs) {
    view_ = std::make_shared<const PodView>(PodView{self_, 0, 0, 0, {}});
  }

  // A beat sent at `localSent`, answered at `localReceived` (local monotonic ms), that ran at
  // store time `storeNow` and found these pods live (this one among them, or it is not registered).
  std::shared_ptr<const PodView> beat(Millis localSent, Millis localReceived, Millis storeNow,
                                      const std::vector<PodSeen>& live);
  // Leaving: from now on this pod neither writes nor serves a group (before it leaves the registry).
  void stop();
  std::shared_ptr<const PodView> view() const { return view_; }

  Millis lease() const { return lease_; }
  Millis margin() const { return margin_; }

 private:
  std::string self_;
  Millis lease_, margin_;
  std::shared_ptr<const PodView> view_;
  uint64_t terms_ = 0;
  bool stopped_ = false;
  // What the last beat saw, for telling whether the next one continues its term.
  std::optional<Millis> since_;
  std::vector<std::pair<std::string, bool>> lastPeers_;  // id, established when that beat came back
};

// How long before it counts itself established a pod takes the calls of the groups it will serve
// (PodView::owns_soon), holding those that need a write: longer than the two margins a handover
// leaves open (at most 2 x 500 ms).
inline constexpr Millis kOwnsSoonMs = 1200;

// The default margin for a pod lease: a tenth of it, between 10 and 500 ms.
Millis pod_authority_margin(Millis podLeaseMs);

}  // namespace rsc::group
