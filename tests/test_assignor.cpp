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

// ---- range ----------------------------------------------------------------------------------

namespace {
// Each member's shards are one run of consecutive indices, and the runs follow the members' ids.
void expect_contiguous_in_id_order(const Target& t) {
  int32_t next = 0;
  for (const auto& [m, s] : t) {  // a std::map: id order
    for (std::size_t i = 0; i < s.size(); ++i) ASSERT_EQ(s[i], next + static_cast<int32_t>(i)) << m;
    next += static_cast<int32_t>(s.size());
  }
}
}  // namespace

TEST(RangeAssignor, BlocksAreContiguousInIdOrderBalancedDeterministicAndOrderFree) {
  std::mt19937_64 rng(541);
  for (int c = 0; c < kCases; ++c) {
    const int n = 1 + static_cast<int>(rng() % 12);
    const int32_t shards = static_cast<int32_t>(rng() % 64);
    auto members = make_members(rng, n);
    auto cur = random_current(rng, members, shards);
    auto t = assign_range({members, shards, cur});
    SCOPED_TRACE("case " + std::to_string(c));
    expect_valid_and_balanced(t, members, shards);
    expect_contiguous_in_id_order(t);
    std::shuffle(members.begin(), members.end(), rng);
    ASSERT_EQ(assign_range({members, shards, cur}), t) << "member order changed the result";
    ASSERT_EQ(assign_range({members, shards, t}), t) << "assigning again moved something";
    if (HasFatalFailure()) return;
  }
}

TEST(RangeAssignor, WithNothingHeldTheFirstMembersGetTheLongerBlocksAsKafkaDoes) {
  auto t = assign_range({{"c", "a", "b"}, 8, {}});
  EXPECT_EQ(t.at("a"), (ShardSet{0, 1, 2}));
  EXPECT_EQ(t.at("b"), (ShardSet{3, 4, 5}));
  EXPECT_EQ(t.at("c"), (ShardSet{6, 7}));
}

// Sticky where the blocks allow: of all contiguous balanced splits in id order, the one chosen keeps
// the most of what members hold now (checked against every split on small cases).
TEST(RangeAssignor, TheLongerBlocksGoWhereTheyKeepTheMostOfWhatIsHeld) {
  std::mt19937_64 rng(542);
  int checked = 0;
  for (int c = 0; c < 600; ++c) {
    const int n = 1 + static_cast<int>(rng() % 6);
    const int32_t shards = static_cast<int32_t>(rng() % 20);
    auto members = make_members(rng, n);
    auto cur = random_current(rng, members, shards);
    auto t = assign_range({members, shards, cur});
    auto kept = [&](const Target& x) {
      std::size_t k = 0;
      for (const auto& [m, s] : x) k += set_intersection(s, cur.count(m) ? normalized(cur.at(m)) : ShardSet{}).size();
      return k;
    };
    // Every way to give the r longer blocks (bit masks over the sorted members).
    auto sorted = members;
    std::sort(sorted.begin(), sorted.end());
    const int q = shards / n, r = shards % n;
    std::size_t best = 0;
    for (unsigned mask = 0; mask < (1u << n); ++mask) {
      if (__builtin_popcount(mask) != r) continue;
      Target x;
      int32_t next = 0;
      for (int i = 0; i < n; ++i) {
        ShardSet s;
        for (int k = 0; k < q + static_cast<int>((mask >> i) & 1u); ++k) s.push_back(next++);
        x[sorted[static_cast<std::size_t>(i)]] = s;
      }
      best = std::max(best, kept(x));
    }
    // Only where no shard is claimed twice (a contested shard is kept by the smaller id alone, which
    // the count here does not model).
    std::map<int32_t, int> claims;
    for (const auto& [m, s] : cur)
      for (int32_t x : s) ++claims[x];
    bool contested = false;
    for (const auto& [x, k] : claims) contested = contested || k > 1;
    if (contested) continue;
    ++checked;
    ASSERT_EQ(kept(t), best) << "case " << c;
  }
  EXPECT_GT(checked, 100);
}

// ---- rack aware -----------------------------------------------------------------------------

namespace {
Racks random_racks(std::mt19937_64& rng, const std::vector<std::string>& members, int32_t shards, int rackCount) {
  Racks r;
  auto rack = [&]() -> std::string {
    const auto k = rng() % static_cast<uint64_t>(rackCount + 1);
    return k == 0 ? "" : "zone-" + std::to_string(k);
  };
  for (const auto& m : members) r.member[m] = rack();
  for (int32_t s = 0; s < shards; ++s) r.shard.push_back(rack());
  return r;
}

// The fewest shards read across racks of any balanced assignment, by trying every assignment.
int32_t brute_force_cross_rack(const std::vector<std::string>& members, int32_t shards, const Racks& racks) {
  const int n = static_cast<int>(members.size());
  std::vector<int> owner(static_cast<std::size_t>(shards), 0);
  int32_t best = std::numeric_limits<int32_t>::max();
  while (true) {
    std::vector<int> count(static_cast<std::size_t>(n), 0);
    for (int o : owner) ++count[static_cast<std::size_t>(o)];
    if (*std::max_element(count.begin(), count.end()) - *std::min_element(count.begin(), count.end()) <= 1) {
      int32_t cross = 0;
        for (int32_t s = 0; s < shards; ++s) {
        const auto& mr = racks.of_member(members[static_cast<std::size_t>(owner[static_cast<std::size_t>(s)])]);
        cross += mr.empty() || racks.of_shard(s) != mr;
      }
      best = std::min(best, cross);
    }
    int32_t i = 0;
    while (i < shards && ++owner[static_cast<std::size_t>(i)] == n) owner[static_cast<std::size_t>(i++)] = 0;
    if (i == shards) break;
  }
  return shards == 0 ? 0 : best;
}
}  // namespace

TEST(RackAwareAssignor, BalancedLikeUniformDeterministicOrderFreeAndAFixedPoint) {
  std::mt19937_64 rng(543);
  for (int c = 0; c < kCases; ++c) {
    const int n = 1 + static_cast<int>(rng() % 12);
    const int32_t shards = static_cast<int32_t>(rng() % 64);
    auto members = make_members(rng, n);
    auto racks = random_racks(rng, members, shards, 1 + static_cast<int>(rng() % 4));
    auto cur = random_current(rng, members, shards);
    auto t = assign_rack_aware({members, shards, cur}, racks);
    SCOPED_TRACE("case " + std::to_string(c));
    expect_valid_and_balanced(t, members, shards);
    std::shuffle(members.begin(), members.end(), rng);
    ASSERT_EQ(assign_rack_aware({members, shards, cur}, racks), t) << "member order changed the result";
    ASSERT_EQ(assign_rack_aware({members, shards, t}, racks), t) << "assigning again moved something";
    if (HasFatalFailure()) return;
  }
}

TEST(RackAwareAssignor, ReadsAcrossRacksNoMoreThanTheBestBalancedAssignment) {
  std::mt19937_64 rng(544);
  int improvedOnUniform = 0;
  for (int c = 0; c < 400; ++c) {
    const int n = 1 + static_cast<int>(rng() % 3);
    const int32_t shards = static_cast<int32_t>(rng() % 8);
    auto members = make_members(rng, n);
    auto racks = random_racks(rng, members, shards, 1 + static_cast<int>(rng() % 3));
    auto cur = random_current(rng, members, shards);
    auto t = assign_rack_aware({members, shards, cur}, racks);
    const auto best = brute_force_cross_rack(members, shards, racks);
    ASSERT_EQ(cross_rack_shards(t, racks), best) << "case " << c;
    improvedOnUniform += cross_rack_shards(assign_uniform_sticky({members, shards, cur}), racks) > best;
  }
  EXPECT_GT(improvedOnUniform, 20) << "cases where the uniform assignor reads more across racks";
}

TEST(RackAwareAssignor, WithoutRacksItIsTheUniformAssignor) {
  std::mt19937_64 rng(545);
  for (int c = 0; c < kCases; ++c) {
    const int n = 1 + static_cast<int>(rng() % 12);
    const int32_t shards = static_cast<int32_t>(rng() % 64);
    auto members = make_members(rng, n);
    auto cur = random_current(rng, members, shards);
    ASSERT_EQ(assign_rack_aware({members, shards, cur}, Racks{}), assign_uniform_sticky({members, shards, cur}))
        << "case " << c;
  }
}

// Stickiness across racks: a member that stays keeps every shard of its rack it held, within quota.
TEST(RackAwareAssignor, AJoinMovesOnlyWhatBalanceOrLocalityNeeds) {
  Racks racks;
  for (int32_t s = 0; s < 12; ++s) racks.shard.push_back(s % 2 == 0 ? "a" : "b");
  racks.member = {{"m1", "a"}, {"m2", "b"}, {"m3", "a"}};
  auto two = assign_rack_aware({{"m1", "m2"}, 12, {}}, racks);
  EXPECT_EQ(cross_rack_shards(two, racks), 0);
  auto three = assign_rack_aware({{"m1", "m2", "m3"}, 12, two}, racks);
  EXPECT_EQ(cross_rack_shards(three, racks), 2) << "rack a has 6 shards for two members of 4, rack b 6 for one";
  EXPECT_EQ(set_intersection(two.at("m1"), three.at("m1")).size(), three.at("m1").size())
      << "m1 gave up shards but took none of another's";
  EXPECT_EQ(minus_count(two.at("m2"), three.at("m2")), 2u) << "m2 gives up only the two beyond its quota";
}
