#include "server/status_conversion.h"

#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "core/field_path.h"
#include "google/rpc/error_details.pb.h"
#include "google/rpc/status.pb.h"

namespace oobleck::server {

std::string CappedStatusMessage(absl::string_view message) {
  if (message.size() <= kMaxStatusMessageBytes) return std::string(message);
  size_t cut = kMaxStatusMessageBytes;
  while (cut > 0 && (static_cast<unsigned char>(message[cut]) & 0xC0) == 0x80) --cut;
  return absl::StrCat(message.substr(0, cut), "... (message cut: ", message.size(), " bytes)");
}

grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  // absl::StatusCode and grpc::StatusCode both follow google.rpc.Code, so the numeric
  // values coincide for every canonical code.
  const auto code = static_cast<grpc::StatusCode>(static_cast<int>(status.code()));
  std::string message = CappedStatusMessage(status.message());
  // BadRequest describes a malformed request; NOT_FOUND, FAILED_PRECONDITION and
  // RESOURCE_EXHAUSTED keep their path in the message only.
  const std::optional<std::string> field = FieldPathOf(status);
  if (!field.has_value() || status.code() != absl::StatusCode::kInvalidArgument) {
    return grpc::Status(code, std::move(message));
  }
  google::rpc::BadRequest bad_request;
  google::rpc::BadRequest::FieldViolation* violation = bad_request.add_field_violations();
  violation->set_field(*field);
  violation->set_description(message);
  google::rpc::Status details;
  details.set_code(static_cast<int>(status.code()));
  details.set_message(message);
  details.add_details()->PackFrom(bad_request);
  return grpc::Status(code, std::move(message), details.SerializeAsString());
}

}  // namespace oobleck::server
