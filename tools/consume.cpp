// rsc-consume: consumes a sharded stream through the coordinator with the member runtime.
//   rsc-consume --coordinator URL --redis HOST:PORT[,HOST:PORT...] [--redis-cluster] --stream PREFIX[,PREFIX...]
//               --group G[,G...] [--member-id ID]
// Several streams (co-partitioned groups): one runtime per stream, all joining as one member id;
// --group names one group for all or one per stream.
//               [--concurrency N] [--process-ms MS | --process-us US] [--log FILE] [--token T]
//               [--max-deliveries N] [--retry-backoff-ms MS] [--retry-backoff-max-ms MS] [--fail-key KEY]
//               [--fail-every N] [--exec CMD | --exec-lines CMD]
// A record whose handler fails is tried again after a backoff (doubling, capped) until Redis has
// delivered it --max-deliveries times (default 5), then written to the group's dead-letter stream
// and acked. --fail-key KEY makes the handler fail on every record whose "key" field is KEY, and
// --fail-every N on every record whose "seq" field is a multiple of N (to try the dead-letter path).
// --exec CMD runs `sh -c CMD` for each record, the record as one JSON object on its stdin: exit 0
// done, exit 75 retry later, anything else a failed attempt. --exec-lines CMD keeps one CMD per
// worker running, one JSON record per line in, one answer line per record out ("ok", "retry
// [why]", "dead [why]"); see tools/exec_handler.hpp.
// With --log, one JSON line per processed record:
//   {"shard":..,"id":..,"key":..,"seq":..,"member":..,"startNs":..,"endNs":..,"wallMs":..,"stream":..}
// (startNs/endNs: CLOCK_MONOTONIC, so logs of processes on one machine can be merged; wallMs: the
// wall clock at the end, to compare with the entry id's milliseconds for latency) and one line per answered
// heartbeat: {"event":"heartbeat","member":..,"sentNs":..,"status":..,"epoch":..,"leaseMs":..}, and
// one line per read that came back after its shard stopped being this member's (a paused process):
// {"event":"left-pending","member":..,"shard":..,"ids":[..],"atNs":..}.
// SIGTERM or SIGINT: leave the group gracefully (epoch -1), drain, exit 0.
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <algorithm>
#include <memory>
#include <thread>
#include <vector>

#include "log/log.hpp"
#include "member/bearer_token.hpp"
#include "member/runtime.hpp"
#include "protocol/codec.hpp"
#include "redis/client.hpp"
#include "redis/options.hpp"
#include "redis/transport.hpp"
#include "tools/exec_handler.hpp"

using namespace rsc;

namespace {
// `why` empty: the help asked for (stdout, exit 0); else a usage error (stderr, exit 2).
[[noreturn]] void usage(const std::string& why) {
  std::ostream& os = why.empty() ? std::cout : std::cerr;
  if (!why.empty()) os << "rsc-consume: " << why << "\n";
  os << "usage: rsc-consume --coordinator URL --redis HOST:PORT[,HOST:PORT...] [--redis-cluster]\n"
               "                   --stream PREFIX[,PREFIX...] --group G[,G...] [--member-id ID] [--instance-id ID] [--rack R] [--concurrency N] [--process-ms MS | --process-us US] [--log FILE] [--token T]\n"
               "                   [--max-deliveries N] [--retry-backoff-ms MS] [--retry-backoff-max-ms MS] [--fail-key KEY]\n"
               "                   [--dead-letter-max-len N] [--fail-every N] [--exec CMD | --exec-lines CMD] [--token-file F]\n"
               "                   [--no-follow-owner]\n"
               "                   " << member::kClientTlsFlagsUsage << "\n"
            << "                   " << store::kRedisFlagsUsage << "\n"
            << "--instance-id (or RSC_INSTANCE_ID, e.g. a StatefulSet pod's name): a static member, whose shards wait for\n"
               "it across a restart (SIGTERM leaves with -2) within the coordinator's static session timeout. Its member id\n"
               "is one per process (--member-id, if given, is its first part); while another live process holds the instance,\n"
               "joins are refused (UNRELEASED_INSTANCE_ID), and after a lease of refusals this one exits 3.\n"
               "--rack R (or RSC_RACK): the rack or zone this process runs in, sent when it joins; a group with the\n"
               "rack-aware assignor gives it the shards of its rack where it can (PUT .../groups/{group} {\"assignor\"}).\n"
               "--dead-letter-max-len N: the group's dead-letter stream is trimmed near N entries, the oldest first\n"
               "(default 100000; 0: never).\n"
               "Heartbeats go straight to the coordinator pod that owns the group (each answer names it); --no-follow-owner\n"
               "keeps every call on --coordinator (when only that address is reachable; the pods forward then).\n"
               "--token-file F (or RSC_TOKEN_FILE): the token from a file, kept out of the command line; read again when\n"
               "the coordinator refuses it, so a token rotated in the file and at the coordinator needs no restart.\n"
               "Environment: RSC_TOKEN, RSC_TOKEN_FILE, RSC_INSTANCE_ID, RSC_RACK, RSC_REDIS_USER, RSC_REDIS_PASSWORD, RSC_REDIS_PASSWORD_FILE, RSC_REDIS_TLS,\n"
               "RSC_REDIS_TLS_CA_FILE, RSC_REDIS_TLS_CA_DIR, RSC_REDIS_TLS_CERT_FILE, RSC_REDIS_TLS_KEY_FILE,\n"
               "RSC_REDIS_TLS_SERVER_NAME; flags override them.\n";
  std::exit(why.empty() ? 0 : 2);
}
}  // namespace

// "a,b" -> {"a", "b"} (empty parts dropped).
static std::vector<std::string> split_list(const std::string& s) {
  std::vector<std::string> out;
  std::size_t from = 0;
  while (from <= s.size()) {
    auto comma = s.find(',', from);
    if (comma == std::string::npos) comma = s.size();
    if (comma > from) out.push_back(s.substr(from, comma - from));
    from = comma + 1;
  }
  return out;
}

int main(int argc, char** argv) {
  member::RuntimeOptions o;
  if (auto e = store::apply_redis_env(o.redis, [](const char* n) { return std::getenv(n); }); !e.empty()) usage(e);
  member::TokenSource token;
  if (auto e = member::apply_token_env(token, [](const char* n) { return std::getenv(n); }); !e.empty()) usage(e);
  if (const char* i = std::getenv("RSC_INSTANCE_ID")) o.instanceId = i;
  if (const char* r = std::getenv("RSC_RACK")) o.rackId = r;
  std::string redis, logPath;
  long processMs = 0, processUs = 0;
  std::string failKey;
  long failEvery = 0;
  std::string execCmd, execLines;
  bool redisCluster = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto val = [&]() -> std::string {
      if (i + 1 >= argc) usage(a + " needs a value");
      return argv[++i];
    };
    if (a == "--coordinator") o.coordinatorUrl = val();
    else if (a == "--redis") redis = val();
    else if (a == "--redis-cluster") redisCluster = true;
    else if (a == "--no-follow-owner") o.followOwner = false;
    else if (a == "--stream") o.streamPrefix = val();
    else if (a == "--group") o.group = val();
    else if (a == "--member-id") o.memberId = val();
    else if (a == "--instance-id") o.instanceId = val();
    else if (a == "--rack") o.rackId = val();
    else if (a == "--concurrency") o.concurrency = std::max(1, std::atoi(val().c_str()));
    else if (a == "--process-ms") processMs = std::atol(val().c_str());
    else if (a == "--process-us") processUs = std::atol(val().c_str());
    else if (a == "--log") logPath = val();
    else if (std::string tokenError; member::apply_token_flag(token, a, val, tokenError)) {
      if (!tokenError.empty()) usage(tokenError);
    }
    else if (member::apply_client_tls_flag(o.coordinatorTls, a, val)) {}
    else if (a == "--max-deliveries") o.retry.maxDeliveries = std::max(1L, std::atol(val().c_str()));
    else if (a == "--retry-backoff-ms") o.retry.backoffMs = std::max(1L, std::atol(val().c_str()));
    else if (a == "--retry-backoff-max-ms") o.retry.backoffMaxMs = std::max(1L, std::atol(val().c_str()));
    else if (a == "--dead-letter-max-len") o.retry.deadLetterMaxLen = std::max(0L, std::atol(val().c_str()));
    else if (a == "--fail-key") failKey = val();
    else if (a == "--fail-every") failEvery = std::max(0L, std::atol(val().c_str()));
    else if (a == "--exec") execCmd = val();
    else if (a == "--exec-lines") execLines = val();
    else if (a == "--help" || a == "-h") usage("");
    else if (a == "--version") {
      std::cout << "rsc-consume " << RSC_VERSION << " (commit " << RSC_COMMIT << ")\n";
      return 0;
    }
    else if (std::string error; store::apply_redis_flag(o.redis, a, val, error)) {
      if (!error.empty()) usage(error);
    } else usage("unknown argument " + a);
  }
  if (redis.empty() || o.streamPrefix.empty() || o.group.empty()) usage("--redis, --stream and --group are required");
  o.token = token.token;
  o.tokenFile = token.file;
  if (!o.instanceId.empty() && !protocol::valid_name(o.instanceId))
    usage("--instance-id: '" + o.instanceId + "' must be 1 to 128 of A-Z a-z 0-9 . _ : -");
  if (!o.rackId.empty() && !protocol::valid_name(o.rackId))
    usage("--rack: '" + o.rackId + "' must be 1 to 128 of A-Z a-z 0-9 . _ : -");
  if (auto e = store::set_redis_nodes(o.redis, redis); !e.empty()) usage("--redis: " + e);
  if (redisCluster) o.redis.cluster = true;
  if (!execCmd.empty() && !execLines.empty()) usage("--exec and --exec-lines: one or the other");
  // A file that cannot be read fails here, naming it, not at every connection (which would join,
  // be given shards and never read them).
  if (auto e = store::check_tls_files(o.redis.tls); !e.empty()) usage(e);
  if (auto e = member::check_client_tls_files(o.coordinatorTls); !e.empty()) usage(e);
  ::signal(SIGPIPE, SIG_IGN);  // a command that exits early must not take the consumer with it

  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGUSR1);  // the runtime's onFatal: stop for good
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  FILE* out = nullptr;
  if (!logPath.empty()) {
    out = std::fopen(logPath.c_str(), "a");
    if (!out) usage("--log: cannot open " + logPath);
  }
  std::mutex outMu;
  auto write_line = [&](const nlohmann::json& j) {
    if (!out) return;
    const std::string line = j.dump() + "\n";
    std::lock_guard<std::mutex> lock(outMu);
    std::fwrite(line.data(), 1, line.size(), out);
    std::fflush(out);
  };
  o.log = [](const std::string& m) { log::info(m); };
  o.onFatal = [](const std::string&) { ::kill(::getpid(), SIGUSR1); };
  // --stream a,b (and --group g or g1,g2): one runtime per stream, all joining as one member id, so
  // that groups with the co-partitioned assignor give this process shard i of every stream at once.
  const auto streams = split_list(o.streamPrefix), groups = split_list(o.group);
  if (streams.empty() || (groups.size() != 1 && groups.size() != streams.size()))
    usage("--group: one group, or one per stream of --stream");
  for (std::size_t i = 0; i < streams.size(); ++i)
    for (std::size_t k = 0; k < i; ++k)
      if (streams[i] == streams[k] && (groups.size() == 1 || groups[i] == groups[k]))
        usage("--stream: " + streams[i] + " twice for one group (the two runtimes would fence each other)");
  if (streams.size() > 1 && o.memberId.empty() && o.instanceId.empty()) o.memberId = member::member_id_from_environment();
  // Each runtime's member id, by stream position (a static member's differ: one incarnation each).
  std::vector<std::string> memberIds(streams.size());
  auto handle = [&](std::size_t at, const member::Record& r, int64_t startNs) {
    const std::string& stream = streams[at];
    const std::string& memberId = memberIds[at];
    if (processMs > 0) std::this_thread::sleep_for(std::chrono::milliseconds(processMs));
    if (processUs > 0) {  // a busy wait: a sleep this short would cost its timer slack instead
      const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(processUs);
      while (std::chrono::steady_clock::now() < until) {
      }
    }
    if (!failKey.empty() && r.field("key") == failKey) throw member::RetryLater("--fail-key " + failKey);
    if (failEvery > 0 && !r.field("seq").empty() && std::atol(r.field("seq").c_str()) % failEvery == 0)
      throw member::RetryLater("--fail-every " + std::to_string(failEvery));
    if (!execCmd.empty()) tools::run_per_record(execCmd, r);
    if (!execLines.empty()) tools::run_on_child(execLines, r);
    const int64_t endNs = member::mono_ns();
    const int64_t wallMs = std::chrono::duration_cast<std::chrono::milliseconds>(
                               std::chrono::system_clock::now().time_since_epoch()).count();
    write_line({{"shard", r.shard}, {"id", r.id}, {"key", r.field("key")}, {"seq", std::atoll(r.field("seq").c_str())},
                {"member", memberId}, {"startNs", startNs}, {"endNs", endNs}, {"wallMs", wallMs}, {"stream", stream}});
  };
  std::vector<std::unique_ptr<member::Runtime>> runtimes;
  for (std::size_t i = 0; i < streams.size(); ++i) {
    auto so = o;
    so.streamPrefix = streams[i];
    so.group = groups.size() == 1 ? groups[0] : groups[i];
    if (streams.size() > 1) so.deadLetterKey.clear();  // each stream's group has its own
    so.onHeartbeat = [&write_line, &memberId = memberIds[i], stream = streams[i]](const member::HeartbeatEvent& e) {
      if (e.status.empty()) {
        write_line({{"event", "heartbeat-unanswered"}, {"member", memberId}, {"sentNs", e.sentNs},
                    {"receivedNs", e.receivedNs}, {"coordinator", e.coordinator}, {"stream", stream}});
        return;
      }
      write_line({{"event", "heartbeat"}, {"member", memberId}, {"sentNs", e.sentNs}, {"receivedNs", e.receivedNs},
                  {"status", e.status}, {"epoch", e.epoch}, {"owned", e.owned}, {"coordinator", e.coordinator},
                  {"stream", stream}});
    };
    so.onLeftPending = [&write_line, &memberId = memberIds[i], stream = streams[i]](int32_t shard, const std::vector<std::string>& ids) {
      write_line({{"event", "left-pending"}, {"member", memberId}, {"shard", shard}, {"ids", ids},
                  {"atNs", member::mono_ns()}, {"stream", stream}});
    };
    runtimes.push_back(std::make_unique<member::Runtime>(
        so, [&handle, i](const member::Record& r, int64_t startNs) { handle(i, r, startNs); }));
    memberIds[i] = runtimes.back()->member_id();  // before start(): no thread reads it yet
  }
  const std::string& memberId = memberIds.front();
  for (auto& r : runtimes) r->start();
  int sig = 0;
  sigwait(&signals, &sig);
  std::string fatal;
  for (auto& r : runtimes)
    if (fatal.empty()) fatal = r->fatal();
  // Every stream's group is left at once, so that a co-partitioned shard moves on in all of them together.
  std::vector<char> leftEach(runtimes.size(), 0);
  std::vector<std::thread> leaving;
  for (std::size_t i = 0; i < runtimes.size(); ++i)
    leaving.emplace_back([&, i] { leftEach[i] = runtimes[i]->shutdown(15000); });
  for (auto& t : leaving) t.join();
  const bool left = std::all_of(leftEach.begin(), leftEach.end(), [](char c) { return c != 0; });
  member::Runtime::Stats s;
  for (auto& r : runtimes) {
    const auto one = r->stats();
    s.processed += one.processed, s.rejoins += one.rejoins, s.selfFences += one.selfFences;
    s.failedAttempts += one.failedAttempts, s.retried += one.retried, s.deadLettered += one.deadLettered;
  }
  log::info("rsc-consume " + memberId + ": processed " + std::to_string(s.processed) + " records, " +
            std::to_string(s.rejoins) + " rejoins, " + std::to_string(s.selfFences) + " self-fences, " +
            std::to_string(s.failedAttempts) + " failed attempts, " + std::to_string(s.retried) + " retried, " +
            std::to_string(s.deadLettered) + " dead-lettered");
  if (out) std::fclose(out);
  if (!fatal.empty()) {
    log::error("rsc-consume " + memberId + " stops: " + fatal);
    return 3;
  }
  return left ? 0 : 1;
}
