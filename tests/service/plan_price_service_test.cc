// Cost-aware Plan (PlanRequest.objective, budget_per_hour, NodeType.price_per_hour) and
// Replan of such plans, through the real service on 127.0.0.1:0 and a real channel.
#include <grpcpp/create_channel.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/security/credentials.h>

#include <chrono>
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/profile_catalog.h"
#include "core/template_planner.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "oobleck/planner/v1/planner.grpc.pb.h"
#include "server/planner_server.h"
#include "server/planner_service.h"
#include "tests/service/test_load_root.h"
#include "tests/service/three_type_request.h"

namespace oobleck::server {
namespace {

namespace pb = ::oobleck::planner::v1;
using ::testing::HasSubstr;

constexpr char kExampleDir[] = OOBLECK_SOURCE_DIR "/examples/profiles/gpt2-xl/rtx4090";

// The Plan tests' three-type cluster (one global batch of 64), priced so that the fast
// nodes cost more per hour than they save.
pb::PlanRequest PricedRequest() {
  pb::PlanRequest request = testing::ThreeTypeRequest({64});
  const double prices[] = {0.9, 1.1, 4.0};  // v100, rtx3090, rtx4090
  for (int t = 0; t < 3; ++t) {
    request.mutable_cluster()->mutable_node_types(t)->set_price_per_hour(prices[t]);
  }
  return request;
}

// The price of the nodes the plan's pipelines use, from the request's prices.
double PriceOf(const pb::PlanRequest& request, const pb::ClusterPlan& plan) {
  std::map<std::string, double> type_price, node_price;
  for (const pb::NodeType& t : request.cluster().node_types()) {
    type_price[t.name()] = t.price_per_hour();
  }
  for (const pb::Node& n : request.nodes()) node_price[n.id()] = type_price[n.node_type()];
  double price = 0;
  for (const pb::PlannedPipeline& p : plan.pipelines()) {
    for (const std::string& id : p.node_ids()) price += node_price.at(id);
  }
  return price;
}

double CostOf(const pb::ClusterPlan& plan) {
  return plan.price_per_hour() * plan.iteration_time_ms();
}

class PlanPriceServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    service_ =
        std::make_unique<PlannerService>(&catalog_, &cache_, /*threads=*/2, WithTestLoadRoot());
    absl::StatusOr<RunningServer> running = StartPlannerServer("127.0.0.1:0", service_.get());
    ASSERT_TRUE(running.ok()) << running.status();
    running_ = *std::move(running);
    stub_ = pb::Planner::NewStub(
        grpc::CreateChannel(running_.address, grpc::InsecureChannelCredentials()));
    pb::LoadProfileRequest load;
    load.set_model("gpt2-xl");
    load.set_gpu_type("rtx4090");
    load.set_directory(kExampleDir);
    pb::LoadProfileResponse loaded;
    grpc::ClientContext context;
    const grpc::Status status = stub_->LoadProfile(&context, load, &loaded);
    ASSERT_TRUE(status.ok()) << status.error_message();
  }
  void TearDown() override {
    if (running_.server != nullptr) {
      running_.server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(5));
    }
  }

  grpc::Status Plan(const pb::PlanRequest& request, pb::PlanResponse* response) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
    return stub_->Plan(&context, request, response);
  }
  grpc::Status Replan(const pb::ReplanRequest& request, pb::ReplanResponse* response) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
    return stub_->Replan(&context, request, response);
  }
  pb::PlanResponse PlanOk(const pb::PlanRequest& request) {
    pb::PlanResponse response;
    const grpc::Status status = Plan(request, &response);
    EXPECT_TRUE(status.ok()) << status.error_message();
    return response;
  }

  ProfileCatalog catalog_;
  TemplateCache cache_{64 << 20};
  std::unique_ptr<PlannerService> service_;
  RunningServer running_;
  std::unique_ptr<pb::Planner::Stub> stub_;
};

TEST_F(PlanPriceServiceTest, ObjectivesAndBudgetOverTheWire) {
  const pb::PlanRequest request = PricedRequest();
  const pb::PlanResponse fastest = PlanOk(request);
  EXPECT_NEAR(fastest.plan().price_per_hour(), PriceOf(request, fastest.plan()), 1e-9);
  EXPECT_GT(fastest.plan().price_per_hour(), 0);
  EXPECT_EQ(fastest.optimality_gap(), 0);

  pb::PlanRequest by_cost = request;
  by_cost.set_objective("cost");
  const pb::PlanResponse cheapest = PlanOk(by_cost);
  EXPECT_EQ(cheapest.request().objective(), "cost");
  EXPECT_NEAR(cheapest.plan().price_per_hour(), PriceOf(request, cheapest.plan()), 1e-9);
  EXPECT_EQ(cheapest.optimality_gap(), 0);
  // Cheaper per iteration than the fastest plan, and here strictly: the RTX 4090 nodes
  // cost more than the time they save.
  EXPECT_LT(CostOf(cheapest.plan()), CostOf(fastest.plan()) * (1 - 1e-6));
  EXPECT_GE(cheapest.plan().iteration_time_ms(), fastest.plan().iteration_time_ms());
  bool idle_for_price = false;
  for (const pb::IdleNode& n : cheapest.plan().idle_nodes()) {
    idle_for_price |= n.reason().find("costs more") != std::string::npos;
  }
  EXPECT_TRUE(idle_for_price);

  // A budget between the two: the fastest plan within it, no faster than the fastest.
  pb::PlanRequest budgeted = request;
  const double budget = (cheapest.plan().price_per_hour() + fastest.plan().price_per_hour()) / 2;
  budgeted.set_budget_per_hour(budget);
  const pb::PlanResponse within = PlanOk(budgeted);
  EXPECT_LE(within.plan().price_per_hour(), budget + 1e-9);
  EXPECT_GE(within.plan().iteration_time_ms(), fastest.plan().iteration_time_ms());
  EXPECT_EQ(within.optimality_gap(), 0);

  // Both: the cheapest plan per iteration within the budget.
  by_cost.set_budget_per_hour(budget);
  const pb::PlanResponse both = PlanOk(by_cost);
  EXPECT_LE(both.plan().price_per_hour(), budget + 1e-9);
  EXPECT_NEAR(CostOf(both.plan()), CostOf(cheapest.plan()), 1e-9 * CostOf(cheapest.plan()));
}

TEST_F(PlanPriceServiceTest, ReplanOfACostPlanKeepsLeastTimeAndReportsItsPrice) {
  pb::PlanRequest request = PricedRequest();
  request.set_objective("cost");
  request.set_fault_tolerance(1);  // the cheapest plan is one pipeline; two survive a failure
  const pb::PlanResponse planned = PlanOk(request);
  ASSERT_GE(planned.plan().pipelines_size(), 2);
  pb::ReplanRequest replan;
  *replan.mutable_request() = planned.request();
  *replan.mutable_plan() = planned.plan();
  replan.add_failed_node_ids(planned.plan().pipelines(0).node_ids(0));
  pb::ReplanResponse r;
  const grpc::Status status = Replan(replan, &r);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(r.request().objective(), "cost");  // echoed, for the next Plan
  EXPECT_NEAR(r.plan().price_per_hour(), PriceOf(r.request(), r.plan()), 1e-9);
  // Replan weighs time (and its downtime), not price.
  EXPECT_GT(r.fastest_iteration_time_ms(), 0);
  EXPECT_GE(r.plan().iteration_time_ms(), r.fastest_iteration_time_ms() * (1 - 1e-9));
}

TEST_F(PlanPriceServiceTest, RejectsBadObjectivesPricesAndBudgets) {
  struct Case {
    std::string name;
    std::function<void(pb::PlanRequest*)> mutate;
    grpc::StatusCode code;
    std::string message;
  };
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  const std::vector<Case> cases = {
      {"unknown objective", [](auto* r) { r->set_objective("cheapest"); },
       grpc::StatusCode::INVALID_ARGUMENT, "objective must be \"time\" or \"cost\""},
      {"negative price",
       [](auto* r) { r->mutable_cluster()->mutable_node_types(1)->set_price_per_hour(-1); },
       grpc::StatusCode::INVALID_ARGUMENT, "cluster.node_types[1].price_per_hour"},
      {"NaN price",
       [&](auto* r) { r->mutable_cluster()->mutable_node_types(0)->set_price_per_hour(nan); },
       grpc::StatusCode::INVALID_ARGUMENT, "cluster.node_types[0].price_per_hour"},
      {"infinite price",
       [&](auto* r) { r->mutable_cluster()->mutable_node_types(2)->set_price_per_hour(inf); },
       grpc::StatusCode::INVALID_ARGUMENT, "cluster.node_types[2].price_per_hour"},
      {"negative budget", [](auto* r) { r->set_budget_per_hour(-3); },
       grpc::StatusCode::INVALID_ARGUMENT, "budget_per_hour must be a finite number >= 0"},
      {"NaN budget", [&](auto* r) { r->set_budget_per_hour(nan); },
       grpc::StatusCode::INVALID_ARGUMENT, "budget_per_hour"},
      {"budget no plan fits", [](auto* r) { r->set_budget_per_hour(0.5); },
       grpc::StatusCode::FAILED_PRECONDITION,
       "budget_per_hour = 0.5 is below the price of every plan"},
      {"cost without prices",
       [](auto* r) {
         r->set_objective("cost");
         for (auto& t : *r->mutable_cluster()->mutable_node_types()) t.set_price_per_hour(0);
       },
       grpc::StatusCode::FAILED_PRECONDITION, "objective = \"cost\" needs prices"},
      {"budget without prices",
       [](auto* r) {
         r->set_budget_per_hour(10);
         for (auto& t : *r->mutable_cluster()->mutable_node_types()) t.set_price_per_hour(0);
       },
       grpc::StatusCode::FAILED_PRECONDITION, "budget_per_hour needs prices"},
  };
  for (const Case& c : cases) {
    pb::PlanRequest request = PricedRequest();
    c.mutate(&request);
    pb::PlanResponse response;
    const grpc::Status status = Plan(request, &response);
    EXPECT_EQ(status.error_code(), c.code) << c.name << ": " << status.error_message();
    EXPECT_THAT(status.error_message(), HasSubstr(c.message)) << c.name;
  }
}

}  // namespace
}  // namespace oobleck::server
