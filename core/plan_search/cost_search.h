// The plan search's cost objective (PlanObjective::kCost): the least price x iteration time
// (docs/architecture/plan-search.md#cost-aware-plans), a best-bound-first search over intervals of
// candidate makespans with one or a few integer programs per makespan.
#ifndef OOBLECK_CORE_PLAN_SEARCH_COST_SEARCH_H_
#define OOBLECK_CORE_PLAN_SEARCH_COST_SEARCH_H_

#include <cstdint>
#include <optional>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/plan_search/makespan_bracket.h"
#include "core/plan_search/makespan_ilp.h"
#include "core/plan_search/search_shapes.h"

namespace oobleck::plan_search {

class CostSearch {
 public:
  // Every argument must outlive the search; `incumbent` receives its best plan.
  CostSearch(const SearchShapes& shapes, MakespanIlp& ilp, const MakespanBracket& bracket,
             SearchProgress& progress, Incumbent& incumbent)
      : shapes_(shapes), ilp_(ilp), bracket_(bracket), progress_(progress), best_(incumbent) {}

  // Leaves the cheapest plan in the incumbent (its value price x iteration time), or
  // FAILED_PRECONDITION when no plan runs the batch.
  absl::Status Run();

 private:
  double ThroughputBound(double lo, double hi, int64_t price_hi) const;
  absl::StatusOr<std::optional<int64_t>> CostAt(double tau);
  // Price x (makespan + all-reduce) of a plan at tau, fixed pipelines included.
  double CostOf(double tau, int64_t free_price, int64_t free_pipelines) const;
  void ConsiderCost(double tau, const IlpAnswer& a);

  static constexpr double kBoundSlack = 1e-9;

  const SearchShapes& shapes_;
  MakespanIlp& ilp_;
  const MakespanBracket& bracket_;
  SearchProgress& progress_;
  Incumbent& best_;
  double ar_floor_ = 0;  // all-reduce of the fewest pipelines a plan has
};

}  // namespace oobleck::plan_search

#endif  // OOBLECK_CORE_PLAN_SEARCH_COST_SEARCH_H_
