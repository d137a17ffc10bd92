// Core's field errors carry their path as data (core/field_path.h), made by FieldError and
// moved under an enclosing field by UnderField/InField, never by pasting text.
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "core/cost_model.h"
#include "core/field_path.h"
#include "core/plan/fault_tolerance.h"
#include "core/plan/limits.h"
#include "core/plan/node_set.h"
#include "gtest/gtest.h"

namespace oobleck {
namespace {

TEST(FieldErrorTest, ThePayloadKeyNamesWhatItHolds) {
  // Not a protobuf message, so not a type.googleapis.com URL of one (the key once named
  // oobleck.planner.FieldPath, a message that does not exist).
  EXPECT_NE(kFieldPathPayloadUrl.rfind("type.googleapis.com/", 0), 0u);
  const absl::Status error =
      FieldError(absl::StatusCode::kFailedPrecondition, "objective", " = \"cost\" needs prices");
  EXPECT_EQ(error.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(error.message(), "objective = \"cost\" needs prices");
  const auto payload = error.GetPayload(kFieldPathPayloadUrl);  // absl::optional here
  ASSERT_TRUE(payload.has_value());
  EXPECT_EQ(std::string(*payload), "objective");
}

TEST(FieldErrorTest, PrefixesKeepThePath) {
  const absl::Status error = InvalidField("stages[2].gpus", " = 3 is not a stage size");
  const absl::Status prefixed = WithMessagePrefix(error, "global_batch[0] = 64: ");
  EXPECT_EQ(prefixed.message(), "global_batch[0] = 64: stages[2].gpus = 3 is not a stage size");
  EXPECT_EQ(FieldPathOf(prefixed), "stages[2].gpus");

  const absl::Status under = InField(error, "pipelines[0].template");
  EXPECT_EQ(under.message(), "pipelines[0].template.stages[2].gpus = 3 is not a stage size");
  EXPECT_EQ(FieldPathOf(under), "pipelines[0].template.stages[2].gpus");
  // Without a path the error is about the enclosing field itself.
  const absl::Status whole = InField(absl::FailedPreconditionError("needs 9 GiB"), "plan");
  EXPECT_EQ(whole.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(whole.message(), "plan: needs 9 GiB");
  EXPECT_EQ(FieldPathOf(whole), "plan");
  EXPECT_TRUE(InField(absl::OkStatus(), "plan").ok());
}

// Core checks once named their field only in the text; each now carries it.
TEST(FieldErrorTest, CoreChecksCarryTheirFieldPaths) {
  struct Case {
    absl::Status status;
    std::string path;
  };
  PipelineSizeLimits max_below_min;
  max_below_min.min_nodes = 3;
  max_below_min.max_nodes = 2;
  const std::vector<Case> cases = {
      {ParseCostModelKind("2f2b").status(), "cost_model"},
      {ValidateLimits(max_below_min), "max_nodes_per_pipeline"},
      {ResolveLimits({5, 0}, 3).status(), "min_nodes_per_pipeline"},
      {NodeSet::Create({{"a", 0}, {"", 0}}, 1).status(), "nodes[1].id"},
      {NodeSet::Create({}, 1).status(), "nodes"},
      {CapForOobleckFaultTolerance({2, 4}, 4, 3).status(), "fault_tolerance"},
  };
  for (const Case& c : cases) {
    ASSERT_FALSE(c.status.ok()) << c.path;
    EXPECT_EQ(FieldPathOf(c.status), c.path) << c.status;
    EXPECT_EQ(c.status.message().rfind(c.path, 0), 0u) << c.status;
  }
}

}  // namespace
}  // namespace oobleck
