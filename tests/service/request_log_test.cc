// The status the request log and the rpcs_total metric record for calls whose request
// message never reached the server: raw calls over a real channel (grpc::GenericStub), so
// that the test controls whether and when the message is sent.
#include "server/request_log.h"

#include <grpcpp/create_channel.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/security/credentials.h>

#include <chrono>
#include <memory>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "bench/server_process.h"
#include "core/profile_catalog.h"
#include "core/template_planner.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/metrics.h"
#include "server/planner_server.h"
#include "server/planner_service.h"
#include "server/search_gate.h"

namespace oobleck::server {
namespace {

using ::oobleck::bench::ScrapeMetrics;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr char kMethod[] = "/oobleck.planner.v1.Planner/PlanTemplates";

// oobleck_planner_rpcs_total of PlanTemplates with `code` (labels in either order); 0 if
// absent.
double PlanTemplatesCalls(const std::string& metrics, const std::string& code) {
  const std::regex line(R"(oobleck_planner_rpcs_total\{([^}]*)\} ([0-9.e+-]+))");
  double total = 0;
  for (auto it = std::sregex_iterator(metrics.begin(), metrics.end(), line);
       it != std::sregex_iterator(); ++it) {
    const std::string labels = (*it)[1];
    if (labels.find(absl::StrCat("code=\"", code, "\"")) != std::string::npos &&
        labels.find(absl::StrCat("method=\"", kMethod, "\"")) != std::string::npos) {
      total += std::stod((*it)[2]);
    }
  }
  return total;
}

// How the raw call goes.
enum class Send {
  kNothingThenCancel,     // the headers, then TryCancel: the message never leaves the client
  kNothingTillDeadline,   // the headers and nothing else, under a short deadline
  kNothingThenHalfClose,  // the headers, then half-close without a message
  kGarbage,               // bytes that are no PlanTemplatesRequest, then half-close
};

class RequestLogTest : public ::testing::Test {
 protected:
  void SetUp() override {
    log_ = std::make_unique<RequestLog>(true, [this](absl::string_view line) {
      absl::MutexLock lock(&lines_mu_);
      lines_.emplace_back(line);
    });
    auto metrics = ServerMetrics::Start("127.0.0.1:0", {&cache_, &catalog_, &gate_});
    ASSERT_TRUE(metrics.ok()) << metrics.status();
    metrics_ = *std::move(metrics);
    ServiceOptions options;
    options.search_gate = &gate_;
    options.request_log = log_.get();
    service_ = std::make_unique<PlannerService>(&catalog_, &cache_, /*threads=*/1, options);
    ServerOptions server_options;
    server_options.request_log = log_.get();
    server_options.metrics = metrics_.get();
    auto running = StartPlannerServer("127.0.0.1:0", service_.get(), server_options);
    ASSERT_TRUE(running.ok()) << running.status();
    running_ = *std::move(running);
    channel_ = grpc::CreateChannel(running_.address, grpc::InsecureChannelCredentials());
  }

  void TearDown() override {
    if (running_.server) {
      running_.server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(5));
    }
  }

  // One raw PlanTemplates call tagged `request_id`; `wait_before` passes between sending
  // the headers and what `send` does next. Returns the client's status.
  grpc::Status RawCall(Send send, const std::string& request_id,
                       std::chrono::milliseconds wait_before) {
    grpc::GenericStub stub(channel_);
    grpc::CompletionQueue cq;
    grpc::ClientContext context;
    context.AddMetadata(kRequestIdMetadata, request_id);
    context.set_deadline(std::chrono::system_clock::now() + (send == Send::kNothingTillDeadline
                                                                 ? wait_before
                                                                 : std::chrono::seconds(30)));
    std::unique_ptr<grpc::GenericClientAsyncReaderWriter> call =
        stub.PrepareCall(&context, kMethod, &cq);
    void* tag = nullptr;
    bool ok = false;
    // Tags are the step numbers; every step is waited for before the next starts.
    auto step = [&](intptr_t n) {
      EXPECT_TRUE(cq.Next(&tag, &ok));
      EXPECT_EQ(reinterpret_cast<intptr_t>(tag), n);
    };
    call->StartCall(reinterpret_cast<void*>(1));
    step(1);
    if (send == Send::kNothingThenCancel || send == Send::kNothingThenHalfClose) {
      std::this_thread::sleep_for(wait_before);
    }
    if (send == Send::kNothingThenCancel) context.TryCancel();
    if (send == Send::kGarbage) {
      // Field 1 (model) as a length-delimited string claiming 100 bytes, with 3 present.
      const std::string bytes = "\x0a\x64xyz";
      grpc::Slice slice(bytes);
      grpc::ByteBuffer buffer(&slice, 1);
      call->Write(buffer, reinterpret_cast<void*>(2));
      step(2);
    }
    if (send == Send::kNothingThenHalfClose || send == Send::kGarbage) {
      call->WritesDone(reinterpret_cast<void*>(3));
      step(3);
    }
    grpc::Status status;
    call->Finish(&status, reinterpret_cast<void*>(4));
    step(4);
    cq.Shutdown();
    while (cq.Next(&tag, &ok)) {
    }
    return status;
  }

  // The log line of `request_id`, waiting up to 5 s for the server to finish the call;
  // "" if none came (the call never reached the server).
  std::string LineOf(const std::string& request_id) {
    const std::string key = absl::StrCat(" request_id=", request_id, " ");
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (std::chrono::steady_clock::now() < give_up) {
      {
        absl::MutexLock lock(&lines_mu_);
        for (const std::string& line : lines_) {
          if (line.find(key) != std::string::npos) return line;
        }
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return "";
  }

  // Sends the call until the server has seen one (its headers may not have arrived when
  // the client gives up), waiting longer each time; returns its log line.
  std::string ServerLineOfACall(Send send, const std::string& name, grpc::Status* client_status) {
    std::chrono::milliseconds wait_before(100);
    for (int attempt = 0; attempt < 5; ++attempt, wait_before *= 2) {
      const std::string request_id = absl::StrCat(name, "-", attempt);
      *client_status = RawCall(send, request_id, wait_before);
      if (std::string line = LineOf(request_id); !line.empty()) return line;
    }
    return "";
  }

  ProfileCatalog catalog_;
  TemplateCache cache_{8 << 20};
  SearchGate gate_{1, absl::Seconds(30)};
  absl::Mutex lines_mu_;
  std::vector<std::string> lines_ ABSL_GUARDED_BY(lines_mu_);
  std::unique_ptr<RequestLog> log_;
  std::unique_ptr<ServerMetrics> metrics_;
  std::unique_ptr<PlannerService> service_;
  RunningServer running_;
  std::shared_ptr<grpc::Channel> channel_;
};

// gRPC's handler answers INTERNAL "Couldn't initialize byte buffer reader" to a call
// whose client cancelled before sending its request; the log and metrics say CANCELLED.
TEST_F(RequestLogTest, CancelledBeforeTheRequestArrivedIsLoggedCancelled) {
  grpc::Status client;
  const std::string line = ServerLineOfACall(Send::kNothingThenCancel, "early-cancel", &client);
  ASSERT_FALSE(line.empty()) << "the server never saw the call";
  EXPECT_EQ(client.error_code(), grpc::StatusCode::CANCELLED) << client.error_message();
  EXPECT_THAT(line, HasSubstr(" code=CANCELLED "));
  EXPECT_THAT(line, HasSubstr("before its request message arrived"));
  const std::string metrics = ScrapeMetrics(metrics_->port());
  EXPECT_EQ(PlanTemplatesCalls(metrics, "CANCELLED"), 1) << metrics;
  EXPECT_EQ(PlanTemplatesCalls(metrics, "INTERNAL"), 0) << metrics;
}

// The same when the call's deadline expires first (the server cancels the call itself).
TEST_F(RequestLogTest, DeadlineBeforeTheRequestArrivedIsLoggedCancelled) {
  grpc::Status client;
  const std::string line = ServerLineOfACall(Send::kNothingTillDeadline, "early-deadline", &client);
  ASSERT_FALSE(line.empty()) << "the server never saw the call";
  EXPECT_EQ(client.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED) << client.error_message();
  EXPECT_THAT(line, HasSubstr(" code=CANCELLED "));
  const std::string metrics = ScrapeMetrics(metrics_->port());
  EXPECT_EQ(PlanTemplatesCalls(metrics, "CANCELLED"), 1) << metrics;
  EXPECT_EQ(PlanTemplatesCalls(metrics, "INTERNAL"), 0) << metrics;
}

// A client that half-closes without a request gets the same INTERNAL from gRPC, but was
// not cancelled: that stays INTERNAL in the log and the metrics, as does a request that
// does not parse.
TEST_F(RequestLogTest, MissingOrUnparsableRequestOfALiveCallStaysInternal) {
  grpc::Status client;
  std::string line = ServerLineOfACall(Send::kNothingThenHalfClose, "no-message", &client);
  ASSERT_FALSE(line.empty()) << "the server never saw the call";
  EXPECT_EQ(client.error_code(), grpc::StatusCode::INTERNAL) << client.error_message();
  EXPECT_THAT(line, HasSubstr(" code=INTERNAL "));
  EXPECT_THAT(line, Not(HasSubstr("before its request message arrived")));

  line = ServerLineOfACall(Send::kGarbage, "garbage", &client);
  ASSERT_FALSE(line.empty()) << "the server never saw the call";
  EXPECT_EQ(client.error_code(), grpc::StatusCode::INTERNAL) << client.error_message();
  EXPECT_THAT(line, HasSubstr(" code=INTERNAL "));

  const std::string metrics = ScrapeMetrics(metrics_->port());
  EXPECT_EQ(PlanTemplatesCalls(metrics, "INTERNAL"), 2) << metrics;
  EXPECT_EQ(PlanTemplatesCalls(metrics, "CANCELLED"), 0) << metrics;
}

}  // namespace
}  // namespace oobleck::server
