// What every Redis call answers, for the Redis client and the store alike: a value or an error
// that says whether trying again can help. Depends on protocol/ only (the group key); nothing of
// the coordinator's core (group/) is reachable from the Redis client (checked by a ctest entry,
// scripts/check-layers.sh).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

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

}  // namespace rsc::store
