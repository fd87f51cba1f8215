// Who should hear of a change at once. After a stored step, a member that now has something to do
// (shards to give up, shards it waits for that have become free, or a new assignment epoch to take
// up) and did not make the step itself is told through a notification, so it heartbeats now instead of at its next interval.
// Notifications only make a heartbeat come sooner: the heartbeat alone grants shards, so a lost
// notification costs time, never safety.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "group/state.hpp"

namespace rsc::group {

// What a member would be told on its next heartbeat that it does not know yet: the shards it
// holds but must give up, the shards it waits for that nobody else holds any more, and a new
// assignment epoch (the group is not stable until every member has taken it up).
struct MemberTodo {
  ShardSet giveUp;
  ShardSet take;
  int32_t newEpoch = 0;  // the group's assignment epoch when the member's epoch is another, else 0
  bool empty() const { return giveUp.empty() && take.empty() && newEpoch == 0; }
  friend bool operator==(const MemberTodo& a, const MemberTodo& b) {
    return a.giveUp == b.giveUp && a.take == b.take && a.newEpoch == b.newEpoch;
  }
};
MemberTodo member_todo(const GroupState& g, const Member& m);

// False when nothing a member's to-do depends on changed (the same members, each in the same
// state and epoch with the same shards held and wanted, and the same assignment epoch): the case
// of a steady heartbeat, decided in O(members) without building anything.
bool may_need_telling(const GroupState* before, const GroupState& after);

// What may_need_telling compares, for a caller that hands its state to the step by move and so
// has no `before` left to compare: equal shapes before and after a step mean nobody needs telling
// (a collision only delays a notification to the member's next heartbeat: notifications speed
// things up, they never decide anything). The members count as a sum of one 64-bit mix each, so
// that a step which changed a few members updates the sum with theirs alone (member_shape of each
// before, subtracted, and after, added) instead of going over the whole group again.
struct Shape {
  uint64_t memberSum = 0;
  int32_t assignmentEpoch = 0;
  std::size_t members = 0;
  friend bool operator==(const Shape& a, const Shape& b) {
    return a.memberSum == b.memberSum && a.assignmentEpoch == b.assignmentEpoch && a.members == b.members;
  }
  friend bool operator!=(const Shape& a, const Shape& b) { return !(a == b); }
};
// One member's part of the sum: its id, epoch, state and the shards it holds, gives up and is meant to have.
uint64_t member_shape(const std::string& id, const Member& m);
// The whole group's shape, member by member.
Shape shape_of(const GroupState& g);

// What a group's members add up to, for its gauges: how many are in each lifecycle state
// (indexed by MemberLifecycleState, draining counted apart), and over the live ones the lag and
// pending records they reported, their shards not yet where the target wants them, those they
// are giving up, and their capacity. Integers, so that a step's changed members update the
// totals exactly (theirs subtracted before, added after), like the shape's sum.
struct MemberTotals {
  std::array<int64_t, 6> byState{};
  int64_t live = 0, lag = 0, pending = 0, pendingShards = 0, revokingShards = 0, capMax = 0, capAvail = 0;
  MemberTotals& operator+=(const MemberTotals& o);
  MemberTotals& operator-=(const MemberTotals& o);
  friend bool operator==(const MemberTotals& a, const MemberTotals& b);
};
MemberTotals member_totals(const Member& m);

// A group's shape and totals, as a step leaves it: counted over every member, or kept step by
// step from the copy's (CachedGroup).
struct GroupCounts {
  Shape shape;
  MemberTotals totals;
};
GroupCounts count_group(const GroupState& g);
// One member's part of both (nothing for a member the state does not have).
struct MemberPart {
  uint64_t shape = 0;
  MemberTotals totals;
};
MemberPart member_part(const GroupState& g, const std::string& id);
// shape_of folded into 64 bits.
uint64_t shape_signature(const GroupState& g);

// The members to wake after a step from `before` (null: not known, as for a first load) to
// `after`: live members that are not leaving, whose to-do is not empty and differs from what it
// was. Of `answered` (the members whose heartbeats the step answers) those with something to do
// and no revocation under way: a later heartbeat of the same batch changed the group after their
// answer (one asked to give shards up calls again once it has, with or without a wake). Sorted.
std::vector<std::string> members_to_wake(const GroupState* before, const GroupState& after,
                                         const std::set<std::string>& answered);

// The notification's text: {"groupEpoch": N, "members": [ids]}. A member runtime that finds its
// id in `members` heartbeats at once.
std::string notification_message(int32_t groupEpoch, const std::vector<std::string>& members);

}  // namespace rsc::group
