// PlanTemplateSet's groups (core/plan/template_set.cc): however the mixes are grouped for the
// template search, every mix gets its own optimum, and a group that passes the label budget
// is split and searched again.
#include "core/plan/template_set.h"

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "core/search.h"
#include "gtest/gtest.h"
#include "tests/core/test_planner.h"
#include "tests/core/test_problems.h"

namespace oobleck {
namespace {

// A random instance widened to `types` node types (copies of its own at other speeds), so
// that the box of its mixes passes what one small group holds (2^10 multisets).
PlanningProblem WideProblem(uint32_t seed, int types) {
  testing::RandomInstance inst = testing::MakeRandomInstance(seed, CostModelKind::kOneFOneB, 8, 4);
  PlanningProblem p = std::move(inst.problem);
  const int base = static_cast<int>(p.node_types.size());
  for (int t = base; t < types; ++t) {
    NodeType type = p.node_types[t % base];
    type.name = "wide" + std::to_string(t);
    type.gpu_type = type.name;
    auto profile = std::make_shared<ModelProfile>(*p.profiles[t % base]);
    profile->key.gpu_type = type.name;
    const double speed = 0.7 + 0.15 * t;
    for (LayerProfile& l : profile->layers) {
      l.forward_ms *= speed;
      l.backward_ms *= speed;
    }
    p.node_types.push_back(std::move(type));
    p.profiles.push_back(std::move(profile));
  }
  return p;
}

// Each mix of `set` has the optimum of a search of that mix alone.
void ExpectOwnOptima(const CostModel& model, const TemplateSet& set, uint32_t seed) {
  ASSERT_EQ(set.results.size(), set.mixes.size());
  for (size_t i = 0; i < set.mixes.size(); ++i) {
    ASSERT_NE(set.results[i], nullptr) << "seed " << seed << " mix " << i;
    absl::StatusOr<std::vector<MixResult>> alone = SearchTemplates(model, {set.mixes[i]});
    ASSERT_TRUE(alone.ok()) << alone.status();
    const MixResult& r = *set.results[i];
    ASSERT_EQ(r.feasible, (*alone)[0].feasible) << "seed " << seed << " mix " << i;
    if (!r.feasible) continue;
    const double want = (*alone)[0].best.iteration_time_ms;
    EXPECT_LE(std::abs(r.best.iteration_time_ms - want), 1e-9 * want)
        << "seed " << seed << " mix " << i << ": " << r.best.iteration_time_ms << " vs " << want;
  }
}

TEST(TemplateSetTest, EveryMixHasTheOptimumOfItsOwnSearch) {
  for (uint32_t seed = 0; seed < 6; ++seed) {
    testing::Planned p = testing::MakePlanner(WideProblem(900 + seed, 5));
    const NodeMix available(5, 4);
    absl::StatusOr<TemplateSet> set =
        PlanTemplateSet(*p.templates, *p.model, available, {1, 4}, {});
    ASSERT_TRUE(set.ok()) << set.status();
    ExpectOwnOptima(*p.model, *set, seed);
  }
}

TEST(TemplateSetTest, AGroupOverTheLabelBudgetIsSplitAndSearchedAgain) {
  const uint32_t seed = 903;
  testing::Planned p = testing::MakePlanner(WideProblem(seed, 5));
  const NodeMix available(5, 4);
  const PipelineSizeLimits limits{1, 4};
  // Half the labels of one search of every mix (both passes): too few for that search,
  // enough for each of the groups it is split into (found for this seed).
  const std::vector<NodeMix> mixes = EnumerateMixes(available, 1, 4);
  SearchStats whole_stats;
  SearchOptions counted;
  counted.stats = &whole_stats;
  ASSERT_TRUE(SearchTemplates(*p.model, mixes, counted).ok());
  SearchOptions tight;
  tight.max_labels = whole_stats.labels / 2;
  absl::StatusOr<std::vector<MixResult>> whole = SearchTemplates(*p.model, mixes, tight);
  ASSERT_TRUE(IsOverLabelBudget(whole.status())) << whole.status();

  absl::StatusOr<TemplateSet> set =
      PlanTemplateSet(*p.templates, *p.model, available, limits, tight);
  ASSERT_TRUE(set.ok()) << set.status();
  ExpectOwnOptima(*p.model, *set, seed);
}

TEST(TemplateSetTest, OtherResourceExhaustedAnswersAreNotRetried) {
  testing::Planned p = testing::MakePlanner(WideProblem(905, 5));
  int asked = 0;
  SearchOptions options;
  options.admit = [&]() -> absl::StatusOr<std::shared_ptr<void>> {
    ++asked;
    return absl::ResourceExhaustedError("busy");
  };
  absl::StatusOr<TemplateSet> set =
      PlanTemplateSet(*p.templates, *p.model, NodeMix(5, 4), {1, 4}, options);
  EXPECT_EQ(set.status(), absl::ResourceExhaustedError("busy"));
  EXPECT_EQ(asked, 1);
  EXPECT_FALSE(IsOverLabelBudget(set.status()));
}

}  // namespace
}  // namespace oobleck
