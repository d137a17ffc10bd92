#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "core/assignment/hungarian.h"
#include "core/assignment/transportation.h"
#include "core/replan/candidate.h"
#include "core/status_macros.h"

namespace oobleck::replan_internal {
namespace {

// The Hungarian method costs rows^2 x columns: seconds once a replan rebinds thousands of
// positions of one type (a fleet whose plan changes shape). Past this the oracle method
// (NodeAssignmentMethod::kHungarian) is greedy: the plan and its copy plan stay complete, the
// bytes copied may not be the least.
constexpr size_t kMaxExactAssignmentWork = size_t{1} << 27;

// Rows: positions (pipeline, position) of one node type; columns: candidate nodes of that
// type. The column (index into `columns`) of every row, the least bytes to copy in all.
std::vector<int> AssignPositions(const ReplanContext& ctx, const Draft& draft,
                                 const std::vector<std::pair<int, int>>& positions,
                                 const std::vector<int>& columns, NodeAssignmentMethod method) {
  // One row and one column (a pipeline's only node of a type, as the fallback rule's
  // pipelines mostly are): the only assignment.
  if (positions.size() == 1 && columns.size() == 1) return {0};
  std::vector<LayerRange> needs;
  needs.reserve(positions.size());
  for (const auto& [k, j] : positions)
    needs.push_back(LayersOfPosition(*draft.pipelines[k].tmpl, j));
  if (method == NodeAssignmentMethod::kHungarian) {
    CostMatrix cost(positions.size(), std::vector<double>(columns.size()));
    for (size_t r = 0; r < positions.size(); ++r) {
      for (size_t c = 0; c < columns.size(); ++c)
        cost[r][c] = ctx.MissingBytes(columns[c], needs[r]);
    }
    return positions.size() * positions.size() * columns.size() <= kMaxExactAssignmentWork
               ? HungarianAssignment(cost)
               : GreedyAssignment(cost);
  }
  // The bytes depend only on the range a position needs and the range a node holds: a
  // transportation problem over those classes (a few dozen), exact like the Hungarian method.
  auto classify = [](absl::flat_hash_map<std::pair<int, int>, int>& ids, LayerRange r) {
    const std::pair<int, int> key = r.empty() ? std::pair{0, 0} : std::pair{r.begin, r.end};
    return ids.emplace(key, static_cast<int>(ids.size())).first->second;
  };
  absl::flat_hash_map<std::pair<int, int>, int> row_ids, column_ids;
  TransportationProblem problem;
  std::vector<int> row_class(positions.size());
  std::vector<LayerRange> row_range;
  for (size_t r = 0; r < positions.size(); ++r) {
    row_class[r] = classify(row_ids, needs[r]);
    if (row_class[r] == static_cast<int>(problem.row_counts.size())) {
      problem.row_counts.push_back(0);
      row_range.push_back(needs[r]);
    }
    ++problem.row_counts[row_class[r]];
  }
  std::vector<std::vector<int>> members;  // per column class: indices into columns, in order
  for (size_t c = 0; c < columns.size(); ++c) {
    const int b = classify(column_ids, ctx.held[columns[c]]);
    if (b == static_cast<int>(members.size())) members.emplace_back();
    members[b].push_back(static_cast<int>(c));
  }
  for (const std::vector<int>& m : members)
    problem.column_counts.push_back(static_cast<int>(m.size()));
  problem.cost.assign(row_range.size(), std::vector<double>(members.size()));
  for (size_t a = 0; a < row_range.size(); ++a) {
    for (size_t b = 0; b < members.size(); ++b) {
      problem.cost[a][b] = ctx.MissingBytes(columns[members[b][0]], row_range[a]);
    }
  }
  std::vector<std::vector<int>> flow = SolveTransportation(problem);
  std::vector<size_t> next(members.size(), 0);  // the next free member of each column class
  std::vector<int> column_of(positions.size(), -1);
  for (size_t r = 0; r < positions.size(); ++r) {
    std::vector<int>& to = flow[row_class[r]];
    size_t b = 0;
    while (to[b] == 0) ++b;
    --to[b];
    column_of[r] = members[b][next[b]++];
  }
  return column_of;
}

}  // namespace

absl::Status BindDraft(const ReplanContext& ctx, Draft* draft_ptr) {
  Draft& draft = *draft_ptr;
  const int T = ctx.model->num_types();
  const int N = static_cast<int>(ctx.survivors.size());
  // Per node type: rows (pipeline, position) and columns (candidate nodes); reused by every
  // assignment below (a fleet's draft has hundreds of pipelines).
  std::vector<std::vector<std::pair<int, int>>> positions(T);
  std::vector<std::vector<int>> columns(T);
  auto assign_each_type = [&]() -> absl::Status {
    for (int t = 0; t < T; ++t) {
      if (positions[t].empty()) continue;
      if (positions[t].size() > columns[t].size()) {
        return absl::InternalError("replan: a pipeline has more positions than nodes to bind");
      }
      const std::vector<int> column_of =
          AssignPositions(ctx, draft, positions[t], columns[t], ctx.assignment);
      for (size_t r = 0; r < positions[t].size(); ++r) {
        const auto [k, j] = positions[t][r];
        draft.pipelines[k].nodes[j] = columns[t][column_of[r]];
      }
    }
    return absl::OkStatus();
  };
  auto clear = [&] {
    for (int t = 0; t < T; ++t) {
      positions[t].clear();
      columns[t].clear();
    }
  };
  // Rows of pipeline k (its nodes become -1 until bound).
  auto add_positions = [&](int k) {
    DraftPipeline& p = draft.pipelines[k];
    for (int j = 0; j < p.tmpl->num_nodes(); ++j) {
      positions[p.tmpl->node_order[j]].push_back({k, j});
    }
  };
  // Pipelines with a node set: within the set, type by type.
  std::vector<int> set;
  for (size_t k = 0; k < draft.pipelines.size(); ++k) {
    DraftPipeline& p = draft.pipelines[k];
    if (p.bound || p.nodes.empty()) continue;
    clear();
    set.swap(p.nodes);
    p.nodes.assign(p.tmpl->num_nodes(), -1);
    add_positions(static_cast<int>(k));
    for (int s : set) columns[ctx.survivors[s].type].push_back(s);
    RETURN_IF_ERROR(assign_each_type());
    p.bound = true;
  }
  // Pipelines from the pool of survivors nobody uses yet.
  std::vector<char> used(N, 0);
  clear();
  for (size_t k = 0; k < draft.pipelines.size(); ++k) {
    DraftPipeline& p = draft.pipelines[k];
    if (p.bound) {
      for (int s : p.nodes) used[s] = 1;
      continue;
    }
    if (p.nodes.empty()) p.nodes.assign(p.tmpl->num_nodes(), -1);
    add_positions(static_cast<int>(k));
  }
  for (int s = 0; s < N; ++s) {
    if (!used[s]) columns[ctx.survivors[s].type].push_back(s);
  }
  return assign_each_type();
}

}  // namespace oobleck::replan_internal
