// The one place where core's absl::Status becomes a gRPC status.
#ifndef OOBLECK_SERVER_STATUS_CONVERSION_H_
#define OOBLECK_SERVER_STATUS_CONVERSION_H_

#include <grpcpp/support/status.h>

#include <cstddef>
#include <string>

#include "absl/status/status.h"

namespace oobleck::server {

// gRPC sends a status as HTTP/2 trailers: the message percent-encoded (up to 3 bytes a byte)
// and the details base64-encoded (another copy, or two, of the message). Clients refuse
// trailers over 8 KiB (gRPC's default), and would see RESOURCE_EXHAUSTED "received initial
// metadata size exceeds limit" instead of the real error, so longer messages are cut here.
inline constexpr size_t kMaxStatusMessageBytes = 1024;

// `message` itself if at most kMaxStatusMessageBytes, else its first bytes (cut at a
// UTF-8 character) and "... (message cut: N bytes)".
std::string CappedStatusMessage(absl::string_view message);

// Keeps the code (the canonical codes share numbering) and the message. An INVALID_ARGUMENT
// about a request field (core/field_path.h) also carries a google.rpc.Status in the details
// (grpc-status-details-bin) holding one google.rpc.BadRequest field violation with the
// field's path, as grpcurl and other clients show. The message is CappedStatusMessage's, for
// every RPC.
grpc::Status ToGrpcStatus(const absl::Status& status);

}  // namespace oobleck::server

#endif  // OOBLECK_SERVER_STATUS_CONVERSION_H_
