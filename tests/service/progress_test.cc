// Progress of long template searches: PlanTemplatesStream over a real channel, and the
// progress lines of the request log.
#include <grpcpp/create_channel.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/security/credentials.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "core/profile_catalog.h"
#include "core/template_planner.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"
#include "oobleck/planner/v1/planner.grpc.pb.h"
#include "server/planner_server.h"
#include "server/planner_service.h"
#include "server/request_log.h"
#include "server/search_gate.h"
#include "server/templates_request.h"

namespace oobleck::server {
namespace {

namespace pb = ::oobleck::planner::v1;
using ::testing::AnyOf;
using ::testing::ContainsRegex;
using ::testing::HasSubstr;

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
constexpr int kSyntheticLayers = 120;
constexpr char kIncumbentPhase[] = "incumbent search (layers)";
constexpr char kExactPhase[] = "exact search (layers)";
constexpr char kGuessedPhase[] = "guessed exact search (layers)";

// A made-up model whose layers differ (so that many cuts compete), with all-reduce times
// for every node and GPU count the clusters below use.
pb::LoadProfileRequest SyntheticProfile() {
  pb::LoadProfileRequest request;
  request.set_model("synthetic");
  request.set_gpu_type("base");
  request.set_microbatch_size(1);
  for (int i = 0; i < kSyntheticLayers; ++i) {
    pb::LayerProfile* layer = request.mutable_layers()->add_layers();
    layer->set_forward_ms(1.0 + (i * 7 % 11) * 0.25);
    layer->set_backward_ms(2.0 + (i * 5 % 13) * 0.5);
    layer->set_param_bytes(20e6 + (i % 9) * 5e6);
    layer->set_activation_bytes(4e6 + (i % 5) * 1e6);
    for (int gpus : {1, 2, 4}) (*layer->mutable_allreduce_in_node_ms())[gpus] = 0.2 * (gpus - 1);
    for (int nodes = 1; nodes <= 16; ++nodes) {
      (*layer->mutable_allreduce_across_nodes_ms())[nodes] = 0.5 * (nodes - 1);
    }
  }
  return request;
}

pb::NodeType MakeNodeType(const std::string& name, int gpus, int count, double relative_speed) {
  pb::NodeType type;
  type.set_name(name);
  type.set_gpu_type(name);
  type.set_gpus_per_node(gpus);
  type.set_gpu_memory_bytes(40 * kGiB);
  type.set_intra_node_bytes_per_s(25e9);
  type.set_count(count);
  if (name != "base") {
    type.mutable_derive()->set_measured_gpu_type("base");
    type.mutable_derive()->set_relative_speed(relative_speed);
  }
  return type;
}

// Every mix of up to `nodes_per_type` nodes of three types: a search of a few hundred ms
// to seconds, depending on the machine.
pb::PlanTemplatesRequest SyntheticRequest(int nodes_per_type) {
  pb::PlanTemplatesRequest request;
  request.set_model("synthetic");
  request.set_microbatches(16);
  pb::Cluster* cluster = request.mutable_cluster();
  cluster->set_inter_node_bytes_per_s(12.5e9);
  *cluster->add_node_types() = MakeNodeType("base", 2, nodes_per_type, 1.0);
  *cluster->add_node_types() = MakeNodeType("slow", 2, nodes_per_type, 0.5);
  *cluster->add_node_types() = MakeNodeType("fast", 4, nodes_per_type, 2.0);
  return request;
}

// What a stream delivered.
struct Streamed {
  std::vector<pb::SearchProgress> progress;
  int responses = 0;
  pb::PlanTemplatesResponse response;
  grpc::Status status;
};

// The answer without what depends on the call rather than the question.
pb::PlanTemplatesResponse WithoutCallDetails(pb::PlanTemplatesResponse response) {
  response.clear_planning_time_ms();
  for (pb::MixTemplate& result : *response.mutable_results()) result.clear_cache_hit();
  return response;
}

class ProgressTest : public ::testing::Test {
 protected:
  // `progress_interval`: of the stream; `log_interval`: of the progress log lines.
  void Start(absl::Duration progress_interval, absl::Duration log_interval = absl::Seconds(1)) {
    log_ = std::make_unique<RequestLog>(
        true,
        [this](absl::string_view line) {
          absl::MutexLock lock(&lines_mu_);
          lines_.emplace_back(line);
        },
        log_interval);
    ServiceOptions options;
    options.search_gate = &gate_;
    options.request_log = log_.get();
    options.progress_interval = progress_interval;
    service_ = std::make_unique<PlannerService>(&catalog_, &cache_, /*threads=*/2, options);
    ServerOptions server_options;
    server_options.request_log = log_.get();
    auto running = StartPlannerServer("127.0.0.1:0", service_.get(), server_options);
    ASSERT_TRUE(running.ok()) << running.status();
    running_ = *std::move(running);
    stub_ = pb::Planner::NewStub(
        grpc::CreateChannel(running_.address, grpc::InsecureChannelCredentials()));
    pb::LoadProfileResponse loaded;
    grpc::ClientContext context;
    const grpc::Status status = stub_->LoadProfile(&context, SyntheticProfile(), &loaded);
    ASSERT_TRUE(status.ok()) << status.error_message();
  }

  void TearDown() override {
    if (running_.server) {
      running_.server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(5));
    }
  }

  Streamed Stream(const pb::PlanTemplatesRequest& request,
                  std::chrono::milliseconds timeout = std::chrono::seconds(120)) {
    Streamed out;
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + timeout);
    auto reader = stub_->PlanTemplatesStream(&context, request);
    pb::PlanTemplatesUpdate update;
    while (reader->Read(&update)) {
      EXPECT_EQ(out.responses, 0) << "nothing follows the answer";
      if (update.has_progress()) out.progress.push_back(update.progress());
      if (update.has_response()) {
        out.response = update.response();
        ++out.responses;
      }
      EXPECT_NE(update.update_case(), pb::PlanTemplatesUpdate::UPDATE_NOT_SET);
    }
    out.status = reader->Finish();
    return out;
  }

  grpc::Status Unary(const pb::PlanTemplatesRequest& request, pb::PlanTemplatesResponse* response,
                     const std::string& request_id = "") {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(120));
    if (!request_id.empty()) context.AddMetadata(kRequestIdMetadata, request_id);
    return stub_->PlanTemplates(&context, request, response);
  }

  std::vector<std::string> ProgressLines() {
    absl::MutexLock lock(&lines_mu_);
    std::vector<std::string> out;
    for (const std::string& line : lines_) {
      if (line.find(" progress=") != std::string::npos) out.push_back(line);
    }
    return out;
  }

  ProfileCatalog catalog_;
  TemplateCache cache_{64 << 20};
  SearchGate gate_{1, absl::Seconds(30)};
  absl::Mutex lines_mu_;
  std::vector<std::string> lines_ ABSL_GUARDED_BY(lines_mu_);
  std::unique_ptr<RequestLog> log_;
  std::unique_ptr<PlannerService> service_;
  RunningServer running_;
  std::unique_ptr<pb::Planner::Stub> stub_;
};

// Every progress update is well-formed and the phases come in order.
void ExpectWellFormed(const std::vector<pb::SearchProgress>& progress) {
  bool exact_seen = false, incumbent_seen = false;
  double last_elapsed_ms = 0;
  for (const pb::SearchProgress& p : progress) {
    EXPECT_THAT(p.phase(), AnyOf(kGuessedPhase, kIncumbentPhase, kExactPhase));
    if (p.phase() == kIncumbentPhase) incumbent_seen = true;
    if (p.phase() == kExactPhase) exact_seen = true;
    if (incumbent_seen) {
      EXPECT_NE(p.phase(), kGuessedPhase) << "the guessed rounds come first";
    }
    if (exact_seen) {
      EXPECT_EQ(p.phase(), kExactPhase) << "the exact pass comes last";
    }
    EXPECT_EQ(p.total(), kSyntheticLayers);
    EXPECT_GE(p.done(), 1);
    EXPECT_LE(p.done(), p.total());
    EXPECT_GE(p.elapsed_ms(), last_elapsed_ms);
    last_elapsed_ms = p.elapsed_ms();
  }
}

TEST_F(ProgressTest, StreamReportsProgressThenTheUnaryAnswer) {
  Start(/*progress_interval=*/absl::ZeroDuration());
  const pb::PlanTemplatesRequest request = SyntheticRequest(2);
  const Streamed streamed = Stream(request);
  ASSERT_TRUE(streamed.status.ok()) << streamed.status.error_message();
  ASSERT_EQ(streamed.responses, 1);
  // Without throttling every layer of every pass is reported.
  ASSERT_GE(streamed.progress.size(), 2u * kSyntheticLayers);
  ExpectWellFormed(streamed.progress);
  // 120 layers: the guessed exact rounds come first, and settle every mix or leave some to
  // the exact pass.
  EXPECT_EQ(streamed.progress.front().phase(), kGuessedPhase);
  EXPECT_EQ(streamed.progress.front().done(), 1);
  EXPECT_THAT(streamed.progress.back().phase(), AnyOf(kGuessedPhase, kExactPhase));
  EXPECT_EQ(streamed.progress.back().done(), kSyntheticLayers);
  EXPECT_LE(streamed.progress.back().elapsed_ms(), streamed.response.planning_time_ms());
  for (const pb::MixTemplate& result : streamed.response.results()) {
    EXPECT_FALSE(result.cache_hit());
  }

  // The unary RPC gives the same answer, from the cache the stream filled.
  pb::PlanTemplatesResponse unary;
  const grpc::Status status = Unary(request, &unary);
  ASSERT_TRUE(status.ok()) << status.error_message();
  ASSERT_EQ(unary.results_size(), 26);
  for (const pb::MixTemplate& result : unary.results()) EXPECT_TRUE(result.cache_hit());
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(
      WithoutCallDetails(streamed.response), WithoutCallDetails(unary)))
      << "stream:\n"
      << streamed.response.DebugString() << "unary:\n"
      << unary.DebugString();

  // A cached answer needs no search, so the stream sends it alone.
  const Streamed cached = Stream(request);
  ASSERT_TRUE(cached.status.ok()) << cached.status.error_message();
  EXPECT_TRUE(cached.progress.empty());
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(
      WithoutCallDetails(cached.response), WithoutCallDetails(unary)));
}

TEST_F(ProgressTest, UpdatesAreThrottled) {
  constexpr double kIntervalMs = 50;
  Start(absl::Milliseconds(kIntervalMs));
  const Streamed streamed = Stream(SyntheticRequest(3));
  ASSERT_TRUE(streamed.status.ok()) << streamed.status.error_message();
  ASSERT_EQ(streamed.responses, 1);
  // The search takes about a second on a 2-core machine: many updates, far fewer than its
  // hundreds of layer steps.
  ASSERT_FALSE(streamed.progress.empty());
  ExpectWellFormed(streamed.progress);
  EXPECT_GE(streamed.progress.front().elapsed_ms(), kIntervalMs);
  for (size_t i = 1; i < streamed.progress.size(); ++i) {
    EXPECT_GE(streamed.progress[i].elapsed_ms() - streamed.progress[i - 1].elapsed_ms(),
              kIntervalMs - 1e-6)
        << "update " << i;
  }
  EXPECT_LE(streamed.progress.size(), streamed.response.planning_time_ms() / kIntervalMs + 1);
}

TEST_F(ProgressTest, CancellingMidStreamFreesTheSearch) {
  Start(absl::ZeroDuration());
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(120));
  // A search of several seconds; the first update comes after one layer step of it.
  auto reader = stub_->PlanTemplatesStream(&context, SyntheticRequest(4));
  pb::PlanTemplatesUpdate update;
  ASSERT_TRUE(reader->Read(&update));
  ASSERT_TRUE(update.has_progress());
  EXPECT_EQ(gate_.in_use(), 1) << "the search holds the only slot";
  const auto cancelled_at = std::chrono::steady_clock::now();
  context.TryCancel();
  while (reader->Read(&update)) EXPECT_FALSE(update.has_response());
  EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::CANCELLED);

  // The handler stops searching soon and gives its slot back; nothing partial is cached.
  while (gate_.in_use() != 0 &&
         std::chrono::steady_clock::now() - cancelled_at < std::chrono::seconds(5)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_EQ(gate_.in_use(), 0);
  EXPECT_LT(std::chrono::steady_clock::now() - cancelled_at, std::chrono::seconds(1));
  EXPECT_EQ(cache_.stats().entries, 0);
  // The slot serves the next search.
  pb::PlanTemplatesRequest small = SyntheticRequest(1);
  pb::PlanTemplatesResponse response;
  const grpc::Status status = Unary(small, &response);
  EXPECT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(response.results_size(), 7);
}

TEST_F(ProgressTest, StreamFailsLikeTheUnaryCall) {
  Start(absl::ZeroDuration());
  pb::PlanTemplatesRequest no_model = SyntheticRequest(1);
  no_model.clear_model();
  pb::PlanTemplatesRequest unknown_model = SyntheticRequest(1);
  unknown_model.set_model("no-such-model");
  pb::PlanTemplatesRequest too_many_mixes = SyntheticRequest(1);
  for (int i = 0; i <= kMaxMixesPerRequest; ++i) too_many_mixes.add_mixes()->add_counts(1);
  for (const pb::PlanTemplatesRequest& request : {no_model, unknown_model, too_many_mixes}) {
    pb::PlanTemplatesResponse ignored;
    const grpc::Status unary = Unary(request, &ignored);
    const Streamed streamed = Stream(request);
    EXPECT_NE(unary.error_code(), grpc::StatusCode::OK);
    EXPECT_EQ(streamed.status.error_code(), unary.error_code()) << unary.error_message();
    EXPECT_EQ(streamed.status.error_message(), unary.error_message());
    EXPECT_EQ(streamed.responses, 0);
    EXPECT_TRUE(streamed.progress.empty());
  }

  // The search gate: with the only slot taken the stream is turned away before its deadline.
  auto held = gate_.Acquire(absl::InfiniteFuture(), {});
  ASSERT_TRUE(held.ok());
  const Streamed busy = Stream(SyntheticRequest(1), std::chrono::milliseconds(500));
  EXPECT_EQ(busy.status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED)
      << busy.status.error_message();
  EXPECT_THAT(busy.status.error_message(), HasSubstr("--max_concurrent_searches=1"));
}

TEST_F(ProgressTest, LongSearchesLogProgressWithTheRequestId) {
  Start(absl::Milliseconds(200), /*log_interval=*/absl::ZeroDuration());
  pb::PlanTemplatesResponse response;
  ASSERT_TRUE(Unary(SyntheticRequest(1), &response, "trace-progress").ok());
  const std::vector<std::string> lines = ProgressLines();
  ASSERT_FALSE(lines.empty());
  EXPECT_THAT(lines.front(),
              ContainsRegex(absl::StrCat(
                  "^ts=[0-9T:.-]+Z rpc=/oobleck.planner.v1.Planner/PlanTemplates "
                  "request_id=trace-progress progress=\"guessed exact search \\(layers\\)\" "
                  "done=1 total=",
                  kSyntheticLayers, " elapsed_ms=[0-9]+\\.[0-9]{3}$")));
  EXPECT_THAT(lines.back(),
              ContainsRegex(absl::StrCat("progress=\"(guessed )?exact search \\(layers\\)\" done=",
                                         kSyntheticLayers, " total=")));

  // Without a client id the lines carry the one the server made up and sent back.
  grpc::ClientContext context;
  auto reader = stub_->PlanTemplatesStream(&context, SyntheticRequest(2));
  pb::PlanTemplatesUpdate update;
  while (reader->Read(&update)) {
  }
  ASSERT_TRUE(reader->Finish().ok());
  const auto id = context.GetServerInitialMetadata().find(kRequestIdMetadata);
  ASSERT_NE(id, context.GetServerInitialMetadata().end());
  const std::string expected =
      absl::StrCat("rpc=/oobleck.planner.v1.Planner/PlanTemplatesStream request_id=",
                   std::string(id->second.data(), id->second.size()), " progress=");
  int matching = 0;
  for (const std::string& line : ProgressLines())
    matching += line.find(expected) != std::string::npos;
  EXPECT_GE(matching, kSyntheticLayers);
}

TEST_F(ProgressTest, ProgressLinesAreThrottled) {
  constexpr double kIntervalMs = 100;
  Start(absl::Milliseconds(200), absl::Milliseconds(kIntervalMs));
  // A cached answer is quick: no progress lines at all.
  pb::PlanTemplatesResponse response;
  ASSERT_TRUE(Unary(SyntheticRequest(1), &response).ok());
  lines_mu_.Lock();
  lines_.clear();
  lines_mu_.Unlock();
  ASSERT_TRUE(Unary(SyntheticRequest(1), &response).ok());
  EXPECT_THAT(ProgressLines(), ::testing::IsEmpty());

  ASSERT_TRUE(Unary(SyntheticRequest(2), &response).ok());
  std::vector<double> elapsed_ms;
  for (const std::string& line : ProgressLines()) {
    elapsed_ms.push_back(std::stod(line.substr(line.rfind("elapsed_ms=") + 11)));
  }
  // About 0.5 s of search on a 2-core machine: a few lines, one per interval at most.
  for (size_t i = 0; i < elapsed_ms.size(); ++i) {
    const double since_previous = elapsed_ms[i] - (i == 0 ? 0 : elapsed_ms[i - 1]);
    EXPECT_GE(since_previous, kIntervalMs - 0.001) << "line " << i;
  }
  EXPECT_LE(elapsed_ms.size(), response.planning_time_ms() / kIntervalMs + 1);
}

}  // namespace
}  // namespace oobleck::server
