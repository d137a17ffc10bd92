// Replan with fault_tolerance >= 1 on clusters of many node types (the f-guarantee's count
// of the most pipelines the survivors fit), through the real service on 127.0.0.1:0 and a
// real channel.
#include <grpcpp/create_channel.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/security/credentials.h>

#include <chrono>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "core/profile_catalog.h"
#include "core/template_planner.h"
#include "gtest/gtest.h"
#include "oobleck/planner/v1/planner.grpc.pb.h"
#include "server/planner_server.h"
#include "server/planner_service.h"
#include "tests/service/served_planner.h"
#include "tests/service/test_load_root.h"
#include "tests/service/three_type_request.h"

namespace oobleck::server {
namespace {

namespace pb = ::oobleck::planner::v1;

constexpr char kExampleDir[] = OOBLECK_SOURCE_DIR "/examples/profiles/gpt2-xl/rtx4090";

// GPT-2 XL on `types` node types of 2-GPU nodes (speeds and memory spread around the
// measured RTX 4090), `per_type` nodes of each, global batch 128, fault_tolerance 1.
pb::PlanRequest FleetRequest(int types, int per_type) {
  pb::PlanRequest request;
  request.set_model("gpt2-xl");
  request.set_microbatches(16);
  request.set_missing_allreduce_in_node(pb::MISSING_ALLREDUCE_RING);
  request.set_fault_tolerance(1);
  request.add_global_batch(128);
  pb::Cluster* cluster = request.mutable_cluster();
  cluster->set_inter_node_bytes_per_s(12.5e9);
  for (int t = 0; t < types; ++t) {
    const std::string name = t == 0 ? "rtx4090" : absl::StrCat("gpu", t);
    *cluster->add_node_types() = testing::Type(name, 16 + 2 * t, t == 0 ? 1 : 1.0 / (1 + t));
    for (int k = 0; k < per_type; ++k) {
      pb::Node* node = request.add_nodes();
      node->set_id(absl::StrCat("n", t, "-", k));
      node->set_node_type(name);
    }
  }
  return request;
}

class ReplanFaultToleranceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const absl::Status started = served_.Start(WithTestLoadRoot());
    ASSERT_TRUE(started.ok()) << started;
    const grpc::Status status = served_.LoadExampleProfile(kExampleDir);
    ASSERT_TRUE(status.ok()) << status.error_message();
  }

  // Plan of the fleet, then Replan of the failure of one node: both OK, and the new plan
  // keeps two pipelines (f = 1 is not degraded: the survivors fit far more).
  void PlanThenReplanOneFailure(int types, int per_type) {
    SCOPED_TRACE(absl::StrCat(types, " types x ", per_type, " nodes"));
    const pb::PlanRequest request = FleetRequest(types, per_type);
    pb::PlanResponse planned;
    {
      grpc::ClientContext context;
      context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(120));
      const grpc::Status status = served_.stub->Plan(&context, request, &planned);
      ASSERT_TRUE(status.ok()) << status.error_message();
    }
    ASSERT_GE(planned.plan().pipelines_size(), 2);
    pb::ReplanRequest replan;
    *replan.mutable_request() = planned.request();
    *replan.mutable_plan() = planned.plan();
    replan.add_failed_node_ids(planned.plan().pipelines(0).node_ids(0));
    pb::ReplanResponse replanned;
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(120));
    const grpc::Status status = served_.stub->Replan(&context, replan, &replanned);
    ASSERT_TRUE(status.ok()) << status.error_code() << ": " << status.error_message();
    EXPECT_GE(replanned.plan().pipelines_size(), 2);
    EXPECT_GT(replanned.plan().iteration_time_ms(), 0);
    EXPECT_TRUE(replanned.degraded_reason().empty()) << replanned.degraded_reason();
  }

  ServedPlanner served_;
};

// The clusters: the count once used the node-count DP, whose prod(n_t + 1) states
// exceed its bound with 8 types of 4 nodes (RESOURCE_EXHAUSTED "... node-count states").
TEST_F(ReplanFaultToleranceTest, EightTypesOfFourNodes) { PlanThenReplanOneFailure(8, 4); }
TEST_F(ReplanFaultToleranceTest, FourTypesOf64Nodes) { PlanThenReplanOneFailure(4, 64); }
TEST_F(ReplanFaultToleranceTest, EightTypesOf512Nodes) { PlanThenReplanOneFailure(8, 512); }
TEST_F(ReplanFaultToleranceTest, TwoTypesOf2048Nodes) { PlanThenReplanOneFailure(2, 2048); }

}  // namespace
}  // namespace oobleck::server
