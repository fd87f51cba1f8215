// The HTTP surface without sockets: routing, auth, validation and the HTTP codes of SPEC §2/§5.
#include <gtest/gtest.h>

#include <algorithm>
#include <tuple>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "http/api.hpp"
#include "protocol/codec.hpp"

using namespace rsc;
using namespace rsc::http;
using nlohmann::json;

namespace {

// Records what the handler asked of the coordinator and answers with canned results.
struct FakeBackend : Backend {
  int heartbeats = 0;
  protocol::HeartbeatRequest lastRequest;
  protocol::GroupKey lastKey;
  protocol::HeartbeatStatus answer = protocol::HeartbeatStatus::OK;
  bool storeDown = false;
  bool readyOk = true;
  std::vector<std::string> deletes;
  http::Deletion deletion = http::Deletion::Deleted;
  int64_t lastLimit = 0;
  std::vector<std::string> lastIds;
  bool groupFound = true;  // false: the dead-letter calls answer as for a group that does not exist
  std::string lastDeadLetterCall;  // "redrive" | "discard"
  // The dead-letter ids the fake's dead-letter stream holds (what redrive and discard find).
  std::vector<std::string> heldIds{"1700000000001-0", "1700000000002-0"};

  void heartbeat(const protocol::GroupKey& key, protocol::HeartbeatRequest req,
                 std::function<void(protocol::HeartbeatResponse)> done) override {
    ++heartbeats;
    lastKey = key;
    lastRequest = req;
    protocol::HeartbeatResponse r;
    r.responseTo = req.requestId;
    r.memberId = req.memberId;
    r.status = answer;
    done(r);
  }
  // A stream "orders" of 16 shards exists; PUT grows it, POST creates others.
  void write_stream(const std::string& prefix, const protocol::StreamRequest& req, bool createOnly,
                    std::function<void(http::Answer<http::StreamWritten>)> done) override {
    using R = http::Answer<http::StreamWritten>;
    using O = http::StreamWritten::Outcome;
    if (storeDown) return done(R::failure(http::Problem::Kind::Unavailable, "down"));
    const int32_t n = req.shardCount.value_or(16);
    lastStreamRequest = req;
    if (prefix != "orders") return done(R::success({{prefix, n, 1, req.keyStyle.value_or(protocol::KeyStyle::Plain)}, O::Created}));
    if (createOnly) return done(R::success({{prefix, 16, 1, protocol::KeyStyle::Plain}, O::Exists}));
    if (n < 16) return done(R::failure(http::Problem::Kind::Conflict, "only grow"));
    done(R::success({{prefix, n, 2, protocol::KeyStyle::Plain}, n == 16 ? O::Same : O::Grown}));
  }
  void producer_routing(const protocol::GroupKey& key,
                        std::function<void(http::Answer<std::optional<protocol::StreamMetadata>>)> done) override {
    using R = http::Answer<std::optional<protocol::StreamMetadata>>;
    if (storeDown) return done(R::failure(http::Problem::Kind::Unavailable, "down"));
    lastKey = key;
    if (key.streamPrefix != "orders") return done(R::success(std::nullopt));
    done(R::success(protocol::StreamMetadata{"orders", 4, 3, protocol::KeyStyle::Plain}));
  }
  protocol::StreamRequest lastStreamRequest;
  void get_stream(const std::string& prefix,
                  std::function<void(http::Answer<std::optional<protocol::StreamMetadata>>)> done) override {
    using R = http::Answer<std::optional<protocol::StreamMetadata>>;
    if (prefix == "missing") return done(R::success(std::nullopt));
    done(R::success(protocol::StreamMetadata{prefix, 16, 1}));
  }
  std::vector<http::GroupPage> pages;
  void list_groups(const std::string&, const http::GroupPage& page, std::function<void(http::Answer<http::StreamGroups>)> done) override {
    pages.push_back(page);
    http::StreamGroups g{{"audit", "billing"}, {{"audit", 12, 3, 0}, {"billing", std::nullopt, 0, 1}}, 2, std::nullopt, 5000};
    if (page.limit == 1) g.groups = {"audit"}, g.positions.resize(1), g.nextAfter = "audit";
    done(http::Answer<http::StreamGroups>::success(std::move(g)));
  }
  void list_streams(std::function<void(http::Answer<std::vector<std::string>>)> done) override {
    using R = http::Answer<std::vector<std::string>>;
    if (storeDown) return done(R::failure(http::Problem::Kind::Unavailable, "down"));
    done(R::success({"audit-log", "orders", "payments"}));
  }
  std::vector<std::string> audits;
  void audit(const std::string& line) override { audits.push_back(line); }
  std::vector<bool> describedFresh;
  void describe(const protocol::GroupKey& key, bool fresh, std::function<void(http::Answer<std::optional<std::string>>)> done) override {
    using R = http::Answer<std::optional<std::string>>;
    describedFresh.push_back(fresh);
    if (key.consumerGroup == "missing") return done(R::success(std::nullopt));
    done(R::success(std::string(R"({"state":"STABLE"})")));
  }
  void remove_member(const protocol::GroupKey&, const std::string& id, std::function<void(http::Answer<bool>)> done) override {
    done(http::Answer<bool>::success(id == "a"));
  }
  std::vector<protocol::PostedTarget> targets;  // what reached the backend
  protocol::TargetPosted::Outcome targetOutcome = protocol::TargetPosted::Outcome::Set;
  void post_target(const protocol::GroupKey&, protocol::PostedTarget t,
                   std::function<void(http::Answer<protocol::TargetPosted>)> done) override {
    targets.push_back(t);
    protocol::TargetPosted a;
    a.outcome = targetOutcome;
    a.message = "judged";
    a.groupEpoch = 9;
    a.target = t.target;
    a.unassigned = {5};
    done(http::Answer<protocol::TargetPosted>::success(std::move(a)));
  }
  std::vector<protocol::StreamRacksRequest> rackRequests;  // what reached the backend
  void set_stream_racks(const std::string& prefix, const protocol::StreamRacksRequest& req,
                        std::function<void(http::Answer<http::ScaleDone>)> done) override {
    if (prefix == "missing") return done(http::Answer<http::ScaleDone>::success({protocol::ScaleOutcome::NoStream, {}, {}}));
    if (req.fromClusterZones && prefix == "unzoned")
      return done(http::Answer<http::ScaleDone>::failure({http::Problem::Kind::Conflict, "no zone for the Redis node n:1"}));
    rackRequests.push_back(req);
    protocol::StreamMetadata m{prefix, 4, 6};
    m.shardRacks = req.fromClusterZones ? std::vector<std::string>{"z1", "z1", "z2", "z2"} : req.shardRacks;
    if (req.fromClusterZones) m.shardRacksFrom = protocol::kShardRacksFromClusterZones;
    done(http::Answer<http::ScaleDone>::success({protocol::ScaleOutcome::RacksSet, m, {"audit", "billing"}}));
  }
  std::vector<protocol::GroupConfig> configs;  // what reached the backend
  void configure_group(const protocol::GroupKey&, protocol::GroupConfig config,
                       std::function<void(http::Answer<protocol::GroupConfigSet>)> done) override {
    configs.push_back(config);
    protocol::GroupConfigSet set;
    set.changed = true;
    set.groupEpoch = 7;
    set.assignor = config.assignor;
    set.shardRacks = config.shardRacks.value_or(std::vector<std::string>{});
    set.coPartitionedWith = config.coPartitionedWith;
    if (config.coPartitionedWith) set.partnerLinked = false;
    done(http::Answer<protocol::GroupConfigSet>::success(std::move(set)));
  }
  void delete_group(const protocol::GroupKey& key, bool fence,
                    std::function<void(http::Answer<http::Deletion>)> done) override {
    deletes.push_back(key.str() + (fence ? " fence" : ""));
    done(http::Answer<http::Deletion>::success(deletion));
  }
  std::string lastPosition;
  bool lastFence = false;
  http::OffsetsReset::Outcome resetOutcome = http::OffsetsReset::Outcome::Reset;
  void reset_offsets(const protocol::GroupKey& key, std::string position, bool fence,
                     std::function<void(http::Answer<http::OffsetsReset>)> done) override {
    lastKey = key;
    lastPosition = position;
    lastFence = fence;
    done(http::Answer<http::OffsetsReset>::success({resetOutcome, 4}));
  }
  void dead_letters(const protocol::GroupKey& key, int64_t limit,
                    std::function<void(http::Answer<protocol::DeadLetterPage>)> done) override {
    lastKey = key;
    lastLimit = limit;
    protocol::DeadLetterPage page;
    page.groupFound = groupFound;
    page.total = 2;
    protocol::DeadLetter d;
    d.deadLetterId = "1700000000001-0";
    d.id = "1700000000000-3";
    d.shard = 3;
    d.stream = "orders:3";
    d.deliveries = 5;
    d.error = "cannot parse";
    d.member = "m-a";
    d.atMs = 1700000000001;
    d.fields = {{"key", "k1"}, {"seq", "42"}};
    page.items.push_back(d);
    done(http::Answer<protocol::DeadLetterPage>::success(page));
  }
  protocol::DeadLetterMove move(const std::vector<std::string>& ids) const {
    protocol::DeadLetterMove m;
    m.groupFound = groupFound;
    if (!groupFound) return m;
    if (ids.empty()) m.moved = static_cast<int64_t>(heldIds.size());
    for (const auto& id : ids) {
      if (std::find(heldIds.begin(), heldIds.end(), id) != heldIds.end()) ++m.moved;
      else m.unknownIds.push_back(id);
    }
    return m;
  }
  void redrive(const protocol::GroupKey& key, std::vector<std::string> ids, int64_t limit,
               std::function<void(http::Answer<protocol::DeadLetterMove>)> done) override {
    lastKey = key;
    lastIds = ids;
    lastLimit = limit;
    lastDeadLetterCall = "redrive";
    done(http::Answer<protocol::DeadLetterMove>::success(move(ids)));
  }
  void discard_dead_letters(const protocol::GroupKey& key, std::vector<std::string> ids, int64_t limit,
                            std::function<void(http::Answer<protocol::DeadLetterMove>)> done) override {
    lastKey = key;
    lastIds = ids;
    lastLimit = limit;
    lastDeadLetterCall = "discard";
    done(http::Answer<protocol::DeadLetterMove>::success(move(ids)));
  }
  void ready(std::function<void(bool, std::string)> done) override { done(readyOk, readyOk ? "" : "redis: refused"); }
  std::string metrics_text() override { return "# HELP x y\n"; }
  Timings timings() const override { return {3000, 60000, 15000}; }
};

const std::string kHb = "/coord/v1/streams/orders/groups/billing/members/a/heartbeat";

std::string body(const std::string& member = "a", int epoch = 0) {
  return json{{"protocolVersion", 1}, {"requestId", "r-1"}, {"memberId", member}, {"memberEpoch", epoch},
              {"metadataVersion", 0}, {"runtimeConsumerCapacity", {{"runtimeMaxConcurrency", 1}, {"availableConcurrency", 1}}},
              {"ownedShards", json::array()}}
      .dump();
}

struct Call {
  HttpResponse res;
  int answers = 0;
};

Call call(Backend& b, const AuthConfig& auth, std::string method, std::string target, std::string bodyText = {},
          std::string contentType = "application/json", std::string authorization = {}) {
  Call c;
  HttpRequest r{std::move(method), std::move(target), std::move(contentType), std::move(authorization), std::move(bodyText)};
  handle_request(r, b, auth, [&](HttpResponse res) {
    c.res = std::move(res);
    ++c.answers;
  });
  EXPECT_EQ(c.answers, 1) << "every request gets exactly one answer";
  return c;
}

std::string header(const HttpResponse& r, const std::string& name) {
  for (const auto& [k, v] : r.headers)
    if (k == name) return v;
  return {};
}

AuthConfig tokens() {
  AuthConfig a;
  a.tokens.push_back({"member-token-0123456789", "member", {"orders*"}, {"billing"}});
  a.tokens.push_back({"admin-token-0123456789", "admin", {"*"}, {"*"}});
  return a;
}

}  // namespace

TEST(Routing, EveryEndpointOfTheSpecIsRouted) {
  using K = Route::Kind;
  EXPECT_EQ(route("POST", kHb).route->kind, K::Heartbeat);
  EXPECT_EQ(route("POST", kHb).route->member, "a");
  EXPECT_EQ(route("PUT", "/coord/v1/streams/orders").route->kind, K::PutStream);
  EXPECT_EQ(route("GET", "/coord/v1/streams/orders").route->kind, K::GetStream);
  EXPECT_EQ(route("GET", "/coord/v1/streams/orders/groups").route->kind, K::ListGroups);
  EXPECT_EQ(route("GET", "/coord/v1/streams/orders/groups/billing").route->kind, K::Describe);
  EXPECT_EQ(route("DELETE", "/coord/v1/streams/orders/groups/billing/members/a").route->kind, K::RemoveMember);
  EXPECT_EQ(route("DELETE", "/coord/v1/streams/orders/groups/billing").route->kind, K::DeleteGroup);
  EXPECT_EQ(route("PUT", "/coord/v1/streams/orders/groups/billing").route->kind, K::ConfigureGroup);
  EXPECT_EQ(route("POST", "/coord/v1/streams/orders/groups/billing").error.allow, "GET, DELETE, PUT");
  EXPECT_EQ(route("PUT", "/coord/v1/streams/orders/groups/billing/target").route->kind, K::PostTarget);
  EXPECT_EQ(route("GET", "/coord/v1/streams/orders/groups/billing/dead-letters?count=5").route->kind, K::DeadLetters);
  EXPECT_EQ(route("POST", "/coord/v1/streams/orders/groups/billing/dead-letters/redrive").route->kind, K::Redrive);
  EXPECT_EQ(route("DELETE", "/coord/v1/streams/orders/groups/billing/dead-letters").error.allow, "GET");
  EXPECT_EQ(route("GET", "/metrics").route->kind, K::Metrics);
  EXPECT_EQ(route("GET", "/healthz").route->kind, K::Health);
  EXPECT_EQ(route("GET", "/readyz?verbose=1").route->kind, K::Ready);
}

TEST(Routing, UnknownPathsAre404AndWrongMethods405WithAllow) {
  auto r = route("GET", "/coord/v2/anything");
  ASSERT_FALSE(r.route);
  EXPECT_EQ(r.error.status, 404);
  auto m = route("GET", kHb);
  ASSERT_FALSE(m.route);
  EXPECT_EQ(m.error.status, 405);
  EXPECT_EQ(m.error.allow, "POST");
  EXPECT_EQ(route("DELETE", "/coord/v1/streams/orders").error.allow, "GET, PUT, POST");
  FakeBackend b;
  auto c = call(b, {}, "PATCH", "/metrics");
  EXPECT_EQ(c.res.status, 405);
  EXPECT_EQ(header(c.res, "Allow"), "GET, HEAD");
  EXPECT_EQ(json::parse(c.res.body).at("error"), "METHOD_NOT_ALLOWED");
  EXPECT_EQ(call(b, {}, "GET", "/nope").res.status, 404);
  EXPECT_EQ(json::parse(call(b, {}, "GET", "/nope").res.body).at("status"), 404);
}

TEST(HttpCodes, AHeartbeatIsAnswered200WhateverItsStatusButARefusedToken) {
  EXPECT_EQ(heartbeat_http_status(protocol::HeartbeatStatus::OK), 200);
  EXPECT_EQ(heartbeat_http_status(protocol::HeartbeatStatus::FENCED_MEMBER_EPOCH), 200);
  // Every decision is 200 with the status in the body; only a refused token is an HTTP error.
  EXPECT_EQ(heartbeat_http_status(protocol::HeartbeatStatus::RETRY), 200);
  EXPECT_EQ(heartbeat_http_status(protocol::HeartbeatStatus::INVALID_REQUEST), 200);
  EXPECT_EQ(heartbeat_http_status(protocol::HeartbeatStatus::UNSUPPORTED_PROTOCOL), 200);
  EXPECT_EQ(heartbeat_http_status(protocol::HeartbeatStatus::UNKNOWN_MEMBER_ID), 200);
  EXPECT_EQ(heartbeat_http_status(protocol::HeartbeatStatus::SYNC_METADATA), 200);
  EXPECT_EQ(heartbeat_http_status(protocol::HeartbeatStatus::REVOKE_PENDING), 200);
  EXPECT_EQ(heartbeat_http_status(protocol::HeartbeatStatus::GROUP_AUTHORIZATION_FAILED, false), 401);
  EXPECT_EQ(heartbeat_http_status(protocol::HeartbeatStatus::GROUP_AUTHORIZATION_FAILED, true), 403);
}

TEST(Heartbeat, AValidHeartbeatReachesTheBackendAndGets200) {
  FakeBackend b;
  auto c = call(b, {}, "POST", kHb, body());
  EXPECT_EQ(c.res.status, 200);
  EXPECT_EQ(b.heartbeats, 1);
  EXPECT_EQ(b.lastKey.streamPrefix, "orders");
  EXPECT_EQ(b.lastKey.consumerGroup, "billing");
  EXPECT_EQ(json::parse(c.res.body).at("status"), "OK");
  EXPECT_EQ(c.res.contentType, "application/json");
}

TEST(Heartbeat, StatusesMapToTheirHttpCodes) {
  FakeBackend b;
  for (auto [s, code] : std::vector<std::pair<protocol::HeartbeatStatus, int>>{
           {protocol::HeartbeatStatus::REVOKE_PENDING, 200},
           {protocol::HeartbeatStatus::FENCED_MEMBER_EPOCH, 200},
           {protocol::HeartbeatStatus::UNKNOWN_MEMBER_ID, 200},
           {protocol::HeartbeatStatus::SYNC_METADATA, 200},
           {protocol::HeartbeatStatus::INVALID_REQUEST, 200},
           {protocol::HeartbeatStatus::UNSUPPORTED_PROTOCOL, 200},
           {protocol::HeartbeatStatus::RETRY, 200}}) {
    b.answer = s;
    auto c = call(b, {}, "POST", kHb, body());
    EXPECT_EQ(c.res.status, code) << protocol::to_string(s);
    if (s == protocol::HeartbeatStatus::RETRY) {
      EXPECT_EQ(header(c.res, "Retry-After"), "1");
    }
  }
}

// An invalid heartbeat is a decision: 200, the response's whole shape (an assignment object, the
// timings), the status in the body. A body that is no JSON object is not a heartbeat: 400.
TEST(Heartbeat, AnInvalidHeartbeatIs200WithTheResponseShapeAndNothingReachesTheBackend) {
  FakeBackend b;
  auto c = call(b, {}, "POST", kHb, body("b"));  // path member a, body member b
  EXPECT_EQ(c.res.status, 200);
  auto j = json::parse(c.res.body);
  EXPECT_EQ(j.at("status"), "INVALID_REQUEST");
  EXPECT_EQ(j.at("responseTo"), "r-1");
  EXPECT_NE(j.at("message").get<std::string>().find("memberId"), std::string::npos);
  EXPECT_EQ(j.at("errorField"), "memberId");
  EXPECT_EQ(j.at("heartbeatIntervalMs"), 3000);
  EXPECT_EQ(j.at("memberLeaseTtlMs"), 15000);
  ASSERT_TRUE(j.at("assignment").is_object());
  EXPECT_EQ(j.at("assignment").at("assignedShards"), json::array());
  EXPECT_EQ(b.heartbeats, 0);
  auto v2 = json::parse(body());
  v2["protocolVersion"] = 2;
  auto u = call(b, {}, "POST", kHb, v2.dump());
  EXPECT_EQ(u.res.status, 200);
  EXPECT_EQ(json::parse(u.res.body).at("status"), "UNSUPPORTED_PROTOCOL");
  EXPECT_GT(json::parse(u.res.body).at("heartbeatIntervalMs").get<int>(), 0);
  for (const std::string& bad : std::vector<std::string>{"not json", "[1, 2]", "\"text\"", std::string(40, '[') + std::string(40, ']')}) {
    auto n = call(b, {}, "POST", kHb, bad);
    EXPECT_EQ(n.res.status, 400) << bad;
    EXPECT_EQ(json::parse(n.res.body).at("status"), "INVALID_REQUEST") << bad;
  }
  EXPECT_EQ(b.heartbeats, 0);
}

TEST(Heartbeat, BadNamesInThePathAreInvalid) {
  FakeBackend b;
  auto c = call(b, {}, "POST", "/coord/v1/streams/ord%20ers/groups/billing/members/a/heartbeat", body());
  EXPECT_EQ(c.res.status, 200);  // a heartbeat decision: INVALID_REQUEST in the body
  EXPECT_EQ(json::parse(c.res.body).at("status"), "INVALID_REQUEST");
  EXPECT_NE(json::parse(c.res.body).at("message").get<std::string>().find("streamPrefix"), std::string::npos);
  EXPECT_EQ(json::parse(c.res.body).at("errorField"), "streamPrefix");
  auto g = call(b, {}, "GET", "/coord/v1/streams/orders/groups/" + std::string(129, 'g'));
  EXPECT_EQ(g.res.status, 400);
  EXPECT_EQ(b.heartbeats, 0);
}

TEST(Heartbeat, AWrongContentTypeIs415) {
  FakeBackend b;
  auto c = call(b, {}, "POST", kHb, body(), "text/plain");
  EXPECT_EQ(c.res.status, 415);
  EXPECT_EQ(call(b, {}, "POST", kHb, body(), "application/json; charset=utf-8").res.status, 200);
}

TEST(Auth, NoTokenIs401AndAForeignGroupIs403WithGroupAuthorizationFailed) {
  FakeBackend b;
  const auto auth = tokens();
  auto none = call(b, auth, "POST", kHb, body());
  EXPECT_EQ(none.res.status, 401);
  EXPECT_EQ(json::parse(none.res.body).at("status"), "GROUP_AUTHORIZATION_FAILED");
  EXPECT_EQ(header(none.res, "WWW-Authenticate"), "Bearer");
  auto unknown = call(b, auth, "POST", kHb, body(), "application/json", "Bearer nope");
  EXPECT_EQ(unknown.res.status, 401);
  auto ok = call(b, auth, "POST", kHb, body(), "application/json", "Bearer member-token-0123456789");
  EXPECT_EQ(ok.res.status, 200);
  auto otherGroup = call(b, auth, "POST", "/coord/v1/streams/orders/groups/audit/members/a/heartbeat", body(),
                         "application/json", "Bearer member-token-0123456789");
  EXPECT_EQ(otherGroup.res.status, 403);
  EXPECT_EQ(json::parse(otherGroup.res.body).at("status"), "GROUP_AUTHORIZATION_FAILED");
  auto otherStream = call(b, auth, "POST", "/coord/v1/streams/clicks/groups/billing/members/a/heartbeat", body(),
                          "application/json", "Bearer member-token-0123456789");
  EXPECT_EQ(otherStream.res.status, 403);
  EXPECT_EQ(b.heartbeats, 1);
}

TEST(Auth, AdminCallsNeedTheAdminRoleAndProbesArePublic) {
  FakeBackend b;
  const auto auth = tokens();
  auto member = call(b, auth, "PUT", "/coord/v1/streams/orders", R"({"shardCount": 32})", "application/json",
                     "Bearer member-token-0123456789");
  EXPECT_EQ(member.res.status, 403);
  EXPECT_EQ(json::parse(member.res.body).at("error"), "GROUP_AUTHORIZATION_FAILED");
  auto admin = call(b, auth, "PUT", "/coord/v1/streams/orders", R"({"shardCount": 32})", "application/json",
                    "Bearer admin-token-0123456789");
  EXPECT_EQ(admin.res.status, 200);
  EXPECT_EQ(call(b, auth, "DELETE", "/coord/v1/streams/orders/groups/billing/members/a", "", "", "Bearer member-token-0123456789").res.status, 403);
  EXPECT_EQ(call(b, auth, "GET", "/metrics").res.status, 200);
  EXPECT_EQ(call(b, auth, "GET", "/healthz").res.status, 200);
  EXPECT_EQ(call(b, auth, "GET", "/readyz").res.status, 200);
}

// The dead letters hold records' data: listing and re-sending them is for admins, and a re-send is
// audited like every admin action.
TEST(Admin, DeadLettersAreListedAndRedrivenByAdminsWithClearErrors) {
  FakeBackend b;
  const auto auth = tokens();
  const std::string list = "/coord/v1/streams/orders/groups/billing/dead-letters";
  const std::string redrive = list + "/redrive";
  const std::string admin = "Bearer admin-token-0123456789", member = "Bearer member-token-0123456789";
  EXPECT_EQ(call(b, auth, "GET", list, "", "", member).res.status, 403);
  EXPECT_EQ(call(b, auth, "POST", redrive, R"({"all": true})", "application/json", member).res.status, 403);
  auto got = call(b, auth, "GET", list + "?count=10", "", "", admin);
  ASSERT_EQ(got.res.status, 200) << got.res.body;
  EXPECT_EQ(b.lastLimit, 10);
  EXPECT_EQ(b.lastKey.str(), "orders/billing");
  const auto j = json::parse(got.res.body);
  EXPECT_EQ(j.at("total"), 2);
  ASSERT_EQ(j.at("deadLetters").size(), 1u);
  const auto& d = j.at("deadLetters")[0];
  EXPECT_EQ(d.at("deadLetterId"), "1700000000001-0");
  EXPECT_EQ(d.at("id"), "1700000000000-3");
  EXPECT_EQ(d.at("shard"), 3);
  EXPECT_EQ(d.at("stream"), "orders:3");
  EXPECT_EQ(d.at("deliveries"), 5);
  EXPECT_EQ(d.at("error"), "cannot parse");
  EXPECT_EQ(d.at("member"), "m-a");
  EXPECT_EQ(d.at("atMs"), 1700000000001);
  EXPECT_EQ(d.at("fields").at("seq"), "42");
  EXPECT_EQ(call(b, auth, "GET", list, "", "", admin).res.status, 200);
  EXPECT_EQ(b.lastLimit, 100) << "the default page";
  for (const char* bad : {"0", "1001", "ten", ""})
    EXPECT_EQ(call(b, auth, "GET", list + "?count=" + bad, "", "", admin).res.status, 400) << bad;

  b.audits.clear();
  auto one = call(b, auth, "POST", redrive, R"({"deadLetterIds": ["1700000000001-0"]})", "application/json", admin);
  ASSERT_EQ(one.res.status, 200) << one.res.body;
  EXPECT_EQ(json::parse(one.res.body).at("redriven"), 1);
  EXPECT_EQ(b.lastIds, (std::vector<std::string>{"1700000000001-0"}));
  auto all = call(b, auth, "POST", redrive, R"({"all": true})", "application/json", admin);
  ASSERT_EQ(all.res.status, 200);
  EXPECT_EQ(json::parse(all.res.body).at("redriven"), 2);
  EXPECT_TRUE(b.lastIds.empty());
  ASSERT_EQ(b.audits.size(), 2u);
  EXPECT_NE(b.audits[0].find("redrive-dead-letters"), std::string::npos) << b.audits[0];
  EXPECT_NE(b.audits[0].find("orders/billing"), std::string::npos) << b.audits[0];
  for (const char* bad : {R"({})", R"({"all": true, "deadLetterIds": ["1-0"]})", R"({"all": "yes"})",
                          R"({"deadLetterIds": ["abc"]})", R"({"deadLetterIds": "1-0"})", R"([1])", "nope"}) {
    const auto before = b.lastIds;
    b.lastIds = {"untouched"};
    auto r = call(b, auth, "POST", redrive, bad, "application/json", admin);
    EXPECT_EQ(r.res.status, 400) << bad;
    EXPECT_EQ(b.lastIds, (std::vector<std::string>{"untouched"})) << "nothing asked of the store: " << bad;
  }
}

// An id the dead-letter stream does not hold is named back (nothing done for it); a group
// that does not exist is a 404 like describe's, for listing, redriving and discarding alike; dead
// letters are discarded for good through their own audited endpoint.
TEST(Admin, DeadLettersOfAnUnknownGroupAre404AndUnknownIdsAreNamedBack) {
  FakeBackend b;
  const auto auth = tokens();
  const std::string list = "/coord/v1/streams/orders/groups/billing/dead-letters";
  const std::string admin = "Bearer admin-token-0123456789", member = "Bearer member-token-0123456789";
  auto some = call(b, auth, "POST", list + "/redrive", R"({"deadLetterIds": ["1700000000001-0", "1700000000009-0"]})",
                   "application/json", admin);
  ASSERT_EQ(some.res.status, 200) << some.res.body;
  EXPECT_EQ(json::parse(some.res.body).at("redriven"), 1);
  EXPECT_EQ(json::parse(some.res.body).at("notFound"), json::array({"1700000000009-0"}));
  b.audits.clear();
  auto discarded = call(b, auth, "POST", list + "/discard", R"({"deadLetterIds": ["1700000000002-0"]})",
                        "application/json", admin);
  ASSERT_EQ(discarded.res.status, 200) << discarded.res.body;
  EXPECT_EQ(b.lastDeadLetterCall, "discard");
  EXPECT_EQ(json::parse(discarded.res.body).at("discarded"), 1);
  EXPECT_EQ(json::parse(discarded.res.body).at("notFound"), json::array());
  ASSERT_EQ(b.audits.size(), 1u);
  EXPECT_NE(b.audits[0].find("discard-dead-letters"), std::string::npos) << b.audits[0];
  EXPECT_NE(b.audits[0].find("discarded=1"), std::string::npos) << b.audits[0];
  EXPECT_EQ(call(b, auth, "POST", list + "/discard", R"({"all": true})", "application/json", member).res.status, 403);
  EXPECT_EQ(call(b, auth, "GET", list + "/discard", "", "", admin).res.status, 405);
  b.lastDeadLetterCall.clear();
  EXPECT_EQ(call(b, auth, "POST", list + "/discard", R"({"all": true, "extra": 1})", "application/json", admin).res.status, 400);
  EXPECT_EQ(b.lastDeadLetterCall, "") << "a refused body asks nothing of the store";

  b.groupFound = false;
  for (const auto& [method, path, body] : std::vector<std::tuple<std::string, std::string, std::string>>{
           {"GET", list, ""}, {"POST", list + "/redrive", R"({"all": true})"}, {"POST", list + "/discard", R"({"all": true})"}}) {
    auto r = call(b, auth, method, path, body, body.empty() ? "" : "application/json", admin);
    EXPECT_EQ(r.res.status, 404) << method << " " << path << ": " << r.res.body;
    EXPECT_EQ(json::parse(r.res.body).at("error"), "NOT_FOUND") << path;
  }
}

// PUT .../groups/{group} sets the assignor (and shard racks) for the admin only, audited; a bad
// body is refused with INVALID_REQUEST naming the field, and nothing reaches the group.
TEST(Admin, AGroupsAssignorIsSetByAnAdminAndABadOneIsRefusedNamingTheField) {
  FakeBackend b;
  const auto auth = tokens();
  const std::string path = "/coord/v1/streams/orders/groups/billing";
  const std::string admin = "Bearer admin-token-0123456789";
  EXPECT_EQ(call(b, auth, "PUT", path, R"({"assignor": "range"})", "application/json", "Bearer member-token-0123456789").res.status, 403);
  EXPECT_TRUE(b.configs.empty());
  b.audits.clear();
  auto ok = call(b, auth, "PUT", path, R"({"assignor": "rack-aware", "shardRacks": ["a", "b", "", "a"]})", "application/json", admin);
  ASSERT_EQ(ok.res.status, 200) << ok.res.body;
  ASSERT_EQ(b.configs.size(), 1u);
  EXPECT_EQ(b.configs[0].assignor, protocol::AssignorKind::RackAware);
  EXPECT_EQ(b.configs[0].shardRacks, (std::vector<std::string>{"a", "b", "", "a"}));
  const auto j = json::parse(ok.res.body);
  EXPECT_EQ(j.at("assignor"), "rack-aware");
  EXPECT_EQ(j.at("groupEpoch"), 7);
  EXPECT_EQ(j.at("changed"), true);
  ASSERT_EQ(b.audits.size(), 1u);
  EXPECT_NE(b.audits[0].find("action=configure-group target=orders/billing status=200"), std::string::npos) << b.audits[0];
  auto range = call(b, auth, "PUT", path, R"({"assignor": "range"})", "application/json", admin);
  ASSERT_EQ(range.res.status, 200);
  ASSERT_EQ(b.configs.size(), 2u);
  EXPECT_FALSE(b.configs[1].shardRacks.has_value()) << "absent: the group's racks are kept";
  struct Bad {
    const char* body;
    const char* names;
  };
  for (const auto& bad : {Bad{R"({"assignor": "sticky"})", "assignor: uniform, range, rack-aware, external or co-partitioned, not 'sticky'"},
                          Bad{R"({"assignor": "RANGE"})", "assignor"},
                          // A value of the wrong type was called missing.
                          Bad{R"({"assignor": 3})", "assignor: must be a string (uniform, range, rack-aware, external or co-partitioned), not number 3"},
                          Bad{R"({"assignor": null})", "assignor: must be a string (uniform, range, rack-aware, external or co-partitioned), not null"},
                          Bad{R"({"assignor": ["range"]})", "assignor: must be a string"},
                          Bad{R"({})", "assignor: is required"},
                          Bad{R"({"assignor": "range", "racks": []})", "unknown field 'racks'"},
                          Bad{R"({"assignor": "range", "shardRacks": "a"})", "shardRacks: an array"},
                          Bad{R"({"assignor": "range", "shardRacks": ["a", "b c"]})", "shardRacks[1]: 'b c'"},
                          Bad{R"({"assignor": "range", "shardRacks": ["a", 1]})", "shardRacks[1]: a rack name"},
                          Bad{R"(["range"])", "the body must be"},
                          Bad{"{", "the body must be"},
                          Bad{R"({"assignor": "co-partitioned"})", "coPartitionedWith: is required"},
                          Bad{R"({"assignor": "range", "coPartitionedWith": {"prefix": "payments", "group": "g"}})",
                              "assignor: a co-partitioned group's assignor is co-partitioned, not 'range'"},
                          Bad{R"({"coPartitionedWith": {"prefix": "payments"}})", "coPartitionedWith: {"},
                          Bad{R"({"coPartitionedWith": "payments/g"})", "coPartitionedWith: {"},
                          Bad{R"({"coPartitionedWith": {"prefix": "payments", "group": "g", "x": 1}})", "coPartitionedWith: {"},
                          Bad{R"({"coPartitionedWith": {"prefix": "pay ments", "group": "g"}})", "coPartitionedWith.prefix: 'pay ments'"},
                          Bad{R"({"coPartitionedWith": {"prefix": "payments", "group": ""}})", "coPartitionedWith.group: ''"},
                          Bad{R"({"coPartitionedWith": {"prefix": "payments", "group": "g"}, "shardRacks": ["a"]})",
                              "shardRacks: not with coPartitionedWith"}}) {
    auto r = call(b, auth, "PUT", path, bad.body, "application/json", admin);
    EXPECT_EQ(r.res.status, 400) << bad.body;
    EXPECT_NE(r.res.body.find("INVALID_REQUEST"), std::string::npos) << r.res.body;
    EXPECT_NE(r.res.body.find(bad.names), std::string::npos) << bad.body << " -> " << r.res.body;
  }
  EXPECT_EQ(b.configs.size(), 2u) << "nothing refused reached the group";
  // A link: the assignor may be left out; the answer names the other group and
  // whether it names this one back.
  auto link = call(b, auth, "PUT", path, R"({"coPartitionedWith": {"prefix": "payments", "group": "g"}})", "application/json", admin);
  ASSERT_EQ(link.res.status, 200) << link.res.body;
  ASSERT_EQ(b.configs.size(), 3u);
  EXPECT_EQ(b.configs[2].assignor, protocol::AssignorKind::CoPartitioned);
  ASSERT_TRUE(b.configs[2].coPartitionedWith.has_value());
  EXPECT_EQ(b.configs[2].coPartitionedWith->str(), "payments/g");
  const auto lj = json::parse(link.res.body);
  EXPECT_EQ(lj.at("assignor"), "co-partitioned");
  EXPECT_EQ(lj.at("coPartitionedWith"), (json{{"prefix", "payments"}, {"group", "g"}}));
  EXPECT_EQ(lj.at("partnerLinked"), false);
  EXPECT_EQ(call(b, auth, "PUT", path, R"({"assignor": "range"})", "text/plain", admin).res.status, 415);
}

// PUT .../streams/{prefix}/racks: the admin's, audited; the racks listed or the
// zone rule; a bad body is refused naming the field and reaches nothing; no stream: 404; a rule the
// pod cannot work out: 409 with its reason.
TEST(Admin, AStreamsShardRacksAreSetByAnAdminListedOrFromTheNodesZones) {
  FakeBackend b;
  const auto auth = tokens();
  const std::string path = "/coord/v1/streams/orders/racks";
  const std::string admin = "Bearer admin-token-0123456789";
  EXPECT_EQ(call(b, auth, "PUT", path, R"({"shardRacks": ["a"]})", "application/json", "Bearer member-token-0123456789").res.status, 403);
  EXPECT_TRUE(b.rackRequests.empty());
  b.audits.clear();
  auto listed = call(b, auth, "PUT", path, R"({"shardRacks": ["a", "", "b"]})", "application/json", admin);
  ASSERT_EQ(listed.res.status, 200) << listed.res.body;
  ASSERT_EQ(b.rackRequests.size(), 1u);
  EXPECT_EQ(b.rackRequests[0].shardRacks, (std::vector<std::string>{"a", "", "b"}));
  EXPECT_FALSE(b.rackRequests[0].fromClusterZones);
  auto j = json::parse(listed.res.body);
  EXPECT_EQ(j.at("changed"), true);
  EXPECT_EQ(j.at("shardRacks"), (json{"a", "", "b"}));
  EXPECT_TRUE(j.at("shardRacksFrom").is_null());
  EXPECT_EQ(j.at("metadataVersion"), 6);
  EXPECT_EQ(j.at("affectedConsumerGroups"), (json{"audit", "billing"}));
  ASSERT_EQ(b.audits.size(), 1u);
  EXPECT_NE(b.audits[0].find("action=set-stream-racks target=orders status=200"), std::string::npos) << b.audits[0];
  auto zones = call(b, auth, "PUT", path, R"({"from": "cluster-node-zone"})", "application/json", admin);
  ASSERT_EQ(zones.res.status, 200) << zones.res.body;
  ASSERT_EQ(b.rackRequests.size(), 2u);
  EXPECT_TRUE(b.rackRequests[1].fromClusterZones);
  EXPECT_EQ(json::parse(zones.res.body).at("shardRacksFrom"), "cluster-node-zone");
  auto cleared = call(b, auth, "PUT", path, R"({"shardRacks": []})", "application/json", admin);
  ASSERT_EQ(cleared.res.status, 200) << cleared.res.body;
  EXPECT_TRUE(b.rackRequests[2].shardRacks.empty());
  struct Bad {
    const char* body;
    const char* names;
  };
  for (const auto& bad : {Bad{R"({})", "shardRacks or from, one of them"},
                          Bad{R"({"shardRacks": ["a"], "from": "cluster-node-zone"})", "shardRacks or from, one of them"},
                          Bad{R"({"from": "zones"})", "from: the only rule is"},
                          Bad{R"({"from": 1})", "from: the only rule"},
                          Bad{R"({"racks": []})", "unknown field 'racks'"},
                          Bad{R"({"shardRacks": "a"})", "shardRacks: an array"},
                          Bad{R"({"shardRacks": ["a", "b c"]})", "shardRacks[1]: 'b c'"},
                          Bad{R"({"shardRacks": ["a", null]})", "shardRacks[1]: a rack name"},
                          Bad{R"(["a"])", "the body must be"},
                          Bad{"{", "the body must be"}}) {
    auto r = call(b, auth, "PUT", path, bad.body, "application/json", admin);
    EXPECT_EQ(r.res.status, 400) << bad.body;
    EXPECT_NE(r.res.body.find("INVALID_REQUEST"), std::string::npos) << r.res.body;
    EXPECT_NE(r.res.body.find(bad.names), std::string::npos) << bad.body << " -> " << r.res.body;
  }
  EXPECT_EQ(b.rackRequests.size(), 3u) << "nothing refused reached the stream";
  auto none = call(b, auth, "PUT", "/coord/v1/streams/missing/racks", R"({"shardRacks": ["a"]})", "application/json", admin);
  EXPECT_EQ(none.res.status, 404) << none.res.body;
  auto unzoned = call(b, auth, "PUT", "/coord/v1/streams/unzoned/racks", R"({"from": "cluster-node-zone"})", "application/json", admin);
  EXPECT_EQ(unzoned.res.status, 409) << unzoned.res.body;
  EXPECT_NE(unzoned.res.body.find("no zone for the Redis node n:1"), std::string::npos) << unzoned.res.body;
}

// PUT .../groups/{group}/target: an admin's call, audited; a body that is no
// target is refused naming the field; what the group decides maps to 200, 400, 404 and 409 (a
// stale epoch carries the group's current one, to compute the next target for).
TEST(Admin, APostedTargetIsDecodedJudgedByTheGroupAndItsVerdictMapped) {
  using O = protocol::TargetPosted::Outcome;
  FakeBackend b;
  const auto auth = tokens();
  const std::string path = "/coord/v1/streams/orders/groups/billing/target";
  const std::string admin = "Bearer admin-token-0123456789";
  const std::string body = R"({"groupEpoch": 4, "targetAssignment": {"a": [0, 1], "b": [2, 3, 4]}})";
  EXPECT_EQ(call(b, auth, "PUT", path, body, "application/json", "Bearer member-token-0123456789").res.status, 403);
  EXPECT_TRUE(b.targets.empty());
  b.audits.clear();
  auto ok = call(b, auth, "PUT", path, body, "application/json", admin);
  ASSERT_EQ(ok.res.status, 200) << ok.res.body;
  ASSERT_EQ(b.targets.size(), 1u);
  EXPECT_EQ(b.targets[0].groupEpoch, 4);
  EXPECT_EQ(b.targets[0].target.at("b"), (std::vector<int32_t>{2, 3, 4}));
  const auto j = json::parse(ok.res.body);
  EXPECT_EQ(j.at("unassignedShards"), json::array({5}));
  EXPECT_EQ(j.at("targetAssignment").at("a"), json::array({0, 1}));
  ASSERT_EQ(b.audits.size(), 1u);
  EXPECT_NE(b.audits[0].find("action=post-target target=orders/billing status=200"), std::string::npos) << b.audits[0];
  for (const auto& [bad, says] : std::vector<std::pair<std::string, std::string>>{
           {R"({"targetAssignment": {}})", "groupEpoch"},
           {R"({"groupEpoch": -1, "targetAssignment": {}})", "groupEpoch"},
           {R"({"groupEpoch": 1})", "targetAssignment"},
           {R"({"groupEpoch": 1, "targetAssignment": {"a": [0, "1"]}})", "targetAssignment.a[1]"},
           {R"({"groupEpoch": 1, "targetAssignment": {"a b": [0]}})", "member id 'a b'"},
           {R"({"groupEpoch": 1, "targetAssignment": {"a": 0}})", "targetAssignment.a"},
           {R"({"groupEpoch": 1, "targetAssignment": {}, "force": true})", "unknown field 'force'"}}) {
    auto r = call(b, auth, "PUT", path, bad, "application/json", admin);
    EXPECT_EQ(r.res.status, 400) << bad;
    EXPECT_NE(r.res.body.find(says), std::string::npos) << bad << " -> " << r.res.body;
  }
  EXPECT_EQ(b.targets.size(), 1u) << "nothing refused reached the group";
  const std::vector<std::pair<O, int>> verdicts{{O::Invalid, 400}, {O::NotFound, 404}, {O::NotExternal, 409}, {O::StaleEpoch, 409}};
  for (const auto& [o, status] : verdicts) {
    b.targetOutcome = o;
    auto r = call(b, auth, "PUT", path, body, "application/json", admin);
    EXPECT_EQ(r.res.status, status) << r.res.body;
    if (o == O::StaleEpoch) {
      EXPECT_EQ(json::parse(r.res.body).at("groupEpoch"), 9) << r.res.body;
      EXPECT_EQ(json::parse(r.res.body).at("error"), "STALE_GROUP_EPOCH");
    }
  }
}

// Kafka's --reset-offsets: the position is XGROUP SETID's; refused while members read unless they are
// fenced first; audited.
TEST(Admin, OffsetsAreResetToEarliestLatestAnIdOrATimeOnlyForAGroupNobodyReads) {
  EXPECT_EQ(protocol::reset_position("earliest"), std::optional<std::string>("0"));
  EXPECT_EQ(protocol::reset_position("latest"), std::optional<std::string>("$"));
  EXPECT_EQ(protocol::reset_position("1700000000000-5"), std::optional<std::string>("1700000000000-5"));
  EXPECT_EQ(protocol::reset_position("1700000000000"), std::optional<std::string>("1699999999999-18446744073709551615"))
      << "a time: delivery resumes at the first record added at or after it";
  EXPECT_EQ(protocol::reset_position("0"), std::optional<std::string>("0"));
  for (const char* bad : {"", "soon", "-1", "1-", "1-x", "12345678901234567890", "EARLIEST"})
    EXPECT_FALSE(protocol::reset_position(bad).has_value()) << bad;

  FakeBackend b;
  const auto auth = tokens();
  const std::string path = "/coord/v1/streams/orders/groups/billing/reset-offsets";
  const std::string admin = "Bearer admin-token-0123456789";
  EXPECT_EQ(call(b, auth, "POST", path, R"({"to": "earliest"})", "application/json", "Bearer member-token-0123456789").res.status, 403);
  b.audits.clear();
  auto ok = call(b, auth, "POST", path, R"({"to": "latest"})", "application/json", admin);
  ASSERT_EQ(ok.res.status, 200) << ok.res.body;
  EXPECT_EQ(b.lastPosition, "$");
  EXPECT_FALSE(b.lastFence);
  const auto j = json::parse(ok.res.body);
  EXPECT_EQ(j.at("to"), "latest");
  EXPECT_EQ(j.at("position"), "$");
  EXPECT_EQ(j.at("shards"), 4);
  ASSERT_EQ(b.audits.size(), 1u);
  EXPECT_NE(b.audits[0].find("action=reset-offsets target=orders/billing status=200"), std::string::npos) << b.audits[0];
  EXPECT_EQ(call(b, auth, "POST", path, R"({"to": "earliest", "fenceMembers": true})", "application/json", admin).res.status, 200);
  EXPECT_TRUE(b.lastFence);
  b.resetOutcome = http::OffsetsReset::Outcome::HasLiveMembers;
  auto busy = call(b, auth, "POST", path, R"({"to": "earliest"})", "application/json", admin);
  EXPECT_EQ(busy.res.status, 409);
  EXPECT_EQ(json::parse(busy.res.body).at("error"), "GROUP_NOT_EMPTY");
  b.resetOutcome = http::OffsetsReset::Outcome::NotFound;
  EXPECT_EQ(call(b, auth, "POST", path, R"({"to": "earliest"})", "application/json", admin).res.status, 404);
  for (const char* bad : {R"({})", R"({"to": 5})", R"({"to": "yesterday"})", R"({"to": "latest", "fenceMembers": "yes"})", "x"}) {
    b.lastPosition = "untouched";
    EXPECT_EQ(call(b, auth, "POST", path, bad, "application/json", admin).res.status, 400) << bad;
    EXPECT_EQ(b.lastPosition, "untouched") << "nothing asked: " << bad;
  }
}

TEST(Auth, GlobPatterns) {
  EXPECT_TRUE(glob_match("*", ""));
  EXPECT_TRUE(glob_match("orders*", "orders.v2"));
  EXPECT_TRUE(glob_match("*-eu", "billing-eu"));
  EXPECT_TRUE(glob_match("a*b*c", "axxbyyc"));
  EXPECT_FALSE(glob_match("orders", "orders2"));
  EXPECT_FALSE(glob_match("a*b", "acb-"));
}

TEST(Admin, StreamsAreCreatedGrownAndReadWithClearErrors) {
  FakeBackend b;
  auto put = call(b, {}, "PUT", "/coord/v1/streams/orders", R"({"shardCount": 32})");
  EXPECT_EQ(put.res.status, 200);
  EXPECT_EQ(json::parse(put.res.body).at("shardCount"), 32);
  auto shrink = call(b, {}, "PUT", "/coord/v1/streams/orders", R"({"shardCount": 8})");
  EXPECT_EQ(shrink.res.status, 409);
  auto bad = call(b, {}, "PUT", "/coord/v1/streams/orders", R"({"shardCount": "many"})");
  EXPECT_EQ(bad.res.status, 400);
  EXPECT_NE(json::parse(bad.res.body).at("message").get<std::string>().find("shardCount"), std::string::npos);
  b.storeDown = true;
  auto down = call(b, {}, "PUT", "/coord/v1/streams/orders", R"({"shardCount": 32})");
  EXPECT_EQ(down.res.status, 503);
  EXPECT_EQ(header(down.res, "Retry-After"), "1");
  EXPECT_EQ(call(b, {}, "GET", "/coord/v1/streams/orders").res.status, 200);
  EXPECT_EQ(call(b, {}, "GET", "/coord/v1/streams/missing").res.status, 404);
  auto groups = call(b, {}, "GET", "/coord/v1/streams/orders/groups");
  const auto listed = json::parse(groups.res.body);
  EXPECT_EQ(listed.at("groups").size(), 2u);
  // Each group with where it stands (several groups over one stream: each reads every record).
  EXPECT_EQ(listed.at("groupLag").at(0), json::parse(R"({"consumerGroup":"audit","lag":12,"pending":3,"unknownShards":0})"));
  EXPECT_TRUE(listed.at("groupLag").at(1).at("lag").is_null()) << "unknown, never 0";
  EXPECT_EQ(listed.at("total"), 2);
  EXPECT_TRUE(listed.at("nextCursor").is_null()) << "no limit: every group";
  EXPECT_EQ(listed.at("lagReadAt"), 5000);
}

// The list is paged (limit, cursor), and what is not one of ours is refused,
// naming the parameter, before anything is read.
TEST(Admin, AStreamsGroupsArePagedByLimitAndCursorAndBadOnesAreRefusedNamingThem) {
  FakeBackend b;
  const std::string path = "/coord/v1/streams/orders/groups";
  auto first = call(b, {}, "GET", path + "?limit=1");
  ASSERT_EQ(first.res.status, 200) << first.res.body;
  const auto j = json::parse(first.res.body);
  EXPECT_EQ(j.at("groups"), json::array({"audit"}));
  ASSERT_TRUE(j.at("nextCursor").is_string());
  const std::string cursor = j.at("nextCursor");
  EXPECT_EQ(b.pages.back().limit, 1);
  EXPECT_EQ(b.pages.back().after, "");
  ASSERT_EQ(call(b, {}, "GET", path + "?limit=500&cursor=" + cursor).res.status, 200);
  EXPECT_EQ(b.pages.back().limit, 500);
  EXPECT_EQ(b.pages.back().after, "audit") << "the cursor names the last group of the page before";
  const auto asked = b.pages.size();
  for (const std::string bad : {"limit=0", "limit=-3", "limit=1001", "limit=ten", "limit=", "limit=1.5", "limit=99999999999999999999"}) {
    auto r = call(b, {}, "GET", path + "?" + bad);
    EXPECT_EQ(r.res.status, 400) << bad;
    EXPECT_NE(r.res.body.find("limit: a whole number from 1 to 1000"), std::string::npos) << bad << ": " << r.res.body;
  }
  for (const std::string bad : {std::string("cursor=abc"), std::string("cursor=g1."), std::string("cursor=g1.6"), std::string("cursor=g1.zz"),
                                std::string("cursor=g1.2020"), "cursor=" + cursor + "0"}) {
    auto r = call(b, {}, "GET", path + "?" + bad);
    EXPECT_EQ(r.res.status, 400) << bad;
    EXPECT_NE(r.res.body.find("cursor: "), std::string::npos) << bad << ": " << r.res.body;
  }
  EXPECT_EQ(b.pages.size(), asked) << "a refused page reads nothing";
  // Describe's live reading is asked for explicitly; anything but true or false is refused.
  ASSERT_EQ(call(b, {}, "GET", path + "/billing").res.status, 200);
  ASSERT_EQ(call(b, {}, "GET", path + "/billing?fresh=true").res.status, 200);
  EXPECT_EQ(b.describedFresh, (std::vector<bool>{false, true}));
  EXPECT_EQ(call(b, {}, "GET", path + "/billing?fresh=yes").res.status, 400);
}

// POST creates (201), answers 200 for the same stream again and 409 for another layout; PUT and
// POST take a key style; a bad one is refused naming the field.
TEST(Admin, PostCreatesAStreamAndKeyStylesAreChosenAtCreation) {
  FakeBackend b;
  auto created = call(b, {}, "POST", "/coord/v1/streams/payments",
                      R"({"initialShardCount": 6, "requestedBy": "platform", "reason": "new stream"})");
  EXPECT_EQ(created.res.status, 201);
  auto j = json::parse(created.res.body);
  EXPECT_EQ(j.at("shardCount"), 6);
  EXPECT_EQ(j.at("metadataVersion"), 1);
  EXPECT_EQ(j.at("keyStyle"), "plain");
  EXPECT_EQ(j.at("streamKeyPattern"), "payments:{shardIndex}");
  EXPECT_EQ(b.lastStreamRequest.requestedBy, "platform");
  auto tagged = call(b, {}, "POST", "/coord/v1/streams/audit", R"({"initialShardCount": 2, "keyStyle": "hashtag"})");
  EXPECT_EQ(tagged.res.status, 201);
  EXPECT_EQ(json::parse(tagged.res.body).at("streamKeyPattern"), "{audit:{shardIndex}}");
  EXPECT_EQ(call(b, {}, "POST", "/coord/v1/streams/orders", R"({"initialShardCount": 16})").res.status, 200);
  EXPECT_EQ(call(b, {}, "POST", "/coord/v1/streams/orders", R"({})").res.status, 200);
  auto other = call(b, {}, "POST", "/coord/v1/streams/orders", R"({"initialShardCount": 20})");
  EXPECT_EQ(other.res.status, 409);
  EXPECT_NE(json::parse(other.res.body).at("message").get<std::string>().find("16 shards"), std::string::npos);
  EXPECT_EQ(call(b, {}, "POST", "/coord/v1/streams/orders", R"({"keyStyle": "hashtag"})").res.status, 409);
  auto badStyle = call(b, {}, "POST", "/coord/v1/streams/x", R"({"keyStyle": "curly"})");
  EXPECT_EQ(badStyle.res.status, 400);
  EXPECT_NE(json::parse(badStyle.res.body).at("message").get<std::string>().find("keyStyle"), std::string::npos);
  EXPECT_EQ(call(b, {}, "POST", "/coord/v1/streams/x", R"({"initialShardCount": 0})").res.status, 400);
  EXPECT_EQ(call(b, {}, "PUT", "/coord/v1/streams/x", R"({"keyStyle": "plain"})").res.status, 400)
      << "PUT needs shardCount";
  EXPECT_EQ(call(b, {}, "POST", "/coord/v1/streams/x", "{}", "text/plain").res.status, 415);
}

// What producers read: the shard keys (with their Cluster slots) and the partitioner.
TEST(Admin, ProducerRoutingNamesEveryShardKeyWithItsSlot) {
  FakeBackend b;
  auto r = call(b, {}, "GET", "/coord/v1/streams/orders/groups/billing/producer-routing");
  EXPECT_EQ(r.res.status, 200);
  EXPECT_EQ(b.lastKey.consumerGroup, "billing");
  auto j = json::parse(r.res.body);
  EXPECT_EQ(j.at("streamPrefix"), "orders");
  EXPECT_EQ(j.at("consumerGroup"), "billing");
  EXPECT_EQ(j.at("metadataVersion"), 3);
  EXPECT_EQ(j.at("shardCount"), 4);
  EXPECT_EQ(j.at("streamKeyPattern"), "orders:{shardIndex}");
  EXPECT_EQ(j.at("partitioner"), "murmur3_x86_32-unbiased");
  ASSERT_EQ(j.at("shards").size(), 4u);
  EXPECT_EQ(j.at("shards")[2].at("shardIndex"), 2);
  EXPECT_EQ(j.at("shards")[2].at("streamKey"), "orders:2");
  // CLUSTER KEYSLOT orders:0 .. orders:3 as a cluster-enabled redis-server 7 answered them.
  EXPECT_EQ(j.at("shards")[0].at("redisSlot"), 8578);
  EXPECT_EQ(j.at("shards")[1].at("redisSlot"), 12707);
  EXPECT_EQ(j.at("shards")[2].at("redisSlot"), 448);
  EXPECT_EQ(j.at("shards")[3].at("redisSlot"), 4577);
  EXPECT_EQ(call(b, {}, "GET", "/coord/v1/streams/missing/groups/billing/producer-routing").res.status, 404);
  EXPECT_EQ(call(b, {}, "POST", "/coord/v1/streams/orders/groups/billing/producer-routing").res.status, 405);
  b.storeDown = true;
  EXPECT_EQ(call(b, {}, "GET", "/coord/v1/streams/orders/groups/billing/producer-routing").res.status, 503);
}

TEST(Admin, DescribeAndRemoveAnswer404ForWhatDoesNotExist) {
  FakeBackend b;
  EXPECT_EQ(call(b, {}, "GET", "/coord/v1/streams/orders/groups/billing").res.status, 200);
  EXPECT_EQ(call(b, {}, "GET", "/coord/v1/streams/orders/groups/missing").res.status, 404);
  EXPECT_EQ(call(b, {}, "DELETE", "/coord/v1/streams/orders/groups/billing/members/a").res.status, 200);
  EXPECT_EQ(call(b, {}, "DELETE", "/coord/v1/streams/orders/groups/billing/members/zz").res.status, 404);
}

TEST(Admin, DeletingAGroupIsAnAdminCallWithClearAnswers) {
  FakeBackend b;
  const std::string g = "/coord/v1/streams/orders/groups/billing";
  auto ok = call(b, {}, "DELETE", g);
  EXPECT_EQ(ok.res.status, 200);
  EXPECT_EQ(json::parse(ok.res.body).at("deleted"), true);
  EXPECT_EQ(call(b, {}, "DELETE", g + "?fenceMembers=true").res.status, 200);
  EXPECT_EQ(b.deletes, (std::vector<std::string>{"orders/billing", "orders/billing fence"}));
  auto bad = call(b, {}, "DELETE", g + "?fenceMembers=yes");
  EXPECT_EQ(bad.res.status, 400);
  EXPECT_EQ(b.deletes.size(), 2u) << "a bad flag reaches nothing";
  b.deletion = http::Deletion::HasLiveMembers;
  auto busy = call(b, {}, "DELETE", g);
  EXPECT_EQ(busy.res.status, 409);
  EXPECT_NE(json::parse(busy.res.body).at("message").get<std::string>().find("fenceMembers=true"), std::string::npos);
  b.deletion = http::Deletion::NotFound;
  EXPECT_EQ(call(b, {}, "DELETE", g).res.status, 404);
  auto auth = tokens();
  EXPECT_EQ(call(b, auth, "DELETE", g, "", "", "Bearer member-token-0123456789").res.status, 403);
  EXPECT_EQ(b.deletes.size(), 4u) << "a member token deletes nothing";
}

TEST(Probes, HeadAnswersLikeGetWithoutABodyAndTheAbsoluteFormIsRouted) {
  FakeBackend b;
  auto h = call(b, {}, "HEAD", "/healthz");
  EXPECT_EQ(h.res.status, 200);
  EXPECT_TRUE(h.res.body.empty());
  EXPECT_EQ(call(b, {}, "HEAD", "/readyz").res.status, 200);
  b.readyOk = false;
  EXPECT_EQ(call(b, {}, "HEAD", "/readyz").res.status, 503);
  EXPECT_EQ(call(b, {}, "GET", "http://coordinator:8080/healthz").res.status, 200);
  EXPECT_EQ(call(b, {}, "GET", "HTTP://coordinator/metrics").res.status, 200);
  EXPECT_EQ(route("POST", "http://h/coord/v1/streams/orders/groups/billing/members/a/heartbeat").route->kind,
            Route::Kind::Heartbeat);
  auto root = call(b, {}, "GET", "http://coordinator");
  EXPECT_EQ(root.res.status, 200) << "no path: the root, where the status page is";
  EXPECT_EQ(root.res.contentType, "text/html; charset=utf-8");
}

TEST(Auth, MetricsNeedATokenWhenConfiguredSo) {
  FakeBackend b;
  auto auth = tokens();
  EXPECT_EQ(call(b, auth, "GET", "/metrics").res.status, 200) << "public by default";
  auth.metricsPublic = false;
  EXPECT_EQ(call(b, auth, "GET", "/metrics").res.status, 401);
  EXPECT_EQ(call(b, auth, "GET", "/metrics", "", "", "Bearer member-token-0123456789").res.status, 200);
  EXPECT_EQ(call(b, auth, "GET", "/healthz").res.status, 200) << "probes stay public";
}

TEST(Auth, TokensAreComparedWholeAndEveryOneIsLookedAt) {
  EXPECT_TRUE(constant_time_equal("abcdef", "abcdef"));
  EXPECT_FALSE(constant_time_equal("abcdef", "abcdeg"));
  EXPECT_FALSE(constant_time_equal("abcdef", "abcde"));
  EXPECT_FALSE(constant_time_equal("abcde", "abcdef"));
  EXPECT_FALSE(constant_time_equal("", "a"));
  EXPECT_TRUE(constant_time_equal("", ""));
  std::string withNul("ab\0cd", 5);
  EXPECT_FALSE(constant_time_equal(withNul, "ab"));
  // A token that is a prefix of another matches only itself; the second of two equal entries
  // does not change the answer.
  AuthConfig auth;
  auth.tokens.push_back({"token-0123456789abcdef", "member", {"*"}, {"*"}});
  auth.tokens.push_back({"token-0123456789abcdef-admin", "admin", {"*"}, {"*"}});
  EXPECT_EQ(authorize(auth, "Bearer token-0123456789abcdef", Need::Admin, "s", "g").status, 403);
  EXPECT_TRUE(authorize(auth, "Bearer token-0123456789abcdef-admin", Need::Admin, "s", "g").allowed);
  EXPECT_EQ(authorize(auth, "Bearer token-0123456789abcde", Need::Member, "s", "g").status, 401);
}

TEST(Probes, ReadinessFollowsTheStoreAndMetricsUseTheExpositionFormat) {
  FakeBackend b;
  auto m = call(b, {}, "GET", "/metrics");
  EXPECT_EQ(m.res.contentType, "text/plain; version=0.0.4; charset=utf-8");
  b.readyOk = false;
  auto r = call(b, {}, "GET", "/readyz");
  EXPECT_EQ(r.res.status, 503);
  EXPECT_NE(r.res.body.find("refused"), std::string::npos);
  EXPECT_EQ(call(b, {}, "GET", "/healthz").res.status, 200) << "the process is up even when Redis is not";
}

// docs/openapi.json describes exactly what the router serves: every route it lists resolves, every
// served route is listed, no other method of a listed path is served, and its example requests
// are accepted by the codec.
TEST(OpenApi, TheDocumentListsExactlyTheServedRoutesAndItsExamplesDecode) {
  std::ifstream in(RSC_OPENAPI_FILE);
  ASSERT_TRUE(in) << RSC_OPENAPI_FILE;
  const json doc = json::parse(in);
  EXPECT_EQ(doc.at("openapi"), "3.1.0");
  auto concrete = [](std::string path) {  // templates filled with valid names
    for (const auto& [hole, name] : std::vector<std::pair<std::string, std::string>>{
             {"{streamPrefix}", "orders"}, {"{consumerGroup}", "billing"}, {"{memberId}", "m1"}}) {
      const auto at = path.find(hole);
      if (at != std::string::npos) path.replace(at, hole.size(), name);
    }
    return path;
  };
  std::set<std::pair<std::string, std::string>> documented, served;
  for (const auto& [path, ops] : doc.at("paths").items())
    for (const auto& [method, op] : ops.items()) {
      if (method == "parameters") continue;
      std::string m = method;
      for (auto& ch : m) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
      documented.insert({m, path});
      EXPECT_TRUE(route(m, concrete(path)).route.has_value()) << m << " " << path << " is documented but not served";
      EXPECT_TRUE(op.contains("responses")) << m << " " << path;
    }
  for (const auto& r : route_table()) {
    served.insert({r.method, r.pattern});
    const auto got = route(r.method, concrete(r.pattern));
    ASSERT_TRUE(got.route.has_value()) << r.method << " " << r.pattern;
    EXPECT_EQ(got.route->spec, &r) << r.method << " " << r.pattern << " is routed to another row";
  }
  EXPECT_EQ(documented, served);
  // Nothing beyond the list: other methods on a served path are refused with 405.
  for (const auto& [method, path] : served)
    for (const char* other : {"GET", "HEAD", "POST", "PUT", "DELETE", "PATCH"})
      if (!served.count({other, path})) {
        auto r = route(other, concrete(path));
        EXPECT_FALSE(r.route.has_value()) << other << " " << path << " is served but not documented";
        EXPECT_EQ(r.error.status, 405) << other << " " << path;
      }
  // The example requests are accepted.
  const auto& hb = doc.at("paths").at("/coord/v1/streams/{streamPrefix}/groups/{consumerGroup}/members/{memberId}/heartbeat");
  int examples = 0;
  for (const auto& [name, ex] : hb.at("post").at("requestBody").at("content").at("application/json").at("examples").items()) {
    auto d = protocol::decode_heartbeat_request(ex.at("value").dump(), "m1");
    EXPECT_TRUE(d.ok()) << name << ": " << d.error.message;
    ++examples;
  }
  EXPECT_GE(examples, 3);
  const auto& stream = doc.at("paths").at("/coord/v1/streams/{streamPrefix}");
  for (const auto& [method, post] : {std::pair<const char*, bool>{"put", false}, {"post", true}})
    for (const auto& [name, ex] : stream.at(method).at("requestBody").at("content").at("application/json").at("examples").items()) {
      auto d = protocol::decode_stream_request(ex.at("value").dump(), post);
      EXPECT_TRUE(d.ok()) << method << " " << name << ": " << d.error.message;
    }
  const auto& group = doc.at("paths").at("/coord/v1/streams/{streamPrefix}/groups/{consumerGroup}");
  int configs = 0;
  for (const auto& [name, ex] : group.at("put").at("requestBody").at("content").at("application/json").at("examples").items()) {
    auto d = protocol::decode_group_config(ex.at("value").dump());
    EXPECT_TRUE(d.ok()) << "put group " << name << ": " << d.error.message;
    ++configs;
  }
  EXPECT_GE(configs, 2);
  for (const auto& [name, ex] : doc.at("paths").at("/coord/v1/streams/{streamPrefix}/groups/{consumerGroup}/target").at("put")
                                    .at("requestBody").at("content").at("application/json").at("examples").items()) {
    auto d = protocol::decode_posted_target(ex.at("value").dump());
    EXPECT_TRUE(d.ok()) << "put target " << name << ": " << d.error.message;
  }
  int rackBodies = 0;
  for (const auto& [name, ex] : doc.at("paths").at("/coord/v1/streams/{streamPrefix}/racks").at("put")
                                    .at("requestBody").at("content").at("application/json").at("examples").items()) {
    auto d = protocol::decode_stream_racks(ex.at("value").dump());
    EXPECT_TRUE(d.ok()) << "put racks " << name << ": " << d.error.message;
    ++rackBodies;
  }
  EXPECT_EQ(rackBodies, 2);
  // The documented answer of a heartbeat decodes as one.
  const auto& example = hb.at("post").at("responses").at("200").at("content").at("application/json").at("example");
  EXPECT_TRUE(protocol::decode_heartbeat_response(example.dump()).ok());
}

// Every admin call leaves one audit line naming the caller (a token's name, never the token),
// the action, the target and the outcome; refused calls too. Other calls leave none.
TEST(Audit, EveryAdminCallIsOneLineWithCallerActionTargetAndOutcome) {
  FakeBackend b;
  AuthConfig auth = tokens();
  auth.tokens[1].name = "ops team";
  const std::string admin = "Bearer admin-token-0123456789", member = "Bearer member-token-0123456789";
  call(b, auth, "POST", "/coord/v1/streams/payments", R"({"initialShardCount":4})", "application/json", admin);
  call(b, auth, "PUT", "/coord/v1/streams/orders", R"({"shardCount":32})", "application/json", admin);
  call(b, auth, "DELETE", "/coord/v1/streams/orders/groups/billing/members/a", "", "", admin);
  call(b, auth, "DELETE", "/coord/v1/streams/orders/groups/billing", "", "", admin);
  ASSERT_EQ(b.audits.size(), 4u);
  EXPECT_EQ(b.audits[0],
            "audit caller=\"ops team\" action=create-stream target=payments status=201 outcome=\"ok shardCount=4 "
            "metadataVersion=1 keyStyle=\\\"plain\\\"\"");
  EXPECT_NE(b.audits[1].find("action=put-stream target=orders status=200 outcome=\"ok shardCount=32 metadataVersion=2"),
            std::string::npos)
      << b.audits[1];
  EXPECT_NE(b.audits[2].find("action=remove-member target=orders/billing/a status=200 outcome=\"ok state=\\\"FENCED\\\"\""),
            std::string::npos)
      << b.audits[2];
  EXPECT_NE(b.audits[3].find("action=delete-group target=orders/billing status=200 outcome=\"ok deleted=true\""),
            std::string::npos)
      << b.audits[3];

  // Refused: by auth (no token, a member's token), by validation, by the store's answer.
  b.audits.clear();
  call(b, auth, "DELETE", "/coord/v1/streams/orders/groups/billing", "", "", "");
  call(b, auth, "DELETE", "/coord/v1/streams/orders/groups/billing", "", "", member);
  call(b, auth, "PUT", "/coord/v1/streams/orders", R"({"shardCount":"many"})", "application/json", admin);
  call(b, auth, "PUT", "/coord/v1/streams/orders", R"({"shardCount":8})", "application/json", admin);
  call(b, auth, "DELETE", "/coord/v1/streams/orders/groups/billing/members/zz", "", "", admin);
  ASSERT_EQ(b.audits.size(), 5u);
  EXPECT_NE(b.audits[0].find("caller=unauthenticated action=delete-group target=orders/billing status=401 outcome=\"refused "
                             "GROUP_AUTHORIZATION_FAILED: missing bearer token"),
            std::string::npos)
      << b.audits[0];
  EXPECT_NE(b.audits[1].find("caller=token#0 action=delete-group target=orders/billing status=403"), std::string::npos)
      << "a token without a name is named by its place: " << b.audits[1];
  EXPECT_NE(b.audits[2].find("action=put-stream target=orders status=400 outcome=\"refused INVALID_REQUEST"),
            std::string::npos)
      << b.audits[2];
  EXPECT_NE(b.audits[3].find("status=409 outcome=\"refused CONFLICT: only grow\""), std::string::npos) << b.audits[3];
  EXPECT_NE(b.audits[4].find("target=orders/billing/zz status=404 outcome=\"refused NOT_FOUND"), std::string::npos)
      << b.audits[4];
  for (const auto& line : b.audits) {
    EXPECT_EQ(line.find("0123456789"), std::string::npos) << "no token in the log: " << line;
    EXPECT_EQ(line.find('\n'), std::string::npos);
  }

  // Reading and heartbeats are not audited; an open server's caller is "anonymous".
  b.audits.clear();
  call(b, auth, "GET", "/coord/v1/streams/orders/groups/billing", "", "", member);
  call(b, auth, "POST", kHb, body(), "application/json", member);
  EXPECT_TRUE(b.audits.empty());
  call(b, AuthConfig{}, "POST", "/coord/v1/streams/payments", "{}", "application/json");
  ASSERT_EQ(b.audits.size(), 1u);
  EXPECT_EQ(b.audits[0].rfind("audit caller=anonymous action=create-stream target=payments status=201", 0), 0u) << b.audits[0];
}

TEST(Audit, AValueWithSpacesQuotesOrControlCharactersStaysOneUnambiguousField) {
  HttpResponse r = plain_error(409, "CONFLICT", "a \"quoted\"\nnew line");
  const auto line = audit_line("x", "delete-group", "s/g", r);
  EXPECT_EQ(line, "audit caller=x action=delete-group target=s/g status=409 outcome=\"refused CONFLICT: a \\\"quoted\\\"\\x0anew line\"");
}

TEST(Streams, TheListShowsAScopedTokenOnlyItsStreams) {
  FakeBackend b;
  auto open = call(b, AuthConfig{}, "GET", "/coord/v1/streams");
  EXPECT_EQ(open.res.status, 200);
  EXPECT_EQ(json::parse(open.res.body), json::parse(R"({"streams":["audit-log","orders","payments"]})"));
  const auto auth = tokens();
  auto scoped = call(b, auth, "GET", "/coord/v1/streams", "", "", "Bearer member-token-0123456789");
  EXPECT_EQ(json::parse(scoped.res.body), json::parse(R"({"streams":["orders"]})")) << "the member token may see orders* only";
  auto all = call(b, auth, "GET", "/coord/v1/streams", "", "", "Bearer admin-token-0123456789");
  EXPECT_EQ(json::parse(all.res.body).at("streams").size(), 3u);
  EXPECT_EQ(call(b, auth, "GET", "/coord/v1/streams").res.status, 401);
  EXPECT_EQ(call(b, auth, "POST", "/coord/v1/streams", "{}").res.status, 405);
  b.storeDown = true;
  auto down = call(b, AuthConfig{}, "GET", "/coord/v1/streams");
  EXPECT_EQ(down.res.status, 503);
  EXPECT_EQ(header(down.res, "Retry-After"), "1");
}

// The page is served to anyone (it holds no data; with auth on it asks for a token), inline only,
// under a policy that lets it talk to this server alone.
TEST(StatusPage, IsOneSelfContainedDocumentServedWithoutAToken) {
  FakeBackend b;
  for (const auto& auth : {AuthConfig{}, tokens()}) {
    auto page = call(b, auth, "GET", "/");
    EXPECT_EQ(page.res.status, 200);
    EXPECT_EQ(page.res.contentType, "text/html; charset=utf-8");
    EXPECT_NE(page.res.body.find("<!doctype html>"), std::string::npos);
    EXPECT_NE(page.res.body.find("/coord/v1/streams"), std::string::npos) << "it reads the JSON endpoints";
    EXPECT_NE(page.res.body.find("Authorization"), std::string::npos) << "it sends a bearer token when it has one";
    for (const char* external : {"src=\"http", "href=\"http", "@import", "<link", "src=\"//"})
      EXPECT_EQ(page.res.body.find(external), std::string::npos) << external;
    const auto csp = header(page.res, "Content-Security-Policy");
    EXPECT_NE(csp.find("default-src 'none'"), std::string::npos);
    EXPECT_NE(csp.find("connect-src 'self'"), std::string::npos);
    EXPECT_EQ(header(page.res, "X-Content-Type-Options"), "nosniff");
  }
  auto head = call(b, AuthConfig{}, "HEAD", "/");
  EXPECT_EQ(head.res.status, 200);
  EXPECT_TRUE(head.res.body.empty());
  EXPECT_EQ(call(b, AuthConfig{}, "POST", "/", "{}").res.status, 405);
}

// ---- Rsc-Group-Owner: every answer about a group names the pod that owns it ----------

namespace {

// A backend whose placement the test sets: here (this pod owns the group), elsewhere, nowhere.
struct PlacedBackend : FakeBackend {
  Placement placement;
  Placement place(const protocol::GroupKey&) override { return placement; }
};

// Stands for the Beast forwarder: records where a call went and answers as the owner would.
struct FakeForwarder : Forwarder {
  std::vector<std::string> addresses;
  std::optional<HttpResponse> ownerAnswer;  // nullopt: the owner cannot be reached
  void forward(const std::string& address, const HttpRequest&, Respond respond,
               std::function<void(std::string)> failed) override {
    addresses.push_back(address);
    if (ownerAnswer) return respond(*ownerAnswer);
    failed("did not answer in time");
  }
};

Placement here(const std::string& url) {
  return {Placement::Kind::Here, "pod-a", "10.0.0.1:8080", {}, std::make_shared<const std::string>(url), 7};
}
Placement elsewhere(const std::string& url) {
  return {Placement::Kind::Elsewhere, "pod-b", "10.0.0.2:8080", {}, std::make_shared<const std::string>(url), 7};
}

Call call_via(Backend& b, Forwarder* f, std::string method, std::string target, std::string bodyText = {}) {
  Call c;
  HttpRequest r{std::move(method), std::move(target), "application/json", {}, std::move(bodyText)};
  r.forwarder = f;
  handle_request(r, b, {}, [&](HttpResponse res) {
    c.res = std::move(res);
    ++c.answers;
  });
  EXPECT_EQ(c.answers, 1) << "every request gets exactly one answer";
  return c;
}

}  // namespace

TEST(GroupOwner, DirectAnswersAboutAGroupNameThisPodAndOthersNameNobody) {
  PlacedBackend b;
  b.placement = here("https://rsc-0.rsc-pods.prod.svc:8080");
  const std::string g = "/coord/v1/streams/orders/groups/billing";
  for (auto [method, target, text] : std::vector<std::tuple<std::string, std::string, std::string>>{
           {"POST", kHb, body()},
           {"GET", g, ""},
           {"GET", g + "/dead-letters", ""},
           {"GET", g + "/producer-routing", ""},
           {"DELETE", g + "/members/a", ""},
           {"DELETE", g, ""}}) {
    auto c = call(b, {}, method, target, text);
    EXPECT_EQ(header(c.res, kGroupOwnerHeader), "https://rsc-0.rsc-pods.prod.svc:8080") << method << " " << target;
  }
  // A refusal the group decided carries it as well (the member follows it like any answer).
  b.answer = protocol::HeartbeatStatus::FENCED_MEMBER_EPOCH;
  EXPECT_EQ(header(call(b, {}, "POST", kHb, body()).res, kGroupOwnerHeader), "https://rsc-0.rsc-pods.prod.svc:8080");
  auto invalid = call(b, {}, "POST", kHb, json{{"protocolVersion", 1}, {"requestId", "r"}, {"memberEpoch", "x"}}.dump());
  EXPECT_EQ(json::parse(invalid.res.body).at("status"), "INVALID_REQUEST");
  EXPECT_EQ(header(invalid.res, kGroupOwnerHeader), "https://rsc-0.rsc-pods.prod.svc:8080");
  // Answers about no group (a stream, the probes) say nothing about owners.
  for (std::string t : {"/coord/v1/streams/orders", "/healthz", "/coord/v1/streams/orders/groups"})
    EXPECT_EQ(header(call(b, {}, "GET", t).res, kGroupOwnerHeader), "") << t;
  // A backend that does not know its URL (a single pod without placement) says nothing either.
  FakeBackend plain;
  EXPECT_EQ(header(call(plain, {}, "POST", kHb, body()).res, kGroupOwnerHeader), "");
}

TEST(GroupOwner, AForwardedAnswerNamesTheOwnerWhetherOrNotTheOwnerSaidSo) {
  PlacedBackend b;
  b.placement = elsewhere("http://10.0.0.2:8080");
  FakeForwarder f;
  f.ownerAnswer = HttpResponse{200, "{}", "application/json", {{kGroupOwnerHeader, "http://owner.example:8080"}}};
  auto c = call_via(b, &f, "POST", kHb, body());
  ASSERT_EQ(f.addresses, std::vector<std::string>{"10.0.0.2:8080"});
  EXPECT_EQ(b.heartbeats, 0) << "the owner serves it, not this pod";
  EXPECT_EQ(header(c.res, kGroupOwnerHeader), "http://owner.example:8080") << "the owner's own word wins";
  EXPECT_EQ(std::count_if(c.res.headers.begin(), c.res.headers.end(),
                          [](const auto& h) { return h.first == kGroupOwnerHeader; }),
            1);
  // An owner of an older version names nobody: the forwarding pod says where it sent the call.
  f.ownerAnswer = HttpResponse{200, "{}", "application/json", {}};
  EXPECT_EQ(header(call_via(b, &f, "POST", kHb, body()).res, kGroupOwnerHeader), "http://10.0.0.2:8080");
  // The owner did not answer this pod: RETRY, still naming the owner (this pod
  // may be the one cut off from the others, and the member may well reach the owner itself; it
  // falls back to its configured URL only when the owner does not answer it either).
  f.ownerAnswer.reset();
  auto lost = call_via(b, &f, "POST", kHb, body());
  EXPECT_EQ(json::parse(lost.res.body).at("status"), "RETRY");
  EXPECT_EQ(header(lost.res, kGroupOwnerHeader), "http://10.0.0.2:8080");
  auto lostAdmin = call_via(b, &f, "DELETE", "/coord/v1/streams/orders/groups/billing/members/a");
  EXPECT_EQ(lostAdmin.res.status, 503);
  EXPECT_EQ(header(lostAdmin.res, kGroupOwnerHeader), "http://10.0.0.2:8080") << "an admin call's refusal too";
  // A call that was forwarded here already and finds another owner: RETRY naming the owner, so a
  // following client goes straight there.
  HttpRequest again{"POST", kHb, "application/json", {}, body()};
  again.forwardedBy = "pod-c";
  HttpResponse got;
  handle_request(again, b, {}, [&](HttpResponse r) { got = std::move(r); });
  EXPECT_EQ(json::parse(got.body).at("status"), "RETRY");
  EXPECT_EQ(header(got, kGroupOwnerHeader), "http://10.0.0.2:8080");
}

TEST(GroupOwner, NobodyOwningTheGroupIsRetryWithoutAnOwner) {
  PlacedBackend b;
  b.placement = {Placement::Kind::Nowhere, {}, {}, "no pod of the registry serves groups yet", {}, 3};
  auto c = call(b, {}, "POST", kHb, body());
  EXPECT_EQ(json::parse(c.res.body).at("status"), "RETRY");
  EXPECT_EQ(header(c.res, kGroupOwnerHeader), "");
  auto o = call(b, {}, "GET", "/coord/v1/streams/orders/groups/billing/owner");
  EXPECT_EQ(o.res.status, 503);
  EXPECT_EQ(header(o.res, "Retry-After"), "1");
  EXPECT_NE(json::parse(o.res.body).at("message").get<std::string>().find("no pod of the registry"), std::string::npos);
}

TEST(GroupOwner, TheLookupEndpointAnswersOwnerAndTermForMembers) {
  PlacedBackend b;
  b.placement = elsewhere("https://rsc-2.rsc-pods.prod.svc:8443");
  const std::string path = "/coord/v1/streams/orders/groups/billing/owner";
  EXPECT_EQ(route("GET", path).route->kind, Route::Kind::GroupOwner);
  EXPECT_EQ(route("POST", path).error.status, 405);
  FakeForwarder f;  // never used: any pod answers the lookup itself
  auto c = call_via(b, &f, "GET", path);
  ASSERT_EQ(c.res.status, 200) << c.res.body;
  const auto j = json::parse(c.res.body);
  EXPECT_EQ(j.at("owner"), "https://rsc-2.rsc-pods.prod.svc:8443");
  EXPECT_EQ(j.at("term"), 7);
  EXPECT_EQ(j.at("podId"), "pod-b");
  EXPECT_EQ(header(c.res, kGroupOwnerHeader), "https://rsc-2.rsc-pods.prod.svc:8443");
  EXPECT_TRUE(f.addresses.empty());
  // It is a member's call: a token is needed when tokens are configured, and its group must be allowed.
  EXPECT_EQ(call(b, tokens(), "GET", path).res.status, 401);
  EXPECT_EQ(call(b, tokens(), "GET", "/coord/v1/streams/orders/groups/audit/owner", {}, "application/json",
                 "Bearer member-token-0123456789").res.status, 403);
  EXPECT_EQ(call(b, tokens(), "GET", path, {}, "application/json", "Bearer member-token-0123456789").res.status, 200);
  // Bad names are refused before anything is looked up.
  EXPECT_EQ(call(b, {}, "GET", "/coord/v1/streams/orders/groups/bad%20name/owner").res.status, 400);
}

TEST(GroupOwner, OwnerUrlsBracketIpv6Hosts) {
  EXPECT_EQ(owner_url(false, "10.1.2.3:8080"), "http://10.1.2.3:8080");
  EXPECT_EQ(owner_url(true, "rsc-0.rsc-pods.ns.svc:8443"), "https://rsc-0.rsc-pods.ns.svc:8443");
  EXPECT_EQ(owner_url(false, "fd00::7:8080"), "http://[fd00::7]:8080");
  EXPECT_EQ(owner_url(false, "[fd00::7]:8080"), "http://[fd00::7]:8080");
  EXPECT_EQ(owner_url(true, ""), "");
}
