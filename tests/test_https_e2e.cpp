// The coordinator over HTTPS (issue 29): real rsc-coordinator processes started with the test
// PKI's certificates (made by `openssl` at test time), called by the member library's HTTP client
// and the member runtime; mutual TLS, forwarding between pods over TLS, certificate rotation (files
// replaced, SIGHUP) without dropping open connections, and each bad client getting one clear line.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <mutex>
#include <thread>

#include "e2e_harness.hpp"
#include "member/http_client.hpp"
#include "member/runtime.hpp"
#include "redis_server.hpp"
#include "tls_pki.hpp"

using namespace rsc;
using namespace rsc::testing;
using nlohmann::json;

namespace {

const TestPki& pki() { return TestPki::get(); }

std::vector<std::string> https_args(const std::string& cert, const std::string& key, bool mutual) {
  std::vector<std::string> a{"--tick-interval-ms", "50", "--heartbeat-interval-ms", "100", "--member-lease-ttl-ms", "1500",
                             "--http-header-timeout-ms", "300", "--tls-cert-file", cert, "--tls-key-file", key};
  if (mutual) a.insert(a.end(), {"--tls-client-ca-file", pki().ca()});
  return a;
}

member::HttpClient client(int port, member::ClientTls tls) {
  std::string err;
  return member::HttpClient(member::parse_url("https://127.0.0.1:" + std::to_string(port), &err), 2000, std::move(tls));
}
member::ClientTls good_client() { return {pki().ca(), pki().clientCert(), pki().clientKey()}; }

// A member of `group` on stream "orders" calling `url` with the good client certificate.
member::RuntimeOptions https_member(const RedisServer& redis, const std::string& url, const std::string& group) {
  member::RuntimeOptions o;
  o.coordinatorUrl = url;
  o.coordinatorTls = good_client();
  o.redis = redis.client_options();
  o.streamPrefix = "orders";
  o.group = group;
  o.memberId = "m1";
  o.maxBlockMs = 100;
  return o;
}

// A counter or gauge without labels (or with them spelled out in `name`) from the pod's /metrics.
double metric_of(member::HttpClient& c, const std::string& name) {
  const auto body = c.request("GET", "/metrics", "").body;
  const auto at = body.find("\n" + name + " ");
  return at == std::string::npos ? 0.0 : std::stod(body.substr(at + name.size() + 2));
}

std::string join_body(const std::string& member, int epoch = 0) {
  return json{{"protocolVersion", 1}, {"requestId", "r-" + member + std::to_string(epoch)}, {"memberId", member},
              {"memberEpoch", epoch}, {"metadataVersion", 0},
              {"runtimeConsumerCapacity", {{"runtimeMaxConcurrency", 1}, {"availableConcurrency", 1}}},
              {"ownedShards", json::array()}}
      .dump();
}

int count_of(const std::string& text, const std::string& part) {
  int n = 0;
  for (auto at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++n;
  return n;
}

template <typename F>
bool within(F f, int ms) {
  for (int i = 0; i < ms / 20; ++i) {
    if (f()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return f();
}

}  // namespace

TEST(Https, MutualTlsServesTheApiStatusPageMetricsAndProbesAndPodsForwardOverTls) {
  RedisServer redis;
  Coordinator pod1(redis.port(), https_args(pki().serverCert(), pki().serverKey(), true));
  Coordinator pod2(redis.port(), https_args(pki().serverCert(), pki().serverKey(), true));
  auto c1 = client(pod1.port(), good_client());
  auto c2 = client(pod2.port(), good_client());
  for (const char* path : {"/healthz", "/readyz", "/metrics", "/"})
    EXPECT_EQ(c1.request("GET", path, "").status, 200) << path << " over HTTPS";
  ASSERT_EQ(c1.request("PUT", "/coord/v1/streams/orders", R"({"shardCount": 4})").status, 200);
  auto metric = metric_of;
  // Both pods know each other (each has seen the other in the pod registry) before members come:
  // a pod that has not yet would serve a call itself rather than forward it.
  ASSERT_TRUE(within([&] { return metric(c1, "rsc_pods_live") == 2 && metric(c2, "rsc_pods_live") == 2; }, 10000))
      << "the two pods never saw each other";
  // Two members join, one through each pod: whichever pod serves the group, the other forwards to it.
  // (Until the second pod is established in the registry, and while the group's ownership moves to
  // it, a call may be answered RETRY where it arrived: the members call again, as members do, until
  // three calls went through the other pod.)
  const std::string answered = R"(rsc_forwarded_calls_total{result="answered"})";
  const std::string unreachable = R"(rsc_forwarded_calls_total{result="unreachable"})";
  for (int i = 0; i < 3 || (i < 100 && metric(c1, answered) + metric(c2, answered) < 3); ++i) {
    auto a = c1.request("POST", hb_path("orders", "billing", "a"), join_body("a"));
    auto b = c2.request("POST", hb_path("orders", "billing", "b"), join_body("b"));
    EXPECT_EQ(a.status, 200) << a.body << a.error;
    EXPECT_EQ(b.status, 200) << b.body << b.error;
    if (i >= 3) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  const auto d1 = json::parse(c1.request("GET", "/coord/v1/streams/orders/groups/billing", "").body);
  const auto d2 = json::parse(c2.request("GET", "/coord/v1/streams/orders/groups/billing", "").body);
  EXPECT_EQ(d1["members"].size(), 2u) << d1.dump();
  EXPECT_EQ(d1["groupEpoch"], d2["groupEpoch"]) << "one group, whichever pod is asked";
  // Some calls went through the other pod, over TLS, and every one was answered.
  EXPECT_GE(metric(c1, answered) + metric(c2, answered), 3) << "forwarded over HTTPS";
  EXPECT_EQ(metric(c1, unreachable) + metric(c2, unreachable), 0);
  // Without a client certificate the call is refused (mutual TLS), and the pod says so once.
  auto anonymous = client(pod1.port(), {pki().ca(), "", ""}).request("GET", "/healthz", "");
  EXPECT_EQ(anonymous.status, 0) << anonymous.body;
  EXPECT_TRUE(within([&] { return pod1.log().find("peer did not return a certificate") != std::string::npos; }, 2000))
      << pod1.log();

  // The member runtime over HTTPS with its client certificate.
  auto o = https_member(redis, "https://127.0.0.1:" + std::to_string(pod2.port()), "audit");
  std::atomic<int> processed{0};
  member::Runtime rt(o, [&](const member::Record&, int64_t) { ++processed; });
  rt.start();
  EXPECT_TRUE(within([&] { return rt.stats().owned.size() == 4; }, 8000)) << pod2.log();
  auto admin = redis.admin();
  ASSERT_TRUE(admin.command({"XADD", "orders:0", "*", "k", "v"}).ok());
  EXPECT_TRUE(within([&] { return processed.load() == 1; }, 5000));
  EXPECT_TRUE(rt.shutdown(5000));
}

// Issue 52: pods advertise a host name their certificate covers (here "localhost"); a member that
// knows one pod's address follows the Rsc-Group-Owner header straight to the owner over mutual
// TLS, verifying it by that name and presenting the same client certificate, and the pods forward
// nothing more once it does.
TEST(Https, AMemberGoesStraightToTheOwnerByItsAdvertisedNameOverMutualTls) {
  RedisServer redis;
  auto args = https_args(pki().serverCert(), pki().serverKey(), true);
  args.insert(args.end(), {"--advertise", "localhost:{port}"});
  Coordinator pod1(redis.port(), args);
  Coordinator pod2(redis.port(), args);
  auto c1 = client(pod1.port(), good_client());
  auto c2 = client(pod2.port(), good_client());
  ASSERT_EQ(c1.request("PUT", "/coord/v1/streams/orders", R"({"shardCount": 4})").status, 200);
  auto metric = metric_of;
  ASSERT_TRUE(within([&] { return metric(c1, "rsc_pods_live") == 2 && metric(c2, "rsc_pods_live") == 2; }, 10000));
  std::this_thread::sleep_for(std::chrono::milliseconds(1000));  // both established
  const auto owner = json::parse(c1.request("GET", "/coord/v1/streams/orders/groups/audit/owner", "").body);
  const std::string ownerUrl = owner.value("owner", "");
  ASSERT_TRUE(ownerUrl == "https://localhost:" + std::to_string(pod1.port()) ||
              ownerUrl == "https://localhost:" + std::to_string(pod2.port()))
      << owner.dump();
  // The member knows the pod that does not own the group.
  const int other = ownerUrl == "https://localhost:" + std::to_string(pod1.port()) ? pod2.port() : pod1.port();
  auto o = https_member(redis, "https://127.0.0.1:" + std::to_string(other), "audit");
  std::mutex mu;
  std::vector<std::pair<std::string, std::string>> beats;  // where, status
  o.onHeartbeat = [&](const member::HeartbeatEvent& e) {
    std::lock_guard<std::mutex> lock(mu);
    beats.emplace_back(e.coordinator, e.status);
  };
  member::Runtime rt(o, [](const member::Record&, int64_t) {});
  rt.start();
  EXPECT_TRUE(within([&] { return rt.stats().owned.size() == 4; }, 8000));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const std::string answered = R"(rsc_forwarded_calls_total{result="answered"})";
  auto fwd = [&] { return metric(c1, answered) + metric(c2, answered); };
  const double forwardedBefore = fwd();
  std::this_thread::sleep_for(std::chrono::milliseconds(800));  // about eight heartbeats
  EXPECT_EQ(fwd(), forwardedBefore) << "once the member follows the owner, no call is forwarded";
  EXPECT_TRUE(rt.shutdown(5000));
  std::lock_guard<std::mutex> lock(mu);
  int direct = 0, failed = 0;
  for (const auto& [where, status] : beats) {
    direct += where == ownerUrl && status == "OK";
    failed += status.empty();
  }
  ASSERT_FALSE(beats.empty());
  EXPECT_EQ(beats.front().first, o.coordinatorUrl) << "the first call goes to the configured pod";
  EXPECT_GE(direct, 5) << "then straight to the owner, verified by its name, with the client certificate";
  EXPECT_EQ(failed, 0);
  std::printf("mTLS: %d of %zu heartbeats straight to the owner %s\n", direct, beats.size(), ownerUrl.c_str());
}

TEST(Https, ReplacedCertificateFilesServeNewConnectionsAndOpenOnesKeepTheirs) {
  const std::string dir = pki().dir + "/rotation";
  std::filesystem::create_directories(dir);
  const std::string cert = dir + "/tls.crt", key = dir + "/tls.key";
  auto install = [&](const std::string& c, const std::string& k) {
    // As Kubernetes swaps a Secret's files: new files put in place by rename.
    std::filesystem::copy_file(c, cert + ".new", std::filesystem::copy_options::overwrite_existing);
    std::filesystem::copy_file(k, key + ".new", std::filesystem::copy_options::overwrite_existing);
    std::filesystem::rename(key + ".new", key);
    std::filesystem::rename(cert + ".new", cert);
  };
  install(pki().otherServerCert(), pki().otherServerKey());
  RedisServer redis;
  Coordinator pod(redis.port(), https_args(cert, key, false));
  auto before = client(pod.port(), {pki().otherCa(), "", ""});
  ASSERT_EQ(before.request("GET", "/healthz", "").status, 200) << "the first certificate, of the other CA";
  EXPECT_NE(client(pod.port(), {pki().ca(), "", ""}).request("GET", "/healthz", "").status, 200);

  install(pki().serverCert(), pki().serverKey());
  ASSERT_TRUE(within([&] { return pod.log().find("certificate files changed; new connections use them") != std::string::npos; },
                     4000))
      << pod.log();
  auto after = client(pod.port(), {pki().ca(), "", ""});
  EXPECT_EQ(after.request("GET", "/healthz", "").status, 200) << "a new connection gets the new certificate";
  const auto kept = before.request("GET", "/healthz", "");
  EXPECT_EQ(kept.status, 200) << "the connection opened before the rotation is still served: " << kept.error;

  // SIGHUP reads them again at once.
  install(pki().otherServerCert(), pki().otherServerKey());
  ::kill(pod.pid(), SIGHUP);
  ASSERT_TRUE(within([&] {
    return client(pod.port(), {pki().otherCa(), "", ""}).request("GET", "/healthz", "").status == 200;
  }, 3000)) << pod.log();
  // A broken replacement is refused, logged, and the files in use stay.
  std::ofstream(cert) << "not a certificate";
  ::kill(pod.pid(), SIGHUP);
  ASSERT_TRUE(within([&] { return pod.log().find("certificate files not used") != std::string::npos; }, 3000)) << pod.log();
  EXPECT_EQ(client(pod.port(), {pki().otherCa(), "", ""}).request("GET", "/healthz", "").status, 200);
}

TEST(Https, EachBadClientGetsOneClearLineAndNothingHangs) {
  RedisServer redis;
  Coordinator tlsPod(redis.port(), https_args(pki().serverCert(), pki().serverKey(), false));
  Coordinator plainPod(redis.port(), {"--http-header-timeout-ms", "300"});
  Coordinator expiredPod(redis.port(), https_args(pki().expiredCert(), pki().expiredKey(), false));
  Coordinator wrongNamePod(redis.port(), https_args(pki().wrongNameCert(), pki().wrongNameKey(), false));

  // A plain-HTTP client on the HTTPS port, twenty times: refused each time, logged once.
  for (int i = 0; i < 20; ++i) EXPECT_NE(http_call(tlsPod.port(), "GET", "/healthz", {}, {}, 1000).status, 200);
  EXPECT_TRUE(within([&] { return tlsPod.log().find("a plain-HTTP client on the HTTPS port?") != std::string::npos; }, 2000))
      << tlsPod.log();
  EXPECT_LE(count_of(tlsPod.log(), "plain-HTTP client"), 1) << "no log flood:\n" << tlsPod.log();

  struct Case {
    const char* what;
    int port;
    member::ClientTls tls;
    std::string says;
  };
  const std::vector<Case> cases{
      {"a TLS client on a plain port", plainPod.port(), {pki().ca(), "", ""}, "TLS handshake with 127.0.0.1"},
      {"a CA that did not sign the server", tlsPod.port(), {pki().otherCa(), "", ""}, "certificate verify failed"},
      {"an expired server certificate", expiredPod.port(), {pki().ca(), "", ""}, "certificate has expired"},
      {"a certificate for another name", wrongNamePod.port(), {pki().ca(), "", ""}, "mismatch"},
      {"a CA file that does not exist", tlsPod.port(), {"/nonexistent/ca.pem", "", ""}, "/nonexistent/ca.pem"},
  };
  for (const auto& c : cases) {
    const auto start = std::chrono::steady_clock::now();
    const auto r = client(c.port, c.tls).request("GET", "/healthz", "");
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start).count();
    std::cout << "  " << c.what << " (" << ms << " ms): " << r.error << "\n";
    EXPECT_EQ(r.status, 0) << c.what;
    EXPECT_NE(r.error.find(c.says), std::string::npos) << c.what << ": " << r.error;
    EXPECT_LT(ms, 2500) << c.what << ": bounded by the client's timeout";
  }

  // A client that connects and never starts its handshake is closed at the header timeout (300 ms).
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(static_cast<uint16_t>(tlsPod.port()));
  ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  timeval tv{3, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  const auto start = std::chrono::steady_clock::now();
  char b;
  const auto n = ::recv(fd, &b, 1, 0);
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start).count();
  ::close(fd);
  EXPECT_LE(n, 0);
  EXPECT_GE(ms, 250);
  EXPECT_LT(ms, 1500) << "closed at the header timeout";
  EXPECT_TRUE(within([&] { return tlsPod.log().find("no handshake within the header timeout") != std::string::npos; }, 2000))
      << tlsPod.log();

  // Bad files are refused at start, with the file named, and nothing is served.
  int rc = 0;
  FILE* p = popen((std::string(RSC_COORDINATOR_BIN) + " --check-config --tls-cert-file /nonexistent/tls.crt --tls-key-file " +
                   pki().serverKey() + " 2>&1")
                      .c_str(),
                  "r");
  std::string out;
  char buf[512];
  while (fgets(buf, sizeof buf, p)) out += buf;
  rc = WEXITSTATUS(pclose(p));
  EXPECT_EQ(rc, 2) << out;
  EXPECT_NE(out.find("https: certificate /nonexistent/tls.crt: No such file or directory"), std::string::npos) << out;
}
