// The assignment problem when rows and columns come in classes of equal cost: every row of
// class a costs cost[a][b] on every column of class b. Replan's rows are pipeline positions
// (a class per layer range needed) and its columns nodes (a class per layer range held), so
// thousands of rows fall into a few dozen classes, and this transportation problem is solved
// exactly in time that depends on the classes, not on the rows (the Hungarian method on the
// expanded matrix costs rows^2 x columns).
#ifndef OOBLECK_CORE_ASSIGNMENT_TRANSPORTATION_H_
#define OOBLECK_CORE_ASSIGNMENT_TRANSPORTATION_H_

#include <vector>

#include "core/assignment/hungarian.h"

namespace oobleck {

struct TransportationProblem {
  std::vector<int> row_counts;     // rows per row class, >= 0
  std::vector<int> column_counts;  // columns per column class, >= 0; sum >= sum of rows
  CostMatrix cost;                 // [row class][column class], finite, >= 0
};

// flow[a][b]: how many rows of class a take a column of class b. Every row is assigned, no
// column class gives more than it has, and the summed cost is the least (the same as the
// Hungarian method on the expanded matrix): successive shortest paths with potentials over
// the classes, each path carrying as many rows as it can. Deterministic.
std::vector<std::vector<int>> SolveTransportation(const TransportationProblem& problem);

}  // namespace oobleck

#endif  // OOBLECK_CORE_ASSIGNMENT_TRANSPORTATION_H_
