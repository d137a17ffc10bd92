// Replan's fast node assignment (NodeAssignmentMethod::kClasses, a transportation problem
// over layer-range classes) against the old full path (the Hungarian method over every
// position x node) on random clusters and events with fixed seeds: the same answer, the
// same bytes to copy.
#include <algorithm>
#include <cmath>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/plan/cluster_plan.h"
#include "core/plan/evaluate_plan.h"
#include "core/plan/node_set.h"
#include "core/plan/plan_result.h"
#include "core/replan.h"
#include "gtest/gtest.h"
#include "tests/core/test_planner.h"
#include "tests/core/test_problems.h"

namespace oobleck {
namespace {

bool Near(double a, double b) { return std::abs(a - b) <= 1e-9 * std::max(1.0, std::abs(b)); }

using ::oobleck::testing::MakePlanner;
using ::oobleck::testing::Planned;

// GPT-2 XL on three node types of 2 GPUs (layer times by relative speed).
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

std::vector<ClusterNode> RandomNodes(std::mt19937& rng, int types, int max_per_type) {
  std::vector<ClusterNode> nodes;
  for (int t = 0; t < types; ++t) {
    const int count = std::uniform_int_distribution<int>(1, max_per_type)(rng);
    for (int k = 0; k < count; ++k) nodes.push_back({absl::StrCat("t", t, "-", k), t});
  }
  return nodes;
}

// A random event on `plan`: up to 3 failures and up to 2 joins.
ClusterEvent RandomEvent(std::mt19937& rng, const std::vector<ClusterNode>& nodes, int types,
                         uint32_t seed) {
  ClusterEvent event;
  std::set<std::string> failed;
  const int fails = std::uniform_int_distribution<int>(0, 3)(rng);
  for (int f = 0; f < fails; ++f) {
    const std::string& id =
        nodes[std::uniform_int_distribution<size_t>(0, nodes.size() - 1)(rng)].id;
    if (failed.insert(id).second) event.failed_node_ids.push_back(id);
  }
  const int joins = std::uniform_int_distribution<int>(fails == 0 ? 1 : 0, 2)(rng);
  for (int j = 0; j < joins; ++j) {
    event.joined_nodes.push_back({absl::StrCat("joined-", seed, "-", j),
                                  std::uniform_int_distribution<int>(0, types - 1)(rng)});
  }
  return event;
}

struct Tally {
  int compared = 0;  // events both paths answered
  int rebound = 0;   // answers that bind some position from the pool (copies or idle changes)
};

// Replans `event` both ways; with the deprecated tolerance the answer depends only on
// iteration times, bytes and pipelines kept, so it must be the same plan by those figures.
void ExpectSameAnswer(const Planned& p, const std::vector<ClusterNode>& nodes,
                      const ClusterPlan& plan, const ClusterEvent& event, double tolerance,
                      uint32_t seed, Tally* tally) {
  ReplanOptions fast;
  fast.tolerance = tolerance;
  ReplanOptions oracle = fast;
  oracle.assignment = NodeAssignmentMethod::kHungarian;
  absl::StatusOr<ReplanResult> a = Replan(*p.planner, *p.model, nodes, plan, event, fast);
  absl::StatusOr<ReplanResult> b = Replan(*p.planner, *p.model, nodes, plan, event, oracle);
  ASSERT_EQ(a.ok(), b.ok()) << "seed " << seed << ": " << a.status() << " vs " << b.status();
  if (!a.ok()) {
    EXPECT_EQ(a.status(), b.status()) << "seed " << seed;
    return;
  }
  ++tally->compared;
  tally->rebound += a->copy_bytes > 0;
  EXPECT_EQ(a->strategy, b->strategy) << "seed " << seed;
  EXPECT_TRUE(Near(a->copy_bytes, b->copy_bytes))
      << "seed " << seed << ": " << a->copy_bytes << " vs " << b->copy_bytes;
  EXPECT_TRUE(Near(a->plan.iteration_time_ms, b->plan.iteration_time_ms)) << "seed " << seed;
  EXPECT_EQ(a->pipelines_kept, b->pipelines_kept) << "seed " << seed;
  EXPECT_EQ(a->plan.pipelines.size(), b->plan.pipelines.size()) << "seed " << seed;
  absl::StatusOr<ClusterPlan> valid = EvaluatePlan(*p.model, a->nodes, a->plan);
  EXPECT_TRUE(valid.ok()) << "seed " << seed << ": " << valid.status();
}

TEST(ReplanOracleTest, ClassAssignmentMatchesHungarianOnGpt2XlClusters) {
  Planned p = MakePlanner(ThreeTypeProblem());
  Tally tally;
  for (uint32_t seed = 0; seed < 120; ++seed) {
    std::mt19937 rng(seed);
    const std::vector<ClusterNode> nodes = RandomNodes(rng, 3, 16);
    const int B = std::uniform_int_distribution<int>(8, 256)(rng);
    absl::StatusOr<PlanResult> planned = p.planner->Plan(*p.model, nodes, {B}, {});
    ASSERT_TRUE(planned.ok()) << planned.status();
    if (!planned->sizes[0].status.ok()) continue;
    const ClusterEvent event = RandomEvent(rng, nodes, 3, seed);
    ExpectSameAnswer(p, nodes, planned->sizes[0].plan, event, seed % 3 == 0 ? 0.0 : 0.01, seed,
                     &tally);
  }
  EXPECT_GT(tally.compared, 90);
  EXPECT_GT(tally.rebound, 30);
}

TEST(ReplanOracleTest, ClassAssignmentMatchesHungarianOnRandomSmallInstances) {
  Tally tally;
  for (uint32_t seed = 0; seed < 150; ++seed) {
    const CostModelKind kind =
        seed % 4 == 3 ? CostModelKind::kOobleckSosp23 : CostModelKind::kOneFOneB;
    testing::RandomInstance inst = testing::MakeRandomInstance(5000 + seed, kind, 9, 8);
    Planned p = MakePlanner(inst.problem);
    std::mt19937 rng(seed);
    std::vector<ClusterNode> nodes;
    for (int t = 0; t < static_cast<int>(inst.available.size()); ++t) {
      for (int k = 0; k < inst.available[t]; ++k)
        nodes.push_back({absl::StrCat("t", t, "-", k), t});
    }
    const int B = std::uniform_int_distribution<int>(2, 12)(rng);
    absl::StatusOr<PlanResult> planned = p.planner->Plan(*p.model, nodes, {B}, {});
    ASSERT_TRUE(planned.ok()) << planned.status();
    if (!planned->sizes[0].status.ok()) continue;
    const ClusterEvent event =
        RandomEvent(rng, nodes, static_cast<int>(inst.available.size()), seed);
    ExpectSameAnswer(p, nodes, planned->sizes[0].plan, event, seed % 2 == 0 ? 0.0 : 0.01, seed,
                     &tally);
  }
  EXPECT_GT(tally.compared, 50);
  EXPECT_GT(tally.rebound, 10);
}

}  // namespace
}  // namespace oobleck
