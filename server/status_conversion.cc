#include "server/status_conversion.h"

#include <string>

namespace oobleck::server {

grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  // absl::StatusCode and grpc::StatusCode both follow google.rpc.Code, so the numeric
  // values coincide for every canonical code.
  return grpc::Status(static_cast<grpc::StatusCode>(static_cast<int>(status.code())),
                      std::string(status.message()));
}

}  // namespace oobleck::server
