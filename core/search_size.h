// How much work and memory a template search would take, estimated from the request alone
// (node types, GPUs per node, layers, mixes) before anything is allocated, so that a
// request the search cannot finish is refused at once instead of running out of time or
// memory. docs/architecture/template-search.md#search-size says what each figure counts.
#ifndef OOBLECK_CORE_SEARCH_SIZE_H_
#define OOBLECK_CORE_SEARCH_SIZE_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "core/cluster.h"
#include "core/cost_model.h"
#include "core/interrupt.h"

namespace oobleck {

// Every figure saturates at kSaturated instead of overflowing.
struct TemplateSearchSize {
  static constexpr int64_t kSaturated = INT64_MAX / 4;
  // Node multisets are encoded in the box of the mixes, prod over types of (cap_t + 1);
  // setting up the state space walks it once per node type.
  int64_t box = 0;
  int64_t box_work = 0;     // box x node types
  int64_t mix_entries = 0;  // sum over mixes of their sub-multisets: per-state mix lists
  // States exist only on multisets inside some mix: counted exactly by one walk over the
  // box when the box passes its limit (the search walks it the same way), else the upper
  // bound min(box, mix_entries).
  int64_t useful = 0;
  int64_t node_states = 0;  // boundary + partial states of every node type's GPUs
  int64_t states = 0;       // (layers + 1) x useful x node_states: one Pareto front each
};

// Limits a search must stay within; each violation is RESOURCE_EXHAUSTED naming it.
struct TemplateSearchLimits {
  // Every mix of <= 8 nodes of 4 types x 8 nodes x 8 GPUs on 80 layers: 81 x 495 x 29.
  int64_t max_states = int64_t{1} << 25;
  int64_t max_box_work = int64_t{1} << 26;
  int64_t max_mix_entries = int64_t{1} << 24;
};

// Multisets a walk over the box (here and in the template search's StateSpace) takes
// between two polls of the interrupt.
inline constexpr int64_t kBoxWalkPollStride = int64_t{1} << 14;

// The box is walked (box_work steps) only when box_work <= limits.max_box_work, so a
// request whose box is too large is still estimated, and refused, in O(mixes x types).
// The walk polls `interrupt`; when that stops it, `useful` keeps its upper bound and the
// caller must check interrupt->stopped() before trusting the estimate.
TemplateSearchSize EstimateTemplateSearch(const CostModel& model, const std::vector<NodeMix>& mixes,
                                          const TemplateSearchLimits& limits = {},
                                          Interrupt* interrupt = nullptr);

// How many multisets of the box `caps` (prod (cap_t + 1) of them) are inside at least one
// of `mixes` (each mix within the box): the multisets a template search keeps states for.
// -1 if `interrupt` stopped the walk.
int64_t CountMultisetsInsideMixes(const std::vector<int>& caps, const std::vector<NodeMix>& mixes,
                                  Interrupt* interrupt = nullptr);

// OK, or RESOURCE_EXHAUSTED naming the first limit the search would pass, its value and
// the estimate.
absl::Status CheckTemplateSearchSize(const TemplateSearchSize& size,
                                     const TemplateSearchLimits& limits = {});

// a * b and a + b, saturating at TemplateSearchSize::kSaturated (both >= 0).
int64_t SaturatingMul(int64_t a, int64_t b);
int64_t SaturatingAdd(int64_t a, int64_t b);

}  // namespace oobleck

#endif  // OOBLECK_CORE_SEARCH_SIZE_H_
