// rsc-admin: look at and steer a coordinator from a shell.
//   rsc-admin [--coordinator URL] [--token T | --token-file F] [--output table|json] COMMAND [ARGS] [--help]
// Exit status: 0 done, 1 the coordinator refused (its message on stderr), 2 bad usage,
// 3 the coordinator could not be reached.
#include <cstdio>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "member/bearer_token.hpp"
#include "member/http_client.hpp"
#include "member/owner_follower.hpp"

using nlohmann::json;

namespace {

constexpr int kOk = 0, kRefused = 1, kUsage = 2, kUnreachable = 3, kWaitTimedOut = 4;

struct Command {
  const char* name;
  const char* args;
  const char* help;
  std::size_t argc;
};

// "a,b,,a": a rack per shard by index, "" for none; "" alone clears them.
json rack_list(const std::string& text) {
  json racks = json::array();
  for (std::size_t from = 0; !text.empty();) {
    const auto comma = text.find(',', from);
    racks.push_back(text.substr(from, comma == std::string::npos ? std::string::npos : comma - from));
    if (comma == std::string::npos) break;
    from = comma + 1;
  }
  return racks;
}

const std::vector<Command>& commands() {
  static const std::vector<Command> all{
      {"list-streams", "", "Every stream the coordinator knows.", 0},
      {"list-groups", "STREAM", "The consumer groups of STREAM, each with its lag and pending records.", 1},
      {"describe", "STREAM GROUP [--fresh]",
       "The group's state and epochs, each shard (owner, state, pending, lag, last delivered id),\n"
       "then each member (state, epoch, heartbeat age, capacity, shards) and the recent events.\n"
       "Redis's figures are the last lag round's; --fresh reads them now (XINFO GROUPS of every\n"
       "shard: its cost grows with the number of groups on the stream).",
       2},
      {"create-stream", "STREAM SHARDS [--key-style plain|hashtag]",
       "Creates STREAM with SHARDS shards (POST). An existing stream of that size is fine;\n"
       "one of another size is refused.",
       2},
      {"grow-stream", "STREAM SHARDS", "Grows STREAM to SHARDS shards (PUT); shard counts only grow.", 2},
      {"scale", "STREAM SHARDS | --rollback STREAM  [--reason TEXT] [--wait [--wait-timeout-ms N]]",
       "Changes STREAM's shard count, up or down (down to 0). More shards: at once. Fewer: producers\n"
       "stop routing to the removed shards at once; they stay assigned and read until every consumer\n"
       "group has read and acked them, then they retire (see describe). One change at a time;\n"
       "--rollback undoes a shrink that is still draining, with nothing lost. --wait: return once\n"
       "the change is over (the removed shards drained and retired), saying how it goes every 5 s;\n"
       "exit 4 if it is not over within --wait-timeout-ms (default 600000).",
       2},
      {"set-assignor", "STREAM GROUP uniform|range|rack-aware|external|co-partitioned [--shard-racks R0,R1,...] [--with STREAM2/GROUP2]",
       "Sets how the group's shards are split: uniform (balanced and sticky, the default), range\n"
       "(blocks of consecutive shards in member-id order), rack-aware (uniform's balance, each shard\n"
       "read by a member of its rack where one exists; members say their rack with rsc-consume --rack)\n"
       "or external (the targets posted with rsc-admin target, kept until the next one), or\n"
       "co-partitioned --with STREAM2/GROUP2 (shard i of both streams to one member; the other group is\n"
       "set to name this one back; both streams keep their shard count while linked).\n"
       "--shard-racks: the rack of each shard by index (an empty item: none); left out, they are kept.\n"
       "A change moves shards like any rebalance (each revoked before it is given). A group that does\n"
       "not exist yet is made with it.",
       3},
      {"target", "STREAM GROUP FILE",
       "Posts the target assignment in FILE (- for stdin) to an external group:\n"
       "{\"groupEpoch\": N, \"targetAssignment\": {\"member\": [shard, ...]}}, N being describe's\n"
       "groupEpoch when it was computed. Refused when the group's epoch moved since (exit 1; compute\n"
       "it again), when it names a member that is not live or a shard twice.",
       3},
      {"remove-member", "STREAM GROUP MEMBER", "Fences MEMBER: its shards go to the others.", 3},
      {"delete-group", "STREAM GROUP [--fence-members]",
       "Deletes the group. A group with live members is refused unless --fence-members.", 2},
      {"dead-letters", "STREAM GROUP [--count N]",
       "The records the group's members gave up on (the oldest N, default 100): each one's\n"
       "dead-letter id, shard, record id, deliveries, when, member and error.",
       2},
      {"reset-offsets", "STREAM GROUP --to earliest|latest|ID|TIME-MS [--fence-members]",
       "Moves the group's position on every shard (XGROUP SETID), as Kafka's --reset-offsets:\n"
       "earliest delivers every record again, latest only new ones, an entry id resumes after it,\n"
       "a time in ms at the first record added then or later. Refused while the group has live\n"
       "members unless --fence-members (fenced first: their shards wait for their leases to end).",
       2},
      {"set-stream-racks", "STREAM R0,R1,... | STREAM --from-cluster-zones",
       "Sets the rack (zone) of each of STREAM's shards, by index (\"a,,b\": shard 1 has none; \"\" clears\n"
       "them), for its rack-aware groups without racks of their own. --from-cluster-zones: each shard\n"
       "gets the zone of the Redis node serving its key, from the coordinator's --redis-node-zones (run\n"
       "it again after moving slots). Bumps the stream's metadata version when they change.",
       2},
      {"retention", "STREAM", "The stream's retention policy.", 1},
      {"set-retention", "STREAM none|max-len=N|max-age-ms=N|processed-by-all-groups",
       "Sets what is trimmed from STREAM's shard streams (one coordinator pod applies it every lag\n"
       "round): nothing; all but the newest N records of each shard; records older than N ms;\n"
       "or each shard below the lowest record some group of it has not read and acked. max-len and\n"
       "max-age-ms may trim records a slow group has not read: they are counted per group\n"
       "(rsc_stream_trimmed_unread_records_total).",
       2},
      {"redrive", "STREAM GROUP (--id DEAD-LETTER-ID ... | --all)",
       "Writes dead letters back to the end of their shard streams (a new entry id: they come\n"
       "after what was written since), then removes them from the dead-letter stream. Each one\n"
       "carries where it came from after its own fields (rsc:redrive:deadLetterId, :id,\n"
       ":deliveries, :error, :member). An --id the dead-letter stream does not hold is named on\n"
       "stderr and the exit status is 1 (the others are written back).",
       2},
      {"discard-dead-letters", "STREAM GROUP (--id DEAD-LETTER-ID ... | --all)",
       "Drops dead letters for good (--all: the oldest 1000), for records nobody should process.\n"
       "An --id the dead-letter stream does not hold is named on stderr and the exit status is 1.",
       2},
  };
  return all;
}

const char* kGlobal =
    "Options (anywhere on the line):\n"
    "  --coordinator URL   the coordinator (default $RSC_COORDINATOR, else http://127.0.0.1:8080)\n"
    "  --token T           bearer token (default $RSC_TOKEN)\n"
    "  --token-file F      the bearer token from a file, kept out of the command line (default $RSC_TOKEN_FILE)\n"
    "  --output table|json table for people (default), json for scripts: the coordinator's answer\n"
    "  --timeout-ms N      per request (default 10000)\n"
    "  --no-follow-owner   a call asked again stays on --coordinator (default: it goes to the pod that owns the\n"
    "                      group, as the last answer named it)\n"
    "  --coordinator-ca-file F   for https://: the CA to verify the coordinator with (env RSC_COORDINATOR_CA_FILE)\n"
    "  --coordinator-cert-file F, --coordinator-key-file F   a client certificate (mutual TLS)\n"
    "  --help              this help, or a command's with COMMAND --help\n"
    "A call answered 503 or 409 with Retry-After (the store away, retired shards being deleted) is\n"
    "tried again after it for up to 30 s when it changes nothing twice (reads, scale, grow-stream,\n"
    "set-retention).\n"
    "Exit status: 0 done, 1 refused by the coordinator (message on stderr), 2 bad usage,\n"
    "3 the coordinator could not be reached, 4 scale --wait timed out.\n";

void general_help(std::ostream& os) {
  os << "usage: rsc-admin [options] COMMAND [ARGS]\n\nCommands:\n";
  for (const auto& c : commands()) {
    std::string line = std::string("  ") + c.name + " " + c.args;
    os << line << "\n";
  }
  os << "\n" << kGlobal;
}

void command_help(std::ostream& os, const Command& c) {
  os << "usage: rsc-admin [options] " << c.name << " " << c.args << "\n\n" << c.help << "\n\n" << kGlobal;
}

[[noreturn]] void bad_usage(const std::string& why, const Command* c = nullptr) {
  std::cerr << "rsc-admin: " << why << "\n";
  if (c != nullptr)
    std::cerr << "usage: rsc-admin [options] " << c->name << " " << c->args << "   (rsc-admin " << c->name << " --help)\n";
  else
    std::cerr << "run rsc-admin --help for the commands\n";
  std::exit(kUsage);
}

// Path segments are names the coordinator validates; they are escaped so that what reaches it is
// exactly what was typed.
std::string seg(const std::string& s) {
  static const char* hex = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~' || c == ':') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += hex[c >> 4];
      out += hex[c & 15];
    }
  }
  return out;
}

// A plain table: columns as wide as their widest cell, two spaces apart.
void table(std::ostream& os, const std::vector<std::string>& head, const std::vector<std::vector<std::string>>& rows) {
  std::vector<std::size_t> w(head.size());
  for (std::size_t i = 0; i < head.size(); ++i) w[i] = head[i].size();
  for (const auto& r : rows)
    for (std::size_t i = 0; i < r.size() && i < w.size(); ++i) w[i] = std::max(w[i], r[i].size());
  auto line = [&](const std::vector<std::string>& r) {
    std::string out;
    for (std::size_t i = 0; i < r.size(); ++i) {
      out += r[i];
      if (i + 1 < r.size()) out += std::string(w[i] - r[i].size() + 2, ' ');
    }
    os << out << "\n";
  };
  line(head);
  for (const auto& r : rows) line(r);
}

std::string text(const json& v) {
  if (v.is_null()) return "-";
  if (v.is_string()) return v.get<std::string>();
  return v.dump();
}

// A migration as an operator reads it: what it does and whether it is over ("DEPRECATED" is the
// wire's word for a finished one, kept for the reference implementation's clients).
std::string migration_text(const json& m) {
  const std::string state = text(m.value("state", json()));
  const std::string counts = text(m.value("fromShardCount", json())) + " -> " + text(m.value("toShardCount", json()));
  const std::string kind = m.value("kind", std::string());
  if (state == "DEPRECATED")
    return kind == "GROW" ? "done (grown " + counts + ")" : kind == "SHRINK" ? "done (shrunk " + counts + ", drained and retired)" : "done (" + counts + ")";
  if (state == "DRAINING") return "draining (" + counts + ")";
  if (state == "ROLLED_BACK") return "rolled back (" + counts + " undone)";
  if (state == "ROLLING_BACK") return "rolling back (" + counts + ")";
  return state + " (" + counts + ")";
}

std::string join(const json& list) {
  if (!list.is_array() || list.empty()) return "-";
  std::string out;
  for (const auto& x : list) out += (out.empty() ? "" : ",") + text(x);
  return out;
}

std::string age(const json& ms) {
  if (!ms.is_number()) return "-";
  const double v = ms.get<double>();
  std::ostringstream os;
  os.precision(1);
  if (v < 1000) return std::to_string(static_cast<long long>(v)) + "ms";
  os << std::fixed << v / 1000.0 << "s";
  return os.str();
}

// Members whose lease runs: an EXPIRED or FENCED one is listed for a while, not counted.
std::size_t live_members(const json& d) {
  std::size_t n = 0;
  for (const auto& m : d.value("members", json::array())) {
    const auto st = m.value("state", std::string());
    n += st != "EXPIRED" && st != "FENCED";
  }
  return n;
}

void print_describe(const json& d) {
  std::cout << "GROUP " << text(d.value("streamPrefix", json())) << "/" << text(d.value("consumerGroup", json()))
            << "  STATE " << text(d.value("state", json())) << "  GROUP-EPOCH " << text(d.value("groupEpoch", json()))
            << "  ASSIGNMENT-EPOCH " << text(d.value("assignmentEpoch", json())) << "  ASSIGNOR "
            << text(d.value("assignor", json("uniform"))) << "  SHARDS "
            << text(d.value("shardCount", json())) << "  MEMBERS " << live_members(d)
            << "  DEAD-LETTERS " << text(d.value("deadLetters", json())) << "\n";
  if (const auto cw = d.value("coPartitionedWith", json()); cw.is_object())
    std::cout << "CO-PARTITIONED WITH " << text(cw.value("prefix", json())) << "/" << text(cw.value("group", json()))
              << " (shard i of both streams to one member)\n";
  if (const auto rl = d.value("redisLag", json()); rl.is_object()) {
    const auto records = rl.value("records", json());
    std::cout << "LAG " << (records.is_null() ? "unknown on " + text(rl.value("unknownShards", json())) + " shard(s) (at least " +
                                                    text(rl.value("knownRecords", json())) + ")"
                                              : text(records))
              << " records, " << text(rl.value("pending", json())) << " delivered and not acked (read from Redis"
              << (d.value("redisLagSource", json()) == "lag-round" && d.value("redisLagAgeMs", json()).is_number()
                      ? " by the lag round " + text(d["redisLagAgeMs"]) + " ms ago"
                      : d.value("redisLagSource", json()) == "live" ? " now" : "")
              << ")\n";
  } else if (d.value("redisLagSource", json()) == "lag-round") {
    std::cout << "LAG not read yet: the lag round reads it within --lag-interval-ms (describe --fresh reads it now)\n";
  }
  if (const auto mig = d.value("activeMigration", json()); mig.is_object())
    std::cout << "SCALING " << text(mig.value("fromShardCount", json())) << " -> " << text(mig.value("toShardCount", json()))
              << " shards (migration " << text(mig.value("reshardingId", json())) << "): "
              << text(d.value("drainingShards", json())) << " shard(s) draining, no longer routed to; retired once "
              << "every group has read and acked them (rsc-admin scale --rollback to undo)\n";
  if (const auto rk = d.value("retiredShardKeys", json()); rk.is_object()) {
    const int from = rk.value("from", 0), to = rk.value("to", 0);
    std::cout << "RETIRED shards " << from << ".." << to - 1 << ": nobody reads them; their streams are "
              << (rk.value("deleting", false) ? std::string("being deleted now")
                                               : "kept (retired at " + text(rk.value("retiredAt", json())) +
                                                     "; deleted after --retired-shard-ttl-ms when a pod has it)")
              << "\n";
  }
  if (d.contains("crossRackShards"))
    std::cout << "RACKS " << text(d.value("crossRackShards", json())) << " shard(s) read from another rack than theirs (or with no rack)\n";
  for (const auto& r : d.value("reservations", json::array())) {
    std::string shards;
    for (const auto& x : r.value("shards", json::array())) shards += (shards.empty() ? "" : ",") + text(x);
    std::cout << "RESERVED shards " << shards << " for instance " << text(r.value("instanceId", json())) << " (held by "
              << text(r.value("memberId", json())) << "): nobody else reads them; rebalanced in "
              << age(r.value("endsInMs", json())) << " unless it returns\n";
  }
  bool phases = false;
  for (const auto& s : d.value("shards", json::array())) phases = phases || s.value("phase", std::string("ACTIVE")) != "ACTIVE";
  std::cout << "\n";
  std::vector<std::vector<std::string>> rows;
  for (const auto& s : d.value("shards", json::array())) {
    std::string state = text(s.value("state", json()));
    if (!s.value("pendingFor", json()).is_null()) state += "->" + text(s["pendingFor"]);
    // What the shard's member reported, then what Redis holds (members or not; lag may be unknown).
    const auto r = s.value("redis", json());
    const auto rlag = r.is_object() ? r.value("lag", json()) : json();
    if (phases && s.value("phase", std::string("ACTIVE")) != "ACTIVE")
      state += " " + text(s.value("phase", json())) + " (waiting for " + text(s.value("waitingFor", json())) + ")";
    rows.push_back({text(s.value("shardIndex", json())), text(s.value("owner", json())), state,
                    text(s.value("pending", json())), text(s.value("lag", json())), text(s.value("lastDeliveredId", json())),
                    r.is_object() && rlag.is_null() ? "unknown" : text(rlag),
                    r.is_object() ? text(r.value("pending", json())) : text(json()),
                    r.is_object() ? text(r.value("length", json())) : text(json()),
                    r.is_object() ? text(r.value("trimmed", json())) + " (" + text(r.value("trimmedUnread", json())) + ")"
                                  : text(json())});
  }
  table(std::cout, {"SHARD", "OWNER", "STATE", "PENDING", "LAG", "LAST-DELIVERED-ID", "REDIS-LAG", "REDIS-PENDING",
                    "LENGTH", "TRIMMED(UNREAD)"},
        rows);
  rows.clear();
  for (const auto& m : d.value("members", json::array())) {
    const auto cap = m.value("runtimeConsumerCapacity", json::object());
    const std::string instance = m.value("instanceId", std::string());
    const std::string rack = m.value("rackId", std::string());
    const std::string inRack = m.contains("inRackShards") ? " " + text(m["inRackShards"]) + " in rack" : std::string();
    rows.push_back({text(m.value("memberId", json())) + (instance.empty() ? "" : " (" + instance + ")") +
                        (rack.empty() ? "" : " @" + rack + inRack), text(m.value("state", json())), text(m.value("memberEpoch", json())),
                    age(m.value("lastHeartbeatAgoMs", json())),
                    text(cap.value("availableConcurrency", json())) + "/" + text(cap.value("runtimeMaxConcurrency", json())),
                    join(m.value("assignedShards", json())), join(m.value("revokingShards", json())),
                    join(m.value("pendingShards", json()))});
  }
  std::cout << "\n";
  table(std::cout, {"MEMBER", "STATE", "EPOCH", "HEARTBEAT-AGE", "CAPACITY", "ASSIGNED", "REVOKING", "WAITING-FOR"}, rows);
  const auto events = d.value("recentEvents", json::array());
  if (!events.empty()) {
    std::cout << "\nRECENT EVENTS (this pod, newest first)\n";
    rows.clear();
    for (auto it = events.rbegin(); it != events.rend() && rows.size() < 10; ++it) {
      const auto& e = *it;
      rows.push_back({age(e.value("agoMs", json())) + " ago", text(e.value("kind", json())), text(e.value("memberId", json())),
                      join(e.value("shards", json())), text(e.value("groupEpoch", json())), text(e.value("detail", json()))});
    }
    table(std::cout, {"WHEN", "EVENT", "MEMBER", "SHARDS", "GROUP-EPOCH", "DETAIL"}, rows);
  }
}

// scale --wait: the stream's GET until no migration drains (each 500 ms; progress on stderr every
// 5 s). kOk once over, kWaitTimedOut past `timeoutMs`, kUnreachable/kRefused when asking fails.
int wait_for_scale(rsc::member::HttpClient& http, const std::string& token, const std::string& stream, long timeoutMs,
                   bool asJson) {
  const auto start = std::chrono::steady_clock::now();
  auto lastSaid = start;
  for (;;) {
    const auto r = http.request("GET", "/coord/v1/streams/" + seg(stream), "", token);
    const auto j = json::parse(r.body, nullptr, false);
    const auto elapsedMs =
        std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start).count();
    if (r.status == 200 && j.is_object()) {
      const auto active = j.value("activeMigration", json());
      if (!active.is_object() && asJson) {
        std::cout << j.dump(2) << "\n";
        return kOk;
      }
      if (!active.is_object()) {
        const auto last = j.value("lastMigration", json());
        std::cout << "stream " << stream << ": " << text(j.value("shardCount", json())) << " shards"
                  << (last.is_object() ? "; migration " + text(last.value("reshardingId", json())) + " " + migration_text(last)
                                       : std::string())
                  << " after " << elapsedMs << " ms\n";
        return kOk;
      }
      if (std::chrono::steady_clock::now() - lastSaid >= std::chrono::seconds(5)) {
        lastSaid = std::chrono::steady_clock::now();
        std::cerr << "rsc-admin: scale: " << text(j.value("drainingShards", json()))
                  << " shard(s) still draining (migration " << text(active.value("reshardingId", json())) << ", "
                  << elapsedMs / 1000 << " s)\n";
      }
    } else if (r.status == 0 || (r.status != 503 && r.status != 200)) {
      std::cerr << "rsc-admin: scale --wait: " << (r.status == 0 ? "no answer: " + r.error : "HTTP " + std::to_string(r.status) + ": " + r.body)
                << "\n";
      return r.status == 0 ? kUnreachable : kRefused;
    }
    if (elapsedMs >= timeoutMs) {
      std::cerr << "rsc-admin: scale --wait: still draining after " << timeoutMs << " ms (the change goes on; "
                << "rsc-admin describe shows it)\n";
      return kWaitTimedOut;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::string url = std::getenv("RSC_COORDINATOR") ? std::getenv("RSC_COORDINATOR") : "http://127.0.0.1:8080";
  rsc::member::TokenSource tokenSource;
  if (auto e = rsc::member::apply_token_env(tokenSource, [](const char* n) { return std::getenv(n); }); !e.empty())
    bad_usage(e);
  std::string output = "table", keyStyle;
  long timeoutMs = 10000;
  bool followOwner = true;
  rsc::member::ClientTls coordinatorTls;
  if (const char* f = std::getenv("RSC_COORDINATOR_CA_FILE")) coordinatorTls.caFile = f;
  bool help = false, fence = false, keyStyleGiven = false, all = false, rollback = false, wait = false, fresh = false;
  long waitTimeoutMs = 600000;
  std::string reason;
  std::vector<std::string> deadIds;
  std::string count, to;
  std::optional<std::string> shardRacks;
  bool fromClusterZones = false;    // set-stream-racks STREAM --from-cluster-zones
  std::optional<std::string> with;  // set-assignor co-partitioned --with STREAM/GROUP
  std::vector<std::string> words;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&](const char* what) -> std::string {
      if (i + 1 >= argc) bad_usage(a + " needs " + what);
      return argv[++i];
    };
    if (a == "--help" || a == "-h") help = true;
    else if (a == "--version") {
      std::cout << "rsc-admin " << RSC_VERSION << " (commit " << RSC_COMMIT << ")\n";
      return kOk;
    }
    else if (a == "--coordinator") url = value("a URL");
    else if (std::string tokenError; rsc::member::apply_token_flag(tokenSource, a, [&] { return value("a value"); }, tokenError)) {
      if (!tokenError.empty()) bad_usage(tokenError);
    }
    else if (rsc::member::apply_client_tls_flag(coordinatorTls, a, [&] { return value("a file"); })) {}
    else if (a == "--output") output = value("table or json");
    else if (a == "--timeout-ms") {
      const std::string v = value("a number");
      char* end = nullptr;
      timeoutMs = std::strtol(v.c_str(), &end, 10);
      if (v.empty() || *end != '\0' || timeoutMs <= 0) bad_usage("--timeout-ms: '" + v + "' is not a positive number");
    } else if (a == "--fence-members") fence = true;
    else if (a == "--no-follow-owner") followOwner = false;
    else if (a == "--all") all = true;
    else if (a == "--rollback") rollback = true;
    else if (a == "--wait") wait = true;
    else if (a == "--fresh") fresh = true;
    else if (a == "--wait-timeout-ms") {
      const std::string v = value("a number");
      char* end = nullptr;
      waitTimeoutMs = std::strtol(v.c_str(), &end, 10);
      if (v.empty() || *end != '\0' || waitTimeoutMs <= 0) bad_usage("--wait-timeout-ms: '" + v + "' is not a positive number");
    }
    else if (a == "--reason") reason = value("a text");
    else if (a == "--id") deadIds.push_back(value("a dead-letter id"));
    else if (a == "--count") count = value("a number");
    else if (a == "--to") to = value("earliest, latest, an entry id or a time in ms");
    else if (a == "--shard-racks") shardRacks = value("a comma-separated list of racks");
    else if (a == "--with") with = value("STREAM/GROUP");
    else if (a == "--from-cluster-zones") fromClusterZones = true;
    else if (a == "--key-style") {
      keyStyle = value("plain or hashtag");
      keyStyleGiven = true;
    } else if (a.rfind("--", 0) == 0) bad_usage("unknown option " + a);
    else words.push_back(a);
  }
  if (auto e = rsc::member::check_client_tls_files(coordinatorTls); !e.empty()) bad_usage(e);
  const std::string token = tokenSource.token;
  if (words.empty()) {
    if (help) {
      general_help(std::cout);
      return kOk;
    }
    general_help(std::cerr);
    return kUsage;
  }
  const Command* cmd = nullptr;
  for (const auto& c : commands())
    if (words[0] == c.name) cmd = &c;
  if (cmd == nullptr) bad_usage("no command " + words[0]);
  if (help) {
    command_help(std::cout, *cmd);
    return kOk;
  }
  const std::vector<std::string> args(words.begin() + 1, words.end());
  if (fromClusterZones && std::string(cmd->name) != "set-stream-racks") bad_usage("--from-cluster-zones is for set-stream-racks", cmd);
  const std::size_t wanted = (rollback && std::string(cmd->name) == "scale") || fromClusterZones ? 1 : cmd->argc;
  if (args.size() != wanted)
    bad_usage(std::string(cmd->name) + " takes " + std::to_string(wanted) + " argument(s), got " + std::to_string(args.size()), cmd);
  if ((rollback || wait || !reason.empty()) && std::string(cmd->name) != "scale")
    bad_usage("--rollback, --wait and --reason are for scale", cmd);
  if (output != "table" && output != "json") bad_usage("--output: table or json, not '" + output + "'", cmd);
  if (fence && std::string(cmd->name) != "delete-group" && std::string(cmd->name) != "reset-offsets")
    bad_usage("--fence-members is for delete-group and reset-offsets", cmd);
  if (!to.empty() && std::string(cmd->name) != "reset-offsets") bad_usage("--to is for reset-offsets", cmd);
  if (std::string(cmd->name) == "reset-offsets" && to.empty()) bad_usage("reset-offsets: --to earliest|latest|ID|TIME-MS", cmd);
  if (keyStyleGiven && std::string(cmd->name) != "create-stream") bad_usage("--key-style is for create-stream", cmd);
  if (keyStyleGiven && keyStyle != "plain" && keyStyle != "hashtag") bad_usage("--key-style: plain or hashtag", cmd);
  if (!count.empty() && std::string(cmd->name) != "dead-letters") bad_usage("--count is for dead-letters", cmd);
  if (fresh && std::string(cmd->name) != "describe") bad_usage("--fresh is for describe", cmd);
  if (shardRacks && std::string(cmd->name) != "set-assignor") bad_usage("--shard-racks is for set-assignor", cmd);
  if (with && std::string(cmd->name) != "set-assignor") bad_usage("--with is for set-assignor co-partitioned", cmd);
  if (std::string(cmd->name) == "set-assignor" && (args[2] == "co-partitioned") != with.has_value())
    bad_usage("set-assignor: co-partitioned takes --with STREAM2/GROUP2, and only it", cmd);
  if (with && (with->find('/') == std::string::npos || with->find('/') == 0 || with->find('/') + 1 == with->size()))
    bad_usage("--with: STREAM/GROUP, not '" + *with + "'", cmd);
  const bool deadLetterMove = std::string(cmd->name) == "redrive" || std::string(cmd->name) == "discard-dead-letters";
  if ((all || !deadIds.empty()) && !deadLetterMove) bad_usage("--id and --all are for redrive and discard-dead-letters", cmd);
  if (deadLetterMove && all == !deadIds.empty()) bad_usage(std::string(cmd->name) + ": --id ID (repeatable) or --all", cmd);

  std::string method = "GET", path, body;
  const std::string name = cmd->name;
  auto shards = [&](const std::string& v) {
    char* end = nullptr;
    const long n = std::strtol(v.c_str(), &end, 10);
    if (v.empty() || *end != '\0' || n < 1) bad_usage("SHARDS: '" + v + "' is not a count of 1 or more", cmd);
    return n;
  };
  if (name == "list-streams") path = "/coord/v1/streams";
  else if (name == "list-groups") path = "/coord/v1/streams/" + seg(args[0]) + "/groups?limit=1000";  // page by page
  else if (name == "describe") path = "/coord/v1/streams/" + seg(args[0]) + "/groups/" + seg(args[1]) + (fresh ? "?fresh=true" : "");
  else if (name == "create-stream") {
    method = "POST";
    path = "/coord/v1/streams/" + seg(args[0]);
    json b{{"initialShardCount", shards(args[1])}};
    if (keyStyleGiven) b["keyStyle"] = keyStyle;
    body = b.dump();
  } else if (name == "scale") {
    method = "POST";
    path = "/coord/v1/streams/" + seg(args[0]) + (rollback ? "/scale/rollback" : "/scale");
    json b{{"requestedBy", "rsc-admin"}};
    if (!reason.empty()) b["reason"] = reason;
    if (!rollback) {
      char* end = nullptr;
      const long n = std::strtol(args[1].c_str(), &end, 10);
      if (args[1].empty() || *end != '\0' || n < 0) bad_usage("SHARDS: '" + args[1] + "' is not a count of 0 or more", cmd);
      b["targetShardCount"] = n;
    }
    body = b.dump();
  } else if (name == "grow-stream") {
    method = "PUT";
    path = "/coord/v1/streams/" + seg(args[0]);
    body = json{{"shardCount", shards(args[1])}}.dump();
  } else if (name == "set-assignor") {
    method = "PUT";
    path = "/coord/v1/streams/" + seg(args[0]) + "/groups/" + seg(args[1]);
    json b{{"assignor", args[2]}};
    if (with) b["coPartitionedWith"] = {{"prefix", with->substr(0, with->find('/'))}, {"group", with->substr(with->find('/') + 1)}};
    if (shardRacks) b["shardRacks"] = rack_list(*shardRacks);
    body = b.dump();
  } else if (name == "set-stream-racks") {
    method = "PUT";
    path = "/coord/v1/streams/" + seg(args[0]) + "/racks";
    body = (fromClusterZones ? json{{"from", "cluster-node-zone"}} : json{{"shardRacks", rack_list(args[1])}}).dump();
  } else if (name == "target") {
    method = "PUT";
    path = "/coord/v1/streams/" + seg(args[0]) + "/groups/" + seg(args[1]) + "/target";
    std::ostringstream text;
    if (args[2] == "-") {
      text << std::cin.rdbuf();
    } else {
      std::ifstream in(args[2]);
      if (!in) bad_usage("target: cannot read " + args[2], cmd);
      text << in.rdbuf();
    }
    body = text.str();
  } else if (name == "remove-member") {
    method = "DELETE";
    path = "/coord/v1/streams/" + seg(args[0]) + "/groups/" + seg(args[1]) + "/members/" + seg(args[2]);
  } else if (name == "delete-group") {
    method = "DELETE";
    path = "/coord/v1/streams/" + seg(args[0]) + "/groups/" + seg(args[1]) + (fence ? "?fenceMembers=true" : "");
  } else if (name == "dead-letters") {
    path = "/coord/v1/streams/" + seg(args[0]) + "/groups/" + seg(args[1]) + "/dead-letters" +
           (count.empty() ? "" : "?count=" + seg(count));
  } else if (name == "reset-offsets") {
    method = "POST";
    path = "/coord/v1/streams/" + seg(args[0]) + "/groups/" + seg(args[1]) + "/reset-offsets";
    body = json{{"to", to}, {"fenceMembers", fence}}.dump();
  } else if (name == "retention") {
    path = "/coord/v1/streams/" + seg(args[0]) + "/retention";
  } else if (name == "set-retention") {
    method = "PUT";
    path = "/coord/v1/streams/" + seg(args[0]) + "/retention";
    const auto& p = args[1];
    const auto eq = p.find('=');
    const std::string kind = p.substr(0, eq);
    json b;
    if (eq == std::string::npos && (kind == "none" || kind == "processed-by-all-groups")) {
      b["policy"] = kind == "none" ? "none" : "processedByAllGroups";
    } else if (eq != std::string::npos && (kind == "max-len" || kind == "max-age-ms")) {
      char* end = nullptr;
      const std::string v = p.substr(eq + 1);
      const long long n = std::strtoll(v.c_str(), &end, 10);
      if (v.empty() || *end != '\0') bad_usage("set-retention: '" + v + "' is not a number", cmd);
      b = json{{"policy", kind == "max-len" ? "maxLen" : "maxAgeMs"}, {"value", n}};
    } else {
      bad_usage("set-retention: the policy is none, max-len=N, max-age-ms=N or processed-by-all-groups, not '" + p + "'", cmd);
    }
    body = b.dump();
  } else if (name == "redrive" || name == "discard-dead-letters") {
    method = "POST";
    path = "/coord/v1/streams/" + seg(args[0]) + "/groups/" + seg(args[1]) + "/dead-letters/" +
           (name == "redrive" ? "redrive" : "discard");
    body = all ? json{{"all", true}}.dump() : json{{"deadLetterIds", deadIds}}.dump();
  }

  std::string err;
  const auto u = rsc::member::parse_url(url, &err);
  if (!err.empty()) bad_usage("--coordinator: " + err);
  rsc::member::HttpClient http(u, timeoutMs, coordinatorTls);
  // Asked again after its Retry-After (at most 5 s each, 30 s in all) only when a second time
  // changes nothing the first did not.
  const bool repeatable = method == "GET" || name == "scale" || name == "grow-stream" || name == "set-retention" ||
                          name == "set-assignor" || name == "set-stream-racks";
  // A call asked again goes to the pod that owns the group, as the last answer named it
  // (member/owner_follower.hpp: back to --coordinator at once when that pod does not answer).
  rsc::member::OwnerFollower route(url, followOwner);
  std::unique_ptr<rsc::member::HttpClient> direct;
  std::string directUrl;
  auto ask = [&]() {
    if (route.direct()) {
      if (!direct || directUrl != route.target()) {
        directUrl = route.target();
        direct = std::make_unique<rsc::member::HttpClient>(rsc::member::parse_url(directUrl, nullptr), timeoutMs,
                                                           coordinatorTls);
      }
      auto r = direct->request(method, path, body, token);
      if (r.status != 0) {
        route.on_answer(r.groupOwner, 0);
        return r;
      }
      route.on_failure(0);
    }
    auto r = http.request(method, path, body, token);
    if (r.status != 0) route.on_answer(r.groupOwner, 0);
    return r;
  };
  // Asked again after its Retry-After while that helps (see `repeatable`).
  auto ask_until_answered = [&]() {
    auto r = ask();
    for (auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
         repeatable && (r.status == 503 || r.status == 409) && r.retryAfterSeconds >= 0 && std::chrono::steady_clock::now() < until;) {
      const auto j = json::parse(r.body, nullptr, false);
      const auto waitS = std::min<int64_t>(std::max<int64_t>(r.retryAfterSeconds, 1), 5);
      std::cerr << "rsc-admin: " << name << ": HTTP " << r.status << " "
                << (j.is_object() && j.contains("message") ? text(j["message"]) : r.body) << "; trying again in " << waitS
                << " s\n";
      std::this_thread::sleep_for(std::chrono::seconds(waitS));
      r = ask();
    }
    return r;
  };
  auto r = ask_until_answered();
  if (r.status == 0) {
    std::cerr << "rsc-admin: no answer from " << url << ": " << r.error << "\n";
    return kUnreachable;
  }
  auto j = json::parse(r.body, nullptr, false);  // list-groups: later pages are added
  if (r.status < 200 || r.status >= 300) {
    std::string msg = j.is_object() && j.contains("message") ? text(j["message"]) : r.body;
    std::string code = j.is_object() && j.contains("error") ? text(j["error"]) : "";
    std::cerr << "rsc-admin: " << name << " refused (HTTP " << r.status << (code.empty() ? "" : " " + code) << "): " << msg
              << "\n";
    return kRefused;
  }
  if (j.is_discarded()) {
    std::cerr << "rsc-admin: the answer is not JSON: " << r.body.substr(0, 200) << "\n";
    return kRefused;
  }
  // The groups come a page at a time: the next pages are asked for and added to the first.
  for (int pages = 1; name == "list-groups" && j.is_object() && j.value("nextCursor", json()).is_string(); ++pages) {
    path = "/coord/v1/streams/" + seg(args[0]) + "/groups?limit=1000&cursor=" + text(j["nextCursor"]);
    const auto more = ask_until_answered();
    const auto next = json::parse(more.body, nullptr, false);
    if (more.status != 200 || !next.is_object() || pages > 100000) {
      std::cerr << "rsc-admin: list-groups: page " << pages + 1 << " refused (HTTP " << more.status << "): "
                << (next.is_object() && next.contains("message") ? text(next["message"]) : more.body + more.error) << "\n";
      return more.status == 0 ? kUnreachable : kRefused;
    }
    for (const char* field : {"groups", "groupLag"})
      for (const auto& e : next.value(field, json::array())) j[field].push_back(e);
    j["nextCursor"] = next.value("nextCursor", json());
  }
  // Named dead letters that were not there: said on stderr, exit 1 (the others were moved).
  auto named_missing = [&]() {
    if (name != "redrive" && name != "discard-dead-letters") return kOk;
    const auto missing = j.value("notFound", json::array());
    if (missing.empty()) return kOk;
    std::cerr << "rsc-admin: " << name << ": not in the dead-letter stream of " << args[0] << "/" << args[1] << ":";
    for (const auto& id : missing) std::cerr << " " << text(id);
    std::cerr << "\n";
    return kRefused;
  };
  // A link is made whole: when the other group does not name this one yet, it is set to name it back
  // (its own call, served by its owner), so one command links both.
  json back;
  if (name == "set-assignor" && with && j.value("partnerLinked", true) == false) {
    const std::string otherStream = with->substr(0, with->find('/')), otherGroup = with->substr(with->find('/') + 1);
    // The other group linked with a third one is left alone: taking it over would break that link.
    if (const auto theirs = j.value("partnerCoPartitionedWith", json()); theirs.is_object()) {
      std::cerr << "rsc-admin: " << args[0] << "/" << args[1] << " is co-partitioned with " << *with << ", but " << *with
                << " is co-partitioned with " << text(theirs.value("prefix", json())) << "/" << text(theirs.value("group", json()))
                << " and was left so; set another assignor on it first, then run this again\n";
      return kRefused;
    }
    path = "/coord/v1/streams/" + seg(otherStream) + "/groups/" + seg(otherGroup);
    body = json{{"assignor", "co-partitioned"}, {"coPartitionedWith", {{"prefix", args[0]}, {"group", args[1]}}}}.dump();
    const auto r2 = ask_until_answered();
    back = json::parse(r2.body, nullptr, false);
    if (r2.status < 200 || r2.status >= 300 || !back.is_object()) {
      std::cerr << "rsc-admin: " << args[0] << "/" << args[1] << " is co-partitioned with " << *with << ", but " << *with
                << " could not be set to name it back (HTTP " << r2.status << "): "
                << (back.is_object() && back.contains("message") ? text(back["message"]) : r2.body + r2.error)
                << "; run set-assignor " << otherStream << " " << otherGroup << " co-partitioned --with " << args[0] << "/"
                << args[1] << "\n";
      return r2.status == 0 ? kUnreachable : kRefused;
    }
  }
  if (output == "json") {
    // A link made whole is one document: this group's answer, and the other's under "partner".
    std::cout << (back.is_object() ? json{{"group", j}, {"partner", back}} : j).dump(2) << "\n";
    if (name == "redrive" || name == "discard-dead-letters") return named_missing();
    if (name == "scale" && wait) return wait_for_scale(http, token, args[0], waitTimeoutMs, true);
    return kOk;
  }
  if (name == "list-streams") {
    for (const auto& s : j.value("streams", json::array())) std::cout << text(s) << "\n";
  } else if (name == "list-groups") {
    // Each group with its lag and pending records when the coordinator could read the shard streams.
    const auto positions = j.value("groupLag", json::array());
    if (positions.empty()) {
      for (const auto& g : j.value("groups", json::array())) std::cout << text(g) << "\n";
    } else {
      std::vector<std::vector<std::string>> rows;
      for (const auto& p : positions) {
        const auto lag = p.value("lag", json());
        rows.push_back({text(p.value("consumerGroup", json())),
                        lag.is_null() ? "unknown (" + text(p.value("unknownShards", json())) + " shards)" : text(lag),
                        text(p.value("pending", json()))});
      }
      table(std::cout, {"GROUP", "LAG", "PENDING"}, rows);
    }
  } else if (name == "describe") {
    print_describe(j);
  } else if (name == "create-stream" || name == "grow-stream") {
    std::cout << "stream " << text(j.value("streamPrefix", json())) << ": " << text(j.value("shardCount", json()))
              << " shards, key style " << text(j.value("keyStyle", json())) << ", metadata version "
              << text(j.value("metadataVersion", json())) << (r.status == 201 ? " (created)" : "") << "\n";
  } else if (name == "scale") {
    const auto st = j.value("stream", json::object());
    const auto mig = rollback ? j : st.value("lastMigration", json());
    const int draining = st.value("drainingShards", 0);
    std::cout << "stream " << args[0] << ": " << text(st.value("shardCount", json())) << " shards routed to";
    if (draining > 0)
      std::cout << ", " << draining << " draining (read until every group has read and acked them, then retired)";
    if (mig.is_object() && j.value("outcome", std::string()) != "same")
      std::cout << "; migration " << text(mig.value("reshardingId", json())) << " " << migration_text(mig);
    std::cout << ", metadata version " << text(st.value("metadataVersion", json())) << "\n";
  } else if (name == "set-assignor") {
    std::cout << "group " << args[0] << "/" << args[1] << ": assignor " << text(j.value("assignor", json()));
    if (const auto racks = j.value("shardRacks", json::array()); !racks.empty()) std::cout << ", racks of " << racks.size() << " shards";
    std::cout << (j.value("changed", false) ? ", group epoch now " + text(j.value("groupEpoch", json())) + " (shards move revoke-before-assign)"
                                            : " (unchanged)")
              << (j.value("created", false) ? "; the group was made" : "") << "\n";
    if (back.is_object())
      std::cout << "group " << *with << ": assignor co-partitioned, naming " << args[0] << "/" << args[1] << " back"
                << (back.value("changed", false) ? ", group epoch now " + text(back.value("groupEpoch", json())) : std::string(" (unchanged)"))
                << "\nco-partitioned: " << args[0] << "/" << args[1] << " and " << *with << " (shard i of both to one member)\n";
    else if (j.value("partnerLinked", false))
      std::cout << "co-partitioned: " << args[0] << "/" << args[1] << " and " << *with << ", which already named it (shard i of both to one member)\n";
  } else if (name == "target") {
    std::cout << "group " << args[0] << "/" << args[1] << ": target set at group epoch " << text(j.value("groupEpoch", json()));
    const auto unassigned = j.value("unassignedShards", json::array());
    if (!unassigned.empty()) std::cout << "; unassigned (read by nobody): " << join(unassigned);
    std::cout << "\n";
  } else if (name == "remove-member") {
    std::cout << "member " << args[2] << " of " << args[0] << "/" << args[1] << ": " << text(j.value("state", json())) << "\n";
  } else if (name == "delete-group") {
    std::cout << "group " << args[0] << "/" << args[1] << " deleted\n";
  } else if (name == "dead-letters") {
    const auto items = j.value("deadLetters", json::array());
    std::cout << "DEAD LETTERS of " << args[0] << "/" << args[1] << ": " << text(j.value("total", json())) << " (the oldest "
              << items.size() << " shown)\n\n";
    std::vector<std::vector<std::string>> rows;
    for (const auto& d : items)
      rows.push_back({text(d.value("deadLetterId", json())), text(d.value("shard", json())), text(d.value("id", json())),
                      text(d.value("deliveries", json())), text(d.value("atMs", json())), text(d.value("member", json())),
                      text(d.value("error", json()))});
    table(std::cout, {"DEAD-LETTER-ID", "SHARD", "RECORD-ID", "DELIVERIES", "AT-MS", "MEMBER", "ERROR"}, rows);
  } else if (name == "reset-offsets") {
    std::cout << "group " << args[0] << "/" << args[1] << ": position " << text(j.value("position", json())) << " ("
              << to << ") on " << text(j.value("shards", json())) << " shard streams\n";
  } else if (name == "set-stream-racks") {
    const auto racks = j.value("shardRacks", json::array());
    std::cout << "stream " << args[0] << ": ";
    if (racks.empty()) std::cout << "no shard racks";
    else {
      std::string listed;  // as set-stream-racks takes them: "a,,b"
      for (std::size_t i = 0; i < racks.size(); ++i) listed += (i == 0 ? "" : ",") + racks[i].get<std::string>();
      std::cout << "racks of " << racks.size() << " shard(s): " << listed;
    }
    if (j.value("shardRacksFrom", json()).is_string()) std::cout << " (from " << text(j["shardRacksFrom"]) << ")";
    std::cout << (j.value("changed", false) ? ", metadata version now " + text(j.value("metadataVersion", json())) +
                                                  " (rack-aware groups without racks of their own move shards revoke-before-assign)"
                                            : " (unchanged)")
              << "\n";
  } else if (name == "retention" || name == "set-retention") {
    const auto policy = j.value("retention", json::object());
    std::cout << "stream " << text(j.value("streamPrefix", json())) << ": retention " << text(policy.value("policy", json()))
              << (policy.contains("value") ? " " + text(policy["value"]) : std::string()) << "\n";
  } else if (name == "redrive" || name == "discard-dead-letters") {
    std::cout << text(j.value(name == "redrive" ? "redriven" : "discarded", json())) << " dead letter(s) of " << args[0]
              << "/" << args[1] << (name == "redrive" ? " written back to their shard streams" : " discarded") << "\n";
  }
  if (name == "redrive" || name == "discard-dead-letters") return named_missing();
  if (name == "scale" && wait) return wait_for_scale(http, token, args[0], waitTimeoutMs, false);
  return kOk;
}
