// Issue 26: the in-node all-reduce key conventions (AllreduceKey, normalised to GPU
// counts) and the stage GPU policies (StageGpus, a restriction of the stage sizes).
#include <memory>
#include <string>
#include <vector>

#include "core/cost_model.h"
#include "core/profile.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace oobleck {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr char kMb[] =
    R"([{"forward": 1, "backward": 2, "mem_required": [10, 20]},
        {"forward": 3, "backward": 4, "mem_required": [10, 20]}])";
constexpr char kAcross[] = R"([{"1": 0, "2": 0.5}, {"1": 0, "2": 0.5}])";

TEST(AllreduceKeyTest, GpusMinusOneKeysAreStoredByGpuCount) {
  // sosp23-artifact reads allreduce_in_node[g - 1] for a stage of g GPUs.
  auto layers =
      ParseOobleckProfile(kMb, R"([{"0": 0, "1": 0.25, "3": 0.5},
                                             {"0": 0, "1": 0.75, "3": 1.5}])",
                          kAcross, "dir", "mb1.json", nullptr, AllreduceKey::kGpusMinusOne);
  ASSERT_TRUE(layers.ok()) << layers.status();
  EXPECT_THAT((*layers)[0].allreduce_in_node_ms,
              ElementsAre(std::pair{1, 0.0}, std::pair{2, 0.25}, std::pair{4, 0.5}));
  // The same table by GPU count gives the same layers.
  auto by_gpus = ParseOobleckProfile(kMb, R"([{"1": 0, "2": 0.25, "4": 0.5},
                                              {"1": 0, "2": 0.75, "4": 1.5}])",
                                     kAcross, "dir");
  ASSERT_TRUE(by_gpus.ok()) << by_gpus.status();
  EXPECT_EQ((*by_gpus)[1].allreduce_in_node_ms, (*layers)[1].allreduce_in_node_ms);
}

TEST(AllreduceKeyTest, KeysThatContradictTheConventionNameLayerKeyAndConvention) {
  auto zero = ParseOobleckProfile(kMb, R"([{"1": 0}, {"0": 0}])", kAcross, "dir");
  EXPECT_EQ(zero.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(zero.status().message(),
              HasSubstr("dir/allreduce_in_node.json: layer 1 key 0 is not a stage's GPU count "
                        "under ALLREDUCE_KEY_GPUS (keys 1 to 64 stand for 1 to 64 GPUs)"));
  auto negative = ParseOobleckProfile(kMb, R"([{"-1": 0}, {"-1": 0}])", kAcross, "dir", "mb1.json",
                                      nullptr, AllreduceKey::kGpusMinusOne);
  EXPECT_THAT(negative.status().message(),
              HasSubstr("layer 0 key -1 is not a stage's GPU count minus one under "
                        "ALLREDUCE_KEY_GPUS_MINUS_ONE (keys 0 to 63"));
  auto beyond = ParseOobleckProfile(kMb, R"([{"64": 0}, {"64": 0}])", kAcross, "dir", "mb1.json",
                                    nullptr, AllreduceKey::kGpusMinusOne);
  EXPECT_THAT(beyond.status().message(), HasSubstr("key 64 is not a stage's GPU count minus one"));
  auto huge = ParseOobleckProfile(kMb, R"([{"2147483647": 0}, {"1": 0}])", kAcross, "dir",
                                  "mb1.json", nullptr, AllreduceKey::kGpusMinusOne);
  EXPECT_THAT(huge.status().message(), HasSubstr("key 2147483647 is not"));
  EXPECT_EQ(*InNodeKeyGpus(AllreduceKey::kGpus, 64), 64);
  EXPECT_EQ(*InNodeKeyGpus(AllreduceKey::kGpusMinusOne, 0), 1);
  EXPECT_FALSE(InNodeKeyGpus(AllreduceKey::kGpus, 65).ok());
}

// Three layers with in-node data for every GPU count up to 12.
std::shared_ptr<const ModelProfile> Profile() {
  auto profile = std::make_shared<ModelProfile>();
  profile->key = {"m", "gpu", 1};
  for (int l = 0; l < 3; ++l) {
    LayerProfile layer;
    layer.forward_ms = 1;
    layer.backward_ms = 2;
    layer.param_bytes = 1e6;
    layer.activation_bytes = 1e6;
    for (int g = 2; g <= 12; ++g) layer.allreduce_in_node_ms[g] = 0.1 * g;
    profile->layers.push_back(layer);
  }
  return profile;
}

PlanningProblem Problem(int gpus, StageGpus policy) {
  PlanningProblem p;
  p.node_types = {{"node", "gpu", gpus, 80e9, 100e9}};
  p.profiles = {Profile()};
  p.cost_model = CostModelKind::kOobleckSosp23;
  p.stage_gpus = policy;
  return p;
}

std::vector<int> Sizes(int gpus, StageGpus policy) {
  absl::StatusOr<CostModel> model = CostModel::Create(Problem(gpus, policy));
  EXPECT_TRUE(model.ok()) << model.status();
  return model.ok() ? model->stage_sizes(0) : std::vector<int>{};
}

TEST(StageGpusTest, PoliciesRestrictTheStageSizes) {
  EXPECT_THAT(Sizes(6, StageGpus::kAny), ElementsAre(1, 2, 3, 4, 5, 6));
  EXPECT_THAT(Sizes(6, StageGpus::kDivisors), ElementsAre(1, 2, 3, 6));
  EXPECT_THAT(Sizes(8, StageGpus::kDivisors), ElementsAre(1, 2, 4, 8));
  EXPECT_THAT(Sizes(12, StageGpus::kDivisors), ElementsAre(1, 2, 3, 4, 6, 12));
  // Oobleck develop: every stage a power of two GPUs, the node's stages adding up to its
  // GPUs (tests/core/equal_halves_test.cc compares the layouts with develop's recursion).
  EXPECT_THAT(Sizes(8, StageGpus::kEqualHalves), ElementsAre(1, 2, 4, 8));
  EXPECT_THAT(Sizes(2, StageGpus::kEqualHalves), ElementsAre(1, 2));
  EXPECT_THAT(Sizes(1, StageGpus::kEqualHalves), ElementsAre(1));
  EXPECT_THAT(Sizes(6, StageGpus::kEqualHalves), ElementsAre(1, 2, 4));
  EXPECT_THAT(Sizes(3, StageGpus::kEqualHalves), ElementsAre(1, 2));
  EXPECT_THAT(Sizes(12, StageGpus::kEqualHalves), ElementsAre(1, 2, 4, 8));
}

TEST(StageGpusTest, PolicyIsPartOfTheCacheKeyAndAnyKeepsTheOldKey) {
  const std::string any = Problem(8, StageGpus::kAny).CacheKey();
  EXPECT_EQ(any.find("sg="), std::string::npos);  // keys stored before the policy existed
  EXPECT_NE(Problem(8, StageGpus::kDivisors).CacheKey(), any);
  EXPECT_NE(Problem(8, StageGpus::kEqualHalves).CacheKey(),
            Problem(8, StageGpus::kDivisors).CacheKey());
}

TEST(StageGpusTest, EvaluateRefusesAStageSizeThePolicyLeavesOut) {
  absl::StatusOr<CostModel> model = CostModel::Create(Problem(6, StageGpus::kDivisors));
  ASSERT_TRUE(model.ok());
  PipelineTemplate tmpl;
  tmpl.mix = {1};
  tmpl.node_order = {0};
  tmpl.stages = {{0, 2, 0, 0, 4}, {2, 3, 0, 0, 2}};
  EXPECT_FALSE(model->Evaluate(tmpl).ok());
  tmpl.stages = {{0, 2, 0, 0, 3}, {2, 3, 0, 0, 3}};
  EXPECT_TRUE(model->Evaluate(tmpl).ok());
}

}  // namespace
}  // namespace oobleck
