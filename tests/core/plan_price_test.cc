// Cost-aware plans (core/plan/plan_options.h: PlanOptions::objective, price_per_hour,
// budget_per_hour) against brute force on tiny clusters and against an enumeration of
// pipeline multisets on small random ones.
#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/plan/cluster_plan.h"
#include "core/plan/evaluate_plan.h"
#include "core/plan/limits.h"
#include "core/plan/node_set.h"
#include "core/plan/objective.h"
#include "core/plan/pipeline_set.h"
#include "core/plan/pipeline_shape.h"
#include "core/plan/plan_options.h"
#include "core/plan/plan_result.h"
#include "core/plan/price.h"
#include "core/plan/template_set.h"
#include "core/plan_search/allreduce.h"
#include "core/plan_search/batch_split.h"
#include "core/plan_search/pipeline_set_search.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/core/test_planner.h"
#include "tests/core/test_problems.h"

namespace oobleck {
namespace {

// The plan's price summed over its node ids' own types (PlanPricePerHour reads the
// template positions' types, which a valid plan's ids have).
double PriceOfIds(const ClusterPlan& plan, const std::vector<ClusterNode>& nodes,
                  const std::vector<double>& price_per_hour) {
  if (price_per_hour.empty()) return 0;
  int64_t steps = 0;
  for (const PlannedPipeline& p : plan.pipelines) {
    for (const std::string& id : p.node_ids) {
      for (const ClusterNode& node : nodes) {
        if (node.id == id) steps += PriceSteps(price_per_hour[node.type]);
      }
    }
  }
  return PriceOfSteps(steps);
}

using ::testing::HasSubstr;

constexpr double kInf = std::numeric_limits<double>::infinity();

bool Near(double a, double b) { return std::abs(a - b) <= 1e-9 * std::max(1.0, std::abs(b)); }

std::vector<ClusterNode> NodesOf(const NodeMix& counts) {
  std::vector<ClusterNode> nodes;
  for (int t = 0; t < static_cast<int>(counts.size()); ++t) {
    for (int k = 0; k < counts[t]; ++k) nodes.push_back({absl::StrCat("t", t, "-", k), t});
  }
  return nodes;
}

using ::oobleck::testing::MakePlanner;
using ::oobleck::testing::Planned;

// Prices in whole cents, so that the search's price steps are exact.
std::vector<double> RandomPrices(std::mt19937& rng, int types) {
  std::vector<double> prices;
  for (int t = 0; t < types; ++t) {
    prices.push_back(std::uniform_int_distribution<int>(50, 400)(rng) / 100.0);
  }
  return prices;
}

// One plan of the brute force: its iteration time, price per hour and pipeline count.
struct Candidate {
  double time_ms;
  double price;
  int pipelines;
};

// min over splits x_i >= 1, sum = B, x_i <= limit_i of max_i T_i(x_i) (+inf if none).
double BruteForceMakespan(const CostModel& model, const std::vector<std::vector<double>>& costs,
                          const std::vector<int>& limits, int B) {
  const int P = static_cast<int>(costs.size());
  double best = kInf;
  std::function<void(int, int, double)> rec = [&](int i, int left, double worst) {
    if (worst >= best) return;
    if (i == P - 1) {
      if (left < 1 || left > limits[i]) return;
      best = std::min(best, std::max(worst, model.PipelineTimeMs(costs[i], left)));
      return;
    }
    for (int xi = 1; xi <= std::min(limits[i], left - (P - 1 - i)); ++xi) {
      rec(i + 1, left - xi, std::max(worst, model.PipelineTimeMs(costs[i], xi)));
    }
  };
  if (P >= 1 && P <= B) rec(0, B, 0);
  return best;
}

// Every assignment of the concrete nodes to pipelines (or idle), each with its best split.
std::vector<Candidate> BruteForcePlans(const CostModel& model, const TemplateSet& set,
                                       const std::vector<ClusterNode>& nodes,
                                       const PipelineSizeLimits& limits, int B,
                                       const std::vector<double>& allreduce,
                                       const std::vector<double>& prices) {
  const int N = static_cast<int>(nodes.size());
  const int T = model.num_types();
  std::vector<int> block(N, -1);
  std::vector<Candidate> out;
  std::function<void(int, int)> rec = [&](int i, int blocks) {
    if (i == N) {
      if (blocks == 0) return;
      std::vector<NodeMix> mixes(blocks, NodeMix(T, 0));
      double price = 0;
      for (int j = 0; j < N; ++j) {
        if (block[j] < 0) continue;
        ++mixes[block[j]][nodes[j].type];
        price += prices[nodes[j].type];
      }
      std::vector<std::vector<double>> costs;
      std::vector<int> caps;
      for (const NodeMix& mix : mixes) {
        const int size = MixSize(mix);
        if (size < limits.min_nodes || size > limits.max_nodes) return;
        const MixResult* r = set.Find(mix);
        if (r == nullptr || !r->feasible) return;
        costs.push_back(StageCosts(r->best));
        caps.push_back(model.MaxMicrobatches(r->best));
      }
      const double makespan = BruteForceMakespan(model, costs, caps, B);
      if (!std::isinf(makespan)) out.push_back({makespan + allreduce[blocks], price, blocks});
      return;
    }
    for (int b = -1; b <= blocks; ++b) {
      block[i] = b;
      rec(i + 1, b == blocks ? blocks + 1 : blocks);
    }
    block[i] = -1;
  };
  rec(0, 0);
  return out;
}

// The optimum of `objective` over candidates within the budget (0: none) and with at least
// min_pipelines pipelines; +inf if none.
double Best(const std::vector<Candidate>& all, PlanObjective objective, double budget,
            int min_pipelines) {
  double best = kInf;
  for (const Candidate& c : all) {
    if (budget > 0 && c.price > budget + 1e-9) continue;
    if (c.pipelines < min_pipelines) continue;
    best = std::min(best, objective == PlanObjective::kCost ? c.price * c.time_ms : c.time_ms);
  }
  return best;
}

double ValueOf(const ClusterPlan& plan, PlanObjective objective) {
  return objective == PlanObjective::kCost ? plan.price_per_hour * plan.iteration_time_ms
                                           : plan.iteration_time_ms;
}

TEST(PlanPriceTest, MatchesBruteForceOnTinyClusters) {
  int checked = 0, feasible = 0, budget_binds = 0, cost_differs = 0;
  for (uint32_t seed = 0; seed < 150; ++seed) {
    const CostModelKind kind =
        seed % 4 == 3 ? CostModelKind::kOobleckSosp23 : CostModelKind::kOneFOneB;
    testing::RandomInstance inst = testing::MakeRandomInstance(7000 + seed, kind, 6, 5);
    std::mt19937 rng(seed);
    if (seed % 3 == 1) inst.problem.inter_node_bytes_per_s *= 1000;
    auto p = MakePlanner(inst.problem);
    const std::vector<ClusterNode> nodes = NodesOf(inst.available);
    const int N = static_cast<int>(nodes.size());
    PlanOptions options;
    options.price_per_hour = RandomPrices(rng, p.model->num_types());
    options.fault_tolerance = seed % 5 == 2 ? 1 : 0;
    const int B = std::uniform_int_distribution<int>(1, 12)(rng);
    absl::StatusOr<PipelineSizeLimits> limits = ResolveLimits({}, N);
    ASSERT_TRUE(limits.ok());
    absl::StatusOr<TemplateSet> set =
        PlanTemplateSet(*p.templates, *p.model, inst.available, *limits, {});
    ASSERT_TRUE(set.ok());
    const std::vector<double> allreduce = CrossPipelineAllreduceMs(*p.model, N);
    const std::vector<Candidate> all =
        BruteForcePlans(*p.model, *set, nodes, *limits, B, allreduce, options.price_per_hour);
    double total_price = 0, least_price = kInf;
    for (const ClusterNode& n : nodes) total_price += options.price_per_hour[n.type];
    for (const Candidate& c : all) {
      if (c.pipelines >= options.fault_tolerance + 1) least_price = std::min(least_price, c.price);
    }
    // No budget, a budget somewhere between the cheapest plan and all nodes, one below it.
    std::vector<double> budgets = {0};
    if (!std::isinf(least_price)) {
      budgets.push_back(
          std::round(std::uniform_real_distribution<double>(least_price, total_price)(rng) * 100) /
          100);
      budgets.push_back(least_price - 0.01);
    }
    for (PlanObjective objective : {PlanObjective::kTime, PlanObjective::kCost}) {
      for (double budget : budgets) {
        options.objective = objective;
        options.budget_per_hour = budget;
        const double expected = Best(all, objective, budget, options.fault_tolerance + 1);
        absl::StatusOr<PlanResult> result = p.planner->Plan(*p.model, nodes, {B}, options);
        const std::string where =
            absl::StrCat("seed ", seed, " B ", B, " objective ",
                         std::string(PlanObjectiveName(objective)), " budget ", budget);
        if (budget > 0 && budget < 0.01) {  // (a budget of 0 means none)
          continue;
        }
        ASSERT_TRUE(result.ok()) << result.status() << " " << where;
        const BatchSizePlan& size = result->sizes[0];
        ++checked;
        if (std::isinf(expected)) {
          EXPECT_EQ(size.status.code(), absl::StatusCode::kFailedPrecondition)
              << size.status << " " << where;
          if (budget > 0 && !std::isinf(least_price)) {
            EXPECT_THAT(size.status.message(), HasSubstr("budget_per_hour"));
          }
          continue;
        }
        ++feasible;
        ASSERT_TRUE(size.status.ok()) << size.status << " " << where;
        EXPECT_TRUE(Near(ValueOf(size.plan, objective), expected))
            << ValueOf(size.plan, objective) << " vs brute force " << expected << " " << where;
        EXPECT_EQ(size.optimality_gap, 0) << where;
        if (budget > 0) {
          EXPECT_LE(size.plan.price_per_hour, budget + 1e-9) << where;
        }
        EXPECT_GE(size.plan.fault_tolerance(), options.fault_tolerance) << where;
        absl::StatusOr<ClusterPlan> evaluated = EvaluatePlan(*p.model, nodes, size.plan);
        ASSERT_TRUE(evaluated.ok()) << evaluated.status() << " " << where;
        EXPECT_TRUE(Near(evaluated->iteration_time_ms, size.plan.iteration_time_ms)) << where;
        EXPECT_TRUE(
            Near(PlanPricePerHour(size.plan, options.price_per_hour), size.plan.price_per_hour))
            << where;
        EXPECT_TRUE(
            Near(PriceOfIds(size.plan, nodes, options.price_per_hour), size.plan.price_per_hour))
            << where;
        if (budget > 0 && objective == PlanObjective::kTime &&
            expected > Best(all, objective, 0, options.fault_tolerance + 1) * (1 + 1e-9)) {
          ++budget_binds;
        }
        if (objective == PlanObjective::kCost && budget == 0) {
          const double fastest = Best(all, PlanObjective::kTime, 0, options.fault_tolerance + 1);
          cost_differs += size.plan.iteration_time_ms > fastest * (1 + 1e-9);
        }
      }
    }
  }
  EXPECT_GT(feasible, checked / 2);
  EXPECT_GT(budget_binds, 5);  // budgets change the answer on some instances
  EXPECT_GT(cost_differs, 5);  // and so does the cost objective
}

// Every multiset of pipeline shapes within the available nodes (counts per shape), each
// with its optimal split: the cost optimum over the template set.
struct Enumerated {
  double best_cost = kInf;
  double best_time_within_budget = kInf;
};
Enumerated EnumerateShapeSets(const PipelineSetProblem& problem, double budget_steps) {
  Enumerated out;
  const size_t J = problem.shapes.size();
  NodeMix left = problem.available;
  std::vector<int> chosen;
  std::function<void(size_t)> rec = [&](size_t j) {
    if (j == J) {
      if (chosen.empty() || static_cast<int>(chosen.size()) > problem.global_batch) return;
      std::vector<PipelineLoad> loads;
      int64_t price = 0;
      for (int s : chosen) {
        loads.push_back({&problem.shapes[s].stage_costs, problem.shapes[s].max_microbatches});
        for (size_t t = 0; t < left.size(); ++t) {
          price += problem.shapes[s].mix[t] * problem.type_price_steps[t];
        }
      }
      absl::StatusOr<std::vector<int>> split =
          SplitBatch(*problem.model, loads, problem.global_batch);
      if (!split.ok()) return;
      double makespan = 0;
      for (size_t i = 0; i < loads.size(); ++i) {
        makespan =
            std::max(makespan, problem.model->PipelineTimeMs(*loads[i].stage_costs, (*split)[i]));
      }
      const double time = makespan + (*problem.allreduce_ms)[loads.size()];
      out.best_cost = std::min(out.best_cost, static_cast<double>(price) * time);
      if (price <= budget_steps) {
        out.best_time_within_budget = std::min(out.best_time_within_budget, time);
      }
      return;
    }
    rec(j + 1);
    int added = 0;
    while (true) {
      const NodeMix& mix = problem.shapes[j].mix;
      bool fits = true;
      for (size_t t = 0; t < left.size(); ++t) fits = fits && mix[t] <= left[t];
      if (!fits || static_cast<int>(chosen.size()) >= problem.global_batch) break;
      for (size_t t = 0; t < left.size(); ++t) left[t] -= mix[t];
      chosen.push_back(static_cast<int>(j));
      ++added;
      rec(j + 1);
    }
    for (int k = 0; k < added; ++k) {
      for (size_t t = 0; t < left.size(); ++t) left[t] += problem.shapes[j].mix[t];
      chosen.pop_back();
    }
  };
  rec(0);
  return out;
}

TEST(PlanPriceTest, MatchesShapeEnumerationOnRandomSmallClusters) {
  int compared = 0;
  for (uint32_t seed = 0; seed < 80; ++seed) {
    testing::RandomInstance inst =
        testing::MakeRandomInstance(8000 + seed, CostModelKind::kOneFOneB, 8, 12);
    std::mt19937 rng(seed);
    // Up to 12 nodes over the instance's 2-3 types.
    const int T = static_cast<int>(inst.available.size());
    inst.available.assign(T, 0);
    const int nodes = std::uniform_int_distribution<int>(T, 12)(rng);
    for (int k = 0; k < nodes; ++k)
      ++inst.available[std::uniform_int_distribution<int>(0, T - 1)(rng)];
    if (seed % 2 == 0) inst.problem.inter_node_bytes_per_s *= 100;
    auto p = MakePlanner(inst.problem);
    PipelineSizeLimits limits;
    limits.max_nodes = std::uniform_int_distribution<int>(1, 3)(rng);
    absl::StatusOr<PipelineSizeLimits> resolved = ResolveLimits(limits, nodes);
    ASSERT_TRUE(resolved.ok());
    absl::StatusOr<TemplateSet> set =
        PlanTemplateSet(*p.templates, *p.model, inst.available, *resolved, {});
    ASSERT_TRUE(set.ok()) << set.status();
    const std::vector<double> allreduce = CrossPipelineAllreduceMs(*p.model, nodes);
    PipelineSetProblem problem;
    problem.model = p.model.get();
    problem.available = inst.available;
    problem.shapes = FeasibleShapes(*p.model, *set, *resolved);
    problem.global_batch = std::uniform_int_distribution<int>(1, 3 * nodes)(rng);
    problem.allreduce_ms = &allreduce;
    for (double price : RandomPrices(rng, T)) problem.type_price_steps.push_back(PriceSteps(price));
    int64_t all_steps = 0;
    for (int t = 0; t < T; ++t) all_steps += inst.available[t] * problem.type_price_steps[t];
    const int64_t budget = std::uniform_int_distribution<int64_t>(all_steps / 4, all_steps)(rng);
    const Enumerated expected = EnumerateShapeSets(problem, static_cast<double>(budget));
    const std::string where = absl::StrCat("seed ", seed);

    problem.objective = PlanObjective::kCost;
    absl::StatusOr<PipelineSetSolution> cost = SolvePipelineSet(problem);
    if (std::isinf(expected.best_cost)) {
      EXPECT_EQ(cost.status().code(), absl::StatusCode::kFailedPrecondition) << where;
      continue;
    }
    ASSERT_TRUE(cost.ok()) << cost.status() << " " << where;
    ++compared;
    EXPECT_TRUE(
        Near(static_cast<double>(cost->price_steps) * cost->iteration_time_ms, expected.best_cost))
        << static_cast<double>(cost->price_steps) * cost->iteration_time_ms << " vs "
        << expected.best_cost << " " << where;
    EXPECT_EQ(cost->optimality_gap, 0) << where;

    problem.objective = PlanObjective::kTime;
    problem.max_price_steps = budget;
    absl::StatusOr<PipelineSetSolution> within = SolvePipelineSet(problem);
    if (std::isinf(expected.best_time_within_budget)) {
      EXPECT_EQ(within.status().code(), absl::StatusCode::kFailedPrecondition) << where;
      EXPECT_THAT(within.status().message(), HasSubstr("budget_per_hour")) << where;
      continue;
    }
    ASSERT_TRUE(within.ok()) << within.status() << " " << where;
    EXPECT_TRUE(Near(within->iteration_time_ms, expected.best_time_within_budget))
        << within->iteration_time_ms << " vs " << expected.best_time_within_budget << " " << where;
    EXPECT_LE(within->price_steps, budget) << where;
  }
  EXPECT_GT(compared, 50);
}

TEST(PlanPriceTest, CostMakespanLimitReportsAProvenGap) {
  // With room for one makespan only, the search stops at its first plan: the gap it
  // reports must hold against the exact optimum.
  int gaps = 0;
  for (uint32_t seed = 0; seed < 20; ++seed) {
    testing::RandomInstance inst =
        testing::MakeRandomInstance(9000 + seed, CostModelKind::kOneFOneB, 8, 5);
    std::mt19937 rng(seed);
    inst.available.assign(inst.available.size(), 3);
    auto p = MakePlanner(inst.problem);
    const int N = MixSize(inst.available);
    absl::StatusOr<PipelineSizeLimits> limits = ResolveLimits({}, N);
    ASSERT_TRUE(limits.ok());
    absl::StatusOr<TemplateSet> set =
        PlanTemplateSet(*p.templates, *p.model, inst.available, *limits, {});
    ASSERT_TRUE(set.ok());
    const std::vector<double> allreduce = CrossPipelineAllreduceMs(*p.model, N);
    PipelineSetProblem problem;
    problem.model = p.model.get();
    problem.available = inst.available;
    problem.shapes = FeasibleShapes(*p.model, *set, *limits);
    problem.global_batch = std::uniform_int_distribution<int>(N, 4 * N)(rng);
    problem.allreduce_ms = &allreduce;
    problem.objective = PlanObjective::kCost;
    for (double price : RandomPrices(rng, static_cast<int>(inst.available.size()))) {
      problem.type_price_steps.push_back(PriceSteps(price));
    }
    absl::StatusOr<PipelineSetSolution> exact = SolvePipelineSet(problem);
    if (!exact.ok()) continue;
    problem.max_cost_makespans = 1;
    absl::StatusOr<PipelineSetSolution> limited = SolvePipelineSet(problem);
    ASSERT_TRUE(limited.ok()) << limited.status();
    const double optimum = static_cast<double>(exact->price_steps) * exact->iteration_time_ms;
    const double found = static_cast<double>(limited->price_steps) * limited->iteration_time_ms;
    EXPECT_GE(found, optimum * (1 - 1e-9)) << "seed " << seed;
    EXPECT_LE(found * (1 - limited->optimality_gap), optimum * (1 + 1e-9))
        << "the gap claims more than it proves, seed " << seed;
    gaps += limited->optimality_gap > 0;
  }
  EXPECT_GT(gaps, 0);
}

TEST(PlanPriceTest, RejectsBadPricesBudgetsAndObjectives) {
  testing::RandomInstance inst = testing::MakeRandomInstance(1, CostModelKind::kOneFOneB, 5, 4);
  auto p = MakePlanner(inst.problem);
  const std::vector<ClusterNode> nodes = NodesOf(inst.available);
  const int T = p.model->num_types();
  auto plan = [&](const PlanOptions& options) {
    return p.planner->Plan(*p.model, nodes, {4}, options).status();
  };
  PlanOptions options;
  options.price_per_hour.assign(T, 1.0);
  for (double bad : {-1.0, std::nan(""), kInf, 2e6}) {
    options.price_per_hour[T - 1] = bad;
    const absl::Status s = plan(options);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(s.message(),
                HasSubstr(absl::StrCat("cluster.node_types[", T - 1, "].price_per_hour")));
  }
  options.price_per_hour.assign(T, 1.0);
  for (double bad : {-1.0, std::nan(""), kInf}) {
    options.budget_per_hour = bad;
    const absl::Status s = plan(options);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(s.message(), HasSubstr("budget_per_hour"));
  }
  options.budget_per_hour = 0;
  options.objective = PlanObjective::kCost;
  options.price_per_hour[0] = 0;
  absl::Status s = plan(options);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.message(), HasSubstr("cluster.node_types[0].price_per_hour"));
  options.price_per_hour.clear();
  options.objective = PlanObjective::kTime;
  options.budget_per_hour = 10;
  s = plan(options);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.message(), HasSubstr("budget_per_hour"));

  EXPECT_EQ(*ParsePlanObjective(""), PlanObjective::kTime);
  EXPECT_EQ(*ParsePlanObjective("time"), PlanObjective::kTime);
  EXPECT_EQ(*ParsePlanObjective("cost"), PlanObjective::kCost);
  absl::StatusOr<PlanObjective> bad = ParsePlanObjective("cheapest");
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.status().message(), HasSubstr("objective"));
}

TEST(PlanPriceTest, PricesLeaveTheTimeObjectiveUnchanged) {
  testing::RandomInstance inst = testing::MakeRandomInstance(5, CostModelKind::kOneFOneB, 6, 5);
  auto p = MakePlanner(inst.problem);
  const std::vector<ClusterNode> nodes = NodesOf(inst.available);
  PlanOptions options;
  absl::StatusOr<PlanResult> plain = p.planner->Plan(*p.model, nodes, {6}, options);
  options.price_per_hour.assign(p.model->num_types(), 2.5);
  absl::StatusOr<PlanResult> priced = p.planner->Plan(*p.model, nodes, {6}, options);
  ASSERT_TRUE(plain.ok() && priced.ok());
  ASSERT_TRUE(plain->sizes[0].status.ok());
  EXPECT_EQ(plain->sizes[0].plan.iteration_time_ms, priced->sizes[0].plan.iteration_time_ms);
  EXPECT_EQ(plain->sizes[0].plan.price_per_hour, 0);
  int used = 0;
  for (const PlannedPipeline& pipeline : priced->sizes[0].plan.pipelines) {
    used += static_cast<int>(pipeline.node_ids.size());
  }
  EXPECT_DOUBLE_EQ(priced->sizes[0].plan.price_per_hour, 2.5 * used);
}

}  // namespace
}  // namespace oobleck
