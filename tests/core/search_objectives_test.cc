// Every objective's Final (the time the search optimises) against the cost model's own
// pipeline time, on random stage sequences: a formula changed on one side only fails here,
// naming the objective.
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "core/cost_model.h"
#include "core/template_search/objectives.h"
#include "gtest/gtest.h"
#include "tests/core/test_problems.h"

namespace oobleck {
namespace {

using template_search::OneFOneBObjective;
using template_search::Sosp23Objective;

// The label of the pipeline `costs` (stage costs in pipeline order), built right to left
// as the search builds it.
template <typename Objective>
typename Objective::Label LabelOf(const Objective& objective, const std::vector<double>& costs) {
  typename Objective::Label label{};
  for (auto it = costs.rbegin(); it != costs.rend(); ++it) label = objective.Extend(label, *it);
  return label;
}

template <typename Objective>
void ExpectFinalIsPipelineTime(const std::string& name, const Objective& objective,
                               const CostModel& model, std::mt19937& rng, int max_stages) {
  std::uniform_int_distribution<int> stages(1, max_stages);
  std::uniform_real_distribution<double> cost(0.1, 100);
  std::uniform_int_distribution<int> tie(0, 3);
  for (int trial = 0; trial < 500; ++trial) {
    std::vector<double> costs(stages(rng));
    for (double& c : costs) c = cost(rng);
    // Ties of the max (k* is the last argmax under oobleck-sosp23).
    if (costs.size() > 1 && tie(rng) == 0) costs.front() = costs.back() = 100;
    const double want = model.PipelineTimeMs(costs);
    const double got = objective.Final(LabelOf(objective, costs));
    EXPECT_NEAR(got, want, 1e-12 * std::abs(want))
        << name << ": Final of " << costs.size() << " stages differs from "
        << "CostModel::PipelineTimeMs (trial " << trial << ")";
  }
}

TEST(SearchObjectivesTest, FinalEqualsCostModelPipelineTime) {
  auto profile = testing::LoadGpt2Xl();
  ASSERT_NE(profile, nullptr);
  std::mt19937 rng(20261125);
  for (int m : {1, 4, 16, 50}) {
    for (bool track_stages : {false, true}) {
      auto model = CostModel::Create(testing::Homogeneous(profile, 1, CostModelKind::kOneFOneB, m));
      ASSERT_TRUE(model.ok()) << model.status();
      ExpectFinalIsPipelineTime("OneFOneBObjective M=" + std::to_string(m),
                                OneFOneBObjective{m, track_stages}, *model, rng, 60);
    }
  }
  for (int m : {0, 4, 16, 50}) {
    auto model =
        CostModel::Create(testing::Homogeneous(profile, 1, CostModelKind::kOobleckSosp23, m));
    ASSERT_TRUE(model.ok()) << model.status();
    // With M, Oobleck's formula is defined for at most M stages.
    ExpectFinalIsPipelineTime("Sosp23Objective M=" + std::to_string(m), Sosp23Objective{m, m > 0},
                              *model, rng, m > 0 ? m : 60);
  }
}

}  // namespace
}  // namespace oobleck
