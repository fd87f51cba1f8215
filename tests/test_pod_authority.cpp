// Which pod serves a group (group/pod_authority.hpp), on fake clocks: the rules one by one, then a
// registry simulated over real time with pods whose clocks differ, freezing and dying, checking
// that no group ever has two pods that may write it (and a negative control).
#include <gtest/gtest.h>

#include <map>
#include <random>

#include "group/pod_authority.hpp"

namespace rsc::group {
namespace {

constexpr Millis kLease = 1000;
constexpr Millis kMargin = 100;

std::vector<std::string> groups(int n) {
  std::vector<std::string> out;
  for (int i = 0; i < n; ++i) out.push_back("orders/g" + std::to_string(i));
  return out;
}

TEST(PodAuthority, APodAloneWhenItRegisteredServesEveryGroupAtOnce) {
  PodAuthority a("p", kLease, kMargin);
  // Local clock 5'000 while the store reads 90'000; the beat took 4 ms.
  const auto v = a.beat(5000, 5004, 90'002, {{"p", -90'002, "10.0.0.1:8080"}});
  EXPECT_TRUE(v->may_write(5004));
  EXPECT_TRUE(v->alone());
  for (const auto& g : groups(20)) EXPECT_TRUE(v->owns(g, 5004)) << g;
  EXPECT_EQ(v->term, 1u);
  EXPECT_TRUE(v->owns("orders/g1", 5000 + kLease - kMargin - 1));
  EXPECT_FALSE(v->may_write(5000 + kLease - kMargin)) << "the window ends a margin before the registration can";
  EXPECT_FALSE(v->owns("orders/g1", 5000 + kLease - kMargin));
}

TEST(PodAuthority, RenewedInTimeItKeepsItsTermAndAfterALapseItStartsANewOne) {
  PodAuthority a("p", kLease, kMargin);
  a.beat(0, 2, 10'000, {{"p", -10'000, ""}});
  EXPECT_EQ(a.beat(300, 302, 10'300, {{"p", -10'000, ""}})->term, 1u) << "continuous: copies stay good";
  // A freeze: the next beat comes back after the window closed.
  const auto v = a.beat(1500, 1502, 11'500, {{"p", -10'000, ""}});
  EXPECT_EQ(v->term, 2u) << "another pod may have written meanwhile: copies are checked again";
  EXPECT_TRUE(v->owns("orders/g1", 1502));
}

TEST(PodAuthority, ARegistrationMadeAnewStartsANewTermEvenWithoutAGap) {
  PodAuthority a("a", kLease, kMargin);
  a.beat(0, 2, 1000, {{"a", -999, ""}});
  EXPECT_EQ(a.beat(300, 302, 1300, {{"a", -999, ""}})->term, 1u) << "the same registration: nothing to tell";
  // The store lost the registry (restarted empty): the renewal registers afresh, alone again.
  EXPECT_EQ(a.beat(600, 602, 1600, {{"a", -1600, ""}})->term, 2u) << "what it cached may predate the loss";
}

TEST(PodAuthority, ANewPodAmongOthersForwardsUntilItIsEstablishedThenServesItsShare) {
  PodAuthority b("b", kLease, kMargin);
  // Registered at store time 20'000 while "a" was live (established).
  const std::vector<PodSeen> live{{"a", -5000, "10.0.0.1:8080"}, {"b", 20'000, "10.0.0.2:8080"}};
  const auto v = b.beat(100, 104, 20'002, live);
  EXPECT_FALSE(v->may_write(104));
  for (const auto& g : groups(20)) {
    ASSERT_NE(v->owner(g, 104), nullptr);
    EXPECT_EQ(v->owner(g, 104)->id, "a") << "everything is a's until b is established";
    EXPECT_EQ(v->owner(g, 104)->address, "10.0.0.1:8080");
  }
  const Millis from = 104 + (20'000 + kLease + kMargin - 20'002);
  EXPECT_EQ(v->writableFrom, from);
  const auto later = b.beat(1000, 1004, 20'902, live);
  int soon = 0;
  for (const auto& g : groups(40)) {
    EXPECT_FALSE(later->owns_soon(g, from - 600, 500)) << "not within half a second yet";
    soon += later->owns_soon(g, from - 300, 500) ? 1 : 0;
    EXPECT_EQ(later->owns_soon(g, from - 300, 500), later->owns(g, from)) << "soon: exactly what it owns once established";
  }
  EXPECT_GT(soon, 0);
  int mine = 0;
  for (const auto& g : groups(40)) mine += later->owns(g, from) ? 1 : 0;
  EXPECT_GT(mine, 8) << "about half of the groups move to b";
  EXPECT_LT(mine, 32);
}

TEST(PodAuthority, AnOwnerLetsAGroupGoBeforeTheNewcomerTakesIt) {
  PodAuthority a("a", kLease, kMargin), b("b", kLease, kMargin);
  const std::vector<PodSeen> live{{"a", -1000, "A"}, {"b", 50'250, "B"}};
  // The same store instant seen from two pods whose clocks differ by 7'000 ms.
  const auto va = a.beat(300, 303, 50'300, live);
  const auto vb = b.beat(7300, 7303, 50'300, live);
  for (const auto& g : groups(40)) {
    // At every local instant pair that is the same real instant, not both own it.
    for (Millis t = 300; t < 1300; ++t) ASSERT_FALSE(va->owns(g, t) && vb->owns(g, t + 7000)) << g << " at " << t;
  }
}

TEST(PodAuthority, APodTheRegistryNoLongerListsHasNoPowers) {
  PodAuthority a("a", kLease, kMargin);
  a.beat(0, 2, 1000, {{"a", -1000, ""}});
  const auto v = a.beat(300, 302, 1300, {{"b", -1000, ""}});
  EXPECT_FALSE(v->may_write(302));
  EXPECT_FALSE(v->owns("orders/g1", 302));
  EXPECT_EQ(v->owner("orders/g1", 302)->id, "b") << "its calls go to b";
}

// A pod cut from the store (its beats fail, its window lapses) still counted
// itself the owner of its groups and answered RETRY naming nobody, so members kept on it by a
// Service were never served. Its calls now go to the pod that takes its groups next.
TEST(PodAuthority, APodWhoseWindowLapsedSendsItsGroupsCallsToThePodThatTakesThemNext) {
  PodAuthority a("a", kLease, kMargin);
  const std::vector<PodSeen> live{{"a", -5000, "10.0.0.1:8080"}, {"b", -5000, "10.0.0.2:8080"}, {"c", -5000, "10.0.0.3:8080"}};
  const auto v = a.beat(0, 2, 10'000, live);
  int mine = 0;
  for (const auto& g : groups(60)) {
    if (!v->owns(g, 2)) continue;
    ++mine;
    EXPECT_EQ(v->place(g, 2, true).kind, PodView::Placement::Kind::Here) << g;
    // No beat came back since: past the window it may no longer write ...
    const Millis lapsed = kLease;
    EXPECT_FALSE(v->owns(g, lapsed));
    ASSERT_EQ(v->owner(g, lapsed)->id, "a") << "the registry it read still says a";
    // ... and sends the call to the pod that will serve the group once a's registration runs out:
    // the owner among b and c, as their own views will have it without a.
    const auto p = v->place(g, lapsed, true);
    EXPECT_EQ(p.kind, PodView::Placement::Kind::Elsewhere) << g;
    PodAuthority b("b", kLease, kMargin);
    const auto vb = b.beat(5000, 5002, 12'000, {live[1], live[2]});
    EXPECT_EQ(p.podId, vb->owner(g, 5002)->id) << g;
    EXPECT_EQ(p.address, vb->owner(g, 5002)->address);
  }
  EXPECT_GT(mine, 5);
  // Alone, a lapsed pod has nobody to send to: RETRY as before.
  PodAuthority lone("a", kLease, kMargin);
  const auto vl = lone.beat(0, 2, 10'000, {{"a", -5000, "10.0.0.1:8080"}});
  EXPECT_EQ(vl->place("orders/g1", kLease, true).kind, PodView::Placement::Kind::Nowhere);
  // A successor that has not published its address is not sent to.
  PodAuthority d("a", kLease, kMargin);
  const auto vd = d.beat(0, 2, 10'000, {{"a", -5000, "10.0.0.1:8080"}, {"b", -5000, ""}});
  for (const auto& g : groups(10)) EXPECT_NE(vd->place(g, kLease, true).kind, PodView::Placement::Kind::Elsewhere) << g;
}

TEST(PodAuthority, AfterStopNothingReopensTheWindows) {
  PodAuthority a("a", kLease, kMargin);
  a.beat(0, 2, 1000, {{"a", -1000, ""}});
  a.stop();
  EXPECT_FALSE(a.view()->may_write(3));
  EXPECT_FALSE(a.beat(300, 302, 1300, {{"a", -1000, ""}})->may_write(302));
}

TEST(PodAuthority, TheMarginIsATenthOfTheLeaseWithinBounds) {
  EXPECT_EQ(pod_authority_margin(1000), 100);
  EXPECT_EQ(pod_authority_margin(50), 10);
  EXPECT_EQ(pod_authority_margin(60'000), 500);
}

// --- A registry over real time ---------------------------------------------------------------
// Pods with their own clock offsets beat a registry that behaves as the store's script does
// (expired entries go; a registration made while no other pod is live counts at once). At every
// real millisecond, each of 24 groups has at most one pod that owns it (the only pod that writes
// it and answers from its copy).
struct SimPod {
  std::string id;
  Millis offset = 0;       // local = real + offset (rate drift is what the margin is for; left out)
  Millis nextBeat = 0;     // real ms
  Millis frozenUntil = 0;  // real ms: no beat and no reply handled before
  std::unique_ptr<PodAuthority> auth;
};

struct Registry {
  bool newcomersWait = true;  // false: the negative control, every registration counts at once
  std::map<std::string, std::pair<Millis, Millis>> pods;  // id -> (expires, since)
  std::vector<PodSeen> beat(const std::string& id, Millis now) {
    for (auto it = pods.begin(); it != pods.end();) it = it->second.first <= now ? pods.erase(it) : std::next(it);
    auto it = pods.find(id);
    if (it == pods.end()) {
      const Millis since = pods.empty() || !newcomersWait ? -now : now;
      pods[id] = {now + kLease, since};
    } else {
      it->second.first = now + kLease;
    }
    std::vector<PodSeen> live;
    for (const auto& [p, e] : pods) live.push_back({p, e.second, p + ":8080"});
    return live;
  }
};

struct SimResult {
  int violations = 0;
  int64_t ownedMs = 0, groupMs = 0;
  std::string first;
};

SimResult simulate(int seed, bool newcomersWait) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<Millis> delay(0, 40), offset(-50'000, 50'000), beatGap(200, 340);
  std::vector<SimPod> pods(3);
  for (std::size_t i = 0; i < pods.size(); ++i) {
    pods[i].id = "p" + std::to_string(i);
    pods[i].offset = offset(rng);
    pods[i].nextBeat = static_cast<Millis>(i) * 700;  // they start one after another
    pods[i].auth = std::make_unique<PodAuthority>(pods[i].id, kLease, kMargin);
  }
  const auto gs = groups(24);
  Registry reg;
  reg.newcomersWait = newcomersWait;
  struct Flight {
    std::size_t pod;
    Millis sent, exec, reply;
    std::vector<PodSeen> live;
  };
  std::vector<Flight> flights;
  SimResult out;
  for (Millis t = 0; t < 20'000; ++t) {
    // One pod freezes for longer than a lease once in a run; p2 stops for good at 14 s.
    if (t == 5000 + seed * 10) pods[seed % 3].frozenUntil = t + 1600;
    for (std::size_t i = 0; i < pods.size(); ++i) {
      auto& p = pods[i];
      if (t < p.frozenUntil || t < p.nextBeat || (t > 14'000 && i == 2)) continue;
      const Millis exec = t + delay(rng);
      flights.push_back({i, t + p.offset, exec, exec + delay(rng), {}});
      p.nextBeat = t + beatGap(rng);
    }
    for (auto& f : flights)
      if (f.exec == t) f.live = reg.beat(pods[f.pod].id, t);
    for (auto it = flights.begin(); it != flights.end();) {
      auto& p = pods[it->pod];
      if (it->reply <= t && t >= p.frozenUntil) {
        p.auth->beat(it->sent, t + p.offset, it->exec, it->live);
        it = flights.erase(it);
      } else {
        ++it;
      }
    }
    if (t % 5 != 0) continue;
    std::vector<std::shared_ptr<const PodView>> views;
    for (auto& p : pods) views.push_back(p.auth->view());
    for (const auto& g : gs) {
      int owners = 0;
      for (std::size_t i = 0; i < pods.size(); ++i) owners += views[i]->owns(g, t + pods[i].offset) ? 1 : 0;
      out.groupMs += 5;
      if (owners > 0) out.ownedMs += 5;
      if (owners > 1 && out.violations++ == 0) out.first = "t=" + std::to_string(t) + ": " + g + " has " + std::to_string(owners) + " owners";
    }
  }
  return out;
}

TEST(PodAuthority, InARegistryOverRealTimeNoGroupEverHasTwoOwners) {
  for (int seed = 1; seed <= 30; ++seed) {
    const auto r = simulate(seed, true);
    EXPECT_EQ(r.violations, 0) << "seed " << seed << ": " << r.first;
    EXPECT_GT(r.ownedMs * 100 / r.groupMs, 80) << "seed " << seed << ": groups have an owner most of the time";
  }
}

TEST(PodAuthority, TheOwnerCheckCatchesNewcomersThatDoNotWait) {
  int caught = 0;
  for (int seed = 1; seed <= 30; ++seed) caught += simulate(seed, false).violations > 0 ? 1 : 0;
  EXPECT_GT(caught, 20) << "the check above would not see a newcomer taking groups at once";
}

}  // namespace
}  // namespace rsc::group
