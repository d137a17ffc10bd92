// The template search with node moves (docs/architecture/template-search.md#node-moves-1f1b)
// against the same search with partial node states, the previous search
// (tests/reference_search) and, on tiny instances, the brute force: random 1f1b instances
// with fixed seeds, 2-6 node types of 1-8 GPUs (any count, not only powers of two), memory
// that binds on some types and mixes, every mix of a few nodes. Same feasibility and the same
// optimal iteration time for every mix, and a template the cost model accepts.
#include "core/template_search/node_dp.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/cluster.h"
#include "core/cost_model.h"
#include "core/interrupt.h"
#include "core/search.h"
#include "core/template_search/bottleneck_bound.h"
#include "core/template_search/branch_and_bound.h"
#include "core/template_search/label_search.h"
#include "core/template_search/objectives.h"
#include "core/template_search/stage_costs.h"
#include "core/template_search/state_space.h"
#include "gtest/gtest.h"
#include "tests/asan.h"
#include "tests/core/test_problems.h"
#include "tests/oracles/exhaustive.h"
#include "tests/reference_search/search_reference.h"

namespace oobleck {
namespace {

using template_search::Moves;

constexpr double kInf = std::numeric_limits<double>::infinity();

struct Instance {
  PlanningProblem problem;
  std::vector<NodeMix> mixes;
};

struct Shape {
  int min_layers, max_layers, min_types, max_types, max_nodes_per_type, max_mix_nodes;
};

Instance MakeInstance(uint32_t seed, const Shape& shape) {
  std::mt19937 rng(seed);
  auto uniform = [&](double lo, double hi) {
    return std::uniform_real_distribution<double>(lo, hi)(rng);
  };
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  const int L = pick(shape.min_layers, shape.max_layers);
  const int T = pick(shape.min_types, shape.max_types);
  Instance inst;
  PlanningProblem& p = inst.problem;
  p.cost_model = CostModelKind::kOneFOneB;
  p.microbatches = pick(1, 24);
  p.inter_node_bytes_per_s = uniform(2e9, 50e9);
  p.missing_allreduce = MissingAllreduce::kRing;
  p.stage_gpus = pick(0, 3) == 0 ? StageGpus::kDivisors : StageGpus::kAny;
  const testing::RandomLayers drawn =
      testing::MakeRandomLlmLayers(rng, L, p.optimizer_state_multiplier, 8e7);
  const std::vector<LayerProfile>& base = drawn.layers;
  const double whole = drawn.whole_bytes;
  const NodeMix available = testing::AddRandomLlmNodeTypes(
      rng, T, base,
      {.gpus = [&] { return pick(1, 8); },
       .layer_speed = [](double speed) { return speed; },
       // Per GPU: from "the whole model fits on one GPU" to "a node holds a small share".
       .memory_bytes = [&] { return pick(0, 2) == 0 ? whole : whole * uniform(0.03, 0.5); },
       .available = [&] { return pick(1, shape.max_nodes_per_type); }},
      p);
  inst.mixes = EnumerateMixes(available, 1, shape.max_mix_nodes);
  return inst;
}

absl::StatusOr<std::vector<MixResult>> Search(const CostModel& model,
                                              const std::vector<NodeMix>& mixes, Moves moves) {
  return template_search::BranchAndBound(
      model, mixes,
      template_search::OneFOneBObjective{model.problem().microbatches, model.memory_can_bind()},
      SearchOptions{}, moves);
}

// Same feasibility and optimum as `want`, and a template Evaluate gives the same time.
void ExpectSameOptimum(const CostModel& model, const MixResult& got, const MixResult& want,
                       const std::string& where) {
  ASSERT_EQ(got.feasible, want.feasible) << where;
  if (!got.feasible) return;
  EXPECT_NEAR(got.best.iteration_time_ms, want.best.iteration_time_ms,
              1e-9 * want.best.iteration_time_ms)
      << where;
  auto evaluated = model.Evaluate(got.best);
  ASSERT_TRUE(evaluated.ok()) << where << ": " << evaluated.status();
  EXPECT_EQ(evaluated->iteration_time_ms, got.best.iteration_time_ms) << where;
}

std::string Where(uint32_t seed, const Instance& inst, const NodeMix& mix) {
  return "seed " + std::to_string(seed) + " M=" + std::to_string(inst.problem.microbatches) +
         " mix " + MixLabel(mix, inst.problem.node_types);
}

TEST(NodeDpTest, SameOptimaAsPartialNodeStates) {
  const Shape shape{6, 30, 2, 6, 2, 4};
  const int seeds = OracleSeeds(30);
  int binding = 0;
  for (uint32_t seed = 1; seed <= static_cast<uint32_t>(seeds); ++seed) {
    const Instance inst = MakeInstance(seed, shape);
    auto model = CostModel::Create(inst.problem);
    ASSERT_TRUE(model.ok()) << "seed " << seed << ": " << model.status();
    binding += model->memory_can_bind();
    auto nodes = Search(*model, inst.mixes, Moves::kNodes);
    auto stages = Search(*model, inst.mixes, Moves::kStages);
    auto previous = reference_search::SearchTemplates(*model, inst.mixes);
    ASSERT_TRUE(nodes.ok()) << "seed " << seed << ": " << nodes.status();
    ASSERT_TRUE(stages.ok()) << "seed " << seed << ": " << stages.status();
    ASSERT_TRUE(previous.ok()) << "seed " << seed << ": " << previous.status();
    ASSERT_EQ(nodes->size(), inst.mixes.size());
    for (size_t i = 0; i < inst.mixes.size(); ++i) {
      const std::string where = Where(seed, inst, inst.mixes[i]);
      ExpectSameOptimum(*model, (*nodes)[i], (*stages)[i], where + " (partial states)");
      ExpectSameOptimum(*model, (*nodes)[i], (*previous)[i], where + " (previous search)");
    }
  }
  EXPECT_GE(binding, seeds / 3);  // memory binds in a good share of the instances
}

TEST(NodeDpTest, SameOptimaAsBruteForce) {
  const Shape shape{3, 7, 2, 3, 2, 3};
  for (uint32_t seed = 1000; seed < 1030; ++seed) {
    Instance inst = MakeInstance(seed, shape);
    for (NodeType& type : inst.problem.node_types) {
      type.gpus_per_node = std::min(type.gpus_per_node, 4);  // the brute force's size
    }
    auto model = CostModel::Create(inst.problem);
    ASSERT_TRUE(model.ok()) << "seed " << seed << ": " << model.status();
    auto nodes = Search(*model, inst.mixes, Moves::kNodes);
    ASSERT_TRUE(nodes.ok()) << "seed " << seed << ": " << nodes.status();
    for (size_t i = 0; i < inst.mixes.size(); ++i) {
      ExpectSameOptimum(*model, (*nodes)[i], ExhaustiveSearch(*model, inst.mixes[i]),
                        Where(seed, inst, inst.mixes[i]));
    }
  }
}

// The work counters of one search with the given moves.
int64_t Candidates(const CostModel& model, const std::vector<NodeMix>& mixes, Moves moves) {
  SearchStats stats;
  SearchOptions options;
  options.stats = &stats;
  auto results = template_search::BranchAndBound(
      model, mixes,
      template_search::OneFOneBObjective{model.problem().microbatches, model.memory_can_bind()},
      options, moves);
  EXPECT_TRUE(results.ok()) << results.status();
  return stats.candidates;
}

// SearchTemplates moves by nodes under 1f1b where the mixes hold many multisets
// (PreferNodeMoves), and by stages on small requests, where node layouts cost more.
TEST(NodeDpTest, SearchTemplatesMovesByNodesOnManyMultisets) {
  for (uint32_t seed = 2000; seed < 2003; ++seed) {
    Instance inst = MakeInstance(seed, Shape{8, 10, 6, 6, 2, 3});
    const bool many = seed % 2 == 0;
    if (many) inst.mixes = EnumerateMixes(NodeMix(6, 2), 1, 6);  // 435 multisets
    auto model = CostModel::Create(inst.problem);
    ASSERT_TRUE(model.ok());
    SearchStats stats;
    SearchOptions options;
    options.stats = &stats;
    ASSERT_TRUE(SearchTemplates(*model, inst.mixes, options).ok());
    EXPECT_EQ(stats.candidates,
              Candidates(*model, inst.mixes, many ? Moves::kNodes : Moves::kStages))
        << "seed " << seed;
  }
}

// A pass whose terminals are open (LabelSearch::OpenTerminals) returns, for a mix whose
// optimum is above its bound, a real template within the terminal bound when it meets one;
// a second pass bounded by that template's time finds the optimum. Bounds at the root lower
// bound (below nearly every optimum) make most results such incumbents.
TEST(NodeDpTest, OpenTerminalsGiveIncumbentsThatBoundExactly) {
  int incumbents = 0;
  for (uint32_t seed = 3000; seed < 3020; ++seed) {
    const Instance inst = MakeInstance(seed, Shape{6, 24, 2, 4, 2, 4});
    auto model = CostModel::Create(inst.problem);
    ASSERT_TRUE(model.ok()) << "seed " << seed << ": " << model.status();
    auto previous = reference_search::SearchTemplates(*model, inst.mixes);
    ASSERT_TRUE(previous.ok()) << "seed " << seed << ": " << previous.status();
    for (Moves moves : {Moves::kNodes, Moves::kStages}) {
      Interrupt interrupt(nullptr);
      const template_search::StageCosts costs(*model);
      const template_search::StateSpace space(*model, inst.mixes, &interrupt);
      const template_search::PrefixMaxBound prefix_max(costs, space, inst.mixes, interrupt);
      const template_search::OneFOneBObjective objective{model->problem().microbatches,
                                                         model->memory_can_bind()};
      const std::vector<double> none(inst.mixes.size(), kInf);
      std::vector<double> bounds;
      {
        const template_search::LabelSearch<template_search::OneFOneBObjective> probe(
            costs, inst.mixes, objective, 0, none, prefix_max, interrupt, moves);
        for (const NodeMix& mix : inst.mixes) bounds.push_back(probe.RootLowerBound(mix));
      }
      template_search::LabelSearch<template_search::OneFOneBObjective> tight(
          costs, inst.mixes, objective, 0, bounds, prefix_max, interrupt, moves);
      tight.OpenTerminals(none);
      auto first = tight.Run(SearchOptions{});
      ASSERT_TRUE(first.ok()) << first.status();
      std::vector<double> found(inst.mixes.size(), kInf);
      for (size_t i = 0; i < inst.mixes.size(); ++i) {
        const std::string where = Where(seed, inst, inst.mixes[i]);
        const MixResult& got = (*first)[i];
        const MixResult& want = (*previous)[i];
        if (!got.feasible) continue;
        ASSERT_TRUE(want.feasible) << where;
        auto evaluated = model->Evaluate(got.best);
        ASSERT_TRUE(evaluated.ok()) << where << ": " << evaluated.status();
        EXPECT_GE(got.best.iteration_time_ms, want.best.iteration_time_ms * (1 - 1e-9)) << where;
        if (got.best.iteration_time_ms > bounds[i]) ++incumbents;
        found[i] = got.best.iteration_time_ms;
      }
      template_search::LabelSearch<template_search::OneFOneBObjective> exact(
          costs, inst.mixes, objective, 0, found, prefix_max, interrupt, moves);
      auto second = exact.Run(SearchOptions{});
      ASSERT_TRUE(second.ok()) << second.status();
      for (size_t i = 0; i < inst.mixes.size(); ++i) {
        if (!std::isfinite(found[i])) continue;
        ExpectSameOptimum(*model, (*second)[i], (*previous)[i], Where(seed, inst, inst.mixes[i]));
      }
    }
  }
  EXPECT_GE(incumbents, 20);  // many results of the tight passes are above their bounds
}

// The node layouts one pass computed, kept for the next passes (NodeLayouts), give a pass
// with a tighter limit the very fronts, orders and layouts that pass would compute at its own
// limit; and so do layouts computed again after they were forgotten (as the extraction does
// with the limit the pass read them at). Limits at quantiles of the labels' pruning test, so
// that the tight one drops many labels the loose one keeps.
TEST(NodeDpTest, KeptLayoutsServeTighterLimitsAsComputedAtThem) {
  int dropped = 0, forgotten_reads = 0;
  for (uint32_t seed = 4000; seed < 4030; ++seed) {
    const Instance inst = MakeInstance(seed, Shape{4, 28, 1, 3, 2, 4});
    auto model = CostModel::Create(inst.problem);
    ASSERT_TRUE(model.ok()) << "seed " << seed << ": " << model.status();
    const template_search::StageCosts costs(*model);
    const int L = model->num_layers(), M = model->problem().microbatches;
    std::vector<double> floor(L + 1, 0);  // the cheapest compute of each layer, summed
    for (int l = 0; l < L; ++l) {
      double cheapest = kInf;
      for (int t = 0; t < model->num_types(); ++t) {
        for (int g : model->stage_sizes(t))
          cheapest = std::min(cheapest, costs.ComputeMs(t, g, l, l + 1));
      }
      floor[l + 1] = floor[l] + cheapest;
    }
    const bool memory = model->memory_can_bind();
    for (int t = 0; t < model->num_types(); ++t) {
      Interrupt interrupt(nullptr);
      template_search::NodeLayouts all(costs, t, M, memory, floor);
      template_search::NodeLayouts kept(costs, t, M, memory, floor);
      template_search::NodeLayouts forgetful(costs, t, M, memory, floor, /*max_kept_labels=*/0);
      for (int a = L - 1; a >= 0; --a) {
        const std::string where = "seed " + std::to_string(seed) + " type " + std::to_string(t) +
                                  " a " + std::to_string(a);
        // The pruning test's value of every label at +inf; the limits at its quantiles.
        ASSERT_TRUE(all.Prepare(a, kInf, interrupt)) << where;
        std::vector<double> tests;
        for (int y = a + 1; y <= L; ++y) {
          for (const template_search::NodeLabel& x : all.Front(y)) {
            tests.push_back(x.sum + (M - 1) * x.max + floor[a] + (floor[L] - floor[y]));
          }
        }
        if (tests.empty()) continue;
        std::sort(tests.begin(), tests.end());
        const double tight = tests[tests.size() / 3], loose = tests[tests.size() * 2 / 3];
        template_search::NodeLayouts fresh(costs, t, M, memory, floor);
        ASSERT_TRUE(fresh.Prepare(a, tight, interrupt)) << where;
        ASSERT_TRUE(kept.Prepare(a, loose, interrupt)) << where;
        ASSERT_TRUE(kept.Prepare(a, tight, interrupt)) << where;
        EXPECT_EQ(kept.computed_limit(), loose) << where;  // read from the kept layouts
        // Another first layer makes the forgetful one forget a's; read again at `loose`.
        ASSERT_TRUE(forgetful.Prepare(a, loose, interrupt)) << where;
        ASSERT_TRUE(forgetful.Prepare(a + 1, kInf, interrupt)) << where;
        ASSERT_TRUE(forgetful.Prepare(a, tight, interrupt, loose)) << where;
        EXPECT_EQ(forgetful.computed_limit(), loose) << where;
        ++forgotten_reads;
        for (int y = a + 1; y <= L; ++y) {
          dropped += static_cast<int>(all.Front(y).size() - fresh.Front(y).size());
          for (const template_search::NodeLayouts* got : {&kept, &forgetful}) {
            const auto want_front = fresh.Front(y), got_front = got->Front(y);
            ASSERT_EQ(got_front.size(), want_front.size()) << where << " y " << y;
            for (size_t i = 0; i < want_front.size(); ++i) {
              EXPECT_EQ(got_front[i].sum, want_front[i].sum) << where;
              EXPECT_EQ(got_front[i].max, want_front[i].max) << where;
              EXPECT_EQ(got_front[i].stages, want_front[i].stages) << where;
              EXPECT_EQ(got_front[i].cap, want_front[i].cap) << where;
              const auto want_layout = fresh.Layout(y, static_cast<int>(i));
              const auto got_layout = got->Layout(y, static_cast<int>(i));
              ASSERT_EQ(got_layout.size(), want_layout.size()) << where;
              for (size_t s = 0; s < want_layout.size(); ++s) {
                EXPECT_EQ(got_layout[s].gpus, want_layout[s].gpus) << where;
                EXPECT_EQ(got_layout[s].layer_begin, want_layout[s].layer_begin) << where;
                EXPECT_EQ(got_layout[s].layer_end, want_layout[s].layer_end) << where;
              }
            }
            const auto want_order = fresh.ByStages(y), got_order = got->ByStages(y);
            EXPECT_TRUE(std::equal(got_order.begin(), got_order.end(), want_order.begin(),
                                   want_order.end()))
                << where << " y " << y;
            EXPECT_EQ(got->LeastMax(y), fresh.LeastMax(y)) << where << " y " << y;
          }
        }
      }
    }
  }
  EXPECT_GT(dropped, 1000);  // the tight limits drop many labels
  EXPECT_GT(forgotten_reads, 100);
}

// A cancelled search stops with CANCELLED in the node-move pass too.
TEST(NodeDpTest, Cancels) {
  const Instance inst = MakeInstance(7, Shape{30, 30, 4, 4, 3, 5});
  auto model = CostModel::Create(inst.problem);
  ASSERT_TRUE(model.ok());
  // Past the set-up, in the passes' layer loops and node layouts.
  int calls = 0;
  SearchOptions options;
  options.cancelled = [&calls] { return ++calls > 200; };
  auto result = template_search::BranchAndBound(
      *model, inst.mixes,
      template_search::OneFOneBObjective{model->problem().microbatches, model->memory_can_bind()},
      options, Moves::kNodes);
  EXPECT_EQ(result.status().code(), absl::StatusCode::kCancelled) << result.status();
}

// A stop at any poll between two passes (where a pass sets up its state space and bounds)
// ends the search with CANCELLED. Found by fuzz/rpc_structure: a stop while an exact round's
// state space was being walked left that space empty, and the round's open terminals
// indexed it.
TEST(NodeDpTest, CancelledBetweenPassesEndsCancelled) {
  const Instance inst = MakeInstance(7, Shape{30, 30, 4, 4, 3, 5});
  auto model = CostModel::Create(inst.problem);
  ASSERT_TRUE(model.ok());
  const template_search::OneFOneBObjective objective{model->problem().microbatches,
                                                     model->memory_can_bind()};
  // The polls before each pass's first layer, after the previous pass's last one.
  std::vector<std::pair<int64_t, int64_t>> gaps;
  int64_t calls = 0, last = 0;
  SearchOptions counting;
  counting.cancelled = [&calls] { return ++calls, false; };
  counting.progress = [&](std::string_view, int64_t done, int64_t) {
    if (done == 1) gaps.push_back({last + 1, calls});
    last = calls;
  };
  ASSERT_TRUE(
      template_search::BranchAndBound(*model, inst.mixes, objective, counting, Moves::kNodes).ok());
  ASSERT_GE(gaps.size(), 2u);
  int stops = 0;
  for (const auto& [first, end] : gaps) {
    const int64_t step = std::max<int64_t>(1, (end - first) / 30);  // <= ~30 stops a gap
    for (int64_t stop_at = first; stop_at <= end; stop_at += step, ++stops) {
      int64_t n = 0;
      SearchOptions options;
      options.cancelled = [&n, stop_at] { return ++n >= stop_at; };
      auto result =
          template_search::BranchAndBound(*model, inst.mixes, objective, options, Moves::kNodes);
      ASSERT_EQ(result.status().code(), absl::StatusCode::kCancelled) << stop_at;
    }
  }
  EXPECT_GT(stops, 0);
}

}  // namespace
}  // namespace oobleck
