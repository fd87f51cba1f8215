#include "http/api.hpp"

#include <cerrno>
#include <cstdlib>

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
  if (need == Need::Metrics) need = auth.metricsPublic ? Need::Public : Need::Member;
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

namespace {

// A route's path template, split once: literal segments and named holes.
struct Compiled {
  enum class Hole { None, Stream, Group, Member, Migration };
  struct Segment {
    std::string text;
    Hole hole = Hole::None;
  };
  const RouteSpec* spec;
  std::vector<Segment> segments;
};

const std::vector<Compiled>& compiled_routes() {
  static const std::vector<Compiled> all = [] {
    std::vector<Compiled> out;
    for (const auto& r : route_table()) {
      Compiled c{&r, {}};
      for (auto part : split_path(r.pattern)) {
        Compiled::Segment seg{std::string(part), Compiled::Hole::None};
        using H = Compiled::Hole;
        if (part == "{streamPrefix}") seg.hole = H::Stream;
        else if (part == "{consumerGroup}") seg.hole = H::Group;
        else if (part == "{memberId}") seg.hole = H::Member;
        else if (part == "{reshardingId}") seg.hole = H::Migration;
        c.segments.push_back(std::move(seg));
      }
      out.push_back(std::move(c));
    }
    return out;
  }();
  return all;
}

bool path_matches(const Compiled& c, const std::vector<std::string_view>& p) {
  if (c.segments.size() != p.size()) return false;
  for (std::size_t i = 0; i < p.size(); ++i)
    if (c.segments[i].hole == Compiled::Hole::None && c.segments[i].text != p[i]) return false;
  return true;
}

}  // namespace

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
  std::string allow;  // the methods served on this path, in table order, when not `method`
  for (const auto& c : compiled_routes()) {
    if (!path_matches(c, p)) continue;
    if (method != c.spec->method) {
      if (allow.find(c.spec->method) == std::string::npos) allow += (allow.empty() ? "" : ", ") + std::string(c.spec->method);
      continue;
    }
    Route r{c.spec->kind, {}, {}, {}, {}, c.spec};
    for (std::size_t i = 0; i < p.size(); ++i) {
      using H = Compiled::Hole;
      switch (c.segments[i].hole) {
        case H::None: break;
        case H::Stream: r.stream = std::string(p[i]); break;
        case H::Group: r.group = std::string(p[i]); break;
        case H::Member: r.member = std::string(p[i]); break;
        case H::Migration: r.migration = std::string(p[i]); break;
      }
    }
    return {std::move(r), {}};
  }
  if (!allow.empty()) return method_not_allowed(method, allow);
  return {std::nullopt, {404, "no such endpoint: " + std::string(path), {}}};
}

namespace {
HttpResponse route_error(const RouteError& e) {
  auto r = plain_error(e.status, e.status == 405 ? "METHOD_NOT_ALLOWED" : "NOT_FOUND", e.message);
  if (!e.allow.empty()) r.headers.emplace_back("Allow", e.allow);
  return r;
}
}  // namespace

int heartbeat_http_status(HeartbeatStatus s, bool authenticated) {
  // Every decision on a heartbeat is answered 200 with the status in the body (as Kafka puts error
  // codes in its responses); only a refused token is an HTTP error.
  if (s == HeartbeatStatus::GROUP_AUTHORIZATION_FAILED) return authenticated ? 403 : 401;
  return 200;
}

HttpResponse plain_error(int status, const std::string& error, const std::string& message) {
  return {status, protocol::dump(json{{"error", error}, {"status", status}, {"message", message}}), "application/json",
          {}};
}

namespace {

HttpResponse json_ok(const std::string& body, int status = 200) { return {status, body, "application/json", {}}; }

HttpResponse heartbeat_answer(const protocol::HeartbeatResponse& r, bool authenticated = true) {
  HttpResponse h{heartbeat_http_status(r.status, authenticated), protocol::encode(r), "application/json", {}};
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


}  // namespace


namespace {


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

// A change of the shard count asked while another is under way (a scale, or a growth by PUT):
// 409 ACTIVE_MIGRATION_EXISTS, saying what still runs.
HttpResponse busy_answer(const std::string& stream, const protocol::StreamMetadata& m) {
  if (m.drainingShards() == 0) {  // busy deleting retired shard streams: moments
    auto r = plain_error(409, "ACTIVE_MIGRATION_EXISTS", protocol::retired_keys_deleting(stream));
    r.headers.emplace_back("Retry-After", "1");
    return r;
  }
  const std::string current = m.migration ? m.migration->reshardingId : std::string();
  return plain_error(409, "ACTIVE_MIGRATION_EXISTS",
                     "stream " + stream + " is scaling in: shards " + std::to_string(m.shardCount) + ".." +
                         std::to_string(m.readShardCount() - 1) + " still drain (migration " + current +
                         "); one shard count change at a time: wait for it or roll it back (POST .../scale/rollback)");
}

// The answer to a scale or a rollback, in the reference implementation's shapes: 202 with
// {streamPrefix, targetShardCount, affectedConsumerGroups, migrations[]} for a scale, the
// Migration for a rollback; each with the stream as it is now ("stream").
HttpResponse scale_answer(const std::string& stream, const std::string& migrationId, const ScaleAsk& ask, const ScaleDone& d) {
  using O = protocol::ScaleOutcome;
  const O o = d.outcome;
  if (o == O::NoStream) return plain_error(404, "STREAM_NOT_FOUND", "no such stream: " + stream + "; create it first (POST or PUT)");
  const auto& m = d.meta;
  const std::string current = m.migration ? m.migration->reshardingId : std::string();
  if (ask.rollback) {
    if (!migrationId.empty() && migrationId != current && !(m.migration && migrationId == "noop"))
      return plain_error(404, "MIGRATION_NOT_FOUND",
                         "stream " + stream + " has no migration " + migrationId +
                             (current.empty() ? std::string() : " (its last one is " + current + ")"));
    if (o == O::NothingToRollBack)
      return plain_error(422, "ROLLBACK_NOT_ALLOWED",
                         "stream " + stream + " has no shrink in progress to roll back" +
                             (m.migration ? " (its last migration, " + current + ", is " +
                                                std::string(protocol::to_string(m.migration->state)) + ")"
                                          : std::string()));
    json body = protocol::to_json(*m.migration);
    body["stream"] = protocol::to_json(m);
    return json_ok(protocol::dump(body), 202);
  }
  if (o == O::Busy) return busy_answer(stream, m);
  json migrations = json::array();
  if (o != O::Same && m.migration)
    for (const auto& g : d.consumerGroups) {
      json e = protocol::to_json(*m.migration);
      e["consumerGroup"] = g;
      migrations.push_back(std::move(e));
    }
  json body{{"streamPrefix", stream},
            {"targetShardCount", ask.request.targetShardCount},
            {"affectedConsumerGroups", d.consumerGroups},
            {"migrations", std::move(migrations)},
            {"outcome", protocol::to_string(o)},
            {"stream", protocol::to_json(m)}};
  return json_ok(protocol::dump(body), o == O::Same ? 200 : 202);
}

HttpResponse no_group(const Route& rt) { return plain_error(404, "NOT_FOUND", "no such group: " + rt.stream + "/" + rt.group); }
HttpResponse no_stream(const std::string& s) { return plain_error(404, "NOT_FOUND", "no such stream: " + s); }
HttpResponse retry_later(int status, const std::string& error, const std::string& why) {
  auto r = plain_error(status, error, why);
  r.headers.emplace_back("Retry-After", "1");
  return r;
}

HttpResponse store_error(const Problem& e) {
  using K = Problem::Kind;
  switch (e.kind) {
    case K::Unavailable: return retry_later(503, "RETRY", e.message);
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
using OwnerUrl = std::shared_ptr<const std::string>;
const OwnerUrl kNoOwner;
bool known(const OwnerUrl& url) { return url && !url->empty(); }

// Names the group's owner in an answer, unless the answer (forwarded from the owner) already does.
void name_owner(HttpResponse& r, const OwnerUrl& url) {
  if (!known(url)) return;
  for (const auto& h : r.headers)
    if (h.first == kGroupOwnerHeader) return;
  r.headers.emplace_back(kGroupOwnerHeader, *url);
}
}  // namespace

// What a route's handler gets: the request, its route, who called, and where the answer goes
// (the audit line and the owner header are added on the way out).
struct RouteCall {
  const HttpRequest& req;
  Backend& backend;
  Route& rt;
  const AuthDecision& decision;
  Respond& answer;
  const std::optional<Placement>& placement;
  const OwnerUrl& ownerUrl;  // null or "" while nobody owns the group
};

namespace {

using K = Route::Kind;

// ---- one handler per route ----------------------------------------------------------------

void on_heartbeat(RouteCall& c) {
  auto decoded = protocol::decode_heartbeat_request(c.req.body, c.rt.member);
  if (!decoded.ok()) {
    // A body that is no JSON object at all is not a heartbeat to decide on: HTTP 400. A heartbeat
    // with a wrong field is a decision (INVALID_REQUEST), answered 200 like the rest.
    const bool notAnObject = decoded.error.field.empty();
    auto r = refused_heartbeat(c.backend, decoded.requestId, c.rt.member, decoded.error.status, decoded.error.message,
                               notAnObject ? 400 : 0, decoded.error.field);
    name_owner(r, c.ownerUrl);
    return c.answer(std::move(r));
  }
  // The answer callback takes the given one over (its last use here): no copy of it. The owner is
  // named where the answer is made (a heartbeat gets no wrapper).
  c.backend.heartbeat({std::move(c.rt.stream), std::move(c.rt.group)}, std::move(*decoded.value),
                      [answer = std::move(c.answer), url = c.ownerUrl](protocol::HeartbeatResponse r) {
                        auto h = heartbeat_answer(r);
                        name_owner(h, url);
                        answer(std::move(h));
                      });
}

void on_write_stream(RouteCall& c) {
  const bool post = c.rt.kind == K::PostStream;
  auto n = protocol::decode_stream_request(c.req.body, post);
  if (!n.ok()) return c.answer(plain_error(400, "INVALID_REQUEST", n.error.message));
  const auto asked = *n.value;
  c.backend.write_stream(c.rt.stream, asked, post, [answer = c.answer, post, asked](Answer<StreamWritten> r) {
    if (!r.ok()) return answer(store_error(r.error));
    const auto& w = *r.value;
    if (w.outcome == StreamWritten::Outcome::Busy) return answer(busy_answer(w.meta.streamPrefix, w.meta));
    if (w.outcome == StreamWritten::Outcome::Created) return answer(json_ok(protocol::encode(w.meta), post ? 201 : 200));
    if (w.outcome == StreamWritten::Outcome::Exists) {
      // POST on a stream that exists: fine when it is what was asked for, a conflict otherwise.
      const bool same = (!asked.shardCount || *asked.shardCount == w.meta.shardCount) &&
                        (!asked.keyStyle || *asked.keyStyle == w.meta.keyStyle);
      if (!same)
        return answer(plain_error(409, "CONFLICT",
                                  "stream " + w.meta.streamPrefix + " exists with " + std::to_string(w.meta.shardCount) +
                                      " shards and keyStyle " + std::string(protocol::to_string(w.meta.keyStyle)) +
                                      "; grow it with PUT {\"shardCount\": N}"));
    }
    answer(json_ok(protocol::encode(w.meta)));
  });
}

void on_producer_routing(RouteCall& c) {
  c.backend.producer_routing({c.rt.stream, c.rt.group}, [answer = c.answer, rt = c.rt](Answer<std::optional<protocol::StreamMetadata>> r) {
    if (!r.ok()) return answer(store_error(r.error));
    if (!r.value->has_value())
      return answer(plain_error(404, "NOT_FOUND", "no such stream: " + rt.stream + "; create it first (POST or PUT)"));
    answer(json_ok(producer_routing_json(**r.value, rt.group)));
  });
}

void on_get_retention(RouteCall& c) {
  c.backend.get_retention(c.rt.stream, [answer = c.answer, s = c.rt.stream](Answer<std::optional<protocol::Retention>> r) {
    if (!r.ok()) return answer(store_error(r.error));
    if (!r.value->has_value()) return answer(no_stream(s));
    answer(json_ok(protocol::dump(json{{"streamPrefix", s}, {"retention", protocol::to_json(**r.value)}})));
  });
}

void on_put_retention(RouteCall& c) {
  auto asked = protocol::decode_retention_body(c.req.body);
  if (!asked.ok()) return c.answer(plain_error(400, "INVALID_REQUEST", asked.error.message));
  c.backend.set_retention(c.rt.stream, *asked.value, [answer = c.answer, s = c.rt.stream, r = *asked.value](Answer<bool> set) {
    if (!set.ok()) return answer(store_error(set.error));
    if (!*set.value) return answer(no_stream(s));
    answer(json_ok(protocol::dump(json{{"streamPrefix", s}, {"retention", protocol::to_json(r)}})));
  });
}

void on_put_racks(RouteCall& c) {
  auto asked = protocol::decode_stream_racks(c.req.body);
  if (!asked.ok()) return c.answer(plain_error(400, "INVALID_REQUEST", asked.error.message));
  c.backend.set_stream_racks(c.rt.stream, *asked.value, [answer = c.answer, s = c.rt.stream](Answer<ScaleDone> r) {
    if (!r.ok()) return answer(store_error(r.error));
    if (r.value->outcome == protocol::ScaleOutcome::NoStream) return answer(no_stream(s));
    const auto& m = r.value->meta;
    answer(json_ok(protocol::dump(json{{"streamPrefix", s},
                                       {"changed", r.value->outcome == protocol::ScaleOutcome::RacksSet},
                                       {"shardRacks", m.shardRacks},
                                       {"shardRacksFrom", m.shardRacksFrom.empty() ? json(nullptr) : json(m.shardRacksFrom)},
                                       {"metadataVersion", m.metadataVersion},
                                       {"affectedConsumerGroups", r.value->consumerGroups}})));
  });
}

void on_scale(RouteCall& c) {
  const bool rollback = c.rt.kind == K::RollbackScale;
  auto asked = protocol::decode_scale_request(c.req.body, rollback);
  if (!asked.ok()) return c.answer(plain_error(400, "INVALID_REQUEST", asked.error.message));
  ScaleAsk ask{rollback, *asked.value};
  c.backend.scale_stream(c.rt.stream, ask, [answer = c.answer, rt = c.rt, ask](Answer<ScaleDone> r) {
    if (!r.ok()) return answer(store_error(r.error));
    answer(scale_answer(rt.stream, rt.migration, ask, *r.value));
  });
}

void on_get_stream(RouteCall& c) {
  c.backend.get_stream(c.rt.stream, [answer = c.answer, s = c.rt.stream](Answer<std::optional<protocol::StreamMetadata>> r) {
    if (!r.ok()) return answer(store_error(r.error));
    if (!r.value->has_value()) return answer(no_stream(s));
    answer(json_ok(protocol::encode(**r.value)));
  });
}

void on_list_streams(RouteCall& c) {
  // A token scoped to some streams sees only those. The patterns are copied: the token list may be
  // replaced (a token file changed) before the store answers.
  std::optional<std::vector<std::string>> scope;
  if (c.decision.token) scope = c.decision.token->streams;
  c.backend.list_streams([answer = c.answer, scope = std::move(scope)](Answer<std::vector<std::string>> r) {
    if (!r.ok()) return answer(store_error(r.error));
    json names = json::array();
    for (const auto& s : *r.value)
      if (!scope || matches_any(*scope, s)) names.push_back(s);
    answer(json_ok(protocol::dump(json{{"streams", std::move(names)}})));
  });
}

void on_status_page(RouteCall& c) {
  HttpResponse page{200, status_page_html(), "text/html; charset=utf-8", {}};
  // The page's script is inline: nothing else may run, nothing is fetched from elsewhere.
  page.headers.emplace_back("Content-Security-Policy",
                            "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; "
                            "connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'");
  page.headers.emplace_back("X-Content-Type-Options", "nosniff");
  page.headers.emplace_back("Referrer-Policy", "no-referrer");
  page.headers.emplace_back("Cache-Control", "no-cache");
  c.answer(std::move(page));
}

// A page's cursor: opaque to clients ("g1." and the last name's bytes in hex), checked when it comes back.
std::string group_cursor(const std::string& after) {
  static const char* hex = "0123456789abcdef";
  std::string c = "g1.";
  for (unsigned char ch : after) c += hex[ch >> 4], c += hex[ch & 15];
  return c;
}
std::optional<std::string> group_after(const std::string& cursor) {
  if (cursor.rfind("g1.", 0) != 0 || cursor.size() % 2 != 1 || cursor.size() < 5) return std::nullopt;
  auto nibble = [](char ch) { return ch >= '0' && ch <= '9' ? ch - '0' : ch >= 'a' && ch <= 'f' ? ch - 'a' + 10 : -1; };
  std::string out;
  for (std::size_t i = 3; i + 1 < cursor.size(); i += 2) {
    const int hi = nibble(cursor[i]), lo = nibble(cursor[i + 1]);
    if (hi < 0 || lo < 0) return std::nullopt;
    out += static_cast<char>(hi * 16 + lo);
  }
  if (!protocol::valid_name(out)) return std::nullopt;
  return out;
}

void on_list_groups(RouteCall& c) {
  GroupPage page;
  if (const auto l = query_param(c.req.target, "limit")) {
    char* end = nullptr;
    errno = 0;
    const long long v = std::strtoll(l->c_str(), &end, 10);
    if (l->empty() || errno != 0 || *end != '\0' || v < 1 || v > kMaxGroupPage)
      return c.answer(plain_error(400, "INVALID_REQUEST", "limit: a whole number from 1 to " + std::to_string(kMaxGroupPage) +
                                                             ", not '" + l->substr(0, 40) + "'"));
    page.limit = static_cast<int32_t>(v);
  }
  if (const auto cur = query_param(c.req.target, "cursor")) {
    const auto after = group_after(*cur);
    if (!after)
      return c.answer(plain_error(400, "INVALID_REQUEST", "cursor: '" + cur->substr(0, 60) +
                                                             "' is not a cursor this coordinator gave (nextCursor of the previous page)"));
    page.after = *after;
  }
  c.backend.list_groups(c.rt.stream, page, [answer = c.answer, s = c.rt.stream](Answer<StreamGroups> r) {
    if (!r.ok()) return answer(store_error(r.error));
    json positions = json::array();
    for (const auto& p : r.value->positions)
      positions.push_back({{"consumerGroup", p.group},
                           {"lag", p.lag ? json(*p.lag) : json(nullptr)},
                           {"pending", p.pending},
                           {"unknownShards", p.unknownShards}});
    const auto& v = *r.value;
    answer(json_ok(protocol::dump(json{{"streamPrefix", s},
                                       {"groups", v.groups},
                                       {"groupLag", std::move(positions)},
                                       {"total", v.total},
                                       {"nextCursor", v.nextAfter ? json(group_cursor(*v.nextAfter)) : json(nullptr)},
                                       {"lagReadAt", v.lagReadAtMs ? json(*v.lagReadAtMs) : json(nullptr)}})));
  });
}

void on_describe(RouteCall& c) {
  const auto q = query_param(c.req.target, "fresh");
  if (q && *q != "true" && *q != "false")
    return c.answer(plain_error(400, "INVALID_REQUEST", "fresh: must be true or false, not '" + q->substr(0, 40) + "'"));
  c.backend.describe({c.rt.stream, c.rt.group}, q && *q == "true", [answer = c.answer, rt = c.rt](Answer<std::optional<std::string>> r) {
    if (!r.ok()) return answer(store_error(r.error));
    if (!r.value->has_value()) return answer(no_group(rt));
    answer(json_ok(**r.value));
  });
}

void on_delete_group(RouteCall& c) {
  const auto q = query_param(c.req.target, "fenceMembers");
  if (q && *q != "true" && *q != "false")
    return c.answer(plain_error(400, "INVALID_REQUEST", "fenceMembers: must be true or false, not '" + *q + "'"));
  const bool fence = q && *q == "true";
  c.backend.delete_group({c.rt.stream, c.rt.group}, fence, [answer = c.answer, rt = c.rt](Answer<Deletion> r) {
    if (!r.ok()) return answer(store_error(r.error));
    switch (*r.value) {
      case Deletion::NotFound: return answer(no_group(rt));
      case Deletion::HasLiveMembers:
        return answer(plain_error(409, "GROUP_NOT_EMPTY",
                                  "group " + rt.stream + "/" + rt.group +
                                      " has live members; remove them first or send ?fenceMembers=true"));
      case Deletion::Deleted:
        return answer(json_ok(protocol::dump(json{{"streamPrefix", rt.stream}, {"consumerGroup", rt.group}, {"deleted", true}})));
    }
  });
}

void on_configure_group(RouteCall& c) {
  auto asked = protocol::decode_group_config(c.req.body);
  if (!asked.ok()) return c.answer(plain_error(400, "INVALID_REQUEST", asked.error.message));
  c.backend.configure_group({c.rt.stream, c.rt.group}, std::move(*asked.value), [answer = c.answer, rt = c.rt](Answer<protocol::GroupConfigSet> r) {
    if (!r.ok()) return answer(store_error(r.error));
    const auto& s = *r.value;
    json body{{"streamPrefix", rt.stream},
              {"consumerGroup", rt.group},
              {"assignor", protocol::to_string(s.assignor)},
              {"shardRacks", s.shardRacks},
              {"groupEpoch", s.groupEpoch},
              {"changed", s.changed},
              {"created", s.created}};
    if (s.coPartitionedWith)
      body["coPartitionedWith"] = {{"prefix", s.coPartitionedWith->streamPrefix}, {"group", s.coPartitionedWith->consumerGroup}};
    if (s.partnerLinked) body["partnerLinked"] = *s.partnerLinked;
    if (s.partnerCoPartitionedWith)
      body["partnerCoPartitionedWith"] = {{"prefix", s.partnerCoPartitionedWith->streamPrefix},
                                          {"group", s.partnerCoPartitionedWith->consumerGroup}};
    answer(json_ok(protocol::dump(body)));
  });
}

void on_post_target(RouteCall& c) {
  auto asked = protocol::decode_posted_target(c.req.body);
  if (!asked.ok()) return c.answer(plain_error(400, "INVALID_REQUEST", asked.error.message));
  c.backend.post_target({c.rt.stream, c.rt.group}, std::move(*asked.value), [answer = c.answer, rt = c.rt](Answer<protocol::TargetPosted> r) {
    if (!r.ok()) return answer(store_error(r.error));
    using O = protocol::TargetPosted::Outcome;
    const auto& t = *r.value;
    switch (t.outcome) {
      case O::NotFound: return answer(no_group(rt));
      case O::Invalid: return answer(plain_error(400, "INVALID_REQUEST", t.message));
      case O::NotExternal: return answer(plain_error(409, "NOT_EXTERNAL", t.message));
      case O::StaleEpoch: {
        auto res = plain_error(409, "STALE_GROUP_EPOCH", t.message);
        auto body = json::parse(res.body, nullptr, false);
        if (body.is_object()) {  // the epoch to compute the next target for
          body["groupEpoch"] = t.groupEpoch;
          res.body = protocol::dump(body);
        }
        return answer(std::move(res));
      }
      case O::Set:
        return answer(json_ok(protocol::dump(json{{"streamPrefix", rt.stream},
                                                   {"consumerGroup", rt.group},
                                                   {"groupEpoch", t.groupEpoch},
                                                   {"targetAssignment", t.target},
                                                   {"unassignedShards", t.unassigned}})));
    }
  });
}

void on_remove_member(RouteCall& c) {
  c.backend.remove_member({c.rt.stream, c.rt.group}, c.rt.member, [answer = c.answer, rt = c.rt](Answer<bool> r) {
    if (!r.ok()) return answer(store_error(r.error));
    if (!*r.value) return answer(plain_error(404, "NOT_FOUND", "no live member " + rt.member + " in " + rt.group));
    answer(json_ok(protocol::dump(json{{"memberId", rt.member}, {"state", "FENCED"}})));
  });
}

void on_dead_letters(RouteCall& c) {
  int64_t limit = 100;
  if (const auto q = query_param(c.req.target, "count")) {
    char* end = nullptr;
    limit = std::strtoll(q->c_str(), &end, 10);
    if (q->empty() || *end != '\0' || limit < 1 || limit > 1000)
      return c.answer(plain_error(400, "INVALID_REQUEST", "count: a number from 1 to 1000, not '" + *q + "'"));
  }
  c.backend.dead_letters({c.rt.stream, c.rt.group}, limit, [answer = c.answer, rt = c.rt](Answer<protocol::DeadLetterPage> r) {
    if (!r.ok()) return answer(store_error(r.error));
    if (!r.value->groupFound) return answer(no_group(rt));
    answer(json_ok(protocol::dump(dead_letters_json(rt.stream, rt.group, *r.value))));
  });
}

// Redrive or discard: the named dead letters, or the oldest kMaxDeadLettersPerCall.
void on_move_dead_letters(RouteCall& c) {
  auto asked = protocol::decode_dead_letter_selection(c.req.body);
  if (!asked.ok()) return c.answer(plain_error(400, "INVALID_REQUEST", asked.error.message));
  const bool redrive = c.rt.kind == K::Redrive;
  auto done = [answer = c.answer, rt = c.rt, redrive](Answer<protocol::DeadLetterMove> r) {
    if (!r.ok()) return answer(store_error(r.error));
    if (!r.value->groupFound) return answer(no_group(rt));
    // Named ids the dead-letter stream does not hold are listed; the others were moved.
    answer(json_ok(protocol::dump(json{{"streamPrefix", rt.stream},
                                        {"consumerGroup", rt.group},
                                        {redrive ? "redriven" : "discarded", r.value->moved},
                                        {"notFound", r.value->unknownIds}})));
  };
  const protocol::GroupKey key{c.rt.stream, c.rt.group};
  const auto limit = static_cast<int64_t>(protocol::kMaxDeadLettersPerCall);
  if (redrive) c.backend.redrive(key, std::move(asked.value->ids), limit, std::move(done));
  else c.backend.discard_dead_letters(key, std::move(asked.value->ids), limit, std::move(done));
}

void on_reset_offsets(RouteCall& c) {
  auto asked = protocol::decode_reset_offsets_request(c.req.body);
  if (!asked.ok()) return c.answer(plain_error(400, "INVALID_REQUEST", asked.error.message));
  const auto& a = *asked.value;
  c.backend.reset_offsets({c.rt.stream, c.rt.group}, a.position, a.fenceMembers, [answer = c.answer, rt = c.rt, a](Answer<OffsetsReset> r) {
    if (!r.ok()) return answer(store_error(r.error));
    switch (r.value->outcome) {
      case OffsetsReset::Outcome::NotFound: return answer(no_group(rt));
      case OffsetsReset::Outcome::HasLiveMembers:
        return answer(plain_error(409, "GROUP_NOT_EMPTY",
                                  "group " + rt.stream + "/" + rt.group +
                                      " has live members: stop them first or send \"fenceMembers\": true"));
      case OffsetsReset::Outcome::Reset:
        return answer(json_ok(protocol::dump(json{{"streamPrefix", rt.stream}, {"consumerGroup", rt.group}, {"to", a.to},
                                                   {"position", a.position}, {"shards", r.value->shards}})));
    }
  });
}

void on_metrics(RouteCall& c) { c.answer({200, c.backend.metrics_text(), "text/plain; version=0.0.4; charset=utf-8", {}}); }

void on_health(RouteCall& c) { c.answer(json_ok(R"({"status":"UP"})")); }

void on_ready(RouteCall& c) {
  c.backend.ready([answer = c.answer](bool ok, std::string why) {
    if (ok) return answer(json_ok(R"({"status":"READY"})"));
    answer(retry_later(503, "NOT_READY", why));
  });
}

void on_group_owner(RouteCall& c) {
  const auto& p = *c.placement;
  if (!known(c.ownerUrl))
    return c.answer(retry_later(503, "RETRY", "no pod owns the group now" + (p.why.empty() ? "" : ": " + p.why)));
  c.answer(json_ok(protocol::dump(json{{"streamPrefix", c.rt.stream},
                                       {"consumerGroup", c.rt.group},
                                       {"owner", *c.ownerUrl},
                                       {"podId", p.podId},
                                       {"term", p.term}})));
}

// ---- the steps every request takes --------------------------------------------------------

// A name in the path that is not one: refused before anything else touches it.
std::optional<HttpResponse> bad_name(const Backend& backend, const Route& rt) {
  for (const auto& [field, value] : {std::pair<const char*, const std::string*>{"streamPrefix", &rt.stream},
                                     {"consumerGroup", &rt.group},
                                     {"memberId", &rt.member}}) {
    if (value->empty()) continue;  // not part of this route
    if (auto e = protocol::validate_name(field, *value)) {
      if (rt.kind == K::Heartbeat)
        return refused_heartbeat(backend, "", rt.member, HeartbeatStatus::INVALID_REQUEST, e->message, 0, e->field);
      return plain_error(400, "INVALID_REQUEST", e->message);
    }
  }
  return std::nullopt;
}

// A refused token: a heartbeat gets a heartbeat answer, the rest a plain error.
HttpResponse refusal(const Backend& backend, const Route& rt, const AuthDecision& d) {
  auto r = rt.kind == K::Heartbeat
               ? refused_heartbeat(backend, "", rt.member, HeartbeatStatus::GROUP_AUTHORIZATION_FAILED, d.message, d.status)
               : plain_error(d.status, "GROUP_AUTHORIZATION_FAILED", d.message);
  if (d.status == 401) r.headers.emplace_back("WWW-Authenticate", "Bearer");
  return r;
}

// An owner-served call at a pod that does not serve its group: forwarded to the owner (its answer
// handed back as it is, naming the owner), or RETRY when nobody can serve it now.
void serve_elsewhere(const HttpRequest& req, Backend& backend, const Route& rt, Placement& placed, const Respond& direct,
                     const OwnerUrl& ownerUrl, const Respond& answer) {
  auto unavailable = [&backend, kind = rt.kind, member = rt.member, body = req.body](const std::string& why) {
    if (kind != K::Heartbeat) return retry_later(503, "RETRY", why);
    const auto decoded = protocol::decode_heartbeat_request(body, member);
    const std::string requestId = decoded.ok() ? decoded.value->requestId : decoded.requestId;
    return refused_heartbeat(backend, requestId, member, HeartbeatStatus::RETRY, "coordinator unavailable: " + why);
  };
  if (placed.kind == Placement::Kind::Elsewhere && req.forwardedBy.empty() && req.forwarder != nullptr) {
    // The owner writes the admin call's audit line; this pod's would be a second one (`direct`
    // answers without it).
    return req.forwarder->forward(
        placed.address, req,
        [&backend, direct, url = placed.ownerUrl](HttpResponse r) {
          backend.forwarded(true);
          name_owner(r, url);  // the owner names itself; a pod of an older version does not
          direct(std::move(r));
        },
        [&backend, direct, unavailable, pod = placed.podId, url = placed.ownerUrl](const std::string& why) {
          backend.forwarded(false);
          // Still naming the owner: this pod may be the one cut off, and a member that can reach
          // the owner goes straight there, as docs/guide.md promises.
          auto r = unavailable("pod " + pod + " (which serves the group) " + why);
          name_owner(r, url);
          direct(std::move(r));
        });
  }
  if (placed.kind == Placement::Kind::Elsewhere)
    placed.why = req.forwardedBy.empty() ? "this server cannot forward to pod " + placed.podId
                                          : "forwarded by pod " + req.forwardedBy + ", but pod " + placed.podId +
                                                " serves the group now";
  auto r = unavailable(placed.why);
  name_owner(r, ownerUrl);
  answer(std::move(r));
}

// `next` with the admin call's audit line written first (refusals included).
Respond audited(Backend& backend, const Respond& next, std::shared_ptr<std::string> caller, const Route& rt) {
  return [&backend, next, caller = std::move(caller), action = rt.spec->audit, rt](HttpResponse r) {
    std::string target = rt.stream;
    if (!rt.group.empty()) target += "/" + rt.group;
    if (!rt.member.empty()) target += "/" + rt.member;
    backend.audit(audit_line(*caller, action, target, r));
    next(std::move(r));
  };
}

}  // namespace

const std::vector<RouteSpec>& route_table() {
#define S "/coord/v1/streams/{streamPrefix}"
#define G S "/groups/{consumerGroup}"
  using N = Need;
  // method, path, kind, need, audit action, JSON body, names the owner, served by the owner, handler
  static const std::vector<RouteSpec> table{
      {"POST", G "/members/{memberId}/heartbeat", K::Heartbeat, N::Member, nullptr, true, true, true, on_heartbeat},
      {"GET", "/", K::StatusPage, N::Public, nullptr, false, false, false, on_status_page},
      {"HEAD", "/", K::StatusPage, N::Public, nullptr, false, false, false, on_status_page},
      {"GET", "/coord/v1/streams", K::ListStreams, N::Member, nullptr, false, false, false, on_list_streams},
      {"GET", S, K::GetStream, N::Member, nullptr, false, false, false, on_get_stream},
      {"PUT", S, K::PutStream, N::Admin, "put-stream", true, false, false, on_write_stream},
      {"POST", S, K::PostStream, N::Admin, "create-stream", true, false, false, on_write_stream},
      {"GET", S "/groups", K::ListGroups, N::Member, nullptr, false, false, false, on_list_groups},
      {"GET", G, K::Describe, N::Member, nullptr, false, true, false, on_describe},
      {"DELETE", G, K::DeleteGroup, N::Admin, "delete-group", false, true, true, on_delete_group},
      // The group's assignor and shard racks (a change moves shards revoke-before-assign).
      {"PUT", G, K::ConfigureGroup, N::Admin, "configure-group", true, true, true, on_configure_group},
      // A target computed outside the coordinator, for a group whose assignor is external.
      {"PUT", G "/target", K::PostTarget, N::Admin, "post-target", true, true, true, on_post_target},
      {"GET", G "/producer-routing", K::ProducerRouting, N::Member, nullptr, false, true, false, on_producer_routing},
      {"GET", G "/owner", K::GroupOwner, N::Member, nullptr, false, true, false, on_group_owner},
      {"DELETE", G "/members/{memberId}", K::RemoveMember, N::Admin, "remove-member", false, true, true, on_remove_member},
      // What members could not process: the records' data, for operators.
      {"GET", G "/dead-letters", K::DeadLetters, N::Admin, nullptr, false, true, false, on_dead_letters},
      {"POST", G "/dead-letters/redrive", K::Redrive, N::Admin, "redrive-dead-letters", false, true, false, on_move_dead_letters},
      {"POST", G "/dead-letters/discard", K::DiscardDeadLetters, N::Admin, "discard-dead-letters", false, true, false, on_move_dead_letters},
      {"POST", G "/reset-offsets", K::ResetOffsets, N::Admin, "reset-offsets", false, true, true, on_reset_offsets},
      {"GET", S "/retention", K::GetRetention, N::Member, nullptr, false, false, false, on_get_retention},
      {"PUT", S "/retention", K::PutRetention, N::Admin, "set-retention", true, false, false, on_put_retention},
      // The racks of the stream's shards, for its rack-aware groups without racks of their own.
      {"PUT", S "/racks", K::PutRacks, N::Admin, "set-stream-racks", true, false, false, on_put_racks},
      {"POST", S "/scale", K::ScaleStream, N::Admin, "scale-stream", true, false, false, on_scale},
      {"POST", S "/scale/rollback", K::RollbackScale, N::Admin, "rollback-scale", false, false, false, on_scale},
      // The reference implementation's per-group scale paths: a stream's shards are one for all its
      // groups, so they change the stream (and name no group's owner).
      {"POST", G "/scale", K::ScaleStream, N::Admin, "scale-stream", true, false, false, on_scale},
      {"POST", G "/migrations/{reshardingId}/rollback", K::RollbackScale, N::Admin, "rollback-scale", false, false, false, on_scale},
      {"GET", "/metrics", K::Metrics, N::Metrics, nullptr, false, false, false, on_metrics},
      {"HEAD", "/metrics", K::Metrics, N::Metrics, nullptr, false, false, false, on_metrics},
      {"GET", "/healthz", K::Health, N::Public, nullptr, false, false, false, on_health},
      {"HEAD", "/healthz", K::Health, N::Public, nullptr, false, false, false, on_health},
      {"GET", "/readyz", K::Ready, N::Public, nullptr, false, false, false, on_ready},
      {"HEAD", "/readyz", K::Ready, N::Public, nullptr, false, false, false, on_ready},
  };
#undef G
#undef S
  return table;
}

void handle_request(const HttpRequest& req, Backend& backend, const AuthConfig& auth, Respond given) {
  // Wrappers are made only when needed: a std::function copy allocates (a heartbeat makes none).
  std::optional<Respond> headWrap;  // HEAD: the same answer as GET, without its body
  if (req.method == "HEAD")
    headWrap.emplace([given](HttpResponse r) {
      r.body.clear();
      given(std::move(r));
    });
  Respond& direct = headWrap ? *headWrap : given;
  auto routed = route(req.method, req.target);
  if (!routed.route) return direct(route_error(routed.error));
  Route& rt = *routed.route;
  const RouteSpec& spec = *rt.spec;
  // An admin call leaves one audit line, whatever its answer; who called is known after
  // authorization.
  auto caller = spec.audit ? std::make_shared<std::string>(caller_of(auth, {})) : nullptr;
  std::optional<Respond> auditWrap;
  if (spec.audit) auditWrap.emplace(audited(backend, direct, caller, rt));
  Respond& respond = auditWrap ? *auditWrap : direct;

  if (auto bad = bad_name(backend, rt)) return respond(std::move(*bad));
  const auto decision = authorize(auth, req.authorization, spec.need, rt.stream, rt.group);
  if (caller) *caller = caller_of(auth, decision);
  if (!decision.allowed) return respond(refusal(backend, rt, decision));
  if (spec.json && !is_json(req.contentType))
    return respond(plain_error(415, "UNSUPPORTED_MEDIA_TYPE", "Content-Type must be application/json, not '" + req.contentType + "'"));

  // Every answer about a group names the pod that owns it (kGroupOwnerHeader): rsc's clients send
  // the group's next calls there. A group's heartbeats and admin calls are served by its owner
  // (group/pod_authority.hpp): at another pod, this one forwards them, so members keep one URL.
  std::optional<Placement> placement;
  if (spec.ownerNamed) placement = backend.place(protocol::GroupKey{rt.stream, rt.group});
  const OwnerUrl& ownerUrl = placement && placement->kind != Placement::Kind::Nowhere ? placement->ownerUrl : kNoOwner;
  if (spec.ownerServed && placement->kind != Placement::Kind::Here)
    return serve_elsewhere(req, backend, rt, *placement, direct, ownerUrl, respond);
  // The rest name the owner through a wrapper that takes the callback over (a heartbeat names it
  // where its answer is made).
  std::optional<Respond> ownerWrap;
  if (known(ownerUrl) && rt.kind != K::Heartbeat)
    ownerWrap.emplace([next = std::move(respond), url = ownerUrl](HttpResponse r) {
      name_owner(r, url);
      next(std::move(r));
    });
  RouteCall call{req, backend, rt, decision, ownerWrap ? *ownerWrap : respond, placement, ownerUrl};
  spec.handler(call);
}

void handle_probe_request(const HttpRequest& req, Backend& backend, Respond respond) {
  const auto routed = route(req.method, req.target);
  if (routed.route && (routed.route->kind == K::Health || routed.route->kind == K::Ready))
    return handle_request(req, backend, AuthConfig{}, std::move(respond));
  respond(plain_error(404, "NOT_FOUND", "this port serves the probes only: GET /healthz and /readyz"));
}

}  // namespace rsc::http
