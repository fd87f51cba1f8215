#include "group/assignor.hpp"

#include <algorithm>
#include <limits>

namespace rsc::group {
namespace {

// The members sorted and distinct, and what each may keep: its current shards in range, each
// shard kept by one member only (a stale input could name a shard twice; the smaller id wins).
struct Prepared {
  std::vector<std::string> members;
  std::vector<ShardSet> keepable;
  int32_t shards = 0;
};
Prepared prepare(const AssignmentSpec& spec) {
  Prepared p;
  p.members = spec.members;
  std::sort(p.members.begin(), p.members.end());
  p.members.erase(std::unique(p.members.begin(), p.members.end()), p.members.end());
  p.shards = std::max<int32_t>(0, spec.shardCount);
  std::vector<char> taken(static_cast<std::size_t>(p.shards), 0);
  p.keepable.resize(p.members.size());
  for (std::size_t i = 0; i < p.members.size(); ++i) {
    auto it = spec.current.find(p.members[i]);
    if (it == spec.current.end()) continue;
    for (int32_t s : it->second) {
      if (s < 0 || s >= p.shards || taken[static_cast<std::size_t>(s)]) continue;
      taken[static_cast<std::size_t>(s)] = 1;
      p.keepable[i].push_back(s);
    }
    std::sort(p.keepable[i].begin(), p.keepable[i].end());
  }
  return p;
}

std::map<std::string, ShardSet> finish(const Prepared& p, std::vector<ShardSet> result) {
  std::map<std::string, ShardSet> out;
  for (std::size_t i = 0; i < p.members.size(); ++i) {
    std::sort(result[i].begin(), result[i].end());
    out.emplace(p.members[i], std::move(result[i]));
  }
  return out;
}

const std::string kNoRack;

}  // namespace

std::map<std::string, ShardSet> assign_uniform_sticky(const AssignmentSpec& spec) {
  if (spec.members.empty()) return {};
  const Prepared p = prepare(spec);
  const auto& members = p.members;
  const auto& keepable = p.keepable;
  const int32_t n = static_cast<int32_t>(members.size());
  const int32_t S = p.shards;
  const int32_t base = S / n;
  const int32_t extra = S % n;
  std::vector<char> taken(static_cast<std::size_t>(S), 0);

  // The `extra` members that get base+1: those holding the most now (ties by id), so that a
  // balanced split is a fixed point and nobody gives up a shard the balance does not need.
  std::vector<std::size_t> order(members.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    if (keepable[a].size() != keepable[b].size()) return keepable[a].size() > keepable[b].size();
    return members[a] < members[b];
  });
  std::vector<int32_t> quota(members.size(), base);
  for (int32_t k = 0; k < extra; ++k) quota[order[static_cast<std::size_t>(k)]] = base + 1;

  std::vector<ShardSet> result(members.size());
  for (std::size_t i = 0; i < members.size(); ++i) {
    const auto keep = std::min<std::size_t>(keepable[i].size(), static_cast<std::size_t>(quota[i]));
    result[i].assign(keepable[i].begin(), keepable[i].begin() + static_cast<std::ptrdiff_t>(keep));
    for (int32_t s : result[i]) taken[static_cast<std::size_t>(s)] = 1;
  }
  // Free shards, lowest first, to members below quota in id order.
  std::size_t next = 0;
  for (int32_t s = 0; s < S; ++s) {
    if (taken[static_cast<std::size_t>(s)]) continue;
    while (next < members.size() && static_cast<int32_t>(result[next].size()) >= quota[next]) ++next;
    if (next == members.size()) break;  // cannot happen: quotas sum to S
    result[next].push_back(s);
  }
  return finish(p, std::move(result));
}


std::map<std::string, ShardSet> assign_range(const AssignmentSpec& spec) {
  if (spec.members.empty()) return {};
  const Prepared p = prepare(spec);
  const auto n = static_cast<int64_t>(p.members.size());
  const int64_t q = p.shards / n, r = p.shards % n;
  // best[i][e]: the most current shards members i.. keep when e of the r longer blocks went to
  // members before i (block i starts at i*q + e). Ties give the longer block to the earlier
  // member: with nothing held, the first r members get one more, as Kafka's range assignor does.
  // Past a few million states the blocks are the plain ones.
  std::vector<char> extra(static_cast<std::size_t>(n), 0);
  const int64_t states = (n + 1) * (r + 1);
  auto held_in = [&](int64_t i, int64_t from, int64_t len) {
    const auto& k = p.keepable[static_cast<std::size_t>(i)];
    return static_cast<int64_t>(std::lower_bound(k.begin(), k.end(), static_cast<int32_t>(from + len)) -
                                std::lower_bound(k.begin(), k.end(), static_cast<int32_t>(from)));
  };
  if (r > 0 && states <= 4'000'000) {
    constexpr int64_t kNone = std::numeric_limits<int64_t>::min() / 4;
    std::vector<int64_t> best(static_cast<std::size_t>(states), kNone);
    auto at = [&](int64_t i, int64_t e) -> int64_t& { return best[static_cast<std::size_t>(i * (r + 1) + e)]; };
    at(n, r) = 0;
    for (int64_t i = n - 1; i >= 0; --i)
      for (int64_t e = std::max<int64_t>(0, r - (n - i)); e <= std::min(r, i); ++e) {
        const int64_t start = i * q + e;
        int64_t v = kNone;
        if (e < r && at(i + 1, e + 1) != kNone) v = held_in(i, start, q + 1) + at(i + 1, e + 1);
        if (at(i + 1, e) != kNone) v = std::max(v, held_in(i, start, q) + at(i + 1, e));
        at(i, e) = v;
      }
    for (int64_t i = 0, e = 0; i < n; ++i) {
      const int64_t start = i * q + e;
      const bool longer = e < r && at(i + 1, e + 1) != kNone &&
                          (at(i + 1, e) == kNone ||
                           held_in(i, start, q + 1) + at(i + 1, e + 1) >= held_in(i, start, q) + at(i + 1, e));
      extra[static_cast<std::size_t>(i)] = longer;
      e += longer;
    }
  } else {
    for (int64_t i = 0; i < r; ++i) extra[static_cast<std::size_t>(i)] = 1;
  }
  std::vector<ShardSet> result(p.members.size());
  int32_t next = 0;
  for (std::size_t i = 0; i < p.members.size(); ++i) {
    const auto len = static_cast<int32_t>(q + extra[i]);
    for (int32_t k = 0; k < len; ++k) result[i].push_back(next++);
  }
  return finish(p, std::move(result));
}

std::map<std::string, ShardSet> assign_co_partitioned(const AssignmentSpec& spec,
                                                      const std::map<std::string, std::string>& order) {
  std::vector<std::pair<std::string, std::string>> members;  // (sort key, id)
  members.reserve(spec.members.size());
  for (const auto& id : spec.members) {
    auto it = order.find(id);
    members.emplace_back(it == order.end() || it->second.empty() ? id : it->second, id);
  }
  std::sort(members.begin(), members.end());
  std::map<std::string, ShardSet> out;
  if (members.empty()) return out;
  const auto n = static_cast<int32_t>(members.size());
  const int32_t q = spec.shardCount / n, r = spec.shardCount % n;
  int32_t next = 0;
  for (int32_t i = 0; i < n; ++i) {
    ShardSet& mine = out[members[static_cast<std::size_t>(i)].second];
    for (int32_t k = 0; k < q + (i < r ? 1 : 0); ++k) mine.push_back(next++);
  }
  return out;
}

const std::string& Racks::of_member(const std::string& id) const {
  auto it = member.find(id);
  return it == member.end() ? kNoRack : it->second;
}
const std::string& Racks::of_shard(int32_t s) const {
  return s >= 0 && static_cast<std::size_t>(s) < shard.size() ? shard[static_cast<std::size_t>(s)] : kNoRack;
}

std::map<std::string, ShardSet> assign_rack_aware(const AssignmentSpec& spec, const Racks& racks) {
  if (spec.members.empty()) return {};
  const Prepared p = prepare(spec);
  const std::size_t n = p.members.size();
  const auto S = p.shards;
  const int32_t q = S / static_cast<int32_t>(n), r = S % static_cast<int32_t>(n);

  // Racks that have members: their members, and the shards of theirs.
  std::map<std::string, std::vector<std::size_t>> rackMembers;
  for (std::size_t i = 0; i < n; ++i)
    if (const auto& rk = racks.of_member(p.members[i]); !rk.empty()) rackMembers[rk].push_back(i);
  std::map<std::string, int32_t> rackShards;
  for (int32_t s = 0; s < S; ++s)
    if (const auto& rk = racks.of_shard(s); !rk.empty() && rackMembers.count(rk)) ++rackShards[rk];
  auto local = [&](std::size_t i, int32_t s) {
    const auto& rk = racks.of_shard(s);
    return !rk.empty() && rk == racks.of_member(p.members[i]);
  };
  std::vector<int32_t> localKeepable(n, 0);
  for (std::size_t i = 0; i < n; ++i)
    for (int32_t s : p.keepable[i]) localKeepable[i] += local(i, s);

  // The r longer quotas: first to racks with more of their own shards than q per member (each one
  // there is one more shard read in its rack), to the members holding most of their rack's shards;
  // the rest as the uniform assignor gives them, to those holding the most.
  std::vector<int32_t> quota(n, q);
  int32_t extras = r;
  auto by_holding = [&](std::vector<std::size_t>& v, bool localFirst) {
    std::sort(v.begin(), v.end(), [&](std::size_t a, std::size_t b) {
      if (localFirst && localKeepable[a] != localKeepable[b]) return localKeepable[a] > localKeepable[b];
      if (p.keepable[a].size() != p.keepable[b].size()) return p.keepable[a].size() > p.keepable[b].size();
      return a < b;
    });
  };
  for (auto& [rk, ms] : rackMembers) {
    if (extras == 0) break;
    const int64_t deficit = std::max<int64_t>(0, int64_t{rackShards[rk]} - int64_t{q} * static_cast<int64_t>(ms.size()));
    auto give = static_cast<int32_t>(std::min<int64_t>({deficit, static_cast<int64_t>(ms.size()), extras}));
    std::vector<std::size_t> order = ms;
    by_holding(order, true);
    for (int32_t k = 0; k < give; ++k) quota[order[static_cast<std::size_t>(k)]] = q + 1;
    extras -= give;
  }
  if (extras > 0) {
    std::vector<std::size_t> order;
    for (std::size_t i = 0; i < n; ++i)
      if (quota[i] == q) order.push_back(i);
    by_holding(order, false);
    for (int32_t k = 0; k < extras; ++k) quota[order[static_cast<std::size_t>(k)]] = q + 1;
  }

  std::vector<ShardSet> result(n);
  std::vector<char> taken(static_cast<std::size_t>(S), 0);
  auto take = [&](std::size_t i, int32_t s) {
    result[i].push_back(s);
    taken[static_cast<std::size_t>(s)] = 1;
  };
  auto room = [&](std::size_t i) { return static_cast<int32_t>(result[i].size()) < quota[i]; };
  // 1. What a member holds in its own rack, it keeps.
  for (std::size_t i = 0; i < n; ++i)
    for (int32_t s : p.keepable[i])
      if (room(i) && local(i, s)) take(i, s);
  // 2. Every other shard that can be read in its rack goes to a member there with room.
  std::map<std::string, std::size_t> cursor;
  for (int32_t s = 0; s < S; ++s) {
    if (taken[static_cast<std::size_t>(s)]) continue;
    auto rm = rackMembers.find(racks.of_shard(s));
    if (rm == rackMembers.end()) continue;
    auto& c = cursor[rm->first];
    while (c < rm->second.size() && !room(rm->second[c])) ++c;
    if (c < rm->second.size()) take(rm->second[c], s);
  }
  // 3. Then what members hold across racks, they keep while they have room.
  for (std::size_t i = 0; i < n; ++i)
    for (int32_t s : p.keepable[i])
      if (room(i) && !taken[static_cast<std::size_t>(s)]) take(i, s);
  // 4. The rest, lowest first, to members with room in id order.
  std::size_t next = 0;
  for (int32_t s = 0; s < S; ++s) {
    if (taken[static_cast<std::size_t>(s)]) continue;
    while (next < n && !room(next)) ++next;
    if (next == n) break;  // cannot happen: quotas sum to S
    take(next, s);
  }
  return finish(p, std::move(result));
}

int32_t cross_rack_shards(const std::map<std::string, ShardSet>& target, const Racks& racks) {
  int32_t n = 0;
  for (const auto& [m, shards] : target) {
    const auto& rk = racks.of_member(m);
    for (int32_t s : shards) n += rk.empty() || racks.of_shard(s) != rk;
  }
  return n;
}

}  // namespace rsc::group
