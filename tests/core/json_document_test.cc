// Hardening round 3, item 3: documents nested deeper than kMaxJsonDepth are refused
// before nlohmann::json builds (and recursively prints or destroys) them, wherever JSON is
// read: profiles, cluster files (the CLI and trace_replay) and the helper itself.
#include "core/json_document.h"

#include <string>

#include "core/cluster_file.h"
#include "core/profile.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace oobleck {
namespace {

using ::testing::HasSubstr;

std::string NestedArrays(int depth) {
  return std::string(static_cast<size_t>(depth), '[') +
         std::string(static_cast<size_t>(depth), ']');
}

TEST(JsonDocumentTest, AcceptsTheDepthLimitAndRefusesOneMore) {
  absl::StatusOr<nlohmann::json> at_limit = ParseJsonDocument(NestedArrays(kMaxJsonDepth));
  ASSERT_TRUE(at_limit.ok()) << at_limit.status();
  EXPECT_TRUE(at_limit->is_array());

  absl::StatusOr<nlohmann::json> deeper = ParseJsonDocument(NestedArrays(kMaxJsonDepth + 1));
  EXPECT_EQ(deeper.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(deeper.status().message(), HasSubstr("nested deeper than 64 levels"));
  // Objects count as levels too.
  std::string objects;
  for (int i = 0; i <= kMaxJsonDepth; ++i) objects += "{\"a\":";
  objects += "1" + std::string(kMaxJsonDepth + 1, '}');
  EXPECT_THAT(ParseJsonDocument(objects).status().message(), HasSubstr("nested deeper"));
}

TEST(JsonDocumentTest, HugeNestingIsRefusedWithoutCrashing) {
  for (const std::string& text : {NestedArrays(200'000), std::string(200'000, '['),
                                  "{\"a\":" + NestedArrays(200'000) + "}"}) {
    absl::StatusOr<nlohmann::json> doc = ParseJsonDocument(text);
    EXPECT_EQ(doc.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(doc.status().message(), HasSubstr("nested deeper"));
  }
}

TEST(JsonDocumentTest, SyntaxErrorsAndOverflowingNumbersAreInvalidWithTheReason) {
  for (const char* bad : {"", "{", "[1,]", "[1] x", "1e999", "{\"a\" 1}"}) {
    absl::StatusOr<nlohmann::json> doc = ParseJsonDocument(bad);
    EXPECT_EQ(doc.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(doc.status().message(), HasSubstr("not valid JSON: ")) << bad;
  }
}

TEST(JsonDocumentTest, CountsTopLevelElementsBeforeParsing) {
  JsonLimits limits;
  limits.max_top_level_elements = 3;
  EXPECT_TRUE(ParseJsonDocument("[1,[2,3,4,5],3]", limits).ok());
  absl::StatusOr<nlohmann::json> over = ParseJsonDocument("[1,2,3,4]", limits);
  EXPECT_EQ(over.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(over.status().message(), HasSubstr("more than 3 top-level elements"));
}

// The cluster file of the CLI and trace_replay: a deep value crashed them (SIGSEGV while
// printing it for the error message).
TEST(JsonDocumentTest, DeepClusterFileIsInvalidArgument) {
  for (const std::string& text :
       {NestedArrays(100'000), std::string(100'000, '['),
        "{\"name\": " + NestedArrays(100'000) + "}",
        "{\"gpu_types\": {\"a\": {\"relative_speed\": " + NestedArrays(100'000) + "}}}"}) {
    absl::StatusOr<ClusterFile> file = ParseClusterFile(text, "/tmp");
    EXPECT_EQ(file.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(file.status().message(), HasSubstr("nested deeper than 64 levels"));
  }
}

TEST(JsonDocumentTest, DeepProfileFileIsInvalidArgumentNamingTheFile) {
  const std::string layer = R"([{"forward": 1, "backward": 2, "mem_required": [3, 4]}])";
  const std::string deep = "[" + NestedArrays(200'000) + "]";
  auto from_mb = ParseOobleckProfile(deep, "[{}]", "[{}]", "files");
  EXPECT_EQ(from_mb.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(from_mb.status().message(), HasSubstr("files/mb<m>.json: nested deeper"));
  auto from_allreduce = ParseOobleckProfile(layer, deep, "[{}]", "files");
  EXPECT_THAT(from_allreduce.status().message(),
              HasSubstr("files/allreduce_in_node.json: nested deeper"));
}

}  // namespace
}  // namespace oobleck
