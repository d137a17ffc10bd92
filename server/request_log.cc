#include "server/request_log.h"

#include <grpcpp/server_context.h>
#include <unistd.h>

#include <chrono>
#include <memory>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "server/call_watch.h"

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

int64_t SteadyNowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

std::string NowTimestamp() {
  return absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ", absl::Now(), absl::UTCTimeZone());
}

class RequestLogInterceptor final : public grpc::experimental::Interceptor {
 public:
  RequestLogInterceptor(grpc::experimental::ServerRpcInfo* info, RequestLog* log,
                        const CallObserver* on_call_end)
      : info_(info),
        method_(info->method()),
        log_(log),
        on_call_end_(on_call_end),
        start_(std::chrono::steady_clock::now()) {}
  // Destroyed once the call is over, however it ended: exactly one line per call.
  ~RequestLogInterceptor() override {
    Finish();
    if (info_->server_context() != nullptr) log_->EndCall(info_->server_context(), this);
  }

  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(InterceptionHookPoints::POST_RECV_INITIAL_METADATA)) {
      absl::string_view client_id;
      auto* metadata = methods->GetRecvInitialMetadata();
      if (metadata != nullptr) {
        auto it = metadata->find(kRequestIdMetadata);
        if (it != metadata->end()) client_id = {it->second.data(), it->second.size()};
        // Set by gRPC's client retry policy on every attempt after the first.
        if (auto retry = metadata->find("grpc-previous-rpc-attempts"); retry != metadata->end()) {
          previous_attempts_ = std::string(retry->second.data(), retry->second.size());
        }
      }
      // Before the handler runs, so that it can log progress under the same id.
      if (info_->server_context() != nullptr && request_id_.empty()) {
        request_id_ = log_->BeginCall(info_->server_context(), this, method_, client_id);
      }
    }
    if (methods->QueryInterceptionHookPoint(InterceptionHookPoints::PRE_SEND_INITIAL_METADATA)) {
      methods->GetSendInitialMetadata()->emplace(kRequestIdMetadata, RequestId());
    }
    if (methods->QueryInterceptionHookPoint(InterceptionHookPoints::POST_RECV_MESSAGE)) {
      // Null when no request message came (or it did not parse).
      request_received_ = methods->GetRecvMessage() != nullptr;
    }
    if (methods->QueryInterceptionHookPoint(InterceptionHookPoints::PRE_SEND_STATUS)) {
      status_ = methods->GetSendStatus();
      status_seen_ = true;
      if (status_.error_code() == grpc::StatusCode::INTERNAL) RelabelIfCancelledBeforeRequest();
    }
    methods->Proceed();
  }

 private:
  const std::string& RequestId() {
    if (request_id_.empty()) request_id_ = log_->NewRequestId();
    return request_id_;
  }

  void Finish() {
    const double latency_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start_)
            .count();
    // A call that ends without a status of ours (client cancelled, deadline) is reported
    // as cancelled.
    const grpc::StatusCode code = status_seen_ ? status_.error_code() : grpc::StatusCode::CANCELLED;
    if (*on_call_end_) (*on_call_end_)(method_, code, latency_ms / 1000);
    if (!log_->log_lines()) return;
    std::string line =
        absl::StrCat("ts=", NowTimestamp(), " rpc=", method_, " request_id=", RequestId(),
                     " code=", absl::StatusCodeToString(static_cast<absl::StatusCode>(code)),
                     absl::StrFormat(" latency_ms=%.3f", latency_ms));
    if (auto* context = info_->server_context(); context != nullptr) {
      absl::StrAppend(&line, " peer=", context->peer());
    }
    if (!previous_attempts_.empty())
      absl::StrAppend(&line, " previous_attempts=", previous_attempts_);
    if (status_seen_ && !status_.ok())
      absl::StrAppend(&line, " message=", Quoted(status_.error_message()));
    log_->Write(line);
  }

  // A call whose client cancelled it (or whose deadline expired) before its request
  // message arrived still reaches gRPC's generated handler, which cannot read the absent
  // message and answers INTERNAL "Couldn't initialize byte buffer reader". The client sees
  // CANCELLED or DEADLINE_EXCEEDED; the log and the metrics say CANCELLED, instead of an
  // INTERNAL that is not the server's fault. Only calls that take one request message
  // (unary and server-streaming: the others read theirs in the handler) and got none, for
  // a reason WhyNoRequest does not blame on the client.
  void RelabelIfCancelledBeforeRequest() {
    const grpc::experimental::ServerRpcInfo::Type type = info_->type();
    if (request_received_ || (type != grpc::experimental::ServerRpcInfo::Type::UNARY &&
                              type != grpc::experimental::ServerRpcInfo::Type::SERVER_STREAMING)) {
      return;
    }
    grpc::ServerContextBase* context = info_->server_context();
    if (context == nullptr || context->c_call() == nullptr) return;
    const MissingRequest why = WhyNoRequest(context);
    if (why == MissingRequest::kClientsFault) return;
    status_ = grpc::Status(
        grpc::StatusCode::CANCELLED,
        absl::StrCat(why == MissingRequest::kDeadlinePassed ? "deadline expired" : "cancelled",
                     " before its request message arrived (gRPC's handler answered INTERNAL \"",
                     status_.error_message(), "\")"));
  }

  grpc::experimental::ServerRpcInfo* info_;
  // Copied at the start: for a method no service defines, gRPC frees the name it points
  // to before the call ends (the old code put freed bytes into log lines and labels).
  const std::string method_;
  RequestLog* log_;
  const CallObserver* on_call_end_;
  const std::chrono::steady_clock::time_point start_;
  std::string request_id_;
  grpc::Status status_;
  bool status_seen_ = false;
  bool request_received_ = false;
  std::string previous_attempts_;  // a retried call's grpc-previous-rpc-attempts
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

RequestLog::RequestLog(bool log_lines, std::function<void(absl::string_view)> write_line,
                       absl::Duration progress_interval)
    : log_lines_(log_lines),
      write_line_(write_line ? std::move(write_line) : WriteToStderr),
      progress_interval_(progress_interval) {}

void RequestLog::Write(absl::string_view line) const {
  if (log_lines_) write_line_(line);
}

std::string RequestLog::NewRequestId() {
  return absl::StrCat(next_request_id_.fetch_add(1, std::memory_order_relaxed));
}

std::string RequestLog::BeginCall(const grpc::ServerContextBase* context, const void* owner,
                                  absl::string_view method, absl::string_view client_request_id) {
  std::string id = SanitizedRequestId(client_request_id);
  if (id.empty()) id = NewRequestId();
  absl::MutexLock lock(&mu_);
  calls_[context] = Call{owner, std::string(method), id};
  return id;
}

void RequestLog::EndCall(const grpc::ServerContextBase* context, const void* owner) {
  absl::MutexLock lock(&mu_);
  auto it = calls_.find(context);
  if (it != calls_.end() && it->second.owner == owner) calls_.erase(it);
}

RequestLog::Progress RequestLog::ProgressLogger(const grpc::ServerContextBase* context) const {
  if (!log_lines_) return {};
  std::string prefix;
  {
    absl::MutexLock lock(&mu_);
    auto it = calls_.find(context);
    // Without the interceptor (it is not installed) the line still says what advanced.
    prefix = it == calls_.end()
                 ? " rpc=? request_id=?"
                 : absl::StrCat(" rpc=", it->second.method, " request_id=", it->second.request_id);
  }
  const int64_t interval_ns = absl::ToInt64Nanoseconds(progress_interval_);
  const int64_t start_ns = SteadyNowNs();
  // Shared by copies of the callback; atomic so that a callback reached from several
  // threads still writes at most one line per interval.
  auto next_ns = std::make_shared<std::atomic<int64_t>>(start_ns + interval_ns);
  return [this, prefix, interval_ns, start_ns, next_ns](std::string_view phase, int64_t done,
                                                        int64_t total) {
    const int64_t now_ns = SteadyNowNs();
    int64_t next = next_ns->load(std::memory_order_relaxed);
    if (now_ns < next || !next_ns->compare_exchange_strong(next, now_ns + interval_ns)) return;
    Write(absl::StrCat("ts=", NowTimestamp(), prefix, " progress=",
                       Quoted({phase.data(), phase.size()}), " done=", done, " total=", total,
                       absl::StrFormat(" elapsed_ms=%.3f", (now_ns - start_ns) / 1e6)));
  };
}

RequestLogFactory::RequestLogFactory(RequestLog* log, CallObserver on_call_end)
    : own_log_(log == nullptr ? std::make_unique<RequestLog>(false) : nullptr),
      log_(log == nullptr ? own_log_.get() : log),
      on_call_end_(std::move(on_call_end)) {}

grpc::experimental::Interceptor* RequestLogFactory::CreateServerInterceptor(
    grpc::experimental::ServerRpcInfo* info) {
  if (info->method() == nullptr || IsHealthCheck(info->method())) return nullptr;
  return new RequestLogInterceptor(info, log_, &on_call_end_);
}

}  // namespace oobleck::server
