// The forced-bottleneck bound of the template search
// (docs/architecture/template-search.md#bounds-on-what-is-still-to-place): per state, a lower bound
// on the largest stage cost still to come.
#ifndef OOBLECK_CORE_TEMPLATE_SEARCH_BOTTLENECK_BOUND_H_
#define OOBLECK_CORE_TEMPLATE_SEARCH_BOTTLENECK_BOUND_H_

#include <algorithm>
#include <limits>
#include <vector>

#include "core/cluster.h"
#include "core/cost_model.h"
#include "core/interrupt.h"
#include "core/template_search/stage_costs.h"
#include "core/template_search/state_space.h"

namespace oobleck::template_search {

// A lower bound, for every state, on the largest stage cost among the stages still to be
// placed before it (layers [0, a) on the nodes the state leaves free). It comes from a
// relaxation in which a stage costs only its compute (no transfers; the oobleck-sosp23 cost
// is exactly that), memory is unlimited and a stage may be empty. In the relaxation a cap
// on stage cost is feasible iff greedily stretching every stage as far as the cap allows,
// node after node, reaches a: compute grows with a stage's layer range, so a stage that
// ends later never leaves less for the stages after it. The reach is monotone in the cap,
// so it is tabulated on a grid of caps (fine around the whole mix's bottleneck, where the
// bound decides most), and a state's bound is the largest grid cap whose reach falls short.
class PrefixMaxBound {
 public:
  // Stops early, leaving no bound, when `interrupt` fires (the caller then stops too).
  PrefixMaxBound(const StageCosts& costs, const StateSpace& space,
                 const std::vector<NodeMix>& mixes, Interrupt& interrupt);

  // Every pipeline over the nodes of `mix` has a stage that costs more than this.
  double ForMix(const NodeMix& mix) const {
    if (caps_.empty()) return 0;
    const int K = static_cast<int>(caps_.size());
    const int* reach = &mix_reach_[static_cast<size_t>(space_.Dense(space_.Encode(mix))) * K];
    const int k =
        static_cast<int>(std::lower_bound(reach, reach + K, model_.num_layers()) - reach) - 1;
    return k < 0 ? 0 : caps_[k];
  }

  // If the layers [0, a) are left for the free nodes `free` (a multiset) and, for a
  // partial node state ns, the GPUs that node has not used, every way to place them has a
  // stage that costs more than this; +inf if no node is left for them.
  double At(int a, int free, int ns) const {
    if (a == 0) return 0;
    if (ns == 0 && free == 0) return std::numeric_limits<double>::infinity();
    if (caps_.empty()) return 0;
    const int K = static_cast<int>(caps_.size());
    const int* reach =
        &reach_[(static_cast<size_t>(space_.Dense(free)) * space_.num_node_states() + ns) * K];
    // The largest k with reach[k] < a (reach grows with k).
    const int k = static_cast<int>(std::lower_bound(reach, reach + K, a) - reach) - 1;
    return k < 0 ? 0 : caps_[k];
  }

 private:
  // The grid cap after c: c times `factor`, or the next double when that rounds back to c.
  // On a subnormal c (a few units in the last place) c * 1.05 == c, and a grid stepped
  // only by the factor never reached hi and grew without bound; above the subnormals the
  // product always moves, so the grid is the same.
  static double NextCap(double c, double factor);
  // The farthest layer a stage of g GPUs of type t starting at p can end at within cap.
  int Extend(int t, int g, int p, double cap) const;
  // The reach tables, one grid cap per task: the caps are independent (each has its own
  // memo and writes only its own column), so the tables are the same on any thread count.
  void Tabulate(Interrupt& interrupt);
  // The farthest layer `gpus` GPUs of one type-t node reach from p, over every split of
  // them into stages in any order. Many multisets reach the same p, so the answers for
  // one cap are memoised in `memo` (ForgetReaches starts a new cap): each (t, p) is solved
  // once per cap, for every GPU count at once.
  int NodeReach(int t, int gpus, int p, double cap, std::vector<int>& memo_table) const;
  void ForgetReaches(std::vector<int>& memo) const;
  // Per useful node multiset (by dense index), the farthest layer its nodes reach from
  // layer 0, in the best order. A multiset's sub-multisets are useful too, and come first.
  // Stops early, with a partial table, when `interrupt` fires (thousands of multisets, and
  // a node of many GPUs solves many splits the first time it meets a layer).
  std::vector<int> Reach(double cap, std::vector<int>& memo, Interrupt& interrupt) const;

  const CostModel& model_;
  const StageCosts& costs_;
  const StateSpace& space_;
  // The stride of NodeReach's memo, [(t * (L + 1) + p) * memo_stride_ + gpus] (-1: not
  // known yet); each cap's computation has its own memo.
  int memo_stride_ = 0;
  std::vector<double> caps_;    // the grid, ascending
  std::vector<int> reach_;      // [(free multiset * node states + ns) * grid + k]
  std::vector<int> mix_reach_;  // [u * grid + k]: reach of the nodes u alone
};

}  // namespace oobleck::template_search

#endif  // OOBLECK_CORE_TEMPLATE_SEARCH_BOTTLENECK_BOUND_H_
