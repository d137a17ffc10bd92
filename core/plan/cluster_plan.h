// A plan of a concrete cluster: its pipelines bound to node ids, its idle nodes and its
// figures (docs/COST_MODEL.md#plan-iteration-time).
#ifndef OOBLECK_CORE_PLAN_CLUSTER_PLAN_H_
#define OOBLECK_CORE_PLAN_CLUSTER_PLAN_H_

#include <algorithm>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "core/pipeline_template.h"

namespace oobleck {

struct PlannedPipeline {
  PipelineTemplate tmpl;              // evaluated; figures at the problem's M
  std::vector<std::string> node_ids;  // node_ids[i] runs template position i
  int microbatches = 0;               // this pipeline's share M_i of the global batch
  double time_ms = 0;                 // T_i(M_i)
};

struct IdleNode {
  std::string id;
  int type = 0;
  std::string reason;
};

struct ClusterPlan {
  int global_batch = 0;  // B, in micro-batches
  std::vector<PlannedPipeline> pipelines;
  std::vector<IdleNode> idle;
  double pipeline_time_ms = 0;   // max_i T_i(M_i)
  double allreduce_ms = 0;       // cross-pipeline gradient all-reduce for P pipelines
  double iteration_time_ms = 0;  // the sum of both
  // Sum of the price_per_hour of the nodes the pipelines use (idle nodes are free); 0
  // when the request gave no prices.
  double price_per_hour = 0;

  // The most simultaneous node failures after which every layer still has a replica on a
  // surviving node: pipelines - 1 (docs/COST_MODEL.md#fault-tolerance).
  int fault_tolerance() const { return std::max(0, static_cast<int>(pipelines.size()) - 1); }
};

// OK when the plan's iteration time is finite and > 0, what every answer carries
// (docs/ERRORS.md). The cost model's bounds (CostModel::CheckFinite) keep compute and
// measured all-reduces in range; an all-reduce across pipelines with neither a measurement
// nor a bandwidth (oobleck-sosp23, inter_node_bytes_per_s = 0) is infinite:
// FAILED_PRECONDITION naming the fields.
absl::Status CheckPlanTimes(const ClusterPlan& plan);

}  // namespace oobleck

#endif  // OOBLECK_CORE_PLAN_CLUSTER_PLAN_H_
