// The HTTP surface of SPEC §5 as plain functions: routing, auth, validation and the mapping of
// results to HTTP codes. No Asio or CAF here: the Beast server (server.cpp) feeds requests in,
// the actor system (actors/service.cpp) implements Backend.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "protocol/outcomes.hpp"
#include "protocol/types.hpp"

namespace rsc::http {

class Forwarder;

struct HttpRequest {
  std::string method;  // "GET", "POST", ...
  std::string target;  // path and query
  std::string contentType;
  std::string authorization;
  std::string body;
  // The pod that forwarded this request here (header X-Rsc-Forwarded-By); empty from a client.
  std::string forwardedBy;
  // Sends a request on to another pod, on the I/O thread that read it (null: this server cannot).
  Forwarder* forwarder = nullptr;
};

struct HttpResponse {
  int status = 200;
  std::string body;
  std::string contentType = "application/json";
  std::vector<std::pair<std::string, std::string>> headers;
};

using Respond = std::function<void(HttpResponse)>;

// The header a pod puts on a request it forwards: the owner never forwards it again.
inline constexpr const char* kForwardedByHeader = "X-Rsc-Forwarded-By";
// The header on every answer about a group (served here or forwarded): the base URL of the pod
// that owns the group now ("https://rsc-1.rsc-pods.ns.svc:8080"), absent while no pod does. rsc's
// clients send the group's next calls there; clients that ignore it keep being forwarded.
inline constexpr const char* kGroupOwnerHeader = "Rsc-Group-Owner";

class Forwarder {
 public:
  virtual ~Forwarder() = default;
  // Sends `req` to the pod at `address` (ip:port) and hands its answer to `respond`; when the pod
  // cannot be reached or does not answer in time, `failed` gets why (nothing else is called).
  virtual void forward(const std::string& address, const HttpRequest& req, Respond respond,
                       std::function<void(std::string)> failed) = 0;
};

// What the coordinator answers this layer: a value, or a problem, named by what it means to an
// HTTP client (the backend maps its store's errors to these; this layer knows no store).
struct Problem {
  enum class Kind {
    Unavailable,  // the coordinator's store cannot answer now: 503 RETRY with Retry-After
    Conflict,     // the store refuses what was asked (e.g. shrink a stream): 409
    Corrupt,      // what is stored cannot be read: 500 STORE_CORRUPT
    Failed,       // anything else: 500 STORE_ERROR
  };
  Kind kind = Kind::Failed;
  std::string message;
};

template <typename T>
struct Answer {
  std::optional<T> value;
  Problem error;
  bool ok() const { return value.has_value(); }
  static Answer success(T v) { return Answer{std::move(v), {}}; }
  static Answer failure(Problem p) { return Answer{std::nullopt, std::move(p)}; }
  static Answer failure(Problem::Kind k, std::string message) { return failure(Problem{k, std::move(message)}); }
};

// What a stream's PUT or POST came to.
// A change of a stream's shard count asked through the API, and what came of it.
struct ScaleAsk {
  bool rollback = false;
  protocol::ScaleRequest request;
};
struct ScaleDone {
  protocol::ScaleOutcome outcome = protocol::ScaleOutcome::Same;  // NoStream when there is none
  protocol::StreamMetadata meta;             // after it
  std::vector<std::string> consumerGroups;  // the stream's groups (all of them are affected)
};

struct StreamWritten {
  using Outcome = protocol::StreamWriteOutcome;
  protocol::StreamMetadata meta;
  Outcome outcome = Outcome::Same;
};

// What an admin's delete of a group came to.
using Deletion = protocol::GroupDeletion;

// What an admin's reset of a group's position came to (`shards` moved when Reset).
struct OffsetsReset {
  using Outcome = protocol::OffsetsResetOutcome;
  Outcome outcome = Outcome::Reset;
  int32_t shards = 0;
};

// Where a group's calls are served (group/pod_authority.hpp): by this pod, by the pod at
// `address` (the call is forwarded there), or by none right now (the caller retries).
struct Placement {
  using Kind = protocol::PlacementKind;
  Kind kind = Kind::Here;
  std::string podId;
  std::string address;
  std::string why;  // Nowhere: for the RETRY answer
  // The owner's base URL as it advertises itself (scheme://host:port), for kGroupOwnerHeader: this
  // pod's own when Here (shared, not copied: it is named on every heartbeat), the other's when
  // Elsewhere; null or "" when unknown (nothing is said then).
  std::shared_ptr<const std::string> ownerUrl;
  uint64_t term = 0;  // the pod view's term the placement was read in (changes when owners may move)
};
// "scheme://address" for an advertised "host:port" (an IPv6 host is bracketed); "" for "".
inline std::string owner_url(bool https, const std::string& address) {
  if (address.empty()) return {};
  std::string url = https ? "https://" : "http://";
  const auto colon = address.rfind(':');
  if (colon != std::string::npos && address.find(':') != colon && address.front() != '[')
    return url + "[" + address.substr(0, colon) + "]" + address.substr(colon);
  return url + address;
}

// One group of a stream, where it stands on the stream's shard streams as Redis holds them (one
// reading, whether or not any member is alive): several groups over one stream are how a record is
// read by several consumers each (every group reads every record).
struct GroupPosition {
  std::string group;
  std::optional<int64_t> lag;  // records not yet delivered to the group; unknown if Redis cannot tell on a shard
  int64_t pending = 0;         // delivered and not yet acknowledged
  int32_t unknownShards = 0;   // shards whose lag Redis cannot tell (or without the group's consumer group)
};
struct StreamGroups {
  std::vector<std::string> groups;
  std::vector<GroupPosition> positions;  // empty when the lag snapshot could not be read
  std::size_t total = 0;                 // groups of the stream, all pages
  std::optional<std::string> nextAfter;  // a page: more groups follow this name
  std::optional<int64_t> lagReadAtMs;    // when the lag round read the figures (store time)
};
// A page of a stream's groups, in name order: at most `limit` (none: all), after the name `after`.
struct GroupPage {
  std::optional<int32_t> limit;
  std::string after;
};
inline constexpr int32_t kMaxGroupPage = 1000;

// What the coordinator does; every call answers exactly once through its callback, from any thread.
class Backend {
 public:
  virtual ~Backend() = default;
  // Which pod serves the group's heartbeats and admin calls now. The default: this one.
  virtual Placement place(const protocol::GroupKey&) { return {}; }
  // A call this pod forwarded was answered by the other pod (or it could not be reached).
  virtual void forwarded(bool /*answered*/) {}
  virtual void heartbeat(const protocol::GroupKey& key, protocol::HeartbeatRequest req,
                         std::function<void(protocol::HeartbeatResponse)> done) = 0;
  // PUT (create or grow) or, with `createOnly`, POST (create; an existing stream is left alone).
  virtual void write_stream(const std::string& prefix, const protocol::StreamRequest& req, bool createOnly,
                            std::function<void(Answer<StreamWritten>)> done) = 0;
  // The stream's metadata for producers, after making sure every shard stream and the group's
  // Redis consumer group exist; std::nullopt when there is no such stream.
  virtual void producer_routing(const protocol::GroupKey& key,
                                std::function<void(Answer<std::optional<protocol::StreamMetadata>>)> done) = 0;
  virtual void get_stream(const std::string& prefix,
                          std::function<void(Answer<std::optional<protocol::StreamMetadata>>)> done) = 0;
  // The stream's groups, each with where it stands in Redis.
  virtual void list_groups(const std::string& prefix, const GroupPage& page, std::function<void(Answer<StreamGroups>)> done) = 0;
  // Every stream the coordinator knows (created, or carrying a group), sorted.
  virtual void list_streams(std::function<void(Answer<std::vector<std::string>>)> done) = 0;
  // The describe JSON; std::nullopt when the group does not exist. Its Redis figures come from the
  // stream's lag snapshot (the last lag round), or with `fresh` from reading the shard streams now
  // (XINFO GROUPS of each: its cost grows with the number of groups on the stream).
  virtual void describe(const protocol::GroupKey& key, bool fresh,
                        std::function<void(Answer<std::optional<std::string>>)> done) = 0;
  // true when the member existed and was fenced.
  virtual void remove_member(const protocol::GroupKey& key, const std::string& memberId,
                             std::function<void(Answer<bool>)> done) = 0;
  // Sets the group's assignor and shard racks (making the group if it does not exist).
  virtual void configure_group(const protocol::GroupKey& key, protocol::GroupConfig config,
                               std::function<void(Answer<protocol::GroupConfigSet>)> done) = 0;
  // A target for an external group, judged by the group (group::set_target).
  virtual void post_target(const protocol::GroupKey& key, protocol::PostedTarget target,
                           std::function<void(Answer<protocol::TargetPosted>)> done) = 0;
  // Deletes an empty group (or, with fenceMembers, fences its live members first).
  virtual void delete_group(const protocol::GroupKey& key, bool fenceMembers,
                            std::function<void(Answer<Deletion>)> done) = 0;
  // Moves the group's position on every shard stream to `position` (reset_position), refused while
  // it has live members unless `fenceMembers` (they are fenced first).
  virtual void reset_offsets(const protocol::GroupKey& key, std::string position, bool fenceMembers,
                             std::function<void(Answer<OffsetsReset>)> done) = 0;
  // The group's dead letters (written by its members): how many, and the oldest `limit`.
  virtual void dead_letters(const protocol::GroupKey& key, int64_t limit,
                            std::function<void(Answer<protocol::DeadLetterPage>)> done) = 0;
  // Writes dead letters (by deadLetterId; none: the oldest `limit`) back to their shard streams and
  // removes them from the dead-letter stream: how many were, and the named ids it does not hold.
  virtual void redrive(const protocol::GroupKey& key, std::vector<std::string> deadLetterIds, int64_t limit,
                       std::function<void(Answer<protocol::DeadLetterMove>)> done) = 0;
  // Drops dead letters for good (by deadLetterId; none: the oldest `limit`).
  virtual void discard_dead_letters(const protocol::GroupKey& key, std::vector<std::string> deadLetterIds, int64_t limit,
                                    std::function<void(Answer<protocol::DeadLetterMove>)> done) = 0;
  // The stream's retention policy; nullopt: no such stream.
  virtual void get_retention(const std::string& prefix,
                             std::function<void(Answer<std::optional<protocol::Retention>>)> done) {
    (void)prefix;
    done(Answer<std::optional<protocol::Retention>>::failure(Problem::Kind::Failed, "no retention here"));
  }
  // Sets it; false: no such stream.
  // Scale a stream's shard count up or down (down: its removed shards drain first), or roll back
  // a shrink that still drains (SPEC §3 rule 9).
  virtual void scale_stream(const std::string& prefix, const ScaleAsk& ask, std::function<void(Answer<ScaleDone>)> done) {
    (void)prefix, (void)ask;
    done(Answer<ScaleDone>::failure({Problem::Kind::Failed, "this coordinator cannot scale streams"}));
  }
  // Sets the racks of a stream's shards (listed, or from the zone of the Redis node serving each):
  // outcome RacksSet or Same (NoStream when there is none), the stream after it, and its groups.
  virtual void set_stream_racks(const std::string& prefix, const protocol::StreamRacksRequest& req,
                                std::function<void(Answer<ScaleDone>)> done) {
    (void)prefix, (void)req;
    done(Answer<ScaleDone>::failure({Problem::Kind::Failed, "this coordinator cannot set shard racks"}));
  }
  virtual void set_retention(const std::string& prefix, protocol::Retention r, std::function<void(Answer<bool>)> done) {
    (void)prefix, (void)r;
    done(Answer<bool>::failure(Problem::Kind::Failed, "no retention here"));
  }
  virtual void ready(std::function<void(bool ok, std::string why)> done) = 0;
  virtual std::string metrics_text() = 0;
  // The timings every heartbeat answer carries, for answers given before a group is asked (a
  // request refused as invalid still tells the member when to call again).
  using Timings = protocol::Timings;
  virtual Timings timings() const = 0;
  // One audit line (see audit_line) per admin call, refused ones included; written to the log.
  virtual void audit(const std::string& line) = 0;
};

// Bearer tokens (SPEC §5): each with a role and the stream/group patterns it may touch.
struct Token {
  std::string token;
  std::string role = "member";           // "member" or "admin"
  std::vector<std::string> streams{"*"};  // glob patterns: '*' matches any run of characters
  std::vector<std::string> groups{"*"};
  std::string name;  // who holds it, for the audit trail (optional; never the token itself)
  std::string file;  // where it was read (a mounted Secret), read again when it changes; empty: inline
};
struct AuthConfig {
  std::vector<Token> tokens;
  // GET /metrics without a token (its labels name every stream and group). Only meaningful with
  // tokens configured; when false, /metrics needs a token of either role.
  bool metricsPublic = true;
  bool open() const { return tokens.empty(); }
};
// Equal, in a time that depends on neither where the first difference is nor (beyond the
// presented value's own length) on the stored token's length.
bool constant_time_equal(const std::string& a, const std::string& b);
bool glob_match(const std::string& pattern, const std::string& text);

// What a route asks of the caller's token. Metrics: Public, or Member when the configuration keeps
// /metrics behind a token (AuthConfig::metricsPublic false).
enum class Need { Public, Member, Admin, Metrics };
struct AuthDecision {
  bool allowed = true;
  int status = 200;  // 401 no/unknown token, 403 token not allowed here
  std::string message;
  const Token* token = nullptr;  // the matched token (points into the AuthConfig), if any
};
AuthDecision authorize(const AuthConfig& auth, const std::string& authorizationHeader, Need need,
                       const std::string& stream, const std::string& group);
// Who called, for the audit trail: the token's name (or "token#N", its place in the list, when it
// has none), "anonymous" when the server runs open, "unauthenticated" when no known token was
// presented. Only admin calls ask, so an ordinary request builds no name.
std::string caller_of(const AuthConfig& auth, const AuthDecision& decision);
// Whether any of the glob patterns matches `value`.
bool matches_any(const std::vector<std::string>& patterns, const std::string& value);

// The route of a request, or the HTTP error it gets.
struct Route {
  enum class Kind {
    Heartbeat,
    PutStream,
    PostStream,
    ProducerRouting,
    GetStream,
    ListGroups,
    Describe,
    DeleteGroup,
    ConfigureGroup,
    PostTarget,
    RemoveMember,
    DeadLetters,
    Redrive,
    DiscardDeadLetters,
    ResetOffsets,
    GetRetention,
    PutRetention,
    PutRacks,
    ScaleStream,
    RollbackScale,
    ListStreams,
    StatusPage,
    Metrics,
    Health,
    Ready,
    GroupOwner
  };
  Kind kind;
  std::string stream, group, member;
  std::string migration;  // RollbackScale by the reference's path: the migration named
  const struct RouteSpec* spec = nullptr;  // the row of route_table() it matched
};
struct RouteError {
  int status = 404;
  std::string message;
  std::string allow;  // for 405
};
struct Routed {
  std::optional<Route> route;
  RouteError error;
};
Routed route(const std::string& method, const std::string& target);

// One row per (method, path template) served: everything the request path needs to know about a
// route. Adding an endpoint is one row and one handler (api.cpp). docs/openapi.json lists exactly
// these rows (a test reads both). Path templates name their holes {streamPrefix},
// {consumerGroup}, {memberId} and {reshardingId}.
struct RouteCall;  // what a handler gets (api.cpp)
struct RouteSpec {
  const char* method;
  const char* pattern;
  Route::Kind kind;
  Need need;
  const char* audit;   // the admin action its audit line names; nullptr: no audit line
  bool json;           // the body must be application/json (else 415)
  bool ownerNamed;     // about one group: answers carry kGroupOwnerHeader
  bool ownerServed;    // served by the group's owner: another pod forwards it there
  void (*handler)(RouteCall&);
};
const std::vector<RouteSpec>& route_table();

// Everything between the parsed request and the response.
void handle_request(const HttpRequest& req, Backend& backend, const AuthConfig& auth, Respond respond);
// The plain probe port (--probe-listen, for kubelet probes when the API port wants client
// certificates): GET and HEAD /healthz and /readyz answered as on the API port (public there too);
// anything else 404, so nothing but the probes is reachable without TLS.
void handle_probe_request(const HttpRequest& req, Backend& backend, Respond respond);

// The audit line of an admin call: `audit caller=C action=A target=T status=N outcome=...`, each
// value quoted when it holds a space. `action` is create-stream (POST), put-stream (PUT: create or
// grow), delete-group or remove-member; `outcome` is what the answer said (its error and message,
// or for streams the shard count and metadata version that resulted).
std::string audit_line(const std::string& caller, const std::string& action, const std::string& target,
                       const HttpResponse& answer);

// The status page served at "/": one self-contained HTML document (CSS and JS inline).
const std::string& status_page_html();

// The HTTP code of a heartbeat's answer: 200 for every decision (the status is in the body), 401
// or 403 for a refused token (`authenticated`: a known token was presented).
int heartbeat_http_status(protocol::HeartbeatStatus s, bool authenticated = true);

// A plain JSON error body: {"error": "...", "status": N, "message": "..."}.
HttpResponse plain_error(int status, const std::string& error, const std::string& message);

}  // namespace rsc::http
