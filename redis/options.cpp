#include "redis/options.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

namespace rsc::store {

std::string read_secret_file(const std::string& path, std::string& error) {
  struct stat st{};
  if (::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) {
    error = path + " is not a regular file";
    return {};
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    error = "cannot read " + path + ": " + std::strerror(errno);
    return {};
  }
  constexpr std::size_t kMax = 64 * 1024;  // a password or a token, not a file of anything
  std::string s(kMax + 1, '\0');
  in.read(s.data(), static_cast<std::streamsize>(s.size()));
  s.resize(static_cast<std::size_t>(in.gcount()));
  if (s.size() > kMax) {
    error = path + " is larger than 64 KiB";
    return {};
  }
  if (!s.empty() && s.back() == '\n') s.pop_back();
  if (!s.empty() && s.back() == '\r') s.pop_back();
  if (s.empty()) error = path + " is empty";
  return s;
}

std::string unreadable_file(const std::string& flag, const std::string& path, bool directory) {
  if (path.empty()) return {};
  struct stat st{};
  if (::stat(path.c_str(), &st) != 0) return flag + " " + path + ": " + std::strerror(errno);
  if (directory ? !S_ISDIR(st.st_mode) : !S_ISREG(st.st_mode))
    return flag + " " + path + ": not a " + (directory ? "directory" : "regular file");
  if (::access(path.c_str(), directory ? (R_OK | X_OK) : R_OK) != 0) return flag + " " + path + ": " + std::strerror(errno);
  return {};
}

namespace {

bool truthy(const std::string& v, bool& out) {
  if (v == "1" || v == "true" || v == "yes" || v == "on") return out = true, true;
  if (v == "0" || v == "false" || v == "no" || v == "off" || v.empty()) return out = false, true;
  return false;
}

// The TLS settings' names, their flags' and variables' suffixes, and where they go.
struct TlsField {
  const char* suffix;  // --redis-tls-<suffix>, RSC_REDIS_TLS_<SUFFIX>
  const char* envSuffix;
  std::string TlsOptions::*member;
};
const TlsField kTlsFields[] = {{"ca-file", "CA_FILE", &TlsOptions::caFile},
                               {"ca-dir", "CA_DIR", &TlsOptions::caDir},
                               {"cert-file", "CERT_FILE", &TlsOptions::certFile},
                               {"key-file", "KEY_FILE", &TlsOptions::keyFile},
                               {"server-name", "SERVER_NAME", &TlsOptions::serverName}};

}  // namespace

bool apply_redis_flag(RedisOptions& o, const std::string& flag, const std::function<std::string()>& value,
                      std::string& error) {
  if (flag == "--redis-user") {
    o.user = value();
    return true;
  }
  if (flag == "--redis-password-file") {
    o.password = read_secret_file(value(), error);
    if (!error.empty()) error = flag + ": " + error;
    return true;
  }
  if (flag == "--redis-tls") {
    o.tls.enabled = true;
    return true;
  }
  for (const auto& f : kTlsFields) {
    if (flag != std::string("--redis-tls-") + f.suffix) continue;
    o.tls.*f.member = value();
    o.tls.enabled = true;
    if ((o.tls.*f.member).empty()) error = flag + " needs a non-empty value";
    return true;
  }
  return false;
}

std::string apply_redis_env(RedisOptions& o, const std::function<const char*(const char*)>& env) {
  if (const char* v = env("RSC_REDIS_USER")) o.user = v;
  if (const char* v = env("RSC_REDIS_PASSWORD")) o.password = v;
  if (const char* v = env("RSC_REDIS_PASSWORD_FILE")) {
    std::string error;
    o.password = read_secret_file(v, error);
    if (!error.empty()) return "RSC_REDIS_PASSWORD_FILE: " + error;
  }
  if (const char* v = env("RSC_REDIS_TLS"))
    if (!truthy(v, o.tls.enabled)) return std::string("RSC_REDIS_TLS must be true or false, not '") + v + "'";
  for (const auto& f : kTlsFields) {
    const std::string name = std::string("RSC_REDIS_TLS_") + f.envSuffix;
    if (const char* v = env(name.c_str())) {
      o.tls.*f.member = v;
      if (*v != '\0') o.tls.enabled = true;
    }
  }
  return {};
}

std::string describe_tls(const TlsOptions& t) {
  if (!t.enabled) return "off";
  std::string out = "on, CA " + (!t.caFile.empty() ? t.caFile : !t.caDir.empty() ? t.caDir : std::string("the system's"));
  if (!t.certFile.empty()) out += ", client certificate " + t.certFile;
  if (!t.serverName.empty()) out += ", server name " + t.serverName;
  return out;
}

}  // namespace rsc::store
