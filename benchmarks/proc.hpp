// Small helpers the load and soak tools share: comma lists, and figures of running processes read
// from /proc (RSS, CPU time).
#pragma once

#include <unistd.h>

#include <cstdlib>
#include <dirent.h>
#include <fstream>
#include <map>
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

// CPU seconds (user + system) in a /proc stat file (of a process or of one of its threads).
inline double stat_cpu_seconds(const std::string& statPath) {
  std::ifstream in(statPath);
  std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto close = all.rfind(')');
  if (close == std::string::npos) return 0;
  std::istringstream rest(all.substr(close + 2));
  std::string field;
  long utime = 0, stime = 0;
  for (int i = 3; i <= 15 && rest >> field; ++i) {
    if (i == 14) utime = std::atol(field.c_str());
    if (i == 15) stime = std::atol(field.c_str());
  }
  return static_cast<double>(utime + stime) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

// CPU seconds (user + system) the given processes have used.
inline double cpu_seconds(const std::vector<std::string>& pids) {
  double total = 0;
  for (const auto& p : pids) total += stat_cpu_seconds("/proc/" + p + "/stat");
  return total;
}

// Each thread of the given processes: its name, CPU seconds and context switches (voluntary +
// involuntary) so far, by "pid/tid". Where a process spends its CPU, thread by thread.
struct ThreadFigures {
  std::string name;
  double cpu = 0;
  long switches = 0;
};
inline std::map<std::string, ThreadFigures> thread_figures(const std::vector<std::string>& pids) {
  std::map<std::string, ThreadFigures> out;
  for (const auto& p : pids) {
    const std::string tasks = "/proc/" + p + "/task";
    DIR* d = opendir(tasks.c_str());
    if (!d) continue;
    while (const dirent* e = readdir(d)) {
      const std::string tid = e->d_name;
      if (tid == "." || tid == "..") continue;
      ThreadFigures f;
      f.cpu = stat_cpu_seconds(tasks + "/" + tid + "/stat");
      std::ifstream comm(tasks + "/" + tid + "/comm");
      std::getline(comm, f.name);
      std::ifstream status(tasks + "/" + tid + "/status");
      std::string line;
      while (std::getline(status, line))
        if (line.rfind("voluntary_ctxt_switches:", 0) == 0 || line.rfind("nonvoluntary_ctxt_switches:", 0) == 0)
          f.switches += std::atol(line.c_str() + line.find(':') + 1);
      out[p + "/" + tid] = f;
    }
    closedir(d);
  }
  return out;
}

}  // namespace rsc::bench
