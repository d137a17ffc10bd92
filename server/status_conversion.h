// The one place where core's absl::Status becomes a gRPC status.
#ifndef OOBLECK_SERVER_STATUS_CONVERSION_H_
#define OOBLECK_SERVER_STATUS_CONVERSION_H_

#include <grpcpp/support/status.h>

#include "absl/status/status.h"

namespace oobleck::server {

// Keeps the code (the canonical codes share numbering) and the message. An INVALID_ARGUMENT
// about a request field (core/field_path.h) also carries a google.rpc.Status in the details
// (grpc-status-details-bin) holding one google.rpc.BadRequest field violation with the
// field's path, as grpcurl and other clients show.
grpc::Status ToGrpcStatus(const absl::Status& status);

}  // namespace oobleck::server

#endif  // OOBLECK_SERVER_STATUS_CONVERSION_H_
