#include "core/plan/cluster_planner.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/field_path.h"
#include "core/oobleck_plan.h"
#include "core/plan/cluster_plan.h"
#include "core/plan/fault_tolerance.h"
#include "core/plan/limits.h"
#include "core/plan/pipeline_set.h"
#include "core/plan/pipeline_shape.h"
#include "core/plan/price.h"
#include "core/plan/template_set.h"
#include "core/plan_search/allreduce.h"
#include "core/plan_search/batch_split.h"
#include "core/plan_search/pipeline_set_search.h"
#include "core/status_macros.h"
#include "tbb/parallel_for.h"
#include "tbb/task_arena.h"

namespace oobleck {

namespace {

// UnusedTypeReasons with, for a type whose single node has a template, why that one fails.
std::vector<std::string> UnusableTypeReasons(const CostModel& model, const TemplateSet& set,
                                             const std::vector<PipelineShape>& shapes,
                                             const NodeMix& available,
                                             const PipelineSizeLimits& limits) {
  const int T = model.num_types();
  std::vector<std::string> reasons = UnusedTypeReasons(model, shapes, available, limits);
  for (int t = 0; t < T; ++t) {
    if (reasons[t].empty()) continue;
    const MixResult* single = set.Find(SingleNode(T, t));
    if (single != nullptr && !single->feasible) {
      absl::StrAppend(&reasons[t], " (one node alone: ", single->infeasible_reason, ")");
    } else if (single != nullptr && model.MaxMicrobatches(single->best) < 1) {
      absl::StrAppend(&reasons[t], " (one node alone cannot hold a micro-batch in GPU memory)");
    }
  }
  return reasons;
}

struct DataParallelEstimate {
  std::optional<double> ms;
  std::string unavailable;
};

// Every node a 1-node pipeline, the batch split optimally (COST_MODEL.md).
DataParallelEstimate DataParallel(const CostModel& model, const TemplateSet& set,
                                  const std::vector<ClusterNode>& nodes, const NodeMix& counts,
                                  const std::vector<double>& allreduce_ms, int global_batch) {
  const int T = model.num_types();
  const int N = static_cast<int>(nodes.size());
  DataParallelEstimate out;
  std::vector<std::vector<double>> costs(T);
  std::vector<int> limit(T, 0);
  for (int t = 0; t < T; ++t) {
    if (counts[t] == 0) continue;
    const MixResult* single = set.Find(SingleNode(T, t));
    if (single == nullptr || !single->feasible) {
      out.unavailable =
          absl::StrCat("a 1-node ", model.node_type(t).name, " pipeline has no template",
                       single ? absl::StrCat(": ", single->infeasible_reason) : "");
      return out;
    }
    costs[t] = StageCosts(single->best);
    limit[t] = model.MaxMicrobatches(single->best);
  }
  if (N > global_batch) {
    out.unavailable = absl::StrFormat(
        "%d nodes need at least %d micro-batches (one each), the global batch has %d", N, N,
        global_batch);
    return out;
  }
  std::vector<PipelineLoad> loads;
  loads.reserve(N);
  for (const ClusterNode& node : nodes) loads.push_back({&costs[node.type], limit[node.type]});
  absl::StatusOr<std::vector<int>> split = SplitBatch(model, loads, global_batch);
  if (!split.ok()) {
    out.unavailable = std::string(split.status().message());
    return out;
  }
  double makespan = 0;
  for (int i = 0; i < N; ++i) {
    makespan = std::max(makespan, model.PipelineTimeMs(*loads[i].stage_costs, (*split)[i]));
  }
  if (!std::isfinite(makespan + allreduce_ms[N])) {  // no all-reduce across N: see CheckPlanTimes
    out.unavailable = absl::StrFormat(
        "the all-reduce across %d nodes is infinite (no allreduce_across_nodes_ms for %d and "
        "cluster.inter_node_bytes_per_s = 0)",
        N, N);
    return out;
  }
  out.ms = makespan + allreduce_ms[N];
  return out;
}

// Binds a solution to concrete nodes: pipelines larger first, nodes of each type in the
// order the request lists them.
ClusterPlan BindFreshPlan(const CostModel& model, const std::vector<ClusterNode>& nodes,
                          const std::vector<PipelineShape>& shapes,
                          const PipelineSetSolution& solution, int global_batch,
                          const std::vector<std::string>& type_reasons,
                          const PlanOptions& options) {
  const int T = model.num_types();
  const std::vector<size_t> order = ChosenOrder(shapes, solution);
  std::vector<std::vector<size_t>> queue(T);
  for (size_t i = nodes.size(); i-- > 0;) queue[nodes[i].type].push_back(i);  // back = first
  ClusterPlan plan;
  plan.global_batch = global_batch;
  for (size_t k : order) {
    const PipelineShape& shape = shapes[solution.chosen[k]];
    PlannedPipeline p;
    p.tmpl = *shape.tmpl;
    for (int type : p.tmpl.node_order) {
      p.node_ids.push_back(nodes[queue[type].back()].id);
      queue[type].pop_back();
    }
    p.microbatches = solution.chosen_microbatches[k];
    p.time_ms = model.PipelineTimeMs(shape.stage_costs, p.microbatches);
    plan.pipelines.push_back(std::move(p));
  }
  for (int t = 0; t < T; ++t) {
    for (size_t i = queue[t].size(); i-- > 0;) {
      const ClusterNode& node = nodes[queue[t][i]];
      plan.idle.push_back(
          {node.id, node.type,
           !type_reasons[t].empty() ? type_reasons[t]
           : options.objective == PlanObjective::kCost
               ? "not used: every plan that uses it costs more per iteration"
           : options.budget_per_hour > 0
               ? "not used: every plan that uses it is slower or over budget_per_hour"
               : "not used: every plan that uses it is slower (its pipelines would be slower "
                 "or add all-reduce time)"});
    }
  }
  plan.pipeline_time_ms = solution.pipeline_time_ms;
  plan.allreduce_ms = solution.allreduce_ms;
  plan.iteration_time_ms = solution.iteration_time_ms;
  plan.price_per_hour = PlanPricePerHour(plan, options.price_per_hour);
  return plan;
}

absl::Status ValidateGlobalBatches(const std::vector<int>& global_batches) {
  if (global_batches.empty()) {
    return InvalidField("global_batch", " must list at least one size");
  }
  if (global_batches.size() > static_cast<size_t>(kMaxGlobalBatchSizes)) {
    return InvalidField("global_batch",
                        absl::StrFormat(" must list at most %d sizes (got %d)",
                                        kMaxGlobalBatchSizes, global_batches.size()));
  }
  for (size_t i = 0; i < global_batches.size(); ++i) {
    if (global_batches[i] < 1 || global_batches[i] > kMaxGlobalBatch) {
      return InvalidField(absl::StrFormat("global_batch[%d]", i),
                          absl::StrFormat(" must be in [1, %d] micro-batches (got %d)",
                                          kMaxGlobalBatch, global_batches[i]));
    }
  }
  return absl::OkStatus();
}

// The pipeline-set search of a fresh plan of `counts` nodes for one global batch size.
PipelineSetProblem FreshPlanProblem(const CostModel& model, const NodeMix& counts,
                                    const std::vector<PipelineShape>& shapes,
                                    const std::vector<double>& allreduce_ms,
                                    const PlanOptions& options, int global_batch) {
  PipelineSetProblem problem;
  problem.model = &model;
  problem.available = counts;
  problem.shapes = shapes;
  problem.global_batch = global_batch;
  problem.allreduce_ms = &allreduce_ms;
  problem.search = options.search;
  if (options.fault_tolerance_rule == FaultToleranceRule::kPipelines) {
    problem.min_pipelines = options.fault_tolerance + 1;
    problem.min_pipelines_reason = absl::StrCat("fault_tolerance = ", options.fault_tolerance);
  }
  problem.objective = options.objective;
  for (double price : options.price_per_hour) problem.type_price_steps.push_back(PriceSteps(price));
  // (A budget above every node's price together is no constraint; the cap keeps the
  // steps in range.)
  if (options.budget_per_hour > 0) {
    problem.budget_per_hour = options.budget_per_hour;
    problem.max_price_steps =
        BudgetSteps(std::min(options.budget_per_hour, kMaxPricePerHour * (kMaxClusterNodes + 1)));
  }
  return problem;
}

// Why no plan exists when no template fits any mix: that, and why each type is unusable.
std::string NoShapeReason(const std::vector<std::string>& type_reasons) {
  std::string why = "no pipeline template fits any mix of the cluster's nodes";
  for (const std::string& r : type_reasons) {
    if (!r.empty()) absl::StrAppend(&why, "; ", r);
  }
  return why;
}

}  // namespace

ClusterPlanner::ClusterPlanner(TemplatePlanner* templates, int threads)
    : templates_(templates), threads_(threads) {}

absl::StatusOr<PlanResult> ClusterPlanner::Plan(const CostModel& model,
                                                const std::vector<ClusterNode>& nodes,
                                                const std::vector<int>& global_batches,
                                                const PlanOptions& options) const {
  ASSIGN_OR_RETURN(const NodeSet set, NodeSet::Create(nodes, model.num_types()));
  return Plan(model, set, global_batches, options);
}

absl::StatusOr<PlanResult> ClusterPlanner::Plan(const CostModel& model, const NodeSet& node_set,
                                                const std::vector<int>& global_batches,
                                                const PlanOptions& options) const {
  RETURN_IF_ERROR(CheckNodeSetFits(model, node_set));
  const std::vector<ClusterNode>& nodes = node_set.nodes();
  RETURN_IF_ERROR(ValidateFaultTolerance(options.fault_tolerance));
  const int T = model.num_types();
  const int N = static_cast<int>(nodes.size());
  NodeMix counts(T, 0);
  for (const ClusterNode& node : nodes) ++counts[node.type];
  const bool oobleck = options.objective == PlanObjective::kOobleckInstantiation;
  if (oobleck) RETURN_IF_ERROR(ValidateOobleckPlan(counts, options));
  RETURN_IF_ERROR(ValidatePlanPrices(model, options));
  RETURN_IF_ERROR(ValidateGlobalBatches(global_batches));
  ASSIGN_OR_RETURN(PipelineSizeLimits limits, ResolveLimits(options.limits, N));
  const bool oobleck_cap = options.fault_tolerance_rule == FaultToleranceRule::kOobleck;
  if (oobleck_cap) {
    ASSIGN_OR_RETURN(limits, CapForOobleckFaultTolerance(limits, N, options.fault_tolerance));
  }
  ASSIGN_OR_RETURN(TemplateSet set,
                   PlanTemplateSet(*templates_, model, counts, limits, options.search));
  const std::vector<PipelineShape> shapes = FeasibleShapes(model, set, limits);
  const std::vector<std::string> type_reasons =
      UnusableTypeReasons(model, set, shapes, counts, limits);
  const std::vector<double> allreduce_ms = CrossPipelineAllreduceMs(model, N);

  PlanResult result;
  result.limits = limits;
  result.mixes_planned = static_cast<int>(set.mixes.size());
  result.mixes_from_cache = set.from_cache;
  result.sizes.resize(global_batches.size());
  auto plan_one = [&](size_t i) {
    BatchSizePlan& out = result.sizes[i];
    if (oobleck) {
      out = PlanOobleckBatch(model, nodes, set, shapes, options, global_batches[i],
                             NoShapeReason(type_reasons));
      return;
    }
    out.global_batch = global_batches[i];
    absl::StatusOr<PipelineSetSolution> solution = SolvePipelineSet(
        FreshPlanProblem(model, counts, shapes, allreduce_ms, options, out.global_batch));
    if (!solution.ok()) {
      std::string why =
          shapes.empty() ? NoShapeReason(type_reasons) : std::string(solution.status().message());
      if (oobleck_cap && solution.status().code() == absl::StatusCode::kFailedPrecondition) {
        absl::StrAppend(&why, " (", OobleckCapText(N, options.fault_tolerance), ")");
      }
      out.status = absl::Status(solution.status().code(), why);
    } else {
      out.plan =
          BindFreshPlan(model, nodes, shapes, *solution, out.global_batch, type_reasons, options);
      out.optimality_gap = solution->optimality_gap;
      if (absl::Status times = CheckPlanTimes(out.plan); !times.ok()) {
        out.status = std::move(times);
        out.plan = ClusterPlan();
      }
    }
    DataParallelEstimate dp =
        DataParallel(model, set, nodes, counts, allreduce_ms, out.global_batch);
    out.data_parallel_ms = dp.ms;
    out.data_parallel_unavailable = dp.unavailable;
    if (out.status.ok() && dp.ms.has_value() && out.plan.iteration_time_ms > 0) {
      out.speedup = *dp.ms / out.plan.iteration_time_ms;
    }
  };
  if (global_batches.size() == 1) {
    plan_one(0);
  } else {
    tbb::task_arena arena(threads_ > 0 ? threads_ : tbb::task_arena::automatic);
    arena.execute([&] { tbb::parallel_for(size_t{0}, global_batches.size(), plan_one); });
  }
  for (const BatchSizePlan& size : result.sizes) {
    if (size.status.code() == absl::StatusCode::kCancelled) return size.status;
  }
  return result;
}

}  // namespace oobleck
