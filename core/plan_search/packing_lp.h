// A small packing LP, the relaxation the plan search brackets its makespans with.
#ifndef OOBLECK_CORE_PLAN_SEARCH_PACKING_LP_H_
#define OOBLECK_CORE_PLAN_SEARCH_PACKING_LP_H_

#include <vector>

namespace oobleck {

// max sum_j c_j y_j  s.t.  sum_j a_j[r] y_j <= b[r] for every row r, y >= 0, with a, b >= 0
// (a packing LP: the zero vector is feasible, the optimum is finite when every column has a
// positive entry): an upper bound on it (its value up to rounding, +inf when none is found).
// Dense simplex with Bland's rule, which cannot cycle. Tiny here: one row per node type.
double PackingLpMax(const std::vector<std::vector<double>>& columns, const std::vector<double>& c,
                    const std::vector<double>& b);

}  // namespace oobleck

#endif  // OOBLECK_CORE_PLAN_SEARCH_PACKING_LP_H_
