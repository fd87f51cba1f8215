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

}  // namespace rsc::group
