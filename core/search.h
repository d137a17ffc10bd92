// Exact template search (docs/architecture/template-search.md), implemented in
// core/template_search/ (SearchTemplates in search_templates.cc, ExplainInfeasible in
// explain_infeasible.cc); its brute-force checker is tests/oracles/exhaustive.h.
#ifndef OOBLECK_CORE_SEARCH_H_
#define OOBLECK_CORE_SEARCH_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "core/cost_model.h"
#include "core/pipeline_template.h"

namespace oobleck {

struct MixResult {
  NodeMix mix;
  bool feasible = false;
  PipelineTemplate best;          // valid when feasible
  std::string infeasible_reason;  // set when not feasible
};

// Work done by a search (both passes), for benchmarks and tuning.
struct SearchStats {
  int64_t candidates = 0;  // labels generated
  int64_t labels = 0;      // labels kept on Pareto fronts
};

// Labels one pass of the template search may hold at most: its memory (40-56 bytes a
// label, so about 1.3-1.9 GB), far above what real requests hold (the 6-type LLM shape of
// bench/README.md peaks at 788 MiB in all).
inline constexpr int64_t kMaxTemplateSearchLabels = int64_t{1} << 25;

struct SearchOptions {
  // Polled during the search; returning true aborts it with CANCELLED.
  std::function<bool()> cancelled;
  // A pass of the template search that would hold more labels than this stops with
  // RESOURCE_EXHAUSTED naming the limit, instead of growing without bound.
  int64_t max_labels = kMaxTemplateSearchLabels;
  SearchStats* stats = nullptr;  // if set, receives the work counters
  // Admission control, asked only when a search is about to run (never for answers from
  // the cache); the search runs while the returned handle lives. An error is returned
  // as the request's.
  std::function<absl::StatusOr<std::shared_ptr<void>>()> admit;
  // Called from the searching thread as the search advances (never concurrently with
  // itself): `phase` names the pass, `done` of `total` steps of it are finished. Meant for
  // progress logs and bars; keep it cheap.
  std::function<void(std::string_view phase, int64_t done, int64_t total)> progress;
};

// The optimal template of every mix under model's cost model (exact). Results are in the
// order of `mixes`. Deterministic at any thread count.
absl::StatusOr<std::vector<MixResult>> SearchTemplates(const CostModel& model,
                                                       const std::vector<NodeMix>& mixes,
                                                       const SearchOptions& options = {});

// The RESOURCE_EXHAUSTED of a search that stopped at SearchOptions::max_labels, and its
// test: unlike the other RESOURCE_EXHAUSTED answers a search may give (the size limits, a
// busy server's admission), it depends on how many mixes are searched at once, so a caller
// may search fewer together and retry.
absl::Status OverLabelBudgetError(const std::string& message);
bool IsOverLabelBudget(const absl::Status& status);

// Why no pipeline over `mix` exists (for mixes the search found infeasible).
std::string ExplainInfeasible(const CostModel& model, const NodeMix& mix);

}  // namespace oobleck

#endif  // OOBLECK_CORE_SEARCH_H_
