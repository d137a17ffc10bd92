// Plan and Replan through the real service on 127.0.0.1:0 and a real channel.
#include <grpcpp/create_channel.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/security/credentials.h>

#include <chrono>
#include <cmath>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/profile_catalog.h"
#include "core/template_planner.h"
#include "gmock/gmock.h"
#include "google/rpc/error_details.pb.h"
#include "google/rpc/status.pb.h"
#include "gtest/gtest.h"
#include "oobleck/planner/v1/planner.grpc.pb.h"
#include "server/planner_server.h"
#include "server/planner_service.h"
#include "tests/service/test_load_root.h"
#include "tests/service/three_type_request.h"

namespace oobleck::server {
namespace {

namespace pb = ::oobleck::planner::v1;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr char kExampleDir[] = OOBLECK_SOURCE_DIR "/examples/profiles/gpt2-xl/rtx4090";
constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

using testing::Type;
pb::PlanRequest ThreeTypeRequest() { return testing::ThreeTypeRequest({64, 128}); }

// The plan covers exactly the cluster's nodes, each once, and its shares add up.
void ExpectPlanOver(const pb::PlanRequest& request, const pb::ClusterPlan& plan) {
  std::map<std::string, std::string> type_of;
  for (const pb::Node& n : request.nodes()) type_of[n.id()] = n.node_type();
  std::set<std::string> seen;
  int shares = 0;
  double slowest = 0;
  for (const pb::PlannedPipeline& p : plan.pipelines()) {
    ASSERT_EQ(p.node_ids_size(), p.template_().num_nodes());
    for (int i = 0; i < p.node_ids_size(); ++i) {
      ASSERT_TRUE(type_of.count(p.node_ids(i))) << p.node_ids(i);
      EXPECT_EQ(type_of[p.node_ids(i)], p.template_().node_order(i));
      EXPECT_TRUE(seen.insert(p.node_ids(i)).second) << p.node_ids(i) << " used twice";
    }
    EXPECT_GE(p.microbatches(), 1);
    shares += p.microbatches();
    slowest = std::max(slowest, p.time_ms());
  }
  for (const pb::IdleNode& n : plan.idle_nodes()) {
    EXPECT_TRUE(seen.insert(n.node_id()).second) << n.node_id();
    EXPECT_FALSE(n.reason().empty());
  }
  EXPECT_EQ(seen.size(), type_of.size());
  EXPECT_EQ(shares, plan.global_batch());
  EXPECT_DOUBLE_EQ(plan.pipeline_time_ms(), slowest);
  EXPECT_NEAR(plan.iteration_time_ms(), plan.pipeline_time_ms() + plan.allreduce_ms(), 1e-6);
}

class PlanServiceTest : public ::testing::Test {
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

  grpc::Status Plan(const pb::PlanRequest& request, pb::PlanResponse* response,
                    std::chrono::milliseconds timeout = std::chrono::seconds(60)) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + timeout);
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

TEST_F(PlanServiceTest, PlansEveryBatchSizeAndComparesWithDataParallelism) {
  const pb::PlanRequest request = ThreeTypeRequest();
  const pb::PlanResponse response = PlanOk(request);
  EXPECT_EQ(response.cost_model(), "1f1b");
  EXPECT_THAT(response.derived_gpu_types(), ElementsAre("rtx3090", "v100"));
  EXPECT_GT(response.mixes_planned(), 0);
  // The echo lists the nodes and fills in the counts.
  ASSERT_EQ(response.request().nodes_size(), 9);
  for (const pb::NodeType& t : response.request().cluster().node_types()) EXPECT_EQ(t.count(), 3);
  EXPECT_EQ(response.plan().global_batch(), 64);
  ExpectPlanOver(response.request(), response.plan());
  EXPECT_GE(response.plan().pipelines_size(), 2);
  ASSERT_EQ(response.sweep_size(), 2);
  EXPECT_EQ(response.sweep(0).global_batch(), 64);
  EXPECT_EQ(response.sweep(1).global_batch(), 128);
  for (const pb::BatchSizePlan& size : response.sweep()) {
    ASSERT_TRUE(size.feasible()) << size.infeasible_reason();
    ExpectPlanOver(response.request(), size.plan());
    // A V100 node alone cannot hold GPT-2 XL's weights and optimizer state.
    EXPECT_EQ(size.data_parallel_iteration_time_ms(), 0);
    EXPECT_THAT(size.data_parallel_unavailable_reason(), HasSubstr("v100"));
    EXPECT_EQ(size.speedup(), 0);
  }
  EXPECT_NEAR(response.sweep(0).plan().iteration_time_ms(), response.plan().iteration_time_ms(),
              1e-9);
  EXPECT_GT(response.sweep(1).plan().iteration_time_ms(), response.plan().iteration_time_ms());
  // Second time: every template from the shared cache.
  const pb::PlanResponse again = PlanOk(request);
  EXPECT_EQ(again.mixes_from_cache(), again.mixes_planned());
  EXPECT_EQ(again.plan().SerializeAsString(), response.plan().SerializeAsString());
}

TEST_F(PlanServiceTest, PlansAFleetOf4096NodesOf8TypesExactly) {
  pb::PlanRequest request;
  request.set_model("gpt2-xl");
  request.set_microbatches(16);
  request.set_missing_allreduce_in_node(pb::MISSING_ALLREDUCE_RING);
  request.set_max_nodes_per_pipeline(2);  // keeps the cold template search to a second
  pb::Cluster* cluster = request.mutable_cluster();
  cluster->set_inter_node_bytes_per_s(12.5e9);
  const double speeds[] = {1 / 2.94, 1.8 / 2.94, 1.05, 1.25, 1.3, 2.5, 1.1, 0.45};
  for (int t = 0; t < 8; ++t) {
    pb::NodeType type = Type(absl::StrCat("type", t), 24 + 8 * t, speeds[t]);
    type.set_count(512);
    *cluster->add_node_types() = type;
  }
  request.add_global_batch(1024);
  request.add_global_batch(1000);
  const pb::PlanResponse response = PlanOk(request);
  ASSERT_EQ(response.request().nodes_size(), 4096);
  ExpectPlanOver(response.request(), response.plan());
  EXPECT_EQ(response.optimality_gap(), 0);
  for (const pb::BatchSizePlan& size : response.sweep()) {
    ASSERT_TRUE(size.feasible()) << size.infeasible_reason();
    EXPECT_EQ(size.optimality_gap(), 0);
    ExpectPlanOver(response.request(), size.plan());
  }
}

TEST_F(PlanServiceTest, DataParallelBaselineWhenEveryNodeHoldsTheModel) {
  pb::PlanRequest request;
  request.set_model("gpt2-xl");
  request.set_microbatches(8);
  request.mutable_cluster()->set_inter_node_bytes_per_s(12.5e9);
  pb::NodeType* type = request.mutable_cluster()->add_node_types();
  *type = Type("rtx4090", 24, 1);
  type->set_count(4);  // nodes generated: rtx4090-0 .. rtx4090-3
  request.add_global_batch(32);
  const pb::PlanResponse response = PlanOk(request);
  ASSERT_EQ(response.request().nodes_size(), 4);
  EXPECT_EQ(response.request().nodes(3).id(), "rtx4090-3");
  const pb::BatchSizePlan& size = response.sweep(0);
  ASSERT_GT(size.data_parallel_iteration_time_ms(), 0) << size.data_parallel_unavailable_reason();
  // Four 1-node pipelines is one of the plans the search considers: never better than it.
  EXPECT_GE(size.data_parallel_iteration_time_ms(),
            response.plan().iteration_time_ms() * (1 - 1e-12));
  EXPECT_NEAR(size.speedup(),
              size.data_parallel_iteration_time_ms() / response.plan().iteration_time_ms(), 1e-9);
}

TEST_F(PlanServiceTest, ReplanChainCopiesLayersAndReplaysAsNoOp) {
  const pb::PlanResponse planned = PlanOk(ThreeTypeRequest());
  // Fail the first node of the first pipeline.
  const std::string failed = planned.plan().pipelines(0).node_ids(0);
  pb::ReplanRequest replan;
  *replan.mutable_request() = planned.request();
  *replan.mutable_plan() = planned.plan();
  replan.add_failed_node_ids(failed);
  pb::ReplanResponse first;
  grpc::Status status = Replan(replan, &first);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(first.request().nodes_size(), 8);
  for (const pb::Node& n : first.request().nodes()) EXPECT_NE(n.id(), failed);
  ExpectPlanOver(first.request(), first.plan());
  EXPECT_NEAR(first.old_iteration_time_ms(), planned.plan().iteration_time_ms(), 1e-6);
  EXPECT_GE(first.plan().iteration_time_ms(), first.fastest_iteration_time_ms());
  EXPECT_LE(first.plan().iteration_time_ms(), first.fastest_iteration_time_ms() * 1.01 + 1e-9);
  EXPECT_THAT(first.strategy(), ::testing::AnyOf("optimal", "keep-pipelines", "oobleck-fallback"));
  if (first.oobleck_fallback_iteration_time_ms() > 0) {
    EXPECT_LE(first.plan().iteration_time_ms(), first.oobleck_fallback_iteration_time_ms() + 1e-9);
  }
  double bytes = 0;
  for (const pb::LayerCopy& c : first.copies()) {
    EXPECT_NE(c.source_node_id(), failed);
    EXPECT_LT(c.layer_begin(), c.layer_end());
    bytes += c.param_bytes();
  }
  EXPECT_NEAR(first.copy_bytes(), bytes, 1);
  EXPECT_FALSE(first.copies().empty());

  // The same event again, on the new plan: already applied.
  replan.clear_request();
  *replan.mutable_request() = first.request();
  *replan.mutable_plan() = first.plan();
  pb::ReplanResponse replay;
  status = Replan(replan, &replay);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(replay.strategy(), "unchanged");
  EXPECT_THAT(replay.ignored_failed_node_ids(), ElementsAre(failed));
  EXPECT_TRUE(replay.copies().empty());
  EXPECT_EQ(replay.plan().SerializeAsString(), first.plan().SerializeAsString());

  // A node joins.
  replan.clear_failed_node_ids();
  pb::Node* joined = replan.add_joined_nodes();
  joined->set_id("10.0.0.99");
  joined->set_node_type("rtx4090");
  replan.set_tolerance(0);
  pb::ReplanResponse after_join;
  status = Replan(replan, &after_join);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(after_join.request().nodes_size(), 9);
  EXPECT_EQ(after_join.request().nodes(8).id(), "10.0.0.99");
  EXPECT_LE(after_join.plan().iteration_time_ms(), first.plan().iteration_time_ms() + 1e-9);
  EXPECT_NEAR(after_join.plan().iteration_time_ms(), after_join.fastest_iteration_time_ms(), 1e-9);
}

// Replan reads and writes its messages itself (a streamed unary method, on an arena): a
// request that does not parse, or never comes, gets what gRPC's unary handler answers
// (INTERNAL), and the server goes on answering. The answer's request is the sent one with
// the cluster after the event: every other field carried over.
TEST_F(PlanServiceTest, ReplanOnItsArenaAnswersBadBytesAndEchoesTheRequest) {
  auto raw_replan = [&](const std::string* bytes) {
    grpc::GenericStub stub(
        grpc::CreateChannel(running_.address, grpc::InsecureChannelCredentials()));
    grpc::CompletionQueue cq;
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    auto call = stub.PrepareCall(&context, "/oobleck.planner.v1.Planner/Replan", &cq);
    void* tag = nullptr;
    bool ok = false;
    auto step = [&](intptr_t n) {
      EXPECT_TRUE(cq.Next(&tag, &ok));
      EXPECT_EQ(reinterpret_cast<intptr_t>(tag), n);
    };
    call->StartCall(reinterpret_cast<void*>(1));
    step(1);
    if (bytes != nullptr) {
      grpc::Slice slice(*bytes);
      grpc::ByteBuffer buffer(&slice, 1);
      call->Write(buffer, reinterpret_cast<void*>(2));
      step(2);
    }
    call->WritesDone(reinterpret_cast<void*>(3));
    step(3);
    grpc::Status status;
    call->Finish(&status, reinterpret_cast<void*>(4));
    step(4);
    cq.Shutdown();
    while (cq.Next(&tag, &ok)) {
    }
    return status;
  };
  // Field 1 (request) as a length-delimited message claiming 100 bytes, with 3 present.
  const std::string garbage = "\x0a\x64xyz";
  grpc::Status status = raw_replan(&garbage);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INTERNAL) << status.error_message();
  EXPECT_THAT(status.error_message(), HasSubstr("ReplanRequest"));
  status = raw_replan(nullptr);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INTERNAL) << status.error_message();

  pb::PlanRequest request = ThreeTypeRequest();
  request.set_fault_tolerance(1);
  request.set_max_nodes_per_pipeline(3);
  const pb::PlanResponse planned = PlanOk(request);
  pb::ReplanRequest replan;
  *replan.mutable_request() = planned.request();
  *replan.mutable_plan() = planned.plan();
  const std::string failed = planned.plan().pipelines(0).node_ids(0);
  replan.add_failed_node_ids(failed);
  pb::ReplanResponse r;
  status = Replan(replan, &r);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_GT(r.planning_time_ms(), 0);
  ExpectPlanOver(r.request(), r.plan());
  ASSERT_EQ(r.request().nodes_size(), planned.request().nodes_size() - 1);
  ASSERT_EQ(r.request().cluster().node_types_size(), replan.request().cluster().node_types_size());
  // Without the nodes and counts, the echo is the request as sent, field for field.
  pb::PlanRequest sent = replan.request(), echoed = r.request();
  int failed_type = -1;
  for (pb::PlanRequest* m : {&sent, &echoed}) {
    m->clear_nodes();
    for (int t = 0; t < m->cluster().node_types_size(); ++t) {
      pb::NodeType* type = m->mutable_cluster()->mutable_node_types(t);
      if (m == &sent && type->count() != r.request().cluster().node_types(t).count()) {
        failed_type = t;
      }
      type->clear_count();
    }
  }
  EXPECT_EQ(echoed.SerializeAsString(), sent.SerializeAsString());
  EXPECT_EQ(echoed.max_nodes_per_pipeline(), 3);
  EXPECT_EQ(echoed.fault_tolerance(), 1);
  ASSERT_GE(failed_type, 0);  // the failed node's type lost one node in the counts
  for (const pb::Node& n : planned.request().nodes()) {
    if (n.id() == failed) {
      EXPECT_EQ(n.node_type(), planned.request().cluster().node_types(failed_type).name());
    }
  }
}

// fault_tolerance travels in the request: Plan keeps f + 1 pipelines, Replan keeps f while
// it can and says when it cannot; the answer carries its downtime and the Pareto front.
TEST_F(PlanServiceTest, FaultToleranceAndDowntimeOverTheWire) {
  pb::PlanRequest request = ThreeTypeRequest();
  request.clear_global_batch();
  request.add_global_batch(64);
  request.set_fault_tolerance(3);
  const pb::PlanResponse planned = PlanOk(request);
  EXPECT_GE(planned.plan().pipelines_size(), 4);
  EXPECT_EQ(planned.plan().fault_tolerance(), planned.plan().pipelines_size() - 1);
  EXPECT_EQ(planned.request().fault_tolerance(), 3);

  pb::ReplanRequest replan;
  *replan.mutable_request() = planned.request();
  *replan.mutable_plan() = planned.plan();
  int degraded = 0;
  for (int step = 0; step < 6; ++step) {
    replan.clear_failed_node_ids();
    // One node of each of two pipelines.
    replan.add_failed_node_ids(replan.plan().pipelines(0).node_ids(0));
    if (replan.plan().pipelines_size() > 1) {
      replan.add_failed_node_ids(replan.plan().pipelines(1).node_ids(0));
    }
    pb::ReplanResponse r;
    const grpc::Status status = Replan(replan, &r);
    if (replan.plan().fault_tolerance() < replan.failed_node_ids_size()) break;
    ASSERT_TRUE(status.ok()) << status.error_message();
    ExpectPlanOver(r.request(), r.plan());
    EXPECT_EQ(r.request().fault_tolerance(), 3);  // the asked f stays for later joins
    if (r.plan().fault_tolerance() < 3) {
      ++degraded;
      EXPECT_THAT(r.degraded_reason(), HasSubstr("fault_tolerance = 3 needs 4 pipelines"));
    } else {
      EXPECT_EQ(r.degraded_reason(), "");
    }
    ASSERT_GE(r.alternatives_size(), 1);
    bool chosen_listed = false;
    for (const pb::ReplanAlternative& a : r.alternatives()) {
      EXPECT_GE(a.downtime_s(), 0);
      chosen_listed |= a.strategy() == r.strategy() && a.downtime_s() == r.downtime_s();
    }
    EXPECT_TRUE(chosen_listed);
    EXPECT_GE(r.downtime_s(), r.transfer_s());
    *replan.mutable_request() = r.request();
    *replan.mutable_plan() = r.plan();
  }
  EXPECT_GE(degraded, 1);
}

TEST_F(PlanServiceTest, LosingEveryReplicaIsFailedPrecondition) {
  pb::PlanRequest request = ThreeTypeRequest();
  request.clear_global_batch();
  request.add_global_batch(64);
  const pb::PlanResponse planned = PlanOk(request);
  pb::ReplanRequest replan;
  *replan.mutable_request() = planned.request();
  *replan.mutable_plan() = planned.plan();
  for (const pb::Node& n : planned.request().nodes()) replan.add_failed_node_ids(n.id());
  pb::ReplanResponse response;
  const grpc::Status status = Replan(replan, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_THAT(status.error_message(), HasSubstr("layers [0, 50) have no surviving replica"));
}

TEST_F(PlanServiceTest, RejectsBadPlanRequests) {
  struct Case {
    std::string name;
    std::function<void(pb::PlanRequest*)> mutate;
    grpc::StatusCode code;
    std::string message;
  };
  const std::vector<Case> cases = {
      {"no global batch", [](auto* r) { r->clear_global_batch(); },
       grpc::StatusCode::INVALID_ARGUMENT, "global_batch must list at least one size"},
      {"zero global batch", [](auto* r) { r->set_global_batch(1, 0); },
       grpc::StatusCode::INVALID_ARGUMENT, "global_batch[1] must be in [1, 1048576]"},
      {"unknown node type", [](auto* r) { r->mutable_nodes(1)->set_node_type("h100"); },
       grpc::StatusCode::INVALID_ARGUMENT, "nodes[1].node_type \"h100\" is not the name"},
      {"duplicate id", [](auto* r) { r->mutable_nodes(2)->set_id("10.0.0.1"); },
       grpc::StatusCode::INVALID_ARGUMENT, "nodes[2].id \"10.0.0.1\" repeats nodes[0].id"},
      {"empty id", [](auto* r) { r->mutable_nodes(4)->clear_id(); },
       grpc::StatusCode::INVALID_ARGUMENT, "nodes[4].id is required"},
      {"count disagrees",
       [](auto* r) { r->mutable_cluster()->mutable_node_types(0)->set_count(5); },
       grpc::StatusCode::INVALID_ARGUMENT,
       "cluster.node_types[0].count is 5 but nodes lists 3 node(s) of type \"v100\""},
      {"no nodes and no count", [](auto* r) { r->clear_nodes(); },
       grpc::StatusCode::INVALID_ARGUMENT,
       "cluster.node_types[0].count must be >= 1 when nodes is empty (got 0)"},
      {"negative pipeline size", [](auto* r) { r->set_max_nodes_per_pipeline(-2); },
       grpc::StatusCode::INVALID_ARGUMENT, "max_nodes_per_pipeline must be >= 0 (got -2)"},
      {"pipelines larger than the cluster", [](auto* r) { r->set_min_nodes_per_pipeline(10); },
       grpc::StatusCode::FAILED_PRECONDITION,
       "min_nodes_per_pipeline = 10 is more than the cluster's 9"},
      {"unknown model", [](auto* r) { r->set_model("llama"); }, grpc::StatusCode::NOT_FOUND,
       "llama"},
      {"no M for 1f1b", [](auto* r) { r->clear_microbatches(); },
       grpc::StatusCode::INVALID_ARGUMENT, "microbatches must be >= 1 for cost_model \"1f1b\""},
      {"bad gpus",
       [](auto* r) { r->mutable_cluster()->mutable_node_types(1)->set_gpus_per_node(0); },
       grpc::StatusCode::INVALID_ARGUMENT, "cluster.node_types[1].gpus_per_node must be >= 1"},
      {"more node types than Plan takes",
       [](auto* r) {
         for (int i = 0; i < 6; ++i) {
           pb::NodeType* type = r->mutable_cluster()->add_node_types();
           *type = r->cluster().node_types(0);
           type->set_name("extra" + std::to_string(i));
         }
       },
       grpc::StatusCode::RESOURCE_EXHAUSTED,
       "cluster.node_types has 9 entries, more than the limit of 8 node types per Plan"},
      {"more nodes than Plan takes",
       [](auto* r) {
         r->clear_nodes();
         r->mutable_cluster()->mutable_node_types(0)->set_count(4000);
         r->mutable_cluster()->mutable_node_types(1)->set_count(90);
         r->mutable_cluster()->mutable_node_types(2)->set_count(7);
       },
       grpc::StatusCode::RESOURCE_EXHAUSTED,
       "counts add up to 4097 nodes, more than the limit of 4096 nodes per Plan"},
      {"batch beyond memory",
       [](auto* r) {
         for (auto& t : *r->mutable_cluster()->mutable_node_types())
           t.set_gpu_memory_bytes(15.5 * kGiB);
         r->set_max_nodes_per_pipeline(1);
       },
       grpc::StatusCode::FAILED_PRECONDITION, "global_batch[0] = 64: no pipeline template fits"},
      {"negative fault tolerance", [](auto* r) { r->set_fault_tolerance(-1); },
       grpc::StatusCode::INVALID_ARGUMENT, "fault_tolerance must be in [0, 4095]"},
      {"fault tolerance beyond any cluster", [](auto* r) { r->set_fault_tolerance(5000); },
       grpc::StatusCode::INVALID_ARGUMENT, "got 5000"},
      {"fault tolerance beyond this cluster", [](auto* r) { r->set_fault_tolerance(9); },
       grpc::StatusCode::FAILED_PRECONDITION,
       "global_batch[0] = 64: fault_tolerance = 9 needs 10 pipelines; the nodes fit at most"},
  };
  for (const Case& c : cases) {
    pb::PlanRequest request = ThreeTypeRequest();
    c.mutate(&request);
    pb::PlanResponse response;
    const grpc::Status status = Plan(request, &response);
    EXPECT_EQ(status.error_code(), c.code) << c.name << ": " << status.error_message();
    EXPECT_THAT(status.error_message(), HasSubstr(c.message)) << c.name;
  }
}

TEST_F(PlanServiceTest, RejectsBadReplanRequests) {
  const pb::PlanResponse planned = PlanOk(ThreeTypeRequest());
  struct Case {
    std::string name;
    std::function<void(pb::ReplanRequest*)> mutate;
    grpc::StatusCode code;
    std::string message;
  };
  const std::vector<Case> cases = {
      {"no plan", [](auto* r) { r->clear_plan(); }, grpc::StatusCode::INVALID_ARGUMENT,
       "plan is required"},
      {"no request", [](auto* r) { r->clear_request(); }, grpc::StatusCode::INVALID_ARGUMENT,
       "request is required"},
      {"bad request node", [](auto* r) { r->mutable_request()->mutable_nodes(0)->clear_id(); },
       grpc::StatusCode::INVALID_ARGUMENT, "request.nodes[0].id is required"},
      {"unknown node in plan",
       [](auto* r) { r->mutable_plan()->mutable_pipelines(0)->set_node_ids(0, "zzz"); },
       grpc::StatusCode::INVALID_ARGUMENT,
       "plan.pipelines[0].node_ids[0] \"zzz\" is not a node of the cluster"},
      {"shares do not add up",
       [](auto* r) {
         auto* p = r->mutable_plan()->mutable_pipelines(0);
         p->set_microbatches(p->microbatches() + 1);
       },
       grpc::StatusCode::INVALID_ARGUMENT, "plan.pipelines[].microbatches add up to 65"},
      {"unknown stage type",
       [](auto* r) {
         r->mutable_plan()
             ->mutable_pipelines(0)
             ->mutable_template_()
             ->mutable_stages(0)
             ->set_node_type("tpu");
       },
       grpc::StatusCode::INVALID_ARGUMENT,
       "plan.pipelines[0].template.stages[0].node_type \"tpu\" is not a node type"},
      {"broken layer cut",
       [](auto* r) {
         r->mutable_plan()
             ->mutable_pipelines(0)
             ->mutable_template_()
             ->mutable_stages(0)
             ->set_layer_end(1);
       },
       grpc::StatusCode::INVALID_ARGUMENT,
       "plan.pipelines[0].template.stages[1] has layers [20, 33) but must start at layer 1"},
      {"stage on another node",
       [](auto* r) {
         auto* t = r->mutable_plan()->mutable_pipelines(0)->mutable_template_();
         t->mutable_stages(t->stages_size() - 1)->set_node_index(7);
       },
       grpc::StatusCode::INVALID_ARGUMENT, "].node_index = 7 is not a node of the template"},
      {"joined type unknown",
       [](auto* r) {
         pb::Node* n = r->add_joined_nodes();
         n->set_id("new");
         n->set_node_type("h100");
       },
       grpc::StatusCode::INVALID_ARGUMENT, "joined_nodes[0].node_type \"h100\""},
      {"joined twice",
       [](auto* r) {
         for (int i = 0; i < 2; ++i) {
           pb::Node* n = r->add_joined_nodes();
           n->set_id("new");
           n->set_node_type("v100");
         }
       },
       grpc::StatusCode::INVALID_ARGUMENT, "joined_nodes[1].id \"new\" is listed twice"},
      {"bad tolerance", [](auto* r) { r->set_tolerance(2); }, grpc::StatusCode::INVALID_ARGUMENT,
       "tolerance must be in [0, 1] (got 2)"},
      {"negative horizon", [](auto* r) { r->set_horizon_iterations(-3); },
       grpc::StatusCode::INVALID_ARGUMENT,
       "horizon_iterations must be a finite number >= 0 (got -3)"},
      {"NaN overhead", [](auto* r) { r->set_restart_overhead_s(std::nan("")); },
       grpc::StatusCode::INVALID_ARGUMENT,
       "restart_overhead_s must be a finite number >= 0 (got nan)"},
      {"negative fault tolerance", [](auto* r) { r->mutable_request()->set_fault_tolerance(-1); },
       grpc::StatusCode::INVALID_ARGUMENT, "request.fault_tolerance must be in [0, 4095]"},
      {"unknown strategy", [](auto* r) { r->set_force_strategy("fastest"); },
       grpc::StatusCode::INVALID_ARGUMENT, "force_strategy \"fastest\" is not one of"},
  };
  for (const Case& c : cases) {
    pb::ReplanRequest request;
    *request.mutable_request() = planned.request();
    *request.mutable_plan() = planned.plan();
    request.add_failed_node_ids(planned.request().nodes(0).id());
    c.mutate(&request);
    pb::ReplanResponse response;
    const grpc::Status status = Replan(request, &response);
    EXPECT_EQ(status.error_code(), c.code) << c.name << ": " << status.error_message();
    EXPECT_THAT(status.error_message(), HasSubstr(c.message)) << c.name;
  }
}

// The field paths of google.rpc.BadRequest in the status details (grpc-status-details-bin),
// as grpcurl shows them; empty when there are none.
std::vector<std::string> BadRequestFields(const grpc::Status& status) {
  std::vector<std::string> fields;
  google::rpc::Status details;
  if (status.error_details().empty() || !details.ParseFromString(status.error_details())) {
    return fields;
  }
  EXPECT_EQ(details.code(), static_cast<int>(status.error_code()));
  EXPECT_EQ(details.message(), status.error_message());
  for (const google::protobuf::Any& any : details.details()) {
    google::rpc::BadRequest bad_request;
    if (!any.UnpackTo(&bad_request)) continue;
    for (const auto& violation : bad_request.field_violations()) {
      EXPECT_EQ(violation.description(), status.error_message());
      fields.push_back(violation.field());
    }
  }
  return fields;
}

TEST_F(PlanServiceTest, BadFieldsAreNamedInBadRequestDetails) {
  pb::PlanRequest plan = ThreeTypeRequest();
  plan.mutable_cluster()->mutable_node_types(1)->set_gpus_per_node(0);
  pb::PlanResponse planned;
  grpc::Status status = Plan(plan, &planned);
  ASSERT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << status.error_message();
  EXPECT_THAT(BadRequestFields(status), ElementsAre("cluster.node_types[1].gpus_per_node"));

  plan = ThreeTypeRequest();
  plan.set_fault_tolerance(-1);  // checked in core, its path mapped by the server
  status = Plan(plan, &planned);
  EXPECT_THAT(BadRequestFields(status), ElementsAre("fault_tolerance"));

  // Inside a ReplanRequest the path starts at the ReplanRequest.
  const pb::PlanResponse ok = PlanOk(ThreeTypeRequest());
  pb::ReplanRequest replan;
  *replan.mutable_request() = ok.request();
  *replan.mutable_plan() = ok.plan();
  replan.mutable_request()->mutable_nodes(2)->set_id(ok.request().nodes(0).id());
  pb::ReplanResponse replanned;
  status = Replan(replan, &replanned);
  ASSERT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << status.error_message();
  EXPECT_THAT(status.error_message(), HasSubstr("request.nodes[2].id \""));
  EXPECT_THAT(status.error_message(), HasSubstr("repeats nodes[0].id"));
  EXPECT_THAT(BadRequestFields(status), ElementsAre("request.nodes[2].id"));

  replan.mutable_request()->mutable_nodes(2)->set_id("fresh");
  replan.mutable_request()->set_max_nodes_per_pipeline(-1);
  status = Replan(replan, &replanned);
  EXPECT_THAT(BadRequestFields(status), ElementsAre("request.max_nodes_per_pipeline"));

  // A rule of core's ValidateProblemSettings, on the path of the request.
  replan.mutable_request()->set_max_nodes_per_pipeline(0);
  replan.mutable_request()->mutable_cluster()->set_inter_node_bytes_per_s(-1);
  status = Replan(replan, &replanned);
  ASSERT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << status.error_message();
  EXPECT_THAT(status.error_message(),
              HasSubstr("request.cluster.inter_node_bytes_per_s must be > 0 for cost_model"));
  EXPECT_THAT(BadRequestFields(status), ElementsAre("request.cluster.inter_node_bytes_per_s"));

  // Only INVALID_ARGUMENT carries a BadRequest: a model without profiles is NOT_FOUND.
  plan = ThreeTypeRequest();
  plan.set_model("llama");
  status = Plan(plan, &planned);
  ASSERT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_TRUE(BadRequestFields(status).empty());
}

TEST_F(PlanServiceTest, DeadlineStopsALongPlan) {
  // Every mix of up to 7 of 49 nodes of 7 types of 8 GPUs (3 432 mixes): seconds of cold
  // template search. (Up to 16 of 48 nodes of the three 2-GPU types took 0.2 s once node
  // moves landed, too close to this deadline.)
  pb::PlanRequest request = ThreeTypeRequest();
  request.clear_nodes();
  pb::Cluster* cluster = request.mutable_cluster();
  cluster->clear_node_types();
  for (int i = 0; i < 7; ++i) {
    pb::NodeType type = i == 0 ? testing::Type("rtx4090", 24, 1)
                               : testing::Type(absl::StrCat("t", i), 24, 1.0 / (i + 1));
    type.set_gpus_per_node(8);
    type.set_count(7);
    *cluster->add_node_types() = type;
  }
  request.set_max_nodes_per_pipeline(7);
  pb::PlanResponse response;
  const auto start = std::chrono::steady_clock::now();
  const grpc::Status status = Plan(request, &response, std::chrono::milliseconds(300));
  EXPECT_EQ(status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED) << status.error_message();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  // The server is still responsive.
  pb::PlanRequest small = ThreeTypeRequest();
  const auto again = std::chrono::steady_clock::now();
  PlanOk(small);
  EXPECT_LT(std::chrono::steady_clock::now() - again, std::chrono::seconds(10));
}

}  // namespace
}  // namespace oobleck::server
