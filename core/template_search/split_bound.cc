#include "core/template_search/split_bound.h"

#include <cmath>

namespace oobleck::template_search {

SplitBound::SplitBound(const CostModel& model, const PrefixCostBound& prefix_cost,
                       const StateSpace& space, double k, Interrupt& interrupt)
    : prefix_cost_(prefix_cost), space_(space), k_(k), layers_(model.num_layers()) {
  if (!(k >= 0) || !std::isfinite(k)) return;  // disabled: every part is -inf
  for (int t = 0; t < model.num_types(); ++t) {
    gpus_per_node_.push_back(model.node_type(t).gpus_per_node);
  }
  const int NS = space.num_node_states();
  ratios_.assign(static_cast<size_t>(space.num_useful()) * NS * (kSplitCount + 1), 0);
  for (int d = 0; d < space.num_useful(); ++d) {
    if (interrupt.Every(d)) return;
    for (int ns = 0; ns < NS; ++ns) {
      const PrefixCost cost = prefix_cost.At(layers_, space.Code(d), ns);
      const size_t row = (static_cast<size_t>(d) * NS + ns) * (kSplitCount + 1);
      for (int j = 0; j <= kSplitCount; ++j) {
        ratios_[row + j] = cost.MinPerWork(k_ * j / kSplitCount);
      }
    }
  }
}

}  // namespace oobleck::template_search
