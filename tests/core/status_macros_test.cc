#include "core/status_macros.h"

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/field_path.h"
#include "gtest/gtest.h"

namespace oobleck {
namespace {

absl::StatusOr<int> Half(int n) {
  if (n % 2 != 0) return absl::InvalidArgumentError("odd");
  return n / 2;
}

absl::StatusOr<int> Quarter(int n) {
  ASSIGN_OR_RETURN(const int half, Half(n));
  ASSIGN_OR_RETURN(int quarter, Half(half));
  return quarter;
}

absl::Status CheckEven(int n) {
  RETURN_IF_ERROR(Half(n).status());
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<int>> Boxed(int n) {
  std::unique_ptr<int> box;
  ASSIGN_OR_RETURN(box, absl::StatusOr<std::unique_ptr<int>>(std::make_unique<int>(n)));
  return box;
}

TEST(StatusMacrosTest, ReturnTheFirstErrorUnchanged) {
  EXPECT_EQ(*Quarter(8), 2);
  EXPECT_EQ(Quarter(6).status().message(), "odd");
  EXPECT_TRUE(CheckEven(4).ok());
  EXPECT_EQ(CheckEven(3).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(**Boxed(7), 7);  // move-only values
}

TEST(FieldPathTest, CarriesThePathBesideTheMessage) {
  const absl::Status error = InvalidField("nodes[2].id", " is required");
  EXPECT_EQ(error.message(), "nodes[2].id is required");
  EXPECT_EQ(FieldPathOf(error), "nodes[2].id");
  const absl::Status nested = UnderField(error, "request.");
  EXPECT_EQ(nested.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(nested.message(), "request.nodes[2].id is required");
  EXPECT_EQ(FieldPathOf(nested), "request.nodes[2].id");
  EXPECT_FALSE(FieldPathOf(absl::NotFoundError("x")).has_value());
  EXPECT_EQ(FieldPathOf(UnderField(absl::NotFoundError("x"), "request.")), std::nullopt);
  const absl::Status about = AboutField(absl::NotFoundError("no profile"), "gpu_type", "h100");
  EXPECT_EQ(about.message(), "gpu_type \"h100\": no profile");
  EXPECT_EQ(FieldPathOf(about), "gpu_type");
}

}  // namespace
}  // namespace oobleck
