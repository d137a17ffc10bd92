// Plan with objective "oobleck-instantiation" (docs/API.md#instantiate): the cluster's
// templates (the optimal one of every pipeline size min..max) instantiated in Oobleck's
// semantics by core/oobleck_instantiation.h: every node used, one micro-batch count per
// template, iteration time max_t T_t b_t + layer 0's allreduce_across_nodes_ms[P], exact.
// Called by ClusterPlanner::Plan (core/plan/cluster_planner.cc) for that objective.
#ifndef OOBLECK_CORE_OOBLECK_PLAN_H_
#define OOBLECK_CORE_OOBLECK_PLAN_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "core/cost_model.h"
#include "core/plan/node_set.h"
#include "core/plan/pipeline_shape.h"
#include "core/plan/plan_options.h"
#include "core/plan/plan_result.h"
#include "core/plan/template_set.h"

namespace oobleck {

// INVALID_ARGUMENT naming the field unless the request fits Oobleck's semantics: nodes of
// one node type (each template is then a node count, as Oobleck's), budget_per_hour 0 and
// fault_tolerance 0 (every node is used, whatever it costs or protects).
absl::Status ValidateOobleckPlan(const NodeMix& counts, const PlanOptions& options);

// The plan of one global batch size: pipelines bound to `nodes` in their order (larger
// pipelines first), each pipeline's time T_t x b_t, optimality_gap 0; the data-parallel
// figure is Oobleck's too (every node a 1-node pipeline, its batch split the same way).
// `no_shape_reason` is the status message when `shapes` is empty.
BatchSizePlan PlanOobleckBatch(const CostModel& model, const std::vector<ClusterNode>& nodes,
                               const TemplateSet& set, const std::vector<PipelineShape>& shapes,
                               const PlanOptions& options, int global_batch,
                               const std::string& no_shape_reason);

}  // namespace oobleck

#endif  // OOBLECK_CORE_OOBLECK_PLAN_H_
