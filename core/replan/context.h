// Replan's view of the cluster after an event (docs/architecture/replan.md): the survivors,
// the layers each holds, which old pipelines survived intact, and the figures every
// candidate shares. Internal to core/replan.cc and core/replan/*.
#ifndef OOBLECK_CORE_REPLAN_CONTEXT_H_
#define OOBLECK_CORE_REPLAN_CONTEXT_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/cost_model.h"
#include "core/plan/cluster_plan.h"
#include "core/plan/limits.h"
#include "core/plan/node_set.h"
#include "core/replan.h"

namespace oobleck::replan_internal {

struct LayerRange {
  int begin = 0;
  int end = 0;  // exclusive; empty when end <= begin
  bool empty() const { return end <= begin; }
};

// The layers a template position (one node) runs: its stages are consecutive.
LayerRange LayersOfPosition(const PipelineTemplate& tmpl, int position);
// LayersOfPosition of every position of tmpl, in one pass over its stages (into *ranges).
void LayersOfPositions(const PipelineTemplate& tmpl, std::vector<LayerRange>* ranges);

// The cluster after the event and what every surviving node holds.
struct ReplanContext {
  const CostModel* model = nullptr;
  ClusterPlan old;  // evaluated on the old cluster
  std::vector<ClusterNode> survivors;
  std::vector<LayerRange> held;                 // per survivor: layers it holds now
  std::vector<bool> joined;                     // per survivor
  std::vector<std::vector<int>> old_positions;  // per old pipeline: survivor index or -1
  std::vector<bool> intact;                     // per old pipeline: every node survived
  std::vector<double> allreduce_ms;             // P = 0..survivors
  PipelineSizeLimits limits;                    // resolved for the survivors
  // Oobleck's fault-tolerance rule: no pipeline of more than size_cap nodes (0: no cap),
  // and why the cap is looser than N - f when it is.
  int size_cap = 0;
  std::string size_cap_degraded;
  NodeAssignmentMethod assignment = NodeAssignmentMethod::kClasses;
  std::vector<std::string> ignored_failed, ignored_joined;
  bool changed = false;  // the event removes or adds some node

  double ParamBytes(int type, LayerRange r) const {
    return r.empty() ? 0 : model->ParamBytes(type, r.begin, r.end);
  }
  // Bytes node s must receive to run `need`.
  double MissingBytes(int s, LayerRange need) const {
    const int type = survivors[s].type;
    const LayerRange h = held[s];
    const LayerRange overlap{std::max(need.begin, h.begin), std::min(need.end, h.end)};
    return ParamBytes(type, need) - (h.empty() ? 0 : ParamBytes(type, overlap));
  }
};

// Checks the options, the plan (evaluated on the old cluster, whose nodes were checked when
// the set was made) and the event (replayed parts go to ignored_*), and builds the context.
// Errors as Replan's (replan.h).
absl::StatusOr<ReplanContext> Prepare(const CostModel& model, const NodeSet& nodes,
                                      ClusterPlan current, const ClusterEvent& event,
                                      const ReplanOptions& options);

}  // namespace oobleck::replan_internal

#endif  // OOBLECK_CORE_REPLAN_CONTEXT_H_
