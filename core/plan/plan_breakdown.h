// What one of our plans' iteration time is made of, and what each of its GPUs holds, under
// the cost model and objective that made it (docs/COST_MODEL.md#breakdown-of-a-plan): the
// Evaluate RPC for a Plan or Replan answer. The plan is checked and its figures recomputed
// by EvaluatePlan (core/plan/evaluate_plan.h), so they are the ones Plan and Replan report.
#ifndef OOBLECK_CORE_PLAN_PLAN_BREAKDOWN_H_
#define OOBLECK_CORE_PLAN_PLAN_BREAKDOWN_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/cost_model.h"
#include "core/plan/cluster_plan.h"
#include "core/plan/node_set.h"
#include "core/plan/objective.h"

namespace oobleck {

// One GPU of one stage of one pipeline, bytes (CostModel::MemoryParts).
struct StageGpuMemory {
  int pipeline = 0;
  int stage = 0;
  int node_type = 0;
  std::string node_id;  // the node the stage runs on
  int gpus = 1;         // the stage's GPUs on that node
  int in_flight = 0;    // micro-batches of activations kept: min(share, stages from the end)
  double training_state_bytes = 0;
  double activation_bytes = 0;
  double total_bytes() const { return training_state_bytes + activation_bytes; }
};

// A part of the time the cost model does not have is nullopt, never a zero.
struct PlanBreakdown {
  ClusterPlan plan;          // the plan with every figure recomputed
  int slowest_pipeline = 0;  // the first pipeline whose time_ms is plan.pipeline_time_ms
  // plan.iteration_time_ms = pipeline_ms + sync_ms, plan.pipeline_time_ms, plan.allreduce_ms
  double iteration_time_ms = 0;
  double pipeline_ms = 0;
  double sync_ms = 0;
  // Parts of pipeline_ms. 1f1b: the fill and drain of the slowest pipeline, Σ_s c_s − c_k
  // (k its slowest stage, the first of equals), and its point-to-point transfers,
  // M_i (X_{k−1} + X_k) + Σ_{s≠k} (X_{s−1} + X_s). oobleck-sosp23: Oobleck's t1 + t3
  // (Σ c + Σ_{s≥k*} c, or 2c for one stage); no transfers. Objective
  // "oobleck-instantiation" (T_t × b_t): neither.
  std::optional<double> bubbles_ms;
  std::optional<double> p2p_ms;
  // The optimizer update: none of our cost models has one.
  std::optional<double> update_ms;
  std::vector<StageGpuMemory> memory;  // by pipeline, then stage
  double peak_memory_bytes = 0;
};

// Checks `plan` over `nodes` (EvaluatePlanOnValidNodes; errors name fields under "plan.")
// and breaks it down. With objective kOobleckInstantiation the times are Oobleck's, as Plan
// reports them for that objective: each pipeline's template time × its share, plus layer 0's
// allreduce_across_nodes_ms for the pipeline count (FAILED_PRECONDITION naming
// "plan.pipelines" when the profile has no entry for it); the nodes must be of one type.
absl::StatusOr<PlanBreakdown> BreakDownPlan(const CostModel& model, const NodeSet& nodes,
                                            ClusterPlan plan, PlanObjective objective);

}  // namespace oobleck

#endif  // OOBLECK_CORE_PLAN_PLAN_BREAKDOWN_H_
