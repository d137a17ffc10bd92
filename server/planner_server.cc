#include "server/planner_server.h"

#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/health_check_service_interface.h>
#include <grpcpp/security/server_credentials.h>
#include <grpcpp/server_builder.h>

#include <memory>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "grpc/health/v1/health.pb.h"
#include "oobleck/planner/v1/planner.grpc.pb.h"
#include "server/request_log.h"

namespace oobleck::server {

absl::StatusOr<RunningServer> StartPlannerServer(const std::string& address, grpc::Service* service,
                                                 const ServerOptions& options) {
  const ServerSecurity& security = options.security;
  // Referencing the generated health messages keeps health.pb.o in the link, so that
  // reflection can describe grpc.health.v1.Health served by gRPC's default service.
  (void)grpc::health::v1::HealthCheckRequest::descriptor();
  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();

  RunningServer running;
  grpc::ServerBuilder builder;
  builder.AddListeningPort(address, MakeServerCredentials(security), &running.port);
  builder.RegisterService(service);
  builder.SetMaxReceiveMessageSize(kMaxReceiveMessageBytes);
  if (options.request_log != nullptr || options.metrics != nullptr) {
    CallObserver on_call_end;
    if (ServerMetrics* metrics = options.metrics; metrics != nullptr) {
      on_call_end = [metrics](absl::string_view method, grpc::StatusCode code, double latency_s) {
        metrics->ObserveRpc(method, code, latency_s);
      };
    }
    std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> creators;
    creators.push_back(
        std::make_unique<RequestLogFactory>(options.request_log, std::move(on_call_end)));
    builder.experimental().SetInterceptorCreators(std::move(creators));
  }
  running.server = builder.BuildAndStart();
  if (running.server == nullptr || running.port == 0) {
    if (running.server != nullptr) running.server->Shutdown();
    return absl::UnavailableError(absl::StrCat(
        "cannot listen on ", address,
        security.tls_cert_chain_pem.empty() ? ""
                                            : " (or the TLS key does not match the certificate)"));
  }
  // The whole server ("") is SERVING by default; the Planner service is too, so that probes
  // may ask for it by name.
  SetServing(running.server.get(), options.serving_at_start);
  running.address = address;
  if (absl::EndsWith(address, ":0")) {
    running.address = absl::StrCat(address.substr(0, address.size() - 1), running.port);
  }
  return running;
}

void SetServing(grpc::Server* server, bool serving) {
  if (auto* health = server->GetHealthCheckService(); health != nullptr) {
    health->SetServingStatus(serving);
    health->SetServingStatus(::oobleck::planner::v1::Planner::service_full_name(), serving);
  }
}

}  // namespace oobleck::server
