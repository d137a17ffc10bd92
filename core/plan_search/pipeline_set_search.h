// The exact pipeline-set search (docs/architecture/plan-search.md), implemented in
// pipeline_set_search.cc over the concern files beside it.
#ifndef OOBLECK_CORE_PLAN_SEARCH_PIPELINE_SET_SEARCH_H_
#define OOBLECK_CORE_PLAN_SEARCH_PIPELINE_SET_SEARCH_H_

#include "absl/status/statusor.h"
#include "core/plan/pipeline_set.h"

namespace oobleck {

// FAILED_PRECONDITION when no plan exists (the message says why); RESOURCE_EXHAUSTED when
// kNodeCountDp is asked for a table beyond its bound; CANCELLED.
absl::StatusOr<PipelineSetSolution> SolvePipelineSet(const PipelineSetProblem& problem);

// The most pipelines (fixed + chosen, min_pipelines and prices ignored) of any solution of
// `problem`, capped at `at_most`; 0 when it has none. Exact, at the largest useful makespan,
// by problem.method: the node-count DP (one table fill; kAuto where its table is small) or
// integer programs "at least p pipelines" (one where at_most is reached, else a bisection);
// RESOURCE_EXHAUSTED when one stops at max_ilp_nodes undecided.
absl::StatusOr<int> MaxPipelineCount(const PipelineSetProblem& problem, int at_most);

}  // namespace oobleck

#endif  // OOBLECK_CORE_PLAN_SEARCH_PIPELINE_SET_SEARCH_H_
