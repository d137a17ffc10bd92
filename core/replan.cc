// Replan: candidates (the exact optimum for the new cluster, the same with the untouched
// pipelines kept, Oobleck's fallback rule), each bound to concrete nodes so that the bytes
// to copy are minimal (an assignment problem per node type), then the one that moves the
// fewest bytes among those within the tolerance of the fastest and never slower than the
// fallback rule.
#include "core/replan.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <limits>
#include <map>
#include <memory>
#include <set>
#include <tuple>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "core/assignment/hungarian.h"
#include "core/assignment/transportation.h"
#include "core/fnv1a.h"

namespace oobleck {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

struct LayerRange {
  int begin = 0;
  int end = 0;  // exclusive; empty when end <= begin
  bool empty() const { return end <= begin; }
};

// The layers a template position (one node) runs: its stages are consecutive.
LayerRange LayersOfPosition(const PipelineTemplate& tmpl, int position) {
  LayerRange r{INT_MAX, INT_MIN};
  for (const Stage& s : tmpl.stages) {
    if (s.node_index != position) continue;
    r.begin = std::min(r.begin, s.layer_begin);
    r.end = std::max(r.end, s.layer_end);
  }
  return r.empty() ? LayerRange{} : r;
}

bool SameShape(const PipelineTemplate& a, const PipelineTemplate& b) {
  if (a.mix != b.mix || a.node_order != b.node_order || a.stages.size() != b.stages.size()) {
    return false;
  }
  for (size_t s = 0; s < a.stages.size(); ++s) {
    const Stage& x = a.stages[s];
    const Stage& y = b.stages[s];
    if (x.layer_begin != y.layer_begin || x.layer_end != y.layer_end ||
        x.node_index != y.node_index || x.node_type != y.node_type || x.gpus != y.gpus) {
      return false;
    }
  }
  return true;
}

uint64_t ShapeHash(const PipelineTemplate& t) {
  uint64_t h = Fnv1a64(t.mix.data(), t.mix.size() * sizeof(int));
  h = Fnv1a64(t.node_order.data(), t.node_order.size() * sizeof(int), h);
  for (const Stage& s : t.stages) {
    for (int x : {s.layer_begin, s.layer_end, s.node_index, s.node_type, s.gpus}) {
      h = Fnv1a64(&x, sizeof(x), h);
    }
  }
  return h;
}

// A pipeline of a candidate before it is bound to concrete nodes.
struct DraftPipeline {
  const PipelineTemplate* tmpl = nullptr;
  // bound: survivor index per template position. Otherwise the node set the pipeline must
  // use (any order), or empty: take nodes from the pool of unused survivors.
  std::vector<int> nodes;
  bool bound = false;
  int microbatches = 0;
};

struct Draft {
  ReplanStrategy strategy = ReplanStrategy::kOptimal;
  std::vector<DraftPipeline> pipelines;
};

// A LayerCopy between survivor indices.
struct IndexedCopy {
  int dest = 0;
  int source = 0;
  int layer_begin = 0;
  int layer_end = 0;
  double param_bytes = 0;
};

// A draft bound to survivors, with the figures Replan chooses by; Materialize turns the
// chosen one into a ClusterPlan.
struct Candidate {
  ReplanStrategy strategy = ReplanStrategy::kOptimal;
  Draft draft;                 // every pipeline bound: nodes[j] runs position j
  std::vector<double> time_ms;  // per pipeline: T_i(M_i)
  double pipeline_time_ms = 0;
  double allreduce_ms = 0;
  double iteration_time_ms = 0;
  std::vector<IndexedCopy> copies;
  double bytes = 0;
  int kept = 0;
  double transfer_s = 0;  // PriceDowntime
  double downtime_s = 0;

  int fault_tolerance() const { return std::max(0, static_cast<int>(draft.pipelines.size()) - 1); }
};

// The cluster after the event and what every surviving node holds.
struct ReplanContext {
  const CostModel* model = nullptr;
  ClusterPlan old;  // evaluated on the old cluster
  std::vector<ClusterNode> survivors;
  std::vector<LayerRange> held;                   // per survivor: layers it holds now
  std::vector<bool> joined;                       // per survivor
  std::vector<std::vector<int>> old_positions;    // per old pipeline: survivor index or -1
  std::vector<bool> intact;                       // per old pipeline: every node survived
  std::vector<std::vector<double>> param_prefix;  // per node type
  std::vector<double> allreduce_ms;               // P = 0..survivors
  PipelineSizeLimits limits;                      // resolved for the survivors
  NodeAssignmentMethod assignment = NodeAssignmentMethod::kClasses;
  std::vector<std::string> ignored_failed, ignored_joined;
  bool changed = false;  // the event removes or adds some node

  double ParamBytes(int type, LayerRange r) const {
    return r.empty() ? 0 : param_prefix[type][r.end] - param_prefix[type][r.begin];
  }
  // Bytes node s must receive to run `need`.
  double MissingBytes(int s, LayerRange need) const {
    const int type = survivors[s].type;
    const LayerRange h = held[s];
    const LayerRange overlap{std::max(need.begin, h.begin), std::min(need.end, h.end)};
    return ParamBytes(type, need) - (h.empty() ? 0 : ParamBytes(type, overlap));
  }
};

std::string RangesText(const std::vector<LayerRange>& ranges) {
  std::vector<std::string> parts;
  for (const LayerRange& r : ranges) parts.push_back(absl::StrFormat("[%d, %d)", r.begin, r.end));
  return absl::StrJoin(parts, ", ");
}

absl::StatusOr<ReplanContext> Prepare(const CostModel& model, const std::vector<ClusterNode>& nodes,
                                      ClusterPlan current, const ClusterEvent& event,
                                      const ReplanOptions& options) {
  if (options.tolerance.has_value() && !(*options.tolerance >= 0 && *options.tolerance <= 1)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("tolerance must be in [0, 1] (got %g)", *options.tolerance));
  }
  for (const auto& [field, value] : {std::pair{"horizon_iterations", options.horizon_iterations},
                                     std::pair{"restart_overhead_s", options.restart_overhead_s}}) {
    if (!(std::isfinite(value) && value >= 0)) {
      return absl::InvalidArgumentError(
          absl::StrFormat("%s must be a finite number >= 0 (got %g)", field, value));
    }
  }
  if (absl::Status s = ValidateFaultTolerance(options.fault_tolerance); !s.ok()) return s;
  ReplanContext ctx;
  ctx.model = &model;
  ctx.assignment = options.assignment;
  // The nodes first, so that every EvaluatePlan error below is about the plan.
  if (absl::Status valid = ValidateNodes(model, nodes); !valid.ok()) return valid;
  // Entry P is the same whatever the length: one table for the old plan and the new one.
  std::vector<double> allreduce_ms = CrossPipelineAllreduceMs(
      model, static_cast<int>(std::min(nodes.size() + event.joined_nodes.size(),
                                       static_cast<size_t>(kMaxClusterNodes))));
  const NodeIndex node_at = IndexNodes(nodes);
  absl::StatusOr<ClusterPlan> old =
      EvaluatePlanOnValidNodes(model, nodes, node_at, std::move(current), allreduce_ms);
  if (!old.ok()) {
    return absl::Status(old.status().code(), absl::StrCat("plan.", old.status().message()));
  }
  ctx.old = *std::move(old);

  std::vector<char> failed(nodes.size(), 0);
  std::vector<std::string> failed_ids;
  for (size_t i = 0; i < event.failed_node_ids.size(); ++i) {
    const std::string& id = event.failed_node_ids[i];
    const std::string field = absl::StrCat("failed_node_ids[", i, "]");
    if (id.empty()) return absl::InvalidArgumentError(absl::StrCat(field, " is empty"));
    auto it = node_at.find(id);
    if (it == node_at.end()) {
      ctx.ignored_failed.push_back(id);  // already removed by an earlier replan
      continue;
    }
    if (failed[it->second]) {
      return absl::InvalidArgumentError(absl::StrCat(field, " \"", id, "\" is listed twice"));
    }
    failed[it->second] = 1;
    failed_ids.push_back(id);
  }
  std::vector<ClusterNode> joined;
  absl::flat_hash_set<std::string_view> joined_ids;
  for (size_t i = 0; i < event.joined_nodes.size(); ++i) {
    const ClusterNode& node = event.joined_nodes[i];
    const std::string field = absl::StrCat("joined_nodes[", i, "]");
    if (node.id.empty()) return absl::InvalidArgumentError(absl::StrCat(field, ".id is empty"));
    if (node.type < 0 || node.type >= model.num_types()) {
      return absl::InvalidArgumentError(
          absl::StrCat(field, " (\"", node.id, "\") has no valid node type"));
    }
    if (!joined_ids.insert(node.id).second) {
      return absl::InvalidArgumentError(
          absl::StrCat(field, ".id \"", node.id, "\" is listed twice"));
    }
    auto it = node_at.find(node.id);
    if (it != node_at.end() && failed[it->second]) {
      return absl::InvalidArgumentError(
          absl::StrCat(field, ".id \"", node.id, "\" is also in failed_node_ids"));
    }
    if (it != node_at.end()) {
      const int type = nodes[it->second].type;
      if (type != node.type) {
        return absl::InvalidArgumentError(absl::StrCat(field, " \"", node.id, "\" is a ",
                                                       model.node_type(node.type).name,
                                                       " node but the cluster already has it as a ",
                                                       model.node_type(type).name, " node"));
      }
      ctx.ignored_joined.push_back(node.id);  // already joined by an earlier replan
      continue;
    }
    joined.push_back(node);
  }
  ctx.changed = !failed_ids.empty() || !joined.empty();

  // Per node of the old cluster: the layers it holds and its survivor index (-1: failed).
  std::vector<LayerRange> held_by(nodes.size());
  for (const PlannedPipeline& p : ctx.old.pipelines) {
    for (size_t j = 0; j < p.node_ids.size(); ++j) {
      held_by[node_at.at(p.node_ids[j])] = LayersOfPosition(p.tmpl, static_cast<int>(j));
    }
  }
  std::vector<int> survivor_of(nodes.size(), -1);
  ctx.survivors.reserve(nodes.size() + joined.size());
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (failed[i]) continue;
    survivor_of[i] = static_cast<int>(ctx.survivors.size());
    ctx.survivors.push_back(nodes[i]);
    ctx.held.push_back(held_by[i]);
    ctx.joined.push_back(false);
  }
  for (const ClusterNode& node : joined) {
    ctx.survivors.push_back(node);
    ctx.held.push_back({});
    ctx.joined.push_back(true);
  }
  if (ctx.survivors.size() > static_cast<size_t>(kMaxClusterNodes)) {
    return absl::ResourceExhaustedError(absl::StrFormat(
        "joined_nodes would grow the cluster to %d nodes, more than the limit of %d nodes per plan",
        ctx.survivors.size(), kMaxClusterNodes));
  }
  for (const PlannedPipeline& p : ctx.old.pipelines) {
    std::vector<int> positions;
    bool intact = true;
    for (const std::string& id : p.node_ids) {
      positions.push_back(survivor_of[node_at.at(id)]);
      intact &= positions.back() >= 0;
    }
    ctx.old_positions.push_back(std::move(positions));
    ctx.intact.push_back(intact);
  }

  // Every layer needs a surviving replica: nothing else has its trained weights.
  const int L = model.num_layers();
  std::vector<LayerRange> lost;
  std::vector<int> replicas(L + 1, 0);  // a difference array of the held ranges
  for (const LayerRange& h : ctx.held) {
    if (h.empty()) continue;
    ++replicas[std::clamp(h.begin, 0, L)];
    --replicas[std::clamp(h.end, 0, L)];
  }
  for (int l = 0, running = 0; l < L; ++l) {
    running += replicas[l];
    if (running > 0) continue;
    if (!lost.empty() && lost.back().end == l) {
      lost.back().end = l + 1;
    } else {
      lost.push_back({l, l + 1});
    }
  }
  if (!lost.empty()) {
    std::sort(failed_ids.begin(), failed_ids.end());
    return absl::FailedPreconditionError(
        absl::StrCat("layers ", RangesText(lost),
                     " have no surviving replica (every node that held them "
                     "failed: ",
                     absl::StrJoin(failed_ids, ", "), "); restart the job from a checkpoint"));
  }
  if (ctx.survivors.empty()) {
    return absl::FailedPreconditionError("no node survives the event");
  }

  ctx.param_prefix.assign(model.num_types(), std::vector<double>(L + 1, 0));
  for (int t = 0; t < model.num_types(); ++t) {
    const ModelProfile& profile = *model.problem().profiles[t];
    for (int l = 0; l < L; ++l) {
      ctx.param_prefix[t][l + 1] = ctx.param_prefix[t][l] + profile.layers[l].param_bytes;
    }
  }
  const int N = static_cast<int>(ctx.survivors.size());
  absl::StatusOr<PipelineSizeLimits> limits = ResolveLimits(options.limits, N);
  if (!limits.ok()) return limits.status();
  ctx.limits = *limits;
  allreduce_ms.resize(std::max(N, 1) + 1);  // as CrossPipelineAllreduceMs(model, N)
  ctx.allreduce_ms = std::move(allreduce_ms);
  return ctx;
}

// Binds the draft's pipelines to survivors (minimum bytes to copy), then the copy plan.
// Per node type and layer, the survivors that hold the layer, the longest holds first (then
// by id), with running minima of ids: the copy plan picks its source among thousands of
// holders by a binary search instead of a scan (Finalize, one per layer range copied).
class LayerHolders {
 public:
  explicit LayerHolders(const ReplanContext& ctx)
      : ctx_(ctx), layers_(ctx.model->num_layers()) {
    const size_t lists = static_cast<size_t>(ctx.model->num_types()) * layers_;
    lists_.resize(lists);
    smallest_id_.resize(lists);
    sorted_.assign(lists, 0);
    for (int s = 0; s < static_cast<int>(ctx.survivors.size()); ++s) {
      const LayerRange h = ctx.held[s];
      for (int l = std::max(h.begin, 0); l < h.end; ++l) {
        lists_[static_cast<size_t>(ctx.survivors[s].type) * layers_ + l].push_back(s);
      }
    }
  }
  // Among the holders of layer l of `type`: the longest run within [l, end), then the
  // smallest id; -1 if none.
  int Best(int type, int l, int end) {
    const size_t i = static_cast<size_t>(type) * layers_ + l;
    if (!sorted_[i]) Sort(i);
    const std::vector<int>& list = lists_[i];
    if (list.empty()) return -1;
    // Every holder reaching `end` runs to it: the smallest id among those wins.
    const auto reaching = std::partition_point(
        list.begin(), list.end(), [&](int s) { return ctx_.held[s].end >= end; });
    if (reaching != list.begin()) return smallest_id_[i][reaching - list.begin() - 1];
    return list.front();
  }

 private:
  // A list is sorted (longest hold first, then id) when first asked for: a replan after one
  // failure copies a few ranges and asks for a few of the types x layers lists.
  void Sort(size_t i) {
    std::vector<int>& list = lists_[i];
    std::sort(list.begin(), list.end(), [&](int a, int b) {
      return ctx_.held[a].end != ctx_.held[b].end ? ctx_.held[a].end > ctx_.held[b].end
                                                  : ctx_.survivors[a].id < ctx_.survivors[b].id;
    });
    for (size_t k = 0; k < list.size(); ++k) {
      const bool smaller =
          k == 0 || ctx_.survivors[list[k]].id < ctx_.survivors[smallest_id_[i].back()].id;
      smallest_id_[i].push_back(smaller ? list[k] : smallest_id_[i].back());
    }
    sorted_[i] = 1;
  }
  const ReplanContext& ctx_;
  int layers_;
  std::vector<std::vector<int>> lists_;        // [type * layers + l]
  std::vector<std::vector<int>> smallest_id_;  // parallel to lists_
  std::vector<char> sorted_;                   // parallel to lists_
};

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
  std::vector<LayerRange> needs;
  needs.reserve(positions.size());
  for (const auto& [k, j] : positions) needs.push_back(LayersOfPosition(*draft.pipelines[k].tmpl, j));
  if (method == NodeAssignmentMethod::kHungarian) {
    CostMatrix cost(positions.size(), std::vector<double>(columns.size()));
    for (size_t r = 0; r < positions.size(); ++r) {
      for (size_t c = 0; c < columns.size(); ++c) cost[r][c] = ctx.MissingBytes(columns[c], needs[r]);
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
  for (const std::vector<int>& m : members) problem.column_counts.push_back(static_cast<int>(m.size()));
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

absl::StatusOr<Candidate> Finalize(const ReplanContext& ctx, LayerHolders& layer_holders,
                                   Draft draft) {
  const CostModel& model = *ctx.model;
  const int T = model.num_types();
  const int N = static_cast<int>(ctx.survivors.size());
  // Rows: positions of one type; columns: candidate nodes of that type.
  auto assign = [&](const std::vector<std::pair<int, int>>& positions,  // (pipeline, position)
                    const std::vector<int>& columns) -> absl::Status {
    if (positions.size() > columns.size()) {
      return absl::InternalError("replan: a pipeline has more positions than nodes to bind");
    }
    const std::vector<int> column_of = AssignPositions(ctx, draft, positions, columns, ctx.assignment);
    for (size_t r = 0; r < positions.size(); ++r) {
      const auto [k, j] = positions[r];
      draft.pipelines[k].nodes[j] = columns[column_of[r]];
    }
    return absl::OkStatus();
  };
  // Pipelines with a node set: within the set, type by type.
  for (size_t k = 0; k < draft.pipelines.size(); ++k) {
    DraftPipeline& p = draft.pipelines[k];
    if (p.bound || p.nodes.empty()) continue;
    const std::vector<int> set = p.nodes;
    p.nodes.assign(p.tmpl->num_nodes(), -1);
    for (int t = 0; t < T; ++t) {
      std::vector<std::pair<int, int>> positions;
      for (int j = 0; j < p.tmpl->num_nodes(); ++j) {
        if (p.tmpl->node_order[j] == t) positions.push_back({static_cast<int>(k), j});
      }
      std::vector<int> columns;
      for (int s : set) {
        if (ctx.survivors[s].type == t) columns.push_back(s);
      }
      if (positions.empty()) continue;
      if (absl::Status s = assign(positions, columns); !s.ok()) return s;
    }
    p.bound = true;
  }
  // Pipelines from the pool of survivors nobody uses yet.
  std::vector<bool> used(N, false);
  for (const DraftPipeline& p : draft.pipelines) {
    if (!p.bound) continue;
    for (int s : p.nodes) used[s] = true;
  }
  for (int t = 0; t < T; ++t) {
    std::vector<std::pair<int, int>> positions;
    for (size_t k = 0; k < draft.pipelines.size(); ++k) {
      DraftPipeline& p = draft.pipelines[k];
      if (p.bound) continue;
      if (p.nodes.empty()) p.nodes.assign(p.tmpl->num_nodes(), -1);
      for (int j = 0; j < p.tmpl->num_nodes(); ++j) {
        if (p.tmpl->node_order[j] == t) positions.push_back({static_cast<int>(k), j});
      }
    }
    std::vector<int> columns;
    for (int s = 0; s < N; ++s) {
      if (!used[s] && ctx.survivors[s].type == t) columns.push_back(s);
    }
    if (positions.empty()) continue;
    if (absl::Status s = assign(positions, columns); !s.ok()) return s;
  }

  Candidate out;
  out.strategy = draft.strategy;
  // The old pipeline each survivor started, to find kept pipelines without comparing every
  // pair of pipelines (thousands of each at fleet scale).
  std::vector<int> old_starting_at(N, -1);
  for (size_t i = 0; i < ctx.old_positions.size(); ++i) {
    const std::vector<int>& positions = ctx.old_positions[i];
    if (!positions.empty() && positions[0] >= 0) old_starting_at[positions[0]] = static_cast<int>(i);
  }
  std::vector<int> new_pipeline(N, -1);
  for (size_t k = 0; k < draft.pipelines.size(); ++k) {
    const DraftPipeline& d = draft.pipelines[k];
    for (int s : d.nodes) new_pipeline[s] = static_cast<int>(k);
    out.time_ms.push_back(model.PipelineTimeMs(StageCosts(*d.tmpl), d.microbatches));
    out.pipeline_time_ms = std::max(out.pipeline_time_ms, out.time_ms.back());
    if (const int i = d.nodes.empty() ? -1 : old_starting_at[d.nodes[0]]; i >= 0) {
      if (ctx.old_positions[i] == d.nodes && SameShape(ctx.old.pipelines[i].tmpl, *d.tmpl)) {
        ++out.kept;
      }
    }
  }
  out.allreduce_ms = ctx.allreduce_ms[draft.pipelines.size()];
  out.iteration_time_ms = out.pipeline_time_ms + out.allreduce_ms;

  // Copy plan: for each node, the layers it needs and does not hold, from surviving
  // holders: same node type first, then the same new pipeline, then the longest run, then id.
  auto copy_range = [&](int dest, LayerRange range) {
    const int dest_type = ctx.survivors[dest].type;
    const std::vector<int>& pipeline = draft.pipelines[new_pipeline[dest]].nodes;
    int l = range.begin;
    // The better of two sources of layer l by (-run, id); -1 is no source.
    auto better = [&](int a, int b) {
      if (a < 0 || b < 0) return a < 0 ? b : a;
      const int run_a = std::min(range.end, ctx.held[a].end), run_b = std::min(range.end, ctx.held[b].end);
      if (run_a != run_b) return run_a > run_b ? a : b;
      return ctx.survivors[a].id < ctx.survivors[b].id ? a : b;
    };
    // The best node of dest's new pipeline holding l, of its type or of another one.
    auto in_pipeline = [&](bool same_type) {
      int best = -1;
      for (int s : pipeline) {
        const LayerRange h = ctx.held[s];
        if (s == dest || (ctx.survivors[s].type == dest_type) != same_type || l < h.begin ||
            l >= h.end) {
          continue;
        }
        best = better(best, s);
      }
      return best;
    };
    while (l < range.end) {
      int best = in_pipeline(true);
      if (best < 0) best = layer_holders.Best(dest_type, l, range.end);
      if (best < 0) best = in_pipeline(false);
      // (No node of dest's pipeline holds l: every other holder is in another pipeline.)
      for (int t = 0; t < T && best < 0; ++t) {
        if (t != dest_type) best = better(best, layer_holders.Best(t, l, range.end));
      }
      if (best < 0) return;  // unreachable: Prepare checked every layer has a holder
      const int end = std::min(range.end, ctx.held[best].end);
      const double bytes = ctx.ParamBytes(dest_type, {l, end});
      out.copies.push_back({dest, best, l, end, bytes});
      out.bytes += bytes;
      l = end;
    }
  };
  for (const DraftPipeline& d : draft.pipelines) {
    for (int j = 0; j < d.tmpl->num_nodes(); ++j) {
      const int s = d.nodes[j];
      const LayerRange need = LayersOfPosition(*d.tmpl, j);
      const LayerRange h = ctx.held[s];
      if (h.empty() || h.end <= need.begin || h.begin >= need.end) {
        copy_range(s, need);
        continue;
      }
      if (need.begin < h.begin) copy_range(s, {need.begin, h.begin});
      if (h.end < need.end) copy_range(s, {h.end, need.end});
    }
  }
  out.draft = std::move(draft);
  return out;
}

// The candidate as a plan of node ids and a copy plan (only the chosen one is built: at
// fleet scale each is thousands of ids and templates).
void Materialize(const ReplanContext& ctx, const Candidate& c,
                 const std::vector<std::string>& type_reasons, ClusterPlan* plan,
                 std::vector<LayerCopy>* copies) {
  const int N = static_cast<int>(ctx.survivors.size());
  plan->global_batch = ctx.old.global_batch;
  std::vector<char> in_pipeline(N, 0);
  for (size_t k = 0; k < c.draft.pipelines.size(); ++k) {
    const DraftPipeline& d = c.draft.pipelines[k];
    PlannedPipeline p;
    p.tmpl = *d.tmpl;
    p.node_ids.reserve(d.nodes.size());
    for (int s : d.nodes) {
      p.node_ids.push_back(ctx.survivors[s].id);
      in_pipeline[s] = 1;
    }
    p.microbatches = d.microbatches;
    p.time_ms = c.time_ms[k];
    plan->pipelines.push_back(std::move(p));
  }
  plan->pipeline_time_ms = c.pipeline_time_ms;
  plan->allreduce_ms = c.allreduce_ms;
  plan->iteration_time_ms = c.iteration_time_ms;
  for (int s = 0; s < N; ++s) {
    if (in_pipeline[s]) continue;
    const int t = ctx.survivors[s].type;
    std::string reason =
        !type_reasons[t].empty() ? type_reasons[t]
        : c.strategy == ReplanStrategy::kOobleckFallback && ctx.joined[s]
            ? "Oobleck's fallback rule does not use joined nodes"
        : c.strategy == ReplanStrategy::kDropBroken
            ? "not used: its pipeline lost a node and was dropped (nothing is copied)"
            : "not used: every plan that uses it is slower (its pipelines would be slower or "
              "add all-reduce time)";
    plan->idle.push_back({ctx.survivors[s].id, t, std::move(reason)});
  }
  copies->reserve(c.copies.size());
  for (const IndexedCopy& x : c.copies) {
    copies->push_back({ctx.survivors[x.dest].id, ctx.survivors[x.source].id, x.layer_begin,
                       x.layer_end, x.param_bytes});
  }
}


// The old pipelines that lost no node, in classes of SameShape, each in index order: a new
// pipeline takes the first free one of its shape (what a scan of every old pipeline would
// pick) without comparing every pair (thousands of each at fleet scale).
class IntactByShape {
 public:
  explicit IntactByShape(const ReplanContext& ctx) : ctx_(ctx) {
    for (size_t i = 0; i < ctx.old.pipelines.size(); ++i) {
      if (!ctx.intact[i]) continue;
      const int c = ClassOf(ctx.old.pipelines[i].tmpl, /*add=*/true);
      members_[c].push_back(static_cast<int>(i));
    }
    next_.assign(members_.size(), 0);
  }
  // The first old pipeline of tmpl's shape not yet taken, or -1.
  int Take(const PipelineTemplate& tmpl) {
    const int c = ClassOf(tmpl, /*add=*/false);
    if (c < 0 || next_[c] == members_[c].size()) return -1;
    return members_[c][next_[c]++];
  }

 private:
  int ClassOf(const PipelineTemplate& tmpl, bool add) {
    std::vector<int>& classes = by_hash_[ShapeHash(tmpl)];
    for (int c : classes) {
      if (SameShape(ctx_.old.pipelines[members_[c][0]].tmpl, tmpl)) return c;
    }
    if (!add) return -1;
    classes.push_back(static_cast<int>(members_.size()));
    members_.emplace_back();
    return classes.back();
  }
  const ReplanContext& ctx_;
  absl::flat_hash_map<uint64_t, std::vector<int>> by_hash_;  // hash -> classes
  std::vector<std::vector<int>> members_;                     // per class: old pipelines
  std::vector<size_t> next_;                                  // per class: first not taken
};

// Oobleck's rule (replan.h). `keepalive` holds the templates the drafts point into.
absl::StatusOr<Draft> FallbackDraft(const ReplanContext& ctx, const TemplateSet* set,
                                    TemplatePlanner& templates, const SearchOptions& search,
                                    std::vector<std::shared_ptr<const MixResult>>* keepalive) {
  const CostModel& model = *ctx.model;
  const int T = model.num_types();
  struct Group {
    NodeMix mix;
    std::vector<int> nodes;  // survivors; position order while unchanged
    bool changed = false;
    bool alive = true;
    const PipelineTemplate* tmpl = nullptr;
  };
  std::vector<Group> groups;
  for (size_t i = 0; i < ctx.old.pipelines.size(); ++i) {
    Group g;
    g.mix.assign(T, 0);
    for (int s : ctx.old_positions[i]) {
      if (s < 0) {
        g.changed = true;
        continue;
      }
      g.nodes.push_back(s);
      ++g.mix[ctx.survivors[s].type];
    }
    g.tmpl = &ctx.old.pipelines[i].tmpl;
    if (!g.nodes.empty()) groups.push_back(std::move(g));
  }
  // The template of a mix if the rule may use it: at least min_nodes, a feasible template
  // that holds a micro-batch.
  auto usable = [&](const NodeMix& mix) -> absl::StatusOr<const PipelineTemplate*> {
    if (MixSize(mix) < ctx.limits.min_nodes) return nullptr;
    const MixResult* r = set != nullptr ? set->Find(mix) : nullptr;
    if (r == nullptr) {  // e.g. a merged pipeline above max_nodes
      absl::StatusOr<std::vector<PlannedMix>> planned =
          templates.PlanTemplates(model, {mix}, search);
      if (!planned.ok()) return planned.status();
      keepalive->push_back((*planned)[0].result);
      r = keepalive->back().get();
    }
    if (!r->feasible || model.MaxMicrobatches(r->best) < 1) return nullptr;
    return &r->best;
  };
  for (size_t gi = 0; gi < groups.size(); ++gi) {
    Group& g = groups[gi];
    if (!g.alive || !g.changed) continue;
    absl::StatusOr<const PipelineTemplate*> own = usable(g.mix);
    if (!own.ok()) return own.status();
    if (*own != nullptr) {
      g.tmpl = *own;
      continue;
    }
    // Borrow one node from the largest pipeline that can spare one.
    std::vector<size_t> donors;
    for (size_t d = 0; d < groups.size(); ++d) {
      if (d != gi && groups[d].alive && MixSize(groups[d].mix) > 1) donors.push_back(d);
    }
    std::stable_sort(donors.begin(), donors.end(), [&](size_t a, size_t b) {
      return MixSize(groups[a].mix) > MixSize(groups[b].mix);
    });
    bool fixed = false;
    for (size_t d : donors) {
      for (int t = 0; t < T && !fixed; ++t) {
        if (groups[d].mix[t] == 0) continue;
        NodeMix donor_mix = groups[d].mix, receiver_mix = g.mix;
        --donor_mix[t];
        ++receiver_mix[t];
        absl::StatusOr<const PipelineTemplate*> donor_tmpl = usable(donor_mix);
        if (!donor_tmpl.ok()) return donor_tmpl.status();
        if (*donor_tmpl == nullptr) continue;
        absl::StatusOr<const PipelineTemplate*> receiver_tmpl = usable(receiver_mix);
        if (!receiver_tmpl.ok()) return receiver_tmpl.status();
        if (*receiver_tmpl == nullptr) continue;
        // The donor's last node of that type moves.
        std::vector<int>& dn = groups[d].nodes;
        for (size_t x = dn.size(); x-- > 0;) {
          if (ctx.survivors[dn[x]].type != t) continue;
          g.nodes.push_back(dn[x]);
          dn.erase(dn.begin() + x);
          break;
        }
        groups[d].mix = donor_mix;
        groups[d].tmpl = *donor_tmpl;
        groups[d].changed = true;
        g.mix = receiver_mix;
        g.tmpl = *receiver_tmpl;
        fixed = true;
      }
      if (fixed) break;
    }
    if (fixed) continue;
    // Merge with the smallest other pipeline whose union has a template.
    std::vector<size_t> others;
    for (size_t o = 0; o < groups.size(); ++o) {
      if (o != gi && groups[o].alive) others.push_back(o);
    }
    std::stable_sort(others.begin(), others.end(), [&](size_t a, size_t b) {
      return MixSize(groups[a].mix) < MixSize(groups[b].mix);
    });
    for (size_t o : others) {
      NodeMix merged = g.mix;
      for (int t = 0; t < T; ++t) merged[t] += groups[o].mix[t];
      absl::StatusOr<const PipelineTemplate*> merged_tmpl = usable(merged);
      if (!merged_tmpl.ok()) return merged_tmpl.status();
      if (*merged_tmpl == nullptr) continue;
      g.nodes.insert(g.nodes.end(), groups[o].nodes.begin(), groups[o].nodes.end());
      g.mix = merged;
      g.tmpl = *merged_tmpl;
      groups[o].alive = false;
      fixed = true;
      break;
    }
    if (!fixed) {
      return absl::FailedPreconditionError(absl::StrCat(
          "Oobleck's fallback rule is stuck: a pipeline left with ",
          MixLabel(g.mix, model.problem().node_types),
          " has no template, and borrowing a node or merging with another pipeline gives none"));
    }
  }
  Draft draft;
  draft.strategy = ReplanStrategy::kOobleckFallback;
  std::vector<PipelineLoad> loads;
  std::vector<std::vector<double>> costs;
  for (const Group& g : groups) {
    if (!g.alive) continue;
    DraftPipeline p;
    p.tmpl = g.tmpl;
    p.nodes = g.nodes;
    p.bound = !g.changed;
    draft.pipelines.push_back(std::move(p));
    costs.push_back(StageCosts(*g.tmpl));
  }
  for (size_t k = 0; k < draft.pipelines.size(); ++k) {
    loads.push_back({&costs[k], model.MaxMicrobatches(*draft.pipelines[k].tmpl)});
  }
  absl::StatusOr<std::vector<int>> split = SplitBatch(model, loads, ctx.old.global_batch);
  if (!split.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat("Oobleck's fallback rule: ", split.status().message()));
  }
  for (size_t k = 0; k < draft.pipelines.size(); ++k) draft.pipelines[k].microbatches = (*split)[k];
  return draft;
}

// Downtime of applying the candidate (docs/COST_MODEL.md#reconfiguration-downtime).
void PriceDowntime(const ReplanContext& ctx, const ReplanOptions& options, Candidate* c) {
  // CopyTransferSeconds over survivor indices (ids are unique, so the sums are the same).
  std::vector<double> sent(ctx.survivors.size(), 0), received(ctx.survivors.size(), 0);
  double busiest = 0;
  for (const IndexedCopy& x : c->copies) {
    busiest = std::max(busiest, sent[x.source] += x.param_bytes);
    busiest = std::max(busiest, received[x.dest] += x.param_bytes);
  }
  c->transfer_s = busiest > 0 ? busiest / ctx.model->problem().inter_node_bytes_per_s : 0;
  const size_t old_count = ctx.old.pipelines.size();
  const bool same_pipelines =
      static_cast<size_t>(c->kept) == old_count && c->draft.pipelines.size() == old_count;
  c->downtime_s = c->transfer_s + (same_pipelines ? 0 : options.restart_overhead_s);
}

// The candidates no other beats on both iteration time and downtime, fastest first; of
// equal ones the first.
std::vector<ReplanAlternative> ParetoFront(const std::vector<Candidate*>& candidates) {
  std::vector<const Candidate*> order(candidates.begin(), candidates.end());
  std::stable_sort(order.begin(), order.end(), [](const Candidate* a, const Candidate* b) {
    return std::make_pair(a->iteration_time_ms, a->downtime_s) <
           std::make_pair(b->iteration_time_ms, b->downtime_s);
  });
  std::vector<ReplanAlternative> front;
  double best_downtime = kInf;
  for (const Candidate* c : order) {
    if (!(c->downtime_s < best_downtime)) continue;  // a faster one is down no longer
    best_downtime = c->downtime_s;
    front.push_back({c->strategy, c->iteration_time_ms, c->downtime_s, c->bytes, c->kept,
                     c->fault_tolerance()});
  }
  return front;
}

std::vector<std::string> TypeReasons(const CostModel& model,
                                     const std::vector<PipelineShape>& shapes,
                                     const ReplanContext& ctx) {
  std::vector<std::string> reasons(model.num_types());
  for (int t = 0; t < model.num_types(); ++t) {
    bool used = false;
    for (const PipelineShape& s : shapes) used |= s.mix[t] > 0;
    if (!used) {
      reasons[t] =
          absl::StrFormat("no feasible pipeline template of %d..%d nodes includes a %s node",
                          ctx.limits.min_nodes, ctx.limits.max_nodes, model.node_type(t).name);
    }
  }
  return reasons;
}

}  // namespace

std::string_view ReplanStrategyName(ReplanStrategy strategy) {
  switch (strategy) {
    case ReplanStrategy::kUnchanged:
      return "unchanged";
    case ReplanStrategy::kOptimal:
      return "optimal";
    case ReplanStrategy::kKeepPipelines:
      return "keep-pipelines";
    case ReplanStrategy::kDropBroken:
      return "drop-broken";
    case ReplanStrategy::kOobleckFallback:
      return "oobleck-fallback";
  }
  return "unknown";
}

std::optional<ReplanStrategy> ParseReplanStrategy(std::string_view name) {
  for (ReplanStrategy s : {ReplanStrategy::kOptimal, ReplanStrategy::kKeepPipelines,
                           ReplanStrategy::kDropBroken, ReplanStrategy::kOobleckFallback}) {
    if (ReplanStrategyName(s) == name) return s;
  }
  return std::nullopt;
}

double CopyTransferSeconds(const std::vector<LayerCopy>& copies, double link_bytes_per_s) {
  // Each node's link carries what it sends and, independently, what it receives (full
  // duplex); every copy running at bytes / D for D = the busiest direction's bytes / link
  // keeps every link within its bandwidth and ends all copies at D, and no schedule ends
  // before the busiest link has carried its bytes.
  std::map<std::string, double> sent, received;
  double busiest = 0;
  for (const LayerCopy& c : copies) {
    busiest = std::max(busiest, sent[c.source_node_id] += c.param_bytes);
    busiest = std::max(busiest, received[c.dest_node_id] += c.param_bytes);
  }
  return busiest > 0 ? busiest / link_bytes_per_s : 0;
}

absl::StatusOr<ReplanResult> Replan(const ClusterPlanner& planner, const CostModel& model,
                                    const std::vector<ClusterNode>& nodes, ClusterPlan current,
                                    const ClusterEvent& event, const ReplanOptions& options) {
  absl::StatusOr<ReplanContext> prepared =
      Prepare(model, nodes, std::move(current), event, options);
  if (!prepared.ok()) return prepared.status();
  ReplanContext& ctx = *prepared;  // ctx.old moves into the result at the end
  ReplanResult result;
  result.nodes = ctx.survivors;
  result.ignored_failed_node_ids = ctx.ignored_failed;
  result.ignored_joined_node_ids = ctx.ignored_joined;
  if (!ctx.changed) {
    result.plan = ctx.old;
    result.strategy = ReplanStrategy::kUnchanged;
    result.pipelines_kept = static_cast<int>(ctx.old.pipelines.size());
    result.fastest_iteration_time_ms = ctx.old.iteration_time_ms;
    result.oobleck_fallback_ms = ctx.old.iteration_time_ms;
    result.alternatives.push_back({ReplanStrategy::kUnchanged, ctx.old.iteration_time_ms, 0, 0,
                                   result.pipelines_kept, ctx.old.fault_tolerance()});
    if (ctx.old.fault_tolerance() < options.fault_tolerance) {
      result.degraded_reason = absl::StrFormat(
          "the unchanged plan has %d pipeline(s): it tolerates %d failure(s), fewer than "
          "fault_tolerance = %d",
          ctx.old.pipelines.size(), ctx.old.fault_tolerance(), options.fault_tolerance);
    }
    result.old_plan = std::move(ctx.old);
    return result;
  }

  const int T = model.num_types();
  NodeMix counts(T, 0);
  for (const ClusterNode& node : ctx.survivors) ++counts[node.type];
  LayerHolders layer_holders(ctx);
  absl::StatusOr<TemplateSet> set =
      PlanTemplateSet(*planner.templates(), model, counts, ctx.limits, options.search);
  if (!set.ok()) return set.status();
  // Lent to each search's problem and taken back (no copy per search).
  std::vector<PipelineShape> shapes = FeasibleShapes(model, *set, ctx.limits);
  const std::vector<std::string> type_reasons = TypeReasons(model, shapes, ctx);

  // The f-failure guarantee: f + 1 pipelines when the survivors allow it, else the most
  // they allow (any plan of the survivors has at least one).
  int fault_tolerance = options.fault_tolerance;
  auto problem_for = [&](bool keep_intact) {
    PipelineSetProblem problem;
    problem.model = &model;
    problem.available = counts;
    if (keep_intact) {
      for (size_t i = 0; i < ctx.old.pipelines.size(); ++i) {
        if (!ctx.intact[i]) continue;
        const PipelineTemplate& tmpl = ctx.old.pipelines[i].tmpl;
        problem.fixed.push_back({tmpl.mix, &tmpl, StageCosts(tmpl), model.MaxMicrobatches(tmpl)});
        for (int t = 0; t < T; ++t) problem.available[t] -= tmpl.mix[t];
      }
    }
    problem.shapes = std::move(shapes);  // lent; taken back after each search
    problem.global_batch = ctx.old.global_batch;
    problem.allreduce_ms = &ctx.allreduce_ms;
    problem.search = options.search;
    problem.makespan_hint_ms = ctx.old.pipeline_time_ms;
    problem.min_pipelines = fault_tolerance + 1;
    problem.min_pipelines_reason = absl::StrCat("fault_tolerance = ", fault_tolerance);
    return problem;
  };
  if (fault_tolerance > 0) {
    PipelineSetProblem problem = problem_for(false);
    absl::StatusOr<int> most = MaxPipelineCount(problem, fault_tolerance + 1);
    shapes = std::move(problem.shapes);
    if (!most.ok()) return most.status();
    if (*most >= 1 && *most < fault_tolerance + 1) {
      fault_tolerance = *most - 1;
      result.degraded_reason = absl::StrFormat(
          "fault_tolerance = %d needs %d pipelines; the %d surviving node(s) fit at most %d, "
          "so the plan tolerates %d failure(s)",
          options.fault_tolerance, options.fault_tolerance + 1, ctx.survivors.size(), *most,
          fault_tolerance);
    }
  }

  std::vector<Candidate> candidates;
  absl::Status optimal_status;
  // 1. The fastest plan of the new cluster; old pipelines it rebuilds identically keep
  // their nodes.
  {
    PipelineSetProblem problem = problem_for(false);
    absl::StatusOr<PipelineSetSolution> solution = SolvePipelineSet(problem);
    shapes = std::move(problem.shapes);
    if (!solution.ok()) {
      if (solution.status().code() != absl::StatusCode::kFailedPrecondition)
        return solution.status();
      optimal_status = solution.status();
    } else {
      Draft draft;
      draft.strategy = ReplanStrategy::kOptimal;
      IntactByShape intact_by_shape(ctx);
      for (size_t k : ChosenOrder(shapes, *solution)) {
        DraftPipeline p;
        p.tmpl = shapes[solution->chosen[k]].tmpl;
        p.microbatches = solution->chosen_microbatches[k];
        if (const int i = intact_by_shape.Take(*p.tmpl); i >= 0) {
          p.nodes = ctx.old_positions[i];
          p.bound = true;
        }
        draft.pipelines.push_back(std::move(p));
      }
      absl::StatusOr<Candidate> c = Finalize(ctx, layer_holders, std::move(draft));
      if (!c.ok()) return c.status();
      candidates.push_back(*std::move(c));
    }
  }
  std::vector<size_t> intact;
  for (size_t i = 0; i < ctx.old.pipelines.size(); ++i) {
    if (ctx.intact[i]) intact.push_back(i);
  }
  auto intact_draft = [&](ReplanStrategy strategy, const std::vector<int>& microbatches) {
    Draft draft;
    draft.strategy = strategy;
    for (size_t f = 0; f < intact.size(); ++f) {
      DraftPipeline p;
      p.tmpl = &ctx.old.pipelines[intact[f]].tmpl;
      p.nodes = ctx.old_positions[intact[f]];
      p.bound = true;
      p.microbatches = microbatches[f];
      draft.pipelines.push_back(std::move(p));
    }
    return draft;
  };
  // 2. Untouched pipelines kept, the other nodes planned exactly around them.
  if (!intact.empty()) {
    PipelineSetProblem problem = problem_for(true);
    absl::StatusOr<PipelineSetSolution> solution = SolvePipelineSet(problem);
    shapes = std::move(problem.shapes);
    if (!solution.ok() && solution.status().code() != absl::StatusCode::kFailedPrecondition) {
      return solution.status();
    }
    if (solution.ok()) {
      Draft draft = intact_draft(ReplanStrategy::kKeepPipelines, solution->fixed_microbatches);
      for (size_t k : ChosenOrder(shapes, *solution)) {
        DraftPipeline p;
        p.tmpl = shapes[solution->chosen[k]].tmpl;
        p.microbatches = solution->chosen_microbatches[k];
        draft.pipelines.push_back(std::move(p));
      }
      absl::StatusOr<Candidate> c = Finalize(ctx, layer_holders, std::move(draft));
      if (!c.ok()) return c.status();
      candidates.push_back(*std::move(c));
    }
  }
  // 3. Only the untouched pipelines, the batch split over them: nothing to copy.
  if (!intact.empty()) {
    std::vector<std::vector<double>> costs;
    std::vector<PipelineLoad> loads;
    for (size_t i : intact) costs.push_back(StageCosts(ctx.old.pipelines[i].tmpl));
    for (size_t f = 0; f < intact.size(); ++f) {
      loads.push_back({&costs[f], model.MaxMicrobatches(ctx.old.pipelines[intact[f]].tmpl)});
    }
    absl::StatusOr<std::vector<int>> split = SplitBatch(model, loads, ctx.old.global_batch);
    if (split.ok()) {
      absl::StatusOr<Candidate> c =
          Finalize(ctx, layer_holders, intact_draft(ReplanStrategy::kDropBroken, *split));
      if (!c.ok()) return c.status();
      candidates.push_back(*std::move(c));
    }
  }
  // 4. Oobleck's fallback rule: a candidate, and the bar of the deprecated tolerance rule.
  std::vector<std::shared_ptr<const MixResult>> keepalive;
  absl::StatusOr<Draft> fallback =
      FallbackDraft(ctx, &*set, *planner.templates(), options.search, &keepalive);
  if (!fallback.ok() && fallback.status().code() != absl::StatusCode::kFailedPrecondition) {
    return fallback.status();
  }
  if (fallback.ok()) {
    absl::StatusOr<Candidate> c = Finalize(ctx, layer_holders, *std::move(fallback));
    if (!c.ok()) return c.status();
    candidates.push_back(*std::move(c));
    result.oobleck_fallback_ms = candidates.back().iteration_time_ms;
  } else {
    result.oobleck_fallback_failure = std::string(fallback.status().message());
  }

  // The plans Replan may answer with: the forced strategy's, else those that keep the
  // fault tolerance reached above.
  for (Candidate& c : candidates) PriceDowntime(ctx, options, &c);
  std::vector<Candidate*> eligible;
  for (Candidate& c : candidates) {
    const bool ok = options.force_strategy.has_value()
                        ? c.strategy == *options.force_strategy
                        : c.fault_tolerance() >= fault_tolerance;
    if (ok) eligible.push_back(&c);
  }
  if (eligible.empty()) {
    if (options.force_strategy.has_value()) {
      const std::string why = *options.force_strategy == ReplanStrategy::kOobleckFallback
                                  ? result.oobleck_fallback_failure
                              : *options.force_strategy == ReplanStrategy::kOptimal
                                  ? std::string(optimal_status.message())
                                  : "no pipeline survived intact, or those that did cannot "
                                    "run the batch";
      return absl::FailedPreconditionError(
          absl::StrCat("strategy \"", std::string(ReplanStrategyName(*options.force_strategy)),
                       "\" finds no plan for the ", ctx.survivors.size(),
                       " remaining node(s): ", why));
    }
    return absl::FailedPreconditionError(
        absl::StrCat("no plan exists for the ", ctx.survivors.size(),
                     " remaining node(s): ", optimal_status.message()));
  }
  double fastest = kInf;
  for (const Candidate* c : eligible) fastest = std::min(fastest, c->iteration_time_ms);
  Candidate* chosen = nullptr;
  if (options.tolerance.has_value()) {
    double threshold = fastest * (1 + *options.tolerance);
    for (const Candidate* c : eligible) {
      if (c->strategy == ReplanStrategy::kOobleckFallback) {
        threshold = std::min(threshold, c->iteration_time_ms);
      }
    }
    for (Candidate* c : eligible) {
      if (c->iteration_time_ms > threshold) continue;
      if (chosen == nullptr ||
          std::make_tuple(c->bytes, -c->kept, c->iteration_time_ms) <
              std::make_tuple(chosen->bytes, -chosen->kept, chosen->iteration_time_ms)) {
        chosen = c;
      }
    }
  } else {
    // downtime + horizon x iteration time; ties: fewer bytes, more pipelines kept, faster.
    auto key = [&](const Candidate* c) {
      return std::make_tuple(
          c->downtime_s + options.horizon_iterations * c->iteration_time_ms / 1e3, c->bytes,
          -c->kept, c->iteration_time_ms);
    };
    for (Candidate* c : eligible) {
      if (chosen == nullptr || key(c) < key(chosen)) chosen = c;
    }
  }
  result.alternatives = ParetoFront(eligible);
  if (result.degraded_reason.empty() && chosen->fault_tolerance() < options.fault_tolerance) {
    result.degraded_reason = absl::StrFormat(
        "strategy \"%s\" leaves %d pipeline(s): the plan tolerates %d failure(s), fewer than "
        "fault_tolerance = %d",
        std::string(ReplanStrategyName(chosen->strategy)), chosen->draft.pipelines.size(),
        chosen->fault_tolerance(), options.fault_tolerance);
  }
  Materialize(ctx, *chosen, type_reasons, &result.plan, &result.copies);
  result.copy_bytes = chosen->bytes;
  result.strategy = chosen->strategy;
  result.pipelines_kept = chosen->kept;
  result.transfer_s = chosen->transfer_s;
  result.downtime_s = chosen->downtime_s;
  result.fastest_iteration_time_ms = fastest;
  result.old_plan = std::move(ctx.old);  // the drafts that pointed into it are done
  return result;
}

absl::StatusOr<ClusterPlan> OobleckFallbackPlan(
    const ClusterPlanner& planner, const CostModel& model, const std::vector<ClusterNode>& nodes,
    const ClusterPlan& current, const ClusterEvent& event, const ReplanOptions& options) {
  absl::StatusOr<ReplanContext> ctx = Prepare(model, nodes, current, event, options);
  if (!ctx.ok()) return ctx.status();
  if (!ctx->changed) return ctx->old;
  std::vector<std::shared_ptr<const MixResult>> keepalive;
  absl::StatusOr<Draft> draft =
      FallbackDraft(*ctx, nullptr, *planner.templates(), options.search, &keepalive);
  if (!draft.ok()) return draft.status();
  LayerHolders layer_holders(*ctx);
  absl::StatusOr<Candidate> c = Finalize(*ctx, layer_holders, *std::move(draft));
  if (!c.ok()) return c.status();
  ClusterPlan plan;
  std::vector<LayerCopy> copies;
  Materialize(*ctx, *c, std::vector<std::string>(model.num_types()), &plan, &copies);
  return plan;
}

}  // namespace oobleck
