// Errors say what the input was, over a real channel: a status message never outgrows what
// a client accepts (gRPC's 8 KiB of trailers), whatever it echoes; numbers as written; the
// real fault named.
#include <grpcpp/create_channel.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/security/credentials.h>

#include <chrono>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "core/cluster_file.h"
#include "core/field_path.h"
#include "core/profile.h"
#include "core/profile_catalog.h"
#include "core/shown_value.h"
#include "core/template_planner.h"
#include "gmock/gmock.h"
#include "google/rpc/error_details.pb.h"
#include "google/rpc/status.pb.h"
#include "gtest/gtest.h"
#include "oobleck/planner/v1/planner.grpc.pb.h"
#include "server/planner_server.h"
#include "server/planner_service.h"
#include "server/request_limits.h"
#include "server/status_conversion.h"
#include "tests/service/served_planner.h"
#include "tests/service/three_type_request.h"

namespace oobleck::server {
namespace {

namespace pb = ::oobleck::planner::v1;
using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr char kExampleDir[] = OOBLECK_SOURCE_DIR "/examples/profiles/gpt2-xl/rtx4090";

// The CLI's cluster files take as many nodes as the largest request does.
static_assert(kMaxClusterFileNodes == kMaxNodesPerRequest);

class ClearErrorsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<ModelProfile> profile =
        LoadOobleckProfileDir(kExampleDir, "gpt2-xl", "rtx4090", 1);
    ASSERT_TRUE(profile.ok()) << profile.status();
    measured_ = *profile;
    ASSERT_TRUE(served_.catalog.Put(*std::move(profile), false).ok());
    const absl::Status started = served_.Start();
    ASSERT_TRUE(started.ok()) << started;
  }

  template <typename Request, typename Response>
  grpc::Status Call(grpc::Status (pb::Planner::Stub::*method)(grpc::ClientContext*, const Request&,
                                                              Response*),
                    const Request& request) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
    Response response;
    return (served_.stub.get()->*method)(&context, request, &response);
  }

  ModelProfile measured_;
  ServedPlanner served_{16 << 20};
};

pb::PlanRequest PlanOfThreeTypes() { return testing::ThreeTypeRequest({64}); }

TEST_F(ClearErrorsTest, LongModelNamesAreNotFoundOnEveryRpc) {
  for (size_t bytes : {size_t{16} << 10, size_t{64} << 10, size_t{1} << 20}) {
    SCOPED_TRACE(bytes);
    const std::string model(bytes, 'm');
    const std::string shown = absl::StrCat("...\" (", bytes, " bytes)");

    pb::PlanTemplatesRequest templates;
    templates.set_model(model);
    templates.set_microbatches(16);
    *templates.mutable_cluster() = PlanOfThreeTypes().cluster();
    for (pb::NodeType& t : *templates.mutable_cluster()->mutable_node_types()) t.set_count(1);
    grpc::Status status = Call(&pb::Planner::Stub::PlanTemplates, templates);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND) << status.error_message();
    EXPECT_THAT(status.error_message(), HasSubstr(shown));
    EXPECT_LE(status.error_message().size(), 512u);

    pb::PlanRequest plan = PlanOfThreeTypes();
    plan.set_model(model);
    status = Call(&pb::Planner::Stub::Plan, plan);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND) << status.error_message();
    EXPECT_THAT(status.error_message(), HasSubstr(shown));

    pb::ReplanRequest replan;
    *replan.mutable_request() = plan;
    replan.mutable_plan();
    status = Call(&pb::Planner::Stub::Replan, replan);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND) << status.error_message();
    EXPECT_THAT(status.error_message(), HasSubstr(shown));

    // A long gpu_type is echoed (twice: the field's value and the lookup) the same way.
    plan = PlanOfThreeTypes();
    plan.mutable_cluster()->mutable_node_types(2)->set_gpu_type(model);
    status = Call(&pb::Planner::Stub::Plan, plan);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND) << status.error_message();
    EXPECT_THAT(status.error_message(), HasSubstr(shown));
  }
}

TEST_F(ClearErrorsTest, ControlBytesInANameAreEscaped) {
  pb::PlanRequest plan = PlanOfThreeTypes();
  plan.set_model("gpt2\n\x1b[2Jxl");
  const grpc::Status status = Call(&pb::Planner::Stub::Plan, plan);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_THAT(status.error_message(), HasSubstr(R"("gpt2\n\x1b[2Jxl")"));
}

// Some messages list what the server holds (every loaded GPU type); however long, the
// client gets the status, cut, and never "metadata size exceeds limit".
TEST_F(ClearErrorsTest, MessagesListingManyNamesAreCutNotLost) {
  for (int i = 0; i < 40; ++i) {
    ModelProfile copy = measured_;
    copy.key.gpu_type = absl::StrCat(std::string(1000, 'g'), i);
    ASSERT_TRUE(served_.catalog.Put(std::move(copy), false).ok());
  }
  pb::PlanRequest plan = PlanOfThreeTypes();
  plan.mutable_cluster()->mutable_node_types(2)->set_gpu_type("h100");
  const grpc::Status status = Call(&pb::Planner::Stub::Plan, plan);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND) << status.error_message();
  EXPECT_THAT(status.error_message(), AllOf(HasSubstr("\"h100\""), HasSubstr("loaded gpu types"),
                                            HasSubstr("... (message cut: ")));
  EXPECT_LE(status.error_message().size(), kMaxStatusMessageBytes + 64);
}

TEST(StatusConversionTest, CapsTheMessageAndTheDetailsCopies) {
  const std::string long_text(1 << 20, 'x');
  const grpc::Status status =
      ToGrpcStatus(InvalidField("cluster.node_types[0].name", absl::StrCat(" ", long_text)));
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("... (message cut: 1048603 bytes)"));
  EXPECT_LE(status.error_message().size(), kMaxStatusMessageBytes + 64);
  EXPECT_LE(status.error_details().size(), 3 * kMaxStatusMessageBytes);
  google::rpc::Status details;
  ASSERT_TRUE(details.ParseFromString(status.error_details()));
  EXPECT_EQ(details.message(), status.error_message());

  // A multi-byte character is not split.
  const std::string accents = std::string(kMaxStatusMessageBytes - 1, 'a') + "\xc3\xa9tc";
  EXPECT_EQ(CappedStatusMessage(accents),
            std::string(kMaxStatusMessageBytes - 1, 'a') + "... (message cut: 1027 bytes)");
  EXPECT_EQ(CappedStatusMessage("short"), "short");
}

TEST_F(ClearErrorsTest, ReplanWithARepeatedNodeTypeNamesTheRepeat) {
  pb::PlanRequest plan = PlanOfThreeTypes();
  // node_types[1] takes node_types[0]'s name: refused as PlanTemplates refuses it, before
  // any node is read (a mention of another field is named within the same PlanRequest).
  pb::Cluster* cluster = plan.mutable_cluster();
  cluster->mutable_node_types(1)->set_name("v100");
  cluster->mutable_node_types(1)->set_count(3);
  for (pb::Node& node : *plan.mutable_nodes()) {
    if (node.node_type() == "rtx3090") node.set_node_type("v100");
  }
  pb::ReplanRequest replan;
  *replan.mutable_request() = plan;
  replan.mutable_plan();
  const grpc::Status status = Call(&pb::Planner::Stub::Replan, replan);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(),
              AllOf(HasSubstr("request.cluster.node_types[1].name \"v100\" repeats "
                              "cluster.node_types[0].name"),
                    Not(HasSubstr("or to 0"))));
}

TEST_F(ClearErrorsTest, ACountWithNoListedNodesSaysWhatToDo) {
  pb::PlanRequest plan = PlanOfThreeTypes();
  plan.mutable_cluster()->mutable_node_types(2)->set_count(3);
  plan.mutable_nodes()->DeleteSubrange(6, 3);  // the three rtx4090 nodes
  const grpc::Status status = Call(&pb::Planner::Stub::Plan, plan);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(),
              AllOf(HasSubstr("cluster.node_types[2].count is 3 but nodes lists 0 node(s) of "
                              "type \"rtx4090\"; set it to 0 or list its nodes"),
                    Not(HasSubstr("or to 0"))));
}

TEST_F(ClearErrorsTest, ATinyBudgetIsShownAsGiven) {
  pb::PlanRequest plan = PlanOfThreeTypes();
  for (pb::NodeType& t : *plan.mutable_cluster()->mutable_node_types()) t.set_price_per_hour(1.5);
  plan.set_budget_per_hour(1e-9);
  const grpc::Status status = Call(&pb::Planner::Stub::Plan, plan);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << status.error_message();
  EXPECT_THAT(status.error_message(), HasSubstr("budget_per_hour = 1e-09 is below"));
}

TEST_F(ClearErrorsTest, ATinyRelativeSpeedIsShownAsGiven) {
  pb::PlanRequest plan = PlanOfThreeTypes();
  plan.mutable_cluster()->mutable_node_types(0)->mutable_derive()->set_relative_speed(-5e-324);
  grpc::Status status = Call(&pb::Planner::Stub::Plan, plan);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(),
              HasSubstr("cluster.node_types[0].derive.relative_speed must be > 0 (got -5e-324)"));

  // A positive one too small for the layer times overflows them, and says so.
  plan.mutable_cluster()->mutable_node_types(0)->mutable_derive()->set_relative_speed(5e-324);
  status = Call(&pb::Planner::Stub::Plan, plan);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("overflows to infinity"));
}

}  // namespace
}  // namespace oobleck::server
