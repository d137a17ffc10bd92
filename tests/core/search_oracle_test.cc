// The template search against the previous one (tests/reference_search, the oracle kept
// until the new search has earned trust) on random mid-size instances with fixed seeds:
// 2-4 node types of 1, 2, 4 or 8 GPUs, 12-40 layers, every mix of up to 3-5 nodes, both
// cost models. Same feasibility and the same optimal iteration time for every mix.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "core/cluster.h"
#include "core/cost_model.h"
#include "core/search.h"
#include "gtest/gtest.h"
#include "tests/asan.h"
#include "tests/core/test_problems.h"
#include "tests/reference_search/search_reference.h"

namespace oobleck {
namespace {

struct MidSizeInstance {
  PlanningProblem problem;
  std::vector<NodeMix> mixes;
};

MidSizeInstance MakeMidSizeInstance(uint32_t seed, CostModelKind kind) {
  std::mt19937 rng(seed);
  auto uniform = [&](double lo, double hi) {
    return std::uniform_real_distribution<double>(lo, hi)(rng);
  };
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  const int L = pick(12, 40);
  const int T = pick(2, 4);
  MidSizeInstance inst;
  PlanningProblem& p = inst.problem;
  p.cost_model = kind;
  p.microbatches = kind == CostModelKind::kOneFOneB ? pick(2, 32) : pick(0, 1) * pick(8, 32);
  p.inter_node_bytes_per_s = uniform(5e9, 50e9);
  p.missing_allreduce = MissingAllreduce::kRing;
  const testing::RandomLayers drawn =
      testing::MakeRandomLlmLayers(rng, L, p.optimizer_state_multiplier, 5e7);
  const std::vector<LayerProfile>& base = drawn.layers;
  const double whole = drawn.whole_bytes;
  const NodeMix available = testing::AddRandomLlmNodeTypes(
      rng, T, base,
      {.gpus = [&] { return 1 << pick(0, 3); },
       .layer_speed = [](double speed) { return speed; },
       // Per GPU: from "the whole model fits on one GPU" to "a node holds a small share".
       .memory_bytes = [&] { return pick(0, 2) == 0 ? whole : whole * uniform(0.05, 0.6); },
       .available = [&] { return pick(1, 3); }},
      p);
  inst.mixes = EnumerateMixes(available, 1, pick(3, 5));
  return inst;
}

class SearchOracleTest : public ::testing::TestWithParam<std::tuple<CostModelKind, int>> {};

TEST_P(SearchOracleTest, SameOptimaAsThePreviousSearch) {
  const auto [kind, first_seed] = GetParam();
  const uint32_t seeds = OracleSeeds(5);
  for (uint32_t seed = first_seed; seed < static_cast<uint32_t>(first_seed) + seeds; ++seed) {
    const MidSizeInstance inst = MakeMidSizeInstance(seed, kind);
    auto model = CostModel::Create(inst.problem);
    ASSERT_TRUE(model.ok()) << "seed " << seed << ": " << model.status();
    auto got = SearchTemplates(*model, inst.mixes);
    auto want = reference_search::SearchTemplates(*model, inst.mixes);
    ASSERT_TRUE(got.ok()) << "seed " << seed << ": " << got.status();
    ASSERT_TRUE(want.ok()) << "seed " << seed << ": " << want.status();
    ASSERT_EQ(got->size(), want->size());
    for (size_t i = 0; i < got->size(); ++i) {
      const MixResult& a = (*got)[i];
      const MixResult& b = (*want)[i];
      const std::string where = "seed " + std::to_string(seed) + " " +
                                std::string(CostModelName(kind)) +
                                " M=" + std::to_string(inst.problem.microbatches) + " mix " +
                                MixLabel(a.mix, inst.problem.node_types);
      ASSERT_EQ(a.feasible, b.feasible) << where;
      if (!a.feasible) continue;
      EXPECT_NEAR(a.best.iteration_time_ms, b.best.iteration_time_ms,
                  1e-9 * b.best.iteration_time_ms)
          << where;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(BothModels, SearchOracleTest,
                         ::testing::Combine(::testing::Values(CostModelKind::kOneFOneB,
                                                              CostModelKind::kOobleckSosp23),
                                            ::testing::Values(1, 101, 201)));

}  // namespace
}  // namespace oobleck
