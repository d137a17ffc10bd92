// SearchTemplates (core/search.h): validates the request, refuses what passes the size
// limits, and runs branch and bound with the cost model's objective.
#include <algorithm>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "core/interrupt.h"
#include "core/search.h"
#include "core/search_size.h"
#include "core/status_macros.h"
#include "core/template_search/branch_and_bound.h"
#include "core/template_search/objectives.h"

namespace oobleck {
namespace {

constexpr char kOverLabelBudgetPayload[] = "oobleck.planner/template-search-labels";

}  // namespace

absl::Status OverLabelBudgetError(const std::string& message) {
  absl::Status status = absl::ResourceExhaustedError(message);
  status.SetPayload(kOverLabelBudgetPayload, absl::Cord("max_labels"));
  return status;
}

bool IsOverLabelBudget(const absl::Status& status) {
  return absl::IsResourceExhausted(status) &&
         status.GetPayload(kOverLabelBudgetPayload).has_value();
}

absl::StatusOr<std::vector<MixResult>> SearchTemplates(const CostModel& model,
                                                       const std::vector<NodeMix>& mixes,
                                                       const SearchOptions& options) {
  for (size_t i = 0; i < mixes.size(); ++i) {
    if (static_cast<int>(mixes[i].size()) != model.num_types() || MixSize(mixes[i]) < 1 ||
        *std::min_element(mixes[i].begin(), mixes[i].end()) < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "mixes[", i, "] must have one non-negative count per node type and at least one node"));
    }
  }
  if (mixes.empty()) return std::vector<MixResult>{};
  // Refuse, before allocating anything, what the search could not finish.
  Interrupt interrupt(options.cancelled);
  const TemplateSearchSize size = EstimateTemplateSearch(model, mixes, {}, &interrupt);
  if (interrupt.stopped()) return Interrupt::Status("template search");
  RETURN_IF_ERROR(CheckTemplateSearchSize(size));
  absl::StatusOr<std::vector<MixResult>> results;
  if (model.kind() == CostModelKind::kOneFOneB) {
    results = template_search::BranchAndBound(
        model, mixes,
        template_search::OneFOneBObjective{model.problem().microbatches, model.memory_can_bind()},
        options, template_search::Moves::kAuto);
  } else {
    const int m = model.problem().microbatches;
    int most_stages = 0;
    for (const NodeMix& mix : mixes) {
      int gpus = 0;
      for (int t = 0; t < model.num_types(); ++t) gpus += mix[t] * model.node_type(t).gpus_per_node;
      most_stages = std::max(most_stages, std::min(gpus, model.num_layers()));
    }
    results = template_search::BranchAndBound(
        model, mixes, template_search::Sosp23Objective{m, m > 0 && most_stages > m}, options);
  }
  if (!results.ok()) return results;
  for (MixResult& r : *results) {
    if (!r.feasible && r.infeasible_reason.empty())
      r.infeasible_reason = ExplainInfeasible(model, r.mix);
  }
  return results;
}

}  // namespace oobleck
