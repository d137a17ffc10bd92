// Hand-made answers of the Planner service for the client tests: a small mixed plan with
// a node id that needs escaping, a replan of it after one failure, templates, and a plan
// of many identical pipelines.
#ifndef OOBLECK_TESTS_CLIENT_ANSWERS_H_
#define OOBLECK_TESTS_CLIENT_ANSWERS_H_

#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "oobleck/planner/v1/planner.pb.h"

namespace oobleck::client::testing {

namespace pb = ::oobleck::planner::v1;

// A node id a user might send: every XML special character.
inline const std::string kHostileId = "<h100&\"2'>";

inline pb::Stage MakeStage(int begin, int end, int node_index, const std::string& type, int gpus,
                           double forward_ms, double backward_ms, double cost_ms) {
  pb::Stage s;
  s.set_layer_begin(begin);
  s.set_layer_end(end);
  s.set_node_index(node_index);
  s.set_node_type(type);
  s.set_gpus(gpus);
  s.set_forward_ms(forward_ms);
  s.set_backward_ms(backward_ms);
  s.set_cost_ms(cost_ms);
  return s;
}

// 1f1b: T(M) = Σc + (M-1)·max c.
inline double PipelineMs(const pb::PipelineTemplate& t, int microbatches) {
  double sum = 0, max = 0;
  for (const pb::Stage& s : t.stages()) {
    sum += s.cost_ms();
    max = std::max(max, s.cost_ms());
  }
  return sum + (microbatches - 1) * max;
}

inline pb::PipelineTemplate MixedTemplate(int microbatches) {
  pb::PipelineTemplate t;
  t.set_num_nodes(2);
  t.set_num_gpus(4);
  t.set_mix_label("1xv100+1xh100");
  t.add_node_order("v100");
  t.add_node_order("h100");
  t.add_derived_gpu_types("v100");
  // Transfers of 5 ms between stages: cost = F + B + X_in + X_out.
  *t.add_stages() = MakeStage(0, 10, 0, "v100", 2, 40, 80, 40 + 80 + 5);
  *t.add_stages() = MakeStage(10, 24, 1, "h100", 1, 30, 60, 30 + 60 + 5 + 5);
  *t.add_stages() = MakeStage(24, 30, 1, "h100", 1, 20, 45, 20 + 45 + 5);
  t.mutable_stages(0)->set_p2p_out_ms(5);
  t.mutable_stages(1)->set_p2p_out_ms(5);
  t.set_iteration_time_ms(PipelineMs(t, microbatches));
  t.set_microbatches(microbatches);
  return t;
}

inline pb::PipelineTemplate SingleNodeTemplate(int microbatches) {
  pb::PipelineTemplate t;
  t.set_num_nodes(1);
  t.set_num_gpus(2);
  t.set_mix_label("1xh100");
  t.add_node_order("h100");
  *t.add_stages() = MakeStage(0, 30, 0, "h100", 2, 50, 100, 150);
  t.set_iteration_time_ms(PipelineMs(t, microbatches));
  t.set_microbatches(microbatches);
  return t;
}

inline pb::PlanRequest Cluster(const std::vector<std::pair<std::string, std::string>>& nodes) {
  pb::PlanRequest r;
  r.set_model("gpt-test");
  r.set_microbatches(8);
  for (const char* gpu : {"v100", "h100"}) {
    pb::NodeType* t = r.mutable_cluster()->add_node_types();
    t->set_name(gpu);
    t->set_gpu_type(gpu);
    t->set_gpus_per_node(2);
  }
  for (const auto& [id, type] : nodes) {
    pb::Node* n = r.add_nodes();
    n->set_id(id);
    n->set_node_type(type);
  }
  r.add_global_batch(24);
  return r;
}

inline pb::PlannedPipeline Pipeline(const pb::PipelineTemplate& t,
                                    const std::vector<std::string>& ids, int microbatches) {
  pb::PlannedPipeline p;
  *p.mutable_template_() = t;
  for (const std::string& id : ids) p.add_node_ids(id);
  p.set_microbatches(microbatches);
  p.set_time_ms(PipelineMs(t, microbatches));
  return p;
}

// v100-0 + h100-0 run the mixed template, kHostileId runs alone, v100-1 is idle.
inline pb::PlanResponse SamplePlan() {
  pb::PlanResponse r;
  *r.mutable_request() =
      Cluster({{"v100-0", "v100"}, {"v100-1", "v100"}, {"h100-0", "h100"}, {kHostileId, "h100"}});
  r.set_cost_model("1f1b");
  r.add_derived_gpu_types("v100");
  pb::ClusterPlan* plan = r.mutable_plan();
  plan->set_global_batch(24);
  *plan->add_pipelines() = Pipeline(MixedTemplate(8), {"v100-0", "h100-0"}, 13);
  *plan->add_pipelines() = Pipeline(SingleNodeTemplate(8), {kHostileId}, 11);
  plan->set_pipeline_time_ms(std::max(plan->pipelines(0).time_ms(), plan->pipelines(1).time_ms()));
  plan->set_allreduce_ms(12.5);
  plan->set_iteration_time_ms(plan->pipeline_time_ms() + plan->allreduce_ms());
  pb::IdleNode* idle = plan->add_idle_nodes();
  idle->set_node_id("v100-1");
  idle->set_node_type("v100");
  idle->set_reason("no feasible template <with> this node & the others");
  return r;
}

// h100-0 failed: v100-0 + v100-1 take over layers, v100-1 fetches [10,30) from kHostileId.
inline pb::ReplanResponse SampleReplan() {
  const pb::PlanResponse before = SamplePlan();
  pb::ReplanResponse r;
  *r.mutable_request() = Cluster({{"v100-0", "v100"}, {"v100-1", "v100"}, {kHostileId, "h100"}});
  pb::PipelineTemplate two_v100;
  two_v100.set_num_nodes(2);
  two_v100.set_num_gpus(4);
  two_v100.set_mix_label("2xv100");
  two_v100.add_node_order("v100");
  two_v100.add_node_order("v100");
  two_v100.add_derived_gpu_types("v100");
  *two_v100.add_stages() = MakeStage(0, 10, 0, "v100", 2, 40, 80, 125);
  *two_v100.add_stages() = MakeStage(10, 30, 1, "v100", 2, 60, 120, 185);
  two_v100.set_iteration_time_ms(PipelineMs(two_v100, 8));
  pb::ClusterPlan* plan = r.mutable_plan();
  plan->set_global_batch(24);
  *plan->add_pipelines() = Pipeline(two_v100, {"v100-0", "v100-1"}, 10);
  *plan->add_pipelines() = Pipeline(SingleNodeTemplate(8), {kHostileId}, 14);
  plan->set_pipeline_time_ms(plan->pipelines(0).time_ms());
  plan->set_allreduce_ms(12.5);
  plan->set_iteration_time_ms(plan->pipeline_time_ms() + plan->allreduce_ms());
  r.set_old_iteration_time_ms(before.plan().iteration_time_ms());
  pb::LayerCopy* copy = r.add_copies();
  copy->set_dest_node_id("v100-1");
  copy->set_source_node_id(kHostileId);
  copy->set_layer_begin(10);
  copy->set_layer_end(30);
  copy->set_param_bytes(1.5e9);
  r.set_copy_bytes(1.5e9);
  r.set_strategy("optimal");
  r.set_pipelines_kept(1);
  return r;
}

inline pb::PlanTemplatesResponse SampleTemplates(int microbatches) {
  pb::PlanTemplatesResponse r;
  r.set_cost_model("1f1b");
  pb::MixTemplate* infeasible = r.add_results();
  infeasible->set_mix_label("1xv100");
  infeasible->set_infeasible_reason("the mix has 32.00 GiB of GPU memory & needs 38.24 GiB");
  for (const pb::PipelineTemplate& t :
       {SingleNodeTemplate(microbatches), MixedTemplate(microbatches)}) {
    pb::MixTemplate* m = r.add_results();
    m->set_mix_label(t.mix_label());
    m->set_feasible(true);
    *m->mutable_template_() = t;
  }
  return r;
}

// `pipelines` one-node pipelines "n-000", "n-001", ... of the same template and share.
inline pb::PlanResponse ManyPipelinesPlan(int pipelines) {
  pb::PlanResponse r;
  std::vector<std::pair<std::string, std::string>> nodes;
  for (int i = 0; i < pipelines; ++i) nodes.push_back({absl::StrFormat("n-%03d", i), "h100"});
  *r.mutable_request() = Cluster(nodes);
  r.set_cost_model("1f1b");
  pb::ClusterPlan* plan = r.mutable_plan();
  plan->set_global_batch(8 * pipelines);
  for (const auto& node : nodes)
    *plan->add_pipelines() = Pipeline(SingleNodeTemplate(8), {node.first}, 8);
  plan->set_pipeline_time_ms(plan->pipelines(0).time_ms());
  plan->set_iteration_time_ms(plan->pipeline_time_ms());
  return r;
}

}  // namespace oobleck::client::testing

#endif  // OOBLECK_TESTS_CLIENT_ANSWERS_H_
