// The pipeline-set problem a plan search solves and its solution; the search itself is
// core/plan_search/pipeline_set_search.h (docs/architecture/plan-search.md).
#ifndef OOBLECK_CORE_PLAN_PIPELINE_SET_H_
#define OOBLECK_CORE_PLAN_PIPELINE_SET_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/cost_model.h"
#include "core/plan/objective.h"
#include "core/plan/pipeline_shape.h"
#include "core/search.h"

namespace oobleck {

// How SolvePipelineSet decides, for one makespan, which pipelines to use
// (docs/architecture/plan-search.md). Both are exact.
enum class PlanSearchMethod {
  kAuto,         // the DP where its table is small, else the integer program
  kNodeCountDp,  // a DP over every vector of used node counts: prod(n_t + 1) states
  kCoverIlp,     // an integer program per makespan (core/plan_search/cover_ilp.h)
};

// The exact search (docs/architecture/plan-search.md): choose a multiset of shapes using at most
// `available` nodes, in addition to the `fixed` pipelines every solution keeps, and split
// the batch, minimising max T + allreduce_ms[P]. allreduce_ms must be non-decreasing and
// cover P up to fixed + available nodes.
struct PipelineSetProblem {
  const CostModel* model = nullptr;
  NodeMix available;
  std::vector<PipelineShape> shapes;
  // When set, the shapes the search reads instead of `shapes` (which stays empty): several
  // problems over the same shapes (Replan's concurrent searches) share them read-only.
  const std::vector<PipelineShape>* shared_shapes = nullptr;
  const std::vector<PipelineShape>& Shapes() const {
    return shared_shapes != nullptr ? *shared_shapes : shapes;
  }
  std::vector<PipelineShape> fixed;
  int global_batch = 0;
  const std::vector<double>* allreduce_ms = nullptr;
  SearchOptions search;
  // A makespan (ms) the answer is probably near, e.g. the current plan's when replanning;
  // it orders the search (0: none) and never changes the answer.
  double makespan_hint_ms = 0;
  // The fewest pipelines in all (fixed + new) a plan may have, e.g. f + 1 to survive f
  // failures; 0 or 1: no minimum. Needs the integer program (kAuto picks it).
  int min_pipelines = 0;
  PlanSearchMethod method = PlanSearchMethod::kAuto;
  // Branch-and-bound nodes each integer program may use; past it the search keeps the best
  // plan it has and reports the gap it can prove (PipelineSetSolution::optimality_gap).
  int64_t max_ilp_nodes = 20000;
  // Names the minimum in the error when no plan reaches it (e.g. "fault_tolerance = 2").
  std::string min_pipelines_reason;
  // Prices (docs/architecture/plan-search.md#cost-aware-plans): per node type in PriceSteps (empty:
  // all 0). kCost minimises price x iteration time; max_price_steps >= 0 is a budget on
  // the price of every node the plan uses (fixed pipelines included). Both need the
  // integer program.
  PlanObjective objective = PlanObjective::kTime;
  std::vector<int64_t> type_price_steps{};
  int64_t max_price_steps = -1;
  // The budget as the request gave it (for messages; max_price_steps rounds it down).
  double budget_per_hour = 0;
  // Makespans the kCost search may evaluate (each one or a few integer programs); past
  // it the search keeps its best plan and reports the gap it can prove.
  int max_cost_makespans = 4096;
};
struct PipelineSetSolution {
  std::vector<int> chosen;               // shape indices, one per new pipeline
  std::vector<int> fixed_microbatches;   // parallel to problem.fixed
  std::vector<int> chosen_microbatches;  // parallel to chosen
  double pipeline_time_ms = 0;
  double allreduce_ms = 0;
  double iteration_time_ms = 0;
  int evaluations = 0;  // DP passes or integer programs the search needed (for benchmarks)
  // (iteration time - proven lower bound) / iteration time: 0 when proven optimal (always,
  // unless an integer program hit max_ilp_nodes).
  double optimality_gap = 0;
  PlanSearchMethod method = PlanSearchMethod::kAuto;  // the method that ran
  int64_t price_steps = 0;  // of every pipeline's nodes (fixed ones included)
};

// Indices into solution.chosen, larger pipelines first, then by mix (the order plans list
// their pipelines in).
std::vector<size_t> ChosenOrder(const std::vector<PipelineShape>& shapes,
                                const PipelineSetSolution& solution);

}  // namespace oobleck

#endif  // OOBLECK_CORE_PLAN_PIPELINE_SET_H_
