// Startup loading of a profile tree: good profiles load, bad ones are reported and skipped.
#include "server/profile_tree.h"

#include <filesystem>
#include <fstream>
#include <string>

#include "core/profile_catalog.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace oobleck::server {
namespace {

namespace fs = std::filesystem;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr char kExampleDir[] = OOBLECK_SOURCE_DIR "/examples/profiles/gpt2-xl/rtx4090";

void WriteFile(const fs::path& path, const std::string& text) {
  std::ofstream out(path);
  out << text;
}

class ProfileTreeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::path(::testing::TempDir()) /
            ("profile_tree_" +
             std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    fs::remove_all(root_);
    fs::create_directories(root_);
  }
  void TearDown() override { fs::remove_all(root_); }

  // A copy of the example profile as ROOT/model/gpu, with mb1.json also as mb<extra>.json.
  fs::path CopyExample(const std::string& model, const std::string& gpu, int extra_mb = 0) {
    const fs::path dir = root_ / model / gpu;
    fs::create_directories(dir);
    for (const char* file : {"mb1.json", "allreduce_in_node.json", "allreduce_across_nodes.json"}) {
      fs::copy_file(fs::path(kExampleDir) / file, dir / file);
    }
    if (extra_mb > 0) {
      fs::copy_file(dir / "mb1.json", dir / ("mb" + std::to_string(extra_mb) + ".json"));
    }
    return dir;
  }

  fs::path root_;
  ProfileCatalog catalog_;
};

TEST_F(ProfileTreeTest, LoadsEveryMicrobatchSizeOfEveryGpuType) {
  CopyExample("gpt2-xl", "rtx4090", /*extra_mb=*/2);
  CopyExample("gpt2-xl", "a100");
  WriteFile(root_ / "README.md", "not a model");  // files beside models are ignored
  const ProfileTreeReport report = LoadProfileTree(root_.string(), &catalog_);
  EXPECT_THAT(report.errors, ElementsAre());
  EXPECT_THAT(report.loaded,
              ElementsAre("gpt2-xl/a100/mb1", "gpt2-xl/rtx4090/mb1", "gpt2-xl/rtx4090/mb2"));
  EXPECT_EQ(catalog_.size(), 3);
  EXPECT_TRUE(catalog_.Find("gpt2-xl", "rtx4090", 2).ok());
}

TEST_F(ProfileTreeTest, BadProfilesAreReportedAndSkipped) {
  CopyExample("gpt2-xl", "rtx4090");
  const fs::path broken = CopyExample("gpt2-xl", "broken");
  WriteFile(broken / "mb1.json", "[{\"forward\": ");
  fs::create_directories(root_ / "gpt2-xl" / "no-files");
  fs::create_directories(root_ / "empty-model");
  const ProfileTreeReport report = LoadProfileTree(root_.string(), &catalog_);
  EXPECT_THAT(report.loaded, ElementsAre("gpt2-xl/rtx4090/mb1"));
  ASSERT_EQ(report.errors.size(), 3u);
  EXPECT_THAT(report.errors[0], HasSubstr("empty-model"));
  EXPECT_THAT(report.errors[1], HasSubstr("broken"));
  EXPECT_THAT(report.errors[2], HasSubstr("no-files"));
  EXPECT_EQ(catalog_.size(), 1);
}

TEST_F(ProfileTreeTest, MissingRootIsAnErrorNotACrash) {
  const ProfileTreeReport report = LoadProfileTree((root_ / "missing").string(), &catalog_);
  EXPECT_TRUE(report.loaded.empty());
  ASSERT_EQ(report.errors.size(), 1u);
  EXPECT_THAT(report.errors[0], HasSubstr("missing"));
}

}  // namespace
}  // namespace oobleck::server
