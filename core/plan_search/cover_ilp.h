// The fewest (or lightest) items that cover a demand within packing capacities, as an
// integer program:
//
//   min sum_j w_j y_j   s.t.   sum_j usage_j[r] y_j <= capacity[r]   for every row r,
//                              sum_j spend_j y_j <= budget           (when budget >= 0),
//                              sum_j gain_j y_j >= need,
//                              min_items <= sum_j y_j <= max_items,   y_j >= 0 integer,
//
// with w_j = 1 (the fewest items) unless weights are given (e.g. prices, for the least
// price of the nodes a plan uses).
//
// The plan search asks this at every makespan it tries (docs/architecture/plan-search.md):
// items are pipelines, rows node types, gains micro-batches a pipeline absorbs. Solved by
// GLPK (LP relaxation, a rounding of it, then branch and cut) with the integrality of the
// objective used to close the gap: an incumbent of ceil(LP bound) items is optimal.
#ifndef OOBLECK_CORE_PLAN_SEARCH_COVER_ILP_H_
#define OOBLECK_CORE_PLAN_SEARCH_COVER_ILP_H_

#include <cstdint>
#include <functional>
#include <vector>

#include "absl/status/statusor.h"

namespace oobleck {

struct CoverIlp {
  std::vector<int64_t> capacity;        // per row, >= 0
  std::vector<std::vector<int>> usage;  // per item: per row, >= 0
  std::vector<int64_t> gain;            // per item, >= 0
  int64_t need = 0;
  int64_t min_items = 0;
  int64_t max_items = INT64_MAX;
  // Objective weight per item, >= 0, integers (so the optimum is an integer and a proven
  // bound rounds up); empty: 1 per item.
  std::vector<int64_t> weight;
  // An extra packing row (e.g. a price budget): per item, >= 0; active when budget >= 0.
  std::vector<int64_t> spend;
  int64_t budget = -1;
};

// How far SolveCoverIlp goes.
enum class CoverIlpGoal {
  kOptimal,        // the least objective, proven (up to max_nodes)
  kFirstFeasible,  // stop at the first feasible y: a yes/no question with a witness
  kRelaxation,     // only the LP relaxation's bound and its rounding, no branching
};

struct CoverIlpLimits {
  CoverIlpGoal goal = CoverIlpGoal::kOptimal;
  // Branch-and-bound nodes before the solver stops with what it has proven.
  int64_t max_nodes = 20000;
  // With kOptimal: stop once the proven lower bound reaches this (the caller only needs to
  // know that the optimum is at least this much); the answer is then kBounded or kUnknown
  // with lower_bound >= stop_at_bound.
  int64_t stop_at_bound = INT64_MAX;
  std::function<bool()> cancelled;  // polled between nodes; may be empty
};

enum class CoverIlpStatus {
  kOptimal,     // counts has the least objective (the fewest items without weights)
  kInfeasible,  // proven: no y satisfies the constraints
  kBounded,     // counts is feasible; the optimum is in [lower_bound, objective]
  kUnknown,     // stopped at the node limit with no feasible y; lower_bound holds if one exists
};

struct CoverIlpSolution {
  CoverIlpStatus status = CoverIlpStatus::kUnknown;
  std::vector<int64_t> counts;  // per item (feasible when status is kOptimal or kBounded)
  int64_t items = 0;            // sum of counts
  int64_t objective = 0;        // sum of weight * counts (= items without weights)
  int64_t lower_bound = 0;      // proven: no feasible y has a smaller objective
  int64_t nodes = 0;            // branch-and-bound nodes the solver used (0: LP and rounding)
};

// INVALID_ARGUMENT for malformed input (sizes, negative entries); CANCELLED.
absl::StatusOr<CoverIlpSolution> SolveCoverIlp(const CoverIlp& problem,
                                               const CoverIlpLimits& limits);

// True when `counts` satisfies every constraint of `problem` (integer arithmetic).
bool CoverIlpFeasible(const CoverIlp& problem, const std::vector<int64_t>& counts);

}  // namespace oobleck

#endif  // OOBLECK_CORE_PLAN_SEARCH_COVER_ILP_H_
