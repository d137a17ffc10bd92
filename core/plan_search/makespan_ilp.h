// The plan search's integer program per makespan (PlanSearchMethod::kCoverIlp): the fewest
// free pipelines, or the least price of their nodes, that run the batch within tau
// (cover_ilp.h with one row per node type, and one for a budget).
#ifndef OOBLECK_CORE_PLAN_SEARCH_MAKESPAN_ILP_H_
#define OOBLECK_CORE_PLAN_SEARCH_MAKESPAN_ILP_H_

#include <cstdint>
#include <map>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/plan_search/cover_ilp.h"
#include "core/plan_search/search_shapes.h"

namespace oobleck::plan_search {

struct IlpAnswer {
  CoverIlpStatus status = CoverIlpStatus::kInfeasible;
  int64_t items = 0;
  int64_t objective = 0;                       // items, or price when by price
  int64_t lower_bound = 0;                     // on the objective
  int64_t price = 0;                           // of the free pipelines' nodes, in price steps
  std::vector<int64_t> counts;                 // per shape
  CoverIlpGoal goal = CoverIlpGoal::kOptimal;  // how far it was solved
};

// Whether the answer holds a plan (proven optimal or not).
inline bool HasPlan(const IlpAnswer& a) {
  return a.status == CoverIlpStatus::kOptimal || a.status == CoverIlpStatus::kBounded;
}

class MakespanIlp {
 public:
  // `shapes` and `progress` must outlive it.
  MakespanIlp(const SearchShapes& shapes, SearchProgress& progress)
      : shapes_(shapes), progress_(progress) {}

  // The fewest free pipelines that run the batch within tau, solved as far as `goal` asks,
  // memoised per tau: the search asks for some makespans twice, a yes/no question first and
  // the count later. (stop_at_bound: see CoverIlpLimits; an answer stopped there counts as
  // a bound.)
  absl::StatusOr<const IlpAnswer*> Solve(double tau, CoverIlpGoal goal,
                                         int64_t stop_at_bound = INT64_MAX);
  // One integer program at tau: the fewest free pipelines, or (by_price) the least price of
  // their nodes, with at most max_items free pipelines whose prices add up to at most
  // max_price (< 0: no limit), solved as far as `goal` asks.
  // (min_items >= 0: at least that many free pipelines instead of the problem's minimum.)
  absl::StatusOr<IlpAnswer> Run(double tau, bool by_price, int64_t max_items, int64_t max_price,
                                CoverIlpGoal goal = CoverIlpGoal::kOptimal,
                                int64_t stop_at_bound = INT64_MAX, int64_t min_items = -1);
  // Whether some set of pipelines runs the batch within tau; unsolved counts as no (and
  // leaves a gap).
  absl::StatusOr<bool> Feasible(double tau);
  // The most free pipelines (capped at want <= pmax) of any plan at the largest makespan,
  // -1 if none. Exact, or RESOURCE_EXHAUSTED when a program stops undecided.
  absl::StatusOr<int> MostPipelines(int want, int pmax);
  // FAILED_PRECONDITION saying why no plan runs the batch (budget, minimum, memory).
  absl::Status NoPlanError();
  // RESOURCE_EXHAUSTED: counting pipelines stopped at the node limit undecided.
  static absl::Status Undecided();

 private:
  const SearchShapes& shapes_;
  SearchProgress& progress_;
  std::map<double, IlpAnswer> memo_;
};

}  // namespace oobleck::plan_search

#endif  // OOBLECK_CORE_PLAN_SEARCH_MAKESPAN_ILP_H_
