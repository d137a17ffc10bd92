#include "core/plan_search/cost_search.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <queue>
#include <vector>

#include "core/status_macros.h"

namespace oobleck::plan_search {

// Every plan runs within some candidate makespan tau = T_j(x) at cost >= price x (tau +
// AR(P)), so the optimum is min over tau of the best plan feasible at tau. At one tau
// (CostAt): the least price c0 (an integer program weighted by price), then the fewest
// pipelines among plans of that price (P0; less all-reduce), then the least price with at
// most P0 - 1 pipelines, and so on while the price alone can still beat the incumbent. Over
// tau: c(tau), the least price, never increases with tau (the feasible set only grows), so
// an interval (a, b) of makespans costs at least c(b) x (first tau after a + AR of the
// fewest pipelines any plan has); intervals are split best bound first and dropped once
// that bound reaches the incumbent.
absl::Status CostSearch::Run() {
  RETURN_IF_ERROR(shapes_.CheckBatch());
  const std::vector<LoadCurve>& all = shapes_.all();
  const double top = shapes_.TopTau();
  ASSIGN_OR_RETURN(bool fits, ilp_.Feasible(top));
  if (!fits) return ilp_.NoPlanError();
  ASSIGN_OR_RETURN(double tau_lp,
                   SmallestFeasible(all, -kInf, top, [&](double tau) -> absl::StatusOr<bool> {
                     return bracket_.RelaxedFeasible(tau);
                   }));
  const int fewest_free =
      std::max(0, std::max(1, shapes_.problem().min_pipelines) - shapes_.FixedCount());
  ar_floor_ = shapes_.Allreduce(fewest_free);
  struct Interval {
    double bound;  // no plan with a makespan in (a, b) costs less
    double a, b;
    int64_t price_b;  // proven least free price at b
    bool operator>(const Interval& o) const { return bound > o.bound; }
  };
  std::priority_queue<Interval, std::vector<Interval>, std::greater<Interval>> open;
  auto push = [&](double a, double b, int64_t price_b) {
    const double first = NextAbove(all, a);
    if (first >= b) return;
    const double bound =
        std::max(static_cast<double>(shapes_.fixed_price() + price_b) * (first + ar_floor_),
                 ThroughputBound(first, b, price_b));
    if (bound < best_.value) open.push({bound, a, b, price_b});
  };
  ASSIGN_OR_RETURN(std::optional<int64_t> at_top, CostAt(top));
  if (!at_top.has_value()) return absl::InternalError("plan search: no plan at the top makespan");
  push(std::nextafter(tau_lp, -kInf), top, *at_top);
  int makespans = 1;
  while (!open.empty() && open.top().bound < best_.value) {
    const Interval iv = open.top();
    if (makespans >= shapes_.problem().max_cost_makespans) {
      progress_.cost_open_bound = std::min(progress_.cost_open_bound, iv.bound);
      progress_.inexact = true;
      break;
    }
    open.pop();
    const double first = NextAbove(all, iv.a);
    double c = AtOrBelow(all, iv.a + (iv.b - iv.a) / 2);
    if (c <= iv.a) c = first;
    ASSIGN_OR_RETURN(std::optional<int64_t> at, CostAt(c));
    ++makespans;
    if (at.has_value()) push(iv.a, c, *at);  // (proven infeasible: so is everything below)
    push(c, iv.b, iv.price_b);
  }
  return absl::OkStatus();
}

// A lower bound on price x (tau + AR) over plans with a makespan tau in [lo, hi] whose
// free pipelines cost at least price_hi: the free pipelines absorb Need(hi) or more
// micro-batches, each at a price x time of at least price_j x TimePerMicrobatchAtLeast
// (a bound that, unlike price_hi x lo, keeps each pipeline's fill time: it proves the
// flat stretches of price x time, where cheaper plans take proportionally longer).
double CostSearch::ThroughputBound(double lo, double hi, int64_t price_hi) const {
  const int need = shapes_.Need(hi);
  if (need == kImpossibleNeed) return kInf;
  double per_microbatch = kInf;
  const std::vector<LoadCurve>& curves = shapes_.shapes();
  for (size_t j = 0; j < curves.size(); ++j) {
    if (!shapes_.fits(j)) continue;
    per_microbatch = std::min(per_microbatch, static_cast<double>(shapes_.shape_price(j)) *
                                                  curves[j].TimePerMicrobatchAtLeast(lo, hi));
  }
  const double fixed_price = static_cast<double>(shapes_.fixed_price());
  const double free_part = need <= 0 ? 0 : need * per_microbatch;
  const double bound = free_part + fixed_price * lo +
                       static_cast<double>(shapes_.fixed_price() + price_hi) * ar_floor_;
  return bound * (1 - kBoundSlack);  // T(x) is affine only up to rounding
}

double CostSearch::CostOf(double tau, int64_t free_price, int64_t free_pipelines) const {
  return static_cast<double>(shapes_.fixed_price() + free_price) *
         (tau + shapes_.Allreduce(static_cast<int>(free_pipelines)));
}

void CostSearch::ConsiderCost(double tau, const IlpAnswer& a) {
  const double value = CostOf(tau, a.price, a.items);
  if (value < best_.value) {
    best_.value = value;
    best_.tau = tau;
    best_.pipelines = static_cast<int>(a.items);
    best_.counts = a.counts;
  }
}

// The best plans at tau (ConsiderCost); the proven least free price at tau, or nullopt
// when no plan runs within tau (proven).
absl::StatusOr<std::optional<int64_t>> CostSearch::CostAt(double tau) {
  const int64_t fixed = shapes_.FixedCount();
  const int64_t min_items = std::max<int64_t>(0, shapes_.problem().min_pipelines - fixed);
  int64_t max_items = std::max<int64_t>(0, shapes_.global_batch() - fixed);
  const int64_t free_budget = shapes_.free_budget();
  std::optional<int64_t> least;
  while (max_items >= min_items) {
    ASSIGN_OR_RETURN(IlpAnswer cheapest, ilp_.Run(tau, /*by_price=*/true, max_items, free_budget));
    if (cheapest.status == CoverIlpStatus::kInfeasible) break;
    if (!least) least = cheapest.lower_bound;
    // Every plan at tau left to look at costs at least this.
    const double bound =
        static_cast<double>(shapes_.fixed_price() + cheapest.lower_bound) * (tau + ar_floor_);
    if (bound >= best_.value) break;
    if (cheapest.status != CoverIlpStatus::kOptimal) {
      if (HasPlan(cheapest)) ConsiderCost(tau, cheapest);
      progress_.cost_open_bound = std::min(progress_.cost_open_bound, bound);
      break;
    }
    // The fewest pipelines among plans of that price.
    const int64_t cap =
        free_budget < 0 ? cheapest.objective : std::min(free_budget, cheapest.objective);
    ASSIGN_OR_RETURN(IlpAnswer fewest, ilp_.Run(tau, /*by_price=*/false, cheapest.items, cap));
    const bool fewer = HasPlan(fewest) && fewest.items <= cheapest.items;
    ConsiderCost(tau, fewer ? fewest : cheapest);
    if (fewest.status != CoverIlpStatus::kOptimal) {
      progress_.cost_open_bound = std::min(progress_.cost_open_bound, bound);
      break;
    }
    max_items = fewest.items - 1;  // plans with fewer pipelines cost more
  }
  if (!least) return std::optional<int64_t>();
  return least;
}

}  // namespace oobleck::plan_search
