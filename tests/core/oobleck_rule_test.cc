// Replan's "oobleck-fallback" against Oobleck's own reconfiguration rule (the sosp23 artifact's
// ReconfigurationEngine.on_reconfigure): the same node groups, in the same order, with
// Oobleck's rank k mapped to the k-th node of the cluster (docs/API.md#replan).
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/plan/cluster_plan.h"
#include "core/plan/node_set.h"
#include "core/replan.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/core/test_planner.h"
#include "tests/core/test_problems.h"

namespace oobleck {
namespace {

using ::testing::ElementsAreArray;
using ::testing::HasSubstr;
using testing::MakePlanner;
using testing::Planned;

// One GPU per node and a last layer that outweighs the others: every template runs it
// alone on its last node and the rest on the others, so the first node of a pipeline and
// its last hold every layer between them, and the failure sets below lose no layer.
PlanningProblem OneGpuNodes() {
  auto profile = std::make_shared<ModelProfile>();
  profile->key = {"m", "gpu", 1};
  for (int l = 0; l < 24; ++l) {
    LayerProfile layer;
    layer.forward_ms = l == 23 ? 400 : 1;
    layer.backward_ms = l == 23 ? 800 : 2;
    layer.param_bytes = 1e6;
    layer.activation_bytes = 1e6;
    layer.allreduce_in_node_ms[1] = 0;
    profile->layers.push_back(layer);
  }
  return testing::Homogeneous(std::move(profile), 1, CostModelKind::kOneFOneB, 4,
                              1024.0 * (1 << 30));
}

std::string Id(int k) { return absl::StrCat("n", k); }

std::vector<ClusterNode> Nodes(int n) {
  std::vector<ClusterNode> nodes;
  for (int k = 0; k < n; ++k) nodes.push_back({Id(k), 0});
  return nodes;
}

// Oobleck's pipelines as rank lists: pipeline i runs the template of its size on those
// nodes, in that order.
ClusterPlan PlanOfGroups(const Planned& p, const std::vector<std::vector<int>>& groups,
                         int microbatches_each) {
  ClusterPlan plan;
  for (const std::vector<int>& group : groups) {
    absl::StatusOr<std::vector<PlannedMix>> planned =
        p.templates->PlanTemplates(*p.model, {NodeMix{static_cast<int>(group.size())}});
    EXPECT_TRUE(planned.ok()) << planned.status();
    if (!planned.ok()) return {};
    EXPECT_TRUE((*planned)[0].result->feasible);
    PlannedPipeline pipeline;
    pipeline.tmpl = (*planned)[0].result->best;
    for (int k : group) pipeline.node_ids.push_back(Id(k));
    pipeline.microbatches = microbatches_each;
    plan.pipelines.push_back(std::move(pipeline));
    plan.global_batch += microbatches_each;
  }
  return plan;
}

std::vector<std::vector<std::string>> Groups(const ClusterPlan& plan) {
  std::vector<std::vector<std::string>> groups;
  for (const PlannedPipeline& pipeline : plan.pipelines) groups.push_back(pipeline.node_ids);
  return groups;
}

std::vector<std::vector<std::string>> IdGroups(const std::vector<std::vector<int>>& groups) {
  std::vector<std::vector<std::string>> out;
  for (const std::vector<int>& group : groups) {
    out.emplace_back();
    for (int k : group) out.back().push_back(Id(k));
  }
  return out;
}

struct RuleCase {
  std::vector<std::vector<int>> before;  // Oobleck's rank lists (one GPU per node)
  int min_nodes = 1, max_nodes = 0;      // its templates: one per size min..max
  std::vector<int> failed;
  std::vector<std::vector<int>> after;  // what Oobleck's engine leaves
};

void ExpectOobleckGroups(const RuleCase& c) {
  Planned p = MakePlanner(OneGpuNodes());
  int n = 0;
  for (const std::vector<int>& group : c.before) n += static_cast<int>(group.size());
  const std::vector<ClusterNode> nodes = Nodes(n);
  const ClusterPlan plan = PlanOfGroups(p, c.before, 4);
  ClusterEvent event;
  for (int k : c.failed) event.failed_node_ids.push_back(Id(k));
  ReplanOptions options;
  options.force_strategy = ReplanStrategy::kOobleckFallback;
  options.limits.min_nodes = c.min_nodes;
  options.limits.max_nodes = c.max_nodes;
  absl::StatusOr<ReplanResult> r = Replan(*p.planner, *p.model, nodes, plan, event, options);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->strategy, ReplanStrategy::kOobleckFallback);
  EXPECT_THAT(Groups(r->plan), ElementsAreArray(IdGroups(c.after)));
  // Each pipeline runs the template of its size, its nodes in Oobleck's rank order.
  for (const PlannedPipeline& pipeline : r->plan.pipelines) {
    absl::StatusOr<std::vector<PlannedMix>> planned =
        p.templates->PlanTemplates(*p.model, {NodeMix{static_cast<int>(pipeline.node_ids.size())}});
    ASSERT_TRUE(planned.ok());
    EXPECT_TRUE(SameShape(pipeline.tmpl, (*planned)[0].result->best));
  }
  // The rule alone gives the same groups.
  absl::StatusOr<ClusterPlan> rule =
      OobleckFallbackPlan(*p.planner, *p.model, nodes, plan, event, options);
  ASSERT_TRUE(rule.ok()) << rule.status();
  EXPECT_THAT(Groups(*rule), ElementsAreArray(IdGroups(c.after)));
}

// The sosp23 artifact's dynamic reconfiguration test: pipelines of 2, 3, 4 and 5 one-GPU
// nodes, templates for 2..5 nodes, four failure sets.
const std::vector<std::vector<int>> kSosp23Pipelines = {
    {0, 1}, {2, 3, 4}, {5, 6, 7, 8}, {9, 10, 11, 12, 13}};

TEST(OobleckRuleTest, Sosp23OneLostNodeShrinksItsPipeline) {
  // The 3-node pipeline loses a node and runs the 2-node template on the other two.
  ExpectOobleckGroups(
      {kSosp23Pipelines, 2, 5, {2}, {{0, 1}, {3, 4}, {5, 6, 7, 8}, {9, 10, 11, 12, 13}}});
}

TEST(OobleckRuleTest, Sosp23BorrowsFromTheLastOfTheLargest) {
  // [0] borrows the 5-node pipeline's last node (13); [2] then finds two 4-node pipelines
  // and borrows from the later one ([9..12], not [5..8]). Smaller pipelines come first.
  ExpectOobleckGroups(
      {kSosp23Pipelines, 2, 5, {1, 3, 4}, {{0, 13}, {2, 12}, {9, 10, 11}, {5, 6, 7, 8}}});
}

TEST(OobleckRuleTest, Sosp23TwoBorrowersFromOneLender) {
  ExpectOobleckGroups(
      {kSosp23Pipelines, 2, 5, {2, 4, 6, 7, 8}, {{0, 1}, {3, 13}, {5, 12}, {9, 10, 11}}});
}

TEST(OobleckRuleTest, Sosp23NoLenderMergesInPipelineOrder) {
  // [0], [4] and [8] cannot borrow ([12, 13] has no node to spare): [0] merges with [4],
  // and [8], left alone, merges with the first pipeline that has a template.
  ExpectOobleckGroups(
      {kSosp23Pipelines, 2, 5, {1, 2, 3, 5, 6, 7, 9, 10, 11}, {{0, 4}, {8, 12, 13}}});
}

TEST(OobleckRuleTest, EquallyLargeLendersTheLastLends) {
  // [7] needs a node; [0, 1, 2] and [3, 4, 5] could both lend: the later one does.
  ExpectOobleckGroups({{{0, 1, 2}, {3, 4, 5}, {6, 7}}, 2, 3, {6}, {{3, 4}, {5, 7}, {0, 1, 2}}});
}

TEST(OobleckRuleTest, EquallyLargeLendersAfterTheBorrower) {
  // The borrower comes first in the list; of the two 4-node lenders the last lends.
  ExpectOobleckGroups(
      {{{0, 1}, {2, 3, 4, 5}, {6, 7, 8, 9}}, 2, 4, {1}, {{0, 9}, {6, 7, 8}, {2, 3, 4, 5}}});
}

TEST(OobleckRuleTest, BorrowsAsManyNodesAsTheSmallestTemplateNeeds) {
  // Templates of 3..5 nodes: [0] needs two more and takes both from the 5-node pipeline.
  ExpectOobleckGroups({{{0, 1, 2}, {3, 4, 5, 6, 7}}, 3, 5, {1, 2}, {{0, 6, 7}, {3, 4, 5}}});
}

TEST(OobleckRuleTest, MergesPipelinesThatCannotBorrow) {
  // Templates of 3 nodes only: [0, 2] and [4, 5] have no lender and merge. Oobleck's engine
  // has a template for every size up to the cluster's, so the merged 4 nodes get one.
  ExpectOobleckGroups({{{0, 1, 2}, {3, 4, 5}}, 3, 3, {1, 3}, {{0, 2, 4, 5}}});
}

}  // namespace
}  // namespace oobleck
