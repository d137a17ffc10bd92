// The layouts of whole nodes for the template search's node moves
// (docs/architecture/template-search.md#node-moves-1f1b): for a node type t and a first layer a,
// the Pareto front N_t(a, y) of (sum, max, stages, memory cap) labels of every GPU split and
// inner cut of one node on the layers [a, y), for every y at once. It does not depend on the mix:
// a node's transfers are fixed by a and y, and its memory by the stages after it, which the cap
// turns into one test at the merge.
#ifndef OOBLECK_CORE_TEMPLATE_SEARCH_NODE_DP_H_
#define OOBLECK_CORE_TEMPLATE_SEARCH_NODE_DP_H_

#include <cstdint>
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

// N_t(a, y) of one node type, for one a at a time: a forward DP over (layer, GPUs used) inside
// the node. Labels that no mix of the pass can use are dropped: those whose sum + (M - 1) max,
// plus the cheapest compute of the layers before a and after the label's last stage, exceed
// the pass's loosest bound for a node there (`limit_at_0` for a = 0, `limit` after).
class NodeLayouts {
 public:
  // `floor_prefix[l]`: a lower bound on the compute of the layers [0, l) (nondecreasing, its
  // differences lower-bound every stage's compute on the layers between).
  NodeLayouts(const StageCosts& costs, int type, int microbatches, bool track_memory,
              const std::vector<double>* floor_prefix, double limit_at_0, double limit);

  // Computes N_t(a, y) for every y > a. Polls `interrupt` per layer; false if it stopped or
  // a front grew past kMaxNodeFront (too_large() then says so).
  bool Compute(int a, Interrupt& interrupt);
  bool too_large() const { return too_large_; }
  // N_t(a, y) of the last Compute, in order of sum (empty when no layout fits).
  std::span<const NodeLabel> Front(int y) const;
  // The least max of Front(y)'s labels (+inf if none).
  double LeastMax(int y) const { return least_max_[y - a_]; }
  // The indices of Front(y) by stage count, then by max (then by sum): each stage count's
  // labels in order of max, for the merge of two staircases.
  std::span<const int32_t> ByStages(int y) const;
  // The stages of the index-th label of Front(y), in pipeline order.
  std::vector<NodeStage> Layout(int y, int index) const;
  // Labels the last Compute holds (every state's front), for the pass's budget.
  int64_t labels() const { return labels_; }

 private:
  struct Item {
    NodeLabel label;
    int32_t parent_state;  // -1: the node's start
    int32_t parent_index;
    int gpus;
  };
  int State(int p, int used) const { return (p - a_) * gpus_per_node_ + used; }
  int StateLayer(int state) const { return a_ + state / gpus_per_node_; }
  int MaxStagesFromEnd(int size_index, int begin, int end);
  // Extends every label of state (p, used) by every stage that starts at p.
  void Expand(int p, int used);
  // Keeps the Pareto front of `items` (sorted by sum).
  void Filter(std::vector<Item>& items) const;

  const StageCosts& costs_;
  const int type_, microbatches_, gpus_per_node_, num_layers_;
  const bool track_memory_;
  const std::vector<double>& floor_prefix_;
  const double limit_at_0_, limit_;
  std::vector<int> sizes_;
  // [size index][begin * (L + 1) + end]: CostModel::MaxStagesFromEnd, -1 until asked (only
  // if memory binds and the table is small; else empty).
  std::vector<std::vector<int>> max_stages_from_end_;
  int a_ = 0;
  std::vector<std::vector<Item>> partial_;       // per State(p, used), used < G
  std::vector<std::vector<Item>> closed_;        // per y - a
  std::vector<std::vector<NodeLabel>> fronts_;   // per y - a: closed_'s labels
  std::vector<std::vector<int32_t>> by_stages_;  // per y - a: ByStages
  std::vector<double> least_max_;                // per y - a: LeastMax
  int64_t labels_ = 0;
  bool too_large_ = false;
};

}  // namespace oobleck::template_search

#endif  // OOBLECK_CORE_TEMPLATE_SEARCH_NODE_DP_H_
