// The parts of the plan search on their own (core/plan_search/: node_count_dp, makespan_ilp,
// search_shapes) and the one home of the ring all-reduce estimate (core/cost_model.h).
#include <algorithm>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/cost_model.h"
#include "core/plan/limits.h"
#include "core/plan/pipeline_set.h"
#include "core/plan/pipeline_shape.h"
#include "core/plan/template_set.h"
#include "core/plan_search/allreduce.h"
#include "core/plan_search/makespan_ilp.h"
#include "core/plan_search/node_count_dp.h"
#include "core/plan_search/search_shapes.h"
#include "gtest/gtest.h"
#include "tests/core/test_planner.h"
#include "tests/core/test_problems.h"

namespace oobleck {
namespace {

using ::oobleck::testing::MakePlanner;

TEST(RingAllreduceTest, TwoTimesTheShareOfTheOthers) {
  EXPECT_DOUBLE_EQ(RingAllreduceMs(4, 1e9, 1e9), 1500);  // 2 * 3/4 * 1 s
  EXPECT_DOUBLE_EQ(RingAllreduceMs(2, 5e8, 1e9), 500);
  EXPECT_EQ(RingAllreduceMs(1, 1e9, 1e9), 0);
}

// Without measured all-reduces across nodes, the cross-pipeline table is the ring estimate
// of the model's largest parameter bytes per layer.
TEST(RingAllreduceTest, CrossPipelineTableUsesTheRingEstimate) {
  testing::RandomInstance inst = testing::MakeRandomInstance(11, CostModelKind::kOneFOneB, 6, 4);
  double params = 0;
  const int L = inst.problem.profiles[0]->num_layers();
  for (auto& profile : inst.problem.profiles) {
    auto copy = std::make_shared<ModelProfile>(*profile);
    for (LayerProfile& layer : copy->layers) layer.allreduce_across_nodes_ms.clear();
    profile = copy;
  }
  for (int l = 0; l < L; ++l) {
    double largest = 0;
    for (const auto& profile : inst.problem.profiles) {
      largest = std::max(largest, profile->layers[l].param_bytes);
    }
    params += largest;
  }
  auto p = MakePlanner(inst.problem);
  const std::vector<double> table = CrossPipelineAllreduceMs(*p.model, 6);
  ASSERT_EQ(table.size(), 7u);
  for (int P = 2; P <= 6; ++P) {
    EXPECT_DOUBLE_EQ(table[P], RingAllreduceMs(P, params, inst.problem.inter_node_bytes_per_s))
        << "P = " << P;
  }
}

// The node-count DP and the integer program answer the same question per makespan: the
// fewest free pipelines that run the batch within it.
TEST(PlanSearchPartsTest, DpAndIntegerProgramAgreeOnTheFewestPipelines) {
  int compared = 0;
  for (uint32_t seed = 0; seed < 60; ++seed) {
    testing::RandomInstance inst = testing::MakeRandomInstance(
        7300 + seed, seed % 2 ? CostModelKind::kOneFOneB : CostModelKind::kOobleckSosp23, 5, 6);
    std::mt19937 rng(seed);
    auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
    const int nodes = std::max(1, MixSize(inst.available));
    auto p = MakePlanner(inst.problem);
    PipelineSizeLimits limits;
    limits.max_nodes = pick(1, 3);
    absl::StatusOr<PipelineSizeLimits> resolved = ResolveLimits(limits, nodes);
    ASSERT_TRUE(resolved.ok());
    absl::StatusOr<TemplateSet> set =
        PlanTemplateSet(*p.templates, *p.model, inst.available, *resolved, {});
    ASSERT_TRUE(set.ok()) << set.status();
    const std::vector<double> allreduce = CrossPipelineAllreduceMs(*p.model, nodes + 1);
    PipelineSetProblem problem;
    problem.model = p.model.get();
    problem.available = inst.available;
    problem.shapes = FeasibleShapes(*p.model, *set, *resolved);
    problem.global_batch = pick(1, 3 * nodes);
    problem.allreduce_ms = &allreduce;
    if (problem.shapes.empty()) continue;
    plan_search::SearchShapes shapes(problem);
    plan_search::SearchProgress progress(problem);
    plan_search::NodeCountDp dp(shapes, progress);
    plan_search::MakespanIlp ilp(shapes, progress);
    const double top = shapes.TopTau();
    for (double tau : {top, top * 0.75, top * 0.5}) {
      const std::string where = absl::StrCat("seed ", seed, ", tau ", tau);
      absl::StatusOr<int> by_dp = dp.MinPipelines(tau, shapes.MaxFreePipelines());
      absl::StatusOr<const plan_search::IlpAnswer*> by_ilp = ilp.Solve(tau, CoverIlpGoal::kOptimal);
      ASSERT_TRUE(by_dp.ok()) << by_dp.status() << " " << where;
      ASSERT_TRUE(by_ilp.ok()) << by_ilp.status() << " " << where;
      const int ilp_count =
          plan_search::HasPlan(**by_ilp) ? static_cast<int>((*by_ilp)->items) : -1;
      EXPECT_EQ(*by_dp, ilp_count) << where;
      ++compared;
    }
  }
  EXPECT_GT(compared, 60);
}

}  // namespace
}  // namespace oobleck
