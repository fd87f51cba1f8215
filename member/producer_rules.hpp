// When a producer reads its routing again and how long it waits before sending again (pure: the
// clock is passed in; tested on a fake one). A producer caches the coordinator's producer-routing
// answer: it reads it again when it is older than the refresh interval (a change of the stream's
// shard count, a new metadataVersion, is learned within one interval) and at once when a write was
// refused because its shard stream does not exist (XADD NOMKSTREAM: the key is gone).
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>

namespace rsc::member {

class RoutingFreshness {
 public:
  explicit RoutingFreshness(int64_t intervalMs) : intervalMs_(std::max<int64_t>(1, intervalMs)) {}
  bool due(int64_t nowMs) const { return !readAt_ || stale_ || nowMs - *readAt_ >= intervalMs_; }
  void read(int64_t nowMs) {
    readAt_ = nowMs;
    stale_ = false;
  }
  void stale() { stale_ = true; }

 private:
  int64_t intervalMs_;
  std::optional<int64_t> readAt_;
  bool stale_ = false;
};

// The wait before the n-th resend (n from 1): 50 ms doubling, at most 1 s.
inline int64_t resend_backoff_ms(int n) {
  int64_t ms = 50;
  for (int i = 1; i < n && ms < 1000; ++i) ms *= 2;
  return std::min<int64_t>(ms, 1000);
}

}  // namespace rsc::member
