#include "group/assignor.hpp"

#include <algorithm>

namespace rsc::group {

std::map<std::string, ShardSet> assign_uniform_sticky(const AssignmentSpec& spec) {
  std::map<std::string, ShardSet> out;
  if (spec.members.empty()) return out;
  std::vector<std::string> members = spec.members;
  std::sort(members.begin(), members.end());
  members.erase(std::unique(members.begin(), members.end()), members.end());

  const int32_t n = static_cast<int32_t>(members.size());
  const int32_t S = std::max<int32_t>(0, spec.shardCount);
  const int32_t base = S / n;
  const int32_t extra = S % n;

  // What each member may keep: its current shards in range, each shard kept by one member only
  // (a stale input could name a shard twice; the smaller member id wins, deterministically).
  std::vector<char> taken(static_cast<std::size_t>(S), 0);
  std::vector<ShardSet> keepable(members.size());
  for (std::size_t i = 0; i < members.size(); ++i) {
    auto it = spec.current.find(members[i]);
    if (it == spec.current.end()) continue;
    for (int32_t s : it->second) {
      if (s < 0 || s >= S || taken[static_cast<std::size_t>(s)]) continue;
      taken[static_cast<std::size_t>(s)] = 1;
      keepable[i].push_back(s);
    }
    std::sort(keepable[i].begin(), keepable[i].end());
  }

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

  std::fill(taken.begin(), taken.end(), 0);
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
  for (std::size_t i = 0; i < members.size(); ++i) {
    std::sort(result[i].begin(), result[i].end());
    out.emplace(members[i], std::move(result[i]));
  }
  return out;
}

}  // namespace rsc::group
