// The layouts of whole nodes for the template search's node moves
// (docs/architecture/template-search.md#node-moves-1f1b): for a node type t and a first layer a,
// the Pareto front N_t(a, y) of (sum, max, stages, memory cap) labels of every GPU split and
// inner cut of one node on the layers [a, y), for every y at once. It does not depend on the mix:
// a node's transfers are fixed by a and y, and its memory by the stages after it, which the cap
// turns into one test at the merge.
#ifndef OOBLECK_CORE_TEMPLATE_SEARCH_NODE_DP_H_
#define OOBLECK_CORE_TEMPLATE_SEARCH_NODE_DP_H_

#include <cstdint>
#include <limits>
#include <optional>
#include <span>
#include <vector>

#include "absl/status/status.h"
#include "core/interrupt.h"
#include "core/template_search/stage_costs.h"

namespace oobleck::template_search {

// How the label search moves between states: by one stage (through partial node states) or by
// one whole node (boundary states only; 1f1b).
// kAuto: kNodes where they pay off (PreferNodeMoves), else kStages.
enum class Moves { kStages, kNodes, kAuto };

// Node moves are used below this many layers: a node's layouts cost O(L^2 G sizes) per first
// layer, O(L^3) per type in all, which at 1000 layers outgrows the pass it replaces.
inline constexpr int kNodeMovesBelowLayers = 256;

// Node moves pay off from this many node multisets inside the mixes: a node's layouts cost the
// same whatever the mixes, while the partial states they replace grow with the multisets. On
// bench/README.md's LLM cases: 4 types, mixes <= 4 nodes (70 multisets) 0.23 -> 0.95 s CPU and
// 6 types <= 4 (210) 1.10 -> 2.41 s, but 4 types <= 8 (495) 3.14 -> 1.92 s and 6 types <= 8
// (3 003) 50.0 -> 16.0 s.
inline constexpr int kNodeMovesFromMultisets = 256;

// Whether kAuto moves by nodes: under 1f1b (the caller's to check), below
// kNodeMovesBelowLayers layers and from kNodeMovesFromMultisets multisets.
inline bool PreferNodeMoves(int num_layers, int useful_multisets) {
  return num_layers < kNodeMovesBelowLayers && useful_multisets >= kNodeMovesFromMultisets;
}

// Most labels one N_t(a, y) may hold: an entry of the search names its node label in 16 bits.
inline constexpr int kMaxNodeFront = 65535;

// A pass with node moves stops with this status when some N_t(a, y) holds more than
// kMaxNodeFront labels; the search then redoes the request with stage moves.
absl::Status NodeFrontTooLarge();
bool IsNodeFrontTooLarge(const absl::Status& status);

// One layout of a node: its labels as the 1f1b objective reads them.
struct NodeLabel {
  double sum = 0;  // the node's stage costs, first stage first
  double max = 0;
  int stages = 0;
  // The most stages after the node with which every stage of it fits in memory (negative:
  // none; a large value when memory never binds).
  int cap = 0;
};

// One stage of a node's layout.
struct NodeStage {
  int gpus, layer_begin, layer_end;
};

// Most labels the layouts of one node type keep computed for later passes (NodeLayouts):
// past it, Prepare forgets every first layer but the one it is at. About 21 MB of layouts per
// type; bench/README.md's memory-bound LLM cases keep 65 k (4 types) and 89 k (6 types) per
// type on average after their first pass.
inline constexpr int64_t kMaxKeptNodeLabels = int64_t{1} << 19;

// N_t(a, y) of one node type, for one a at a time: a forward DP over (layer, GPUs used) inside
// the node. Labels that no mix of a pass can use are dropped: those whose sum + (M - 1) max,
// plus the cheapest compute of the layers before a and after the label's last stage, exceed
// the pass's loosest bound for a node there (its `limit`). The layouts at a computed for one
// pass are kept for the next passes of the request (up to kMaxKeptNodeLabels): a pass whose
// limit is no looser reads them filtered by its own limit, the same fronts as computed at that
// limit (a label dropped by a limit leads only to labels above it: the test's left side never
// falls as stages are added, and a label's dominators pass wherever it does; see
// docs/architecture/template-search.md#node-moves-1f1b).
class NodeLayouts {
 public:
  // `floor_prefix[l]`: a lower bound on the compute of the layers [0, l) (nondecreasing, its
  // differences lower-bound every stage's compute on the layers between). Keeps up to
  // `max_kept_labels` (tests pass less).
  NodeLayouts(const StageCosts& costs, int type, int microbatches, bool track_memory,
              std::vector<double> floor_prefix, int64_t max_kept_labels = kMaxKeptNodeLabels);

  // Makes Front, ByStages, LeastMax and Layout answer N_t(a, y) for every y > a as a pass
  // bounded by `limit` has them: the layouts kept at a if they were computed at a limit no
  // tighter, else computed at `compute_limit` (NaN: `limit`; a pass that reads a's layouts
  // again passes the computed_limit() it read them at, so that it reads the same fronts).
  // Polls `interrupt` per layer; false if it stopped or a front grew past kMaxNodeFront
  // (too_large() then says so).
  bool Prepare(int a, double limit, Interrupt& interrupt,
               double compute_limit = std::numeric_limits<double>::quiet_NaN());
  bool too_large() const { return too_large_; }
  // The limit the layouts Prepare read were computed at.
  double computed_limit() const { return computed_[a_].limit; }
  // N_t(a, y) of the last Prepare, in order of sum (empty when no layout fits).
  std::span<const NodeLabel> Front(int y) const;
  // The least max of Front(y)'s labels (+inf if none).
  double LeastMax(int y) const { return least_max_[y - a_]; }
  // The indices of Front(y) by stage count, then by max (then by sum): each stage count's
  // labels in order of max, for the merge of two staircases.
  std::span<const int32_t> ByStages(int y) const;
  // The stages of the index-th label of Front(y), in pipeline order.
  std::vector<NodeStage> Layout(int y, int index) const;
  // Labels held (every state's front, at every first layer kept), for a pass's budget.
  int64_t labels() const { return kept_labels_; }

 private:
  struct Item {
    NodeLabel label;
    int32_t parent_state;  // -1: the node's start
    int32_t parent_index;
    int gpus;
  };
  // The DP's fronts at one first layer a, computed at `limit` (valid: computed at all), each
  // state's in one array: partial[partial_at[State(a, p, used)] + i] (used < G), closed
  // (N_t(a, y), by sum) and order (its ByStages) at closed_at[y - a] + i.
  struct Computed {
    bool valid = false;
    double limit = 0;
    std::vector<Item> partial, closed;
    std::vector<int32_t> order, partial_at, closed_at;
    int64_t labels = 0;
  };
  int State(int a, int p, int used) const { return (p - a) * gpus_per_node_ + used; }
  int StateLayer(int a, int state) const { return a + state / gpus_per_node_; }
  int MaxStagesFromEnd(int size_index, int begin, int end);
  // Computes the DP at a with `limit` into computed_[a]; false if stopped or too large.
  bool Compute(int a, double limit, Interrupt& interrupt);
  // Extends every label of state (p, used) by every stage that starts at p.
  void Expand(int a, double limit, int p, int used);
  // Keeps the Pareto front of `items` (sorted by sum).
  void Filter(std::vector<Item>& items) const;
  // The fronts of computed_[a_] whose labels pass `limit`, as Front and ByStages read them.
  bool View(double limit);
  // Whether a label of N_t(a, y) passes `limit` (the test Expand drops labels by).
  bool Passes(const NodeLabel& x, int a, int y, double limit) const;

  const StageCosts& costs_;
  const int type_, microbatches_, gpus_per_node_, num_layers_;
  const bool track_memory_;
  const std::vector<double> floor_prefix_;
  const int64_t max_kept_labels_;
  std::vector<int> sizes_;
  // [size index][begin * (L + 1) + end]: CostModel::MaxStagesFromEnd, -1 until asked (only
  // if memory binds and the table is small; else empty).
  std::vector<std::vector<int>> max_stages_from_end_;
  // Compute's scratch: the items of each partial state (State(a, p, used)) and of each
  // closed one (y - a) while the DP runs.
  std::vector<std::vector<Item>> partial_, closed_;
  std::vector<Computed> computed_;  // per first layer a
  int64_t kept_labels_ = 0;         // over computed_
  // The view of the last Prepare, per y - a: Front's labels, ByStages, LeastMax and the
  // index of each label in computed_[a_].closed.
  int a_ = 0;
  std::vector<std::vector<NodeLabel>> fronts_;
  std::vector<std::vector<int32_t>> by_stages_;
  std::vector<double> least_max_;
  std::vector<std::vector<int32_t>> kept_index_;
  std::vector<int32_t> remap_;  // scratch of View
  bool too_large_ = false;
};

// The node layouts of every type (none for a type no pass has needed yet), shared by the passes
// of one request (label_search.h).
using NodeLayoutsByType = std::vector<std::optional<NodeLayouts>>;

}  // namespace oobleck::template_search

#endif  // OOBLECK_CORE_TEMPLATE_SEARCH_NODE_DP_H_
