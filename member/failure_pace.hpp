// How often a member tries again something that keeps failing, and what it says about it (pure: the
// caller passes CLOCK_MONOTONIC nanoseconds). The wait doubles from `firstMs` on each failure in a
// row up to `capMs`; the log gets the first failure of a run at once, then at most one summary per
// kSummaryMs (how many failures, the latest reason), then one line when it works again. A setting
// that is wrong (a Redis CA, a password) thus costs a handful of attempts a minute and two log
// lines a minute, not tens of each per second.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>

namespace rsc::member {

class FailurePace {
 public:
  static constexpr int64_t kSummaryMs = 30000;

  // `retry`: how the first line says the caller tries again (default: "trying again with backoff
  // (at most every <cap>)"), for a caller that keeps its own cadence.
  FailurePace(int64_t firstMs, int64_t capMs, std::string retry = {})
      : firstMs_(std::max<int64_t>(1, firstMs)), capMs_(std::max(firstMs_, capMs)), retry_(std::move(retry)) {}

  struct Step {
    int64_t waitMs = 0;  // before the next attempt
    std::string say;     // "" when nothing is to be logged now
  };
  // `what` failed (e.g. "cannot read from Redis") because of `why` at `nowNs`.
  Step failed(const std::string& what, const std::string& why, int64_t nowNs) {
    Step s;
    s.waitMs = nextMs_ == 0 ? firstMs_ : nextMs_;
    nextMs_ = std::min(capMs_, s.waitMs * 2);
    ++failures_;
    ++unsaid_;
    if (failures_ == 1) {
      sinceNs_ = nowNs;
      saidNs_ = nowNs;
      unsaid_ = 0;
      s.say = what + ": " + why + "; " +
              (retry_.empty() ? "trying again with backoff (at most every " + seconds(capMs_) + ")" : retry_) +
              ", a summary every " + seconds(kSummaryMs);
    } else if (nowNs - saidNs_ >= kSummaryMs * 1'000'000) {
      s.say = "still " + what + ": " + std::to_string(unsaid_) + " more failure(s) in the last " +
              seconds((nowNs - saidNs_) / 1'000'000) + ", " + std::to_string(failures_) + " since " +
              seconds((nowNs - sinceNs_) / 1'000'000) + " ago; the latest: " + why;
      saidNs_ = nowNs;
      unsaid_ = 0;
    }
    return s;
  }
  // It worked at `nowNs`: the line to log when it had been failing ("" otherwise); the next
  // failure starts again from firstMs.
  std::string recovered(const std::string& what, int64_t nowNs) {
    if (failures_ == 0) return {};
    const std::string line = what + " again after " + std::to_string(failures_) + " failure(s) over " +
                             seconds((nowNs - sinceNs_) / 1'000'000);
    reset();
    return line;
  }
  // Forgets the run without a line (another kind of failure begins: it is said at once).
  void reset() {
    failures_ = 0;
    unsaid_ = 0;
    nextMs_ = 0;
  }
  bool failing() const { return failures_ > 0; }
  int64_t failures() const { return failures_; }
  // When the current run of failures began (meaningful while failing()).
  int64_t failing_since_ns() const { return sinceNs_; }
  int64_t cap_ms() const { return capMs_; }

 private:
  static std::string seconds(int64_t ms) {
    if (ms < 1000) return std::to_string(ms) + " ms";
    return std::to_string(ms / 1000) + (ms % 1000 >= 100 ? "." + std::to_string(ms % 1000 / 100) : "") + " s";
  }
  int64_t firstMs_, capMs_;
  std::string retry_;
  int64_t nextMs_ = 0;
  int64_t failures_ = 0;
  int64_t unsaid_ = 0;  // failures since the last line
  int64_t sinceNs_ = 0;
  int64_t saidNs_ = 0;
};

}  // namespace rsc::member
