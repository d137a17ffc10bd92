// The whole-layer bound (core/template_search/whole_layer_bound.h) against the optima on random
// long-ish instances with fixed seeds: it must never exceed a mix's optimum (the exact search's,
// itself checked against the previous search and the brute force by search_oracle_test and
// search_test), under the real 1f1b cost model with transfers, memory that binds on some types,
// GPU splits with all-reduces and per-layer speeds that differ by type (so no one price per GPU
// is exact). It must also be close to the optimum on most mixes, or it would be useless as a
// guess.
#include "core/template_search/whole_layer_bound.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "core/cluster.h"
#include "core/cost_model.h"
#include "core/interrupt.h"
#include "core/search.h"
#include "core/template_search/bottleneck_bound.h"
#include "core/template_search/branch_and_bound.h"
#include "core/template_search/objectives.h"
#include "core/template_search/stage_costs.h"
#include "core/template_search/state_space.h"
#include "gtest/gtest.h"
#include "tests/asan.h"
#include "tests/core/test_problems.h"
#include "tests/reference_search/search_reference.h"
#include "tests/reference_search/whole_layer_reference.h"

namespace oobleck {
namespace {

struct LongInstance {
  PlanningProblem problem;
  std::vector<NodeMix> mixes;
};

// `min_layers` to `max_layers` layers (60 to 140 for the tests against the optima).
LongInstance MakeLongInstance(uint32_t seed, int min_layers = 60, int max_layers = 140) {
  std::mt19937 rng(seed);
  auto uniform = [&](double lo, double hi) {
    return std::uniform_real_distribution<double>(lo, hi)(rng);
  };
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  const int L = pick(min_layers, max_layers);
  const int T = pick(2, 3);
  LongInstance inst;
  PlanningProblem& p = inst.problem;
  p.cost_model = CostModelKind::kOneFOneB;
  p.microbatches = pick(2, 50);
  p.inter_node_bytes_per_s = uniform(2e9, 50e9);
  p.missing_allreduce = MissingAllreduce::kRing;
  const testing::RandomLayers drawn =
      testing::MakeRandomLlmLayers(rng, L, p.optimizer_state_multiplier, 5e7);
  const std::vector<LayerProfile>& base = drawn.layers;
  const double whole = drawn.whole_bytes;
  const NodeMix available = testing::AddRandomLlmNodeTypes(
      rng, T, base,
      {.gpus = [&] { return 1 << pick(0, 2); },
       // Types differ layer by layer.
       .layer_speed = [&](double speed) { return speed * uniform(0.7, 1.4); },
       .memory_bytes = [&] { return pick(0, 1) == 0 ? whole : whole * uniform(0.1, 0.6); },
       .available = [&] { return pick(1, 2); }},
      p);
  inst.mixes = EnumerateMixes(available, 1, pick(2, 4));
  return inst;
}

// Expects `got` and `want` (results for inst.mixes, in order) to agree mix by mix on feasibility
// and optimal time; returns how many mixes both find feasible.
int ExpectSameOptima(const std::vector<MixResult>& got, const std::vector<MixResult>& want,
                     const LongInstance& inst, uint32_t seed) {
  EXPECT_EQ(got.size(), inst.mixes.size());
  EXPECT_EQ(want.size(), inst.mixes.size());
  int feasible = 0;
  for (size_t i = 0; i < std::min(got.size(), want.size()); ++i) {
    const MixResult& a = got[i];
    const MixResult& b = want[i];
    const std::string where = "seed " + std::to_string(seed) +
                              " M=" + std::to_string(inst.problem.microbatches) + " mix " +
                              MixLabel(b.mix, inst.problem.node_types);
    EXPECT_EQ(a.feasible, b.feasible) << where;
    if (!a.feasible || !b.feasible) continue;
    ++feasible;
    EXPECT_NEAR(a.best.iteration_time_ms, b.best.iteration_time_ms, 1e-9 * b.best.iteration_time_ms)
        << where;
  }
  return feasible;
}

TEST(WholeLayerBoundTest, NeverAboveTheOptimumAndCloseToItOnLongInstances) {
  int feasible = 0, close = 0;
  for (uint32_t seed = 1; seed <= 8; ++seed) {
    const LongInstance inst = MakeLongInstance(seed);
    auto model = CostModel::Create(inst.problem);
    ASSERT_TRUE(model.ok()) << "seed " << seed << ": " << model.status();
    auto optima = SearchTemplates(*model, inst.mixes);
    ASSERT_TRUE(optima.ok()) << "seed " << seed << ": " << optima.status();
    Interrupt interrupt(nullptr);
    const template_search::StageCosts costs(*model);
    const template_search::StateSpace space(*model, inst.mixes, &interrupt);
    const template_search::PrefixMaxBound prefix_max(costs, space, inst.mixes, interrupt);
    const template_search::WholeLayerBound bound(costs, inst.problem.microbatches);
    for (size_t i = 0; i < inst.mixes.size(); ++i) {
      const MixResult& r = (*optima)[i];
      if (!r.feasible) continue;
      ++feasible;
      const double optimum = r.best.iteration_time_ms;
      const double with_max =
          bound.ForMix(inst.mixes[i], prefix_max.ForMix(inst.mixes[i]), interrupt);
      const double alone = bound.ForMix(inst.mixes[i], 0, interrupt);
      const std::string where = "seed " + std::to_string(seed) +
                                " M=" + std::to_string(inst.problem.microbatches) + " mix " +
                                MixLabel(r.mix, inst.problem.node_types);
      EXPECT_LE(with_max, optimum * (1 + 1e-9)) << where;
      EXPECT_LE(alone, optimum * (1 + 1e-9)) << where;
      EXPECT_GT(with_max, 0) << where;
      if (with_max >= 0.97 * optimum) ++close;
    }
  }
  EXPECT_GE(feasible, 40);
  EXPECT_GE(close, feasible / 2) << close << " of " << feasible << " within 3 %";
}

// The whole-layer bound's figures are the previous implementation's (main 64f75e5, kept in
// tests/reference_search/whole_layer_reference.h) bit for bit, on long random instances: the
// root bound of every mix (ForMixes shares its DPs across mixes), the priced prefix sums of
// every subset of types at caps across each mix's window (at four work prices in one pass),
// and the prefix tables' Q at every prefix, free multiset and grid cap. Equal figures make
// the search visit the same states. (It fails with the stage's out-transfer left out of the
// DP, or with Q reading every type's GPUs per node from type 0.)
TEST(WholeLayerBoundTest, EqualsThePreviousImplementationOnLongInstances) {
  int mixes = 0, finite = 0, prefix_values = 0, q_values = 0;
  for (uint32_t seed = 101; seed <= 104; ++seed) {
    const LongInstance inst = MakeLongInstance(seed, 300, 700);
    auto model = CostModel::Create(inst.problem);
    ASSERT_TRUE(model.ok()) << "seed " << seed << ": " << model.status();
    Interrupt interrupt(nullptr);
    const template_search::StageCosts costs(*model);
    const template_search::StateSpace space(*model, inst.mixes, &interrupt);
    const template_search::PrefixMaxBound prefix_max(costs, space, inst.mixes, interrupt);
    const int M = inst.problem.microbatches, T = model->num_types();
    const template_search::WholeLayerBound bound(costs, M);
    const reference_search::WholeLayerBound reference(costs, M);
    std::vector<double> least_max(inst.mixes.size());
    for (size_t i = 0; i < inst.mixes.size(); ++i) least_max[i] = prefix_max.ForMix(inst.mixes[i]);
    const std::vector<double> roots = bound.ForMixes(inst.mixes, least_max, interrupt);
    const std::vector<double> old_roots = reference.ForMixes(inst.mixes, least_max, interrupt);
    const std::string at = "seed " + std::to_string(seed);
    ASSERT_EQ(roots, old_roots) << at;
    for (size_t i = 0; i < inst.mixes.size(); ++i) {
      EXPECT_EQ(bound.ForMix(inst.mixes[i], 0, interrupt),
                reference.ForMix(inst.mixes[i], 0, interrupt))
          << at << " mix " << i;
      ++mixes;
      if (roots[i] > 0) ++finite;
    }
    // Every subset of types at caps from the smallest least max to twice the largest.
    const double lo = *std::min_element(least_max.begin(), least_max.end());
    const double hi = 2 * *std::max_element(least_max.begin(), least_max.end());
    for (int types = 1; types < (1 << T); ++types) {
      for (double cap = lo; cap <= hi; cap *= 1.13) {
        const std::vector<double> prices = {0.7, 3, 4.5, 6};
        std::vector<std::vector<double>> lambda, sums;
        bound.PricedPrefixSums(types, cap, prices, lambda, sums);
        ASSERT_EQ(lambda.size(), prices.size());
        ASSERT_EQ(sums.size(), prices.size());
        for (size_t p = 0; p < prices.size(); ++p) {
          std::vector<double> old_lambda, old_sums;
          reference.PricedPrefixSums(types, cap, prices[p], old_lambda, old_sums);
          ASSERT_EQ(lambda[p], old_lambda) << at << " types " << types << " cap " << cap;
          ASSERT_EQ(sums[p], old_sums) << at << " types " << types << " cap " << cap;
          prefix_values += static_cast<int>(old_sums.size());
        }
      }
    }
    // The tables as SetUpWholeLayer plans them, read at every prefix, every free multiset
    // below a mix and every cap of the mixes' windows.
    std::vector<double> widest(inst.mixes.size()), most_max;
    for (size_t i = 0; i < roots.size(); ++i) {
      widest[i] = roots[i] > 0 ? roots[i] * (1 + template_search::kWholeLayerTableSlack)
                               : std::numeric_limits<double>::infinity();
    }
    template_search::WholeLayerWindows(costs, inst.mixes, M, prefix_max, widest, least_max,
                                       most_max);
    const template_search::WholeLayerPrefixBound tables(costs, inst.mixes, least_max, most_max,
                                                        interrupt);
    const reference_search::WholeLayerPrefixBound old_tables(costs, inst.mixes, least_max, most_max,
                                                             interrupt);
    ASSERT_EQ(tables.tables(), old_tables.tables()) << at;
    int j_lo = 0, j_hi = -1;
    for (size_t i = 0; i < inst.mixes.size(); ++i) {
      if (!(least_max[i] > 0) || !std::isfinite(most_max[i])) continue;
      const int a = template_search::WholeLayerCurve::GridIndex(least_max[i]) - 3;
      const int b = template_search::WholeLayerCurve::GridIndex(most_max[i]) + 3;
      j_lo = j_hi < j_lo ? a : std::min(j_lo, a);
      j_hi = std::max(j_hi, b);
    }
    for (int d = 0; d < space.num_useful(); ++d) {
      NodeMix free(T);
      for (int t = 0; t < T; ++t) free[t] = space.count(space.Code(d), t);
      for (int a = 0; a <= model->num_layers(); a += 13) {
        for (int j = j_lo; j <= j_hi; ++j) {
          ASSERT_EQ(tables.Cap(j), old_tables.Cap(j)) << at << " j " << j;
          ASSERT_EQ(tables.Q(a, free, j), old_tables.Q(a, free, j))
              << at << " a " << a << " j " << j;
          ++q_values;
        }
      }
    }
  }
  EXPECT_GE(mixes, 20);
  EXPECT_GE(finite, mixes / 2);
  EXPECT_GE(prefix_values, 100000);
  EXPECT_GE(q_values, 100000);
}

// The whole-layer pruning (beam rounds guessed from the root bound, boundary states pruned by
// WholeLayerPrefixBound's curves) must keep every optimum. It runs by itself from 256 layers
// (tests/core/long_model_search_test.cc checks that path against the previous search);
// forced on here, on shorter instances with memory binding on some types, it must give mix
// by mix the optima of the same search without it. (With every prefix bound Q raised by
// 0.1 % it fails at seed 1, as do the long-model tests, so the curves do prune here.)
TEST(WholeLayerBoundTest, PruningByThePrefixBoundKeepsEveryOptimum) {
  using template_search::WholeLayerPruning;
  int feasible = 0;
  for (uint32_t seed = 1; seed <= 12; ++seed) {
    const LongInstance inst = MakeLongInstance(seed);
    auto model = CostModel::Create(inst.problem);
    ASSERT_TRUE(model.ok()) << "seed " << seed << ": " << model.status();
    const template_search::OneFOneBObjective objective{inst.problem.microbatches,
                                                       model->memory_can_bind()};
    auto on =
        template_search::BranchAndBound(*model, inst.mixes, objective, SearchOptions{},
                                        template_search::Moves::kStages, WholeLayerPruning::kOn);
    auto off =
        template_search::BranchAndBound(*model, inst.mixes, objective, SearchOptions{},
                                        template_search::Moves::kStages, WholeLayerPruning::kOff);
    ASSERT_TRUE(on.ok()) << "seed " << seed << ": " << on.status();
    ASSERT_TRUE(off.ok()) << "seed " << seed << ": " << off.status();
    feasible += ExpectSameOptima(*on, *off, inst, seed);
  }
  EXPECT_GE(feasible, 60);
}

// The same pruning, on other seeds of the same builder, against the previous search
// (tests/reference_search, which knows nothing of these bounds): the beam rounds, the exact
// pass with every boundary state pruned by the curves, and in every 1f1b pass the source
// fronts PullStages skips by their least sum and max (no served mix could use even a label
// with both) must keep every optimum. (With a front's least max read 0.1 % too high, or its
// least sum plus c 0.01 %, it fails at 10 of its 12 seeds: feasible mixes are left without a
// template.)
TEST(WholeLayerBoundTest, PrunedSearchMatchesThePreviousSearchOnLongInstances) {
  using template_search::WholeLayerPruning;
  int feasible = 0;
  const uint32_t seeds = OracleSeeds(12);
  for (uint32_t seed = 101; seed < 101 + seeds; ++seed) {
    const LongInstance inst = MakeLongInstance(seed);
    auto model = CostModel::Create(inst.problem);
    ASSERT_TRUE(model.ok()) << "seed " << seed << ": " << model.status();
    const template_search::OneFOneBObjective objective{inst.problem.microbatches,
                                                       model->memory_can_bind()};
    auto got =
        template_search::BranchAndBound(*model, inst.mixes, objective, SearchOptions{},
                                        template_search::Moves::kStages, WholeLayerPruning::kOn);
    auto want = reference_search::SearchTemplates(*model, inst.mixes);
    ASSERT_TRUE(got.ok()) << "seed " << seed << ": " << got.status();
    ASSERT_TRUE(want.ok()) << "seed " << seed << ": " << want.status();
    feasible += ExpectSameOptima(*got, *want, inst, seed);
  }
  EXPECT_GE(feasible, static_cast<int>(4 * seeds));
}

}  // namespace
}  // namespace oobleck
