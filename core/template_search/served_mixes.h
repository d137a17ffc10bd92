// The requested mixes one state of the template search serves, with the bounds each puts on what
// the state may keep (docs/architecture/template-search.md#branch-and-bound): a stage or label is
// kept if some served mix could still use it. Tests that hold for every served mix at once (the
// weakest of each part) settle most candidates in O(1) before the mixes are tried one by one, and
// answers known from earlier calls at the same state settle most of the rest.
#ifndef OOBLECK_CORE_TEMPLATE_SEARCH_SERVED_MIXES_H_
#define OOBLECK_CORE_TEMPLATE_SEARCH_SERVED_MIXES_H_

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <iterator>
#include <limits>
#include <utility>
#include <vector>

#include "core/template_search/objectives.h"
#include "core/template_search/prefix_cost_bound.h"
#include "core/template_search/split_bound.h"
#include "core/template_search/whole_layer_bound.h"

namespace oobleck::template_search {

// A requested mix as seen from the states on one multiset u.
struct TargetMix {
  int free;        // the mix minus u: the nodes left for the layers before the state
  int dense_free;  // StateSpace::Dense(free), read for every state on u
  double bound;    // its incumbent, with the slack (may be +inf)
  int min_stages;  // fewest and most stages a pipeline over it can have
  int max_stages;
};

// The index of the first of `keyed` (sorted by .first) whose key is at least `key`, as
// std::lower_bound, but searched outwards from `hint` (doubling steps, then a binary search
// over the last step): O(log distance) instead of O(log size). FitsBySumLimit's labels come
// one source front at a time in order of sum, so consecutive maxima are mostly close (on the
// 1000-layer all-mixes case: same place 57 %, 1.9 entries away on average), and the binary
// search over up to 1024 cached maxima was a visible part of its time.
inline size_t LowerBoundNear(const std::vector<std::pair<double, double>>& keyed, size_t hint,
                             double key) {
  const size_t n = keyed.size();
  size_t lo = 0, hi = std::min(hint, n);  // the answer is in [lo, hi]
  if (hi < n && keyed[hi].first < key) {
    lo = hi + 1;  // every entry before lo is below key
    size_t step = 1;
    while (lo + step - 1 < n && keyed[lo + step - 1].first < key) {
      lo += step;
      step *= 2;
    }
    hi = std::min(n, lo + step - 1);
  } else {
    size_t step = 1;  // keyed[hi] is at least key, or hi == n
    while (hi >= step && keyed[hi - step].first >= key) {
      hi -= step;
      step *= 2;
    }
    lo = hi >= step ? hi - step + 1 : 0;
  }
  return static_cast<size_t>(
      std::lower_bound(keyed.begin() + lo, keyed.begin() + hi, key,
                       [](const std::pair<double, double>& p, double k) { return p.first < k; }) -
      keyed.begin());
}

// The bounds on the layers [0, a) for one (free multiset, partial node state).
struct LayerBound {
  PrefixCost prefix;
  double rest_max_ms = 0;
  double empty_stage_bound = 0;  // StageBound of a stage of no compute
};

// What ServedMixes::Add reads of a LayerBound to drop a mix, with the split bound's prefix
// parts, in one cache line: Add reads one per served mix candidate (most of them dropped),
// and with the whole LayerBound (two lines, strided by the node states) each was a miss.
struct alignas(64) ServeTest {
  double rest_max_ms = 0;
  double empty_stage_bound = 0;
  SplitParts split = kNoSplit;  // SplitBound::Prefix
};

// The mixes served at one state (layer a), built by Add and then queried while the state's
// candidates are generated. Not thread-safe: one per computing thread and state.
template <SearchObjective Objective>
class ServedMixes {
 public:
  using Label = typename Objective::Label;

  ServedMixes(const Objective& objective, int a, double floor_ms)
      : objective_(objective), a_(a), floor_ms_(floor_ms), floor_only_(0, nullptr, floor_ms) {
    targets().clear();
    sum_limits().clear();
  }

  // Serves `mix` unless the bounds `b` on its free nodes plus the cheapest compute of the
  // layers after a (`suffix_floor_ms`), or the split bound of `b` and the state's own nodes
  // (`suffix`), already exceed its incumbent (`test` holds those parts of `b`). With
  // `whole_layer` (1f1b boundary states of long models, else null) the prefix is also
  // bounded by that curve, the max by `least_max_ms` (the mix's PrefixMaxBound::ForMix).
  void Add(const TargetMix& mix, const ServeTest& test, const LayerBound& b, double suffix_floor_ms,
           const SplitParts& suffix, const WholeLayerCurve* whole_layer = nullptr,
           double least_max_ms = 0) {
    if (std::isinf(test.rest_max_ms)) return;  // no node left for the layers before a
    // The least value of the whole-layer curve's part of a label's bound (-inf: none).
    double least_whole_layer = -std::numeric_limits<double>::infinity();
    if constexpr (Objective::kSumPlusMaxBound) {
      if (whole_layer != nullptr) {
        least_whole_layer = whole_layer->Phi(std::max(test.rest_max_ms, least_max_ms));
      }
    }
    if (std::max(test.empty_stage_bound, least_whole_layer) + suffix_floor_ms > mix.bound) return;
    if (SplitBound::Combined(test.split, suffix) > mix.bound) return;
    const Target& target = targets().emplace_back(
        Target{&mix, b.prefix, b.rest_max_ms,
               objective_.StageCoefficient(mix.min_stages, mix.max_stages, a_ == 0),
               objective_.StageCoefficient(mix.min_stages, mix.max_stages, true), whole_layer,
               least_max_ms});
    rest_max_ms_ = std::min(rest_max_ms_, target.rest_max_ms);
    loosest_bound_ = std::max(loosest_bound_, mix.bound);
    weakest_coeff_ = std::min({weakest_coeff_, target.break_coeff, target.alone_coeff});
    most_stages_ = std::max(most_stages_, mix.max_stages);
    most_primary_ = std::max(
        most_primary_, mix.bound - std::max(objective_.PrimaryBound(b.empty_stage_bound, floor_ms_,
                                                                    mix.max_stages),
                                            least_whole_layer));
  }

  bool empty() const { return targets().empty(); }
  // The largest Primary a label may have and still fit some served mix (SomeFits rejects
  // every label above it first).
  double most_primary() const { return most_primary_; }
  // The least rest_max over the served mixes: what clamping and source filtering may use.
  double rest_max_ms() const { return rest_max_ms_; }
  // Whether stage bounds may prune at all (false when some coefficient gives no bound).
  bool may_break() const { return weakest_coeff_ >= 0; }

  // Whether a stage of this compute, whose end leaves `after_ms` of cheapest compute,
  // cannot be part of a pipeline that beats any served mix's incumbent, by the bound that
  // holds for all of them at once (O(1)).
  bool HopelessForAll(double compute, double after_ms) const {
    return may_break() &&
           objective_.StageBound(compute, weakest_coeff_, floor_only_, rest_max_ms_) + after_ms >
               loosest_bound_;
  }

  // Whether no served mix can use a stage (not alone) of this compute. Monotone in compute,
  // so known answers settle most calls.
  bool TooCostly(double compute) {
    if (compute <= ok_up_to_) return false;
    if (compute >= too_costly_from_) return true;
    if (NoTargetFits(compute)) {
      too_costly_from_ = compute;
      return true;
    }
    ok_up_to_ = compute;
    return false;
  }

  // Whether some served mix could still use this label; the mix that last did is tried
  // first. With kSumPlusMaxBound the answer is nonincreasing in the label's Primary and max
  // (every test below is), which PullStages relies on to reject a whole source front by one
  // label under all of its extensions.
  bool SomeFits(const Label& label) {
    if (Objective::Primary(label) > most_primary_ ||
        objective_.LowerBound(label, floor_only_, rest_max_ms_, most_stages_, a_ == 0) >
            loosest_bound_) {
      return false;
    }
    if constexpr (Objective::kSumPlusMaxBound) {
      if (targets().size() > 2) return FitsBySumLimit(label);
    }
    const std::vector<Target>& all = targets();
    for (size_t k = 0, i = last_fit_; k < all.size(); ++k, i = i + 1 == all.size() ? 0 : i + 1) {
      const Target& target = all[i];
      if (TargetBound(label, target) <= target.mix->bound) {
        last_fit_ = i;
        return true;
      }
    }
    return false;
  }

 private:
  // A mix served at the state, with its bounds there.
  struct Target {
    const TargetMix* mix;
    PrefixCost prefix;  // a copy: its memo is per thread
    double rest_max_ms;
    double break_coeff;  // StageCoefficient for a stage that is not alone, and one that is
    double alone_coeff;
    const WholeLayerCurve* whole_layer;  // or null
    double least_max_ms;                 // with whole_layer: the mix's least max
  };
  // The lower bound of a label for one served mix: the objective's, raised by the whole-layer
  // curve where there is one. Both are Primary plus a nondecreasing function of the label's
  // max, so their maximum is too (FitsBySumLimit relies on it).
  double TargetBound(const Label& label, const Target& target) const {
    const double bound = objective_.LowerBound(label, target.prefix, target.rest_max_ms,
                                               target.mix->max_stages, a_ == 0);
    if constexpr (Objective::kSumPlusMaxBound) {
      if (target.whole_layer != nullptr) {
        return std::max(bound, Objective::Primary(label) +
                                   target.whole_layer->Phi(std::max(
                                       {label.max, target.rest_max_ms, target.least_max_ms})));
      }
    }
    return bound;
  }
  // The same for a stage of this compute (StageBound), nondecreasing in the compute.
  double StageTargetBound(double compute, const Target& target) const {
    const double bound =
        objective_.StageBound(compute, target.break_coeff, target.prefix, target.rest_max_ms);
    if constexpr (Objective::kSumPlusMaxBound) {
      if (target.whole_layer != nullptr) {
        return std::max(bound, compute + target.whole_layer->Phi(std::max(
                                             {compute, target.rest_max_ms, target.least_max_ms})));
      }
    }
    return bound;
  }
  // Scratch reused by every state a thread computes, owned by that thread: the constructor
  // clears both, and they serve the one ServedMixes alive on the thread (one per
  // ComputeTarget, which never waits on TBB, so no second state starts on this thread
  // before the first is done).
  static std::vector<Target>& targets() {
    thread_local std::vector<Target> v;
    return v;
  }
  // (max, G(max)) by max: known values of the largest sum some mix accepts at a max. Owned
  // as targets() is.
  static std::vector<std::pair<double, double>>& sum_limits() {
    thread_local std::vector<std::pair<double, double>> v;
    return v;
  }

  // The same test as TooCostly, mix by mix; the mix that fitted last is tried first.
  bool NoTargetFits(double compute) {
    if (HopelessForAll(compute, 0)) return true;
    const std::vector<Target>& all = targets();
    for (size_t k = 0, i = stage_fit_; k < all.size(); ++k, i = i + 1 == all.size() ? 0 : i + 1) {
      const Target& target = all[i];
      if (target.break_coeff < 0 || StageTargetBound(compute, target) <= target.mix->bound) {
        stage_fit_ = i;
        return false;
      }
    }
    return true;
  }

  // With kSumPlusMaxBound, the largest sum some mix accepts at a given max, G(max), is
  // nonincreasing: known values of G at maxima on both sides of a label's settle most
  // labels without trying the mixes.
  bool FitsBySumLimit(const Label& label) {
    constexpr size_t kMaxLimits = 1024;
    std::vector<std::pair<double, double>>& limits = sum_limits();
    const double max = label.max, sum = Objective::Primary(label);
    const auto above = limits.begin() + LowerBoundNear(limits, limit_hint_, max);
    limit_hint_ = static_cast<size_t>(above - limits.begin());
    if (above != limits.end() && sum <= above->second) return true;
    if (above != limits.end() && above->first == max) return false;
    if (above != limits.begin() && sum > std::prev(above)->second) return false;
    const double limit = SumLimit(label);
    if (limits.size() < kMaxLimits) limits.insert(above, {max, limit});
    return sum <= limit;
  }

  // G(label's max) over every served mix.
  double SumLimit(const Label& label) const {
    const Label probe = Objective::MaxOnly(label);
    double limit = -std::numeric_limits<double>::infinity();
    for (const Target& target : targets()) {
      limit = std::max(limit, target.mix->bound - TargetBound(probe, target));
    }
    return limit;
  }

  const Objective& objective_;
  const int a_;
  const double floor_ms_;
  const PrefixCost floor_only_;  // the prefix's cheapest compute alone
  // The weakest of each bound part over the served mixes.
  double rest_max_ms_ = std::numeric_limits<double>::infinity();
  double loosest_bound_ = -std::numeric_limits<double>::infinity();
  double weakest_coeff_ = std::numeric_limits<double>::infinity();
  double most_primary_ = -std::numeric_limits<double>::infinity();
  int most_stages_ = 0;
  // What TooCostly and SomeFits learnt so far.
  double ok_up_to_ = -std::numeric_limits<double>::infinity();
  double too_costly_from_ = std::numeric_limits<double>::infinity();
  size_t stage_fit_ = 0;
  size_t last_fit_ = 0;
  size_t limit_hint_ = 0;  // where FitsBySumLimit found the last label's max
};

}  // namespace oobleck::template_search

#endif  // OOBLECK_CORE_TEMPLATE_SEARCH_SERVED_MIXES_H_
