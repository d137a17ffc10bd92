#include "core/profile.h"

#include "core/profile_catalog.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/core/test_problems.h"

namespace oobleck {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr char kMb[] = R"([{"forward": 1, "backward": 2, "mem_required": [10, 20]},
                           {"forward": 3, "backward": 4, "mem_required": [30, 40]}])";
constexpr char kInNode[] = R"([{"1": 0.0, "2": 0.5}, {"1": 0.0, "2": 0.25}])";
constexpr char kAcross[] = R"([{"1": 0.0}, {"1": 0.0}])";

TEST(ProfileTest, ParsesOobleckLayout) {
  auto layers = ParseOobleckProfile(kMb, kInNode, kAcross, "dir");
  ASSERT_TRUE(layers.ok()) << layers.status();
  ASSERT_EQ(layers->size(), 2u);
  EXPECT_EQ((*layers)[1].forward_ms, 3);
  EXPECT_EQ((*layers)[1].backward_ms, 4);
  EXPECT_EQ((*layers)[1].param_bytes, 30);
  EXPECT_EQ((*layers)[1].activation_bytes, 40);
  EXPECT_EQ((*layers)[0].allreduce_in_node_ms.at(2), 0.5);
}

TEST(ProfileTest, ErrorsNameFileLayerAndKey) {
  auto missing_key = ParseOobleckProfile(
      R"([{"forward": 1, "backward": 2, "mem_required": [1, 1]}, {"forward": 1, "mem_required": [1, 1]}])",
      kInNode, kAcross, "dir");
  EXPECT_EQ(missing_key.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(missing_key.status().message(), HasSubstr("layer 1 lacks key \"backward\""));

  auto negative = ParseOobleckProfile(R"([{"forward": -1, "backward": 2, "mem_required": [1, 1]}])",
                                      R"([{"1": 0}])", R"([{"1": 0}])", "dir");
  EXPECT_THAT(negative.status().message(), HasSubstr("layer 0 \"forward\""));

  auto bad_key = ParseOobleckProfile(kMb, R"([{"x": 0}, {"1": 0}])", kAcross, "dir");
  EXPECT_THAT(bad_key.status().message(),
              HasSubstr("allreduce_in_node.json: layer 0 has a key that is not an integer"));
  // File content is never echoed (a server-side file may hold anything).
  auto secret =
      ParseOobleckProfile(R"([{"forward": "s3cr3t", "backward": 2, "mem_required": [1, 1]}])",
                          R"([{"1": 0}])", R"([{"1": 0}])", "dir");
  EXPECT_THAT(secret.status().message(), HasSubstr("must be a number (got a JSON string)"));
  EXPECT_THAT(secret.status().message(), Not(HasSubstr("s3cr3t")));
  auto secret_key = ParseOobleckProfile(kMb, R"([{"s3cr3t": 0}, {"1": 0}])", kAcross, "dir");
  EXPECT_THAT(secret_key.status().message(), Not(HasSubstr("s3cr3t")));

  auto wrong_count = ParseOobleckProfile(kMb, R"([{"1": 0}])", kAcross, "dir");
  EXPECT_THAT(wrong_count.status().message(), HasSubstr("has 1 layers but the mb file has 2"));

  EXPECT_THAT(ParseOobleckProfile("not json", kInNode, kAcross, "dir").status().message(),
              HasSubstr("not valid JSON"));
  EXPECT_THAT(ParseOobleckProfile("[]", "[]", "[]", "dir").status().message(),
              HasSubstr("has no layers"));
}

TEST(ProfileTest, AllreduceKeyOnSomeLayersOnlyIsRejected) {
  auto layers = ParseOobleckProfile(kMb, R"([{"1": 0, "2": 1}, {"1": 0}])", kAcross, "dir");
  ASSERT_TRUE(layers.ok());
  ModelProfile profile{{"m", "g", 1}, *layers};
  EXPECT_THAT(ValidateProfile(profile).message(),
              HasSubstr("layer 1 lacks allreduce_in_node key \"2\""));
}

TEST(ProfileTest, LoadsTheSharedGpt2XlProfile) {
  auto profile = testing::LoadGpt2Xl();
  ASSERT_NE(profile, nullptr);
  EXPECT_EQ(profile->num_layers(), 50);
  double fwd = 0, bwd = 0;
  for (const LayerProfile& l : profile->layers) {
    fwd += l.forward_ms;
    bwd += l.backward_ms;
  }
  EXPECT_NEAR(fwd, 1584, 1);  // the sums of the measured GPT-2 XL profile on one RTX 4090
  EXPECT_NEAR(bwd, 4753, 1);
  EXPECT_EQ(profile->AllreduceInNodeGpus(), std::vector<int>{1});
  auto ring = testing::LoadGpt2Xl(testing::kGpt2XlRingProfile);
  ASSERT_NE(ring, nullptr);
  EXPECT_EQ(ring->AllreduceInNodeGpus(), (std::vector<int>{1, 2, 4, 8}));
}

TEST(ProfileTest, MissingDirectoryIsNotFound) {
  auto p = LoadOobleckProfileDir("/nonexistent/dir", "m", "g", 1);
  EXPECT_EQ(p.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(p.status().message(), HasSubstr("/nonexistent/dir"));
}

TEST(ProfileTest, DerivedProfileScalesComputeOnly) {
  auto profile = testing::LoadGpt2Xl();
  ASSERT_NE(profile, nullptr);
  ModelProfile derived = DeriveProfile(*profile, "slow", 0.5);
  EXPECT_EQ(derived.key.gpu_type, "slow");
  EXPECT_DOUBLE_EQ(derived.layers[3].forward_ms, 2 * profile->layers[3].forward_ms);
  EXPECT_DOUBLE_EQ(derived.layers[3].backward_ms, 2 * profile->layers[3].backward_ms);
  EXPECT_EQ(derived.layers[3].allreduce_in_node_ms, profile->layers[3].allreduce_in_node_ms);
  EXPECT_EQ(derived.layers[3].param_bytes, profile->layers[3].param_bytes);
  EXPECT_NE(derived.Fingerprint(), profile->Fingerprint());
}

TEST(ProfileCatalogTest, StoresFindsAndRefusesSilentOverwrite) {
  ProfileCatalog catalog;
  auto layers = ParseOobleckProfile(kMb, kInNode, kAcross, "dir");
  ASSERT_TRUE(layers.ok());
  ASSERT_TRUE(catalog.Put({{"m", "a100", 1}, *layers}, false).ok());
  EXPECT_EQ(catalog.Put({{"m", "a100", 1}, *layers}, false).status().code(),
            absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(*catalog.Put({{"m", "a100", 1}, *layers}, true), true);
  // A single GPU type and micro-batch size can be left out.
  auto found = catalog.Find("m", "", 0);
  ASSERT_TRUE(found.ok());
  EXPECT_EQ((*found)->key.gpu_type, "a100");
  ASSERT_TRUE(catalog.Put({{"m", "h100", 1}, *layers}, false).ok());
  EXPECT_EQ(catalog.Find("m", "", 0).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(catalog.Find("m", "v100", 1).status().message(), HasSubstr("a100, h100"));
  EXPECT_EQ(catalog.Find("other", "", 0).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(catalog.List("m").size(), 2u);
  EXPECT_EQ(catalog.size(), 2);
}

}  // namespace
}  // namespace oobleck
