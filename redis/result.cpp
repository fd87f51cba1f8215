#include "redis/result.hpp"

#include <array>

namespace rsc::store {

std::string to_string(ErrorKind k) {
  switch (k) {
    case ErrorKind::Retryable: return "retryable";
    case ErrorKind::Fatal: return "fatal";
    case ErrorKind::Corrupt: return "corrupt";
    case ErrorKind::Invalid: return "invalid";
  }
  return "?";
}

namespace {

struct ReplyWord {
  std::string_view word;
  bool passes;     // retrying later may succeed
  bool storeDown;  // the store cannot serve now
  bool resend;     // re-sent at once within the cluster retry budget
};
constexpr std::array<ReplyWord, 10> kReplyWords{{
    {"LOADING", true, true, false},
    {"BUSY", true, true, false},
    {"NOSCRIPT", true, false, false},  // the connection loads its scripts again
    {"MASTERDOWN", true, true, false},
    {"TRYAGAIN", true, true, true},
    {"CLUSTERDOWN", true, true, true},
    {"READONLY", true, false, false},  // a failover demoted the node: the slot map is read again
    {"OOM", true, false, false},
    {"MOVED", true, false, false},
    {"ASK", true, false, false},
}};

const ReplyWord* reply_word(std::string_view reply) {
  const auto word = reply.substr(0, reply.find(' '));
  for (const auto& w : kReplyWords)
    if (w.word == word) return &w;
  return nullptr;
}

}  // namespace

bool reply_error_passes(std::string_view reply) {
  const auto* w = reply_word(reply);
  return w != nullptr && w->passes;
}
bool reply_error_says_store_down(std::string_view reply) {
  const auto* w = reply_word(reply);
  return w != nullptr && w->storeDown;
}
bool reply_error_resent_in_cluster(std::string_view reply) {
  const auto* w = reply_word(reply);
  return w != nullptr && w->resend;
}

}  // namespace rsc::store
