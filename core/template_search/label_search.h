// The label DP of the template search (docs/architecture/template-search.md#states): one pass over
// the layers right to left, keeping at each state (a, U, node state) the Pareto front of suffix
// labels under the objective's dominance, pruned by the incumbents of the mixes the state serves.
// The terminal state (0, mix, boundary) holds the optimum of every mix at once. Targets of one
// position are independent, so they are computed in parallel, each by one thread in a fixed order:
// results do not depend on the thread count.
#ifndef OOBLECK_CORE_TEMPLATE_SEARCH_LABEL_SEARCH_H_
#define OOBLECK_CORE_TEMPLATE_SEARCH_LABEL_SEARCH_H_

#include <algorithm>
#include <atomic>
#include <climits>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "core/cost_model.h"
#include "core/interrupt.h"
#include "core/search.h"
#include "core/status_macros.h"
#include "core/template_search/bottleneck_bound.h"
#include "core/template_search/node_dp.h"
#include "core/template_search/objectives.h"
#include "core/template_search/prefix_cost_bound.h"
#include "core/template_search/served_mixes.h"
#include "core/template_search/split_bound.h"
#include "core/template_search/stage_costs.h"
#include "core/template_search/state_space.h"
#include "core/template_search/tolerances.h"
#include "core/template_search/whole_layer_bound.h"
#include "tbb/parallel_for.h"

namespace oobleck::template_search {

template <SearchObjective Objective>
class LabelSearch {
 public:
  using Label = typename Objective::Label;
  struct Entry {
    Label label;
    int64_t from_state;  // FrontIndex of the source state; -1 for the empty suffix
    int32_t from_entry;
    int16_t type;
    int16_t gpus;
  };
  // A source label as a node-move merge reads it: its sum, max and stages, and its index in
  // its front.
  struct Stair {
    double sum, max;
    int32_t index, stages;
  };

  // beam_width > 0 keeps only that many labels per state (a heuristic that yields valid
  // templates, used for incumbents); 0 is exact. upper_bounds[i] (may be +inf) is a time
  // some template of mixes[i] achieves: the exact search drops what cannot beat it. The
  // set-up polls `interrupt`; once it has stopped, only Run (which then returns CANCELLED)
  // may be called. With `moves` kNodes (1f1b only; ignored otherwise) states exist only at
  // node boundaries and a move places a whole node (NodeLayouts): from `node_layouts`, the
  // layouts the request's earlier passes kept (null: the pass's own).
  LabelSearch(const StageCosts& costs, const std::vector<NodeMix>& mixes, Objective objective,
              int beam_width, const std::vector<double>& upper_bounds,
              const PrefixMaxBound& prefix_max, Interrupt& interrupt, Moves moves = Moves::kStages,
              NodeLayoutsByType* node_layouts = nullptr)
      : model_(costs.model()),
        costs_(costs),
        mixes_(mixes),
        objective_(objective),
        space_(model_, mixes, &interrupt, PartialNodes(moves)),
        prefix_max_(prefix_max),
        prefix_cost_(model_, space_, objective.CommonPrefixCoefficient(), interrupt),
        split_(
            model_, prefix_cost_, space_,
            kSplit ? objective.CommonPrefixCoefficient() : std::numeric_limits<double>::quiet_NaN(),
            interrupt),
        interrupt_(interrupt),
        beam_width_(beam_width),
        node_moves_(kNodeMovesPossible && moves == Moves::kNodes),
        node_layouts_(node_layouts != nullptr ? *node_layouts : own_node_layouts_) {
    const CostModel& model = model_;
    // Oobleck's formula with M is defined for at most M stages (CostModel::Evaluate).
    if (model.kind() == CostModelKind::kOobleckSosp23 && model.problem().microbatches > 0) {
      stage_cap_ = model.problem().microbatches;
    }
    const int L = model.num_layers();
    compute_prefix_.resize(model.num_types());
    for (int t = 0; t < model.num_types(); ++t) {
      compute_prefix_[t].resize(model.node_type(t).gpus_per_node + 1);
      for (int g : model.stage_sizes(t)) {
        compute_prefix_[t][g].resize(L + 1);
        for (int l = 0; l <= L; ++l) compute_prefix_[t][g][l] = model.ComputeMs(t, g, 0, l);
      }
    }
    if (interrupt.stopped()) return;  // the state space is incomplete
    targets_.assign(space_.num_useful(), {});
    for (size_t i = 0; i < mixes.size(); ++i) {
      if (!AddTargetMix(mixes[i], i < upper_bounds.size()
                                      ? upper_bounds[i]
                                      : std::numeric_limits<double>::infinity())) {
        return;
      }
    }
    if constexpr (kNodeMovesPossible) {
      if (node_moves_) MakeNodeLayouts(upper_bounds);
    }
  }

  // Whether a search with `moves` has partial node states (StateSpace's partial_nodes): all
  // but node moves. The bottleneck bound it is given must be built on a space with the same.
  static bool PartialNodes(Moves moves) { return !(kNodeMovesPossible && moves == Moves::kNodes); }

  // A lower bound on the time of every pipeline over `mix`.
  double RootLowerBound(const NodeMix& mix) const {
    const int L = model_.num_layers();
    const PrefixCost prefix = prefix_cost_.At(L, space_.Encode(mix), 0);
    return objective_.LowerBound(Label{}, prefix, prefix_max_.ForMix(mix),
                                 std::min(L, MixGpus(mix)), false);
  }

  // Terminal states (a = 0) keep their mix's best pipeline up to `terminal_bounds[i]` (per
  // mix; above its bound): Run then also returns, for a mix whose optimum is above its bound,
  // the best template within the terminal bound it met (if any), an incumbent for a later
  // pass. Nothing else changes: every label the bound lets through still reaches the
  // terminal, so a template within the bound is still optimal.
  // A search stopped while its state space was walked has no space to index (Run then
  // answers the interrupt's status).
  void OpenTerminals(const std::vector<double>& terminal_bounds) {
    if (interrupt_.stopped()) return;
    terminal_bounds_.assign(space_.num_useful(), -std::numeric_limits<double>::infinity());
    for (size_t i = 0; i < mixes_.size() && i < terminal_bounds.size(); ++i) {
      double& bound = terminal_bounds_[space_.Dense(space_.Encode(mixes_[i]))];
      bound = std::max(bound, WithSlack(terminal_bounds[i]));
    }
  }

  absl::StatusOr<std::vector<MixResult>> Run(const SearchOptions& options) {
    if (interrupt_.stopped()) return Interrupt::Status("template search");
    max_labels_ = options.max_labels;
    const int L = model_.num_layers();
    const int NS = space_.num_node_states();
    const int num_targets = space_.num_useful() * NS;
    layer_fronts_.assign(num_targets, {});
    held_labels_.assign(num_targets, {});
    label_positions_.assign(num_targets, {});
    held_blocks_.assign(num_targets, {});
    const bool stairs = StairsKept();
    held_stairs_.assign(stairs ? num_targets : 0, {});
    const int empty_suffix = TargetOf(0, 0);
    held_labels_[empty_suffix].push_back({Label{}, -1, -1, -1, 0});
    AddHeld(empty_suffix,
            {.offset = 0, .position = L, .count = 1, .least_primary = 0, .least_max = 0});
    if (stairs) AppendStairs(held_labels_[empty_suffix], held_stairs_[empty_suffix]);
    for (int a = L - 1; a >= 0; --a) {
      if (interrupt_.Poll()) return Interrupt::Status("template search");
      if (node_moves_) RETURN_IF_ERROR(ComputeNodeLayouts(a));
      PrepareLayer(a);
      tbb::parallel_for(0, num_targets, [&](int target) {
        if (interrupt_.Every(target)) return;
        ComputeTarget(a, space_.Code(target / NS), target % NS);
      });
      if (interrupt_.stopped()) return Interrupt::Status("template search");
      if (over_budget_.load(std::memory_order_relaxed)) return OverBudget(a);
      // After the layer's barrier (the targets above read these lists and labels); each
      // target's are its own, and every read of a front here is a cache miss, so not on one
      // thread.
      tbb::parallel_for(0, num_targets, [&](int target) {
        std::vector<Entry>& front = layer_fronts_[target];
        if (front.empty()) return;
        std::vector<Entry>& held = held_labels_[target];
        double least_primary = std::numeric_limits<double>::infinity();
        double least_max = std::numeric_limits<double>::infinity();
        for (const Entry& e : front) {
          least_primary = std::min(least_primary, Objective::Primary(e.label));
          if constexpr (Objective::kSumPlusMaxBound) least_max = std::min(least_max, e.label.max);
        }
        AddHeld(target, Held{.offset = static_cast<int64_t>(held.size()),
                             .position = a,
                             .count = static_cast<int32_t>(front.size()),
                             .least_primary = least_primary,
                             .least_max = least_max});
        held.insert(held.end(), front.begin(), front.end());
        if (stairs) AppendStairs(front, held_stairs_[target]);
        front.clear();
      });
      if (options.progress) options.progress(phase_name(), L - a, L);
    }
    std::vector<MixResult> results;
    results.reserve(mixes_.size());
    if (node_moves_) {
      RETURN_IF_ERROR(ExtractWithNodes(results));
    } else {
      for (const NodeMix& mix : mixes_) results.push_back(Extract(mix));
    }
    if (options.stats != nullptr) {
      options.stats->candidates += candidates_;
      options.stats->labels += labels_;
    }
    return results;
  }

 private:
  int MixGpus(const NodeMix& mix) const {
    int gpus = 0;
    for (int t = 0; t < model_.num_types(); ++t) gpus += mix[t] * model_.node_type(t).gpus_per_node;
    return gpus;
  }

  // Lists `mix` at every multiset u inside it, with the nodes it leaves for the layers
  // before a state on u and its incumbent: a state serves all the mixes listed at its u.
  // Up to TemplateSearchLimits::max_mix_entries in all, so polled; false if stopped.
  bool AddTargetMix(const NodeMix& mix, double upper_bound) {
    const int T = model_.num_types();
    const int code = space_.Encode(mix);
    const TargetMix entry{0, 0, WithSlack(upper_bound), MixSize(mix),
                          std::min(model_.num_layers(), MixGpus(mix))};
    // Every sub-multiset u of the mix, in increasing code order (an odometer on counts).
    std::vector<int> counts(T, 0);
    int u = 0;
    for (int64_t step = 0;; ++step) {
      if (step % kBoxWalkPollStride == 0 && interrupt_.Poll()) return false;
      targets_[space_.Dense(u)].push_back(entry);
      targets_[space_.Dense(u)].back().free = code - u;
      targets_[space_.Dense(u)].back().dense_free = space_.Dense(code - u);
      int t = 0;
      while (t < T && counts[t] == mix[t]) {
        u -= counts[t] * space_.stride(t);
        counts[t] = 0;
        ++t;
      }
      if (t == T) return true;
      ++counts[t];
      u += space_.stride(t);
    }
  }

  // The bounds on what the layers [0, a) cost on each free multiset and partial node; they
  // do not depend on the state's own nodes, so the states of a layer share them. Only free
  // multisets strictly inside some mix are read (a state that reads one holds a node, so
  // the free nodes plus that node are inside the mix); the others, the largest mixes
  // themselves (a third of the multisets at 4 types of up to 8 nodes), are skipped.
  void PrepareLayer(int a) {
    const int NS = space_.num_node_states();
    layer_.resize(static_cast<size_t>(space_.num_useful()) * NS);
    serve_tests_.resize(layer_.size());
    tbb::parallel_for(0, static_cast<int>(layer_.size()), [&](int i) {
      if (interrupt_.Every(i) || !space_.strictly_within(space_.Code(i / NS))) return;
      if (node_moves_ && i % NS != 0) return;  // no partial states
      LayerBound& b = layer_[i];
      b.rest_max_ms = prefix_max_.At(a, space_.Code(i / NS), i % NS);
      b.prefix = prefix_cost_.At(a, space_.Code(i / NS), i % NS);
      b.empty_stage_bound = std::isinf(b.rest_max_ms)
                                ? b.rest_max_ms
                                : objective_.StageBound(0.0, 0.0, b.prefix, b.rest_max_ms);
      serve_tests_[ServeTestIndex(i / NS, i % NS)] = {
          b.rest_max_ms, b.empty_stage_bound,
          split_.Prefix(a, space_.Code(i / NS), i % NS, b.rest_max_ms)};
    });
    for (std::atomic<int>& made : curve_made_) made.store(0, std::memory_order_relaxed);
  }

 public:
  // Prunes the boundary states of the pass (stage moves, 1f1b) with `bound` too, for which
  // `least_max_ms[i]` and `most_max_ms[i]` bound the largest stage compute of a pipeline of
  // mixes[i] that can beat its bound (its window; +inf: no whole-layer bound for the mix).
  // `bound` must outlive Run.
  void UseWholeLayerBound(const WholeLayerPrefixBound& bound,
                          const std::vector<double>& least_max_ms,
                          const std::vector<double>& most_max_ms) {
    if (interrupt_.stopped() || node_moves_ || !kSplit) return;
    whole_layer_ = &bound;
    const int n = space_.num_useful();
    mix_least_max_.assign(n, 0);
    std::vector<double> mix_most_max(n, 0);
    for (size_t i = 0; i < mixes_.size(); ++i) {
      const int d = space_.Dense(space_.Encode(mixes_[i]));
      mix_least_max_[d] = least_max_ms[i];
      mix_most_max[d] = std::max(mix_most_max[d], most_max_ms[i]);
    }
    // Per free multiset, the windows of the mixes its states serve (those it is inside).
    free_least_max_.assign(n, std::numeric_limits<double>::infinity());
    free_most_max_.assign(n, 0);
    for (int d = 0; d < n; ++d) {
      for (const TargetMix& m : targets_[d]) {
        const int x = space_.Dense(space_.Code(d) + m.free);
        free_least_max_[d] = std::min(free_least_max_[d], mix_least_max_[x]);
        free_most_max_[d] = std::max(free_most_max_[d], mix_most_max[x]);
      }
    }
    curves_.assign(n, {});
    curve_made_ = std::vector<std::atomic<int>>(n);
  }

 private:
  // The whole-layer curve of the free multiset `dense_free` at the current layer a, made by
  // the first target that asks (the others wait: it takes microseconds); null if none.
  const WholeLayerCurve* CurveAt(int a, int dense_free) {
    std::atomic<int>& made = curve_made_[dense_free];
    int expected = 0;
    if (made.compare_exchange_strong(expected, 1, std::memory_order_acq_rel)) {
      MakeCurve(a, dense_free);
      made.store(2, std::memory_order_release);
    } else {
      while (made.load(std::memory_order_acquire) != 2) std::this_thread::yield();
    }
    return curves_[dense_free].x.empty() ? nullptr : &curves_[dense_free];
  }
  // The curve's caps run from the least max any served mix can have (and the prefix's own
  // forced bottleneck) to the largest any can use, at most kWholeLayerCurveCaps of them. A cap
  // without a table takes the hull's sum; above the last cap the tail is the hull's
  // min_{C >= cap} S(C) + k C.
  void MakeCurve(int a, int dense_free) {
    WholeLayerCurve& c = curves_[dense_free];
    c.x.clear();
    const LayerBound& b = layer_[static_cast<size_t>(dense_free) * space_.num_node_states()];
    const double bottom = std::max(b.rest_max_ms, free_least_max_[dense_free]);
    const double top = free_most_max_[dense_free];
    if (!(bottom > 0) || !std::isfinite(bottom) || !std::isfinite(top) || top < bottom) return;
    const int code = space_.Code(dense_free);
    NodeMix free(model_.num_types());
    for (int t = 0; t < model_.num_types(); ++t) free[t] = space_.count(code, t);
    c.k = objective_.CommonPrefixCoefficient();
    c.first = WholeLayerCurve::GridIndex(bottom) - 1;
    const int n = std::min(WholeLayerCurve::GridIndex(top) + 3 - c.first, kWholeLayerCurveCaps);
    c.x.resize(n);
    c.q.resize(n);
    c.suffix.resize(n);
    for (int i = 0; i < n; ++i) {
      c.x[i] = whole_layer_->Cap(c.first + i);
      const double q = whole_layer_->Q(a, free, c.first + i);
      c.q[i] = q == -std::numeric_limits<double>::infinity() ? b.prefix.Sum(c.x[i]) : q;
    }
    c.suffix[n - 1] = b.prefix.SumPlus(c.k, c.x[n - 1]);
    for (int i = n - 2; i >= 0; --i) {
      c.suffix[i] = std::min(c.q[i + 1] + c.k * c.x[i], c.suffix[i + 1]);
    }
  }

  // By node state, then free multiset: a state reads its served mixes' tests in increasing
  // order of their free multisets, all of one node state.
  size_t ServeTestIndex(int dense_free, int ns) const {
    return static_cast<size_t>(ns) * space_.num_useful() + dense_free;
  }

  // The best two labels of a state so far (by final time and by primary cost): most
  // candidates lose to one of them, and checking those first keeps the sort small.
  struct Sentinels {
    Label best_final{}, best_primary{};
    bool have = false;
  };

  // Stages [a, l) of `gpus` GPUs on type `type` whose right neighbour state is
  // (l, u_src, ns_src), entered over `in`.
  struct StageSource {
    int type, gpus, u_src, ns_src;
    Link in;
    bool new_node_at_right;
  };

  void ComputeTarget(int a, int u, int ns) {
    if (over_budget_.load(std::memory_order_relaxed)) return;
    if (!space_.within(u) || space_.size(u) == 0) return;
    if (a > 0 && ns == 0 && !space_.strictly_within(u)) return;
    if ((a == 0 || node_moves_) && ns != 0) return;
    const int L = model_.num_layers();
    if (L - a < space_.size(u)) return;  // every node needs at least one stage
    // A partial node must be one of u's (checked before the served mixes are listed:
    // with many types most partial states of a multiset are of types it lacks).
    if (ns != 0 && space_.count(u, space_.PartialOf(ns).first) == 0) return;
    // A state none of whose sources holds a label at any later position has no candidate:
    // it returns before listing its served mixes (most states of a tightly bounded pass).
    bool has_source = false;
    ForEachSource(a, u, ns, [&](const StageSource& source) {
      has_source = has_source || !label_positions_[TargetOf(source.u_src, source.ns_src)].empty();
    });
    if (!has_source) return;
    const double floor_ms = prefix_cost_.floor_ms(a);
    ServedMixes<Objective> served(objective_, a, floor_ms);
    const int NS = space_.num_node_states();
    const SplitParts suffix = split_.Suffix(a, u, ns);
    const std::vector<TargetMix>& mixes = targets_[space_.Dense(u)];
    TargetMix open_mix{};  // see OpenTerminals; outlives `served`, which points to it
    for (size_t k = 0; k < mixes.size(); ++k) {
      // Most tests are cache misses and most mixes are dropped by them: fetch ahead.
      constexpr size_t kPrefetchAhead = 8;
      if (k + kPrefetchAhead < mixes.size()) {
        __builtin_prefetch(&serve_tests_[ServeTestIndex(mixes[k + kPrefetchAhead].dense_free, ns)]);
      }
      const TargetMix& mix = mixes[k];
      if (a == 0 ? mix.free != 0 : ns == 0 && mix.free == 0) continue;  // nodes must match
      const int dense_free = mix.dense_free;
      const bool open = a == 0 && !terminal_bounds_.empty();
      if (open) {  // the one mix a terminal serves, with its terminal bound
        open_mix = mix;
        open_mix.bound = std::max(mix.bound, terminal_bounds_[space_.Dense(u)]);
      }
      const bool whole_layer = whole_layer_ != nullptr && ns == 0 && a > 0;
      served.Add(open ? open_mix : mix, serve_tests_[ServeTestIndex(dense_free, ns)],
                 layer_[static_cast<size_t>(dense_free) * NS + ns],
                 prefix_cost_.floor_ms(L) - floor_ms, suffix,
                 whole_layer ? CurveAt(a, dense_free) : nullptr,
                 whole_layer ? mix_least_max_[space_.Dense(u + mix.free)] : 0);
    }
    if (served.empty()) return;
    // Scratch owned by this thread for this call (cleared here, dead when it returns): no
    // second ComputeTarget can start on the thread meanwhile, since none waits on TBB. The
    // objectives' and ServedMixes' thread_local scratch relies on the same.
    thread_local std::vector<Entry> candidates;
    candidates.clear();
    Sentinels sentinels;
    ForEachSource(a, u, ns, [&](const StageSource& source) {
      PullStages(a, source, served, sentinels, candidates);
    });
    candidates_ += static_cast<int64_t>(candidates.size());
    std::vector<Entry>& front = layer_fronts_[TargetOf(u, ns)];
    Reduce(candidates, front, a);
    if ((labels_ += static_cast<int64_t>(front.size())) > max_labels_) {
      over_budget_.store(true, std::memory_order_relaxed);
    }
  }

  // The pass would hold more than max_labels_ labels (by position a).
  absl::Status OverBudget(int a) const {
    return OverLabelBudgetError(absl::StrCat(
        "the template search would hold more than ", max_labels_,
        " labels (the limit of one pass, its memory) by layer ", a, " of ", model_.num_layers(),
        "; ask for fewer node types or smaller mixes (min_nodes/max_nodes, mixes)"));
  }

  // Calls f(source) for every stage size the state (a, u, ns) can place at a, in a fixed
  // order: on a new node of each type u holds (ns = 0), or on its partial node.
  template <typename F>
  void ForEachSource(int a, int u, int ns, F&& f) const {
    if (ns == 0 && node_moves_) {  // a whole node of each type u holds (gpus unused)
      for (int t = 0; t < model_.num_types(); ++t) {
        if (space_.count(u, t) == 0) continue;
        f(StageSource{t, 0, u - space_.stride(t), 0, Link::kNone, true});
      }
      return;
    }
    if (ns == 0) {
      const Link in_boundary = a == 0 ? Link::kNone : Link::kInterNode;
      for (int t = 0; t < model_.num_types(); ++t) {
        if (space_.count(u, t) == 0) continue;
        const int G = model_.node_type(t).gpus_per_node;
        for (int g : model_.stage_sizes(t)) {
          f(g == G ? StageSource{t, g, u - space_.stride(t), 0, in_boundary, true}
                   : StageSource{t, g, u, space_.PartialState(t, G - g), in_boundary, false});
        }
      }
      return;
    }
    const auto [t, used] = space_.PartialOf(ns);
    for (int g : model_.stage_sizes(t)) {
      if (g == used) {
        f(StageSource{t, g, u - space_.stride(t), 0, Link::kIntraNode, true});
      } else if (g < used) {
        f(StageSource{t, g, u, space_.PartialState(t, used - g), Link::kIntraNode, false});
      }
    }
  }

  // Appends to `candidates` the labels of every stage [a, l) from `source` that some served
  // mix could still use.
  void PullStages(int a, const StageSource& source, ServedMixes<Objective>& served,
                  Sentinels& sentinels, std::vector<Entry>& candidates) {
    if constexpr (kNodeMovesPossible) {
      if (node_moves_) return PullNodes(a, source, served, sentinels, candidates);
    }
    const int L = model_.num_layers();
    const int t = source.type, g = source.gpus;
    const std::vector<double>& compute_ms = compute_prefix_[t][g];
    const bool may_break = served.may_break();
    // Only the positions where the source state holds labels, in increasing order (they
    // were recorded right to left); all are after a.
    const int source_target = TargetOf(source.u_src, source.ns_src);
    const std::vector<Held>& positions = label_positions_[source_target];
    const Entry* const held = held_labels_[source_target].data();
    for (auto it = positions.rbegin(); it != positions.rend(); ++it) {
      if constexpr (Objective::kSumPlusMaxBound) {
        if (BlockHopeless(a, positions, it, held_blocks_[source_target], compute_ms, served)) {
          it += kHeldBlock - 1;  // to the block's last position; the loop steps past it
          continue;
        }
      }
      const int l = it->position;
      if (l == L && (!source.new_node_at_right || source.u_src != 0)) continue;
      // Compute grows with l, so once one stage cannot beat the incumbent no longer stage
      // can either (with the weakest coefficient any longer stage may have).
      // (From the tables: equal to ComputeMs up to rounding, far inside the bound's slack.)
      const double compute = compute_ms[l] - compute_ms[a];
      if (may_break && served.TooCostly(compute)) break;
      const int64_t src = FrontIndex(l, source.u_src, source.ns_src);
      const std::span<const Entry> sources(held + it->offset, it->count);
      // The labels are tested mix by mix below; here only what no mix can use goes,
      // before its sources are read.
      if (served.HopelessForAll(compute, prefix_cost_.floor_ms(L) - prefix_cost_.floor_ms(l))) {
        continue;
      }
      const int max_after = std::min(model_.MaxStagesFromEnd(t, g, a, l), stage_cap_);
      if (max_after < 1) continue;
      const Link out = l == L                     ? Link::kNone
                       : source.new_node_at_right ? Link::kInterNode
                                                  : Link::kIntraNode;
      const double c = costs_.StageCostMs(t, g, a, l, source.in, out);
      if constexpr (Objective::kSumPlusMaxBound) {
        // Every extension of the front has at least its least sum plus c, and (clamped, as
        // Keep does) at least the max of this label, so if no served mix can use this one
        // (SomeFits is nondecreasing in both), none can use any: the front is not read. The
        // sum limits G(max) learnt here settle the labels' own tests too.
        Label least{};
        least.sum = it->least_primary + c;
        least.max = std::max({c, served.rest_max_ms(), it->least_max});
        if (!served.SomeFits(least)) continue;
      }
      // Exact fronts are in ParetoFilter's order (1f1b: by sum); a beam front is by final.
      const bool by_sum = beam_width_ == 0 && Objective::kFrontsByPrimary;
      const auto use = [&](int32_t i) {
        if (Objective::Stages(sources[i].label) + 1 > max_after) return;
        Label label = objective_.Extend(sources[i].label, c);
        if (!Keep(a, label, served, sentinels)) return;
        candidates.push_back({label, src, i, static_cast<int16_t>(t), static_cast<int16_t>(g)});
      };
      objective_.ForUsefulSources(sources, c, served.rest_max_ms(), served.most_primary(), by_sum,
                                  use);
    }
  }

  // Whether a candidate label of a state at layer `a` is worth keeping: clamped to what the
  // served mixes can still use, no sentinel dominates it and some served mix can use it (it
  // then tightens the sentinels). One test for stage moves and node moves alike.
  bool Keep(int a, Label& label, ServedMixes<Objective>& served, Sentinels& sentinels) {
    objective_.Clamp(label, served.rest_max_ms());
    if (a > 0 && sentinels.have &&
        (objective_.Dominates(sentinels.best_final, label) ||
         objective_.Dominates(sentinels.best_primary, label))) {
      return false;
    }
    // An open terminal (OpenTerminals) meets many complete pipelines; only a faster one than
    // the best so far can be its answer (Reduce keeps the first of least final time).
    const bool open_terminal = a == 0 && !terminal_bounds_.empty();
    if (open_terminal && sentinels.have &&
        !(objective_.Final(label) < objective_.Final(sentinels.best_final))) {
      return false;
    }
    if (!served.SomeFits(label)) return false;
    if (a > 0 || open_terminal) Remember(label, sentinels);
    return true;
  }
  void Remember(const Label& label, Sentinels& sentinels) const {
    if (!sentinels.have || objective_.Final(label) < objective_.Final(sentinels.best_final)) {
      sentinels.best_final = label;
    }
    if (!sentinels.have || Objective::Primary(label) < Objective::Primary(sentinels.best_primary)) {
      sentinels.best_primary = label;
    }
    sentinels.have = true;
  }

  // A complete pipeline (a = 0: no layers left) has no future: only its final time
  // matters, and one entry suffices. Otherwise keep the Pareto front under the objective's
  // dominance (the beam keeps only its best few by final time).
  void Reduce(std::vector<Entry>& candidates, std::vector<Entry>& front, int a) {
    if (candidates.empty()) return;
    if (a == 0) {
      auto best = std::min_element(candidates.begin(), candidates.end(),
                                   [&](const Entry& x, const Entry& y) {
                                     return objective_.Final(x.label) < objective_.Final(y.label);
                                   });
      front.push_back(*best);
      return;
    }
    objective_.ParetoFilter(candidates, front);
    if (beam_width_ > 0 && static_cast<int>(front.size()) > beam_width_) {
      std::stable_sort(front.begin(), front.end(), [&](const Entry& x, const Entry& y) {
        return objective_.Final(x.label) < objective_.Final(y.label);
      });
      front.resize(beam_width_);
    }
  }

  // The target (u, ns), densely: the index of every per-(u, ns) table.
  int TargetOf(int u, int ns) const { return space_.Dense(u) * space_.num_node_states() + ns; }
  // The index of state (a, u, ns), which entries name their source by: (u, ns) outermost,
  // then the layer.
  int64_t FrontIndex(int a, int u, int ns) const {
    return int64_t{TargetOf(u, ns)} * (model_.num_layers() + 1) + a;
  }

  // The labels held at the state with FrontIndex `state` (empty if none).
  std::span<const Entry> Front(int64_t state) const {
    const int positions = model_.num_layers() + 1;
    const auto target = static_cast<size_t>(state / positions);
    const int a = static_cast<int>(state % positions);
    const std::vector<Held>& held = label_positions_[target];  // by decreasing position
    const auto it = std::lower_bound(held.begin(), held.end(), a,
                                     [](const Held& h, int p) { return h.position > p; });
    if (it == held.end() || it->position != a) return {};
    return std::span<const Entry>(held_labels_[target].data() + it->offset, it->count);
  }

  std::string_view phase_name() const {
    return beam_width_ > 0 ? "incumbent search (layers)" : "exact search (layers)";
  }

  // The optimal template of `mix` (or none, then the caller explains why), traced back
  // from its terminal state and evaluated by the cost model.
  MixResult Extract(const NodeMix& mix) const {
    const int64_t terminal = FrontIndex(0, space_.Encode(mix), 0);
    const int best = BestAt(terminal);
    if (best < 0) return Unfound(mix);
    return Evaluated(mix, TraceBack(mix, terminal, best));
  }

  // The result of a mix the search found no template for (the caller explains why).
  static MixResult Unfound(const NodeMix& mix) {
    MixResult result;
    result.mix = mix;
    return result;
  }

  // The entry of least final time at `state` (-1: none).
  int BestAt(int64_t state) const {
    const std::span<const Entry> front = Front(state);
    int best = -1;
    double best_value = std::numeric_limits<double>::infinity();
    for (int i = 0; i < static_cast<int>(front.size()); ++i) {
      const double v = objective_.Final(front[i].label);
      if (v < best_value) {
        best_value = v;
        best = i;
      }
    }
    return best;
  }

  // The result of `mix` with the template the search traced back, evaluated by the model.
  MixResult Evaluated(const NodeMix& mix, PipelineTemplate tmpl) const {
    MixResult result;
    result.mix = mix;
    auto evaluated = model_.Evaluate(std::move(tmpl));
    if (evaluated.ok()) {
      result.feasible = true;
      result.best = *std::move(evaluated);
    } else {
      // Unreachable for a correct search; surfaced rather than hidden.
      result.infeasible_reason = absl::StrCat(
          "internal error: search produced an invalid template: ", evaluated.status().message());
    }
    return result;
  }

  // The stages of the label `entry` at `state`, in pipeline order.
  PipelineTemplate TraceBack(const NodeMix& mix, int64_t state, int32_t entry) const {
    PipelineTemplate tmpl;
    tmpl.mix = mix;
    int node = -1;
    const int positions = model_.num_layers() + 1;
    for (;;) {
      const Entry& e = Front(state)[entry];
      if (e.from_state < 0) break;
      const int a = static_cast<int>(state % positions);
      const int l = static_cast<int>(e.from_state % positions);
      const bool starts_node = state / positions % space_.num_node_states() == 0;  // boundary
      if (starts_node) {
        ++node;
        tmpl.node_order.push_back(e.type);
      }
      Stage stage;
      stage.layer_begin = a;
      stage.layer_end = l;
      stage.node_index = node;
      stage.node_type = e.type;
      stage.gpus = e.gpus;
      tmpl.stages.push_back(stage);
      state = e.from_state;
      entry = e.from_entry;
    }
    return tmpl;
  }

  // The node layouts of every type some mix holds. A node of type t at a > 0 is in a mix of
  // two nodes or more; at a = 0 in any mix holding t: the largest bound of those mixes is
  // what its layouts are pruned with (NodeLayouts).
  void MakeNodeLayouts(const std::vector<double>& upper_bounds) {
    const int T = model_.num_types(), L = model_.num_layers();
    constexpr double kNone = -std::numeric_limits<double>::infinity();
    node_limit_at_0_.assign(T, kNone);
    node_limit_.assign(T, kNone);
    for (size_t i = 0; i < mixes_.size(); ++i) {
      const double bound = WithSlack(
          i < upper_bounds.size() ? upper_bounds[i] : std::numeric_limits<double>::infinity());
      for (int t = 0; t < T; ++t) {
        if (mixes_[i][t] == 0) continue;
        node_limit_at_0_[t] = std::max(node_limit_at_0_[t], bound);
        if (MixSize(mixes_[i]) >= 2) node_limit_[t] = std::max(node_limit_[t], bound);
      }
    }
    floor_prefix_.resize(L + 1);
    for (int l = 0; l <= L; ++l) floor_prefix_[l] = prefix_cost_.floor_ms(l);
    node_layouts_.resize(T);
    computed_limits_.assign(T, {});
    cheapest_prefix_.assign(T, std::vector<double>(L + 1, 0));
    for (int t = 0; t < T; ++t) {
      if (node_limit_at_0_[t] == kNone) continue;
      // The floor depends on the model alone: the same for every pass of the request.
      if (!node_layouts_[t]) {
        node_layouts_[t].emplace(costs_, t, objective_.microbatches, objective_.track_stages,
                                 floor_prefix_);
      }
      computed_limits_[t].assign(L, std::numeric_limits<double>::quiet_NaN());
      for (int l = 0; l < L; ++l) {
        double cheapest = std::numeric_limits<double>::infinity();
        for (int g : model_.stage_sizes(t))
          cheapest = std::min(cheapest, costs_.ComputeMs(t, g, l, l + 1));
        cheapest_prefix_[t][l + 1] = cheapest_prefix_[t][l] + cheapest;
      }
    }
  }
  // The limit a pass's node layouts of type t at first layer a are pruned with.
  double NodeLimit(int t, int a) const { return a == 0 ? node_limit_at_0_[t] : node_limit_[t]; }

  // N_t(a, y) of every type the pass's mixes hold, for the targets of layer a; the labels
  // the layouts hold count against the pass's budget.
  absl::Status ComputeNodeLayouts(int a) {
    const int T = model_.num_types();
    tbb::parallel_for(0, T, [&](int t) {
      if (computed_limits_[t].empty()) return;
      NodeLayouts& layouts = *node_layouts_[t];
      if (layouts.Prepare(a, NodeLimit(t, a), interrupt_)) {
        computed_limits_[t][a] = layouts.computed_limit();
      }
    });
    if (interrupt_.stopped()) return Interrupt::Status("template search");
    int64_t held = 0;
    for (int t = 0; t < T; ++t) {
      if (computed_limits_[t].empty()) continue;
      if (node_layouts_[t]->too_large()) return NodeFrontTooLarge();
      held += node_layouts_[t]->labels();
    }
    if (labels_ + held > max_labels_) return OverBudget(a);
    return absl::OkStatus();
  }

  // Appends to `candidates` the merges of a node of the source's type on [a, y), for every
  // y, with the labels of the boundary state (y, u - t) that some served mix could use.
  void PullNodes(int a, const StageSource& source, ServedMixes<Objective>& served,
                 Sentinels& sentinels, std::vector<Entry>& candidates) {
    const int L = model_.num_layers(), t = source.type, M = objective_.microbatches;
    const NodeLayouts& layouts = *node_layouts_[t];
    const std::vector<double>& cheapest = cheapest_prefix_[t];
    const int source_target = TargetOf(source.u_src, 0);
    const std::vector<Held>& positions = label_positions_[source_target];
    const Entry* const held = held_labels_[source_target].data();
    for (auto it = positions.rbegin(); it != positions.rend(); ++it) {
      const int y = it->position;
      if (y == L && source.u_src != 0) continue;
      // Some stage of the node computes at least its cheapest compute over its GPU count
      // (it has at most that many stages), which grows with y.
      const double least_max = (cheapest[y] - cheapest[a]) / model_.node_type(t).gpus_per_node;
      if (served.may_break() && served.TooCostly(least_max)) break;
      if (served.HopelessForAll(least_max, floor_prefix_[L] - floor_prefix_[y])) continue;
      const std::span<const NodeLabel> nodes = layouts.Front(y);
      // Its least max over the layouts worth keeping is a stage no served mix may use.
      if (nodes.empty() || nodes.front().sum > served.most_primary() ||
          (served.may_break() && served.TooCostly(layouts.LeastMax(y)))) {
        continue;
      }
      const int64_t src = FrontIndex(y, source.u_src, 0);
      const std::span<const Entry> sources(held + it->offset, it->count);
      const auto use = [&](int32_t n, const Label& x, int32_t i) {
        const NodeLabel& node = nodes[n];
        Label label{x.sum + node.sum, std::max(x.max, node.max),
                    std::min(x.stages + node.stages, M)};
        if (!Keep(a, label, served, sentinels)) return;
        candidates.push_back({label, src, i, static_cast<int16_t>(t),
                              static_cast<int16_t>(static_cast<uint16_t>(n))});
      };
      if (beam_width_ > 0) {  // a beam front is a few labels in order of final time
        const std::span<const Entry> sources(held + it->offset, it->count);
        for (int32_t n = 0; n < static_cast<int32_t>(nodes.size()); ++n) {
          for (int32_t i = 0; i < static_cast<int32_t>(sources.size()); ++i) {
            const Label& x = sources[i].label;
            if (!objective_.track_stages || x.stages <= nodes[n].cap) use(n, x, i);
          }
        }
        continue;
      }
      // The next front this scan reads (the fronts lie right to left, the scan goes left to
      // right): fetched while this one is merged, as most reads of a front miss the cache.
      if (std::next(it) != positions.rend()) {
        __builtin_prefetch(held_stairs_[source_target].data() + std::next(it)->offset);
      }
      MergeStaircases(
          nodes, layouts.ByStages(y),
          std::span<const Stair>(held_stairs_[source_target].data() + it->offset, it->count),
          served.most_primary(), use);
    }
  }

  // Whether the pass keeps every held front's labels in staircase order too (held_stairs_):
  // exact node-move passes, whose merges read them so.
  bool StairsKept() const { return node_moves_ && beam_width_ == 0; }

  // Appends `front`'s labels (an exact 1f1b front, in order of sum) in the order the merge
  // reads them: by stage count (0 for all where memory cannot bind), then by max, then by
  // decreasing index (within one stage count an exact front falls in max as its sum grows,
  // so this is the reverse of the front).
  void AppendStairs(std::span<const Entry> front, std::vector<Stair>& stairs) const {
    if constexpr (kNodeMovesPossible) {
      const size_t begin = stairs.size();
      for (int32_t i = 0; i < static_cast<int32_t>(front.size()); ++i) {
        const Label& x = front[i].label;
        stairs.push_back({x.sum, x.max, i, x.stages});
      }
      const bool track = objective_.track_stages;
      std::sort(stairs.begin() + begin, stairs.end(), [track](const Stair& x, const Stair& y) {
        if (track && x.stages != y.stages) return x.stages < y.stages;
        if (x.max != y.max) return x.max < y.max;
        return x.index > y.index;
      });
    }
  }

  // Calls use(n, i) for merges of node label n with source label i that together dominate
  // every merge of the two fronts (exact fronts): per stage count k of the source and j of
  // the node, the merges of the least sum at each max. A merge at max m is then beaten by
  // (least node sum with max <= m) + (least source sum with max <= m), which has the same
  // stages, so only those (one per max where the sum drops) are used. `stairs` is the source
  // front in AppendStairs' order. Merges above `most_primary` are skipped (ServedMixes::SomeFits
  // would reject them), and so are the sources whose sum plus the least node sum is above it
  // (each is tested: `stairs` is in order of stages and max, not of sum).
  template <typename Use>
  void MergeStaircases(std::span<const NodeLabel> nodes, std::span<const int32_t> node_order,
                       std::span<const Stair> stairs, double most_primary, Use use) const {
    thread_local std::vector<Stair> list;  // scratch of this call: one stage count's sources
    const bool track = objective_.track_stages;
    const double least_node_sum = nodes.front().sum;
    for (size_t first = 0; first < stairs.size();) {
      const int k = stairs[first].stages;
      size_t last = first;
      list.clear();
      for (; last < stairs.size() && (!track || stairs[last].stages == k); ++last) {
        // The same addition as the scan in order of sum made (the sum the merge would give).
        if (stairs[last].sum + least_node_sum <= most_primary) list.push_back(stairs[last]);
      }
      first = last;
      if (list.empty()) continue;
      for (size_t begin = 0; begin < node_order.size();) {
        size_t end = begin;
        while (end < node_order.size() &&
               nodes[node_order[end]].stages == nodes[node_order[begin]].stages) {
          ++end;
        }
        MergeGroup(nodes, node_order.subspan(begin, end - begin), list, track ? k : INT_MIN,
                   most_primary, use);
        begin = end;
      }
    }
  }

  // One (k, j) group of MergeStaircases: both lists in order of max; a node label takes
  // part only if its memory cap admits k stages after it (min_cap).
  template <typename Use>
  void MergeGroup(std::span<const NodeLabel> nodes, std::span<const int32_t> group,
                  const std::vector<Stair>& list, int min_cap, double most_primary, Use use) const {
    constexpr double kInf = std::numeric_limits<double>::infinity();
    double best_node = kInf, best_source = kInf, last = kInf;
    int32_t node_at = -1;
    const Stair* source_at = nullptr;
    size_t n = 0, i = 0;
    while (n < group.size() || i < list.size()) {
      const double node_max = n < group.size() ? nodes[group[n]].max : kInf;
      const double source_max = i < list.size() ? list[i].max : kInf;
      double m;
      if (node_max <= source_max) {
        const NodeLabel& node = nodes[group[n]];
        if (node.cap >= min_cap && node.sum < best_node) {
          best_node = node.sum;
          node_at = group[n];
        }
        m = node_max;
        ++n;
      } else {
        if (list[i].sum < best_source) {
          best_source = list[i].sum;
          source_at = &list[i];
        }
        m = source_max;
        ++i;
      }
      // Use the best merge once every label of this max is in.
      const double next = std::min(n < group.size() ? nodes[group[n]].max : kInf,
                                   i < list.size() ? list[i].max : kInf);
      if (next == m || node_at < 0 || source_at == nullptr) continue;
      const double sum = source_at->sum + nodes[node_at].sum;
      if (sum < last) {
        last = sum;
        if (sum <= most_primary) {
          use(node_at, Label{source_at->sum, source_at->max, source_at->stages}, source_at->index);
        }
      }
    }
  }

  // Every mix's result when entries are node moves: the chain of boundary states of each
  // mix first, then the layouts of its nodes, read once per (type, first layer) from the
  // layouts the pass merged (NodeLayouts::Prepare at the limit it read them at).
  absl::Status ExtractWithNodes(std::vector<MixResult>& results) {
    struct NodeMove {
      size_t mix;
      int node, type, a, y, index;
    };
    std::vector<NodeMove> moves;
    std::vector<PipelineTemplate> templates(mixes_.size());
    std::vector<bool> found(mixes_.size(), false);
    const int positions = model_.num_layers() + 1;
    for (size_t m = 0; m < mixes_.size(); ++m) {
      int64_t state = FrontIndex(0, space_.Encode(mixes_[m]), 0);
      int32_t entry = BestAt(state);
      if (entry < 0) continue;
      found[m] = true;
      templates[m].mix = mixes_[m];
      for (int node = 0;; ++node) {
        const Entry& e = Front(state)[entry];
        if (e.from_state < 0) break;
        templates[m].node_order.push_back(e.type);
        moves.push_back({m, node, e.type, static_cast<int>(state % positions),
                         static_cast<int>(e.from_state % positions),
                         static_cast<uint16_t>(e.gpus)});
        state = e.from_state;
        entry = e.from_entry;
      }
    }
    std::stable_sort(moves.begin(), moves.end(), [](const NodeMove& x, const NodeMove& y) {
      return x.type != y.type ? x.type < y.type : x.a < y.a;
    });
    std::vector<std::vector<std::vector<NodeStage>>> layouts(mixes_.size());
    for (size_t m = 0; m < mixes_.size(); ++m) layouts[m].resize(templates[m].node_order.size());
    for (size_t k = 0; k < moves.size(); ++k) {
      const NodeMove& move = moves[k];
      NodeLayouts& dp = *node_layouts_[move.type];
      // The very fronts the pass merged (kept, or computed again at the same limit).
      if ((k == 0 || moves[k - 1].type != move.type || moves[k - 1].a != move.a) &&
          !dp.Prepare(move.a, NodeLimit(move.type, move.a), interrupt_,
                      computed_limits_[move.type][move.a])) {
        return interrupt_.stopped() ? Interrupt::Status("template search") : NodeFrontTooLarge();
      }
      layouts[move.mix][move.node] = dp.Layout(move.y, move.index);
    }
    for (size_t m = 0; m < mixes_.size(); ++m) {
      if (!found[m]) {
        results.push_back(Unfound(mixes_[m]));
        continue;
      }
      for (size_t node = 0; node < layouts[m].size(); ++node) {
        for (const NodeStage& s : layouts[m][node]) {
          templates[m].stages.push_back({.layer_begin = s.layer_begin,
                                         .layer_end = s.layer_end,
                                         .node_index = static_cast<int>(node),
                                         .node_type = templates[m].node_order[node],
                                         .gpus = s.gpus});
        }
      }
      results.push_back(Evaluated(mixes_[m], std::move(templates[m])));
    }
    return absl::OkStatus();
  }

  const CostModel& model_;
  const StageCosts& costs_;
  const std::vector<NodeMix>& mixes_;
  Objective objective_;
  StateSpace space_;
  // The split bound needs T = sum + k max, which only 1f1b has (k = M - 1); without it
  // every part is -inf and the test never drops a mix.
  static constexpr bool kSplit = std::is_same_v<Objective, OneFOneBObjective>;
  // Node moves need 1f1b's labels (docs/architecture/template-search.md#node-moves-1f1b).
  static constexpr bool kNodeMovesPossible = std::is_same_v<Objective, OneFOneBObjective>;
  const PrefixMaxBound& prefix_max_;
  PrefixCostBound prefix_cost_;
  SplitBound split_;
  Interrupt& interrupt_;
  int beam_width_;
  const bool node_moves_;
  // With UseWholeLayerBound: the tables, per multiset its least max as a mix and the window
  // of the mixes it is free in, and per free multiset the curve of the current layer (made
  // once it is asked for: curve_made_ 0, 1 while made, 2 made).
  const WholeLayerPrefixBound* whole_layer_ = nullptr;
  std::vector<double> mix_least_max_, free_least_max_, free_most_max_;
  std::vector<WholeLayerCurve> curves_;
  std::vector<std::atomic<int>> curve_made_;
  std::vector<double> terminal_bounds_;  // per multiset (a mix's): OpenTerminals; or empty
  // With node moves: per type, its node layouts (the request's, or the pass's own; none for
  // a type no mix of the request holds), the limits this pass prunes them with at a = 0 and
  // after (-inf for a type no mix of the pass holds), the limit the layouts it read at each
  // first layer were computed at (empty for a type no mix of the pass holds) and the prefix
  // sums of its cheapest compute per layer; the prefix floor as a table.
  NodeLayoutsByType own_node_layouts_;
  NodeLayoutsByType& node_layouts_;
  std::vector<double> node_limit_at_0_, node_limit_;
  std::vector<std::vector<double>> computed_limits_;
  std::vector<std::vector<double>> cheapest_prefix_;
  std::vector<double> floor_prefix_;
  int stage_cap_ = INT_MAX;  // most stages a pipeline may have
  std::atomic<int64_t> candidates_{0}, labels_{0};
  int64_t max_labels_ = kMaxTemplateSearchLabels;  // SearchOptions::max_labels of Run
  std::atomic<bool> over_budget_{false};           // labels_ passed max_labels_
  std::vector<std::vector<std::vector<double>>>
      compute_prefix_;                           // [t][g][l]: ComputeMs(t, g, 0, l)
  std::vector<std::vector<TargetMix>> targets_;  // per multiset u
  std::vector<LayerBound> layer_;                // per (free multiset, ns) at the current a
  std::vector<ServeTest> serve_tests_;           // the same, by ServeTestIndex
  // Per (u, ns), densely: the front computed at the current position, moved to
  // held_labels_ after the layer's barrier.
  std::vector<std::vector<Entry>> layer_fronts_;
  // Per (u, ns), densely: every label it holds at the positions done so far, front after
  // front in the order of the positions (right to left). A target reads the fronts of one
  // source (u, ns) at every stage end in turn, so they lie next to each other; each front in
  // its own allocation made the first read of every front a cache miss.
  std::vector<std::vector<Entry>> held_labels_;
  // Per (u, ns), densely: the positions after the current one where the state holds
  // labels, in decreasing order, and where in held_labels_ those labels are.
  struct Held {
    int64_t offset;
    int32_t position;
    int32_t count;
    // The least Primary and (objectives with kSumPlusMaxBound; else unused) the least max of
    // the front's labels: PullStages skips a front none of whose extensions any served mix
    // can use without reading it (on the 1000-layer all-mixes bench, 90 % of 58.7 M).
    double least_primary;
    double least_max;
  };
  std::vector<std::vector<Held>> label_positions_;
  // Per (u, ns), densely: for each complete run of kHeldBlock consecutive entries of
  // label_positions_ (from its start), the least of their least_primary and least_max, so
  // that PullStages skips a whole run by one test (BlockHopeless).
  static constexpr size_t kHeldBlock = 16;
  struct HeldBlock {
    double least_primary, least_max;
  };
  std::vector<std::vector<HeldBlock>> held_blocks_;

  // Whether `it` (in PullStages' scan, by increasing position) enters a whole block of
  // kHeldBlock held fronts (at its least position l1) none of whose extensions by a stage
  // [a, l), l >= l1, any served mix can use: every such stage costs at least the compute of
  // [a, l1) (the stage adds transfers to a longer compute; from the tables, up to rounding
  // far inside the bounds' slack), so every extension has at least the block's least sum
  // plus that and (clamped) at least its least max and that, and SomeFits is nondecreasing
  // in both (as for one front in PullStages).
  bool BlockHopeless(int a, const std::vector<Held>& positions,
                     typename std::vector<Held>::const_reverse_iterator it,
                     const std::vector<HeldBlock>& blocks, const std::vector<double>& compute_ms,
                     ServedMixes<Objective>& served) const {
    const size_t index = static_cast<size_t>(positions.rend() - it) - 1;
    if ((index + 1) % kHeldBlock != 0 || index / kHeldBlock >= blocks.size()) return false;
    const HeldBlock& block = blocks[index / kHeldBlock];
    const double compute = compute_ms[it->position] - compute_ms[a];
    Label least{};
    least.sum = block.least_primary + compute;
    least.max = std::max({compute, served.rest_max_ms(), block.least_max});
    return !served.SomeFits(least);
  }

  // Records a front held at a position of `target` (Run), and its block's summary once the
  // block is complete.
  void AddHeld(int target, const Held& held) {
    std::vector<Held>& positions = label_positions_[target];
    positions.push_back(held);
    if (positions.size() % kHeldBlock != 0) return;
    HeldBlock block{std::numeric_limits<double>::infinity(),
                    std::numeric_limits<double>::infinity()};
    for (size_t i = positions.size() - kHeldBlock; i < positions.size(); ++i) {
      block.least_primary = std::min(block.least_primary, positions[i].least_primary);
      block.least_max = std::min(block.least_max, positions[i].least_max);
    }
    held_blocks_[target].push_back(block);
  }
  // Per (u, ns), densely, where StairsKept: held_labels_' labels again, each front in the
  // order node-move merges read it (AppendStairs), at the same offsets. Built once per front
  // rather than by every merge that reads it (each front is read by every target one node
  // further left, at every layer), and compact, so a merge reads fewer cache lines.
  std::vector<std::vector<Stair>> held_stairs_;
};

}  // namespace oobleck::template_search

#endif  // OOBLECK_CORE_TEMPLATE_SEARCH_LABEL_SEARCH_H_
