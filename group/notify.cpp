#include "group/notify.hpp"

#include <algorithm>
#include <functional>
#include <nlohmann/json.hpp>

#include "protocol/codec.hpp"

namespace rsc::group {
namespace {

// How many live members hold each shard.
std::vector<int> holders(const GroupState& g) {
  std::vector<int> n;
  for (const auto& [id, m] : g.members) {
    if (!m.live()) continue;
    for (int32_t s : m.held()) {
      if (s < 0) continue;
      if (static_cast<std::size_t>(s) >= n.size()) n.resize(static_cast<std::size_t>(s) + 1, 0);
      ++n[static_cast<std::size_t>(s)];
    }
  }
  return n;
}

MemberTodo todo_with(const GroupState& g, const std::vector<int>& held, const Member& m) {
  MemberTodo t;
  if (!m.live() || m.leaving()) return t;
  t.giveUp = set_minus(m.assigned, m.target);
  if (m.epoch != g.assignmentEpoch) t.newEpoch = g.assignmentEpoch;
  const auto mine = m.held();
  for (int32_t s : m.pending()) {
    const int total = s >= 0 && static_cast<std::size_t>(s) < held.size() ? held[static_cast<std::size_t>(s)] : 0;
    const int own = std::binary_search(mine.begin(), mine.end(), s) ? 1 : 0;
    if (total - own == 0) t.take.push_back(s);
  }
  return t;
}

// Nothing a member's to-do depends on changed: the same members, each in the same state with the
// same shards held and wanted (true for a steady heartbeat, which only renews a lease).
bool same_shape(const GroupState& a, const GroupState& b) {
  if (a.members.size() != b.members.size()) return false;
  for (auto i = a.members.begin(), j = b.members.begin(); i != a.members.end(); ++i, ++j) {
    const Member &x = i->second, &y = j->second;
    if (i->first != j->first || x.epoch != y.epoch || x.state != y.state || x.assigned != y.assigned || x.revoking != y.revoking ||
        x.target != y.target)
      return false;
  }
  return true;
}

}  // namespace

std::string notification_message(int32_t groupEpoch, const std::vector<std::string>& members) {
  return protocol::dump(nlohmann::json{{"groupEpoch", groupEpoch}, {"members", members}});
}

bool may_need_telling(const GroupState* before, const GroupState& after) {
  return before == nullptr || before->assignmentEpoch != after.assignmentEpoch || !same_shape(*before, after);
}

namespace {
// One multiply-xorshift round per word.
void mix(uint64_t& h, uint64_t v) {
  h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  h *= 0xff51afd7ed558ccdull;
  h ^= h >> 33;
}
void mix_set(uint64_t& h, const ShardSet& s) {
  mix(h, s.size());
  for (int32_t x : s) mix(h, static_cast<uint32_t>(x));
}
}  // namespace

uint64_t member_shape(const std::string& id, const Member& m) {
  uint64_t h = 0x243f6a8885a308d3ull;
  mix(h, std::hash<std::string>{}(id));
  mix(h, (static_cast<uint64_t>(static_cast<uint32_t>(m.epoch)) << 8) | static_cast<uint64_t>(m.state));
  mix_set(h, m.assigned);
  mix_set(h, m.revoking);
  mix_set(h, m.target);
  return h;
}

Shape shape_of(const GroupState& g) {
  Shape s;
  s.assignmentEpoch = g.assignmentEpoch;
  s.members = g.members.size();
  for (const auto& [id, m] : g.members) s.memberSum += member_shape(id, m);  // wraps: a sum mod 2^64
  return s;
}

static_assert(static_cast<std::size_t>(MemberLifecycleState::FENCED) + 1 == std::tuple_size<decltype(MemberTotals::byState)>::value,
              "one count per lifecycle state");

MemberTotals& MemberTotals::operator+=(const MemberTotals& o) {
  for (std::size_t i = 0; i < byState.size(); ++i) byState[i] += o.byState[i];
  live += o.live, lag += o.lag, pending += o.pending, pendingShards += o.pendingShards;
  revokingShards += o.revokingShards, capMax += o.capMax, capAvail += o.capAvail;
  return *this;
}

MemberTotals& MemberTotals::operator-=(const MemberTotals& o) {
  for (std::size_t i = 0; i < byState.size(); ++i) byState[i] -= o.byState[i];
  live -= o.live, lag -= o.lag, pending -= o.pending, pendingShards -= o.pendingShards;
  revokingShards -= o.revokingShards, capMax -= o.capMax, capAvail -= o.capAvail;
  return *this;
}

bool operator==(const MemberTotals& a, const MemberTotals& b) {
  return a.byState == b.byState && a.live == b.live && a.lag == b.lag && a.pending == b.pending &&
         a.pendingShards == b.pendingShards && a.revokingShards == b.revokingShards && a.capMax == b.capMax &&
         a.capAvail == b.capAvail;
}

MemberTotals member_totals(const Member& m) {
  MemberTotals t;
  t.byState[static_cast<std::size_t>(lifecycle(m))] = 1;
  if (!m.live()) return t;
  for (const auto& p : m.progress) {
    t.lag += p.lag.value_or(0);
    t.pending += p.pending.value_or(0);
  }
  t.pendingShards = static_cast<int64_t>(m.pending_count());
  t.revokingShards = static_cast<int64_t>(m.revoking.size());
  t.live = 1;
  t.capMax = m.capacity.runtimeMaxConcurrency;
  t.capAvail = m.capacity.availableConcurrency;
  return t;
}

GroupCounts count_group(const GroupState& g) {
  GroupCounts c;
  c.shape.assignmentEpoch = g.assignmentEpoch;
  c.shape.members = g.members.size();
  for (const auto& [id, m] : g.members) {
    c.shape.memberSum += member_shape(id, m);
    c.totals += member_totals(m);
  }
  return c;
}

MemberPart member_part(const GroupState& g, const std::string& id) {
  MemberPart p;
  auto it = g.members.find(id);
  if (it == g.members.end()) return p;
  p.shape = member_shape(id, it->second);
  p.totals = member_totals(it->second);
  return p;
}

uint64_t shape_signature(const GroupState& g) {
  const auto s = shape_of(g);
  uint64_t h = s.memberSum;
  mix(h, static_cast<uint32_t>(s.assignmentEpoch));
  mix(h, s.members);
  return h;
}

MemberTodo member_todo(const GroupState& g, const Member& m) { return todo_with(g, holders(g), m); }

std::vector<std::string> members_to_wake(const GroupState* before, const GroupState& after,
                                         const std::set<std::string>& answered) {
  std::vector<std::string> out;
  if (!may_need_telling(before, after)) return out;
  const auto heldAfter = holders(after);
  const auto heldBefore = before != nullptr ? holders(*before) : std::vector<int>{};
  for (const auto& [id, m] : after.members) {
    const auto now = todo_with(after, heldAfter, m);
    if (now.empty()) continue;
    if (answered.count(id)) {
      // Its answer granted every shard free then and the epoch of then, or asked it to give some
      // up. Anything still to do without a revocation under way came from a heartbeat answered
      // after its own in the same batch (a leaver's release, a join): only a notification brings
      // it back before its next interval.
      // One asked to give shards up keeps its old epoch until it has (KIP-848), and calls again as
      // soon as it has drained them: its answer told it all it can act on now.
      if (!m.revoking.empty()) continue;
      out.push_back(id);
      continue;
    }
    if (before != nullptr) {
      auto it = before->members.find(id);
      if (it != before->members.end() && todo_with(*before, heldBefore, it->second) == now) continue;  // told already
    }
    out.push_back(id);
  }
  return out;
}

}  // namespace rsc::group
