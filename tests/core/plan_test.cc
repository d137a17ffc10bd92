// Plan and Replan (core/plan/cluster_planner.h, core/replan.h) against brute force on small
// clusters.

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <random>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/field_path.h"
#include "core/plan/cluster_plan.h"
#include "core/plan/evaluate_plan.h"
#include "core/plan/limits.h"
#include "core/plan/node_set.h"
#include "core/plan/pipeline_set.h"
#include "core/plan/pipeline_shape.h"
#include "core/plan/plan_options.h"
#include "core/plan/plan_result.h"
#include "core/plan/template_set.h"
#include "core/plan_search/allreduce.h"
#include "core/plan_search/batch_split.h"
#include "core/plan_search/pipeline_set_search.h"
#include "core/replan.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/core/test_planner.h"
#include "tests/core/test_problems.h"

namespace oobleck {
namespace {

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

// --- brute force ------------------------------------------------------------------------

// min over splits x_i >= 1, sum = B, x_i <= limit_i of max_i T_i(x_i) (+inf if none).
double BruteForceMakespan(const CostModel& model, const std::vector<std::vector<double>>& costs,
                          const std::vector<int>& limits, int B) {
  const int P = static_cast<int>(costs.size());
  double best = kInf;
  std::vector<int> x(P, 0);
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

// Every assignment of the concrete nodes to pipelines (or idle), every split; only plans of
// at least min_pipelines pipelines. most_pipelines (if given): the most pipelines of any
// plan, 0 if none.
double BruteForcePlan(const CostModel& model, const TemplateSet& set,
                      const std::vector<ClusterNode>& nodes, const PipelineSizeLimits& limits,
                      int B, const std::vector<double>& allreduce, int min_pipelines = 0,
                      int* most_pipelines = nullptr) {
  if (most_pipelines != nullptr) *most_pipelines = 0;
  const int N = static_cast<int>(nodes.size());
  const int T = model.num_types();
  std::vector<int> block(N, -1);  // -1 idle
  double best = kInf;
  std::function<void(int, int)> rec = [&](int i, int blocks) {
    if (i == N) {
      if (blocks == 0 || blocks < min_pipelines) return;
      std::vector<NodeMix> mixes(blocks, NodeMix(T, 0));
      for (int j = 0; j < N; ++j) {
        if (block[j] >= 0) ++mixes[block[j]][nodes[j].type];
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
      if (std::isinf(makespan)) return;
      if (most_pipelines != nullptr) *most_pipelines = std::max(*most_pipelines, blocks);
      if (blocks < min_pipelines) return;
      best = std::min(best, makespan + allreduce[blocks]);
      return;
    }
    for (int b = -1; b <= blocks; ++b) {  // canonical: a new block gets the next number
      block[i] = b;
      rec(i + 1, b == blocks ? blocks + 1 : blocks);
    }
    block[i] = -1;
  };
  rec(0, 0);
  return best;
}

// --- fixtures ---------------------------------------------------------------------------

using ::oobleck::testing::MakePlanner;
using ::oobleck::testing::Planned;

// The plan of `nodes` for one global batch size; empty (and a failed expectation) when
// there is none.
ClusterPlan PlanOf(const Planned& p, const std::vector<ClusterNode>& nodes, int global_batch,
                   const PlanOptions& options = {}) {
  absl::StatusOr<PlanResult> planned = p.planner->Plan(*p.model, nodes, {global_batch}, options);
  EXPECT_TRUE(planned.ok()) << planned.status();
  if (!planned.ok()) return {};
  EXPECT_TRUE(planned->sizes[0].status.ok()) << planned->sizes[0].status;
  return planned->sizes[0].plan;
}

// Structural checks of a plan over `nodes`: every node once, shares add up, figures agree
// with EvaluatePlan.
void ExpectValidPlan(const CostModel& model, const std::vector<ClusterNode>& nodes,
                     const ClusterPlan& plan) {
  absl::StatusOr<ClusterPlan> evaluated = EvaluatePlan(model, nodes, plan);
  ASSERT_TRUE(evaluated.ok()) << evaluated.status();
  EXPECT_TRUE(Near(evaluated->iteration_time_ms, plan.iteration_time_ms));
  size_t placed = plan.idle.size();
  for (const PlannedPipeline& p : plan.pipelines) placed += p.node_ids.size();
  EXPECT_EQ(placed, nodes.size());
}

// --- tests ------------------------------------------------------------------------------

TEST(SplitBatchTest, MatchesBruteForceOnRandomPipelines) {
  std::mt19937 rng(7);
  for (int round = 0; round < 300; ++round) {
    const CostModelKind kind =
        round % 3 == 2 ? CostModelKind::kOobleckSosp23 : CostModelKind::kOneFOneB;
    testing::RandomInstance inst = testing::MakeRandomInstance(1000 + round, kind, 6, 3);
    absl::StatusOr<CostModel> model = CostModel::Create(inst.problem);
    ASSERT_TRUE(model.ok()) << model.status();
    const int P = std::uniform_int_distribution<int>(1, 4)(rng);
    const int B = std::uniform_int_distribution<int>(P, 12)(rng);
    std::vector<std::vector<double>> costs(P);
    std::vector<int> limits(P);
    std::vector<PipelineLoad> loads;
    for (int i = 0; i < P; ++i) {
      const int S = std::uniform_int_distribution<int>(1, 4)(rng);
      for (int s = 0; s < S; ++s)
        costs[i].push_back(std::uniform_real_distribution<double>(1, 10)(rng));
      limits[i] = std::uniform_int_distribution<int>(0, 3)(rng) == 0
                      ? std::uniform_int_distribution<int>(1, 4)(rng)
                      : CostModel::kNoMicrobatchLimit;
    }
    for (int i = 0; i < P; ++i) loads.push_back({&costs[i], limits[i]});
    const double expected = BruteForceMakespan(*model, costs, limits, B);
    absl::StatusOr<std::vector<int>> split = SplitBatch(*model, loads, B);
    if (std::isinf(expected)) {
      EXPECT_FALSE(split.ok()) << "round " << round;
      continue;
    }
    ASSERT_TRUE(split.ok()) << split.status() << " round " << round;
    int sum = 0;
    double makespan = 0;
    for (int i = 0; i < P; ++i) {
      EXPECT_GE((*split)[i], 1);
      EXPECT_LE((*split)[i], limits[i]);
      sum += (*split)[i];
      makespan = std::max(makespan, model->PipelineTimeMs(costs[i], (*split)[i]));
    }
    EXPECT_EQ(sum, B);
    EXPECT_TRUE(Near(makespan, expected)) << makespan << " vs " << expected << " round " << round;
  }
}

TEST(SplitBatchTest, RejectsMorePipelinesThanMicrobatches) {
  auto p = MakePlanner(testing::Homogeneous(testing::LoadGpt2Xl(), 1, CostModelKind::kOneFOneB, 4));
  std::vector<double> costs = {1, 2};
  absl::StatusOr<std::vector<int>> split = SplitBatch(
      *p.model, {{&costs, CostModel::kNoMicrobatchLimit}, {&costs, CostModel::kNoMicrobatchLimit}},
      1);
  EXPECT_EQ(split.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(split.status().message(), HasSubstr("2 pipelines need at least 2 micro-batches"));
}

TEST(AllreduceTest, RingEstimateIsMonotoneAndZeroForOnePipeline) {
  auto p = MakePlanner(testing::Homogeneous(testing::LoadGpt2Xl(), 1, CostModelKind::kOneFOneB, 4));
  const std::vector<double> ar = CrossPipelineAllreduceMs(*p.model, 8);
  ASSERT_EQ(ar.size(), 9u);
  EXPECT_EQ(ar[0], 0);
  EXPECT_EQ(ar[1], 0);
  double params = 0;
  for (const LayerProfile& l : p.model->problem().profiles[0]->layers) params += l.param_bytes;
  // The bundled profile measured the across-node all-reduce for 1 node only: ring estimate.
  EXPECT_NEAR(ar[2], 2.0 * 1 / 2 * params / 12.5e9 * 1e3, 1e-6);
  EXPECT_NEAR(ar[4], 2.0 * 3 / 4 * params / 12.5e9 * 1e3, 1e-6);
  for (int P = 2; P <= 8; ++P) EXPECT_GE(ar[P], ar[P - 1]);
}

// The table is kept per model (ModelTableMemo): whichever length is asked first, every
// length gets exactly what a model that never computed another length gets.
TEST(AllreduceTest, EveryLengthIsTheSameWhicheverLengthCameFirst) {
  ModelProfile measured = *testing::LoadGpt2Xl();
  for (size_t l = 0; l < measured.layers.size(); ++l) {
    // Measured at a few P, larger for P = 7 than the ring estimate (so the running maximum
    // carries it to P = 8..299), and at P = 300 beyond a short table.
    measured.layers[l].allreduce_across_nodes_ms = {{2, 1.0 + l}, {7, 500.0 + l}, {300, 9.0}};
  }
  const PlanningProblem problem = testing::Homogeneous(
      std::make_shared<const ModelProfile>(std::move(measured)), 1, CostModelKind::kOneFOneB, 4);
  const std::vector<int> lengths = {4096, 0, 5, 299, 300, 301, 7, 4096};
  std::vector<std::vector<double>> fresh;  // each length on a model of its own
  for (int n : lengths) fresh.push_back(CrossPipelineAllreduceMs(*MakePlanner(problem).model, n));
  EXPECT_EQ(fresh[0].size(), 4097u);
  EXPECT_EQ(fresh[1].size(), 2u);
  EXPECT_GT(fresh[3][7], fresh[3][6]);  // P = 7 is measured above the estimate at P = 6
  const Planned longest_first = MakePlanner(problem);
  const Planned shortest_first = MakePlanner(problem);
  const CostModel copy = *shortest_first.model;  // copies share the memo
  for (size_t i = 0; i < lengths.size(); ++i) {
    EXPECT_EQ(CrossPipelineAllreduceMs(*longest_first.model, lengths[i]), fresh[i]) << lengths[i];
  }
  for (size_t i = lengths.size(); i-- > 0;) {
    EXPECT_EQ(CrossPipelineAllreduceMs(*shortest_first.model, lengths[i]), fresh[i]) << lengths[i];
    EXPECT_EQ(CrossPipelineAllreduceMs(copy, lengths[i]), fresh[i]) << lengths[i];
  }
}

// docs/COST_MODEL.md#plan-iteration-time, worked example.
TEST(PlanTest, CostModelDocWorkedExample) {
  absl::StatusOr<ModelProfile> profile = LoadOobleckProfileDir(
      OOBLECK_SOURCE_DIR "/examples/profiles/gpt2-xl/rtx4090", "gpt2-xl", "rtx4090", 1);
  ASSERT_TRUE(profile.ok()) << profile.status();
  PlanningProblem problem = testing::Homogeneous(
      std::make_shared<const ModelProfile>(*std::move(profile)), 1, CostModelKind::kOneFOneB, 8);
  auto p = MakePlanner(problem);
  const std::vector<double> ar = CrossPipelineAllreduceMs(*p.model, 4);
  EXPECT_NEAR(ar[2], 540.47, 0.005);
  EXPECT_NEAR(ar[3], 720.63, 0.005);
  EXPECT_NEAR(ar[4], 810.70, 0.005);
  absl::StatusOr<PlanResult> result = p.planner->Plan(*p.model, NodesOf({4}), {16}, {});
  ASSERT_TRUE(result.ok()) << result.status();
  const BatchSizePlan& size = result->sizes[0];
  ASSERT_TRUE(size.status.ok()) << size.status;
  EXPECT_NEAR(size.plan.iteration_time_ms, 29533.11, 0.005);
  EXPECT_NEAR(size.plan.allreduce_ms, 540.47, 0.005);
  ASSERT_EQ(size.plan.pipelines.size(), 2u);
  for (const PlannedPipeline& pipeline : size.plan.pipelines) {
    EXPECT_EQ(pipeline.tmpl.num_nodes(), 2);
    EXPECT_EQ(pipeline.microbatches, 8);
    EXPECT_NEAR(pipeline.time_ms, 28992.64, 0.005);
  }
  EXPECT_FALSE(size.data_parallel_ms.has_value());
  EXPECT_THAT(size.data_parallel_unavailable, HasSubstr("pipeline has no template"));
}

// The problem of a Plan call, as ClusterPlanner::Plan sets it up.
PipelineSetProblem ProblemOf(const Planned& p, const TemplateSet& set, const NodeMix& available,
                             const PipelineSizeLimits& limits, int global_batch,
                             const std::vector<double>& allreduce) {
  PipelineSetProblem problem;
  problem.model = p.model.get();
  problem.available = available;
  problem.shapes = FeasibleShapes(*p.model, set, limits);
  problem.global_batch = global_batch;
  problem.allreduce_ms = &allreduce;
  return problem;
}

TEST(PlanTest, ManyNodeCountStatesPlanWithTheIntegerProgram) {
  testing::RandomInstance inst = testing::MakeRandomInstance(3, CostModelKind::kOneFOneB, 4, 3);
  PlanningProblem problem = inst.problem;
  while (problem.node_types.size() < 6) {  // six types of 20 nodes: 21^6 states
    NodeType type = problem.node_types[0];
    type.name = absl::StrCat("copy", problem.node_types.size());
    problem.node_types.push_back(type);
    problem.profiles.push_back(problem.profiles[0]);
  }
  problem.node_types.resize(6);
  problem.profiles.resize(6);
  problem.derived_from.assign(6, "");
  for (NodeType& t : problem.node_types) t.gpu_memory_bytes *= 100;  // everything fits
  auto p = MakePlanner(problem);
  PlanOptions options;
  options.limits.max_nodes = 1;
  const NodeMix available = {20, 20, 20, 20, 20, 20};
  const std::vector<ClusterNode> nodes = NodesOf(available);
  absl::StatusOr<PlanResult> result = p.planner->Plan(*p.model, nodes, {64}, options);
  ASSERT_TRUE(result.ok()) << result.status();
  ASSERT_TRUE(result->sizes[0].status.ok()) << result->sizes[0].status;
  ExpectValidPlan(*p.model, nodes, result->sizes[0].plan);
  // The DP alone refuses that many states.
  absl::StatusOr<TemplateSet> set =
      PlanTemplateSet(*p.templates, *p.model, available, result->limits, {});
  ASSERT_TRUE(set.ok());
  const std::vector<double> allreduce = CrossPipelineAllreduceMs(*p.model, 120);
  PipelineSetProblem dp = ProblemOf(p, *set, available, result->limits, 64, allreduce);
  dp.method = PlanSearchMethod::kNodeCountDp;
  absl::StatusOr<PipelineSetSolution> refused = SolvePipelineSet(dp);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(refused.status().message(), HasSubstr("node-count states"));
}

TEST(PlanTest, MatchesBruteForceOnRandomSmallClusters) {
  int checked = 0, feasible = 0;
  for (uint32_t seed = 0; seed < 120; ++seed) {
    const CostModelKind kind =
        seed % 4 == 3 ? CostModelKind::kOobleckSosp23 : CostModelKind::kOneFOneB;
    testing::RandomInstance inst = testing::MakeRandomInstance(500 + seed, kind, 6, 5);
    std::mt19937 rng(seed);
    // A fast network makes the all-reduce small, so that plans of many pipelines win too.
    if (seed % 3 == 1) inst.problem.inter_node_bytes_per_s *= 1000;
    // Some instances with measured (and non-monotone) across-node all-reduce times.
    if (seed % 3 == 0) {
      for (auto& profile : inst.problem.profiles) {
        auto copy = std::make_shared<ModelProfile>(*profile);
        for (LayerProfile& l : copy->layers) {
          for (int n = 2; n <= 5; ++n) {
            l.allreduce_across_nodes_ms[n] = std::uniform_real_distribution<double>(0, 3)(rng);
          }
        }
        profile = copy;
      }
    }
    auto p = MakePlanner(inst.problem);
    const std::vector<ClusterNode> nodes = NodesOf(inst.available);
    const int N = static_cast<int>(nodes.size());
    PlanOptions options;
    options.limits.min_nodes = seed % 5 == 4 ? 2 : 1;
    if (options.limits.min_nodes > N) options.limits.min_nodes = 1;
    options.limits.max_nodes =
        seed % 2 == 0 ? 0 : std::uniform_int_distribution<int>(options.limits.min_nodes, N)(rng);
    std::vector<int> batches = {std::uniform_int_distribution<int>(1, 12)(rng),
                                std::uniform_int_distribution<int>(1, 12)(rng)};
    absl::StatusOr<PlanResult> result = p.planner->Plan(*p.model, nodes, batches, options);
    ASSERT_TRUE(result.ok()) << result.status() << " seed " << seed;
    absl::StatusOr<TemplateSet> set =
        PlanTemplateSet(*p.templates, *p.model, inst.available, result->limits, {});
    ASSERT_TRUE(set.ok());
    const std::vector<double> allreduce = CrossPipelineAllreduceMs(*p.model, N);
    for (size_t i = 0; i < batches.size(); ++i) {
      const BatchSizePlan& size = result->sizes[i];
      const double expected =
          BruteForcePlan(*p.model, *set, nodes, result->limits, batches[i], allreduce);
      ++checked;
      if (std::isinf(expected)) {
        EXPECT_FALSE(size.status.ok()) << "seed " << seed << " B " << batches[i];
        EXPECT_EQ(size.status.code(), absl::StatusCode::kFailedPrecondition);
        continue;
      }
      ++feasible;
      ASSERT_TRUE(size.status.ok()) << size.status << " seed " << seed;
      EXPECT_TRUE(Near(size.plan.iteration_time_ms, expected))
          << size.plan.iteration_time_ms << " vs brute force " << expected << " seed " << seed
          << " B " << batches[i];
      ExpectValidPlan(*p.model, nodes, size.plan);
      // A makespan hint (as Replan passes) only orders the search.
      PipelineSetProblem problem;
      problem.model = p.model.get();
      problem.available = inst.available;
      problem.shapes = FeasibleShapes(*p.model, *set, result->limits);
      problem.global_batch = batches[i];
      problem.allreduce_ms = &allreduce;
      problem.makespan_hint_ms =
          size.plan.pipeline_time_ms * std::uniform_real_distribution<double>(0.3, 3)(rng);
      absl::StatusOr<PipelineSetSolution> hinted = SolvePipelineSet(problem);
      ASSERT_TRUE(hinted.ok()) << hinted.status();
      EXPECT_TRUE(Near(hinted->iteration_time_ms, expected)) << "hinted, seed " << seed;
      // The integer program finds the same optimum, and proves it.
      problem.method = PlanSearchMethod::kCoverIlp;
      absl::StatusOr<PipelineSetSolution> ilp = SolvePipelineSet(problem);
      ASSERT_TRUE(ilp.ok()) << ilp.status() << " seed " << seed;
      EXPECT_TRUE(Near(ilp->iteration_time_ms, expected)) << "integer program, seed " << seed;
      EXPECT_EQ(ilp->optimality_gap, 0) << "seed " << seed;
      EXPECT_EQ(ilp->method, PlanSearchMethod::kCoverIlp);
    }
  }
  EXPECT_GT(feasible, checked / 2);
}

TEST(PlanTest, MinPipelinesMatchesBruteForceOnRandomSmallClusters) {
  int feasible = 0, binding = 0;
  for (uint32_t seed = 0; seed < 80; ++seed) {
    testing::RandomInstance inst =
        testing::MakeRandomInstance(900 + seed, CostModelKind::kOneFOneB, 6, 5);
    std::mt19937 rng(seed);
    auto p = MakePlanner(inst.problem);
    const std::vector<ClusterNode> nodes = NodesOf(inst.available);
    const int N = static_cast<int>(nodes.size());
    absl::StatusOr<PipelineSizeLimits> limits = ResolveLimits({}, N);
    ASSERT_TRUE(limits.ok());
    absl::StatusOr<TemplateSet> set =
        PlanTemplateSet(*p.templates, *p.model, inst.available, *limits, {});
    ASSERT_TRUE(set.ok());
    const std::vector<double> allreduce = CrossPipelineAllreduceMs(*p.model, N);
    const int B = std::uniform_int_distribution<int>(1, 10)(rng);
    const int min_pipelines = std::uniform_int_distribution<int>(0, N)(rng);
    PipelineSetProblem problem = ProblemOf(p, *set, inst.available, *limits, B, allreduce);
    problem.min_pipelines = min_pipelines;
    absl::StatusOr<PipelineSetSolution> solution = SolvePipelineSet(problem);
    const double expected =
        BruteForcePlan(*p.model, *set, nodes, *limits, B, allreduce, min_pipelines);
    const double unconstrained = BruteForcePlan(*p.model, *set, nodes, *limits, B, allreduce);
    if (std::isinf(expected)) {
      EXPECT_EQ(solution.status().code(), absl::StatusCode::kFailedPrecondition)
          << solution.status() << " seed " << seed;
      continue;
    }
    ++feasible;
    binding += expected > unconstrained;
    ASSERT_TRUE(solution.ok()) << solution.status() << " seed " << seed;
    EXPECT_GE(static_cast<int>(solution->chosen.size()), min_pipelines) << "seed " << seed;
    EXPECT_TRUE(Near(solution->iteration_time_ms, expected))
        << solution->iteration_time_ms << " vs brute force " << expected << " seed " << seed;
  }
  EXPECT_GT(feasible, 20);
  EXPECT_GT(binding, 3);  // the minimum changes the answer on some instances
}

// 2-4 node types (copies of a small random instance's types at other speeds) and up to
// `max_nodes` nodes: clusters where the node-count DP still runs.
testing::RandomInstance MidsizeInstance(uint32_t seed, int max_nodes) {
  testing::RandomInstance inst =
      testing::MakeRandomInstance(seed, CostModelKind::kOneFOneB, 8, max_nodes);
  std::mt19937 rng(seed);
  PlanningProblem& problem = inst.problem;
  const int types = std::uniform_int_distribution<int>(2, 4)(rng);
  while (static_cast<int>(problem.node_types.size()) < types) {
    const size_t from = problem.node_types.size() % 2;
    NodeType type = problem.node_types[from];
    type.name = type.gpu_type = absl::StrCat("copy", problem.node_types.size());
    auto profile = std::make_shared<ModelProfile>(*problem.profiles[from]);
    profile->key.gpu_type = type.gpu_type;
    const double speed = std::uniform_real_distribution<double>(0.4, 2.5)(rng);
    for (LayerProfile& l : profile->layers) {
      l.forward_ms /= speed;
      l.backward_ms /= speed;
    }
    problem.node_types.push_back(type);
    problem.profiles.push_back(std::move(profile));
  }
  problem.node_types.resize(types);
  problem.profiles.resize(types);
  problem.derived_from.assign(types, "");
  inst.available.assign(types, 0);
  const int nodes = std::uniform_int_distribution<int>(types, max_nodes)(rng);
  for (int k = 0; k < nodes; ++k)
    ++inst.available[std::uniform_int_distribution<int>(0, types - 1)(rng)];
  return inst;
}

TEST(PlanTest, IntegerProgramMatchesNodeCountDpOnRandomMidsizeClusters) {
  int compared = 0;
  for (uint32_t seed = 0; seed < 40; ++seed) {
    testing::RandomInstance inst = MidsizeInstance(2000 + seed, seed % 4 == 0 ? 60 : 30);
    std::mt19937 rng(seed);
    auto p = MakePlanner(inst.problem);
    const int N = MixSize(inst.available);
    PipelineSizeLimits limits;
    limits.max_nodes = std::uniform_int_distribution<int>(1, 4)(rng);
    absl::StatusOr<PipelineSizeLimits> resolved = ResolveLimits(limits, N);
    ASSERT_TRUE(resolved.ok());
    absl::StatusOr<TemplateSet> set =
        PlanTemplateSet(*p.templates, *p.model, inst.available, *resolved, {});
    ASSERT_TRUE(set.ok()) << set.status();
    const std::vector<double> allreduce = CrossPipelineAllreduceMs(*p.model, N);
    const int B = std::uniform_int_distribution<int>(1, 4 * N)(rng);
    PipelineSetProblem problem = ProblemOf(p, *set, inst.available, *resolved, B, allreduce);
    problem.method = PlanSearchMethod::kNodeCountDp;
    absl::StatusOr<PipelineSetSolution> dp = SolvePipelineSet(problem);
    problem.method = PlanSearchMethod::kCoverIlp;
    absl::StatusOr<PipelineSetSolution> ilp = SolvePipelineSet(problem);
    ASSERT_EQ(dp.status().code(), ilp.status().code())
        << dp.status() << " vs " << ilp.status() << " seed " << seed;
    if (!dp.ok()) continue;
    ++compared;
    EXPECT_TRUE(Near(ilp->iteration_time_ms, dp->iteration_time_ms))
        << ilp->iteration_time_ms << " vs DP " << dp->iteration_time_ms << " seed " << seed;
    EXPECT_EQ(ilp->optimality_gap, 0) << "seed " << seed;
    // A plan over the concrete nodes with the chosen pipelines.
    NodeMix used(inst.available.size(), 0);
    for (int j : ilp->chosen) {
      for (size_t t = 0; t < used.size(); ++t) used[t] += problem.shapes[j].mix[t];
    }
    for (size_t t = 0; t < used.size(); ++t) EXPECT_LE(used[t], inst.available[t]);
  }
  EXPECT_GT(compared, 25);
}

TEST(PlanTest, NodeLimitedIntegerProgramsReportAProvenGap) {
  int gaps = 0;
  for (uint32_t seed = 0; seed < 30; ++seed) {
    testing::RandomInstance inst = MidsizeInstance(3000 + seed, 40);
    auto p = MakePlanner(inst.problem);
    const int N = MixSize(inst.available);
    absl::StatusOr<PipelineSizeLimits> limits = ResolveLimits({}, N);
    ASSERT_TRUE(limits.ok());
    absl::StatusOr<TemplateSet> set =
        PlanTemplateSet(*p.templates, *p.model, inst.available, *limits, {});
    ASSERT_TRUE(set.ok()) << set.status();
    const std::vector<double> allreduce = CrossPipelineAllreduceMs(*p.model, N);
    PipelineSetProblem problem =
        ProblemOf(p, *set, inst.available, *limits, 2 * N + static_cast<int>(seed), allreduce);
    problem.method = PlanSearchMethod::kNodeCountDp;
    absl::StatusOr<PipelineSetSolution> dp = SolvePipelineSet(problem);
    if (!dp.ok()) continue;
    problem.method = PlanSearchMethod::kCoverIlp;
    problem.max_ilp_nodes = 0;  // no branching: LP bounds and rounding only
    absl::StatusOr<PipelineSetSolution> ilp = SolvePipelineSet(problem);
    ASSERT_TRUE(ilp.ok()) << ilp.status() << " seed " << seed;
    const double optimum = dp->iteration_time_ms;
    EXPECT_GE(ilp->iteration_time_ms, optimum * (1 - 1e-9)) << "seed " << seed;
    EXPECT_LE(ilp->iteration_time_ms * (1 - ilp->optimality_gap), optimum * (1 + 1e-9))
        << "the gap claims more than it proves, seed " << seed;
    if (ilp->optimality_gap == 0) {
      EXPECT_TRUE(Near(ilp->iteration_time_ms, optimum)) << "seed " << seed;
    } else {
      ++gaps;
    }
  }
  EXPECT_GT(gaps, 0);  // some instances need branching, so the gap path is exercised
}

// --- Replan ------------------------------------------------------------------------------

struct Held {
  int begin = 0, end = 0;
  bool Has(int l) const { return l >= begin && l < end; }
};

std::map<std::string, Held> HeldLayers(const ClusterPlan& plan) {
  std::map<std::string, Held> held;
  for (const PlannedPipeline& p : plan.pipelines) {
    for (const Stage& s : p.tmpl.stages) {
      Held& h = held[p.node_ids[s.node_index]];
      if (h.end == h.begin) {
        h = {s.layer_begin, s.layer_end};
      } else {
        h.begin = std::min(h.begin, s.layer_begin);
        h.end = std::max(h.end, s.layer_end);
      }
    }
  }
  return held;
}

// Every layer of every new stage is on its node already or copied there from a surviving
// node that held it; copies only carry what the destination lacks; bytes add up.
void ExpectCopyPlanComplete(const CostModel& model, const ClusterPlan& old_plan,
                            const ReplanResult& r) {
  const std::map<std::string, Held> held = HeldLayers(old_plan);
  std::map<std::string, int> type_of;
  for (const ClusterNode& n : r.nodes) type_of[n.id] = n.type;
  std::map<std::string, std::set<int>> received;
  double bytes = 0;
  for (const LayerCopy& c : r.copies) {
    ASSERT_TRUE(type_of.count(c.source_node_id)) << c.source_node_id << " did not survive";
    ASSERT_TRUE(type_of.count(c.dest_node_id)) << c.dest_node_id;
    ASSERT_LT(c.layer_begin, c.layer_end);
    auto src = held.find(c.source_node_id);
    ASSERT_NE(src, held.end()) << c.source_node_id << " held no layers";
    double expected_bytes = 0;
    for (int l = c.layer_begin; l < c.layer_end; ++l) {
      EXPECT_TRUE(src->second.Has(l)) << c.source_node_id << " does not hold layer " << l;
      auto dst = held.find(c.dest_node_id);
      EXPECT_FALSE(dst != held.end() && dst->second.Has(l))
          << c.dest_node_id << " already holds layer " << l;
      EXPECT_TRUE(received[c.dest_node_id].insert(l).second) << "layer " << l << " copied twice";
      expected_bytes += model.problem().profiles[type_of[c.dest_node_id]]->layers[l].param_bytes;
    }
    EXPECT_TRUE(Near(c.param_bytes, expected_bytes));
    bytes += c.param_bytes;
  }
  EXPECT_TRUE(Near(r.copy_bytes, bytes));
  for (const PlannedPipeline& p : r.plan.pipelines) {
    for (const Stage& s : p.tmpl.stages) {
      const std::string& id = p.node_ids[s.node_index];
      for (int l = s.layer_begin; l < s.layer_end; ++l) {
        auto h = held.find(id);
        const bool has = (h != held.end() && h->second.Has(l)) || received[id].count(l) > 0;
        EXPECT_TRUE(has) << id << " runs layer " << l << " without holding or receiving it";
      }
    }
  }
}

// Each copy's source is the one the documented rule picks (docs/architecture/replan.md:
// same node type first, then the same new pipeline, then the longest run within the range
// copied, then the smallest id), recomputed by a scan over every surviving holder.
void ExpectCopySourcesByTheRule(const ClusterPlan& old_plan, const ReplanResult& r) {
  const std::map<std::string, Held> held = HeldLayers(old_plan);
  std::map<std::string, int> type_of, pipeline_of;
  for (const ClusterNode& n : r.nodes) type_of[n.id] = n.type;
  for (size_t k = 0; k < r.plan.pipelines.size(); ++k) {
    for (const std::string& id : r.plan.pipelines[k].node_ids) {
      pipeline_of[id] = static_cast<int>(k);
    }
  }
  for (size_t i = 0; i < r.copies.size(); ++i) {
    const LayerCopy& c = r.copies[i];
    // The range this copy starts from runs on through the copies to the same node that
    // follow it without a gap.
    int range_end = c.layer_end;
    for (size_t j = i + 1; j < r.copies.size() && r.copies[j].dest_node_id == c.dest_node_id &&
                           r.copies[j].layer_begin == range_end;
         ++j) {
      range_end = r.copies[j].layer_end;
    }
    // Rank of a holder of layer_begin: lower is better.
    auto rank = [&](const std::string& id) {
      const Held& h = held.at(id);
      const bool same_pipeline =
          pipeline_of.count(id) > 0 && pipeline_of[id] == pipeline_of[c.dest_node_id];
      return std::make_tuple(type_of[id] != type_of[c.dest_node_id], !same_pipeline,
                             -std::min(range_end, h.end), id);
    };
    std::string best;
    for (const auto& [id, h] : held) {
      if (id == c.dest_node_id || !type_of.count(id) || !h.Has(c.layer_begin)) continue;
      if (best.empty() || rank(id) < rank(best)) best = id;
    }
    EXPECT_EQ(c.source_node_id, best)
        << "copy of layers [" << c.layer_begin << ", " << c.layer_end << ") to " << c.dest_node_id;
  }
}

// A layer no survivor holds.
bool LosesLayers(const CostModel& model, const ClusterPlan& plan,
                 const std::set<std::string>& failed) {
  const std::map<std::string, Held> held = HeldLayers(plan);
  for (int l = 0; l < model.num_layers(); ++l) {
    bool replica = false;
    for (const auto& [id, h] : held) replica |= !failed.count(id) && h.Has(l);
    if (!replica) return true;
  }
  return false;
}

TEST(ReplanTest, RandomEventsGiveCompleteCopyPlansAndBeatOobleckFallback) {
  int replanned = 0, with_copies = 0, beat_fallback = 0;
  for (uint32_t seed = 0; seed < 150; ++seed) {
    const CostModelKind kind =
        seed % 4 == 3 ? CostModelKind::kOobleckSosp23 : CostModelKind::kOneFOneB;
    testing::RandomInstance inst = testing::MakeRandomInstance(900 + seed, kind, 7, 6);
    if (seed % 2 == 0) inst.problem.inter_node_bytes_per_s *= 1000;
    auto p = MakePlanner(inst.problem);
    std::mt19937 rng(seed);
    const std::vector<ClusterNode> nodes = NodesOf(inst.available);
    const int B = std::uniform_int_distribution<int>(2, 10)(rng);
    absl::StatusOr<PlanResult> planned = p.planner->Plan(*p.model, nodes, {B}, {});
    ASSERT_TRUE(planned.ok()) << planned.status();
    if (!planned->sizes[0].status.ok()) continue;
    const ClusterPlan& plan = planned->sizes[0].plan;

    ClusterEvent event;
    std::set<std::string> failed;
    const int fails = std::uniform_int_distribution<int>(0, 2)(rng);
    for (int f = 0; f < fails; ++f) {
      const std::string& id =
          nodes[std::uniform_int_distribution<size_t>(0, nodes.size() - 1)(rng)].id;
      if (failed.insert(id).second) event.failed_node_ids.push_back(id);
    }
    if (fails == 0 || seed % 3 == 0) {
      const int type = std::uniform_int_distribution<int>(0, p.model->num_types() - 1)(rng);
      event.joined_nodes.push_back({absl::StrCat("joined-", seed), type});
    }
    ReplanOptions options;
    options.tolerance = seed % 5 == 0 ? 0.0 : 0.01;
    absl::StatusOr<ReplanResult> r = Replan(*p.planner, *p.model, nodes, plan, event, options);
    std::vector<ClusterNode> survivors;
    for (const ClusterNode& n : nodes) {
      if (!failed.count(n.id)) survivors.push_back(n);
    }
    survivors.insert(survivors.end(), event.joined_nodes.begin(), event.joined_nodes.end());
    if (LosesLayers(*p.model, plan, failed)) {
      ASSERT_FALSE(r.ok()) << "seed " << seed;
      EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition);
      EXPECT_THAT(r.status().message(), HasSubstr("no surviving replica"));
      continue;
    }
    // A plan must come back whenever one exists for the survivors.
    absl::StatusOr<PlanResult> fresh = p.planner->Plan(*p.model, survivors, {B}, {});
    ASSERT_TRUE(fresh.ok()) << fresh.status();
    if (!fresh->sizes[0].status.ok()) {
      EXPECT_FALSE(r.ok()) << "seed " << seed;
      continue;
    }
    ASSERT_TRUE(r.ok()) << r.status() << " seed " << seed;
    ++replanned;
    EXPECT_EQ(r->nodes.size(), survivors.size());
    ExpectValidPlan(*p.model, r->nodes, r->plan);
    ExpectCopyPlanComplete(*p.model, plan, *r);
    ExpectCopySourcesByTheRule(plan, *r);
    with_copies += !r->copies.empty();
    // Within the (deprecated) tolerance of the optimum for the survivors (the fastest
    // candidate is it).
    const double optimum = fresh->sizes[0].plan.iteration_time_ms;
    EXPECT_TRUE(
        Near(r->fastest_iteration_time_ms, std::min(optimum, r->fastest_iteration_time_ms)));
    EXPECT_LE(r->plan.iteration_time_ms, optimum * (1 + *options.tolerance) * (1 + 1e-12))
        << "seed " << seed;
    // Never slower than Oobleck's rule on the same event.
    absl::StatusOr<ClusterPlan> fallback =
        OobleckFallbackPlan(*p.planner, *p.model, nodes, plan, event, options);
    if (fallback.ok()) {
      ExpectValidPlan(*p.model, r->nodes, *fallback);
      EXPECT_LE(r->plan.iteration_time_ms, fallback->iteration_time_ms * (1 + 1e-12))
          << "seed " << seed;
      ASSERT_TRUE(r->oobleck_fallback_ms.has_value());
      EXPECT_TRUE(Near(*r->oobleck_fallback_ms, fallback->iteration_time_ms));
      beat_fallback += r->plan.iteration_time_ms < fallback->iteration_time_ms * (1 - 1e-9);
    } else {
      EXPECT_EQ(fallback.status().code(), absl::StatusCode::kFailedPrecondition);
      EXPECT_FALSE(r->oobleck_fallback_ms.has_value());
    }
  }
  EXPECT_GT(replanned, 40);
  EXPECT_GT(with_copies, 10);
  EXPECT_GT(beat_fallback, 3);
}

// GPT-2 XL on three node types (the master daemon's cluster in examples/python).
PlanningProblem ThreeTypeProblem() {
  std::shared_ptr<const ModelProfile> base = testing::LoadGpt2Xl();
  PlanningProblem p;
  const double gib = 1 << 30;
  p.node_types = {{"v100", "v100", 2, 16 * gib, 12e9},
                  {"rtx3090", "rtx3090", 2, 24 * gib, 25e9},
                  {"rtx4090", "rtx4090", 2, 24 * gib, 25e9}};
  p.profiles = {std::make_shared<const ModelProfile>(DeriveProfile(*base, "v100", 1 / 2.94)),
                std::make_shared<const ModelProfile>(DeriveProfile(*base, "rtx3090", 1.8 / 2.94)),
                base};
  p.derived_from = {"rtx4090", "rtx4090", ""};
  p.inter_node_bytes_per_s = 12.5e9;
  p.cost_model = CostModelKind::kOneFOneB;
  p.microbatches = 16;
  p.missing_allreduce = MissingAllreduce::kRing;
  return p;
}

TEST(ReplanTest, FailingNodesOneByOneEndsWithAClearError) {
  auto p = MakePlanner(ThreeTypeProblem());
  std::vector<ClusterNode> nodes = NodesOf({3, 3, 3});
  absl::StatusOr<PlanResult> planned = p.planner->Plan(*p.model, nodes, {64}, {});
  ASSERT_TRUE(planned.ok()) << planned.status();
  ASSERT_TRUE(planned->sizes[0].status.ok()) << planned->sizes[0].status;
  ClusterPlan plan = planned->sizes[0].plan;
  EXPECT_GE(plan.pipelines.size(), 2u);
  int steps = 0;
  double optimum = plan.iteration_time_ms;  // Plan's answer is the optimum
  absl::Status last;
  while (true) {
    // Fail the first node of the first pipeline.
    ClusterEvent event;
    event.failed_node_ids = {plan.pipelines.front().node_ids.front()};
    absl::StatusOr<ReplanResult> r = Replan(*p.planner, *p.model, nodes, plan, event, {});
    if (!r.ok()) {
      last = r.status();
      break;
    }
    ++steps;
    ExpectCopyPlanComplete(*p.model, plan, *r);
    EXPECT_NE(r->strategy, ReplanStrategy::kUnchanged);
    EXPECT_GE(r->fastest_iteration_time_ms, optimum * (1 - 1e-9))
        << "losing a node cannot make the optimum faster";
    EXPECT_LE(r->plan.iteration_time_ms, r->fastest_iteration_time_ms * 1.01 * (1 + 1e-12));
    optimum = r->fastest_iteration_time_ms;
    nodes = r->nodes;
    plan = r->plan;
    ASSERT_LT(steps, 9);
  }
  EXPECT_GE(steps, 3);
  EXPECT_EQ(last.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(last.message(),
              ::testing::AnyOf(HasSubstr("no surviving replica"), HasSubstr("no plan exists")));
}

TEST(ReplanTest, LosingEveryReplicaOfALayerNamesTheLayers) {
  auto p = MakePlanner(ThreeTypeProblem());
  const std::vector<ClusterNode> nodes = NodesOf({0, 0, 2});
  const ClusterPlan plan = PlanOf(p, nodes, 1);
  ASSERT_FALSE(plan.pipelines.empty());
  ASSERT_EQ(plan.pipelines.size(), 1u);  // one micro-batch: one pipeline
  const PlannedPipeline& only = plan.pipelines[0];
  ClusterEvent event;
  event.failed_node_ids = {only.node_ids.back()};
  absl::StatusOr<ReplanResult> r = Replan(*p.planner, *p.model, nodes, plan, event, {});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition);
  const Stage& last_stage = only.tmpl.stages.back();
  EXPECT_THAT(r.status().message(), HasSubstr("no surviving replica"));
  EXPECT_THAT(r.status().message(), HasSubstr(absl::StrCat(", 50)")));
  EXPECT_THAT(r.status().message(), HasSubstr(only.node_ids.back()));
  EXPECT_EQ(last_stage.layer_end, 50);
}

TEST(ReplanTest, JoinedNodeIsUsedAndNeverSlows) {
  auto p = MakePlanner(ThreeTypeProblem());
  const std::vector<ClusterNode> nodes = NodesOf({2, 2, 1});
  const ClusterPlan plan = PlanOf(p, nodes, 32);
  ASSERT_FALSE(plan.pipelines.empty());
  ClusterEvent event;
  event.joined_nodes = {{"10.0.0.99", 2}};
  absl::StatusOr<ReplanResult> r = Replan(*p.planner, *p.model, nodes, plan, event, {});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->nodes.size(), 6u);
  EXPECT_EQ(r->nodes.back().id, "10.0.0.99");
  EXPECT_LT(r->plan.iteration_time_ms, plan.iteration_time_ms);
  bool joined_used = false;
  for (const PlannedPipeline& pp : r->plan.pipelines) {
    for (const std::string& id : pp.node_ids) joined_used |= id == "10.0.0.99";
  }
  EXPECT_TRUE(joined_used);
  ExpectCopyPlanComplete(*p.model, plan, *r);
  // The joined node holds nothing: everything it runs is copied to it.
  double to_joined = 0;
  for (const LayerCopy& c : r->copies)
    to_joined += c.dest_node_id == "10.0.0.99" ? c.param_bytes : 0;
  EXPECT_GT(to_joined, 0);
  // Oobleck has no joins: its rule keeps the old plan and leaves the node idle.
  ASSERT_TRUE(r->oobleck_fallback_ms.has_value());
  EXPECT_TRUE(Near(*r->oobleck_fallback_ms, plan.iteration_time_ms));
}

TEST(ReplanTest, ReplayingAnEventIsANoOp) {
  auto p = MakePlanner(ThreeTypeProblem());
  const std::vector<ClusterNode> nodes = NodesOf({2, 2, 2});
  absl::StatusOr<PlanResult> planned = p.planner->Plan(*p.model, nodes, {48}, {});
  ASSERT_TRUE(planned.ok() && planned->sizes[0].status.ok());
  ClusterEvent event;
  event.failed_node_ids = {"t1-0"};
  event.joined_nodes = {{"new-4090", 2}};
  absl::StatusOr<ReplanResult> first =
      Replan(*p.planner, *p.model, nodes, planned->sizes[0].plan, event, {});
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_TRUE(first->ignored_failed_node_ids.empty());
  absl::StatusOr<ReplanResult> again =
      Replan(*p.planner, *p.model, first->nodes, first->plan, event, {});
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->strategy, ReplanStrategy::kUnchanged);
  EXPECT_THAT(again->ignored_failed_node_ids, ::testing::ElementsAre("t1-0"));
  EXPECT_THAT(again->ignored_joined_node_ids, ::testing::ElementsAre("new-4090"));
  EXPECT_TRUE(again->copies.empty());
  EXPECT_EQ(again->nodes.size(), first->nodes.size());
  ASSERT_EQ(again->plan.pipelines.size(), first->plan.pipelines.size());
  for (size_t i = 0; i < again->plan.pipelines.size(); ++i) {
    EXPECT_EQ(again->plan.pipelines[i].node_ids, first->plan.pipelines[i].node_ids);
    EXPECT_EQ(again->plan.pipelines[i].microbatches, first->plan.pipelines[i].microbatches);
  }
  EXPECT_TRUE(Near(again->plan.iteration_time_ms, first->plan.iteration_time_ms));
  EXPECT_EQ(again->pipelines_kept, static_cast<int>(first->plan.pipelines.size()));
}

TEST(ReplanTest, RejectsMalformedEvents) {
  auto p = MakePlanner(ThreeTypeProblem());
  const std::vector<ClusterNode> nodes = NodesOf({1, 1, 2});
  const ClusterPlan plan = PlanOf(p, nodes, 8);
  ASSERT_FALSE(plan.pipelines.empty());
  struct Case {
    ClusterEvent event;
    std::string message;
  };
  const std::vector<Case> cases = {
      {{{"t0-0", "t0-0"}, {}}, "failed_node_ids[1] \"t0-0\" is listed twice"},
      {{{""}, {}}, "failed_node_ids[0] is empty"},
      {{{}, {{"x", 7}}}, "joined_nodes[0] (\"x\") has no valid node type"},
      {{{}, {{"t2-0", 0}}},
       "joined_nodes[0] \"t2-0\" is a v100 node but the cluster already has it as a rtx4090 node"},
      {{{"t0-0"}, {{"t0-0", 0}}}, "joined_nodes[0].id \"t0-0\" is also in failed_node_ids"},
  };
  for (const Case& c : cases) {
    absl::StatusOr<ReplanResult> r = Replan(*p.planner, *p.model, nodes, plan, c.event, {});
    ASSERT_FALSE(r.ok()) << c.message;
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(r.status().message(), HasSubstr(c.message));
  }
  ReplanOptions bad;
  bad.tolerance = -0.5;
  absl::StatusOr<ReplanResult> r = Replan(*p.planner, *p.model, nodes, plan, {{"t0-0"}, {}}, bad);
  EXPECT_THAT(r.status().message(), HasSubstr("tolerance must be in [0, 1] (got -0.5)"));
}

// A NodeSet made once (the server's) gives Replan and Plan the same answers as their own
// check of a node list, and that check is NodeSet::Create's: one set of rules and messages.
TEST(ReplanTest, NodeSetGivesTheSameAnswersAndErrors) {
  auto p = MakePlanner(ThreeTypeProblem());
  const std::vector<ClusterNode> nodes = NodesOf({2, 2, 2});
  const ClusterPlan plan = PlanOf(p, nodes, 24);
  ASSERT_FALSE(plan.pipelines.empty());
  const ClusterEvent event{{"t1-0"}, {{"new-4090", 2}}};
  absl::StatusOr<NodeSet> set = NodeSet::Create(nodes, p.model->num_types());
  ASSERT_TRUE(set.ok()) << set.status();
  absl::StatusOr<ReplanResult> own = Replan(*p.planner, *p.model, nodes, plan, event, {});
  absl::StatusOr<ReplanResult> given = Replan(*p.planner, *p.model, *set, plan, event, {});
  ASSERT_TRUE(own.ok() && given.ok()) << own.status() << given.status();
  EXPECT_EQ(given->plan.iteration_time_ms, own->plan.iteration_time_ms);
  EXPECT_EQ(given->strategy, own->strategy);
  EXPECT_EQ(given->copy_bytes, own->copy_bytes);
  ASSERT_EQ(given->plan.pipelines.size(), own->plan.pipelines.size());
  for (size_t i = 0; i < own->plan.pipelines.size(); ++i) {
    EXPECT_EQ(given->plan.pipelines[i].node_ids, own->plan.pipelines[i].node_ids);
  }

  std::vector<std::vector<ClusterNode>> bad = {nodes, nodes, nodes, nodes, {}};
  bad[0][4].id = bad[0][1].id;
  bad[1][3].id.clear();
  bad[2][5].type = 9;
  bad[3][2].id = bad[3][0].id;  // repeated, and an empty id after it: the first is named
  bad[3][4].id.clear();
  const std::vector<std::pair<std::string, std::string>> expected = {
      {"nodes[4].id", "nodes[4].id \"t0-1\" repeats nodes[1].id"},
      {"nodes[3].id", "nodes[3].id is required"},
      {"nodes[5]", "nodes[5] (\"t2-1\") has no valid node type"},
      {"nodes[2].id", "nodes[2].id \"t0-0\" repeats nodes[0].id"},
      {"nodes", "nodes must not be empty"}};
  for (size_t k = 0; k < bad.size(); ++k) {
    const absl::Status status = NodeSet::Create(bad[k], p.model->num_types()).status();
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(status.message(), expected[k].second);
    EXPECT_EQ(FieldPathOf(status), expected[k].first);
    EXPECT_EQ(Replan(*p.planner, *p.model, bad[k], plan, event, {}).status(), status);
    EXPECT_EQ(p.planner->Plan(*p.model, bad[k], {24}, {}).status(), status);
    EXPECT_EQ(EvaluatePlan(*p.model, bad[k], plan).status(), status);
  }
  // A set checked against other node types is refused, not read out of range.
  absl::StatusOr<NodeSet> wide = NodeSet::Create(nodes, p.model->num_types() + 1);
  ASSERT_TRUE(wide.ok());
  EXPECT_EQ(Replan(*p.planner, *p.model, *wide, plan, event, {}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// A plan sent back as Plan or Replan answered it lists its idle nodes in cluster order;
// EvaluatePlan keeps that list without hashing it, with the same result as for any order.
TEST(PlanTest, EvaluatePlanListsIdleNodesTheSameInAnyOrder) {
  auto p = MakePlanner(ThreeTypeProblem());
  const std::vector<ClusterNode> nodes = NodesOf({3, 3, 3});
  ClusterPlan plan = PlanOf(p, nodes, 1);  // one pipeline: most nodes idle
  ASSERT_FALSE(plan.pipelines.empty());
  ASSERT_GE(plan.idle.size(), 2u) << "the case needs idle nodes";
  plan.idle[0].reason.clear();  // "not in any pipeline"
  plan.idle[1].type = 0;        // the cluster's type wins
  absl::StatusOr<ClusterPlan> in_order = EvaluatePlan(*p.model, nodes, plan);
  ClusterPlan shuffled = plan;
  std::reverse(shuffled.idle.begin(), shuffled.idle.end());
  absl::StatusOr<ClusterPlan> reversed = EvaluatePlan(*p.model, nodes, shuffled);
  ASSERT_TRUE(in_order.ok() && reversed.ok()) << in_order.status() << reversed.status();
  ASSERT_EQ(in_order->idle.size(), reversed->idle.size());
  for (size_t i = 0; i < in_order->idle.size(); ++i) {
    EXPECT_EQ(in_order->idle[i].id, reversed->idle[i].id);
    EXPECT_EQ(in_order->idle[i].type, reversed->idle[i].type);
    EXPECT_EQ(in_order->idle[i].reason, reversed->idle[i].reason);
  }
  EXPECT_EQ(in_order->idle[0].reason, "not in any pipeline");
}

TEST(ReplanTest, WarmReplanSearchesNoTemplate) {
  auto p = MakePlanner(ThreeTypeProblem());
  const std::vector<ClusterNode> nodes = NodesOf({3, 3, 3});
  absl::StatusOr<PlanResult> planned = p.planner->Plan(*p.model, nodes, {64}, {});
  ASSERT_TRUE(planned.ok() && planned->sizes[0].status.ok());
  const int64_t misses = p.cache->stats().misses;
  ClusterEvent event;
  event.failed_node_ids = {"t0-1", "t2-2"};
  absl::StatusOr<ReplanResult> r =
      Replan(*p.planner, *p.model, nodes, planned->sizes[0].plan, event, {});
  ASSERT_TRUE(r.ok()) << r.status();
  // Every mix of the survivors is a mix of the original cluster, already searched.
  const int64_t new_misses = p.cache->stats().misses - misses;
  EXPECT_EQ(new_misses, 0);
}

// --- f-failure guarantee and downtime ----------------------------------------------------

TEST(PlanTest, FaultToleranceMatchesBruteForceOnRandomSmallClusters) {
  int checked = 0, constrained = 0, infeasible = 0;
  for (uint32_t seed = 0; seed < 100; ++seed) {
    const CostModelKind kind =
        seed % 4 == 3 ? CostModelKind::kOobleckSosp23 : CostModelKind::kOneFOneB;
    testing::RandomInstance inst = testing::MakeRandomInstance(700 + seed, kind, 6, 5);
    std::mt19937 rng(seed);
    if (seed % 2 == 1) inst.problem.inter_node_bytes_per_s *= 1000;
    auto p = MakePlanner(inst.problem);
    const std::vector<ClusterNode> nodes = NodesOf(inst.available);
    const int N = static_cast<int>(nodes.size());
    PlanOptions options;
    options.fault_tolerance = std::uniform_int_distribution<int>(0, std::min(N, 4))(rng);
    const int B = std::uniform_int_distribution<int>(1, 12)(rng);
    absl::StatusOr<PlanResult> result = p.planner->Plan(*p.model, nodes, {B}, options);
    ASSERT_TRUE(result.ok()) << result.status() << " seed " << seed;
    absl::StatusOr<TemplateSet> set =
        PlanTemplateSet(*p.templates, *p.model, inst.available, result->limits, {});
    ASSERT_TRUE(set.ok());
    const std::vector<double> allreduce = CrossPipelineAllreduceMs(*p.model, N);
    int most = 0;
    const double unconstrained =
        BruteForcePlan(*p.model, *set, nodes, result->limits, B, allreduce, 0, &most);
    const double expected = BruteForcePlan(*p.model, *set, nodes, result->limits, B, allreduce,
                                           options.fault_tolerance + 1);
    ++checked;
    const BatchSizePlan& size = result->sizes[0];
    // MaxPipelineCount agrees with the enumeration.
    PipelineSetProblem problem;
    problem.model = p.model.get();
    problem.available = inst.available;
    problem.shapes = FeasibleShapes(*p.model, *set, result->limits);
    problem.global_batch = B;
    problem.allreduce_ms = &allreduce;
    absl::StatusOr<int> max_count = MaxPipelineCount(problem, N + 1);
    ASSERT_TRUE(max_count.ok()) << max_count.status();
    EXPECT_EQ(*max_count, most) << "seed " << seed;
    const int cap = std::uniform_int_distribution<int>(1, N)(rng);
    absl::StatusOr<int> capped = MaxPipelineCount(problem, cap);
    ASSERT_TRUE(capped.ok()) << capped.status();
    EXPECT_EQ(*capped, std::min(most, cap)) << "seed " << seed;
    if (std::isinf(expected)) {
      ++infeasible;
      ASSERT_FALSE(size.status.ok()) << "seed " << seed;
      EXPECT_EQ(size.status.code(), absl::StatusCode::kFailedPrecondition);
      if (!std::isinf(unconstrained)) {
        EXPECT_THAT(size.status.message(),
                    HasSubstr(absl::StrCat("fault_tolerance = ", options.fault_tolerance, " needs ",
                                           options.fault_tolerance + 1,
                                           " pipelines; the nodes fit at most ", most)))
            << "seed " << seed;
      }
      continue;
    }
    constrained += expected > unconstrained * (1 + 1e-9);
    ASSERT_TRUE(size.status.ok()) << size.status << " seed " << seed;
    EXPECT_TRUE(Near(size.plan.iteration_time_ms, expected))
        << size.plan.iteration_time_ms << " vs brute force " << expected << " seed " << seed;
    EXPECT_GE(size.plan.fault_tolerance(), options.fault_tolerance);
    ExpectValidPlan(*p.model, nodes, size.plan);
  }
  EXPECT_GT(constrained, 5);  // the minimum changed the answer
  EXPECT_GT(infeasible, 3);   // and was sometimes out of reach
  EXPECT_GT(checked - infeasible, checked / 2);
}

TEST(PlanTest, RejectsNegativeAndImpossibleFaultTolerance) {
  auto p = MakePlanner(ThreeTypeProblem());
  const std::vector<ClusterNode> nodes = NodesOf({1, 1, 2});
  PlanOptions options;
  options.fault_tolerance = -1;
  absl::StatusOr<PlanResult> r = p.planner->Plan(*p.model, nodes, {8}, options);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(), HasSubstr("fault_tolerance must be in [0, 4095]"));
  EXPECT_THAT(r.status().message(), HasSubstr("got -1"));
  options.fault_tolerance = 4;  // 5 pipelines on 4 nodes
  r = p.planner->Plan(*p.model, nodes, {8}, options);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->sizes[0].status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(r->sizes[0].status.message(),
              HasSubstr("fault_tolerance = 4 needs 5 pipelines; the nodes fit at most"));
}

// Random failure sequences of up to f nodes at a time: no layer is ever lost, and the plan
// keeps f whenever the survivors allow it (else says why).
TEST(ReplanTest, FailuresOfUpToFNodesNeverLoseALayer) {
  auto p = MakePlanner(ThreeTypeProblem());
  int steps = 0, degraded = 0;
  for (uint32_t seed = 0; seed < 4; ++seed) {
    std::mt19937 rng(seed);
    const int f = 1 + static_cast<int>(seed % 2);
    std::vector<ClusterNode> nodes = NodesOf({3, 3, 3});
    ClusterPlan plan = PlanOf(p, nodes, 64, {{}, f, {}});
    ASSERT_GE(plan.fault_tolerance(), f);
    int joined = 0;
    while (true) {
      const int tolerated = plan.fault_tolerance();
      ClusterEvent event;
      std::set<std::string> failed;
      const int k = std::uniform_int_distribution<int>(1, std::max(1, tolerated))(rng);
      std::vector<ClusterNode> pool = nodes;
      std::shuffle(pool.begin(), pool.end(), rng);
      for (int i = 0; i < k && i < static_cast<int>(pool.size()); ++i) {
        event.failed_node_ids.push_back(pool[i].id);
        failed.insert(pool[i].id);
      }
      if (seed % 2 == 0 && steps % 3 == 2)
        event.joined_nodes.push_back({absl::StrCat("j", joined++), 2});
      if (k <= tolerated) {
        EXPECT_FALSE(LosesLayers(*p.model, plan, failed));
      }
      ReplanOptions options;
      options.fault_tolerance = f;
      absl::StatusOr<ReplanResult> r = Replan(*p.planner, *p.model, nodes, plan, event, options);
      if (k > tolerated) break;  // a plan of 1 pipeline: no guarantee left to test
      if (!r.ok()) {
        EXPECT_THAT(r.status().message(), HasSubstr("no plan exists")) << r.status();
        break;
      }
      ++steps;
      ExpectValidPlan(*p.model, r->nodes, r->plan);
      ExpectCopyPlanComplete(*p.model, plan, *r);
      if (r->plan.fault_tolerance() < f) {
        ++degraded;
        EXPECT_THAT(r->degraded_reason,
                    HasSubstr(absl::StrCat("fault_tolerance = ", f, " needs ", f + 1)));
        // The survivors really fit no more pipelines.
        absl::StatusOr<PlanResult> fresh =
            p.planner->Plan(*p.model, r->nodes, {64}, {{}, r->plan.fault_tolerance() + 1, {}});
        ASSERT_TRUE(fresh.ok());
        EXPECT_FALSE(fresh->sizes[0].status.ok());
      } else {
        EXPECT_EQ(r->degraded_reason, "");
      }
      nodes = r->nodes;
      plan = r->plan;
      ASSERT_LT(steps, 40);
    }
  }
  EXPECT_GE(steps, 6);
  EXPECT_GE(degraded, 1);
}

TEST(ReplanTest, CopyTransferIsTheBusiestLink) {
  const std::vector<LayerCopy> copies = {
      {"b", "a", 0, 3, 10e9}, {"c", "a", 3, 4, 5e9}, {"b", "d", 4, 5, 5e9}, {"e", "d", 0, 1, 1e9}};
  // a sends 15 GB, b receives 15 GB: 3 s at 5 GB/s.
  EXPECT_DOUBLE_EQ(CopyTransferSeconds(copies, 5e9), 3.0);
  EXPECT_EQ(CopyTransferSeconds({}, 5e9), 0.0);
}

// The answer minimises downtime + horizon x iteration time over a Pareto front it reports.
TEST(ReplanTest, HorizonTradesDowntimeForIterationTime) {
  auto p = MakePlanner(ThreeTypeProblem());
  const std::vector<ClusterNode> nodes = NodesOf({3, 3, 3});
  const ClusterPlan plan = PlanOf(p, nodes, 64);
  ASSERT_FALSE(plan.pipelines.empty());
  ClusterEvent event;
  event.failed_node_ids = {plan.pipelines.front().node_ids.front()};
  std::set<std::string> chosen;
  for (double horizon : {0.0, 1.0, 100.0, 1e9}) {
    ReplanOptions options;
    options.horizon_iterations = horizon;
    absl::StatusOr<ReplanResult> r = Replan(*p.planner, *p.model, nodes, plan, event, options);
    ASSERT_TRUE(r.ok()) << r.status();
    ASSERT_FALSE(r->alternatives.empty());
    auto cost = [&](double iteration_ms, double downtime_s) {
      return downtime_s + horizon * iteration_ms / 1e3;
    };
    bool found = false;
    for (size_t i = 0; i < r->alternatives.size(); ++i) {
      const ReplanAlternative& a = r->alternatives[i];
      if (i > 0) {  // a front: faster ones are down longer
        EXPECT_GT(a.iteration_time_ms, r->alternatives[i - 1].iteration_time_ms);
        EXPECT_LT(a.downtime_s, r->alternatives[i - 1].downtime_s);
      }
      EXPECT_GE(cost(a.iteration_time_ms, a.downtime_s),
                cost(r->plan.iteration_time_ms, r->downtime_s) * (1 - 1e-12));
      found |= a.strategy == r->strategy && a.iteration_time_ms == r->plan.iteration_time_ms &&
               a.downtime_s == r->downtime_s;
    }
    EXPECT_TRUE(found) << "the chosen plan is on the front";
    const double transfer =
        CopyTransferSeconds(r->copies, p.model->problem().inter_node_bytes_per_s);
    EXPECT_DOUBLE_EQ(r->transfer_s, transfer);
    EXPECT_DOUBLE_EQ(r->downtime_s, transfer + kDefaultRestartOverheadS);
    if (horizon == 0) {
      EXPECT_EQ(r->copy_bytes, 0);  // dropping the broken pipeline copies nothing
      EXPECT_EQ(r->strategy, ReplanStrategy::kDropBroken);
    }
    if (horizon == 1e9) {
      EXPECT_DOUBLE_EQ(r->plan.iteration_time_ms, r->fastest_iteration_time_ms);
    }
    chosen.insert(std::string(ReplanStrategyName(r->strategy)));
  }
  EXPECT_GE(chosen.size(), 2u) << "the horizon changes the answer";
}

TEST(ReplanTest, ForcedFallbackIsOobleckRule) {
  auto p = MakePlanner(ThreeTypeProblem());
  const std::vector<ClusterNode> nodes = NodesOf({3, 3, 3});
  const ClusterPlan plan = PlanOf(p, nodes, 64);
  ASSERT_FALSE(plan.pipelines.empty());
  ClusterEvent event;
  event.failed_node_ids = {"t0-0", "t2-1"};
  ReplanOptions options;
  options.force_strategy = ReplanStrategy::kOobleckFallback;
  absl::StatusOr<ReplanResult> r = Replan(*p.planner, *p.model, nodes, plan, event, options);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->strategy, ReplanStrategy::kOobleckFallback);
  absl::StatusOr<ClusterPlan> rule =
      OobleckFallbackPlan(*p.planner, *p.model, nodes, plan, event, options);
  ASSERT_TRUE(rule.ok()) << rule.status();
  EXPECT_TRUE(Near(r->plan.iteration_time_ms, rule->iteration_time_ms));
  EXPECT_EQ(ParseReplanStrategy("oobleck-fallback"), ReplanStrategy::kOobleckFallback);
  EXPECT_EQ(ParseReplanStrategy("unchanged"), std::nullopt);
}

TEST(ReplanTest, RejectsBadHorizonOverheadAndFaultTolerance) {
  auto p = MakePlanner(ThreeTypeProblem());
  const std::vector<ClusterNode> nodes = NodesOf({1, 1, 2});
  const ClusterPlan plan = PlanOf(p, nodes, 8);
  ASSERT_FALSE(plan.pipelines.empty());
  struct Case {
    ReplanOptions options;
    std::string message;
  };
  std::vector<Case> cases(4);
  cases[0].options.horizon_iterations = -1;
  cases[0].message = "horizon_iterations must be a finite number >= 0 (got -1)";
  cases[1].options.horizon_iterations = std::nan("");
  cases[1].message = "horizon_iterations must be a finite number >= 0 (got nan)";
  cases[2].options.restart_overhead_s = kInf;
  cases[2].message = "restart_overhead_s must be a finite number >= 0 (got inf)";
  cases[3].options.fault_tolerance = -2;
  cases[3].message = "fault_tolerance must be in [0, 4095]";
  for (const Case& c : cases) {
    absl::StatusOr<ReplanResult> r =
        Replan(*p.planner, *p.model, nodes, plan, {{"t0-0"}, {}}, c.options);
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << c.message;
    EXPECT_THAT(r.status().message(), HasSubstr(c.message));
  }
}

}  // namespace
}  // namespace oobleck
