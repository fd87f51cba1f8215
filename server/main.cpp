// rsc-coordinator: the heartbeat RPC and admin API of SPEC §5 over HTTP, backed by Redis.
#include <pthread.h>
#include <signal.h>

#include <cstdlib>
#include <iostream>

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
    std::cout << "rsc-coordinator " << RSC_VERSION << "\n";
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
  http::Server srv(httpOpts, [&service, auth = cfg.auth](http::HttpRequest req, http::Respond respond) {
    http::handle_request(req, *service, auth, std::move(respond));
  });
  try {
    srv.start();
  } catch (const std::exception& e) {
    log::error(std::string("rsc-coordinator: ") + e.what());
    return 1;
  }
  const std::string advertised = advertise(srv.port());
  service->set_address(advertised, cfg.http.tls.enabled());
  log::info(std::string("rsc-coordinator ready: serving ") + (cfg.http.tls.enabled() ? "https://" : "http://") + cfg.http.host + ":" + std::to_string(srv.port()) +
            " with redis " + cfg.redis.host + ":" + std::to_string(cfg.redis.port) + "; pod " + service->pod_id() +
            " takes forwarded calls at " + advertised +
            (cfg.advertise.empty() && wildcard ? " (set --advertise to this pod's IP when pods run on several hosts)" : ""));

  int sig = 0;
  for (;;) {
    sigwait(&signals, &sig);
    if (sig != SIGHUP) break;
    const auto e = srv.reload_tls();
    if (e.empty()) log::info("rsc-coordinator: SIGHUP, certificate files read again; new connections use them");
    else log::error("rsc-coordinator: SIGHUP, certificate files not used (" + e + "); the previous ones stay");
  }
  log::info(std::string("rsc-coordinator: ") + (sig == SIGTERM ? "SIGTERM" : "SIGINT") +
            ", no longer accepting; finishing requests in flight");
  srv.stop(cfg.shutdownGraceMs);
  service.reset();
  log::info("rsc-coordinator stopped");
  return 0;
}
