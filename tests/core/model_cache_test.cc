#include "core/model_cache.h"

#include <memory>
#include <string>

#include "gtest/gtest.h"
#include "tests/core/test_problems.h"

namespace oobleck {
namespace {

std::shared_ptr<const ModelProfile> SmallProfile(const std::string& gpu_type, double forward_ms) {
  auto profile = std::make_shared<ModelProfile>();
  profile->key = {"m", gpu_type, 1};
  for (int l = 0; l < 4; ++l) {
    LayerProfile layer;
    layer.forward_ms = forward_ms + l;
    layer.backward_ms = 2 * forward_ms + l;
    layer.param_bytes = 1e6 * (l + 1);
    layer.activation_bytes = 1e5;
    layer.allreduce_in_node_ms = {{2, 0.5}};
    layer.allreduce_across_nodes_ms = {{2, 1.5}};
    profile->layers.push_back(std::move(layer));
  }
  return profile;
}

TEST(CostModelCacheTest, DeriveIsBuiltOncePerInputAndEqualsDeriveProfile) {
  CostModelCache cache;
  const auto measured = SmallProfile("a100", 3);
  const auto first = cache.Derive(measured, "v100", 0.5);
  const auto again = cache.Derive(measured, "v100", 0.5);
  EXPECT_EQ(first, again);  // the same object
  const ModelProfile expected = DeriveProfile(*measured, "v100", 0.5);
  EXPECT_EQ(first->key, expected.key);
  EXPECT_EQ(first->Fingerprint(), expected.Fingerprint());
  // Another speed, GPU type or source is another profile.
  EXPECT_NE(cache.Derive(measured, "v100", 0.25), first);
  EXPECT_NE(cache.Derive(measured, "t4", 0.5), first);
  const auto replaced = SmallProfile("a100", 3);  // equal content, a new object
  EXPECT_NE(cache.Derive(replaced, "v100", 0.5), first);
  const CostModelCache::Stats stats = cache.stats();
  EXPECT_EQ(stats.hits, 1);
  EXPECT_EQ(stats.misses, 4);
  EXPECT_EQ(stats.entries, 4);
}

TEST(CostModelCacheTest, CreateIsBuiltOncePerProblemAndEqualsCreate) {
  CostModelCache cache;
  const PlanningProblem problem =
      testing::Homogeneous(SmallProfile("a100", 3), 2, CostModelKind::kOneFOneB, 4);
  auto first = cache.Create(problem);
  ASSERT_TRUE(first.ok()) << first.status();
  auto again = cache.Create(problem);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*first, *again);
  auto direct = CostModel::Create(problem);
  ASSERT_TRUE(direct.ok());
  EXPECT_EQ((*first)->problem_key(), direct->problem_key());
  EXPECT_EQ((*first)->ComputeMs(0, 2, 0, 4), direct->ComputeMs(0, 2, 0, 4));
  EXPECT_EQ((*first)->MaxStagesFromEnd(0, 1, 0, 4), direct->MaxStagesFromEnd(0, 1, 0, 4));

  // Every field is part of the key.
  PlanningProblem other = problem;
  other.microbatches = 5;
  auto changed = cache.Create(other);
  ASSERT_TRUE(changed.ok());
  EXPECT_NE(*changed, *first);
  other = problem;
  other.node_types[0].gpu_memory_bytes /= 2;
  EXPECT_NE(*cache.Create(other), *first);
  other = problem;
  other.node_types[0].name = "other";
  EXPECT_NE(*cache.Create(other), *first);
  other = problem;
  other.missing_allreduce = MissingAllreduce::kRing;
  EXPECT_NE(*cache.Create(other), *first);
}

TEST(CostModelCacheTest, ErrorsAreReturnedAndNotCached) {
  CostModelCache cache;
  PlanningProblem problem =
      testing::Homogeneous(SmallProfile("a100", 3), 2, CostModelKind::kOneFOneB, 4);
  problem.microbatches = 0;  // 1f1b needs M
  for (int i = 0; i < 2; ++i) {
    auto model = cache.Create(problem);
    EXPECT_EQ(model.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(model.status().message(), CostModel::Create(problem).status().message());
  }
  EXPECT_EQ(cache.stats().entries, 0);
}

TEST(CostModelCacheTest, StaysWithinItsBudgetAndKeepsTheRecentEntries) {
  const auto measured = SmallProfile("a100", 3);
  CostModelCache probe;
  probe.Derive(measured, "v100", 0.5);
  const int64_t one = probe.stats().bytes;
  ASSERT_GT(one, 0);
  CostModelCache cache(3 * one);  // room for three derived profiles
  for (int i = 1; i <= 10; ++i) cache.Derive(measured, "v100", 1.0 / i);
  EXPECT_EQ(cache.stats().entries, 3);
  EXPECT_LE(cache.stats().bytes, 3 * one);
  const auto recent = cache.Derive(measured, "v100", 1.0 / 10);
  EXPECT_EQ(cache.stats().hits, 1);
  EXPECT_EQ(recent, cache.Derive(measured, "v100", 1.0 / 10));
  // A value larger than the whole budget is returned but never cached.
  CostModelCache tiny(1);
  const auto uncached = tiny.Derive(measured, "v100", 0.5);
  ASSERT_NE(uncached, nullptr);
  EXPECT_EQ(tiny.stats().entries, 0);
}

}  // namespace
}  // namespace oobleck
