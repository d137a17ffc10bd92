// core/assignment: the Hungarian method and the class-level transportation solver against
// brute force on small random matrices, and against each other on larger ones.
#include <algorithm>
#include <numeric>
#include <random>
#include <set>
#include <vector>

#include "core/assignment/hungarian.h"
#include "core/assignment/transportation.h"
#include "gtest/gtest.h"

namespace oobleck {
namespace {

// The least cost over every injective row -> column map.
double BruteForceAssignment(const CostMatrix& cost) {
  const int rows = static_cast<int>(cost.size());
  const int columns = rows == 0 ? 0 : static_cast<int>(cost[0].size());
  std::vector<int> perm(columns);
  std::iota(perm.begin(), perm.end(), 0);
  double best = std::numeric_limits<double>::infinity();
  do {  // every permutation of the columns; the first `rows` entries are the assignment
    double sum = 0;
    for (int r = 0; r < rows; ++r) sum += cost[r][perm[r]];
    best = std::min(best, sum);
  } while (std::next_permutation(perm.begin(), perm.end()));
  return rows == 0 ? 0 : best;
}

void ExpectValidAssignment(const CostMatrix& cost, const std::vector<int>& column_of) {
  ASSERT_EQ(column_of.size(), cost.size());
  std::set<int> used;
  for (int c : column_of) {
    ASSERT_GE(c, 0);
    ASSERT_LT(c, static_cast<int>(cost[0].size()));
    EXPECT_TRUE(used.insert(c).second) << "column " << c << " taken twice";
  }
}

CostMatrix RandomMatrix(std::mt19937& rng, int rows, int columns, int max_cost) {
  std::uniform_int_distribution<int> value(0, max_cost);
  CostMatrix cost(rows, std::vector<double>(columns));
  for (auto& row : cost) {
    for (double& x : row) x = value(rng);
  }
  return cost;
}

TEST(HungarianTest, MatchesBruteForceOnSmallRandomMatrices) {
  for (uint32_t seed = 0; seed < 400; ++seed) {
    std::mt19937 rng(seed);
    const int columns = std::uniform_int_distribution<int>(1, 7)(rng);
    const int rows = std::uniform_int_distribution<int>(1, columns)(rng);
    // Few distinct values (many ties) on odd seeds, wide ones on even seeds.
    const CostMatrix cost = RandomMatrix(rng, rows, columns, seed % 2 ? 3 : 1000000);
    const std::vector<int> column_of = HungarianAssignment(cost);
    ExpectValidAssignment(cost, column_of);
    EXPECT_DOUBLE_EQ(AssignmentCost(cost, column_of), BruteForceAssignment(cost))
        << "seed " << seed << ", " << rows << " x " << columns;
    const std::vector<int> greedy = GreedyAssignment(cost);
    ExpectValidAssignment(cost, greedy);
    EXPECT_GE(AssignmentCost(cost, greedy), AssignmentCost(cost, column_of));
  }
}

TEST(HungarianTest, EmptyAndSingleRow) {
  EXPECT_TRUE(HungarianAssignment({}).empty());
  EXPECT_EQ(HungarianAssignment({{5, 2, 9}}), std::vector<int>({1}));
  EXPECT_EQ(GreedyAssignment({{5, 2, 9}, {1, 1, 1}}), std::vector<int>({1, 0}));
}

// Rows and columns expanded from their classes.
CostMatrix Expand(const TransportationProblem& p) {
  CostMatrix out;
  for (size_t a = 0; a < p.row_counts.size(); ++a) {
    for (int i = 0; i < p.row_counts[a]; ++i) {
      std::vector<double> row;
      for (size_t b = 0; b < p.column_counts.size(); ++b) {
        row.insert(row.end(), p.column_counts[b], p.cost[a][b]);
      }
      out.push_back(std::move(row));
    }
  }
  return out;
}

// Checks the flow's shape and returns its cost.
double FlowCost(const TransportationProblem& p, const std::vector<std::vector<int>>& flow) {
  double sum = 0;
  EXPECT_EQ(flow.size(), p.row_counts.size());
  std::vector<int> used(p.column_counts.size(), 0);
  for (size_t a = 0; a < flow.size(); ++a) {
    int sent = 0;
    for (size_t b = 0; b < flow[a].size(); ++b) {
      EXPECT_GE(flow[a][b], 0);
      sent += flow[a][b];
      used[b] += flow[a][b];
      sum += flow[a][b] * p.cost[a][b];
    }
    EXPECT_EQ(sent, p.row_counts[a]) << "row class " << a;
  }
  for (size_t b = 0; b < used.size(); ++b) EXPECT_LE(used[b], p.column_counts[b]);
  return sum;
}

TransportationProblem RandomTransportation(std::mt19937& rng, int max_classes, int max_count,
                                           int max_cost) {
  TransportationProblem p;
  const int rows = std::uniform_int_distribution<int>(1, max_classes)(rng);
  const int columns = std::uniform_int_distribution<int>(1, max_classes)(rng);
  std::uniform_int_distribution<int> count(0, max_count);
  int row_total = 0, column_total = 0;
  for (int a = 0; a < rows; ++a) row_total += p.row_counts.emplace_back(count(rng));
  for (int b = 0; b < columns; ++b) column_total += p.column_counts.emplace_back(count(rng));
  p.column_counts.back() += std::max(0, row_total - column_total);  // enough columns
  p.cost = RandomMatrix(rng, rows, columns, max_cost);
  return p;
}

TEST(TransportationTest, MatchesBruteForceOnSmallRandomInstances) {
  for (uint32_t seed = 0; seed < 300; ++seed) {
    std::mt19937 rng(seed);
    TransportationProblem p = RandomTransportation(rng, 3, 3, seed % 2 ? 4 : 1000000);
    const CostMatrix full = Expand(p);
    if (full.empty() || full[0].size() > 8) continue;  // brute force stays small
    EXPECT_DOUBLE_EQ(FlowCost(p, SolveTransportation(p)), BruteForceAssignment(full))
        << "seed " << seed;
  }
}

TEST(TransportationTest, MatchesHungarianOnLargerRandomInstances) {
  for (uint32_t seed = 0; seed < 200; ++seed) {
    std::mt19937 rng(1000 + seed);
    TransportationProblem p = RandomTransportation(rng, 8, 12, seed % 2 ? 5 : 1 << 30);
    const CostMatrix full = Expand(p);
    const double hungarian = full.empty() ? 0 : AssignmentCost(full, HungarianAssignment(full));
    EXPECT_DOUBLE_EQ(FlowCost(p, SolveTransportation(p)), hungarian) << "seed " << seed;
  }
}

}  // namespace
}  // namespace oobleck
