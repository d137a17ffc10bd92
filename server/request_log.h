// One structured line on stderr per RPC (logfmt: key=value), for people and log shippers:
//   ts=2024-05-01T12:00:00.123Z rpc=/oobleck.planner.v1.Planner/PlanTemplates
//   request_id=7 code=OK latency_ms=12.345 peer=ipv4:127.0.0.1:40522
// (one line; wrapped here). Failed calls add message="...". A call cancelled (or past its
// deadline) before its request message arrived is logged and observed as CANCELLED, not
// as the INTERNAL "Couldn't initialize byte buffer reader" gRPC's handler answers it.
// The request id is the client's x-request-id metadata when it sends a usable one, else a
// counter, and is returned to the client as x-request-id initial metadata so both sides
// can be matched.
// Health checks are not logged: probes every few seconds would drown the rest.
// Template searches running longer than a second add progress lines with the same request
// id (RequestLog::ProgressLogger). The same interceptor reports each finished call to metrics
// (server/metrics.h).
#ifndef OOBLECK_SERVER_REQUEST_LOG_H_
#define OOBLECK_SERVER_REQUEST_LOG_H_

#include <grpcpp/server_context.h>
#include <grpcpp/support/server_interceptor.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>

#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace oobleck::server {

inline constexpr char kRequestIdMetadata[] = "x-request-id";

// Called once per finished call with its method, status code and latency.
using CallObserver =
    std::function<void(absl::string_view method, grpc::StatusCode code, double latency_s)>;

// Where the lines go, and the request id of every call in flight: shared by the
// interceptor (one line per call) and by handlers that report how a long call advances,
// in lines carrying the same request id:
//   ts=2024-05-01T12:00:01.125Z rpc=/oobleck.planner.v1.Planner/PlanTemplates request_id=7
//   progress="exact search (layers)" done=31 total=50 elapsed_ms=1002.417
class RequestLog {
 public:
  // As SearchOptions::progress (core/search.h).
  using Progress = std::function<void(std::string_view phase, int64_t done, int64_t total)>;

  // `log_lines`: write lines at all. `write_line` receives each line without its newline;
  // the default writes it to stderr in one write(2), so concurrent lines never
  // interleave. A call's first progress line comes once it has run `progress_interval`,
  // later ones at most one per `progress_interval` (most calls end before the first).
  explicit RequestLog(bool log_lines, std::function<void(absl::string_view)> write_line = {},
                      absl::Duration progress_interval = absl::Seconds(1));

  bool log_lines() const { return log_lines_; }
  void Write(absl::string_view line) const;

  // A progress callback that logs the advance of `context`'s call, which must be in
  // flight; empty when lines are off.
  Progress ProgressLogger(const grpc::ServerContextBase* context) const;

  // For the interceptor. BeginCall records a call once its metadata arrived and returns its
  // request id: `client_request_id` when usable (SanitizedRequestId), else a new one.
  // EndCall forgets it (only if `owner` recorded it: contexts are reused).
  std::string BeginCall(const grpc::ServerContextBase* context, const void* owner,
                        absl::string_view method, absl::string_view client_request_id);
  void EndCall(const grpc::ServerContextBase* context, const void* owner);
  // An id for a call that never got as far as BeginCall.
  std::string NewRequestId();

 private:
  struct Call {
    const void* owner;
    std::string method;
    std::string request_id;
  };
  const bool log_lines_;
  const std::function<void(absl::string_view)> write_line_;
  const absl::Duration progress_interval_;
  std::atomic<int64_t> next_request_id_{1};
  mutable absl::Mutex mu_;
  std::unordered_map<const grpc::ServerContextBase*, Call> calls_ ABSL_GUARDED_BY(mu_);
};

// One structured line per RPC (see the top of this file), and the x-request-id initial
// metadata. Health checks are neither logged nor observed: probes every few seconds would
// drown the rest.
class RequestLogFactory final : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  // `log` (null: no lines, request ids only) must outlive the factory. `on_call_end`
  // (optional) sees every call.
  explicit RequestLogFactory(RequestLog* log, CallObserver on_call_end = {});

  grpc::experimental::Interceptor* CreateServerInterceptor(
      grpc::experimental::ServerRpcInfo* info) override;

 private:
  std::unique_ptr<RequestLog> own_log_;  // when none was given
  RequestLog* const log_;
  const CallObserver on_call_end_;
};

// A client-supplied request id, if it is 1 to 64 characters of [A-Za-z0-9._:-]; else "".
std::string SanitizedRequestId(absl::string_view id);

}  // namespace oobleck::server

#endif  // OOBLECK_SERVER_REQUEST_LOG_H_
