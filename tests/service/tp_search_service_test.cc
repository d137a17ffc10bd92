// Issue 27 item 4 over a real channel: with Sailor's OPT-350 GH200 profiles (tp 1, 2 and 4
// per micro-batch size) PlanTemplates chooses tensor-parallel stages where they are faster
// than the same profiles' tp = 1 data allows, says so in Stage.tensor_parallel, and a
// micro-batch size missing at a measured tp is FAILED_PRECONDITION naming microbatch_size.
#include <grpcpp/grpcpp.h>

#include <filesystem>
#include <string>

#include "core/file_reader.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "oobleck/planner/v1/planner.grpc.pb.h"
#include "tests/service/served_planner.h"

namespace oobleck::server {
namespace {

namespace pb = ::oobleck::planner::v1;
namespace fs = std::filesystem;
using ::testing::HasSubstr;

const fs::path kSailorDir = fs::path(OOBLECK_SOURCE_DIR) / "data" / "sailor";

std::string Text(const fs::path& path) { return *ReadRegularFile(path); }

// A cluster of GH200 nodes (4 GH-96 GPUs each, Clariden's links); the node type is returned.
pb::NodeType* AddGh200(pb::Cluster* cluster) {
  cluster->set_inter_node_bytes_per_s(25e9);
  pb::NodeType* gh200 = cluster->add_node_types();
  gh200->set_name("gh200");
  gh200->set_gpu_type("GH-96");
  gh200->set_gpus_per_node(4);
  gh200->set_gpu_memory_bytes(96e9);
  gh200->set_intra_node_bytes_per_s(150e9);
  return gh200;
}

class TpSearchServiceTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(served_.Start().ok()); }

  // OPT-350's GH-96 profiles stored as `model`, after `edit` changed profiles_tmp.json's
  // [micro-batch size][tp] table of OPT-350 on GH-96.
  void Load(const std::string& model, void (*edit)(nlohmann::json&)) {
    nlohmann::json profiles = nlohmann::json::parse(Text(kSailorDir / "profiles_tmp.json"));
    edit(profiles["OPT-350"]["GH-96"]);
    pb::LoadProfileRequest request;
    request.set_model(model);
    pb::SailorProfileFiles* files = request.mutable_sailor();
    files->set_profiles_json(profiles.dump());
    files->set_llm_info_json(Text(kSailorDir / "llm_info.json"));
    files->set_training_config_json(Text(kSailorDir / "training_config_opt_350.json"));
    files->add_gpu_types("GH-96");
    grpc::ClientContext context;
    pb::LoadProfileResponse response;
    const grpc::Status status = served_.stub->LoadProfile(&context, request, &response);
    ASSERT_TRUE(status.ok()) << status.error_message();
  }

  grpc::Status Plan(const std::string& model, int microbatch_size,
                    pb::PlanTemplatesResponse* response) {
    pb::PlanTemplatesRequest request;
    request.set_model(model);
    request.set_microbatch_size(microbatch_size);
    request.set_microbatches(2);
    AddGh200(request.mutable_cluster())->set_count(2);
    grpc::ClientContext context;
    return served_.stub->PlanTemplates(&context, request, response);
  }

  ServedPlanner served_;
};

TEST_F(TpSearchServiceTest, PicksTensorParallelStagesWhereTheyAreFaster) {
  Load("opt-350", [](nlohmann::json&) {});
  Load("opt-350-tp1", [](nlohmann::json& by_mbs) {
    for (auto& [mbs, by_tp] : by_mbs.items()) {
      for (const char* tp : {"2", "4"}) by_tp.erase(tp);
    }
  });
  pb::PlanTemplatesResponse with_tp, tp_one;
  grpc::Status status = Plan("opt-350", 1, &with_tp);
  ASSERT_TRUE(status.ok()) << status.error_message();
  status = Plan("opt-350-tp1", 1, &tp_one);
  ASSERT_TRUE(status.ok()) << status.error_message();
  ASSERT_EQ(with_tp.results_size(), 2);
  ASSERT_EQ(tp_one.results_size(), 2);
  int tensor_parallel = 0;
  for (int i = 0; i < 2; ++i) {
    const pb::PipelineTemplate& a = with_tp.results(i).template_();
    const pb::PipelineTemplate& b = tp_one.results(i).template_();
    ASSERT_TRUE(with_tp.results(i).feasible()) << with_tp.results(i).infeasible_reason();
    ASSERT_TRUE(tp_one.results(i).feasible()) << tp_one.results(i).infeasible_reason();
    // Sailor's tp = 1 profiles have no in-node all-reduce: one GPU per stage, tp unset.
    for (const pb::Stage& stage : b.stages()) {
      EXPECT_EQ(stage.gpus(), 1);
      EXPECT_EQ(stage.tensor_parallel(), 0);
    }
    for (const pb::Stage& stage : a.stages()) {
      EXPECT_THAT(stage.gpus(), ::testing::AnyOf(1, 2, 4));
      EXPECT_EQ(stage.tensor_parallel(), stage.gpus() > 1 ? stage.gpus() : 0);
      tensor_parallel += stage.tensor_parallel() > 1;
    }
    EXPECT_LT(a.iteration_time_ms(), b.iteration_time_ms()) << a.mix_label();
  }
  EXPECT_GT(tensor_parallel, 0);
}

TEST_F(TpSearchServiceTest, AMicroBatchSizeMissingAtAMeasuredTpIsNamed) {
  Load("opt-350-gap", [](nlohmann::json& by_mbs) { by_mbs["2"].erase("2"); });
  pb::PlanTemplatesResponse response;
  grpc::Status status = Plan("opt-350-gap", 2, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_THAT(status.error_message(),
              HasSubstr("microbatch_size 2: cluster.node_types[0] (GPU type \"GH-96\") has "
                        "profiles of model \"opt-350-gap\" at tp 2 for micro-batch sizes 1, 4, "
                        "8, 16, 32, 64 but not at 2"));
  // Other sizes still plan, with tp 2 where it was measured.
  status = Plan("opt-350-gap", 1, &response);
  EXPECT_TRUE(status.ok()) << status.error_message();
  // A size measured only at tp > 1 has no tp = 1 profile, as without tensor parallelism.
  status = Plan("opt-350-gap", 64, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_THAT(status.error_message(), HasSubstr("cluster.node_types[0].gpu_type"));
}

// A Plan over per-tp profiles, sent back to Evaluate as a job_plan: the same iteration time,
// and each stage's memory entry carries its tensor-parallel degree and the per-GPU bytes
// measured at it (what the template reported for a stage kept full).
TEST_F(TpSearchServiceTest, EvaluateOfATensorParallelPlanReportsEachStagesTp) {
  Load("opt-350", [](nlohmann::json&) {});
  pb::PlanRequest request;
  request.set_model("opt-350");
  request.set_microbatch_size(1);
  request.set_microbatches(2);
  request.add_global_batch(4);
  AddGh200(request.mutable_cluster());
  for (int i = 0; i < 2; ++i) {
    pb::Node* node = request.add_nodes();
    node->set_id("gh-" + std::to_string(i));
    node->set_node_type("gh200");
  }
  pb::PlanResponse planned;
  {
    grpc::ClientContext context;
    const grpc::Status status = served_.stub->Plan(&context, request, &planned);
    ASSERT_TRUE(status.ok()) << status.error_message();
  }
  pb::EvaluateRequest evaluate;
  *evaluate.mutable_job_plan()->mutable_request() = planned.request();
  *evaluate.mutable_job_plan()->mutable_plan() = planned.plan();
  pb::EvaluateResponse e;
  grpc::ClientContext context;
  const grpc::Status status = served_.stub->Evaluate(&context, evaluate, &e);
  ASSERT_TRUE(status.ok()) << status.error_message();
  const pb::ClusterPlan& plan = planned.plan();
  EXPECT_EQ(e.iteration_time_ms(), plan.iteration_time_ms());
  int tensor_parallel = 0;
  ASSERT_GT(e.memory_per_gpu_size(), 0);
  for (const pb::GpuMemoryUse& gpu : e.memory_per_gpu()) {
    const pb::PlannedPipeline& p = plan.pipelines(gpu.replica());
    const pb::Stage& stage = p.template_().stages(gpu.stage());
    EXPECT_EQ(gpu.tp(), stage.tensor_parallel() > 1 ? stage.tensor_parallel() : 1);
    tensor_parallel += gpu.tp() > 1;
    if (p.microbatches() >= p.template_().stages_size()) {
      EXPECT_NEAR(gpu.total_bytes(), stage.memory_bytes_per_gpu(), 1e-6 * gpu.total_bytes());
    }
  }
  EXPECT_GT(tensor_parallel, 0);
}

}  // namespace
}  // namespace oobleck::server
