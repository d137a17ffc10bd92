#include "server/planner_server.h"

#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/health_check_service_interface.h>
#include <grpcpp/security/server_credentials.h>
#include <grpcpp/server_builder.h>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "grpc/health/v1/health.pb.h"

namespace oobleck::server {

absl::StatusOr<RunningServer> StartPlannerServer(const std::string& address,
                                                 grpc::Service* service) {
  // Referencing the generated health messages keeps health.pb.o in the link, so that
  // reflection can describe grpc.health.v1.Health served by gRPC's default service.
  (void)grpc::health::v1::HealthCheckRequest::descriptor();
  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();

  RunningServer running;
  grpc::ServerBuilder builder;
  builder.AddListeningPort(address, grpc::InsecureServerCredentials(), &running.port);
  builder.RegisterService(service);
  builder.SetMaxReceiveMessageSize(kMaxReceiveMessageBytes);
  running.server = builder.BuildAndStart();
  if (running.server == nullptr || running.port == 0) {
    if (running.server != nullptr) running.server->Shutdown();
    return absl::UnavailableError(absl::StrCat("cannot listen on ", address));
  }
  running.address = address;
  if (absl::EndsWith(address, ":0")) {
    running.address = absl::StrCat(address.substr(0, address.size() - 1), running.port);
  }
  return running;
}

}  // namespace oobleck::server
