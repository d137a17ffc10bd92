#include "core/template_planner.h"

#include "core/cluster.h"
#include "gtest/gtest.h"
#include "tests/core/test_problems.h"

namespace oobleck {
namespace {

// GPT-2 XL on 1-GPU nodes under 1f1b with M micro-batches.
absl::StatusOr<CostModel> Gpt2XlModel(int microbatches) {
  auto profile = testing::LoadGpt2Xl();
  if (profile == nullptr) return absl::NotFoundError("GPT-2 XL profile missing");
  return CostModel::Create(
      testing::Homogeneous(profile, 1, CostModelKind::kOneFOneB, microbatches));
}

TEST(TemplatePlannerTest, SecondRequestIsServedFromCache) {
  auto model = Gpt2XlModel(8);
  ASSERT_TRUE(model.ok()) << model.status();
  TemplateCache cache(1 << 20);
  TemplatePlanner planner(&cache, 1);
  auto first = planner.PlanTemplates(*model, EnumerateMixes({3}, 1, 3));
  ASSERT_TRUE(first.ok());
  EXPECT_FALSE((*first)[0].cache_hit);
  // Overlapping request: mixes 2 and 3 are reused, 4 is searched.
  auto second = planner.PlanTemplates(*model, EnumerateMixes({4}, 2, 4));
  ASSERT_TRUE(second.ok());
  EXPECT_TRUE((*second)[0].cache_hit);
  EXPECT_TRUE((*second)[1].cache_hit);
  EXPECT_FALSE((*second)[2].cache_hit);
  EXPECT_EQ((*second)[0].result->best.iteration_time_ms,
            (*first)[1].result->best.iteration_time_ms);
  const CacheStats stats = cache.stats();
  EXPECT_EQ(stats.hits, 2);
  EXPECT_EQ(stats.misses, 4);
  EXPECT_EQ(stats.entries, 4);
}

TEST(TemplatePlannerTest, DifferentProblemsDoNotShareEntries) {
  TemplateCache cache(1 << 20);
  TemplatePlanner planner(&cache, 0);
  auto m8 = Gpt2XlModel(8);
  auto m16 = Gpt2XlModel(16);
  ASSERT_TRUE(m8.ok() && m16.ok());
  ASSERT_TRUE(planner.PlanTemplates(*m8, {{2}}).ok());
  auto other = planner.PlanTemplates(*m16, {{2}});
  ASSERT_TRUE(other.ok());
  EXPECT_FALSE((*other)[0].cache_hit);
}

TEST(TemplatePlannerTest, CancelledSearchCachesNothing) {
  auto model = Gpt2XlModel(8);
  ASSERT_TRUE(model.ok()) << model.status();
  TemplateCache cache(1 << 20);
  TemplatePlanner planner(&cache, 1);
  SearchOptions cancelled;
  cancelled.cancelled = [] { return true; };
  EXPECT_EQ(planner.PlanTemplates(*model, {{2}}, cancelled).status().code(),
            absl::StatusCode::kCancelled);
  EXPECT_EQ(cache.stats().entries, 0);
}

TEST(TemplateCacheTest, EvictsLeastRecentlyUsedWithinBudget) {
  auto entry = std::make_shared<const MixResult>(MixResult{{1}, false, {}, "why"});
  TemplateCache cache(2000);
  for (int i = 0; i < 50; ++i) cache.Insert("key" + std::to_string(i), entry);
  const CacheStats stats = cache.stats();
  EXPECT_LE(stats.bytes, 2000);
  EXPECT_GT(stats.evictions, 0);
  EXPECT_EQ(stats.entries + stats.evictions, 50);
  EXPECT_EQ(cache.Find("key0"), nullptr);  // oldest evicted
  EXPECT_NE(cache.Find("key49"), nullptr);
}

}  // namespace
}  // namespace oobleck
