// Redis Cluster routing: addresses, MOVED/ASK refusals and the slot map, on
// answers built by hand and on a real two-node cluster of redis-server 7 on loopback.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "redis/client.hpp"
#include "redis/cluster.hpp"
#include "redis/keys.hpp"
#include "redis_cluster.hpp"
#include "redis_server.hpp"

using namespace rsc::store;
using namespace rsc::store::cluster;
using rsc::testing::LocalCluster;
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

// One table of error words answers three questions (redis/result.hpp), each from its own column.
TEST(ErrorReplies, RetryingStoreDownAndResendingAreThreeQuestionsOfOneTable) {
  for (const char* w : {"LOADING x", "BUSY x", "MASTERDOWN x", "TRYAGAIN x", "CLUSTERDOWN x"}) {
    EXPECT_TRUE(reply_error_passes(w)) << w;
    EXPECT_TRUE(reply_error_says_store_down(w)) << w;
  }
  for (const char* w : {"NOSCRIPT x", "READONLY x", "OOM x", "MOVED 1 a:1", "ASK 1 a:1"}) {
    EXPECT_TRUE(reply_error_passes(w)) << w;
    EXPECT_FALSE(reply_error_says_store_down(w)) << w;  // the store serves; this call must be redone
    EXPECT_FALSE(reply_error_resent_in_cluster(w)) << w;
  }
  EXPECT_TRUE(reply_error_resent_in_cluster("TRYAGAIN Multiple keys request during rehashing of slot"));
  EXPECT_TRUE(reply_error_resent_in_cluster("CLUSTERDOWN The cluster is down"));
  EXPECT_FALSE(reply_error_resent_in_cluster("LOADING Redis is loading"));
  for (const char* w : {"WRONGTYPE x", "ERR unknown command", "NOPERM x", "BUSYGROUP x", "LOADINGX", ""}) {
    EXPECT_FALSE(reply_error_passes(w)) << w;
    EXPECT_FALSE(reply_error_says_store_down(w)) << w;
    EXPECT_FALSE(reply_error_resent_in_cluster(w)) << w;
  }
  EXPECT_EQ(classify_reply_error("OOM command not allowed").kind, ErrorKind::Retryable);
  EXPECT_EQ(classify_reply_error("WRONGPASS invalid").kind, ErrorKind::Fatal);
}

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

TEST(ClusterRouting, EachCommandIsRoutedByTheKeyItNamesFirst) {
  EXPECT_EQ(routing_key({"GET", "a"}), "a");
  EXPECT_EQ(routing_key({"XADD", "{orders:3}", "*", "k", "v"}), "{orders:3}");
  EXPECT_EQ(routing_key({"EVALSHA", "sha", "2", "rsc:{o/g}:state", "rsc:{o/g}:lock", "arg"}), "rsc:{o/g}:state");
  EXPECT_FALSE(routing_key({"EVAL", "return 1", "0"})) << "no keys: any node";
  EXPECT_EQ(routing_key({"XREADGROUP", "GROUP", "g", "c", "COUNT", "10", "BLOCK", "5", "STREAMS", "s:1", "s:2", ">", ">"}),
            "s:1");
  EXPECT_EQ(routing_key({"xreadgroup", "group", "g", "c", "streams", "s:1", ">"}), "s:1") << "any case";
  EXPECT_EQ(routing_key({"XGROUP", "CREATE", "s:1", "g", "0", "MKSTREAM"}), "s:1");
  EXPECT_EQ(routing_key({"XINFO", "GROUPS", "s:1"}), "s:1");
  EXPECT_EQ(routing_key({"SPUBLISH", "rsc:{o/g}:changes", "m"}), "rsc:{o/g}:changes");
  for (const Command& keyless : std::vector<Command>{{"PING"}, {"SCRIPT", "LOAD", "return 1"}, {"INFO", "errorstats"},
                                                     {"CLUSTER", "SLOTS"}, {"FLUSHALL"}})
    EXPECT_FALSE(routing_key(keyless)) << keyless[0];
}

TEST(ClusterRouting, SeedListsAreReadAndSeveralMeanACluster) {
  RedisOptions o;
  EXPECT_EQ(set_redis_nodes(o, "10.0.0.1:7000"), "");
  EXPECT_FALSE(o.cluster);
  EXPECT_EQ(o.host, "10.0.0.1");
  EXPECT_EQ(o.port, 7000);
  EXPECT_EQ(set_redis_nodes(o, "10.0.0.1:7000,10.0.0.2:7001"), "");
  EXPECT_TRUE(o.cluster);
  EXPECT_EQ(o.seeds, (std::vector<std::string>{"10.0.0.1:7000", "10.0.0.2:7001"}));
  RedisOptions before = o;
  EXPECT_NE(set_redis_nodes(o, "10.0.0.1:7000,nonsense"), "");
  EXPECT_EQ(o.host, before.host) << "a bad list changes nothing";
  EXPECT_NE(set_redis_nodes(o, ""), "");
}

// Cluster mode against a Redis that is no cluster node: a clear, fatal error, not a retry loop.
TEST(ClusterClient, ClusterModeAgainstASingleRedisIsAClearFatalError) {
  RedisServer single;
  auto o = single.client_options();
  o.cluster = true;
  RedisClient c(o);
  auto r = c.command({"GET", "x"});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error.kind, ErrorKind::Fatal);
  EXPECT_NE(r.error.message.find("not a Redis Cluster node"), std::string::npos) << r.error.message;
}

namespace {
// One cluster of each kind, shared by the tests that leave it as they found it: plain TCP, and
// TLS-only (client connections and the cluster bus, mutual TLS).
LocalCluster& shared_cluster(bool tls) {
  if (tls) {
    static LocalCluster c(3, 1, "", true);
    return c;
  }
  static LocalCluster c(3, 1);
  return c;
}
std::vector<std::string> keys_over_all_slots(int n) {
  std::vector<std::string> out;
  for (int i = 0; i < n; ++i) out.push_back("key:" + std::to_string(i));
  return out;
}
}  // namespace

// The client's cluster tests, each run once over plain TCP and once over TLS.
class ClientOnCluster : public ::testing::TestWithParam<bool> {};
INSTANTIATE_TEST_SUITE_P(Transport, ClientOnCluster, ::testing::Values(false, true),
                         [](const ::testing::TestParamInfo<bool>& i) { return i.param ? "Tls" : "Plain"; });

// One pipeline over keys of every master: each command on its slot's master (a node asked for a
// key it does not serve would refuse), the replies in the order asked, one round trip per master.
TEST_P(ClientOnCluster, APipelineIsSplitPerMasterAndItsRepliesKeepTheirOrder) {
  auto& cl = shared_cluster(GetParam());
  cl.flush_all();
  RedisClient c(cl.client_options());
  const auto keys = keys_over_all_slots(300);
  std::vector<Command> sets, gets;
  for (std::size_t i = 0; i < keys.size(); ++i) {
    sets.push_back({"SET", keys[i], "v" + std::to_string(i)});
    gets.push_back({"GET", keys[i]});
  }
  for (const auto& r : c.pipeline(sets)) ASSERT_TRUE(r.ok() && !r.value->is_error()) << (r.ok() ? r.value->str : r.error.message);
  const auto tripsBefore = c.round_trips();
  auto got = c.pipeline(gets);
  ASSERT_EQ(got.size(), keys.size());
  for (std::size_t i = 0; i < keys.size(); ++i) {
    ASSERT_TRUE(got[i].ok()) << got[i].error.message;
    EXPECT_EQ(got[i].value->str, "v" + std::to_string(i)) << keys[i];
  }
  EXPECT_EQ(c.round_trips() - tripsBefore, 3) << "one pipeline per master";
  EXPECT_EQ(c.redirects(), 0);
  EXPECT_EQ(c.nodes().size(), 3u);
  // The keys really are spread: each master holds some, and they add up.
  long long total = 0;
  int holding = 0;
  for (std::size_t i = 0; i < cl.size(); ++i) {
    auto role = cl.node(i).command({"ROLE"});
    if (role.value->elements[0].str != "master") continue;
    const long long n = cl.node(i).command({"DBSIZE"}).value->integer;
    total += n;
    holding += n > 0;
  }
  EXPECT_EQ(total, 300);
  EXPECT_EQ(holding, 3);
}

// CLUSTER FAILOVER swaps a master and its replica: the client's map is stale, the old master
// answers MOVED, and the client follows it (and re-reads the map) without the caller seeing it.
TEST_P(ClientOnCluster, AFailoverIsFollowedThroughMovedAndNoAnswerIsLost) {
  auto& cl = shared_cluster(GetParam());
  cl.flush_all();
  RedisClient c(cl.client_options());
  const auto keys = keys_over_all_slots(100);
  for (const auto& k : keys) ASSERT_TRUE(c.command({"SET", k, k}).ok());
  const auto refreshes = c.map_refreshes();
  const std::size_t oldMaster = cl.master_of(keys[0]);
  const std::size_t replica = cl.replica_of(oldMaster);
  cl.failover(replica);
  EXPECT_EQ(cl.master_of(keys[0]), replica);
  std::vector<Command> gets;
  for (const auto& k : keys) gets.push_back({"GET", k});
  auto got = c.pipeline(gets);
  for (std::size_t i = 0; i < keys.size(); ++i) {
    ASSERT_TRUE(got[i].ok()) << got[i].error.message;
    ASSERT_FALSE(got[i].value->is_error()) << got[i].value->str;
    EXPECT_EQ(got[i].value->str, keys[i]);
  }
  EXPECT_GT(c.redirects(), 0) << "the old master said MOVED";
  EXPECT_GT(c.map_refreshes(), refreshes) << "and the map was read again";
  cl.failover(oldMaster);  // back as it was, for the tests after this one
}

// A slot half-way through a migration: a key the source no longer holds is asked of the target
// (ASK), once, preceded by ASKING; the map is not changed by it.
TEST_P(ClientOnCluster, AskDuringAMigrationIsFollowedOnceToTheImportingNode) {
  auto& cl = shared_cluster(GetParam());
  cl.flush_all();
  RedisClient c(cl.client_options());
  const std::string key = "migrating-key";
  const std::size_t from = cl.master_of(key);
  const std::size_t to = cl.master_of("key:0") != from ? cl.master_of("key:0") : cl.master_of("key:1");
  ASSERT_NE(from, to);
  const std::string slot = std::to_string(key_slot(key));
  const std::string idFrom = cl.node(from).command({"CLUSTER", "MYID"}).value->str;
  const std::string idTo = cl.node(to).command({"CLUSTER", "MYID"}).value->str;
  ASSERT_TRUE(cl.node(to).command({"CLUSTER", "SETSLOT", slot, "IMPORTING", idFrom}).ok());
  ASSERT_TRUE(cl.node(from).command({"CLUSTER", "SETSLOT", slot, "MIGRATING", idTo}).ok());
  auto w = c.command({"SET", key, "on-the-target"});
  ASSERT_TRUE(w.ok() && !w.value->is_error()) << (w.ok() ? w.value->str : w.error.message);
  EXPECT_EQ(c.redirects(), 1) << "one ASK";
  auto onTarget = cl.node(to).pipeline({{"ASKING"}, {"GET", key}});
  EXPECT_EQ(onTarget[1].value->str, "on-the-target") << "written where ASK pointed";
  EXPECT_EQ(cl.node(from).command({"EXISTS", key}).value->integer, 0);
  // Finish the migration (the slot is the target's now) and the client follows the MOVED.
  for (std::size_t i = 0; i < cl.size(); ++i) cl.node(i).command({"CLUSTER", "SETSLOT", slot, "NODE", idTo});
  cl.wait_state_ok();
  auto r = c.command({"GET", key});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r.value->str, "on-the-target");
  // And back, to leave the cluster as the other tests expect it.
  c.command({"DEL", key});
  for (std::size_t i = 0; i < cl.size(); ++i) cl.node(i).command({"CLUSTER", "SETSLOT", slot, "NODE", idFrom});
  cl.wait_state_ok();
}

// SIGKILL of a master: its slots fail (retryably: never re-sent, the command may have run) until
// the cluster promotes its replica; then the same client reaches the new master by itself.
TEST_P(ClientOnCluster, AKilledMasterFailsRetryablyUntilItsReplicaIsPromoted) {
  LocalCluster cl(3, 1, "", GetParam());  // its own: this one loses a node
  RedisClient c(cl.client_options());
  const std::string key = "key:7";
  const std::size_t master = cl.master_of(key);
  // WAIT counts the replicas that acknowledged this connection's own writes: the SET and the WAIT
  // go on one connection (a WAIT on a fresh connection returns at once, whatever the replica has).
  auto written = cl.node(master).pipeline({{"SET", key, "before"}, {"WAIT", "1", "5000"}});
  ASSERT_TRUE(written[0].ok() && !written[0].value->is_error());
  ASSERT_TRUE(written[1].ok());
  ASSERT_EQ(written[1].value->integer, 1) << "the replica has it";
  const std::size_t replica = cl.replica_of(master);
  cl.kill(master);
  int failures = 0;
  std::string lastError;
  bool back = false;
  for (int i = 0; i < 300 && !back; ++i) {  // at most 30 s; the node timeout is 1 s (3 s over TLS)
    auto r = c.command({"GET", key});
    if (r.ok() && !r.value->is_error()) {
      EXPECT_EQ(r.value->str, "before") << "reply type " << static_cast<int>(r.value->type) << "; the cluster now:\n"
                                        << cl.describe();
      back = true;
    } else {
      ++failures;
      lastError = r.ok() ? r.value->str : r.error.message;
      if (!r.ok()) {
        EXPECT_EQ(r.error.kind, ErrorKind::Retryable) << r.error.message;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }
  ASSERT_TRUE(back) << "never served again; last: " << lastError;
  EXPECT_GT(failures, 0) << "the kill was seen";
  EXPECT_EQ(cl.master_of(key), replica) << "the replica was promoted";
}

// The test cluster's own handling of a redis-server that dies by itself (not by the test's kill):
// left down until its replica took its slots, then started again; it rejoins as a replica and no
// acknowledged write is lost. The end-to-end tests rely on it when Redis crashes under them.
TEST(HarnessOnCluster, ANodeThatExitsOnItsOwnRejoinsAsAReplicaOnceItsSlotsAreServed) {
  LocalCluster cl(3, 1);
  const std::string key = "key:11";
  const std::size_t master = cl.master_of(key);
  auto written = cl.node(master).pipeline({{"SET", key, "kept"}, {"WAIT", "1", "5000"}});
  ASSERT_TRUE(written[1].ok());
  ASSERT_EQ(written[1].value->integer, 1) << "the replica has it";
  const std::size_t replica = cl.replica_of(master);
  cl.node(master).command({"SHUTDOWN", "NOSAVE"});  // exits by itself: the harness did not kill it
  for (int i = 0; i < 100 && cl.node(master).command({"PING"}).ok(); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(cl.wait_master_of(key), replica) << "its replica serves the slot";
  EXPECT_EQ(cl.crashes(), 1);
  ASSERT_TRUE(cl.server(master).running()) << "started again";
  bool rejoined = false;
  for (int i = 0; i < 200 && !rejoined; ++i) {
    auto role = cl.node(master).command({"ROLE"});
    rejoined = role.ok() && role.value->elements.size() >= 4 && role.value->elements[0].str == "slave" &&
               role.value->elements[2].integer == cl.server(replica).port() && role.value->elements[3].str == "connected";
    if (!rejoined) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_TRUE(rejoined) << "a synced replica of the promoted node; the cluster now:\n" << cl.describe();
  auto got = cl.node(replica).command({"GET", key});
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got.value->str, "kept");
}

// The check the store's contract tests make on a cluster (no command spans two slots) can fail:
// a command that does is refused by the master and counted.
TEST_P(ClientOnCluster, ACommandSpanningTwoSlotsIsRefusedAndCounted) {
  auto& cl = shared_cluster(GetParam());
  RedisClient c(cl.client_options());
  const auto before = cl.crossslot_errors();
  ASSERT_NE(key_slot("key:1"), key_slot("key:2"));
  auto r = c.command({"MGET", "key:1", "key:2"});
  ASSERT_TRUE(r.ok());
  ASSERT_TRUE(r.value->is_error());
  EXPECT_EQ(r.value->str.rfind("CROSSSLOT", 0), 0u) << r.value->str;
  EXPECT_EQ(cl.crossslot_errors(), before + 1);
}

// AUTH (password, or ACL user and password) goes to every node the client connects to.
TEST_P(ClientOnCluster, EveryNodeConnectionAuthenticatesAsTheDefaultOrAnAclUser) {
  LocalCluster cl(3, 0, "s3cret-pass", GetParam());
  auto o = cl.client_options();
  RedisClient byPassword(o);
  std::vector<Command> sets;
  for (const auto& k : keys_over_all_slots(50)) sets.push_back({"SET", k, "x"});
  for (const auto& r : byPassword.pipeline(sets)) ASSERT_TRUE(r.ok() && !r.value->is_error()) << (r.ok() ? r.value->str : r.error.message);
  EXPECT_EQ(byPassword.nodes().size(), 3u);
  o.user = "rsc";
  RedisClient byUser(o);
  auto who = byUser.pipeline({{"GET", "key:1"}, {"GET", "key:2"}, {"GET", "key:3"}});
  for (const auto& r : who) EXPECT_TRUE(r.ok() && r.value->str == "x");
  o.password = "wrong";
  RedisClient wrong(o);
  auto r = wrong.command({"GET", "key:1"});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error.kind, ErrorKind::Fatal) << r.error.message;
  EXPECT_NE(r.error.message.find("AUTH"), std::string::npos) << r.error.message;
}

// TRYAGAIN (a multi-key command while its slot migrates and its keys are split) is re-sent with
// backoff for the retry budget, then given to the caller; once the migration ends, the re-sent
// command follows the MOVED and succeeds.
TEST_P(ClientOnCluster, TryAgainIsRetriedWithBackoffWithinTheBudgetThenAnswered) {
  auto& cl = shared_cluster(GetParam());
  cl.flush_all();
  const std::string a = "{tag}a", b = "{tag}b";
  const std::size_t from = cl.master_of(a);
  const std::size_t to = cl.master_of("key:0") != from ? cl.master_of("key:0") : cl.master_of("key:1");
  const std::string slot = std::to_string(key_slot(a));
  const std::string idFrom = cl.node(from).command({"CLUSTER", "MYID"}).value->str;
  const std::string idTo = cl.node(to).command({"CLUSTER", "MYID"}).value->str;
  auto o = cl.client_options();
  o.clusterRetryBudgetMs = 300;
  RedisClient c(o);
  ASSERT_TRUE(c.command({"SET", b, "B"}).ok());
  ASSERT_TRUE(cl.node(to).command({"CLUSTER", "SETSLOT", slot, "IMPORTING", idFrom}).ok());
  ASSERT_TRUE(cl.node(from).command({"CLUSTER", "SETSLOT", slot, "MIGRATING", idTo}).ok());
  // b is still on the source, a nowhere: the source cannot answer MGET a b whole.
  auto t0 = std::chrono::steady_clock::now();
  auto r = c.command({"MGET", a, b});
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_TRUE(r.ok()) << r.error.message;
  ASSERT_TRUE(r.value->is_error());
  EXPECT_EQ(r.value->str.rfind("TRYAGAIN", 0), 0u) << r.value->str;
  EXPECT_GE(ms, 300) << "retried for the budget";
  EXPECT_LT(ms, 1500);
  EXPECT_EQ(classify_reply_error(r.value->str).kind, ErrorKind::Retryable);
  // The migration ends while the client retries: b moves, the slot is the target's.
  o.clusterRetryBudgetMs = 5000;
  RedisClient patient(o);
  std::thread finish([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    cl.node(from).command({"MIGRATE", "127.0.0.1", std::to_string(cl.server(to).port()), "", "0", "5000", "KEYS", b});
    for (std::size_t i = 0; i < cl.size(); ++i) cl.node(i).command({"CLUSTER", "SETSLOT", slot, "NODE", idTo});
  });
  r = patient.command({"MGET", a, b});
  finish.join();
  ASSERT_TRUE(r.ok()) << r.error.message;
  ASSERT_FALSE(r.value->is_error()) << r.value->str;
  ASSERT_EQ(r.value->elements.size(), 2u);
  EXPECT_TRUE(r.value->elements[0].is_nil());
  EXPECT_EQ(r.value->elements[1].str, "B");
  // Back as it was.
  patient.command({"DEL", b});
  for (std::size_t i = 0; i < cl.size(); ++i) cl.node(i).command({"CLUSTER", "SETSLOT", slot, "NODE", idFrom});
  cl.wait_state_ok();
}
