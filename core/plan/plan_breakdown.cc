#include "core/plan/plan_breakdown.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/field_path.h"
#include "core/plan/evaluate_plan.h"
#include "core/plan_search/allreduce.h"
#include "core/plan_search/batch_split.h"
#include "core/status_macros.h"

namespace oobleck {
namespace {

// The fill and drain and the transfers of pipeline `p` (evaluated) under "1f1b", whose time
// is M c_k + Σ_{s≠k} c_s with k the first slowest stage.
void OneFOneBParts(const PlannedPipeline& p, PlanBreakdown* out) {
  const std::vector<Stage>& stages = p.tmpl.stages;
  const int S = static_cast<int>(stages.size());
  int k = 0;
  for (int s = 1; s < S; ++s) {
    if (stages[s].cost_ms > stages[k].cost_ms) k = s;
  }
  auto transfers = [&](int s) {
    return (s > 0 ? stages[s - 1].p2p_out_ms : 0) + stages[s].p2p_out_ms;
  };
  double bubbles = 0, p2p = p.microbatches * transfers(k);
  for (int s = 0; s < S; ++s) {
    if (s == k) continue;
    bubbles += stages[s].cost_ms;
    p2p += transfers(s);
  }
  out->bubbles_ms = bubbles;
  out->p2p_ms = p2p;
}

// Oobleck's t1 + t3 of pipeline `p` under "oobleck-sosp23" (CostModel::PipelineTimeMs).
void Sosp23Parts(const CostModel& model, const PlannedPipeline& p, PlanBreakdown* out) {
  const CostModel::PipelineTimeParts parts = model.TimeParts(StageCosts(p.tmpl));
  out->bubbles_ms = parts.stages == 1 ? 2 * parts.max_ms : parts.sum_ms + parts.tail_ms;
}

// Plan's figures for objective "oobleck-instantiation" (core/oobleck_plan.cc): T_t × b_t per
// pipeline, plus layer 0's all-reduce across the pipelines in the nodes' type's profile.
absl::Status TimeAsOobleck(const CostModel& model, const NodeSet& nodes, ClusterPlan* plan) {
  const int type = nodes.nodes()[nodes.index().at(plan->pipelines[0].node_ids[0])].type;
  plan->pipeline_time_ms = 0;
  for (size_t i = 0; i < plan->pipelines.size(); ++i) {
    PlannedPipeline& p = plan->pipelines[i];
    for (int t : p.tmpl.node_order) {
      if (t == type) continue;
      return InvalidField(absl::StrCat("plan.pipelines[", i, "]"),
                          absl::StrCat(" has a ", model.node_type(t).name,
                                       " node but pipelines[0] "
                                       "a ",
                                       model.node_type(type).name,
                                       " node; objective "
                                       "\"oobleck-instantiation\" needs nodes of one node type"));
    }
    p.time_ms = p.tmpl.iteration_time_ms * p.microbatches;
    plan->pipeline_time_ms = std::max(plan->pipeline_time_ms, p.time_ms);
  }
  const int P = static_cast<int>(plan->pipelines.size());
  const auto& layer0 = model.problem().profiles[type]->layers[0].allreduce_across_nodes_ms;
  auto it = layer0.find(P);
  if (it == layer0.end()) {
    return FieldError(
        absl::StatusCode::kFailedPrecondition, "plan.pipelines",
        absl::StrFormat(": %d pipelines, but the %s profile's layers[0].allreduce_across_nodes_ms "
                        "has no entry for %d, which objective \"oobleck-instantiation\" times "
                        "the all-reduce with",
                        P, model.node_type(type).name, P));
  }
  plan->allreduce_ms = it->second;
  plan->iteration_time_ms = plan->pipeline_time_ms + plan->allreduce_ms;
  return InField(CheckPlanTimes(*plan), "plan");
}

// Per GPU of every stage: the model's memory with the pipeline's own share in flight.
void AddMemory(const CostModel& model, PlanBreakdown* out) {
  for (size_t i = 0; i < out->plan.pipelines.size(); ++i) {
    const PlannedPipeline& p = out->plan.pipelines[i];
    const int S = static_cast<int>(p.tmpl.stages.size());
    for (int s = 0; s < S; ++s) {
      const Stage& st = p.tmpl.stages[s];
      StageGpuMemory m;
      m.pipeline = static_cast<int>(i);
      m.stage = s;
      m.node_type = st.node_type;
      m.node_id = p.node_ids[st.node_index];
      m.gpus = st.gpus;
      m.in_flight = std::min(p.microbatches, S - s);
      const CostModel::GpuMemoryParts parts =
          model.MemoryParts(st.node_type, st.gpus, st.layer_begin, st.layer_end, m.in_flight);
      m.training_state_bytes = parts.training_state_bytes;
      m.activation_bytes = parts.activation_bytes;
      out->peak_memory_bytes = std::max(out->peak_memory_bytes, m.total_bytes());
      out->memory.push_back(std::move(m));
    }
  }
}

}  // namespace

absl::StatusOr<PlanBreakdown> BreakDownPlan(const CostModel& model, const NodeSet& nodes,
                                            ClusterPlan plan, PlanObjective objective) {
  RETURN_IF_ERROR(CheckNodeSetFits(model, nodes));
  const int P = static_cast<int>(plan.pipelines.size());
  absl::StatusOr<ClusterPlan> evaluated =
      EvaluatePlanOnValidNodes(model, nodes, std::move(plan), CrossPipelineAllreduceMs(model, P));
  if (!evaluated.ok()) return InField(evaluated.status(), "plan");
  PlanBreakdown out;
  out.plan = *std::move(evaluated);
  const bool oobleck = objective == PlanObjective::kOobleckInstantiation;
  if (oobleck) RETURN_IF_ERROR(TimeAsOobleck(model, nodes, &out.plan));
  out.iteration_time_ms = out.plan.iteration_time_ms;
  out.pipeline_ms = out.plan.pipeline_time_ms;
  out.sync_ms = out.plan.allreduce_ms;
  for (size_t i = 0; i < out.plan.pipelines.size(); ++i) {
    if (out.plan.pipelines[i].time_ms != out.pipeline_ms) continue;
    out.slowest_pipeline = static_cast<int>(i);
    break;
  }
  const PlannedPipeline& slowest = out.plan.pipelines[out.slowest_pipeline];
  if (!oobleck && model.kind() == CostModelKind::kOneFOneB) OneFOneBParts(slowest, &out);
  if (!oobleck && model.kind() == CostModelKind::kOobleckSosp23) Sosp23Parts(model, slowest, &out);
  AddMemory(model, &out);
  return out;
}

}  // namespace oobleck
