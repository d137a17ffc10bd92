// server/proto_conversion: plans to messages and back, on the hundreds-of-pipelines path
// that Replan converts on every call.
#include "server/proto_conversion.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "google/protobuf/arena.h"
#include "gtest/gtest.h"

namespace oobleck::server {
namespace {

using ::testing::HasSubstr;

PlanningProblem TwoTypes() {
  PlanningProblem problem;
  problem.node_types = {{"a100", "a100", 4, 40e9, 25e9}, {"v100", "v100", 4, 16e9, 25e9}};
  problem.derived_from = {"", "a100"};
  return problem;
}

// A template of `mix` with one stage per node, stage k costing `cost + k`.
PipelineTemplate Template(const NodeMix& mix, double cost) {
  PipelineTemplate t;
  t.mix = mix;
  int layer = 0;
  for (int type = 0; type < static_cast<int>(mix.size()); ++type) {
    for (int n = 0; n < mix[type]; ++n) {
      Stage s;
      s.layer_begin = layer;
      s.layer_end = layer += 5;
      s.node_index = static_cast<int>(t.node_order.size());
      s.node_type = type;
      s.gpus = 4;
      s.cost_ms = cost + s.node_index;
      s.forward_ms = s.cost_ms / 3;
      s.backward_ms = 2 * s.cost_ms / 3;
      t.stages.push_back(s);
      t.node_order.push_back(type);
    }
  }
  t.iteration_time_ms = 10 * cost;
  return t;
}

PlannedPipeline Pipeline(const PipelineTemplate& t, const std::string& prefix) {
  PlannedPipeline p;
  p.tmpl = t;
  for (int i = 0; i < t.num_nodes(); ++i) p.node_ids.push_back(prefix + std::to_string(i));
  p.microbatches = 2;
  p.time_ms = t.iteration_time_ms;
  return p;
}

// Pipelines that share a mix but not their template must each get their own: ToProtoPlan
// converts each distinct template once and copies it, so it must tell them apart by every
// field, not by the mix.
TEST(ProtoConversionTest, EachPipelineGetsItsOwnTemplateWhenMixesRepeat) {
  const PlanningProblem problem = TwoTypes();
  const PipelineTemplate t1 = Template({1, 1}, 7), t3 = Template({0, 2}, 4);
  PipelineTemplate t2 = t1;
  t2.stages[1].memory_bytes_per_gpu = 1;  // one field of one stage differs
  ClusterPlan plan;
  plan.global_batch = 10;
  plan.pipelines = {Pipeline(t1, "p0-"), Pipeline(t2, "p1-"), Pipeline(t1, "p2-"),
                    Pipeline(t3, "p3-"), Pipeline(t2, "p4-")};
  plan.idle = {{"idle-0", 1, "not used"}};
  google::protobuf::Arena arena;
  auto* out = google::protobuf::Arena::CreateMessage<pb::ClusterPlan>(&arena);
  ToProtoPlan(plan, problem, out);
  ASSERT_EQ(out->pipelines_size(), 5);
  for (int i = 0; i < 5; ++i) {
    pb::PipelineTemplate expected;
    ToProtoTemplate(plan.pipelines[i].tmpl, problem, &expected);
    EXPECT_EQ(out->pipelines(i).template_().SerializeAsString(), expected.SerializeAsString())
        << "pipeline " << i;
    EXPECT_EQ(out->pipelines(i).node_ids(0), plan.pipelines[i].node_ids[0]);
  }
  EXPECT_NE(out->pipelines(0).template_().SerializeAsString(),
            out->pipelines(1).template_().SerializeAsString());
  EXPECT_EQ(out->idle_nodes(0).node_type(), "v100");

  // And back: the same shapes, ids and shares.
  absl::StatusOr<ClusterPlan> back = FromProtoPlan(*out, problem, "plan");
  ASSERT_TRUE(back.ok()) << back.status();
  ASSERT_EQ(back->pipelines.size(), plan.pipelines.size());
  for (size_t i = 0; i < plan.pipelines.size(); ++i) {
    EXPECT_EQ(back->pipelines[i].tmpl.mix, plan.pipelines[i].tmpl.mix);
    EXPECT_EQ(back->pipelines[i].tmpl.node_order, plan.pipelines[i].tmpl.node_order);
    EXPECT_EQ(back->pipelines[i].node_ids, plan.pipelines[i].node_ids);
    EXPECT_EQ(back->pipelines[i].tmpl.stages.size(), plan.pipelines[i].tmpl.stages.size());
    EXPECT_EQ(back->pipelines[i].microbatches, 2);
  }
  EXPECT_EQ(back->idle[0].type, 1);
}

TEST(ProtoConversionTest, UnknownTypeNamesInAPlanNameTheirField) {
  const PlanningProblem problem = TwoTypes();
  ClusterPlan plan;
  plan.pipelines = {Pipeline(Template({1, 0}, 3), "a"), Pipeline(Template({1, 1}, 3), "b")};
  pb::ClusterPlan message;
  ToProtoPlan(plan, problem, &message);
  pb::ClusterPlan bad_stage = message;
  bad_stage.mutable_pipelines(1)->mutable_template_()->mutable_stages(1)->set_node_type("h100");
  absl::Status status = FromProtoPlan(bad_stage, problem, "plan").status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(),
              HasSubstr("plan.pipelines[1].template.stages[1].node_type \"h100\" is not a node "
                        "type of the cluster"));
  pb::ClusterPlan bad_order = message;
  bad_order.mutable_pipelines(0)->mutable_template_()->set_node_order(0, "");
  status = FromProtoPlan(bad_order, problem, "plan").status();
  EXPECT_THAT(status.message(), HasSubstr("plan.pipelines[0].template.node_order[0]"));
  pb::ClusterPlan no_template = message;
  no_template.mutable_pipelines(1)->clear_template_();
  status = FromProtoPlan(no_template, problem, "plan").status();
  EXPECT_THAT(status.message(), HasSubstr("plan.pipelines[1].template is required"));
}

}  // namespace
}  // namespace oobleck::server
