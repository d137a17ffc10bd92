// Instantiation of a concrete cluster (docs/COST_MODEL.md#plan-iteration-time): a set of
// pipelines, each the optimal template of its node mix bound to concrete node ids, and the
// split of the global batch across them that minimises the plan's iteration time
//
//   iteration_time = max_i T_i(M_i) + allreduce(P),   sum_i M_i = B, M_i >= 1,
//
// exactly with respect to the template set (the optimal template of every mix of
// min..max nodes); see docs/architecture/plan-search.md for the algorithm. Replanning after node
// failures and joins lives in core/replan.h.
//
// Implemented in core/plan/cluster_planner.cc; the search and its numbers are in
// core/plan_search/ (pipeline_set_search.h, batch_split.h, allreduce.h).
#ifndef OOBLECK_CORE_PLAN_CLUSTER_PLANNER_H_
#define OOBLECK_CORE_PLAN_CLUSTER_PLANNER_H_

#include <vector>

#include "absl/status/statusor.h"
#include "core/cost_model.h"
#include "core/plan/node_set.h"
#include "core/plan/plan_options.h"
#include "core/plan/plan_result.h"
#include "core/template_planner.h"

namespace oobleck {

class ClusterPlanner {
 public:
  // `templates` (and its cache) must outlive the planner. threads <= 0: all cores.
  ClusterPlanner(TemplatePlanner* templates, int threads);

  // Plans `nodes` for every global batch size (in parallel). The templates of every mix
  // come from the shared cache or one search.
  absl::StatusOr<PlanResult> Plan(const CostModel& model, const NodeSet& nodes,
                                  const std::vector<int>& global_batches,
                                  const PlanOptions& options) const;
  // The same for nodes not checked yet (NodeSet::Create).
  absl::StatusOr<PlanResult> Plan(const CostModel& model, const std::vector<ClusterNode>& nodes,
                                  const std::vector<int>& global_batches,
                                  const PlanOptions& options) const;

  TemplatePlanner* templates() const { return templates_; }
  int threads() const { return threads_; }

 private:
  TemplatePlanner* templates_;
  int threads_;
};

}  // namespace oobleck

#endif  // OOBLECK_CORE_PLAN_CLUSTER_PLANNER_H_
