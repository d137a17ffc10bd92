// The split bound of the template search (docs/architecture/template-search.md#branch-and-bound): a
// state (a, U, node state) serving mix X splits X's pipelines into layers [0, a) on the free nodes
// X - U and layers [a, L) on U. Bounding both parts under one common max, as the root bound does
// for the whole mix, drops the mixes a state cannot help because its own nodes are too few (or too
// many) for the layers it already holds, before their labels are tested.
#ifndef OOBLECK_CORE_TEMPLATE_SEARCH_SPLIT_BOUND_H_
#define OOBLECK_CORE_TEMPLATE_SEARCH_SPLIT_BOUND_H_

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <limits>
#include <vector>

#include "core/cost_model.h"
#include "core/interrupt.h"
#include "core/template_search/prefix_cost_bound.h"
#include "core/template_search/state_space.h"

namespace oobleck::template_search {

// How many ways the coefficient k of the max is split between the two parts.
inline constexpr int kSplitCount = 6;
using SplitParts = std::array<double, kSplitCount>;
// Parts that bound nothing (their sum is -inf), where the split bound does not apply.
inline constexpr SplitParts kNoSplit = [] {
  SplitParts parts{};
  parts.fill(-std::numeric_limits<double>::infinity());
  return parts;
}();

// For an objective T = sum c + k max c (1f1b: k = M - 1). Every pipeline through the state
// has a cost sum P on the layers before a, Q on those after, and a max C >= rest_max (the
// forced bottleneck of the layers before a on the free nodes). The hull relaxation bounds
// P >= S_free(C) and Q >= S_U(C) (the suffix's stages lie on U's nodes; counting the partial
// node whole only loosens it), both also at least their cheapest compute. So for any
// k1 + k2 = k with k1, k2 >= 0,
//   T >= [S_free(C) + k1 C] + [S_U(C) + k2 C] >= Prefix_j + Suffix_j,
// with Prefix_j = max(W_a min_C (S_free(C) + k1 C) / W_a, floor_a + k1 rest_max) and
// Suffix_j = max(W_after min_C (S_U(C) + k2 C) / W_after, floor_after): the minimum of
// S(C) + k C over C scales with the work (PrefixCost::MinPerWork), so one ratio per
// (multiset, node state) and split, computed once, serves every layer. k2 = k j / kSplitCount
// for j = 1..kSplitCount (j = 0 is the prefix bound the state already tests).
class SplitBound {
 public:
  // k: the coefficient of the max in T (NaN: the objective has no such form, no bound).
  SplitBound(const CostModel& model, const PrefixCostBound& prefix_cost, const StateSpace& space,
             double k, Interrupt& interrupt);

  // Prefix_j for the layers [0, a) on the free multiset `free` and node state ns, whose
  // forced bottleneck is rest_max_ms; part j takes k1 = k (kSplitCount - j) / kSplitCount.
  SplitParts Prefix(int a, int free, int ns, double rest_max_ms) const {
    if (ratios_.empty()) return kNoSplit;
    const double work = prefix_cost_.work(a), floor_ms = prefix_cost_.floor_ms(a);
    const double* ratio = Row(free, ns);
    SplitParts parts;
    for (int j = 1; j <= kSplitCount; ++j) {
      const double k1 = k_ * (kSplitCount - j) / kSplitCount;
      parts[j - 1] = std::max(Times(work, ratio[kSplitCount - j]), floor_ms + k1 * rest_max_ms);
    }
    return parts;
  }
  // Suffix_j for the layers [a, L) on the multiset u whose leftmost node is in node state
  // ns; part j takes k2 = k j / kSplitCount. A partial node of type t with `used` GPUs
  // used is the row of u less that node with a partial node of G_t - used GPUs used (whose
  // free GPUs, the ones the table counts, are `used`).
  SplitParts Suffix(int a, int u, int ns) const {
    if (ratios_.empty()) return kNoSplit;
    const double work = prefix_cost_.work(layers_) - prefix_cost_.work(a);
    const double floor_ms = prefix_cost_.floor_ms(layers_) - prefix_cost_.floor_ms(a);
    const double* ratio = Row(u, 0);
    if (ns != 0) {
      const auto [t, used] = space_.PartialOf(ns);
      ratio = Row(u - space_.stride(t), space_.PartialState(t, gpus_per_node_[t] - used));
    }
    SplitParts parts;
    for (int j = 1; j <= kSplitCount; ++j) {
      parts[j - 1] = std::max(Times(work, ratio[j]), floor_ms);
    }
    return parts;
  }
  // The bound on every pipeline through the state: the best of the splits.
  static double Combined(const SplitParts& prefix, const SplitParts& suffix) {
    double bound = -std::numeric_limits<double>::infinity();
    for (int j = 0; j < kSplitCount; ++j) bound = std::max(bound, prefix[j] + suffix[j]);
    return bound;
  }

 private:
  // work x ratio, 0 without work (the ratio may be +inf when no cap is feasible).
  static double Times(double work, double ratio) { return work > 0 ? work * ratio : 0; }
  const double* Row(int u, int ns) const {
    return &ratios_[(static_cast<size_t>(space_.Dense(u)) * space_.num_node_states() + ns) *
                    (kSplitCount + 1)];
  }

  const PrefixCostBound& prefix_cost_;
  const StateSpace& space_;
  double k_;
  int layers_;
  std::vector<int> gpus_per_node_;  // per type
  // Per (multiset, node state) and j = 0..kSplitCount: MinPerWork(k j / kSplitCount).
  std::vector<double> ratios_;
};

}  // namespace oobleck::template_search

#endif  // OOBLECK_CORE_TEMPLATE_SEARCH_SPLIT_BOUND_H_
