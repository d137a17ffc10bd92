// The one place where core's absl::Status becomes a gRPC status.
#ifndef OOBLECK_SERVER_STATUS_CONVERSION_H_
#define OOBLECK_SERVER_STATUS_CONVERSION_H_

#include <grpcpp/support/status.h>

#include "absl/status/status.h"

namespace oobleck::server {

// Keeps the code (the canonical codes share numbering) and the message.
grpc::Status ToGrpcStatus(const absl::Status& status);

}  // namespace oobleck::server

#endif  // OOBLECK_SERVER_STATUS_CONVERSION_H_
