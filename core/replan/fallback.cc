#include "core/replan/fallback.h"

#include <algorithm>
#include <deque>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/plan/template_set.h"
#include "core/plan_search/batch_split.h"
#include "core/status_macros.h"

namespace oobleck::replan_internal {
namespace {

// Oobleck's ReconfigurationEngine.on_reconfigure (the sosp23 artifact), node for rank: the
// old pipelines in plan order are its pipeline list, a node's place in the cluster is its
// rank (docs/API.md#replan). "A pipeline fits" is Oobleck's "has at least the smallest
// template's ranks", generalised to node types: its mix has a usable template.
class OobleckRule {
 public:
  OobleckRule(const ReplanContext& ctx, const TemplateSet* set, TemplatePlanner& templates,
              const SearchOptions& search, std::vector<std::shared_ptr<const MixResult>>* keepalive)
      : ctx_(ctx),
        model_(*ctx.model),
        T_(model_.num_types()),
        set_(set),
        templates_(templates),
        search_(search),
        keepalive_(keepalive) {}

  absl::StatusOr<Draft> Run() {
    GroupOldPipelines();
    // 1. In list order, a pipeline that does not fit borrows until it does; one that still
    // does not is left for the merge.
    std::vector<size_t> order;
    bool short_left = false;
    for (size_t gi = 0; gi < groups_.size(); ++gi) {
      ASSIGN_OR_RETURN(bool fits, Fits(gi));
      if (!fits) {
        ASSIGN_OR_RETURN(fits, BorrowUntilFits(gi));
        short_left |= !fits;
      }
      order.push_back(gi);
    }
    // 2. Merges, 3. Oobleck's order.
    if (short_left) {
      ASSIGN_OR_RETURN(order, MergeShort(order));
    }
    SortAsOobleck(&order);
    return ToDraft(order);
  }

 private:
  struct Group {
    NodeMix mix;
    std::vector<int> nodes;  // survivors; the old position order while unchanged
    bool changed = false;
    bool alive = true;
    const PipelineTemplate* tmpl = nullptr;  // once it fits (the old one while unchanged)
  };
  // A node a group can lend: its index in Group::nodes (-1: none) and the group's template
  // without it.
  struct Spare {
    int at = -1;
    const PipelineTemplate* tmpl = nullptr;
  };

  void GroupOldPipelines() {
    for (size_t i = 0; i < ctx_.old.pipelines.size(); ++i) {
      Group g;
      g.mix.assign(T_, 0);
      for (int s : ctx_.old_positions[i]) {
        if (s < 0) {
          g.changed = true;
          continue;
        }
        g.nodes.push_back(s);
        ++g.mix[ctx_.survivors[s].type];
      }
      if (!g.changed) g.tmpl = &ctx_.old.pipelines[i].tmpl;
      if (!g.nodes.empty()) groups_.push_back(std::move(g));
    }
  }

  int TypeOf(int survivor) const { return ctx_.survivors[survivor].type; }

  // The template of a mix if the rule may use it: at least min_nodes (and at most the
  // size cap of Oobleck's fault tolerance, when set), a feasible template that holds a
  // micro-batch; nullptr if not.
  absl::StatusOr<const PipelineTemplate*> Usable(const NodeMix& mix) {
    const int size = MixSize(mix);
    if (size < ctx_.limits.min_nodes) return nullptr;
    if (ctx_.size_cap > 0 && size > ctx_.size_cap) return nullptr;
    const MixResult* r = set_ != nullptr ? set_->Find(mix) : nullptr;
    if (r == nullptr) {  // e.g. a merged pipeline above max_nodes
      ASSIGN_OR_RETURN(std::vector<PlannedMix> planned,
                       templates_.PlanTemplates(model_, {mix}, search_));
      keepalive_->push_back(planned[0].result);
      r = keepalive_->back().get();
    }
    if (!r->feasible || model_.MaxMicrobatches(r->best) < 1) return nullptr;
    return &r->best;
  }

  // An unchanged pipeline keeps its template; a changed one takes its mix's.
  absl::StatusOr<bool> Fits(size_t gi) {
    Group& g = groups_[gi];
    if (g.changed) {
      ASSIGN_OR_RETURN(g.tmpl, Usable(g.mix));
    }
    return g.tmpl != nullptr;
  }

  // Oobleck's pop(): the group's last node in rank order among those it can spare.
  absl::StatusOr<Spare> SpareNode(size_t d) {
    const Group& g = groups_[d];
    std::vector<const PipelineTemplate*> without(T_, nullptr);
    std::vector<char> tried(T_, 0);
    Spare best;
    for (size_t x = 0; x < g.nodes.size(); ++x) {
      const int t = TypeOf(g.nodes[x]);
      if (!tried[t]) {
        tried[t] = 1;
        NodeMix mix = g.mix;
        --mix[t];
        ASSIGN_OR_RETURN(without[t], Usable(mix));
      }
      if (without[t] == nullptr) continue;
      if (best.at < 0 || g.nodes[x] > g.nodes[best.at]) best = {static_cast<int>(x), without[t]};
    }
    return best;
  }

  // Oobleck's _find_biggest_pipeline: the largest other group that can spare a node, the
  // last of equally large ones; -1 if none.
  absl::StatusOr<int> Lender(size_t gi) {
    int best = -1;
    for (size_t d = 0; d < groups_.size(); ++d) {
      if (d == gi || !groups_[d].alive) continue;
      if (best >= 0 && MixSize(groups_[d].mix) < MixSize(groups_[best].mix)) continue;
      ASSIGN_OR_RETURN(const Spare spare, SpareNode(d));
      if (spare.at >= 0) best = static_cast<int>(d);
    }
    return best;
  }

  // Group gi borrows one node at a time, from one lender until it fits or the lender has
  // none to spare, then from the next; false when no lender is left.
  absl::StatusOr<bool> BorrowUntilFits(size_t gi) {
    Group& g = groups_[gi];
    while (true) {
      ASSIGN_OR_RETURN(const int d, Lender(gi));
      if (d < 0) return false;
      Group& lender = groups_[d];
      while (true) {
        ASSIGN_OR_RETURN(const Spare spare, SpareNode(d));
        if (spare.at < 0) break;
        const int node = lender.nodes[spare.at];
        lender.nodes.erase(lender.nodes.begin() + spare.at);
        --lender.mix[TypeOf(node)];
        lender.tmpl = spare.tmpl;
        lender.changed = true;
        g.nodes.push_back(node);
        ++g.mix[TypeOf(node)];
        ASSIGN_OR_RETURN(g.tmpl, Usable(g.mix));
        if (g.tmpl != nullptr) return true;
      }
    }
  }

  absl::Status Stuck(const Group& g) const {
    return absl::FailedPreconditionError(
        absl::StrCat("Oobleck's fallback rule is stuck: a pipeline left with ",
                     MixLabel(g.mix, model_.problem().node_types),
                     " has no template, no pipeline can lend it a node, and merging gives none"));
  }

  // Oobleck's _merge_pipelines: each group that does not fit, in list order, absorbs the
  // next ones that do not fit until it does; when none is left, the first that fits.
  absl::StatusOr<std::vector<size_t>> MergeShort(const std::vector<size_t>& order) {
    std::deque<size_t> short_groups, fitting;
    for (size_t gi : order) (groups_[gi].tmpl != nullptr ? fitting : short_groups).push_back(gi);
    while (!short_groups.empty()) {
      const size_t gi = short_groups.front();
      short_groups.pop_front();
      Group& g = groups_[gi];
      while (g.tmpl == nullptr) {
        const bool from_short = !short_groups.empty();
        std::deque<size_t>& from = from_short ? short_groups : fitting;
        if (from.empty()) return Stuck(g);
        Group& other = groups_[from.front()];
        from.pop_front();
        g.nodes.insert(g.nodes.end(), other.nodes.begin(), other.nodes.end());
        for (int t = 0; t < T_; ++t) g.mix[t] += other.mix[t];
        g.changed = true;
        other.alive = false;
        ASSIGN_OR_RETURN(g.tmpl, Usable(g.mix));
        if (!from_short && g.tmpl == nullptr) return Stuck(g);
      }
      fitting.push_back(gi);
    }
    return std::vector<size_t>(fitting.begin(), fitting.end());
  }

  // Ranks ascending within each changed pipeline, then the pipelines by (size, first rank).
  void SortAsOobleck(std::vector<size_t>* order) {
    for (size_t gi : *order) {
      if (groups_[gi].changed) std::sort(groups_[gi].nodes.begin(), groups_[gi].nodes.end());
    }
    auto key = [&](size_t gi) {
      const std::vector<int>& nodes = groups_[gi].nodes;
      return std::make_pair(nodes.size(), *std::min_element(nodes.begin(), nodes.end()));
    };
    std::sort(order->begin(), order->end(), [&](size_t a, size_t b) { return key(a) < key(b); });
  }

  // Oobleck's get_rank_grid: a changed group's nodes, ascending, onto its template's
  // positions in order (each type's nodes onto that type's positions).
  std::vector<int> InRankOrder(const Group& g) const {
    std::vector<std::vector<int>> by_type(T_);
    for (int s : g.nodes) by_type[TypeOf(s)].push_back(s);
    std::vector<size_t> next(T_, 0);
    std::vector<int> positions;
    for (int t : g.tmpl->node_order) positions.push_back(by_type[t][next[t]++]);
    return positions;
  }

  // The groups as pipelines in `order`, the batch split optimally over them.
  absl::StatusOr<Draft> ToDraft(const std::vector<size_t>& order) const {
    Draft draft;
    draft.strategy = ReplanStrategy::kOobleckFallback;
    std::vector<PipelineLoad> loads;
    std::vector<std::vector<double>> costs;
    for (size_t gi : order) {
      const Group& g = groups_[gi];
      DraftPipeline p;
      p.tmpl = g.tmpl;
      p.nodes = g.changed ? InRankOrder(g) : g.nodes;
      p.bound = true;
      draft.pipelines.push_back(std::move(p));
      costs.push_back(StageCosts(*g.tmpl));
    }
    for (size_t k = 0; k < draft.pipelines.size(); ++k) {
      loads.push_back({&costs[k], model_.MaxMicrobatches(*draft.pipelines[k].tmpl)});
    }
    absl::StatusOr<std::vector<int>> split = SplitBatch(model_, loads, ctx_.old.global_batch);
    if (!split.ok()) {
      return absl::FailedPreconditionError(
          absl::StrCat("Oobleck's fallback rule: ", split.status().message()));
    }
    for (size_t k = 0; k < draft.pipelines.size(); ++k)
      draft.pipelines[k].microbatches = (*split)[k];
    return draft;
  }

  const ReplanContext& ctx_;
  const CostModel& model_;
  const int T_;
  const TemplateSet* set_;
  TemplatePlanner& templates_;
  const SearchOptions& search_;
  std::vector<std::shared_ptr<const MixResult>>* keepalive_;
  std::vector<Group> groups_;
};

}  // namespace

absl::StatusOr<Draft> FallbackDraft(const ReplanContext& ctx, const TemplateSet* set,
                                    TemplatePlanner& templates, const SearchOptions& search,
                                    std::vector<std::shared_ptr<const MixResult>>* keepalive) {
  return OobleckRule(ctx, set, templates, search, keepalive).Run();
}

}  // namespace oobleck::replan_internal
