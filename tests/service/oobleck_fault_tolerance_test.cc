// PlanRequest.fault_tolerance_rule = FAULT_TOLERANCE_OOBLECK (docs/COST_MODEL.md#fault-tolerance)
// in Plan and Replan, through the real service on 127.0.0.1:0 and a real channel.
#include <grpcpp/grpcpp.h>

#include <chrono>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "oobleck/planner/v1/planner.grpc.pb.h"
#include "tests/service/served_planner.h"
#include "tests/service/test_load_root.h"
#include "tests/service/three_type_request.h"

namespace oobleck::server {
namespace {

namespace pb = ::oobleck::planner::v1;
using ::testing::HasSubstr;

constexpr char kExampleDir[] = OOBLECK_SOURCE_DIR "/examples/profiles/gpt2-xl/rtx4090";

// GPT-2 XL on `nodes` RTX 4090 nodes of 2 GPUs, pipelines of at least 2 nodes, Oobleck's
// f = 2.
pb::PlanRequest OobleckRequest(int nodes) {
  pb::PlanRequest request;
  request.set_model("gpt2-xl");
  request.set_microbatches(16);
  request.set_missing_allreduce_in_node(pb::MISSING_ALLREDUCE_RING);
  request.set_min_nodes_per_pipeline(2);
  request.set_max_nodes_per_pipeline(nodes);
  request.set_fault_tolerance(2);
  request.set_fault_tolerance_rule(pb::FAULT_TOLERANCE_OOBLECK);
  request.add_global_batch(32);
  pb::Cluster* cluster = request.mutable_cluster();
  cluster->set_inter_node_bytes_per_s(12.5e9);
  *cluster->add_node_types() = testing::Type("rtx4090", 24, 1);
  for (int k = 0; k < nodes; ++k) {
    pb::Node* node = request.add_nodes();
    node->set_id(absl::StrCat("10.0.0.", k + 1));
    node->set_node_type("rtx4090");
  }
  return request;
}

class OobleckFaultToleranceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const absl::Status started = served_.Start(WithTestLoadRoot());
    ASSERT_TRUE(started.ok()) << started;
    const grpc::Status status = served_.LoadExampleProfile(kExampleDir);
    ASSERT_TRUE(status.ok()) << status.error_message();
  }

  grpc::Status Plan(const pb::PlanRequest& request, pb::PlanResponse* response) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
    return served_.stub->Plan(&context, request, response);
  }
  grpc::Status Replan(const pb::ReplanRequest& request, pb::ReplanResponse* response) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
    return served_.stub->Replan(&context, request, response);
  }

  ServedPlanner served_;
};

void ExpectPipelinesAtMost(const pb::ClusterPlan& plan, int nodes) {
  ASSERT_GE(plan.pipelines_size(), 1);
  for (const pb::PlannedPipeline& pipeline : plan.pipelines()) {
    EXPECT_LE(pipeline.node_ids_size(), nodes);
  }
}

// 4 nodes, f = 2: Oobleck's rule caps pipelines at 2 nodes (f + 1 = 3 pipelines of at
// least 2 nodes would not fit).
TEST_F(OobleckFaultToleranceTest, PlanCapsPipelinesAtNMinusF) {
  pb::PlanResponse planned;
  const grpc::Status status = Plan(OobleckRequest(4), &planned);
  ASSERT_TRUE(status.ok()) << status.error_code() << ": " << status.error_message();
  ExpectPipelinesAtMost(planned.plan(), 2);
  EXPECT_EQ(planned.request().fault_tolerance_rule(), pb::FAULT_TOLERANCE_OOBLECK);
}

TEST_F(OobleckFaultToleranceTest, PlanFailsWhenNothingFitsTheCap) {
  pb::PlanRequest request = OobleckRequest(4);
  request.set_fault_tolerance(3);  // N - f = 1 < min_nodes_per_pipeline = 2
  pb::PlanResponse planned;
  const grpc::Status status = Plan(request, &planned);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_THAT(status.error_message(), HasSubstr("caps pipelines at N - f = 4 - 3 = 1 node(s)"));
  EXPECT_THAT(status.error_message(), HasSubstr("min_nodes_per_pipeline = 2"));
}

TEST_F(OobleckFaultToleranceTest, UnknownRuleIsInvalidArgument) {
  pb::PlanRequest request = OobleckRequest(4);
  request.set_fault_tolerance_rule(static_cast<pb::FaultToleranceRule>(7));
  pb::PlanResponse planned;
  const grpc::Status plan_status = Plan(request, &planned);
  EXPECT_EQ(plan_status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(plan_status.error_message(), HasSubstr("fault_tolerance_rule"));
  EXPECT_THAT(plan_status.error_message(), HasSubstr("(got 7)"));

  pb::PlanResponse valid;
  ASSERT_TRUE(Plan(OobleckRequest(4), &valid).ok());
  pb::ReplanRequest replan;
  *replan.mutable_request() = valid.request();
  replan.mutable_request()->set_fault_tolerance_rule(static_cast<pb::FaultToleranceRule>(7));
  *replan.mutable_plan() = valid.plan();
  pb::ReplanResponse replanned;
  const grpc::Status replan_status = Replan(replan, &replanned);
  EXPECT_EQ(replan_status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(replan_status.error_message(), HasSubstr("request.fault_tolerance_rule"));
}

// Replan reads N after the event: 5 survivors of 6 nodes, f = 2, cap 3; then 3 survivors
// leave N - f = 1 < 2 nodes, so f drops to 1 (cap 2) and degraded_reason says so.
TEST_F(OobleckFaultToleranceTest, ReplanCapsTheSurvivorsPipelines) {
  pb::PlanResponse planned;
  const grpc::Status status = Plan(OobleckRequest(6), &planned);
  ASSERT_TRUE(status.ok()) << status.error_message();
  ExpectPipelinesAtMost(planned.plan(), 4);
  pb::ReplanRequest replan;
  *replan.mutable_request() = planned.request();
  *replan.mutable_plan() = planned.plan();
  replan.add_failed_node_ids(planned.plan().pipelines(0).node_ids(0));
  pb::ReplanResponse first;
  grpc::Status replanned = Replan(replan, &first);
  ASSERT_TRUE(replanned.ok()) << replanned.error_message();
  ExpectPipelinesAtMost(first.plan(), 3);
  EXPECT_TRUE(first.degraded_reason().empty()) << first.degraded_reason();

  // Two nodes of the first pipeline fail: the other pipelines hold every layer.
  pb::ReplanRequest again;
  *again.mutable_request() = first.request();
  *again.mutable_plan() = first.plan();
  ASSERT_GE(first.plan().pipelines_size(), 2);
  again.add_failed_node_ids(first.plan().pipelines(0).node_ids(0));
  again.add_failed_node_ids(first.plan().pipelines(0).node_ids(1));
  pb::ReplanResponse second;
  replanned = Replan(again, &second);
  ASSERT_TRUE(replanned.ok()) << replanned.error_message();
  ExpectPipelinesAtMost(second.plan(), 2);
  EXPECT_THAT(second.degraded_reason(),
              HasSubstr("caps pipelines at N - f = 3 - 2 = 1 node(s), fewer than "
                        "min_nodes_per_pipeline = 2, so the plan keeps f = 1"));
}

}  // namespace
}  // namespace oobleck::server
