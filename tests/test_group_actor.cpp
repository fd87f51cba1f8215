// The group actor under CAF's deterministic test scheduler with the in-memory store: a fake
// clock drives both the core's `now` and the actor timers, so no test sleeps.
#include <gtest/gtest.h>

#include "group/time_rules.hpp"

#include <nlohmann/json.hpp>

#include <caf/all.hpp>

#include "actors/actors.hpp"
#include "actors/store_watch.hpp"
#include "group_harness.hpp"
#include "log/log.hpp"
#include "group/coordinator.hpp"
#include "redis/memory_store.hpp"

using namespace rsc;
using namespace rsc::actors;
using protocol::HeartbeatStatus;

namespace {

const store::GroupKey kKey{"orders", "billing"};

class GroupActorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    log::set_enabled(false);
    cfg_.set("scheduler.policy", caf::atom("testing"));
    cfg_.set("scheduler.max-throughput", size_t{1});  // one message per step, for run_once()
    cfg_.set("logger.file-verbosity", caf::atom("quiet"));
    cfg_.set("logger.console-verbosity", caf::atom("quiet"));
    sys_ = std::make_unique<caf::actor_system>(cfg_);
    sched_ = &dynamic_cast<caf::scheduler::test_coordinator&>(sys_->scheduler());
    mem_ = std::make_shared<store::MemoryStore>([this] { return now_; });
    store_ = spawn_store_actor(*sys_, mem_, /*detached=*/false, [this] { return now_; });
    auto first = pod_config("pod-1");
    pod1_ = first.pod;
    group_ = spawn(first);
    run();
  }

  void TearDown() override {
    for (auto& a : actors_) caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
    caf::anon_send_exit(store_, caf::exit_reason::user_shutdown);
    run();
    sys_.reset();
    log::set_enabled(true);
  }

  // A pod: its own context on the store's clock (the fake one: offset 0), started now.
  GroupActorConfig pod_config(const std::string& token, bool waitUntilWritable = true) {
    PodContext::Options po;
    po.podId = token;
    po.localClock = [this] { return now_; };
    po.log = false;
    po.podLeaseMs = 300;  // as the pod actor's below
    auto ctx = std::make_shared<PodContext>(po);
    ctx->clock_sample(now_, now_, now_);
    mem_->add_observer(ctx);
    GroupActorConfig g;
    g.core.heartbeatIntervalMs = 100;
    g.core.memberLeaseTtlMs = 1000;
    g.core.rebalanceTimeoutMs = 500;
    g.mutexTtlMs = 300;
    g.defaultShardCount = 6;
    g.storeDeadlineMs = 1000;
    g.retireAfterMs = 0;
    g.pod = ctx;
    g.podToken = token;
    g.metrics = metrics_;
    // Registered in the pod registry, as every pod is (its beats keep it there); a pod registered
    // among others writes nothing for its first pod lease (group/pod_authority.hpp).
    PodActorConfig pc;
    pc.beatMs = 100;
    pc.podLeaseMs = 300;
    pc.onDue = [](const store::GroupKey&) {};
    actors_.push_back(spawn_pod_actor(*sys_, mem_, ctx, pc, /*detached=*/false));
    run();
    if (!waitUntilWritable) return g;
    for (int i = 0; i < 10 && !ctx->pod_view()->may_write(now_); ++i) advance(100);
    EXPECT_TRUE(ctx->pod_view()->may_write(now_)) << token << " registered";
    return g;
  }

  // The group actor of a pod, with the pod actor that starts its deadline work (beats every 100 ms).
  caf::actor spawn(GroupActorConfig g, caf::actor gateway = {}) {
    auto a = spawn_group_actor(*sys_, kKey, g, store_, gateway);
    actors_.push_back(a);
    PodActorConfig pc;
    pc.beatMs = 100;
    pc.podLeaseMs = 300;
    pc.onDue = [a](const store::GroupKey&) { caf::anon_send(a, due_atom::value); };
    actors_.push_back(spawn_pod_actor(*sys_, mem_, g.pod, pc, /*detached=*/false));
    return a;
  }

  void run() { sched_->run(); }

  // A pod id that wins (or loses) kKey against pod-1: the group's owner among the two
  // (group/pod_authority.hpp).
  static std::string pod_id_that(bool winsOverPod1) {
    const auto w1 = group::rendezvous_weight("pod-1", kKey.str());
    for (int i = 2;; ++i) {
      const auto id = "pod-" + std::to_string(i);
      if ((group::rendezvous_weight(id, kKey.str()) > w1) == winsOverPod1) return id;
    }
  }

  // A pod with coarse lease renewal (300 ms of slack) and member a joined and settled on it.
  struct SteadyPod {
    GroupActorConfig cfg;
    caf::actor actor;
    protocol::HeartbeatResponse a;
  };
  SteadyPod steady_pod_with_member_a() {
    SteadyPod p{pod_config("pod-1"), {}, {}};
    p.cfg.core.leaseRenewalSlackMs = 300;
    p.actor = spawn(p.cfg);
    p.a = hb(request("a", 0), &p.actor);
    const auto shards = [](const protocol::HeartbeatResponse& r) {
      return r.assignment ? r.assignment->assignedShards : std::vector<int32_t>{};
    };
    p.a = hb(request("a", p.a.memberEpoch, shards(p.a)), &p.actor);
    EXPECT_EQ(p.a.status, HeartbeatStatus::OK);
    EXPECT_EQ(shards(p.a).size(), 6u);
    return p;
  }

  // Stops a pod's actors (its pod actors leave the registry).
  void stop_pod(const std::vector<caf::actor>& actors) {
    for (const auto& a : actors) caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
    run();
  }

  // The pod's beat, run now (as its pod actor does every 100 ms).
  void beat_now(const std::shared_ptr<PodContext>& ctx) {
    auto b = mem_->pod_beat(ctx->pod_id(), 300, 0);
    ASSERT_TRUE(b.ok());
    std::vector<group::PodSeen> seen;
    for (std::size_t i = 0; i < b.value->livePods.size(); ++i) seen.push_back({b.value->livePods[i], b.value->since[i]});
    ctx->registry_seen(now_, now_, b.value->storeTimeMs, seen);
  }

  // Moves the fake clock and the actor timers forward one tick at a time.
  void advance(group::Millis ms) {
    for (group::Millis done = 0; done < ms; done += 100) {
      const auto step = std::min<group::Millis>(100, ms - done);
      now_ += step;
      sched_->clock().advance_time(std::chrono::milliseconds(step));
      run();
    }
  }

  protocol::HeartbeatRequest request(const std::string& id, int32_t epoch, std::vector<int32_t> owned = {}) {
    protocol::HeartbeatRequest q;
    q.requestId = id + "-" + std::to_string(++seq_);
    q.memberId = id;
    q.memberEpoch = epoch;
    q.metadataVersion = 1;
    for (auto s : owned) q.ownedShards.push_back({s, protocol::ShardAssignmentState::OWNED});
    return q;
  }

  // Sends without running the scheduler; the answer lands in *out.
  void post(const caf::actor& to, protocol::HeartbeatRequest q, std::shared_ptr<std::optional<protocol::HeartbeatResponse>> out) {
    caf::anon_send(to, hb_atom::value, HeartbeatCall{std::move(q), [out](protocol::HeartbeatResponse r) { *out = std::move(r); }});
  }

  protocol::HeartbeatResponse hb(protocol::HeartbeatRequest q, const caf::actor* to = nullptr) {
    auto out = std::make_shared<std::optional<protocol::HeartbeatResponse>>();
    post(to ? *to : group_, std::move(q), out);
    run();
    EXPECT_TRUE(out->has_value()) << "no answer";
    return out->value_or(protocol::HeartbeatResponse{});
  }

  group::GroupState stored() { return stored_of(kKey); }
  group::GroupState stored_of(const store::GroupKey& k) {
    auto l = mem_->load(k);
    EXPECT_TRUE(l.ok());
    return l.value->state;
  }

  caf::actor_system_config cfg_;
  std::unique_ptr<caf::actor_system> sys_;
  caf::scheduler::test_coordinator* sched_ = nullptr;
  group::Millis now_ = 1'000'000;
  std::shared_ptr<store::MemoryStore> mem_;
  std::shared_ptr<Metrics> metrics_ = std::make_shared<Metrics>();
  caf::actor store_, group_;
  std::shared_ptr<PodContext> pod1_;
  std::vector<caf::actor> actors_;
  int seq_ = 0;
};

std::vector<int32_t> assigned(const protocol::HeartbeatResponse& r) {
  return r.assignment ? r.assignment->assignedShards : std::vector<int32_t>{};
}

}  // namespace

TEST_F(GroupActorTest, AJoinIsAnsweredOnceItsWriteIsStored) {
  auto r = hb(request("a", 0));
  EXPECT_EQ(r.status, HeartbeatStatus::OK);
  EXPECT_EQ(assigned(r).size(), 6u) << "the stream was created with the default shard count";
  auto s = stored();
  ASSERT_TRUE(s.members.count("a"));
  EXPECT_EQ(s.members.at("a").epoch, r.memberEpoch);
  EXPECT_EQ(s.shardCount, 6);
  EXPECT_TRUE(mem_->get_stream("orders").value->has_value());
}

TEST_F(GroupActorTest, AStoreThatCannotBeReachedGetsRetryAndNothingIsStored) {
  mem_->set_unreachable(true);
  auto r = hb(request("a", 0));
  EXPECT_EQ(r.status, HeartbeatStatus::RETRY);
  EXPECT_NE(r.message->find("unavailable"), std::string::npos);
  mem_->set_unreachable(false);
  EXPECT_FALSE(mem_->load(kKey).value->exists);
  EXPECT_EQ(hb(request("a", 0)).status, HeartbeatStatus::OK) << "recovers by itself";
}

TEST_F(GroupActorTest, AnOutageSeenByThePodCoversGroupsThatMadeNoCallDuringIt) {
  // Two groups on one pod; only the first one's member heartbeats during the outage.
  const store::GroupKey other{"orders", "audit"};
  auto cfg = pod_config("pod-1b");
  auto quiet = spawn_group_actor(*sys_, other, cfg, store_);
  actors_.push_back(quiet);
  PodActorConfig pc;
  pc.beatMs = 100;
  pc.podLeaseMs = 300;
  pc.onDue = [quiet, g = group_](const store::GroupKey& k) { caf::anon_send(k == kKey ? g : quiet, due_atom::value); };
  actors_.push_back(spawn_pod_actor(*sys_, mem_, cfg.pod, pc, false));
  advance(1100);  // past both pods' first lease
  auto q = hb(request("q", 0), &quiet);
  ASSERT_EQ(q.status, HeartbeatStatus::OK);
  advance(500);
  mem_->set_unreachable(true);
  advance(3000);  // the pod's beats fail: the pod knows the store is down
  mem_->set_unreachable(false);
  advance(200);  // the first good reply ends the outage; q's deadline work absorbs it
  EXPECT_NE(stored_of(other).members.at("q").state, protocol::MemberLifecycleState::EXPIRED)
      << "q's group made no call during the outage, yet the time did not count against q";
  EXPECT_EQ(hb(request("q", q.memberEpoch, assigned(q)), &quiet).status, HeartbeatStatus::OK);
  advance(1200);
  EXPECT_EQ(stored_of(other).members.at("q").state, protocol::MemberLifecycleState::EXPIRED)
      << "after the outage, a silent member expires as usual";
}

TEST_F(GroupActorTest, AJoinPutsTheGroupInTheDeadlineIndexAndAnEmptyGroupLeavesIt) {
  EXPECT_TRUE(mem_->deadlines().empty());
  auto a = hb(request("a", 0));
  auto due = mem_->deadlines();
  ASSERT_EQ(due.count(kKey.str()), 1u);
  EXPECT_EQ(due.at(kKey.str()), stored().members.at("a").lastHeartbeatMs + 1001) << "the lease's end, in the same write";
  advance(1200);  // a expires
  EXPECT_EQ(stored().members.at("a").state, protocol::MemberLifecycleState::EXPIRED);
  EXPECT_EQ(mem_->deadlines().at(kKey.str()), stored().members.at("a").tombstoneUntilMs) << "next: the tombstone";
  advance(1100);  // the tombstone goes: nothing is ever due
  EXPECT_TRUE(stored().members.empty());
  EXPECT_FALSE(mem_->deadlines().count(kKey.str())) << "a group at rest costs the pod nothing";
  (void)a;
}

TEST_F(GroupActorTest, AnIdleGroupRetiresFromMemoryAndComesBackWithItsState) {
  auto cfg = pod_config("pod-r");
  cfg.retireAfterMs = 700;  // shorter than the 1000 ms lease: idle, yet nobody expires
  auto gw = spawn_gateway(*sys_, cfg, store_);
  actors_.push_back(gw);
  auto via = [&](protocol::HeartbeatRequest q) {
    auto out = std::make_shared<std::optional<protocol::HeartbeatResponse>>();
    caf::anon_send(gw, hb_atom::value, kKey, HeartbeatCall{std::move(q), [out](auto r) { *out = std::move(r); }});
    run();
    EXPECT_TRUE(out->has_value());
    return out->value_or(protocol::HeartbeatResponse{});
  };
  auto a = via(request("a", 0));
  a = via(request("a", a.memberEpoch, assigned(a)));
  ASSERT_EQ(a.status, HeartbeatStatus::OK);
  EXPECT_NE(metrics_->text().find("rsc_groups 1"), std::string::npos);
  for (int i = 0; i < 5; ++i) {  // busy for 2 s: not retired
    advance(400);
    a = via(request("a", a.memberEpoch, assigned(a)));
  }
  EXPECT_NE(metrics_->text().find("rsc_groups_retired_total 0"), std::string::npos);
  advance(800);  // idle
  EXPECT_NE(metrics_->text().find("rsc_groups 0"), std::string::npos) << metrics_->text();
  EXPECT_NE(metrics_->text().find("rsc_groups_retired_total 1"), std::string::npos);
  EXPECT_EQ(metrics_->text().find("rsc_group_epoch{"), std::string::npos) << "its gauges left /metrics too";
  auto back = via(request("a", a.memberEpoch, assigned(a)));
  EXPECT_EQ(back.status, HeartbeatStatus::OK) << "loaded again, with its state: " << back.message.value_or("");
  EXPECT_EQ(back.memberEpoch, a.memberEpoch);
}

// Retirement is a handshake. The gateway has forgotten a retiring actor, but that actor
// may still hold calls in its mailbox (sent to it through the directory before it was forgotten)
// and answer them from its copy: no second actor for the group may start, and write, before the
// first is gone. Here the first gets a heartbeat in its mailbox, the gateway then handles its
// retirement and a join for the same group: that join waits until the first actor has quit.
TEST_F(GroupActorTest, ANewActorForARetiringGroupStartsOnlyOnceTheOldOneIsGone) {
  auto cfg = pod_config("pod-r");
  cfg.retireAfterMs = 60000;  // it retires when the test says so
  auto dir = std::make_shared<GroupDirectory>();
  auto gw = spawn_gateway(*sys_, cfg, store_, 0, 1, dir);
  actors_.push_back(gw);
  auto answer = [&](const caf::actor& to, protocol::HeartbeatRequest q, bool viaGateway) {
    auto out = std::make_shared<std::optional<protocol::HeartbeatResponse>>();
    HeartbeatCall call{std::move(q), [out](auto r) { *out = std::move(r); }};
    if (viaGateway) caf::anon_send(to, hb_atom::value, kKey, std::move(call));
    else caf::anon_send(to, hb_atom::value, std::move(call));
    return out;
  };
  auto a0 = answer(gw, request("a", 0), true);
  run();
  ASSERT_TRUE(a0->has_value());
  auto a1 = answer(gw, request("a", (*a0)->memberEpoch, assigned(**a0)), true);
  run();
  ASSERT_TRUE(a1->has_value());
  caf::actor first;
  ASSERT_TRUE(dir->send_if_present(kKey.str(), [&](const caf::actor& x) { first = x; }));
  auto firstDown = std::make_shared<bool>(false);
  first->attach_functor([firstDown](const caf::error&) { *firstDown = true; });
  // In this order, nothing run in between: a heartbeat reaches the first actor straight (as the HTTP
  // threads send through the directory), the actor asks to retire, a join of b reaches the gateway.
  auto steady = answer(first, request("a", (*a1)->memberEpoch, assigned(**a1)), false);
  caf::anon_send(gw, retire_atom::value, kKey, first);
  auto join = answer(gw, request("b", 0), true);
  while (sched_->prioritize(gw)) sched_->run_once();  // the gateway alone: the retirement, then the join
  caf::actor now;
  dir->send_if_present(kKey.str(), [&](const caf::actor& x) { now = x; });
  EXPECT_FALSE(*firstDown) << "the first actor still has the heartbeat to answer";
  EXPECT_FALSE(now && now != first) << "a second actor for the group started while the first still runs";
  run();
  EXPECT_TRUE(*firstDown);
  ASSERT_TRUE(steady->has_value());
  EXPECT_EQ((*steady)->status, HeartbeatStatus::OK);
  ASSERT_TRUE(join->has_value()) << "the join waited, then was served by the new actor";
  EXPECT_EQ((*join)->status, HeartbeatStatus::OK);
  dir->send_if_present(kKey.str(), [&](const caf::actor& x) { now = x; });
  EXPECT_TRUE(now && now != first);
  EXPECT_TRUE(stored().members.count("b"));
}

TEST_F(GroupActorTest, AGroupIsDeletedOnlyWhenEmptyOrWithItsMembersFenced) {
  auto del = [&](bool fence) {
    std::optional<store::Result<store::GroupDeletion>> out;
    caf::anon_send(group_, delete_atom::value, DeleteCall{fence, [&](auto r) { out = std::move(r); }});
    run();
    EXPECT_TRUE(out && out->ok());
    return out && out->ok() ? *out->value : store::GroupDeletion::NotFound;
  };
  EXPECT_EQ(del(false), store::GroupDeletion::NotFound);
  auto a = hb(request("a", 0));
  EXPECT_EQ(del(false), store::GroupDeletion::HasLiveMembers);
  EXPECT_TRUE(mem_->load(kKey).value->exists) << "refused: nothing changed";
  EXPECT_EQ(del(true), store::GroupDeletion::Deleted);
  auto l = mem_->load(kKey);
  EXPECT_FALSE(l.value->exists);
  EXPECT_FALSE(mem_->deadlines().count(kKey.str()));
  EXPECT_TRUE(mem_->list_groups().value->empty());
  EXPECT_EQ(hb(request("a", a.memberEpoch, assigned(a))).status, HeartbeatStatus::UNKNOWN_MEMBER_ID);
  auto again = hb(request("a", 0));
  EXPECT_EQ(again.status, HeartbeatStatus::OK) << "the group can be created again";
  EXPECT_GT(stored().storeRevision, l.value->state.storeRevision) << "its revision never went back";
}

TEST_F(GroupActorTest, TheGroupLimitRefusesANewGroupAndStoresNothing) {
  auto cfg = pod_config("pod-1");  // the same pod, with a limit
  cfg.maxGroupsPerStream = 1;
  auto limited = spawn(cfg);
  ASSERT_EQ(hb(request("a", 0), &limited).status, HeartbeatStatus::OK);
  const store::GroupKey second{"orders", "audit"};
  auto b = spawn_group_actor(*sys_, second, cfg, store_);
  actors_.push_back(b);
  auto r = hb(request("x", 0), &b);
  EXPECT_EQ(r.status, HeartbeatStatus::INVALID_REQUEST);
  EXPECT_NE(r.message.value_or("").find("max-groups-per-stream"), std::string::npos) << r.message.value_or("");
  EXPECT_FALSE(mem_->load(second).value->exists) << "nothing stored for a refused join";
  EXPECT_EQ(mem_->list_groups().value->size(), 1u);
  EXPECT_EQ(hb(request("a2", 0), &limited).status, HeartbeatStatus::OK) << "the existing group still takes joins";
}

// Found by the soak: a join refused as invalid (here a shard the stream does not have) used to
// leave the group it named behind, written by the tick that runs with every heartbeat.
TEST_F(GroupActorTest, ARefusedJoinOfANewGroupStoresNothing) {
  auto r = hb(request("x", 0, {999}));
  EXPECT_EQ(r.status, HeartbeatStatus::INVALID_REQUEST);
  EXPECT_NE(r.message.value_or("").find("outside"), std::string::npos) << r.message.value_or("");
  EXPECT_FALSE(mem_->load(kKey).value->exists) << "nothing stored for a refused join";
  EXPECT_TRUE(mem_->list_groups().value->empty());
  EXPECT_EQ(hb(request("a", 0)).status, HeartbeatStatus::OK) << "a valid join still creates the group";
  EXPECT_TRUE(mem_->load(kKey).value->exists);
  EXPECT_EQ(hb(request("y", 0, {999})).status, HeartbeatStatus::INVALID_REQUEST);
  EXPECT_EQ(mem_->load(kKey).value->state.members.count("y"), 0u);
}

// The data plane comes before the first write that could hand a shard out: the shard streams and
// the group's Redis consumer group exist when a member is told to read. If they cannot be made,
// the join is answered RETRY and nothing is stored; growth provisions the new shards.
TEST_F(GroupActorTest, ShardStreamsAndTheConsumerGroupExistBeforeAShardIsHandedOut) {
  mem_->fail_provisioning(1);
  auto refused = hb(request("a", 0));
  EXPECT_EQ(refused.status, HeartbeatStatus::RETRY);
  EXPECT_NE(refused.message.value_or("").find("consumer group"), std::string::npos) << refused.message.value_or("");
  EXPECT_FALSE(mem_->load(kKey).value->exists) << "nothing stored before the data plane exists";
  EXPECT_TRUE(mem_->consumer_groups().empty());
  auto r = hb(request("a", 0));
  ASSERT_EQ(r.status, HeartbeatStatus::OK);
  ASSERT_TRUE(r.assignment.has_value());
  const auto count = mem_->load(kKey).value->state.shardCount;
  EXPECT_EQ(static_cast<int32_t>(r.assignment->assignedShards.size()), count);
  for (int32_t i = 0; i < count; ++i)
    EXPECT_EQ(mem_->consumer_groups().count({"orders:" + std::to_string(i), "billing"}), 1u) << i;
  EXPECT_EQ(mem_->load(kKey).value->state.provisionedShards, count);
  // Growth: the new shards get their consumer group before anyone is given them.
  ASSERT_TRUE(mem_->put_stream("orders", count + 2).ok());
  caf::anon_send(group_, meta_atom::value, **mem_->get_stream("orders").value);
  run();
  auto grown = hb(request("a", r.memberEpoch, r.assignment->assignedShards));
  EXPECT_EQ(grown.status, HeartbeatStatus::OK);
  EXPECT_EQ(static_cast<int32_t>(grown.assignment->assignedShards.size()), count + 2);
  EXPECT_EQ(mem_->consumer_groups().count({"orders:" + std::to_string(count + 1), "billing"}), 1u);
  EXPECT_EQ(mem_->load(kKey).value->state.provisionedShards, count + 2);
}

// Found in review: a join queued behind another heartbeat of a group that does not exist yet
// used to be batched past the groups-per-stream check.
TEST_F(GroupActorTest, TheGroupLimitHoldsForAJoinQueuedBehindAnotherHeartbeat) {
  auto cfg = pod_config("pod-1");  // the same pod, with a limit
  cfg.maxGroupsPerStream = 1;
  auto limited = spawn(cfg);
  ASSERT_EQ(hb(request("a", 0), &limited).status, HeartbeatStatus::OK);
  const store::GroupKey second{"orders", "audit"};
  auto b = spawn_group_actor(*sys_, second, cfg, store_);
  actors_.push_back(b);
  auto stranger = std::make_shared<std::optional<protocol::HeartbeatResponse>>();
  auto joiner = std::make_shared<std::optional<protocol::HeartbeatResponse>>();
  post(b, request("x", 5), stranger);
  post(b, request("j", 0), joiner);
  run();
  ASSERT_TRUE(stranger->has_value() && joiner->has_value());
  EXPECT_EQ((*stranger)->status, HeartbeatStatus::UNKNOWN_MEMBER_ID);
  EXPECT_EQ((*joiner)->status, HeartbeatStatus::INVALID_REQUEST) << (*joiner)->message.value_or("");
  EXPECT_FALSE(mem_->load(second).value->exists);
}

TEST_F(GroupActorTest, AStoreOutageDoesNotExpireHealthyMembers) {
  auto a = hb(request("a", 0));
  a = hb(request("a", a.memberEpoch, assigned(a)));
  mem_->set_unreachable(true);
  advance(3000);  // three leases: ticks fail, heartbeats would get RETRY
  EXPECT_EQ(hb(request("a", a.memberEpoch, assigned(a))).status, HeartbeatStatus::RETRY);
  mem_->set_unreachable(false);
  advance(100);  // the pod's next beat renews its registration, which ran out meanwhile (writes wait for it)
  auto back = hb(request("a", a.memberEpoch, assigned(a)));
  EXPECT_EQ(back.status, HeartbeatStatus::OK) << "the outage did not count against the lease";
  EXPECT_EQ(stored().members.at("a").state, protocol::MemberLifecycleState::ACTIVE);
}

TEST_F(GroupActorTest, ASilentMemberIsExpiredByTheTick) {
  auto a = hb(request("a", 0));
  advance(1200);
  EXPECT_EQ(stored().members.at("a").state, protocol::MemberLifecycleState::EXPIRED);
  EXPECT_EQ(hb(request("a", a.memberEpoch, assigned(a))).status, HeartbeatStatus::FENCED_MEMBER_EPOCH);
}

TEST_F(GroupActorTest, AConflictIsRetriedOnTheFreshState) {
  auto a = hb(request("a", 0));
  const auto rev = stored().storeRevision;
  mem_->conflict_next(2);  // another pod writes twice first
  auto r = hb(request("a", a.memberEpoch, assigned(a)));
  EXPECT_EQ(r.status, HeartbeatStatus::OK);
  EXPECT_EQ(stored().storeRevision, rev + 3);
  EXPECT_NE(metrics_->text().find("rsc_cas_conflicts_total 2"), std::string::npos);
}

TEST_F(GroupActorTest, ConflictsThatPersistAreAnsweredWithRetry) {
  auto a = hb(request("a", 0));
  mem_->conflict_next(50);
  auto r = hb(request("a", a.memberEpoch, assigned(a)));
  EXPECT_EQ(r.status, HeartbeatStatus::RETRY);
  EXPECT_NE(r.message->find("contended"), std::string::npos);
  mem_->conflict_next(0);
}

TEST_F(GroupActorTest, HeartbeatsArrivingTogetherAreServedInOrderAndWrittenInOneCas) {
  auto ra = std::make_shared<std::optional<protocol::HeartbeatResponse>>();
  auto rb = std::make_shared<std::optional<protocol::HeartbeatResponse>>();
  auto rc = std::make_shared<std::optional<protocol::HeartbeatResponse>>();
  post(group_, request("a", 0), ra);
  post(group_, request("b", 0), rb);
  post(group_, request("c", 0), rc);
  run();
  ASSERT_TRUE(ra->has_value() && rb->has_value() && rc->has_value());
  EXPECT_EQ((*rb)->groupEpoch, (*ra)->groupEpoch + 1) << "b was computed on the state a's write produced";
  EXPECT_EQ((*rc)->groupEpoch, (*rb)->groupEpoch + 1);
  EXPECT_EQ(stored().members.size(), 3u);
  EXPECT_EQ(stored().storeRevision, 1) << "the three queued heartbeats went out as one write";
}

TEST_F(GroupActorTest, ABatchThatLosesARaceIsRedoneWholeAndInOrder) {
  auto a = hb(request("a", 0));
  auto rb = std::make_shared<std::optional<protocol::HeartbeatResponse>>();
  auto rc = std::make_shared<std::optional<protocol::HeartbeatResponse>>();
  auto ra = std::make_shared<std::optional<protocol::HeartbeatResponse>>();
  mem_->conflict_next(2);  // another pod writes first, twice: b alone, then the batch b, c, a
  post(group_, request("b", 0), rb);
  post(group_, request("c", 0), rc);
  post(group_, request("a", a.memberEpoch, assigned(a)), ra);
  run();
  ASSERT_TRUE(ra->has_value() && rb->has_value() && rc->has_value());
  EXPECT_EQ((*rb)->status, HeartbeatStatus::OK);
  EXPECT_EQ((*rc)->status, HeartbeatStatus::OK);
  EXPECT_EQ((*rc)->groupEpoch, (*rb)->groupEpoch + 1) << "c computed after b, on the state after the conflict";
  EXPECT_EQ((*ra)->status, HeartbeatStatus::REVOKE_PENDING) << "a learns that b and c take shards";
  const auto s = stored();
  EXPECT_EQ(s.members.size(), 3u);
  EXPECT_NE(metrics_->text().find("rsc_cas_conflicts_total 2"), std::string::npos);
}

// One owner at a time (group/pod_authority.hpp): a pod that outranks pod-1 for the group takes it
// once established, and pod-1 writes it no more; when that pod leaves, the group comes back to
// pod-1, whose copy is checked before it answers from it again.
TEST_F(GroupActorTest, AGroupMovesToANewPodAndBackWithoutContradiction) {
  auto a = hb(request("a", 0));
  const auto before = actors_.size();
  auto cfg2 = pod_config(pod_id_that(true));
  auto other = spawn(cfg2);
  const std::vector<caf::actor> pod2(actors_.begin() + static_cast<long>(before), actors_.end());
  ASSERT_TRUE(cfg2.pod->pod_view()->owns(kKey.str(), now_));
  auto refused = hb(request("b", 0));
  EXPECT_EQ(refused.status, HeartbeatStatus::RETRY) << "pod-1 no longer writes the group";
  EXPECT_NE(refused.message.value_or("").find("is served by pod " + cfg2.podToken), std::string::npos)
      << refused.message.value_or("");
  auto b = hb(request("b", 0), &other);
  ASSERT_EQ(b.status, HeartbeatStatus::OK) << b.message.value_or("");  // pod-2's cache is empty: it loads, then writes
  EXPECT_EQ(b.groupEpoch, a.groupEpoch + 1);
  auto a2 = hb(request("a", a.memberEpoch, assigned(a)), &other);
  EXPECT_EQ(a2.status, HeartbeatStatus::REVOKE_PENDING) << "pod-2 sees a's shards and b's target";
  stop_pod(pod2);  // it leaves the registry: pod-1 is alone again, in a new term...
  advance(100);    // ...from its next beat
  auto a3 = hb(request("a", a2.memberEpoch, assigned(a2)));  // back on pod-1: stale cache, checked
  EXPECT_EQ(a3.status, HeartbeatStatus::OK);
  EXPECT_GE(a3.groupEpoch, b.groupEpoch);
  EXPECT_EQ(assigned(hb(request("b", b.memberEpoch))).size(), 3u);
}

TEST_F(GroupActorTest, DeadlineWorkWaitsWhileAnotherPodHoldsTheGroupMutex) {
  auto a = hb(request("a", 0));
  // Another pod holds the group mutex (doing the same deadline work) for the whole test.
  auto lease = mem_->tick_lease(kKey, "pod-elsewhere", 60'000, 0);
  ASSERT_TRUE(lease.ok());
  ASSERT_NE(lease.value->status, store::LeaseStatus::NotHolder);
  advance(1500);
  EXPECT_EQ(stored().members.at("a").state, protocol::MemberLifecycleState::STARTING)
      << "this pod does not hold the mutex, so it judges no deadline";
  EXPECT_NE(metrics_->text().find("rsc_deadline_work_total{result=\"held_elsewhere\"}"), std::string::npos);
  // A heartbeat still runs the tick logic in its own write: the silent member is expired then.
  auto b = hb(request("b", 0));
  EXPECT_EQ(b.status, HeartbeatStatus::OK);
  EXPECT_EQ(stored().members.at("a").state, protocol::MemberLifecycleState::EXPIRED);
}

TEST_F(GroupActorTest, DescribeShowsTheGroupAndAnUnknownGroupIsNotFound) {
  std::optional<store::Result<std::optional<std::string>>> out;
  caf::anon_send(group_, describe_atom::value, DescribeCall{[&](auto r) { out = std::move(r); }});
  run();
  ASSERT_TRUE(out && out->ok());
  EXPECT_FALSE(out->value->has_value());
  EXPECT_FALSE(mem_->get_stream("orders").value->has_value()) << "a describe creates nothing";
  hb(request("a", 0));
  out.reset();
  caf::anon_send(group_, describe_atom::value, DescribeCall{[&](auto r) { out = std::move(r); }});
  run();
  ASSERT_TRUE(out && out->ok() && out->value->has_value());
  EXPECT_NE(out->value->value().find("\"memberId\":\"a\""), std::string::npos);
}

// A stored step that gives a member something to do publishes one notification naming it; a
// steady heartbeat publishes nothing.
TEST_F(GroupActorTest, AJoinNotifiesTheMemberThatMustGiveShardsUpAndSteadyHeartbeatsNothing) {
  auto a = hb(request("a", 0));
  a = hb(request("a", a.memberEpoch, a.assignment->assignedShards));
  const auto before = mem_->notifications().size();
  hb(request("a", a.memberEpoch, a.assignment->assignedShards));
  EXPECT_EQ(mem_->notifications().size(), before) << "a steady heartbeat tells nobody";
  hb(request("b", 0));
  const auto n = mem_->notifications();
  ASSERT_EQ(n.size(), before + 1);
  EXPECT_EQ(n.back().first, "orders/billing");
  const auto msg = nlohmann::json::parse(n.back().second);
  EXPECT_EQ(msg.at("members"), nlohmann::json::parse(R"(["a"])"));
  EXPECT_EQ(msg.at("groupEpoch"), stored().groupEpoch);
  EXPECT_NE(metrics_->text().find("rsc_members_notified_total 1"), std::string::npos);
}

// Describe carries the group's recent events as this pod saw them, oldest first, with their age
// on the pod's clock.
TEST_F(GroupActorTest, DescribeListsTheRecentEventsOfTheGroup) {
  hb(request("a", 0));
  advance(250);
  hb(request("b", 0));
  advance(100);
  std::optional<store::Result<std::optional<std::string>>> out;
  caf::anon_send(group_, describe_atom::value, DescribeCall{[&](auto r) { out = std::move(r); }});
  run();
  ASSERT_TRUE(out && out->ok() && out->value->has_value());
  const auto d = nlohmann::json::parse(out->value->value());
  const auto& ev = d.at("recentEvents");
  ASSERT_GE(ev.size(), 3u) << d.dump();
  bool aJoined = false, bJoined = false;
  for (const auto& e : ev) {
    EXPECT_NE(e.at("kind"), "target") << "bookkeeping is left out";
    if (e.at("kind") == "joined" && e.at("memberId") == "a") {
      EXPECT_FALSE(bJoined) << "oldest first";
      aJoined = true;
      EXPECT_EQ(e.at("agoMs"), 350);
    }
    if (e.at("kind") == "joined" && e.at("memberId") == "b") {
      bJoined = true;
      EXPECT_EQ(e.at("agoMs"), 100);
      EXPECT_EQ(e.at("groupEpoch"), d.at("groupEpoch")) << "b's join made the current epoch";
    }
  }
  EXPECT_TRUE(aJoined && bJoined) << d.dump();
}

TEST_F(GroupActorTest, DescribeOnAnyPodShowsWhatOtherPodsWrote) {
  auto other = spawn(pod_config("pod-2"));
  hb(request("a", 0), &other);  // pod-2 caches the group
  hb(request("b", 0));          // pod-1 writes after it
  std::optional<store::Result<std::optional<std::string>>> out;
  caf::anon_send(other, describe_atom::value, DescribeCall{[&](auto r) { out = std::move(r); }});
  run();
  ASSERT_TRUE(out && out->ok() && out->value->has_value());
  EXPECT_NE(out->value->value().find("\"memberId\":\"b\""), std::string::npos) << "not pod-2's stale cache";
}

TEST_F(GroupActorTest, AnErrorIsNeverAnsweredFromAStaleCache) {
  auto a = hb(request("a", 0));                         // pod-1 caches a at its join epoch
  const auto before = actors_.size();
  auto other = spawn(pod_config(pod_id_that(true)));    // the group moves to pod-2
  const std::vector<caf::actor> pod2(actors_.begin() + static_cast<long>(before), actors_.end());
  hb(request("b", 0), &other);                          // pod-2 moves the group on
  auto a2 = hb(request("a", a.memberEpoch, assigned(a)), &other);
  a2 = hb(request("a", a2.memberEpoch, assigned(a2)), &other);
  ASSERT_GT(a2.memberEpoch, a.memberEpoch) << "a's epoch advanced through pod-2";
  auto unknownHere = hb(request("c", 0), &other);  // c exists only in pod-2's writes
  stop_pod(pod2);                                        // and back to pod-1
  advance(100);
  auto back = hb(request("a", a2.memberEpoch, assigned(a2)));  // pod-1 still thinks a is at the old epoch
  EXPECT_NE(back.status, HeartbeatStatus::INVALID_REQUEST) << back.message.value_or("");
  EXPECT_EQ(back.memberEpoch, a2.memberEpoch);
  auto c = hb(request("c", unknownHere.memberEpoch));   // pod-1 has never seen c
  EXPECT_NE(c.status, HeartbeatStatus::UNKNOWN_MEMBER_ID);
}

TEST_F(GroupActorTest, ADescribeBeforeTheStreamExistsDoesNotKeepTheGroupFromStarting) {
  std::optional<store::Result<std::optional<std::string>>> out;
  caf::anon_send(group_, describe_atom::value, DescribeCall{[&](auto r) { out = std::move(r); }});
  run();
  auto unknown = hb(request("x", 3));  // a heartbeat that is not a join creates nothing either
  EXPECT_EQ(unknown.status, HeartbeatStatus::UNKNOWN_MEMBER_ID);
  EXPECT_FALSE(mem_->get_stream("orders").value->has_value());
  auto a = hb(request("a", 0));
  EXPECT_EQ(assigned(a).size(), 6u);
}

TEST_F(GroupActorTest, RollbackRecoveryIsWrittenEvenIfTheFirstWriteLosesARace) {
  auto a = hb(request("a", 0));
  const auto old = mem_->raw(kKey);
  a = hb(request("a", a.memberEpoch, assigned(a)));
  a = hb(request("a", a.memberEpoch, assigned(a)));
  mem_->replace_raw(kKey, old);  // the store lost two writes
  mem_->conflict_next(1);        // and another pod writes first
  auto r = hb(request("a", a.memberEpoch, assigned(a)));
  (void)r;
  EXPECT_GT(stored().rollbackGuardUntilMs, now_) << "the guard reached the store";
}

TEST_F(GroupActorTest, APodStartedAfterAnOutageExpiresNobodyDuringItsFirstLease) {
  hb(request("a", 0));
  for (auto& a : actors_) caf::anon_send_exit(a, caf::exit_reason::user_shutdown);  // this pod goes away
  run();
  now_ += 5000;  // the store was unreachable meanwhile: nobody's heartbeat got through
  spawn(pod_config("pod-3"));
  advance(600);
  EXPECT_EQ(stored().members.at("a").state, protocol::MemberLifecycleState::STARTING)
      << "the new pod cannot tell an outage from a dead member yet";
  advance(600);
  EXPECT_EQ(stored().members.at("a").state, protocol::MemberLifecycleState::EXPIRED) << "one lease later it can";
}

TEST_F(GroupActorTest, AHeartbeatThatWaitedLongerThanALeaseIsAnsweredRetryAndChangesNothing) {
  // b's message is still in the mailbox when the clock jumps: it is enqueued (and timed) after.
  auto ra = std::make_shared<std::optional<protocol::HeartbeatResponse>>();
  auto rb = std::make_shared<std::optional<protocol::HeartbeatResponse>>();
  post(group_, request("a", 0), ra);
  post(group_, request("b", 0), rb);
  sched_->run_once();  // the group takes the first heartbeat and asks the store for the group
  ASSERT_TRUE(sched_->prioritize(store_));
  sched_->run_once();  // the store starts the call within its deadline...
  now_ += 1500;        // ...and answers only after more than a lease
  beat_now(pod1_);     // meanwhile the pod renewed its registration (which had run out)
  run();
  ASSERT_TRUE(ra->has_value() && rb->has_value());
  EXPECT_EQ((*ra)->status, HeartbeatStatus::RETRY) << "a's heartbeat waited in the queue for over a lease";
  EXPECT_NE((*ra)->message->find("longer than a lease"), std::string::npos) << *(*ra)->message;
  EXPECT_EQ((*rb)->status, HeartbeatStatus::OK) << "b's arrived after the wait and is served";
  EXPECT_FALSE(stored().members.count("a")) << "a's stale join changed nothing";
}

// The store actor judges a call's deadline on the pod's clock, the one its asker gave up on: a
// call that waited in the store's mailbox past it (the asker answered RETRY meanwhile) is not run.
TEST_F(GroupActorTest, AStoreCallThatWaitedPastItsDeadlineOnThePodsClockIsNotRun) {
  auto ra = std::make_shared<std::optional<protocol::HeartbeatResponse>>();
  post(group_, request("a", 0), ra);
  sched_->run_once();  // the group takes the heartbeat and asks the store for the group
  now_ += 1500;        // the store actor gets to it only after its deadline
  beat_now(pod1_);
  const auto before = mem_->calls();
  run();
  ASSERT_TRUE(ra->has_value());
  EXPECT_EQ((*ra)->status, HeartbeatStatus::RETRY);
  EXPECT_EQ(mem_->calls(), before) << "the given-up call did not touch the store";
  EXPECT_TRUE(mem_->raw(kKey).empty());
}

TEST_F(GroupActorTest, AdminRemovalFencesTheMember) {
  auto a = hb(request("a", 0));
  std::optional<store::Result<bool>> out;
  caf::anon_send(group_, remove_atom::value, RemoveCall{"a", [&](auto r) { out = std::move(r); }});
  run();
  ASSERT_TRUE(out && out->ok());
  EXPECT_TRUE(*out->value);
  EXPECT_EQ(stored().members.at("a").state, protocol::MemberLifecycleState::FENCED);
  EXPECT_EQ(hb(request("a", a.memberEpoch, assigned(a))).status, HeartbeatStatus::FENCED_MEMBER_EPOCH);
}

TEST_F(GroupActorTest, AGrownStreamReachesTheGroup) {
  auto a = hb(request("a", 0));
  mem_->put_stream("orders", 9);
  caf::anon_send(group_, meta_atom::value, protocol::StreamMetadata{"orders", 9, 2});
  run();
  EXPECT_EQ(stored().shardCount, 9);
  auto r = hb(request("a", a.memberEpoch, assigned(a)));
  EXPECT_EQ(assigned(r).size(), 9u);
}

// Many pods answer as one coordinator (SPEC §3 rule 11): a pod whose copy predates a change made
// at another pod never answers from it. With coarse renewal, a steady heartbeat needs no write;
// the pod then asks the store whether its copy is current (writing nothing) before it answers.
TEST_F(GroupActorTest, AnAnswerThatNeedsNoWriteComesOnlyFromACopyTheStoreConfirmedAfterTheRequestArrived) {
  auto cfg1 = pod_config("pod-1");
  cfg1.core.leaseRenewalSlackMs = 300;
  auto cfg2 = pod_config(pod_id_that(false));  // pod-1 serves the group; pod-2 only reads it
  cfg2.core.leaseRenewalSlackMs = 300;
  auto p1 = spawn(cfg1);
  auto p2 = spawn(cfg2);
  auto a = hb(request("a", 0), &p1);
  a = hb(request("a", a.memberEpoch, assigned(a)), &p1);
  ASSERT_EQ(assigned(a).size(), 6u);
  // At pod-2: its copy is read for this heartbeat, which needs no write (the stored lease covers it).
  auto steady = hb(request("a", a.memberEpoch, assigned(a)), &p2);
  ASSERT_EQ(steady.status, HeartbeatStatus::OK);
  const auto rev = stored().storeRevision;
  auto again = hb(request("a", a.memberEpoch, assigned(a)), &p2);
  EXPECT_EQ(again.status, HeartbeatStatus::OK);
  EXPECT_EQ(stored().storeRevision, rev) << "nothing written for a steady heartbeat";
  EXPECT_NE(metrics_->text().find("rsc_copy_checks_total{result=\"current\"} 1"), std::string::npos)
      << "the copy was confirmed by a revision check\n" << metrics_->text();
  // b joins at pod-1: a must give up three shards. a's next heartbeat lands on pod-2, whose copy
  // predates the join: it must not be told to keep what it has.
  auto b = hb(request("b", 0), &p1);
  ASSERT_EQ(b.status, HeartbeatStatus::OK);
  auto atP2 = hb(request("a", a.memberEpoch, assigned(a)), &p2);
  EXPECT_EQ(atP2.status, HeartbeatStatus::RETRY) << "decided again on the stored state, which needs a write pod-2 may not make";
  EXPECT_NE(atP2.message.value_or("").find("is served by pod pod-1"), std::string::npos) << atP2.message.value_or("");
  EXPECT_NE(metrics_->text().find("rsc_copy_checks_total{result=\"stale\"} 1"), std::string::npos) << metrics_->text();
  auto atP1 = hb(request("a", a.memberEpoch, assigned(a)), &p1);
  EXPECT_EQ(atP1.status, HeartbeatStatus::REVOKE_PENDING);
  EXPECT_EQ(assigned(atP1).size(), 3u);
  EXPECT_GE(atP1.groupEpoch, b.groupEpoch) << "no epoch older than one already given";
}

// The only pod that writes answers from its own copy (group/pod_authority.hpp): nobody else can
// have changed the group, so a steady heartbeat costs no store call at all.
TEST_F(GroupActorTest, APodAloneAnswersSteadyHeartbeatsFromItsCopyWithNoStoreCall) {
  auto [cfg, p1, a] = steady_pod_with_member_a();
  const auto calls = mem_->calls();
  const auto rev = stored().storeRevision;
  for (int i = 0; i < 5; ++i) EXPECT_EQ(hb(request("a", a.memberEpoch, assigned(a)), &p1).status, HeartbeatStatus::OK);
  EXPECT_EQ(mem_->calls(), calls + 1) << "five answers, no store call (the one counted is this test's read)";
  EXPECT_EQ(stored().storeRevision, rev);
  EXPECT_EQ(metrics_->text().find("rsc_copy_checks_total{result=\"current\"} 1"), std::string::npos) << "no check either";
}

// A second pod registers: it writes nothing until the first can no longer be answering from its
// copy; then it owns the group, and the first checks its copy (and writes nothing).
TEST_F(GroupActorTest, ANewPodServesNothingUntilTheOldOwnerHasStoppedThenNoAnswerIsStale) {
  auto [cfg1, p1, a] = steady_pod_with_member_a();
  auto cfg2 = pod_config(pod_id_that(true), /*waitUntilWritable=*/false);  // it will take the group
  cfg2.core.leaseRenewalSlackMs = 300;
  auto p2 = spawn(cfg2);
  auto early = hb(request("b", 0), &p2);
  EXPECT_EQ(early.status, HeartbeatStatus::RETRY);
  EXPECT_NE(early.message.value_or("").find("serves no group"), std::string::npos) << early.message.value_or("");
  EXPECT_FALSE(stored().members.count("b")) << "nothing stored";
  const auto calls = mem_->calls();
  EXPECT_EQ(hb(request("a", a.memberEpoch, assigned(a)), &p1).status, HeartbeatStatus::OK);
  EXPECT_EQ(mem_->calls(), calls) << "pod-1 still answers alone: pod-2 cannot write yet";
  advance(400);  // pod-2's first pod lease (300 ms) and margin
  ASSERT_TRUE(cfg2.pod->pod_view()->owns(kKey.str(), now_));
  ASSERT_FALSE(cfg1.pod->pod_view()->owns(kKey.str(), now_));
  a = hb(request("a", a.memberEpoch, assigned(a)), &p2);
  auto b = hb(request("b", 0), &p2);
  ASSERT_EQ(b.status, HeartbeatStatus::OK);
  auto atP1 = hb(request("a", a.memberEpoch, assigned(a)), &p1);
  EXPECT_EQ(atP1.status, HeartbeatStatus::RETRY) << "pod-1, no longer the owner, checked its copy: the answer needs a write";
  auto atP2 = hb(request("a", a.memberEpoch, assigned(a)), &p2);
  EXPECT_EQ(atP2.status, HeartbeatStatus::REVOKE_PENDING) << "the owner saw b's join";
  EXPECT_GE(atP2.groupEpoch, b.groupEpoch) << "no epoch older than one already given";
}

// Beats that fail for longer than the pod's window end its term: what it cached may have been
// changed by a pod that registered meanwhile, so the copy is confirmed by the store once again.
TEST_F(GroupActorTest, APodWhoseWindowLapsedChecksItsCopyAgain) {
  auto [cfg, p1, a] = steady_pod_with_member_a();
  const auto term = cfg.pod->pod_view()->term;
  mem_->set_unreachable(true);
  advance(400);  // beats fail: the window closes
  mem_->set_unreachable(false);
  advance(100);
  ASSERT_TRUE(cfg.pod->pod_view()->owns(kKey.str(), now_));
  EXPECT_GT(cfg.pod->pod_view()->term, term);
  const auto calls = mem_->calls();
  EXPECT_EQ(hb(request("a", a.memberEpoch, assigned(a)), &p1).status, HeartbeatStatus::OK);
  EXPECT_GT(mem_->calls(), calls) << "the first answer of the new term is confirmed by the store";
  const auto after = mem_->calls();
  EXPECT_EQ(hb(request("a", a.memberEpoch, assigned(a)), &p1).status, HeartbeatStatus::OK);
  EXPECT_EQ(mem_->calls(), after) << "then it answers alone again";
}

// The store deadline is kept on the pod's clock, so it is tested: a store that never
// answers costs a heartbeat the store deadline (1000 ms here), then RETRY; nothing hangs.
struct SilentStoreState {
  std::vector<caf::typed_response_promise<LoadReply>> held;  // never delivered
};
// (It takes an argument: CAF 0.17 spawns a function actor without one through an empty argument
// tuple, which UBSan reports as a null reference.)
caf::behavior silent_store(caf::stateful_actor<SilentStoreState>* self, std::string /*name*/) {
  return {
      [=](load_atom, LoadCall&) -> caf::result<LoadReply> {
        auto rp = self->make_response_promise<LoadReply>();
        self->state.held.push_back(rp);
        return rp;
      },
  };
}

// The group actors of a gateway share one timer for their store calls (a sweeper that
// wakes at the earliest deadline in flight) instead of one delayed message per call; the give-up
// keeps its moment: each call at its own deadline, not before.
TEST_F(GroupActorTest, StoreCallsWatchedByOneSweeperAreEachGivenUpAtTheirOwnDeadline) {
  auto silent = sys_->spawn(silent_store, std::string("silent-store"));
  actors_.push_back(silent);
  auto cfg = pod_config("pod-1");
  auto watch = std::make_shared<StoreWatch>();
  watch->sweeper = spawn_store_sweeper(*sys_, nullptr, watch, cfg.pod, cfg.storeDeadlineMs);
  actors_.push_back(watch->sweeper);
  cfg.storeWatch = watch;
  auto shared = std::make_shared<const GroupActorConfig>(cfg);
  auto g1 = spawn_group_actor(*sys_, store::GroupKey{"orders", "one"}, shared, silent);
  auto g2 = spawn_group_actor(*sys_, store::GroupKey{"orders", "two"}, shared, silent);
  actors_.push_back(g1);
  actors_.push_back(g2);
  auto out1 = std::make_shared<std::optional<protocol::HeartbeatResponse>>();
  auto out2 = std::make_shared<std::optional<protocol::HeartbeatResponse>>();
  post(g1, request("a", 0), out1);
  run();
  advance(500);
  post(g2, request("b", 0), out2);  // 500 ms later: its deadline is 500 ms after g1's
  run();
  EXPECT_EQ(watch->in_flight(), 2u);
  advance(400);
  EXPECT_FALSE(out1->has_value()) << "still within the store deadline";
  advance(200);
  ASSERT_TRUE(out1->has_value()) << "g1's call given up at its deadline";
  EXPECT_EQ((*out1)->status, HeartbeatStatus::RETRY);
  EXPECT_NE((*out1)->message.value_or("").find("did not answer within 1000ms"), std::string::npos);
  EXPECT_FALSE(out2->has_value()) << "g2's call is 600 ms old: not given up with g1's";
  EXPECT_EQ(watch->in_flight(), 1u);
  advance(500);
  ASSERT_TRUE(out2->has_value()) << "g2's call given up at its own deadline";
  EXPECT_EQ((*out2)->status, HeartbeatStatus::RETRY);
  EXPECT_EQ(watch->in_flight(), 0u);
}

// A call answered in time is closed in the watch at once (its entry kept for the next call until a
// sweep prunes it); the sweep that comes finds nothing to give up.
TEST_F(GroupActorTest, AStoreCallAnsweredInTimeLeavesTheWatchAndIsNotGivenUp) {
  auto cfg = pod_config("pod-1");
  auto watch = std::make_shared<StoreWatch>();
  watch->sweeper = spawn_store_sweeper(*sys_, nullptr, watch, cfg.pod, cfg.storeDeadlineMs);
  actors_.push_back(watch->sweeper);
  cfg.storeWatch = watch;
  auto g = spawn(cfg);
  const auto a = hb(request("a", 0), &g);
  EXPECT_EQ(a.status, HeartbeatStatus::OK);
  EXPECT_EQ(watch->in_flight(), 0u);
  for (int i = 0; i < 5; ++i) {  // 1.5 s: the sweeps armed by the calls come and go
    advance(300);
    const auto r = hb(request("a", a.memberEpoch, assigned(a)), &g);
    EXPECT_EQ(r.status, HeartbeatStatus::OK) << r.message.value_or("");
    EXPECT_EQ(watch->in_flight(), 0u);
  }
  EXPECT_EQ(watch->entries(), 1u) << "the actor's ended entry is kept for its next call";
  advance(1000);  // the sweep armed by a call in the loop comes: it prunes the ended entry
  EXPECT_EQ(watch->entries(), 0u);
  EXPECT_EQ(watch->in_flight(), 0u);
}

TEST_F(GroupActorTest, AStoreThatNeverAnswersIsGivenUpAtTheStoreDeadline) {
  auto silent = sys_->spawn(silent_store, std::string("silent-store"));
  actors_.push_back(silent);
  auto g = spawn_group_actor(*sys_, store::GroupKey{"orders", "silent"}, pod_config("pod-1"), silent);
  actors_.push_back(g);
  auto out = std::make_shared<std::optional<protocol::HeartbeatResponse>>();
  post(g, request("a", 0), out);
  run();
  advance(900);
  EXPECT_FALSE(out->has_value()) << "still within the store deadline";
  advance(200);
  ASSERT_TRUE(out->has_value()) << "given up at the store deadline";
  EXPECT_EQ((*out)->status, HeartbeatStatus::RETRY);
  EXPECT_NE((*out)->message.value_or("").find("did not answer within 1000ms"), std::string::npos)
      << (*out)->message.value_or("");
}

// A group actor keeps its group's place in the metrics between writes. The place is reused while
// the group is listed (its members are counted once, not again at each write); when the gateway
// forgets the group meanwhile, the next publish lists it again, from zero, in a new place.
TEST(MetricsSlot, AGroupForgottenWhileItsActorKeepsItsSlotIsListedAgainFromZero) {
  rsc::testing::Harness h;
  h.send(h.request("a", 0));
  h.send(h.request("b", 0));  // two members joined (STARTING until they report their shards)
  Metrics m;
  auto line = [&](const std::string& prefix) {
    const auto text = m.text();
    const auto at = text.find("\n" + prefix + " ");
    if (at == std::string::npos) return std::string("(none)");
    const auto end = text.find('\n', at + 1);
    return text.substr(at + 1 + prefix.size() + 1, end - at - 1 - prefix.size() - 1);
  };
  const std::string live = "rsc_group_members_live{group=\"g1\",stream=\"orders\"}";
  std::shared_ptr<Metrics::GroupSlot> slot;
  m.publish_group(slot, "orders", "g1", h.state());
  ASSERT_NE(slot, nullptr);
  const auto first = slot;
  EXPECT_EQ(line("rsc_members{state=\"STARTING\"}"), "2");
  EXPECT_EQ(line(live), "2");
  m.publish_group(slot, "orders", "g1", h.state());
  EXPECT_EQ(slot, first) << "a listed group keeps its place";
  EXPECT_EQ(line("rsc_members{state=\"STARTING\"}"), "2") << "replaced, not added again";
  m.dead_letters("orders", "g1", 3);  // found by name: the same place
  EXPECT_EQ(line("rsc_group_dead_letters{group=\"g1\",stream=\"orders\"}"), "3");

  m.forget_group("orders", "g1");
  EXPECT_EQ(line("rsc_members{state=\"STARTING\"}"), "0");
  EXPECT_EQ(line(live), "(none)");
  m.publish_group(slot, "orders", "g1", h.state());
  EXPECT_NE(slot, first) << "a forgotten place is not written to";
  EXPECT_EQ(line("rsc_members{state=\"STARTING\"}"), "2");
  EXPECT_EQ(line(live), "2");
  EXPECT_EQ(line("rsc_group_dead_letters{group=\"g1\",stream=\"orders\"}"), "(none)") << "listed again from zero";
}
