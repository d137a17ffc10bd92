// Minimum-cost assignment of rows to distinct columns (the linear assignment problem), as
// OR-Tools keeps its hungarian.{h,cc}: a generic algorithm with its own tests
// (tests/core/assignment_test.cc), used by Replan to bind pipeline positions to nodes.
#ifndef OOBLECK_CORE_ASSIGNMENT_HUNGARIAN_H_
#define OOBLECK_CORE_ASSIGNMENT_HUNGARIAN_H_

#include <vector>

namespace oobleck {

// cost[r][c]: every row has the same number of columns, rows <= columns, entries finite.
using CostMatrix = std::vector<std::vector<double>>;

// The column of every row, distinct, minimising the summed cost: the Hungarian method with
// potentials (shortest augmenting paths), O(rows^2 * columns). Deterministic.
std::vector<int> HungarianAssignment(const CostMatrix& cost);

// Each row in turn takes the cheapest column still free (ties: the lower index): complete
// but not minimal; O(rows * columns).
std::vector<int> GreedyAssignment(const CostMatrix& cost);

// The summed cost of an assignment (column_of[r] per row).
double AssignmentCost(const CostMatrix& cost, const std::vector<int>& column_of);

}  // namespace oobleck

#endif  // OOBLECK_CORE_ASSIGNMENT_HUNGARIAN_H_
