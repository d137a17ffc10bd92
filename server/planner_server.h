// Assembles and starts a gRPC server around the Planner service with the standard health
// service, server reflection and the service's message-size limit. Shared by main() and
// the in-process service tests.
#ifndef OOBLECK_SERVER_PLANNER_SERVER_H_
#define OOBLECK_SERVER_PLANNER_SERVER_H_

#include <grpcpp/server.h>

#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace oobleck::server {

// Requests may carry whole profiles inline.
inline constexpr int kMaxReceiveMessageBytes = 64 << 20;

struct RunningServer {
  std::unique_ptr<grpc::Server> server;
  // The address actually bound: a trailing ":0" replaced by the chosen port.
  std::string address;
  int port = 0;
};

// Listens (insecure credentials) on `address` and starts serving `service`, which must
// outlive the server. UNAVAILABLE when the address cannot be bound.
absl::StatusOr<RunningServer> StartPlannerServer(const std::string& address,
                                                 grpc::Service* service);

}  // namespace oobleck::server

#endif  // OOBLECK_SERVER_PLANNER_SERVER_H_
