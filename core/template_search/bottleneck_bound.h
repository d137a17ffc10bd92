// The forced-bottleneck bound of the template search (docs/ARCHITECTURE.md#bounds-on-what-is-
// still-to-place): per state, a lower bound on the largest stage cost still to come.
#ifndef OOBLECK_CORE_TEMPLATE_SEARCH_BOTTLENECK_BOUND_H_
#define OOBLECK_CORE_TEMPLATE_SEARCH_BOTTLENECK_BOUND_H_

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "core/cluster.h"
#include "core/cost_model.h"
#include "core/interrupt.h"
#include "core/template_search/stage_costs.h"
#include "core/template_search/state_space.h"
#include "core/template_search/tolerances.h"
#include "tbb/parallel_for.h"

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
                 const std::vector<NodeMix>& mixes, Interrupt& interrupt)
      : model_(costs.model()), costs_(costs), space_(space) {
    const CostModel& model = model_;
    for (int t = 0; t < model.num_types(); ++t) {
      memo_stride_ = std::max(memo_stride_, model.node_type(t).gpus_per_node + 1);
    }
    const int T = model.num_types();
    const int L = model.num_layers();
    // The grid is refined around the bottleneck of the largest requested mixes (a mix
    // inside another requested mix can only reach less).
    std::vector<int> maximal;
    for (const NodeMix& mix : mixes) {
      const int code = space.Encode(mix);
      if (!space.strictly_within(code) &&
          std::find(maximal.begin(), maximal.end(), code) == maximal.end()) {
        maximal.push_back(code);
      }
    }
    // The grid: geometric from the cheapest single layer to the costliest whole model, and
    // fine steps just above the bottleneck of the requested mixes themselves.
    double lo = std::numeric_limits<double>::infinity(), hi = 0;
    for (int t = 0; t < T; ++t) {
      for (int g : model.stage_sizes(t)) {
        hi = std::max(hi, costs.ComputeMs(t, g, 0, L));
        for (int l = 0; l < L; ++l) {
          const double c = costs.ComputeMs(t, g, l, l + 1);
          if (c > 0) lo = std::min(lo, c);
        }
      }
    }
    if (!(lo < hi)) return;  // degenerate costs: no bound (At() returns 0)
    double bottleneck = hi;
    {
      std::vector<int> memo;
      double below = 0, above = hi;  // reach(below) < L <= reach(above) for some mix
      for (int iter = 0; iter < kBottleneckBisections && above - below > kRelativeSlack * above;
           ++iter) {
        if (interrupt.Poll()) return;
        const double mid = 0.5 * (below + above);
        const std::vector<int> reach = Reach(mid, memo, interrupt);
        if (interrupt.stopped()) return;
        bool covers = false;
        for (int x : maximal) covers |= reach[space.Dense(x)] >= L;
        (covers ? above : below) = mid;
      }
      bottleneck = below;
    }
    lo = std::max(lo, hi * kLeastGridCapRatio);
    for (double c = lo; c < hi; c = NextCap(c, kCoarseGridFactor)) caps_.push_back(c);
    if (bottleneck > 0) {
      for (double c = bottleneck; c < kFineGridSpan * bottleneck && c < hi;
           c = NextCap(c, kFineGridFactor)) {
        caps_.push_back(c);
      }
    }
    std::sort(caps_.begin(), caps_.end());
    caps_.erase(std::unique(caps_.begin(), caps_.end()), caps_.end());

    Tabulate(interrupt);
  }

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
  static double NextCap(double c, double factor) {
    return std::max(c * factor, std::nextafter(c, std::numeric_limits<double>::infinity()));
  }
  // The farthest layer a stage of g GPUs of type t starting at p can end at within cap.
  int Extend(int t, int g, int p, double cap) const {
    int lo = p, hi = model_.num_layers();
    while (lo < hi) {
      const int mid = (lo + hi + 1) / 2;
      if (costs_.ComputeMs(t, g, p, mid) <= cap) {
        lo = mid;
      } else {
        hi = mid - 1;
      }
    }
    return lo;
  }
  // The reach tables, one grid cap per task: the caps are independent (each has its own
  // memo and writes only its own column), so the tables are the same on any thread count.
  void Tabulate(Interrupt& interrupt) {
    const int K = static_cast<int>(caps_.size());
    const int NS = space_.num_node_states();
    const int D = space_.num_useful();
    if (!AssignPolled(reach_, int64_t{D} * NS * K, 0, interrupt) ||
        !AssignPolled(mix_reach_, int64_t{D} * K, 0, interrupt)) {
      caps_.clear();
      return;
    }
    tbb::parallel_for(0, K, [&](int k) {
      if (interrupt.Poll()) return;
      std::vector<int> memo;
      const std::vector<int> reach = Reach(caps_[k], memo, interrupt);
      if (interrupt.stopped()) return;
      for (int d = 0; d < D; ++d) mix_reach_[static_cast<size_t>(d) * K + k] = reach[d];
      for (int d = 0; d < D; ++d) {
        // (Thousands of multisets x dozens of node states per cap: poll on the way.)
        if (interrupt.Every(d)) return;
        for (int ns = 0; ns < NS; ++ns) {
          int best = reach[d];
          if (ns != 0) {
            const auto [t, used] = space_.PartialOf(ns);
            best = NodeReach(t, model_.node_type(t).gpus_per_node - used, best, caps_[k], memo);
          }
          reach_[(static_cast<size_t>(d) * NS + ns) * K + k] = best;
        }
      }
    });
    if (interrupt.stopped()) caps_.clear();
  }
  // The farthest layer `gpus` GPUs of one type-t node reach from p, over every split of
  // them into stages in any order. Many multisets reach the same p, so the answers for
  // one cap are memoised in `memo` (ForgetReaches starts a new cap): each (t, p) is solved
  // once per cap, for every GPU count at once.
  int NodeReach(int t, int gpus, int p, double cap, std::vector<int>& memo_table) const {
    int* memo =
        &memo_table[(static_cast<size_t>(t) * (model_.num_layers() + 1) + p) * memo_stride_];
    if (memo[gpus] >= 0) return memo[gpus];
    const int G = model_.node_type(t).gpus_per_node;
    memo[0] = p;
    for (int h = 1; h <= G; ++h) {
      int best = p;
      for (int g : model_.stage_sizes(t)) {
        if (g <= h) best = std::max(best, Extend(t, g, memo[h - g], cap));
      }
      memo[h] = best;
    }
    return memo[gpus];
  }
  void ForgetReaches(std::vector<int>& memo) const {
    memo.assign(static_cast<size_t>(model_.num_types()) * (model_.num_layers() + 1) * memo_stride_,
                -1);
  }
  // Per useful node multiset (by dense index), the farthest layer its nodes reach from
  // layer 0, in the best order. A multiset's sub-multisets are useful too, and come first.
  // Stops early, with a partial table, when `interrupt` fires (thousands of multisets, and
  // a node of many GPUs solves many splits the first time it meets a layer).
  std::vector<int> Reach(double cap, std::vector<int>& memo, Interrupt& interrupt) const {
    ForgetReaches(memo);
    std::vector<int> reach(space_.num_useful(), 0);
    for (int d = 1; d < space_.num_useful(); ++d) {
      if (interrupt.Every(d)) break;
      const int u = space_.Code(d);
      for (int t = 0; t < model_.num_types(); ++t) {
        if (space_.count(u, t) == 0) continue;
        reach[d] = std::max(reach[d], NodeReach(t, model_.node_type(t).gpus_per_node,
                                                reach[space_.Dense(u - space_.stride(t))], cap,
                                                memo));
      }
    }
    return reach;
  }

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
