// What every Redis call answers, for the Redis client and the store alike: a value or an error
// that says whether trying again can help. Depends on protocol/ only (the group key); nothing of
// the coordinator's core (group/) is reachable from the Redis client (checked by a ctest entry,
// scripts/check-layers.sh).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "protocol/types.hpp"

namespace rsc::store {

using Millis = int64_t;
using GroupKey = protocol::GroupKey;
// Where a component's warnings go (the coordinator's log, or nowhere).
using LogFn = std::function<void(const std::string&)>;

enum class ErrorKind {
  Retryable,  // I/O, timeout, LOADING, BUSY, failover...: try again later (RETRY to members)
  Fatal,      // a bug or a misconfiguration: retrying will not help
  Corrupt,    // the stored value cannot be read (corrupted, foreign or newer format)
  Invalid,    // the caller asked for something the store refuses (e.g. shrink a stream)
};
std::string to_string(ErrorKind k);

struct Error {
  ErrorKind kind = ErrorKind::Fatal;
  std::string message;
};

template <typename T>
struct Result {
  std::optional<T> value;
  Error error;
  bool ok() const { return value.has_value(); }
  static Result success(T v) { return Result{std::move(v), {}}; }
  static Result failure(ErrorKind k, std::string msg) { return Result{std::nullopt, Error{k, std::move(msg)}}; }
  static Result failure(Error e) { return Result{std::nullopt, std::move(e)}; }
};

// What a Redis error reply's first word says, from one table of the words rsc knows (any other
// word, e.g. WRONGTYPE, ERR, NOPERM, is none of these). Three questions, each its own column:
// - will it pass if tried again later (LOADING, BUSY, NOSCRIPT, MASTERDOWN, TRYAGAIN, CLUSTERDOWN,
//   READONLY, OOM, MOVED, ASK): the error is Retryable, else Fatal;
bool reply_error_passes(std::string_view reply);
// - does it say the store cannot serve now, though it answered (LOADING, BUSY, MASTERDOWN,
//   CLUSTERDOWN, TRYAGAIN): the pod counts the store as unavailable;
bool reply_error_says_store_down(std::string_view reply);
// - is the command re-sent at once, within the cluster retry budget (TRYAGAIN: a multi-key command
//   during resharding; CLUSTERDOWN: a slot without a master, e.g. mid-failover).
bool reply_error_resent_in_cluster(std::string_view reply);

}  // namespace rsc::store
