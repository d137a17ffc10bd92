#include "server/request_log.h"

#include <grpcpp/server_context.h>
#include <unistd.h>

#include <chrono>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace oobleck::server {
namespace {

using grpc::experimental::InterceptionHookPoints;

constexpr size_t kMaxLoggedMessageBytes = 300;

// logfmt quoting: backslash and double quote escaped, control bytes as spaces.
std::string Quoted(absl::string_view text) {
  std::string out = "\"";
  for (size_t i = 0; i < text.size() && i < kMaxLoggedMessageBytes; ++i) {
    const char c = text[i];
    if (c == '"' || c == '\\') out.push_back('\\');
    out.push_back(static_cast<unsigned char>(c) < 0x20 ? ' ' : c);
  }
  if (text.size() > kMaxLoggedMessageBytes) out += "...";
  out += "\"";
  return out;
}

void WriteToStderr(absl::string_view line) {
  const std::string with_newline = absl::StrCat(line, "\n");
  absl::string_view rest = with_newline;
  while (!rest.empty()) {
    const ssize_t written = ::write(STDERR_FILENO, rest.data(), rest.size());
    if (written <= 0) return;  // nowhere to report a failing stderr
    rest.remove_prefix(static_cast<size_t>(written));
  }
}

class RequestLogInterceptor final : public grpc::experimental::Interceptor {
 public:
  RequestLogInterceptor(grpc::experimental::ServerRpcInfo* info, bool log_lines,
                        const CallObserver* on_call_end,
                        const std::function<void(absl::string_view)>* write_line,
                        std::atomic<int64_t>* next_request_id)
      : info_(info),
        log_lines_(log_lines),
        on_call_end_(on_call_end),
        write_line_(write_line),
        next_request_id_(next_request_id),
        start_(std::chrono::steady_clock::now()) {}
  // Destroyed once the call is over, however it ended: exactly one line per call.
  ~RequestLogInterceptor() override { Finish(); }

  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(InterceptionHookPoints::POST_RECV_INITIAL_METADATA)) {
      auto* metadata = methods->GetRecvInitialMetadata();
      if (metadata != nullptr) {
        auto it = metadata->find(kRequestIdMetadata);
        if (it != metadata->end()) {
          request_id_ = SanitizedRequestId(absl::string_view(it->second.data(), it->second.size()));
        }
      }
    }
    if (methods->QueryInterceptionHookPoint(InterceptionHookPoints::PRE_SEND_INITIAL_METADATA)) {
      methods->GetSendInitialMetadata()->emplace(kRequestIdMetadata, RequestId());
    }
    if (methods->QueryInterceptionHookPoint(InterceptionHookPoints::PRE_SEND_STATUS)) {
      status_ = methods->GetSendStatus();
      status_seen_ = true;
    }
    methods->Proceed();
  }

 private:
  const std::string& RequestId() {
    if (request_id_.empty()) {
      request_id_ = absl::StrCat(next_request_id_->fetch_add(1, std::memory_order_relaxed));
    }
    return request_id_;
  }

  void Finish() {
    const double latency_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start_)
            .count();
    // A call that ends without a status of ours (client cancelled, deadline) is reported
    // as cancelled.
    const grpc::StatusCode code = status_seen_ ? status_.error_code() : grpc::StatusCode::CANCELLED;
    if (*on_call_end_) (*on_call_end_)(info_->method(), code, latency_ms / 1000);
    if (!log_lines_) return;
    std::string line = absl::StrCat(
        "ts=", absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ", absl::Now(), absl::UTCTimeZone()),
        " rpc=", info_->method(), " request_id=", RequestId(),
        " code=", absl::StatusCodeToString(static_cast<absl::StatusCode>(code)),
        absl::StrFormat(" latency_ms=%.3f", latency_ms));
    if (auto* context = info_->server_context(); context != nullptr) {
      absl::StrAppend(&line, " peer=", context->peer());
    }
    if (status_seen_ && !status_.ok())
      absl::StrAppend(&line, " message=", Quoted(status_.error_message()));
    (*write_line_)(line);
  }

  grpc::experimental::ServerRpcInfo* info_;
  const bool log_lines_;
  const CallObserver* on_call_end_;
  const std::function<void(absl::string_view)>* write_line_;
  std::atomic<int64_t>* next_request_id_;
  const std::chrono::steady_clock::time_point start_;
  std::string request_id_;
  grpc::Status status_;
  bool status_seen_ = false;
};

// Interceptors are created for every call; health checks get none.
bool IsHealthCheck(absl::string_view method) {
  return absl::StartsWith(method, "/grpc.health.v1.Health/");
}

}  // namespace

std::string SanitizedRequestId(absl::string_view id) {
  if (id.empty() || id.size() > 64) return "";
  for (char c : id) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '.' || c == '_' || c == ':' || c == '-';
    if (!ok) return "";
  }
  return std::string(id);
}

RequestLogFactory::RequestLogFactory(bool log_lines, CallObserver on_call_end,
                                     std::function<void(absl::string_view)> write_line)
    : log_lines_(log_lines),
      on_call_end_(std::move(on_call_end)),
      write_line_(write_line ? std::move(write_line) : WriteToStderr) {}

grpc::experimental::Interceptor* RequestLogFactory::CreateServerInterceptor(
    grpc::experimental::ServerRpcInfo* info) {
  if (info->method() == nullptr || IsHealthCheck(info->method())) return nullptr;
  return new RequestLogInterceptor(info, log_lines_, &on_call_end_, &write_line_,
                                   &next_request_id_);
}

}  // namespace oobleck::server
