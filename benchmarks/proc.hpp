// Small helpers the load and soak tools share: comma lists, and figures of running processes read
// from /proc (RSS, CPU time).
#pragma once

#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

namespace rsc::bench {

inline std::vector<std::string> split(const std::string& v) {
  std::vector<std::string> out;
  for (std::size_t p = 0; p != std::string::npos;) {
    const auto c = v.find(',', p);
    out.push_back(v.substr(p, c == std::string::npos ? std::string::npos : c - p));
    p = c == std::string::npos ? c : c + 1;
  }
  return out;
}

// Resident memory of one process in KiB (-1 when it cannot be read).
inline long rss_kib(const std::string& pid) {
  std::ifstream in("/proc/" + pid + "/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("VmRSS:", 0) == 0) return std::atol(line.c_str() + 6);
  return -1;
}

inline long rss_kib(const std::vector<std::string>& pids) {
  long total = 0;
  for (const auto& p : pids) total += std::max(0L, rss_kib(p));
  return total;
}

// CPU seconds (user + system) the given processes have used.
inline double cpu_seconds(const std::vector<std::string>& pids) {
  double total = 0;
  const double hz = static_cast<double>(sysconf(_SC_CLK_TCK));
  for (const auto& p : pids) {
    std::ifstream in("/proc/" + p + "/stat");
    std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const auto close = all.rfind(')');
    if (close == std::string::npos) continue;
    std::istringstream rest(all.substr(close + 2));
    std::string field;
    long utime = 0, stime = 0;
    for (int i = 3; i <= 15 && rest >> field; ++i) {
      if (i == 14) utime = std::atol(field.c_str());
      if (i == 15) stime = std::atol(field.c_str());
    }
    total += static_cast<double>(utime + stime) / hz;
  }
  return total;
}

}  // namespace rsc::bench
