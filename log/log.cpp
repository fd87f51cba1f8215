#include "log/log.hpp"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <mutex>

namespace rsc::log {
namespace {
std::mutex mu;
std::atomic<bool> enabled{true};
}  // namespace

void set_enabled(bool on) { enabled = on; }

void line(Level level, const std::string& message) {
  if (!enabled) return;
  const auto now = std::chrono::system_clock::now();
  const auto t = std::chrono::system_clock::to_time_t(now);
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000;
  std::tm tm{};
  gmtime_r(&t, &tm);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%S", &tm);
  const char* lv = level == Level::Info ? "INFO" : level == Level::Warn ? "WARN" : "ERROR";
  std::lock_guard<std::mutex> lock(mu);
  std::fprintf(stderr, "%s.%03lldZ %-5s %s\n", stamp, static_cast<long long>(ms), lv, message.c_str());
  std::fflush(stderr);
}

}  // namespace rsc::log
