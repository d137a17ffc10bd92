// What ClusterPlanner::Plan answers: one plan per global batch size.
#ifndef OOBLECK_CORE_PLAN_PLAN_RESULT_H_
#define OOBLECK_CORE_PLAN_PLAN_RESULT_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "core/plan/cluster_plan.h"
#include "core/plan/limits.h"

namespace oobleck {

// One global batch size of a Plan request.
struct BatchSizePlan {
  int global_batch = 0;
  absl::Status status;  // not OK: no plan for this size; the message says why
  ClusterPlan plan;     // when status is OK
  // Every node a 1-node pipeline (the optimal 1-node template of its type), the batch split
  // optimally: the data-parallel baseline; unset with a reason when it does not exist.
  std::optional<double> data_parallel_ms;
  std::string data_parallel_unavailable;
  double speedup = 0;  // data_parallel_ms / plan.iteration_time_ms (0 when unavailable)
  // (iteration time - proven lower bound) / iteration time; 0 = proven optimal w.r.t. the
  // template set (see PipelineSetSolution::optimality_gap).
  double optimality_gap = 0;
};

struct PlanResult {
  std::vector<BatchSizePlan> sizes;  // in request order
  PipelineSizeLimits limits;         // effective limits
  int mixes_planned = 0;
  int mixes_from_cache = 0;
};

}  // namespace oobleck

#endif  // OOBLECK_CORE_PLAN_PLAN_RESULT_H_
