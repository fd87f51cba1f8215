// rsc-coordinator: the heartbeat RPC and admin API of SPEC §5 over HTTP, backed by Redis.
#include <pthread.h>
#include <signal.h>

#include <cstdlib>
#include <iostream>
#include <chrono>
#include <memory>
#include <mutex>

#include "log/log.hpp"
#include "actors/service.hpp"
#include "http/server.hpp"
#include "redis/redis_store.hpp"
#include "server/allocator.hpp"
#include "server/config.hpp"

using namespace rsc;

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  auto parsed = server::parse(args, [](const char* n) { return std::getenv(n); });
  if (parsed.help) {
    std::cout << server::usage();
    return 0;
  }
  if (parsed.version) {
    std::cout << "rsc-coordinator " << RSC_VERSION << " (commit " << RSC_COMMIT << ")\n";
    return 0;
  }
  if (!parsed.config) {
    std::cerr << "rsc-coordinator: " << parsed.error << "\n" << server::usage();
    return 2;
  }
  const auto cfg = *parsed.config;
  if (parsed.checkOnly) {
    std::cout << "rsc-coordinator: configuration valid: " << server::summary(cfg) << "\n";
    return 0;
  }

  // Signals are taken by this thread alone (sigwait below); every thread started later inherits
  // the mask.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGHUP);  // reload the HTTPS certificate files
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  signal(SIGPIPE, SIG_IGN);

  log::info("rsc-coordinator starting: " + server::summary(cfg) + " allocator=" + server::allocator_name());
  if (cfg.auth.open()) log::warn("auth: no tokens configured, the server runs OPEN (anyone may call any endpoint)");

  // Other pods forward the calls of the groups this pod serves to this address; known before the
  // first pod beat unless the port is chosen at bind time.
  const bool wildcard = cfg.http.host == "0.0.0.0" || cfg.http.host == "::";
  auto advertise = [&](uint16_t port) {
    return !cfg.advertise.empty() ? cfg.advertise : (wildcard ? "127.0.0.1" : cfg.http.host) + ":" + std::to_string(port);
  };
  auto serviceCfg = cfg.service;
  if (cfg.http.port != 0) serviceCfg.address = advertise(cfg.http.port);

  auto metrics = std::make_shared<actors::Metrics>();
  metrics->build_info(RSC_VERSION, RSC_COMMIT);
  auto redisOpts = cfg.redis;
  redisOpts.log = [](const std::string& m) { log::warn(m); };
  auto service = std::make_unique<actors::Service>(
      serviceCfg,
      [redisOpts](std::shared_ptr<store::CallObserver> observer, group::Millis commandTimeoutMs) {
        auto o = redisOpts;
        o.observer = std::move(observer);
        if (commandTimeoutMs > 0) {
          o.commandTimeoutMs = commandTimeoutMs;
          o.connectTimeoutMs = std::min(o.connectTimeoutMs, commandTimeoutMs);
        }
        return std::make_shared<store::RedisStore>(o);
      },
      metrics);
  if (!service->wait_for_store(3000))
    log::warn("store " + cfg.redis.host + ":" + std::to_string(cfg.redis.port) +
              " not reachable yet; serving, heartbeats get RETRY until it is");
  if (cfg.http.port != 0) service->set_address(serviceCfg.address, cfg.http.tls.enabled());
  auto httpOpts = cfg.http;
  httpOpts.podId = service->pod_id();
  // HTTPS: handshake failures counted by reason; the served certificate's expiry exported, and
  // said when it is near (at each load, then once a day while it stays near).
  struct Expiry {
    std::mutex mu;
    std::string file;
    int64_t notAfter = 0;
    int64_t toldAt = 0;  // Unix seconds of the last warning
  };
  auto expiry = std::make_shared<Expiry>();
  const int64_t warnDays = cfg.tlsExpiryWarningDays;
  auto unix_now = [] {
    return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
  };
  auto warn_expiry = [expiry, warnDays, unix_now](bool loaded) {
    std::lock_guard<std::mutex> lock(expiry->mu);
    const int64_t now = unix_now();
    if (!loaded && now - expiry->toldAt < 86400) return;
    const auto line = http::certificate_expiry_warning(expiry->file, expiry->notAfter, now, warnDays);
    if (line.empty()) return;
    log::warn("https: " + line);
    expiry->toldAt = now;
  };
  httpOpts.onHandshakeFailure = [metrics](const std::string& reason) { metrics->tls_handshake_failed(reason); };
  httpOpts.onCertificate = [metrics, expiry, warn_expiry](const std::string& file, int64_t notAfter) {
    metrics->tls_certificate(file, notAfter);
    {
      std::lock_guard<std::mutex> lock(expiry->mu);
      expiry->file = file;
      expiry->notAfter = notAfter;
    }
    warn_expiry(true);
  };
  // Tokens read from files are read again each second (and on SIGHUP); a request is authorized
  // with the list in force when it arrived. Without token files the list never changes.
  server::TokenFiles tokens(cfg.auth);
  const bool tokenFiles = tokens.watching();
  std::function<void(http::HttpRequest, http::Respond)> handler;
  if (tokenFiles)
    handler = [&service, &tokens](http::HttpRequest req, http::Respond respond) {
      const auto auth = tokens.current();
      http::handle_request(req, *service, *auth, std::move(respond));
    };
  else
    handler = [&service, auth = cfg.auth](http::HttpRequest req, http::Respond respond) {
      http::handle_request(req, *service, auth, std::move(respond));
    };
  http::Server srv(httpOpts, std::move(handler));
  // The probes over plain HTTP on a port of their own (--probe-listen), nothing else there.
  std::unique_ptr<http::Server> probes;
  if (cfg.probeListen) {
    http::ServerOptions po;
    po.host = cfg.probeListen->first;
    po.port = cfg.probeListen->second;
    po.threads = 1;
    po.headerTimeoutMs = cfg.http.headerTimeoutMs;
    po.idleTimeoutMs = cfg.http.idleTimeoutMs;
    po.maxConnections = 256;
    po.podId = service->pod_id();
    probes = std::make_unique<http::Server>(po, [&service](http::HttpRequest req, http::Respond respond) {
      http::handle_probe_request(req, *service, std::move(respond));
    });
  }
  try {
    srv.start();
    if (probes) probes->start();
  } catch (const std::exception& e) {
    log::error(std::string("rsc-coordinator: ") + e.what());
    return 1;
  }
  if (probes)
    log::info("rsc-coordinator: /healthz and /readyz also served on http://" + cfg.probeListen->first + ":" +
              std::to_string(probes->port()) + " (probes only)");
  const std::string advertised = advertise(srv.port());
  service->set_address(advertised, cfg.http.tls.enabled());
  log::info(std::string("rsc-coordinator ready: serving ") + (cfg.http.tls.enabled() ? "https://" : "http://") + cfg.http.host + ":" + std::to_string(srv.port()) +
            " with redis " + cfg.redis.host + ":" + std::to_string(cfg.redis.port) + "; pod " + service->pod_id() +
            " takes forwarded calls at " + advertised +
            (cfg.advertise.empty() && wildcard ? " (set --advertise to this pod's IP when pods run on several hosts)" : ""));

  auto check_tokens = [&] {
    for (const auto& line : tokens.check()) log::warn("auth: " + line);
  };
  int sig = 0;
  int64_t seconds = 0;
  for (;;) {
    // Each second without a signal (or EINTR): the token files; each hour: the certificate's expiry.
    const timespec second{1, 0};
    sig = sigtimedwait(&signals, nullptr, &second);
    if (sig < 0) {
      if (tokenFiles) check_tokens();
      if (cfg.http.tls.enabled() && ++seconds % 3600 == 0) warn_expiry(false);
      continue;
    }
    if (sig != SIGHUP) break;
    check_tokens();
    if (!cfg.http.tls.enabled()) {  // said all the same: whoever sent it (systemctl reload) sees it arrived
      log::info(std::string("rsc-coordinator: SIGHUP, ") +
                (tokenFiles ? "token files read again (no HTTPS certificate to read)" : "nothing to read again (no token file, no HTTPS)"));
      continue;
    }
    const auto e = srv.reload_tls();
    if (e.empty()) log::info("rsc-coordinator: SIGHUP, certificate files read again; new connections use them");
    else log::error("rsc-coordinator: SIGHUP, certificate files not used (" + e + "); the previous ones stay");
  }
  log::info(std::string("rsc-coordinator: ") + (sig == SIGTERM ? "SIGTERM" : "SIGINT") +
            ", no longer accepting; finishing requests in flight");
  srv.stop(cfg.shutdownGraceMs);
  if (probes) probes->stop(0);
  service.reset();
  log::info("rsc-coordinator stopped");
  return 0;
}
