// core/fidelity: reading Sailor's data and plans, refusing bad ones by field, and the
// predictions against the 15 measured OPT-350 runs of data/sailor (docs/COST_MODEL.md,
// "Predicting real runs").
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/fidelity/evaluate.h"
#include "core/fidelity/sailor_data.h"
#include "core/file_reader.h"
#include "core/json_document.h"
#include "core/profile.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace oobleck::fidelity {
namespace {

using json = nlohmann::json;
using ::testing::HasSubstr;

const std::filesystem::path kData = std::filesystem::path(OOBLECK_SOURCE_DIR) / "data/sailor";
const std::filesystem::path kRuns = kData / "validation/clariden-opt-350";

json ReadJsonFile(const std::filesystem::path& path) {
  auto text = ReadRegularFile(path);
  EXPECT_TRUE(text.ok()) << text.status();
  auto doc = ParseJsonDocument(*text);
  EXPECT_TRUE(doc.ok()) << doc.status();
  return *doc;
}

// A fresh copy of the data's documents, parsed once.
std::map<std::string, json> DataDocs() {
  static const std::map<std::string, json>* parsed = [] {
    auto* docs = new std::map<std::string, json>;
    for (const char* name : {"profiles_tmp.json", "llm_info.json", "intra_node_bandwidths.json",
                             "multizone_bandwidths.json", "multizone_bandwidths_het.json",
                             "training_config_opt_350.json", "training_config_gpt_neo27.json"}) {
      (*docs)[name] = ReadJsonFile(kData / name);
    }
    return docs;
  }();
  return *parsed;
}

const SailorData& Data() {
  static const SailorData* data = [] {
    auto d = LoadSailorData(kData);
    EXPECT_TRUE(d.ok()) << d.status();
    return new SailorData(*d);
  }();
  return *data;
}

json RunDoc(const std::string& name) {
  return ReadJsonFile(kRuns / ("plan_config_" + name + ".json"));
}

absl::StatusOr<Evaluation> EvaluateDoc(const json& doc) {
  auto plan = SailorPlanFromJson(doc);
  if (!plan.ok()) return plan.status();
  return EvaluateSailorPlan(Data(), *plan);
}

void ExpectError(const absl::Status& status, absl::StatusCode code, const std::string& field,
                 const std::string& text = "") {
  EXPECT_EQ(status.code(), code) << status;
  EXPECT_THAT(std::string(status.message()), HasSubstr(field));
  EXPECT_THAT(std::string(status.message()), HasSubstr(text));
}

TEST(FidelityDataTest, ReadsEveryInput) {
  const SailorData& d = Data();
  const auto& gh = d.profiles.at("OPT-350").at("GH-96").at(8).at(4);
  ASSERT_EQ(gh.size(), 26u);
  EXPECT_DOUBLE_EQ(gh[25].forward_s, 0.004014);
  EXPECT_DOUBLE_EQ(gh[25].backward_s, 0.005944);
  EXPECT_DOUBLE_EQ(gh[25].update_s, 0.000479);
  EXPECT_DOUBLE_EQ(d.layer_sizes.at("OPT-350").at(4)[1].params_bytes, 12614656);
  EXPECT_EQ(d.num_all_layers.at("OPT-350"), 26);
  EXPECT_EQ(d.num_all_layers.at("GPT-Neo-2.7"), 34);
  const BandwidthCurve& link = d.inter_node.at(
      {Endpoint{"us-central1-a", "GH-96", 4}, Endpoint{"us-central1-a", "GH-96", 4}});
  EXPECT_DOUBLE_EQ(link.peak_bytes_per_s, 92551901043.9898);
  EXPECT_LE(link.At(1e9), link.peak_bytes_per_s);
  EXPECT_GT(link.At(1e3), 0);
  EXPECT_TRUE(d.inter_node.contains(
      {Endpoint{"us-central1-a", "A100-40", 4}, Endpoint{"us-central1-a", "GH-96", 4}}));
  EXPECT_DOUBLE_EQ(d.intra_node.at("GH-96").at(4).peak_bytes_per_s, 250558342885.70334);
}

TEST(FidelityDataTest, ProfiledLastLayerIncludesTheLoss) {
  // The model adds no time for the loss because Sailor's profiler timed it with the last
  // layer (docs/COST_MODEL.md, "Predicting real runs", *The loss is in the profile*). The
  // sizes it recorded with the same hooks show it: the last layer's output is whole token
  // rows (OPT-350: its tp's share of the padded vocabulary's logits; GPT-Neo: the final
  // LayerNorm's 2560-wide output) plus one fp32 scalar, the loss's own output. A profile made
  // without the loss would have no such scalar, and this model would then miss its time.
  constexpr double kSequence = 2048;
  constexpr double kFloat = 4;
  for (const auto& [model, by_tp] : Data().layer_sizes) {
    for (const auto& [tp, sizes] : by_tp) {
      SCOPED_TRACE(model + " tp " + std::to_string(tp));
      ASSERT_FALSE(sizes.empty());
      const double rows = (sizes.back().act_output_bytes - kFloat) / (kSequence * kFloat);
      EXPECT_EQ(rows, std::floor(rows));
      if (model == "OPT-350") {
        EXPECT_GE(rows * tp, 50272);  // its vocabulary, split over tp
      } else if (model == "GPT-Neo-2.7") {
        EXPECT_EQ(rows, 2560);  // no output projection: the LayerNorm's output
      }
    }
  }
}

TEST(FidelityDataTest, ReadsAPlan) {
  auto plan = LoadSailorPlan(kRuns / "plan_config_N8_D4.json");
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->microbatch_size, 8);
  EXPECT_EQ(plan->global_batch, 512);
  ASSERT_EQ(plan->layers_per_stage.size(), 2u);
  EXPECT_EQ(plan->layers_per_stage[1].front(), 12);
  ASSERT_EQ(plan->replicas[1].size(), 4u);
  EXPECT_EQ(plan->replicas[1][3].gpu_type, "GH-96");
  EXPECT_EQ(plan->replicas[1][3].tp, 4);
  EXPECT_EQ(plan->replicas[1][3].gpus_per_node, 4);
  EXPECT_DOUBLE_EQ(*plan->real_iteration_s, 2.2988);
  EXPECT_DOUBLE_EQ(*plan->real_max_memory_bytes, 26850885632.0);
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

// The regression test of the model: the 15 measured runs stay within what it reaches (median
// 1.7 % time, 3.3 % memory; max 4.9 % memory, and 16.0 % time for the runs whose causes no
// model of the plan sees: docs/COST_MODEL.md, "Predicting real runs"). Without the runtime
// reserve, memory's median is 16 %; without the gradient bucket DeepSpeed flattens to
// all-reduce, memory's max is 6.0 %; without rebuilding received boundaries on the host, the
// multi-stage runs at micro-batch 8 are 14-15 % short and the time median is 6.5 %.
TEST(FidelityTest, Opt350RunsWithinBounds) {
  std::vector<double> time_errors, memory_errors;
  for (const auto& entry : std::filesystem::directory_iterator(kRuns)) {
    auto plan = LoadSailorPlan(entry.path());
    ASSERT_TRUE(plan.ok()) << plan.status();
    auto e = EvaluateSailorPlan(Data(), *plan);
    ASSERT_TRUE(e.ok()) << e.status();
    EXPECT_EQ(e->model, "OPT-350");
    EXPECT_NEAR(e->iteration_s, e->pipeline_s + e->sync_s + e->update_s, 1e-12);
    time_errors.push_back(std::abs(e->iteration_s / *plan->real_iteration_s - 1) * 100);
    memory_errors.push_back(std::abs(e->peak_memory_bytes / *plan->real_max_memory_bytes - 1) *
                            100);
  }
  ASSERT_EQ(time_errors.size(), 15u);
  // 6.5 % before Sailor's engine rebuilding each received boundary tensor on the host
  // (reconstruct_tensor) was priced (docs/COST_MODEL.md, "Predicting real runs").
  EXPECT_LE(Median(time_errors), 1.8);
  EXPECT_LE(Median(memory_errors), 3.4);
  EXPECT_LE(*std::max_element(time_errors.begin(), time_errors.end()), 16.1);
  // 5.6 % (6.0 % at today's reserve) before the gradient bucket was counted.
  EXPECT_LE(*std::max_element(memory_errors.begin(), memory_errors.end()), 5.0);
}

TEST(FidelityTest, BreakdownOfAPipeline) {
  auto e = EvaluateDoc(RunDoc("N8_D2"));  // 4 stages, dp 2, 32 micro-batches
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(e->microbatches, 32);
  EXPECT_GT(e->bubble_s, 0);
  EXPECT_GT(e->p2p_s, 0);
  EXPECT_GT(e->sync_s, 0);
  EXPECT_GT(e->update_s, 0);
  EXPECT_LT(e->bubble_s + e->p2p_s, e->pipeline_s);
  ASSERT_EQ(e->memory.size(), 4u);
  // Stage 0 holds 4 micro-batches' activations, the last stage 1.
  EXPECT_GT(e->memory[0][0].activations, e->memory[3][0].activations);
  EXPECT_GT(e->memory[0][0].reserve, 0);
}

TEST(FidelityTest, MixedReplicaTypesAndPerStageTp) {
  json doc = RunDoc("N8_D4");  // 2 stages, dp 4, all GH-96 at tp 4
  auto base = EvaluateDoc(doc);
  ASSERT_TRUE(base.ok()) << base.status();
  auto& stages = doc["pipeline_list"][0]["tmp_per_stage"];
  // Replica 2 of both stages on A100-40 nodes: that pipeline is slower and sets the pace.
  for (int s = 0; s < 2; ++s) {
    stages[s][2] = json::parse(R"([[["A100-40", 4, "us-central1-a"]], 4])");
  }
  auto mixed = EvaluateDoc(doc);
  ASSERT_TRUE(mixed.ok()) << mixed.status();
  EXPECT_EQ(mixed->slowest_pipeline, 2);
  EXPECT_GT(mixed->iteration_s, base->iteration_s);
  EXPECT_EQ(mixed->memory[0][2].reserve, kRuntimeReserveFraction * *GpuMemoryBytes("A100-40"));
  // Stage 0 at tp 2 (its profile and sizes at tp 2): more memory per GPU there.
  json tp_doc = RunDoc("N8_D4");
  for (auto& r : tp_doc["pipeline_list"][0]["tmp_per_stage"][0]) r[1] = 2;
  auto per_stage_tp = EvaluateDoc(tp_doc);
  ASSERT_TRUE(per_stage_tp.ok()) << per_stage_tp.status();
  EXPECT_GT(per_stage_tp->memory[0][0].training_state, base->memory[0][0].training_state);
  EXPECT_NE(per_stage_tp->pipeline_s, base->pipeline_s);
}

TEST(FidelityTest, ASlowerReplicaRunsAnEvenShareOfTheMicroBatches) {
  // Sailor's engine gives every rank the same gradient_accumulation_steps = gbs / (mbs × dp)
  // and its sampler the same mbs samples per micro-batch and data-parallel rank, whatever the
  // replica's GPU type (docs/COST_MODEL.md, "How Sailor's engine shares a stage's
  // micro-batches"). So a slower replica of a data-parallel stage runs as many micro-batches
  // as the others and alone sets the pipeline's time: not fewer, as a split by speed would.
  json doc = RunDoc("N4_D4");  // 1 stage, dp 4, GH-96 at tp 4, mbs 4, gbs 128
  doc["pipeline_list"][0]["tmp_per_stage"][0][2] =
      json::parse(R"([[["A100-40", 4, "us-central1-a"]], 4])");
  auto e = EvaluateDoc(doc);
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(e->microbatches, 8);  // 128 / (4 × 4), on every replica
  double step_s = 0;              // one micro-batch of the A100-40 replica: its 26 layers
  for (const LayerTimes& t : Data().profiles.at("OPT-350").at("A100-40").at(4).at(4)) {
    step_s += t.forward_s + t.backward_s;
  }
  EXPECT_EQ(e->slowest_pipeline, 2);
  EXPECT_NEAR(e->pipeline_s, 8 * step_s, 1e-9 * step_s);
  EXPECT_EQ(e->bubble_s, 0);  // one stage: nothing fills or drains around it
  EXPECT_EQ(e->p2p_s, 0);
}

TEST(FidelityTest, RtxClusterRtx2080IsAnElevenGibCard) {
  // Sailor's description of the mixed cluster (basic_cluster_config.json) gives its RTX-2080
  // 11 GiB (a 2080 Ti), and the reserve is that fraction of it (docs/COST_MODEL.md).
  const double gib = double(int64_t{1} << 30);
  EXPECT_EQ(*GpuMemoryBytes("RTX-2080"), 11 * gib);
  json doc = RunDoc("N4_D4");  // 1 stage, dp 4, tp 4
  for (auto& r : doc["pipeline_list"][0]["tmp_per_stage"][0]) {
    r = json::parse(R"([[["RTX-2080", 4, "us-central1-a"]], 4])");
  }
  auto e = EvaluateDoc(doc);
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(e->memory[0][0].reserve, kRuntimeReserveFraction * 11 * gib);
}

TEST(FidelityTest, MeasuredLinksOnlyOneWayOrAtOtherSizes) {
  // RTX-2080 pairs of 2 GPUs were measured to RTX-3090 but not to Titan-RTX; the
  // Titan-RTX → RTX-2080 direction was.
  json doc = RunDoc("N2_D2");  // 1 stage, dp 2, mbs 2
  auto& replicas = doc["pipeline_list"][0]["tmp_per_stage"][0];
  replicas[0] = json::parse(R"([[["RTX-2080", 4, "us-central1-a"]], 2])");
  replicas[1] = json::parse(R"([[["Titan-RTX", 4, "us-central1-a"]], 2])");
  auto e = EvaluateDoc(doc);
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_GT(e->sync_s, 0);
  // Stages at tp 4 and tp 2 of GH-96: the pair is measured as such.
  doc = RunDoc("N2_D1");
  doc["pipeline_list"][0]["tmp_per_stage"][1][0][1] = 2;
  e = EvaluateDoc(doc);
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_GT(e->p2p_s, 0);
}

TEST(FidelityTest, UpdateIsTheProfiledModelsStepScaledToTheReplica) {
  // A profile's update time is the optimizer step of the model Sailor's profiler ran: the
  // embedding, kProfiledTransformerLayers transformer layers and the head. A replica of the
  // whole model (one stage, tp 4) steps over 26 layers' parameters, ~3x that model's.
  auto e = EvaluateDoc(RunDoc("N1_D1_M4_G1"));
  ASSERT_TRUE(e.ok()) << e.status();
  const auto& sizes = Data().layer_sizes.at("OPT-350").at(4);
  double whole = 0;
  for (const LayerSizes& l : sizes) whole += l.params_bytes;
  const double profiled = sizes[0].params_bytes + sizes[1].params_bytes + sizes[2].params_bytes +
                          sizes[25].params_bytes;
  const double update = Data().profiles.at("OPT-350").at("GH-96").at(1).at(4)[0].update_s;
  EXPECT_NEAR(e->update_s, update * whole / profiled, 1e-12);
  EXPECT_GT(e->update_s, 2.5 * update);
}

TEST(FidelityTest, ALargerGroupIsNoSlowerThanFewerOfItsGpus) {
  // The pair measured with 4 GH200s at both ends made 100x slower: a transfer between
  // 4-GPU groups still runs at what 2 of them reach (the link at 2 GPUs), the same as with
  // no 4-GPU measurement at all.
  const Endpoint four{"us-central1-a", "GH-96", 4};
  SailorData slowed = Data();
  BandwidthCurve& curve = slowed.inter_node.at({four, four});
  for (double& c : curve.coefficients) c /= 100;
  curve.peak_bytes_per_s /= 100;
  SailorData unmeasured = Data();
  unmeasured.inter_node.erase({four, four});
  auto plan = SailorPlanFromJson(RunDoc("N8_D4"));  // 2 stages, dp 4, tp 4
  ASSERT_TRUE(plan.ok()) << plan.status();
  auto base = EvaluateSailorPlan(Data(), *plan);
  auto slow = EvaluateSailorPlan(slowed, *plan);
  auto none = EvaluateSailorPlan(unmeasured, *plan);
  ASSERT_TRUE(base.ok() && slow.ok() && none.ok());
  EXPECT_DOUBLE_EQ(slow->p2p_s, none->p2p_s);
  EXPECT_DOUBLE_EQ(slow->sync_s, none->sync_s);
  EXPECT_GT(slow->p2p_s, base->p2p_s);  // 46 GB/s at 2 GPUs, not 92 at 4
}

TEST(FidelityTest, AMeasuredRuntimeReserveReplacesTheFraction) {
  json doc = RunDoc("N8_D4");  // 2 stages, dp 4, GH-96 at tp 4
  doc["pipeline_list"][0]["tmp_per_stage"][1][2] =
      json::parse(R"([[["A100-40", 4, "us-central1-a"]], 4])");
  auto plan = SailorPlanFromJson(doc);
  ASSERT_TRUE(plan.ok()) << plan.status();
  auto base = EvaluateSailorPlan(Data(), *plan);
  ASSERT_TRUE(base.ok()) << base.status();
  SailorData data = Data();
  data.runtime_reserve_bytes["GH-96"] = 3e9;
  auto measured = EvaluateSailorPlan(data, *plan);
  ASSERT_TRUE(measured.ok()) << measured.status();
  EXPECT_EQ(measured->memory[0][0].reserve, 3e9);
  EXPECT_EQ(measured->memory[1][2].reserve, base->memory[1][2].reserve);  // A100-40: fraction
  EXPECT_EQ(measured->memory[0][0].total() - base->memory[0][0].total(),
            3e9 - kRuntimeReserveFraction * *GpuMemoryBytes("GH-96"));
  EXPECT_EQ(measured->iteration_s, base->iteration_s);
  const double gh200 = *GpuMemoryBytes("GH-96");
  for (double bad : {-1.0, std::nan(""), HUGE_VAL, gh200, 2 * gh200}) {
    data.runtime_reserve_bytes["GH-96"] = bad;
    ExpectError(EvaluateSailorPlan(data, *plan).status(), absl::StatusCode::kInvalidArgument,
                "runtime_reserve_bytes of GH-96");
  }
}

TEST(FidelityTest, RuntimeReserveChecksNameTheField) {
  EXPECT_TRUE(CheckRuntimeReserve(0, "GH-96", "runtime_reserve_bytes").ok());
  EXPECT_TRUE(CheckRuntimeReserve(5e9, "GH-96", "runtime_reserve_bytes").ok());
  ExpectError(CheckRuntimeReserve(11.5 * (int64_t{1} << 30), "RTX-2080", "runtime_reserve_bytes"),
              absl::StatusCode::kInvalidArgument, "runtime_reserve_bytes must be less than");
  // A GPU type of unknown memory: only finite and >= 0 can be checked.
  EXPECT_TRUE(CheckRuntimeReserve(1e15, "rtx4090", "runtime_reserve_bytes").ok());
  ExpectError(CheckRuntimeReserve(-5, "rtx4090", "runtime_reserve_bytes"),
              absl::StatusCode::kInvalidArgument, "runtime_reserve_bytes must be finite and >= 0");
  // A profile carrying a bad one is refused whole.
  ::oobleck::ModelProfile profile;
  profile.key = ProfileKey{"OPT-350", "GH-96", 1, 4};
  LayerProfile& layer = profile.layers.emplace_back();
  layer.forward_ms = 1;
  layer.backward_ms = 2;
  EXPECT_TRUE(ValidateProfile(profile).ok());
  profile.runtime_reserve_bytes = std::nan("");
  ExpectError(ValidateProfile(profile), absl::StatusCode::kInvalidArgument,
              "profile OPT-350/GH-96/mb1/tp4: runtime_reserve_bytes must be finite");
}

TEST(FidelityTest, StoredProfilesCarryTheirGpuTypesReserve) {
  SailorData opt350 = Data();  // one training config, as a LoadProfile request has
  opt350.num_all_layers.erase("GPT-Neo-2.7");
  auto imported = ProfilesFromSailorData(opt350, "", {"GH-96", "A100-40"}, 8);
  ASSERT_TRUE(imported.ok()) << imported.status();
  std::vector<std::shared_ptr<const ::oobleck::ModelProfile>> stored;
  for (::oobleck::ModelProfile& p : imported->profiles) {
    if (p.key.gpu_type == "GH-96") p.runtime_reserve_bytes = p.key.tp == 4 ? 4e9 : 3e9;
    stored.push_back(std::make_shared<const ::oobleck::ModelProfile>(std::move(p)));
  }
  const SailorData data = SailorDataFromProfiles(stored, "OPT-350");
  // One reserve per GPU type: the largest its profiles carry; A100-40's carry none.
  EXPECT_EQ(data.runtime_reserve_bytes.size(), 1u);
  EXPECT_EQ(data.runtime_reserve_bytes.at("GH-96"), 4e9);
}

TEST(FidelityTest, PlanInOneNodeUsesTheInNodeLink) {
  json doc = RunDoc("N2_D1");  // 2 stages of tp 4 on two nodes
  const auto across = EvaluateDoc(doc);
  ASSERT_TRUE(across.ok()) << across.status();
  for (auto& stage : doc["pipeline_list"][0]["tmp_per_stage"]) stage[0][1] = 2;
  const auto one_node = EvaluateDoc(doc);  // tp 2 + tp 2 on one node of 4
  ASSERT_TRUE(one_node.ok()) << one_node.status();
  // The in-node link (250 GB/s for 4 GH200s) beats the network's (92 GB/s for 4).
  EXPECT_LT(one_node->p2p_s, across->p2p_s);
}

TEST(FidelityTest, PlanNeedsWhatTheProfilesLack) {
  json doc = RunDoc("N2_D1");
  doc["pipeline_list"][0]["tmp_per_stage"][1][0][0][0][0] = "H100-80";
  ExpectError(EvaluateDoc(doc).status(), absl::StatusCode::kFailedPrecondition,
              "pipeline_list/0/tmp_per_stage/1/0", "GPU type \"H100-80\" has no profile");
  doc = RunDoc("N2_D1");
  doc["pipeline_list"][0]["tmp_per_stage"][0][0][1] = 3;
  ExpectError(EvaluateDoc(doc).status(), absl::StatusCode::kFailedPrecondition, "tmp_per_stage/0/0",
              "has no tp 3");
  doc = RunDoc("N2_D1");
  doc["mbs"] = 3;
  doc["gbs"] = 30;
  ExpectError(EvaluateDoc(doc).status(), absl::StatusCode::kFailedPrecondition, "tmp_per_stage/0/0",
              "has no micro-batch size 3");
  // 27 layers: a layer the model (and its profiles) lack.
  doc = RunDoc("N2_D1");
  doc["pipeline_list"][0]["layers_per_stage"][1].push_back(26);
  doc["model"] = "OPT-350";  // else no model of the data has 27 layers
  ExpectError(EvaluateDoc(doc).status(), absl::StatusCode::kInvalidArgument, "layers_per_stage",
              "covers 27 layers but OPT-350 has 26");
  // The plan names a model the data do not have.
  doc = RunDoc("N2_D1");
  doc["model"] = "OPT-13B";
  ExpectError(EvaluateDoc(doc).status(), absl::StatusCode::kFailedPrecondition, "model",
              "\"OPT-13B\" has no profile");
}

TEST(FidelityTest, RejectsMalformedPlans) {
  const auto expect_invalid = [](json doc, const std::string& field, const std::string& text) {
    ExpectError(SailorPlanFromJson(doc).status(), absl::StatusCode::kInvalidArgument, field, text);
  };
  json doc = RunDoc("N2_D1");
  doc["pipeline_list"][0]["layers_per_stage"][1].erase(0);  // layer 12 in no stage
  expect_invalid(doc, "layers_per_stage/1/0", "must be layer 12 (got 13)");
  doc = RunDoc("N2_D1");
  doc["pipeline_list"][0]["layers_per_stage"][1][0] = 11;  // layer 11 twice
  expect_invalid(doc, "layers_per_stage/1/0", "must be layer 12 (got 11)");
  doc = RunDoc("N8_D4");
  doc["pipeline_list"][0]["dp"][1] = 3;  // stages may differ in dp, but list what they say
  expect_invalid(doc, "pipeline_list/0/tmp_per_stage/1", "must list dp = 3 replicas");
  doc = RunDoc("N8_D4");
  doc["pipeline_list"][0]["tmp_per_stage"][0].erase(0);
  expect_invalid(doc, "pipeline_list/0/tmp_per_stage/0", "must list dp = 4 replicas");
  doc = RunDoc("N8_D4");
  doc["mbs"] = "8";
  expect_invalid(doc, "mbs", "must be an integer");
  doc = RunDoc("N8_D4");
  doc["gbs"] = -512;
  expect_invalid(doc, "gbs", "must be in [1, 2^30] (got -512)");
  doc = RunDoc("N8_D4");
  doc["gbs"] = 500;
  expect_invalid(doc, "gbs", "must be a multiple of mbs × dp = 32");
  doc = RunDoc("N8_D4");
  doc["real"] = -1.0;
  expect_invalid(doc, "real", "must be >= 0");
  doc = RunDoc("N8_D4");
  doc["pipeline_list"][0]["tmp_per_stage"][1][0][1] = 8;  // tp 8 on a node of 4
  expect_invalid(doc, "tmp_per_stage/1/0/1", "must be at most the GPUs of the replica's nodes (4)");
  doc = RunDoc("N8_D4");
  doc["pipeline_list"][0]["tmp_per_stage"][1][0][0][0][1] = "four";
  expect_invalid(doc, "tmp_per_stage/1/0/0/0/1", "must be an integer");
  doc = RunDoc("N8_D4");
  doc.erase("pipeline_list");
  expect_invalid(doc, "pipeline_list", "is required");
}

TEST(FidelityTest, RejectsMalformedData) {
  const auto expect_invalid = [](const std::map<std::string, json>& docs, const std::string& field,
                                 const std::string& text) {
    ExpectError(SailorDataFromJson(docs).status(), absl::StatusCode::kInvalidArgument, field, text);
  };
  auto docs = DataDocs();
  docs["profiles_tmp.json"]["OPT-350"]["GH-96"]["8"]["4"]["3"][0] = "fast";
  expect_invalid(docs, "profiles_tmp.json/OPT-350/GH-96/8/4/3/0", "must be a number");
  docs = DataDocs();
  docs["profiles_tmp.json"]["OPT-350"]["GH-96"]["8"]["4"]["3"][1] = -0.001;
  expect_invalid(docs, "profiles_tmp.json/OPT-350/GH-96/8/4/3/1", "must be >= 0");
  docs = DataDocs();
  docs["profiles_tmp.json"]["OPT-350"]["GH-96"]["8"]["4"].erase("5");  // a hole
  expect_invalid(docs, "profiles_tmp.json/OPT-350/GH-96/8/4", "names layer 25");
  docs = DataDocs();
  docs["profiles_tmp.json"]["OPT-350"]["GH-96"]["eight"] = json::object();
  expect_invalid(docs, "profiles_tmp.json/OPT-350/GH-96/eight", "non-negative integer");
  docs = DataDocs();
  docs["llm_info.json"]["OPT-350"]["4"]["2"].erase("params_bytes");
  expect_invalid(docs, "llm_info.json/OPT-350/4/2/params_bytes", "is required");
  docs = DataDocs();
  docs["llm_info.json"]["OPT-350"]["4"]["2"]["act_mem_bytes"] = -5;
  expect_invalid(docs, "llm_info.json/OPT-350/4/2/act_mem_bytes", "must be >= 0");
  docs = DataDocs();
  docs["llm_info.json"]["OPT-350"]["4"].erase("25");
  expect_invalid(docs, "llm_info.json/OPT-350/4", "num_all_layers 26");
  docs = DataDocs();
  docs["intra_node_bandwidths.json"]["GH-96"]["4"][1] = 0;
  expect_invalid(docs, "intra_node_bandwidths.json/GH-96/4/1", "must be > 0");
  docs = DataDocs();
  docs["multizone_bandwidths.json"]["us-central1-a"]["GH-96"]["4"] = json::array();
  expect_invalid(docs, "multizone_bandwidths.json/us-central1-a/GH-96/4", "JSON object");
  docs = DataDocs();
  docs["training_config_opt_350.json"]["num_all_layers"] = 0;
  expect_invalid(docs, "training_config_opt_350.json/num_all_layers", "(got 0)");
}

TEST(FidelityTest, MissingDataFilesAreNamed) {
  EXPECT_EQ(LoadSailorData(kData / "no-such-dir").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(LoadSailorPlan(kRuns / "plan_config_none.json").status().code(),
            absl::StatusCode::kNotFound);
  // The profile of a model with fewer layers than its sizes: never a silent zero.
  auto docs = DataDocs();
  for (auto& [mbs, by_tp] : docs["profiles_tmp.json"]["OPT-350"]["GH-96"].items()) {
    for (auto& [tp, layers] : by_tp.items()) layers.erase("25");
  }
  auto data = SailorDataFromJson(docs);
  ASSERT_TRUE(data.ok()) << data.status();
  auto plan = SailorPlanFromJson(RunDoc("N2_D1"));
  ASSERT_TRUE(plan.ok());
  ExpectError(EvaluateSailorPlan(*data, *plan).status(), absl::StatusCode::kFailedPrecondition,
              "tmp_per_stage/0/0", "the profile has 25 layers, llm_info 26");
}

}  // namespace
}  // namespace oobleck::fidelity
