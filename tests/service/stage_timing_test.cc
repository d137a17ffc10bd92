// The stage timing the pictures draw from (Stage.p2p_out_ms, PipelineTemplate.microbatches)
// in the Plan, Replan and PlanTemplates answers over a real channel: set, and equal to
// core's own figures (CostModel::Evaluate of the same template under the same model).
#include <grpcpp/grpcpp.h>

#include <chrono>
#include <string>
#include <vector>

#include "core/cost_model.h"
#include "core/pipeline_template.h"
#include "core/plan/cluster_plan.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "oobleck/planner/v1/planner.grpc.pb.h"
#include "server/cluster_setup.h"
#include "server/proto_conversion.h"
#include "tests/service/served_planner.h"
#include "tests/service/test_load_root.h"
#include "tests/service/three_type_request.h"

namespace oobleck::server {
namespace {

namespace pb = ::oobleck::planner::v1;

constexpr char kExampleDir[] = OOBLECK_SOURCE_DIR "/examples/profiles/gpt2-xl/rtx4090";

template <typename Request, typename Response, typename Call>
Response CallOk(ServedPlanner& planner, Call call, const Request& request) {
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
  Response response;
  const grpc::Status status = ((*planner.stub).*call)(&context, request, &response);
  EXPECT_TRUE(status.ok()) << status.error_message();
  return response;
}

// Every pipeline's template of `plan` carries M and each stage's p2p time exactly as core
// computes them for that template; the 1f1b stage cost holds them (c = F + B + X_in + X_out).
void ExpectCoresStageTiming(const pb::ClusterPlan& plan, const CostModel& model) {
  ASSERT_GT(plan.pipelines_size(), 0);
  absl::StatusOr<ClusterPlan> core_plan = FromProtoPlan(plan, model.problem(), "plan");
  ASSERT_TRUE(core_plan.ok()) << core_plan.status();
  int transfers = 0;
  for (int i = 0; i < plan.pipelines_size(); ++i) {
    const pb::PipelineTemplate& sent = plan.pipelines(i).template_();
    ASSERT_TRUE(sent.has_microbatches()) << "pipelines[" << i << "]";
    EXPECT_EQ(sent.microbatches(), model.problem().microbatches);
    absl::StatusOr<PipelineTemplate> evaluated = model.Evaluate(core_plan->pipelines[i].tmpl);
    ASSERT_TRUE(evaluated.ok()) << evaluated.status();
    ASSERT_EQ(sent.stages_size(), static_cast<int>(evaluated->stages.size()));
    double before = 0;
    for (int s = 0; s < sent.stages_size(); ++s) {
      const pb::Stage& st = sent.stages(s);
      EXPECT_EQ(st.p2p_out_ms(), evaluated->stages[s].p2p_out_ms) << i << "/" << s;
      EXPECT_NEAR(st.cost_ms(), st.forward_ms() + st.backward_ms() + before + st.p2p_out_ms(),
                  1e-9 * st.cost_ms());
      before = st.p2p_out_ms();
      transfers += st.p2p_out_ms() > 0;
    }
    EXPECT_EQ(sent.stages(sent.stages_size() - 1).p2p_out_ms(), 0);
  }
  EXPECT_GT(transfers, 0) << "the plan should have pipelines of several stages";
}

TEST(StageTimingTest, PlanReplanAndTemplatesAnswersCarryCoresStageTiming) {
  ServedPlanner planner;
  ASSERT_TRUE(planner.Start(WithTestLoadRoot()).ok());
  ASSERT_TRUE(planner.LoadExampleProfile(kExampleDir).ok());
  pb::PlanRequest request = testing::ThreeTypeRequest({64});
  request.set_min_nodes_per_pipeline(2);  // pipelines of several stages, so transfers
  absl::StatusOr<ClusterSetup> setup = ToClusterSetup(request, planner.catalog, "");
  ASSERT_TRUE(setup.ok()) << setup.status();
  const CostModel& model = *setup->model;

  const pb::PlanResponse plan =
      CallOk<pb::PlanRequest, pb::PlanResponse>(planner, &pb::Planner::Stub::Plan, request);
  ExpectCoresStageTiming(plan.plan(), model);

  pb::ReplanRequest replan;
  *replan.mutable_request() = request;
  *replan.mutable_plan() = plan.plan();
  replan.add_failed_node_ids(plan.plan().pipelines(0).node_ids(0));
  const pb::ReplanResponse replanned =
      CallOk<pb::ReplanRequest, pb::ReplanResponse>(planner, &pb::Planner::Stub::Replan, replan);
  ExpectCoresStageTiming(replanned.plan(), model);

  pb::PlanTemplatesRequest templates;
  templates.set_model(request.model());
  templates.set_microbatches(request.microbatches());
  templates.set_missing_allreduce_in_node(request.missing_allreduce_in_node());
  *templates.mutable_cluster() = request.cluster();
  for (pb::NodeType& t : *templates.mutable_cluster()->mutable_node_types()) t.set_count(3);
  for (const std::vector<int>& counts : {std::vector<int>{0, 0, 2}, std::vector<int>{1, 0, 1}}) {
    pb::NodeMix* mix = templates.add_mixes();
    for (int c : counts) mix->add_counts(c);
  }
  const pb::PlanTemplatesResponse answer =
      CallOk<pb::PlanTemplatesRequest, pb::PlanTemplatesResponse>(
          planner, &pb::Planner::Stub::PlanTemplates, templates);
  int feasible = 0;
  for (const pb::MixTemplate& r : answer.results()) {
    if (!r.feasible()) continue;
    ++feasible;
    EXPECT_TRUE(r.template_().has_microbatches());
    EXPECT_EQ(r.template_().microbatches(), 16);
    EXPECT_GT(r.template_().stages(0).p2p_out_ms(), 0) << r.mix_label();  // 2 nodes: inter
  }
  EXPECT_GT(feasible, 0);
}

}  // namespace
}  // namespace oobleck::server
