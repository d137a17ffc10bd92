#include "core/plan/evaluate_plan.h"

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/field_path.h"
#include "core/plan/limits.h"
#include "core/plan_search/allreduce.h"
#include "core/plan_search/batch_split.h"
#include "core/shown_value.h"
#include "core/status_macros.h"

namespace oobleck {

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

}  // namespace oobleck
