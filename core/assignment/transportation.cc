#include "core/assignment/transportation.h"

#include <algorithm>
#include <limits>

namespace oobleck {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr int kUnbounded = std::numeric_limits<int>::max();

// The residual network over source, row classes, column classes and sink, stored densely
// (the classes are few). Node ids: 0 source, 1..R rows, R+1..R+C columns, R+C+1 sink.
class ResidualNetwork {
 public:
  explicit ResidualNetwork(const TransportationProblem& p)
      : p_(p),
        rows_(static_cast<int>(p.row_counts.size())),
        columns_(static_cast<int>(p.column_counts.size())),
        flow_(rows_, std::vector<int>(columns_, 0)),
        row_sent_(rows_, 0),
        column_used_(columns_, 0) {}

  int size() const { return rows_ + columns_ + 2; }
  int sink() const { return rows_ + columns_ + 1; }

  // Residual capacity and cost of the arc u -> v (capacity 0: no arc).
  std::pair<int, double> Arc(int u, int v) const {
    const int s = 0, t = sink();
    if (u == s && IsRow(v)) return {p_.row_counts[v - 1] - row_sent_[v - 1], 0};
    if (IsRow(u) && v == s) return {row_sent_[u - 1], 0};
    if (IsRow(u) && IsColumn(v)) return {kUnbounded, p_.cost[u - 1][v - rows_ - 1]};
    if (IsColumn(u) && IsRow(v)) {
      return {flow_[v - 1][u - rows_ - 1], -p_.cost[v - 1][u - rows_ - 1]};
    }
    if (IsColumn(u) && v == t) {
      return {p_.column_counts[u - rows_ - 1] - column_used_[u - rows_ - 1], 0};
    }
    if (u == t && IsColumn(v)) return {column_used_[v - rows_ - 1], 0};
    return {0, 0};
  }

  void Push(int u, int v, int amount) {
    const int s = 0, t = sink();
    if (u == s) row_sent_[v - 1] += amount;
    if (v == s) row_sent_[u - 1] -= amount;
    if (IsRow(u) && IsColumn(v)) flow_[u - 1][v - rows_ - 1] += amount;
    if (IsColumn(u) && IsRow(v)) flow_[v - 1][u - rows_ - 1] -= amount;
    if (v == t) column_used_[u - rows_ - 1] += amount;
    if (u == t) column_used_[v - rows_ - 1] -= amount;
  }

  std::vector<std::vector<int>>& flow() { return flow_; }

 private:
  bool IsRow(int v) const { return v >= 1 && v <= rows_; }
  bool IsColumn(int v) const { return v > rows_ && v <= rows_ + columns_; }

  const TransportationProblem& p_;
  int rows_, columns_;
  std::vector<std::vector<int>> flow_;
  std::vector<int> row_sent_, column_used_;
};

}  // namespace

std::vector<std::vector<int>> SolveTransportation(const TransportationProblem& problem) {
  ResidualNetwork net(problem);
  const int V = net.size(), s = 0, t = net.sink();
  int remaining = 0;
  for (int count : problem.row_counts) remaining += count;
  // Costs are >= 0, so zero potentials start valid; each round keeps reduced costs >= 0.
  std::vector<double> potential(V, 0), dist(V);
  std::vector<int> parent(V);
  std::vector<char> done(V);
  while (remaining > 0) {
    // Dijkstra on reduced costs (dense: the classes are few).
    std::fill(dist.begin(), dist.end(), kInf);
    std::fill(parent.begin(), parent.end(), -1);
    std::fill(done.begin(), done.end(), 0);
    dist[s] = 0;
    for (int round = 0; round < V; ++round) {
      int u = -1;
      for (int v = 0; v < V; ++v) {
        if (!done[v] && dist[v] < kInf && (u < 0 || dist[v] < dist[u])) u = v;
      }
      if (u < 0) break;
      done[u] = 1;
      for (int v = 0; v < V; ++v) {
        if (done[v]) continue;
        const auto [capacity, cost] = net.Arc(u, v);
        if (capacity <= 0) continue;
        // Rounding may leave a reduced cost a hair below zero.
        const double reduced = std::max(0.0, cost + potential[u] - potential[v]);
        if (dist[u] + reduced < dist[v]) {
          dist[v] = dist[u] + reduced;
          parent[v] = u;
        }
      }
    }
    if (dist[t] == kInf) break;  // fewer columns than rows: the caller's precondition failed
    double reached_max = 0;
    for (int v = 0; v < V; ++v) {
      if (dist[v] < kInf) reached_max = std::max(reached_max, dist[v]);
    }
    // Unreached nodes move by the largest distance, which keeps their arcs' reduced costs
    // into reached nodes >= 0.
    for (int v = 0; v < V; ++v) potential[v] += dist[v] < kInf ? dist[v] : reached_max;
    int amount = remaining;
    for (int v = t; v != s; v = parent[v]) amount = std::min(amount, net.Arc(parent[v], v).first);
    for (int v = t; v != s; v = parent[v]) net.Push(parent[v], v, amount);
    remaining -= amount;
  }
  return std::move(net.flow());
}

}  // namespace oobleck
