// The Instantiate RPC over a real channel: Oobleck's instantiation and batch split, their
// errors (field paths, codes) and the call's deadline.
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <string>

#include "gmock/gmock.h"
#include "google/rpc/error_details.pb.h"
#include "google/rpc/status.pb.h"
#include "gtest/gtest.h"
#include "oobleck/planner/v1/planner.grpc.pb.h"
#include "tests/service/call_budget.h"
#include "tests/service/served_planner.h"

namespace oobleck::server {
namespace {

namespace pb = ::oobleck::planner::v1;
using ::testing::HasSubstr;
using Clock = std::chrono::steady_clock;

class InstantiateTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(served_.Start().ok()); }

  grpc::Status Call(const pb::InstantiateRequest& request, pb::InstantiateResponse* response,
                    std::chrono::milliseconds deadline = std::chrono::seconds(30)) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + deadline);
    return served_.stub->Instantiate(&context, request, response);
  }

  ServedPlanner served_;
};

void AddTemplate(pb::InstantiateRequest* request, int nodes, int stages, double ms) {
  pb::TemplateShape* shape = request->add_templates();
  shape->set_num_nodes(nodes);
  shape->set_num_stages(stages);
  shape->set_iteration_time_ms(ms);
}

// Oobleck's test_initialize_instantiator shape: templates of 2..5 nodes, 13 nodes, 512
// micro-batches.
pb::InstantiateRequest ThirteenNodes() {
  pb::InstantiateRequest request;
  for (int n = 2; n <= 5; ++n) AddTemplate(&request, n, 2 * n, 1000.0 / n + 10 * n);
  request.set_num_nodes(13);
  request.set_global_batch(512);
  for (int p = 1; p <= 13; ++p) (*request.mutable_allreduce_across_pipelines_ms())[p] = 2.0 * p;
  return request;
}

TEST_F(InstantiateTest, UsesEveryNodeAndTheWholeBatch) {
  const pb::InstantiateRequest request = ThirteenNodes();
  pb::InstantiateResponse response;
  const grpc::Status status = Call(request, &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  ASSERT_EQ(response.instances_size(), 4);
  ASSERT_EQ(response.microbatches_size(), 4);
  int nodes = 0, batch = 0, pipelines = 0;
  double pipeline_ms = 0;
  for (int t = 0; t < 4; ++t) {
    nodes += response.instances(t) * request.templates(t).num_nodes();
    batch += response.instances(t) * response.microbatches(t);
    pipelines += response.instances(t);
    if (response.instances(t) > 0) {
      pipeline_ms = std::max(pipeline_ms,
                             request.templates(t).iteration_time_ms() * response.microbatches(t));
    } else {
      EXPECT_EQ(response.microbatches(t), 0);
    }
  }
  EXPECT_EQ(nodes, 13);
  EXPECT_EQ(batch, 512);
  EXPECT_EQ(pipelines, response.num_pipelines());
  EXPECT_EQ(response.pipeline_time_ms(), pipeline_ms);
  EXPECT_EQ(response.allreduce_ms(), 2.0 * pipelines);
  EXPECT_EQ(response.iteration_time_ms(), pipeline_ms + 2.0 * pipelines);
  EXPECT_GT(response.planning_time_ms(), 0);
}

TEST_F(InstantiateTest, SplitsOverGivenInstances) {
  pb::InstantiateRequest request;
  AddTemplate(&request, 2, 1, 1.0);
  AddTemplate(&request, 2, 2, 3.0);
  request.set_global_batch(4);
  (*request.mutable_allreduce_across_pipelines_ms())[2] = 0.5;
  request.add_instances(1);
  request.add_instances(1);
  pb::InstantiateResponse response;
  const grpc::Status status = Call(request, &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_THAT(response.instances(), ::testing::ElementsAre(1, 1));
  EXPECT_THAT(response.microbatches(), ::testing::ElementsAre(3, 1));
  EXPECT_EQ(response.pipeline_time_ms(), 3.0);
  EXPECT_EQ(response.iteration_time_ms(), 3.5);
}

TEST_F(InstantiateTest, InvalidFieldIsNamedInTheMessageAndTheDetails) {
  pb::InstantiateRequest request = ThirteenNodes();
  request.mutable_templates(2)->set_iteration_time_ms(-1);
  pb::InstantiateResponse response;
  const grpc::Status status = Call(request, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("templates[2].iteration_time_ms must be"));
  google::rpc::Status details;
  ASSERT_TRUE(details.ParseFromString(status.error_details()));
  ASSERT_EQ(details.details_size(), 1);
  google::rpc::BadRequest bad_request;
  ASSERT_TRUE(details.details(0).UnpackTo(&bad_request));
  ASSERT_EQ(bad_request.field_violations_size(), 1);
  EXPECT_EQ(bad_request.field_violations(0).field(), "templates[2].iteration_time_ms");

  request = ThirteenNodes();
  request.add_instances(1);  // one count for four templates
  EXPECT_EQ(Call(request, &response).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  request = ThirteenNodes();
  request.clear_templates();
  EXPECT_EQ(Call(request, &response).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
}

TEST_F(InstantiateTest, InfeasibleRequestsAreFailedPreconditionAndSayWhy) {
  pb::InstantiateRequest request;
  AddTemplate(&request, 1, 1, 1.0);
  request.set_global_batch(3);
  (*request.mutable_allreduce_across_pipelines_ms())[2] = 0;
  request.add_instances(2);  // 2 b = 3
  pb::InstantiateResponse response;
  grpc::Status status = Call(request, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_THAT(status.error_message(), HasSubstr("one micro-batch count"));

  request = ThirteenNodes();
  request.mutable_allreduce_across_pipelines_ms()->clear();
  status = Call(request, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_THAT(status.error_message(), HasSubstr("allreduce_across_pipelines_ms has no entry"));

  request = ThirteenNodes();
  request.set_num_nodes(1);  // no template of 1 node
  status = Call(request, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_THAT(status.error_message(), HasSubstr("num_nodes = 1"));
}

TEST_F(InstantiateTest, TooManyNodesIsResourceExhausted) {
  pb::InstantiateRequest request = ThirteenNodes();
  request.set_num_nodes((1 << 16) + 1);
  pb::InstantiateResponse response;
  const grpc::Status status = Call(request, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(status.error_message(), HasSubstr("limit of 65536 nodes"));
}

TEST_F(InstantiateTest, DeadlineStopsALongInstantiation) {
  // Templates of 1..4 nodes with nearly equal throughput per node on 65536 nodes: the branch
  // and bound runs to its work limit (about a second), far past a 300 ms deadline. (The
  // deadline is long enough that receiving the 2^16-entry table is over before it, so
  // the CPU check after the call sees the search alone.)
  pb::InstantiateRequest request;
  for (int n = 1; n <= 4; ++n) AddTemplate(&request, n, n, 1000.0 / (n * (1 - 0.03 * n)));
  request.set_num_nodes(1 << 16);
  request.set_global_batch(1 << 20);
  for (int p = 1; p <= (1 << 16); ++p) {
    (*request.mutable_allreduce_across_pipelines_ms())[p] = 5 + 0.1 * p;
  }
  pb::InstantiateResponse response;
  const auto deadline = std::chrono::milliseconds(300);
  const auto start = Clock::now();
  const grpc::Status status = Call(request, &response, deadline);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED) << status.error_message();
  EXPECT_LT(Clock::now() - start, deadline + kDeadlineSlack);
  ExpectCpuStops();
}

}  // namespace
}  // namespace oobleck::server
