// Redis over TLS: a real redis-server started TLS-only (plain port 0) with certificates
// made for the test by the `openssl` command; the client verifies the server (CA, name, dates),
// presents its own certificate (mutual TLS), and each bad setting fails once, fast, with one line
// naming the peer and the reason.
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <iostream>
#include <map>
#include <string>
#include <thread>

#include "redis/client.hpp"
#include "redis/connection.hpp"
#include "redis/options.hpp"
#include "redis/transport.hpp"
#include "redis_cluster.hpp"
#include "redis_server.hpp"
#include "tls_pki.hpp"

using namespace rsc;
using rsc::testing::LocalCluster;
using rsc::testing::RedisServer;
using rsc::testing::RedisServerOptions;
using rsc::testing::TestPki;

namespace {

RedisServerOptions tls_server(bool mutual = true, std::string cert = {}, std::string key = {}) {
  RedisServerOptions o;
  o.tls = true;
  o.tlsAuthClients = mutual;
  o.tlsCert = std::move(cert);
  o.tlsKey = std::move(key);
  return o;
}

// One command on a fresh connection: its error message ("" when it worked) and how long it took.
struct Attempt {
  std::string error;
  int64_t ms = 0;
};
Attempt attempt(const store::RedisOptions& o) {
  const auto start = std::chrono::steady_clock::now();
  store::RedisConnection c(o);
  auto r = c.command({"PING"});
  Attempt a;
  a.ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start).count();
  if (!r.ok()) a.error = r.error.message;
  else if (r.value->is_error()) a.error = r.value->str;
  return a;
}

bool has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

}  // namespace

TEST(RedisOverTls, CommandsPipelinesLargeRepliesAndPushesWorkOverMutualTls) {
  RedisServer redis(tls_server());
  store::RedisConnection c(redis.client_options());
  auto pong = c.command({"PING"});
  ASSERT_TRUE(pong.ok()) << pong.error.message;
  EXPECT_EQ(pong.value->str, "PONG");
  // A 3 MB value: many TLS records each way.
  const std::string big(3 << 20, 'x');
  ASSERT_TRUE(c.command({"SET", "big", big}).ok());
  auto got = c.command({"GET", "big"});
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got.value->str, big);
  std::vector<store::Command> many;
  for (int i = 0; i < 2000; ++i) many.push_back({"INCR", "n"});
  auto replies = c.pipeline(many);
  ASSERT_EQ(replies.size(), 2000u);
  EXPECT_EQ(replies.back().value->integer, 2000);
  // A subscriber reads what is pushed (decrypted bytes may wait inside the TLS session).
  store::RedisConnection sub(redis.client_options());
  ASSERT_TRUE(sub.command({"SUBSCRIBE", "ch"}).ok());
  for (int i = 0; i < 50; ++i) ASSERT_TRUE(c.command({"PUBLISH", "ch", "m" + std::to_string(i)}).ok());
  int seen = 0;
  for (int i = 0; i < 200 && seen < 50; ++i) {
    auto p = sub.next_push(200);
    ASSERT_TRUE(p.ok()) << p.error.message;
    if (*p.value) {
      EXPECT_EQ((**p.value).elements.at(2).str, "m" + std::to_string(seen));
      ++seen;
    }
  }
  EXPECT_EQ(seen, 50) << "every message, in order";
}

TEST(RedisOverTls, TheServerNameCanBeGivenWhenItIsNotTheHostConnectedTo) {
  const auto& pki = TestPki::get();
  RedisServer redis(tls_server(true, pki.wrongNameCert(), pki.wrongNameKey()));
  auto o = redis.client_options();
  const auto refused = attempt(o);
  EXPECT_TRUE(has(refused.error, "certificate verify failed")) << refused.error;
  EXPECT_TRUE(has(refused.error, "mismatch")) << refused.error;
  o.tls.serverName = "elsewhere.example";  // the name the certificate has (SNI and verification)
  EXPECT_EQ(attempt(o).error, "");
}

TEST(RedisOverTls, EachBadSettingFailsOnceFastWithOneLineNamingThePeerAndTheReason) {
  const auto& pki = TestPki::get();
  RedisServer good(tls_server());
  RedisServer expired(tls_server(true, pki.expiredCert(), pki.expiredKey()));
  RedisServer otherCa(tls_server(true, pki.otherServerCert(), pki.otherServerKey()));
  RedisServer plain;
  const std::string peer = "127.0.0.1:" + std::to_string(good.port());

  struct Case {
    const char* what;
    store::RedisOptions o;
    std::vector<std::string> says;
  };
  auto wrongCa = good.client_options();
  wrongCa.tls.caFile = pki.otherCa();
  auto noClientCert = good.client_options();
  noClientCert.tls.certFile.clear();
  noClientCert.tls.keyFile.clear();
  auto plainOnTls = good.client_options();
  plainOnTls.tls = {};
  auto tlsOnPlain = plain.client_options();
  tlsOnPlain.tls = good.client_options().tls;
  auto missingCa = good.client_options();
  missingCa.tls.caFile = "/nonexistent/ca.crt";
  auto keyMismatch = good.client_options();
  keyMismatch.tls.keyFile = pki.serverKey();
  const std::vector<Case> cases{
      {"a CA that did not sign the server", wrongCa, {peer, "TLS handshake failed", "certificate verify failed"}},
      {"a server certificate of another CA", otherCa.client_options(), {"certificate verify failed"}},
      {"an expired server certificate", expired.client_options(), {"certificate verify failed", "expired"}},
      {"no client certificate where one is required", noClientCert, {peer, "certificate required"}},
      {"a plain-text client on a TLS port", plainOnTls, {peer, "require TLS"}},
      {"a TLS client on a plain port", tlsOnPlain, {"TLS handshake failed", "does not speak TLS"}},
      {"a CA file that does not exist", missingCa, {"/nonexistent/ca.crt", "No such file"}},
      {"a key that is not the certificate's", keyMismatch, {"does not match"}},
  };
  for (const auto& c : cases) {
    const auto a = attempt(c.o);
    std::cout << "  " << c.what << " (" << a.ms << " ms): " << a.error << "\n";
    EXPECT_FALSE(a.error.empty()) << c.what;
    for (const auto& part : c.says) EXPECT_TRUE(has(a.error, part)) << c.what << ": " << a.error;
    EXPECT_EQ(a.error.find('\n'), std::string::npos) << c.what << ": one line";
    EXPECT_LT(a.ms, 3000) << c.what << ": bounded by the connect and command timeouts";
  }
  EXPECT_EQ(attempt(good.client_options()).error, "") << "the good settings work";
  EXPECT_TRUE(has(store::check_tls_files(missingCa.tls), "/nonexistent/ca.crt")) << "checked before any connection";
}

TEST(RedisOverTls, AHandshakeThatNeverCompletesIsBoundedByTheConnectTimeout) {
  // A listener that accepts and never answers: the ClientHello goes unanswered.
  const int port = rsc::testing::free_loopback_port();
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(static_cast<uint16_t>(port));
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  ASSERT_EQ(::listen(fd, 4), 0);
  store::RedisOptions o;
  o.port = port;
  o.connectTimeoutMs = 400;
  o.tls.enabled = true;
  o.tls.caFile = TestPki::get().ca();
  const auto r = attempt(o);
  ::close(fd);
  EXPECT_TRUE(has(r.error, "TLS handshake failed")) << r.error;
  EXPECT_GE(r.ms, 350);
  EXPECT_LT(r.ms, 1500) << "the connect timeout bounds the handshake";
}

TEST(RedisOverTls, AClientCertificateReplacedOnDiskIsPresentedByTheNextConnection) {
  const auto& pki = TestPki::get();
  RedisServer redis(tls_server());
  auto o = redis.client_options();
  const std::string dir = pki.dir + "/rotating";
  std::filesystem::create_directories(dir);
  o.tls.certFile = dir + "/tls.crt";
  o.tls.keyFile = dir + "/tls.key";
  // First a certificate of another CA (refused by the server), then a good one in its place.
  std::filesystem::copy_file(pki.otherServerCert(), o.tls.certFile, std::filesystem::copy_options::overwrite_existing);
  std::filesystem::copy_file(pki.otherServerKey(), o.tls.keyFile, std::filesystem::copy_options::overwrite_existing);
  EXPECT_FALSE(attempt(o).error.empty()) << "a client certificate the server does not trust";
  std::this_thread::sleep_for(std::chrono::milliseconds(20));  // a new modification time
  std::filesystem::copy_file(pki.clientCert(), o.tls.certFile, std::filesystem::copy_options::overwrite_existing);
  std::filesystem::copy_file(pki.clientKey(), o.tls.keyFile, std::filesystem::copy_options::overwrite_existing);
  EXPECT_EQ(attempt(o).error, "") << "read again once replaced";
}

TEST(RedisOverTls, PasswordsAndTlsSettingsComeFromFilesFlagsAndTheEnvironment) {
  const auto& pki = TestPki::get();
  const std::string file = pki.dir + "/redis-password";
  std::ofstream(file) << "s3cret-value\n";
  store::RedisOptions o;
  std::string error;
  const std::vector<std::pair<std::string, std::string>> flags{{"--redis-password-file", file},
                                                               {"--redis-tls-ca-file", pki.ca()},
                                                               {"--redis-tls-server-name", "localhost"}};
  for (const auto& [flag, v] : flags) {
    ASSERT_TRUE(store::apply_redis_flag(o, flag, [&] { return v; }, error)) << flag;
    EXPECT_EQ(error, "") << flag;
  }
  EXPECT_EQ(o.password, "s3cret-value") << "one trailing newline dropped";
  EXPECT_TRUE(o.tls.enabled);
  EXPECT_EQ(o.tls.serverName, "localhost");
  EXPECT_FALSE(store::apply_redis_flag(o, "--redis-nope", [] { return std::string(); }, error));
  store::apply_redis_flag(o, "--redis-password-file", [] { return std::string("/nonexistent/pw"); }, error);
  EXPECT_TRUE(has(error, "/nonexistent/pw")) << error;
  // Environment.
  store::RedisOptions e;
  const std::map<std::string, std::string> vars{{"RSC_REDIS_PASSWORD_FILE", file}, {"RSC_REDIS_TLS", "true"},
                                                {"RSC_REDIS_TLS_CERT_FILE", pki.clientCert()}};
  auto env = [&](const char* n) -> const char* {
    auto it = vars.find(n);
    return it == vars.end() ? nullptr : it->second.c_str();
  };
  EXPECT_EQ(store::apply_redis_env(e, env), "");
  EXPECT_EQ(e.password, "s3cret-value");
  EXPECT_TRUE(e.tls.enabled);
  EXPECT_EQ(e.tls.certFile, pki.clientCert());
  const auto shown = store::describe_tls(o.tls);
  EXPECT_TRUE(has(shown, pki.ca())) << shown;
  EXPECT_FALSE(has(shown, "s3cret")) << shown;
}

// A TLS-only cluster (clients and the cluster bus): the routing client meets every master through
// the slot map and through MOVED, each over TLS with the client certificate.
TEST(RedisOverTlsOnCluster, EveryMasterIsReachedOverTlsIncludingThroughMoved) {
  LocalCluster cl(3, 0, "", true);
  store::RedisClient client(cl.client_options());
  for (int i = 0; i < 200; ++i)
    ASSERT_TRUE(client.command({"SET", "k" + std::to_string(i), "v"}).ok()) << i;
  // Move one slot's key to another master: the client's next command is redirected there.
  const std::string key = "k7";
  const int slot = store::key_slot(key);
  const auto from = cl.master_of(key);
  const auto to = (from + 1) % cl.size();
  auto src = cl.node(from), dst = cl.node(to);
  auto id = [](store::RedisConnection& c) { return c.command({"CLUSTER", "MYID"}).value->str; };
  const auto srcId = id(src), dstId = id(dst);
  ASSERT_TRUE(dst.command({"CLUSTER", "SETSLOT", std::to_string(slot), "IMPORTING", srcId}).ok());
  ASSERT_TRUE(src.command({"CLUSTER", "SETSLOT", std::to_string(slot), "MIGRATING", dstId}).ok());
  auto keys = src.command({"CLUSTER", "GETKEYSINSLOT", std::to_string(slot), "100"});
  for (const auto& k : keys.value->elements) {
    auto m = src.command({"MIGRATE", "127.0.0.1", std::to_string(cl.server(to).port()), "", "0", "5000", "KEYS", k.str});
    ASSERT_TRUE(m.ok() && !m.value->is_error()) << (m.ok() ? m.value->str : m.error.message);
  }
  for (std::size_t i = 0; i < cl.size(); ++i) {
    auto n = cl.node(i);
    ASSERT_TRUE(n.command({"CLUSTER", "SETSLOT", std::to_string(slot), "NODE", dstId}).ok());
  }
  const auto redirectsBefore = client.redirects();
  auto r = client.command({"GET", key});
  ASSERT_TRUE(r.ok()) << r.error.message;
  EXPECT_EQ(r.value->str, "v");
  EXPECT_GT(client.redirects(), redirectsBefore) << "reached through MOVED, over TLS";
}
