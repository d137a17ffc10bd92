#include "core/search_size.h"

#include <algorithm>
#include <string>

#include "absl/strings/str_format.h"

namespace oobleck {
namespace {

// A figure for a message; saturated ones were too large to count.
std::string Figure(int64_t value) {
  return value >= TemplateSearchSize::kSaturated ? std::string("over 2^61")
                                                 : absl::StrFormat("%d", value);
}

}  // namespace

int64_t SaturatingMul(int64_t a, int64_t b) {
  constexpr int64_t kMax = TemplateSearchSize::kSaturated;
  if (a == 0 || b == 0) return 0;
  if (a >= kMax || b >= kMax || a > kMax / b) return kMax;
  return a * b;
}

int64_t SaturatingAdd(int64_t a, int64_t b) {
  constexpr int64_t kMax = TemplateSearchSize::kSaturated;
  return a >= kMax - b ? kMax : a + b;
}

int64_t CountMultisetsInsideMixes(const std::vector<int>& caps, const std::vector<NodeMix>& mixes,
                                  Interrupt* interrupt) {
  const int T = static_cast<int>(caps.size());
  std::vector<int64_t> strides(T, 1);
  int64_t box = 1;
  for (int t = 0; t < T; ++t) {
    strides[t] = box;
    box *= caps[t] + 1;
  }
  // u is inside a mix iff it is one, or u plus one node is inside one: downwards through
  // the box in decreasing code order, as core/template_search/state_space.h does.
  std::vector<bool> inside(box, false);
  for (const NodeMix& mix : mixes) {
    int64_t code = 0;
    for (int t = 0; t < T && t < static_cast<int>(mix.size()); ++t) code += mix[t] * strides[t];
    inside[code] = true;
  }
  std::vector<int> counts = caps;  // of u, stepped down like an odometer
  int64_t count = 0;
  for (int64_t u = box - 1; u >= 0; --u) {
    if (u % kBoxWalkPollStride == 0 && interrupt != nullptr && interrupt->Poll()) return -1;
    if (u < box - 1) {
      int t = 0;
      for (; counts[t] == 0; ++t) counts[t] = caps[t];
      --counts[t];
    }
    for (int t = 0; t < T && !inside[u]; ++t) {
      if (counts[t] < caps[t] && inside[u + strides[t]]) inside[u] = true;
    }
    count += inside[u] ? 1 : 0;
  }
  return count;
}

TemplateSearchSize EstimateTemplateSearch(const CostModel& model, const std::vector<NodeMix>& mixes,
                                          const TemplateSearchLimits& limits,
                                          Interrupt* interrupt) {
  const int T = model.num_types();
  TemplateSearchSize size;
  std::vector<int64_t> caps(T, 0);
  for (const NodeMix& mix : mixes) {
    int64_t subsets = 1;
    for (int t = 0; t < T && t < static_cast<int>(mix.size()); ++t) {
      caps[t] = std::max<int64_t>(caps[t], mix[t]);
      subsets = SaturatingMul(subsets, int64_t{mix[t]} + 1);
    }
    size.mix_entries = SaturatingAdd(size.mix_entries, subsets);
  }
  size.box = 1;
  for (int64_t cap : caps) size.box = SaturatingMul(size.box, cap + 1);
  size.box_work = SaturatingMul(size.box, std::max(T, 1));
  size.useful = std::min(size.box, size.mix_entries);
  if (size.box_work <= limits.max_box_work) {
    const int64_t inside =
        CountMultisetsInsideMixes(std::vector<int>(caps.begin(), caps.end()), mixes, interrupt);
    if (inside >= 0) size.useful = inside;
  }
  size.node_states = 1;
  for (int t = 0; t < T; ++t) {
    size.node_states = SaturatingAdd(size.node_states, model.node_type(t).gpus_per_node - 1);
  }
  size.states =
      SaturatingMul(SaturatingMul(int64_t{model.num_layers()} + 1, size.useful), size.node_states);
  return size;
}

absl::Status CheckTemplateSearchSize(const TemplateSearchSize& size,
                                     const TemplateSearchLimits& limits) {
  auto over = [](int64_t value, int64_t limit, const char* what, const std::string& counts) {
    return absl::ResourceExhaustedError(absl::StrFormat(
        "the template search would need %s %s (%s), more than the limit of %d; ask for "
        "fewer node types or smaller mixes (min_nodes/max_nodes, mixes)",
        Figure(value), what, counts, limit));
  };
  if (size.box_work > limits.max_box_work) {
    return over(size.box_work, limits.max_box_work, "steps to set up its node multisets",
                absl::StrFormat("%s multisets in the box of the mixes times the node types",
                                Figure(size.box)));
  }
  if (size.mix_entries > limits.max_mix_entries) {
    return over(size.mix_entries, limits.max_mix_entries, "mix list entries",
                "the sub-multisets of every requested mix");
  }
  if (size.states > limits.max_states) {
    return over(size.states, limits.max_states, "search states",
                absl::StrFormat("layers + 1 times %s node multisets times %d node states",
                                Figure(size.useful), size.node_states));
  }
  return absl::OkStatus();
}

}  // namespace oobleck
