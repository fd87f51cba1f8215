// rsc-proxy: a small loopback TCP load balancer for measurements, standing in for a Kubernetes
// Service in front of several coordinator pods. Each accepted connection goes to the next backend
// in turn (round robin; one that refuses is passed over); clients keep their connections alive, so, as with kube-proxy, a client
// talks to one pod until its connection is closed. Bytes are copied both ways until either side
// closes. Runs until it is signalled (SIGTERM).
//   rsc-proxy --listen 127.0.0.1:PORT --backends 127.0.0.1:P1,127.0.0.1:P2,...
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace {

struct Addr {
  std::string host;
  int port = 0;
};

bool parse_addr(const std::string& s, Addr& a) {
  const auto colon = s.rfind(':');
  if (colon == std::string::npos) return false;
  a.host = s.substr(0, colon);
  a.port = std::atoi(s.c_str() + colon + 1);
  return a.port > 0 && a.port < 65536;
}

sockaddr_in to_sockaddr(const Addr& a) {
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(static_cast<uint16_t>(a.port));
  inet_pton(AF_INET, a.host == "localhost" ? "127.0.0.1" : a.host.c_str(), &sa.sin_addr);
  return sa;
}

std::atomic<bool> stopping{false};

void pump(int client, int backend) {
  const int one = 1;
  setsockopt(client, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  setsockopt(backend, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  char buf[16384];
  pollfd fds[2] = {{client, POLLIN, 0}, {backend, POLLIN, 0}};
  while (!stopping) {
    if (::poll(fds, 2, 500) < 0) break;
    bool done = false;
    for (int i = 0; i < 2 && !done; ++i) {
      if (!(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      const ssize_t n = ::read(fds[i].fd, buf, sizeof buf);
      if (n <= 0) {
        done = true;
        break;
      }
      const int to = fds[1 - i].fd;
      for (ssize_t off = 0; off < n;) {
        const ssize_t w = ::write(to, buf + off, static_cast<std::size_t>(n - off));
        if (w <= 0) {
          done = true;
          break;
        }
        off += w;
      }
    }
    if (done) break;
  }
  ::close(client);
  ::close(backend);
}

}  // namespace

int main(int argc, char** argv) {
  Addr listenAt;
  std::vector<Addr> backends;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i], v = argv[i + 1];
    if (k == "--listen") {
      if (!parse_addr(v, listenAt)) return std::fprintf(stderr, "rsc-proxy: bad --listen %s\n", v.c_str()), 2;
    } else if (k == "--backends") {
      for (std::size_t at = 0, comma; at <= v.size(); at = comma + 1) {
        comma = v.find(',', at);
        if (comma == std::string::npos) comma = v.size();
        Addr a;
        if (!parse_addr(v.substr(at, comma - at), a))
          return std::fprintf(stderr, "rsc-proxy: bad backend in %s\n", v.c_str()), 2;
        backends.push_back(a);
      }
    } else {
      return std::fprintf(stderr, "usage: rsc-proxy --listen HOST:PORT --backends HOST:PORT[,HOST:PORT...]\n"), 2;
    }
  }
  if (listenAt.port == 0 || backends.empty())
    return std::fprintf(stderr, "usage: rsc-proxy --listen HOST:PORT --backends HOST:PORT[,HOST:PORT...]\n"), 2;
  if (listenAt.host != "127.0.0.1" && listenAt.host != "localhost")
    return std::fprintf(stderr, "rsc-proxy: listens on loopback only\n"), 2;
  signal(SIGPIPE, SIG_IGN);
  const int ls = socket(AF_INET, SOCK_STREAM, 0);
  const int one = 1;
  setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in sa = to_sockaddr(listenAt);
  if (bind(ls, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0 || listen(ls, 512) != 0) {
    std::perror("rsc-proxy: listen");
    return 1;
  }
  std::fprintf(stderr, "rsc-proxy: listening on %s:%d, %zu backends\n", listenAt.host.c_str(), listenAt.port,
               backends.size());
  std::size_t next = 0;
  while (true) {
    const int c = accept(ls, nullptr, nullptr);
    if (c < 0) continue;
    // A backend that refuses the connection (a pod down, or restarting on its port) is passed over
    // for the next one, as a Service's endpoints leave out a pod that is not ready and as common
    // load balancers try the next upstream on a connect error; all refusing: the client is closed.
    int bs = -1;
    for (std::size_t tried = 0; tried < backends.size() && bs < 0; ++tried) {
      const Addr& b = backends[next++ % backends.size()];
      bs = socket(AF_INET, SOCK_STREAM, 0);
      sockaddr_in ba = to_sockaddr(b);
      if (connect(bs, reinterpret_cast<sockaddr*>(&ba), sizeof ba) != 0) {
        ::close(bs);
        bs = -1;
      }
    }
    if (bs < 0) {
      ::close(c);
      continue;
    }
    std::thread(pump, c, bs).detach();
  }
}
