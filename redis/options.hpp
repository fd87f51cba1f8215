// How every rsc program is told where Redis is and how to reach it safely: the same flags and
// environment variables for the coordinator, rsc-consume, rsc-produce and the benchmarks, and
// secrets read from files (a Kubernetes Secret mounted as a file) so that they never have to sit
// in a command line or a config file.
#pragma once

#include <functional>
#include <string>

#include "redis/connection.hpp"

namespace rsc::store {

// A secret from a file: its content without one trailing newline. "" and `error` set when it cannot
// be read or is empty (the error names the file, never the content).
std::string read_secret_file(const std::string& path, std::string& error);

// The Redis flags beside --redis and --redis-cluster:
//   --redis-user U, --redis-password-file F,
//   --redis-tls, --redis-tls-ca-file F, --redis-tls-ca-dir D, --redis-tls-cert-file F,
//   --redis-tls-key-file F, --redis-tls-server-name NAME (any --redis-tls-* turns TLS on).
// true when `flag` is one of them (its value, if it takes one, is taken with `value()`); `error`
// says what is wrong with it.
bool apply_redis_flag(RedisOptions& o, const std::string& flag, const std::function<std::string()>& value,
                      std::string& error);

// The same from the environment: RSC_REDIS_USER, RSC_REDIS_PASSWORD, RSC_REDIS_PASSWORD_FILE,
// RSC_REDIS_TLS (true/false), RSC_REDIS_TLS_CA_FILE, RSC_REDIS_TLS_CA_DIR, RSC_REDIS_TLS_CERT_FILE,
// RSC_REDIS_TLS_KEY_FILE, RSC_REDIS_TLS_SERVER_NAME. "" when fine, else what is wrong.
std::string apply_redis_env(RedisOptions& o, const std::function<const char*(const char*)>& env);

// One line for usage texts.
inline constexpr const char* kRedisFlagsUsage =
    "[--redis-user U] [--redis-password-file F] [--redis-tls] [--redis-tls-ca-file F | --redis-tls-ca-dir D]\n"
    "[--redis-tls-cert-file F --redis-tls-key-file F] [--redis-tls-server-name NAME]";

// What is wrong with a file a flag names, said with the flag ("--redis-tls-ca-file /x: No such file
// or directory"): it must be a readable regular file (or, with `directory`, a directory). "" when fine.
std::string unreadable_file(const std::string& flag, const std::string& path, bool directory = false);
// (The Redis TLS files are checked whole, as a connection would use them: check_tls_files in
// redis/transport.hpp.)

// What a log or --check-config may show of the TLS settings (file names, never a secret).
std::string describe_tls(const TlsOptions& t);

}  // namespace rsc::store
