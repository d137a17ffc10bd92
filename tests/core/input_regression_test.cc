// Inputs the fuzzers (fuzz/, scripts/ci-fuzz.sh) found to crash, each now a clean error.
// The same inputs are kept in fuzz/corpus/<target>/regression-* so every fuzz run
// replays them too.
#include "absl/status/status.h"
#include "core/cluster_file.h"
#include "core/profile.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace oobleck {
namespace {

using ::testing::HasSubstr;

// nlohmann::json reports a number beyond double's range as out_of_range, not parse_error;
// ParseClusterFile let it escape and the CLI died in std::terminate.
TEST(InputRegressionTest, ClusterFileNumberBeyondDoubleIsInvalidArgument) {
  absl::StatusOr<ClusterFile> file =
      ParseClusterFile(R"({"name": "x", "inter_node_bytes_per_s": 7777777777777E777})", "/tmp");
  EXPECT_EQ(file.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(file.status().message(), HasSubstr("not valid JSON"));
}

TEST(InputRegressionTest, ProfileNumberBeyondDoubleIsInvalidArgument) {
  absl::StatusOr<std::vector<LayerProfile>> layers = ParseOobleckProfile(
      R"([{"forward": 1e999, "backward": 1, "mem_required": [1, 1]}])", "[{}]", "[{}]", "dir");
  EXPECT_EQ(layers.status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace oobleck
