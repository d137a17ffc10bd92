// What Plan answers with extreme inputs (core/plan/cluster_planner.h, core/cost_model.h): never a
// non-finite or zero iteration time or speed-up, and never a plan over budget_per_hour.
#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/plan/cluster_plan.h"
#include "core/plan/node_set.h"
#include "core/plan/objective.h"
#include "core/plan/plan_options.h"
#include "core/plan/plan_result.h"
#include "core/plan/price.h"
#include "core/profile.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/core/test_planner.h"
#include "tests/core/test_problems.h"

namespace oobleck {
namespace {

using ::oobleck::testing::MakePlanner;
using ::testing::HasSubstr;

std::vector<ClusterNode> NodesOf(const NodeMix& counts) {
  std::vector<ClusterNode> nodes;
  for (int t = 0; t < static_cast<int>(counts.size()); ++t) {
    for (int k = 0; k < counts[t]; ++k) nodes.push_back({absl::StrCat("t", t, "-", k), t});
  }
  return nodes;
}

// Two node types of one GPU, three layers, memory that never binds; `layer` edits every
// layer of both profiles.
PlanningProblem TwoTypes(const std::function<void(LayerProfile&)>& layer,
                         CostModelKind kind = CostModelKind::kOneFOneB) {
  PlanningProblem p;
  p.cost_model = kind;
  p.microbatches = 4;
  p.inter_node_bytes_per_s = 10e9;
  for (int t = 0; t < 2; ++t) {
    const std::string name = absl::StrCat("gpu", t);
    auto profile = std::make_shared<ModelProfile>();
    profile->key = {"m", name, 1};
    profile->layers.resize(3);
    for (LayerProfile& l : profile->layers) {
      l.forward_ms = 1 + t;
      l.backward_ms = 2 + t;
      l.param_bytes = 1e6;
      l.activation_bytes = 1e5;
      l.allreduce_in_node_ms[1] = 0;
      layer(l);
    }
    p.node_types.push_back({name, name, 1, 1e12, 25e9});
    p.profiles.push_back(std::move(profile));
  }
  return p;
}

// ---- Item: answers with inf/NaN or impossible values ----------------------------------

TEST(PlanAnswerTest, LayerTimesPastTheBoundAreRefused) {
  absl::StatusOr<CostModel> model =
      CostModel::Create(TwoTypes([](LayerProfile& l) { l.forward_ms = 1e307; }));
  ASSERT_FALSE(model.ok()) << "planned with layers of 1e307 ms";
  EXPECT_EQ(model.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(model.status().message(), HasSubstr("the whole model's compute time"));
  EXPECT_THAT(model.status().message(), HasSubstr("node type 0 (gpu0)"));
}

TEST(PlanAnswerTest, AcrossNodeAllreducePastTheBoundIsRefused) {
  absl::StatusOr<CostModel> model =
      CostModel::Create(TwoTypes([](LayerProfile& l) { l.allreduce_across_nodes_ms[2] = 1e308; }));
  ASSERT_FALSE(model.ok()) << "planned with an all-reduce of 1e308 ms";
  EXPECT_EQ(model.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(model.status().message(), HasSubstr("allreduce_across_nodes_ms"));
}

TEST(PlanAnswerTest, AllZeroProfileIsRefused) {
  const PlanningProblem zero = TwoTypes([](LayerProfile& l) {
    l.forward_ms = l.backward_ms = l.param_bytes = l.activation_bytes = 0;
  });
  const absl::Status profile = ValidateProfile(*zero.profiles[0]);
  EXPECT_EQ(profile.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(profile.message(), HasSubstr("every layer's forward_ms and backward_ms is 0"));
  // A profile that reaches the cost model unvalidated (or derived to nothing) too.
  for (CostModelKind kind : {CostModelKind::kOneFOneB, CostModelKind::kOobleckSosp23}) {
    PlanningProblem p = zero;
    p.cost_model = kind;
    absl::StatusOr<CostModel> model = CostModel::Create(p);
    ASSERT_FALSE(model.ok()) << "planned an all-zero profile";
    EXPECT_THAT(model.status().message(), HasSubstr("the whole model's compute time is 0 ms"));
  }
}

// Without a measured all-reduce across pipelines or a bandwidth (oobleck-sosp23 takes
// inter_node_bytes_per_s = 0), two pipelines have no finite iteration time: an error, not
// an answer of inf.
TEST(PlanAnswerTest, InfiniteAllreduceAcrossPipelinesIsAnError) {
  PlanningProblem problem = TwoTypes([](LayerProfile&) {}, CostModelKind::kOobleckSosp23);
  problem.inter_node_bytes_per_s = 0;
  auto p = MakePlanner(problem);
  PlanOptions options;
  options.fault_tolerance = 1;
  absl::StatusOr<PlanResult> result = p.planner->Plan(*p.model, NodesOf({2, 2}), {8}, options);
  ASSERT_TRUE(result.ok()) << result.status();
  const BatchSizePlan& size = result->sizes[0];
  EXPECT_EQ(size.status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_FALSE(size.status.ok() && !std::isfinite(size.plan.iteration_time_ms));
  EXPECT_TRUE(std::isfinite(size.speedup));
  options.fault_tolerance = 0;  // one pipeline needs no all-reduce across pipelines
  result = p.planner->Plan(*p.model, NodesOf({2, 2}), {8}, options);
  ASSERT_TRUE(result.ok()) << result.status();
  ASSERT_TRUE(result->sizes[0].status.ok()) << result->sizes[0].status;
  EXPECT_TRUE(std::isfinite(result->sizes[0].plan.iteration_time_ms));
  EXPECT_EQ(result->sizes[0].plan.pipelines.size(), 1);
}

// Random magnitudes from 1e-12 to 1e300 in layer times and all-reduce tables: every model
// the cost model accepts plans to finite, positive times and speed-ups.
TEST(PlanAnswerTest, ExtremeMagnitudesNeverAnswerNonFiniteOrZeroTimes) {
  std::mt19937 rng(20261127);
  int answered = 0;
  for (int round = 0; round < 120; ++round) {
    auto magnitude = [&] {
      return std::pow(10.0, std::uniform_real_distribution<double>(-12, 300)(rng));
    };
    const bool huge_times = round % 3 == 0, huge_allreduce = round % 3 == 1;
    PlanningProblem problem = TwoTypes([&](LayerProfile& l) {
      if (huge_times) l.forward_ms = magnitude();
      if (huge_allreduce) l.allreduce_across_nodes_ms[2] = magnitude();
      if (round % 3 == 2) l.backward_ms = magnitude() * 1e-300;  // tiny, maybe 0
    });
    absl::StatusOr<CostModel> model = CostModel::Create(problem);
    if (!model.ok()) {
      EXPECT_EQ(model.status().code(), absl::StatusCode::kInvalidArgument);
      continue;
    }
    auto p = MakePlanner(problem);
    PlanOptions options;
    options.fault_tolerance = round % 2;
    absl::StatusOr<PlanResult> result = p.planner->Plan(*p.model, NodesOf({2, 2}), {8}, options);
    ASSERT_TRUE(result.ok()) << result.status();
    const BatchSizePlan& size = result->sizes[0];
    if (!size.status.ok()) continue;
    ++answered;
    EXPECT_TRUE(std::isfinite(size.plan.iteration_time_ms) && size.plan.iteration_time_ms > 0)
        << size.plan.iteration_time_ms << " in round " << round;
    EXPECT_TRUE(std::isfinite(size.speedup) && size.speedup >= 0)
        << size.speedup << " in round " << round;
  }
  EXPECT_GT(answered, 20);
}

// ---- Item: budget exceeded ------------------------------------------------------------

TEST(PlanBudgetTest, PricesBetweenPriceStepsAreRefused) {
  auto p = MakePlanner(TwoTypes([](LayerProfile&) {}));
  PlanOptions options;
  options.price_per_hour = {4e-05, 1.0};
  for (double budget : {4e-05, 5e-05}) {
    options.budget_per_hour = budget;
    absl::StatusOr<PlanResult> result = p.planner->Plan(*p.model, NodesOf({2, 2}), {8}, options);
    ASSERT_FALSE(result.ok() && result->sizes[0].status.ok())
        << "a plan of " << result->sizes[0].plan.price_per_hour << " per hour within budget "
        << budget;
    EXPECT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(result.status().message(), HasSubstr("cluster.node_types[0].price_per_hour"));
    EXPECT_THAT(result.status().message(), HasSubstr("multiple of 0.0001"));
  }
}

TEST(PlanBudgetTest, BudgetStepsCompareExactly) {
  EXPECT_EQ(BudgetSteps(0), 0);
  EXPECT_EQ(BudgetSteps(4e-05), 0);
  EXPECT_EQ(BudgetSteps(5e-05), 0);
  EXPECT_EQ(BudgetSteps(0.0003), 3);
  EXPECT_EQ(BudgetSteps(std::nextafter(0.0003, 0.0)), 2);
  EXPECT_EQ(BudgetSteps(0.00025), 2);
  EXPECT_EQ(BudgetSteps(0.1 + 0.2), 3000);
  EXPECT_EQ(BudgetSteps(4.1e9), int64_t{41} * 1000 * 1000 * 1000 * 1000);
  EXPECT_TRUE(OnPriceGrid(2.4801));
  EXPECT_TRUE(OnPriceGrid(1e6));
  EXPECT_FALSE(OnPriceGrid(4e-05));
  EXPECT_TRUE(OnPriceGrid(0.45 * 3));  // rounded, not between steps
  EXPECT_FALSE(OnPriceGrid(0.00015));
  EXPECT_FALSE(OnPriceGrid(1.00005));
}

// Prices on the grid of very different magnitudes, budgets at, just below, between and
// around price steps: every plan costs at most its budget, as the answer reports it.
TEST(PlanBudgetTest, RandomPricesAndBudgetsNeverExceedTheBudget) {
  int answered = 0, refused = 0;
  for (uint32_t seed = 0; seed < 150; ++seed) {
    testing::RandomInstance inst =
        testing::MakeRandomInstance(900 + seed, CostModelKind::kOneFOneB, 5, 6);
    std::mt19937 rng(seed);
    auto pick = [&](int64_t lo, int64_t hi) {
      return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
    };
    auto p = MakePlanner(inst.problem);
    const int T = p.model->num_types();
    const std::vector<ClusterNode> nodes = NodesOf(inst.available);
    PlanOptions options;
    int64_t all_steps = 0;
    for (int t = 0; t < T; ++t) {
      const int64_t steps = pick(1, 9) * static_cast<int64_t>(std::pow(10, pick(0, 9)));
      options.price_per_hour.push_back(static_cast<double>(steps) / 1e4);
      all_steps += steps * inst.available[t];
    }
    const int64_t steps = pick(0, all_steps);
    const double at = static_cast<double>(steps) / 1e4;  // a whole number of 0.0001 steps
    const double budgets[] = {at, std::nextafter(at, 0.0), (steps + 0.5) / 1e4, at * (1 + 1e-12)};
    options.budget_per_hour = budgets[seed % 4];
    if (!(options.budget_per_hour > 0)) continue;
    options.objective = seed % 3 == 0 ? PlanObjective::kCost : PlanObjective::kTime;
    absl::StatusOr<PlanResult> result = p.planner->Plan(*p.model, nodes, {4, 9}, options);
    ASSERT_TRUE(result.ok()) << result.status() << " seed " << seed;
    for (const BatchSizePlan& size : result->sizes) {
      if (!size.status.ok()) {
        ++refused;
        continue;
      }
      ++answered;
      EXPECT_LE(size.plan.price_per_hour, options.budget_per_hour)
          << "seed " << seed << ", global batch " << size.global_batch;
      double sum = 0;  // the prices as given, added up
      for (const PlannedPipeline& pipeline : size.plan.pipelines) {
        for (const std::string& id : pipeline.node_ids) {
          for (const ClusterNode& node : nodes) {
            if (node.id == id) sum += options.price_per_hour[node.type];
          }
        }
      }
      EXPECT_NEAR(size.plan.price_per_hour, sum, 1e-12 * sum) << "seed " << seed;
    }
  }
  EXPECT_GT(answered, 50);
  EXPECT_GT(refused, 5);
}

}  // namespace
}  // namespace oobleck
