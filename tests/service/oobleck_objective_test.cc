// Plan with objective "oobleck-instantiation" over a real channel: Instantiate's answer over
// the plan's templates, bound to nodes; and the requests Oobleck's semantics cannot mean.
#include <grpcpp/grpcpp.h>

#include <chrono>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "oobleck/planner/v1/planner.grpc.pb.h"
#include "tests/service/served_planner.h"

namespace oobleck::server {
namespace {

namespace pb = ::oobleck::planner::v1;
using ::testing::HasSubstr;

void AddTemplate(pb::InstantiateRequest* request, int nodes, int stages, double ms) {
  pb::TemplateShape* shape = request->add_templates();
  shape->set_num_nodes(nodes);
  shape->set_num_stages(stages);
  shape->set_iteration_time_ms(ms);
}

// A uniform 12-layer model on 1-GPU nodes whose profile measures the all-reduce across 1..8
// nodes (layer 0's is what Oobleck's formula adds).
class OobleckObjectiveTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(served_.Start().ok());
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
      (*layer->mutable_allreduce_in_node_ms())[1] = 0;
      for (int p = 1; p <= 8; ++p) (*layer->mutable_allreduce_across_nodes_ms())[p] = 0.5 * p;
    }
    pb::LoadProfileResponse loaded;
    grpc::ClientContext context;
    const grpc::Status status = served_.stub->LoadProfile(&context, load, &loaded);
    ASSERT_TRUE(status.ok()) << status.error_message();
  }

  static pb::PlanRequest Request(int nodes) {
    pb::PlanRequest request;
    request.set_model("uniform");
    request.set_microbatches(4);
    request.set_objective("oobleck-instantiation");
    pb::Cluster* cluster = request.mutable_cluster();
    cluster->set_inter_node_bytes_per_s(12.5e9);
    pb::NodeType* type = cluster->add_node_types();
    type->set_name("n");
    type->set_gpu_type("g1");
    type->set_gpus_per_node(1);
    type->set_gpu_memory_bytes(80e9);
    type->set_intra_node_bytes_per_s(1e11);
    type->set_count(nodes);
    request.set_min_nodes_per_pipeline(2);
    request.set_max_nodes_per_pipeline(4);
    request.add_global_batch(64);
    request.add_global_batch(7);
    return request;
  }

  grpc::Status Instantiate(const pb::InstantiateRequest& request,
                           pb::InstantiateResponse* response) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    return served_.stub->Instantiate(&context, request, response);
  }

  ServedPlanner served_;
};

TEST_F(OobleckObjectiveTest, PlanIsInstantiateOverTheTemplates) {
  const pb::PlanRequest request = Request(7);
  pb::PlanResponse plan;
  grpc::ClientContext plan_context;
  const grpc::Status status = served_.stub->Plan(&plan_context, request, &plan);
  ASSERT_TRUE(status.ok()) << status.error_message();

  // The same through Instantiate: the templates of 2..4 nodes, layer 0's all-reduce.
  pb::PlanTemplatesRequest templates_request;
  templates_request.set_model("uniform");
  templates_request.set_microbatches(4);
  *templates_request.mutable_cluster() = request.cluster();
  templates_request.set_min_nodes(2);
  templates_request.set_max_nodes(4);
  pb::PlanTemplatesResponse templates;
  grpc::ClientContext templates_context;
  ASSERT_TRUE(served_.stub->PlanTemplates(&templates_context, templates_request, &templates).ok());
  pb::InstantiateRequest instantiate;
  for (const pb::MixTemplate& mix : templates.results()) {
    ASSERT_TRUE(mix.feasible());
    AddTemplate(&instantiate, mix.template_().num_nodes(), mix.template_().stages_size(),
                mix.template_().iteration_time_ms());
  }
  instantiate.set_num_nodes(7);
  for (int p = 1; p <= 7; ++p) (*instantiate.mutable_allreduce_across_pipelines_ms())[p] = 0.5 * p;
  ASSERT_EQ(plan.sweep_size(), 2);
  for (const pb::BatchSizePlan& size : plan.sweep()) {
    SCOPED_TRACE(size.global_batch());
    instantiate.set_global_batch(size.global_batch());
    pb::InstantiateResponse expected;
    ASSERT_TRUE(Instantiate(instantiate, &expected).ok());
    ASSERT_TRUE(size.feasible()) << size.infeasible_reason();
    EXPECT_EQ(size.plan().iteration_time_ms(), expected.iteration_time_ms());
    EXPECT_EQ(size.plan().allreduce_ms(), expected.allreduce_ms());
    EXPECT_EQ(size.plan().pipelines_size(), expected.num_pipelines());
    EXPECT_EQ(size.optimality_gap(), 0);
    EXPECT_EQ(size.plan().idle_nodes_size(), 0);  // every node used
    int nodes = 0, batch = 0;
    for (const pb::PlannedPipeline& p : size.plan().pipelines()) {
      nodes += p.node_ids_size();
      batch += p.microbatches();
      EXPECT_EQ(p.time_ms(), p.template_().iteration_time_ms() * p.microbatches());
    }
    EXPECT_EQ(nodes, 7);
    EXPECT_EQ(batch, size.global_batch());
    if (size.global_batch() == 7) {  // Oobleck's data parallelism: 7 x 1 micro-batch
      EXPECT_GT(size.data_parallel_iteration_time_ms(), 0)
          << size.data_parallel_unavailable_reason();
    } else {  // 7 b = 64 has no solution
      EXPECT_THAT(size.data_parallel_unavailable_reason(), HasSubstr("cannot be split"));
    }
  }
}

TEST_F(OobleckObjectiveTest, RejectsWhatOobleckCannotMean) {
  pb::PlanResponse response;
  auto plan = [&](const pb::PlanRequest& request) {
    grpc::ClientContext context;
    return served_.stub->Plan(&context, request, &response);
  };
  pb::PlanRequest request = Request(7);
  request.set_fault_tolerance(1);
  grpc::Status status = plan(request);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("fault_tolerance must be 0 with objective"));
  request = Request(7);
  request.set_budget_per_hour(10);
  status = plan(request);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("budget_per_hour must be 0 with objective"));
  request = Request(7);
  *request.mutable_cluster()->add_node_types() = request.cluster().node_types(0);
  request.mutable_cluster()->mutable_node_types(1)->set_name("m");
  status = plan(request);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("needs nodes of one node type"));
  // 9 nodes in pipelines of 1..2 nodes are at least 5 pipelines: 3 micro-batches are too few.
  request = Request(9);
  request.set_min_nodes_per_pipeline(1);
  request.set_max_nodes_per_pipeline(2);
  request.clear_global_batch();
  request.add_global_batch(3);
  status = plan(request);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_THAT(status.error_message(), HasSubstr("global_batch"));
}

}  // namespace
}  // namespace oobleck::server
