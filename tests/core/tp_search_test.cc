// Issue 27 item 4: a stage of a node type with profiles measured at several tensor-parallel
// degrees runs tensor-parallel at tp = its GPUs, with the times and per-GPU bytes measured
// there, and the template search chooses each stage's degree among the measured ones. The
// exact search against the brute-force oracle (tests/oracles/exhaustive.h) and the previous
// search (tests/reference_search) on random instances with fixed seeds, each stage's figures
// against the profiles themselves, and the template cache never mixing tp = 1 inputs with
// per-tp ones.
#include <algorithm>
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "core/cost_model.h"
#include "core/search.h"
#include "core/template_cache.h"
#include "core/template_planner.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/oracles/exhaustive.h"
#include "tests/reference_search/search_reference.h"

namespace oobleck {
namespace {

using ::testing::HasSubstr;

// A random instance whose node types (of 2 or 4 GPUs) have profiles at tp = 1 and at some
// of the degrees 2 and 4 (and 8, which never fits): per layer, tp = g is faster than 1/g of
// tp = 1 for some layers and slower for others, and it holds 1/g of the parameters and
// activations (give or take), so that memory binds at tp = 1 but not at tp = 4.
PlanningProblem MakeTpInstance(uint32_t seed, CostModelKind kind, int min_layers, int max_layers,
                               NodeMix* available) {
  std::mt19937 rng(seed);
  auto uniform = [&](double lo, double hi) {
    return std::uniform_real_distribution<double>(lo, hi)(rng);
  };
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  const int L = pick(min_layers, max_layers);
  const int T = pick(1, 3);
  PlanningProblem p;
  p.cost_model = kind;
  p.microbatches = kind == CostModelKind::kOneFOneB ? pick(1, 8) : pick(0, 1) * pick(1, 8);
  p.inter_node_bytes_per_s = uniform(1e9, 20e9);
  p.tp_profiles.resize(T);
  available->clear();
  for (int t = 0; t < T; ++t) {
    const std::string name = "type" + std::to_string(t);
    const int gpus = pick(0, 1) ? 4 : 2;
    auto base = std::make_shared<ModelProfile>();
    base->key = {"m", name, 1};
    double whole_tp1 = 0;
    for (int l = 0; l < L; ++l) {
      LayerProfile& layer = base->layers.emplace_back();
      layer.forward_ms = uniform(0.1, 10);
      layer.backward_ms = uniform(0.1, 20);
      layer.param_bytes = uniform(1e6, 1e8);
      layer.activation_bytes = uniform(1e6, 5e7);
      whole_tp1 += p.optimizer_state_multiplier * layer.param_bytes + layer.activation_bytes;
    }
    double whole_widest = whole_tp1;
    for (int tp : {2, 4, 8}) {
      if (pick(0, 3) == 0) continue;  // not measured
      auto measured = std::make_shared<ModelProfile>(*base);
      measured->key.tp = tp;
      double whole = 0;
      for (LayerProfile& layer : measured->layers) {
        layer.forward_ms = layer.forward_ms / tp * uniform(0.5, 2);
        layer.backward_ms = layer.backward_ms / tp * uniform(0.5, 2);
        layer.param_bytes = layer.param_bytes / tp * uniform(0.9, 1.3);
        layer.activation_bytes = layer.activation_bytes / tp * uniform(0.9, 1.3);
        whole += p.optimizer_state_multiplier * layer.param_bytes + layer.activation_bytes;
      }
      if (tp <= gpus) whole_widest = std::min(whole_widest, whole);
      p.tp_profiles[t].push_back(std::move(measured));
    }
    // From "nothing binds" to "not even the widest stage holds the whole model".
    const double memory = pick(0, 3) == 0 ? whole_tp1 * 10 : uniform(0.5 * whole_widest, whole_tp1);
    p.node_types.push_back({name, name, gpus, memory, uniform(5e9, 50e9)});
    p.profiles.push_back(std::move(base));
    available->push_back(pick(1, 2));
  }
  return p;
}

// A stage's figures from the profile measured at its degree, not through CostModel's tables.
void ExpectStageFromProfiles(const PlanningProblem& p, const Stage& st, int stages_from_end,
                             const std::string& where) {
  const ModelProfile* measured = p.profiles[st.node_type].get();
  for (const auto& profile : p.tp_profiles[st.node_type]) {
    if (profile->key.tp == st.gpus) measured = profile.get();
  }
  ASSERT_EQ(measured->key.tp, st.gpus) << where << ": no profile at tp " << st.gpus;
  double forward = 0, backward = 0, params = 0, acts = 0;
  for (int l = st.layer_begin; l < st.layer_end; ++l) {
    forward += measured->layers[l].forward_ms;
    backward += measured->layers[l].backward_ms;
    params += measured->layers[l].param_bytes;
    acts += measured->layers[l].activation_bytes;
  }
  EXPECT_NEAR(st.forward_ms, forward, 1e-9 * forward) << where;
  EXPECT_NEAR(st.backward_ms, backward, 1e-9 * backward) << where;
  if (p.cost_model != CostModelKind::kOneFOneB) return;
  const double in_flight = std::min(p.microbatches, stages_from_end);
  const double memory = p.optimizer_state_multiplier * params + acts * in_flight;
  EXPECT_NEAR(st.memory_bytes_per_gpu, memory, 1e-9 * memory) << where;
  EXPECT_LE(st.memory_bytes_per_gpu, p.node_types[st.node_type].gpu_memory_bytes) << where;
}

class TpSearchOracleTest : public ::testing::TestWithParam<CostModelKind> {};

TEST_P(TpSearchOracleTest, SameOptimaAsBruteForceAndStagesAsMeasured) {
  const CostModelKind kind = GetParam();
  int tp_stages = 0, infeasible = 0;
  for (uint32_t seed = 1; seed <= 60; ++seed) {
    NodeMix available;
    const PlanningProblem p = MakeTpInstance(seed, kind, 3, 6, &available);
    auto model = CostModel::Create(p);
    ASSERT_TRUE(model.ok()) << "seed " << seed << ": " << model.status();
    for (int t = 0; t < model->num_types(); ++t) {
      std::vector<int> sizes = {1};
      for (const auto& profile : p.tp_profiles[t]) {
        if (profile->key.tp <= p.node_types[t].gpus_per_node) sizes.push_back(profile->key.tp);
      }
      std::sort(sizes.begin(), sizes.end());
      EXPECT_EQ(model->stage_sizes(t), sizes) << "seed " << seed << " type " << t;
    }
    const std::vector<NodeMix> mixes = EnumerateMixes(available, 1, 2);
    auto got = SearchTemplates(*model, mixes);
    ASSERT_TRUE(got.ok()) << "seed " << seed << ": " << got.status();
    for (size_t i = 0; i < mixes.size(); ++i) {
      const MixResult& a = (*got)[i];
      const MixResult want = ExhaustiveSearch(*model, mixes[i]);
      const std::string where = "seed " + std::to_string(seed) + " " +
                                std::string(CostModelName(kind)) + " mix " +
                                MixLabel(mixes[i], p.node_types);
      ASSERT_EQ(a.feasible, want.feasible) << where;
      if (!a.feasible) {
        ++infeasible;
        continue;
      }
      EXPECT_NEAR(a.best.iteration_time_ms, want.best.iteration_time_ms,
                  1e-9 * want.best.iteration_time_ms)
          << where;
      const int S = static_cast<int>(a.best.stages.size());
      for (int s = 0; s < S; ++s) {
        ExpectStageFromProfiles(p, a.best.stages[s], S - s, where);
        tp_stages += a.best.stages[s].gpus > 1;
      }
    }
  }
  // The instances exercise what they are for.
  EXPECT_GT(tp_stages, 20);
  if (kind == CostModelKind::kOneFOneB) {
    EXPECT_GT(infeasible, 0);
  }
}

TEST_P(TpSearchOracleTest, SameOptimaAsThePreviousSearchOnLongerModels) {
  const CostModelKind kind = GetParam();
  for (uint32_t seed = 100; seed < 112; ++seed) {
    NodeMix available;
    const PlanningProblem p = MakeTpInstance(seed, kind, 12, 30, &available);
    auto model = CostModel::Create(p);
    ASSERT_TRUE(model.ok()) << "seed " << seed << ": " << model.status();
    const std::vector<NodeMix> mixes = EnumerateMixes(available, 1, 4);
    auto got = SearchTemplates(*model, mixes);
    auto want = reference_search::SearchTemplates(*model, mixes);
    ASSERT_TRUE(got.ok()) << "seed " << seed << ": " << got.status();
    ASSERT_TRUE(want.ok()) << "seed " << seed << ": " << want.status();
    for (size_t i = 0; i < mixes.size(); ++i) {
      const MixResult& a = (*got)[i];
      const MixResult& b = (*want)[i];
      const std::string where =
          "seed " + std::to_string(seed) + " mix " + MixLabel(mixes[i], p.node_types);
      ASSERT_EQ(a.feasible, b.feasible) << where;
      if (!a.feasible) continue;
      EXPECT_NEAR(a.best.iteration_time_ms, b.best.iteration_time_ms,
                  1e-9 * b.best.iteration_time_ms)
          << where;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(BothModels, TpSearchOracleTest,
                         ::testing::Values(CostModelKind::kOneFOneB,
                                           CostModelKind::kOobleckSosp23));

// One node type of 4 GPUs with profiles at tp 1 and 4 (not 2): sizes 1 and 4 only.
PlanningProblem OnlySomeDegrees() {
  auto base = std::make_shared<ModelProfile>();
  base->key = {"m", "gpu", 1};
  for (int l = 0; l < 4; ++l) {
    LayerProfile& layer = base->layers.emplace_back();
    layer.forward_ms = 4;
    layer.backward_ms = 8;
    layer.param_bytes = 1e8;
    layer.activation_bytes = 1e7;
    layer.allreduce_in_node_ms = {{2, 0.5}, {3, 0.5}, {4, 0.5}};
  }
  auto tp4 = std::make_shared<ModelProfile>(*base);
  tp4->key.tp = 4;
  for (LayerProfile& layer : tp4->layers) {
    layer.forward_ms = 0.75;
    layer.backward_ms = 1.5;
    layer.param_bytes = 2.5e7;
    layer.activation_bytes = 4e6;
  }
  PlanningProblem p;
  p.node_types = {{"node", "gpu", 4, 64e9, 100e9}};
  p.profiles = {base};
  p.tp_profiles = {{tp4}};
  p.inter_node_bytes_per_s = 10e9;
  p.microbatches = 2;
  return p;
}

TEST(TpSearchTest, SizesAreTheMeasuredDegreesOnly) {
  PlanningProblem p = OnlySomeDegrees();
  auto model = CostModel::Create(p);
  ASSERT_TRUE(model.ok()) << model.status();
  // The in-node all-reduce table offers 2 and 3; with a measured degree they are not guessed.
  EXPECT_THAT(model->stage_sizes(0), ::testing::ElementsAre(1, 4));
  EXPECT_EQ(model->ForwardMs(0, 4, 0, 4), 3);
  EXPECT_EQ(model->ForwardMs(0, 1, 0, 4), 16);  // tp = 1: as measured, no all-reduce
  EXPECT_EQ(model->MemoryBytesPerGpu(0, 4, 0, 4, 1), 6 * 1e8 + 1.6e7);
  EXPECT_EQ(p.StageTensorParallel(0, 4), 4);
  // A degree the node cannot hold, or the stage policy refuses, leaves the in-node split.
  p.node_types[0].gpus_per_node = 3;
  model = CostModel::Create(p);
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_THAT(model->stage_sizes(0), ::testing::ElementsAre(1, 2, 3));
  EXPECT_EQ(p.StageTensorParallel(0, 2), 1);
  p.node_types[0].gpus_per_node = 4;
  p.stage_gpus = StageGpus::kEqualHalves;
  EXPECT_THAT(CostModel::Create(p)->stage_sizes(0), ::testing::ElementsAre(1, 4));
}

TEST(TpSearchTest, MalformedTensorParallelProfilesAreNamed) {
  PlanningProblem p = OnlySomeDegrees();
  auto shorter = std::make_shared<ModelProfile>(*p.tp_profiles[0][0]);
  shorter->key.tp = 2;
  shorter->layers.pop_back();
  p.tp_profiles[0].push_back(shorter);
  absl::StatusOr<CostModel> model = CostModel::Create(p);
  EXPECT_EQ(model.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(model.status().message(), HasSubstr("node_types[0].tp_profiles[1] (m/gpu/mb1/tp2) "
                                                  "has 3 layers, node_types[0] has 4"));
  p = OnlySomeDegrees();
  p.tp_profiles[0].push_back(p.tp_profiles[0][0]);
  model = CostModel::Create(p);
  EXPECT_THAT(model.status().message(), HasSubstr("tp must be >= 2 and appear once"));
}

// Keys: a problem without per-tp profiles keeps its key; with them, it never shares one.
TEST(TpSearchTest, TheTemplateCacheNeverServesTpOneTemplatesForPerTpInputs) {
  PlanningProblem with_tp = OnlySomeDegrees();
  PlanningProblem tp_one = with_tp;
  tp_one.tp_profiles.clear();
  PlanningProblem empty_lists = tp_one;
  empty_lists.tp_profiles.resize(1);
  EXPECT_EQ(empty_lists.CacheKey(), tp_one.CacheKey());
  EXPECT_THAT(tp_one.CacheKey(), ::testing::Not(HasSubstr("|tp")));
  EXPECT_NE(with_tp.CacheKey(), tp_one.CacheKey());

  TemplateCache cache(1 << 20);
  TemplatePlanner planner(&cache, 1);
  const std::vector<NodeMix> mix = {{1}};
  auto plan = [&](const PlanningProblem& p) {
    auto model = CostModel::Create(p);
    EXPECT_TRUE(model.ok()) << model.status();
    auto planned = planner.PlanTemplates(*model, mix);
    EXPECT_TRUE(planned.ok()) << planned.status();
    return (*planned)[0];
  };
  const PlannedMix first = plan(tp_one);
  const PlannedMix per_tp = plan(with_tp);
  EXPECT_FALSE(per_tp.cache_hit);
  ASSERT_TRUE(per_tp.result->feasible);
  // One stage of tp = 4 (c = 9 ms, T = 18 ms) beats every split of the tp = 1 data (32 ms).
  EXPECT_EQ(per_tp.result->best.stages.size(), 1u);
  EXPECT_EQ(per_tp.result->best.stages[0].gpus, 4);
  EXPECT_LT(per_tp.result->best.iteration_time_ms, first.result->best.iteration_time_ms);
  const PlannedMix again = plan(tp_one);
  EXPECT_TRUE(again.cache_hit);
  EXPECT_EQ(again.result->best.iteration_time_ms, first.result->best.iteration_time_ms);
  EXPECT_TRUE(plan(with_tp).cache_hit);
}

}  // namespace
}  // namespace oobleck
