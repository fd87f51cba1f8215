// The member's membership machine (member/membership.hpp) on a fake clock: every status it can be
// answered, and each SPEC §6 trap, with no threads, sockets, Redis or sleeps.
#include <gtest/gtest.h>

#include "member/membership.hpp"

namespace rsc::member {
namespace {

using protocol::HeartbeatResponse;
using protocol::HeartbeatStatus;
using protocol::ShardAssignmentState;
using Kind = ShardEvent::Kind;

constexpr int64_t kMs = 1'000'000;
constexpr int64_t kLeaseMs = 2000;  // margin: max(200, 2000/4) = 500 ms, so the deadline is send + 1.5 s
constexpr int64_t kIntervalMs = 300;

HeartbeatResponse answer(HeartbeatStatus status, int32_t epoch, std::vector<int32_t> assigned = {}) {
  HeartbeatResponse r;
  r.status = status;
  r.memberId = "m";
  r.memberEpoch = epoch;
  r.heartbeatIntervalMs = kIntervalMs;
  r.memberLeaseTtlMs = kLeaseMs;
  protocol::Assignment a;
  a.assignedShards = std::move(assigned);
  r.assignment = std::move(a);
  return r;
}

HeartbeatResponse refusal(HeartbeatStatus status, std::string message, std::optional<std::string> field = {}) {
  HeartbeatResponse r = answer(status, 0);
  r.message = std::move(message);
  r.errorField = std::move(field);
  return r;
}

std::vector<int32_t> owned_in(const protocol::HeartbeatRequest& r) {
  std::vector<int32_t> out;
  for (const auto& s : r.ownedShards) out.push_back(s.shardIndex);
  return out;
}

// shard -> state of each entry in revokingShards
std::vector<std::pair<int32_t, ShardAssignmentState>> revoking_in(const protocol::HeartbeatRequest& r) {
  std::vector<std::pair<int32_t, ShardAssignmentState>> out;
  for (const auto& s : r.revokingShards) out.emplace_back(s.shardIndex, s.state);
  return out;
}

class MembershipMachine : public ::testing::Test {
 protected:
  Membership m{{"m", "inc", 2, 0}};
  int64_t now = 1000 * kMs;  // the fake monotonic clock

  // Sends a request at `now`, then the answer arrives `latencyMs` later.
  Membership::Reaction exchange(const HeartbeatResponse& r, int64_t latencyMs = 5) {
    m.next_request(now);
    const int64_t sent = now;
    now += latencyMs * kMs;
    return m.on_response(r, sent);
  }
  // A member that joined and owns `shards` at epoch `epoch`, events and wake-ups consumed.
  void joined(std::vector<int32_t> shards, int32_t epoch = 1) {
    exchange(answer(HeartbeatStatus::OK, epoch, std::move(shards)));
    m.take_events();
    m.take_wake();
    m.take_log();
  }
};

// ---- status transitions ------------------------------------------------------------------

TEST_F(MembershipMachine, AJoinSendsEpochZeroAndTheAnswersShardsAreReadAtOnce) {
  auto first = m.next_request(now);
  EXPECT_EQ(first.memberEpoch, 0);
  EXPECT_TRUE(first.ownedShards.empty());
  const auto r = m.on_response(answer(HeartbeatStatus::OK, 4, {0, 1, 3}), now);
  EXPECT_TRUE(r.answered);
  EXPECT_EQ(r.waitMs, 0) << "a new assignment is reported back at once";
  EXPECT_EQ(m.epoch(), 4);
  EXPECT_EQ(m.owned(), (std::vector<int32_t>{0, 1, 3}));
  EXPECT_EQ(m.take_events(), (std::vector<ShardEvent>{{Kind::Assigned, {0, 1, 3}}}));
  auto next = m.next_request(now);
  EXPECT_EQ(next.memberEpoch, 4);
  EXPECT_EQ(owned_in(next), (std::vector<int32_t>{0, 1, 3}));
  EXPECT_EQ(next.runtimeConsumerCapacity.runtimeMaxConcurrency, 2);
}

TEST_F(MembershipMachine, AnAnswerThatChangesNothingWaitsTheInterval) {
  joined({0, 1});
  const auto r = exchange(answer(HeartbeatStatus::OK, 1, {0, 1}));
  EXPECT_EQ(r.waitMs, kIntervalMs);
  EXPECT_FALSE(m.events_due());
}

TEST_F(MembershipMachine, RevokePendingStopsReadingAShardAtOnceAndReportsItRevokedOnlyOnceDrained) {
  joined({0, 1});
  auto lease = m.take_shards(1, now);  // worker 1 reads shard 1
  ASSERT_EQ(lease.shards, (std::vector<int32_t>{1}));
  const auto r = exchange(answer(HeartbeatStatus::REVOKE_PENDING, 2, {0}));
  EXPECT_EQ(r.waitMs, 0);
  EXPECT_FALSE(m.may_read(1, now)) << "reading a revoked shard stops with the answer";
  EXPECT_TRUE(m.may_read(0, now));
  EXPECT_EQ(m.take_events(), (std::vector<ShardEvent>{{Kind::Revoking, {1}}}));
  EXPECT_FALSE(m.begin_record(1, now).has_value()) << "nothing more is started on it";

  auto draining = m.next_request(now);
  EXPECT_EQ(owned_in(draining), (std::vector<int32_t>{0}));
  EXPECT_EQ(revoking_in(draining), (decltype(revoking_in(draining)){{1, ShardAssignmentState::DRAINING}}));
  m.on_response(answer(HeartbeatStatus::REVOKE_PENDING, 2, {0}), now);

  m.release(lease.shards);
  EXPECT_TRUE(m.take_wake()) << "drained: tell the coordinator at once";
  auto done = m.next_request(now);
  EXPECT_EQ(revoking_in(done), (decltype(revoking_in(done)){{1, ShardAssignmentState::REVOKED}}));
  m.on_response(answer(HeartbeatStatus::OK, 2, {0}), now);
  EXPECT_TRUE(m.next_request(now).revokingShards.empty()) << "reported and answered: forgotten";
}

TEST_F(MembershipMachine, SyncMetadataKeepsTheAssignedShardsButStartsNothingNew) {
  joined({0});
  exchange(answer(HeartbeatStatus::SYNC_METADATA, 1, {0, 2}));
  EXPECT_EQ(m.owned(), (std::vector<int32_t>{0}));
  EXPECT_FALSE(m.events_due());
  exchange(answer(HeartbeatStatus::OK, 1, {0, 2}));
  EXPECT_EQ(m.owned(), (std::vector<int32_t>{0, 2}));
}

TEST_F(MembershipMachine, AFencedMemberDropsEverythingAndRejoinsWithEpochZeroAtOnce) {
  joined({0, 1}, 3);
  const auto r = exchange(refusal(HeartbeatStatus::FENCED_MEMBER_EPOCH, "stale"));
  EXPECT_TRUE(r.answered);
  EXPECT_EQ(r.waitMs, 0);
  EXPECT_TRUE(m.owned().empty());
  EXPECT_FALSE(m.may_read(0, now));
  EXPECT_EQ(m.take_events(), (std::vector<ShardEvent>{{Kind::Lost, {0, 1}}}));
  EXPECT_EQ(m.counters().rejoins, 1);
  auto rejoin = m.next_request(now);
  EXPECT_EQ(rejoin.memberEpoch, 0);
  EXPECT_TRUE(rejoin.ownedShards.empty());
  EXPECT_TRUE(rejoin.revokingShards.empty()) << "a fenced member reports nothing of what it dropped";
}

TEST_F(MembershipMachine, AnUnknownMemberDropsEverythingAndRejoins) {
  joined({2}, 5);
  exchange(refusal(HeartbeatStatus::UNKNOWN_MEMBER_ID, "not in the group"));
  EXPECT_TRUE(m.owned().empty());
  EXPECT_EQ(m.next_request(now).memberEpoch, 0);
}

TEST_F(MembershipMachine, AnEpochRefusedAsNeverIssuedRejoinsBecauseTheErrorFieldSaysSo) {
  joined({0, 1}, 7);
  exchange(refusal(HeartbeatStatus::INVALID_REQUEST, "that epoch was never issued", "memberEpoch"));
  EXPECT_TRUE(m.owned().empty());
  EXPECT_EQ(m.take_events(), (std::vector<ShardEvent>{{Kind::Lost, {0, 1}}}));
  EXPECT_EQ(m.next_request(now).memberEpoch, 0);
}

TEST_F(MembershipMachine, AnInvalidRequestAboutAnotherFieldKeepsTheShardsWhateverItsMessageSays) {
  joined({0, 1}, 7);
  const auto r = exchange(
      refusal(HeartbeatStatus::INVALID_REQUEST, "memberEpoch is fine; ownedShards[0] is not", "ownedShards[0].shardIndex"));
  EXPECT_EQ(r.waitMs, kIntervalMs);
  exchange(refusal(HeartbeatStatus::INVALID_REQUEST, "memberEpoch: never issued (a server that names no field)"));
  EXPECT_EQ(m.owned(), (std::vector<int32_t>{0, 1})) << "the message's wording decides nothing";
  EXPECT_EQ(m.epoch(), 7);
  EXPECT_EQ(m.counters().rejoins, 0);
  auto log = m.take_log();
  ASSERT_FALSE(log.empty());
  EXPECT_NE(log.front().find("field ownedShards[0].shardIndex"), std::string::npos) << log.front();
}

TEST_F(MembershipMachine, AFencedSelfRejoinsOnAnInvalidRequestThatNamesNoFieldButALiveMemberKeepsItsShards) {
  joined({0}, 4);
  // A coordinator older than errorField: the refusal names no field.
  exchange(refusal(HeartbeatStatus::INVALID_REQUEST, "some problem"));
  EXPECT_EQ(m.owned(), (std::vector<int32_t>{0})) << "a member that may still read keeps its shards";
  EXPECT_EQ(m.epoch(), 4);
  now = m.deadline_ns();
  m.next_request(now);  // no answer in time: self-fenced, reading nothing
  ASSERT_TRUE(m.self_fenced());
  m.take_events();
  m.on_response(refusal(HeartbeatStatus::INVALID_REQUEST, "some problem"), now);
  EXPECT_EQ(m.next_request(now).memberEpoch, 0) << "nothing to lose by joining again";
  EXPECT_EQ(m.counters().rejoins, 1);
  EXPECT_TRUE(m.take_events().empty()) << "its shards were reported lost at the self-fence already";
}

TEST_F(MembershipMachine, EveryQueuedShardEventIsCountedSoTheShellAnnouncesEachOnce) {
  joined({0, 1});
  const auto before = m.events_queued();
  exchange(answer(HeartbeatStatus::REVOKE_PENDING, 2, {0}));
  EXPECT_EQ(m.events_queued(), before + 1);
  now = m.deadline_ns();
  m.take_shards(0, now);  // past the deadline: fenced, once
  EXPECT_EQ(m.events_queued(), before + 2);
  m.take_shards(1, now);
  m.next_request(now);
  EXPECT_EQ(m.events_queued(), before + 2) << "a fenced member queues nothing more while it waits";
}

TEST_F(MembershipMachine, RetryKeepsTheShardsBacksOffAndDoesNotRenewTheLease) {
  joined({0});
  const int64_t deadline = m.deadline_ns();
  std::vector<int64_t> waits;
  for (int i = 0; i < 4; ++i) {
    const auto r = exchange(refusal(HeartbeatStatus::RETRY, "store slow"));
    EXPECT_FALSE(r.answered);
    waits.push_back(r.waitMs);
  }
  EXPECT_EQ(waits, (std::vector<int64_t>{50, 100, 200, kIntervalMs})) << "doubling, never past the interval";
  EXPECT_EQ(m.deadline_ns(), deadline);
  EXPECT_EQ(m.owned(), (std::vector<int32_t>{0}));
  EXPECT_EQ(m.counters().heartbeatFailures, 4);
  exchange(answer(HeartbeatStatus::OK, 1, {0}));
  EXPECT_EQ(exchange(refusal(HeartbeatStatus::RETRY, "again")).waitMs, 50) << "an answer resets the backoff";
}

TEST_F(MembershipMachine, NoAnswerAtAllKeepsTheShardsAndBacksOff) {
  joined({0});
  m.next_request(now);
  EXPECT_EQ(m.on_no_answer("connection refused").waitMs, 50);
  m.next_request(now);
  EXPECT_EQ(m.on_no_answer("connection refused").waitMs, 100);
  EXPECT_EQ(m.owned(), (std::vector<int32_t>{0}));
  EXPECT_NE(m.take_log().front().find("connection refused"), std::string::npos);
}

TEST_F(MembershipMachine, AnUnansweredRevokedReportIsRepeated) {
  joined({0, 1});
  exchange(answer(HeartbeatStatus::REVOKE_PENDING, 2, {0}));
  auto first = m.next_request(now);
  ASSERT_EQ(revoking_in(first), (decltype(revoking_in(first)){{1, ShardAssignmentState::REVOKED}}));
  m.on_no_answer("timeout");
  auto again = m.next_request(now);
  EXPECT_EQ(revoking_in(again), (decltype(revoking_in(again)){{1, ShardAssignmentState::REVOKED}}))
      << "the coordinator may never have seen the first report";
}

TEST_F(MembershipMachine, UnsupportedProtocolAndAuthorizationFailuresChangeNothing) {
  joined({0}, 2);
  exchange(refusal(HeartbeatStatus::UNSUPPORTED_PROTOCOL, "v1 only"));
  exchange(refusal(HeartbeatStatus::GROUP_AUTHORIZATION_FAILED, "token"));
  EXPECT_EQ(m.owned(), (std::vector<int32_t>{0}));
  EXPECT_EQ(m.epoch(), 2);
  EXPECT_EQ(m.take_log().size(), 2u);
}

// A refused heartbeat is said once per kind, then in summaries (a member whose token
// was revoked heartbeats on, each refused, and would otherwise log a line per beat); the first
// accepted one says it is over. The self-fence still comes at the lease's end.
TEST_F(MembershipMachine, ARefusedTokenIsSaidOnceThenInSummariesAndTheLeaseStillRunsOut) {
  joined({0}, 2);
  m.take_log();
  for (int i = 0; i < 100; ++i) {  // 10 s of refusals, one per 100 ms
    exchange(refusal(HeartbeatStatus::GROUP_AUTHORIZATION_FAILED, "unknown token"));
    now += 95 * kMs;
  }
  auto log = m.take_log();
  ASSERT_EQ(log.size(), 2u) << "the refusal once, and the self-fence";
  EXPECT_NE(log[0].find("heartbeat refused: GROUP_AUTHORIZATION_FAILED: unknown token; asking again at each heartbeat"),
            std::string::npos)
      << log[0];
  EXPECT_NE(log[1].find("self-fenced"), std::string::npos) << log[1];
  EXPECT_EQ(m.counters().selfFences, 1);
  for (int i = 0; i < 210; ++i) {  // 21 s more: a summary at 30 s from the first line
    exchange(refusal(HeartbeatStatus::GROUP_AUTHORIZATION_FAILED, "unknown token"));
    now += 95 * kMs;
  }
  log = m.take_log();
  ASSERT_EQ(log.size(), 1u);
  EXPECT_NE(log[0].find("still heartbeat refused:"), std::string::npos) << log[0];
  exchange(refusal(HeartbeatStatus::UNSUPPORTED_PROTOCOL, "v1 only"));
  EXPECT_EQ(m.take_log().size(), 1u) << "another kind of refusal is said at once";
  exchange(answer(HeartbeatStatus::OK, 2, {0}));
  log = m.take_log();
  bool over = false;
  for (const auto& l : log) over = over || l.find("heartbeats accepted again after") != std::string::npos;
  EXPECT_TRUE(over) << ::testing::PrintToString(log);
}

TEST_F(MembershipMachine, ANotificationMakesTheNextHeartbeatImmediate) {
  joined({0});
  EXPECT_FALSE(m.wake_pending());
  m.on_notification();
  EXPECT_TRUE(m.wake_pending());
  EXPECT_EQ(m.counters().notifications, 1);
  EXPECT_TRUE(m.take_wake());
  EXPECT_FALSE(m.wake_pending());
}

TEST_F(MembershipMachine, ALeavingMemberSendsEpochMinusOneDrainsAndHasLeftWhenNothingIsHeld) {
  joined({0, 1});
  auto lease = m.take_shards(0, now);  // shard 0 is being read
  m.leave();
  EXPECT_EQ(m.take_events(), (std::vector<ShardEvent>{{Kind::Revoking, {0, 1}}}));
  EXPECT_TRUE(m.take_wake());
  auto req = m.next_request(now);
  EXPECT_EQ(req.memberEpoch, -1);
  EXPECT_EQ(req.leavingMemberEpoch, 1) << "the epoch it leaves from: a late copy of this leave changes nothing";
  EXPECT_TRUE(req.ownedShards.empty());
  EXPECT_EQ(revoking_in(req), (decltype(revoking_in(req)){{0, ShardAssignmentState::DRAINING},
                                                           {1, ShardAssignmentState::REVOKED}}));
  m.on_response(answer(HeartbeatStatus::OK, -1), now);
  EXPECT_FALSE(m.left()) << "shard 0 is still being read";
  m.release(lease.shards);
  auto last = m.next_request(now);
  EXPECT_EQ(revoking_in(last), (decltype(revoking_in(last)){{0, ShardAssignmentState::REVOKED}}));
  m.on_response(answer(HeartbeatStatus::OK, -1), now);
  EXPECT_TRUE(m.left());
  EXPECT_FALSE(m.may_process(now));
}

TEST_F(MembershipMachine, ALeavingMemberTheCoordinatorNoLongerKnowsHasLeft) {
  joined({0});
  m.leave();
  exchange(refusal(HeartbeatStatus::UNKNOWN_MEMBER_ID, "gone"));
  EXPECT_TRUE(m.left());
  EXPECT_EQ(m.counters().rejoins, 0) << "a leaving member does not come back";
}

TEST_F(MembershipMachine, WorkersSplitTheShardsAndNeverShareOne) {
  joined({0, 1, 2, 3});
  auto w0 = m.take_shards(0, now);
  auto w1 = m.take_shards(1, now);
  EXPECT_EQ(w0.shards, (std::vector<int32_t>{0, 2}));
  EXPECT_EQ(w1.shards, (std::vector<int32_t>{1, 3}));
  EXPECT_TRUE(m.take_shards(0, now).shards.empty()) << "held shards are not taken twice";
  EXPECT_EQ(m.next_request(now).runtimeConsumerCapacity.availableConcurrency, 0);
  m.release(w0.shards);
  EXPECT_EQ(m.take_shards(0, now).shards, (std::vector<int32_t>{0, 2}));
}

TEST_F(MembershipMachine, RequestIdsAreUniqueAndCarryTheIncarnation) {
  joined({0});
  const auto a = m.next_request(now).requestId;
  m.on_response(answer(HeartbeatStatus::OK, 1, {0}), now);
  const auto b = m.next_request(now).requestId;
  EXPECT_NE(a, b);
  EXPECT_NE(a.find("inc"), std::string::npos);
  Membership restarted{{"m", "other", 2, 0}};
  EXPECT_NE(restarted.next_request(now).requestId, a) << "a restart does not repeat an old requestId";
}

// A join the coordinator stored but whose answer was lost (a timeout) or said RETRY (its
// store deadline passed while the write went through) is sent again with the same requestId, so
// the coordinator replays its answer instead of taking it for a new incarnation of the id (which
// fences the first and holds its shards until its lease ends).
TEST_F(MembershipMachine, AnUnansweredJoinIsResentWithItsRequestIdUntilItIsAnswered) {
  const auto join = m.next_request(now);
  ASSERT_EQ(join.memberEpoch, 0);
  m.on_no_answer("timeout");
  EXPECT_EQ(m.next_request(now).requestId, join.requestId) << "after a timeout";
  m.on_response(refusal(HeartbeatStatus::RETRY, "store deadline"), now);
  EXPECT_EQ(m.next_request(now).requestId, join.requestId) << "after RETRY";
  m.on_response(answer(HeartbeatStatus::OK, 1, {0}), now);
  const auto beat = m.next_request(now);
  EXPECT_EQ(beat.memberEpoch, 1);
  EXPECT_NE(beat.requestId, join.requestId) << "answered: the next request is a new one";
  m.on_no_answer("timeout");
  EXPECT_NE(m.next_request(now).requestId, beat.requestId)
      << "only a join is resent as it was: a heartbeat's report may have changed meanwhile";
  // Fenced: the rejoin is a new request (the coordinator answered the last join already).
  m.on_response(refusal(HeartbeatStatus::FENCED_MEMBER_EPOCH, "stale"), now);
  const auto rejoin = m.next_request(now);
  EXPECT_EQ(rejoin.memberEpoch, 0);
  EXPECT_NE(rejoin.requestId, join.requestId);
  m.on_no_answer("timeout");
  m.leave();
  const auto leave = m.next_request(now);
  EXPECT_EQ(leave.memberEpoch, -1);
  EXPECT_NE(leave.requestId, rejoin.requestId) << "a leave is never taken for the join it follows";
}

// Three times in a row a member fenced again soon after it rejoined: the log says plainly
// that another process probably uses its member id.
TEST_F(MembershipMachine, BeingFencedAgainAndAgainIsSaidPlainlyInTheLog) {
  joined({0});
  for (int i = 0; i < 2; ++i) {
    exchange(refusal(HeartbeatStatus::FENCED_MEMBER_EPOCH, "stale"));
    exchange(answer(HeartbeatStatus::OK, 3 + i, {0}));
  }
  auto log = m.take_log();
  for (const auto& l : log) EXPECT_EQ(l.find("another process"), std::string::npos) << "not after two: " << l;
  exchange(refusal(HeartbeatStatus::FENCED_MEMBER_EPOCH, "stale"));
  log = m.take_log();
  bool said = false;
  for (const auto& l : log) said = said || l.find("another process is probably using member id 'm'") != std::string::npos;
  EXPECT_TRUE(said);
  now += (Membership::kRepeatedFenceWindowMs + 1) * kMs;  // fences far apart say nothing
  exchange(answer(HeartbeatStatus::OK, 9, {0}));
  m.take_log();
  exchange(refusal(HeartbeatStatus::FENCED_MEMBER_EPOCH, "stale"));
  for (const auto& l : m.take_log()) EXPECT_EQ(l.find("another process"), std::string::npos) << l;
}

// A join refused UNRELEASED_INSTANCE_ID (another member id holds the instance live) is
// tried again at the interval: a crashed holder's lease ends and the join goes through. Refused for
// longer than a lease plus two intervals and a grace, the holder is alive: the member stops for
// good, fatal() naming the instance, and nothing more is sent or read.
TEST(StaticMembership, RefusedJoinsAreTriedForALeaseThenTheMemberStopsForGood) {
  auto refused = [] {
    HeartbeatResponse r = answer(HeartbeatStatus::OK, 0);
    r.status = HeartbeatStatus::UNRELEASED_INSTANCE_ID;
    r.assignment.reset();
    r.message = "instance pod-2 is held by live member 's.1' (its lease ends in 1500ms unless it heartbeats)";
    r.errorField = "instanceId";
    return r;
  };
  const int64_t giveUpMs = kLeaseMs + 2 * kIntervalMs + Membership::kInstanceGraceMs;
  {  // a crashed holder: its lease ends, the join goes through
    Membership m{{"s.2", "inc", 1, 0, "pod-2"}};
    int64_t now = 1000 * kMs;
    for (int i = 0; i < 5; ++i, now += kIntervalMs * kMs) {
      EXPECT_EQ(m.next_request(now).memberEpoch, 0);
      const auto r = m.on_response(refused(), now);
      EXPECT_EQ(r.waitMs, kIntervalMs) << "tried again at the interval";
    }
    EXPECT_TRUE(m.fatal().empty());
    m.next_request(now);
    m.on_response(answer(HeartbeatStatus::OK, 1, {0}), now);
    EXPECT_TRUE(m.may_read(0, now));
    EXPECT_TRUE(m.fatal().empty());
  }
  {  // a live holder: refused for longer than a lease
    Membership m{{"s.2", "inc", 1, 0, "pod-2"}};
    const int64_t start = 1000 * kMs;
    int64_t now = start;
    while (m.fatal().empty() && now - start <= (giveUpMs + kIntervalMs) * kMs) {
      m.next_request(now);
      m.on_response(refused(), now);
      if (m.fatal().empty()) now += kIntervalMs * kMs;
    }
    ASSERT_FALSE(m.fatal().empty());
    EXPECT_GE(now - start, giveUpMs * kMs) << "not before a lease of refusals";
    EXPECT_NE(m.fatal().find("instance pod-2"), std::string::npos) << m.fatal();
    EXPECT_NE(m.fatal().find("another process of this instance is running"), std::string::npos) << m.fatal();
    EXPECT_FALSE(m.may_process(now));
  }
}

// A leave nobody answers (no coordinator at all) ends after three tries once nothing is
// in the handler, instead of the stop waiting out its timeout; not while a record is in flight.
TEST_F(MembershipMachine, ALeaveNobodyAnswersEndsAfterThreeTriesOnceNothingIsInFlight) {
  joined({0});
  const auto lease = m.take_shards(0, now);
  ASSERT_EQ(lease.shards, (std::vector<int32_t>{0}));
  ASSERT_TRUE(m.begin_record(0, now));
  m.leave();
  for (int i = 0; i < 5; ++i) {
    m.next_request(now);
    m.on_no_answer("connection refused from http://x");
  }
  EXPECT_FALSE(m.left()) << "a record is still in the handler";
  m.record_done(0, "1-0", true);
  m.release(lease.shards);
  m.next_request(now);
  m.on_no_answer("connection refused from http://x");
  EXPECT_TRUE(m.left());
  EXPECT_TRUE(m.left_unanswered());
}

// ---- SPEC §6 traps -----------------------------------------------------------------------

TEST_F(MembershipMachine, Trap_AShardWithAReadStillOutstandingIsNotReportedRevoked) {
  joined({0});
  auto lease = m.take_shards(0, now);  // an XREADGROUP on shard 0 may be blocking
  exchange(answer(HeartbeatStatus::REVOKE_PENDING, 2, {}));
  for (int i = 0; i < 3; ++i) {
    auto req = m.next_request(now);
    ASSERT_EQ(revoking_in(req), (decltype(revoking_in(req)){{0, ShardAssignmentState::DRAINING}}))
        << "no record is in flight, but the read has not returned";
    m.on_response(answer(HeartbeatStatus::REVOKE_PENDING, 2, {}), now);
  }
  m.release(lease.shards);
  auto req = m.next_request(now);
  EXPECT_EQ(revoking_in(req), (decltype(revoking_in(req)){{0, ShardAssignmentState::REVOKED}}));
}

TEST_F(MembershipMachine, Trap_AShardWithRecordsInTheHandlerIsNotReportedRevoked) {
  joined({0});
  auto lease = m.take_shards(0, now);
  ASSERT_TRUE(m.begin_record(0, now).has_value());
  exchange(answer(HeartbeatStatus::REVOKE_PENDING, 2, {}));
  m.release(lease.shards);  // the read returned; the handler still runs
  auto req = m.next_request(now);
  ASSERT_EQ(req.revokingShards.size(), 1u);
  EXPECT_EQ(req.revokingShards[0].state, ShardAssignmentState::DRAINING);
  EXPECT_EQ(req.revokingShards[0].inFlight, 1);
  m.on_response(answer(HeartbeatStatus::REVOKE_PENDING, 2, {}), now);
  m.record_done(0, "1-0", true);
  EXPECT_EQ(m.next_request(now).revokingShards.at(0).state, ShardAssignmentState::REVOKED);
}

TEST_F(MembershipMachine, Trap_AReadNeverBlocksPastTheSelfFenceDeadline) {
  joined({0});  // answered for a request sent at t0: deadline t0 + 1.5 s
  const int64_t t0 = now - 5 * kMs;
  auto lease = m.take_shards(0, now);
  ASSERT_EQ(lease.deadlineNs, t0 + 1500 * kMs);
  EXPECT_EQ(Membership::block_ms(lease, now, 500), 500) << "far from the deadline: the cap";
  EXPECT_EQ(Membership::block_ms(lease, t0 + 1200 * kMs, 500), 280) << "300 ms left, 20 ms to spare";
  EXPECT_LT(Membership::block_ms(lease, t0 + 1490 * kMs, 500), 1) << "too close: do not read";
}

TEST_F(MembershipMachine, Trap_TheSelfFenceDeadlineCountsFromWhenTheRequestWasSentNotAnswered) {
  m.next_request(now);
  const int64_t sent = now;
  now += 1200 * kMs;  // a slow answer
  m.on_response(answer(HeartbeatStatus::OK, 1, {0}), sent);
  EXPECT_EQ(m.deadline_ns(), sent + 1500 * kMs) << "not the arrival + 1.5 s";
  EXPECT_TRUE(m.may_process(sent + 1499 * kMs));
  EXPECT_FALSE(m.may_process(sent + 1500 * kMs));
  // An answer to an older request arriving late never moves the deadline back.
  m.on_response(answer(HeartbeatStatus::OK, 1, {0}), sent - 900 * kMs);
  EXPECT_EQ(m.deadline_ns(), sent + 1500 * kMs);
}

TEST_F(MembershipMachine, Trap_ARecordsStartTimeIsTheTimeTheDeadlineWasCheckedAt) {
  joined({0});
  const int64_t deadline = m.deadline_ns();
  auto lease = m.take_shards(0, now);
  auto start = m.begin_record(0, deadline - 1);
  ASSERT_TRUE(start.has_value());
  EXPECT_EQ(*start, deadline - 1) << "the handler gets the time that passed the check";
  m.record_done(0, "1-0", true);
  EXPECT_FALSE(m.begin_record(0, deadline).has_value()) << "at the deadline nothing starts";
  EXPECT_TRUE(m.self_fenced());
  EXPECT_EQ(m.counters().selfFences, 1);
  EXPECT_EQ(m.take_events(), (std::vector<ShardEvent>{{Kind::Lost, {0}}}));
  m.release(lease.shards);
}

// A pause between the last check and the XREADGROUP (SIGSTOP) makes a read go out "in time" and
// come back after the shard is gone: its records are counted as left for the next owner, and the
// reader's last check before a send (block_ms on the lease) refuses once the deadline has passed.
TEST_F(MembershipMachine, ARecordsReadComingBackAfterTheDeadlineAreCountedAsLeftForTheNextOwner) {
  joined({0});
  const int64_t deadline = m.deadline_ns();
  auto lease = m.take_shards(0, now);
  EXPECT_GE(Membership::block_ms(lease, deadline - 100 * kMs, 1000), 1) << "in time: the read may go out";
  EXPECT_LT(Membership::block_ms(lease, deadline, 1000), 1) << "the check just before the send refuses";
  // The read went out before the deadline; the process froze; it comes back past it with 3 records.
  EXPECT_FALSE(m.begin_record(0, deadline + 2000 * kMs).has_value());
  EXPECT_EQ(m.not_started(0, 3, deadline + 2000 * kMs), 3u);
  EXPECT_EQ(m.counters().leftAfterLoss, 3);
  m.release(lease.shards);
}

TEST_F(MembershipMachine, RecordsLeftOnAShardBeingRevokedAreNotCountedAsLeftForTheNextOwner) {
  joined({0, 1});
  auto lease = m.take_shards(1, now);
  exchange(answer(HeartbeatStatus::REVOKE_PENDING, 2, {0}));
  EXPECT_FALSE(m.begin_record(1, now).has_value());
  EXPECT_EQ(m.not_started(1, 4, now), 0u) << "pending before the revoke is reported: claimed first by the next owner";
  EXPECT_EQ(m.counters().leftAfterLoss, 0);
  m.release(lease.shards);
}

TEST_F(MembershipMachine, RecordsLeftOnAShardDroppedByAFenceAreCountedAsLeftForTheNextOwner) {
  joined({0});
  auto lease = m.take_shards(0, now);
  exchange(refusal(HeartbeatStatus::FENCED_MEMBER_EPOCH, "member was EXPIRED", "memberEpoch"));
  EXPECT_FALSE(m.begin_record(0, now).has_value());
  EXPECT_EQ(m.not_started(0, 2, now), 2u);
  EXPECT_EQ(m.counters().leftAfterLoss, 2);
  m.release(lease.shards);
}

TEST_F(MembershipMachine, Trap_AfterASelfFenceTheMemberClaimsItsOwnPendingEntriesBeforeReadingAgain) {
  joined({0});
  auto lease = m.take_shards(0, now);
  ASSERT_EQ(lease.toClaim, (std::vector<int32_t>{0})) << "a new shard is claimed first";
  m.claimed(0);
  m.release(lease.shards);
  EXPECT_TRUE(m.take_shards(0, now).toClaim.empty()) << "claimed once is enough";
  m.release({0});

  now = m.deadline_ns();  // no heartbeat answered in time
  EXPECT_TRUE(m.take_shards(0, now).shards.empty());
  EXPECT_TRUE(m.self_fenced());
  EXPECT_EQ(m.take_events(), (std::vector<ShardEvent>{{Kind::Lost, {0}}}));
  EXPECT_FALSE(m.may_read(0, now));

  exchange(answer(HeartbeatStatus::OK, 1, {0}));
  EXPECT_FALSE(m.self_fenced());
  EXPECT_EQ(m.take_events(), (std::vector<ShardEvent>{{Kind::Assigned, {0}}})) << "reading resumes";
  auto after = m.take_shards(0, now);
  EXPECT_EQ(after.toClaim, (std::vector<int32_t>{0})) << "records read before the fence are pending for us";
}

TEST_F(MembershipMachine, Trap_AfterARejoinTheMemberClaimsItsOwnPendingEntriesBeforeReadingAgain) {
  joined({0});
  auto lease = m.take_shards(0, now);
  m.claimed(0);
  m.release(lease.shards);
  exchange(refusal(HeartbeatStatus::FENCED_MEMBER_EPOCH, "stale"));
  exchange(answer(HeartbeatStatus::OK, 2, {0}));
  EXPECT_EQ(m.take_shards(0, now).toClaim, (std::vector<int32_t>{0}));
}

TEST_F(MembershipMachine, ABusyShardOfAFencedMemberIsForgottenOnlyWhenItsWorkerLetsGo) {
  joined({0});
  auto lease = m.take_shards(0, now);
  exchange(refusal(HeartbeatStatus::FENCED_MEMBER_EPOCH, "stale"));
  EXPECT_FALSE(m.begin_record(0, now).has_value());
  exchange(answer(HeartbeatStatus::OK, 2, {0}));
  EXPECT_TRUE(m.owned().empty()) << "not taken again while the old read is outstanding";
  m.release(lease.shards);
  exchange(answer(HeartbeatStatus::OK, 2, {0}));
  EXPECT_EQ(m.owned(), (std::vector<int32_t>{0}));
  EXPECT_EQ(m.take_shards(0, now).toClaim, (std::vector<int32_t>{0}));
}

TEST_F(MembershipMachine, NothingIsReadBeforeTheFirstAnsweredHeartbeat) {
  EXPECT_TRUE(m.take_shards(0, now).shards.empty());
  EXPECT_FALSE(m.self_fenced()) << "never a member, so nothing to fence";
  EXPECT_FALSE(m.may_process(now));
}

TEST_F(MembershipMachine, TheHeartbeatSideNoticesAPassedDeadlineWhenNoWorkerLooks) {
  joined({0, 1});
  now = m.deadline_ns() + kMs;
  m.next_request(now);
  EXPECT_TRUE(m.self_fenced());
  EXPECT_EQ(m.take_events(), (std::vector<ShardEvent>{{Kind::Lost, {0, 1}}}));
}

TEST_F(MembershipMachine, AFailedAckOrAThrowingHandlerStopsTheBatchAndTheRecordIsClaimedAgain) {
  joined({0});
  auto lease = m.take_shards(0, now);
  m.claimed(0);
  ASSERT_TRUE(m.begin_record(0, now));
  EXPECT_FALSE(m.record_done(0, "5-0", /*acked=*/false)) << "the rest of the batch waits";
  m.release(lease.shards);
  auto next = m.take_shards(0, now);
  EXPECT_EQ(next.toClaim, (std::vector<int32_t>{0})) << "claimed again before anything later is read";
  m.claimed(0);
  ASSERT_TRUE(m.begin_record(0, now));
  m.record_failed(0);
  m.release(next.shards);
  EXPECT_EQ(m.take_shards(0, now).toClaim, (std::vector<int32_t>{0}));
  EXPECT_EQ(m.next_request(now).runtimeConsumerCapacity.availableConcurrency, 1);
}

TEST_F(MembershipMachine, AFailedRecordsShardWaitsOutItsBackoffWhileTheOtherShardsGoOn) {
  joined({0, 1, 2});  // worker 0: shards 0 and 2; worker 1: shard 1
  auto lease = m.take_shards(0, now);
  ASSERT_EQ(lease.shards, (std::vector<int32_t>{0, 2}));
  m.claimed(0);
  m.claimed(2);
  ASSERT_TRUE(m.begin_record(0, now));
  m.record_failed(0, now, 200);
  m.release(lease.shards);
  auto during = m.take_shards(0, now + 50 * kMs);
  EXPECT_EQ(during.shards, (std::vector<int32_t>{2})) << "nothing later on shard 0 is read meanwhile";
  EXPECT_EQ(during.retryAtNs, now + 200 * kMs);
  EXPECT_EQ(Membership::block_ms(during, now + 50 * kMs, 500), 150) << "a read does not outlast the backoff";
  m.release(during.shards);
  EXPECT_EQ(m.take_shards(1, now + 50 * kMs).shards, (std::vector<int32_t>{1})) << "another worker's shard goes on";
  auto after = m.take_shards(0, now + 200 * kMs);
  EXPECT_EQ(after.shards, (std::vector<int32_t>{0, 2}));
  EXPECT_EQ(after.toClaim, (std::vector<int32_t>{0})) << "the failed record leads the claim";
  EXPECT_EQ(after.retryAtNs, 0);
  EXPECT_EQ(m.counters().failedAttempts, 1);
  EXPECT_EQ(m.counters().retried, 1);
}

// A shard whose stream does not exist (deleted after it retired, or lost with Redis's data): the
// member does not create it, says so once, looks again a second later, and a revocation of it
// is reported at once (nothing was read, nothing is in flight).
TEST_F(MembershipMachine, AShardWhoseStreamIsMissingIsLookedAtEverySecondSaidOnceAndHandedBackAtOnce) {
  joined({0, 1});  // worker 0: shard 0; worker 1: shard 1
  auto lease = m.take_shards(0, now);
  ASSERT_EQ(lease.toClaim, (std::vector<int32_t>{0}));
  EXPECT_TRUE(m.stream_missing(0, now)) << "the first time: say it";
  m.release(lease.shards);
  EXPECT_TRUE(m.take_shards(0, now + 500 * kMs).shards.empty()) << "not looked at again for a second";
  EXPECT_EQ(m.take_shards(1, now).shards, (std::vector<int32_t>{1})) << "the other shard goes on";
  m.release({1});
  now += Membership::kMissingStreamRetryMs * kMs;
  exchange(answer(HeartbeatStatus::OK, 1, {0, 1}));  // the lease renewed meanwhile
  auto again = m.take_shards(0, now);
  ASSERT_EQ(again.toClaim, (std::vector<int32_t>{0}));
  EXPECT_FALSE(m.stream_missing(0, now)) << "still missing: said already";
  m.release(again.shards);
  // It exists again (the coordinator provisioned it): claimed; a later loss is said again.
  now += Membership::kMissingStreamRetryMs * kMs;
  exchange(answer(HeartbeatStatus::OK, 1, {0, 1}));
  auto back = m.take_shards(0, now);
  ASSERT_EQ(back.shards, (std::vector<int32_t>{0}));
  m.claimed(0);
  m.release(back.shards);
  auto once_more = m.take_shards(0, now);
  EXPECT_TRUE(m.stream_missing(0, now)) << "missing again after it was there: said again";
  m.release(once_more.shards);
  // Revoked while missing: nothing holds it, REVOKED in the next request.
  m.on_response(answer(HeartbeatStatus::REVOKE_PENDING, 2, {1}), now);
  const auto req = m.next_request(now);
  EXPECT_EQ(revoking_in(req), (decltype(revoking_in(req)){{0, ShardAssignmentState::REVOKED}}));
}

TEST_F(MembershipMachine, ADeadLetteredRecordCountsAsProcessedAndTheBatchGoesOn) {
  joined({0});
  auto lease = m.take_shards(0, now);
  m.claimed(0);
  ASSERT_TRUE(m.begin_record(0, now));
  EXPECT_TRUE(m.record_dead_lettered(0, "7-0"));
  EXPECT_EQ(m.counters().deadLettered, 1);
  EXPECT_EQ(m.counters().failedAttempts, 1) << "its last attempt failed";
  EXPECT_EQ(m.counters().processed, 1);
  ASSERT_TRUE(m.begin_record(0, now));
  EXPECT_TRUE(m.record_dead_lettered(0, "8-0", /*attempted=*/false));
  EXPECT_EQ(m.counters().failedAttempts, 1) << "delivered too often: not tried again";
  m.release(lease.shards);
  EXPECT_TRUE(m.take_shards(0, now).toClaim.empty());
}

TEST(RecordFailures, RetriedWithADoublingCappedBackoffUntilTheMaximumDeliveriesThenDeadLettered) {
  const RetryPolicy p{5, 100, 300};
  std::vector<int64_t> waits;
  for (int64_t d = 1; d <= 4; ++d) {
    const auto v = judge_failure(d, false, p);
    EXPECT_FALSE(v.deadLetter) << d;
    waits.push_back(v.retryInMs);
  }
  EXPECT_EQ(waits, (std::vector<int64_t>{100, 200, 300, 300}));
  EXPECT_TRUE(judge_failure(5, false, p).deadLetter) << "the 5th failed delivery is the last";
  EXPECT_TRUE(judge_failure(9, false, p).deadLetter);
  EXPECT_TRUE(judge_failure(1, true, p).deadLetter) << "dead-letter now skips the retries";
  EXPECT_FALSE(over_deliveries(5, p));
  EXPECT_TRUE(over_deliveries(6, p)) << "failed its last attempt before a crash: no sixth attempt";
  EXPECT_FALSE(judge_failure(1, false, RetryPolicy{}).deadLetter);
  EXPECT_EQ(judge_failure(1, false, RetryPolicy{}).retryInMs, 100);
}

TEST_F(MembershipMachine, ProgressIsReportedAndRefreshedAtMostOnceASecond) {
  joined({0});
  EXPECT_EQ(m.progress_due({0}, now), (std::vector<int32_t>{0}));
  EXPECT_TRUE(m.progress_due({0}, now + 999 * kMs).empty());
  EXPECT_EQ(m.progress_due({0}, now + 1000 * kMs), (std::vector<int32_t>{0}));
  m.set_progress(0, 3, 7);
  auto lease = m.take_shards(0, now);
  m.claimed(0);
  m.begin_record(0, now);
  m.record_done(0, "9-1", true);
  m.release(lease.shards);
  auto req = m.next_request(now);
  ASSERT_EQ(req.shardProgress.size(), 1u);
  EXPECT_EQ(req.shardProgress[0].lastDeliveredId, "9-1");
  EXPECT_EQ(req.shardProgress[0].pending, 3);
  EXPECT_EQ(req.shardProgress[0].lag, 7);
  EXPECT_EQ(m.counters().processed, 1);
}

// A member that fenced itself and then leaves must not read again because its leave was answered
// OK: the coordinator answers a leave of a member it already expired OK (a no-op), which grants
// nothing. Only REVOKE_PENDING (the coordinator still holds what it drains) renews the deadline.
TEST_F(MembershipMachine, ALeavesOkAnswerDoesNotLiftASelfFenceButRevokePendingDoes) {
  joined({0, 1});
  auto lease = m.take_shards(0, now);  // a handler holds shard 0
  now = m.deadline_ns();
  m.next_request(now);
  ASSERT_TRUE(m.self_fenced());
  m.leave();
  exchange(answer(HeartbeatStatus::OK, -1));
  EXPECT_TRUE(m.self_fenced()) << "an OK to a leave grants nothing to read";
  EXPECT_FALSE(m.may_process(now));
  exchange(answer(HeartbeatStatus::REVOKE_PENDING, -1));
  EXPECT_FALSE(m.self_fenced()) << "the coordinator still holds what it drains";
  m.release(lease.shards);
}

// A worker blocked in a read on a shard that is given up must return at once: the
// machine names the worker whose read to cut short, for a revocation, a leave and a fence alike,
// and only workers holding such a shard.
TEST(MembershipInterrupts, AWorkerReadingAShardThatIsGivenUpOrDroppedIsToldToStopWaiting) {
  Membership m{{"m", "inc", 2, 0}};
  int64_t now = 1000 * kMs;
  auto send = [&](const HeartbeatResponse& r) {
    m.next_request(now);
    m.on_response(r, now);
    now += 5 * kMs;
  };
  send(answer(HeartbeatStatus::OK, 1, {0, 1, 2, 3}));
  EXPECT_TRUE(m.take_interrupts().empty());
  auto w0 = m.take_shards(0, now);  // worker 0 reads 0 and 2
  auto w1 = m.take_shards(1, now);  // worker 1 reads 1 and 3
  ASSERT_EQ(w0.shards, (std::vector<int32_t>{0, 2}));
  send(answer(HeartbeatStatus::REVOKE_PENDING, 1, {0, 1, 3}));  // give up 2
  EXPECT_EQ(m.take_interrupts(), (std::vector<int>{0})) << "only the worker holding shard 2";
  EXPECT_TRUE(m.take_interrupts().empty()) << "read and cleared";
  m.release(w0.shards);
  send(answer(HeartbeatStatus::REVOKE_PENDING, 1, {0, 1}));  // give up 3: worker 1 holds it
  EXPECT_EQ(m.take_interrupts(), (std::vector<int>{1}));
  m.release(w1.shards);
  send(answer(HeartbeatStatus::OK, 2, {0, 1}));
  m.take_interrupts();
  w0 = m.take_shards(0, now);
  m.leave();  // everything is given up
  EXPECT_EQ(m.take_interrupts(), (std::vector<int>{0})) << "worker 1 holds nothing now";
  m.release(w0.shards);
  Membership f{{"f", "inc", 2, 0}};
  f.next_request(now);
  f.on_response(answer(HeartbeatStatus::OK, 1, {0, 1}), now);
  auto l0 = f.take_shards(0, now);
  auto l1 = f.take_shards(1, now);
  f.next_request(now);
  f.on_response(refusal(HeartbeatStatus::FENCED_MEMBER_EPOCH, "fenced"), now);  // dropped
  EXPECT_EQ(f.take_interrupts(), (std::vector<int>{0, 1}));
  EXPECT_EQ(f.counters().readInterrupts, 2);
  f.release(l0.shards);
  f.release(l1.shards);
}


// The member's rack goes with its joins (a rejoin after a fence too), not with every
// heartbeat; a member without one sends none.
TEST(RackMembership, TheRackIsSentWithEveryJoinAndOnlyThen) {
  Membership::Options o{"m", "inc", 1, 0};
  o.rackId = "eu-west-1a";
  Membership r(o);
  int64_t now = 1000 * kMs;
  auto join = r.next_request(now);
  EXPECT_EQ(join.memberEpoch, 0);
  EXPECT_EQ(join.rackId, std::optional<std::string>("eu-west-1a"));
  r.on_response(answer(HeartbeatStatus::OK, 3, {0}), now);
  now += 1000 * kMs;
  auto beat = r.next_request(now);
  EXPECT_EQ(beat.memberEpoch, 3);
  EXPECT_FALSE(beat.rackId.has_value());
  r.on_response(answer(HeartbeatStatus::FENCED_MEMBER_EPOCH, 3, {}), now);
  auto again = r.next_request(now);
  EXPECT_EQ(again.memberEpoch, 0);
  EXPECT_EQ(again.rackId, std::optional<std::string>("eu-west-1a"));
  Membership none({"p", "inc", 1, 0});
  EXPECT_FALSE(none.next_request(now).rackId.has_value());
}

// A static member (rule 12): every request names its instance, and a graceful leave is -2 (its
// shards wait for it); a plain member leaves with -1.
TEST(StaticMembership, EveryRequestCarriesTheInstanceAndTheLeaveIsMinusTwo) {
  Membership::Options o{"m", "inc", 1, 0};
  o.instanceId = "consumer-1";
  Membership s(o);
  int64_t now = 1000 * kMs;
  auto join = s.next_request(now);
  EXPECT_EQ(join.memberEpoch, 0);
  EXPECT_EQ(join.instanceId, std::optional<std::string>("consumer-1"));
  s.on_response(answer(HeartbeatStatus::OK, 3, {0}), now);
  s.leave();
  auto leave = s.next_request(now);
  EXPECT_EQ(leave.memberEpoch, -2);
  EXPECT_EQ(leave.instanceId, std::optional<std::string>("consumer-1"));
  EXPECT_EQ(leave.leavingMemberEpoch, std::optional<int32_t>(3));
  auto done = answer(HeartbeatStatus::OK, -2, {});
  s.on_response(done, now);
  EXPECT_TRUE(s.left()) << "the answer to -2 ends the leave as -1's does";

  Membership plain({"p", "inc", 1, 0});
  EXPECT_FALSE(plain.next_request(now).instanceId.has_value());
  plain.on_response(answer(HeartbeatStatus::OK, 3, {0}), now);
  plain.leave();
  EXPECT_EQ(plain.next_request(now).memberEpoch, -1);
}
}  // namespace
}  // namespace rsc::member

// ---- following the group's owner pod -------------------------------------------

namespace rsc::member {
namespace {

constexpr const char* kService = "https://rsc.prod.svc:8443";
constexpr const char* kPod0 = "https://rsc-0.rsc-pods.prod.svc:8443";
constexpr const char* kPod1 = "https://rsc-1.rsc-pods.prod.svc:8443";

TEST(OwnerFollower, TheNextCallGoesWhereTheLastAnswerSaysAndBackWhenItNamesNobody) {
  OwnerFollower f(kService, true);
  int64_t now = 5 * kMs;
  EXPECT_EQ(f.target(), kService) << "before any answer: the configured URL";
  EXPECT_TRUE(f.on_answer(kPod0, now));
  EXPECT_EQ(f.target(), kPod0);
  EXPECT_TRUE(f.direct());
  EXPECT_FALSE(f.on_answer(kPod0, now)) << "the same owner: nothing changes";
  // The owner moved: the old owner forwarded the call and named the new one; followed at once.
  EXPECT_TRUE(f.on_answer(kPod1, now));
  EXPECT_EQ(f.target(), kPod1);
  // No pod owns the group now (an answer without the header): back to the configured URL.
  EXPECT_TRUE(f.on_answer("", now));
  EXPECT_EQ(f.target(), kService);
  EXPECT_FALSE(f.direct());
  // Naming the configured URL itself is no owner to follow.
  EXPECT_FALSE(f.on_answer(kService, now));
  EXPECT_FALSE(f.direct());
}

TEST(OwnerFollower, AnOwnerThatDoesNotAnswerIsLeftAtOnceAndAvoidedForAWhile) {
  OwnerFollower f(kService, true);
  int64_t now = 5 * kMs;
  EXPECT_FALSE(f.on_failure(now)) << "a failure at the configured URL is an ordinary failure";
  f.on_answer(kPod0, now);
  EXPECT_TRUE(f.on_failure(now)) << "the owner died: the call goes again, at once, to the configured URL";
  EXPECT_EQ(f.target(), kService);
  // The configured URL's pod still names the dead pod (its registration has not run out yet): not
  // followed again until kAvoidMs has passed, so each heartbeat does not fail once first.
  now += 1000 * kMs;
  EXPECT_FALSE(f.on_answer(kPod0, now));
  EXPECT_EQ(f.target(), kService);
  // Another owner is followed at once.
  EXPECT_TRUE(f.on_answer(kPod1, now));
  EXPECT_EQ(f.target(), kPod1);
  f.on_answer("", now);
  // After the window the first pod is tried again (it may be back, or reachable now).
  now += OwnerFollower::kAvoidMs * kMs;
  EXPECT_TRUE(f.on_answer(kPod0, now));
  EXPECT_EQ(f.target(), kPod0);
}

TEST(OwnerFollower, FollowingOffOrAnotherSchemeKeepsTheConfiguredUrl) {
  OwnerFollower off(kService, false);
  EXPECT_FALSE(off.on_answer(kPod0, 0));
  EXPECT_EQ(off.target(), kService);
  EXPECT_FALSE(off.on_failure(0));
  OwnerFollower tls(kService, true);
  EXPECT_FALSE(tls.on_answer("http://10.0.0.5:8080", 0)) << "never from https down to http";
  EXPECT_EQ(tls.target(), kService);
  EXPECT_FALSE(tls.on_answer("rsc-0:8443", 0)) << "not a URL";
  OwnerFollower plain("http://127.0.0.1:8080", true);
  EXPECT_TRUE(plain.on_answer("http://127.0.0.1:8081", 0)) << "loopback to loopback: one machine";
  // A pod that advertises its default 127.0.0.1 names a host only its own machine reaches: a client
  // that calls it by another name does not follow it (to whatever listens on its own loopback).
  OwnerFollower remote("http://rsc.example:8080", true);
  for (const char* local : {"http://127.0.0.1:8080", "http://localhost:8080", "http://[::1]:8080"}) {
    EXPECT_FALSE(remote.on_answer(local, 0)) << local;
    EXPECT_EQ(remote.target(), "http://rsc.example:8080");
  }
  EXPECT_TRUE(remote.on_answer("http://10.0.0.7:8080", 0));
}

class FollowingMembership : public ::testing::Test {
 protected:
  Membership m{{"m", "inc", 1, 0, "", kService, true}};
  int64_t now = 1000 * kMs;
  // A request to where the machine says, answered `latencyMs` later naming `owner`.
  Membership::Reaction exchange(const HeartbeatResponse& r, const std::string& owner, int64_t latencyMs = 5) {
    m.next_request(now);
    const int64_t sent = now;
    now += latencyMs * kMs;
    return m.on_response(r, sent, owner);
  }
};

TEST_F(FollowingMembership, HeartbeatsGoToTheOwnerAndAnOwnerMoveCostsNoErrorRoundTrip) {
  EXPECT_EQ(m.coordinator(), kService);
  exchange(answer(HeartbeatStatus::OK, 1, {0, 1}), kPod0);
  EXPECT_EQ(m.coordinator(), kPod0);
  // A pod joined and took the group: pod 0 forwarded this heartbeat and the answer names pod 1.
  auto r = exchange(answer(HeartbeatStatus::OK, 1, {0, 1}), kPod1);
  EXPECT_TRUE(r.answered);
  EXPECT_EQ(m.coordinator(), kPod1);
  EXPECT_EQ(m.counters().heartbeatFailures, 0);
  // A RETRY that names the owner (a pod that was forwarded the call but no longer serves the
  // group) moves the next try there.
  HeartbeatResponse retry = refusal(HeartbeatStatus::RETRY, "forwarded by pod a, but pod c serves the group now");
  exchange(retry, kPod0);
  EXPECT_EQ(m.coordinator(), kPod0);
}

TEST_F(FollowingMembership, AnOwnerThatDiesCostsOneUnansweredCallAndNoLease) {
  exchange(answer(HeartbeatStatus::OK, 1, {0, 1}), kPod0);
  ASSERT_EQ(m.coordinator(), kPod0);
  const int64_t deadline = m.deadline_ns();
  m.next_request(now);
  now += 3 * kMs;  // connection refused: the pod was SIGKILLed
  auto r = m.on_no_answer("connection refused", now);
  EXPECT_FALSE(r.answered);
  EXPECT_EQ(r.waitMs, 0) << "sent again at once, to the configured URL";
  EXPECT_EQ(m.coordinator(), kService);
  EXPECT_EQ(m.counters().ownerFallbacks, 1);
  EXPECT_EQ(m.counters().heartbeatFailures, 0) << "not a failed heartbeat: nothing backs off";
  EXPECT_EQ(m.deadline_ns(), deadline) << "the shards are kept: the self-fence clock is untouched";
  EXPECT_EQ(m.owned(), (std::vector<int32_t>{0, 1}));
  auto logged = m.take_log();
  ASSERT_FALSE(logged.empty());
  EXPECT_NE(logged.back().find(kPod0), std::string::npos) << logged.back();
  // The configured URL answers (another pod, which forwards to the new owner, pod 1).
  exchange(answer(HeartbeatStatus::OK, 1, {0, 1}), kPod1);
  EXPECT_EQ(m.coordinator(), kPod1);
  EXPECT_GT(m.deadline_ns(), deadline);
  // A second failure at the configured URL is an ordinary one, with its back-off.
  exchange(answer(HeartbeatStatus::OK, 1, {0, 1}), "");
  m.next_request(now);
  auto again = m.on_no_answer("connection refused", now);
  EXPECT_GT(again.waitMs, 0);
  EXPECT_EQ(m.counters().heartbeatFailures, 1);
}

TEST_F(FollowingMembership, AnUnreachableOwnerIsNotTriedOnEveryHeartbeat) {
  // The pods' addresses are not reachable from here: the first direct call fails, the rest go to
  // the Service until the avoid window ends, though each answer names the owner.
  exchange(answer(HeartbeatStatus::OK, 1, {0}), kPod0);
  m.next_request(now);
  m.on_no_answer("timed out", now);
  for (int i = 0; i < 20; ++i) {
    EXPECT_EQ(m.coordinator(), kService) << i;
    exchange(answer(HeartbeatStatus::OK, 1, {0}), kPod0);
    now += kIntervalMs * kMs;
  }
  EXPECT_EQ(m.counters().ownerFallbacks, 1);
}

TEST_F(FollowingMembership, ALeaveWhoseOwnerDiesIsSentAgainWithoutCountingAsUnanswered) {
  exchange(answer(HeartbeatStatus::OK, 1, {}), kPod0);
  m.leave();
  auto leave = m.next_request(now);
  EXPECT_EQ(leave.memberEpoch, -1);
  for (int i = 0; i < Membership::kUnansweredLeaveAttempts - 1; ++i) {
    m.next_request(now);
    m.on_no_answer("refused", now);
  }
  EXPECT_FALSE(m.left()) << "the owner's failure is not one of the unanswered tries";
  auto again = m.next_request(now);
  EXPECT_EQ(again.memberEpoch, -1);
  m.on_response(answer(HeartbeatStatus::OK, -1), now, kPod1);
  EXPECT_TRUE(m.left());
  EXPECT_FALSE(m.left_unanswered());
}

// A member whose kept-alive connection sits on a pod that cannot place its
// group went on asking that same pod. Falling back to the configured URL, or told RETRY there with
// no owner named, the next call opens a new connection (a Service places it afresh).
TEST_F(FollowingMembership, FallingBackToTheServiceOrARetryNamingNobodyThereOpensANewConnection) {
  auto r = exchange(answer(HeartbeatStatus::OK, 1, {0, 1}), kPod0);
  EXPECT_FALSE(r.reconnect) << "following an owner: its own connection";
  r = exchange(answer(HeartbeatStatus::OK, 1, {0, 1}), kPod0);
  EXPECT_FALSE(r.reconnect) << "a steady answer keeps the connection";
  m.next_request(now);
  r = m.on_no_answer("connection refused", now);
  EXPECT_TRUE(r.reconnect) << "back to the Service after the owner failed";
  EXPECT_EQ(m.coordinator(), kService);
  r = exchange(answer(HeartbeatStatus::OK, 1, {0, 1}), "");
  EXPECT_FALSE(r.reconnect) << "an answer from the Service naming nobody: nothing wrong with the connection";
  r = exchange(refusal(HeartbeatStatus::RETRY, "this pod's registration has lapsed"), "");
  EXPECT_TRUE(r.reconnect) << "RETRY with no owner named, at the Service: another pod may serve";
  EXPECT_FALSE(r.answered);
  r = exchange(refusal(HeartbeatStatus::RETRY, "coordinator store unavailable"), kPod1);
  EXPECT_FALSE(r.reconnect) << "a RETRY that names the owner: go there";
  EXPECT_EQ(m.coordinator(), kPod1);
  r = exchange(answer(HeartbeatStatus::OK, 1, {0, 1}), "");
  EXPECT_TRUE(r.reconnect) << "the owner stopped naming itself: back to the Service, afresh";
  EXPECT_TRUE(r.answered);
  // With following off the same holds for the Service's connection.
  Membership off{{"m", "inc", 1, 0, "", kService, false}};
  off.next_request(now);
  EXPECT_FALSE(off.on_response(answer(HeartbeatStatus::OK, 1, {0}), now, kPod0).reconnect);
  off.next_request(now);
  EXPECT_TRUE(off.on_response(refusal(HeartbeatStatus::RETRY, "lapsed"), now, "").reconnect);
}

TEST_F(FollowingMembership, WithFollowingOffEveryCallGoesToTheConfiguredUrl) {
  Membership off{{"m", "inc", 1, 0, "", kService, false}};
  off.next_request(now);
  off.on_response(answer(HeartbeatStatus::OK, 1, {0}), now, kPod0);
  EXPECT_EQ(off.coordinator(), kService);
  off.next_request(now);
  EXPECT_GT(off.on_no_answer("refused", now).waitMs, 0);
  EXPECT_EQ(off.counters().ownerFallbacks, 0);
}

}  // namespace
}  // namespace rsc::member

// ---- a member that cannot read its data ---------------------------

namespace rsc::member {
namespace {

TEST(FailurePaceRule, WaitsDoubleUpToTheCapAndTheLogSaysTheFirstThenASummaryAtMostEvery30Seconds) {
  FailurePace p(100, 5000);
  int64_t now = 1000 * kMs;
  std::vector<int64_t> waits;
  std::vector<std::string> said;
  // One failure every 50 ms for 90 s: what a worker without backoff did (18 lines a second).
  for (int i = 0; i < 1800; ++i) {
    const auto s = p.failed("cannot read", "TLS handshake failed", now);
    if (i < 8) waits.push_back(s.waitMs);
    if (!s.say.empty()) said.push_back(s.say);
    now += 50 * kMs;
  }
  EXPECT_EQ(waits, (std::vector<int64_t>{100, 200, 400, 800, 1600, 3200, 5000, 5000}));
  ASSERT_EQ(said.size(), 3u) << "the first failure, then one summary per 30 s of the 90 s";
  EXPECT_NE(said[0].find("cannot read: TLS handshake failed"), std::string::npos) << said[0];
  EXPECT_NE(said[1].find("still cannot read"), std::string::npos) << said[1];
  EXPECT_NE(said[1].find("600 more failure(s) in the last 30 s"), std::string::npos) << said[1];
  EXPECT_NE(said[2].find("1201 since"), std::string::npos) << said[2];
  const auto back = p.recovered("Redis answers", now);
  EXPECT_NE(back.find("after 1800 failure(s) over 90 s"), std::string::npos) << back;
  EXPECT_EQ(p.recovered("Redis answers", now), "") << "said once";
  EXPECT_EQ(p.failed("cannot read", "again", now).waitMs, 100) << "a new run starts from the first wait";
}

TEST(DataPlaneGate, AMemberJoinsOnlyOnceRedisAnsweredAndSaysWhyOnceWhileItWaits) {
  Membership m({"m", "inc", 1, 0});
  int64_t now = 1000 * kMs;
  EXPECT_TRUE(m.must_probe()) << "nothing is sent before Redis answered";
  std::vector<std::string> log;
  int64_t waited = 0;
  for (int i = 0; i < 20; ++i) {  // 20 failed probes
    const int64_t w = m.data_plane_failed("127.0.0.1:6390: TLS handshake failed: certificate verify failed", now);
    EXPECT_GE(w, Membership::kDataPlaneFirstRetryMs);
    EXPECT_LE(w, Membership::kDataPlaneMaxRetryMs);
    waited += w;
    now += w * kMs;
    for (auto& l : m.take_log()) log.push_back(l);
    EXPECT_TRUE(m.must_probe());
  }
  EXPECT_GT(waited, 60'000) << "20 tries take over a minute, not a second";
  ASSERT_GE(log.size(), 1u);
  EXPECT_LE(log.size(), 4u) << "the first failure and a summary per 30 s";
  EXPECT_NE(log[0].find("does not join: cannot reach Redis: 127.0.0.1:6390: TLS handshake failed"), std::string::npos)
      << log[0];
  EXPECT_TRUE(m.owned().empty());
  m.data_plane_ok(now);
  EXPECT_FALSE(m.must_probe());
  EXPECT_EQ(m.next_request(now).memberEpoch, 0) << "joins now";
  const auto back = m.take_log();
  ASSERT_EQ(back.size(), 1u);
  EXPECT_NE(back[0].find("Redis answers again after 20 failure(s)"), std::string::npos) << back[0];
}

TEST(DataPlaneGate, WithTheCheckOffAMemberJoinsAtOnce) {
  Membership::Options o{"m", "inc", 1, 0};
  o.checkDataPlane = false;
  Membership m(o);
  EXPECT_FALSE(m.must_probe());
}

TEST(DataPlaneGate, AStopBeforeTheFirstJoinLeavesAtOnceWithNothingToSend) {
  Membership m({"m", "inc", 1, 0});
  m.data_plane_failed("connection refused", 1000 * kMs);
  m.leave();
  EXPECT_TRUE(m.left());
  EXPECT_FALSE(m.left_unanswered());
}

class SteppingOut : public ::testing::Test {
 protected:
  void SetUp() override {
    m.data_plane_ok(now);
    m.next_request(now);
    m.on_response(answer(HeartbeatStatus::OK, 3, {0, 1}), now);
    m.take_events();
    m.take_log();
  }
  // Reads fail every `everyMs` for `forMs` while heartbeats are answered (the coordinator is fine).
  void reads_fail(int64_t forMs, int64_t everyMs = 100) {
    for (int64_t t = 0; t < forMs; t += everyMs) {
      m.data_plane_failed("127.0.0.1:6390: WRONGPASS invalid username-password pair", now);
      now += everyMs * kMs;
      if (t % kIntervalMs == 0 && !m.stepped_out()) {
        m.next_request(now);
        m.on_response(answer(HeartbeatStatus::OK, 3, m.owned()), now);
      }
    }
  }
  Membership m{{"m", "inc", 2, 0}};
  int64_t now = 1000 * kMs;
};

TEST_F(SteppingOut, AMemberWhoseRedisFailsForALeaseHandsEveryShardBackAndJoinsAgainOnceRedisAnswers) {
  reads_fail(kLeaseMs - 200);
  EXPECT_FALSE(m.stepped_out()) << "a failure shorter than a lease is waited out";
  EXPECT_EQ(m.owned(), (std::vector<int32_t>{0, 1}));
  reads_fail(400);
  ASSERT_TRUE(m.stepped_out());
  const auto events = m.take_events();
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events.back(), (ShardEvent{Kind::Revoking, {0, 1}}));
  const auto log = m.take_log();
  bool said = false;
  for (const auto& l : log) said = said || l.find("hands its shards back") != std::string::npos;
  EXPECT_TRUE(said);
  const auto leave = m.next_request(now);
  EXPECT_EQ(leave.memberEpoch, -1);
  EXPECT_EQ(revoking_in(leave),
            (std::vector<std::pair<int32_t, ShardAssignmentState>>{{0, ShardAssignmentState::REVOKED},
                                                                   {1, ShardAssignmentState::REVOKED}}));
  m.on_response(answer(HeartbeatStatus::OK, -1), now);
  EXPECT_FALSE(m.left()) << "not gone: out until Redis answers";
  EXPECT_TRUE(m.owned().empty());
  EXPECT_EQ(m.epoch(), 0);
  EXPECT_TRUE(m.must_probe()) << "no join while Redis still fails";
  m.data_plane_failed("still WRONGPASS", now);
  EXPECT_TRUE(m.must_probe());
  m.data_plane_ok(now);
  EXPECT_FALSE(m.must_probe());
  EXPECT_FALSE(m.stepped_out());
  const auto join = m.next_request(now);
  EXPECT_EQ(join.memberEpoch, 0);
  m.on_response(answer(HeartbeatStatus::OK, 5, {1}), now);
  EXPECT_EQ(m.owned(), (std::vector<int32_t>{1}));
  EXPECT_TRUE(m.may_read(1, now));
}

TEST_F(SteppingOut, AnAnsweredCallWithinTheLeaseStartsTheCountAgain) {
  reads_fail(kLeaseMs - 200);
  m.data_plane_ok(now);
  reads_fail(kLeaseMs - 200);
  EXPECT_FALSE(m.stepped_out());
  EXPECT_EQ(m.owned(), (std::vector<int32_t>{0, 1}));
}

TEST_F(SteppingOut, AStaticMemberGivesItsShardsAwayToo) {
  Membership::Options o{"s", "inc", 1, 0};
  o.instanceId = "consumer-1";
  Membership s(o);
  s.data_plane_ok(now);
  s.next_request(now);
  s.on_response(answer(HeartbeatStatus::OK, 2, {0}), now);
  for (int64_t t = 0; t <= kLeaseMs; t += 100) s.data_plane_failed("connection refused", now + t * kMs);
  ASSERT_TRUE(s.stepped_out());
  EXPECT_EQ(s.next_request(now).memberEpoch, -1) << "-2 would keep its shards from members that can read them";
}

// Redis went silent (cut both ways) while a blocked read was out; the read
// failed only at its timeout, and a whole lease was counted from there (shards handed back 9-15 s
// after the cut). The failure counts from the failed call's send, and the heartbeat checks it.
TEST_F(SteppingOut, ASilentRedisIsCountedFromTheSendOfTheReadThatFailedAndJudgedAtEachHeartbeat) {
  const int64_t cut = now;
  auto beat = [&] {  // the coordinator answers: only Redis is gone
    const auto r = m.next_request(now);
    if (r.memberEpoch > 0) m.on_response(answer(HeartbeatStatus::OK, 3, m.owned()), now);
    return r;
  };
  for (int i = 0; i < 5; ++i) {  // the read sent at the cut is still blocked
    now += kIntervalMs * kMs;
    beat();
  }
  now = cut + (kLeaseMs - 300) * kMs;  // it times out late
  m.data_plane_failed("127.0.0.1:6390: timed out", now, cut);
  EXPECT_FALSE(m.stepped_out()) << "not a lease yet";
  now += 200 * kMs;  // the worker is blocked again in its next try; the heartbeat thread is not
  beat();
  EXPECT_FALSE(m.stepped_out());
  now += 150 * kMs;  // a lease and 50 ms after the read was sent
  EXPECT_EQ(beat().memberEpoch, -1) << "judged at the heartbeat, with no further failure reported: its shards go back";
  EXPECT_TRUE(m.stepped_out());
  bool said = false;
  for (const auto& l : m.take_log()) said = said || l.find("timed out") != std::string::npos;
  EXPECT_TRUE(said) << "the log names the latest failure";
}

TEST_F(SteppingOut, ACallThatFailsAtOnceCountsFromItsOwnTimeAsBefore) {
  m.data_plane_failed("connection refused", now, 0);
  const int64_t failed = now;
  while (now < failed + (kLeaseMs - 100) * kMs) {
    now += kIntervalMs * kMs / 3;
    if (m.next_request(now).memberEpoch > 0) m.on_response(answer(HeartbeatStatus::OK, 3, m.owned()), now);
  }
  EXPECT_FALSE(m.stepped_out());
  now = failed + (kLeaseMs + 10) * kMs;
  m.next_request(now);
  EXPECT_TRUE(m.stepped_out());
}

TEST_F(SteppingOut, TheUsersStopDuringTheHandBackEndsAsALeave) {
  reads_fail(kLeaseMs + 200);
  ASSERT_TRUE(m.stepped_out());
  m.leave();
  m.next_request(now);
  m.on_response(answer(HeartbeatStatus::OK, -1), now);
  EXPECT_TRUE(m.left());
}

TEST(HeartbeatFailureLog, AFailingCoordinatorIsSaidOnceThenInASummaryEvery30Seconds) {
  Membership m({"m", "inc", 1, 0});
  int64_t now = 1000 * kMs;
  int lines = 0;
  for (int i = 0; i < 600; ++i) {  // 60 s of a refused connection, a call every 100 ms
    m.next_request(now);
    m.on_no_answer("connection refused from http://x", now);
    for (const auto& l : m.take_log()) {
      ++lines;
      EXPECT_NE(l.find("connection refused from http://x"), std::string::npos) << l;
    }
    now += 100 * kMs;
  }
  EXPECT_EQ(lines, 2) << "the first failure, and one summary after 30 s (the next is due at 60 s)";
  m.next_request(now);
  m.on_response(answer(HeartbeatStatus::OK, 1, {}), now);
  const auto back = m.take_log();
  ASSERT_FALSE(back.empty());
  EXPECT_NE(back[0].find("heartbeats answered again after 600 failure(s)"), std::string::npos) << back[0];
}

TEST(CannotRead, ConnectionFailuresAndRefusalsOfTheClientCountNotRefusalsAboutAStream) {
  EXPECT_TRUE(cannot_read(true, "127.0.0.1:6390: connection refused"));
  EXPECT_TRUE(cannot_read(false, "WRONGPASS invalid username-password pair or user is disabled."));
  EXPECT_TRUE(cannot_read(false, "NOAUTH Authentication required."));
  EXPECT_TRUE(cannot_read(false, "NOPERM this user has no permissions to run the 'xreadgroup' command"));
  EXPECT_FALSE(cannot_read(false, "NOGROUP No such key 'orders:0' or consumer group 'billing'"));
  EXPECT_FALSE(cannot_read(false, "WRONGTYPE Operation against a key holding the wrong kind of value"));
}

}  // namespace
}  // namespace rsc::member
