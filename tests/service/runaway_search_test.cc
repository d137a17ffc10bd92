// Searches that once ran away from their call (issue "Hardening round 3", items 1 and 2),
// sent through a real channel: each is answered within its deadline plus a margin, and the
// process stops using CPU once the call is answered.
#include <grpcpp/create_channel.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/security/credentials.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "core/profile.h"
#include "core/profile_catalog.h"
#include "core/template_planner.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "oobleck/planner/v1/planner.grpc.pb.h"
#include "server/planner_server.h"
#include "server/planner_service.h"
#include "tests/service/call_budget.h"
#include "tests/service/served_planner.h"

namespace oobleck::server {
namespace {

namespace pb = ::oobleck::planner::v1;
using ::testing::AllOf;
using ::testing::AnyOf;
using ::testing::HasSubstr;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr char kExampleDir[] = OOBLECK_SOURCE_DIR "/examples/profiles/gpt2-xl/rtx4090";

// `layers` copies of one layer in Oobleck's mb<m>.json layout, and the two all-reduce
// files with no measurements.
struct ProfileFiles {
  std::string mb, in_node, across_nodes;
};
ProfileFiles UniformLayers(int layers, const std::string& forward, const std::string& backward) {
  ProfileFiles files;
  const std::string layer = absl::StrCat(R"({"forward": )", forward, R"(, "backward": )", backward,
                                         R"(, "mem_required": [1000, 1000]})");
  files.mb = "[";
  files.in_node = "[";
  for (int l = 0; l < layers; ++l) {
    absl::StrAppend(&files.mb, l > 0 ? "," : "", layer);
    absl::StrAppend(&files.in_node, l > 0 ? "," : "", "{}");
  }
  files.mb += "]";
  files.in_node += "]";
  files.across_nodes = files.in_node;
  return files;
}

class RunawaySearchTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<ModelProfile> profile =
        LoadOobleckProfileDir(kExampleDir, "gpt2-xl", "rtx4090", 1);
    ASSERT_TRUE(profile.ok()) << profile.status();
    ASSERT_TRUE(served_.catalog.Put(*std::move(profile), false).ok());
    const absl::Status started = served_.Start();
    ASSERT_TRUE(started.ok()) << started;
  }

  // `types` node types of `count` one-GPU rtx4090 nodes each.
  static pb::PlanTemplatesRequest Request(int types, int count) {
    pb::PlanTemplatesRequest request;
    request.set_model("gpt2-xl");
    request.set_microbatches(8);
    pb::Cluster* cluster = request.mutable_cluster();
    cluster->set_inter_node_bytes_per_s(1e9);
    for (int i = 0; i < types; ++i) {
      pb::NodeType* t = cluster->add_node_types();
      t->set_name(absl::StrCat("t", i));
      t->set_gpu_type("rtx4090");
      t->set_gpus_per_node(1);
      t->set_gpu_memory_bytes(24e9);
      t->set_intra_node_bytes_per_s(1e10);
      t->set_count(count);
    }
    return request;
  }
  grpc::Status Templates(const pb::PlanTemplatesRequest& request, milliseconds deadline,
                         milliseconds* took) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + deadline);
    pb::PlanTemplatesResponse response;
    const auto start = Clock::now();
    const grpc::Status status = served_.stub->PlanTemplates(&context, request, &response);
    *took = std::chrono::duration_cast<milliseconds>(Clock::now() - start);
    return status;
  }
  grpc::Status LoadProfile(const std::string& gpu_type, const ProfileFiles& files,
                           milliseconds deadline, milliseconds* took = nullptr) {
    pb::LoadProfileRequest load;
    load.set_model("gpt2-xl");
    load.set_gpu_type(gpu_type);
    load.set_microbatch_size(1);
    load.mutable_files()->set_mb_json(files.mb);
    load.mutable_files()->set_allreduce_in_node_json(files.in_node);
    load.mutable_files()->set_allreduce_across_nodes_json(files.across_nodes);
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + deadline);
    pb::LoadProfileResponse response;
    const auto start = Clock::now();
    const grpc::Status status = served_.stub->LoadProfile(&context, load, &response);
    if (took != nullptr) *took = std::chrono::duration_cast<milliseconds>(Clock::now() - start);
    return status;
  }
  // A call with a short deadline that runs into it: answered in time, CPU stopped after.
  void ExpectAnsweredInTimeAndQuiet(const pb::PlanTemplatesRequest& request,
                                    milliseconds deadline) {
    milliseconds took{};
    const grpc::Status status = Templates(request, deadline, &took);
    EXPECT_THAT(status.error_code(),
                AnyOf(grpc::StatusCode::DEADLINE_EXCEEDED, grpc::StatusCode::RESOURCE_EXHAUSTED,
                      grpc::StatusCode::OK))
        << status.error_message();
    EXPECT_LE(took, deadline + kDeadlineSlack) << status.error_message();
    ExpectCpuStops();
  }

  ServedPlanner served_;
};

// Item 1: 5e-324 ms layers kept the label search's grid of caps from growing past the
// subnormals; the server grew by 300-500 MB/s until it was killed. Such a profile is now
// refused naming the layer and field; 1e-9 ms is the least positive time.
TEST_F(RunawaySearchTest, SubnormalLayerTimesAreRefusedNamingLayerAndField) {
  const grpc::Status denormal =
      LoadProfile("denormal", UniformLayers(4, "5e-324", "5e-324"), std::chrono::seconds(30));
  EXPECT_EQ(denormal.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(denormal.error_message(),
              AllOf(HasSubstr("layer 0"), HasSubstr("forward_ms"), HasSubstr("at least 1e-09")));
  const grpc::Status tiny =
      LoadProfile("tiny", UniformLayers(4, "1", "1e-320"), std::chrono::seconds(30));
  EXPECT_EQ(tiny.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(tiny.error_message(), HasSubstr("backward_ms"));

  // The least positive time is accepted, and its search ends like any other.
  ASSERT_TRUE(
      LoadProfile("least", UniformLayers(4, "1e-9", "1e-9"), std::chrono::seconds(30)).ok());
  pb::PlanTemplatesRequest request = Request(1, 1);
  request.mutable_cluster()->mutable_node_types(0)->set_gpu_type("least");
  milliseconds took{};
  const grpc::Status status = Templates(request, milliseconds(500), &took);
  EXPECT_TRUE(status.ok()) << status.error_message();
  ExpectCpuStops();
}

// Item 2: N one-node types with min_nodes = max_nodes = N: the one mix there is was found by
// walking all 2^N branches before the refusal (3.2 s at N = 28, 17-19 s of CPU at N = 30,
// still running after 30 s at N = 64 and 256, deaf to the deadline and SIGTERM).
TEST_F(RunawaySearchTest, ManyOneNodeTypesOfOneMixAreAnsweredWithinTheDeadline) {
  for (int types : {28, 30, 64, 256}) {
    SCOPED_TRACE(types);
    pb::PlanTemplatesRequest request = Request(types, 1);
    request.set_min_nodes(types);
    request.set_max_nodes(types);
    milliseconds took{};
    const grpc::Status status = Templates(request, milliseconds(50), &took);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << status.error_message();
    EXPECT_THAT(status.error_message(), HasSubstr("more than the limit of"));
    EXPECT_LE(took, milliseconds(50) + kDeadlineSlack);
    ExpectCpuStops();
  }
}

// The largest one-mix requests the size estimate accepts must poll all the way.
TEST_F(RunawaySearchTest, AcceptedOneMixSearchesOfManyTypesStopWithTheirDeadline) {
  for (int types : {16, 18, 19, 20, 21, 22}) {
    SCOPED_TRACE(types);
    pb::PlanTemplatesRequest request = Request(types, 1);
    request.set_min_nodes(types);
    request.set_max_nodes(types);
    ExpectAnsweredInTimeAndQuiet(request, milliseconds(50));
  }
}

// Item 2: 2 types of 2^19 nodes with min = max = 2^20 walked 2^37 counts for its one mix.
TEST_F(RunawaySearchTest, HugeNodeCountsOfOneMixAreRefusedAtOnce) {
  pb::PlanTemplatesRequest request = Request(2, 1 << 19);
  request.set_min_nodes(1 << 20);
  request.set_max_nodes(1 << 20);
  milliseconds took{};
  const grpc::Status status = Templates(request, milliseconds(50), &took);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << status.error_message();
  EXPECT_LE(took, milliseconds(50) + kDeadlineSlack);
  ExpectCpuStops();
}

// Item 2: every size of one type of 4096 nodes ran 0.25-0.36 s past a short deadline.
TEST_F(RunawaySearchTest, AllFourThousandSizesStopWithTheDeadline) {
  ExpectAnsweredInTimeAndQuiet(Request(1, 4096), milliseconds(50));
}

// Item 2: LoadProfile of 2^18 layers answered 0.6-1.1 s after its deadline.
TEST_F(RunawaySearchTest, ALargeProfileLoadStopsWithItsDeadline) {
  const ProfileFiles files = UniformLayers(kMaxLayersPerProfile, "1", "2");
  for (int deadline_ms : {50, 200}) {
    SCOPED_TRACE(deadline_ms);
    milliseconds took{};
    const grpc::Status status = LoadProfile("large", files, milliseconds(deadline_ms), &took);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED) << status.error_message();
    EXPECT_LE(took, milliseconds(deadline_ms) + kDeadlineSlack);
    ExpectCpuStops();
  }
}

}  // namespace
}  // namespace oobleck::server
