#include "core/replan/candidate.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "core/plan/cluster_plan.h"
#include "core/plan_search/batch_split.h"
#include "core/status_macros.h"

namespace oobleck::replan_internal {

namespace {

// Times, all-reduce and the pipelines kept as they were.
void AddFigures(const ReplanContext& ctx, const Draft& draft, Candidate* out) {
  const CostModel& model = *ctx.model;
  // The old pipeline each survivor started, to find kept pipelines without comparing every
  // pair of pipelines (thousands of each at fleet scale).
  std::vector<int> old_starting_at(ctx.survivors.size(), -1);
  for (size_t i = 0; i < ctx.old_positions.size(); ++i) {
    const std::vector<int>& positions = ctx.old_positions[i];
    if (!positions.empty() && positions[0] >= 0)
      old_starting_at[positions[0]] = static_cast<int>(i);
  }
  std::vector<double> costs;  // one buffer for every pipeline's StageCosts
  for (const DraftPipeline& d : draft.pipelines) {
    StageCosts(*d.tmpl, &costs);
    out->time_ms.push_back(model.PipelineTimeMs(costs, d.microbatches));
    out->pipeline_time_ms = std::max(out->pipeline_time_ms, out->time_ms.back());
    if (const int i = d.nodes.empty() ? -1 : old_starting_at[d.nodes[0]]; i >= 0) {
      if (ctx.old_positions[i] == d.nodes && SameShape(ctx.old.pipelines[i].tmpl, *d.tmpl)) {
        ++out->kept;
      }
    }
  }
  out->allreduce_ms = ctx.allreduce_ms[draft.pipelines.size()];
  out->iteration_time_ms = out->pipeline_time_ms + out->allreduce_ms;
}

// The copy plan of a bound draft (Finalize says the order of sources).
void AddCopies(const ReplanContext& ctx, LayerHolders& layer_holders, const Draft& draft,
               Candidate* candidate) {
  Candidate& out = *candidate;
  const int T = ctx.model->num_types();
  std::vector<int> new_pipeline(ctx.survivors.size(), -1);
  for (size_t k = 0; k < draft.pipelines.size(); ++k) {
    for (int s : draft.pipelines[k].nodes) new_pipeline[s] = static_cast<int>(k);
  }
  // Copy plan: for each node, the layers it needs and does not hold, from surviving
  // holders: same node type first, then the same new pipeline, then the longest run, then id.
  auto copy_range = [&](int dest, LayerRange range) {
    const int dest_type = ctx.survivors[dest].type;
    const std::vector<int>& pipeline = draft.pipelines[new_pipeline[dest]].nodes;
    int l = range.begin;
    // The better of two sources of layer l by (-run, id); -1 is no source.
    auto better = [&](int a, int b) {
      if (a < 0 || b < 0) return a < 0 ? b : a;
      const int run_a = std::min(range.end, ctx.held[a].end),
                run_b = std::min(range.end, ctx.held[b].end);
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
  std::vector<LayerRange> needs;
  for (const DraftPipeline& d : draft.pipelines) {
    LayersOfPositions(*d.tmpl, &needs);
    for (int j = 0; j < d.tmpl->num_nodes(); ++j) {
      const int s = d.nodes[j];
      const LayerRange need = needs[j];
      const LayerRange h = ctx.held[s];
      if (h.empty() || h.end <= need.begin || h.begin >= need.end) {
        copy_range(s, need);
        continue;
      }
      if (need.begin < h.begin) copy_range(s, {need.begin, h.begin});
      if (h.end < need.end) copy_range(s, {h.end, need.end});
    }
  }
}

}  // namespace

LayerHolders::LayerHolders(const ReplanContext& ctx) : ctx_(ctx), layers_(ctx.model->num_layers()) {
  const size_t lists = static_cast<size_t>(ctx.model->num_types()) * layers_;
  // Two passes over the holds (count, then fill): one array, not a vector per list.
  starts_.assign(lists + 1, 0);
  auto each_hold = [&](auto&& f) {
    for (int s = 0; s < static_cast<int>(ctx.survivors.size()); ++s) {
      const LayerRange h = ctx.held[s];
      const size_t base = static_cast<size_t>(ctx.survivors[s].type) * layers_;
      for (int l = std::max(h.begin, 0); l < h.end; ++l) f(base + l, s);
    }
  };
  each_hold([&](size_t i, int) { ++starts_[i + 1]; });
  for (size_t i = 0; i < lists; ++i) starts_[i + 1] += starts_[i];
  holders_.resize(starts_[lists]);
  std::vector<int> next(starts_.begin(), starts_.end() - 1);
  each_hold([&](size_t i, int s) { holders_[next[i]++] = s; });
  smallest_id_.resize(holders_.size());
  sorted_.assign(lists, 0);
}

void LayerHolders::Sort(size_t i) {
  const auto list = holders_.begin() + starts_[i], list_end = holders_.begin() + starts_[i + 1];
  std::sort(list, list_end, [&](int a, int b) {
    return ctx_.held[a].end != ctx_.held[b].end ? ctx_.held[a].end > ctx_.held[b].end : a < b;
  });
  for (int k = starts_[i]; k < starts_[i + 1]; ++k) {
    const bool smaller =
        k == starts_[i] || ctx_.survivors[holders_[k]].id < ctx_.survivors[smallest_id_[k - 1]].id;
    smallest_id_[k] = smaller ? holders_[k] : smallest_id_[k - 1];
  }
  sorted_[i] = 1;
}

absl::StatusOr<Candidate> Finalize(const ReplanContext& ctx, LayerHolders& layer_holders,
                                   Draft draft) {
  RETURN_IF_ERROR(BindDraft(ctx, &draft));
  Candidate out;
  out.strategy = draft.strategy;
  AddFigures(ctx, draft, &out);
  AddCopies(ctx, layer_holders, draft, &out);
  out.draft = std::move(draft);
  return out;
}

void Materialize(const ReplanContext& ctx, const Candidate& c,
                 const std::vector<std::string>& type_reasons, ClusterPlan* plan,
                 std::vector<LayerCopy>* copies) {
  const int N = static_cast<int>(ctx.survivors.size());
  plan->global_batch = ctx.old.global_batch;
  std::vector<char> in_pipeline(N, 0);
  plan->pipelines.reserve(c.draft.pipelines.size());
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
  // The reasons as strings once (a fleet's plan leaves thousands of nodes idle).
  const std::string joined_reason = "Oobleck's fallback rule does not use joined nodes";
  const std::string unused_reason =
      c.strategy == ReplanStrategy::kDropBroken
          ? "not used: its pipeline lost a node and was dropped (nothing is copied)"
          : "not used: every plan that uses it is slower (its pipelines would be slower or "
            "add all-reduce time)";
  plan->idle.reserve(N - std::count(in_pipeline.begin(), in_pipeline.end(), 1));
  for (int s = 0; s < N; ++s) {
    if (in_pipeline[s]) continue;
    const int t = ctx.survivors[s].type;
    const std::string& reason = !type_reasons[t].empty() ? type_reasons[t]
                                : c.strategy == ReplanStrategy::kOobleckFallback && ctx.joined[s]
                                    ? joined_reason
                                    : unused_reason;
    plan->idle.push_back({ctx.survivors[s].id, t, reason});
  }
  copies->reserve(c.copies.size());
  for (const IndexedCopy& x : c.copies) {
    copies->push_back({ctx.survivors[x.dest].id, ctx.survivors[x.source].id, x.layer_begin,
                       x.layer_end, x.param_bytes});
  }
}

}  // namespace oobleck::replan_internal
