#include "core/cluster_file.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace oobleck {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

std::string ExampleData(const std::string& relative) {
  return std::string(OOBLECK_EXAMPLE_DATA) + "/" + relative;
}

struct DittoExpectation {
  std::string file;
  std::vector<std::string> node_type_names;  // in node-group order
  std::vector<int> counts;
  int gpus_per_node;
  std::vector<std::string> gpu_types;  // sorted
};

class DittoClusterTest : public ::testing::TestWithParam<DittoExpectation> {};

TEST_P(DittoClusterTest, ParsesWithTheRightShape) {
  const DittoExpectation& want = GetParam();
  absl::StatusOr<ClusterFile> file = LoadClusterFile(ExampleData("clusters/" + want.file));
  ASSERT_TRUE(file.ok()) << file.status();

  EXPECT_EQ(file->model, "gpt2-xl");
  EXPECT_EQ(file->microbatch_size, 1);
  EXPECT_EQ(file->microbatches_per_pipeline, 50);
  EXPECT_DOUBLE_EQ(file->inter_node_bytes_per_s, 12.5e9);
  EXPECT_DOUBLE_EQ(file->optimizer_state_multiplier, 6);  // the default; the files omit it
  EXPECT_TRUE(file->missing_allreduce_ring);
  EXPECT_EQ(file->profile_measured_on, "rtx4090");
  // "../profiles/gpt2-xl/rtx4090" resolved against the file's directory, absolute and normalised.
  EXPECT_TRUE(std::filesystem::path(file->profile_dir).is_absolute());
  EXPECT_EQ(file->profile_dir.find(".."), std::string::npos) << file->profile_dir;
  EXPECT_TRUE(
      std::filesystem::equivalent(file->profile_dir, ExampleData("profiles/gpt2-xl/rtx4090")));

  std::vector<std::string> gpu_names;
  for (const ClusterFileGpuType& gpu : file->gpu_types) {
    gpu_names.push_back(gpu.name);
    EXPECT_GT(gpu.relative_speed, 0) << gpu.name;  // every type is derived in these files
    EXPECT_TRUE(gpu.profile_dir.empty()) << gpu.name;
  }
  EXPECT_EQ(gpu_names, want.gpu_types);

  const std::vector<NodeType> types = file->NodeTypes();
  std::vector<std::string> type_names;
  for (const NodeType& t : types) {
    type_names.push_back(t.name);
    EXPECT_EQ(t.gpu_type, t.name);
    EXPECT_EQ(t.gpus_per_node, want.gpus_per_node);
    const ClusterFileGpuType* gpu = file->FindGpuType(t.gpu_type);
    ASSERT_NE(gpu, nullptr);
    EXPECT_DOUBLE_EQ(t.gpu_memory_bytes, gpu->memory_bytes);
    EXPECT_DOUBLE_EQ(t.intra_node_bytes_per_s, gpu->intra_node_bytes_per_s);
  }
  EXPECT_EQ(type_names, want.node_type_names);
  EXPECT_EQ(file->NodeCounts(), want.counts);

  // Generated ids: <gpu>-<k>, one per node.
  for (const ClusterFileNodeGroup& group : file->node_groups) {
    ASSERT_EQ(static_cast<int>(group.node_ids.size()), group.nodes);
    for (int k = 0; k < group.nodes; ++k) {
      EXPECT_EQ(group.node_ids[k], group.gpu + "-" + std::to_string(k));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    ExampleData, DittoClusterTest,
    ::testing::Values(
        DittoExpectation{"ditto-exp1.json", {"v100", "rtx3090"}, {2, 2}, 2, {"rtx3090", "v100"}},
        DittoExpectation{"ditto-exp2.json",
                         {"v100", "rtx3090", "rtx4090"},
                         {2, 2, 2},
                         2,
                         {"rtx3090", "rtx4090", "v100"}},
        DittoExpectation{"ditto-exp3.json",
                         {"v100", "rtx3090", "rtxa6000", "rtx4090"},
                         {4, 3, 2, 2},
                         2,
                         {"rtx3090", "rtx4090", "rtxa6000", "v100"}},
        DittoExpectation{"ditto-exp4.json",
                         {"v100", "rtx3090", "rtxa6000"},
                         {2, 2, 2},
                         4,
                         {"rtx3090", "rtxa6000", "v100"}},
        DittoExpectation{"ditto-exp5.json",
                         {"v100", "rtx3090", "a100-80"},
                         {4, 4, 2},
                         2,
                         {"a100-80", "rtx3090", "v100"}}),
    [](const ::testing::TestParamInfo<DittoExpectation>& info) {
      std::string name = info.param.file.substr(0, info.param.file.find('.'));
      name.erase(std::remove(name.begin(), name.end(), '-'), name.end());
      return name;
    });

TEST(ClusterFileTest, Exp1GpuTypeValues) {
  absl::StatusOr<ClusterFile> file = LoadClusterFile(ExampleData("clusters/ditto-exp1.json"));
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ(file->name, "ditto-exp1");
  const ClusterFileGpuType* v100 = file->FindGpuType("v100");
  ASSERT_NE(v100, nullptr);
  EXPECT_DOUBLE_EQ(v100->memory_bytes, 16 * kGiB);
  EXPECT_DOUBLE_EQ(v100->relative_speed, 1.0);
  EXPECT_DOUBLE_EQ(v100->intra_node_bytes_per_s, 12e9);
  const ClusterFileGpuType* rtx3090 = file->FindGpuType("rtx3090");
  ASSERT_NE(rtx3090, nullptr);
  EXPECT_DOUBLE_EQ(rtx3090->memory_bytes, 24 * kGiB);
  EXPECT_DOUBLE_EQ(rtx3090->relative_speed, 1.8);
  EXPECT_EQ(file->FindGpuType("rtx4090"), nullptr);
}

// A small valid file; tests replace parts of it.
std::string MinimalFile(const std::string& gpu_types, const std::string& node_groups,
                        const std::string& extra = "") {
  return R"({"model": "m", "profile": "prof", "profile_measured_on": "ref",
             "inter_node_bytes_per_s": 1e10, "gpu_types": )" +
         gpu_types + R"(, "node_groups": )" + node_groups + extra + "}";
}

const char kTwoTypes[] = R"({
  "a": {"memory_gib": 24, "intra_node_bytes_per_s": 2e10, "profile": "a_prof"},
  "b": {"memory_gib": 0.5, "intra_node_bytes_per_s": 1e10, "relative_speed": 2}})";

TEST(ClusterFileTest, ResolvesPathsAndConvertsUnits) {
  absl::StatusOr<ClusterFile> file =
      ParseClusterFile(MinimalFile(kTwoTypes, R"([{"gpu": "b", "nodes": 1, "gpus_per_node": 2}])",
                                   R"(, "optimizer_state_multiplier": 4, "microbatch_size": 2)"),
                       "/data/clusters/../clusters");
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ(file->profile_dir, "/data/clusters/prof");
  ASSERT_NE(file->FindGpuType("a"), nullptr);
  EXPECT_EQ(file->FindGpuType("a")->profile_dir, "/data/clusters/a_prof");
  EXPECT_DOUBLE_EQ(file->FindGpuType("b")->memory_bytes, 0.5 * kGiB);
  EXPECT_DOUBLE_EQ(file->optimizer_state_multiplier, 4);
  EXPECT_EQ(file->microbatch_size, 2);
  EXPECT_EQ(file->microbatches_per_pipeline, 0);  // absent: the client supplies M
  EXPECT_FALSE(file->missing_allreduce_ring);
}

TEST(ClusterFileTest, AbsolutePathsAreKeptButNormalised) {
  absl::StatusOr<ClusterFile> file = ParseClusterFile(
      R"({"model": "m", "inter_node_bytes_per_s": 1e10,
          "gpu_types": {"a": {"memory_gib": 1, "intra_node_bytes_per_s": 1,
                              "profile": "/x/./y/../a/"}},
          "node_groups": [{"gpu": "a", "nodes": 1, "gpus_per_node": 1}]})",
      "/elsewhere");
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ(file->FindGpuType("a")->profile_dir, "/x/a");
  EXPECT_TRUE(file->profile_dir.empty());
}

TEST(ClusterFileTest, GeneratesIdsPerGpuTypeAcrossGroups) {
  absl::StatusOr<ClusterFile> file = ParseClusterFile(MinimalFile(kTwoTypes, R"([
        {"gpu": "b", "nodes": 2, "gpus_per_node": 2},
        {"gpu": "a", "nodes": 1, "gpus_per_node": 4, "node_ids": ["10.0.0.7"]},
        {"gpu": "b", "nodes": 1, "gpus_per_node": 4},
        {"gpu": "b", "nodes": 1, "gpus_per_node": 2}])"),
                                                      "/d");
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_THAT(file->node_groups[0].node_ids, ElementsAre("b-0", "b-1"));
  EXPECT_THAT(file->node_groups[1].node_ids, ElementsAre("10.0.0.7"));
  EXPECT_THAT(file->node_groups[2].node_ids, ElementsAre("b-2"));
  EXPECT_THAT(file->node_groups[3].node_ids, ElementsAre("b-3"));

  // b comes in two node sizes, so its types carry the size; a does not.
  const std::vector<NodeType> types = file->NodeTypes();
  ASSERT_EQ(types.size(), 3u);
  EXPECT_EQ(types[0].name, "bx2");
  EXPECT_EQ(types[0].gpus_per_node, 2);
  EXPECT_EQ(types[1].name, "a");
  EXPECT_EQ(types[1].gpus_per_node, 4);
  EXPECT_EQ(types[2].name, "bx4");
  EXPECT_EQ(types[2].gpu_type, "b");
  EXPECT_THAT(file->NodeCounts(), ElementsAre(3, 1, 1));
}

// Parses `json` and returns the error message ("" when it parsed).
std::string ErrorOf(const std::string& json) {
  absl::StatusOr<ClusterFile> file = ParseClusterFile(json, "/d");
  if (file.ok()) return "";
  EXPECT_EQ(file.status().code(), absl::StatusCode::kInvalidArgument) << file.status();
  return std::string(file.status().message());
}

TEST(ClusterFileErrorsTest, NonPositiveGpusPerNodeNamesPathAndValue) {
  EXPECT_EQ(ErrorOf(MinimalFile(kTwoTypes, R"([{"gpu": "a", "nodes": 1, "gpus_per_node": 2},
                                              {"gpu": "b", "nodes": 1, "gpus_per_node": 0}])")),
            "node_groups[1].gpus_per_node must be a positive integer (got 0)");
  EXPECT_EQ(ErrorOf(MinimalFile(kTwoTypes, R"([{"gpu": "a", "nodes": 1.5, "gpus_per_node": 2}])")),
            "node_groups[0].nodes must be a positive integer (got 1.5)");
  EXPECT_EQ(ErrorOf(MinimalFile(kTwoTypes, R"([{"gpu": "a", "nodes": "2", "gpus_per_node": 2}])")),
            "node_groups[0].nodes must be a positive integer (got \"2\")");
  EXPECT_EQ(ErrorOf(MinimalFile(kTwoTypes, R"([{"gpu": "a", "gpus_per_node": 2}])")),
            "node_groups[0].nodes is required");
}

TEST(ClusterFileErrorsTest, UnknownGpuIsNamed) {
  EXPECT_EQ(ErrorOf(MinimalFile(kTwoTypes, R"([{"gpu": "h100", "nodes": 1, "gpus_per_node": 8}])")),
            "node_groups[0].gpu \"h100\" is not a key of gpu_types (known: a, b)");
}

TEST(ClusterFileErrorsTest, GpuTypeNeedsExactlyOneOfProfileAndRelativeSpeed) {
  const std::string groups = R"([{"gpu": "c", "nodes": 1, "gpus_per_node": 1}])";
  EXPECT_THAT(ErrorOf(MinimalFile(R"({"c": {"memory_gib": 8, "intra_node_bytes_per_s": 1e9,
                                          "profile": "p", "relative_speed": 1}})",
                                  groups)),
              HasSubstr("gpu_types.c must have exactly one of \"profile\""));
  EXPECT_THAT(
      ErrorOf(MinimalFile(R"({"c": {"memory_gib": 8, "intra_node_bytes_per_s": 1e9}})", groups)),
      HasSubstr("(got neither)"));
  EXPECT_EQ(ErrorOf(MinimalFile(R"({"c": {"memory_gib": 8, "intra_node_bytes_per_s": 1e9,
                                         "relative_speed": -1}})",
                                groups)),
            "gpu_types.c.relative_speed must be a positive number (got -1)");
}

TEST(ClusterFileErrorsTest, RelativeSpeedNeedsTopLevelProfile) {
  EXPECT_THAT(ErrorOf(R"({"model": "m", "inter_node_bytes_per_s": 1e10,
      "gpu_types": {"c": {"memory_gib": 8, "intra_node_bytes_per_s": 1e9, "relative_speed": 2}},
      "node_groups": [{"gpu": "c", "nodes": 1, "gpus_per_node": 1}]})"),
              HasSubstr("gpu_types.c.relative_speed needs the top-level \"profile\""));
  EXPECT_THAT(ErrorOf(R"({"model": "m", "profile": "p", "inter_node_bytes_per_s": 1e10,
      "gpu_types": {"c": {"memory_gib": 8, "intra_node_bytes_per_s": 1e9, "relative_speed": 2}},
      "node_groups": [{"gpu": "c", "nodes": 1, "gpus_per_node": 1}]})"),
              HasSubstr("profile_measured_on is required"));
}

TEST(ClusterFileErrorsTest, BadValuesNameTheKey) {
  const std::string groups = R"([{"gpu": "a", "nodes": 1, "gpus_per_node": 1}])";
  EXPECT_EQ(ErrorOf(MinimalFile(R"({"a": {"memory_gib": "16", "intra_node_bytes_per_s": 1e9,
                                         "profile": "p"}})",
                                groups)),
            "gpu_types.a.memory_gib must be a positive number (got \"16\")");
  EXPECT_EQ(ErrorOf(MinimalFile(kTwoTypes, groups, R"(, "missing_allreduce_in_node": "tree")")),
            "missing_allreduce_in_node must be \"ring\" (the one defined estimate) (got \"tree\")");
  EXPECT_EQ(ErrorOf(MinimalFile(kTwoTypes, groups, R"(, "optimizer_state_multiplier": 0)")),
            "optimizer_state_multiplier must be a positive number (got 0)");
  EXPECT_THAT(ErrorOf(MinimalFile(kTwoTypes, groups, R"(, "optimiser_state_multiplier": 4)")),
              HasSubstr("unknown key \"optimiser_state_multiplier\""));
  EXPECT_THAT(ErrorOf(R"({"model": "m", "profile": "p", "profile_measured_on": "a",
      "inter_node_bytes_per_s": 1e10,
      "gpu_types": {"a": {"memory_gib": 8, "intra_node_bytes_per_s": 1e9, "profile": "q"}},
      "node_groups": [{"gpu": "a", "nodes": 1, "gpus_per_node": 1}]})"),
              HasSubstr("gpu_types.a.profile \"/d/q\" conflicts with the top-level profile"));
  EXPECT_EQ(ErrorOf(R"({"inter_node_bytes_per_s": 1, "gpu_types": {}, "node_groups": []})"),
            "model is required");
  EXPECT_THAT(ErrorOf(R"({"model": "m", "inter_node_bytes_per_s": 1, "gpu_types": [1],
                          "node_groups": []})"),
              HasSubstr("gpu_types must be a non-empty object"));
  EXPECT_THAT(ErrorOf("{\"model\": "), HasSubstr("not valid JSON"));
}

TEST(ClusterFileTest, PricePerHourIsPerGpuAndOptional) {
  absl::StatusOr<ClusterFile> file =
      ParseClusterFile(MinimalFile(R"({
        "a": {"memory_gib": 24, "intra_node_bytes_per_s": 2e10, "profile": "a_prof",
              "price_per_hour": 0.75},
        "b": {"memory_gib": 8, "intra_node_bytes_per_s": 1e10, "relative_speed": 2}})",
                                   R"([{"gpu": "a", "nodes": 2, "gpus_per_node": 4},
                      {"gpu": "b", "nodes": 1, "gpus_per_node": 2}])"),
                       "/d");
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_DOUBLE_EQ(file->FindGpuType("a")->price_per_hour, 0.75);
  EXPECT_DOUBLE_EQ(file->FindGpuType("b")->price_per_hour, 0);    // absent: no price
  EXPECT_THAT(file->NodePricesPerHour(), ElementsAre(3.0, 0.0));  // per node: 4 GPUs x 0.75
  const std::string groups = R"([{"gpu": "a", "nodes": 1, "gpus_per_node": 1}])";
  EXPECT_EQ(ErrorOf(MinimalFile(R"({"a": {"memory_gib": 16, "intra_node_bytes_per_s": 1e9,
                                         "profile": "p", "price_per_hour": -1}})",
                                groups)),
            "gpu_types.a.price_per_hour must be a finite number >= 0 (got -1)");
  EXPECT_THAT(ErrorOf(MinimalFile(R"({"a": {"memory_gib": 16, "intra_node_bytes_per_s": 1e9,
                                         "profile": "p", "price_per_hour": "cheap"}})",
                                  groups)),
              HasSubstr("gpu_types.a.price_per_hour must be a finite number >= 0"));
}

TEST(ClusterFileErrorsTest, NodeIdsMustMatchNodesAndBeUnique) {
  EXPECT_EQ(ErrorOf(MinimalFile(
                kTwoTypes, R"([{"gpu": "a", "nodes": 2, "gpus_per_node": 1, "node_ids": ["x"]}])")),
            "node_groups[0].node_ids must have one id per node (node_groups[0].nodes = 2, got 1 "
            "ids)");
  EXPECT_EQ(ErrorOf(MinimalFile(kTwoTypes, R"([
                {"gpu": "a", "nodes": 1, "gpus_per_node": 1},
                {"gpu": "b", "nodes": 1, "gpus_per_node": 1, "node_ids": ["a-0"]}])")),
            "node_groups[1].node_ids[0] \"a-0\" duplicates node_groups[0].node_ids[0] (node ids "
            "must be unique)");
}

TEST(ClusterFileErrorsTest, LoadNamesTheFile) {
  EXPECT_EQ(LoadClusterFile("/nonexistent/cluster.json").status().code(),
            absl::StatusCode::kNotFound);

  const std::filesystem::path path =
      std::filesystem::temp_directory_path() /
      ("oobleck_cluster_file_test_" + std::to_string(::getpid()) + ".json");
  {
    std::ofstream out(path);
    out << MinimalFile(kTwoTypes, R"([{"gpu": "a", "nodes": 0, "gpus_per_node": 1}])");
  }
  absl::StatusOr<ClusterFile> file = LoadClusterFile(path.string());
  std::filesystem::remove(path);
  ASSERT_FALSE(file.ok());
  EXPECT_EQ(file.status().message(),
            path.string() + ": node_groups[0].nodes must be a positive integer (got 0)");
}

}  // namespace
}  // namespace oobleck
