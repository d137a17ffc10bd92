// The branch-and-bound driver of the template search
// (docs/architecture/template-search.md#branch-and-bound): exact passes with guessed bounds settle
// most mixes; a beam pass finds incumbents for the rest, whose times bound the last exact pass.
#ifndef OOBLECK_CORE_TEMPLATE_SEARCH_BRANCH_AND_BOUND_H_
#define OOBLECK_CORE_TEMPLATE_SEARCH_BRANCH_AND_BOUND_H_

#include <cmath>
#include <cstddef>
#include <iterator>
#include <limits>
#include <optional>
#include <string_view>
#include <type_traits>
#include <vector>

#include "absl/status/statusor.h"
#include "core/cost_model.h"
#include "core/interrupt.h"
#include "core/search.h"
#include "core/status_macros.h"
#include "core/template_search/bottleneck_bound.h"
#include "core/template_search/label_search.h"
#include "core/template_search/node_dp.h"
#include "core/template_search/objectives.h"
#include "core/template_search/stage_costs.h"
#include "core/template_search/state_space.h"
#include "core/template_search/tolerances.h"
#include "core/template_search/whole_layer_bound.h"

namespace oobleck::template_search {

// Whether the beam rounds and the exact pass prune boundary states with the whole-layer
// prefix bound (WholeLayerPrefixBound; 1f1b with stage moves): kAuto from
// kExactGuessesBelowLayers layers on, where the beam rounds run (kOn forces it, for tests).
enum class WholeLayerPruning { kAuto, kOff, kOn };

// Labels kept per state by the beam passes that find incumbents.
inline constexpr int kBeamWidth = 4;
// Exact guessed rounds run below this many layers. On long models the optima are far
// above the lower bounds and an exact pass bounded by a loose guess explores far more than
// one bounded by the beam's incumbent: every mix of 1-16 nodes on 1000 layers
// (Synthetic1000x3Types all-mixes:1-16) took over 3x the CPU. There the beam rounds below
// give the incumbents, as before.
inline constexpr int kExactGuessesBelowLayers = 256;
// The progress phase of the exact guessed rounds (proto SearchProgress, docs/API.md).
inline constexpr char kGuessedExactPhase[] = "guessed exact search (layers)";

// The prefix-max bound of a pass over `subset` of the request's mixes: `all_mixes` itself
// when the subset is every mix (`all`), else one built on the subset's own state space (with
// partial node states or not, as the pass's: LabelSearch::PartialNodes) in `own`, which must
// outlive its use. Null when the interrupt stopped the set-up.
struct OwnPrefixMax {
  std::optional<StateSpace> space;
  std::optional<PrefixMaxBound> bound;
};
inline const PrefixMaxBound* PrefixMaxFor(const StageCosts& costs,
                                          const std::vector<NodeMix>& subset, bool all,
                                          bool partial_nodes, const PrefixMaxBound& all_mixes,
                                          Interrupt& interrupt, OwnPrefixMax& own) {
  if (all) return &all_mixes;
  own.space.emplace(costs.model(), subset, &interrupt, partial_nodes);
  if (interrupt.stopped()) return nullptr;
  own.bound.emplace(costs, *own.space, subset, interrupt);
  return interrupt.stopped() ? nullptr : &*own.bound;
}

// The window of the largest stage compute of a pipeline of each mix that can still reach
// `bounds[i]` (1f1b, k = M - 1): at least the forced bottleneck (PrefixMaxBound::ForMix), at
// most (bound - floor) / k with floor the whole model's cheapest compute, a lower bound on
// every pipeline's cost sum. +inf where the bound is.
inline void WholeLayerWindows(const StageCosts& costs, const std::vector<NodeMix>& mixes,
                              int microbatches, const PrefixMaxBound& prefix_max,
                              const std::vector<double>& bounds, std::vector<double>& least_max,
                              std::vector<double>& most_max) {
  const CostModel& model = costs.model();
  double floor_ms = 0;
  for (int l = 0; l < model.num_layers(); ++l) {
    double cheapest = std::numeric_limits<double>::infinity();
    for (int t = 0; t < model.num_types(); ++t) {
      for (int g : model.stage_sizes(t))
        cheapest = std::min(cheapest, costs.ComputeMs(t, g, l, l + 1));
    }
    floor_ms += cheapest;
  }
  const double k = microbatches - 1;
  least_max.resize(mixes.size());
  most_max.resize(mixes.size());
  for (size_t i = 0; i < mixes.size(); ++i) {
    least_max[i] = prefix_max.ForMix(mixes[i]);
    most_max[i] =
        k > 0 ? (WithSlack(bounds[i]) - floor_ms) / k : std::numeric_limits<double>::infinity();
  }
}

// What the whole-layer pruning of one request's beam rounds and exact pass shares: each mix's
// root bound (the guesses) and the prefix tables.
struct WholeLayerSetUp {
  std::vector<double> guesses;
  std::optional<WholeLayerPrefixBound> prefix;
};

// Attaches `set_up`'s prefix bound (if any) to a pass over `mixes` bounded by `bounds`.
template <SearchObjective Objective>
void PruneWithWholeLayer(const StageCosts& costs, const std::vector<NodeMix>& mixes,
                         const Objective& objective, const PrefixMaxBound& prefix_max,
                         const std::vector<double>& bounds, const WholeLayerSetUp* set_up,
                         LabelSearch<Objective>& search) {
  if constexpr (std::is_same_v<Objective, OneFOneBObjective>) {
    if (set_up == nullptr || !set_up->prefix) return;
    std::vector<double> least_max, most_max;
    WholeLayerWindows(costs, mixes, objective.microbatches, prefix_max, bounds, least_max,
                      most_max);
    search.UseWholeLayerBound(*set_up->prefix, least_max, most_max);
  }
}

// Per mix, the time of some template (+inf if none was found: infeasible, or only an
// unbounded search could tell). Without any bound the beam pass would try every stage of
// every state. With `guess` it runs with guessed bounds instead, a little above each mix's
// lower bound and widening round by round, on the mixes it has not found a template for
// yet; a mix still without one after the widest guess gets a last unbounded round (which
// also settles infeasible mixes). The guessed rounds pay off when stages can span many
// layers or nodes have many GPU splits; otherwise one unbounded beam pass finds every
// incumbent.
template <SearchObjective Objective>
absl::StatusOr<std::vector<double>> FindIncumbents(
    const StageCosts& costs, const std::vector<NodeMix>& mixes, const Objective& objective,
    const PrefixMaxBound& prefix_max, bool guess, Interrupt& interrupt,
    const SearchOptions& options, Moves moves, NodeLayoutsByType* node_layouts,
    const WholeLayerSetUp* whole_layer = nullptr) {
  constexpr double kInf = std::numeric_limits<double>::infinity();
  // The guessed rounds (if any), then one unbounded round (slack -1) for the mixes left.
  std::vector<double> slacks;
  if (whole_layer != nullptr) {
    slacks.assign(std::begin(kWholeLayerBeamSlacks), std::end(kWholeLayerBeamSlacks));
  } else if (guess) {
    slacks.assign(std::begin(kBeamGuessSlacks), std::end(kBeamGuessSlacks));
  }
  slacks.push_back(-1.0);
  std::vector<double> upper_bounds(mixes.size(), kInf), guesses(mixes.size(), kInf);
  std::vector<bool> found(mixes.size(), false);
  if (whole_layer != nullptr) {
    for (size_t i = 0; i < mixes.size(); ++i) {
      const double lb = whole_layer->guesses[i];
      if (lb > 0 && std::isfinite(lb)) guesses[i] = lb;
    }
  } else if (slacks.size() > 1) {
    if (interrupt.Poll()) return Interrupt::Status("template search");
    LabelSearch<Objective> probe(costs, mixes, objective, kBeamWidth, upper_bounds, prefix_max,
                                 interrupt, moves, node_layouts);
    if (interrupt.stopped()) return Interrupt::Status("template search");
    for (size_t i = 0; i < mixes.size(); ++i) {
      const double lb = probe.RootLowerBound(mixes[i]);
      if (lb > 0 && std::isfinite(lb)) guesses[i] = lb;
    }
  }
  for (double slack : slacks) {
    // Each round first sets up its state space (polled) and bounds.
    if (interrupt.Poll()) return Interrupt::Status("template search");
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
    OwnPrefixMax own;
    const PrefixMaxBound* round_max =
        PrefixMaxFor(costs, round_mixes, pending.size() == mixes.size(),
                     LabelSearch<Objective>::PartialNodes(moves), prefix_max, interrupt, own);
    if (round_max == nullptr) return Interrupt::Status("template search");
    LabelSearch<Objective> beam(costs, round_mixes, objective, kBeamWidth, round_bounds, *round_max,
                                interrupt, moves, node_layouts);
    if (slack >= 0) {
      PruneWithWholeLayer(costs, round_mixes, objective, prefix_max, round_bounds, whole_layer,
                          beam);
    }
    ASSIGN_OR_RETURN(auto incumbents, beam.Run(options));
    for (size_t j = 0; j < pending.size(); ++j) {
      if (incumbents[j].feasible) {
        found[pending[j]] = true;
        upper_bounds[pending[j]] = incumbents[j].best.iteration_time_ms;
      }
    }
  }
  return upper_bounds;
}

// The exact pass run with a bound B per mix keeps every stage and label that could lead
// to a time <= B (the same argument as with an incumbent: nothing it drops can reach B).
// So a mix whose optimum is <= B gets its optimum, and a template it returns with a time
// <= B is optimal. Rounds with guessed bounds a little above each mix's root lower bound,
// widening (kExactGuessSlacks), each over the mixes not yet settled, settle most mixes without
// any incumbent; a mix left over (`results[i]` still empty: its optimum is far above its
// lower bound, or it is infeasible) goes to the beam and the exact pass.
template <SearchObjective Objective>
absl::Status SettleByGuessedRounds(const StageCosts& costs, const std::vector<NodeMix>& mixes,
                                   const Objective& objective, const PrefixMaxBound& prefix_max,
                                   Interrupt& interrupt, const SearchOptions& options, Moves moves,
                                   NodeLayoutsByType* node_layouts,
                                   std::vector<std::optional<MixResult>>& results) {
  std::vector<double> guesses(mixes.size(), 0);
  {
    const std::vector<double> none(mixes.size(), std::numeric_limits<double>::infinity());
    const LabelSearch<Objective> probe(costs, mixes, objective, 0, none, prefix_max, interrupt,
                                       moves, node_layouts);
    if (interrupt.stopped()) return Interrupt::Status("template search");
    for (size_t i = 0; i < mixes.size(); ++i) guesses[i] = probe.RootLowerBound(mixes[i]);
  }
  SearchOptions round_options = options;
  if (options.progress) {
    round_options.progress = [&options](std::string_view, int64_t done, int64_t total) {
      options.progress(kGuessedExactPhase, done, total);
    };
  }
  // A template a round met above a mix's bound: the next rounds bound the mix by it where
  // it is below their guess (and then settle it).
  std::vector<double> incumbents(mixes.size(), std::numeric_limits<double>::infinity());
  constexpr double kWidestGuess = kExactGuessSlacks[std::size(kExactGuessSlacks) - 1];
  for (double slack : kExactGuessSlacks) {
    // Each round first sets up its state space (polled) and bounds.
    if (interrupt.Poll()) return Interrupt::Status("template search");
    std::vector<size_t> pending;
    std::vector<NodeMix> round_mixes;
    std::vector<double> round_bounds;
    for (size_t i = 0; i < mixes.size(); ++i) {
      if (results[i] || !(guesses[i] > 0 && std::isfinite(guesses[i]))) continue;
      pending.push_back(i);
      round_mixes.push_back(mixes[i]);
      round_bounds.push_back(std::min(guesses[i] * (1 + slack), incumbents[i]));
    }
    if (pending.empty()) break;
    OwnPrefixMax own;
    const PrefixMaxBound* round_max =
        PrefixMaxFor(costs, round_mixes, pending.size() == mixes.size(),
                     LabelSearch<Objective>::PartialNodes(moves), prefix_max, interrupt, own);
    if (round_max == nullptr) return Interrupt::Status("template search");
    LabelSearch<Objective> exact(costs, round_mixes, objective, 0, round_bounds, *round_max,
                                 interrupt, moves, node_layouts);
    // Incumbents above the widest guess would bound no later round.
    std::vector<double> terminal_bounds;
    for (size_t i : pending) terminal_bounds.push_back(guesses[i] * (1 + kWidestGuess));
    exact.OpenTerminals(terminal_bounds);
    ASSIGN_OR_RETURN(std::vector<MixResult> round, exact.Run(round_options));
    for (size_t j = 0; j < pending.size(); ++j) {
      MixResult& r = round[j];
      if (!r.feasible) continue;
      if (r.best.iteration_time_ms <= round_bounds[j]) {
        results[pending[j]] = std::move(r);
      } else {
        incumbents[pending[j]] = std::min(incumbents[pending[j]], r.best.iteration_time_ms);
      }
    }
  }
  return absl::OkStatus();
}

// The whole-layer set-up of `mixes` (1f1b): each mix's root bound and the prefix tables for
// the maxima up to kWholeLayerTableSlack above it.
template <SearchObjective Objective>
absl::Status SetUpWholeLayer(const StageCosts& costs, const std::vector<NodeMix>& mixes,
                             const Objective& objective, const PrefixMaxBound& prefix_max,
                             Interrupt& interrupt, WholeLayerSetUp& set_up) {
  std::vector<double> least_max(mixes.size());
  for (size_t i = 0; i < mixes.size(); ++i) least_max[i] = prefix_max.ForMix(mixes[i]);
  set_up.guesses =
      WholeLayerBound(costs, objective.microbatches).ForMixes(mixes, least_max, interrupt);
  if (interrupt.Poll()) return Interrupt::Status("template search");
  std::vector<double> widest(mixes.size()), most_max;
  for (size_t i = 0; i < mixes.size(); ++i) {
    const double guess = set_up.guesses[i];
    widest[i] = guess > 0 && std::isfinite(guess) ? guess * (1 + kWholeLayerTableSlack)
                                                  : std::numeric_limits<double>::infinity();
  }
  WholeLayerWindows(costs, mixes, objective.microbatches, prefix_max, widest, least_max, most_max);
  set_up.prefix.emplace(costs, mixes, least_max, most_max, interrupt);
  if (interrupt.Poll()) return Interrupt::Status("template search");
  if (!set_up.prefix->built()) set_up.prefix.reset();  // too large: the search does without
  return absl::OkStatus();
}

// The mixes not settled yet: narrow beam passes find templates fast; their times bound the
// exact pass, which then skips every stage and label that provably cannot beat them. With
// `whole_layer`, both are pruned at boundary states by the whole-layer curves, and the beam
// rounds guess from the whole-layer root bound.
template <SearchObjective Objective>
absl::Status SettleWithIncumbents(const StageCosts& costs, const std::vector<NodeMix>& mixes,
                                  const Objective& objective, const PrefixMaxBound& prefix_max,
                                  bool guess, Interrupt& interrupt, const SearchOptions& options,
                                  Moves moves, NodeLayoutsByType* node_layouts, bool whole_layer,
                                  std::vector<std::optional<MixResult>>& results) {
  std::vector<size_t> rest;
  std::vector<NodeMix> rest_mixes;
  for (size_t i = 0; i < mixes.size(); ++i) {
    if (!results[i]) {
      rest.push_back(i);
      rest_mixes.push_back(mixes[i]);
    }
  }
  if (rest.empty()) return absl::OkStatus();
  if (interrupt.Poll()) return Interrupt::Status("template search");
  OwnPrefixMax own;
  const PrefixMaxBound* rest_max =
      PrefixMaxFor(costs, rest_mixes, rest.size() == mixes.size(),
                   LabelSearch<Objective>::PartialNodes(moves), prefix_max, interrupt, own);
  if (rest_max == nullptr) return Interrupt::Status("template search");
  const PrefixMaxBound& bound = *rest_max;
  WholeLayerSetUp set_up;
  if constexpr (std::is_same_v<Objective, OneFOneBObjective>) {
    if (whole_layer) {
      RETURN_IF_ERROR(SetUpWholeLayer(costs, rest_mixes, objective, bound, interrupt, set_up));
    }
  }
  const WholeLayerSetUp* whole = set_up.prefix ? &set_up : nullptr;
  ASSIGN_OR_RETURN(std::vector<double> upper_bounds,
                   FindIncumbents(costs, rest_mixes, objective, bound, guess, interrupt, options,
                                  moves, node_layouts, whole));
  LabelSearch<Objective> exact(costs, rest_mixes, objective, 0, upper_bounds, bound, interrupt,
                               moves, node_layouts);
  PruneWithWholeLayer(costs, rest_mixes, objective, bound, upper_bounds, whole, exact);
  ASSIGN_OR_RETURN(std::vector<MixResult> found, exact.Run(options));
  for (size_t j = 0; j < rest.size(); ++j) results[rest[j]] = std::move(found[j]);
  return absl::OkStatus();
}

// Where the objective guesses (kGuessFromLayers): below kExactGuessesBelowLayers exact
// rounds with guessed bounds, then the beam's incumbents and the exact pass for whatever is
// left; from there on beam rounds with guessed bounds give the incumbents of the exact
// pass, as before.
template <SearchObjective Objective>
absl::StatusOr<std::vector<MixResult>> BranchAndBoundWith(const CostModel& model,
                                                          const std::vector<NodeMix>& mixes,
                                                          Objective objective,
                                                          const SearchOptions& options, Moves moves,
                                                          WholeLayerPruning pruning) {
  Interrupt interrupt(options.cancelled);
  const StageCosts costs(model);
  std::optional<StateSpace> space(std::in_place, model, mixes, &interrupt);
  if (interrupt.stopped()) return Interrupt::Status("template search");
  if (moves == Moves::kAuto) {
    moves =
        PreferNodeMoves(model.num_layers(), space->num_useful()) ? Moves::kNodes : Moves::kStages;
  }
  if (!LabelSearch<Objective>::PartialNodes(moves)) {  // the passes' own node states
    space.emplace(model, mixes, &interrupt, false);
    if (interrupt.stopped()) return Interrupt::Status("template search");
  }
  const PrefixMaxBound prefix_max(costs, *space, mixes, interrupt);
  if (interrupt.Poll()) return Interrupt::Status("template search");
  std::vector<std::optional<MixResult>> settled(mixes.size());
  // The node layouts, shared by every pass (NodeLayouts keeps them for the next passes).
  NodeLayoutsByType node_layouts;
  const int L = model.num_layers();
  const bool guess = L >= Objective::kGuessFromLayers;
  // The whole-layer bound is 1f1b's, and node moves have no boundary-state prefix to prune.
  const bool whole_layer = std::is_same_v<Objective, OneFOneBObjective> &&
                           moves == Moves::kStages && model.num_types() <= kWholeLayerMaxTypes &&
                           (pruning == WholeLayerPruning::kOn ||
                            (pruning == WholeLayerPruning::kAuto && L >= kExactGuessesBelowLayers));
  const bool exact_guesses = guess && L < kExactGuessesBelowLayers && !whole_layer;
  if (exact_guesses) {
    RETURN_IF_ERROR(SettleByGuessedRounds(costs, mixes, objective, prefix_max, interrupt, options,
                                          moves, &node_layouts, settled));
  }
  // After exact rounds, the mixes left have optima far above the guesses: beam rounds with
  // guesses would find nothing.
  RETURN_IF_ERROR(SettleWithIncumbents(costs, mixes, objective, prefix_max, guess && !exact_guesses,
                                       interrupt, options, moves, &node_layouts, whole_layer,
                                       settled));
  std::vector<MixResult> results;
  results.reserve(mixes.size());
  for (std::optional<MixResult>& r : settled) results.push_back(*std::move(r));
  return results;
}

// The branch and bound above. With `moves` kNodes (kAuto: where PreferNodeMoves) every pass
// moves by whole nodes (1f1b; the same optima,
// docs/architecture/template-search.md#node-moves-1f1b); should a node's front outgrow what an
// entry can name (NodeFrontTooLarge), the request is redone with stage moves.
template <SearchObjective Objective>
absl::StatusOr<std::vector<MixResult>> BranchAndBound(
    const CostModel& model, const std::vector<NodeMix>& mixes, Objective objective,
    const SearchOptions& options, Moves moves = Moves::kStages,
    WholeLayerPruning pruning = WholeLayerPruning::kAuto) {
  if (moves != Moves::kStages) {
    absl::StatusOr<std::vector<MixResult>> results =
        BranchAndBoundWith(model, mixes, objective, options, moves, pruning);
    if (results.ok() || !IsNodeFrontTooLarge(results.status())) return results;
  }
  return BranchAndBoundWith(model, mixes, objective, options, Moves::kStages, pruning);
}

}  // namespace oobleck::template_search

#endif  // OOBLECK_CORE_TEMPLATE_SEARCH_BRANCH_AND_BOUND_H_
