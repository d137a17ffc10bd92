#include "core/search.h"

#include <atomic>
#include <cmath>

#include "core/cluster.h"
#include "gtest/gtest.h"
#include "tbb/task_arena.h"
#include "tests/core/test_problems.h"
#include "tests/oracles/exhaustive.h"

namespace oobleck {
namespace {

using testing::Homogeneous;
using testing::LoadGpt2Xl;
using testing::MakeRandomInstance;

bool Close(double a, double b) { return std::abs(a - b) <= 1e-9 * std::max(1.0, std::abs(b)); }

TEST(SearchTest, ReproducesOobleckPublishedTemplatesForGpt2Xl) {
  auto profile = LoadGpt2Xl();
  ASSERT_NE(profile, nullptr);
  auto model = CostModel::Create(Homogeneous(profile, 1, CostModelKind::kOobleckSosp23, 0));
  ASSERT_TRUE(model.ok()) << model.status();
  auto results = SearchTemplates(*model, EnumerateMixes({4}, 1, 4));
  ASSERT_TRUE(results.ok()) << results.status();
  const double published[] = {25348.51, 28853.39, 27534.99, 27245.21};
  ASSERT_EQ(results->size(), 4u);
  for (int n = 0; n < 4; ++n) {
    const MixResult& r = (*results)[n];
    ASSERT_TRUE(r.feasible) << r.infeasible_reason;
    EXPECT_EQ(r.best.num_nodes(), n + 1);
    EXPECT_NEAR(r.best.iteration_time_ms, published[n], 0.01) << "nodes " << n + 1;
  }
}

TEST(SearchTest, Gpt2XlHomogeneousMatchesExhaustiveOnBothModels) {
  auto profile = LoadGpt2Xl();
  ASSERT_NE(profile, nullptr);
  for (auto [kind, m] :
       {std::pair{CostModelKind::kOobleckSosp23, 0}, std::pair{CostModelKind::kOobleckSosp23, 16},
        std::pair{CostModelKind::kOneFOneB, 16}}) {
    auto model = CostModel::Create(Homogeneous(profile, 1, kind, m));
    ASSERT_TRUE(model.ok()) << model.status();
    auto results = SearchTemplates(*model, EnumerateMixes({3}, 1, 3));
    ASSERT_TRUE(results.ok());
    for (const MixResult& r : *results) {
      const MixResult ref = ExhaustiveSearch(*model, r.mix);
      ASSERT_EQ(r.feasible, ref.feasible);
      if (r.feasible) {
        EXPECT_TRUE(Close(r.best.iteration_time_ms, ref.best.iteration_time_ms))
            << CostModelName(kind) << " M=" << m << " nodes " << MixSize(r.mix) << ": "
            << r.best.iteration_time_ms << " vs " << ref.best.iteration_time_ms;
      }
    }
  }
}

// The exactness check (docs/architecture/template-search.md): on random small heterogeneous
// instances (fixed seeds) the search and brute force agree on feasibility and optimum, for every
// mix.
class RandomInstanceTest : public ::testing::TestWithParam<std::tuple<CostModelKind, int>> {};

TEST_P(RandomInstanceTest, SearchEqualsExhaustiveEnumeration) {
  const auto [kind, first_seed] = GetParam();
  int compared = 0, infeasible = 0, memory_binds = 0, multi_type = 0;
  for (int seed = first_seed; seed < first_seed + 50; ++seed) {
    auto inst = MakeRandomInstance(static_cast<uint32_t>(seed), kind, 10, 4);
    auto model = CostModel::Create(inst.problem);
    ASSERT_TRUE(model.ok()) << "seed " << seed << ": " << model.status();
    const auto mixes = EnumerateMixes(inst.available, 1, MixSize(inst.available));
    auto results = SearchTemplates(*model, mixes);
    ASSERT_TRUE(results.ok()) << results.status();
    memory_binds += model->memory_can_bind();
    for (const MixResult& r : *results) {
      int types_used = 0;
      for (int c : r.mix) types_used += c > 0;
      multi_type += types_used > 1;
      const MixResult ref = ExhaustiveSearch(*model, r.mix);
      const std::string where =
          "seed " + std::to_string(seed) + " mix " + MixLabel(r.mix, model->problem().node_types);
      ASSERT_EQ(r.feasible, ref.feasible) << where << ": " << r.infeasible_reason;
      if (!r.feasible) {
        EXPECT_FALSE(r.infeasible_reason.empty()) << where;
        ++infeasible;
        continue;
      }
      ++compared;
      EXPECT_TRUE(Close(r.best.iteration_time_ms, ref.best.iteration_time_ms))
          << where << ": search " << r.best.iteration_time_ms << " exhaustive "
          << ref.best.iteration_time_ms;
      auto again = model->Evaluate(r.best);
      ASSERT_TRUE(again.ok()) << where << ": " << again.status();
      EXPECT_EQ(again->iteration_time_ms, r.best.iteration_time_ms) << where;
    }
  }
  // The generator must keep producing the cases this test is about.
  EXPECT_GE(compared, 100);
  EXPECT_GE(multi_type, 50);
  if (kind == CostModelKind::kOneFOneB) {
    EXPECT_GE(memory_binds, 10);
    EXPECT_GE(infeasible, 5);
  }
}

INSTANTIATE_TEST_SUITE_P(Seeds, RandomInstanceTest,
                         ::testing::Combine(::testing::Values(CostModelKind::kOneFOneB,
                                                              CostModelKind::kOobleckSosp23),
                                            ::testing::Values(1000, 2000, 3000, 4000, 5000, 6000)),
                         [](const auto& info) {
                           return std::string(std::get<0>(info.param) == CostModelKind::kOneFOneB
                                                  ? "OneFOneB"
                                                  : "Sosp23") +
                                  "_seeds" + std::to_string(std::get<1>(info.param));
                         });

// One request for many mixes shares states between them, and each state serves only the
// mixes whose bounds it can still meet: the answers must be those of each mix searched alone,
// on instances longer and wider than brute force can check.
TEST(SearchTest, OneRequestForEveryMixEqualsEachMixAlone) {
  for (CostModelKind kind : {CostModelKind::kOneFOneB, CostModelKind::kOobleckSosp23}) {
    int compared = 0;
    for (uint32_t seed = 500; seed < 580; ++seed) {
      auto inst = MakeRandomInstance(seed, kind, 60, 6);
      auto model = CostModel::Create(inst.problem);
      ASSERT_TRUE(model.ok()) << "seed " << seed << ": " << model.status();
      const auto mixes = EnumerateMixes(inst.available, 1, MixSize(inst.available));
      auto together = SearchTemplates(*model, mixes);
      ASSERT_TRUE(together.ok()) << together.status();
      ASSERT_EQ(together->size(), mixes.size());
      for (size_t i = 0; i < mixes.size(); ++i) {
        auto alone = SearchTemplates(*model, {mixes[i]});
        ASSERT_TRUE(alone.ok()) << alone.status();
        const MixResult& a = (*together)[i];
        const MixResult& b = alone->front();
        const std::string where = "seed " + std::to_string(seed) + " mix " +
                                  MixLabel(mixes[i], model->problem().node_types);
        ASSERT_EQ(a.feasible, b.feasible) << where;
        if (!a.feasible) continue;
        ++compared;
        EXPECT_TRUE(Close(a.best.iteration_time_ms, b.best.iteration_time_ms))
            << where << ": together " << a.best.iteration_time_ms << " alone "
            << b.best.iteration_time_ms;
      }
    }
    EXPECT_GE(compared, 200);
  }
}

TEST(SearchTest, SameTemplatesAtAnyThreadCount) {
  auto inst = MakeRandomInstance(77, CostModelKind::kOneFOneB, 8, 4);
  auto profile = LoadGpt2Xl(testing::kGpt2XlRingProfile);
  ASSERT_NE(profile, nullptr);
  auto model = CostModel::Create(Homogeneous(profile, 4, CostModelKind::kOneFOneB, 8));
  ASSERT_TRUE(model.ok());
  const auto mixes = EnumerateMixes({6}, 1, 6);
  std::vector<MixResult> by_threads[2];
  for (int i = 0; i < 2; ++i) {
    tbb::task_arena arena(i + 1);
    arena.execute([&] { by_threads[i] = *SearchTemplates(*model, mixes); });
  }
  ASSERT_EQ(by_threads[0].size(), by_threads[1].size());
  for (size_t m = 0; m < mixes.size(); ++m) {
    const auto& a = by_threads[0][m].best;
    const auto& b = by_threads[1][m].best;
    EXPECT_EQ(a.iteration_time_ms, b.iteration_time_ms);
    ASSERT_EQ(a.stages.size(), b.stages.size());
    for (size_t s = 0; s < a.stages.size(); ++s) {
      EXPECT_EQ(a.stages[s].layer_begin, b.stages[s].layer_begin);
      EXPECT_EQ(a.stages[s].gpus, b.stages[s].gpus);
      EXPECT_EQ(a.stages[s].node_index, b.stages[s].node_index);
    }
  }
}

TEST(SearchTest, CancelledSearchReturnsCancelled) {
  auto profile = LoadGpt2Xl();
  ASSERT_NE(profile, nullptr);
  auto model = CostModel::Create(Homogeneous(profile, 1, CostModelKind::kOneFOneB, 8));
  ASSERT_TRUE(model.ok());
  SearchOptions options;
  options.cancelled = [] { return true; };
  auto results = SearchTemplates(*model, EnumerateMixes({4}, 1, 4), options);
  EXPECT_EQ(results.status().code(), absl::StatusCode::kCancelled);
}

// A cancellation that arrives part-way (in the bound set-up, whose grid caps are tabulated
// in parallel, or in a later pass) still ends the search with CANCELLED, never with results.
TEST(SearchTest, CancelledPartWayReturnsCancelled) {
  auto profile = LoadGpt2Xl();
  ASSERT_NE(profile, nullptr);
  auto model = CostModel::Create(Homogeneous(profile, 1, CostModelKind::kOneFOneB, 8));
  ASSERT_TRUE(model.ok());
  for (int after : {2, 30, 61, 80, 150, 300, 1000}) {
    std::atomic<int> polls{0};
    std::atomic<bool> fired{false};
    SearchOptions options;
    options.cancelled = [&] {
      if (polls.fetch_add(1) + 1 < after) return false;
      fired = true;
      return true;
    };
    auto results = SearchTemplates(*model, EnumerateMixes({4}, 1, 4), options);
    if (fired) {
      EXPECT_EQ(results.status().code(), absl::StatusCode::kCancelled) << "after " << after;
    } else {
      EXPECT_TRUE(results.ok()) << results.status();
    }
  }
}

TEST(SearchTest, TooManyGpusForTheLayersIsInfeasibleWithReason) {
  auto profile = std::make_shared<ModelProfile>();
  profile->key = {"tiny", "gpu", 1};
  profile->layers.assign(3, LayerProfile{1, 2, 10, 10, {{1, 0}}, {}});
  auto model = CostModel::Create(Homogeneous(profile, 2, CostModelKind::kOneFOneB, 4));
  ASSERT_TRUE(model.ok());
  auto results = SearchTemplates(*model, {{1}, {2}});
  ASSERT_TRUE(results.ok());
  EXPECT_TRUE((*results)[0].feasible);
  EXPECT_FALSE((*results)[1].feasible);
  EXPECT_NE((*results)[1].infeasible_reason.find("at least 4 stages"), std::string::npos)
      << (*results)[1].infeasible_reason;
}

TEST(SearchTest, LayerTooLargeForMemoryIsNamed) {
  auto profile = std::make_shared<ModelProfile>();
  profile->key = {"tiny", "gpu", 1};
  profile->layers.assign(3, LayerProfile{1, 2, 100, 10, {{1, 0}}, {}});
  profile->layers[1].param_bytes = 1e6;
  auto model =
      CostModel::Create(Homogeneous(profile, 1, CostModelKind::kOneFOneB, 4, /*memory=*/1e5));
  ASSERT_TRUE(model.ok());
  auto results = SearchTemplates(*model, {{2}});
  ASSERT_TRUE(results.ok());
  ASSERT_FALSE((*results)[0].feasible);
  EXPECT_NE((*results)[0].infeasible_reason.find("layer 1 does not fit"), std::string::npos)
      << (*results)[0].infeasible_reason;
}

TEST(SearchTest, RejectsMalformedMixes) {
  auto profile = LoadGpt2Xl();
  ASSERT_NE(profile, nullptr);
  auto model = CostModel::Create(Homogeneous(profile, 1, CostModelKind::kOneFOneB, 8));
  ASSERT_TRUE(model.ok());
  EXPECT_EQ(SearchTemplates(*model, {{1, 1}}).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(SearchTemplates(*model, {{0}}).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(SearchTemplates(*model, {{-1}}).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace oobleck
