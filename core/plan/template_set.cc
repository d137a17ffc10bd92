#include "core/plan/template_set.h"

#include <algorithm>
#include <bit>
#include <cstdint>
#include <utility>

#include "absl/strings/str_format.h"
#include "core/interrupt.h"
#include "core/search_size.h"
#include "core/status_macros.h"

namespace oobleck {

NodeMix SingleNode(int num_types, int t) {
  NodeMix mix(num_types, 0);
  mix[t] = 1;
  return mix;
}

const MixResult* TemplateSet::Find(const NodeMix& mix) const {
  for (size_t i = 0; i < mixes.size(); ++i) {
    if (mixes[i] == mix) return results[i].get();
  }
  return nullptr;
}

namespace {

// The template search's state space is a box over each type's largest count among the
// mixes it is given (core/template_search/), so its size is exponential in the number of
// types: 8 types of mixes of up to 8 nodes make 9^8 multisets. One search over every mix
// shares the most work (a sub-multiset's fronts serve every mix that holds it), so mixes
// are searched together while the search stays small: its box within kMaxTemplateSearchBox
// multisets and its states within kMaxGroupStates. Larger sets are split into groups whose
// types are a subset of one another's, each group's box over its own types only, with a box
// limit divided by kGroupBoxShrink until every group is within both. (Each template is
// optimal whatever group it is searched in; groups only trade shared work for memory.)
// A group whose search would hold too many labels (SearchOptions::max_labels) is split the
// same way and searched again. Measured in bench/README.md ("Plan's template groups").
constexpr int64_t kMaxTemplateSearchBox = int64_t{1} << 20;
// 3/8 of the search's own limit (TemplateSearchLimits::max_states): under 0.8 GB at the 67
// bytes a state measured on 8 types (BM_PlanFleetLongPipelines) when node-move passes still
// kept partial node states; the estimate counts them, so it is looser for node moves now.
constexpr int64_t kMaxGroupStates = int64_t{3} << 22;
constexpr int64_t kGroupBoxShrink = 4;
constexpr int64_t kMinGroupBox = int64_t{1} << 10;

// The box limit to split a group of box `box` with.
int64_t SmallerBox(int64_t box) { return std::max(kMinGroupBox, box / kGroupBoxShrink); }

int64_t BoxSize(const std::vector<NodeMix>& mixes, const std::vector<size_t>& group) {
  if (group.empty()) return 1;
  NodeMix caps(mixes[group[0]].size(), 0);
  for (size_t i : group) {
    for (size_t t = 0; t < caps.size(); ++t) caps[t] = std::max(caps[t], mixes[i][t]);
  }
  int64_t box = 1;
  for (int c : caps) box = std::min(box * (c + 1), int64_t{1} << 40);
  return box;
}

// `group` split by support into groups of boxes within `max_box`.
std::vector<std::vector<size_t>> SplitBySupport(const std::vector<NodeMix>& mixes,
                                                const std::vector<size_t>& group, int64_t max_box) {
  if (BoxSize(mixes, group) <= max_box) return {group};
  auto support = [&](size_t i) {
    uint64_t bits = 0;
    for (size_t t = 0; t < mixes[i].size(); ++t) bits |= uint64_t{mixes[i][t] > 0} << t;
    return bits;
  };
  // Widest supports first, so that every narrower one finds a group that contains it.
  std::vector<size_t> order = group;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return std::popcount(support(a)) > std::popcount(support(b));
  });
  std::vector<uint64_t> group_support;
  std::vector<NodeMix> group_caps;
  std::vector<std::vector<size_t>> groups;
  auto box_with = [&](size_t g, size_t i) {
    int64_t box = 1;
    for (size_t t = 0; t < mixes[i].size(); ++t) {
      box = std::min(box * (std::max(group_caps[g][t], mixes[i][t]) + 1), int64_t{1} << 40);
    }
    return box;
  };
  for (size_t i : order) {
    const uint64_t s = support(i);
    size_t g = 0;
    while (g < groups.size() && ((group_support[g] & s) != s || box_with(g, i) > max_box)) {
      ++g;
    }
    if (g == groups.size()) {
      group_support.push_back(s);
      group_caps.emplace_back(mixes[i].size(), 0);
      groups.emplace_back();
    }
    for (size_t t = 0; t < mixes[i].size(); ++t) {
      group_caps[g][t] = std::max(group_caps[g][t], mixes[i][t]);
    }
    groups[g].push_back(i);
  }
  return groups;
}

// Whether a group may be split further: SplitBySupport with SmallerBox(box) then makes at
// least two groups.
bool CanSplit(const std::vector<NodeMix>& mixes, const std::vector<size_t>& group) {
  return group.size() > 1 && BoxSize(mixes, group) > kMinGroupBox;
}

// Appends to `out` the groups of `group` (boxes within `max_box`), each of which a search
// can hold (states within kMaxGroupStates) or cannot be split further.
absl::Status AppendTemplateSearchGroups(const CostModel& model, const std::vector<NodeMix>& mixes,
                                        const std::vector<size_t>& group, int64_t max_box,
                                        Interrupt& interrupt,
                                        std::vector<std::vector<size_t>>& out) {
  for (std::vector<size_t>& g : SplitBySupport(mixes, group, max_box)) {
    if (CanSplit(mixes, g)) {
      std::vector<NodeMix> group_mixes;
      for (size_t i : g) group_mixes.push_back(mixes[i]);
      const TemplateSearchSize size = EstimateTemplateSearch(model, group_mixes, {}, &interrupt);
      if (interrupt.stopped()) return Interrupt::Status("template search");
      if (size.states > kMaxGroupStates) {
        RETURN_IF_ERROR(AppendTemplateSearchGroups(model, mixes, g, SmallerBox(BoxSize(mixes, g)),
                                                   interrupt, out));
        continue;
      }
    }
    out.push_back(std::move(g));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<TemplateSet> PlanTemplateSet(TemplatePlanner& planner, const CostModel& model,
                                            const NodeMix& available,
                                            const PipelineSizeLimits& limits,
                                            const SearchOptions& options) {
  TemplateSet set;
  if (CountMixes(available, limits.min_nodes, limits.max_nodes, kMaxMixesPerPlan + 1) >
      kMaxMixesPerPlan) {
    return absl::ResourceExhaustedError(absl::StrFormat(
        "the cluster's node types and pipelines of %d to %d nodes give more than %d candidate "
        "pipeline mixes, the limit per plan; lower max_nodes_per_pipeline or plan fewer node "
        "types",
        limits.min_nodes, limits.max_nodes, kMaxMixesPerPlan));
  }
  set.mixes = EnumerateMixes(available, limits.min_nodes, limits.max_nodes);
  if (limits.min_nodes > 1) {
    for (int t = 0; t < model.num_types(); ++t) {
      if (available[t] > 0) set.mixes.push_back(SingleNode(model.num_types(), t));
    }
  }
  set.results.resize(set.mixes.size());
  std::vector<size_t> all(set.mixes.size());
  for (size_t i = 0; i < all.size(); ++i) all[i] = i;
  std::vector<std::vector<size_t>> groups;
  Interrupt interrupt(options.cancelled);
  RETURN_IF_ERROR(
      AppendTemplateSearchGroups(model, set.mixes, all, kMaxTemplateSearchBox, interrupt, groups));
  // (By index: a group whose search would hold too many labels is split and appended.)
  for (size_t g = 0; g < groups.size(); ++g) {
    std::vector<NodeMix> mixes;
    for (size_t i : groups[g]) mixes.push_back(set.mixes[i]);
    absl::StatusOr<std::vector<PlannedMix>> planned = planner.PlanTemplates(model, mixes, options);
    if (IsOverLabelBudget(planned.status()) && CanSplit(set.mixes, groups[g])) {
      const std::vector<size_t> group = std::move(groups[g]);
      RETURN_IF_ERROR(AppendTemplateSearchGroups(
          model, set.mixes, group, SmallerBox(BoxSize(set.mixes, group)), interrupt, groups));
      continue;
    }
    RETURN_IF_ERROR(planned.status());
    for (size_t k = 0; k < groups[g].size(); ++k) {
      set.from_cache += (*planned)[k].cache_hit ? 1 : 0;
      set.results[groups[g][k]] = std::move((*planned)[k].result);
    }
  }
  return set;
}

}  // namespace oobleck
