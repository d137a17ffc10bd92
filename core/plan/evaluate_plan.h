// A plan given back by a caller, checked against its cluster and its figures recomputed.
#ifndef OOBLECK_CORE_PLAN_EVALUATE_PLAN_H_
#define OOBLECK_CORE_PLAN_EVALUATE_PLAN_H_

#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "core/cost_model.h"
#include "core/plan/cluster_plan.h"
#include "core/plan/node_set.h"

namespace oobleck {

// Recomputes a plan's figures (times, shares kept) after checking it is a valid plan over
// `nodes`: every pipeline's template evaluates under `model`, its node ids exist, have the
// template's node types and appear once; shares are >= 1, sum to global_batch and fit
// memory. Idle nodes are the ones in no pipeline (reasons kept where given).
absl::StatusOr<ClusterPlan> EvaluatePlan(const CostModel& model,
                                         const std::vector<ClusterNode>& nodes, ClusterPlan plan);

// EvaluatePlan for a caller that holds the checked nodes and
// CrossPipelineAllreduceMs of the model (entries past the plan's pipeline count are not read):
// Replan, which needs all three anyway at thousands of nodes. `placement`, when given and
// the plan is valid: per node, the (pipeline, position) that runs it, {-1, -1} if none (what
// the check looked up, so that Replan does not look every id up again).
absl::StatusOr<ClusterPlan> EvaluatePlanOnValidNodes(
    const CostModel& model, const NodeSet& nodes, ClusterPlan plan,
    const std::vector<double>& allreduce_ms, std::vector<std::pair<int, int>>* placement = nullptr);

}  // namespace oobleck

#endif  // OOBLECK_CORE_PLAN_EVALUATE_PLAN_H_
