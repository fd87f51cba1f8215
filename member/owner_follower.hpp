// Where a group's next call goes (pure: no sockets, no clock of its own). Every coordinator answer
// about a group names the pod that owns it (the Rsc-Group-Owner header); a client that sends the
// group's next call there is served without a second pod carrying it. The rules:
//  - an answer naming an owner: the next call goes there (a changed name is followed at once, so
//    an answer from a pod that no longer owns the group, which forwarded the call, costs nothing);
//  - an answer naming none (no pod owns the group now, or a coordinator too old to say): back to
//    the configured URL;
//  - no answer from a followed owner (refused connection, timeout): back to the configured URL at
//    once, and the call is sent again there without waiting (the caller retries); that owner's URL
//    is not followed again for kAvoidMs, so a pod the client cannot reach (a network that only
//    reaches the Service) costs one failed call per kAvoidMs, not one in two;
//  - an owner URL of another scheme than the configured one is never followed (no downgrade from
//    https to http), nor a loopback one (127.x, localhost, ::1) unless the configured URL is one
//    too: a pod that advertises its default 127.0.0.1 names a host only its own machine reaches;
//  - with following off, every call goes to the configured URL.
#pragma once

#include <cstdint>
#include <map>
#include <string>

namespace rsc::member {

class OwnerFollower {
 public:
  OwnerFollower(std::string configuredUrl, bool follow) : configured_(std::move(configuredUrl)), follow_(follow) {}

  // The URL the next call goes to.
  const std::string& target() const { return owner_.empty() ? configured_ : owner_; }
  const std::string& configured() const { return configured_; }
  // The next call goes to a followed owner, not the configured URL.
  bool direct() const { return !owner_.empty(); }
  bool following() const { return follow_; }

  // The call to target() was answered at `nowNs` (CLOCK_MONOTONIC ns); `ownerHeader` is what the
  // answer named ("" nothing). true when the target changed.
  bool on_answer(const std::string& ownerHeader, int64_t nowNs) {
    if (!follow_) return false;
    // The usual answer names the owner already followed (checked when it was first followed; a
    // failure since would have dropped it): nothing to copy or check.
    if (!owner_.empty() && ownerHeader == owner_) return false;
    if (ownerHeader.empty() || ownerHeader == configured_ || !same_scheme(ownerHeader) ||
        (loopback(ownerHeader) && !loopback(configured_)) || avoided(ownerHeader, nowNs)) {
      const bool changed = !owner_.empty();
      owner_.clear();
      return changed;
    }
    owner_ = ownerHeader;
    return true;
  }
  // The call to target() got no answer at `nowNs`. true: it went to a followed owner, and the
  // caller sends it again at once to the configured URL (target() now).
  bool on_failure(int64_t nowNs) {
    if (owner_.empty()) return false;
    avoid_[owner_] = nowNs + kAvoidMs * 1'000'000;
    owner_.clear();
    return true;
  }

  static constexpr int64_t kAvoidMs = 30000;

 private:
  bool same_scheme(const std::string& url) const {
    const auto scheme = [](const std::string& u) { return u.substr(0, u.find("://")); };
    return url.find("://") != std::string::npos && scheme(url) == scheme(configured_);
  }
  static bool loopback(const std::string& url) {
    const auto start = url.find("://");
    if (start == std::string::npos) return false;
    const std::string host = url.substr(start + 3);
    for (const char* p : {"127.", "localhost:", "localhost/", "[::1]"})
      if (host.rfind(p, 0) == 0) return true;
    return host == "localhost";
  }
  bool avoided(const std::string& url, int64_t nowNs) {
    const auto it = avoid_.find(url);
    if (it == avoid_.end()) return false;
    if (nowNs < it->second) return true;
    avoid_.erase(it);
    return false;
  }

  std::string configured_;
  bool follow_ = true;
  std::string owner_;
  std::map<std::string, int64_t> avoid_;  // owner URL -> until when it is not followed (ns)
};

}  // namespace rsc::member
