// The state space of the template search (docs/ARCHITECTURE.md#states): node multisets
// inside some requested mix, numbered densely, and the node states of a suffix's leftmost
// node (boundary, or partial with some GPUs used).
#ifndef OOBLECK_CORE_TEMPLATE_SEARCH_STATE_SPACE_H_
#define OOBLECK_CORE_TEMPLATE_SEARCH_STATE_SPACE_H_

#include <algorithm>
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
  // must check interrupt->stopped() before any use.
  StateSpace(const CostModel& model, const std::vector<NodeMix>& mixes,
             Interrupt* interrupt = nullptr)
      : model_(model) {
    auto stopped = [interrupt](int u) {
      return u % kBoxWalkPollStride == 0 && interrupt != nullptr && interrupt->Poll();
    };
    const int T = model.num_types();
    caps_.assign(T, 0);
    for (const NodeMix& mix : mixes) {
      for (int t = 0; t < T; ++t) caps_[t] = std::max(caps_[t], mix[t]);
    }
    strides_.assign(T, 1);
    num_multisets_ = 1;
    for (int t = 0; t < T; ++t) {
      strides_[t] = num_multisets_;
      num_multisets_ *= caps_[t] + 1;
    }
    // Node states: 0 = boundary; then per type the partial states u = 1..G-1.
    partial_offset_.assign(T, 0);
    num_node_states_ = 1;
    for (int t = 0; t < T; ++t) {
      partial_offset_[t] = num_node_states_ - 1;
      num_node_states_ += model.node_type(t).gpus_per_node - 1;
    }
    // A multiset is useful if some requested mix contains it; a boundary state left of
    // layer 0 is useful only if some mix strictly contains it (another node must follow).
    // Both follow from the mixes downwards, one node at a time, in O(multisets x types):
    // u is strictly inside a mix iff u plus one node is inside one.
    size_.assign(num_multisets_, 0);
    within_.assign(num_multisets_, false);
    strictly_within_.assign(num_multisets_, false);
    for (const NodeMix& mix : mixes) within_[Encode(mix)] = true;
    std::vector<int> counts = caps_;  // of u, stepped down like an odometer
    for (int u = num_multisets_ - 1; u >= 0; --u) {
      if (stopped(u)) return;
      if (u < num_multisets_ - 1) {
        int t = 0;
        for (; counts[t] == 0; ++t) counts[t] = caps_[t];
        --counts[t];
      }
      int size = 0;
      for (int t = 0; t < T; ++t) {
        size += counts[t];
        if (counts[t] < caps_[t] && within_[u + strides_[t]]) strictly_within_[u] = true;
      }
      size_[u] = size;
      if (strictly_within_[u]) within_[u] = true;
    }
    // States exist only on those multisets, numbered densely in increasing code order (a
    // multiset's sub-multisets come first).
    dense_.assign(num_multisets_, -1);
    for (int u = 0; u < num_multisets_; ++u) {
      if (stopped(u)) return;
      if (!within_[u]) continue;
      dense_[u] = static_cast<int>(codes_.size());
      codes_.push_back(u);
    }
  }

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
  int PartialState(int t, int used) const { return 1 + partial_offset_[t] + used - 1; }
  // Inverse of PartialState: (type, used).
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
