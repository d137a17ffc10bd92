// The search on a 1000-layer model, where the incumbent comes from beam rounds with guessed
// bounds and the prefix bounds prune hardest: its optima must equal those of the previous
// search (tests/reference_search) on the same problems. (Before, the optima of the search
// at commit 3a9a1d1 were pinned here: 1847882.57 and 1002546.29 ms.)
#include <memory>
#include <vector>

#include "bench/bench_problems.h"
#include "core/search.h"
#include "gtest/gtest.h"
#include "tests/reference_search/search_reference.h"

namespace oobleck {
namespace {

using bench::kGiB;

// 1000 layers on V100, RTX 3090 and RTX 4090 nodes of 2 GPUs (the bench's
// Synthetic1000x3Types problem: speeds 1.0, 1.8, 2.94, ring all-reduce estimates, M = 50).
absl::StatusOr<bench::SearchCase> LongModelCase(const NodeMix& nodes, int min_nodes = 0) {
  constexpr int kLayers = 1000;
  auto base = bench::LoadGpt2XlProfile(bench::kGpt2XlProfile, "rtx4090");
  if (!base.ok()) return base.status();
  auto synthetic = bench::SyntheticProfile(**base, kLayers);
  if (!synthetic.ok()) return synthetic.status();
  auto memory = [](double gib) { return gib * kGiB * kLayers / bench::kGpt2XlLayers; };
  const std::vector<bench::NodeTypeSpec> types = {
      {NodeType{"v100", "v100", 2, memory(16), 12e9}, 1.0 / 2.94, nodes[0]},
      {NodeType{"rtx3090", "rtx3090", 2, memory(24), bench::kPcie4BytesPerS}, 1.8 / 2.94, nodes[1]},
      {NodeType{"rtx4090", "rtx4090", 2, memory(24), bench::kPcie4BytesPerS}, 1.0, nodes[2]},
  };
  const int size = nodes[0] + nodes[1] + nodes[2];
  return bench::MakeCase(*std::move(synthetic), types, bench::kOneFOneBM50, MissingAllreduce::kRing,
                         min_nodes > 0 ? min_nodes : size, size);
}

// The optimum of `mix` by the previous search (tests/reference_search), the oracle.
double OracleMs(const CostModel& model, const NodeMix& mix) {
  auto results = reference_search::SearchTemplates(model, {mix});
  if (!results.ok() || results->size() != 1 || !results->front().feasible) return -1;
  return results->front().best.iteration_time_ms;
}

TEST(LongModelSearchTest, MatchesTheEarlierSearchOnOneAndTwoNodesOfEachType) {
  for (const NodeMix& nodes : {NodeMix{1, 1, 1}, NodeMix{2, 2, 2}}) {
    auto problem = LongModelCase(nodes);
    ASSERT_TRUE(problem.ok()) << problem.status();
    auto model = CostModel::Create(problem->problem);
    ASSERT_TRUE(model.ok()) << model.status();
    auto results = SearchTemplates(*model, problem->mixes);
    ASSERT_TRUE(results.ok()) << results.status();
    ASSERT_EQ(results->size(), 1u);
    const MixResult& r = results->front();
    ASSERT_TRUE(r.feasible) << r.infeasible_reason;
    const double expected_ms = OracleMs(*model, nodes);
    EXPECT_NEAR(r.best.iteration_time_ms, expected_ms, 1e-9 * expected_ms);
    EXPECT_EQ(r.best.num_nodes(), MixSize(nodes));
  }
}

// Every mix of up to two nodes of each type in one request (26 mixes, pipelines of 1 to 6
// nodes whose optima differ by 5x): each answer must equal that mix searched alone.
TEST(LongModelSearchTest, EveryMixInOneRequestEqualsEachMixAlone) {
  auto problem = LongModelCase({2, 2, 2}, 1);
  ASSERT_TRUE(problem.ok()) << problem.status();
  ASSERT_EQ(problem->mixes.size(), 26u);
  auto model = CostModel::Create(problem->problem);
  ASSERT_TRUE(model.ok()) << model.status();
  auto together = SearchTemplates(*model, problem->mixes);
  ASSERT_TRUE(together.ok()) << together.status();
  int feasible = 0;
  for (size_t i = 0; i < problem->mixes.size(); ++i) {
    auto alone = SearchTemplates(*model, {problem->mixes[i]});
    ASSERT_TRUE(alone.ok()) << alone.status();
    const MixResult& a = (*together)[i];
    const MixResult& b = alone->front();
    ASSERT_EQ(a.feasible, b.feasible) << "mix " << i;
    if (!a.feasible) continue;
    ++feasible;
    EXPECT_NEAR(a.best.iteration_time_ms, b.best.iteration_time_ms, 1e-9 * b.best.iteration_time_ms)
        << "mix " << i;
  }
  EXPECT_GE(feasible, 20);
  // And the largest mix the oracle's.
  const double oracle_ms = OracleMs(*model, problem->mixes.back());
  EXPECT_NEAR(together->back().best.iteration_time_ms, oracle_ms, 1e-9 * oracle_ms);
}

}  // namespace
}  // namespace oobleck
