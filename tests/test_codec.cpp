// The wire codec: round trips of every message and every static validation rule of SPEC §2.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <random>

#include "protocol/codec.hpp"

using namespace rsc::protocol;
using nlohmann::json;

namespace {

json valid_request() {
  return json::parse(R"({"protocolVersion": 1, "requestId": "hb-member-a-000042", "memberId": "member-a",
    "memberEpoch": 11, "metadataVersion": 8,
    "runtimeConsumerCapacity": {"runtimeMaxConcurrency": 12, "availableConcurrency": 8},
    "ownedShards": [{"shardIndex": 0, "state": "OWNED"}],
    "revokingShards": [{"shardIndex": 3, "state": "DRAINING", "inFlight": 2, "ackedAt": null}],
    "shardProgress": [{"shardIndex": 0, "lastDeliveredId": "1700000000000-0", "pending": 3, "lag": 120}]})");
}

// Decodes `j` for path member "member-a" and expects a rejection naming `field`.
void expect_rejected(const json& j, const std::string& field, HeartbeatStatus status = HeartbeatStatus::INVALID_REQUEST,
                     const std::string& pathMember = "member-a") {
  EXPECT_FALSE(decode_heartbeat_request_fast(j.dump(), pathMember).has_value()) << "fast path accepted: " << j.dump();
  auto d = decode_heartbeat_request(j.dump(), pathMember);
  ASSERT_FALSE(d.ok()) << "accepted: " << j.dump();
  EXPECT_EQ(d.error.status, status) << d.error.message;
  EXPECT_EQ(d.error.field, field) << d.error.message;
  if (!field.empty()) {
    EXPECT_NE(d.error.message.find(field), std::string::npos) << d.error.message;
  }
}

}  // namespace

TEST(Codec, EnumsUseTheirExactWireSpellings) {
  for (auto s : {HeartbeatStatus::OK, HeartbeatStatus::RETRY, HeartbeatStatus::SYNC_METADATA,
                 HeartbeatStatus::REVOKE_PENDING, HeartbeatStatus::UNKNOWN_MEMBER_ID,
                 HeartbeatStatus::FENCED_MEMBER_EPOCH, HeartbeatStatus::UNSUPPORTED_PROTOCOL,
                 HeartbeatStatus::INVALID_REQUEST, HeartbeatStatus::GROUP_AUTHORIZATION_FAILED})
    EXPECT_EQ(heartbeat_status_from(to_string(s)), s);
  EXPECT_EQ(to_string(HeartbeatStatus::FENCED_MEMBER_EPOCH), "FENCED_MEMBER_EPOCH");
  EXPECT_EQ(to_string(ShardAssignmentState::DRAINING), "DRAINING");
  EXPECT_EQ(to_string(MemberLifecycleState::EXPIRED), "EXPIRED");
  EXPECT_EQ(to_string(GroupStateName::RECONCILING), "RECONCILING");
  for (auto s : {MemberLifecycleState::STARTING, MemberLifecycleState::ACTIVE, MemberLifecycleState::DRAINING,
                 MemberLifecycleState::LEAVING, MemberLifecycleState::EXPIRED, MemberLifecycleState::FENCED})
    EXPECT_EQ(lifecycle_from(to_string(s)), s);
  EXPECT_FALSE(heartbeat_status_from("ok").has_value());
}

TEST(Codec, TheSpecExampleRequestDecodes) {
  auto d = decode_heartbeat_request(valid_request().dump(), "member-a");
  ASSERT_TRUE(d.ok()) << d.error.message;
  const auto& r = *d.value;
  EXPECT_EQ(r.requestId, "hb-member-a-000042");
  EXPECT_EQ(r.memberEpoch, 11);
  EXPECT_EQ(r.metadataVersion, 8);
  EXPECT_EQ(r.runtimeConsumerCapacity.runtimeMaxConcurrency, 12);
  ASSERT_EQ(r.revokingShards.size(), 1u);
  EXPECT_EQ(r.revokingShards[0].state, ShardAssignmentState::DRAINING);
  EXPECT_EQ(r.revokingShards[0].inFlight, 2);
  ASSERT_EQ(r.shardProgress.size(), 1u);
  EXPECT_EQ(r.shardProgress[0].lag, 120);
}

TEST(Codec, RequestRoundTrips) {
  HeartbeatRequest r;
  r.requestId = "r-1";
  r.memberId = "10.0.0.7:3";
  r.memberEpoch = -1;
  r.metadataVersion = 4;
  r.runtimeConsumerCapacity = {16, 3};
  r.ownedShards = {{1, ShardAssignmentState::OWNED}, {5, ShardAssignmentState::OWNED}};
  r.revokingShards = {{2, ShardAssignmentState::REVOKED, 0, std::string("1700000000000")},
                      {7, ShardAssignmentState::DRAINING, 4, std::nullopt}};
  r.shardProgress = {{1, std::string("17-3"), 2, std::nullopt}, {5, std::nullopt, std::nullopt, 9}};
  auto d = decode_heartbeat_request(encode(r), r.memberId);
  ASSERT_TRUE(d.ok()) << d.error.message;
  EXPECT_EQ(*d.value, r);
  EXPECT_EQ(encode(r).find("leavingMemberEpoch"), std::string::npos) << "absent unless set";
  r.leavingMemberEpoch = 7;
  d = decode_heartbeat_request(encode(r), r.memberId);
  ASSERT_TRUE(d.ok()) << d.error.message;
  EXPECT_EQ(d.value->leavingMemberEpoch, 7);
  EXPECT_EQ(*d.value, r);
}

TEST(Validation, LeavingMemberEpochIsAPositiveIntegerOrAbsent) {
  auto j = valid_request();
  j["memberEpoch"] = -1;
  j["leavingMemberEpoch"] = nullptr;
  auto d = decode_heartbeat_request(j.dump(), "member-a");
  ASSERT_TRUE(d.ok());
  EXPECT_FALSE(d.value->leavingMemberEpoch.has_value());
  for (const json& bad : {json(0), json(-1), json("3"), json(1.5)}) {
    j["leavingMemberEpoch"] = bad;
    d = decode_heartbeat_request(j.dump(), "member-a");
    EXPECT_FALSE(d.ok()) << bad;
    EXPECT_EQ(d.error.field, "leavingMemberEpoch") << bad;
  }
}

TEST(Codec, ResponseRoundTripsWithAndWithoutAssignment) {
  HeartbeatResponse r;
  r.responseTo = "hb-1";
  r.status = HeartbeatStatus::REVOKE_PENDING;
  r.memberId = "m";
  r.memberEpoch = 12;
  r.heartbeatIntervalMs = 3000;
  r.rebalanceTimeoutMs = 60000;
  r.memberLeaseTtlMs = 15000;
  r.groupEpoch = 13;
  r.assignmentEpoch = 13;
  r.metadataVersion = 9;
  r.assignment = Assignment{"NONE", {0, 4}, {2}, 9};
  auto d = decode_heartbeat_response(encode(r));
  ASSERT_TRUE(d.ok()) << d.error.message;
  EXPECT_EQ(*d.value, r);

  // No assignment decided (an error): still an object on the wire, empty, with the metadata version.
  r.assignment.reset();
  r.status = HeartbeatStatus::FENCED_MEMBER_EPOCH;
  r.message = "stale";
  auto j = json::parse(encode(r));
  ASSERT_TRUE(j.at("assignment").is_object());
  EXPECT_EQ(j.at("assignment").at("assignedShards"), json::array());
  EXPECT_EQ(j.at("assignment").at("pendingShards"), json::array());
  EXPECT_EQ(j.at("assignment").at("metadataVersion"), 9);
  EXPECT_EQ(j.at("assignment").at("error"), "NONE");
  EXPECT_EQ(dump(j), encode(r)) << "written as dump writes a document: compact, keys sorted";
  auto d2 = decode_heartbeat_response(j.dump());
  ASSERT_TRUE(d2.ok()) << d2.error.message;
  EXPECT_EQ(d2.value->assignment, (Assignment{"NONE", {}, {}, 9}));
  // An older server's null is still read.
  j["assignment"] = nullptr;
  auto d3 = decode_heartbeat_response(j.dump());
  ASSERT_TRUE(d3.ok()) << d3.error.message;
  EXPECT_EQ(*d3.value, r);
}

TEST(Codec, StreamMetadataAndShardCountBodiesRoundTrip) {
  StreamMetadata m{"orders", 16, 3};
  auto d = decode_stream_metadata(encode(m));
  ASSERT_TRUE(d.ok()) << d.error.message;
  EXPECT_EQ(*d.value, m);
  auto c = decode_shard_count_body(R"({"shardCount": 32})");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(*c.value, 32);
  EXPECT_EQ(decode_shard_count_body(R"({"shardCount": 0})").error.field, "shardCount");
  EXPECT_EQ(decode_shard_count_body(R"({"shardCount": "8"})").error.field, "shardCount");
  EXPECT_EQ(decode_shard_count_body(R"({})").error.field, "shardCount");
  EXPECT_EQ(decode_shard_count_body(R"({"shardCount": 100000000})").error.field, "shardCount");
}

TEST(Codec, ErrorBodyHasTheResponseShapeWithAMessage) {
  auto r = error_response("rq", "m\xff", HeartbeatStatus::INVALID_REQUEST, "memberId: bad");
  auto j = json::parse(encode(r));  // invalid UTF-8 from a URL must not throw
  EXPECT_EQ(j.at("status"), "INVALID_REQUEST");
  EXPECT_EQ(j.at("message"), "memberId: bad");
  EXPECT_EQ(j.at("responseTo"), "rq");
  EXPECT_TRUE(j.contains("memberEpoch"));
  EXPECT_FALSE(j.contains("errorField")) << "no field named, none sent";
}

// One builder for every refused heartbeat answer, wherever it is decided.
TEST(Codec, ARefusalCarriesEveryTimingAndEchoesTheMembersEpochWhenKnown) {
  const Timings t{3000, 60000, 15000};
  auto retry = refusal("rq", "m", HeartbeatStatus::RETRY, "store down", t, {}, 7);
  EXPECT_EQ(retry.heartbeatIntervalMs, 3000);
  EXPECT_EQ(retry.rebalanceTimeoutMs, 60000);
  EXPECT_EQ(retry.memberLeaseTtlMs, 15000);
  EXPECT_EQ(retry.memberEpoch, 7) << "a RETRY leaves the member where it is";
  EXPECT_EQ(retry.responseTo, "rq");
  auto invalid = refusal("rq", "m", HeartbeatStatus::INVALID_REQUEST, "full", t, "consumerGroup");
  EXPECT_EQ(invalid.errorField, std::optional<std::string>("consumerGroup"));
  EXPECT_EQ(invalid.memberEpoch, error_response("rq", "m", HeartbeatStatus::INVALID_REQUEST, "x").memberEpoch)
      << "no epoch known: the error shape's";
  EXPECT_EQ(invalid.memberLeaseTtlMs, 15000);
}

TEST(Codec, TheFieldAtFaultTravelsInErrorFieldAndSurvivesARoundTrip) {
  auto r = error_response("rq", "m", HeartbeatStatus::INVALID_REQUEST, "memberEpoch: 9 was never issued", "memberEpoch");
  r.assignment = Assignment{};  // on the wire an answer always has one
  const auto bytes = encode(r);
  EXPECT_EQ(json::parse(bytes).at("errorField"), "memberEpoch");
  EXPECT_EQ(bytes, dump(json::parse(bytes))) << "written as dump writes a document: compact, keys sorted";
  auto d = decode_heartbeat_response(bytes);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(*d.value, r);
  auto old = json::parse(bytes);
  old.erase("errorField");  // a coordinator that does not name fields
  auto o = decode_heartbeat_response(old.dump());
  ASSERT_TRUE(o.ok());
  EXPECT_FALSE(o.value->errorField.has_value());
}

TEST(Validation, ABodyThatIsNotJsonIsRejected) {
  auto d = decode_heartbeat_request("{not json", "member-a");
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.error.status, HeartbeatStatus::INVALID_REQUEST);
  EXPECT_NE(d.error.message.find("JSON"), std::string::npos);
  auto arr = decode_heartbeat_request("[1,2]", "member-a");
  ASSERT_FALSE(arr.ok());
  EXPECT_EQ(arr.error.status, HeartbeatStatus::INVALID_REQUEST);
}

TEST(Validation, EveryRequiredFieldIsRequired) {
  for (const char* f : {"protocolVersion", "requestId", "memberId", "memberEpoch", "metadataVersion",
                        "runtimeConsumerCapacity", "ownedShards"}) {
    auto j = valid_request();
    j.erase(f);
    SCOPED_TRACE(f);
    expect_rejected(j, f);
  }
  for (const char* f : {"runtimeMaxConcurrency", "availableConcurrency"}) {
    auto j = valid_request();
    j["runtimeConsumerCapacity"].erase(f);
    expect_rejected(j, std::string("runtimeConsumerCapacity.") + f);
  }
  auto j = valid_request();
  j["ownedShards"][0].erase("shardIndex");
  expect_rejected(j, "ownedShards[0].shardIndex");
  j = valid_request();
  j["revokingShards"][0].erase("inFlight");
  expect_rejected(j, "revokingShards[0].inFlight");
  j = valid_request();
  j["revokingShards"][0].erase("state");
  expect_rejected(j, "revokingShards[0].state");
  j = valid_request();
  j["shardProgress"][0].erase("shardIndex");
  expect_rejected(j, "shardProgress[0].shardIndex");
}

TEST(Validation, OptionalListsMayBeAbsentOrNull) {
  auto j = valid_request();
  j.erase("revokingShards");
  j["shardProgress"] = nullptr;
  auto d = decode_heartbeat_request(j.dump(), "member-a");
  ASSERT_TRUE(d.ok()) << d.error.message;
  EXPECT_TRUE(d.value->revokingShards.empty());
  EXPECT_TRUE(d.value->shardProgress.empty());
}

TEST(Validation, WrongJsonTypesAreRejectedNamingTheField) {
  struct Case {
    std::string pointer;
    json value;
    std::string field;
  };
  const std::vector<Case> cases = {
      {"/requestId", 42, "requestId"},
      {"/memberId", json::array(), "memberId"},
      {"/memberEpoch", "11", "memberEpoch"},
      {"/memberEpoch", 1.5, "memberEpoch"},
      {"/metadataVersion", true, "metadataVersion"},
      {"/runtimeConsumerCapacity", json::array(), "runtimeConsumerCapacity"},
      {"/runtimeConsumerCapacity/availableConcurrency", "8", "runtimeConsumerCapacity.availableConcurrency"},
      {"/ownedShards", json::object(), "ownedShards"},
      {"/ownedShards/0", 0, "ownedShards[0]"},
      {"/ownedShards/0/shardIndex", "0", "ownedShards[0].shardIndex"},
      {"/ownedShards/0/state", 1, "ownedShards[0].state"},
      {"/revokingShards", "x", "revokingShards"},
      {"/revokingShards/0/inFlight", -1, "revokingShards[0].inFlight"},
      {"/revokingShards/0/ackedAt", json::object(), "revokingShards[0].ackedAt"},
      {"/shardProgress/0/pending", "3", "shardProgress[0].pending"},
      {"/shardProgress/0/lag", -5, "shardProgress[0].lag"},
      {"/shardProgress/0/lastDeliveredId", 17, "shardProgress[0].lastDeliveredId"},
      {"/shardProgress/0/lastDeliveredId", "yesterday", "shardProgress[0].lastDeliveredId"},
      {"/protocolVersion", "1", "protocolVersion"},
  };
  for (const auto& c : cases) {
    auto j = valid_request();
    j[json::json_pointer(c.pointer)] = c.value;
    SCOPED_TRACE(c.pointer);
    expect_rejected(j, c.field);
  }
}

TEST(Validation, UnknownShardStatesAreRejected) {
  auto j = valid_request();
  j["ownedShards"][0]["state"] = "MINE";
  expect_rejected(j, "ownedShards[0].state");
  j = valid_request();
  j["ownedShards"][0]["state"] = "DRAINING";  // a shard being given up belongs in revokingShards
  expect_rejected(j, "ownedShards[0].state");
  j = valid_request();
  j["revokingShards"][0]["state"] = "OWNED";
  expect_rejected(j, "revokingShards[0].state");
  j = valid_request();
  j["revokingShards"][0]["state"] = "REVOKED";  // with inFlight 2: not drained
  expect_rejected(j, "revokingShards[0].inFlight");
}

TEST(Validation, PathAndBodyMemberIdMustMatch) {
  expect_rejected(valid_request(), "memberId", HeartbeatStatus::INVALID_REQUEST, "member-b");
}

TEST(Validation, NamesMustMatchTheAllowedAlphabetAndLength) {
  EXPECT_TRUE(valid_name("10.0.0.7:worker-3_a"));
  EXPECT_TRUE(valid_name(std::string(128, 'a')));
  EXPECT_FALSE(valid_name(std::string(129, 'a')));
  EXPECT_FALSE(valid_name(""));
  EXPECT_FALSE(valid_name("a/b"));
  EXPECT_FALSE(valid_name("a b"));
  EXPECT_FALSE(valid_name("caf\xc3\xa9"));
  auto e = validate_name("consumerGroup", "bad group");
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->field, "consumerGroup");
  EXPECT_NE(e->message.find("consumerGroup"), std::string::npos);
  EXPECT_FALSE(validate_name("streamPrefix", "orders.v2").has_value());

  auto j = valid_request();
  j["memberId"] = "member a";
  expect_rejected(j, "memberId", HeartbeatStatus::INVALID_REQUEST, "member a");
  j["memberId"] = std::string(129, 'm');
  expect_rejected(j, "memberId", HeartbeatStatus::INVALID_REQUEST, std::string(129, 'm'));
}

// -2 (a static member leaving, coming back: SPEC §3 rule 12) needs an instanceId; below -2 is invalid.
TEST(Validation, EpochBelowMinusTwoAndMinusTwoWithoutAnInstanceAreRejected) {
  auto j = valid_request();
  j["memberEpoch"] = -3;
  expect_rejected(j, "memberEpoch");
  j["memberEpoch"] = 4294967296LL;  // beyond int32
  expect_rejected(j, "memberEpoch");
  j["memberEpoch"] = -2;
  expect_rejected(j, "instanceId");
  j["instanceId"] = "consumer-2";
  auto d = decode_heartbeat_request(j.dump(), "member-a");
  ASSERT_TRUE(d.ok()) << d.error.message;
  EXPECT_EQ(d.value->memberEpoch, -2);
  EXPECT_EQ(d.value->instanceId, std::optional<std::string>("consumer-2"));
  j["memberEpoch"] = -1;
  EXPECT_TRUE(decode_heartbeat_request(j.dump(), "member-a").ok());
}

TEST(Validation, AnInstanceIdFollowsTheNameRulesAndTheFastPathReadsItAlike) {
  auto j = valid_request();
  j["instanceId"] = "consumer-2";
  auto fast = decode_heartbeat_request_fast(j.dump(), "member-a");
  ASSERT_TRUE(fast.has_value()) << "the runtime sends it with every heartbeat: the fast path takes it";
  EXPECT_EQ(fast->instanceId, std::optional<std::string>("consumer-2"));
  EXPECT_EQ(*fast, *decode_heartbeat_request(j.dump(), "member-a").value);
  auto encoded = json::parse(encode(*fast));
  EXPECT_EQ(encoded["instanceId"], "consumer-2");
  for (const char* bad : {"", "has space", "slash/no"}) {
    j["instanceId"] = bad;
    expect_rejected(j, "instanceId");
  }
  j["instanceId"] = std::string(129, 'x');
  expect_rejected(j, "instanceId");
  j["instanceId"] = 7;
  expect_rejected(j, "instanceId");
}

TEST(Validation, DuplicateShardsInOrAcrossListsAreRejected) {
  auto j = valid_request();
  j["ownedShards"].push_back({{"shardIndex", 0}, {"state", "OWNED"}});
  expect_rejected(j, "ownedShards[1].shardIndex");
  j = valid_request();
  j["revokingShards"].push_back({{"shardIndex", 3}, {"state", "REVOKED"}, {"inFlight", 0}});
  expect_rejected(j, "revokingShards[1].shardIndex");
  j = valid_request();
  j["revokingShards"][0]["shardIndex"] = 0;  // also owned
  expect_rejected(j, "revokingShards[0].shardIndex");
  j = valid_request();
  j["shardProgress"].push_back({{"shardIndex", 0}});
  expect_rejected(j, "shardProgress[1].shardIndex");
}

TEST(Validation, NegativeShardIndexIsRejected) {
  auto j = valid_request();
  j["ownedShards"][0]["shardIndex"] = -1;
  expect_rejected(j, "ownedShards[0].shardIndex");
}

TEST(Validation, OtherProtocolVersionsAreUnsupportedEvenWithOtherFieldsBroken) {
  auto j = valid_request();
  j["protocolVersion"] = 2;
  expect_rejected(j, "protocolVersion", HeartbeatStatus::UNSUPPORTED_PROTOCOL);
  j.erase("ownedShards");  // a future version may well have different fields
  expect_rejected(j, "protocolVersion", HeartbeatStatus::UNSUPPORTED_PROTOCOL);
  j["protocolVersion"] = 0;
  expect_rejected(j, "protocolVersion", HeartbeatStatus::UNSUPPORTED_PROTOCOL);
}

TEST(Validation, EmptyOrOverlongRequestIdIsRejected) {
  auto j = valid_request();
  j["requestId"] = "";
  expect_rejected(j, "requestId");
  j["requestId"] = std::string(257, 'r');
  expect_rejected(j, "requestId");
}

TEST(Validation, UnknownFieldsAreIgnoredForForwardCompatibility) {
  auto j = valid_request();
  j["clientSoftwareVersion"] = "1.2.3";
  EXPECT_TRUE(decode_heartbeat_request(j.dump(), "member-a").ok());
}

// The response is written without building a JSON document, by its one encoder: for every shape
// and for strings that need escaping or are not UTF-8, the bytes are what nlohmann's dump writes
// for the document they parse into (compact, keys sorted), and they read back.
TEST(Codec, TheResponseWriterWritesWhatDumpWritesAndItReadsBack) {
  std::mt19937 rng(7);
  const std::vector<std::string> strings{"", "hb-a-1", "quote\"d", "back\\slash", "new\nline", "tab\t", "\x01\x1f",
                                         "caf\xc3\xa9", "bad\xff\xfe", "emoji \xf0\x9f\x98\x80", std::string(300, 'x')};
  int checked = 0, readBack = 0, fastRead = 0;
  for (int i = 0; i < 2000; ++i) {
    HeartbeatResponse r;
    r.responseTo = strings[rng() % strings.size()];
    r.memberId = strings[rng() % strings.size()];
    r.status = static_cast<HeartbeatStatus>(rng() % 9);
    r.memberEpoch = static_cast<int32_t>(rng() % 2000000) - 1000000;
    r.heartbeatIntervalMs = rng() % 100000;
    r.rebalanceTimeoutMs = static_cast<int64_t>(rng()) * 1000;
    r.memberLeaseTtlMs = rng() % 100000;
    r.groupEpoch = static_cast<int32_t>(rng() % 1000);
    r.assignmentEpoch = static_cast<int32_t>(rng() % 1000);
    r.metadataVersion = -static_cast<int32_t>(rng() % 3);
    if (rng() % 3) {
      Assignment a;
      for (int k = static_cast<int>(rng() % 5); k > 0; --k) a.assignedShards.push_back(static_cast<int32_t>(rng() % 70000));
      for (int k = static_cast<int>(rng() % 3); k > 0; --k) a.pendingShards.push_back(static_cast<int32_t>(rng() % 70000));
      a.metadataVersion = static_cast<int32_t>(rng() % 50);
      if (rng() % 4 == 0) a.error = strings[rng() % strings.size()];
      r.assignment = a;
    }
    if (rng() % 2) r.message = strings[rng() % strings.size()];
    const auto bytes = encode(r);
    ASSERT_EQ(bytes, dump(json::parse(bytes))) << "case " << i;
    // What was written reads back as an answer that writes the same bytes (when it is a valid one).
    const auto back = decode_heartbeat_response(bytes);
    if (back.ok()) {
      ASSERT_EQ(encode(*back.value), bytes);
      ++readBack;
    }
    // The answer is declared once: the fast reader, when it decides, reads what the general one does.
    if (auto fast = decode_heartbeat_response_fast(bytes)) {
      const auto full = decode_heartbeat_response_json(json::parse(bytes));
      ASSERT_TRUE(full.ok()) << bytes;
      ASSERT_EQ(*fast, *full.value) << bytes;
      ++fastRead;
    }
    ++checked;
  }
  EXPECT_EQ(checked, 2000);
  EXPECT_GT(readBack, 100) << "valid answers among them read back";
  EXPECT_GT(fastRead, 0) << "answers with plain strings take the fast reader";
  // What a coordinator usually answers takes the fast reader.
  HeartbeatResponse usual;
  usual.responseTo = "10.0.0.7:4-9f2c-17";
  usual.memberId = "10.0.0.7:4";
  usual.memberEpoch = 7;
  usual.heartbeatIntervalMs = 3000;
  usual.groupEpoch = usual.assignmentEpoch = 7;
  usual.assignment = Assignment{"NONE", {1, 4}, {5}, 2};
  const auto fast = decode_heartbeat_response_fast(encode(usual));
  ASSERT_TRUE(fast.has_value()) << encode(usual);
  EXPECT_EQ(*fast, usual);
}

// Deep nesting is refused while parsing, whatever the body's size, and an error answer still
// names the request (parsed once).
TEST(Validation, BodiesNestedDeeperThanTheLimitAreRefusedWhileParsing) {
  const std::string deep(1 << 20, '[');
  auto d = decode_heartbeat_request(deep, "a");
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.error.message.find("deeper than 32"), std::string::npos) << d.error.message;
  auto body = [](int depth) {
    auto j = valid_request();
    std::string nested = std::string(static_cast<std::size_t>(depth), '[') + std::string(static_cast<std::size_t>(depth), ']');
    std::string text = j.dump();
    text.insert(text.size() - 1, ",\"extra\":" + nested);  // depth counts the body's own object
    return text;
  };
  EXPECT_TRUE(decode_heartbeat_request(body(kMaxJsonDepth - 1), "member-a").ok()) << "32 levels in all: accepted";
  auto tooDeep = decode_heartbeat_request(body(kMaxJsonDepth), "member-a");
  ASSERT_FALSE(tooDeep.ok());
  EXPECT_NE(tooDeep.error.message.find("deeper than"), std::string::npos);
  auto bad = valid_request();
  bad["memberEpoch"] = "eleven";
  auto named = decode_heartbeat_request(bad.dump(), "member-a");
  ASSERT_FALSE(named.ok());
  EXPECT_EQ(named.requestId, "hb-member-a-000042") << "the error answer can name the request";
  EXPECT_TRUE(decode_heartbeat_request("{\"requestId\": 7", "a").requestId.empty());
}

// Other clients (the reference implementation's) nest the shard and call pending "pendingCount";
// both forms mean the same, and nothing else gets looser.
TEST(Validation, NestedShardReferencesAndPendingCountAreAccepted) {
  auto j = json::parse(R"({"protocolVersion": 1, "requestId": "r-9", "memberId": "member-a", "memberName": null,
    "memberEpoch": 11, "metadataVersion": 8,
    "runtimeConsumerCapacity": {"runtimeMaxConcurrency": 1, "availableConcurrency": 1},
    "ownedShards": [{"shardIndex": 0}],
    "revokingShards": [{"shard": {"shardIndex": 2}, "state": "REVOKED", "inFlight": 0}],
    "shardProgress": [{"shard": {"shardIndex": 0}, "streamKey": "orders:0", "pendingCount": 3,
                       "lastDeliveredId": "1700000000000-0", "lastAckedId": "1700000000000-0",
                       "updatedAt": "2026-11-30T12:00:00Z"}]})");
  auto d = decode_heartbeat_request(j.dump(), "member-a");
  ASSERT_TRUE(d.ok()) << d.error.message;
  ASSERT_EQ(d.value->revokingShards.size(), 1u);
  EXPECT_EQ(d.value->revokingShards[0].shardIndex, 2);
  EXPECT_EQ(d.value->revokingShards[0].state, ShardAssignmentState::REVOKED);
  ASSERT_EQ(d.value->shardProgress.size(), 1u);
  EXPECT_EQ(d.value->shardProgress[0].shardIndex, 0);
  EXPECT_EQ(d.value->shardProgress[0].pending, 3);
  EXPECT_EQ(d.value->shardProgress[0].lastDeliveredId, "1700000000000-0");

  auto both = j;  // both forms, disagreeing
  both["revokingShards"][0]["shardIndex"] = 5;
  expect_rejected(both, "revokingShards[0].shardIndex");
  auto agree = j;
  agree["revokingShards"][0]["shardIndex"] = 2;
  EXPECT_TRUE(decode_heartbeat_request(agree.dump(), "member-a").ok());
  auto noIndex = j;
  noIndex["revokingShards"][0]["shard"] = json::object();
  expect_rejected(noIndex, "revokingShards[0].shard.shardIndex");
  auto notObject = j;
  notObject["shardProgress"][0]["shard"] = 4;
  expect_rejected(notObject, "shardProgress[0].shard");
  auto negative = j;
  negative["revokingShards"][0]["shard"]["shardIndex"] = -1;
  expect_rejected(negative, "revokingShards[0].shard.shardIndex");
  auto twice = j;  // a nested revoke of an owned shard is still a duplicate
  twice["revokingShards"][0]["shard"]["shardIndex"] = 0;
  expect_rejected(twice, "revokingShards[0].shardIndex");
  auto counts = j;
  counts["shardProgress"][0]["pending"] = 4;
  expect_rejected(counts, "shardProgress[0].pendingCount");
  auto badCount = j;
  badCount["shardProgress"][0]["pendingCount"] = "3";
  expect_rejected(badCount, "shardProgress[0].pendingCount");
}

// The fast path (no JSON document) decodes the usual bodies exactly as the full decoder does, and
// leaves everything unusual to it.
TEST(FastDecode, UsualBodiesDecodeExactlyAsTheFullDecoderDoes) {
  std::vector<json> usual{valid_request()};
  auto j = valid_request();
  j["revokingShards"] = nullptr;
  j["shardProgress"] = nullptr;
  usual.push_back(j);
  j = valid_request();
  j.erase("revokingShards");
  j.erase("shardProgress");
  j["ownedShards"] = json::array({{{"shardIndex", 4}}, {{"shardIndex", 2}, {"state", "OWNED"}}});
  usual.push_back(j);
  j = valid_request();
  j["revokingShards"] = json::array({{{"shardIndex", 5}, {"state", "REVOKED"}, {"inFlight", 0}, {"ackedAt", 1700000000000}},
                                     {{"shardIndex", 6}, {"state", "REVOKING"}, {"inFlight", 1}, {"ackedAt", "2026-11-30T10:00:00Z"}}});
  j["shardProgress"] = json::array({{{"shardIndex", 0}, {"lastDeliveredId", nullptr}, {"pending", nullptr}, {"lag", nullptr}},
                                    {{"shardIndex", 5}}});
  j["memberEpoch"] = -1;
  usual.push_back(j);
  j["leavingMemberEpoch"] = 12;
  usual.push_back(j);
  for (const auto& u : usual) {
    for (const auto& body : {u.dump(), u.dump(2)}) {  // compact and indented
      auto fast = decode_heartbeat_request_fast(body, "member-a");
      ASSERT_TRUE(fast.has_value()) << body;
      auto full = decode_heartbeat_request_json(json::parse(body), "member-a");
      ASSERT_TRUE(full.ok()) << full.error.message;
      EXPECT_EQ(*fast, *full.value) << body;
    }
  }
  // What rsc's own member runtime sends takes the fast path.
  HeartbeatRequest r;
  r.requestId = "10.0.0.7:4-9f2c-17";
  r.memberId = "10.0.0.7:4";
  r.memberEpoch = 3;
  r.runtimeConsumerCapacity = {4, 3};
  r.ownedShards = {{1, ShardAssignmentState::OWNED}};
  r.revokingShards = {{2, ShardAssignmentState::DRAINING, 1, std::nullopt}};
  r.shardProgress.push_back({1, std::string("1700000000000-5"), 0, std::nullopt});
  auto fast = decode_heartbeat_request_fast(encode(r), "10.0.0.7:4");
  ASSERT_TRUE(fast.has_value()) << encode(r);
  EXPECT_EQ(*fast, r);
}

TEST(FastDecode, UnusualButValidBodiesAreLeftToTheFullDecoder) {
  const std::vector<std::string> unusual{
      // an escape, a non-ASCII character, an unknown key
      R"({"protocolVersion":1,"requestId":"r\u0031","memberId":"member-a","memberEpoch":0,"metadataVersion":0,"runtimeConsumerCapacity":{"runtimeMaxConcurrency":1,"availableConcurrency":1},"ownedShards":[]})",
      "{\"protocolVersion\":1,\"requestId\":\"r\xc3\xa9\",\"memberId\":\"member-a\",\"memberEpoch\":0,\"metadataVersion\":0,\"runtimeConsumerCapacity\":{\"runtimeMaxConcurrency\":1,\"availableConcurrency\":1},\"ownedShards\":[]}",
      R"({"protocolVersion":1,"requestId":"r","memberId":"member-a","memberEpoch":0,"metadataVersion":0,"runtimeConsumerCapacity":{"runtimeMaxConcurrency":1,"availableConcurrency":1},"ownedShards":[],"extra":{"a":[1,2]}})",
      // a key twice (the full decoder keeps the last)
      R"({"protocolVersion":1,"requestId":"r","memberId":"member-a","memberEpoch":0,"memberEpoch":0,"metadataVersion":0,"runtimeConsumerCapacity":{"runtimeMaxConcurrency":1,"availableConcurrency":1},"ownedShards":[]})",
  };
  for (const auto& body : unusual) {
    EXPECT_FALSE(decode_heartbeat_request_fast(body, "member-a").has_value()) << body;
    EXPECT_TRUE(decode_heartbeat_request(body, "member-a").ok()) << body;
  }
  // Other clients' spellings (the nested shard, pendingCount) are rules of the one declaration, so
  // both readers take them, to the same request.
  const std::vector<std::string> otherSpellings{
      R"({"protocolVersion":1,"requestId":"r","memberId":"member-a","memberEpoch":2,"metadataVersion":0,"runtimeConsumerCapacity":{"runtimeMaxConcurrency":1,"availableConcurrency":1},"ownedShards":[],"revokingShards":[{"shard":{"shardIndex":1},"state":"REVOKED","inFlight":0}]})",
      R"({"protocolVersion":1,"requestId":"r","memberId":"member-a","memberEpoch":2,"metadataVersion":0,"runtimeConsumerCapacity":{"runtimeMaxConcurrency":1,"availableConcurrency":1},"ownedShards":[{"shardIndex":1}],"shardProgress":[{"shardIndex":1,"pendingCount":4}]})",
  };
  for (const auto& body : otherSpellings) {
    auto fast = decode_heartbeat_request_fast(body, "member-a");
    ASSERT_TRUE(fast.has_value()) << body;
    auto full = decode_heartbeat_request_json(json::parse(body), "member-a");
    ASSERT_TRUE(full.ok()) << full.error.message;
    EXPECT_EQ(*fast, *full.value) << body;
  }
  EXPECT_EQ(decode_heartbeat_request_fast(otherSpellings[0], "member-a")->revokingShards.at(0).shardIndex, 1);
  EXPECT_EQ(decode_heartbeat_request_fast(otherSpellings[1], "member-a")->shardProgress.at(0).pending, 4);
  const std::vector<std::string> invalid{
      R"({"protocolVersion":1,"requestId":"r","memberId":"member-a","memberEpoch":0,"metadataVersion":0,"runtimeConsumerCapacity":{"runtimeMaxConcurrency":1,"availableConcurrency":1},"ownedShards":[]} x)",
      R"({"protocolVersion":1,"requestId":"r","memberId":"member-a","memberEpoch":01,"metadataVersion":0,"runtimeConsumerCapacity":{"runtimeMaxConcurrency":1,"availableConcurrency":1},"ownedShards":[]})",
      R"({"protocolVersion":1,"requestId":"r","memberId":"member-a","memberEpoch":1.0,"metadataVersion":0,"runtimeConsumerCapacity":{"runtimeMaxConcurrency":1,"availableConcurrency":1},"ownedShards":[]})",
      R"({"protocolVersion":1,"requestId":"r","memberId":"member-a","memberEpoch":99999999999999999999,"metadataVersion":0,"runtimeConsumerCapacity":{"runtimeMaxConcurrency":1,"availableConcurrency":1},"ownedShards":[]})",
      R"({"protocolVersion":1,"requestId":"r","memberId":"member-a","memberEpoch":0,"metadataVersion":0,"runtimeConsumerCapacity":{"runtimeMaxConcurrency":1},"ownedShards":[]})",
      R"({"protocolVersion":1,"requestId":"r","memberId":"member-a","memberEpoch":0,"metadataVersion":0,"runtimeConsumerCapacity":{"runtimeMaxConcurrency":1,"availableConcurrency":1},"ownedShards":[{"shardIndex":1},{"shardIndex":1}]})",
      R"({"protocolVersion":1,"requestId":"r","memberId":"member-a","memberEpoch":0,"metadataVersion":0,"runtimeConsumerCapacity":{"runtimeMaxConcurrency":1,"availableConcurrency":1},"ownedShards":[],"revokingShards":[{"shardIndex":1,"state":"REVOKED","inFlight":2}]})",
      R"({"protocolVersion":1,"requestId":"r","memberId":"member-a","memberEpoch":0,"metadataVersion":0,"runtimeConsumerCapacity":{"runtimeMaxConcurrency":1,"availableConcurrency":1},"ownedShards":[],"shardProgress":[{"shardIndex":1,"lastDeliveredId":"12"}]})",
      R"({"protocolVersion":2,"requestId":"r","memberId":"member-a","memberEpoch":0,"metadataVersion":0,"runtimeConsumerCapacity":{"runtimeMaxConcurrency":1,"availableConcurrency":1},"ownedShards":[]})",
      R"({"protocolVersion":1,"requestId":"r","memberId":"member-b","memberEpoch":0,"metadataVersion":0,"runtimeConsumerCapacity":{"runtimeMaxConcurrency":1,"availableConcurrency":1},"ownedShards":[]})",
  };
  for (const auto& body : invalid) {
    EXPECT_FALSE(decode_heartbeat_request_fast(body, "member-a").has_value()) << body;
    EXPECT_FALSE(decode_heartbeat_request(body, "member-a").ok()) << body;
  }
}

// The fast path checks shard indexes for duplicates without a set: on the stack up to 64 shards,
// on the heap past that. Either way a duplicate (within a list, or owned and revoking at once)
// is left to the full decoder, which refuses it; distinct shards are taken.
TEST(FastDecode, DuplicateShardsAreFoundInShortAndLongLists) {
  auto body = [](int owned, int revokingFrom, int progress, int progressDup) {
    std::string b = R"({"protocolVersion":1,"requestId":"r","memberId":"member-a","memberEpoch":3,"metadataVersion":0,)"
                    R"("runtimeConsumerCapacity":{"runtimeMaxConcurrency":1,"availableConcurrency":1},"ownedShards":[)";
    for (int i = 0; i < owned; ++i) b += (i ? "," : "") + std::string(R"({"shardIndex":)") + std::to_string(i) + R"(,"state":"OWNED"})";
    b += R"(],"revokingShards":[)";
    if (revokingFrom >= 0)
      b += R"({"shardIndex":)" + std::to_string(revokingFrom) + R"(,"state":"DRAINING","inFlight":1})";
    b += R"(],"shardProgress":[)";
    for (int i = 0; i < progress; ++i)
      b += (i ? "," : "") + std::string(R"({"shardIndex":)") + std::to_string(i == progress - 1 && progressDup >= 0 ? progressDup : i) +
           R"(,"lastDeliveredId":"1700000000000-)" + std::to_string(i) + R"(","pending":0,"lag":1})";
    return b + "]}";
  };
  for (int n : {3, 63, 64, 65, 200}) {
    SCOPED_TRACE("shards " + std::to_string(n));
    auto ok = decode_heartbeat_request_fast(body(n, n, n, -1), "member-a");
    ASSERT_TRUE(ok.has_value());
    EXPECT_EQ(ok->ownedShards.size(), static_cast<std::size_t>(n));
    EXPECT_EQ(ok->revokingShards.size(), 1u);
    EXPECT_EQ(ok->shardProgress.size(), static_cast<std::size_t>(n));
    EXPECT_EQ(*ok, decode_heartbeat_request(body(n, n, n, -1), "member-a").value);
    for (const auto& bad : {body(n, n - 1, 0, -1), body(n, 0, 0, -1), body(n, -1, n, 0), body(n, -1, n, n - 2)}) {
      EXPECT_FALSE(decode_heartbeat_request_fast(bad, "member-a").has_value()) << bad;
      EXPECT_FALSE(decode_heartbeat_request(bad, "member-a").ok()) << bad;
    }
  }
}

TEST(Retention, EveryPolicyRoundTripsThroughTheStoredFormAndBadOnesAreRefused) {
  using K = rsc::protocol::Retention::Kind;
  for (const auto& r : {rsc::protocol::Retention{}, rsc::protocol::Retention{K::MaxLen, 5},
                        rsc::protocol::Retention{K::MaxAgeMs, 60000}, rsc::protocol::Retention{K::ProcessedByAllGroups, 0}}) {
    const auto back = rsc::protocol::decode_retention(rsc::protocol::encode_retention(r));
    ASSERT_TRUE(back.has_value()) << rsc::protocol::encode_retention(r);
    EXPECT_EQ(*back, r);
  }
  EXPECT_EQ(rsc::protocol::decode_retention(""), rsc::protocol::Retention{}) << "never set: none";
  for (const char* bad : {"maxLen:0", "maxLen:", "maxLen:x", "maxAgeMs:999", "forever", "maxLen"})
    EXPECT_FALSE(rsc::protocol::decode_retention(bad).has_value()) << bad;
}

TEST(Retention, TheApiBodyNamesThePolicyAndItsValueOnlyWhereItTakesOne) {
  auto ok = rsc::protocol::decode_retention_body(R"({"policy": "maxAgeMs", "value": 3600000})");
  ASSERT_TRUE(ok.ok()) << ok.error.message;
  EXPECT_EQ(ok.value->kind, rsc::protocol::Retention::Kind::MaxAgeMs);
  EXPECT_EQ(ok.value->value, 3600000);
  EXPECT_EQ(rsc::protocol::to_json(*ok.value).dump(), R"({"policy":"maxAgeMs","value":3600000})");
  const std::vector<std::pair<const char*, const char*>> bad{
      {R"({"policy": "maxLen"})", "value: is required for maxLen"},
      {R"({"policy": "maxLen", "value": 0})", "value: must be at least 1"},
      {R"({"policy": "maxAgeMs", "value": 10})", "value: must be at least 1000"},
      {R"({"policy": "processedByAllGroups", "value": 1})", "value: takes no value"},
      {R"({"policy": "forever"})", "policy: must be none, maxLen, maxAgeMs or processedByAllGroups"},
      {R"({})", "policy: is required"}};
  for (const auto& [body, why] : bad) {
    auto r = rsc::protocol::decode_retention_body(body);
    EXPECT_FALSE(r.ok()) << body;
    EXPECT_NE(r.error.message.find(why), std::string::npos) << body << " -> " << r.error.message;
  }
  auto put = rsc::protocol::decode_stream_request(R"({"shardCount": 4, "retention": {"policy": "maxLen", "value": 9}})", false);
  ASSERT_TRUE(put.ok()) << put.error.message;
  ASSERT_TRUE(put.value->retention.has_value());
  EXPECT_EQ(put.value->retention->value, 9);
  auto badPut = rsc::protocol::decode_stream_request(R"({"shardCount": 4, "retention": {"policy": "maxLen"}})", false);
  EXPECT_FALSE(badPut.ok());
  EXPECT_NE(badPut.error.message.find("retention.value"), std::string::npos) << badPut.error.message;
}

// The admin bodies say what they should have been when they are not that, and a body nested past
// the limit is refused saying so (not "the body must be ...", which would send the caller looking
// for a wrong field).
TEST(AdminBodies, ResetOffsetsAndDeadLetterSelectionsNameWhatIsWrong) {
  const std::string deep = R"({"to":)" + std::string(40, '[') + std::string(40, ']') + "}";
  for (const auto& message : {decode_reset_offsets_request(deep).error.message,
                              decode_dead_letter_selection(deep).error.message}) {
    EXPECT_NE(message.find("deeper than " + std::to_string(kMaxJsonDepth)), std::string::npos) << message;
  }
  EXPECT_NE(decode_reset_offsets_request("not json").error.message.find("the body must be"), std::string::npos);
  EXPECT_NE(decode_dead_letter_selection("[1]").error.message.find("the body must be"), std::string::npos);
  const auto reset = decode_reset_offsets_request(R"({"to": "earliest", "fenceMembers": true})");
  ASSERT_TRUE(reset.ok()) << reset.error.message;
  EXPECT_EQ(reset.value->position, "0");
  EXPECT_TRUE(reset.value->fenceMembers);
  const auto pick = decode_dead_letter_selection(R"({"deadLetterIds": ["1700000000000-0"]})");
  ASSERT_TRUE(pick.ok()) << pick.error.message;
  EXPECT_EQ(pick.value->ids, std::vector<std::string>{"1700000000000-0"});
}

// The request is declared once (protocol/wire_io.hpp): what the writer writes, both readers read
// back to the same request, whatever optional parts it has.
TEST(RequestDeclaredOnce, WhatTheWriterWritesBothReadersReadBackTheSame) {
  std::mt19937 rng(53);
  auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<unsigned>(n)); };
  for (int round = 0; round < 2000; ++round) {
    HeartbeatRequest r;
    r.requestId = "req-" + std::to_string(round);
    r.memberId = "m:" + std::to_string(pick(1000));
    r.memberEpoch = pick(5) - 1;
    r.metadataVersion = pick(9);
    r.runtimeConsumerCapacity = {pick(64), pick(64)};
    if (pick(3) == 0) r.instanceId = "inst-" + std::to_string(pick(9));
    if (r.instanceId && pick(4) == 0) r.memberEpoch = -2;
    if (pick(3) == 0) r.rackId = "zone-" + std::to_string(pick(3));
    if (r.memberEpoch == -1 && pick(2)) r.leavingMemberEpoch = 1 + pick(9);
    std::vector<int32_t> shards(100);
    for (int i = 0; i < 100; ++i) shards[static_cast<std::size_t>(i)] = i;
    std::shuffle(shards.begin(), shards.end(), rng);
    std::size_t next = 0;
    for (int i = pick(70); i > 0; --i) r.ownedShards.push_back({shards[next++], ShardAssignmentState::OWNED});
    for (int i = pick(4); i > 0; --i) {
      RevokingShard s{shards[next++], pick(2) ? ShardAssignmentState::DRAINING : ShardAssignmentState::REVOKING,
                      pick(5), std::nullopt};
      if (pick(2)) s.ackedAt = "2026-12-07T0" + std::to_string(pick(9)) + ":00:00Z";
      r.revokingShards.push_back(s);
    }
    for (const auto& o : r.ownedShards) {
      if (pick(2)) continue;
      ShardProgress p{o.shardIndex, std::nullopt, std::nullopt, std::nullopt};
      if (pick(2)) p.lastDeliveredId = std::to_string(1700000000000LL + pick(1000)) + "-" + std::to_string(pick(3));
      if (pick(2)) p.pending = pick(100);
      if (pick(2)) p.lag = pick(100000);
      r.shardProgress.push_back(p);
    }
    const auto body = encode(r);
    auto fast = decode_heartbeat_request_fast(body, r.memberId);
    ASSERT_TRUE(fast.has_value()) << body;
    EXPECT_EQ(*fast, r) << body;
    auto full = decode_heartbeat_request_json(json::parse(body), r.memberId);
    ASSERT_TRUE(full.ok()) << full.error.message << " " << body;
    EXPECT_EQ(*full.value, r) << body;
  }
}
