// SolveCoverIlp (core/plan_search/cover_ilp.h) against enumeration on small instances.
#include "core/plan_search/cover_ilp.h"

#include <algorithm>
#include <functional>
#include <optional>
#include <random>

#include "gtest/gtest.h"

namespace oobleck {
namespace {

// Calls visit(y) for every y within the rows' capacities.
void ForEachPacking(const CoverIlp& p,
                    const std::function<void(const std::vector<int64_t>&)>& visit) {
  const size_t items = p.usage.size();
  std::vector<int64_t> y(items, 0);
  std::function<void(size_t)> rec = [&](size_t j) {
    if (j == items) {
      visit(y);
      return;
    }
    int64_t bound = INT64_MAX;
    for (size_t r = 0; r < p.capacity.size(); ++r) {
      if (p.usage[j][r] > 0) bound = std::min(bound, p.capacity[r] / p.usage[j][r]);
    }
    for (y[j] = 0; y[j] <= bound; ++y[j]) rec(j + 1);
    y[j] = 0;
  };
  rec(0);
}

// The fewest items of any feasible y, nullopt if none.
std::optional<int64_t> Enumerate(const CoverIlp& p) {
  std::optional<int64_t> best;
  ForEachPacking(p, [&](const std::vector<int64_t>& y) {
    if (!CoverIlpFeasible(p, y)) return;
    int64_t n = 0;
    for (int64_t c : y) n += c;
    if (!best || n < *best) best = n;
  });
  return best;
}

// Knapsack-like instances: the need is drawn around the most the items can gain, where
// the LP relaxation and the integers part ways.
CoverIlp RandomInstance(std::mt19937& rng, int max_items, int max_capacity) {
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  CoverIlp p;
  const int rows = pick(1, 3), items = pick(1, max_items);
  for (int r = 0; r < rows; ++r) p.capacity.push_back(pick(0, max_capacity));
  for (int j = 0; j < items; ++j) {
    std::vector<int> usage(rows);
    for (int& u : usage) u = pick(0, 4);
    if (*std::max_element(usage.begin(), usage.end()) == 0) usage[pick(0, rows - 1)] = 1;
    p.usage.push_back(usage);
    p.gain.push_back(pick(0, 30));
  }
  int64_t most = 0;
  ForEachPacking(p, [&](const std::vector<int64_t>& y) {
    int64_t gained = 0;
    for (size_t j = 0; j < y.size(); ++j) gained += p.gain[j] * y[j];
    most = std::max(most, gained);
  });
  p.need = pick(static_cast<int>(most / 2), static_cast<int>(most) + 1);
  p.min_items = pick(0, 3) == 0 ? pick(0, 3) : 0;
  if (pick(0, 2) == 0) p.max_items = pick(static_cast<int>(p.min_items), 8);
  return p;
}

void ExpectSolution(const CoverIlp& p, const CoverIlpSolution& s, int seed) {
  const std::optional<int64_t> best = Enumerate(p);
  if (!best) {
    EXPECT_TRUE(s.status == CoverIlpStatus::kInfeasible || s.status == CoverIlpStatus::kUnknown)
        << "seed " << seed;
    return;
  }
  ASSERT_NE(s.status, CoverIlpStatus::kInfeasible) << "seed " << seed;
  EXPECT_LE(s.lower_bound, *best) << "seed " << seed;
  if (s.status == CoverIlpStatus::kUnknown) return;
  EXPECT_TRUE(CoverIlpFeasible(p, s.counts)) << "seed " << seed;
  if (s.status == CoverIlpStatus::kOptimal) {
    EXPECT_EQ(s.items, *best) << "seed " << seed;
  } else {
    EXPECT_GE(s.items, *best) << "seed " << seed;
  }
}

// Checks the answer against enumeration; returns whether the solver had to branch.
bool ExpectMatchesEnumeration(const CoverIlp& p, const CoverIlpLimits& limits, int seed) {
  absl::StatusOr<CoverIlpSolution> s = SolveCoverIlp(p, limits);
  EXPECT_TRUE(s.ok()) << s.status();
  if (!s.ok()) return false;
  ExpectSolution(p, *s, seed);
  return s->nodes > 0;
}

TEST(CoverIlpTest, MatchesEnumerationOnRandomSmallInstances) {
  std::mt19937 rng(7);
  int branched = 0;
  for (int seed = 0; seed < 400; ++seed) {
    branched += ExpectMatchesEnumeration(RandomInstance(rng, 4, 14), {}, seed);
  }
  EXPECT_GT(branched, 3);  // the rounded LP alone is not always optimal here
}

TEST(CoverIlpTest, BoundsStayProvenAtTheNodeLimit) {
  std::mt19937 rng(11);
  CoverIlpLimits limits;
  limits.max_nodes = 0;  // stop right after the root: bounds only
  for (int seed = 0; seed < 200; ++seed) {
    ExpectMatchesEnumeration(RandomInstance(rng, 4, 14), limits, seed);
  }
}

TEST(CoverIlpTest, FirstFeasibleAnswersFeasibilityWithAWitness) {
  std::mt19937 rng(13);
  CoverIlpLimits limits;
  limits.goal = CoverIlpGoal::kFirstFeasible;
  int feasible = 0, infeasible = 0;
  for (int seed = 0; seed < 400; ++seed) {
    const CoverIlp p = RandomInstance(rng, 4, 14);
    absl::StatusOr<CoverIlpSolution> s = SolveCoverIlp(p, limits);
    ASSERT_TRUE(s.ok()) << s.status();
    ExpectSolution(p, *s, seed);  // a proven bound; optimal when it says so
    const bool exists = Enumerate(p).has_value();
    EXPECT_EQ(s->status != CoverIlpStatus::kInfeasible, exists) << "seed " << seed;
    EXPECT_NE(s->status, CoverIlpStatus::kUnknown) << "seed " << seed;  // far below the limit
    feasible += exists;
    infeasible += !exists;
  }
  EXPECT_GT(feasible, 50);
  EXPECT_GT(infeasible, 20);
}

TEST(CoverIlpTest, RelaxationGivesAProvenBoundWithoutBranching) {
  std::mt19937 rng(17);
  CoverIlpLimits limits;
  limits.goal = CoverIlpGoal::kRelaxation;
  int open = 0;
  for (int seed = 0; seed < 400; ++seed) {
    const CoverIlp p = RandomInstance(rng, 4, 14);
    absl::StatusOr<CoverIlpSolution> s = SolveCoverIlp(p, limits);
    ASSERT_TRUE(s.ok()) << s.status();
    EXPECT_EQ(s->nodes, 0) << "seed " << seed;
    ExpectSolution(p, *s, seed);
    open += s->status == CoverIlpStatus::kBounded || s->status == CoverIlpStatus::kUnknown;
  }
  EXPECT_GT(open, 3);  // some instances are left open, which the bound then covers
}

TEST(CoverIlpTest, StopsOnceTheBoundReachesWhatIsAsked) {
  std::mt19937 rng(19);
  int stopped = 0;
  for (int seed = 0; seed < 400; ++seed) {
    const CoverIlp p = RandomInstance(rng, 4, 14);
    const std::optional<int64_t> best = Enumerate(p);
    if (!best || *best < 2) continue;
    CoverIlpLimits limits;
    limits.stop_at_bound = *best - 1;  // below the optimum: a proof of it is enough
    absl::StatusOr<CoverIlpSolution> s = SolveCoverIlp(p, limits);
    ASSERT_TRUE(s.ok()) << s.status();
    ExpectSolution(p, *s, seed);
    EXPECT_GE(s->lower_bound, limits.stop_at_bound) << "seed " << seed;
    stopped += s->status != CoverIlpStatus::kOptimal;
    limits.stop_at_bound = *best + 1;  // above it: solved to optimality as before
    s = SolveCoverIlp(p, limits);
    ASSERT_TRUE(s.ok()) << s.status();
    EXPECT_EQ(s->status, CoverIlpStatus::kOptimal) << "seed " << seed;
    EXPECT_EQ(s->items, *best) << "seed " << seed;
  }
  EXPECT_GT(stopped, 3);
}

TEST(CoverIlpTest, LargeCapacitiesSolveAtTheRoot) {
  // 4 rows of 1000, items of 1-3 per row: the rounded LP is optimal, no branching.
  CoverIlp p;
  p.capacity = {1000, 1000, 1000, 1000};
  std::mt19937 rng(3);
  for (int j = 0; j < 40; ++j) {
    std::vector<int> usage(4);
    for (int& u : usage) u = std::uniform_int_distribution<int>(0, 3)(rng);
    usage[j % 4] += 1;
    p.usage.push_back(usage);
    p.gain.push_back(std::uniform_int_distribution<int>(1, 50)(rng));
  }
  p.need = 20000;
  absl::StatusOr<CoverIlpSolution> s = SolveCoverIlp(p, {});
  ASSERT_TRUE(s.ok()) << s.status();
  ASSERT_EQ(s->status, CoverIlpStatus::kOptimal);
  EXPECT_TRUE(CoverIlpFeasible(p, s->counts));
  EXPECT_EQ(s->items, s->lower_bound);
}

// Found by the rpc_structure fuzzer (a Replan): GLPK reports -DBL_MAX as the bound of a node
// whose relaxation is not solved yet, and rounding that down overflowed to -inf, which the
// conversion to int64 did not survive (undefined behaviour; UBSan stops the sanitizer suite).
TEST(CoverIlpTest, UnsolvedNodeBoundsAreNoBound) {
  CoverIlp p;
  p.capacity = {2, 2, 2, 1, 2, 2};
  const std::vector<std::pair<int, std::vector<int>>> items = {
      {3, {0, 0, 1, 0, 0, 0}},  {2, {0, 0, 0, 1, 0, 0}},  {2, {0, 0, 0, 0, 1, 0}},
      {1, {0, 0, 0, 0, 0, 1}},  {21, {2, 0, 0, 0, 0, 0}}, {15, {1, 1, 0, 0, 0, 0}},
      {14, {1, 0, 1, 0, 0, 0}}, {13, {1, 0, 0, 1, 0, 0}}, {12, {1, 0, 0, 0, 1, 0}},
      {11, {1, 0, 0, 0, 0, 1}}, {10, {0, 2, 0, 0, 0, 0}}, {8, {0, 1, 1, 0, 0, 0}},
      {7, {0, 1, 0, 1, 0, 0}},  {7, {0, 1, 0, 0, 1, 0}},  {6, {0, 1, 0, 0, 0, 1}},
      {6, {0, 0, 2, 0, 0, 0}},  {5, {0, 0, 1, 1, 0, 0}},  {5, {0, 0, 1, 0, 1, 0}},
      {4, {0, 0, 1, 0, 0, 1}},  {4, {0, 0, 0, 1, 1, 0}},  {3, {0, 0, 0, 1, 0, 1}},
      {3, {0, 0, 0, 0, 2, 0}},  {3, {0, 0, 0, 0, 1, 1}},  {2, {0, 0, 0, 0, 0, 2}}};
  for (const auto& [gain, usage] : items) {
    p.gain.push_back(gain);
    p.usage.push_back(usage);
  }
  p.need = 46;
  p.max_items = 46;
  absl::StatusOr<CoverIlpSolution> solved = SolveCoverIlp(p, CoverIlpLimits{});
  ASSERT_TRUE(solved.ok()) << solved.status();
  // Six items at least (21+15+... : 5 items gain 45 at most, found by a DP over the rows'
  // capacities; enumeration is too slow for 24 items).
  ASSERT_EQ(solved->status, CoverIlpStatus::kOptimal);
  EXPECT_EQ(solved->objective, 6);
  EXPECT_TRUE(CoverIlpFeasible(p, solved->counts));
}

TEST(CoverIlpTest, RejectsMalformedInput) {
  CoverIlp p;
  p.capacity = {1};
  p.usage = {{1, 2}};
  p.gain = {1};
  EXPECT_EQ(SolveCoverIlp(p, {}).status().code(), absl::StatusCode::kInvalidArgument);
  p.usage = {{-1}};
  EXPECT_EQ(SolveCoverIlp(p, {}).status().code(), absl::StatusCode::kInvalidArgument);
  p.usage = {{1}};
  p.gain = {1, 2};
  EXPECT_EQ(SolveCoverIlp(p, {}).status().code(), absl::StatusCode::kInvalidArgument);
  p.gain = {1};
  p.min_items = 3;
  p.max_items = 2;
  EXPECT_EQ(SolveCoverIlp(p, {}).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(CoverIlpTest, EmptyDemandNeedsNoItem) {
  CoverIlp p;
  p.capacity = {0};
  p.usage = {{1}};
  p.gain = {5};
  absl::StatusOr<CoverIlpSolution> s = SolveCoverIlp(p, {});
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->status, CoverIlpStatus::kOptimal);
  EXPECT_EQ(s->items, 0);
  p.need = 1;  // nothing fits in a capacity of 0
  s = SolveCoverIlp(p, {});
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->status, CoverIlpStatus::kInfeasible);
}

}  // namespace
}  // namespace oobleck

namespace oobleck {
namespace {

// The least weighted objective of any feasible y (budget row included), nullopt if none.
std::optional<int64_t> EnumerateWeighted(const CoverIlp& p) {
  std::optional<int64_t> best;
  ForEachPacking(p, [&](const std::vector<int64_t>& y) {
    if (!CoverIlpFeasible(p, y)) return;
    int64_t value = 0;
    for (size_t j = 0; j < y.size(); ++j) value += p.weight[j] * y[j];
    if (!best || value < *best) best = value;
  });
  return best;
}

TEST(CoverIlpTest, WeightsAndBudgetMatchEnumeration) {
  std::mt19937 rng(23);
  int feasible = 0, budget_binds = 0;
  for (int seed = 0; seed < 400; ++seed) {
    CoverIlp p = RandomInstance(rng, 4, 14);
    // Prices of the size the plan search uses (1e-4 steps of a few per hour per node).
    for (size_t j = 0; j < p.usage.size(); ++j) {
      p.weight.push_back(std::uniform_int_distribution<int64_t>(0, 90000)(rng));
    }
    const std::optional<int64_t> free = EnumerateWeighted(p);
    if (seed % 2 == 0 && free) {
      // A budget on another price per item, below what some optimum without it spends.
      for (size_t j = 0; j < p.usage.size(); ++j) {
        p.spend.push_back(std::uniform_int_distribution<int64_t>(0, 50)(rng));
      }
      int64_t spent = 0;
      ForEachPacking(p, [&](const std::vector<int64_t>& y) {
        int64_t value = 0, spend = 0;
        for (size_t j = 0; j < y.size(); ++j) {
          value += p.weight[j] * y[j];
          spend += p.spend[j] * y[j];
        }
        if (value == *free && CoverIlpFeasible(p, y)) spent = std::max(spent, spend);
      });
      p.budget = std::uniform_int_distribution<int64_t>(spent * 3 / 4, spent)(rng);
    }
    absl::StatusOr<CoverIlpSolution> s = SolveCoverIlp(p, {});
    ASSERT_TRUE(s.ok()) << s.status();
    const std::optional<int64_t> best = EnumerateWeighted(p);
    if (!best) {
      EXPECT_EQ(s->status, CoverIlpStatus::kInfeasible) << "seed " << seed;
      continue;
    }
    ++feasible;
    budget_binds += p.budget >= 0 && free && *best > *free;
    ASSERT_EQ(s->status, CoverIlpStatus::kOptimal) << "seed " << seed;
    EXPECT_TRUE(CoverIlpFeasible(p, s->counts)) << "seed " << seed;
    EXPECT_EQ(s->objective, *best) << "seed " << seed;
    EXPECT_EQ(s->lower_bound, *best) << "seed " << seed;
  }
  EXPECT_GT(feasible, 100);
  EXPECT_GT(budget_binds, 2);  // the budget changes the optimum on some instances
}

}  // namespace
}  // namespace oobleck
