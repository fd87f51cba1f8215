// Sorted, duplicate-free shard index sets as plain vectors: small, cache friendly, deterministic.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <vector>

namespace rsc::group {

using ShardSet = std::vector<int32_t>;

inline ShardSet normalized(ShardSet s) {
  std::sort(s.begin(), s.end());
  s.erase(std::unique(s.begin(), s.end()), s.end());
  return s;
}
inline bool contains(const ShardSet& s, int32_t x) { return std::binary_search(s.begin(), s.end(), x); }
inline ShardSet set_minus(const ShardSet& a, const ShardSet& b) {
  ShardSet out;
  std::set_difference(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(out));
  return out;
}
// How many of a are not in b (set_minus(a, b).size() without building it).
inline std::size_t minus_count(const ShardSet& a, const ShardSet& b) {
  std::size_t n = 0;
  auto j = b.begin();
  for (int32_t x : a) {
    while (j != b.end() && *j < x) ++j;
    if (j == b.end() || *j != x) ++n;
  }
  return n;
}
inline ShardSet set_union(const ShardSet& a, const ShardSet& b) {
  ShardSet out;
  std::set_union(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(out));
  return out;
}
inline ShardSet set_intersection(const ShardSet& a, const ShardSet& b) {
  ShardSet out;
  std::set_intersection(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(out));
  return out;
}
inline bool is_subset(const ShardSet& a, const ShardSet& b) { return std::includes(b.begin(), b.end(), a.begin(), a.end()); }
inline void insert(ShardSet& s, int32_t x) {
  auto it = std::lower_bound(s.begin(), s.end(), x);
  if (it == s.end() || *it != x) s.insert(it, x);
}
inline bool erase(ShardSet& s, int32_t x) {
  auto it = std::lower_bound(s.begin(), s.end(), x);
  if (it == s.end() || *it != x) return false;
  s.erase(it);
  return true;
}

}  // namespace rsc::group
