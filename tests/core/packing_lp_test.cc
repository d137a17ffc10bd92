// PackingLpMax (core/plan_search/packing_lp.h) against the vertices of small LPs.
#include "core/plan_search/packing_lp.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace oobleck {
namespace {

struct Lp {
  std::vector<std::vector<double>> columns;  // per column: per row
  std::vector<double> c, b;
};

Lp RandomLp(std::mt19937& rng, int rows) {
  auto uniform = [&](double lo, double hi) {
    return std::uniform_real_distribution<double>(lo, hi)(rng);
  };
  Lp lp;
  const int J = std::uniform_int_distribution<int>(1, 6)(rng);
  for (int r = 0; r < rows; ++r) lp.b.push_back(uniform(0, 20));
  for (int j = 0; j < J; ++j) {
    std::vector<double> a(rows);
    for (double& x : a)
      x = std::uniform_int_distribution<int>(0, 2)(rng) == 0 ? 0 : uniform(0.1, 5);
    if (*std::max_element(a.begin(), a.end()) == 0) a[j % rows] = uniform(0.1, 5);
    lp.columns.push_back(a);
    lp.c.push_back(uniform(0, 10));
  }
  return lp;
}

bool Feasible(const Lp& lp, const std::vector<double>& y) {
  for (size_t r = 0; r < lp.b.size(); ++r) {
    double used = 0;
    for (size_t j = 0; j < y.size(); ++j) used += lp.columns[j][r] * y[j];
    if (used > lp.b[r] * (1 + 1e-12) + 1e-12) return false;
  }
  return true;
}

double Value(const Lp& lp, const std::vector<double>& y) {
  double v = 0;
  for (size_t j = 0; j < y.size(); ++j) v += lp.c[j] * y[j];
  return v;
}

// The optimum of an LP of one or two rows: some vertex has at most two positive columns,
// each alone at its tightest row or a pair with both rows tight.
double VertexOptimum(const Lp& lp) {
  const size_t J = lp.columns.size(), R = lp.b.size();
  double best = 0;
  for (size_t j = 0; j < J; ++j) {
    double y = INFINITY;
    for (size_t r = 0; r < R; ++r) {
      if (lp.columns[j][r] > 0) y = std::min(y, lp.b[r] / lp.columns[j][r]);
    }
    best = std::max(best, lp.c[j] * y);
  }
  if (R == 2) {
    for (size_t j = 0; j < J; ++j) {
      for (size_t k = j + 1; k < J; ++k) {
        const double a = lp.columns[j][0], b = lp.columns[k][0];
        const double c = lp.columns[j][1], d = lp.columns[k][1];
        const double det = a * d - b * c;
        if (std::abs(det) < 1e-12) continue;
        std::vector<double> y(J, 0);
        y[j] = (lp.b[0] * d - b * lp.b[1]) / det;
        y[k] = (a * lp.b[1] - c * lp.b[0]) / det;
        if (y[j] < 0 || y[k] < 0 || !Feasible(lp, y)) continue;
        best = std::max(best, Value(lp, y));
      }
    }
  }
  return best;
}

TEST(PackingLpTest, MatchesTheBestVertexOfOneAndTwoRowLps) {
  std::mt19937 rng(31);
  for (int seed = 0; seed < 500; ++seed) {
    const Lp lp = RandomLp(rng, 1 + seed % 2);
    const double expected = VertexOptimum(lp);
    const double bound = PackingLpMax(lp.columns, lp.c, lp.b);
    // An upper bound always (the plan search relies on it), and tight up to rounding.
    EXPECT_GE(bound, expected * (1 - 1e-12) - 1e-12) << "seed " << seed;
    EXPECT_LE(bound, expected * (1 + 1e-9) + 1e-9) << "seed " << seed;
  }
}

TEST(PackingLpTest, BoundsEveryPackingOfLargerLps) {
  std::mt19937 rng(37);
  for (int seed = 0; seed < 200; ++seed) {
    const Lp lp = RandomLp(rng, 3 + seed % 4);
    const double bound = PackingLpMax(lp.columns, lp.c, lp.b);
    // Random points scaled onto the feasible region's boundary.
    for (int k = 0; k < 50; ++k) {
      std::vector<double> y(lp.columns.size());
      for (double& x : y) x = std::uniform_real_distribution<double>(0, 1)(rng);
      double scale = INFINITY;
      for (size_t r = 0; r < lp.b.size(); ++r) {
        double used = 0;
        for (size_t j = 0; j < y.size(); ++j) used += lp.columns[j][r] * y[j];
        if (used > 0) scale = std::min(scale, lp.b[r] / used);
      }
      if (!std::isfinite(scale)) continue;
      for (double& x : y) x *= scale;
      EXPECT_LE(Value(lp, y), bound * (1 + 1e-9) + 1e-9) << "seed " << seed;
    }
  }
}

TEST(PackingLpTest, ZeroCapacityAndZeroGains) {
  EXPECT_EQ(PackingLpMax({{1.0, 2.0}}, {3.0}, {0.0, 5.0}), 0);
  EXPECT_EQ(PackingLpMax({{1.0}}, {0.0}, {4.0}), 0);
  EXPECT_NEAR(PackingLpMax({{2.0}}, {3.0}, {4.0}), 6.0, 1e-12);
}

}  // namespace
}  // namespace oobleck
