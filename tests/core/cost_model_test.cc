#include "core/cost_model.h"

#include <functional>
#include <string>
#include <vector>

#include "core/field_path.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/core/test_problems.h"

namespace oobleck {
namespace {

using ::testing::HasSubstr;

// Three layers with round numbers so every formula of docs/COST_MODEL.md can be checked by
// hand.
std::shared_ptr<const ModelProfile> Tiny() {
  auto p = std::make_shared<ModelProfile>();
  p->key = {"tiny", "gpu", 1};
  p->layers = {{10, 20, 100, 1000, {{1, 0}, {2, 1}}, {}},
               {30, 40, 200, 2000, {{1, 0}, {2, 2}}, {}},
               {50, 60, 300, 3000, {{1, 0}, {2, 3}}, {}}};
  return p;
}

PlanningProblem TinyProblem(CostModelKind kind, int m) {
  PlanningProblem p;
  // 1e6 bytes/s: a transfer of A bytes takes A / 1000 ms over the network, half that inside.
  p.node_types = {{"n", "gpu", 2, 1e9, 2e6}};
  p.profiles = {Tiny()};
  p.inter_node_bytes_per_s = 1e6;
  p.cost_model = kind;
  p.microbatches = m;
  return p;
}

TEST(CostModelTest, StageComputeIncludesInNodeAllreduce) {
  auto model = CostModel::Create(TinyProblem(CostModelKind::kOneFOneB, 4));
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_EQ(model->stage_sizes(0), (std::vector<int>{1, 2}));
  EXPECT_DOUBLE_EQ(model->ForwardMs(0, 1, 0, 2), 40);
  // F = sum f/g + AR[g] = (10 + 30)/2 + (1 + 2)
  EXPECT_DOUBLE_EQ(model->ForwardMs(0, 2, 0, 2), 23);
  EXPECT_DOUBLE_EQ(model->BackwardMs(0, 2, 0, 2), 33);
}

TEST(CostModelTest, OneFOneBPipelineTimeAndTransfers) {
  auto model = CostModel::Create(TinyProblem(CostModelKind::kOneFOneB, 4));
  ASSERT_TRUE(model.ok());
  // Two nodes, one stage each: [0,1) then [1,3). Boundary moves layer 0's 1000 bytes over
  // the network: 1 ms.
  PipelineTemplate t;
  t.mix = {2};
  t.node_order = {0, 0};
  t.stages = {{0, 1, 0, 0, 2}, {1, 3, 1, 0, 2}};
  auto e = model->Evaluate(t);
  ASSERT_TRUE(e.ok()) << e.status();
  const double c0 = (10 + 20) / 2.0 + 2 * 1 + 1;
  const double c1 = (30 + 40 + 50 + 60) / 2.0 + 2 * (2 + 3) + 1;
  EXPECT_DOUBLE_EQ(e->stages[0].cost_ms, c0);
  EXPECT_DOUBLE_EQ(e->stages[1].cost_ms, c1);
  EXPECT_DOUBLE_EQ(e->iteration_time_ms, c0 + c1 + 3 * std::max(c0, c1));
  // Memory: k * params / g + activations * min(M, stages from end).
  EXPECT_DOUBLE_EQ(e->stages[0].memory_bytes_per_gpu, 6 * 100 / 2.0 + 1000 * 2);
  EXPECT_DOUBLE_EQ(e->stages[1].memory_bytes_per_gpu, 6 * 500 / 2.0 + 5000 * 1);

  // Same node split in two 1-GPU stages: the transfer is intra-node, 0.5 ms.
  PipelineTemplate same_node;
  same_node.mix = {1};
  same_node.node_order = {0};
  same_node.stages = {{0, 1, 0, 0, 1}, {1, 3, 0, 0, 1}};
  auto f = model->Evaluate(same_node);
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_DOUBLE_EQ(f->stages[0].cost_ms, 30 + 0.5);
  EXPECT_DOUBLE_EQ(f->stages[1].cost_ms, 180 + 0.5);
}

TEST(CostModelTest, OobleckSosp23UsesLastArgmaxAndBaseCase) {
  auto no_m = CostModel::Create(TinyProblem(CostModelKind::kOobleckSosp23, 0));
  ASSERT_TRUE(no_m.ok());
  EXPECT_DOUBLE_EQ(no_m->PipelineTimeMs({5}), 20);  // 4c
  // c = {3, 7, 7, 2}: k* = 2 (last max), S = 4, n_k = 2S + k* + 1 = 11.
  EXPECT_DOUBLE_EQ(no_m->PipelineTimeMs({3, 7, 7, 2}), 19 + 11 * 7 + (7 + 2));
  auto with_m = CostModel::Create(TinyProblem(CostModelKind::kOobleckSosp23, 10));
  ASSERT_TRUE(with_m.ok());
  // n_k = M - S + k* + 1 = 10 - 4 + 2 + 1 = 9.
  EXPECT_DOUBLE_EQ(with_m->PipelineTimeMs({3, 7, 7, 2}), 19 + 9 * 7 + (7 + 2));
  // No transfers and no memory check in Oobleck's model.
  EXPECT_DOUBLE_EQ(with_m->TransferMs(0, 0, Link::kInterNode), 0);
  EXPECT_TRUE(with_m->Fits(0, 1, 0, 3, 100));
}

TEST(CostModelTest, OobleckSosp23WithMAllowsAtMostMStages) {
  // n_k = M - q + 1 is not positive for q > M, so such templates are rejected, not scored.
  auto model = CostModel::Create(TinyProblem(CostModelKind::kOobleckSosp23, 2));
  ASSERT_TRUE(model.ok());
  PipelineTemplate tmpl;
  tmpl.mix = {3};
  tmpl.node_order = {0, 0, 0};
  for (int s = 0; s < 3; ++s) {
    Stage st;
    st.layer_begin = s;
    st.layer_end = s + 1;
    st.node_index = s;
    st.gpus = model->node_type(0).gpus_per_node;
    tmpl.stages.push_back(st);
  }
  auto evaluated = model->Evaluate(tmpl);
  ASSERT_FALSE(evaluated.ok());
  EXPECT_THAT(std::string(evaluated.status().message()), HasSubstr("at most 2 stages"));
}

TEST(CostModelTest, MemoryLimitsStagesFromEnd) {
  PlanningProblem p = TinyProblem(CostModelKind::kOneFOneB, 4);
  p.node_types[0].gpu_memory_bytes = 6 * 100 + 1000 * 2;  // layer 0 alone fits twice in flight
  auto model = CostModel::Create(p);
  ASSERT_TRUE(model.ok());
  EXPECT_TRUE(model->memory_can_bind());
  EXPECT_EQ(model->MaxStagesFromEnd(0, 1, 0, 1), 2);
  EXPECT_TRUE(model->Fits(0, 1, 0, 1, 2));
  EXPECT_FALSE(model->Fits(0, 1, 0, 1, 3));
}

TEST(CostModelTest, RingEstimateFillsMissingAllreduce) {
  PlanningProblem p = TinyProblem(CostModelKind::kOneFOneB, 4);
  auto profile = std::make_shared<ModelProfile>(*Tiny());
  for (LayerProfile& l : profile->layers) l.allreduce_in_node_ms.erase(2);
  p.profiles = {profile};
  auto skip = CostModel::Create(p);
  ASSERT_TRUE(skip.ok());
  EXPECT_EQ(skip->stage_sizes(0), std::vector<int>{1});  // size 2 not considered
  p.missing_allreduce = MissingAllreduce::kRing;
  auto ring = CostModel::Create(p);
  ASSERT_TRUE(ring.ok());
  EXPECT_EQ(ring->stage_sizes(0), (std::vector<int>{1, 2}));
  // 2(g-1)/g * 100 bytes / 2e6 bytes/s = 0.05 ms on layer 0.
  EXPECT_DOUBLE_EQ(ring->ForwardMs(0, 2, 0, 1), 5 + 0.05);
}

// The one check of a problem's settings carries each field's path, under the prefix where
// the caller holds the cluster; the server passes "cluster." and uses the paths as they are.
TEST(CostModelTest, ValidateProblemSettingsCarriesTheFieldPath) {
  struct Case {
    std::function<void(PlanningProblem*)> mutate;
    std::string path;
    std::string message;
  };
  const std::vector<Case> cases = {
      {[](auto* p) { p->microbatches = -3; }, "microbatches", "microbatches must be >= 0 (got -3)"},
      {[](auto* p) { p->microbatches = (1 << 20) + 1; }, "microbatches",
       "microbatches must be <= 1048576 (got 1048577)"},
      {[](auto* p) { p->optimizer_state_multiplier = -1; }, "optimizer_state_multiplier",
       "optimizer_state_multiplier must be finite and >= 0 (got -1)"},
      {[](auto* p) { p->inter_node_bytes_per_s = 0; }, "cluster.inter_node_bytes_per_s",
       "cluster.inter_node_bytes_per_s must be > 0 for cost_model \"1f1b\" (got 0)"},
      {[](auto* p) { p->node_types.clear(); }, "cluster.node_types",
       "cluster.node_types must not be empty"},
      {[](auto* p) { p->node_types[0].name.clear(); }, "cluster.node_types[0].name",
       "cluster.node_types[0].name is required"},
      {[](auto* p) { p->node_types.push_back(p->node_types[0]); }, "cluster.node_types[1].name",
       "cluster.node_types[1].name \"n\" repeats cluster.node_types[0].name"},
      {[](auto* p) { p->node_types[0].gpus_per_node = 65; }, "cluster.node_types[0].gpus_per_node",
       "cluster.node_types[0].gpus_per_node must be <= 64 (got 65)"},
      {[](auto* p) { p->node_types[0].gpu_memory_bytes = 0; },
       "cluster.node_types[0].gpu_memory_bytes",
       "cluster.node_types[0].gpu_memory_bytes must be > 0 (got 0)"},
      {[](auto* p) { p->node_types[0].intra_node_bytes_per_s = -1; },
       "cluster.node_types[0].intra_node_bytes_per_s",
       "cluster.node_types[0].intra_node_bytes_per_s must be > 0 (got -1)"},
  };
  for (const Case& c : cases) {
    PlanningProblem p = TinyProblem(CostModelKind::kOneFOneB, 4);
    c.mutate(&p);
    const absl::Status status = ValidateProblemSettings(p, "cluster.");
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << c.path;
    EXPECT_EQ(status.message(), c.message);
    EXPECT_EQ(FieldPathOf(status), c.path);
  }
  PlanningProblem p = TinyProblem(CostModelKind::kOneFOneB, 4);
  EXPECT_TRUE(ValidateProblemSettings(p, "cluster.").ok());
  // Without a prefix (as Create runs it) the paths are PlanningProblem's own.
  p.node_types[0].gpus_per_node = 0;
  EXPECT_EQ(FieldPathOf(CostModel::Create(p).status()), "node_types[0].gpus_per_node");
}

TEST(CostModelTest, InvalidProblemsNameTheField) {
  auto m = CostModel::Create(TinyProblem(CostModelKind::kOneFOneB, 0));
  EXPECT_THAT(m.status().message(),
              HasSubstr("microbatches must be >= 1 for cost_model \"1f1b\" (got 0)"));
  PlanningProblem p = TinyProblem(CostModelKind::kOneFOneB, 4);
  p.node_types[0].gpus_per_node = 0;
  EXPECT_THAT(CostModel::Create(p).status().message(), HasSubstr("node_types[0].gpus_per_node"));
  p = TinyProblem(CostModelKind::kOneFOneB, 4);
  p.inter_node_bytes_per_s = 0;
  EXPECT_THAT(CostModel::Create(p).status().message(), HasSubstr("inter_node_bytes_per_s"));
  p.cost_model = CostModelKind::kOobleckSosp23;  // transfers unused: no bandwidth needed
  EXPECT_TRUE(CostModel::Create(p).ok());
  EXPECT_EQ(ParseCostModelKind("gpipe").status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(CostModelTest, EvaluateRejectsMalformedTemplates) {
  auto model = CostModel::Create(TinyProblem(CostModelKind::kOneFOneB, 4));
  ASSERT_TRUE(model.ok());
  PipelineTemplate gap;
  gap.mix = {1};
  gap.node_order = {0};
  gap.stages = {{0, 1, 0, 0, 1}, {2, 3, 0, 0, 1}};
  EXPECT_FALSE(model->Evaluate(gap).ok());
  PipelineTemplate idle;
  idle.mix = {1};
  idle.node_order = {0};
  idle.stages = {{0, 3, 0, 0, 1}};
  EXPECT_THAT(model->Evaluate(idle).status().message(),
              HasSubstr("stages on node 0 use 1 GPUs but a"));
  EXPECT_THAT(model->Evaluate(gap).status().message(),
              HasSubstr("stages[1] has layers [2, 3) but must start at layer 1"));
  PipelineTemplate jump = gap;
  jump.stages = {{0, 1, 0, 0, 1}, {1, 3, 5, 0, 1}};
  EXPECT_THAT(model->Evaluate(jump).status().message(),
              HasSubstr("stages[1].node_index = 5 is not a node of the template (0 to 0)"));
}

}  // namespace
}  // namespace oobleck
