// Messages that say what the input was: user strings quoted, escaped and capped; numbers as
// written; files named as they are; cluster files refused before they allocate.
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <limits>
#include <string>

#include "core/cluster_file.h"
#include "core/field_path.h"
#include "core/plan/limits.h"
#include "core/profile.h"
#include "core/shown_value.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace oobleck {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr char kExampleDir[] = OOBLECK_SOURCE_DIR "/examples/profiles/gpt2-xl/rtx4090";

TEST(QuoteTest, ShortPrintableTextIsQuotedAsIs) {
  EXPECT_EQ(Quote("v100"), "\"v100\"");
  EXPECT_EQ(Quote(""), "\"\"");
  EXPECT_EQ(Quote("gpu \xc3\xa9t\xc3\xa9 \xe2\x9c\x93"), "\"gpu \xc3\xa9t\xc3\xa9 \xe2\x9c\x93\"");
}

TEST(QuoteTest, EscapesQuotesControlAndInvalidUtf8Bytes) {
  EXPECT_EQ(Quote("a\"b\\c"), R"("a\"b\\c")");
  EXPECT_EQ(Quote(std::string("x\n\t\r\x01\x7f\0y", 8)), R"("x\n\t\r\x01\x7f\x00y")");
  // A stray continuation byte, a lone lead byte, an overlong '/', a surrogate half.
  EXPECT_EQ(Quote("\x80|\xc3|\xc0\xaf|\xed\xa0\x80"), R"("\x80|\xc3|\xc0\xaf|\xed\xa0\x80")");
}

TEST(QuoteTest, LongTextIsCutAndItsLengthGiven) {
  for (size_t n : {size_t{16} << 10, size_t{64} << 10, size_t{1} << 20}) {
    const std::string quoted = Quote(std::string(n, 'm'));
    EXPECT_EQ(quoted,
              "\"" + std::string(kMaxQuotedBytes, 'm') + "...\" (" + std::to_string(n) + " bytes)");
  }
  // Exactly the limit is whole; a multi-byte character is never split.
  EXPECT_EQ(Quote(std::string(kMaxQuotedBytes, 'a')),
            "\"" + std::string(kMaxQuotedBytes, 'a') + "\"");
  const std::string text = std::string(kMaxQuotedBytes - 1, 'a') + "\xe2\x9c\x93";
  EXPECT_EQ(Quote(text), "\"" + std::string(kMaxQuotedBytes - 1, 'a') + "...\" (130 bytes)");
}

TEST(ShowNumberTest, ShowsTheValueItself) {
  EXPECT_EQ(ShowNumber(1e-9), "1e-09");
  EXPECT_EQ(ShowNumber(5e-324), "5e-324");
  EXPECT_EQ(ShowNumber(-5e-324), "-5e-324");
  EXPECT_EQ(ShowNumber(0.1), "0.1");
  EXPECT_EQ(ShowNumber(1.0 / 3), "0.3333333333333333");
  EXPECT_EQ(ShowNumber(2), "2");
  EXPECT_EQ(ShowNumber(0), "0");
  EXPECT_EQ(ShowNumber(std::numeric_limits<double>::infinity()), "inf");
  EXPECT_EQ(ShowNumber(-std::numeric_limits<double>::infinity()), "-inf");
  EXPECT_EQ(ShowNumber(std::numeric_limits<double>::quiet_NaN()), "nan");
  EXPECT_EQ(Show(42), "42");
  EXPECT_EQ(InvalidValue("x", "> 0", -5e-324).message(), "x must be > 0 (got -5e-324)");
}

TEST(ClearErrorsTest, ProfileDirectoryNamesTheFileItRead) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("clear_errors_mb_" + std::to_string(getpid()));
  fs::create_directories(dir);
  fs::copy_file(fs::path(kExampleDir) / "allreduce_in_node.json", dir / "allreduce_in_node.json",
                fs::copy_options::overwrite_existing);
  fs::copy_file(fs::path(kExampleDir) / "allreduce_across_nodes.json",
                dir / "allreduce_across_nodes.json", fs::copy_options::overwrite_existing);
  std::ofstream(dir / "mb000000001.json") << R"([{"forward": 1, "backward": "x"}])";

  absl::StatusOr<ModelProfile> profile = LoadOobleckProfileDir(dir.string(), "m", "g", 0);
  ASSERT_FALSE(profile.ok());
  EXPECT_THAT(profile.status().message(),
              AllOf(HasSubstr("mb000000001.json"), Not(HasSubstr("mb1.json")),
                    Not(HasSubstr("mb<m>.json"))));

  // Well-formed, it loads as micro-batch size 1 from the file as named.
  fs::copy_file(fs::path(kExampleDir) / "mb1.json", dir / "mb000000001.json",
                fs::copy_options::overwrite_existing);
  profile = LoadOobleckProfileDir(dir.string(), "m", "g", 0);
  ASSERT_TRUE(profile.ok()) << profile.status();
  EXPECT_EQ(profile->key.microbatch_size, 1);
  fs::remove_all(dir);
}

std::string ClusterWithNodes(const std::string& groups) {
  return R"({"model": "m", "profile": "prof", "profile_measured_on": "a",
             "inter_node_bytes_per_s": 1e10, "gpu_types": {
               "a": {"memory_gib": 24, "intra_node_bytes_per_s": 2e10, "relative_speed": 1}},
             "node_groups": )" +
         groups + "}";
}

TEST(ClearErrorsTest, ClusterFileNodeCountsAboveTheLimitAreRefusedBeforeAllocating) {
  absl::StatusOr<ClusterFile> file = ParseClusterFile(
      ClusterWithNodes(R"([{"gpu": "a", "nodes": 1e9, "gpus_per_node": 1}])"), "/tmp");
  ASSERT_EQ(file.status().code(), absl::StatusCode::kResourceExhausted) << file.status();
  EXPECT_THAT(file.status().message(),
              AllOf(HasSubstr("node_groups[0].nodes = 1000000000"), HasSubstr("1048576")));

  // The total counts: two groups of 2^19 + 1.
  file = ParseClusterFile(ClusterWithNodes(R"([
      {"gpu": "a", "nodes": 524289, "gpus_per_node": 1},
      {"gpu": "a", "nodes": 524288, "gpus_per_node": 1}])"),
                          "/tmp");
  ASSERT_EQ(file.status().code(), absl::StatusCode::kResourceExhausted) << file.status();
  EXPECT_THAT(file.status().message(),
              HasSubstr("node_groups[1].nodes = 524288 brings the cluster to 1048577 nodes"));

  // At the limit it is accepted (the ids are made).
  file = ParseClusterFile(ClusterWithNodes(R"([{"gpu": "a", "nodes": 4096, "gpus_per_node": 1}])"),
                          "/tmp");
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ(file->node_groups[0].node_ids.size(), 4096u);
  static_assert(kMaxClusterFileNodes >= kMaxClusterNodes);
}

}  // namespace
}  // namespace oobleck
