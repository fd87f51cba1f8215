// The bearer token a client presents to the coordinator. No Boost here.
#pragma once

#include <functional>
#include <string>

#include "member/http_client.hpp"

namespace rsc::member {

// Given as is (--token, RSC_TOKEN) or read from a file (--token-file, RSC_TOKEN_FILE: a mounted
// Secret, kept out of /proc/PID/cmdline and of the environment `ps e` shows). A token from a file
// is read again when the coordinator refuses it (HTTP 401): a token rotated in the file and at the
// coordinator is picked up without a restart.
struct TokenSource {
  std::string token;
  std::string file;  // empty: `token` is used as given

  // Reads `file` into `token`: "" when read, else why not (naming the file; `token` unchanged).
  std::string load();
  // After a 401: true when the file now holds another token (the call may go again with it).
  bool reload_after_refusal();
  // Makes `call(token)`; refused for its token (401) while the file now holds another one: once more
  // with the new token, at once. Every coordinator call of the runtime and the producer goes so.
  template <typename Call>
  HttpReply send(Call&& call) {
    HttpReply r = call(token);
    if (r.status == 401 && reload_after_refusal()) r = call(token);
    return r;
  }
};

// RSC_TOKEN, then RSC_TOKEN_FILE (the file wins when both are set): "" or why the file cannot be
// read. `env` looks a variable up (std::getenv in the tools).
std::string apply_token_env(TokenSource& t, const std::function<const char*(const char*)>& env);
// --token T or --token-file F (read at once): true when `flag` is one of them (its value taken
// with `value()`); `error` says why the file cannot be read.
bool apply_token_flag(TokenSource& t, const std::string& flag, const std::function<std::string()>& value,
                      std::string& error);

}  // namespace rsc::member
