// The coordinator over HTTPS: real rsc-coordinator processes started with the test
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

// Pods advertise a host name their certificate covers (here "localhost"); a member that
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

namespace {
// What `openssl s_client` agrees with the pod on ("TLSv1.2 ECDHE-RSA-AES128-GCM-SHA256"), or ""
// when the handshake fails.
std::string agreed(int port, const std::string& clientArgs) {
  const std::string cmd = "timeout 10 openssl s_client -brief -connect 127.0.0.1:" + std::to_string(port) + " -CAfile " +
                          pki().ca() + " " + clientArgs + " </dev/null 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  std::string out;
  char buf[512];
  while (fgets(buf, sizeof buf, p)) out += buf;
  pclose(p);
  auto field = [&](const std::string& name) {
    const auto at = out.find(name);
    if (at == std::string::npos) return std::string();
    const auto end = out.find('\n', at);
    return out.substr(at + name.size(), end - at - name.size());
  };
  const auto version = field("Protocol version: "), suite = field("Ciphersuite: ");
  return version.empty() || suite.empty() ? "" : version + " " + suite;
}
}  // namespace

// TLS policy: TLS 1.2 is served with forward-secret AEAD suites only (no static
// RSA key exchange, no CBC), TLS 1.3 as OpenSSL offers it; --tls-min-version 1.3 refuses 1.2, and
// --tls-ciphers replaces the 1.2 list. A setting OpenSSL cannot use is refused at start.
TEST(Https, OnlyForwardSecretAeadSuitesAndTheMinimumVersionAreServed) {
  RedisServer redis;
  Coordinator pod(redis.port(), https_args(pki().serverCert(), pki().serverKey(), false));
  auto args13 = https_args(pki().serverCert(), pki().serverKey(), false);
  args13.insert(args13.end(), {"--tls-min-version", "1.3"});
  Coordinator only13(redis.port(), args13);
  auto argsOne = https_args(pki().serverCert(), pki().serverKey(), false);
  argsOne.insert(argsOne.end(), {"--tls-ciphers", "ECDHE-RSA-AES256-GCM-SHA384"});
  Coordinator oneSuite(redis.port(), argsOne);

  EXPECT_EQ(agreed(pod.port(), "-tls1_2 -cipher ECDHE-RSA-AES128-GCM-SHA256"), "TLSv1.2 ECDHE-RSA-AES128-GCM-SHA256");
  EXPECT_EQ(agreed(pod.port(), "-tls1_2 -cipher ECDHE-RSA-CHACHA20-POLY1305"), "TLSv1.2 ECDHE-RSA-CHACHA20-POLY1305");
  for (const char* weak : {"AES128-SHA", "AES256-GCM-SHA384", "AES128-SHA256", "ECDHE-RSA-AES128-SHA", "ECDHE-RSA-AES256-SHA384",
                           "DHE-RSA-AES128-SHA"})
    EXPECT_EQ(agreed(pod.port(), std::string("-tls1_2 -cipher ") + weak), "") << weak << " must not be agreed";
  EXPECT_EQ(agreed(pod.port(), "-tls1_3").rfind("TLSv1.3 ", 0), 0u);
  const auto any12 = agreed(pod.port(), "-tls1_2");
  EXPECT_EQ(any12.rfind("TLSv1.2 ECDHE-", 0), 0u) << any12;
  std::cout << "[ figures ] a TLS 1.2 client offering everything gets " << any12 << "\n";

  EXPECT_EQ(agreed(only13.port(), "-tls1_2"), "") << "1.3 only";
  EXPECT_EQ(agreed(only13.port(), "-tls1_3").rfind("TLSv1.3 ", 0), 0u);
  EXPECT_EQ(agreed(oneSuite.port(), "-tls1_2 -cipher ECDHE-RSA-AES128-GCM-SHA256"), "");
  EXPECT_EQ(agreed(oneSuite.port(), "-tls1_2"), "TLSv1.2 ECDHE-RSA-AES256-GCM-SHA384");
  // The API works with the member library's client as before.
  EXPECT_EQ(client(pod.port(), {pki().ca(), "", ""}).request("GET", "/healthz", "").status, 200);
  EXPECT_EQ(client(only13.port(), {pki().ca(), "", ""}).request("GET", "/healthz", "").status, 200);

  for (const auto& [flags, says] : std::vector<std::pair<std::string, std::string>>{
           {"--tls-min-version 1.1", "minimum TLS version '1.1': 1.2 or 1.3"},
           {"--tls-ciphers NOPE-NOTHING", "TLS 1.2 ciphers 'NOPE-NOTHING': none of them is known"}}) {
    FILE* p = popen((std::string(RSC_COORDINATOR_BIN) + " --check-config --tls-cert-file " + pki().serverCert() +
                     " --tls-key-file " + pki().serverKey() + " " + flags + " 2>&1")
                        .c_str(),
                    "r");
    std::string out;
    char buf[512];
    while (fgets(buf, sizeof buf, p)) out += buf;
    EXPECT_EQ(WEXITSTATUS(pclose(p)), 2) << flags << ": " << out;
    EXPECT_NE(out.find(says), std::string::npos) << flags << ": " << out;
  }
}

// Probes under mutual TLS: the kubelet presents no client certificate, so
// --probe-listen serves /healthz and /readyz over plain HTTP on a port of their own, and nothing
// else there; the API port still refuses a client without a certificate.
TEST(Https, UnderMutualTlsTheProbesAnswerOnAPlainPortOfTheirOwnAndNothingElseDoes) {
  RedisServer redis;
  const int probePort = free_loopback_port();
  auto args = https_args(pki().serverCert(), pki().serverKey(), true);
  args.insert(args.end(), {"--probe-listen", "127.0.0.1:" + std::to_string(probePort)});
  Coordinator pod(redis.port(), args);
  EXPECT_TRUE(within([&] { return http_call(probePort, "GET", "/readyz").status == 200; }, 5000)) << pod.log();
  EXPECT_EQ(http_call(probePort, "GET", "/healthz").status, 200);
  EXPECT_EQ(http_call(probePort, "HEAD", "/readyz").status, 200);
  for (const auto& [method, path] : std::vector<std::pair<std::string, std::string>>{
           {"GET", "/metrics"}, {"GET", "/"}, {"GET", "/coord/v1/streams"}, {"PUT", "/coord/v1/streams/orders"},
           {"POST", "/coord/v1/streams/orders/groups/g/members/m1/heartbeat"}}) {
    const auto r = http_call(probePort, method, path, method == "GET" ? "" : "{}", {{"Content-Type", "application/json"}});
    EXPECT_EQ(r.status, 404) << method << " " << path << " on the probe port: " << r.body;
  }
  EXPECT_EQ(client(pod.port(), {pki().ca(), "", ""}).request("GET", "/healthz", "").status, 0)
      << "the API port still wants a client certificate";
  EXPECT_EQ(client(pod.port(), good_client()).request("GET", "/healthz", "").status, 200);
  EXPECT_NE(pod.log().find("/healthz and /readyz also served on http://127.0.0.1:" + std::to_string(probePort)),
            std::string::npos)
      << pod.log();
  // The probe port may not be the API's.
  FILE* p = popen((std::string(RSC_COORDINATOR_BIN) + " --check-config --listen 127.0.0.1:18080 --probe-listen 127.0.0.1:18080 2>&1").c_str(), "r");
  std::string out;
  char buf[512];
  while (fgets(buf, sizeof buf, p)) out += buf;
  EXPECT_EQ(WEXITSTATUS(pclose(p)), 2) << out;
  EXPECT_NE(out.find("probe-listen: port 18080 is the API's"), std::string::npos) << out;
}

// Visibility: the served certificate's seconds left are exported
// (rsc_tls_certificate_expiry_seconds) and said in the log when fewer than
// --tls-expiry-warning-days (default 14) remain or it has expired; failed handshakes are counted
// by reason (rsc_tls_handshake_failures_total).
TEST(Https, TheCertificatesExpiryIsExportedAndSaidWhenNearAndFailedHandshakesAreCountedByReason) {
  RedisServer redis;
  pki().issue("soon", "ca", "IP:127.0.0.1,DNS:localhost", "", 5);
  const std::string soonCert = pki().dir + "/soon.crt", soonKey = pki().dir + "/soon.key";
  Coordinator soon(redis.port(), https_args(soonCert, soonKey, true));
  Coordinator good(redis.port(), https_args(pki().serverCert(), pki().serverKey(), true));
  Coordinator expired(redis.port(), https_args(pki().expiredCert(), pki().expiredKey(), false));
  auto soonClient = client(soon.port(), good_client());
  auto goodClient = client(good.port(), good_client());
  const auto left = metric_of(soonClient, "rsc_tls_certificate_expiry_seconds{file=\"" + soonCert + "\"}");
  EXPECT_GT(left, 4 * 86400.0);
  EXPECT_LE(left, 5 * 86400.0);
  EXPECT_GT(metric_of(goodClient, "rsc_tls_certificate_expiry_seconds{file=\"" + pki().serverCert() + "\"}"), 3000 * 86400.0);
  // The expired pod's /metrics, read without verifying it (every verifying client refuses it).
  FILE* p = popen(("curl -sk https://127.0.0.1:" + std::to_string(expired.port()) + "/metrics").c_str(), "r");
  std::string body;
  char buf[4096];
  while (fgets(buf, sizeof buf, p)) body += buf;
  pclose(p);
  const std::string name = "rsc_tls_certificate_expiry_seconds{file=\"" + pki().expiredCert() + "\"} ";
  const auto at = body.find(name);
  ASSERT_NE(at, std::string::npos) << body.substr(0, 2000);
  EXPECT_LT(std::stod(body.substr(at + name.size())), -86400.0) << "expired: negative";
  EXPECT_EQ(count_of(soon.log(), "the certificate " + soonCert + " expires in "), 1) << soon.log();
  EXPECT_EQ(count_of(good.log(), "expires in"), 0) << good.log();
  EXPECT_EQ(count_of(expired.log(), "has EXPIRED"), 1) << expired.log();

  // Failed handshakes at the mutual-TLS pod, one of each kind.
  EXPECT_NE(http_call(soon.port(), "GET", "/healthz", {}, {}, 1000).status, 200);               // plain HTTP
  EXPECT_EQ(client(soon.port(), {pki().ca(), "", ""}).request("GET", "/healthz", "").status, 0);  // no certificate
  EXPECT_EQ(client(soon.port(), {pki().otherCa(), "", ""}).request("GET", "/healthz", "").status, 0);  // refuses ours
  EXPECT_EQ(agreed(soon.port(), "-tls1_2 -cipher AES128-SHA"), "");                             // no suite in common
  auto failures = [&](const std::string& reason) {
    return metric_of(soonClient, "rsc_tls_handshake_failures_total{reason=\"" + reason + "\"}");
  };
  EXPECT_TRUE(within([&] { return failures("plain_http") >= 1; }, 2000));
  EXPECT_GE(failures("no_client_certificate"), 1);
  EXPECT_GE(failures("server_certificate_rejected"), 1);
  EXPECT_GE(failures("no_shared_cipher"), 1);
  const auto text = soonClient.request("GET", "/metrics", "").body;
  std::cout << "[ figures ] handshake failures by reason:\n";
  for (auto at2 = text.find("\nrsc_tls_handshake_failures_total{"); at2 != std::string::npos;
       at2 = text.find("\nrsc_tls_handshake_failures_total{", at2 + 1))
    std::cout << "  " << text.substr(at2 + 1, text.find('\n', at2 + 1) - at2 - 1) << "\n";
}

// A client CA taken out of the client CA file: at the rotation that removes it,
// the open connections whose client certificate it signed are closed (a kept-alive connection would
// otherwise go on being served for as long as the client keeps it), and those of a CA still in the
// file stay open.
TEST(Https, ConnectionsOfAClientCaThatWasRemovedAreClosedAtTheRotation) {
  const std::string dir = pki().dir + "/client-ca-rotation";
  std::filesystem::create_directories(dir);
  const std::string cas = dir + "/client-ca.pem";
  auto install = [&](const std::vector<std::string>& files) {
    {
      std::ofstream out(cas + ".new");
      for (const auto& f : files) out << std::ifstream(f).rdbuf();
    }
    std::filesystem::rename(cas + ".new", cas);
  };
  install({pki().ca(), pki().otherCa()});
  RedisServer redis;
  auto args = https_args(pki().serverCert(), pki().serverKey(), false);
  args.insert(args.end(), {"--tls-client-ca-file", cas});
  Coordinator pod(redis.port(), args);
  auto ofCa = client(pod.port(), good_client());                                                   // signed by ca
  auto ofOther = client(pod.port(), {pki().ca(), pki().otherServerCert(), pki().otherServerKey()});  // by other-ca
  ASSERT_EQ(ofCa.request("GET", "/healthz", "").status, 200);
  ASSERT_EQ(ofOther.request("GET", "/healthz", "").status, 200);

  install({pki().otherCa()});  // ca is no longer trusted for clients
  ASSERT_TRUE(within([&] { return count_of(pod.log(), "certificate files changed; new connections use them") == 1; }, 4000))
      << pod.log();
  EXPECT_TRUE(within([&] { return count_of(pod.log(), "closed 1 open connection(s) whose client certificate") == 1; }, 2000))
      << pod.log();
  const auto refused = ofCa.request("GET", "/healthz", "");
  EXPECT_NE(refused.status, 200) << "the connection of the removed CA's client was closed, and a new one is refused";
  EXPECT_EQ(ofOther.request("GET", "/healthz", "").status, 200) << "the other CA's client goes on";
  EXPECT_EQ(client(pod.port(), good_client()).request("GET", "/healthz", "").status, 0);
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
