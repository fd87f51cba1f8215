// The uniform sticky assignor: properties over seeded random inputs (SPEC §3 rule 4, §7 I5).
#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "group/assignor.hpp"

using namespace rsc::group;

namespace {

using Target = std::map<std::string, ShardSet>;

std::vector<std::string> make_members(std::mt19937_64& rng, int n) {
  std::vector<std::string> v;
  for (int i = 0; i < n; ++i) v.push_back("m" + std::to_string(rng() % 100000) + "-" + std::to_string(i));
  return v;
}

// A random, possibly unbalanced, possibly overlapping and out-of-range "current" input.
Target random_current(std::mt19937_64& rng, const std::vector<std::string>& members, int32_t shards) {
  Target cur;
  for (const auto& m : members) {
    ShardSet s;
    const int k = static_cast<int>(rng() % static_cast<uint64_t>(shards + 3));
    for (int i = 0; i < k; ++i) s.push_back(static_cast<int32_t>(rng() % static_cast<uint64_t>(shards + 4)));
    if (rng() % 4 == 0) s.clear();
    cur[m] = normalized(s);
  }
  return cur;
}

void expect_valid_and_balanced(const Target& t, const std::vector<std::string>& members, int32_t shards) {
  ASSERT_EQ(t.size(), members.size());
  std::vector<int> seen(static_cast<std::size_t>(shards), 0);
  std::size_t lo = SIZE_MAX, hi = 0;
  for (const auto& [m, s] : t) {
    EXPECT_TRUE(std::is_sorted(s.begin(), s.end()));
    lo = std::min(lo, s.size());
    hi = std::max(hi, s.size());
    for (int32_t x : s) {
      ASSERT_GE(x, 0);
      ASSERT_LT(x, shards);
      ++seen[static_cast<std::size_t>(x)];
    }
  }
  for (int32_t x = 0; x < shards; ++x) EXPECT_EQ(seen[static_cast<std::size_t>(x)], 1) << "shard " << x;
  EXPECT_LE(hi - lo, 1u) << "counts differ by more than one";
}

// Shards whose owner differs between two assignments.
std::map<int32_t, std::pair<std::string, std::string>> moves(const Target& a, const Target& b) {
  std::map<int32_t, std::string> oa, ob;
  for (const auto& [m, s] : a)
    for (int32_t x : s) oa[x] = m;
  for (const auto& [m, s] : b)
    for (int32_t x : s) ob[x] = m;
  std::map<int32_t, std::pair<std::string, std::string>> out;
  for (const auto& [x, m] : ob)
    if (oa[x] != m) out[x] = {oa[x], m};
  return out;
}

constexpr int kCases = 1500;

}  // namespace

TEST(Assignor, NoMembersGetsNothingAndOneMemberGetsEverything) {
  EXPECT_TRUE(assign_uniform_sticky({{}, 8, {}}).empty());
  auto t = assign_uniform_sticky({{"only"}, 5, {}});
  EXPECT_EQ(t.at("only"), (ShardSet{0, 1, 2, 3, 4}));
  auto z = assign_uniform_sticky({{"a", "b"}, 0, {}});
  EXPECT_TRUE(z.at("a").empty());
  EXPECT_TRUE(z.at("b").empty());
}

TEST(Assignor, MoreMembersThanShardsLeavesSomeIdle) {
  auto t = assign_uniform_sticky({{"a", "b", "c", "d"}, 2, {}});
  expect_valid_and_balanced(t, {"a", "b", "c", "d"}, 2);
}

TEST(Assignor, EveryResultIsValidAndBalanced) {
  std::mt19937_64 rng(20261130);
  for (int c = 0; c < kCases; ++c) {
    const int n = 1 + static_cast<int>(rng() % 12);
    const int32_t shards = static_cast<int32_t>(rng() % 64);
    auto members = make_members(rng, n);
    auto t = assign_uniform_sticky({members, shards, random_current(rng, members, shards)});
    SCOPED_TRACE("case " + std::to_string(c));
    expect_valid_and_balanced(t, members, shards);
    if (HasFatalFailure()) return;
  }
}

TEST(Assignor, AssigningAgainChangesNothing) {
  std::mt19937_64 rng(7);
  for (int c = 0; c < kCases; ++c) {
    const int n = 1 + static_cast<int>(rng() % 12);
    const int32_t shards = static_cast<int32_t>(rng() % 64);
    auto members = make_members(rng, n);
    auto once = assign_uniform_sticky({members, shards, random_current(rng, members, shards)});
    auto twice = assign_uniform_sticky({members, shards, once});
    ASSERT_EQ(once, twice) << "case " << c;
  }
}

TEST(Assignor, MemberOrderDoesNotMatter) {
  std::mt19937_64 rng(11);
  for (int c = 0; c < kCases; ++c) {
    const int n = 1 + static_cast<int>(rng() % 12);
    const int32_t shards = static_cast<int32_t>(rng() % 64);
    auto members = make_members(rng, n);
    auto cur = random_current(rng, members, shards);
    auto a = assign_uniform_sticky({members, shards, cur});
    std::shuffle(members.begin(), members.end(), rng);
    auto b = assign_uniform_sticky({members, shards, cur});
    ASSERT_EQ(a, b) << "case " << c;
  }
}

TEST(Assignor, MembersKeepTheirShardsUpToQuota) {
  std::mt19937_64 rng(13);
  for (int c = 0; c < kCases; ++c) {
    const int n = 1 + static_cast<int>(rng() % 12);
    const int32_t shards = static_cast<int32_t>(rng() % 64);
    auto members = make_members(rng, n);
    auto cur = random_current(rng, members, shards);
    auto t = assign_uniform_sticky({members, shards, cur});
    // Each member ends with at least as many of its current shards as it could keep: its
    // uncontested ones, up to its final count (contested shards go to one claimant only).
    std::map<int32_t, int> claims;
    for (const auto& [m, s] : cur)
      for (int32_t x : s)
        if (x < shards) ++claims[x];
    for (const auto& [m, s] : cur) {
      ShardSet own;
      for (int32_t x : s)
        if (x < shards && claims[x] == 1) own.push_back(x);
      const auto kept = set_intersection(s, t.at(m)).size();
      EXPECT_GE(kept, std::min(own.size(), t.at(m).size())) << "case " << c << " member " << m;
      // A member loses an uncontested shard only when it is full with its own.
      if (!is_subset(own, t.at(m))) {
        EXPECT_TRUE(is_subset(t.at(m), s)) << "case " << c << " member " << m;
      }
    }
  }
}

TEST(Assignor, OneJoinMovesOnlyWhatTheNewMemberNeeds) {
  std::mt19937_64 rng(17);
  for (int c = 0; c < kCases; ++c) {
    const int n = 1 + static_cast<int>(rng() % 12);
    const int32_t shards = static_cast<int32_t>(rng() % 80);
    auto members = make_members(rng, n);
    auto before = assign_uniform_sticky({members, shards, random_current(rng, members, shards)});
    const std::string joiner = "joiner-" + std::to_string(c);
    auto grown = members;
    grown.push_back(joiner);
    auto after = assign_uniform_sticky({grown, shards, before});
    auto mv = moves(before, after);
    for (const auto& [x, fromTo] : mv) ASSERT_EQ(fromTo.second, joiner) << "case " << c << " shard " << x;
    // The least any balanced split can give the newcomer.
    EXPECT_EQ(mv.size(), static_cast<std::size_t>(shards / (n + 1))) << "case " << c;
  }
}

TEST(Assignor, OneLeaveMovesOnlyTheLeaversShards) {
  std::mt19937_64 rng(19);
  for (int c = 0; c < kCases; ++c) {
    const int n = 2 + static_cast<int>(rng() % 12);
    const int32_t shards = static_cast<int32_t>(rng() % 80);
    auto members = make_members(rng, n);
    auto before = assign_uniform_sticky({members, shards, random_current(rng, members, shards)});
    const auto leaver = members[rng() % members.size()];
    auto shrunk = members;
    shrunk.erase(std::find(shrunk.begin(), shrunk.end(), leaver));
    auto prev = before;
    prev.erase(leaver);
    auto after = assign_uniform_sticky({shrunk, shards, prev});
    auto mv = moves(before, after);
    for (const auto& [x, fromTo] : mv) ASSERT_EQ(fromTo.first, leaver) << "case " << c << " shard " << x;
    EXPECT_EQ(mv.size(), before.at(leaver).size()) << "case " << c;
  }
}

TEST(Assignor, ShardCountGrowthKeepsEveryExistingShardWhereItWas) {
  std::mt19937_64 rng(23);
  for (int c = 0; c < 500; ++c) {
    const int n = 1 + static_cast<int>(rng() % 10);
    const int32_t shards = 1 + static_cast<int32_t>(rng() % 40);
    auto members = make_members(rng, n);
    auto before = assign_uniform_sticky({members, shards, {}});
    const int32_t grown = shards + 1 + static_cast<int32_t>(rng() % 40);
    auto after = assign_uniform_sticky({members, grown, before});
    expect_valid_and_balanced(after, members, grown);
    // Growth alone never takes an old shard away unless the member is over its new quota.
    for (const auto& [m, s] : before) EXPECT_TRUE(is_subset(s, after.at(m)) || after.at(m).size() < s.size());
  }
}

// minus_count counts what set_minus would build, on random sorted sets of shard indexes.
TEST(ShardSets, MinusCountIsTheSizeOfTheDifference) {
  std::mt19937 rng(7);
  for (int c = 0; c < 500; ++c) {
    ShardSet a, b;
    for (int32_t s = 0; s < 24; ++s) {
      if (rng() % 3 == 0) a.push_back(s);
      if (rng() % 2 == 0) b.push_back(s);
    }
    ASSERT_EQ(minus_count(a, b), set_minus(a, b).size()) << "case " << c;
  }
  EXPECT_EQ(minus_count({}, {1, 2}), 0u);
  EXPECT_EQ(minus_count({1, 2, 9}, {}), 3u);
  EXPECT_EQ(minus_count({1, 5, 9}, {0, 5, 10}), 2u);
}
