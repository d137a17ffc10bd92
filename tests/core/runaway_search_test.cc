// Searches that once ran away (issue "Hardening round 3", items 1 and 2): subnormal stage
// costs made the template search's grid of caps grow without bound; N one-node types with
// min_nodes = max_nodes = N walked 2^N branches to enumerate their one mix; a search's
// set-up and a profile's parse could not be stopped; nothing bounded a search's labels.
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/cluster.h"
#include "core/cost_model.h"
#include "core/interrupt.h"
#include "core/profile.h"
#include "core/search.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace oobleck {
namespace {

using ::testing::HasSubstr;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// `types` node types of `gpus` GPUs each; layer l of every type costs forward[l % size]
// and as much backward. Built directly, without ValidateProfile: costs this small also
// come from derived profiles and in-node all-reduce estimates, which the search must take.
absl::StatusOr<CostModel> Model(int types, int gpus, int layers,
                                const std::vector<double>& forward) {
  PlanningProblem p;
  p.cost_model = CostModelKind::kOneFOneB;
  p.microbatches = 8;
  p.inter_node_bytes_per_s = 1e9;
  p.missing_allreduce = MissingAllreduce::kRing;
  for (int t = 0; t < types; ++t) {
    auto profile = std::make_shared<ModelProfile>();
    profile->key = {"m", "type" + std::to_string(t), 1};
    for (int l = 0; l < layers; ++l) {
      const double ms = forward[l % forward.size()];
      profile->layers.push_back(LayerProfile{ms, ms, 1e6, 1e6, {}, {}});
    }
    p.node_types.push_back({profile->key.gpu_type, profile->key.gpu_type, gpus, 24e9, 1e10});
    p.profiles.push_back(std::move(profile));
  }
  p.derived_from.assign(types, "");
  return CostModel::Create(std::move(p));
}

// Cancelled once `after` has passed since the call.
std::function<bool()> CancelledAfter(milliseconds after) {
  const auto end = Clock::now() + after;
  return [end] { return Clock::now() >= end; };
}

milliseconds Since(Clock::time_point start) {
  return std::chrono::duration_cast<milliseconds>(Clock::now() - start);
}

// Item 1: a subnormal stage cost times the grid factor rounds back to itself, and the
// grid of caps grew until the process was killed (300-500 MB/s). A model made only of
// such layers is refused when its cost model is built (its compute is below 1e-9 ms); one
// with subnormal layers beside real ones, or costs spanning 1e-300 to 1e11 ms, is searched.
TEST(RunawaySearchTest, SubnormalStageCostsEndTheSearch) {
  for (const std::vector<double>& forward :
       std::vector<std::vector<double>>{{5e-324}, {5e-324, 1e-320}, {1e-320}}) {
    EXPECT_EQ(Model(1, 1, 4, forward).status().code(), absl::StatusCode::kInvalidArgument);
  }
  const std::vector<std::vector<double>> profiles = {
      {5e-324, 1.0}, {5e-324, 1e-320, 1.0}, {1e-320, 2.0}, {1e-300, 1e11}};
  for (const std::vector<double>& forward : profiles) {
    SCOPED_TRACE(absl::StrJoin(forward, ", "));
    for (int gpus : {1, 2}) {
      absl::StatusOr<CostModel> model = Model(1, gpus, 4, forward);
      ASSERT_TRUE(model.ok()) << model.status();
      SearchOptions options;
      options.cancelled = CancelledAfter(milliseconds(5000));
      const auto start = Clock::now();
      absl::StatusOr<std::vector<MixResult>> results =
          SearchTemplates(*model, {{1}, {2}, {3}}, options);
      ASSERT_TRUE(results.ok()) << results.status();
      EXPECT_LT(Since(start), milliseconds(1000));
      for (const MixResult& r : *results) EXPECT_TRUE(r.feasible) << r.infeasible_reason;
    }
  }
}

// Item 1 at the input: such values are refused naming the layer and the field.
TEST(RunawaySearchTest, ProfilesRefuseValuesBelowTheLeastPositive) {
  ModelProfile profile;
  profile.key = {"m", "g", 1};
  profile.layers.assign(4, LayerProfile{1, 1, 1, 1, {{2, 0}}, {}});
  EXPECT_TRUE(ValidateProfile(profile).ok());
  profile.layers[2].backward_ms = 5e-324;
  absl::Status status = ValidateProfile(profile);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("layer 2 backward_ms must be 0 or at least 1e-09"));
  profile.layers[2].backward_ms = kMinPositiveProfileValue;
  EXPECT_TRUE(ValidateProfile(profile).ok());
  profile.layers[3].activation_bytes = 1e-320;
  EXPECT_THAT(ValidateProfile(profile).message(), HasSubstr("layer 3 activation_bytes"));
  profile.layers[3].activation_bytes = 0;
  profile.layers[1].allreduce_in_node_ms[2] = 1e-12;
  EXPECT_THAT(ValidateProfile(profile).message(),
              HasSubstr("layer 1 allreduce_in_node key \"2\" must be 0 or at least"));
}

// Item 2: the one mix of N one-node types with min = max = N, and of 2 types of 2^19
// nodes with min = max = 2^20, took 2^N (3.2 s at N = 28) and 2^37 steps to enumerate.
TEST(RunawaySearchTest, OneMixOfManyTypesIsEnumeratedAtOnce) {
  for (int types : {28, 30, 64, 256}) {
    const auto start = Clock::now();
    const std::vector<NodeMix> mixes = EnumerateMixes(NodeMix(types, 1), types, types);
    EXPECT_LT(Since(start), milliseconds(20)) << types;
    ASSERT_EQ(mixes.size(), 1u);
    EXPECT_EQ(mixes[0], NodeMix(types, 1));
  }
  const auto start = Clock::now();
  const std::vector<NodeMix> huge = EnumerateMixes({1 << 19, 1 << 19}, 1 << 20, 1 << 20);
  EXPECT_LT(Since(start), milliseconds(20));
  EXPECT_EQ(huge, std::vector<NodeMix>{NodeMix({1 << 19, 1 << 19})});
  // The order and the mixes themselves are as before, bounds or not.
  EXPECT_EQ(EnumerateMixes({2, 1, 1}, 3, 3),
            (std::vector<NodeMix>{{2, 1, 0}, {2, 0, 1}, {1, 1, 1}}));
  EXPECT_EQ(EnumerateMixes({1, 2}, 1, 2), (std::vector<NodeMix>{{1, 0}, {0, 1}, {1, 1}, {0, 2}}));
}

// A search the size estimate admits stops within ~100 ms of its cancellation, set-up
// included: every mix of one type of 4096 nodes lists 8.4 million (mix, sub-multiset)
// entries before the first layer, and ran 0.25-0.36 s past a 50 ms deadline.
TEST(RunawaySearchTest, EverySizeOfOneTypeStopsWithItsCancellation) {
  absl::StatusOr<CostModel> model = Model(1, 1, 48, {1.0, 2.0, 3.0});
  ASSERT_TRUE(model.ok()) << model.status();
  const std::vector<NodeMix> mixes = EnumerateMixes({4096}, 1, 4096);
  for (int after_ms : {0, 20, 50}) {
    SearchOptions options;
    options.cancelled = CancelledAfter(milliseconds(after_ms));
    const auto start = Clock::now();
    absl::StatusOr<std::vector<MixResult>> results = SearchTemplates(*model, mixes, options);
    EXPECT_EQ(results.status().code(), absl::StatusCode::kCancelled) << after_ms;
    EXPECT_LT(Since(start), milliseconds(after_ms + 100)) << after_ms;
  }
}

// The labels a pass holds are bounded: past SearchOptions::max_labels it stops with
// RESOURCE_EXHAUSTED naming the limit, and below it answers as without the limit.
TEST(RunawaySearchTest, LabelLimitStopsAPassNamingIt) {
  absl::StatusOr<CostModel> model = Model(2, 2, 24, {1.0, 3.0, 2.0, 5.0});
  ASSERT_TRUE(model.ok()) << model.status();
  const std::vector<NodeMix> mixes = EnumerateMixes({3, 3}, 1, 6);
  SearchStats stats;
  SearchOptions unlimited;
  unlimited.stats = &stats;
  absl::StatusOr<std::vector<MixResult>> expected = SearchTemplates(*model, mixes, unlimited);
  ASSERT_TRUE(expected.ok()) << expected.status();
  ASSERT_GT(stats.labels, 100);

  SearchOptions tight;
  tight.max_labels = 50;
  absl::StatusOr<std::vector<MixResult>> stopped = SearchTemplates(*model, mixes, tight);
  EXPECT_EQ(stopped.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(stopped.status().message(), HasSubstr("more than 50 labels"));

  SearchOptions enough;
  enough.max_labels = stats.labels;  // no one pass holds all the passes' labels
  absl::StatusOr<std::vector<MixResult>> same = SearchTemplates(*model, mixes, enough);
  ASSERT_TRUE(same.ok()) << same.status();
  for (size_t i = 0; i < mixes.size(); ++i) {
    EXPECT_EQ((*same)[i].best.iteration_time_ms, (*expected)[i].best.iteration_time_ms);
  }
}

// LoadProfile of 2^18 layers parsed for about a second without looking at its deadline.
TEST(RunawaySearchTest, ProfileParseStopsWithItsInterrupt) {
  std::string mb = "[", none = "[";
  for (int l = 0; l < kMaxLayersPerProfile; ++l) {
    absl::StrAppend(&mb, l > 0 ? "," : "",
                    R"({"forward": 1, "backward": 2, "mem_required": [3, 4]})");
    absl::StrAppend(&none, l > 0 ? "," : "", "{}");
  }
  mb += "]";
  none += "]";
  Interrupt stopped([] { return true; });
  EXPECT_EQ(ParseOobleckProfile(mb, none, none, "big", "mb<m>.json", &stopped).status().code(),
            absl::StatusCode::kCancelled);
  for (int after_ms : {20, 100}) {
    Interrupt interrupt(CancelledAfter(milliseconds(after_ms)));
    const auto start = Clock::now();
    absl::StatusOr<std::vector<LayerProfile>> layers =
        ParseOobleckProfile(mb, none, none, "big", "mb<m>.json", &interrupt);
    if (layers.ok()) {
      EXPECT_EQ(layers->size(), static_cast<size_t>(kMaxLayersPerProfile));
    } else {
      EXPECT_EQ(layers.status().code(), absl::StatusCode::kCancelled);
    }
    EXPECT_LT(Since(start), milliseconds(after_ms + 100)) << after_ms;
  }
}

}  // namespace
}  // namespace oobleck
