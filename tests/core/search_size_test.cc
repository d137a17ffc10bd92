// core/search_size: the multisets a search keeps states for are counted exactly, so the
// LLM shape of 6 types with every mix of <= 8 nodes is admitted, and requests that are
// genuinely too large are still refused at once, naming the limit.
#include "core/search_size.h"

#include <algorithm>
#include <chrono>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "core/cluster.h"
#include "core/cost_model.h"
#include "core/search.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace oobleck {
namespace {

using ::testing::HasSubstr;

// `types` node types of 8 GPUs on a synthetic model of `layers` layers: what the size
// estimate reads (types, GPUs per node, layers) at the LLM shape of bench/README.md.
CostModel EightGpuModel(int types, int layers) {
  PlanningProblem p;
  p.cost_model = CostModelKind::kOneFOneB;
  p.microbatches = 16;
  p.inter_node_bytes_per_s = 12.5e9;
  p.missing_allreduce = MissingAllreduce::kRing;
  for (int t = 0; t < types; ++t) {
    auto profile = std::make_shared<ModelProfile>();
    profile->key = {"m", "type" + std::to_string(t), 1};
    profile->layers.assign(layers, LayerProfile{1.0 + t, 2.0 + t, 1e6, 1e6, {{1, 0}}, {}});
    p.node_types.push_back({profile->key.gpu_type, profile->key.gpu_type, 8, 80e9, 300e9});
    p.profiles.push_back(std::move(profile));
  }
  p.derived_from.assign(types, "");
  absl::StatusOr<CostModel> model = CostModel::Create(std::move(p));
  EXPECT_TRUE(model.ok()) << model.status();
  return *std::move(model);
}

// Brute force: every multiset of the box, kept if some mix contains it.
int64_t CountByEnumeration(const std::vector<int>& caps, const std::vector<NodeMix>& mixes) {
  int64_t count = 0;
  std::vector<int> u(caps.size(), 0);
  while (true) {
    for (const NodeMix& mix : mixes) {
      bool inside = true;
      for (size_t t = 0; t < caps.size(); ++t) inside = inside && u[t] <= mix[t];
      if (inside) {
        ++count;
        break;
      }
    }
    size_t t = 0;
    for (; t < caps.size() && u[t] == caps[t]; ++t) u[t] = 0;
    if (t == caps.size()) return count;
    ++u[t];
  }
}

TEST(SearchSizeTest, CountsTheMultisetsInsideSomeMixExactly) {
  std::mt19937 rng(12);
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  for (int round = 0; round < 200; ++round) {
    const int T = pick(1, 5);
    std::vector<NodeMix> mixes(pick(1, 6), NodeMix(T, 0));
    std::vector<int> caps(T, 0);
    for (NodeMix& mix : mixes) {
      for (int t = 0; t < T; ++t) {
        mix[t] = pick(0, 4);
        caps[t] = std::max(caps[t], mix[t]);
      }
    }
    SCOPED_TRACE(round);
    EXPECT_EQ(CountMultisetsInsideMixes(caps, mixes), CountByEnumeration(caps, mixes));
  }
}

// The walk over a box of millions of multisets stops at the caller's deadline: -1, and the
// estimate keeps its upper bound.
TEST(SearchSizeTest, TheBoxWalkStopsWhenInterrupted) {
  const std::vector<int> caps(6, 8);  // 9^6 = 531441 multisets
  const std::vector<NodeMix> mixes = EnumerateMixes(NodeMix(6, 8), 1, 8);
  int polls = 0;
  Interrupt interrupt([&polls] { return ++polls > 3; });
  EXPECT_EQ(CountMultisetsInsideMixes(caps, mixes, &interrupt), -1);
  EXPECT_EQ(polls, 4);
  Interrupt never({});
  EXPECT_EQ(CountMultisetsInsideMixes(caps, mixes, &never), 3003);

  Interrupt stopped([] { return true; });
  const TemplateSearchSize size = EstimateTemplateSearch(EightGpuModel(6, 80), mixes, {}, &stopped);
  EXPECT_TRUE(stopped.stopped());
  EXPECT_EQ(size.useful, std::min(size.box, size.mix_entries));  // not the exact 3003
  EXPECT_GT(size.useful, 3003);
}

TEST(SearchSizeTest, SixLlmTypesWithEveryMixOfUpToEightNodesAreAdmitted) {
  const CostModel model = EightGpuModel(6, 80);
  const std::vector<NodeMix> mixes = EnumerateMixes(NodeMix(6, 8), 1, 8);
  ASSERT_EQ(mixes.size(), 3002u);
  const TemplateSearchSize size = EstimateTemplateSearch(model, mixes);
  EXPECT_EQ(size.box, 531441);      // 9^6
  EXPECT_EQ(size.useful, 3003);     // C(14, 6): the empty multiset too
  EXPECT_EQ(size.node_states, 43);  // boundary + 6 x 7 partial
  EXPECT_EQ(size.states, int64_t{81} * 3003 * 43);
  EXPECT_TRUE(CheckTemplateSearchSize(size).ok()) << CheckTemplateSearchSize(size);
}

TEST(SearchSizeTest, HugeRequestsAreStillRefusedAtOnceNamingTheLimit) {
  const CostModel model = EightGpuModel(6, 80);
  // One mix of 8 nodes of each type: every multiset of the box is inside it, 81 x 9^6 x 43
  // states.
  const std::vector<NodeMix> all = {NodeMix(6, 8)};
  const auto start = std::chrono::steady_clock::now();
  const TemplateSearchSize size = EstimateTemplateSearch(model, all);
  EXPECT_EQ(size.useful, 531441);
  absl::StatusOr<std::vector<MixResult>> refused = SearchTemplates(model, all, {});
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(refused.status().message(),
              AllOf(HasSubstr("search states"), HasSubstr("more than the limit of 33554432")));

  // A box too large to walk: 16 types of up to 8 nodes. Estimated without the walk.
  const CostModel wide = EightGpuModel(16, 80);
  std::vector<NodeMix> eights;
  for (int t = 0; t < 16; ++t) {
    eights.push_back(NodeMix(16, 0));
    eights.back()[t] = 8;
  }
  const TemplateSearchSize wide_size = EstimateTemplateSearch(wide, eights);
  // Not walked: the bound min(box, mix entries) = 16 x 9, not the exact 16 x 8 + 1.
  EXPECT_EQ(wide_size.useful, 16 * 9);
  absl::StatusOr<std::vector<MixResult>> wide_refused = SearchTemplates(wide, eights, {});
  EXPECT_EQ(wide_refused.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(wide_refused.status().message(),
              AllOf(HasSubstr("steps to set up its node multisets"),
                    HasSubstr("more than the limit of 67108864")));
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(500));
}

}  // namespace
}  // namespace oobleck
