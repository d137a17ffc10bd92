#include "core/replan/context.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <string_view>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "core/field_path.h"
#include "core/plan/cluster_plan.h"
#include "core/plan/evaluate_plan.h"
#include "core/plan/fault_tolerance.h"
#include "core/plan/limits.h"
#include "core/plan/node_set.h"
#include "core/plan_search/allreduce.h"
#include "core/shown_value.h"
#include "core/status_macros.h"

namespace oobleck::replan_internal {
namespace {

absl::Status CheckOptions(const ReplanOptions& options) {
  if (options.tolerance.has_value() && !(*options.tolerance >= 0 && *options.tolerance <= 1)) {
    return InvalidField("tolerance",
                        absl::StrFormat(" must be in [0, 1] (got %g)", *options.tolerance));
  }
  for (const auto& [field, value] : {std::pair{"horizon_iterations", options.horizon_iterations},
                                     std::pair{"restart_overhead_s", options.restart_overhead_s}}) {
    if (!(std::isfinite(value) && value >= 0)) {
      return InvalidField(field, absl::StrFormat(" must be a finite number >= 0 (got %g)", value));
    }
  }
  return ValidateFaultTolerance(options.fault_tolerance);
}

// The event against the old cluster: failed[i] per node, the joined nodes that are new.
struct EventNodes {
  std::vector<char> failed;
  std::vector<std::string> failed_ids;
  std::vector<ClusterNode> joined;
};

absl::Status ReadFailures(const std::vector<ClusterNode>& nodes, const NodeIndex& node_at,
                          const ClusterEvent& event, EventNodes* out, ReplanContext* ctx) {
  out->failed.assign(nodes.size(), 0);
  for (size_t i = 0; i < event.failed_node_ids.size(); ++i) {
    const std::string& id = event.failed_node_ids[i];
    const std::string field = absl::StrCat("failed_node_ids[", i, "]");
    if (id.empty()) return InvalidField(field, " is empty");
    auto it = node_at.find(id);
    if (it == node_at.end()) {
      ctx->ignored_failed.push_back(id);  // already removed by an earlier replan
      continue;
    }
    if (out->failed[it->second]) {
      return InvalidField(field, absl::StrCat(" ", Quote(id), " is listed twice"));
    }
    out->failed[it->second] = 1;
    out->failed_ids.push_back(id);
  }
  return absl::OkStatus();
}

absl::Status ReadJoins(const CostModel& model, const std::vector<ClusterNode>& nodes,
                       const NodeIndex& node_at, const ClusterEvent& event, EventNodes* out,
                       ReplanContext* ctx) {
  absl::flat_hash_set<std::string_view> joined_ids;
  for (size_t i = 0; i < event.joined_nodes.size(); ++i) {
    const ClusterNode& node = event.joined_nodes[i];
    const std::string field = absl::StrCat("joined_nodes[", i, "]");
    const std::string id_field = absl::StrCat(field, ".id");
    if (node.id.empty()) return InvalidField(id_field, " is empty");
    if (node.type < 0 || node.type >= model.num_types()) {
      return InvalidField(field, absl::StrCat(" (", Quote(node.id), ") has no valid node type"));
    }
    if (!joined_ids.insert(node.id).second) {
      return InvalidField(id_field, absl::StrCat(" ", Quote(node.id), " is listed twice"));
    }
    auto it = node_at.find(node.id);
    if (it != node_at.end() && out->failed[it->second]) {
      return InvalidField(id_field,
                          absl::StrCat(" ", Quote(node.id), " is also in failed_node_ids"));
    }
    if (it != node_at.end()) {
      const int type = nodes[it->second].type;
      if (type != node.type) {
        return InvalidField(
            field, absl::StrCat(" ", Quote(node.id), " is a ", model.node_type(node.type).name,
                                " node but the cluster already has it as a ",
                                model.node_type(type).name, " node"));
      }
      ctx->ignored_joined.push_back(node.id);  // already joined by an earlier replan
      continue;
    }
    out->joined.push_back(node);
  }
  return absl::OkStatus();
}

// Survivors (old nodes in order, then joined ones), what each holds, and per old pipeline
// its survivors by position. placed[n]: the (pipeline, position) of the old plan that runs
// node n, {-1, -1} if none (EvaluatePlanOnValidNodes).
absl::Status PlaceSurvivors(const std::vector<ClusterNode>& nodes,
                            const std::vector<std::pair<int, int>>& placed, const EventNodes& event,
                            ReplanContext* ctx) {
  std::vector<LayerRange> held_by(nodes.size());
  for (size_t n = 0; n < nodes.size(); ++n) {
    const auto [i, j] = placed[n];
    if (i >= 0) held_by[n] = LayersOfPosition(ctx->old.pipelines[i].tmpl, j);
  }
  std::vector<int> survivor_of(nodes.size(), -1);
  ctx->survivors.reserve(nodes.size() + event.joined.size());
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (event.failed[i]) continue;
    survivor_of[i] = static_cast<int>(ctx->survivors.size());
    ctx->survivors.push_back(nodes[i]);
    ctx->held.push_back(held_by[i]);
    ctx->joined.push_back(false);
  }
  for (const ClusterNode& node : event.joined) {
    ctx->survivors.push_back(node);
    ctx->held.push_back({});
    ctx->joined.push_back(true);
  }
  if (ctx->survivors.size() > static_cast<size_t>(kMaxClusterNodes)) {
    return FieldError(absl::StatusCode::kResourceExhausted, "joined_nodes",
                      absl::StrFormat(" would grow the cluster to %d nodes, more than the limit "
                                      "of %d nodes per plan",
                                      ctx->survivors.size(), kMaxClusterNodes));
  }
  ctx->old_positions.resize(ctx->old.pipelines.size());
  for (size_t i = 0; i < ctx->old.pipelines.size(); ++i) {
    ctx->old_positions[i].assign(ctx->old.pipelines[i].node_ids.size(), -1);
  }
  for (size_t n = 0; n < nodes.size(); ++n) {
    const auto [i, j] = placed[n];
    if (i >= 0) ctx->old_positions[i][j] = survivor_of[n];
  }
  for (const std::vector<int>& positions : ctx->old_positions) {
    ctx->intact.push_back(
        std::all_of(positions.begin(), positions.end(), [](int s) { return s >= 0; }));
  }
  return absl::OkStatus();
}

std::string RangesText(const std::vector<LayerRange>& ranges) {
  std::vector<std::string> parts;
  for (const LayerRange& r : ranges) parts.push_back(absl::StrFormat("[%d, %d)", r.begin, r.end));
  return absl::StrJoin(parts, ", ");
}

// Every layer needs a surviving replica: nothing else has its trained weights.
absl::Status CheckEveryLayerHeld(const ReplanContext& ctx, int L,
                                 std::vector<std::string> failed_ids) {
  std::vector<LayerRange> lost;
  std::vector<int> replicas(L + 1, 0);  // a difference array of the held ranges
  for (const LayerRange& h : ctx.held) {
    if (h.empty()) continue;
    ++replicas[std::clamp(h.begin, 0, L)];
    --replicas[std::clamp(h.end, 0, L)];
  }
  for (int l = 0, running = 0; l < L; ++l) {
    running += replicas[l];
    if (running > 0) continue;
    if (!lost.empty() && lost.back().end == l) {
      lost.back().end = l + 1;
    } else {
      lost.push_back({l, l + 1});
    }
  }
  if (!lost.empty()) {
    std::sort(failed_ids.begin(), failed_ids.end());
    return absl::FailedPreconditionError(
        absl::StrCat("layers ", RangesText(lost),
                     " have no surviving replica (every node that held them "
                     "failed: ",
                     absl::StrJoin(failed_ids, ", "), "); restart the job from a checkpoint"));
  }
  if (ctx.survivors.empty()) {
    return absl::FailedPreconditionError("no node survives the event");
  }
  return absl::OkStatus();
}

// Oobleck's fault-tolerance rule: N - f of the cluster after the event, with the largest
// f <= fault_tolerance that leaves min_nodes (ResolveLimits made min_nodes <= N).
absl::Status CapPipelineSizes(int fault_tolerance, ReplanContext* ctx) {
  const int N = static_cast<int>(ctx->survivors.size());
  const int f = std::min(fault_tolerance, N - ctx->limits.min_nodes);
  if (f < fault_tolerance) {
    ctx->size_cap_degraded = absl::StrCat(
        "fault_tolerance = ", fault_tolerance, ": ", OobleckCapText(N, fault_tolerance),
        ", fewer than min_nodes_per_pipeline = ", ctx->limits.min_nodes,
        ", so the plan keeps f = ", f);
  }
  ASSIGN_OR_RETURN(ctx->limits, CapForOobleckFaultTolerance(ctx->limits, N, f));
  ctx->size_cap = N - f;
  return absl::OkStatus();
}

}  // namespace

LayerRange LayersOfPosition(const PipelineTemplate& tmpl, int position) {
  LayerRange r{INT_MAX, INT_MIN};
  for (const Stage& s : tmpl.stages) {
    if (s.node_index != position) continue;
    r.begin = std::min(r.begin, s.layer_begin);
    r.end = std::max(r.end, s.layer_end);
  }
  return r.empty() ? LayerRange{} : r;
}

void LayersOfPositions(const PipelineTemplate& tmpl, std::vector<LayerRange>* ranges) {
  const int positions = tmpl.num_nodes();
  ranges->assign(positions, LayerRange{INT_MAX, INT_MIN});
  for (const Stage& s : tmpl.stages) {
    if (s.node_index < 0 || s.node_index >= positions) continue;
    LayerRange& r = (*ranges)[s.node_index];
    r.begin = std::min(r.begin, s.layer_begin);
    r.end = std::max(r.end, s.layer_end);
  }
  for (LayerRange& r : *ranges) {
    if (r.empty()) r = LayerRange{};
  }
}

absl::StatusOr<ReplanContext> Prepare(const CostModel& model, const NodeSet& node_set,
                                      ClusterPlan current, const ClusterEvent& event,
                                      const ReplanOptions& options) {
  RETURN_IF_ERROR(CheckOptions(options));
  // The nodes first, so that every EvaluatePlan error below is about the plan.
  RETURN_IF_ERROR(CheckNodeSetFits(model, node_set));
  ReplanContext ctx;
  ctx.model = &model;
  ctx.assignment = options.assignment;
  const std::vector<ClusterNode>& nodes = node_set.nodes();
  const NodeIndex& node_at = node_set.index();
  // Entry P is the same whatever the length: one table for the old plan and the new one.
  std::vector<double> allreduce_ms = CrossPipelineAllreduceMs(
      model, static_cast<int>(std::min(nodes.size() + event.joined_nodes.size(),
                                       static_cast<size_t>(kMaxClusterNodes))));
  std::vector<std::pair<int, int>> placed;  // per node: its (pipeline, position), or -1s
  absl::StatusOr<ClusterPlan> old =
      EvaluatePlanOnValidNodes(model, node_set, std::move(current), allreduce_ms, &placed);
  if (!old.ok()) return InField(old.status(), "plan");
  ctx.old = *std::move(old);

  EventNodes read;
  RETURN_IF_ERROR(ReadFailures(nodes, node_at, event, &read, &ctx));
  RETURN_IF_ERROR(ReadJoins(model, nodes, node_at, event, &read, &ctx));
  ctx.changed = !read.failed_ids.empty() || !read.joined.empty();
  RETURN_IF_ERROR(PlaceSurvivors(nodes, placed, read, &ctx));
  const int L = model.num_layers();
  if (absl::Status s = CheckEveryLayerHeld(ctx, L, std::move(read.failed_ids)); !s.ok()) {
    return s;
  }

  const int N = static_cast<int>(ctx.survivors.size());
  ASSIGN_OR_RETURN(ctx.limits, ResolveLimits(options.limits, N));
  if (options.fault_tolerance_rule == FaultToleranceRule::kOobleck) {
    RETURN_IF_ERROR(CapPipelineSizes(options.fault_tolerance, &ctx));
  }
  allreduce_ms.resize(std::max(N, 1) + 1);  // as CrossPipelineAllreduceMs(model, N)
  ctx.allreduce_ms = std::move(allreduce_ms);
  return ctx;
}

}  // namespace oobleck::replan_internal
