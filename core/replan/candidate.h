// Replan's candidates (docs/architecture/replan.md): drafts of pipelines, bound to
// survivors so that the bytes to copy are least, with their copy plans and figures.
// Internal to core/replan.cc and core/replan/*.
#ifndef OOBLECK_CORE_REPLAN_CANDIDATE_H_
#define OOBLECK_CORE_REPLAN_CANDIDATE_H_

#include <algorithm>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/plan/cluster_plan.h"
#include "core/replan/context.h"

namespace oobleck::replan_internal {

// A pipeline of a candidate before it is bound to concrete nodes.
struct DraftPipeline {
  const PipelineTemplate* tmpl = nullptr;
  // bound: survivor index per template position. Otherwise the node set the pipeline must
  // use (any order), or empty: take nodes from the pool of unused survivors.
  std::vector<int> nodes;
  bool bound = false;
  int microbatches = 0;
};

struct Draft {
  ReplanStrategy strategy = ReplanStrategy::kOptimal;
  std::vector<DraftPipeline> pipelines;
};

// A LayerCopy between survivor indices.
struct IndexedCopy {
  int dest = 0;
  int source = 0;
  int layer_begin = 0;
  int layer_end = 0;
  double param_bytes = 0;
};

// A draft bound to survivors, with the figures Replan chooses by; Materialize turns the
// chosen one into a ClusterPlan.
struct Candidate {
  ReplanStrategy strategy = ReplanStrategy::kOptimal;
  Draft draft;                  // every pipeline bound: nodes[j] runs position j
  std::vector<double> time_ms;  // per pipeline: T_i(M_i)
  double pipeline_time_ms = 0;
  double allreduce_ms = 0;
  double iteration_time_ms = 0;
  std::vector<IndexedCopy> copies;
  double bytes = 0;
  int kept = 0;
  double transfer_s = 0;  // PriceDowntime
  double downtime_s = 0;

  int fault_tolerance() const { return std::max(0, static_cast<int>(draft.pipelines.size()) - 1); }
};

// Per node type and layer, the survivors that hold the layer, the longest holds first, with
// running minima of ids: the copy plan picks its source among thousands of holders by a
// binary search instead of a scan (one per layer range copied).
class LayerHolders {
 public:
  explicit LayerHolders(const ReplanContext& ctx);

  // Among the holders of layer l of `type`: the longest run within [l, end), then the
  // smallest id; -1 if none.
  int Best(int type, int l, int end) {
    const size_t i = static_cast<size_t>(type) * layers_ + l;
    if (!sorted_[i]) Sort(i);
    const auto list = holders_.begin() + starts_[i], list_end = holders_.begin() + starts_[i + 1];
    if (list == list_end) return -1;
    auto reaching_at_least = [&](int e) {
      return std::partition_point(list, list_end, [&](int s) { return ctx_.held[s].end >= e; });
    };
    // Every holder reaching `end` runs to it: the smallest id among those wins. If none
    // does, the smallest id among the longest holds.
    auto reaching = reaching_at_least(end);
    if (reaching == list) reaching = reaching_at_least(ctx_.held[*list].end);
    return smallest_id_[reaching - holders_.begin() - 1];
  }

 private:
  // A list is sorted (longest hold first; among equal ones any fixed order, so ints are
  // compared, not ids) when first asked for: a replan after one failure copies a few ranges
  // and asks for a few of the types x layers lists.
  void Sort(size_t i);

  const ReplanContext& ctx_;
  int layers_;
  // The lists one after the other: list i is holders_[starts_[i], starts_[i + 1]).
  std::vector<int> starts_;
  std::vector<int> holders_;
  std::vector<int> smallest_id_;  // parallel to holders_, once its list is sorted
  std::vector<char> sorted_;      // per list
};

// Binds every pipeline of the draft not bound yet (its node set, else the pool of survivors
// no pipeline uses), the fewest bytes to copy per node type (ctx.assignment says how).
absl::Status BindDraft(const ReplanContext& ctx, Draft* draft);

// Binds the draft, then its figures and copy plan: each missing layer range from a
// surviving holder, same node type first, then the same new pipeline, then the longest run,
// then id.
absl::StatusOr<Candidate> Finalize(const ReplanContext& ctx, LayerHolders& layer_holders,
                                   Draft draft);

// The candidate as a plan of node ids and a copy plan (only the chosen one is built: at
// fleet scale each is thousands of ids and templates). type_reasons: why a type is idle.
void Materialize(const ReplanContext& ctx, const Candidate& c,
                 const std::vector<std::string>& type_reasons, ClusterPlan* plan,
                 std::vector<LayerCopy>* copies);

}  // namespace oobleck::replan_internal

#endif  // OOBLECK_CORE_REPLAN_CANDIDATE_H_
