// The state space of the template search (docs/architecture/template-search.md#states): node
// multisets inside some requested mix, numbered densely, and the node states of a suffix's leftmost
// node (boundary, or partial with some GPUs used).
#ifndef OOBLECK_CORE_TEMPLATE_SEARCH_STATE_SPACE_H_
#define OOBLECK_CORE_TEMPLATE_SEARCH_STATE_SPACE_H_

#include <cstdint>
#include <utility>
#include <vector>

#include "core/cluster.h"
#include "core/cost_model.h"
#include "core/interrupt.h"
#include "core/search_size.h"

namespace oobleck::template_search {

class StateSpace {
 public:
  // Walks the box of the mixes (up to TemplateSearchLimits::max_box_work steps), polling
  // `interrupt` on the way: when it stops the walk, the space is incomplete and the caller
  // must check interrupt->stopped() before any use. Without `partial_nodes` the only node
  // state is the boundary (num_node_states() == 1): a search that moves by whole nodes
  // (node_dp.h) has no other, and every per-(multiset, node state) table of it and of its
  // bounds is then that many times smaller (43 node states at 6 types of 8 GPUs).
  StateSpace(const CostModel& model, const std::vector<NodeMix>& mixes,
             Interrupt* interrupt = nullptr, bool partial_nodes = true);

  // Multisets inside some requested mix: the only ones states and bounds are kept for.
  int num_useful() const { return static_cast<int>(codes_.size()); }
  // The d-th of them (0 <= d < num_useful()) and back; Dense(u) needs within(u).
  int Code(int d) const { return codes_[d]; }
  int Dense(int u) const { return dense_[u]; }
  int num_node_states() const { return num_node_states_; }
  int64_t num_states() const {
    return int64_t{model_.num_layers() + 1} * num_useful() * num_node_states_;
  }
  // The state (a, u, ns); u must be within some mix.
  int64_t Index(int a, int u, int ns) const {
    return (int64_t{a} * num_useful() + dense_[u]) * num_node_states_ + ns;
  }
  // The partial node state of type t with `used` GPUs used (a space with partial nodes).
  int PartialState(int t, int used) const { return 1 + partial_offset_[t] + used - 1; }
  // Inverse of PartialState: (type, used).
  // (Inline: the label search asks it per partial-node step.)
  std::pair<int, int> PartialOf(int ns) const {
    for (int t = model_.num_types() - 1; t >= 0; --t) {
      if (ns - 1 >= partial_offset_[t] && model_.node_type(t).gpus_per_node > 1 &&
          ns - 1 < partial_offset_[t] + model_.node_type(t).gpus_per_node - 1) {
        return {t, ns - 1 - partial_offset_[t] + 1};
      }
    }
    return {-1, 0};
  }
  int stride(int t) const { return strides_[t]; }
  int count(int u, int t) const { return (u / strides_[t]) % (caps_[t] + 1); }
  int size(int u) const { return size_[u]; }
  bool within(int u) const { return within_[u]; }
  bool strictly_within(int u) const { return strictly_within_[u]; }
  int Encode(const NodeMix& mix) const {
    int u = 0;
    for (size_t t = 0; t < mix.size(); ++t) u += mix[t] * strides_[t];
    return u;
  }

 private:
  const CostModel& model_;
  std::vector<int> caps_, strides_, partial_offset_;
  int num_multisets_ = 1, num_node_states_ = 1;
  std::vector<int> size_;
  std::vector<bool> within_, strictly_within_;
  std::vector<int> dense_, codes_;
};

}  // namespace oobleck::template_search

#endif  // OOBLECK_CORE_TEMPLATE_SEARCH_STATE_SPACE_H_
