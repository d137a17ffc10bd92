#include "core/template_planner.h"

#include <map>

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

// Another process's cache level, in memory: what was published, and what it hands out.
class FakeSharedStore final : public SharedTemplateStore {
 public:
  std::vector<std::shared_ptr<const MixResult>> FindAll(
      const std::vector<std::string>& keys) override {
    std::vector<std::shared_ptr<const MixResult>> out;
    for (const std::string& key : keys) {
      auto it = entries.find(key);
      out.push_back(it == entries.end() ? nullptr : it->second);
    }
    return out;
  }
  void Publish(const std::string& key, std::shared_ptr<const MixResult> result) override {
    entries[key] = std::move(result);
    ++published;
  }
  std::map<std::string, std::shared_ptr<const MixResult>> entries;
  int published = 0;
};

TEST(TemplatePlannerTest, WhatOneProcessSearchedIsASharedHitForAnother) {
  auto model = Gpt2XlModel(8);
  ASSERT_TRUE(model.ok()) << model.status();
  FakeSharedStore shared;
  TemplateCache cache_a(1 << 20);
  TemplatePlanner a(&cache_a, 1, &shared);
  auto searched = a.PlanTemplates(*model, EnumerateMixes({3}, 1, 3));
  ASSERT_TRUE(searched.ok()) << searched.status();
  EXPECT_EQ(shared.published, 3);

  TemplateCache cache_b(1 << 20);
  TemplatePlanner b(&cache_b, 1, &shared);
  SearchOptions no_search;  // a search would have to be admitted first
  no_search.admit = []() -> absl::StatusOr<std::shared_ptr<void>> {
    return absl::InternalError("searched although every mix was shared");
  };
  auto from_shared = b.PlanTemplates(*model, EnumerateMixes({3}, 1, 3), no_search);
  ASSERT_TRUE(from_shared.ok()) << from_shared.status();
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_TRUE((*from_shared)[i].cache_hit && (*from_shared)[i].shared_cache_hit);
    EXPECT_EQ((*from_shared)[i].result->best.iteration_time_ms,
              (*searched)[i].result->best.iteration_time_ms);
  }
  // Now in B's own cache: local hits, not shared ones.
  auto local = b.PlanTemplates(*model, EnumerateMixes({3}, 1, 3), no_search);
  ASSERT_TRUE(local.ok());
  EXPECT_TRUE((*local)[0].cache_hit);
  EXPECT_FALSE((*local)[0].shared_cache_hit);
  EXPECT_EQ(shared.published, 3);
}

TEST(TemplatePlannerTest, SharedResultThatDoesNotFitTheModelIsSearchedAgain) {
  auto model = Gpt2XlModel(8);
  ASSERT_TRUE(model.ok()) << model.status();
  FakeSharedStore shared;
  TemplateCache cache_a(1 << 20);
  TemplatePlanner a(&cache_a, 1, &shared);
  auto searched = a.PlanTemplates(*model, {{2}});
  ASSERT_TRUE(searched.ok());
  ASSERT_EQ(shared.entries.size(), 1u);
  const auto& [key, good] = *shared.entries.begin();
  ASSERT_TRUE(good->feasible);
  std::vector<MixResult> bad(5, *good);
  bad[0].best.stages.back().layer_end -= 1;  // does not cover every layer
  bad[1].best.stages[0].node_type = 7;       // no such node type
  bad[2].best.node_order = {0};              // fewer nodes than the mix
  bad[3].best.stages.back().node_index = 9;  // no such node
  bad[4].best.stages[0].gpus = 2;            // more GPUs than a node has
  for (const MixResult& damaged : bad) {
    shared.entries[key] = std::make_shared<const MixResult>(damaged);
    TemplateCache cache_b(1 << 20);
    TemplatePlanner b(&cache_b, 1, &shared);
    auto planned = b.PlanTemplates(*model, {{2}});
    ASSERT_TRUE(planned.ok());
    EXPECT_FALSE((*planned)[0].shared_cache_hit);
    EXPECT_EQ((*planned)[0].result->best.iteration_time_ms,
              (*searched)[0].result->best.iteration_time_ms);
  }
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
