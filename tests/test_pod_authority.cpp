// The pod's powers over the groups' state (group/pod_authority.hpp), on fake clocks: the rules
// one by one, then a registry simulated over real time with pods whose clocks differ, checking
// that no pod answers alone while another may write.
#include <gtest/gtest.h>

#include <map>
#include <random>

#include "group/pod_authority.hpp"

namespace rsc::group {
namespace {

constexpr Millis kLease = 1000;
constexpr Millis kMargin = 100;

TEST(PodAuthority, APodAloneWhenItRegisteredWritesAndAnswersAloneAtOnce) {
  PodAuthority a(kLease, kMargin);
  // Local clock 5'000 while the store reads 90'000; the beat took 4 ms.
  const auto& v = a.beat("p", 5000, 5004, 90'002, {{"p", 0}});
  EXPECT_TRUE(v.may_write(5004));
  EXPECT_TRUE(v.sole(5004));
  EXPECT_EQ(v.term, 1u);
  EXPECT_TRUE(v.sole(5000 + kLease - kMargin - 1));
  EXPECT_FALSE(v.may_write(5000 + kLease - kMargin)) << "the window ends a margin before the registration can";
  EXPECT_FALSE(v.sole(5000 + kLease - kMargin));
}

TEST(PodAuthority, RenewedInTimeItKeepsItsTermAndAfterALapseItStartsANewOne) {
  PodAuthority a(kLease, kMargin);
  a.beat("p", 0, 2, 10'000, {{"p", 0}});
  EXPECT_EQ(a.beat("p", 300, 302, 10'300, {{"p", 0}}).term, 1u) << "continuous: copies stay good";
  // A freeze: the next beat comes back after the window closed.
  const auto& v = a.beat("p", 1500, 1502, 11'500, {{"p", 0}});
  EXPECT_EQ(v.term, 2u) << "another pod may have written meanwhile: copies are checked again";
  EXPECT_TRUE(v.sole(1502));
}

TEST(PodAuthority, ARegistrationMadeAnewStartsANewTermEvenWithoutAGap) {
  PodAuthority a(kLease, kMargin);
  a.beat("a", 0, 2, 1000, {{"a", -999}});
  EXPECT_EQ(a.beat("a", 300, 302, 1300, {{"a", -999}}).term, 1u) << "the same registration: nothing to tell";
  // The store lost the registry (restarted empty): the renewal registers afresh, alone again.
  EXPECT_EQ(a.beat("a", 600, 602, 1600, {{"a", -1600}}).term, 2u) << "what it cached may predate the loss";
  EXPECT_TRUE(a.view().sole(602));
}

TEST(PodAuthority, ANewPodAmongOthersWaitsAPodLeaseBeforeItWrites) {
  PodAuthority b(kLease, kMargin);
  // Registered at store time 20'000 while "a" was live (established).
  const auto& v = b.beat("b", 100, 104, 20'002, {{"a", 0}, {"b", 20'000}});
  EXPECT_FALSE(v.may_write(104));
  EXPECT_FALSE(v.sole(104));
  // Established once the store's clock has surely reached 20'000 + lease + margin.
  const Millis from = 104 + (20'000 + kLease + kMargin - 20'002);
  EXPECT_EQ(v.writableFrom, from);
  EXPECT_FALSE(b.beat("b", 400, 404, 20'302, {{"a", 0}, {"b", 20'000}}).may_write(404));
  const auto& later = b.beat("b", 1000, 1004, 20'902, {{"a", 0}, {"b", 20'000}});
  EXPECT_TRUE(later.may_write(from));
  EXPECT_FALSE(later.sole(from)) << "a is established: b writes, but never alone";
}

TEST(PodAuthority, ASolePodStopsAnsweringAloneBeforeANewcomerMayWrite) {
  PodAuthority a(kLease, kMargin);
  a.beat("a", 0, 2, 50'000, {{"a", 0}});
  const auto& v = a.beat("a", 300, 303, 50'300, {{"a", 0}, {"b", 50'250}});
  EXPECT_TRUE(v.sole(303)) << "b cannot write yet";
  EXPECT_EQ(v.term, 1u);
  // b may write from store time 50'250 + lease + margin; a is alone no later than store time 50'250 + lease - margin.
  EXPECT_LE(v.soleUntil, 300 + (50'250 + kLease - kMargin - 50'300));
  EXPECT_TRUE(v.may_write(v.soleUntil)) << "a still writes after: through the CAS, with its copies checked";
}

TEST(PodAuthority, APodTheRegistryNoLongerListsHasNoPowers) {
  PodAuthority a(kLease, kMargin);
  a.beat("a", 0, 2, 1000, {{"a", 0}});
  const auto& v = a.beat("a", 300, 302, 1300, {{"b", 0}});
  EXPECT_FALSE(v.may_write(302));
  EXPECT_FALSE(v.sole(302));
}

TEST(PodAuthority, AfterStopNothingReopensTheWindows) {
  PodAuthority a(kLease, kMargin);
  a.beat("a", 0, 2, 1000, {{"a", 0}});
  a.stop();
  EXPECT_FALSE(a.view().may_write(3));
  EXPECT_FALSE(a.beat("a", 300, 302, 1300, {{"a", 0}}).may_write(302));
}

TEST(PodAuthority, TheMarginIsATenthOfTheLeaseWithinBounds) {
  EXPECT_EQ(pod_authority_margin(1000), 100);
  EXPECT_EQ(pod_authority_margin(50), 10);
  EXPECT_EQ(pod_authority_margin(60'000), 500);
}

// --- A registry over real time ---------------------------------------------------------------
// Pods with their own clock offsets and rates within the margin's reach beat a registry that
// behaves as the store's script does (expired entries go; a registration made while no other pod
// is live counts from 0). At every real millisecond: a pod that answers alone has no other pod
// able to write.
struct SimPod {
  std::string id;
  Millis offset = 0;       // local = real + offset (rate drift is bounded by the margin, left out)
  Millis nextBeat = 0;     // real ms
  Millis frozenUntil = 0;  // real ms: no beat and no reply handled before
  PodAuthority auth{kLease, kMargin};
};

struct Registry {
  bool newcomersWait = true;  // false: the negative control, every registration counts at once
  std::map<std::string, std::pair<Millis, Millis>> pods;  // id -> (expires, since)
  std::vector<PodSeen> beat(const std::string& id, Millis now) {
    for (auto it = pods.begin(); it != pods.end();)
      it = it->second.first <= now ? pods.erase(it) : std::next(it);
    auto it = pods.find(id);
    if (it == pods.end()) {
      const Millis since = pods.empty() || !newcomersWait ? -now : now;
      pods[id] = {now + kLease, since};
    } else {
      it->second.first = now + kLease;
    }
    std::vector<PodSeen> live;
    for (const auto& [p, e] : pods) live.push_back({p, e.second});
    return live;
  }
};

struct SimResult {
  int violations = 0;
  int soleMs = 0;
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
  }
  Registry reg;
  reg.newcomersWait = newcomersWait;
  // A beat in flight: the pod, local send time, the store's time when it runs, real reply time.
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
        p.auth.beat(p.id, it->sent, t + p.offset, it->exec, it->live);
        it = flights.erase(it);
      } else {
        ++it;
      }
    }
    for (std::size_t i = 0; i < pods.size(); ++i) {
      if (!pods[i].auth.view().sole(t + pods[i].offset)) continue;
      ++out.soleMs;
      for (std::size_t j = 0; j < pods.size(); ++j)
        if (j != i && pods[j].auth.view().may_write(t + pods[j].offset)) {
          if (out.violations++ == 0)
            out.first = "t=" + std::to_string(t) + ": " + pods[i].id + " alone while " + pods[j].id + " may write";
        }
    }
  }
  return out;
}

TEST(PodAuthority, InARegistryOverRealTimeNoPodAnswersAloneWhileAnotherMayWrite) {
  for (int seed = 1; seed <= 30; ++seed) {
    const auto r = simulate(seed, true);
    EXPECT_EQ(r.violations, 0) << "seed " << seed << ": " << r.first;
    EXPECT_GT(r.soleMs, 1000) << "seed " << seed << ": some pod was alone for a while";
  }
}

TEST(PodAuthority, TheRegistryCheckCatchesNewcomersThatDoNotWait) {
  int caught = 0;
  for (int seed = 1; seed <= 30; ++seed) caught += simulate(seed, false).violations > 0 ? 1 : 0;
  EXPECT_GT(caught, 20) << "the check above would not see a newcomer writing at once";
}

}  // namespace
}  // namespace rsc::group
