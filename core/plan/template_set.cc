#include "core/plan/template_set.h"

#include <algorithm>
#include <bit>
#include <cstdint>
#include <utility>

#include "absl/strings/str_format.h"
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
// mixes it is given (core/template_search/), so its size is exponential in the number of types:
// 8 types of mixes of up to 4 nodes make 5^8 multisets, where only 495 matter. Each mix of
// few nodes uses few types, so mixes are searched in groups whose types are a subset of one
// another's, each group's box over its own types only. (Each template is optimal whatever
// group it is searched in; groups only trade shared work for a smaller box.)
constexpr int64_t kMaxTemplateSearchBox = int64_t{1} << 10;

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

std::vector<std::vector<size_t>> TemplateSearchGroups(const std::vector<NodeMix>& mixes) {
  std::vector<size_t> all(mixes.size());
  for (size_t i = 0; i < all.size(); ++i) all[i] = i;
  if (BoxSize(mixes, all) <= kMaxTemplateSearchBox) return {all};
  auto support = [&](size_t i) {
    uint64_t bits = 0;
    for (size_t t = 0; t < mixes[i].size(); ++t) bits |= uint64_t{mixes[i][t] > 0} << t;
    return bits;
  };
  // Widest supports first, so that every narrower one finds a group that contains it.
  std::vector<size_t> order = all;
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
    while (g < groups.size() &&
           ((group_support[g] & s) != s || box_with(g, i) > kMaxTemplateSearchBox)) {
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
  for (const std::vector<size_t>& group : TemplateSearchGroups(set.mixes)) {
    std::vector<NodeMix> mixes;
    for (size_t i : group) mixes.push_back(set.mixes[i]);
    ASSIGN_OR_RETURN(std::vector<PlannedMix> planned, planner.PlanTemplates(model, mixes, options));
    for (size_t k = 0; k < group.size(); ++k) {
      set.from_cache += (planned)[k].cache_hit ? 1 : 0;
      set.results[group[k]] = std::move((planned)[k].result);
    }
  }
  return set;
}

}  // namespace oobleck
