#include "core/field_path.h"

#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "core/shown_value.h"

namespace oobleck {

absl::Status FieldError(absl::StatusCode code, absl::string_view field, absl::string_view rest) {
  absl::Status status(code, absl::StrCat(field, rest));
  status.SetPayload(kFieldPathPayloadUrl, absl::Cord(field));
  return status;
}

std::optional<std::string> FieldPathOf(const absl::Status& status) {
  const auto path = status.GetPayload(kFieldPathPayloadUrl);  // absl::optional here
  if (!path.has_value()) return std::nullopt;
  return std::string(*path);
}

absl::Status WithMessagePrefix(const absl::Status& status, absl::string_view text) {
  if (status.ok() || text.empty()) return status;
  absl::Status out(status.code(), absl::StrCat(text, status.message()));
  status.ForEachPayload(
      [&out](absl::string_view url, const absl::Cord& value) { out.SetPayload(url, value); });
  return out;
}

absl::Status UnderField(const absl::Status& status, absl::string_view prefix) {
  if (status.ok() || prefix.empty()) return status;
  absl::Status out = WithMessagePrefix(status, prefix);
  if (std::optional<std::string> path = FieldPathOf(status); path.has_value()) {
    out.SetPayload(kFieldPathPayloadUrl, absl::Cord(absl::StrCat(prefix, *path)));
  }
  return out;
}

absl::Status InField(const absl::Status& status, absl::string_view field) {
  if (status.ok()) return status;
  if (FieldPathOf(status).has_value()) return UnderField(status, absl::StrCat(field, "."));
  return FieldError(status.code(), field, absl::StrCat(": ", status.message()));
}

absl::Status AboutField(const absl::Status& status, absl::string_view field,
                        absl::string_view value) {
  if (status.ok()) return status;
  const std::string_view shown(value.data(), value.size());
  return FieldError(status.code(), field, absl::StrCat(" ", Quote(shown), ": ", status.message()));
}

}  // namespace oobleck
