// Many pods answer as one coordinator (SPEC §3 rule 11: I3 in real-time order). A pod answers a
// call from its own copy of the group only once a store call that the pod made after the call
// arrived has confirmed that copy: a load, a write (the revision CAS), the deadline lease, or a
// revision check that writes nothing. Why that suffices: every answer any pod gave was stored
// before it was given (a change is answered only after its write; an answer that changed nothing
// repeats what a confirmed copy says), so an answer given before this request was sent was stored
// before the confirming call, which therefore saw it or something newer.
#pragma once

#include <algorithm>
#include <cstdint>

namespace rsc::group {

// The store calls of one group's runtime, numbered in the order it makes them.
class CopyConfirmation {
 public:
  // A store call is about to be made: its number.
  uint64_t next_call() { return ++calls_; }
  // A call arriving now is answered from the copy only once a call numbered above this confirms it.
  uint64_t arrival() const { return calls_; }
  // Store call `call` read or wrote exactly the copy now held.
  void confirmed_by(uint64_t call) { confirmed_ = std::max(confirmed_, call); }
  // The copy was dropped or replaced by something no call confirmed.
  void forget() { confirmed_ = 0; }
  // Whether a call that arrived at `arrival` may be answered from the copy as it is.
  bool may_answer(uint64_t arrival) const { return confirmed_ > arrival; }

 private:
  uint64_t calls_ = 0;
  uint64_t confirmed_ = 0;
};

// The one store call a group's runtime has in flight, given up after a deadline on the pod's own
// clock (SPEC §3 rule 8: the time it took is then an outage), and which call a reply belongs to: a
// reply that comes after its call was given up is dropped.
class StoreCallLine {
 public:
  // A call numbered `n` is made at local time `now`.
  void begin(uint64_t n, int64_t now) { asking_ = n, askedAt_ = now; }
  bool in_flight() const { return asking_ != 0; }
  // A reply (or an error) for call `n` came: whether it is still awaited; it is then the call whose
  // reply is being handled (what it confirms, CopyConfirmation::confirmed_by).
  bool replied(uint64_t n) {
    if (n == 0 || asking_ != n) return false;
    asking_ = 0;
    replying_ = n;
    return true;
  }
  uint64_t replying() const { return replying_; }
  // The watchdog looks at local time `now`: the ms still to wait, or 0 when the call in flight is
  // given up now (it is then no longer awaited); -1: nothing in flight.
  int64_t give_up_in(int64_t now, int64_t deadlineMs) {
    // (The store actor's side of the same rule: store_call_abandoned below, on the same clock.)
    if (asking_ == 0) return -1;
    if (now - askedAt_ < deadlineMs) return deadlineMs - (now - askedAt_);
    asking_ = 0;
    return 0;
  }

 private:
  uint64_t asking_ = 0;
  uint64_t replying_ = 0;
  int64_t askedAt_ = 0;
};

// A store call carries the local time its asker gives up at (asked + the store deadline, on the
// pod's clock): when the store's turn for it comes at local time `now` at or after that, the asker
// has answered RETRY (StoreLine::give_up_in said 0 at that time) and the call is not run, so after
// a stall the queue of given-up calls drains without touching the store. One clock for both sides.
inline constexpr int64_t kNeverGiveUp = INT64_MAX;
inline int64_t give_up_at(int64_t askedAt, int64_t deadlineMs) { return askedAt + deadlineMs; }
inline bool store_call_abandoned(int64_t now, int64_t giveUpAt) { return now >= giveUpAt; }

}  // namespace rsc::group
