#include "core/plan.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <map>
#include <memory>
#include <set>
#include <string_view>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/field_path.h"
#include "core/oobleck_plan.h"
#include "core/shown_value.h"
#include "core/status_macros.h"
#include "tbb/parallel_for.h"
#include "tbb/task_arena.h"

namespace oobleck {
namespace {

NodeMix SingleNode(int num_types, int t) {
  NodeMix mix(num_types, 0);
  mix[t] = 1;
  return mix;
}

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

}  // namespace

const MixResult* TemplateSet::Find(const NodeMix& mix) const {
  for (size_t i = 0; i < mixes.size(); ++i) {
    if (mixes[i] == mix) return results[i].get();
  }
  return nullptr;
}

absl::StatusOr<NodeSet> NodeSet::Create(std::vector<ClusterNode> nodes, int num_types) {
  if (nodes.empty()) return InvalidField("nodes", " must not be empty");
  if (nodes.size() > static_cast<size_t>(kMaxClusterNodes)) {
    return FieldError(absl::StatusCode::kResourceExhausted, "nodes",
                      absl::StrFormat(" has %d entries, more than the limit of %d nodes per plan",
                                      nodes.size(), kMaxClusterNodes));
  }
  NodeSet set;
  set.nodes_ = std::move(nodes);
  set.num_types_ = num_types;
  set.index_.reserve(set.nodes_.size());
  // A field path is built only for an error: a fleet lists thousands of nodes.
  for (size_t i = 0; i < set.nodes_.size(); ++i) {
    const ClusterNode& node = set.nodes_[i];
    if (node.id.empty()) return InvalidField(absl::StrCat("nodes[", i, "].id"), " is required");
    if (node.type < 0 || node.type >= num_types) {
      return InvalidField(absl::StrCat("nodes[", i, "]"),
                          absl::StrCat(" (", Quote(node.id), ") has no valid node type"));
    }
    auto [it, inserted] = set.index_.emplace(node.id, static_cast<int>(i));
    if (!inserted) {
      return InvalidField(absl::StrCat("nodes[", i, "].id"),
                          absl::StrCat(" ", Quote(node.id), " repeats nodes[", it->second, "].id"));
    }
  }
  return set;
}

absl::Status CheckNodeSetFits(const CostModel& model, const NodeSet& nodes) {
  if (nodes.num_types() == model.num_types()) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrFormat("the nodes were checked against %d node types but the model has %d",
                      nodes.num_types(), model.num_types()));
}

absl::Status ValidateFaultTolerance(int fault_tolerance) {
  if (fault_tolerance < 0 || fault_tolerance > kMaxFaultTolerance) {
    return InvalidField("fault_tolerance",
                        absl::StrFormat(" must be in [0, %d] (a plan of at most %d nodes has at "
                                        "most that many pipelines, minus one; got %d)",
                                        kMaxFaultTolerance, kMaxClusterNodes, fault_tolerance));
  }
  return absl::OkStatus();
}

absl::Status ValidateLimits(const PipelineSizeLimits& limits) {
  if (limits.min_nodes < 0) {
    return InvalidField("min_nodes_per_pipeline",
                        absl::StrCat(" must be >= 0 (got ", limits.min_nodes, ")"));
  }
  if (limits.max_nodes < 0) {
    return InvalidField("max_nodes_per_pipeline",
                        absl::StrCat(" must be >= 0 (got ", limits.max_nodes, ")"));
  }
  const int min_nodes = std::max(1, limits.min_nodes);
  if (limits.max_nodes > 0 && limits.max_nodes < min_nodes) {
    return InvalidField("max_nodes_per_pipeline",
                        absl::StrCat(" must be >= min_nodes_per_pipeline = ", min_nodes, " (got ",
                                     limits.max_nodes, ")"));
  }
  return absl::OkStatus();
}

absl::Status ValidatePlanPrices(const CostModel& model, const PlanOptions& options) {
  const int T = model.num_types();
  if (!options.price_per_hour.empty() && static_cast<int>(options.price_per_hour.size()) != T) {
    return InvalidField("price_per_hour", absl::StrFormat(": %d prices for %d node types",
                                                          options.price_per_hour.size(), T));
  }
  for (size_t t = 0; t < options.price_per_hour.size(); ++t) {
    const double price = options.price_per_hour[t];
    if (!(price >= 0 && price <= kMaxPricePerHour)) {  // also NaN
      return InvalidField(
          absl::StrFormat("cluster.node_types[%d].price_per_hour", t),
          absl::StrFormat(" must be in [0, %g] (got %s)", kMaxPricePerHour, ShowNumber(price)));
    }
    // Plans are compared with budgets in steps: a price between steps would be rounded, and
    // a plan could cost more than its budget.
    if (!OnPriceGrid(price)) {
      return InvalidField(
          absl::StrFormat("cluster.node_types[%d].price_per_hour", t),
          absl::StrFormat(" must be a multiple of %g per hour, the step prices are compared in "
                          "(got %s)",
                          kPriceStepPerHour, ShowNumber(price)));
    }
  }
  if (!(options.budget_per_hour >= 0 && std::isfinite(options.budget_per_hour))) {
    return InvalidField("budget_per_hour",
                        absl::StrFormat(" must be a finite number >= 0 (0: no budget; got %s)",
                                        ShowNumber(options.budget_per_hour)));
  }
  if (options.objective == PlanObjective::kCost) {
    for (int t = 0; t < T; ++t) {
      if (options.price_per_hour.empty() || !(options.price_per_hour[t] > 0)) {
        return FieldError(absl::StatusCode::kFailedPrecondition, "objective",
                          absl::StrFormat(" = \"cost\" needs prices: "
                                          "cluster.node_types[%d].price_per_hour (\"%s\") must "
                                          "be > 0",
                                          t, model.node_type(t).name));
      }
    }
  }
  if (options.budget_per_hour > 0 && options.price_per_hour.empty()) {
    return FieldError(absl::StatusCode::kFailedPrecondition, "budget_per_hour",
                      " needs prices: set cluster.node_types[].price_per_hour");
  }
  return absl::OkStatus();
}

absl::StatusOr<PlanObjective> ParsePlanObjective(std::string_view name) {
  if (name.empty() || name == "time") return PlanObjective::kTime;
  if (name == "cost") return PlanObjective::kCost;
  if (name == "oobleck-instantiation") return PlanObjective::kOobleckInstantiation;
  return InvalidField("objective", absl::StrCat(" must be \"time\" or \"cost\", or "
                                                "\"oobleck-instantiation\" (got ",
                                                Quote(name), ")"));
}

std::string_view PlanObjectiveName(PlanObjective objective) {
  switch (objective) {
    case PlanObjective::kCost:
      return "cost";
    case PlanObjective::kOobleckInstantiation:
      return "oobleck-instantiation";
    case PlanObjective::kTime:
      break;
  }
  return "time";
}

absl::Status CheckPlanTimes(const ClusterPlan& plan) {
  const double t = plan.iteration_time_ms;
  if (std::isfinite(t) && t > 0) return absl::OkStatus();
  const size_t P = plan.pipelines.size();
  return absl::FailedPreconditionError(absl::StrFormat(
      "the plan of %d pipelines has no finite iteration time > 0 (pipelines %g ms + all-reduce "
      "across them %g ms): measure the profiles' allreduce_across_nodes_ms for %d pipelines "
      "or set cluster.inter_node_bytes_per_s > 0",
      P, plan.pipeline_time_ms, plan.allreduce_ms, P));
}

int64_t PriceSteps(double price_per_hour) {
  return static_cast<int64_t>(std::llround(price_per_hour * kPriceStepsPerHour));
}

bool OnPriceGrid(double price_per_hour) {
  // Up to the rounding of a price computed from others (0.45 per GPU x 3 GPUs): the plan's
  // price is its steps read back, and those are what the budget is compared with.
  const double steps = price_per_hour * kPriceStepsPerHour;
  return std::abs(steps - std::round(steps)) <= 1e-6 + 1e-12 * steps;
}

double PriceOfSteps(int64_t steps) {
  return static_cast<double>(steps) / static_cast<double>(kPriceStepsPerHour);
}

int64_t BudgetSteps(double budget_per_hour) {
  int64_t steps = static_cast<int64_t>(std::floor(budget_per_hour * kPriceStepsPerHour));
  // (The product rounds; step to the exact boundary of the comparison the answer makes.)
  while (steps > 0 && PriceOfSteps(steps) > budget_per_hour) --steps;
  while (PriceOfSteps(steps + 1) <= budget_per_hour) ++steps;
  return steps;
}

double PlanPricePerHour(const ClusterPlan& plan, const std::vector<double>& price_per_hour) {
  if (price_per_hour.empty()) return 0;
  int64_t steps = 0;
  for (const PlannedPipeline& p : plan.pipelines) {
    for (const int type : p.tmpl.node_order) steps += PriceSteps(price_per_hour[type]);
  }
  return PriceOfSteps(steps);
}

absl::StatusOr<PipelineSizeLimits> ResolveLimits(const PipelineSizeLimits& limits,
                                                 int total_nodes) {
  RETURN_IF_ERROR(ValidateLimits(limits));
  PipelineSizeLimits out;
  out.min_nodes = std::max(1, limits.min_nodes);
  if (out.min_nodes > total_nodes) {
    return FieldError(absl::StatusCode::kFailedPrecondition, "min_nodes_per_pipeline",
                      absl::StrCat(" = ", out.min_nodes, " is more than the cluster's ",
                                   total_nodes, " node(s)"));
  }
  // A limit above the cluster size is no limit (a replan of a shrunken cluster keeps it).
  out.max_nodes = limits.max_nodes > 0
                      ? std::min(limits.max_nodes, total_nodes)
                      : std::min(total_nodes, std::max(kDefaultMaxNodesPerPipeline, out.min_nodes));
  return out;
}

namespace {

// The template search's state space is a box over each type's largest count among the
// mixes it is given (core/template_search/), so its size is exponential in the number of types:
// 8 types of mixes of up to 4 nodes make 5^8 multisets, where only 495 matter. Each mix of
// few nodes uses few types, so mixes are searched in groups whose types are a subset of one
// another's, each group's box over its own types only. (Each template is optimal whatever
// group it is searched in; groups only trade shared work for a smaller box.)
constexpr int64_t kMaxTemplateSearchBox = int64_t{1} << 10;

int64_t BoxSize(const std::vector<NodeMix>& mixes, const std::vector<size_t>& group) {
  if (group.empty()) return 1;
  NodeMix caps(mixes[group[0]].size(), 0);
  for (size_t i : group) {
    for (size_t t = 0; t < caps.size(); ++t) caps[t] = std::max(caps[t], mixes[i][t]);
  }
  int64_t box = 1;
  for (int c : caps) box = std::min(box * (c + 1), int64_t{1} << 40);
  return box;
}

std::vector<std::vector<size_t>> TemplateSearchGroups(const std::vector<NodeMix>& mixes) {
  std::vector<size_t> all(mixes.size());
  for (size_t i = 0; i < all.size(); ++i) all[i] = i;
  if (BoxSize(mixes, all) <= kMaxTemplateSearchBox) return {all};
  auto support = [&](size_t i) {
    uint64_t bits = 0;
    for (size_t t = 0; t < mixes[i].size(); ++t) bits |= uint64_t{mixes[i][t] > 0} << t;
    return bits;
  };
  // Widest supports first, so that every narrower one finds a group that contains it.
  std::vector<size_t> order = all;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return std::popcount(support(a)) > std::popcount(support(b));
  });
  std::vector<uint64_t> group_support;
  std::vector<NodeMix> group_caps;
  std::vector<std::vector<size_t>> groups;
  auto box_with = [&](size_t g, size_t i) {
    int64_t box = 1;
    for (size_t t = 0; t < mixes[i].size(); ++t) {
      box = std::min(box * (std::max(group_caps[g][t], mixes[i][t]) + 1), int64_t{1} << 40);
    }
    return box;
  };
  for (size_t i : order) {
    const uint64_t s = support(i);
    size_t g = 0;
    while (g < groups.size() &&
           ((group_support[g] & s) != s || box_with(g, i) > kMaxTemplateSearchBox)) {
      ++g;
    }
    if (g == groups.size()) {
      group_support.push_back(s);
      group_caps.emplace_back(mixes[i].size(), 0);
      groups.emplace_back();
    }
    for (size_t t = 0; t < mixes[i].size(); ++t) {
      group_caps[g][t] = std::max(group_caps[g][t], mixes[i][t]);
    }
    groups[g].push_back(i);
  }
  return groups;
}

}  // namespace

absl::StatusOr<TemplateSet> PlanTemplateSet(TemplatePlanner& planner, const CostModel& model,
                                            const NodeMix& available,
                                            const PipelineSizeLimits& limits,
                                            const SearchOptions& options) {
  TemplateSet set;
  if (CountMixes(available, limits.min_nodes, limits.max_nodes, kMaxMixesPerPlan + 1) >
      kMaxMixesPerPlan) {
    return absl::ResourceExhaustedError(absl::StrFormat(
        "the cluster's node types and pipelines of %d to %d nodes give more than %d candidate "
        "pipeline mixes, the limit per plan; lower max_nodes_per_pipeline or plan fewer node "
        "types",
        limits.min_nodes, limits.max_nodes, kMaxMixesPerPlan));
  }
  set.mixes = EnumerateMixes(available, limits.min_nodes, limits.max_nodes);
  if (limits.min_nodes > 1) {
    for (int t = 0; t < model.num_types(); ++t) {
      if (available[t] > 0) set.mixes.push_back(SingleNode(model.num_types(), t));
    }
  }
  set.results.resize(set.mixes.size());
  for (const std::vector<size_t>& group : TemplateSearchGroups(set.mixes)) {
    std::vector<NodeMix> mixes;
    for (size_t i : group) mixes.push_back(set.mixes[i]);
    ASSIGN_OR_RETURN(std::vector<PlannedMix> planned, planner.PlanTemplates(model, mixes, options));
    for (size_t k = 0; k < group.size(); ++k) {
      set.from_cache += (planned)[k].cache_hit ? 1 : 0;
      set.results[group[k]] = std::move((planned)[k].result);
    }
  }
  return set;
}

std::vector<PipelineShape> FeasibleShapes(const CostModel& model, const TemplateSet& set,
                                          const PipelineSizeLimits& limits) {
  std::vector<PipelineShape> shapes;
  for (size_t i = 0; i < set.mixes.size(); ++i) {
    const int size = MixSize(set.mixes[i]);
    const MixResult& r = *set.results[i];
    if (size < limits.min_nodes || size > limits.max_nodes || !r.feasible) continue;
    const int max_microbatches = model.MaxMicrobatches(r.best);
    if (max_microbatches < 1) continue;
    shapes.push_back({set.mixes[i], &r.best, StageCosts(r.best), max_microbatches});
  }
  return shapes;
}

std::vector<std::string> UnusedTypeReasons(const CostModel& model,
                                           const std::vector<PipelineShape>& shapes,
                                           const NodeMix& available,
                                           const PipelineSizeLimits& limits) {
  std::vector<std::string> reasons(model.num_types());
  for (int t = 0; t < model.num_types(); ++t) {
    if (available[t] == 0) continue;
    bool used = false;
    for (const PipelineShape& s : shapes) used |= s.mix[t] > 0;
    if (used) continue;
    reasons[t] = absl::StrFormat("no feasible pipeline template of %d..%d nodes includes a %s node",
                                 limits.min_nodes, limits.max_nodes, model.node_type(t).name);
  }
  return reasons;
}

absl::StatusOr<ClusterPlan> EvaluatePlan(const CostModel& model,
                                         const std::vector<ClusterNode>& nodes, ClusterPlan plan) {
  ASSIGN_OR_RETURN(const NodeSet set, NodeSet::Create(nodes, model.num_types()));
  const int P = static_cast<int>(plan.pipelines.size());
  return EvaluatePlanOnValidNodes(model, set, std::move(plan), CrossPipelineAllreduceMs(model, P));
}

namespace {

// Pipeline i's node_ids against the cluster and its template; placed[n] records the
// (pipeline, position) that runs node n, {-1, -1} while none does.
absl::Status PlaceNodes(const CostModel& model, const std::vector<ClusterNode>& nodes,
                        const NodeIndex& node_index, const PlannedPipeline& p, int i,
                        std::vector<std::pair<int, int>>& placed) {
  for (size_t j = 0; j < p.node_ids.size(); ++j) {
    const std::string& id = p.node_ids[j];
    // (Messages only: thousands of pipelines at fleet scale.)
    auto where = [&] { return absl::StrCat("pipelines[", i, "].node_ids[", j, "]"); };
    auto it = node_index.find(id);
    if (it == node_index.end()) {
      return InvalidField(where(), absl::StrCat(" ", Quote(id), " is not a node of the cluster"));
    }
    const int type = nodes[it->second].type;
    if (type != p.tmpl.node_order[j]) {
      return InvalidField(where(),
                          absl::StrCat(" ", Quote(id), " is a ", model.node_type(type).name,
                                       " node but the template has a ",
                                       model.node_type(p.tmpl.node_order[j]).name, " node there"));
    }
    std::pair<int, int>& prev = placed[it->second];
    if (prev.first >= 0) {
      return InvalidField(where(), absl::StrCat(" ", Quote(id), " is already used by pipelines[",
                                                prev.first, "].node_ids[", prev.second, "]"));
    }
    prev = {i, static_cast<int>(j)};
  }
  return absl::OkStatus();
}

// ListIdleNodes when plan->idle already names exactly the nodes no pipeline runs, in
// cluster order (a plan this service answered, sent back): each id then appears once, so
// the reason given for it is its last one, and only the types and empty reasons change.
// False, plan->idle untouched, otherwise. Saves hashing the ids of a fleet's idle nodes.
bool KeepGivenIdleNodes(const std::vector<ClusterNode>& nodes,
                        const std::vector<std::pair<int, int>>& placed, ClusterPlan* plan) {
  size_t k = 0;
  for (size_t n = 0; n < nodes.size(); ++n) {
    if (placed[n].first >= 0) continue;
    if (k == plan->idle.size() || plan->idle[k].id != nodes[n].id) return false;
    ++k;
  }
  if (k != plan->idle.size()) return false;
  k = 0;
  for (size_t n = 0; n < nodes.size(); ++n) {
    if (placed[n].first >= 0) continue;
    IdleNode& idle = plan->idle[k++];
    idle.type = nodes[n].type;
    if (idle.reason.empty()) idle.reason = "not in any pipeline";
  }
  return true;
}

// plan->idle: every node no pipeline runs, with the reason plan->idle gave for it (the last
// one given per id) or "not in any pipeline".
void ListIdleNodes(const std::vector<ClusterNode>& nodes,
                   const std::vector<std::pair<int, int>>& placed, ClusterPlan* plan) {
  if (KeepGivenIdleNodes(nodes, placed, plan)) return;
  std::vector<IdleNode> given_idle = std::move(plan->idle);
  absl::flat_hash_map<std::string_view, std::string*> reasons;
  for (IdleNode& idle : given_idle) reasons[idle.id] = &idle.reason;
  plan->idle.clear();
  for (size_t n = 0; n < nodes.size(); ++n) {
    if (placed[n].first >= 0) continue;
    const ClusterNode& node = nodes[n];
    auto it = reasons.find(node.id);
    plan->idle.push_back({node.id, node.type,
                          it != reasons.end() && !it->second->empty() ? std::move(*it->second)
                                                                      : "not in any pipeline"});
  }
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

}  // namespace

std::string OobleckCapText(int total_nodes, int fault_tolerance) {
  return absl::StrCat("Oobleck's fault-tolerance rule caps pipelines at N - f = ", total_nodes,
                      " - ", fault_tolerance, " = ", total_nodes - fault_tolerance, " node(s)");
}

absl::StatusOr<PipelineSizeLimits> CapForOobleckFaultTolerance(PipelineSizeLimits limits,
                                                               int total_nodes,
                                                               int fault_tolerance) {
  const int cap = total_nodes - fault_tolerance;
  if (cap < limits.min_nodes) {
    return FieldError(
        absl::StatusCode::kFailedPrecondition, "fault_tolerance",
        absl::StrCat(" = ", fault_tolerance, ": ", OobleckCapText(total_nodes, fault_tolerance),
                     ", fewer than min_nodes_per_pipeline = ", limits.min_nodes));
  }
  limits.max_nodes = std::min(limits.max_nodes, cap);
  return limits;
}

namespace {

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

// The evaluated templates of a plan's pipelines, each distinct one evaluated once (a
// fleet's hundreds of pipelines share a few dozen templates). Evaluate reads only a
// template's shape (SameShape), so equal shapes give equal results.
class TemplateEvaluations {
 public:
  struct Evaluated {
    PipelineTemplate tmpl;
    std::vector<double> stage_costs;
    int max_microbatches = 0;
  };
  explicit TemplateEvaluations(const CostModel& model) : model_(model) {}

  // (tmpl is copied only when its shape is new: a plan's pipelines keep their own buffers.)
  absl::StatusOr<const Evaluated*> Of(const PipelineTemplate& tmpl) {
    std::vector<int>& same_hash = by_hash_[ShapeHash(tmpl)];
    for (int e : same_hash) {
      if (SameShape(evaluated_[e]->tmpl, tmpl)) return evaluated_[e].get();
    }
    ASSIGN_OR_RETURN(PipelineTemplate t, model_.Evaluate(tmpl));
    auto e = std::make_unique<Evaluated>();
    e->stage_costs = StageCosts(t);
    e->max_microbatches = model_.MaxMicrobatches(t);
    e->tmpl = std::move(t);
    same_hash.push_back(static_cast<int>(evaluated_.size()));
    evaluated_.push_back(std::move(e));
    return evaluated_.back().get();
  }

 private:
  const CostModel& model_;
  absl::flat_hash_map<uint64_t, std::vector<int>> by_hash_;
  std::vector<std::unique_ptr<Evaluated>> evaluated_;
};

// Why no plan exists when no template fits any mix: that, and why each type is unusable.
std::string NoShapeReason(const std::vector<std::string>& type_reasons) {
  std::string why = "no pipeline template fits any mix of the cluster's nodes";
  for (const std::string& r : type_reasons) {
    if (!r.empty()) absl::StrAppend(&why, "; ", r);
  }
  return why;
}

}  // namespace

absl::StatusOr<ClusterPlan> EvaluatePlanOnValidNodes(const CostModel& model,
                                                     const NodeSet& node_set, ClusterPlan plan,
                                                     const std::vector<double>& allreduce_ms,
                                                     std::vector<std::pair<int, int>>* placement) {
  RETURN_IF_ERROR(CheckNodeSetFits(model, node_set));
  const std::vector<ClusterNode>& nodes = node_set.nodes();
  const NodeIndex& node_index = node_set.index();
  if (plan.pipelines.empty()) return InvalidField("pipelines", " must not be empty");
  if (plan.global_batch < 1 || plan.global_batch > kMaxGlobalBatch) {
    return InvalidField("global_batch", absl::StrFormat(" must be in [1, %d] (got %d)",
                                                        kMaxGlobalBatch, plan.global_batch));
  }
  // Per node: the (pipeline, position) that runs it, {-1, -1} if none.
  std::vector<std::pair<int, int>> placed(nodes.size(), {-1, -1});
  int64_t total = 0;
  plan.pipeline_time_ms = 0;
  TemplateEvaluations evaluations(model);
  for (size_t i = 0; i < plan.pipelines.size(); ++i) {
    PlannedPipeline& p = plan.pipelines[i];
    // (Messages only: thousands of pipelines at fleet scale.)
    auto field = [i] { return absl::StrCat("pipelines[", i, "]"); };
    absl::StatusOr<const TemplateEvaluations::Evaluated*> evaluated = evaluations.Of(p.tmpl);
    if (!evaluated.ok()) return InField(evaluated.status(), absl::StrCat(field(), ".template"));
    p.tmpl = (*evaluated)->tmpl;
    if (static_cast<int>(p.node_ids.size()) != p.tmpl.num_nodes()) {
      return InvalidField(absl::StrCat(field(), ".node_ids"),
                          absl::StrFormat(" has %d ids but the template has %d nodes",
                                          p.node_ids.size(), p.tmpl.num_nodes()));
    }
    RETURN_IF_ERROR(PlaceNodes(model, nodes, node_index, p, static_cast<int>(i), placed));
    const int limit = (*evaluated)->max_microbatches;
    if (p.microbatches < 1 || p.microbatches > std::min(limit, plan.global_batch)) {
      return InvalidField(absl::StrCat(field(), ".microbatches"),
                          absl::StrFormat(" must be in [1, %d] (the template's GPU memory and the "
                                          "global batch allow that many; got %d)",
                                          std::min(limit, plan.global_batch), p.microbatches));
    }
    total += p.microbatches;
    p.time_ms = model.PipelineTimeMs((*evaluated)->stage_costs, p.microbatches);
    plan.pipeline_time_ms = std::max(plan.pipeline_time_ms, p.time_ms);
  }
  if (total != plan.global_batch) {
    return InvalidField("pipelines", absl::StrFormat("[].microbatches add up to %d, not "
                                                     "global_batch = %d",
                                                     total, plan.global_batch));
  }
  const size_t P = plan.pipelines.size();
  plan.allreduce_ms = P < allreduce_ms.size()
                          ? allreduce_ms[P]
                          : CrossPipelineAllreduceMs(model, static_cast<int>(P))[P];
  plan.iteration_time_ms = plan.pipeline_time_ms + plan.allreduce_ms;
  RETURN_IF_ERROR(CheckPlanTimes(plan));
  ListIdleNodes(nodes, placed, &plan);
  if (placement != nullptr) *placement = std::move(placed);
  return plan;
}

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

std::vector<size_t> ChosenOrder(const std::vector<PipelineShape>& shapes,
                                const PipelineSetSolution& solution) {
  std::vector<size_t> order(solution.chosen.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const NodeMix& ma = shapes[solution.chosen[a]].mix;
    const NodeMix& mb = shapes[solution.chosen[b]].mix;
    const int sa = MixSize(ma), sb = MixSize(mb);
    return sa != sb ? sa > sb : ma > mb;
  });
  return order;
}

}  // namespace oobleck
