// MaxPipelineCount (core/plan_search/pipeline_set_search.h), the count behind Replan's
// f-failure guarantee: the integer programs against the node-count DP and a brute force over
// pipeline multisets on many small random instances, and a cluster of many node types whose
// DP state space is past its bound.
#include <algorithm>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/plan/limits.h"
#include "core/plan/pipeline_set.h"
#include "core/plan/pipeline_shape.h"
#include "core/plan/template_set.h"
#include "core/plan_search/allreduce.h"
#include "core/plan_search/pipeline_set_search.h"
#include "core/replan.h"
#include "gtest/gtest.h"
#include "tests/core/test_planner.h"
#include "tests/core/test_problems.h"

namespace oobleck {
namespace {

using ::oobleck::testing::MakePlanner;

// The most pipelines (fixed + new, capped at at_most) of any multiset of shapes that fits
// `available` and runs the batch at the largest makespan: every pipeline takes at least one
// micro-batch, at most its memory limit, and together they hold the batch. 0 when none.
int BruteForceMost(const PipelineSetProblem& problem, int at_most) {
  const int B = problem.global_batch;
  const int fixed = static_cast<int>(problem.fixed.size());
  int64_t fixed_hold = 0;
  for (const PipelineShape& f : problem.fixed) fixed_hold += std::min(f.max_microbatches, B);
  for (const PipelineShape& f : problem.fixed) {
    if (f.max_microbatches < 1) return 0;
  }
  int best = -1;
  NodeMix left = problem.available;
  std::function<void(size_t, int, int64_t)> rec = [&](size_t j, int count, int64_t hold) {
    if (fixed + count <= B && fixed_hold + hold >= B) best = std::max(best, fixed + count);
    for (size_t k = j; k < problem.shapes.size(); ++k) {
      const PipelineShape& s = problem.shapes[k];
      bool fits = s.max_microbatches >= 1;
      for (size_t t = 0; t < left.size() && fits; ++t) fits = s.mix[t] <= left[t];
      if (!fits) continue;
      for (size_t t = 0; t < left.size(); ++t) left[t] -= s.mix[t];
      rec(k, count + 1, hold + std::min(s.max_microbatches, B));
      for (size_t t = 0; t < left.size(); ++t) left[t] += s.mix[t];
    }
  };
  if (fixed <= B) rec(0, 0, 0);
  return best < 0 ? 0 : std::min(best, at_most);
}

TEST(MaxPipelineCountTest, IntegerProgramsMatchTheDpAndABruteForce) {
  int compared = 0, capped = 0;
  for (uint32_t seed = 0; seed < 300; ++seed) {
    testing::RandomInstance inst = testing::MakeRandomInstance(
        5100 + seed, seed % 2 ? CostModelKind::kOneFOneB : CostModelKind::kOobleckSosp23, 5, 8);
    std::mt19937 rng(seed);
    auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
    const int T = static_cast<int>(inst.available.size());
    inst.available.assign(T, 0);
    const int nodes = pick(1, 8);
    for (int k = 0; k < nodes; ++k) ++inst.available[pick(0, T - 1)];
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
    // Sometimes a kept pipeline: one of the shapes, its nodes taken from the available ones.
    if (!problem.shapes.empty() && pick(0, 2) == 0) {
      const PipelineShape kept = problem.shapes[pick(0, problem.shapes.size() - 1)];
      for (int t = 0; t < T; ++t) problem.available[t] -= kept.mix[t];
      problem.fixed.push_back(kept);
    }
    const int at_most = pick(0, nodes + 2);
    const std::string where = absl::StrCat("seed ", seed, ", at_most ", at_most);
    problem.method = PlanSearchMethod::kNodeCountDp;
    absl::StatusOr<int> dp = MaxPipelineCount(problem, at_most);
    problem.method = PlanSearchMethod::kCoverIlp;
    absl::StatusOr<int> ilp = MaxPipelineCount(problem, at_most);
    ASSERT_TRUE(dp.ok()) << dp.status() << " " << where;
    ASSERT_TRUE(ilp.ok()) << ilp.status() << " " << where;
    EXPECT_EQ(*ilp, *dp) << where;
    EXPECT_EQ(*ilp, BruteForceMost(problem, at_most)) << where;
    ++compared;
    capped += *ilp == at_most;
  }
  EXPECT_EQ(compared, 300);
  EXPECT_GT(capped, 30);
}

// 8 node types of 4 nodes: (4 + 1 + pad)^8 states, past the DP's bound. kAuto counts by
// integer programs; the forced DP still says RESOURCE_EXHAUSTED.
TEST(MaxPipelineCountTest, ManyNodeTypesCountByIntegerPrograms) {
  testing::RandomInstance inst = testing::MakeRandomInstance(7, CostModelKind::kOneFOneB, 5, 4);
  PlanningProblem problem = inst.problem;
  while (problem.node_types.size() < 8) {
    NodeType type = problem.node_types[0];
    type.name = type.gpu_type = absl::StrCat("copy", problem.node_types.size());
    problem.node_types.push_back(type);
    auto profile = std::make_shared<ModelProfile>(*problem.profiles[0]);
    profile->key.gpu_type = type.gpu_type;
    problem.profiles.push_back(std::move(profile));
  }
  for (NodeType& type : problem.node_types) type.gpu_memory_bytes *= 100;  // memory never binds
  auto p = MakePlanner(problem);
  const NodeMix available(8, 4);
  absl::StatusOr<PipelineSizeLimits> resolved = ResolveLimits({}, 32);
  ASSERT_TRUE(resolved.ok());
  absl::StatusOr<TemplateSet> set =
      PlanTemplateSet(*p.templates, *p.model, available, *resolved, {});
  ASSERT_TRUE(set.ok()) << set.status();
  const std::vector<double> allreduce = CrossPipelineAllreduceMs(*p.model, 32);
  PipelineSetProblem search;
  search.model = p.model.get();
  search.available = available;
  search.shapes = FeasibleShapes(*p.model, *set, *resolved);
  search.global_batch = 128;
  search.allreduce_ms = &allreduce;
  absl::StatusOr<int> most = MaxPipelineCount(search, 2);
  ASSERT_TRUE(most.ok()) << most.status();
  EXPECT_EQ(*most, 2);
  search.global_batch = 20;  // one micro-batch per pipeline at most 20 pipelines
  most = MaxPipelineCount(search, 40);
  ASSERT_TRUE(most.ok()) << most.status();
  EXPECT_EQ(*most, 20);
  search.method = PlanSearchMethod::kNodeCountDp;
  EXPECT_EQ(MaxPipelineCount(search, 2).status().code(), absl::StatusCode::kResourceExhausted);
}

}  // namespace
}  // namespace oobleck
