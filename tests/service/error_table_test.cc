// docs/ERRORS.md's rows for PlanTemplates, Plan and Replan that a request field drives,
// walked over a real channel: each row below names its doc row (a piece of the row's first
// cell, which the test finds in the doc beside the row's code) and checks the code and the
// google.rpc.BadRequest field path the client receives (INVALID_ARGUMENT only; other codes
// carry none). Rows of LoadProfile and Instantiate are covered by their own service tests.
#include <grpcpp/create_channel.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/security/credentials.h>

#include <chrono>
#include <cmath>
#include <fstream>
#include <functional>
#include <limits>
#include <memory>
#include <sstream>
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

constexpr char kExampleDir[] = OOBLECK_SOURCE_DIR "/examples/profiles/gpt2-xl/rtx4090";
constexpr char kErrorsDoc[] = OOBLECK_SOURCE_DIR "/docs/ERRORS.md";

// One documented row, driven by one change to a valid request.
struct Row {
  std::string doc;  // a piece of the row's first cell in docs/ERRORS.md
  std::string case_name;
  std::function<void(pb::PlanRequest*)> plan;      // a Plan row (else a Replan row)
  std::function<void(pb::ReplanRequest*)> replan;  // changes the valid Replan request
  grpc::StatusCode code;
  std::string field;  // the BadRequest path; "" when the code carries none
};

std::vector<Row> PlanRows() {
  using R = pb::PlanRequest;
  const std::string nodes = "`nodes` empty with a node type's `count` < 1, a node id empty";
  const std::string prices = "`cluster.node_types[i].price_per_hour` negative";
  const auto invalid = grpc::StatusCode::INVALID_ARGUMENT;
  const auto precondition = grpc::StatusCode::FAILED_PRECONDITION;
  return {
      {nodes,
       "empty id",
       [](R* r) { r->mutable_nodes(4)->clear_id(); },
       {},
       invalid,
       "nodes[4].id"},
      {nodes,
       "repeated id",
       [](R* r) { r->mutable_nodes(2)->set_id("10.0.0.1"); },
       {},
       invalid,
       "nodes[2].id"},
      {nodes,
       "unknown node type",
       [](R* r) { r->mutable_nodes(1)->set_node_type("h100"); },
       {},
       invalid,
       "nodes[1].node_type"},
      {nodes,
       "no nodes, no counts",
       [](R* r) { r->clear_nodes(); },
       {},
       invalid,
       "cluster.node_types[0].count"},
      {"`cluster.node_types[i].count` neither 0 nor the number of `nodes`",
       "count",
       [](R* r) { r->mutable_cluster()->mutable_node_types(0)->set_count(5); },
       {},
       invalid,
       "cluster.node_types[0].count"},
      {"A node type named like an earlier one",
       "repeated type name",
       [](R* r) { r->mutable_cluster()->mutable_node_types(1)->set_name("v100"); },
       {},
       invalid,
       "cluster.node_types[1].name"},
      {"`global_batch` empty, or a size outside",
       "no size",
       [](R* r) { r->clear_global_batch(); },
       {},
       invalid,
       "global_batch"},
      {"`global_batch` empty, or a size outside",
       "size 0",
       [](R* r) { r->set_global_batch(0, 0); },
       {},
       invalid,
       "global_batch[0]"},
      {"`min_nodes_per_pipeline` above what the cluster",
       "min above nodes",
       [](R* r) { r->set_min_nodes_per_pipeline(10); },
       {},
       precondition,
       ""},
      {"`max_nodes_per_pipeline` below `min_nodes_per_pipeline`",
       "max below min",
       [](R* r) {
         r->set_min_nodes_per_pipeline(3);
         r->set_max_nodes_per_pipeline(2);
       },
       {},
       invalid,
       "max_nodes_per_pipeline"},
      {"`fault_tolerance` negative or above 4095",
       "negative",
       [](R* r) { r->set_fault_tolerance(-1); },
       {},
       invalid,
       "fault_tolerance"},
      {"`fault_tolerance` negative or above 4095",
       "4096",
       [](R* r) { r->set_fault_tolerance(4096); },
       {},
       invalid,
       "fault_tolerance"},
      {"`fault_tolerance = f` and the nodes fit fewer than f+1",
       "8 of 9 nodes",
       [](R* r) { r->set_fault_tolerance(8); },
       {},
       precondition,
       ""},
      {"`fault_tolerance_rule` not `FAULT_TOLERANCE_PIPELINES`",
       "7",
       [](R* r) { r->set_fault_tolerance_rule(static_cast<pb::FaultToleranceRule>(7)); },
       {},
       invalid,
       "fault_tolerance_rule"},
      {"Plan, `fault_tolerance_rule = FAULT_TOLERANCE_OOBLECK`: N − f below",
       "N - f < min",
       [](R* r) {
         r->set_fault_tolerance_rule(pb::FAULT_TOLERANCE_OOBLECK);
         r->set_fault_tolerance(8);
         r->set_min_nodes_per_pipeline(2);
       },
       {},
       precondition,
       ""},
      {"More than 4096 nodes (`nodes`, or `cluster.node_types` counts)",
       "counts",
       [](R* r) {
         r->clear_nodes();
         for (int t = 0; t < 3; ++t) r->mutable_cluster()->mutable_node_types(t)->set_count(1400);
       },
       {},
       grpc::StatusCode::RESOURCE_EXHAUSTED,
       ""},
      {"`objective` not `\"time\"`",
       "cheapest",
       [](R* r) { r->set_objective("cheapest"); },
       {},
       invalid,
       "objective"},
      {"`objective = \"oobleck-instantiation\"` with nodes of more than one",
       "three types",
       [](R* r) { r->set_objective("oobleck-instantiation"); },
       {},
       invalid,
       "objective"},
      {prices,
       "negative price",
       [](R* r) { r->mutable_cluster()->mutable_node_types(2)->set_price_per_hour(-1); },
       {},
       invalid,
       "cluster.node_types[2].price_per_hour"},
      {"`cluster.node_types[i].price_per_hour` not a multiple of 0.0001",
       "4e-05",
       [](R* r) { r->mutable_cluster()->mutable_node_types(0)->set_price_per_hour(4e-05); },
       {},
       invalid,
       "cluster.node_types[0].price_per_hour"},
      {"`budget_per_hour` negative, NaN or infinite",
       "NaN",
       [](R* r) { r->set_budget_per_hour(std::numeric_limits<double>::quiet_NaN()); },
       {},
       invalid,
       "budget_per_hour"},
      {"`objective = \"cost\"` and some node type's `price_per_hour` is 0",
       "no prices",
       [](R* r) { r->set_objective("cost"); },
       {},
       precondition,
       ""},
      {"`budget_per_hour` below the price of every plan",
       "0.5 of 1 per node",
       [](R* r) {
         for (int t = 0; t < 3; ++t) {
           r->mutable_cluster()->mutable_node_types(t)->set_price_per_hour(1);
         }
         r->set_budget_per_hour(0.5);
       },
       {},
       precondition,
       ""},
  };
}

std::vector<Row> ReplanRows() {
  using R = pb::ReplanRequest;
  const std::string plan = "Replan: `plan` without pipelines, or inconsistent with its cluster";
  const auto invalid = grpc::StatusCode::INVALID_ARGUMENT;
  const auto precondition = grpc::StatusCode::FAILED_PRECONDITION;
  auto last_stage = [](R* r) {
    pb::PipelineTemplate* t = r->mutable_plan()->mutable_pipelines(0)->mutable_template_();
    return t->mutable_stages(t->stages_size() - 1);
  };
  return {
      {plan,
       "no pipelines",
       {},
       [](R* r) { r->mutable_plan()->clear_pipelines(); },
       invalid,
       "plan.pipelines"},
      {plan,
       "unknown node id",
       {},
       [](R* r) { r->mutable_plan()->mutable_pipelines(0)->set_node_ids(0, "zzz"); },
       invalid,
       "plan.pipelines[0].node_ids[0]"},
      {plan,
       "stage on no node",
       {},
       [=](R* r) { last_stage(r)->set_node_index(7); },
       invalid,
       "plan.pipelines[0].template.stages[LAST].node_index"},
      {plan,
       "shares",
       {},
       [](R* r) {
         pb::PlannedPipeline* p = r->mutable_plan()->mutable_pipelines(0);
         p->set_microbatches(p->microbatches() + 1);
       },
       invalid,
       "plan.pipelines"},
      {plan,
       "global batch",
       {},
       [](R* r) { r->mutable_plan()->set_global_batch(0); },
       invalid,
       "plan.global_batch"},
      {"Replan: joined nodes would grow the cluster over 4096 nodes",
       "4090 joined",
       {},
       [](R* r) {
         for (int i = 0; i < 4090; ++i) {
           pb::Node* node = r->add_joined_nodes();
           node->set_id("new-" + std::to_string(i));
           node->set_node_type("rtx4090");
         }
       },
       grpc::StatusCode::RESOURCE_EXHAUSTED,
       ""},
      {"Replan: a failed id listed twice, or a joined node whose id exists",
       "failed twice",
       {},
       [](R* r) { r->add_failed_node_ids("10.0.0.1"); },
       invalid,
       "failed_node_ids[1]"},
      {"Replan: a failed id listed twice, or a joined node whose id exists",
       "joined exists",
       {},
       [](R* r) {
         pb::Node* node = r->add_joined_nodes();
         node->set_id("10.0.0.2");
         node->set_node_type("rtx4090");
       },
       invalid,
       "joined_nodes[0]"},
      {"Replan: a failed id listed twice, or a joined node whose id exists",
       "joined type",
       {},
       [](R* r) {
         pb::Node* node = r->add_joined_nodes();
         node->set_id("new");
         node->set_node_type("h100");
       },
       invalid,
       "joined_nodes[0].node_type"},
      {"Replan: no node survives the event",
       "all fail",
       {},
       [](R* r) {
         for (int i = 2; i <= 9; ++i) r->add_failed_node_ids("10.0.0." + std::to_string(i));
       },
       precondition,
       ""},
      {"Replan: `horizon_iterations` or `restart_overhead_s` negative",
       "horizon",
       {},
       [](R* r) { r->set_horizon_iterations(-1); },
       invalid,
       "horizon_iterations"},
      {"Replan: `horizon_iterations` or `restart_overhead_s` negative",
       "restart",
       {},
       [](R* r) { r->set_restart_overhead_s(std::numeric_limits<double>::infinity()); },
       invalid,
       "restart_overhead_s"},
      {"Replan: `force_strategy` not `optimal`",
       "bogus",
       {},
       [](R* r) { r->set_force_strategy("bogus"); },
       invalid,
       "force_strategy"},
      {"`fault_tolerance` negative or above 4095",
       "in Replan",
       {},
       [](R* r) { r->mutable_request()->set_fault_tolerance(-1); },
       invalid,
       "request.fault_tolerance"},
      {"`fault_tolerance_rule` not `FAULT_TOLERANCE_PIPELINES`",
       "in Replan",
       {},
       [](R* r) {
         r->mutable_request()->set_fault_tolerance_rule(static_cast<pb::FaultToleranceRule>(7));
       },
       invalid,
       "request.fault_tolerance_rule"},
      {"`max_nodes_per_pipeline` below `min_nodes_per_pipeline`",
       "in Replan",
       {},
       [](R* r) {
         r->mutable_request()->set_min_nodes_per_pipeline(3);
         r->mutable_request()->set_max_nodes_per_pipeline(2);
       },
       invalid,
       "request.max_nodes_per_pipeline"},
      {"`nodes` empty with a node type's `count` < 1, a node id empty",
       "in Replan",
       {},
       [](R* r) { r->mutable_request()->mutable_nodes(2)->set_id("10.0.0.1"); },
       invalid,
       "request.nodes[2].id"},
  };
}

// PlanTemplates: one rtx4090 type of 2 nodes, pipelines of 1 to 2 nodes.
pb::PlanTemplatesRequest TemplatesRequest() {
  pb::PlanTemplatesRequest request;
  request.set_model("gpt2-xl");
  request.set_microbatches(16);
  request.set_missing_allreduce_in_node(pb::MISSING_ALLREDUCE_RING);
  request.mutable_cluster()->set_inter_node_bytes_per_s(12.5e9);
  pb::NodeType* type = request.mutable_cluster()->add_node_types();
  *type = testing::Type("rtx4090", 24, 1);
  type->set_count(2);
  request.set_min_nodes(1);
  request.set_max_nodes(2);
  return request;
}

struct TemplatesRow {
  std::string doc;
  std::string case_name;
  std::function<void(pb::PlanTemplatesRequest*)> mutate;
  grpc::StatusCode code;
  std::string field;
};

std::vector<TemplatesRow> TemplatesRows() {
  using R = pb::PlanTemplatesRequest;
  const auto invalid = grpc::StatusCode::INVALID_ARGUMENT;
  const std::string type = "A node type: `name` empty or repeated; `gpus_per_node`";
  return {
      {"`model` empty without inline `profiles`; `microbatch_size` < 0", "no model",
       [](R* r) { r->clear_model(); }, invalid, "model"},
      {"`model` empty without inline `profiles`; `microbatch_size` < 0", "microbatch size",
       [](R* r) { r->set_microbatch_size(-1); }, invalid, "microbatch_size"},
      {"`cost_model` not `\"\"`, `1f1b` or `oobleck-sosp23`", "2f2b",
       [](R* r) { r->set_cost_model("2f2b"); }, invalid, "cost_model"},
      {"`microbatches` < 0, 0 with `1f1b`, or above 2^20", "0 with 1f1b",
       [](R* r) { r->set_microbatches(0); }, invalid, "microbatches"},
      {"`optimizer_state_multiplier` negative or not finite", "negative",
       [](R* r) { r->set_optimizer_state_multiplier(-1); }, invalid, "optimizer_state_multiplier"},
      {"`min_nodes`/`max_nodes` negative, above the cluster's node count", "min > max",
       [](R* r) {
         r->set_min_nodes(2);
         r->set_max_nodes(1);
       },
       invalid, "min_nodes"},
      {"`cluster` missing", "none", [](R* r) { r->clear_cluster(); }, invalid, "cluster"},
      {"`cluster.node_types` empty", "none", [](R* r) { r->mutable_cluster()->clear_node_types(); },
       invalid, "cluster.node_types"},
      {"`cluster.inter_node_bytes_per_s` not finite, negative", "negative",
       [](R* r) { r->mutable_cluster()->set_inter_node_bytes_per_s(-1); }, invalid,
       "cluster.inter_node_bytes_per_s"},
      {type, "0 GPUs",
       [](R* r) { r->mutable_cluster()->mutable_node_types(0)->set_gpus_per_node(0); }, invalid,
       "cluster.node_types[0].gpus_per_node"},
      {"A node type: `count` < 1 (PlanTemplates)", "0",
       [](R* r) { r->mutable_cluster()->mutable_node_types(0)->set_count(0); }, invalid,
       "cluster.node_types[0].count"},
      {"A node type: `gpu_memory_bytes` or `intra_node_bytes_per_s` not finite", "no memory",
       [](R* r) { r->mutable_cluster()->mutable_node_types(0)->set_gpu_memory_bytes(0); }, invalid,
       "cluster.node_types[0].gpu_memory_bytes"},
      {"`mixes[j]`: wrong number of counts", "two counts",
       [](R* r) {
         r->add_mixes()->add_counts(1);
         r->mutable_mixes(0)->add_counts(1);
       },
       invalid, "mixes[0].counts"},
      {"`mixes[j]`: wrong number of counts", "above the count",
       [](R* r) { r->add_mixes()->add_counts(3); }, invalid, "mixes[0].counts[0]"},
      {"More than 256 node types", "257",
       [](R* r) {
         for (int t = 1; t <= 256; ++t) {
           pb::NodeType* type = r->mutable_cluster()->add_node_types();
           *type = r->cluster().node_types(0);
           type->set_name("t" + std::to_string(t));
         }
       },
       grpc::StatusCode::RESOURCE_EXHAUSTED, ""},
      {"The model has no loaded profile; no profile for a node type's GPU type", "model",
       [](R* r) { r->set_model("nope"); }, grpc::StatusCode::NOT_FOUND, ""},
  };
}

// The rows of the Plan and Replan table this test cannot drive over the API, and why; each
// must still be in the doc.
const char* const kNotOverTheApi[] = {
    // core callers only: the server never sets them
    "`min_pipelines` or `max_ilp_nodes` < 0 (core callers)",
    // tests only: the server never forces the DP
    "The node-count DP forced (`PlanSearchMethod::kNodeCountDp`, tests only)",
};

std::string ReadDoc() {
  std::ifstream in(kErrorsDoc);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// The doc's table line whose text holds `piece`, or "".
std::string DocRow(const std::string& doc, const std::string& piece) {
  std::istringstream lines(doc);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("| ", 0) == 0 && line.find(piece) != std::string::npos) return line;
  }
  return "";
}

std::string CodeName(grpc::StatusCode code) {
  switch (code) {
    case grpc::StatusCode::INVALID_ARGUMENT:
      return "INVALID_ARGUMENT";
    case grpc::StatusCode::FAILED_PRECONDITION:
      return "FAILED_PRECONDITION";
    case grpc::StatusCode::RESOURCE_EXHAUSTED:
      return "RESOURCE_EXHAUSTED";
    case grpc::StatusCode::NOT_FOUND:
      return "NOT_FOUND";
    default:
      return "code " + std::to_string(static_cast<int>(code));
  }
}

// The BadRequest field paths of the status details; empty without details.
std::vector<std::string> BadRequestFields(const grpc::Status& status) {
  std::vector<std::string> fields;
  google::rpc::Status details;
  if (status.error_details().empty() || !details.ParseFromString(status.error_details())) {
    return fields;
  }
  for (const google::protobuf::Any& any : details.details()) {
    google::rpc::BadRequest bad_request;
    if (!any.UnpackTo(&bad_request)) continue;
    for (const auto& violation : bad_request.field_violations()) {
      fields.push_back(violation.field());
    }
  }
  return fields;
}

class ErrorTableTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(served_.Start(WithTestLoadRoot()).ok());
    const grpc::Status loaded = served_.LoadExampleProfile(kExampleDir);
    ASSERT_TRUE(loaded.ok()) << loaded.error_message();
  }

  grpc::Status Plan(const pb::PlanRequest& request, pb::PlanResponse* response) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
    return served_.stub->Plan(&context, request, response);
  }
  grpc::Status Replan(const pb::ReplanRequest& request) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
    pb::ReplanResponse response;
    return served_.stub->Replan(&context, request, &response);
  }

  // The status of `row` and, for INVALID_ARGUMENT, its BadRequest path, checked.
  template <typename AnyRow>
  void Check(const AnyRow& row, const std::string& doc, const grpc::Status& status,
             const std::string& field) {
    const std::string where = row.doc + " / " + row.case_name;
    const std::string line = DocRow(doc, row.doc);
    ASSERT_FALSE(line.empty()) << "no row of docs/ERRORS.md holds: " << row.doc;
    EXPECT_NE(line.find(CodeName(row.code)), std::string::npos)
        << where << ": the doc row does not give " << CodeName(row.code) << ": " << line;
    EXPECT_EQ(status.error_code(), row.code) << where << ": " << status.error_message();
    if (field.empty()) {
      EXPECT_THAT(BadRequestFields(status), ::testing::IsEmpty()) << where;
    } else {
      EXPECT_THAT(BadRequestFields(status), ::testing::ElementsAre(field))
          << where << ": " << status.error_message();
      // The message names the same field.
      EXPECT_EQ(status.error_message().rfind(field, 0), 0u) << where;
    }
  }

  ServedPlanner served_;
};

TEST_F(ErrorTableTest, EveryPlanRowGivesItsCodeAndFieldPath) {
  const std::string doc = ReadDoc();
  ASSERT_FALSE(doc.empty()) << kErrorsDoc;
  for (const Row& row : PlanRows()) {
    pb::PlanRequest request = testing::ThreeTypeRequest({64});
    row.plan(&request);
    pb::PlanResponse response;
    Check(row, doc, Plan(request, &response), row.field);
  }
}

TEST_F(ErrorTableTest, EveryReplanRowGivesItsCodeAndFieldPath) {
  const std::string doc = ReadDoc();
  pb::PlanResponse planned;
  const grpc::Status ok = Plan(testing::ThreeTypeRequest({64}), &planned);
  ASSERT_TRUE(ok.ok()) << ok.error_message();
  for (const Row& row : ReplanRows()) {
    pb::ReplanRequest request;
    *request.mutable_request() = planned.request();
    *request.mutable_plan() = planned.plan();
    request.add_failed_node_ids("10.0.0.1");
    row.replan(&request);
    std::string field = row.field;
    if (const size_t last = field.find("LAST"); last != std::string::npos) {
      const int stages = request.plan().pipelines(0).template_().stages_size();
      field.replace(last, 4, std::to_string(stages - 1));
    }
    Check(row, doc, Replan(request), field);
  }
}

TEST_F(ErrorTableTest, EveryPlanTemplatesRowGivesItsCodeAndFieldPath) {
  const std::string doc = ReadDoc();
  for (const TemplatesRow& row : TemplatesRows()) {
    pb::PlanTemplatesRequest request = TemplatesRequest();
    row.mutate(&request);
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
    pb::PlanTemplatesResponse response;
    Check(row, doc, served_.stub->PlanTemplates(&context, request, &response), row.field);
  }
}

TEST_F(ErrorTableTest, RowsNotDrivenOverTheApiAreStillDocumented) {
  const std::string doc = ReadDoc();
  for (const char* piece : kNotOverTheApi) EXPECT_FALSE(DocRow(doc, piece).empty()) << piece;
}

}  // namespace
}  // namespace oobleck::server
