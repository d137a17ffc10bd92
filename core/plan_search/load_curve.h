// The time of one pipeline as a function of its share of the batch, and the searches over
// the finitely many makespans those times take (core/plan_search/pipeline_set_search.cc,
// core/plan_search/batch_split.cc).
#ifndef OOBLECK_CORE_PLAN_SEARCH_LOAD_CURVE_H_
#define OOBLECK_CORE_PLAN_SEARCH_LOAD_CURVE_H_

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "core/cost_model.h"
#include "core/status_macros.h"

namespace oobleck::plan_search {

constexpr double kInf = std::numeric_limits<double>::infinity();

// T(x) of one pipeline under the model's formula with x micro-batches, x in [1, limit]. The
// parts of the formula that do not depend on x (CostModel::TimeParts) are computed once, so
// each T(x) is a few operations: the searches ask for many values, and a fleet's hundreds of
// pipelines are hundreds of curves.
class LoadCurve {
 public:
  LoadCurve(const CostModel* model, const std::vector<double>* costs, int max_microbatches,
            int global_batch)
      : model_(model),
        parts_(model->TimeParts(*costs)),
        limit_(std::min(max_microbatches, global_batch)) {
    if (limit_ >= 2) {
      t1_ = Time(1);
      slope_ = Time(2) - t1_;
    }
  }

  double Time(int x) const { return model_->PipelineTimeMs(parts_, x); }
  int limit() const { return limit_; }
  // A lower bound of tau / Absorb(tau) over tau in [lo, hi] (+inf when the pipeline absorbs
  // nothing there): T(x) = T(1) + (x - 1) * slope (affine, COST_MODEL.md), so Absorb(tau)
  // <= (tau - o) / slope with o = T(1) - slope, and Absorb(tau) <= limit.
  double TimePerMicrobatchAtLeast(double lo, double hi) const {
    if (limit_ < 1 || Time(1) > hi) return kInf;
    double bound = std::max(lo, Time(1)) / limit_;
    if (limit_ >= 2 && slope_ > 0) {
      const double o = t1_ - slope_;
      // tau / (tau - o) falls with tau when o > 0 (least at hi), rises when o < 0.
      const double tau = o > 0 ? hi : std::max(lo, t1_);
      if (tau > o) bound = std::max(bound, slope_ * tau / (tau - o));
    }
    return bound;
  }
  // The most micro-batches with T <= tau; 0 when even one exceeds tau. T is
  // non-decreasing in x (also in floating point), so the answer is the end of a prefix and
  // any search that checks its neighbours finds it exactly.
  int Absorb(double tau) const {
    if (limit_ < 2) return limit_ == 1 && !(Time(1) > tau) ? 1 : 0;
    if (t1_ > tau) return 0;
    int lo = 1, hi = limit_;  // T(lo) <= tau; the answer is in [lo, hi]
    // T is affine in x under both cost models (COST_MODEL.md), so T(1) and T(2) place tau
    // to within rounding: one guess and its neighbour usually settle it. Otherwise the
    // bisection below runs on what the guess left open.
    if (slope_ > 0 && tau - t1_ >= 0) {  // false for a NaN tau
      const double steps = (tau - t1_) / slope_;
      const int guess = steps >= hi - 1 ? hi : 1 + static_cast<int>(steps);
      if (Time(guess) <= tau) {
        if (guess == hi || Time(guess + 1) > tau) return guess;
        lo = guess + 1;
      } else {
        hi = guess - 1;
      }
    }
    while (lo < hi) {
      const int mid = lo + (hi - lo + 1) / 2;
      if (Time(mid) <= tau) {
        lo = mid;
      } else {
        hi = mid - 1;
      }
    }
    return lo;
  }
  // The smallest value T(x) > tau, +inf if none.
  double NextAbove(double tau) const {
    const int k = Absorb(tau);
    return k < limit_ ? Time(k + 1) : kInf;
  }
  // The largest value T(x) <= tau, -inf if none.
  double AtOrBelow(double tau) const {
    const int k = Absorb(tau);
    return k >= 1 ? Time(k) : -kInf;
  }

 private:
  const CostModel* model_;
  CostModel::PipelineTimeParts parts_;
  int limit_;
  double t1_ = 0, slope_ = 0;  // T(1) and T(2) - T(1), set when limit >= 2
};

// Orders (stage costs, memory limit) pairs by value. A LoadCurve depends on nothing else,
// so pipelines equal under it share one curve: a fleet's hundreds of pipelines, each with
// its own costs vector, have a few dozen distinct templates.
struct LoadLess {
  using Key = std::pair<const std::vector<double>*, int>;
  bool operator()(const Key& a, const Key& b) const {
    return a.second != b.second ? a.second < b.second : a.first != b.first && *a.first < *b.first;
  }
};

inline double NextAbove(const std::vector<LoadCurve>& curves, double tau) {
  double best = kInf;
  for (const LoadCurve& c : curves) best = std::min(best, c.NextAbove(tau));
  return best;
}

inline double AtOrBelow(const std::vector<LoadCurve>& curves, double tau) {
  double best = -kInf;
  for (const LoadCurve& c : curves) best = std::max(best, c.AtOrBelow(tau));
  return best;
}

// The smallest candidate value (some T_j(x) of `curves`) in (bad, good] at which `feasible`
// holds, given that it holds at the candidate `good` and at no tau <= bad. feasible must
// be monotone in tau and depend on tau only through the curves' Absorb values (so it is
// constant between consecutive candidates).
// (A template rather than std::function: it runs a few times per search and the calls
// through a std::function showed in profiles of warm replans.)
template <typename Feasible>
absl::StatusOr<double> SmallestFeasible(const std::vector<LoadCurve>& curves, double bad,
                                        double good, const Feasible& feasible) {
  while (true) {
    const double next = NextAbove(curves, bad);
    if (next >= good) return good;
    // Some tau in [next, good) that makes progress either way.
    double mid = std::isinf(bad) ? next : bad + (good - bad) / 2;
    if (!(mid < good) || mid < next) mid = next;
    ASSIGN_OR_RETURN(bool ok, feasible(mid));
    if (ok) {
      good = AtOrBelow(curves, mid);
    } else {
      bad = mid;
    }
  }
}

}  // namespace oobleck::plan_search

#endif  // OOBLECK_CORE_PLAN_SEARCH_LOAD_CURVE_H_
