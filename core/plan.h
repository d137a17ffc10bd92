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
// Implemented in core/plan.cc and, for the search and its numbers, in core/plan_search/:
// SolvePipelineSet and MaxPipelineCount in pipeline_set_search.cc, SplitBatch and StageCosts
// in batch_split.cc, CrossPipelineAllreduceMs in allreduce.cc.
#ifndef OOBLECK_CORE_PLAN_H_
#define OOBLECK_CORE_PLAN_H_

#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/cost_model.h"
#include "core/pipeline_template.h"
#include "core/search.h"
#include "core/template_planner.h"

namespace oobleck {

// One machine of the cluster: a stable id (e.g. its IP) and its node type (an index into
// the problem's node types).
struct ClusterNode {
  std::string id;
  int type = 0;
};

// Pipeline sizes the plan may use. Every mix of min..max nodes is a candidate pipeline.
struct PipelineSizeLimits {
  int min_nodes = 1;
  int max_nodes = 0;  // 0: min(cluster nodes, kDefaultMaxNodesPerPipeline)
};
// The template search over every mix grows quickly with the pipeline size: for GPT-2 XL on
// 3 node types of 4 GPUs, every mix of up to 4 nodes (34 mixes) takes about 0.1 s cold on
// 2 cores, up to 8 nodes (164 mixes) 0.7 s, up to 16 nodes (968 mixes) 3.4 s, and the plan
// search grows with the mixes too (docs/API.md#plan). Requests that need larger pipelines
// (models that do not fit in 4 nodes) raise the limit.
inline constexpr int kDefaultMaxNodesPerPipeline = 4;
// Bounds of one request's work.
inline constexpr int kMaxGlobalBatch = 1 << 20;
inline constexpr int kMaxGlobalBatchSizes = 64;
inline constexpr int kMaxClusterNodes = 4096;
// Candidate pipeline mixes one plan may weigh (every mix of <= 8 nodes of 8 node types is
// 12870).
inline constexpr int kMaxMixesPerPlan = 1 << 14;

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

// The f-failure guarantee: f >= 0, a plan has at least f + 1 pipelines.
inline constexpr int kMaxFaultTolerance = kMaxClusterNodes - 1;
// "fault_tolerance must be in [0, 4095] (got -1)"; OK for a valid f. The error carries the
// field path "fault_tolerance" (core/field_path.h).
absl::Status ValidateFaultTolerance(int fault_tolerance);

// How fault_tolerance (f) is read (docs/COST_MODEL.md#fault-tolerance).
enum class FaultToleranceRule {
  kPipelines,  // at least f + 1 pipelines: any f failures leave every layer a replica
  kOobleck,    // Oobleck's: no pipeline has more than N - f nodes (N: the cluster's nodes)
};
// Oobleck's rule on resolved limits for a cluster of `total_nodes`: max_nodes lowered to
// N - f; FAILED_PRECONDITION when N - f is below min_nodes (nothing fits).
absl::StatusOr<PipelineSizeLimits> CapForOobleckFaultTolerance(PipelineSizeLimits limits,
                                                               int total_nodes,
                                                               int fault_tolerance);
// "Oobleck's fault-tolerance rule caps pipelines at N - f = 13 - 3 = 10 node(s)".
std::string OobleckCapText(int total_nodes, int fault_tolerance);

// What a plan minimises (docs/COST_MODEL.md#price).
enum class PlanObjective {
  kTime,  // "time": the iteration time
  kCost,  // "cost": price per iteration, (sum of the used nodes' price_per_hour) x time
  // "oobleck-instantiation": Oobleck's instantiation semantics and time formula
  // (core/oobleck_plan.h): every node used, one micro-batch count per template.
  kOobleckInstantiation,
};
// "time" -> kTime, "" -> kTime, "cost" -> kCost, "oobleck-instantiation" ->
// kOobleckInstantiation; INVALID_ARGUMENT naming `objective`.
absl::StatusOr<PlanObjective> ParsePlanObjective(std::string_view name);
std::string_view PlanObjectiveName(PlanObjective objective);

// Prices are compared in steps of this much per hour, so that the integer programs
// minimise an integer. Every node type's price must be a whole number of steps
// (ValidatePlanPrices): then the steps are exact, a budget is compared exactly (BudgetSteps)
// and ClusterPlan::price_per_hour (steps / kPriceStepsPerHour) never exceeds it.
inline constexpr int64_t kPriceStepsPerHour = 10000;
inline constexpr double kPriceStepPerHour = 1.0 / kPriceStepsPerHour;
// The largest price_per_hour of one node (keeps every sum of prices exact in a double).
inline constexpr double kMaxPricePerHour = 1e6;
// A price in steps of kPriceStepPerHour (rounded to the nearest step).
int64_t PriceSteps(double price_per_hour);
// Whether a price is a whole number of steps, up to the rounding of a double (1e-6 of a step
// plus 1e-12 of the price).
bool OnPriceGrid(double price_per_hour);
// A price of `steps` steps per hour: the double nearest steps / kPriceStepsPerHour.
double PriceOfSteps(int64_t steps);
// The most steps whose price (PriceOfSteps) is at most `budget_per_hour` (finite, >= 0):
// a plan of prices on the grid is within the budget exactly when its steps are.
int64_t BudgetSteps(double budget_per_hour);

struct PlanOptions {
  PipelineSizeLimits limits;
  // Plans have at least fault_tolerance + 1 pipelines (PipelineSetProblem::min_pipelines),
  // so that any fault_tolerance failures leave every layer a replica
  // (docs/COST_MODEL.md#fault-tolerance).
  int fault_tolerance = 0;
  SearchOptions search;  // cancellation, polled by the template search and the plan search
  PlanObjective objective = PlanObjective::kTime;
  // Per node type (empty: every price 0), each in [0, kMaxPricePerHour]; kCost needs every
  // type's price > 0. Errors name "cluster.node_types[i].price_per_hour".
  std::vector<double> price_per_hour{};
  // 0: none; else plans only use nodes whose prices add up to at most this.
  double budget_per_hour = 0;
  // kOobleck: fault_tolerance caps pipeline sizes at N - f instead (one pipeline may do).
  FaultToleranceRule fault_tolerance_rule = FaultToleranceRule::kPipelines;
};

// The cross-pipeline gradient all-reduce of a plan of P pipelines (COST_MODEL.md): per
// layer the slowest node type's time (measured allreduce_across_nodes_ms[P], else a ring
// estimate 2(P-1)/P * param_bytes / inter_node_bytes_per_s), summed over layers; 0 for
// P <= 1; never less than for fewer pipelines. Entry P of the result, P = 0..max_pipelines.
std::vector<double> CrossPipelineAllreduceMs(const CostModel& model, int max_pipelines);

// The split of `global_batch` micro-batches over pipelines (stage costs in pipeline order
// and memory limits from CostModel::MaxMicrobatches) that minimises max_i T_i(M_i) with
// M_i >= 1; ties go to lower pipeline indices. Error if no split exists (more pipelines than
// micro-batches, or the memory limits hold fewer than the batch).
struct PipelineLoad {
  const std::vector<double>* stage_costs = nullptr;
  int max_microbatches = CostModel::kNoMicrobatchLimit;
};
absl::StatusOr<std::vector<int>> SplitBatch(const CostModel& model,
                                            const std::vector<PipelineLoad>& pipelines,
                                            int global_batch);

// Stage costs of an evaluated template, in pipeline order.
std::vector<double> StageCosts(const PipelineTemplate& tmpl);
// The same into *costs (its buffer reused: a loop over a fleet's pipelines allocates once).
void StageCosts(const PipelineTemplate& tmpl, std::vector<double>* costs);

// Recomputes a plan's figures (times, shares kept) after checking it is a valid plan over
// `nodes`: every pipeline's template evaluates under `model`, its node ids exist, have the
// template's node types and appear once; shares are >= 1, sum to global_batch and fit
// memory. Idle nodes are the ones in no pipeline (reasons kept where given).
absl::StatusOr<ClusterPlan> EvaluatePlan(const CostModel& model,
                                         const std::vector<ClusterNode>& nodes, ClusterPlan plan);

// Prices in [0, kMaxPricePerHour] on the price grid (one per node type, or none), a finite
// budget >= 0, prices > 0 for kCost and prices for a budget; errors name the request's fields.
absl::Status ValidatePlanPrices(const CostModel& model, const PlanOptions& options);
// Sum of price_per_hour[type] over the nodes of the plan's pipelines (0 without prices), in
// steps (prices on the grid: ValidatePlanPrices), read back by PriceOfSteps. A node's type is
// its template position's (a valid plan's ids have those types: EvaluatePlan).
double PlanPricePerHour(const ClusterPlan& plan, const std::vector<double>& price_per_hour);

// OK when the plan's iteration time is finite and > 0, what every answer carries
// (docs/ERRORS.md). The cost model's bounds (CostModel::CheckFinite) keep compute and
// measured all-reduces in range; an all-reduce across pipelines with neither a measurement
// nor a bandwidth (oobleck-sosp23, inter_node_bytes_per_s = 0) is infinite:
// FAILED_PRECONDITION naming the fields.
absl::Status CheckPlanTimes(const ClusterPlan& plan);

// id -> index into a node list whose ids are unique (views into that list).
using NodeIndex = absl::flat_hash_map<std::string_view, int>;

// A cluster's nodes, checked once and indexed by id: the one place their rules live (1 to
// kMaxClusterNodes nodes, each id non-empty and unique, each type an index below
// num_types; INVALID_ARGUMENT naming "nodes" or "nodes[i]", RESOURCE_EXHAUSTED for too
// many). Built once, at the server's edge or by a core caller, and taken by Plan, Replan
// and EvaluatePlan alike, so that nothing checks or hashes the ids again.
class NodeSet {
 public:
  static absl::StatusOr<NodeSet> Create(std::vector<ClusterNode> nodes, int num_types);

  NodeSet() = default;  // no nodes: not a cluster (Create never makes it)
  // Moves keep the index's views valid (the nodes' buffer moves along); a copy would not.
  NodeSet(NodeSet&&) = default;
  NodeSet& operator=(NodeSet&&) = default;
  NodeSet(const NodeSet&) = delete;
  NodeSet& operator=(const NodeSet&) = delete;

  const std::vector<ClusterNode>& nodes() const { return nodes_; }
  const NodeIndex& index() const { return index_; }
  size_t size() const { return nodes_.size(); }
  // The node types the set was checked against (each node's type is below it).
  int num_types() const { return num_types_; }

 private:
  std::vector<ClusterNode> nodes_;
  NodeIndex index_;  // views into nodes_
  int num_types_ = 0;
};

// EvaluatePlan for a caller that holds the checked nodes and
// CrossPipelineAllreduceMs of the model (entries past the plan's pipeline count are not read):
// Replan, which needs all three anyway at thousands of nodes. `placement`, when given and
// the plan is valid: per node, the (pipeline, position) that runs it, {-1, -1} if none (what
// the check looked up, so that Replan does not look every id up again).
absl::StatusOr<ClusterPlan> EvaluatePlanOnValidNodes(
    const CostModel& model, const NodeSet& nodes, ClusterPlan plan,
    const std::vector<double>& allreduce_ms, std::vector<std::pair<int, int>>* placement = nullptr);

// INVALID_ARGUMENT unless `nodes` was checked against the model's node types.
absl::Status CheckNodeSetFits(const CostModel& model, const NodeSet& nodes);

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

// ---- building blocks shared with core/replan.cc -----------------------------------------

// min_nodes >= 0, max_nodes >= 0 and a max_nodes > 0 not below min_nodes (or 1), whatever
// the cluster (errors carry the field paths "min_nodes_per_pipeline" /
// "max_nodes_per_pipeline", core/field_path.h).
absl::Status ValidateLimits(const PipelineSizeLimits& limits);

// The effective limits for a cluster of `total_nodes` (errors name the field).
absl::StatusOr<PipelineSizeLimits> ResolveLimits(const PipelineSizeLimits& limits, int total_nodes);

// The template set of a cluster: the optimal template of every mix of `limits` within
// `available`, from the cache or one search. Also holds each 1-node mix (for the
// data-parallel baseline and for idle reasons) even outside the limits.
struct TemplateSet {
  std::vector<NodeMix> mixes;
  std::vector<std::shared_ptr<const MixResult>> results;  // parallel to mixes
  int from_cache = 0;

  // nullptr when the mix was not planned.
  const MixResult* Find(const NodeMix& mix) const;
};
absl::StatusOr<TemplateSet> PlanTemplateSet(TemplatePlanner& planner, const CostModel& model,
                                            const NodeMix& available,
                                            const PipelineSizeLimits& limits,
                                            const SearchOptions& options);

// A pipeline a plan search may place: its mix, template and memory limit.
struct PipelineShape {
  NodeMix mix;
  const PipelineTemplate* tmpl = nullptr;
  std::vector<double> stage_costs;
  int max_microbatches = 0;
};

// The feasible shapes of `set` with min..max nodes (shapes whose memory cannot hold even
// one micro-batch are left out).
std::vector<PipelineShape> FeasibleShapes(const CostModel& model, const TemplateSet& set,
                                          const PipelineSizeLimits& limits);
// Per node type t: why no pipeline of `shapes` includes a t node ("no feasible pipeline
// template of a..b nodes includes a <type> node"), "" when one does or available[t] == 0.
// The reason Plan and Replan give for such idle nodes.
std::vector<std::string> UnusedTypeReasons(const CostModel& model,
                                           const std::vector<PipelineShape>& shapes,
                                           const NodeMix& available,
                                           const PipelineSizeLimits& limits);

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
// FAILED_PRECONDITION when no plan exists (the message says why); RESOURCE_EXHAUSTED when
// kNodeCountDp is asked for a table beyond its bound; CANCELLED.
absl::StatusOr<PipelineSetSolution> SolvePipelineSet(const PipelineSetProblem& problem);

// The most pipelines (fixed + chosen, min_pipelines and prices ignored) of any solution of
// `problem`, capped at `at_most`; 0 when it has none. Exact, at the largest useful makespan,
// by problem.method: the node-count DP (one table fill; kAuto where its table is small) or
// integer programs "at least p pipelines" (one where at_most is reached, else a bisection);
// RESOURCE_EXHAUSTED when one stops at max_ilp_nodes undecided.
absl::StatusOr<int> MaxPipelineCount(const PipelineSetProblem& problem, int at_most);

// Indices into solution.chosen, larger pipelines first, then by mix (the order plans list
// their pipelines in).
std::vector<size_t> ChosenOrder(const std::vector<PipelineShape>& shapes,
                                const PipelineSetSolution& solution);

}  // namespace oobleck

#endif  // OOBLECK_CORE_PLAN_H_
