#include "core/oobleck_plan.h"

#include <algorithm>
#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/field_path.h"
#include "core/oobleck_instantiation.h"
#include "core/plan/cluster_plan.h"
#include "core/plan/fault_tolerance.h"
#include "core/plan/node_set.h"
#include "core/plan/pipeline_shape.h"
#include "core/plan/plan_options.h"
#include "core/plan/plan_result.h"
#include "core/plan/price.h"
#include "core/plan/template_set.h"
#include "core/shown_value.h"

namespace oobleck {
namespace {

constexpr char kObjective[] = "\"oobleck-instantiation\"";

// Layer 0's all-reduce across P pipelines (Oobleck's allreduce_across_nodes[0]), of the
// profile of node type `type`, for P = 1..max_pipelines.
std::map<int, double> Layer0Allreduce(const CostModel& model, int type, int max_pipelines) {
  std::map<int, double> allreduce;
  const auto& layer0 = model.problem().profiles[type]->layers[0].allreduce_across_nodes_ms;
  for (const auto& [pipelines, ms] : layer0) {
    if (pipelines >= 1 && pipelines <= max_pipelines) allreduce[pipelines] = ms;
  }
  return allreduce;
}

// Binds the instance counts of `answer` (over `shapes`) to `nodes`, in node order, larger
// pipelines first.
ClusterPlan BindOobleckPlan(const std::vector<ClusterNode>& nodes,
                            const std::vector<PipelineShape>& shapes, const Instantiation& answer,
                            int global_batch) {
  std::vector<size_t> order(shapes.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return MixSize(shapes[a].mix) > MixSize(shapes[b].mix);
  });
  ClusterPlan plan;
  plan.global_batch = global_batch;
  size_t next_node = 0;
  for (size_t s : order) {
    for (int k = 0; k < answer.instances[s]; ++k) {
      PlannedPipeline p;
      p.tmpl = *shapes[s].tmpl;
      for (size_t position = 0; position < p.tmpl.node_order.size(); ++position) {
        p.node_ids.push_back(nodes[next_node++].id);
      }
      p.microbatches = answer.microbatches[s];
      p.time_ms = p.tmpl.iteration_time_ms * p.microbatches;
      plan.pipelines.push_back(std::move(p));
    }
  }
  plan.pipeline_time_ms = answer.pipeline_time_ms;
  plan.allreduce_ms = answer.allreduce_ms;
  plan.iteration_time_ms = answer.iteration_time_ms;
  return plan;
}

// Oobleck's data-parallel figure: every node a pipeline of the 1-node template.
void OobleckDataParallel(const CostModel& model, const TemplateSet& set,
                         const InstantiationProblem& problem, int type, BatchSizePlan& out) {
  NodeMix single(model.num_types(), 0);
  single[type] = 1;
  const MixResult* one = set.Find(single);
  if (one == nullptr || !one->feasible) {
    out.data_parallel_unavailable = "a 1-node pipeline has no template";
    return;
  }
  InstantiationProblem data_parallel = problem;
  data_parallel.templates = {
      {1, static_cast<int>(one->best.stages.size()), one->best.iteration_time_ms}};
  Interrupt never({});
  absl::StatusOr<Instantiation> split =
      SplitOobleckBatch(data_parallel, {problem.num_nodes}, never);
  if (!split.ok()) {
    out.data_parallel_unavailable = std::string(split.status().message());
    return;
  }
  out.data_parallel_ms = split->iteration_time_ms;
  if (out.status.ok()) out.speedup = split->iteration_time_ms / out.plan.iteration_time_ms;
}

}  // namespace

absl::Status ValidateOobleckPlan(const NodeMix& counts, const PlanOptions& options) {
  const int types =
      static_cast<int>(std::count_if(counts.begin(), counts.end(), [](int c) { return c > 0; }));
  if (types > 1) {
    return InvalidField("objective", absl::StrCat(" ", kObjective,
                                                  " needs nodes of one node "
                                                  "type (Oobleck's templates are node counts); "
                                                  "the cluster has nodes of ",
                                                  types));
  }
  if (options.budget_per_hour != 0) {
    return InvalidField("budget_per_hour", absl::StrCat(" must be 0 with objective ", kObjective,
                                                        ", which uses every node (got ",
                                                        Show(options.budget_per_hour), ")"));
  }
  // Oobleck's own f (a cap on pipeline sizes) fits its instantiation; ours (f + 1
  // pipelines at least) is not part of Oobleck's semantics.
  if (options.fault_tolerance != 0 &&
      options.fault_tolerance_rule != FaultToleranceRule::kOobleck) {
    return InvalidField("fault_tolerance",
                        absl::StrCat(" must be 0 with objective ", kObjective,
                                     ", which uses every node as Oobleck does, unless "
                                     "fault_tolerance_rule is FAULT_TOLERANCE_OOBLECK (got ",
                                     options.fault_tolerance, ")"));
  }
  return absl::OkStatus();
}

BatchSizePlan PlanOobleckBatch(const CostModel& model, const std::vector<ClusterNode>& nodes,
                               const TemplateSet& set, const std::vector<PipelineShape>& shapes,
                               const PlanOptions& options, int global_batch,
                               const std::string& no_shape_reason) {
  BatchSizePlan out;
  out.global_batch = global_batch;
  const int n = static_cast<int>(nodes.size());
  const int type = nodes.front().type;
  InstantiationProblem problem;
  for (const PipelineShape& shape : shapes) {
    problem.templates.push_back({MixSize(shape.mix), static_cast<int>(shape.tmpl->stages.size()),
                                 shape.tmpl->iteration_time_ms});
  }
  problem.num_nodes = n;
  problem.global_batch = global_batch;
  problem.allreduce_ms = Layer0Allreduce(model, type, n);
  if (shapes.empty()) {
    out.status = absl::FailedPreconditionError(no_shape_reason);
  } else {
    Interrupt interrupt(options.search.cancelled);
    absl::StatusOr<Instantiation> answer = InstantiateOobleck(problem, interrupt);
    if (!answer.ok()) {
      // Instantiate's names, said in Plan's terms.
      out.status = absl::Status(
          answer.status().code(),
          absl::StrCat(answer.status().message(),
                       " (objective \"oobleck-instantiation\": the templates are the optimal "
                       "ones of min_nodes_per_pipeline..max_nodes_per_pipeline nodes, "
                       "allreduce_across_pipelines_ms is layer 0's allreduce_across_nodes_ms "
                       "of the profile)"));
      return out;
    }
    out.plan = BindOobleckPlan(nodes, shapes, *answer, global_batch);
    out.plan.price_per_hour = PlanPricePerHour(out.plan, options.price_per_hour);
    out.status = CheckPlanTimes(out.plan);
    if (!out.status.ok()) out.plan = ClusterPlan();
  }
  OobleckDataParallel(model, set, problem, type, out);
  return out;
}

}  // namespace oobleck
