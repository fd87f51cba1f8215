#include "tools/exec_handler.hpp"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "member/runtime.hpp"

extern char** environ;

namespace rsc::tools {
namespace {

// `sh -c cmd` with stdin and stdout (and stderr, when asked) on pipes; the child gets the default
// signal mask and SIGPIPE back (the consumer blocks SIGTERM in its threads and ignores SIGPIPE).
struct Child {
  pid_t pid = -1;
  int in = -1, out = -1, err = -1;
};

Child spawn(const std::string& cmd, bool captureErr) {
  int in[2], out[2], err[2] = {-1, -1};
  if (::pipe2(in, O_CLOEXEC) != 0 || ::pipe2(out, O_CLOEXEC) != 0 || (captureErr && ::pipe2(err, O_CLOEXEC) != 0))
    throw std::runtime_error(std::string("pipe: ") + std::strerror(errno));
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, in[0], 0);
  posix_spawn_file_actions_adddup2(&fa, out[1], 1);
  if (captureErr) posix_spawn_file_actions_adddup2(&fa, err[1], 2);
  posix_spawnattr_t at;
  posix_spawnattr_init(&at);
  sigset_t none, defaults;
  sigemptyset(&none);
  sigemptyset(&defaults);
  sigaddset(&defaults, SIGPIPE);
  sigaddset(&defaults, SIGTERM);
  sigaddset(&defaults, SIGINT);
  posix_spawnattr_setsigmask(&at, &none);
  posix_spawnattr_setsigdefault(&at, &defaults);
  posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  const char* argv[] = {"/bin/sh", "-c", cmd.c_str(), nullptr};
  Child c;
  const int rc = posix_spawn(&c.pid, "/bin/sh", &fa, &at, const_cast<char**>(argv), environ);
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&at);
  ::close(in[0]);
  ::close(out[1]);
  if (captureErr) ::close(err[1]);
  if (rc != 0) {
    ::close(in[1]);
    ::close(out[0]);
    if (captureErr) ::close(err[0]);
    throw std::runtime_error("cannot start /bin/sh: " + std::string(std::strerror(rc)));
  }
  c.in = in[1];
  c.out = out[0];
  c.err = captureErr ? err[0] : -1;
  return c;
}

bool write_all(int fd, const std::string& s) {
  std::size_t done = 0;
  while (done < s.size()) {
    const ssize_t n = ::write(fd, s.data() + done, s.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<std::size_t>(n);
  }
  return true;
}

std::string read_all(int fd) {
  std::string s;
  char buf[4096];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return s;
    s.append(buf, static_cast<std::size_t>(n));
  }
}

// A line from fd (without its newline); false at EOF before any newline.
bool read_line(int fd, std::string& buffer, std::string& line) {
  for (;;) {
    const auto nl = buffer.find('\n');
    if (nl != std::string::npos) {
      line = buffer.substr(0, nl);
      buffer.erase(0, nl + 1);
      return true;
    }
    char buf[4096];
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    buffer.append(buf, static_cast<std::size_t>(n));
  }
}

}  // namespace

std::string record_json(const member::Record& r) {
  nlohmann::json fields = nlohmann::json::object();
  for (const auto& [k, v] : r.fields) fields[k] = v;
  return nlohmann::json{{"shard", r.shard}, {"id", r.id}, {"deliveries", r.deliveries}, {"fields", std::move(fields)}}.dump();
}

void run_per_record(const std::string& cmd, const member::Record& r) {
  Child c = spawn(cmd, true);
  write_all(c.in, record_json(r) + "\n");  // a command that does not read its input may close it
  ::close(c.in);
  ::close(c.out);  // its stdout is not ours to read: it goes nowhere
  std::string err = read_all(c.err);
  ::close(c.err);
  int status = 0;
  while (::waitpid(c.pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (err.size() > 300) err = "..." + err.substr(err.size() - 300);
  while (!err.empty() && (err.back() == '\n' || err.back() == '\r')) err.pop_back();
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return;
  if (WIFEXITED(status) && WEXITSTATUS(status) == kExitRetryLater)
    throw member::RetryLater("exit 75" + (err.empty() ? "" : ": " + err));
  if (WIFEXITED(status) && WEXITSTATUS(status) == kExitDeadLetterNow)
    throw member::DeadLetterNow("exit 65" + (err.empty() ? "" : ": " + err));
  const std::string how = WIFEXITED(status) ? "exit " + std::to_string(WEXITSTATUS(status))
                                            : "signal " + std::to_string(WTERMSIG(status));
  throw std::runtime_error(how + (err.empty() ? "" : ": " + err));
}

void run_on_child(const std::string& cmd, const member::Record& r) {
  struct Held {
    Child c;
    std::string buffer;
    ~Held() {
      if (c.pid <= 0) return;
      ::close(c.in);  // EOF: the command ends
      ::close(c.out);
      int status = 0;
      ::waitpid(c.pid, &status, 0);
    }
  };
  thread_local std::unique_ptr<Held> held;
  if (!held) {
    held = std::make_unique<Held>();
    held->c = spawn(cmd, false);
  }
  std::string line;
  if (!write_all(held->c.in, record_json(r) + "\n") || !read_line(held->c.out, held->buffer, line)) {
    held.reset();  // it exited: started again for the next record
    throw std::runtime_error("the --exec-lines command exited");
  }
  if (!line.empty() && line.back() == '\r') line.pop_back();
  const auto word = line.substr(0, line.find(' '));
  const auto why = line.size() > word.size() ? line.substr(word.size() + 1) : word;
  if (word == "ok") return;
  if (word == "retry") throw member::RetryLater(why);
  if (word == "dead") throw member::DeadLetterNow(why);
  throw std::runtime_error("answered: " + line);
}

}  // namespace rsc::tools
