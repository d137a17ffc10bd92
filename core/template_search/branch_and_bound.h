// The branch-and-bound driver of the template search (docs/ARCHITECTURE.md#branch-and-
// bound): beam passes find incumbents, whose times bound the exact label DP.
#ifndef OOBLECK_CORE_TEMPLATE_SEARCH_BRANCH_AND_BOUND_H_
#define OOBLECK_CORE_TEMPLATE_SEARCH_BRANCH_AND_BOUND_H_

#include <cmath>
#include <cstddef>
#include <limits>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "core/cost_model.h"
#include "core/interrupt.h"
#include "core/search.h"
#include "core/template_search/bottleneck_bound.h"
#include "core/template_search/label_search.h"
#include "core/template_search/objectives.h"
#include "core/template_search/stage_costs.h"
#include "core/template_search/state_space.h"

namespace oobleck::template_search {

// Labels kept per state by the beam passes that find incumbents.
inline constexpr int kBeamWidth = 4;

// Per mix, the time of some template (+inf if none was found: infeasible, or only an
// unbounded search could tell). Without any bound the beam pass would try every stage of
// every state. It runs with guessed bounds instead, a little above each mix's lower bound
// and widening round by round, on the mixes it has not found a template for yet; a mix
// still without one after the widest guess gets a last unbounded round (which also
// settles infeasible mixes). The guessed rounds pay off when stages can span many layers
// or nodes have many GPU splits (the objective says from how many layers on,
// kGuessFromLayers); otherwise one unbounded beam pass finds every incumbent.
template <SearchObjective Objective>
absl::StatusOr<std::vector<double>> FindIncumbents(const StageCosts& costs,
                                                   const std::vector<NodeMix>& mixes,
                                                   const Objective& objective,
                                                   const PrefixMaxBound& prefix_max,
                                                   Interrupt& interrupt,
                                                   const SearchOptions& options) {
  constexpr double kInf = std::numeric_limits<double>::infinity();
  const CostModel& model = costs.model();
  const std::vector<double> slacks = model.num_layers() >= Objective::kGuessFromLayers
                                         ? std::vector<double>{0.02, 0.05, 0.1, 0.2, 0.4, -1.0}
                                         : std::vector<double>{-1.0};
  std::vector<double> upper_bounds(mixes.size(), kInf), guesses(mixes.size(), kInf);
  std::vector<bool> found(mixes.size(), false);
  if (slacks.size() > 1) {
    LabelSearch<Objective> probe(costs, mixes, objective, kBeamWidth, upper_bounds, prefix_max,
                                 interrupt);
    for (size_t i = 0; i < mixes.size(); ++i) {
      const double lb = probe.RootLowerBound(mixes[i]);
      if (lb > 0 && std::isfinite(lb)) guesses[i] = lb;
    }
  }
  for (double slack : slacks) {
    std::vector<size_t> pending;
    for (size_t i = 0; i < mixes.size(); ++i) {
      if (!found[i]) pending.push_back(i);
    }
    if (pending.empty()) break;
    std::vector<NodeMix> round_mixes;
    std::vector<double> round_bounds;
    for (size_t i : pending) {
      round_mixes.push_back(mixes[i]);
      round_bounds.push_back(slack < 0 ? kInf : guesses[i] * (1 + slack));
    }
    const bool all = pending.size() == mixes.size();
    const StateSpace round_space(model, round_mixes);
    std::optional<PrefixMaxBound> round_max;
    if (!all) round_max.emplace(costs, round_space, round_mixes, interrupt);
    LabelSearch<Objective> beam(costs, round_mixes, objective, kBeamWidth, round_bounds,
                                all ? prefix_max : *round_max, interrupt);
    auto incumbents = beam.Run(options);
    if (!incumbents.ok()) return incumbents.status();
    for (size_t j = 0; j < pending.size(); ++j) {
      if ((*incumbents)[j].feasible) {
        found[pending[j]] = true;
        upper_bounds[pending[j]] = (*incumbents)[j].best.iteration_time_ms;
      }
    }
  }
  return upper_bounds;
}

// A narrow beam pass finds good templates fast; their times bound the exact pass, which
// then skips every stage and label that provably cannot beat them.
template <SearchObjective Objective>
absl::StatusOr<std::vector<MixResult>> BranchAndBound(const CostModel& model,
                                                      const std::vector<NodeMix>& mixes,
                                                      Objective objective,
                                                      const SearchOptions& options) {
  Interrupt interrupt(options.cancelled);
  const StageCosts costs(model);
  const StateSpace space(model, mixes);
  const PrefixMaxBound prefix_max(costs, space, mixes, interrupt);
  if (interrupt.stopped()) return Interrupt::Status("template search");
  absl::StatusOr<std::vector<double>> upper_bounds =
      FindIncumbents(costs, mixes, objective, prefix_max, interrupt, options);
  if (!upper_bounds.ok()) return upper_bounds.status();
  LabelSearch<Objective> exact(costs, mixes, objective, 0, *upper_bounds, prefix_max, interrupt);
  return exact.Run(options);
}

}  // namespace oobleck::template_search

#endif  // OOBLECK_CORE_TEMPLATE_SEARCH_BRANCH_AND_BOUND_H_
