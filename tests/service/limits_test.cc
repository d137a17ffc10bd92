// Request limits: the search gate (--max_concurrent_searches) and the per-request size
// limits, alone and through a real channel.
#include <grpcpp/create_channel.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/security/credentials.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "core/profile.h"
#include "core/profile_catalog.h"
#include "core/template_planner.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "oobleck/planner/v1/planner.grpc.pb.h"
#include "server/planner_server.h"
#include "server/planner_service.h"
#include "server/request_limits.h"
#include "server/search_gate.h"

namespace oobleck::server {
namespace {

namespace pb = ::oobleck::planner::v1;
using ::testing::AllOf;
using ::testing::HasSubstr;

constexpr char kExampleDir[] = OOBLECK_SOURCE_DIR "/examples/profiles/gpt2-xl/rtx4090";
constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

TEST(SearchGateTest, AdmitsUpToTheLimitThenRejectsNamingIt) {
  SearchGate gate(2, absl::Seconds(10));
  auto first = gate.Acquire(absl::InfiniteFuture(), {});
  auto second = gate.Acquire(absl::InfiniteFuture(), {});
  ASSERT_TRUE(first.ok() && second.ok());
  EXPECT_EQ(gate.in_use(), 2);

  const absl::Time start = absl::Now();
  auto third = gate.Acquire(start + absl::Milliseconds(100), {});
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(100));
  EXPECT_EQ(third.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(third.status().message(), HasSubstr("--max_concurrent_searches=2"));
  EXPECT_EQ(gate.rejected(), 1);

  *first = SearchGate::Slot();  // releases
  EXPECT_EQ(gate.in_use(), 1);
  EXPECT_TRUE(gate.Acquire(absl::Now(), {}).ok()) << "a free slot is taken without waiting";
}

TEST(SearchGateTest, WaiterGetsTheSlotWhenItFrees) {
  SearchGate gate(1, absl::Seconds(10));
  auto held = gate.Acquire(absl::InfiniteFuture(), {});
  ASSERT_TRUE(held.ok());
  std::thread releaser([&held] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    *held = SearchGate::Slot();
  });
  auto waited = gate.Acquire(absl::Now() + absl::Seconds(10), {});
  releaser.join();
  EXPECT_TRUE(waited.ok()) << waited.status();
}

TEST(SearchGateTest, CancelledWaiterLeaves) {
  SearchGate gate(1, absl::Seconds(10));
  auto held = gate.Acquire(absl::InfiniteFuture(), {});
  ASSERT_TRUE(held.ok());
  auto cancelled = gate.Acquire(absl::InfiniteFuture(), [] { return true; });
  EXPECT_EQ(cancelled.status().code(), absl::StatusCode::kCancelled);
}

TEST(SearchGateTest, WaitWithoutDeadlineIsBounded) {
  SearchGate gate(1, absl::Milliseconds(60));
  auto held = gate.Acquire(absl::InfiniteFuture(), {});
  ASSERT_TRUE(held.ok());
  EXPECT_EQ(gate.Acquire(absl::InfiniteFuture(), {}).status().code(),
            absl::StatusCode::kResourceExhausted);
}

pb::PlanTemplatesRequest SmallRequest() {
  pb::PlanTemplatesRequest request;
  request.set_model("gpt2-xl");
  request.set_cost_model("oobleck-sosp23");
  pb::NodeType* type = request.mutable_cluster()->add_node_types();
  type->set_name("rtx4090");
  type->set_gpu_type("rtx4090");
  type->set_gpus_per_node(1);
  type->set_gpu_memory_bytes(24 * kGiB);
  type->set_intra_node_bytes_per_s(25e9);
  type->set_count(2);
  request.mutable_cluster()->set_inter_node_bytes_per_s(12.5e9);
  return request;
}

class LimitsServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<ModelProfile> profile =
        LoadOobleckProfileDir(kExampleDir, "gpt2-xl", "rtx4090", 1);
    ASSERT_TRUE(profile.ok()) << profile.status();
    ASSERT_TRUE(catalog_.Put(*std::move(profile), false).ok());
    ServiceOptions options;
    options.search_gate = &gate_;
    service_ = std::make_unique<PlannerService>(&catalog_, &cache_, 1, options);
    auto running = StartPlannerServer("127.0.0.1:0", service_.get());
    ASSERT_TRUE(running.ok()) << running.status();
    running_ = *std::move(running);
    stub_ = pb::Planner::NewStub(
        grpc::CreateChannel(running_.address, grpc::InsecureChannelCredentials()));
  }
  void TearDown() override {
    if (running_.server) running_.server->Shutdown();
  }

  grpc::Status Plan(const pb::PlanTemplatesRequest& request, std::chrono::milliseconds timeout,
                    pb::PlanTemplatesResponse* response) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + timeout);
    return stub_->PlanTemplates(&context, request, response);
  }

  ProfileCatalog catalog_;
  TemplateCache cache_{16 << 20};
  SearchGate gate_{1, absl::Seconds(30)};
  std::unique_ptr<PlannerService> service_;
  RunningServer running_;
  std::unique_ptr<pb::Planner::Stub> stub_;
};

TEST_F(LimitsServiceTest, BusySearchSlotsGiveResourceExhaustedBeforeTheDeadline) {
  // The only slot is taken (as by a huge search) for the whole call.
  auto held = gate_.Acquire(absl::InfiniteFuture(), {});
  ASSERT_TRUE(held.ok());
  pb::PlanTemplatesResponse response;
  const auto start = std::chrono::steady_clock::now();
  grpc::Status status = Plan(SmallRequest(), std::chrono::milliseconds(500), &response);
  const auto elapsed = std::chrono::steady_clock::now() - start;
  EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << status.error_message();
  EXPECT_THAT(status.error_message(), HasSubstr("--max_concurrent_searches=1"));
  EXPECT_LT(elapsed, std::chrono::milliseconds(500));

  *held = SearchGate::Slot();
  status = Plan(SmallRequest(), std::chrono::seconds(30), &response);
  EXPECT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(response.results_size(), 2);
  EXPECT_EQ(gate_.in_use(), 0) << "the slot is released after the call";
}

TEST_F(LimitsServiceTest, CachedAnswersNeedNoSlot) {
  pb::PlanTemplatesResponse response;
  ASSERT_TRUE(Plan(SmallRequest(), std::chrono::seconds(30), &response).ok());
  // Every slot busy (as with a huge search running): the same request is answered from
  // the cache at once instead of waiting for a slot.
  auto held = gate_.Acquire(absl::InfiniteFuture(), {});
  ASSERT_TRUE(held.ok());
  grpc::Status status = Plan(SmallRequest(), std::chrono::seconds(5), &response);
  EXPECT_TRUE(status.ok()) << status.error_message();
  for (const pb::MixTemplate& r : response.results()) EXPECT_TRUE(r.cache_hit());
  EXPECT_EQ(gate_.rejected(), 0);
}

TEST_F(LimitsServiceTest, InvalidRequestsAreRejectedWithoutASlot) {
  auto held = gate_.Acquire(absl::InfiniteFuture(), {});
  ASSERT_TRUE(held.ok());
  pb::PlanTemplatesRequest request = SmallRequest();
  request.mutable_cluster()->mutable_node_types(0)->set_gpus_per_node(0);
  pb::PlanTemplatesResponse response;
  EXPECT_EQ(Plan(request, std::chrono::seconds(30), &response).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
}

TEST_F(LimitsServiceTest, TooManyNodeTypesIsResourceExhaustedNamingTheLimit) {
  pb::PlanTemplatesRequest request = SmallRequest();
  for (int i = 1; i <= kMaxNodeTypesPerRequest; ++i) {
    pb::NodeType* type = request.mutable_cluster()->add_node_types();
    *type = request.cluster().node_types(0);
    type->set_name("type" + std::to_string(i));
  }
  pb::PlanTemplatesResponse response;
  grpc::Status status = Plan(request, std::chrono::seconds(30), &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(status.error_message(),
              AllOf(HasSubstr("257 entries"), HasSubstr("limit of 256 node types")));
}

TEST_F(LimitsServiceTest, TooManyNodesIsResourceExhaustedNamingTheLimit) {
  pb::PlanTemplatesRequest request = SmallRequest();
  request.mutable_cluster()->mutable_node_types(0)->set_count(kMaxNodesPerRequest + 1);
  request.set_max_nodes(1);
  pb::PlanTemplatesResponse response;
  grpc::Status status = Plan(request, std::chrono::seconds(30), &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(status.error_message(), HasSubstr("nodes per request"));
}

TEST_F(LimitsServiceTest, TooManyLayersIsResourceExhaustedNamingTheLimit) {
  pb::LoadProfileRequest request;
  request.set_model("huge");
  request.set_gpu_type("rtx4090");
  request.set_microbatch_size(1);
  for (int i = 0; i <= kMaxLayersPerProfile; ++i) {
    pb::LayerProfile* layer = request.mutable_layers()->add_layers();
    layer->set_forward_ms(1);
    layer->set_backward_ms(2);
  }
  grpc::ClientContext context;
  pb::LoadProfileResponse response;
  grpc::Status status = stub_->LoadProfile(&context, request, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(
      status.error_message(),
      AllOf(HasSubstr(absl::StrCat(kMaxLayersPerProfile + 1, " layers")),
            HasSubstr(absl::StrCat("limit of ", kMaxLayersPerProfile, " layers per profile"))));
  EXPECT_EQ(catalog_.size(), 1);
}

}  // namespace
}  // namespace oobleck::server
