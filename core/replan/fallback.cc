#include "core/replan/fallback.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/status_macros.h"

namespace oobleck::replan_internal {
namespace {

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
    for (size_t gi = 0; gi < groups_.size(); ++gi) {
      Group& g = groups_[gi];
      if (!g.alive || !g.changed) continue;
      ASSIGN_OR_RETURN(const PipelineTemplate* own, Usable(g.mix));
      if (own != nullptr) {
        g.tmpl = own;
        continue;
      }
      absl::StatusOr<bool> fixed = Borrow(gi);
      if (fixed.ok() && !*fixed) fixed = Merge(gi);
      if (!fixed.ok()) return fixed.status();
      if (!*fixed) {
        return absl::FailedPreconditionError(absl::StrCat(
            "Oobleck's fallback rule is stuck: a pipeline left with ",
            MixLabel(g.mix, model_.problem().node_types),
            " has no template, and borrowing a node or merging with another pipeline gives none"));
      }
    }
    return ToDraft();
  }

 private:
  struct Group {
    NodeMix mix;
    std::vector<int> nodes;  // survivors; position order while unchanged
    bool changed = false;
    bool alive = true;
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
      g.tmpl = &ctx_.old.pipelines[i].tmpl;
      if (!g.nodes.empty()) groups_.push_back(std::move(g));
    }
  }

  // The template of a mix if the rule may use it: at least min_nodes, a feasible template
  // that holds a micro-batch; nullptr if not.
  absl::StatusOr<const PipelineTemplate*> Usable(const NodeMix& mix) {
    if (MixSize(mix) < ctx_.limits.min_nodes) return nullptr;
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

  // Group gi borrows one node from the largest pipeline that can spare one.
  absl::StatusOr<bool> Borrow(size_t gi) {
    Group& g = groups_[gi];
    std::vector<size_t> donors;
    for (size_t d = 0; d < groups_.size(); ++d) {
      if (d != gi && groups_[d].alive && MixSize(groups_[d].mix) > 1) donors.push_back(d);
    }
    std::stable_sort(donors.begin(), donors.end(), [&](size_t a, size_t b) {
      return MixSize(groups_[a].mix) > MixSize(groups_[b].mix);
    });
    for (size_t d : donors) {
      for (int t = 0; t < T_; ++t) {
        if (groups_[d].mix[t] == 0) continue;
        NodeMix donor_mix = groups_[d].mix, receiver_mix = g.mix;
        --donor_mix[t];
        ++receiver_mix[t];
        ASSIGN_OR_RETURN(const PipelineTemplate* donor_tmpl, Usable(donor_mix));
        if (donor_tmpl == nullptr) continue;
        ASSIGN_OR_RETURN(const PipelineTemplate* receiver_tmpl, Usable(receiver_mix));
        if (receiver_tmpl == nullptr) continue;
        // The donor's last node of that type moves.
        std::vector<int>& dn = groups_[d].nodes;
        for (size_t x = dn.size(); x-- > 0;) {
          if (ctx_.survivors[dn[x]].type != t) continue;
          g.nodes.push_back(dn[x]);
          dn.erase(dn.begin() + x);
          break;
        }
        groups_[d].mix = donor_mix;
        groups_[d].tmpl = donor_tmpl;
        groups_[d].changed = true;
        g.mix = receiver_mix;
        g.tmpl = receiver_tmpl;
        return true;
      }
    }
    return false;
  }

  // Group gi merges with the smallest other pipeline whose union has a template.
  absl::StatusOr<bool> Merge(size_t gi) {
    Group& g = groups_[gi];
    std::vector<size_t> others;
    for (size_t o = 0; o < groups_.size(); ++o) {
      if (o != gi && groups_[o].alive) others.push_back(o);
    }
    std::stable_sort(others.begin(), others.end(), [&](size_t a, size_t b) {
      return MixSize(groups_[a].mix) < MixSize(groups_[b].mix);
    });
    for (size_t o : others) {
      NodeMix merged = g.mix;
      for (int t = 0; t < T_; ++t) merged[t] += groups_[o].mix[t];
      ASSIGN_OR_RETURN(const PipelineTemplate* merged_tmpl, Usable(merged));
      if (merged_tmpl == nullptr) continue;
      g.nodes.insert(g.nodes.end(), groups_[o].nodes.begin(), groups_[o].nodes.end());
      g.mix = merged;
      g.tmpl = merged_tmpl;
      groups_[o].alive = false;
      return true;
    }
    return false;
  }

  // The surviving groups as pipelines, the batch split optimally over them.
  absl::StatusOr<Draft> ToDraft() const {
    Draft draft;
    draft.strategy = ReplanStrategy::kOobleckFallback;
    std::vector<PipelineLoad> loads;
    std::vector<std::vector<double>> costs;
    for (const Group& g : groups_) {
      if (!g.alive) continue;
      DraftPipeline p;
      p.tmpl = g.tmpl;
      p.nodes = g.nodes;
      p.bound = !g.changed;
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
