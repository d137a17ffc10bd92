// The makespan bracket of the plan search: before the exact bisection over candidate
// makespans, narrow (bad, good] from the LP relaxation's bound up (a gallop of exact passes)
// or around a replan's hint (docs/architecture/plan-search.md).
#ifndef OOBLECK_CORE_PLAN_SEARCH_MAKESPAN_BRACKET_H_
#define OOBLECK_CORE_PLAN_SEARCH_MAKESPAN_BRACKET_H_

#include <cstdint>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/plan_search/search_shapes.h"

namespace oobleck::plan_search {

// Whether some plan runs the batch within a makespan; monotone in it, and constant between
// consecutive candidates (SmallestFeasible).
using MakespanTest = absl::FunctionRef<absl::StatusOr<bool>(double)>;

class MakespanBracket {
 public:
  // Below this many (state, shape) pairs a DP pass costs microseconds: less than the LP's
  // bisection, so small searches skip it.
  static constexpr int64_t kSmallSearch = 20000;

  // `shapes` and `progress` must outlive it.
  MakespanBracket(const SearchShapes& shapes, SearchProgress& progress)
      : shapes_(shapes), progress_(progress) {}

  // Narrows (bad, good], the makespans where the smallest feasible one lies: with
  // `from_lp`, from the LP bound up (which also proves every tau <= bad infeasible:
  // progress.proven_infeasible), else around the problem's hint if it has one.
  absl::Status Narrow(bool from_lp, MakespanTest exact, double& bad, double& good);
  // Narrows (bad, good] (as SmallestFeasible takes it, for a predicate monotone in tau)
  // around the hint, a replan's old makespan, which is usually within a few percent of the
  // threshold: relative steps that double from it, down while `feasible` holds, up while not.
  absl::Status AroundHint(MakespanTest feasible, double& bad, double& good) const;
  // False only if no set of pipelines can run the batch within tau: the free pipelines'
  // LP relaxation (fractional pipelines) is below what they must absorb.
  bool RelaxedFeasible(double tau) const;

 private:
  const SearchShapes& shapes_;
  SearchProgress& progress_;
};

}  // namespace oobleck::plan_search

#endif  // OOBLECK_CORE_PLAN_SEARCH_MAKESPAN_BRACKET_H_
