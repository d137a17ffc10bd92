// One structured line on stderr per RPC (logfmt: key=value), for people and log shippers:
//   ts=2024-05-01T12:00:00.123Z rpc=/oobleck.planner.v1.Planner/PlanTemplates
//   request_id=7 code=OK latency_ms=12.345 peer=ipv4:127.0.0.1:40522
// (one line; wrapped here). Failed calls add message="...". The request id is the
// client's x-request-id metadata when it sends a usable one, else a counter, and is
// returned to the client as x-request-id initial metadata so both sides can be matched.
// Health checks are not logged: probes every few seconds would drown the rest.
// The same interceptor reports each finished call to metrics (server/metrics.h).
#ifndef OOBLECK_SERVER_REQUEST_LOG_H_
#define OOBLECK_SERVER_REQUEST_LOG_H_

#include <grpcpp/support/server_interceptor.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>

#include "absl/strings/string_view.h"

namespace oobleck::server {

inline constexpr char kRequestIdMetadata[] = "x-request-id";

// Called once per finished call with its method, status code and latency.
using CallObserver =
    std::function<void(absl::string_view method, grpc::StatusCode code, double latency_s)>;

class RequestLogFactory final : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  // `log_lines`: write the line above for each call. `write_line` receives each line
  // without its newline; the default writes it to stderr in one write(2), so concurrent
  // lines never interleave. `on_call_end` (optional) sees every call too.
  explicit RequestLogFactory(bool log_lines, CallObserver on_call_end = {},
                             std::function<void(absl::string_view)> write_line = {});

  grpc::experimental::Interceptor* CreateServerInterceptor(
      grpc::experimental::ServerRpcInfo* info) override;

 private:
  const bool log_lines_;
  const CallObserver on_call_end_;
  std::function<void(absl::string_view)> write_line_;
  std::atomic<int64_t> next_request_id_{1};
};

// A client-supplied request id, if it is 1 to 64 characters of [A-Za-z0-9._:-]; else "".
std::string SanitizedRequestId(absl::string_view id);

}  // namespace oobleck::server

#endif  // OOBLECK_SERVER_REQUEST_LOG_H_
