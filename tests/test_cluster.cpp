// Redis Cluster routing (issue 14, first step): addresses, MOVED/ASK refusals and the slot map, on
// answers built by hand and on a real two-node cluster of redis-server 7 on loopback.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "redis/cluster.hpp"
#include "redis/keys.hpp"
#include "redis_server.hpp"

using namespace rsc::store;
using namespace rsc::store::cluster;
using rsc::testing::RedisServer;

namespace {

Value integer(long long v) {
  Value x;
  x.type = Value::Type::Integer;
  x.integer = v;
  return x;
}
Value string(const std::string& s) {
  Value x;
  x.type = Value::Type::String;
  x.str = s;
  return x;
}
Value array(std::vector<Value> xs) {
  Value x;
  x.type = Value::Type::Array;
  x.elements = std::move(xs);
  return x;
}
Value range(long long from, long long to, const std::string& host, long long port) {
  return array({integer(from), integer(to), array({string(host), integer(port), string("id")})});
}

// A key whose slot is in [from, to].
std::string key_in(int from, int to) {
  for (int i = 0;; ++i) {
    const std::string k = "k" + std::to_string(i);
    const int s = key_slot(k);
    if (s >= from && s <= to) return k;
  }
}

}  // namespace

TEST(ClusterRouting, AddressesAndRedirectsAreReadAsRedisPrintsThem) {
  EXPECT_EQ(parse_node("127.0.0.1:7001", "h"), (Node{"127.0.0.1", 7001}));
  EXPECT_EQ(parse_node("::1:7001", "h"), (Node{"::1", 7001})) << "IPv6: the port follows the last colon";
  EXPECT_EQ(parse_node(":7001", "10.0.0.5"), (Node{"10.0.0.5", 7001})) << "a node that does not know its address";
  EXPECT_FALSE(parse_node("127.0.0.1", "h"));
  EXPECT_FALSE(parse_node("127.0.0.1:0", "h"));
  EXPECT_FALSE(parse_node("127.0.0.1:99999", "h"));

  auto moved = parse_redirect("MOVED 3999 127.0.0.1:6381", "h");
  ASSERT_TRUE(moved);
  EXPECT_EQ(moved->kind, Redirect::Kind::Moved);
  EXPECT_EQ(moved->slot, 3999);
  EXPECT_EQ(moved->node, (Node{"127.0.0.1", 6381}));
  auto ask = parse_redirect("ASK 12182 :6382", "10.0.0.5");
  ASSERT_TRUE(ask);
  EXPECT_EQ(ask->kind, Redirect::Kind::Ask);
  EXPECT_EQ(ask->node, (Node{"10.0.0.5", 6382}));
  for (const char* no : {"ERR unknown command", "MOVED", "MOVED x 127.0.0.1:1", "MOVED 16384 127.0.0.1:1",
                         "ASK 1 nowhere", "TRYAGAIN Multiple keys request during rehashing of slot"})
    EXPECT_FALSE(parse_redirect(no, "h")) << no;
}

TEST(ClusterRouting, TheSlotMapRoutesEveryKeyAndFollowsAMove) {
  auto m = SlotMap::from_cluster_slots(
      array({range(0, 5460, "127.0.0.1", 7001), range(5461, 10922, "127.0.0.1", 7002), range(10923, 16383, "", 7003)}),
      "10.0.0.9");
  ASSERT_TRUE(m.ok()) << m.error.message;
  const SlotMap& map = *m.value;
  EXPECT_EQ(map.nodes().size(), 3u);
  EXPECT_EQ(map.node_for_slot(0).port, 7001);
  EXPECT_EQ(map.node_for_slot(5461).port, 7002);
  EXPECT_EQ(map.node_for_slot(16383), (Node{"10.0.0.9", 7003})) << "an empty host is the answering node's";
  // Keys with one hash tag share a slot, hence a node.
  EXPECT_EQ(&map.node_for_key("rsc:{orders/billing}:state"), &map.node_for_key("rsc:{orders/billing}:lock"));
  // Batches per node keep the order of the keys and say where each came from.
  const std::vector<std::string> keys{key_in(0, 5460), key_in(5461, 10922), key_in(0, 5460) + "x", key_in(10923, 16383)};
  auto batches = group_by_node(map, keys);
  std::size_t total = 0;
  for (const auto& b : batches) {
    for (std::size_t i = 0; i < b.positions.size(); ++i) {
      EXPECT_EQ(map.node_for_key(keys[b.positions[i]]), b.node);
      if (i > 0) {
        EXPECT_LT(b.positions[i - 1], b.positions[i]);
      }
    }
    total += b.positions.size();
  }
  EXPECT_EQ(total, keys.size());
  EXPECT_GE(batches.size(), 3u);
  // A MOVED for one slot moves that slot only.
  SlotMap copy = map;
  copy.moved(*parse_redirect("MOVED 42 127.0.0.1:7004", "h"));
  EXPECT_EQ(copy.node_for_slot(42).port, 7004);
  EXPECT_EQ(copy.node_for_slot(43).port, 7001);
  copy.moved(*parse_redirect("ASK 44 127.0.0.1:7004", "h"));
  EXPECT_EQ(copy.node_for_slot(44).port, 7001) << "an ASK is for one command, not the map";
}

TEST(ClusterRouting, AnAnswerThatLeavesSlotsUnservedOrIsMalformedIsAClearRetryableError) {
  auto gap = SlotMap::from_cluster_slots(array({range(0, 100, "127.0.0.1", 7001), range(102, 16383, "127.0.0.1", 7002)}), "h");
  ASSERT_FALSE(gap.ok());
  EXPECT_EQ(gap.error.kind, ErrorKind::Retryable);
  EXPECT_NE(gap.error.message.find("slot 101 is served by no node"), std::string::npos) << gap.error.message;
  auto outside = SlotMap::from_cluster_slots(array({range(0, 16384, "127.0.0.1", 7001)}), "h");
  EXPECT_NE(outside.error.message.find("outside 0-16383"), std::string::npos) << outside.error.message;
  auto junk = SlotMap::from_cluster_slots(array({array({integer(0), integer(16383), string("x")})}), "h");
  EXPECT_NE(junk.error.message.find("master is not"), std::string::npos) << junk.error.message;
  Value err;
  err.type = Value::Type::Error;
  err.str = "ERR This instance has cluster support disabled";
  auto single = SlotMap::from_cluster_slots(err, "h");
  EXPECT_NE(single.error.message.find("cluster support disabled"), std::string::npos);
}

// A real cluster of two masters: the map read from CLUSTER SLOTS routes keys to the node that
// serves them, and the refusals a node gives for a key it does not serve (MOVED) or is migrating
// away (ASK) are read as what they ask for.
TEST(ClusterRouting, OnARealTwoNodeClusterTheMapAndTheRedirectsAgreeWithRedis) {
  RedisServer::Options o;
  o.cluster = true;
  RedisServer a(o), b(o);
  auto ca = a.admin(), cb = b.admin();
  ASSERT_TRUE(ca.command({"CLUSTER", "ADDSLOTSRANGE", "0", "8191"}).ok());
  ASSERT_TRUE(cb.command({"CLUSTER", "ADDSLOTSRANGE", "8192", "16383"}).ok());
  auto meet = ca.command({"CLUSTER", "MEET", "127.0.0.1", std::to_string(b.port()), std::to_string(b.bus_port())});
  ASSERT_TRUE(meet.ok() && !meet.value->is_error()) << (meet.ok() ? meet.value->str : meet.error.message);
  std::optional<SlotMap> map;
  std::string last;
  auto state_ok = [](RedisConnection& c) {
    auto info = c.command({"CLUSTER", "INFO"});
    return info.ok() && info.value->str.find("cluster_state:ok") != std::string::npos;
  };
  for (int i = 0; i < 200 && !map; ++i) {  // the nodes learn of each other within a few gossip rounds
    auto r = ca.command({"CLUSTER", "SLOTS"});
    ASSERT_TRUE(r.ok()) << r.error.message;
    auto m = SlotMap::from_cluster_slots(*r.value, "127.0.0.1");
    if (m.ok() && !(state_ok(ca) && state_ok(cb))) m = Result<SlotMap>::failure(ErrorKind::Retryable, "cluster_state not ok yet");
    if (m.ok()) {
      map = std::move(*m.value);
    } else {
      last = m.error.message;
    }
    if (!map) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_TRUE(map) << "the two nodes never agreed within 10 s: " << last;
  EXPECT_EQ(map->node_for_slot(0), (Node{"127.0.0.1", a.port()}));
  EXPECT_EQ(map->node_for_slot(16383), (Node{"127.0.0.1", b.port()}));

  // MOVED: a key of b's, asked of a.
  const std::string onB = key_in(8192, 16383);
  auto r = ca.command({"GET", onB});
  ASSERT_TRUE(r.ok());
  ASSERT_TRUE(r.value->is_error()) << "a does not serve " << onB;
  auto moved = parse_redirect(r.value->str, "127.0.0.1");
  ASSERT_TRUE(moved) << r.value->str;
  EXPECT_EQ(moved->kind, Redirect::Kind::Moved);
  EXPECT_EQ(moved->slot, key_slot(onB));
  EXPECT_EQ(moved->node, map->node_for_key(onB));

  // ASK: a slot of a's migrating to b; a key a does not hold is asked of b.
  const std::string onA = key_in(0, 8191);
  const std::string slot = std::to_string(key_slot(onA));
  const std::string idA = ca.command({"CLUSTER", "MYID"}).value->str, idB = cb.command({"CLUSTER", "MYID"}).value->str;
  ASSERT_TRUE(cb.command({"CLUSTER", "SETSLOT", slot, "IMPORTING", idA}).ok());
  ASSERT_TRUE(ca.command({"CLUSTER", "SETSLOT", slot, "MIGRATING", idB}).ok());
  r = ca.command({"GET", onA});
  ASSERT_TRUE(r.ok());
  ASSERT_TRUE(r.value->is_error()) << r.value->str;
  auto ask = parse_redirect(r.value->str, "127.0.0.1");
  ASSERT_TRUE(ask) << r.value->str;
  EXPECT_EQ(ask->kind, Redirect::Kind::Ask);
  EXPECT_EQ(ask->slot, key_slot(onA));
  EXPECT_EQ(ask->node, (Node{"127.0.0.1", b.port()}));
  // b answers it after ASKING (on one connection, as the client will do).
  auto asked = cb.pipeline({{"ASKING"}, {"GET", onA}});
  ASSERT_EQ(asked.size(), 2u);
  ASSERT_TRUE(asked[1].ok());
  EXPECT_TRUE(asked[1].value->is_nil()) << asked[1].value->str;
}
