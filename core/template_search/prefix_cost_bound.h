// The cost-sum bound of the template search
// (docs/architecture/template-search.md#bounds-on-what-is-still-to-place): per state, a lower bound
// on the cost sum of the stages still to come under a cap on their max, from a fractional
// relaxation and the convex hull of each node's splits.
#ifndef OOBLECK_CORE_TEMPLATE_SEARCH_PREFIX_COST_BOUND_H_
#define OOBLECK_CORE_TEMPLATE_SEARCH_PREFIX_COST_BOUND_H_

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>
#include <vector>

#include "core/cost_model.h"
#include "core/interrupt.h"
#include "core/template_search/state_space.h"
#include "core/template_search/tolerances.h"

namespace oobleck::template_search {

// What the stages before a state can cost, bounded below by a fractional relaxation. Any
// ratio rho(t, g) > 0 per stage size gives one: measure the work of layer l as
// w(l) = min over (t, g) of compute(t, g, l) / rho(t, g); then a stage of g GPUs of type t
// costs at least rho(t, g) per unit of the work it holds, so under a cap C on stage cost it
// holds at most C / rho(t, g) work. rho(t, g) is the median over the layers of its compute
// relative to the cheapest single GPU's: layers with an outlying ratio (a large all-reduce,
// a cheap embedding) then only lose some of their own work, instead of setting the ratio
// of every layer (with the smallest ratio, a 1000-layer 16-node search had 2.3x the
// candidates). A node's GPUs form stages in many ways; for every count j of its stages, the most
// work j stages of it can hold (a knapsack over stage sizes) gives the point (work, j C),
// and the lower convex hull of those points bounds the node's cost sum for any amount of
// work. Summing over the free nodes, filling the cheapest hull segments first, gives S(C):
// no prefix whose stages all cost at most C has a smaller cost sum.
struct HullSegment {
  double length;  // work it holds at cap 1
  double slope;   // cost per unit of work
};

class PrefixCost {
 public:
  PrefixCost() = default;
  PrefixCost(double work, const std::vector<HullSegment>* segments, double floor_ms)
      : work_(work), segments_(segments), floor_ms_(floor_ms) {}
  static constexpr int kArgMinUnknown = -3;
  // `argmin` is ArgMinOver(common_k) (or kArgMinUnknown) of these segments at some other amount of
  // work: the minimising breakpoint does not depend on the work (every cap there is work / end of a
  // segment, and Sum(C) + k C scales with the work), so SumPlus(common_k, ...) needs to
  // evaluate only that one breakpoint instead of all of them.
  PrefixCost(double work, const std::vector<HullSegment>* segments, double floor_ms,
             double common_k, int argmin)
      : work_(work),
        segments_(segments),
        floor_ms_(floor_ms),
        common_k_(common_k),
        common_argmin_(argmin) {}

  // min over caps C >= cap_floor of (cost sum of the prefix) + k C, for k >= 0.
  double SumPlus(double k, double cap_floor) const {
    cap_floor = std::max(cap_floor, 0.0);
    double best = k * cap_floor;
    if (segments_ != nullptr && work_ > 0) {
      if (memo_k_ != k) {
        // Sum(C) + k C is convex in C: remember its minimum over all feasible caps; above
        // that cap the function only grows.
        memo_k_ = k;
        memo_ = MinAt(
            k, k == common_k_ && common_argmin_ != kArgMinUnknown ? common_argmin_ : ArgMinOver(k));
      }
      best = cap_floor <= memo_.first ? memo_.second : SumAt(cap_floor) + k * cap_floor;
    }
    return std::max(best, floor_ms_ + k * cap_floor);
  }
  // Least cost sum of the prefix if no stage of it costs more than cap (+inf: impossible).
  double Sum(double cap) const {
    return std::max(segments_ != nullptr && work_ > 0 ? SumAt(cap) : 0.0, floor_ms_);
  }
  double floor_ms() const { return floor_ms_; }
  // min over caps C of (Sum(C) + k C) / work, without the floor, for k >= 0 (0 if no cap is
  // feasible: a trivial bound). With x = work / C the need, Sum(C) + k C = work (f(x) + k) / x
  // for the convex fill cost f of the segments, so it scales with the work and, f being
  // linear between segment ends, its minimum is at an end (or x -> 0 when k = 0, or x -> inf
  // along an unbounded segment).
  double MinPerWork(double k) const;

  // Which breakpoint minimises Sum(C) + k C over the feasible caps: -1 the smallest
  // feasible cap, i >= 0 the cap where work / C is the end of segment i, -2 none (no cap
  // is feasible). The function is linear between those caps, so the minimum is at one of
  // them; ties go to the first in this order.
  int ArgMinOver(double k) const;

 private:
  double SumAt(double cap) const {
    if (!(cap > 0)) return std::numeric_limits<double>::infinity();
    const double need = work_ / cap;
    double left = need, total = 0;
    for (const HullSegment& s : *segments_) {
      const double take = std::min(left, s.length);
      total += take * s.slope;
      left -= take;
      if (left <= 0) break;
    }
    // Rounding must never turn a cap that fits exactly into "impossible".
    return left <= kRelativeSlack * need ? cap * total : std::numeric_limits<double>::infinity();
  }
  // (cap, Sum(cap) + k cap) at the breakpoint `index` of ArgMinOver.
  std::pair<double, double> MinAt(double k, int index) const;

  double work_ = 0;
  const std::vector<HullSegment>* segments_ = nullptr;
  double floor_ms_ = 0;
  double common_k_ = std::numeric_limits<double>::quiet_NaN();  // NaN: none
  int common_argmin_ = kArgMinUnknown;
  mutable double memo_k_ = std::numeric_limits<double>::quiet_NaN();
  mutable std::pair<double, double> memo_;  // (argmin, min) of Sum(C) + memo_k_ C
};

class PrefixCostBound {
 public:
  // `common_k`: the coefficient k of SumPlus most calls use (NaN if none); its minimising
  // breakpoint is found once per free multiset and node state instead of per layer.
  PrefixCostBound(const CostModel& model, const StateSpace& space, double common_k,
                  Interrupt& interrupt);

  // The layers [0, a) on the free nodes `free` and the unused GPUs of partial node ns.
  PrefixCost At(int a, int free, int ns) const {
    if (segments_.empty()) return PrefixCost(0, nullptr, floor_prefix_[a]);
    const size_t i = static_cast<size_t>(space_.Dense(free)) * space_.num_node_states() + ns;
    return PrefixCost(work_prefix_[a], &segments_[i], floor_prefix_[a], common_k_,
                      common_argmin_[i]);
  }
  // The cheapest compute of layers [0, a) on any type and stage size: a lower bound on the
  // cost sum of whatever stages hold them.
  double floor_ms(int a) const { return floor_prefix_[a]; }
  // The work of the layers [0, a) (the unit the hull segments hold at cap 1).
  double work(int a) const { return work_prefix_[a]; }

 private:
  // Per (free multiset, node state), the hull segments of its free GPUs by slope, and the
  // minimising breakpoint for common_k_.
  void MergeHulls(const CostModel& model, const std::vector<std::vector<double>>& rho,
                  Interrupt& interrupt);

  // The lower convex hull of the points (most work j stages of f GPUs hold, j).
  static std::vector<HullSegment> NodeHull(const std::vector<std::pair<int, double>>& stages,
                                           int f);

  const StateSpace& space_;
  const double common_k_;
  std::vector<double> work_prefix_, floor_prefix_;
  std::vector<std::vector<HullSegment>> segments_;  // per (free multiset, ns), by slope
  std::vector<int> common_argmin_;                  // per (free multiset, ns)
};

}  // namespace oobleck::template_search

#endif  // OOBLECK_CORE_TEMPLATE_SEARCH_PREFIX_COST_BOUND_H_
