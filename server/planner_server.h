// Assembles and starts a gRPC server around the Planner service with the standard health
// service, server reflection and the service's message-size limit. Shared by main() and
// the in-process service tests.
#ifndef OOBLECK_SERVER_PLANNER_SERVER_H_
#define OOBLECK_SERVER_PLANNER_SERVER_H_

#include <grpcpp/server.h>

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "server/metrics.h"
#include "server/request_log.h"
#include "server/server_security.h"

namespace oobleck::server {

// Requests may carry whole profiles inline.
inline constexpr int kMaxReceiveMessageBytes = 64 << 20;

struct ServerOptions {
  ServerSecurity security;  // plaintext by default
  // One line per RPC (server/request_log.h); must outlive the server. Null: no lines.
  RequestLog* request_log = nullptr;
  ServerMetrics* metrics = nullptr;  // --metrics_address; must outlive the server
  // Health starts NOT_SERVING when false (--etcd_endpoints: until the profiles are read);
  // the caller flips it with SetServing.
  bool serving_at_start = true;
};

struct RunningServer {
  std::unique_ptr<grpc::Server> server;
  // The address actually bound: a trailing ":0" replaced by the chosen port.
  std::string address;
  int port = 0;
};

// Listens on `address` (TLS and token check as options.security says) and starts serving
// `service`, which must outlive the server. UNAVAILABLE when the address cannot be bound
// (or the TLS key and certificate are rejected).
absl::StatusOr<RunningServer> StartPlannerServer(const std::string& address, grpc::Service* service,
                                                 const ServerOptions& options = {});

// Sets the health of the whole server ("") and of the Planner service.
void SetServing(grpc::Server* server, bool serving);

}  // namespace oobleck::server

#endif  // OOBLECK_SERVER_PLANNER_SERVER_H_
