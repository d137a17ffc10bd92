// core/fidelity: every plan shape Sailor's format can express (stages with different dp, a
// replica over several nodes, several pipeline_list entries, zones), each on small hand-made
// data whose answers follow from the formulas of docs/COST_MODEL.md ("Predicting real runs"),
// and the bad input of each.
#include <map>
#include <string>
#include <vector>

#include "core/fidelity/evaluate.h"
#include "core/fidelity/sailor_data.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace oobleck::fidelity {
namespace {

using json = nlohmann::json;
using ::testing::HasSubstr;

// A flat bandwidth curve: `gb_per_s` for every message size.
json Flat(double gb_per_s) { return json::array({json::array({0, 0, gb_per_s}), gb_per_s * 1e9}); }

// A 4-layer model "toy" on GH-96 at mbs 1: every layer 10 ms forward, 20 ms backward at tp 1
// (5 and 10 at tp 2), no update; 1 MB of parameters, output and activations per layer and GPU.
// Network 1 GB/s between single GPUs, and between groups of 2, in zone "a", 0.5 GB/s from "a" to
// "b"; in-node 10 GB/s.
std::map<std::string, json> ToyDocs() {
  std::map<std::string, json> docs;
  for (int tp : {1, 2}) {
    for (int l = 0; l < 4; ++l) {
      const std::string layer = std::to_string(l), at = std::to_string(tp);
      docs["profiles_tmp.json"]["toy"]["GH-96"]["1"][at][layer] = {0.01 / tp, 0.02 / tp, 0};
      docs["llm_info.json"]["toy"][at][layer] = {
          {"params_bytes", 1e6}, {"act_output_bytes", 1e6}, {"act_mem_bytes", 1e6}};
    }
  }
  docs["multizone_bandwidths.json"]["a"]["GH-96"]["1"]["a"]["GH-96"]["1"] = Flat(1);
  docs["multizone_bandwidths.json"]["a"]["GH-96"]["1"]["b"]["GH-96"]["1"] = Flat(0.5);
  docs["multizone_bandwidths.json"]["a"]["GH-96"]["2"]["a"]["GH-96"]["2"] = Flat(1);
  docs["intra_node_bandwidths.json"]["GH-96"]["2"] = Flat(10);
  return docs;
}

const SailorData& Toy() {
  static const SailorData* data = [] {
    auto d = SailorDataFromJson(ToyDocs());
    EXPECT_TRUE(d.ok()) << d.status();
    return new SailorData(*d);
  }();
  return *data;
}

// A replica on one single-GPU node of zone `zone` (so no two replicas share a node).
json OneGpu(const std::string& zone = "a") {
  return json::array({json::array({json::array({"GH-96", 1, zone})}), 1});
}

// (Vectors, not braced JSON: nlohmann reads a one-element brace list as its element.)
json Pipeline(const std::vector<std::vector<int>>& layers,
              const std::vector<std::vector<json>>& replicas) {
  json dp = json::array(), tmp = json::array();
  for (const auto& stage : replicas) {
    dp.push_back(stage.size());
    tmp.push_back(json(stage));
  }
  json out = json::object();
  out["num_stages"] = layers.size();
  out["layers_per_stage"] = json(layers);
  out["dp"] = dp;
  out["tmp_per_stage"] = tmp;
  return out;
}

json Plan(int gbs, const std::vector<json>& pipelines) {
  json out = json::object();
  out["model"] = "toy";
  out["mbs"] = 1;
  out["gbs"] = gbs;
  out["pipeline_list"] = json(pipelines);
  return out;
}

absl::StatusOr<Evaluation> Evaluate(const json& doc) {
  auto plan = SailorPlanFromJson(doc);
  if (!plan.ok()) return plan.status();
  return EvaluateSailorPlan(Toy(), *plan);
}

void ExpectError(const absl::Status& status, absl::StatusCode code, const std::string& field,
                 const std::string& text) {
  EXPECT_EQ(status.code(), code) << status;
  EXPECT_THAT(std::string(status.message()), HasSubstr(field));
  EXPECT_THAT(std::string(status.message()), HasSubstr(text));
}

const double kReserve = kRuntimeReserveFraction * 96.0 * (int64_t{1} << 30);
// Rebuilding a received 1 MB boundary tensor on the host (Sailor's reconstruct_tensor).
const double kRebuild = 1e6 / kHostTensorBytesPerS;

TEST(FidelityShapesTest, StagesWithDifferentDp) {
  // Stage 0 (layers 0-1) on one replica, stage 1 (layers 2-3) on two; 4 micro-batches.
  // Every step: 60 ms compute + 2 × 1 ms transfer of 1 MB (to or from the slowest partner) +
  // rebuilding the 1 MB it received (R). Stage 0 runs all 4 micro-batches, then micro-batch 0
  // drains through stage 1: 4 × (62 ms + R) + 62 ms + R; stage 1's gradients (2 MB) are
  // reduced over its 2 replicas: 2 ms.
  const json doc = Plan(4, {Pipeline({{0, 1}, {2, 3}}, {{OneGpu()}, {OneGpu(), OneGpu()}})});
  auto e = Evaluate(doc);
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_NEAR(e->pipeline_s, 0.310 + 5 * kRebuild, 1e-9);
  EXPECT_NEAR(e->bubble_s, 0.062 + kRebuild, 1e-9);
  EXPECT_NEAR(e->p2p_s, 0.010 + 5 * kRebuild, 1e-9);
  EXPECT_NEAR(e->sync_s, 0.002, 1e-9);
  EXPECT_NEAR(e->iteration_s, 0.312 + 5 * kRebuild, 1e-9);
  EXPECT_EQ(e->microbatches, 4);
  // Stage 0 keeps min(4, 2) micro-batches of 2 MB in flight plus one layer's 1 MB; stage 1
  // (2 micro-batches each) keeps one. Each holds 16 B per parameter (4 × its 2 MB) and the
  // flat copy of its 2 MB of gradients that DeepSpeed all-reduces.
  ASSERT_EQ(e->memory.size(), 2u);
  ASSERT_EQ(e->memory[1].size(), 2u);
  EXPECT_DOUBLE_EQ(e->memory[0][0].training_state, 10e6);
  EXPECT_DOUBLE_EQ(e->memory[0][0].activations, 5e6);
  EXPECT_DOUBLE_EQ(e->memory[1][1].activations, 3e6);
  EXPECT_DOUBLE_EQ(e->peak_memory_bytes, 15e6 + kReserve);
}

TEST(FidelityShapesTest, GradientBucketIsOneStageCopyUpToTheBucketSize) {
  // DeepSpeed copies a stage's gradients into a flat buffer of at most kGradientBucketBytes
  // to all-reduce them, dp 1 included. 1 MB of parameters per layer: a 2-layer stage's bucket
  // is its 2 MB. 1.5 GB per layer: a 4-layer stage's 6 GB of gradients go in buckets of at
  // most 2 GB, and the largest is what the allocator keeps.
  const json one_replica = Plan(1, {Pipeline({{0, 1}, {2, 3}}, {{OneGpu()}, {OneGpu()}})});
  auto small = Evaluate(one_replica);
  ASSERT_TRUE(small.ok()) << small.status();
  EXPECT_DOUBLE_EQ(small->memory[0][0].training_state, 4 * 2e6 + 2e6);
  std::map<std::string, json> docs = ToyDocs();
  for (json& sizes : docs["llm_info.json"]["toy"]["1"]) sizes["params_bytes"] = 1.5e9;
  auto big_data = SailorDataFromJson(docs);
  ASSERT_TRUE(big_data.ok()) << big_data.status();
  auto plan = SailorPlanFromJson(Plan(1, {Pipeline({{0, 1, 2, 3}}, {{OneGpu()}})}));
  ASSERT_TRUE(plan.ok()) << plan.status();
  auto big = EvaluateSailorPlan(*big_data, *plan);
  ASSERT_TRUE(big.ok()) << big.status();
  EXPECT_DOUBLE_EQ(big->memory[0][0].training_state, 4 * 6e9 + kGradientBucketBytes);
}

TEST(FidelityShapesTest, DifferentDpNeedsAnEvenSplit) {
  // 4 micro-batches do not split over 3 replicas of stage 1.
  json doc = Plan(4, {Pipeline({{0, 1}, {2, 3}}, {{OneGpu()}, {OneGpu(), OneGpu(), OneGpu()}})});
  ExpectError(SailorPlanFromJson(doc).status(), absl::StatusCode::kInvalidArgument, "gbs",
              "must be a multiple of mbs × dp = 3");
  doc = Plan(4, {Pipeline({{0, 1}, {2, 3}}, {{OneGpu()}, {OneGpu(), OneGpu()}})});
  doc["pipeline_list"][0]["dp"][1] = 3;  // dp says 3, two listed
  ExpectError(SailorPlanFromJson(doc).status(), absl::StatusCode::kInvalidArgument,
              "pipeline_list/0/tmp_per_stage/1", "must list dp = 3 replicas");
}

TEST(FidelityShapesTest, ReplicaOverTwoNodes) {
  // tp 2 over two single-GPU nodes: the tp-2 profile (15 ms a layer) plus, for each all-reduce
  // of a layer's 1 MB output (2 for the embedding, 4 per transformer layer, none for the head:
  // 10), the network ring (1 ms at 1 GB/s) minus the in-node one the profile holds (0.1 ms).
  const json two_nodes = json::array(
      {json::array({json::array({"GH-96", 1, "a"}), json::array({"GH-96", 1, "a"})}), 2});
  auto plan = SailorPlanFromJson(Plan(2, {Pipeline({{0, 1, 2, 3}}, {{two_nodes}})}));
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ(plan->replicas[0][0].nodes.size(), 2u);
  EXPECT_EQ(plan->replicas[0][0].nodes[1].gpus, 1);
  auto e = EvaluateSailorPlan(Toy(), *plan);
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_NEAR(e->iteration_s, 2 * (0.060 + 10 * 0.0009), 1e-9);
}

TEST(FidelityShapesTest, TensorParallelRanksEachSendTheirPartOfABoundary) {
  // Two stages, each one replica at tp 2 on its own 2-GPU node. DeepSpeed's PipelineEngine
  // splits the 1 MB boundary tensor over the 2 ranks (PartitionedTensor), so the node's link
  // carries 1 MB, not 2 MB: 1 ms at 1 GB/s each way. The receiver rebuilds the 1 MB (R) and
  // its 2 ranks all-gather their halves in the node (0.5 MB at 10 GB/s: 0.05 ms). A step is
  // 2 × 15 ms + 2 × 1 ms + R + 0.05 ms; two micro-batches: 2 steps on one stage + 1 through
  // the other.
  const json tp2 = json::array({json::array({json::array({"GH-96", 2, "a"})}), 2});
  auto e = Evaluate(Plan(2, {Pipeline({{0, 1}, {2, 3}}, {{tp2}, {tp2}})}));
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_NEAR(e->p2p_s, 3 * (0.002 + kRebuild + 0.00005), 1e-9);
  EXPECT_NEAR(e->iteration_s, 3 * (0.032 + kRebuild + 0.00005), 1e-9);
}

TEST(FidelityShapesTest, AReceivedBoundaryIsRebuiltOnTheHostBeforeUse) {
  // Sailor's engine rebuilds every boundary tensor a stage receives (reconstruct_tensor: the
  // whole tensor as zeros on the host, copied to the GPU): a middle stage receives twice per
  // micro-batch (the activation, the gradient of its output), the end stages once. Stages of
  // 1, 2 and 1 layers (30, 60, 30 ms), 1 ms per 1 MB transfer: steps of 32 ms + R, 64 ms + 2R,
  // 32 ms + R; two micro-batches: 2 middle steps + the two end steps.
  const json doc = Plan(2, {Pipeline({{0}, {1, 2}, {3}}, {{OneGpu()}, {OneGpu()}, {OneGpu()}})});
  auto e = Evaluate(doc);
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_NEAR(e->pipeline_s, 2 * (0.064 + 2 * kRebuild) + 2 * (0.032 + kRebuild), 1e-9);
  EXPECT_NEAR(e->p2p_s, 2 * (0.004 + 2 * kRebuild) + 2 * (0.002 + kRebuild), 1e-9);
  EXPECT_GT(kRebuild, 0.0);
}

TEST(FidelityShapesTest, NodesListedPerGpuFillTheFirstNode) {
  // Metis' plans list a node per GPU: tp 2 on [GH-96, 4] twice is one node of 4.
  const json per_gpu = json::array(
      {json::array({json::array({"GH-96", 4, "a"}), json::array({"GH-96", 4, "a"})}), 2});
  auto plan = SailorPlanFromJson(Plan(2, {Pipeline({{0, 1, 2, 3}}, {{per_gpu}})}));
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ(plan->replicas[0][0].nodes.size(), 1u);
  auto e = EvaluateSailorPlan(Toy(), *plan);
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_NEAR(e->iteration_s, 2 * 0.060, 1e-9);  // no network in the layers
}

TEST(FidelityShapesTest, ReplicaOverNodesBadInput) {
  json nodes = json::array({json::array({json::array({"GH-96", 1, "a"})}), 2});
  ExpectError(SailorPlanFromJson(Plan(2, {Pipeline({{0, 1, 2, 3}}, {{nodes}})})).status(),
              absl::StatusCode::kInvalidArgument, "pipeline_list/0/tmp_per_stage/0/0/1",
              "must be at most the GPUs of the replica's nodes (1)");
  nodes = json::array({json::array(), 1});
  ExpectError(SailorPlanFromJson(Plan(2, {Pipeline({{0, 1, 2, 3}}, {{nodes}})})).status(),
              absl::StatusCode::kInvalidArgument, "tmp_per_stage/0/0/0", "at least one node");
  nodes =
      json::array({json::array({json::array({"GH-96", 1, "a"}), json::array({"GH-96", 1})}), 2});
  ExpectError(SailorPlanFromJson(Plan(2, {Pipeline({{0, 1, 2, 3}}, {{nodes}})})).status(),
              absl::StatusCode::kInvalidArgument, "tmp_per_stage/0/0/0/1",
              "must be [gpu_type, gpus_per_node, zone]");
  // The second node's type has no profile: never a silent zero.
  nodes = json::array(
      {json::array({json::array({"GH-96", 1, "a"}), json::array({"RTX-3090", 1, "a"})}), 2});
  ExpectError(Evaluate(Plan(2, {Pipeline({{0, 1, 2, 3}}, {{nodes}})})).status(),
              absl::StatusCode::kFailedPrecondition, "pipeline_list/0/tmp_per_stage/0/0",
              "GPU type \"RTX-3090\" has no profile");
}

TEST(FidelityShapesTest, SeveralPipelines) {
  // pipeline_list[0]: one stage of 4 layers; [1]: two stages of 2. Each runs 2 of the 4
  // micro-batches: 2 × 120 ms and 2 × 62 + 62 ms; the slower sets the pace. Each layer is
  // reduced over its 2 replicas (one per pipeline): pipeline 0's 4 MB stage takes 4 ms.
  const json doc = Plan(4, {Pipeline({{0, 1, 2, 3}}, {{OneGpu()}}),
                            Pipeline({{0, 1}, {2, 3}}, {{OneGpu()}, {OneGpu()}})});
  auto plan = SailorPlanFromJson(doc);
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ(plan->other_pipelines.size(), 1u);
  auto e = EvaluateSailorPlan(Toy(), *plan);
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_NEAR(e->pipeline_s, 0.240, 1e-9);
  EXPECT_EQ(e->slowest_pipeline_entry, 0);
  EXPECT_NEAR(e->sync_s, 0.004, 1e-9);
  EXPECT_EQ(e->microbatches, 2);
  // Pipeline 0's one stage; pipeline 1's two, each holding 2 MB of parameters (and their
  // gradient bucket) and up to min(2, 2 - s) micro-batches of 2 MB, plus a layer's 1 MB.
  EXPECT_EQ(e->memory.size(), 1u);
  ASSERT_EQ(e->other_pipelines_memory.size(), 1u);
  ASSERT_EQ(e->other_pipelines_memory[0].size(), 2u);
  EXPECT_DOUBLE_EQ(e->other_pipelines_memory[0][0][0].training_state, 10e6);
  EXPECT_DOUBLE_EQ(e->other_pipelines_memory[0][0][0].activations, 5e6);
  // Pipeline 0's GPU: 4 MB of parameters (16 MB of state, a 4 MB bucket), one micro-batch of
  // 4 MB in flight, a layer's 1 MB.
  EXPECT_DOUBLE_EQ(e->peak_memory_bytes, 16e6 + 4e6 + 5e6 + kReserve);
}

TEST(FidelityShapesTest, SeveralPipelinesBadInput) {
  json doc = Plan(3, {Pipeline({{0, 1, 2, 3}}, {{OneGpu()}}),
                      Pipeline({{0, 1}, {2, 3}}, {{OneGpu()}, {OneGpu()}})});
  ExpectError(SailorPlanFromJson(doc).status(), absl::StatusCode::kInvalidArgument, "gbs",
              "must be a multiple of mbs × dp × pipelines = 2");
  doc["gbs"] = 4;
  doc["pipeline_list"][1]["layers_per_stage"][1] = json::array({2});
  doc["pipeline_list"][1]["num_stages"] = 2;
  ExpectError(Evaluate(doc).status(), absl::StatusCode::kInvalidArgument,
              "pipeline_list/1/layers_per_stage", "covers 3 layers but toy has 4");
  doc = Plan(4, {Pipeline({{0, 1, 2, 3}}, {{OneGpu()}}),
                 Pipeline({{0, 1}, {2, 3}}, {{OneGpu()}, {OneGpu()}})});
  doc["pipeline_list"][1]["tmp_per_stage"][1][0][1] = 4;  // no tp 4 in the data
  doc["pipeline_list"][1]["tmp_per_stage"][1][0][0][0][1] = 4;
  ExpectError(Evaluate(doc).status(), absl::StatusCode::kFailedPrecondition,
              "pipeline_list/1/tmp_per_stage/1/0", "has no tp 4");
  doc = Plan(4, {Pipeline({{0, 1, 2, 3}}, {{OneGpu()}}), json::array()});
  ExpectError(SailorPlanFromJson(doc).status(), absl::StatusCode::kInvalidArgument,
              "pipeline_list/1", "must be a JSON object");
}

// One check over every pipeline, stage, replica and node (the Evaluate RPC and bench/fidelity
// both use it): a GPU type the profiles lack in the second pipeline, or on a replica's second
// node, is named by the field of that node and the missing key.
TEST(FidelityShapesTest, EveryPipelineAndNodeNeedsItsProfile) {
  const json rtx = json::array({json::array({json::array({"RTX-3090", 1, "a"})}), 1});
  auto plan = SailorPlanFromJson(Plan(4, {Pipeline({{0, 1, 2, 3}}, {{OneGpu()}}),
                                          Pipeline({{0, 1}, {2, 3}}, {{OneGpu()}, {rtx}})}));
  ASSERT_TRUE(plan.ok()) << plan.status();
  ExpectError(CheckPlanInputs(Toy(), *plan, "toy"), absl::StatusCode::kFailedPrecondition,
              "pipeline_list/1/tmp_per_stage/1/0/0/0: no profile toy/RTX-3090/mb1 ",
              "GPU type \"RTX-3090\" has no profile");
  ExpectError(EvaluateSailorPlan(Toy(), *plan).status(), absl::StatusCode::kFailedPrecondition,
              "pipeline_list/1/tmp_per_stage/1/0/0/0", "toy/RTX-3090/mb1");
  const json two_nodes = json::array(
      {json::array({json::array({"GH-96", 1, "a"}), json::array({"RTX-3090", 1, "a"})}), 2});
  plan = SailorPlanFromJson(Plan(2, {Pipeline({{0, 1}, {2, 3}}, {{OneGpu()}, {two_nodes}})}));
  ASSERT_TRUE(plan.ok()) << plan.status();
  ExpectError(CheckPlanInputs(Toy(), *plan, "toy"), absl::StatusCode::kFailedPrecondition,
              "pipeline_list/0/tmp_per_stage/1/0/0/1: no profile toy/RTX-3090/mb1/tp2 ", "");
  // A tp the layer sizes lack names the replica's tp; a model the data lack, its first node.
  SailorData no_sizes = Toy();
  no_sizes.layer_sizes["toy"].erase(2);
  ExpectError(CheckPlanInputs(no_sizes, *plan, "toy"), absl::StatusCode::kFailedPrecondition,
              "pipeline_list/0/tmp_per_stage/1/0/1", "no layer sizes of toy at tp 2");
  ExpectError(CheckPlanInputs(Toy(), *plan, "other"), absl::StatusCode::kFailedPrecondition,
              "pipeline_list/0/tmp_per_stage/0/0/0/0: no profile other/GH-96/mb1 ",
              "other has none");
}

TEST(FidelityShapesTest, ReplicasInTwoZones) {
  // dp 2 over zones a and b: the 4 MB reduction crosses the 0.5 GB/s link: 8 ms.
  const json doc = Plan(2, {Pipeline({{0, 1, 2, 3}}, {{OneGpu("a"), OneGpu("b")}})});
  auto e = Evaluate(doc);
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_NEAR(e->sync_s, 0.008, 1e-9);
  // A zone with no measured link to the others is named, not priced at zero.
  const json lost = Plan(2, {Pipeline({{0, 1, 2, 3}}, {{OneGpu("a"), OneGpu("c")}})});
  ExpectError(Evaluate(lost).status(), absl::StatusCode::kFailedPrecondition,
              "pipeline_list/0/tmp_per_stage/0/0",
              "no measured bandwidth from 1 GH-96 in a to 1 "
              "GH-96 in c");
}

TEST(FidelityShapesTest, PlansBuiltInCodeAreCheckedToo) {
  // What the parser refuses is refused again for a SailorPlan built by other code (the RPC):
  // a stage without replicas once divided by zero.
  auto plan = SailorPlanFromJson(Plan(4, {Pipeline({{0, 1}, {2, 3}}, {{OneGpu()}, {OneGpu()}})}));
  ASSERT_TRUE(plan.ok()) << plan.status();
  SailorPlan no_replicas = *plan;
  no_replicas.replicas[1].clear();
  ExpectError(EvaluateSailorPlan(Toy(), no_replicas).status(), absl::StatusCode::kInvalidArgument,
              "pipeline_list/0/tmp_per_stage/1", "a stage needs layers, replicas");
  SailorPlan out_of_order = *plan;
  out_of_order.layers_per_stage[1] = {3, 2};
  ExpectError(EvaluateSailorPlan(Toy(), out_of_order).status(), absl::StatusCode::kInvalidArgument,
              "pipeline_list/0/layers_per_stage", "in order, each once");
  SailorPlan no_layers = *plan;
  no_layers.model.clear();
  no_layers.layers_per_stage.clear();
  ExpectError(EvaluateSailorPlan(Toy(), no_layers).status(), absl::StatusCode::kInvalidArgument,
              "pipeline_list/0/layers_per_stage", "must not be empty");
}

TEST(FidelityShapesTest, ManyReplicasStayLinear) {
  // dp 4096 and 4095 (coprime: every replica of one stage exchanges micro-batches with every
  // replica of the other) predict at once: partners and rings are priced per link kind.
  const std::vector<json> big(4096, OneGpu()), odd(4095, OneGpu());
  const json doc = Plan(4096 * 4095, {Pipeline({{0, 1}, {2, 3}}, {big, odd})});
  auto e = Evaluate(doc);
  ASSERT_TRUE(e.ok()) << e.status();
  // Stage 1: 4096 micro-batches each.
  EXPECT_NEAR(e->pipeline_s, 4097 * (0.062 + kRebuild), 1e-6);
  // One replica more than kMaxPlanReplicas is refused, naming where the count ran over.
  const std::vector<json> over(kMaxPlanReplicas + 1 - 4096, OneGpu());
  ExpectError(SailorPlanFromJson(Plan(4096, {Pipeline({{0, 1}, {2, 3}}, {big, over})})).status(),
              absl::StatusCode::kInvalidArgument, "pipeline_list/0/tmp_per_stage/1",
              "more than 16384 stage replicas");
}

}  // namespace
}  // namespace oobleck::fidelity
