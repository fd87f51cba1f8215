#include "http/api.hpp"

#include <nlohmann/json.hpp>

#include "protocol/codec.hpp"
#include "protocol/partition.hpp"

namespace rsc::http {

using nlohmann::json;
using protocol::HeartbeatStatus;

bool glob_match(const std::string& p, const std::string& t) {
  // Iterative '*' matching with backtracking to the last star.
  std::size_t i = 0, j = 0, star = std::string::npos, mark = 0;
  while (j < t.size()) {
    if (i < p.size() && p[i] == '*') {
      star = i++;
      mark = j;
    } else if (i < p.size() && p[i] == t[j]) {
      ++i;
      ++j;
    } else if (star != std::string::npos) {
      i = star + 1;
      j = ++mark;
    } else {
      return false;
    }
  }
  while (i < p.size() && p[i] == '*') ++i;
  return i == p.size();
}

bool constant_time_equal(const std::string& a, const std::string& b) {
  // Every byte of `a` is compared (against b, or against a's own bytes when b is shorter), and the
  // length difference is folded in: no early exit.
  unsigned diff = static_cast<unsigned>(a.size() ^ b.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    const unsigned char x = static_cast<unsigned char>(a[i]);
    const unsigned char y = i < b.size() ? static_cast<unsigned char>(b[i]) : static_cast<unsigned char>(~x);
    diff |= static_cast<unsigned>(x ^ y);
  }
  return diff == 0;
}

AuthDecision authorize(const AuthConfig& auth, const std::string& header, Need need, const std::string& stream,
                       const std::string& group) {
  if (need == Need::Public || auth.open()) return {};
  const std::string prefix = "Bearer ";
  if (header.size() <= prefix.size() || header.compare(0, prefix.size(), prefix) != 0)
    return {false, 401, "missing bearer token (Authorization: Bearer <token>)"};
  const std::string presented = header.substr(prefix.size());
  // Compared with every configured token, each in constant time, before looking at the match.
  const Token* match = nullptr;
  for (const auto& t : auth.tokens) {
    const bool equal = constant_time_equal(presented, t.token);
    if (equal && match == nullptr) match = &t;
  }
  if (match != nullptr) {
    const Token& t = *match;
    auto refuse = [&](std::string why) { return AuthDecision{false, 403, std::move(why), &t}; };
    if (need == Need::Admin && t.role != "admin") return refuse("this token's role may not do admin calls");
    if (!stream.empty() && !matches_any(t.streams, stream)) return refuse("token not allowed for stream " + stream);
    if (!group.empty() && !matches_any(t.groups, group)) return refuse("token not allowed for group " + group);
    return {true, 200, {}, &t};
  }
  return {false, 401, "unknown bearer token"};
}

bool matches_any(const std::vector<std::string>& patterns, const std::string& value) {
  for (const auto& p : patterns)
    if (glob_match(p, value)) return true;
  return false;
}

std::string caller_of(const AuthConfig& auth, const AuthDecision& decision) {
  if (auth.open()) return "anonymous";
  if (decision.token == nullptr) return "unauthenticated";
  if (!decision.token->name.empty()) return decision.token->name;
  return "token#" + std::to_string(decision.token - auth.tokens.data());
}

namespace {

// Views into `path` (routing allocates nothing per request but the names it keeps).
std::vector<std::string_view> split_path(std::string_view path) {
  std::vector<std::string_view> parts;
  parts.reserve(10);
  std::size_t i = 0;
  while (i < path.size()) {
    while (i < path.size() && path[i] == '/') ++i;
    if (i >= path.size()) break;
    auto j = path.find('/', i);
    if (j == std::string_view::npos) j = path.size();
    parts.push_back(path.substr(i, j - i));
    i = j;
  }
  return parts;
}

Routed method_not_allowed(const std::string& method, const std::string& allow) {
  return {std::nullopt, {405, "method " + method + " is not allowed here (allowed: " + allow + ")", allow}};
}

}  // namespace

const std::vector<ServedRoute>& served_routes() {
  static const std::string s = "/coord/v1/streams/{streamPrefix}";
  static const std::string g = s + "/groups/{consumerGroup}";
  static const std::vector<ServedRoute> all{
      {"POST", g + "/members/{memberId}/heartbeat"},
      {"GET", "/"},
      {"HEAD", "/"},
      {"GET", "/coord/v1/streams"},
      {"GET", s},
      {"PUT", s},
      {"POST", s},
      {"GET", s + "/groups"},
      {"GET", g},
      {"DELETE", g},
      {"GET", g + "/producer-routing"},
      {"GET", g + "/owner"},
      {"DELETE", g + "/members/{memberId}"},
      {"GET", g + "/dead-letters"},
      {"POST", g + "/dead-letters/redrive"},
      {"POST", g + "/dead-letters/discard"},
      {"POST", g + "/reset-offsets"},
      {"GET", s + "/retention"},
      {"PUT", s + "/retention"},
      {"POST", s + "/scale"},
      {"POST", s + "/scale/rollback"},
      {"POST", g + "/scale"},
      {"POST", g + "/migrations/{reshardingId}/rollback"},
      {"GET", "/metrics"},
      {"HEAD", "/metrics"},
      {"GET", "/healthz"},
      {"HEAD", "/healthz"},
      {"GET", "/readyz"},
      {"HEAD", "/readyz"},
  };
  return all;
}

Routed route(const std::string& method, const std::string& target) {
  std::string_view path(target);
  path = path.substr(0, path.find('?'));
  // The absolute form (RFC 9112 §3.2.2: "GET http://host/healthz") names the same resource.
  for (std::string_view sc : {std::string_view("http://"), std::string_view("https://")}) {
    if (path.size() > sc.size() && std::equal(sc.begin(), sc.end(), path.begin(), [](char x, char y) {
          return x == std::tolower(static_cast<unsigned char>(y));
        })) {
      const auto slash = path.find('/', sc.size());
      path = slash == std::string_view::npos ? std::string_view("/") : path.substr(slash);
    }
  }
  const auto p = split_path(path);
  using K = Route::Kind;
  // A route to `kind` with the names from the path (views into the target) copied out.
  auto to = [](K kind, std::string_view s = {}, std::string_view g = {}, std::string_view m = {}) -> Routed {
    return {Route{kind, std::string(s), std::string(g), std::string(m), {}}, {}};
  };
  auto only = [&](const char* allowed, K kind, std::string_view s = {}, std::string_view g = {},
                  std::string_view m = {}) -> Routed {
    if (method != allowed) return method_not_allowed(method, allowed);
    return to(kind, s, g, m);
  };
  // Probes and metrics answer HEAD too (load balancers use it): the same answer without a body.
  auto probe = [&](K kind) -> Routed {
    if (method != "GET" && method != "HEAD") return method_not_allowed(method, "GET, HEAD");
    return {Route{kind, {}, {}, {}, {}}, {}};
  };
  if (p.empty()) return probe(K::StatusPage);
  if (p.size() == 3 && p[0] == "coord" && p[1] == "v1" && p[2] == "streams") return only("GET", K::ListStreams);
  if (p.size() == 1 && p[0] == "metrics") return probe(K::Metrics);
  if (p.size() == 1 && p[0] == "healthz") return probe(K::Health);
  if (p.size() == 1 && p[0] == "readyz") return probe(K::Ready);
  if (p.size() >= 4 && p[0] == "coord" && p[1] == "v1" && p[2] == "streams") {
    const std::string_view s = p[3];
    if (p.size() == 4) {
      if (method == "GET") return to(K::GetStream, s);
      if (method == "PUT") return to(K::PutStream, s);
      if (method == "POST") return to(K::PostStream, s);
      return method_not_allowed(method, "GET, PUT, POST");
    }
    if (p.size() == 5 && p[4] == "scale") return only("POST", K::ScaleStream, s);
    if (p.size() == 6 && p[4] == "scale" && p[5] == "rollback") return only("POST", K::RollbackScale, s);
    if (p.size() == 5 && p[4] == "retention") {
      if (method == "GET") return to(K::GetRetention, s);
      if (method == "PUT") return to(K::PutRetention, s);
      return method_not_allowed(method, "GET, PUT");
    }
    if (p[4] == "groups") {
      if (p.size() == 5) return only("GET", K::ListGroups, s);
      if (p.size() == 6) {
        if (method == "GET") return to(K::Describe, s, p[5]);
        if (method == "DELETE") return to(K::DeleteGroup, s, p[5]);
        return method_not_allowed(method, "GET, DELETE");
      }
      if (p.size() == 7 && p[6] == "producer-routing") return only("GET", K::ProducerRouting, s, p[5]);
      if (p.size() == 7 && p[6] == "owner") return only("GET", K::GroupOwner, s, p[5]);
      // The reference implementation's per-group scale paths: a stream's shards are one for all
      // its groups, so they change the stream.
      if (p.size() == 7 && p[6] == "scale") return only("POST", K::ScaleStream, s, p[5]);
      if (p.size() == 9 && p[6] == "migrations" && p[8] == "rollback") {
        if (method != "POST") return method_not_allowed(method, "POST");
        return {Route{K::RollbackScale, std::string(s), std::string(p[5]), {}, std::string(p[7])}, {}};
      }
      if (p.size() == 8 && p[6] == "members") return only("DELETE", K::RemoveMember, s, p[5], p[7]);
      if (p.size() == 7 && p[6] == "dead-letters") return only("GET", K::DeadLetters, s, p[5]);
      if (p.size() == 7 && p[6] == "reset-offsets") return only("POST", K::ResetOffsets, s, p[5]);
      if (p.size() == 8 && p[6] == "dead-letters" && p[7] == "redrive") return only("POST", K::Redrive, s, p[5]);
      if (p.size() == 8 && p[6] == "dead-letters" && p[7] == "discard") return only("POST", K::DiscardDeadLetters, s, p[5]);
      if (p.size() == 9 && p[6] == "members" && p[8] == "heartbeat") return only("POST", K::Heartbeat, s, p[5], p[7]);
    }
  }
  return {std::nullopt, {404, "no such endpoint: " + std::string(path), {}}};
}

HttpResponse plain_error(int status, const std::string& error, const std::string& message) {
  return {status, protocol::dump(json{{"error", error}, {"status", status}, {"message", message}}), "application/json",
          {}};
}

namespace {

HttpResponse json_ok(const std::string& body, int status = 200) { return {status, body, "application/json", {}}; }

HttpResponse heartbeat_answer(const protocol::HeartbeatResponse& r, bool authenticated = true) {
  HttpResponse h{protocol::http_status_for(r.status, authenticated), protocol::encode(r), "application/json", {}};
  if (r.status == HeartbeatStatus::RETRY) h.headers.emplace_back("Retry-After", "1");
  return h;
}

// A heartbeat refused before any group saw it: the response's shape, with the timings filled in.
HttpResponse refused_heartbeat(const Backend& backend, std::string_view requestId, const std::string& member,
                               HeartbeatStatus status, std::string message, int httpStatus = 0,
                               std::string field = {}) {
  const auto r = protocol::refusal(requestId, member, status, std::move(message), backend.timings(), std::move(field));
  auto h = heartbeat_answer(r);
  if (httpStatus != 0) h.status = httpStatus;
  return h;
}

// What a producer needs to put a record on the right shard: the key of every shard stream (with
// its Redis Cluster slot) and how keys are partitioned.
std::string producer_routing_json(const protocol::StreamMetadata& m, const std::string& group) {
  json shards = json::array();
  for (int32_t i = 0; i < m.shardCount; ++i) {
    const auto key = protocol::shard_stream_key(m.streamPrefix, m.keyStyle, i);
    shards.push_back({{"shardIndex", i}, {"streamKey", key}, {"redisSlot", protocol::redis_key_slot(key)}});
  }
  return protocol::dump(json{{"streamPrefix", m.streamPrefix},
                             {"consumerGroup", group},
                             {"metadataVersion", m.metadataVersion},
                             {"shardCount", m.shardCount},
                             {"keyStyle", protocol::to_string(m.keyStyle)},
                             {"streamKeyPattern", protocol::stream_key_pattern(m.streamPrefix, m.keyStyle)},
                             {"partitioner", protocol::kPartitionerName},
                             {"shards", std::move(shards)}});
}

// A stream entry id: MS-SEQ, both decimal.
bool valid_stream_id(const std::string& id);

}  // namespace

std::optional<std::string> reset_position(const std::string& to) {
  if (to == "earliest") return std::string("0");
  if (to == "latest") return std::string("$");
  if (valid_stream_id(to)) return to;
  if (to.empty() || to.size() > 19 || to.find_first_not_of("0123456789") != std::string::npos) return std::nullopt;
  const unsigned long long ms = std::stoull(to);
  if (ms == 0) return std::string("0");
  return std::to_string(ms - 1) + "-18446744073709551615";  // every id of ms - 1, so delivery starts at ms
}

namespace {

// A stream entry id: MS-SEQ, both decimal.
bool valid_stream_id(const std::string& id) {
  const auto dash = id.find('-');
  if (dash == std::string::npos || dash == 0 || dash + 1 >= id.size() || id.size() > 41) return false;
  for (std::size_t i = 0; i < id.size(); ++i)
    if (i != dash && !std::isdigit(static_cast<unsigned char>(id[i]))) return false;
  return true;
}

json dead_letters_json(const std::string& stream, const std::string& group, const protocol::DeadLetterPage& page) {
  json items = json::array();
  for (const auto& d : page.items) {
    json fields = json::object();
    for (const auto& [k, v] : d.fields) fields[k] = v;
    items.push_back({{"deadLetterId", d.deadLetterId}, {"id", d.id}, {"shard", d.shard}, {"stream", d.stream},
                     {"deliveries", d.deliveries}, {"error", d.error}, {"member", d.member}, {"atMs", d.atMs},
                     {"fields", std::move(fields)}});
  }
  return json{{"streamPrefix", stream}, {"consumerGroup", group}, {"total", page.total}, {"deadLetters", std::move(items)}};
}

// The answer to a scale or a rollback, in the reference implementation's shapes: 202 with
// {streamPrefix, targetShardCount, affectedConsumerGroups, migrations[]} for a scale, the
// Migration for a rollback; each with the stream as it is now ("stream").
HttpResponse scale_answer(const std::string& stream, const std::string& migrationId, const ScaleAsk& ask, const ScaleDone& d) {
  const std::string& o = d.outcome;
  if (o == "no stream") return plain_error(404, "STREAM_NOT_FOUND", "no such stream: " + stream + "; create it first (POST or PUT)");
  const auto& m = d.meta;
  const std::string current = m.migration ? m.migration->reshardingId : std::string();
  if (ask.rollback) {
    if (!migrationId.empty() && migrationId != current && !(m.migration && migrationId == "noop"))
      return plain_error(404, "MIGRATION_NOT_FOUND",
                         "stream " + stream + " has no migration " + migrationId +
                             (current.empty() ? std::string() : " (its last one is " + current + ")"));
    if (o == "nothing to roll back")
      return plain_error(422, "ROLLBACK_NOT_ALLOWED",
                         "stream " + stream + " has no shrink in progress to roll back" +
                             (m.migration ? " (its last migration, " + current + ", is " +
                                                std::string(protocol::to_string(m.migration->state)) + ")"
                                          : std::string()));
    json body = protocol::to_json(*m.migration);
    body["stream"] = protocol::to_json(m);
    return json_ok(protocol::dump(body), 202);
  }
  if (o == "busy" && m.drainingShards() == 0) {  // busy deleting retired shard streams: moments
    auto r = plain_error(409, "ACTIVE_MIGRATION_EXISTS", protocol::retired_keys_deleting(stream));
    r.headers.emplace_back("Retry-After", "1");
    return r;
  }
  if (o == "busy")
    return plain_error(409, "ACTIVE_MIGRATION_EXISTS",
                       "stream " + stream + " is scaling in: shards " + std::to_string(m.shardCount) + ".." +
                           std::to_string(m.readShardCount() - 1) + " still drain (migration " + current +
                           "); one change at a time: wait for it or roll it back (POST .../scale/rollback)");
  json migrations = json::array();
  if (o != "same" && m.migration)
    for (const auto& g : d.consumerGroups) {
      json e = protocol::to_json(*m.migration);
      e["consumerGroup"] = g;
      migrations.push_back(std::move(e));
    }
  json body{{"streamPrefix", stream},
            {"targetShardCount", ask.request.targetShardCount},
            {"affectedConsumerGroups", d.consumerGroups},
            {"migrations", std::move(migrations)},
            {"outcome", o},
            {"stream", protocol::to_json(m)}};
  return json_ok(protocol::dump(body), o == "same" ? 200 : 202);
}

HttpResponse store_error(const Problem& e) {
  using K = Problem::Kind;
  switch (e.kind) {
    case K::Unavailable: {
      auto r = plain_error(503, "RETRY", e.message);
      r.headers.emplace_back("Retry-After", "1");
      return r;
    }
    case K::Conflict: return plain_error(409, "CONFLICT", e.message);
    case K::Corrupt: return plain_error(500, "STORE_CORRUPT", e.message);
    case K::Failed: return plain_error(500, "STORE_ERROR", e.message);
  }
  return plain_error(500, "STORE_ERROR", e.message);
}

// The value of `name` in the target's query string, if present.
std::optional<std::string> query_param(const std::string& target, const std::string& name) {
  const auto q = target.find('?');
  if (q == std::string::npos) return std::nullopt;
  std::size_t i = q + 1;
  while (i <= target.size()) {
    auto amp = target.find('&', i);
    if (amp == std::string::npos) amp = target.size();
    const std::string pair = target.substr(i, amp - i);
    const auto eq = pair.find('=');
    if (pair.substr(0, eq) == name) return eq == std::string::npos ? std::string() : pair.substr(eq + 1);
    i = amp + 1;
  }
  return std::nullopt;
}

bool is_json(const std::string& contentType) {
  std::string_view base(contentType);
  base = base.substr(0, base.find(';'));
  while (!base.empty() && base.back() == ' ') base.remove_suffix(1);
  constexpr std::string_view want = "application/json";
  return base.size() == want.size() && std::equal(want.begin(), want.end(), base.begin(), [](char w, char c) {
           return w == std::tolower(static_cast<unsigned char>(c));
         });
}

// A value in an audit line: as is when it is one plain word, quoted (with \" and \\ escaped, and
// control characters as \xNN) otherwise, so a line is always one line and splits unambiguously.
std::string audit_value(const std::string& v) {
  bool plain = !v.empty();
  for (unsigned char c : v)
    if (c <= ' ' || c == '"' || c == '\\' || c == '=' || c >= 0x7f) plain = false;
  if (plain) return v;
  std::string out = "\"";
  for (unsigned char c : v) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < ' ' || c == 0x7f) {
      static const char* hex = "0123456789abcdef";
      out += "\\x";
      out += hex[c >> 4];
      out += hex[c & 15];
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

}  // namespace

std::string audit_line(const std::string& caller, const std::string& action, const std::string& target,
                       const HttpResponse& answer) {
  std::string outcome;
  const auto body = json::parse(answer.body, nullptr, false);
  if (answer.status >= 200 && answer.status < 300) {
    outcome = "ok";
    if (body.is_object()) {
      for (const char* field : {"shardCount", "metadataVersion", "keyStyle", "state", "deleted", "redriven", "discarded", "notFound", "position", "shards"})
        if (body.contains(field)) outcome += std::string(" ") + field + "=" + body[field].dump();
    }
  } else {
    outcome = "refused";
    if (body.is_object() && body.contains("error") && body["error"].is_string())
      outcome += " " + body["error"].get<std::string>();
    if (body.is_object() && body.contains("message") && body["message"].is_string())
      outcome += ": " + body["message"].get<std::string>();
  }
  return "audit caller=" + audit_value(caller) + " action=" + audit_value(action) + " target=" + audit_value(target) +
         " status=" + std::to_string(answer.status) + " outcome=" + audit_value(outcome);
}

namespace {
const std::string kNoOwner;
// Names the group's owner in an answer, unless the answer (forwarded from the owner) already does.
void name_owner(HttpResponse& r, const std::string& url) {
  if (url.empty()) return;
  for (const auto& h : r.headers)
    if (h.first == kGroupOwnerHeader) return;
  r.headers.emplace_back(kGroupOwnerHeader, url);
}
}  // namespace

void handle_request(const HttpRequest& req, Backend& backend, const AuthConfig& auth, Respond given) {
  // HEAD: the same answer as GET, without its body.
  // Wrappers are made only when needed: a std::function copy allocates (a heartbeat makes none).
  std::optional<Respond> headWrap;
  if (req.method == "HEAD")
    headWrap.emplace([given](HttpResponse r) {
      r.body.clear();
      given(std::move(r));
    });
  Respond& respondAll = headWrap ? *headWrap : given;
  auto routed = route(req.method, req.target);
  if (!routed.route) {
    auto r = plain_error(routed.error.status, routed.error.status == 405 ? "METHOD_NOT_ALLOWED" : "NOT_FOUND",
                         routed.error.message);
    if (!routed.error.allow.empty()) r.headers.emplace_back("Allow", routed.error.allow);
    return respondAll(std::move(r));
  }
  Route& rt = *routed.route;
  using K = Route::Kind;
  // An admin call leaves one audit line, whatever its answer (refusals included).
  const char* action = rt.kind == K::PostStream     ? "create-stream"
                       : rt.kind == K::PutStream    ? "put-stream"
                       : rt.kind == K::DeleteGroup  ? "delete-group"
                       : rt.kind == K::RemoveMember ? "remove-member"
                       : rt.kind == K::Redrive      ? "redrive-dead-letters"
                       : rt.kind == K::DiscardDeadLetters ? "discard-dead-letters"
                       : rt.kind == K::ResetOffsets ? "reset-offsets"
                       : rt.kind == K::PutRetention ? "set-retention"
                       : rt.kind == K::ScaleStream  ? "scale-stream"
                       : rt.kind == K::RollbackScale ? "rollback-scale"
                                                    : nullptr;
  // Who called is known after authorization; only an admin call keeps a place for it.
  auto caller = action == nullptr ? nullptr : std::make_shared<std::string>(caller_of(auth, {}));
  std::optional<Respond> auditWrap;
  if (action != nullptr)
    auditWrap.emplace([&backend, respondAll, caller, action, rt](HttpResponse r) {
      std::string target = rt.stream;
      if (!rt.group.empty()) target += "/" + rt.group;
      if (!rt.member.empty()) target += "/" + rt.member;
      backend.audit(audit_line(*caller, action, target, r));
      respondAll(std::move(r));
    });
  Respond& respond = auditWrap ? *auditWrap : respondAll;

  // Names in the path are validated before anything else touches them.
  for (const auto& [field, value] : {std::pair<const char*, const std::string*>{"streamPrefix", &rt.stream},
                                     {"consumerGroup", &rt.group},
                                     {"memberId", &rt.member}}) {
    if (value->empty()) continue;  // not part of this route
    if (auto e = protocol::validate_name(field, *value)) {
      if (rt.kind == K::Heartbeat)
        return respond(refused_heartbeat(backend, "", rt.member, HeartbeatStatus::INVALID_REQUEST, e->message, 0,
                                         e->field));
      return respond(plain_error(400, "INVALID_REQUEST", e->message));
    }
  }

  Need need = Need::Public;
  switch (rt.kind) {
    case K::Heartbeat:
    case K::GetStream:
    case K::GetRetention:
    case K::ListGroups:
    case K::ListStreams:
    case K::Describe:
    case K::GroupOwner:
    case K::ProducerRouting: need = Need::Member; break;
    case K::PutStream:
    case K::PostStream:
    case K::DeleteGroup:
    case K::RemoveMember:
    case K::DeadLetters:  // what members could not process: the records' data, for operators
    case K::Redrive:
    case K::DiscardDeadLetters:
    case K::ResetOffsets:
    case K::ScaleStream:
    case K::RollbackScale:
    case K::PutRetention: need = Need::Admin; break;
    case K::Metrics: need = auth.metricsPublic ? Need::Public : Need::Member; break;
    default: need = Need::Public;
  }
  const auto decision = authorize(auth, req.authorization, need, rt.stream, rt.group);
  if (caller) *caller = caller_of(auth, decision);
  if (!decision.allowed) {
    if (rt.kind == K::Heartbeat) {
      auto h = refused_heartbeat(backend, "", rt.member, HeartbeatStatus::GROUP_AUTHORIZATION_FAILED, decision.message,
                                 decision.status);
      if (decision.status == 401) h.headers.emplace_back("WWW-Authenticate", "Bearer");
      return respond(std::move(h));
    }
    auto r = plain_error(decision.status, "GROUP_AUTHORIZATION_FAILED", decision.message);
    if (decision.status == 401) r.headers.emplace_back("WWW-Authenticate", "Bearer");
    return respond(std::move(r));
  }
  if ((rt.kind == K::Heartbeat || rt.kind == K::PutStream || rt.kind == K::PostStream || rt.kind == K::PutRetention ||
       rt.kind == K::ScaleStream) &&
      !is_json(req.contentType))
    return respond(plain_error(415, "UNSUPPORTED_MEDIA_TYPE",
                               "Content-Type must be application/json, not '" + req.contentType + "'"));

  // Every answer about a group names the pod that owns it (kGroupOwnerHeader): rsc's clients send
  // the group's next calls there. An answer forwarded from the owner carries the owner's own.
  std::optional<Placement> placement;
  if (!rt.group.empty() && rt.kind != K::ScaleStream && rt.kind != K::RollbackScale) {
    placement = backend.place(protocol::GroupKey{rt.stream, rt.group});
    if (rt.kind == K::GroupOwner) {
      if (placement->ownerUrl.empty() || placement->kind == Placement::Kind::Nowhere) {
        auto r = plain_error(503, "RETRY",
                             "no pod owns the group now" + (placement->why.empty() ? "" : ": " + placement->why));
        r.headers.emplace_back("Retry-After", "1");
        return respond(std::move(r));
      }
      auto r = json_ok(protocol::dump(json{{"streamPrefix", rt.stream},
                                           {"consumerGroup", rt.group},
                                           {"owner", placement->ownerUrl},
                                           {"podId", placement->podId},
                                           {"term", placement->term}}));
      r.headers.emplace_back(kGroupOwnerHeader, placement->ownerUrl);
      return respond(std::move(r));
    }
  }
  // The owner's URL when one is known ("" while nobody owns the group).
  const std::string& ownerUrl = placement && placement->kind != Placement::Kind::Nowhere ? placement->ownerUrl : kNoOwner;

  // A group's heartbeats and admin calls are served by its owner (group/pod_authority.hpp): at
  // another pod, this one forwards them and hands back the answer, so members keep one URL.
  if (rt.kind == K::Heartbeat || rt.kind == K::RemoveMember || rt.kind == K::DeleteGroup || rt.kind == K::ResetOffsets) {
    auto& placed = *placement;
    if (placed.kind != Placement::Kind::Here) {
      // Nobody can serve it now: RETRY, as for a store that does not answer.
      auto unavailable = [&backend, kind = rt.kind, member = rt.member, body = req.body](const std::string& why) {
        if (kind == K::Heartbeat) {
          const auto decoded = protocol::decode_heartbeat_request(body, member);
          const std::string requestId = decoded.ok() ? decoded.value->requestId : decoded.requestId;
          return refused_heartbeat(backend, requestId, member, HeartbeatStatus::RETRY, "coordinator unavailable: " + why);
        }
        auto r = plain_error(503, "RETRY", why);
        r.headers.emplace_back("Retry-After", "1");
        return r;
      };
      if (placed.kind == Placement::Kind::Elsewhere && req.forwardedBy.empty() && req.forwarder != nullptr) {
        // The owner writes the admin call's audit line; this pod's would be a second one.
        return req.forwarder->forward(
            placed.address, req,
            [&backend, respondAll, url = placed.ownerUrl](HttpResponse r) {
              backend.forwarded(true);
              // The owner names itself; a pod of an older version does not: say where it is.
              name_owner(r, url);
              respondAll(std::move(r));
            },
            [&backend, respondAll, unavailable, pod = placed.podId](const std::string& why) {
              backend.forwarded(false);
              respondAll(unavailable("pod " + pod + " (which serves the group) " + why));
            });
      }
      if (placed.kind == Placement::Kind::Elsewhere)
        placed.why = req.forwardedBy.empty() ? "this server cannot forward to pod " + placed.podId
                                              : "forwarded by pod " + req.forwardedBy + ", but pod " + placed.podId +
                                                    " serves the group now";
      auto r = unavailable(placed.why);
      name_owner(r, ownerUrl);
      return respond(std::move(r));
    }
  }
  // Every other answer about a group names its owner too: a heartbeat's where it is made (below),
  // the rest through a wrapper that takes the callback over (its last use: the forwarding above
  // has returned).
  std::optional<Respond> ownerWrap;
  if (!ownerUrl.empty() && rt.kind != K::Heartbeat)
    ownerWrap.emplace([next = std::move(respond), url = ownerUrl](HttpResponse r) {
      name_owner(r, url);
      next(std::move(r));
    });
  Respond& answer = ownerWrap ? *ownerWrap : respond;

  switch (rt.kind) {
    case K::Heartbeat: {
      auto decoded = protocol::decode_heartbeat_request(req.body, rt.member);
      if (!decoded.ok()) {
        // A body that is no JSON object at all is not a heartbeat to decide on: HTTP 400. A
        // heartbeat with a wrong field is a decision (INVALID_REQUEST), answered 200 like the rest.
        const bool notAnObject = decoded.error.field.empty();
        auto r = refused_heartbeat(backend, decoded.requestId, rt.member, decoded.error.status, decoded.error.message,
                                   notAnObject ? 400 : 0, decoded.error.field);
        name_owner(r, ownerUrl);
        return answer(std::move(r));
      }
      // The answer callback takes the given one over (its last use here): no copy of it.
      backend.heartbeat({std::move(rt.stream), std::move(rt.group)}, std::move(*decoded.value),
                        [answer = std::move(answer), url = ownerUrl](protocol::HeartbeatResponse r) {
                          auto h = heartbeat_answer(r);
                          name_owner(h, url);
                          answer(std::move(h));
                        });
      return;
    }
    case K::PutStream:
    case K::PostStream: {
      const bool post = rt.kind == K::PostStream;
      auto n = protocol::decode_stream_request(req.body, post);
      if (!n.ok()) return answer(plain_error(400, "INVALID_REQUEST", n.error.message));
      const auto asked = *n.value;
      backend.write_stream(rt.stream, asked, post, [answer, post, asked](Answer<StreamWritten> r) {
        if (!r.ok()) return answer(store_error(r.error));
        const auto& w = *r.value;
        if (w.outcome == StreamWritten::Outcome::Created) return answer(json_ok(protocol::encode(w.meta), post ? 201 : 200));
        if (w.outcome == StreamWritten::Outcome::Exists) {
          // POST on a stream that exists: fine when it is what was asked for, a conflict otherwise.
          const bool same = (!asked.shardCount || *asked.shardCount == w.meta.shardCount) &&
                            (!asked.keyStyle || *asked.keyStyle == w.meta.keyStyle);
          if (!same)
            return answer(plain_error(
                409, "CONFLICT",
                "stream " + w.meta.streamPrefix + " exists with " + std::to_string(w.meta.shardCount) +
                    " shards and keyStyle " + std::string(protocol::to_string(w.meta.keyStyle)) +
                    "; grow it with PUT {\"shardCount\": N}"));
        }
        answer(json_ok(protocol::encode(w.meta)));
      });
      return;
    }
    case K::ProducerRouting:
      backend.producer_routing({rt.stream, rt.group}, [answer, rt](Answer<std::optional<protocol::StreamMetadata>> r) {
        if (!r.ok()) return answer(store_error(r.error));
        if (!r.value->has_value())
          return answer(plain_error(404, "NOT_FOUND", "no such stream: " + rt.stream + "; create it first (POST or PUT)"));
        answer(json_ok(producer_routing_json(**r.value, rt.group)));
      });
      return;
    case K::GetRetention:
      backend.get_retention(rt.stream, [answer, s = rt.stream](Answer<std::optional<protocol::Retention>> r) {
        if (!r.ok()) return answer(store_error(r.error));
        if (!r.value->has_value()) return answer(plain_error(404, "NOT_FOUND", "no such stream: " + s));
        answer(json_ok(protocol::dump(json{{"streamPrefix", s}, {"retention", protocol::to_json(**r.value)}})));
      });
      return;
    case K::PutRetention: {
      auto asked = protocol::decode_retention_body(req.body);
      if (!asked.ok()) return answer(plain_error(400, "INVALID_REQUEST", asked.error.message));
      backend.set_retention(rt.stream, *asked.value, [answer, s = rt.stream, r = *asked.value](Answer<bool> set) {
        if (!set.ok()) return answer(store_error(set.error));
        if (!*set.value) return answer(plain_error(404, "NOT_FOUND", "no such stream: " + s));
        answer(json_ok(protocol::dump(json{{"streamPrefix", s}, {"retention", protocol::to_json(r)}})));
      });
      return;
    }
    case K::ScaleStream:
    case K::RollbackScale: {
      const bool rollback = rt.kind == K::RollbackScale;
      auto asked = protocol::decode_scale_request(req.body, rollback);
      if (!asked.ok()) return answer(plain_error(400, "INVALID_REQUEST", asked.error.message));
      ScaleAsk ask{rollback, *asked.value};
      backend.scale_stream(rt.stream, ask, [answer, rt, ask](Answer<ScaleDone> r) {
        if (!r.ok()) return answer(store_error(r.error));
        answer(scale_answer(rt.stream, rt.migration, ask, *r.value));
      });
      return;
    }
    case K::GetStream:
      backend.get_stream(rt.stream, [answer, s = rt.stream](Answer<std::optional<protocol::StreamMetadata>> r) {
        if (!r.ok()) return answer(store_error(r.error));
        if (!r.value->has_value()) return answer(plain_error(404, "NOT_FOUND", "no such stream: " + s));
        answer(json_ok(protocol::encode(**r.value)));
      });
      return;
    case K::ListStreams: {
      // A token scoped to some streams sees only those.
      const Token* t = decision.token;
      backend.list_streams([answer, t](Answer<std::vector<std::string>> r) {
        if (!r.ok()) return answer(store_error(r.error));
        json names = json::array();
        for (const auto& s : *r.value)
          if (t == nullptr || matches_any(t->streams, s)) names.push_back(s);
        answer(json_ok(protocol::dump(json{{"streams", std::move(names)}})));
      });
      return;
    }
    case K::StatusPage: {
      HttpResponse page{200, status_page_html(), "text/html; charset=utf-8", {}};
      // The page's script is inline: nothing else may run, nothing is fetched from elsewhere.
      page.headers.emplace_back("Content-Security-Policy",
                                "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; "
                                "connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'");
      page.headers.emplace_back("X-Content-Type-Options", "nosniff");
      page.headers.emplace_back("Referrer-Policy", "no-referrer");
      page.headers.emplace_back("Cache-Control", "no-cache");
      return answer(std::move(page));
    }
    case K::ListGroups:
      backend.list_groups(rt.stream, [answer, s = rt.stream](Answer<std::vector<std::string>> r) {
        if (!r.ok()) return answer(store_error(r.error));
        answer(json_ok(protocol::dump(json{{"streamPrefix", s}, {"groups", *r.value}})));
      });
      return;
    case K::Describe:
      backend.describe({rt.stream, rt.group}, [answer, rt](Answer<std::optional<std::string>> r) {
        if (!r.ok()) return answer(store_error(r.error));
        if (!r.value->has_value())
          return answer(plain_error(404, "NOT_FOUND", "no such group: " + rt.stream + "/" + rt.group));
        answer(json_ok(**r.value));
      });
      return;
    case K::DeleteGroup: {
      const auto q = query_param(req.target, "fenceMembers");
      if (q && *q != "true" && *q != "false")
        return answer(plain_error(400, "INVALID_REQUEST", "fenceMembers: must be true or false, not '" + *q + "'"));
      const bool fence = q && *q == "true";
      backend.delete_group({rt.stream, rt.group}, fence, [answer, rt](Answer<Deletion> r) {
        if (!r.ok()) return answer(store_error(r.error));
        switch (*r.value) {
          case Deletion::NotFound:
            return answer(plain_error(404, "NOT_FOUND", "no such group: " + rt.stream + "/" + rt.group));
          case Deletion::HasLiveMembers:
            return answer(plain_error(409, "GROUP_NOT_EMPTY",
                                       "group " + rt.stream + "/" + rt.group +
                                           " has live members; remove them first or send ?fenceMembers=true"));
          case Deletion::Deleted:
            return answer(json_ok(protocol::dump(
                json{{"streamPrefix", rt.stream}, {"consumerGroup", rt.group}, {"deleted", true}})));
        }
      });
      return;
    }
    case K::RemoveMember:
      backend.remove_member({rt.stream, rt.group}, rt.member, [answer, rt](Answer<bool> r) {
        if (!r.ok()) return answer(store_error(r.error));
        if (!*r.value) return answer(plain_error(404, "NOT_FOUND", "no live member " + rt.member + " in " + rt.group));
        answer(json_ok(protocol::dump(json{{"memberId", rt.member}, {"state", "FENCED"}})));
      });
      return;
    case K::DeadLetters: {
      int64_t limit = 100;
      if (const auto q = query_param(req.target, "count")) {
        char* end = nullptr;
        limit = std::strtoll(q->c_str(), &end, 10);
        if (q->empty() || *end != '\0' || limit < 1 || limit > 1000)
          return answer(plain_error(400, "INVALID_REQUEST", "count: a number from 1 to 1000, not '" + *q + "'"));
      }
      backend.dead_letters({rt.stream, rt.group}, limit, [answer, rt](Answer<protocol::DeadLetterPage> r) {
        if (!r.ok()) return answer(store_error(r.error));
        if (!r.value->groupFound)
          return answer(plain_error(404, "NOT_FOUND", "no such group: " + rt.stream + "/" + rt.group));
        answer(json_ok(protocol::dump(dead_letters_json(rt.stream, rt.group, *r.value))));
      });
      return;
    }
    case K::Redrive:
    case K::DiscardDeadLetters: {
      // {"deadLetterIds": ["..."]} or {"all": true} (at most 1000 at a time).
      const auto body = json::parse(req.body, nullptr, false);
      std::vector<std::string> ids;
      bool all = false;
      std::string bad;
      if (!body.is_object()) {
        bad = "the body must be a JSON object: {\"deadLetterIds\": [...]} or {\"all\": true}";
      } else {
        for (const auto& [k, v] : body.items())
          if (k != "all" && k != "deadLetterIds") {
            bad = "unknown field '" + k + "': the body is {\"deadLetterIds\": [...]} or {\"all\": true}";
            break;
          }
        if (body.contains("all") && !body["all"].is_boolean()) bad = "all: true or false";
        all = body.contains("all") && body["all"].is_boolean() && body["all"].get<bool>();
        if (body.contains("deadLetterIds")) {
          if (!body["deadLetterIds"].is_array()) bad = "deadLetterIds: an array of dead-letter ids";
          else
            for (const auto& x : body["deadLetterIds"]) {
              if (!x.is_string() || !valid_stream_id(x.get<std::string>())) {
                bad = "deadLetterIds: each one an entry id like 1700000000000-0";
                break;
              }
              ids.push_back(x.get<std::string>());
            }
        }
        if (bad.empty() && all == !ids.empty()) bad = "name dead letters (deadLetterIds) or ask for all of them, one of the two";
        if (bad.empty() && ids.size() > 1000) bad = "deadLetterIds: at most 1000 at a time";
      }
      if (!bad.empty()) return answer(plain_error(400, "INVALID_REQUEST", bad));
      const bool redrive = rt.kind == K::Redrive;
      auto done = [answer, rt, redrive](Answer<protocol::DeadLetterMove> r) {
        if (!r.ok()) return answer(store_error(r.error));
        if (!r.value->groupFound)
          return answer(plain_error(404, "NOT_FOUND", "no such group: " + rt.stream + "/" + rt.group));
        // Named ids the dead-letter stream does not hold are listed; the others were moved.
        answer(json_ok(protocol::dump(json{{"streamPrefix", rt.stream},
                                            {"consumerGroup", rt.group},
                                            {redrive ? "redriven" : "discarded", r.value->moved},
                                            {"notFound", r.value->unknownIds}})));
      };
      if (redrive) backend.redrive({rt.stream, rt.group}, std::move(ids), 1000, std::move(done));
      else backend.discard_dead_letters({rt.stream, rt.group}, std::move(ids), 1000, std::move(done));
      return;
    }
    case K::ResetOffsets: {
      const auto body = json::parse(req.body, nullptr, false);
      std::optional<std::string> position;
      std::string to, bad;
      bool fence = false;
      if (!body.is_object() || !body.contains("to") || !body["to"].is_string()) {
        bad = "the body must be {\"to\": \"earliest\" | \"latest\" | an entry id | a time in ms, \"fenceMembers\": false}";
      } else {
        to = body["to"].get<std::string>();
        position = reset_position(to);
        if (!position) bad = "to: earliest, latest, an entry id like 1700000000000-0 or a time in ms since the epoch, not '" + to + "'";
        if (body.contains("fenceMembers")) {
          if (!body["fenceMembers"].is_boolean()) bad = "fenceMembers: true or false";
          else fence = body["fenceMembers"].get<bool>();
        }
      }
      if (!bad.empty()) return answer(plain_error(400, "INVALID_REQUEST", bad));
      backend.reset_offsets({rt.stream, rt.group}, *position, fence, [answer, rt, to, p = *position](Answer<OffsetsReset> r) {
        if (!r.ok()) return answer(store_error(r.error));
        switch (r.value->outcome) {
          case OffsetsReset::Outcome::NotFound:
            return answer(plain_error(404, "NOT_FOUND", "no such group: " + rt.stream + "/" + rt.group));
          case OffsetsReset::Outcome::HasLiveMembers:
            return answer(plain_error(409, "GROUP_NOT_EMPTY",
                                       "group " + rt.stream + "/" + rt.group +
                                           " has live members: stop them first or send \"fenceMembers\": true"));
          case OffsetsReset::Outcome::Reset:
            return answer(json_ok(protocol::dump(json{{"streamPrefix", rt.stream}, {"consumerGroup", rt.group}, {"to", to},
                                                       {"position", p}, {"shards", r.value->shards}})));
        }
      });
      return;
    }
    case K::Metrics:
      return answer({200, backend.metrics_text(), "text/plain; version=0.0.4; charset=utf-8", {}});
    case K::Health: return answer(json_ok(R"({"status":"UP"})"));
    case K::Ready:
      backend.ready([answer](bool ok, std::string why) {
        if (ok) return answer(json_ok(R"({"status":"READY"})"));
        auto r = plain_error(503, "NOT_READY", why);
        r.headers.emplace_back("Retry-After", "1");
        answer(std::move(r));
      });
      return;
    case K::GroupOwner: return;  // answered with the placement above
  }
}

}  // namespace rsc::http
