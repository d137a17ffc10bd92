// PackingLpMax (core/plan_search/packing_lp.h): a dense simplex.
#include "core/plan_search/packing_lp.h"

#include <algorithm>
#include <limits>

namespace oobleck {
namespace {
constexpr double kInf = std::numeric_limits<double>::infinity();
}  // namespace

double PackingLpMax(const std::vector<std::vector<double>>& columns, const std::vector<double>& c,
                    const std::vector<double>& b) {
  const int R = static_cast<int>(b.size());
  const int J = static_cast<int>(columns.size());
  const int W = J + R + 1;  // structural, slack, right-hand side
  constexpr double kEps = 1e-12;
  std::vector<double> tab((R + 1) * W, 0.0);
  auto at = [&](int r, int j) -> double& { return tab[r * W + j]; };
  std::vector<int> basis(R);
  for (int r = 0; r < R; ++r) {
    for (int j = 0; j < J; ++j) at(r, j) = columns[j][r];
    at(r, J + r) = 1;
    at(r, W - 1) = b[r];
    basis[r] = J + r;
  }
  for (int j = 0; j < J; ++j) at(R, j) = -c[j];
  for (int iteration = 0; iteration < 10000; ++iteration) {
    int enter = -1;
    for (int j = 0; j < J + R && enter < 0; ++j) {
      if (at(R, j) < -kEps) enter = j;
    }
    if (enter < 0) break;
    int leave = -1;
    double best_ratio = kInf;
    for (int r = 0; r < R; ++r) {
      if (at(r, enter) <= kEps) continue;
      const double ratio = at(r, W - 1) / at(r, enter);
      if (ratio < best_ratio || (ratio == best_ratio && basis[r] < basis[leave])) {
        best_ratio = ratio;
        leave = r;
      }
    }
    if (leave < 0) return kInf;  // unbounded
    const double pivot = at(leave, enter);
    for (int j = 0; j < W; ++j) at(leave, j) /= pivot;
    for (int r = 0; r <= R; ++r) {
      if (r == leave) continue;
      const double f = at(r, enter);
      if (f == 0) continue;
      for (int j = 0; j < W; ++j) at(r, j) -= f * at(leave, j);
    }
    basis[leave] = enter;
  }
  // The answer is an upper bound by weak duality, whatever rounding did to the tableau: the
  // final duals (objective-row entries of the slacks), clamped at 0 and scaled until every
  // column's constraint holds, are dual feasible, so b . y bounds every packing.
  std::vector<double> y(R);
  for (int r = 0; r < R; ++r) y[r] = std::max(0.0, at(R, J + r));
  double scale = 1;
  for (int j = 0; j < J; ++j) {
    if (c[j] <= 0) continue;
    double covered = 0;
    for (int r = 0; r < R; ++r) covered += columns[j][r] * y[r];
    if (!(covered > 0)) return kInf;  // no bound from these duals
    scale = std::max(scale, c[j] / covered);
  }
  double bound = 0;
  for (int r = 0; r < R; ++r) bound += b[r] * y[r];
  return bound * scale;
}

}  // namespace oobleck
