#include "member/bearer_token.hpp"

#include "redis/options.hpp"

namespace rsc::member {

std::string TokenSource::load() {
  if (file.empty()) return {};
  std::string error;
  std::string read = store::read_secret_file(file, error);
  if (!error.empty()) return "token file: " + error;
  token = std::move(read);
  return {};
}

bool TokenSource::reload_after_refusal() {
  if (file.empty()) return false;
  const std::string before = token;
  return load().empty() && token != before;
}

std::string apply_token_env(TokenSource& t, const std::function<const char*(const char*)>& env) {
  if (const char* v = env("RSC_TOKEN")) t.token = v;
  if (const char* f = env("RSC_TOKEN_FILE"); f != nullptr && *f != '\0') {
    t.file = f;
    if (auto e = t.load(); !e.empty()) return "RSC_TOKEN_FILE: " + e;
  }
  return {};
}

bool apply_token_flag(TokenSource& t, const std::string& flag, const std::function<std::string()>& value,
                      std::string& error) {
  if (flag == "--token") {
    t.token = value();
    t.file.clear();
    return true;
  }
  if (flag != "--token-file") return false;
  t.file = value();
  if (auto e = t.load(); !e.empty()) error = "--token-file: " + e;
  return true;
}

}  // namespace rsc::member
