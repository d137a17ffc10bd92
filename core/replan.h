// Replanning after node failures and joins (docs/architecture/replan.md). Stateless: the
// caller passes the cluster, the current plan and the event; the answer is a new plan, the
// copy plan that brings every node the layers its new stages need, and the figures to
// compare it with the old plan and with Oobleck's own fallback rule.
#ifndef OOBLECK_CORE_REPLAN_H_
#define OOBLECK_CORE_REPLAN_H_

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "core/cost_model.h"
#include "core/plan/cluster_plan.h"
#include "core/plan/cluster_planner.h"
#include "core/plan/fault_tolerance.h"
#include "core/plan/limits.h"
#include "core/plan/node_set.h"

namespace oobleck {

struct ClusterEvent {
  std::vector<std::string> failed_node_ids;
  std::vector<ClusterNode> joined_nodes;
};

// Layers [layer_begin, layer_end) that dest_node_id needs and source_node_id (a surviving
// node that held them in the current plan) sends.
struct LayerCopy {
  std::string dest_node_id;
  std::string source_node_id;
  int layer_begin = 0;
  int layer_end = 0;
  double param_bytes = 0;
};

enum class ReplanStrategy {
  kUnchanged,        // the event changes nothing (replayed or empty)
  kOptimal,          // the fastest plan for the new cluster (exact w.r.t. the template set)
  kKeepPipelines,    // pipelines that lost no node kept as they are, the rest planned exactly
  kDropBroken,       // pipelines that lost no node kept, the others dropped: nothing to copy
  kOobleckFallback,  // Oobleck's rule: shrink / borrow / merge the broken pipelines
};
std::string_view ReplanStrategyName(ReplanStrategy strategy);
// The strategy a name (ReplanStrategyName) stands for; "unchanged" is not one to ask for.
std::optional<ReplanStrategy> ParseReplanStrategy(std::string_view name);

// What applying a new plan costs (docs/COST_MODEL.md#reconfiguration-downtime): the copy
// plan's transfer time plus a restart overhead whenever a pipeline changes.
inline constexpr double kDefaultRestartOverheadS = 5;
// Iterations a new plan is expected to run before the next event: Replan minimises
// downtime_s + horizon_iterations * iteration_time.
inline constexpr double kDefaultHorizonIterations = 1000;

// The deprecated tolerance rule's fraction when a client asks for the rule without a value.
inline constexpr double kDefaultReplanTolerance = 0.01;

// How a candidate's pipeline positions are bound to nodes (docs/architecture/replan.md).
// Both give the fewest bytes to copy (kHungarian only up to 2^27 steps, greedy past them);
// they may pick different nodes among equally good ones.
enum class NodeAssignmentMethod {
  kClasses,    // a transportation problem over (layers needed) x (layers held) classes
  kHungarian,  // the Hungarian method over every position x node: the tests' oracle
};

struct ReplanOptions {
  // Deprecated rule, used only when set: plans whose iteration time is within this fraction
  // of the fastest compete on bytes moved, then on pipelines kept intact, and the answer is
  // never slower than Oobleck's rule. Unset: the downtime objective below.
  std::optional<double> tolerance;
  double horizon_iterations = kDefaultHorizonIterations;  // finite, >= 0
  double restart_overhead_s = kDefaultRestartOverheadS;   // finite, >= 0
  // The f-failure guarantee: the new plan has at least f + 1 pipelines when the survivors
  // allow it, else as many as they allow (ReplanResult::degraded_reason says so).
  int fault_tolerance = 0;
  // kOobleck: fault_tolerance caps the new plan's pipelines at N - f nodes instead, N the
  // nodes after the event; a smaller f when the survivors need it (degraded_reason says so).
  FaultToleranceRule fault_tolerance_rule = FaultToleranceRule::kPipelines;
  // Only this strategy's plan (e.g. Oobleck's rule, to compare with it); FAILED_PRECONDITION
  // when it finds none.
  std::optional<ReplanStrategy> force_strategy;
  PipelineSizeLimits limits;
  SearchOptions search;
  NodeAssignmentMethod assignment = NodeAssignmentMethod::kClasses;
};

// A plan Replan weighed, with what applying it would cost.
struct ReplanAlternative {
  ReplanStrategy strategy = ReplanStrategy::kOptimal;
  double iteration_time_ms = 0;
  double downtime_s = 0;
  double copy_bytes = 0;
  int pipelines_kept = 0;
  int fault_tolerance = 0;
};

struct ReplanResult {
  std::vector<ClusterNode> nodes;  // the cluster after the event (survivors, then joined)
  ClusterPlan old_plan;            // the current plan, re-evaluated on the old cluster
  ClusterPlan plan;                // the new plan
  std::vector<LayerCopy> copies;
  double copy_bytes = 0;
  ReplanStrategy strategy = ReplanStrategy::kUnchanged;
  int pipelines_kept = 0;                // pipelines with the same nodes and template as before
  double fastest_iteration_time_ms = 0;  // the fastest candidate (the new plan is within tolerance)
  std::optional<double> oobleck_fallback_ms;  // unset: the rule finds no plan
  std::string oobleck_fallback_failure;
  // Applying the new plan: transfer_s of copies (0 when nothing is copied) plus the restart
  // overhead when some pipeline changes; 0 for an unchanged plan.
  double downtime_s = 0;
  double transfer_s = 0;
  // The Pareto front (iteration time vs downtime) of the plans weighed, fastest first; the
  // chosen plan is one of them.
  std::vector<ReplanAlternative> alternatives;
  // Set when the plan tolerates fewer failures than options.fault_tolerance, with the reason.
  std::string degraded_reason;
  // Replayed parts of the event, ignored (Replan is idempotent): failed ids that are not in
  // the cluster, joined nodes already in it with the same type.
  std::vector<std::string> ignored_failed_node_ids;
  std::vector<std::string> ignored_joined_node_ids;
};

// The time (s) a copy plan takes when every node sends and receives over its own link of
// `link_bytes_per_s` at once, all copies in parallel: the busiest node's bytes sent or
// received, whichever is more, over the link (docs/COST_MODEL.md#reconfiguration-downtime).
double CopyTransferSeconds(const std::vector<LayerCopy>& copies, double link_bytes_per_s);

// INVALID_ARGUMENT for a malformed cluster, plan or event (messages name "nodes[i]",
// "plan.pipelines[i]...", "failed_node_ids[i]", "joined_nodes[i]"); FAILED_PRECONDITION when some
// layer has no surviving replica (the message lists them) or when no plan exists for the
// surviving nodes; CANCELLED.
// `current` is taken by value so that a caller done with it can move it in.
absl::StatusOr<ReplanResult> Replan(const ClusterPlanner& planner, const CostModel& model,
                                    const NodeSet& nodes, ClusterPlan current,
                                    const ClusterEvent& event, const ReplanOptions& options);
// The same for nodes not checked yet (NodeSet::Create).
absl::StatusOr<ReplanResult> Replan(const ClusterPlanner& planner, const CostModel& model,
                                    const std::vector<ClusterNode>& nodes, ClusterPlan current,
                                    const ClusterEvent& event, const ReplanOptions& options);

// The reference rule, generalised to node types (used by Replan as a candidate and by the
// tests as the bar): every pipeline that lost nodes takes the optimal template of its
// remaining mix; if that mix has none (or is below min_nodes), it borrows one node from the
// largest other pipeline that can spare one, else merges with the smallest other pipeline
// whose union has a template; the batch is split optimally; joined nodes stay idle (Oobleck
// has no joins). FAILED_PRECONDITION when the rule gets stuck.
absl::StatusOr<ClusterPlan> OobleckFallbackPlan(
    const ClusterPlanner& planner, const CostModel& model, const std::vector<ClusterNode>& nodes,
    const ClusterPlan& current, const ClusterEvent& event, const ReplanOptions& options);

}  // namespace oobleck

#endif  // OOBLECK_CORE_REPLAN_H_
