#include "core/assignment/hungarian.h"

#include <algorithm>
#include <limits>

namespace oobleck {
namespace {
constexpr double kInf = std::numeric_limits<double>::infinity();
}  // namespace

std::vector<int> HungarianAssignment(const CostMatrix& cost) {
  const int n = static_cast<int>(cost.size());
  if (n == 0) return {};
  const int m = static_cast<int>(cost[0].size());
  // Row and column potentials; p[j]: the row (1-based) column j holds; way: the path.
  std::vector<double> u(n + 1, 0), v(m + 1, 0);
  std::vector<int> p(m + 1, 0), way(m + 1, 0);
  std::vector<double> minv(m + 1);
  std::vector<char> used(m + 1);
  for (int i = 1; i <= n; ++i) {
    p[0] = i;
    int j0 = 0;
    std::fill(minv.begin(), minv.end(), kInf);
    std::fill(used.begin(), used.end(), 0);
    do {
      used[j0] = 1;
      const int i0 = p[j0];
      double delta = kInf;
      int j1 = 0;
      for (int j = 1; j <= m; ++j) {
        if (used[j]) continue;
        const double cur = cost[i0 - 1][j - 1] - u[i0] - v[j];
        if (cur < minv[j]) {
          minv[j] = cur;
          way[j] = j0;
        }
        if (minv[j] < delta) {
          delta = minv[j];
          j1 = j;
        }
      }
      for (int j = 0; j <= m; ++j) {
        if (used[j]) {
          u[p[j]] += delta;
          v[j] -= delta;
        } else {
          minv[j] -= delta;
        }
      }
      j0 = j1;
    } while (p[j0] != 0);
    do {
      const int j1 = way[j0];
      p[j0] = p[j1];
      j0 = j1;
    } while (j0 != 0);
  }
  std::vector<int> column_of(n, -1);
  for (int j = 1; j <= m; ++j) {
    if (p[j] != 0) column_of[p[j] - 1] = j - 1;
  }
  return column_of;
}

std::vector<int> GreedyAssignment(const CostMatrix& cost) {
  std::vector<int> column_of(cost.size(), -1);
  std::vector<bool> taken(cost.empty() ? 0 : cost[0].size(), false);
  for (size_t r = 0; r < cost.size(); ++r) {
    for (size_t c = 0; c < taken.size(); ++c) {
      if (!taken[c] && (column_of[r] < 0 || cost[r][c] < cost[r][column_of[r]])) {
        column_of[r] = static_cast<int>(c);
      }
    }
    taken[column_of[r]] = true;
  }
  return column_of;
}

double AssignmentCost(const CostMatrix& cost, const std::vector<int>& column_of) {
  double sum = 0;
  for (size_t r = 0; r < column_of.size(); ++r) sum += cost[r][column_of[r]];
  return sum;
}

}  // namespace oobleck
