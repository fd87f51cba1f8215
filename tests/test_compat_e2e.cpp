// Wire compatibility with the clients of the reference implementation, against a real
// redis-server and the real coordinator. The request bodies below are written the way those
// clients write them (from the issue's description of them): `memberName` null, owned shards
// without a state, revokes and progress nested as {"shard": {"shardIndex": n}}, `pendingCount`.
// Each exchange checks what such a client relies on: HTTP 200 for every heartbeat decision, an
// `assignment` object on every answer, stream creation by POST, producer-routing, and the shard
// streams and Redis consumer groups existing before a member or producer needs them.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <thread>

#include "e2e_harness.hpp"
#include "protocol/partition.hpp"

using namespace rsc::testing;
using nlohmann::json;

namespace {

const std::vector<std::string> kFast{"--tick-interval-ms", "100", "--heartbeat-interval-ms", "500",
                                     "--member-lease-ttl-ms", "2000", "--rebalance-timeout-ms", "3000"};

// A heartbeat as the reference clients send it.
json client_heartbeat(const std::string& id, int epoch, const std::vector<int>& owned, int metadataVersion,
                      json revoking = json::array(), json progress = json::array()) {
  static int seq = 0;
  json o = json::array();
  for (int s : owned) o.push_back({{"shardIndex", s}});
  return {{"protocolVersion", 1},
          {"requestId", "8a3f-" + std::to_string(++seq)},
          {"memberId", id},
          {"memberName", nullptr},
          {"memberEpoch", epoch},
          {"metadataVersion", metadataVersion},
          {"runtimeConsumerCapacity", {{"runtimeMaxConcurrency", 1}, {"availableConcurrency", 1}}},
          {"ownedShards", o},
          {"revokingShards", std::move(revoking)},
          {"shardProgress", std::move(progress)}};
}

std::vector<int> shards_of(const json& list) {
  std::vector<int> v;
  for (const auto& s : list) v.push_back(s.at("shardIndex").get<int>());
  return v;
}

// What every heartbeat answer must carry for those clients, whatever its status.
void expect_client_shape(const HttpResult& r, const std::string& status) {
  EXPECT_EQ(r.status, 200) << r.body;
  auto j = r.json();
  ASSERT_TRUE(j.is_object()) << r.body;
  EXPECT_EQ(j.value("status", ""), status) << r.body;
  ASSERT_TRUE(j.contains("assignment") && j["assignment"].is_object()) << r.body;
  EXPECT_TRUE(j["assignment"]["assignedShards"].is_array()) << r.body;
  EXPECT_TRUE(j["assignment"]["pendingShards"].is_array()) << r.body;
  EXPECT_TRUE(j["assignment"]["metadataVersion"].is_number_integer()) << r.body;
  EXPECT_GT(j.value("heartbeatIntervalMs", 0), 0) << r.body;
  for (const char* f : {"memberId", "memberEpoch", "groupEpoch", "assignmentEpoch", "metadataVersion"})
    EXPECT_TRUE(j.contains(f)) << f << " missing: " << r.body;
}

bool has_group(rsc::store::RedisConnection& c, const std::string& key, const std::string& group) {
  auto r = c.command({"XINFO", "GROUPS", key});
  if (!r.ok() || r.value->type != rsc::store::Value::Type::Array) return false;
  for (const auto& g : r.value->elements)
    for (std::size_t i = 0; i + 1 < g.elements.size(); i += 2)
      if (g.elements[i].str == "name" && g.elements[i + 1].str == group) return true;
  return false;
}

}  // namespace

TEST(Compat, TheReferenceClientsExchangesWork) {
  RedisServer redis;
  Coordinator coord(redis.port(), kFast);
  auto admin = redis.admin();
  const int port = coord.port();
  auto hb = [&](const std::string& id, const json& body) {
    return http_call(port, "POST", hb_path("orders", "billing", id), body.dump());
  };

  // Stream creation as the reference clients' operators do it.
  auto created = http_call(port, "POST", "/coord/v1/streams/orders",
                           R"({"initialShardCount": 4, "requestedBy": "platform-admin", "reason": "new stream"})");
  ASSERT_EQ(created.status, 201) << created.body;
  EXPECT_EQ(created.json()["shardCount"], 4);
  EXPECT_EQ(created.json()["metadataVersion"], 1);
  EXPECT_EQ(created.json()["streamKeyPattern"], "orders:{shardIndex}");
  EXPECT_EQ(http_call(port, "POST", "/coord/v1/streams/orders", R"({"initialShardCount": 4, "requestedBy": "x"})").status,
            200);
  EXPECT_EQ(http_call(port, "POST", "/coord/v1/streams/orders", R"({"initialShardCount": 8, "requestedBy": "x"})").status,
            409);
  EXPECT_NE(coord.log().find("requested by platform-admin (new stream)"), std::string::npos) << coord.log();

  // A record produced before the group exists is not skipped: the group starts at 0.
  ASSERT_TRUE(admin.command({"XADD", "orders:0", "1-1", "key", "early"}).ok());
  for (int s = 0; s < 4; ++s) EXPECT_FALSE(has_group(admin, "orders:" + std::to_string(s), "billing"));

  // Join, then the converged member's heartbeat: its whole assignment again, not null.
  auto join = hb("m-a", client_heartbeat("m-a", 0, {}, 0));
  expect_client_shape(join, "OK");
  const int epochA = join.json()["memberEpoch"];
  const auto mine = shards_of(join.json()["assignment"]["assignedShards"]);
  EXPECT_EQ(mine, (std::vector<int>{0, 1, 2, 3}));
  for (int s = 0; s < 4; ++s)
    EXPECT_TRUE(has_group(admin, "orders:" + std::to_string(s), "billing")) << "shard " << s << " provisioned at the join";
  auto early = admin.command({"XREADGROUP", "GROUP", "billing", "m-a", "COUNT", "10", "STREAMS", "orders:0", ">"});
  ASSERT_TRUE(early.ok());
  ASSERT_EQ(early.value->type, rsc::store::Value::Type::Array);
  EXPECT_EQ(early.value->elements.at(0).elements.at(1).elements.size(), 1u) << "the early record is read";
  auto steady = hb("m-a", client_heartbeat("m-a", epochA, mine, 1,
                                           json::array(), json::array({{{"shard", {{"shardIndex", 0}}},
                                                                        {"streamKey", "orders:0"},
                                                                        {"pendingCount", 0},
                                                                        {"lastDeliveredId", "1-1"}}})));
  expect_client_shape(steady, "OK");
  EXPECT_EQ(shards_of(steady.json()["assignment"]["assignedShards"]), mine);

  // A second member: the first is asked to give shards up, reports them in the nested form.
  auto joinB = hb("m-b", client_heartbeat("m-b", 0, {}, 1));
  expect_client_shape(joinB, "OK");
  EXPECT_TRUE(joinB.json()["assignment"]["assignedShards"].empty()) << "nothing free yet";
  EXPECT_EQ(joinB.json()["assignment"]["pendingShards"].size(), 2u);
  auto revoke = hb("m-a", client_heartbeat("m-a", epochA, mine, 1));
  expect_client_shape(revoke, "REVOKE_PENDING");
  const auto kept = shards_of(revoke.json()["assignment"]["assignedShards"]);
  ASSERT_EQ(kept.size(), 2u);
  json revoked = json::array();
  std::vector<int> given;
  for (int s : mine)
    if (std::find(kept.begin(), kept.end(), s) == kept.end()) {
      revoked.push_back({{"shard", {{"shardIndex", s}}}, {"state", "REVOKED"}, {"inFlight", 0}});
      given.push_back(s);
    }
  auto acked = hb("m-a", client_heartbeat("m-a", revoke.json()["memberEpoch"], kept, 1, revoked));
  expect_client_shape(acked, "OK");
  auto gotB = hb("m-b", client_heartbeat("m-b", joinB.json()["memberEpoch"], {}, 1));
  expect_client_shape(gotB, "OK");
  EXPECT_EQ(shards_of(gotB.json()["assignment"]["assignedShards"]), given);

  // Decisions that are errors are still HTTP 200 with the shape; a body that is no object is 400.
  auto stale = hb("m-a", client_heartbeat("m-a", 1, kept, 1));
  expect_client_shape(stale, "FENCED_MEMBER_EPOCH");
  EXPECT_TRUE(stale.json()["assignment"]["assignedShards"].empty());
  auto unknown = hb("m-z", client_heartbeat("m-z", 3, {}, 1));
  expect_client_shape(unknown, "UNKNOWN_MEMBER_ID");
  auto mismatch = http_call(port, "POST", hb_path("orders", "billing", "m-b"), client_heartbeat("m-x", 0, {}, 1).dump());
  expect_client_shape(mismatch, "INVALID_REQUEST");
  auto v2 = client_heartbeat("m-b", 0, {}, 1);
  v2["protocolVersion"] = 2;
  expect_client_shape(hb("m-b", v2), "UNSUPPORTED_PROTOCOL");
  EXPECT_EQ(http_call(port, "POST", hb_path("orders", "billing", "m-b"), "[1, 2]").status, 400);

  // Producer routing: every shard's key and Cluster slot; the group it names is provisioned.
  auto routing = http_call(port, "GET", "/coord/v1/streams/orders/groups/audit/producer-routing");
  ASSERT_EQ(routing.status, 200) << routing.body;
  auto rj = routing.json();
  EXPECT_EQ(rj["streamPrefix"], "orders");
  EXPECT_EQ(rj["consumerGroup"], "audit");
  EXPECT_EQ(rj["shardCount"], 4);
  EXPECT_EQ(rj["metadataVersion"], 1);
  EXPECT_EQ(rj["streamKeyPattern"], "orders:{shardIndex}");
  EXPECT_EQ(rj["partitioner"], "murmur3_x86_32-unbiased");
  ASSERT_EQ(rj["shards"].size(), 4u);
  const int slots[] = {8578, 12707, 448, 4577};  // CLUSTER KEYSLOT orders:0..3 (redis-server 7)
  for (int s = 0; s < 4; ++s) {
    EXPECT_EQ(rj["shards"][s]["shardIndex"], s);
    EXPECT_EQ(rj["shards"][s]["streamKey"], "orders:" + std::to_string(s));
    EXPECT_EQ(rj["shards"][s]["redisSlot"], slots[s]);
    EXPECT_TRUE(has_group(admin, "orders:" + std::to_string(s), "audit")) << s;
  }
  EXPECT_EQ(http_call(port, "GET", "/coord/v1/streams/nope/groups/audit/producer-routing").status, 404);

  // Growth: the new shard streams get the group's consumer group before anyone reads them.
  ASSERT_EQ(http_call(port, "PUT", "/coord/v1/streams/orders", R"({"shardCount": 6})").status, 200);
  // The PUT tells every group of the stream without waiting for them: a heartbeat may come first.
  // Once an answer carries the new metadata version, the new shards' consumer groups exist.
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(3);
  int32_t seenVersion = 0;
  while (seenVersion < 2 && std::chrono::steady_clock::now() < until) {
    auto afterGrowth = hb("m-b", client_heartbeat("m-b", gotB.json()["memberEpoch"], given, 1));
    ASSERT_EQ(afterGrowth.status, 200);
    seenVersion = afterGrowth.json().value("metadataVersion", 0);
    if (seenVersion < 2) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_EQ(seenVersion, 2);
  for (int s = 4; s < 6; ++s) EXPECT_TRUE(has_group(admin, "orders:" + std::to_string(s), "billing")) << s;
  EXPECT_EQ(http_call(port, "GET", "/coord/v1/streams/orders/groups/billing/producer-routing").json()["shardCount"], 6);

  // RETRY is HTTP 200 too, with Retry-After. (A join, which must be written: a steady heartbeat
  // whose stored lease still covers it is answered from the pod's state without Redis.)
  redis.stop();
  auto retry = hb("m-c", client_heartbeat("m-c", 0, {}, 2));
  expect_client_shape(retry, "RETRY");
  EXPECT_EQ(retry.headers["Retry-After"], "1");
}

// A hash-tagged stream keeps {prefix:i} keys; the member runtime and producers learn the pattern.
TEST(Compat, AHashTaggedStreamKeepsItsKeysAndTheyAreProvisioned) {
  RedisServer redis;
  Coordinator coord(redis.port(), kFast);
  auto admin = redis.admin();
  auto c = http_call(coord.port(), "POST", "/coord/v1/streams/audit", R"({"initialShardCount": 2, "keyStyle": "hashtag"})");
  ASSERT_EQ(c.status, 201) << c.body;
  EXPECT_EQ(c.json()["streamKeyPattern"], "{audit:{shardIndex}}");
  auto join = http_call(coord.port(), "POST", hb_path("audit", "g", "m1"), client_heartbeat("m1", 0, {}, 0).dump());
  expect_client_shape(join, "OK");
  EXPECT_TRUE(has_group(admin, "{audit:0}", "g"));
  EXPECT_TRUE(has_group(admin, "{audit:1}", "g"));
  EXPECT_EQ(admin.command({"EXISTS", "audit:0"}).value->integer, 0);
  auto r = http_call(coord.port(), "GET", "/coord/v1/streams/audit/groups/g/producer-routing").json();
  EXPECT_EQ(r["shards"][1]["streamKey"], "{audit:1}");
  EXPECT_EQ(r["shards"][0]["redisSlot"], 12124);  // CLUSTER KEYSLOT {audit:0} (redis-server 7)
  EXPECT_EQ(r["shards"][1]["redisSlot"], 16253);  // CLUSTER KEYSLOT {audit:1}
  EXPECT_EQ(http_call(coord.port(), "PUT", "/coord/v1/streams/audit", R"({"shardCount": 3, "keyStyle": "plain"})").status,
            409);
}

// rsc-produce: the layout from producer-routing, murmur3 placement as the reference clients do
// it, and a short Redis outage survived by retrying (every record written, the count printed).
TEST(Compat, TheProducerPlacesKeysByMurmur3AndSurvivesARedisRestart) {
  RedisServer::Options o;
  o.persistence = true;
  RedisServer redis(o);
  Coordinator coord(redis.port(), kFast);
  ASSERT_EQ(http_call(coord.port(), "POST", "/coord/v1/streams/orders", R"({"initialShardCount": 5})").status, 201);
  char tmpl[] = "/tmp/rsc-produce-XXXXXX";
  const std::string dir = mkdtemp(tmpl);
  const int kCount = 3000;
  Process producer({RSC_PRODUCE_BIN, "--redis", "127.0.0.1:" + std::to_string(redis.port()), "--stream", "orders",
                    "--coordinator", "http://127.0.0.1:" + std::to_string(coord.port()), "--group", "billing",
                    "--count", std::to_string(kCount), "--rate", "1500", "--key-space", "200", "--retry-ms", "20000"},
                   dir + "/producer.out");
  std::this_thread::sleep_for(std::chrono::milliseconds(600));
  redis.stop();  // mid-production
  std::this_thread::sleep_for(std::chrono::milliseconds(700));
  redis.start();
  ASSERT_EQ(producer.wait(30000), 0) << producer.output();
  const auto out = producer.output();
  EXPECT_NE(out.find("rsc-produce: " + std::to_string(kCount) + " records"), std::string::npos) << out;
  EXPECT_NE(out.find("retrying"), std::string::npos) << "the outage was seen and retried: " << out;
  auto admin = redis.admin();
  std::set<long> seqs;
  long records = 0;
  for (int s = 0; s < 5; ++s) {
    auto r = admin.command({"XRANGE", "orders:" + std::to_string(s), "-", "+"});
    ASSERT_TRUE(r.ok());
    for (const auto& e : r.value->elements) {
      const auto& f = e.elements.at(1).elements;
      std::string key, seq;
      for (std::size_t i = 0; i + 1 < f.size(); i += 2) {
        if (f[i].str == "key") key = f[i + 1].str;
        if (f[i].str == "seq") seq = f[i + 1].str;
      }
      EXPECT_EQ(rsc::protocol::murmur3_unbiased_shard(key, 5), static_cast<uint32_t>(s)) << key;
      seqs.insert(std::stol(seq));
      ++records;
    }
  }
  EXPECT_EQ(seqs.size(), static_cast<std::size_t>(kCount)) << "every record written (a retried one may repeat)";
  EXPECT_GE(records, kCount);
  // Without a coordinator the key names must be given: a guess would write where nobody reads.
  FILE* p = popen((std::string(RSC_PRODUCE_BIN) + " --redis 127.0.0.1:" + std::to_string(redis.port()) +
                   " --stream orders --shards 4 --count 1 2>&1").c_str(), "r");
  std::string out2;
  char buf[512];
  while (fgets(buf, sizeof buf, p)) out2 += buf;
  EXPECT_EQ(WEXITSTATUS(pclose(p)), 2);
  EXPECT_NE(out2.find("--key-pattern"), std::string::npos) << out2;
  std::filesystem::remove_all(dir);
}

// rsc-produce --stdin: one record per line, KEY<TAB>DATA, each on its key's shard with the fields
// key and data, in the order given; a line without a tab stops it with a message naming the line.
TEST(Compat, TheProducerWritesLinesFromStdinToTheirKeysShards) {
  RedisServer redis;
  Coordinator coord(redis.port(), kFast);
  ASSERT_EQ(http_call(coord.port(), "PUT", "/coord/v1/streams/orders", R"({"shardCount": 3})").status, 200);
  char tmpl[] = "/tmp/rsc-stdin-XXXXXX";
  const std::string dir = mkdtemp(tmpl);
  {
    std::ofstream in(dir + "/lines.tsv");
    for (int i = 0; i < 50; ++i) in << "user-" << (i % 5) << "\t{\"n\": " << i << "}\n";
  }
  const std::string produce = std::string(RSC_PRODUCE_BIN) + " --redis 127.0.0.1:" + std::to_string(redis.port()) +
                              " --stream orders --coordinator http://127.0.0.1:" + std::to_string(coord.port()) +
                              " --group billing --stdin < ";
  int rc = 0;
  auto out = run_command(produce + dir + "/lines.tsv", &rc);
  ASSERT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("50 records to 3 shards"), std::string::npos) << out;
  auto admin = redis.admin();
  std::map<std::string, std::vector<int>> byKey;
  int total = 0;
  for (int s = 0; s < 3; ++s) {
    auto r = admin.command({"XRANGE", "orders:" + std::to_string(s), "-", "+"});
    ASSERT_TRUE(r.ok());
    for (const auto& e : r.value->elements) {
      const auto& f = e.elements.at(1).elements;
      ASSERT_EQ(f.size(), 4u);
      EXPECT_EQ(f[0].str, "key");
      EXPECT_EQ(f[2].str, "data");
      EXPECT_EQ(rsc::protocol::murmur3_unbiased_shard(f[1].str, 3), static_cast<uint32_t>(s)) << f[1].str;
      byKey[f[1].str].push_back(nlohmann::json::parse(f[3].str)["n"].get<int>());
      ++total;
    }
  }
  EXPECT_EQ(total, 50);
  for (const auto& [key, ns] : byKey) EXPECT_TRUE(std::is_sorted(ns.begin(), ns.end())) << key << ": in the order given";
  // A line that is not KEY<TAB>DATA: refused, naming it.
  std::ofstream(dir + "/bad.tsv") << "a\t1\nno tab here\n";
  out = run_command(produce + dir + "/bad.tsv", &rc);
  EXPECT_EQ(rc, 1) << out;
  EXPECT_NE(out.find("line 2 is not KEY<TAB>DATA"), std::string::npos) << out;
  std::filesystem::remove_all(dir);
}

// A stream whose retention is maxLen N: producers write with XADD ... MAXLEN ~ N by themselves (the
// bound holds between the coordinator's trim rounds); --max-len overrides it.
TEST(Compat, TheProducerBoundsEachShardByTheStreamsMaxLenRetention) {
  RedisServer redis;
  auto args = kFast;
  args.insert(args.end(), {"--lag-interval-ms", "600000"});  // no trim round during the test: only the producer bounds the shards
  Coordinator coord(redis.port(), args);
  ASSERT_EQ(http_call(coord.port(), "PUT", "/coord/v1/streams/orders",
                      R"({"shardCount": 2, "retention": {"policy": "maxLen", "value": 50}})").status, 200);
  auto produce = [&](const std::string& extra) {
    int rc = 0;
    const auto out = run_command(std::string(RSC_PRODUCE_BIN) + " --redis 127.0.0.1:" + std::to_string(redis.port()) +
                                     " --stream orders --coordinator http://127.0.0.1:" + std::to_string(coord.port()) +
                                     " --group billing --count 2000 --key-space 100 " + extra,
                                 &rc);
    EXPECT_EQ(rc, 0) << out;
  };
  auto admin = redis.admin();
  auto xlen = [&](int s) { return admin.command({"XLEN", "orders:" + std::to_string(s)}).value->integer; };
  produce("");
  for (int s = 0; s < 2; ++s) {
    // "~": Redis trims whole nodes (100 entries by default), so a shard keeps 50 to about 150.
    EXPECT_GE(xlen(s), 50) << s;
    EXPECT_LE(xlen(s), 200) << "shard " << s << " of 2000 records bounded by the retention";
  }
  admin.command({"DEL", "orders:0", "orders:1"});
  ASSERT_EQ(http_call(coord.port(), "GET", "/coord/v1/streams/orders/groups/billing/producer-routing").status, 200);
  produce("--max-len 1000");
  EXPECT_GT(xlen(0) + xlen(1), 1500) << "--max-len 1000 overrides the retention's 50";
}

// Where a group's Redis consumer groups start: 0 by default (records produced before the group
// existed are read), $ for a group configured so (only new records); a bad setting is refused at
// start, naming it.
TEST(Compat, AGroupsConsumerGroupsStartWhereItIsConfigured) {
  RedisServer redis;
  char tmpl[] = "/tmp/rsc-cfg-XXXXXX";
  const std::string dir = mkdtemp(tmpl);
  {
    std::ofstream f(dir + "/rsc.json");
    f << R"({"groups": {"orders/live": {"consumerGroupStart": "$"}}})";
  }
  auto args = kFast;
  args.insert(args.end(), {"--config", dir + "/rsc.json"});
  Coordinator coord(redis.port(), args);
  auto admin = redis.admin();
  ASSERT_EQ(http_call(coord.port(), "POST", "/coord/v1/streams/orders", R"({"initialShardCount": 1})").status, 201);
  ASSERT_TRUE(admin.command({"XADD", "orders:0", "5-1", "key", "before"}).ok());
  for (const char* g : {"live", "billing"})
    expect_client_shape(http_call(coord.port(), "POST", hb_path("orders", g, "m1"), client_heartbeat("m1", 0, {}, 0).dump()),
                        "OK");
  auto lastDelivered = [&](const std::string& group) {
    auto r = admin.command({"XINFO", "GROUPS", "orders:0"});
    for (const auto& g : r.value->elements) {
      std::string name, last;
      for (std::size_t i = 0; i + 1 < g.elements.size(); i += 2) {
        if (g.elements[i].str == "name") name = g.elements[i + 1].str;
        if (g.elements[i].str == "last-delivered-id") last = g.elements[i + 1].str;
      }
      if (name == group) return last;
    }
    return std::string("none");
  };
  EXPECT_EQ(lastDelivered("billing"), "0-0") << "the default: from the start";
  EXPECT_EQ(lastDelivered("live"), "5-1") << "configured $: after what exists";
  {
    std::ofstream f(dir + "/bad.json");
    f << R"({"groups": {"orders/live": {"consumerGroupStart": "latest"}}})";
  }
  FILE* p = popen((std::string(RSC_COORDINATOR_BIN) + " --config " + dir + "/bad.json 2>&1").c_str(), "r");
  std::string out;
  char buf[512];
  while (fgets(buf, sizeof buf, p)) out += buf;
  EXPECT_EQ(WEXITSTATUS(pclose(p)), 2);
  EXPECT_NE(out.find("groups.orders/live.consumerGroupStart"), std::string::npos) << out;
  p = popen((std::string(RSC_COORDINATOR_BIN) + " --consumer-group-start latest 2>&1").c_str(), "r");
  out.clear();
  while (fgets(buf, sizeof buf, p)) out += buf;
  EXPECT_EQ(WEXITSTATUS(pclose(p)), 2);
  EXPECT_NE(out.find("--consumer-group-start"), std::string::npos) << out;
  std::filesystem::remove_all(dir);
}
