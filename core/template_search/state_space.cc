#include "core/template_search/state_space.h"

#include <algorithm>

namespace oobleck::template_search {

StateSpace::StateSpace(const CostModel& model, const std::vector<NodeMix>& mixes,
                       Interrupt* interrupt, bool partial_nodes)
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
  for (int t = 0; t < T && partial_nodes; ++t) {
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

}  // namespace oobleck::template_search
