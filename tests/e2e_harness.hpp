// End-to-end helpers: rsc-coordinator processes on free loopback ports (stopped by pid), a small
// blocking HTTP client, and heartbeat builders.
#pragma once

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "protocol/codec.hpp"
#include "redis_server.hpp"

namespace rsc::testing {

struct HttpResult {
  int status = 0;
  std::string body;
  std::map<std::string, std::string> headers;
  nlohmann::json json() const { return nlohmann::json::parse(body, nullptr, false); }
};

// One request on a fresh connection; status 0 when the connection failed.
// Runs a shell command; its output (stderr too) and exit code.
inline std::string run_command(const std::string& cmd, int* rc) {
  FILE* p = popen((cmd + " 2>&1").c_str(), "r");
  std::string out;
  char buf[512];
  while (fgets(buf, sizeof buf, p)) out += buf;
  *rc = WEXITSTATUS(pclose(p));
  return out;
}

inline HttpResult http_call(int port, const std::string& method, const std::string& target, const std::string& body = {},
                            const std::map<std::string, std::string>& headers = {{"Content-Type", "application/json"}},
                            int timeoutMs = 5000) {
  namespace beast = boost::beast;
  namespace bhttp = beast::http;
  namespace net = boost::asio;
  HttpResult out;
  try {
    net::io_context ioc;
    beast::tcp_stream stream(ioc);
    stream.expires_after(std::chrono::milliseconds(timeoutMs));
    stream.connect(net::ip::tcp::endpoint(net::ip::make_address("127.0.0.1"), static_cast<unsigned short>(port)));
    bhttp::request<bhttp::string_body> req{bhttp::string_to_verb(method), target, 11};
    req.set(bhttp::field::host, "127.0.0.1");
    for (const auto& [k, v] : headers) req.set(k, v);
    req.body() = body;
    req.prepare_payload();
    beast::error_code wec;
    bhttp::write(stream, req, wec);  // a server may answer (413) before taking the whole body
    beast::flat_buffer buf;
    bhttp::response_parser<bhttp::string_body> parser;
    parser.body_limit(64 * 1024 * 1024);
    bhttp::read(stream, buf, parser);
    auto res = parser.release();
    out.status = res.result_int();
    out.body = res.body();
    for (const auto& f : res) out.headers[std::string(f.name_string())] = std::string(f.value());
    beast::error_code ec;
    stream.socket().shutdown(net::ip::tcp::socket::shutdown_both, ec);
  } catch (const std::exception&) {
    out.status = 0;
  }
  return out;
}

// Any child process: output to a file, signals by pid, never outlives the test.
class Process {
 public:
  Process(std::vector<std::string> args, std::string logPath) : args_(std::move(args)), logPath_(std::move(logPath)) {
    pid_ = fork();
    if (pid_ == 0) {
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      const int fd = open(logPath_.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
      dup2(fd, 1);
      dup2(fd, 2);
      std::vector<char*> argv;
      for (auto& a : args_) argv.push_back(a.data());
      argv.push_back(nullptr);
      execv(argv[0], argv.data());
      _exit(127);
    }
  }
  ~Process() {
    if (pid_ > 0 && !reaped_) {
      ::kill(pid_, SIGCONT);
      ::kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
  }
  Process(const Process&) = delete;
  Process& operator=(const Process&) = delete;
  pid_t pid() const { return pid_; }
  void signal(int sig) {
    if (pid_ > 0 && !reaped_) ::kill(pid_, sig);  // never a reaped pid (it may be someone else's now)
  }
  // After SIGSTOP: true once every thread of the process is stopped (state T in
  // /proc/PID/task/*/stat), false if that is not seen within waitMs. A signal is delivered a
  // little after kill() returns; until then the process still runs.
  bool wait_stopped(int waitMs) {
    const std::string tasks = "/proc/" + std::to_string(pid_) + "/task";
    for (int i = 0; i <= waitMs; ++i) {
      bool all = true, any = false;
      if (DIR* d = opendir(tasks.c_str())) {
        while (dirent* e = readdir(d)) {
          if (e->d_name[0] == '.') continue;
          std::ifstream in(tasks + "/" + e->d_name + "/stat");
          std::string line;
          std::getline(in, line);
          const auto paren = line.rfind(')');
          if (paren == std::string::npos || paren + 2 >= line.size()) continue;  // the thread just ended
          any = true;
          const char state = line[paren + 2];
          all = all && (state == 'T' || state == 't');
        }
        closedir(d);
      }
      if (any && all) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return false;
  }
  // Waits up to waitMs; the exit code, or -1 if still running.
  int wait(int waitMs) {
    if (reaped_) return status_;
    for (int i = 0; i <= waitMs / 10; ++i) {
      int st = 0;
      if (waitpid(pid_, &st, WNOHANG) == pid_) {
        reaped_ = true;
        status_ = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        return status_;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return -1;
  }
  std::string output() const {
    std::ifstream in(logPath_);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }

 private:
  std::vector<std::string> args_;
  std::string logPath_;
  pid_t pid_ = -1;
  bool reaped_ = false;
  int status_ = -1;
};

// A rsc-coordinator process. Its log goes to a file in a temp dir (printed when a test fails).
class Coordinator {
 public:
  // `wrapper` runs the binary through another program (e.g. {"/usr/bin/faketime", "-f", "+10s"}).
  Coordinator(int redisPort, std::vector<std::string> extraArgs = {}, std::vector<std::string> wrapper = {})
      : Coordinator("127.0.0.1:" + std::to_string(redisPort), std::move(extraArgs), std::move(wrapper)) {}
  // `redis`: what --redis takes (one HOST:PORT, or a cluster's seed list).
  Coordinator(const std::string& redis, std::vector<std::string> extraArgs, std::vector<std::string> wrapper = {}) {
    char tmpl[] = "/tmp/rsc-coord-XXXXXX";
    dir_ = mkdtemp(tmpl);
    port_ = free_loopback_port();
    args_ = wrapper;
    for (const auto& a : std::vector<std::string>{RSC_COORDINATOR_BIN, "--listen", "127.0.0.1:" + std::to_string(port_),
                                                  "--redis", redis})
      args_.push_back(a);
    // "{port}" in an argument stands for the port this pod listens on (e.g. --advertise localhost:{port}).
    for (auto a : extraArgs) {
      if (const auto at = a.find("{port}"); at != std::string::npos) a.replace(at, 6, std::to_string(port_));
      args_.push_back(std::move(a));
    }
    start();
  }
  ~Coordinator() {
    stop();
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  Coordinator(const Coordinator&) = delete;
  Coordinator& operator=(const Coordinator&) = delete;

  int port() const { return port_; }
  pid_t pid() const { return proc_ ? proc_->pid() : -1; }
  std::string log() const {
    std::ifstream in(dir_ + "/coordinator.log");
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }

  void start() {
    proc_ = std::make_unique<Process>(args_, dir_ + "/coordinator.log");
    // An HTTPS pod does not answer plain HTTP: its "ready" line says it serves.
    const bool https = std::find(args_.begin(), args_.end(), "--tls-cert-file") != args_.end();
    for (int i = 0; i < 500; ++i) {
      if (https ? log().find("ready: serving https://") != std::string::npos
                : http_call(port_, "GET", "/healthz", {}, {}, 500).status == 200)
        return;
      if (proc_->wait(0) != -1) throw std::runtime_error("rsc-coordinator exited at start:\n" + log());
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    throw std::runtime_error("rsc-coordinator did not come up:\n" + log());
  }

  // SIGTERM and wait; the exit status (-1 if it had to be killed).
  int stop(int waitMs = 10000) {
    if (!proc_) return 0;
    proc_->signal(SIGTERM);
    const int rc = proc_->wait(waitMs);
    proc_.reset();  // kills it if it is still running
    return rc;
  }

 private:
  std::string dir_;
  int port_ = 0;
  std::vector<std::string> args_;
  std::unique_ptr<Process> proc_;
};

inline std::string hb_path(const std::string& stream, const std::string& group, const std::string& member) {
  return "/coord/v1/streams/" + stream + "/groups/" + group + "/members/" + member + "/heartbeat";
}

inline nlohmann::json hb_body(const std::string& member, int32_t epoch, const std::vector<int32_t>& owned = {},
                              const std::vector<int32_t>& revoked = {}, const std::string& requestId = {}) {
  static std::atomic<int> seq{0};
  nlohmann::json o = nlohmann::json::array(), r = nlohmann::json::array();
  for (auto s : owned) o.push_back({{"shardIndex", s}, {"state", "OWNED"}});
  for (auto s : revoked) r.push_back({{"shardIndex", s}, {"state", "REVOKED"}, {"inFlight", 0}, {"ackedAt", nullptr}});
  return {{"protocolVersion", 1},
          {"requestId", requestId.empty() ? member + "-" + std::to_string(++seq) : requestId},
          {"memberId", member},
          {"memberEpoch", epoch},
          {"metadataVersion", 1},
          {"runtimeConsumerCapacity", {{"runtimeMaxConcurrency", 4}, {"availableConcurrency", 4}}},
          {"ownedShards", o},
          {"revokingShards", r}};
}

inline std::vector<int32_t> assigned_of(const nlohmann::json& resp) {
  std::vector<int32_t> v;
  if (resp.contains("assignment") && resp["assignment"].is_object())
    for (const auto& s : resp["assignment"]["assignedShards"]) v.push_back(s["shardIndex"].get<int32_t>());
  return v;
}
inline std::vector<int32_t> pending_of(const nlohmann::json& resp) {
  std::vector<int32_t> v;
  if (resp.contains("assignment") && resp["assignment"].is_object())
    for (const auto& s : resp["assignment"]["pendingShards"]) v.push_back(s["shardIndex"].get<int32_t>());
  return v;
}

// The value of one sample of a pod's /metrics (its name with its labels, exactly as exposed), or
// `absent` when there is none.
inline double metric(int port, const std::string& sample, double absent = -1) {
  auto r = http_call(port, "GET", "/metrics");
  std::istringstream in(r.body);
  std::string line;
  while (std::getline(in, line))
    if (line.rfind(sample + " ", 0) == 0) return std::stod(line.substr(sample.size() + 1));
  return absent;
}

}  // namespace rsc::testing
