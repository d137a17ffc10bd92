// Evaluate of our own plans over a real channel: a Plan or Replan answer's `request` and
// `plan` sent back as EvaluateRequest.job_plan get the figures that answer reported (bit for
// bit), their breakdown under each cost model and objective, and the memory per GPU of every
// stage; bad plans get the codes and field paths of docs/ERRORS.md#evaluate.
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "google/rpc/error_details.pb.h"
#include "google/rpc/status.pb.h"
#include "gtest/gtest.h"
#include "oobleck/planner/v1/planner.grpc.pb.h"
#include "tests/service/served_planner.h"
#include "tests/service/test_load_root.h"
#include "tests/service/three_type_request.h"

namespace oobleck::server {
namespace {

namespace pb = ::oobleck::planner::v1;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr char kExampleDir[] = OOBLECK_SOURCE_DIR "/examples/profiles/gpt2-xl/rtx4090";

// The BadRequest field path an INVALID_ARGUMENT carries ("" without one).
std::string BadRequestField(const grpc::Status& status) {
  google::rpc::Status details;
  if (!details.ParseFromString(status.error_details())) return "";
  for (const auto& any : details.details()) {
    google::rpc::BadRequest bad;
    if (any.UnpackTo(&bad) && bad.field_violations_size() == 1) {
      return bad.field_violations(0).field();
    }
  }
  return "";
}

pb::EvaluateRequest JobPlanRequest(const pb::PlanRequest& request, const pb::ClusterPlan& plan) {
  pb::EvaluateRequest evaluate;
  *evaluate.mutable_job_plan()->mutable_request() = request;
  *evaluate.mutable_job_plan()->mutable_plan() = plan;
  return evaluate;
}

class EvaluateJobPlanTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(served_.Start(options_).ok());
    const grpc::Status loaded = served_.LoadExampleProfile(kExampleDir);
    ASSERT_TRUE(loaded.ok()) << loaded.error_message();
  }

  pb::PlanResponse PlanOk(const pb::PlanRequest& request) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
    pb::PlanResponse response;
    const grpc::Status status = served_.stub->Plan(&context, request, &response);
    EXPECT_TRUE(status.ok()) << status.error_message();
    return response;
  }
  grpc::Status Evaluate(const pb::EvaluateRequest& request, pb::EvaluateResponse* response) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
    return served_.stub->Evaluate(&context, request, response);
  }
  pb::EvaluateResponse EvaluateOk(const pb::PlanRequest& request, const pb::ClusterPlan& plan) {
    pb::EvaluateResponse response;
    const grpc::Status status = Evaluate(JobPlanRequest(request, plan), &response);
    EXPECT_TRUE(status.ok()) << status.error_message();
    return response;
  }
  // The answer to a broken copy of a three-type plan's job_plan.
  grpc::Status EvaluateBroken(const std::function<void(pb::JobPlan*)>& breaks) {
    const pb::PlanResponse planned = PlanOk(testing::ThreeTypeRequest({64}));
    pb::EvaluateRequest request = JobPlanRequest(planned.request(), planned.plan());
    breaks(request.mutable_job_plan());
    pb::EvaluateResponse response;
    return Evaluate(request, &response);
  }

  const ServiceOptions options_ = WithTestLoadRoot();
  ServedPlanner served_;
};

// The stage costs of the slowest pipeline give its 1f1b time as M c_k + the fill and drain.
void ExpectOneFOneBBreakdown(const pb::ClusterPlan& plan, const pb::EvaluateResponse& e) {
  const pb::PlannedPipeline& slowest = plan.pipelines(e.slowest_pipeline());
  EXPECT_EQ(slowest.time_ms(), plan.pipeline_time_ms());
  EXPECT_EQ(e.microbatches(), slowest.microbatches());
  double sum = 0, slowest_stage = 0;
  for (const pb::Stage& s : slowest.template_().stages()) {
    sum += s.cost_ms();
    slowest_stage = std::max(slowest_stage, s.cost_ms());
  }
  EXPECT_NEAR(e.bubbles_ms(), sum - slowest_stage, 1e-9 * sum);
  EXPECT_NEAR(e.pipeline_ms() - e.bubbles_ms(), slowest.microbatches() * slowest_stage,
              1e-9 * e.pipeline_ms());
  EXPECT_GT(e.p2p_ms(), 0);
  EXPECT_LT(e.p2p_ms(), e.pipeline_ms());
}

TEST_F(EvaluateJobPlanTest, APlanAnswerEvaluatesToItsOwnFiguresBitForBit) {
  const pb::PlanResponse planned = PlanOk(testing::ThreeTypeRequest({64}));
  const pb::EvaluateResponse e = EvaluateOk(planned.request(), planned.plan());
  const pb::ClusterPlan& plan = planned.plan();
  EXPECT_EQ(e.iteration_time_ms(), plan.iteration_time_ms());
  EXPECT_EQ(e.pipeline_ms(), plan.pipeline_time_ms());
  EXPECT_EQ(e.sync_ms(), plan.allreduce_ms());
  EXPECT_EQ(e.model(), "gpt2-xl");
  EXPECT_EQ(e.cost_model(), "1f1b");
  EXPECT_EQ(e.objective(), "time");
  EXPECT_THAT(e.unmodelled_fields(), ElementsAre("update_ms", "memory_per_gpu.reserve_bytes"));
  EXPECT_EQ(e.update_ms(), 0);
  ExpectOneFOneBBreakdown(plan, e);
  // One entry per stage of every pipeline; a pipeline whose share keeps every stage full
  // holds what its template reports per stage.
  int stages = 0;
  double peak = 0;
  for (const pb::PlannedPipeline& p : plan.pipelines()) stages += p.template_().stages_size();
  ASSERT_EQ(e.memory_per_gpu_size(), stages);
  for (const pb::GpuMemoryUse& gpu : e.memory_per_gpu()) {
    const pb::PlannedPipeline& p = plan.pipelines(gpu.replica());
    const pb::Stage& stage = p.template_().stages(gpu.stage());
    EXPECT_EQ(gpu.node_id(), p.node_ids(stage.node_index()));
    EXPECT_EQ(gpu.gpus(), stage.gpus());
    EXPECT_EQ(gpu.gpu_type(), stage.node_type());  // the test's types are named after GPUs
    EXPECT_EQ(gpu.tp(), 1);
    EXPECT_EQ(gpu.reserve_bytes(), 0);
    EXPECT_EQ(gpu.total_bytes(), gpu.training_state_bytes() + gpu.activation_bytes());
    if (p.microbatches() >= p.template_().stages_size()) {
      EXPECT_NEAR(gpu.total_bytes(), stage.memory_bytes_per_gpu(), 1e-6 * gpu.total_bytes());
    }
    peak = std::max(peak, gpu.total_bytes());
  }
  EXPECT_EQ(e.peak_memory_bytes(), peak);
}

TEST_F(EvaluateJobPlanTest, AReplanAnswerEvaluatesToItsOwnFiguresBitForBit) {
  const pb::PlanResponse planned = PlanOk(testing::ThreeTypeRequest({64}));
  pb::ReplanRequest replan;
  *replan.mutable_request() = planned.request();
  *replan.mutable_plan() = planned.plan();
  replan.add_failed_node_ids(planned.plan().pipelines(0).node_ids(0));
  pb::ReplanResponse replanned;
  grpc::ClientContext context;
  const grpc::Status status = served_.stub->Replan(&context, replan, &replanned);
  ASSERT_TRUE(status.ok()) << status.error_message();
  const pb::EvaluateResponse e = EvaluateOk(replanned.request(), replanned.plan());
  EXPECT_EQ(e.iteration_time_ms(), replanned.plan().iteration_time_ms());
  EXPECT_EQ(e.pipeline_ms(), replanned.plan().pipeline_time_ms());
  EXPECT_EQ(e.sync_ms(), replanned.plan().allreduce_ms());
  ExpectOneFOneBBreakdown(replanned.plan(), e);
  // The plan before the event, evaluated, is the time Replan reported for it.
  EXPECT_EQ(EvaluateOk(planned.request(), planned.plan()).iteration_time_ms(),
            replanned.old_iteration_time_ms());
}

TEST_F(EvaluateJobPlanTest, UnderOobleckSosp23TheBubblesAreItsFillAndDrainAndNoTransfers) {
  pb::PlanRequest request = testing::ThreeTypeRequest({64});
  request.set_cost_model("oobleck-sosp23");
  request.set_microbatches(0);
  const pb::PlanResponse planned = PlanOk(request);
  const pb::EvaluateResponse e = EvaluateOk(planned.request(), planned.plan());
  EXPECT_EQ(e.iteration_time_ms(), planned.plan().iteration_time_ms());
  EXPECT_EQ(e.cost_model(), "oobleck-sosp23");
  EXPECT_THAT(e.unmodelled_fields(),
              ElementsAre("p2p_ms", "update_ms", "memory_per_gpu.reserve_bytes"));
  // T = Σ c + n_k c_k* + Σ_{s ≥ k*} c: the bubbles are the first and last terms.
  const pb::PlannedPipeline& slowest = planned.plan().pipelines(e.slowest_pipeline());
  std::vector<double> c;
  for (const pb::Stage& s : slowest.template_().stages()) c.push_back(s.cost_ms());
  const int S = static_cast<int>(c.size());
  int k = 0;
  for (int s = 1; s < S; ++s) k = c[s] >= c[k] ? s : k;
  double fill_drain = 2 * c[k];  // Oobleck's c + 2c + c for one stage
  if (S > 1) {
    fill_drain = 0;
    for (int s = 0; s < S; ++s) fill_drain += c[s] + (s >= k ? c[s] : 0);
  }
  EXPECT_NEAR(e.bubbles_ms(), fill_drain, 1e-9 * fill_drain);
}

// A uniform 12-layer model on 1-GPU nodes whose profile measures the all-reduce across
// pipelines (layer 0's is what Oobleck's formula adds).
pb::LoadProfileRequest UniformProfile() {
  pb::LoadProfileRequest load;
  load.set_model("uniform");
  load.set_gpu_type("g1");
  load.set_microbatch_size(1);
  for (int l = 0; l < 12; ++l) {
    pb::LayerProfile* layer = load.mutable_layers()->add_layers();
    layer->set_forward_ms(1 + l % 3);
    layer->set_backward_ms(2 + l % 2);
    layer->set_param_bytes(1e6);
    layer->set_activation_bytes(1e5);
    for (int p = 1; p <= 8; ++p) (*layer->mutable_allreduce_across_nodes_ms())[p] = 0.5 * p;
  }
  return load;
}

TEST_F(EvaluateJobPlanTest, UnderOobleckInstantiationTheTimesAreOobleckFormula) {
  pb::LoadProfileResponse loaded;
  grpc::ClientContext context;
  ASSERT_TRUE(served_.stub->LoadProfile(&context, UniformProfile(), &loaded).ok());
  pb::PlanRequest request;
  request.set_model("uniform");
  request.set_microbatches(4);
  request.set_objective("oobleck-instantiation");
  request.mutable_cluster()->set_inter_node_bytes_per_s(12.5e9);
  pb::NodeType* type = request.mutable_cluster()->add_node_types();
  type->set_name("n");
  type->set_gpu_type("g1");
  type->set_gpus_per_node(1);
  type->set_gpu_memory_bytes(1e9);
  type->set_intra_node_bytes_per_s(1e10);
  type->set_count(7);
  request.add_global_batch(60);
  request.set_max_nodes_per_pipeline(4);
  const pb::PlanResponse planned = PlanOk(request);
  const pb::EvaluateResponse e = EvaluateOk(planned.request(), planned.plan());
  EXPECT_EQ(e.iteration_time_ms(), planned.plan().iteration_time_ms());
  EXPECT_EQ(e.pipeline_ms(), planned.plan().pipeline_time_ms());
  EXPECT_EQ(e.sync_ms(), planned.plan().allreduce_ms());
  EXPECT_EQ(e.sync_ms(), 0.5 * planned.plan().pipelines_size());  // layer 0's, measured
  EXPECT_EQ(e.objective(), "oobleck-instantiation");
  EXPECT_THAT(e.unmodelled_fields(),
              ElementsAre("bubbles_ms", "p2p_ms", "update_ms", "memory_per_gpu.reserve_bytes"));
  // The same plan timed as Replan times it (objective "time"): our formula, another figure.
  pb::PlanRequest as_time = planned.request();
  as_time.set_objective("time");
  const pb::EvaluateResponse ours = EvaluateOk(as_time, planned.plan());
  EXPECT_NE(ours.iteration_time_ms(), e.iteration_time_ms());
  EXPECT_THAT(ours.unmodelled_fields(), ElementsAre("update_ms", "memory_per_gpu.reserve_bytes"));
  // The same model whose profile measures no all-reduce across several pipelines: Oobleck's
  // formula has no all-reduce for the plan's pipeline count, which is named, never read as 0.
  pb::LoadProfileRequest unmeasured = UniformProfile();
  unmeasured.set_model("uniform-unmeasured");
  for (pb::LayerProfile& layer : *unmeasured.mutable_layers()->mutable_layers()) {
    layer.mutable_allreduce_across_nodes_ms()->clear();
  }
  grpc::ClientContext load_context;
  ASSERT_TRUE(served_.stub->LoadProfile(&load_context, unmeasured, &loaded).ok());
  ASSERT_GE(planned.plan().pipelines_size(), 2);
  pb::PlanRequest other = planned.request();
  other.set_model("uniform-unmeasured");
  pb::EvaluateResponse response;
  const grpc::Status status = Evaluate(JobPlanRequest(other, planned.plan()), &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_THAT(status.error_message(), HasSubstr("job_plan.plan.pipelines: "));
  EXPECT_THAT(status.error_message(), HasSubstr("layers[0].allreduce_across_nodes_ms"));
}

TEST_F(EvaluateJobPlanTest, BadPlansNameTheFieldPath) {
  struct Case {
    std::string name;
    std::function<void(pb::JobPlan*)> breaks;
    grpc::StatusCode code;
    std::string field;    // the BadRequest path (INVALID_ARGUMENT only)
    std::string message;  // a piece of the message
  };
  const auto invalid = grpc::StatusCode::INVALID_ARGUMENT;
  const std::vector<Case> cases = {
      {"node id not in the cluster",
       [](pb::JobPlan* j) { j->mutable_plan()->mutable_pipelines(0)->set_node_ids(0, "zzz"); },
       invalid, "job_plan.plan.pipelines[0].node_ids[0]", "\"zzz\" is not a node of the cluster"},
      {"layers not a partition",
       [](pb::JobPlan* j) {
         pb::PipelineTemplate* t = j->mutable_plan()->mutable_pipelines(0)->mutable_template_();
         t->mutable_stages(t->stages_size() - 1)->set_layer_end(7);
       },
       invalid, "job_plan.plan.pipelines[0].template.stages[", "has layers"},
      {"node of the wrong type",
       [](pb::JobPlan* j) {
         pb::PlannedPipeline* p = j->mutable_plan()->mutable_pipelines(0);
         const std::string type = p->template_().node_order(0);
         for (const pb::Node& n : j->request().nodes()) {
           if (n.node_type() != type) {
             p->set_node_ids(0, n.id());
             break;
           }
         }
       },
       invalid, "job_plan.plan.pipelines[0].node_ids[0]", "but the template has a"},
      {"node type without a profile",
       [](pb::JobPlan* j) {
         pb::NodeType* t = j->mutable_request()->mutable_cluster()->mutable_node_types(2);
         t->set_gpu_type("h100");
       },
       grpc::StatusCode::NOT_FOUND, "", "job_plan.request.cluster.node_types[2].gpu_type"},
      {"answer of an older server",
       [](pb::JobPlan* j) {
         j->mutable_plan()->mutable_pipelines(0)->mutable_template_()->clear_microbatches();
       },
       grpc::StatusCode::FAILED_PRECONDITION, "",
       "job_plan.plan.pipelines[0].template.microbatches is not set"},
      {"plan of another request", [](pb::JobPlan* j) { j->mutable_request()->set_microbatches(8); },
       invalid, "job_plan.plan.pipelines[0].template.microbatches", "made for another request"},
      {"no plan", [](pb::JobPlan* j) { j->clear_plan(); }, invalid, "job_plan.plan", "is required"},
      {"no pipelines", [](pb::JobPlan* j) { j->mutable_plan()->clear_pipelines(); }, invalid,
       "job_plan.plan.pipelines", "must not be empty"},
      {"bad objective", [](pb::JobPlan* j) { j->mutable_request()->set_objective("fast"); },
       invalid, "job_plan.request.objective", "\"fast\""},
  };
  for (const Case& c : cases) {
    const grpc::Status status = EvaluateBroken(c.breaks);
    EXPECT_EQ(status.error_code(), c.code) << c.name << ": " << status.error_message();
    EXPECT_THAT(status.error_message(), HasSubstr(c.message)) << c.name;
    if (!c.field.empty()) {
      EXPECT_THAT(BadRequestField(status), HasSubstr(c.field)) << c.name;
    }
  }
  // Sailor's fields do not go with a plan of ours.
  const pb::PlanResponse planned = PlanOk(testing::ThreeTypeRequest({64}));
  pb::EvaluateRequest request = JobPlanRequest(planned.request(), planned.plan());
  request.set_model("gpt2-xl");
  pb::EvaluateResponse response;
  grpc::Status status = Evaluate(request, &response);
  EXPECT_EQ(status.error_code(), invalid);
  EXPECT_EQ(BadRequestField(status), "model");
  request.clear_model();
  request.mutable_network();
  status = Evaluate(request, &response);
  EXPECT_EQ(status.error_code(), invalid);
  EXPECT_EQ(BadRequestField(status), "network");
}

}  // namespace
}  // namespace oobleck::server
