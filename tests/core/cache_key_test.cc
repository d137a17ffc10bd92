// Hardening round 3, item 5: the template cache's key joined node-type names unescaped
// with '|' and ':', so names holding those separators made two different clusters share a
// key and a 16 GiB request was served an 80 GiB template as feasible. Names are now
// written with their length first.
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "core/cost_model.h"
#include "core/template_cache.h"
#include "core/template_planner.h"
#include "gtest/gtest.h"
#include "tests/core/test_problems.h"

namespace oobleck {
namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
constexpr double kIntraBytesPerS = 25e9;

// The fields the key writes after a node type's name, as the unescaped key wrote them.
std::string OldFields(const NodeType& type, const ModelProfile& profile) {
  return absl::StrFormat("%d:%a:%a:%s", type.gpus_per_node, type.gpu_memory_bytes,
                         type.intra_node_bytes_per_s, profile.Fingerprint());
}

// Two clusters of two node types whose unescaped keys were equal: A = {"x", 80 GiB},
// {"y:<A's fields>|z", 16 GiB} and B = {"x:<80 GiB fields>|y", 16 GiB}, {"z", 16 GiB}.
// Mix (1, 0) is one 80 GiB node in A and one 16 GiB node in B.
struct CollidingPair {
  PlanningProblem big;    // A
  PlanningProblem small;  // B
};

CollidingPair MakeCollidingPair(std::shared_ptr<const ModelProfile> profile) {
  auto problem = [&](NodeType first, NodeType second) {
    PlanningProblem p = testing::Homogeneous(profile, 1, CostModelKind::kOneFOneB, 8);
    p.node_types = {std::move(first), std::move(second)};
    p.profiles = {profile, profile};
    return p;
  };
  const std::string gpu = profile->key.gpu_type;
  const NodeType big_x{"x", gpu, 1, 80 * kGiB, kIntraBytesPerS};
  const NodeType small_z{"z", gpu, 1, 16 * kGiB, kIntraBytesPerS};
  NodeType small_first{"x:" + OldFields(big_x, *profile) + "|y", gpu, 1, 16 * kGiB,
                       kIntraBytesPerS};
  NodeType big_second{"y:" + OldFields(small_first, *profile) + "|z", gpu, 1, 16 * kGiB,
                      kIntraBytesPerS};
  return {problem(big_x, big_second), problem(small_first, small_z)};
}

// The key as it was built before names were length-prefixed (to show the pair collided).
std::string OldKey(const PlanningProblem& p) {
  std::string key =
      absl::StrFormat("%s|M=%d|k=%a|inter=%a|ar=%d", CostModelName(p.cost_model), p.microbatches,
                      p.optimizer_state_multiplier, p.inter_node_bytes_per_s,
                      static_cast<int>(p.missing_allreduce));
  for (size_t i = 0; i < p.node_types.size(); ++i) {
    absl::StrAppendFormat(&key, "|%s:%s", p.node_types[i].name,
                          OldFields(p.node_types[i], *p.profiles[i]));
  }
  return key;
}

TEST(CacheKeyTest, NamesWithSeparatorsNoLongerCollide) {
  std::shared_ptr<const ModelProfile> profile = testing::LoadGpt2Xl();
  ASSERT_NE(profile, nullptr);
  const CollidingPair pair = MakeCollidingPair(profile);
  ASSERT_EQ(OldKey(pair.big), OldKey(pair.small)) << "the pair no longer tests a collision";
  EXPECT_NE(pair.big.CacheKey(), pair.small.CacheKey());
}

TEST(CacheKeyTest, LengthPrefixesKeepEveryNameSplitApart) {
  std::shared_ptr<const ModelProfile> profile = testing::LoadGpt2Xl();
  ASSERT_NE(profile, nullptr);
  // The same characters split differently between names, or moved between a name and the
  // fields after it, give different keys.
  const std::vector<std::pair<std::string, std::string>> names = {
      {"a|b", "c"}, {"a", "b|c"}, {"a:1", "c"}, {"a", "1:c"}, {"3#a", "c"}, {"", "3#ac"}};
  std::vector<std::string> keys;
  for (const auto& [first, second] : names) {
    PlanningProblem p = testing::Homogeneous(profile, 1, CostModelKind::kOneFOneB, 8);
    p.node_types = {{first, profile->key.gpu_type, 1, 16 * kGiB, kIntraBytesPerS},
                    {second, profile->key.gpu_type, 1, 16 * kGiB, kIntraBytesPerS}};
    p.profiles = {profile, profile};
    keys.push_back(p.CacheKey());
  }
  for (size_t i = 0; i < keys.size(); ++i) {
    for (size_t j = i + 1; j < keys.size(); ++j) EXPECT_NE(keys[i], keys[j]) << i << " " << j;
  }
}

TEST(CacheKeyTest, SmallRequestAfterBigOneIsSearchedNotServedFromCache) {
  std::shared_ptr<const ModelProfile> profile = testing::LoadGpt2Xl();
  ASSERT_NE(profile, nullptr);
  const CollidingPair pair = MakeCollidingPair(profile);
  auto big = CostModel::Create(pair.big);
  auto small = CostModel::Create(pair.small);
  ASSERT_TRUE(big.ok()) << big.status();
  ASSERT_TRUE(small.ok()) << small.status();

  TemplateCache fresh_cache(64 << 20);
  TemplatePlanner fresh(&fresh_cache, 1);
  auto fresh_small = fresh.PlanTemplates(*small, {{1, 0}});
  ASSERT_TRUE(fresh_small.ok()) << fresh_small.status();
  ASSERT_FALSE((*fresh_small)[0].result->feasible) << "gpt2-xl must not fit one 16 GiB GPU";

  TemplateCache cache(64 << 20);
  TemplatePlanner planner(&cache, 1);
  auto first = planner.PlanTemplates(*big, {{1, 0}});
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_TRUE((*first)[0].result->feasible) << "gpt2-xl must fit one 80 GiB GPU";
  auto second = planner.PlanTemplates(*small, {{1, 0}});
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_FALSE((*second)[0].cache_hit);
  EXPECT_FALSE((*second)[0].result->feasible);
  EXPECT_EQ((*second)[0].result->infeasible_reason, (*fresh_small)[0].result->infeasible_reason);
}

}  // namespace
}  // namespace oobleck
