// Profiles per tensor-parallel degree: the key's text and order, and the catalog never
// taking a tp > 1 profile for the tp = 1 one the search asks for.
#include <memory>

#include "core/profile.h"
#include "core/profile_catalog.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace oobleck {
namespace {

ModelProfile OneLayer(int tp, double forward_ms = 1) {
  ModelProfile profile;
  profile.key = ProfileKey{"opt", "gh200", 1, tp};
  LayerProfile& layer = profile.layers.emplace_back();
  layer.forward_ms = forward_ms;
  layer.backward_ms = 2;
  return profile;
}

TEST(ProfileTpTest, KeyTextIsUnchangedAtTpOne) {
  EXPECT_EQ((ProfileKey{"m", "g", 2}).ToString(), "m/g/mb2");
  EXPECT_EQ((ProfileKey{"m", "g", 2, 1}).ToString(), "m/g/mb2");
  EXPECT_EQ((ProfileKey{"m", "g", 2, 4}).ToString(), "m/g/mb2/tp4");
  EXPECT_NE((ProfileKey{"m", "g", 2, 4}), (ProfileKey{"m", "g", 2, 1}));
}

TEST(ProfileTpTest, SailorsFieldsChangeTheFingerprintOnlyWhenGiven) {
  ModelProfile profile = OneLayer(1);
  const std::string before = profile.Fingerprint();
  profile.layers[0].update_ms = 0;
  EXPECT_EQ(profile.Fingerprint(), before);
  profile.layers[0].update_ms = 0.5;
  EXPECT_NE(profile.Fingerprint(), before);
}

TEST(ProfileTpTest, ValidationChecksTpAndSailorsFields) {
  ModelProfile profile = OneLayer(0);
  EXPECT_THAT(ValidateProfile(profile).message(), ::testing::HasSubstr("tp must be in [1, 64]"));
  profile = OneLayer(2);
  profile.layers[0].activation_output_bytes = -1;
  EXPECT_THAT(ValidateProfile(profile).message(),
              ::testing::HasSubstr("activation_output_bytes must be a finite number >= 0"));
}

TEST(ProfileTpTest, TheSearchNeverGetsATpAboveOneForTpOne) {
  ProfileCatalog catalog;
  ASSERT_TRUE(catalog.Put(OneLayer(2), false).ok());
  absl::StatusOr<std::shared_ptr<const ModelProfile>> found = catalog.Find("opt", "", 0);
  EXPECT_EQ(found.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(found.status().message(), ::testing::HasSubstr("has no profile at tp 1"));
  ASSERT_TRUE(catalog.Put(OneLayer(1, 7), false).ok());
  found = catalog.Find("opt", "", 0);
  ASSERT_TRUE(found.ok()) << found.status();
  EXPECT_EQ((*found)->key.tp, 1);
  EXPECT_EQ((*found)->layers[0].forward_ms, 7);
  found = catalog.Find("opt", "gh200", 1, 2);
  ASSERT_TRUE(found.ok());
  EXPECT_EQ((*found)->key.tp, 2);
  EXPECT_EQ(catalog.List("opt").size(), 2u);
}

}  // namespace
}  // namespace oobleck
