// Errors about one input field, with the field's path carried as data beside the message
// (an absl::Status payload), so that callers map or report it without parsing text: the
// server prefixes paths of nested messages ("request.") and turns them into
// google.rpc.BadRequest field violations (server/status_conversion.h).
#ifndef OOBLECK_CORE_FIELD_PATH_H_
#define OOBLECK_CORE_FIELD_PATH_H_

#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "core/shown_value.h"

namespace oobleck {

// The key of the payload that carries the path. The payload is not a protobuf message (core
// links no protobuf), so the key is no "type.googleapis.com/" URL: its value is the path's
// UTF-8 text, e.g. "cluster.node_types[1].gpus_per_node", which the server sends as
// google.rpc.BadRequest.FieldViolation.field (docs/ERRORS.md).
inline constexpr absl::string_view kFieldPathPayloadUrl = "oobleck.planner/field-path:text";

// The one way a field error is made: an error of `code` whose message is `field` followed by
// `rest`, which starts with its own separator (" must be >= 1 (got 0)", " is required", ": "),
// and whose payload is the path `field`.
absl::Status FieldError(absl::StatusCode code, absl::string_view field, absl::string_view rest);
inline absl::Status InvalidField(absl::string_view field, absl::string_view rest) {
  return FieldError(absl::StatusCode::kInvalidArgument, field, rest);
}

// "field must be <requirement> (got <value>)", the value shown as the user wrote it
// (core/shown_value.h: 1e-09 and 5e-324 as such, never rounded to 0).
template <typename Number>
absl::Status InvalidValue(absl::string_view field, absl::string_view requirement, Number got) {
  return InvalidField(field, absl::StrCat(" must be ", requirement, " (got ", Show(got), ")"));
}

// The path `status` is about, if it names one.
std::optional<std::string> FieldPathOf(const absl::Status& status);

// The same error (code, payloads) with `text` before its message, for context that is not a
// path ("global_batch[0] = 64: ").
absl::Status WithMessagePrefix(const absl::Status& status, absl::string_view text);

// The same error seen from an enclosing message: `prefix` ("request.") goes before the
// message and before the path. Keeps the code; OK stays OK.
absl::Status UnderField(const absl::Status& status, absl::string_view prefix);

// The same error about a part of `field` ("pipelines[0].template"): a path it carries goes
// under `field` ("pipelines[0].template.stages[2].gpus", message likewise); without one, the
// error is about `field` itself, its message prefixed with "field: ". Keeps the code.
absl::Status InField(const absl::Status& status, absl::string_view field);

// The same error about `field` (its message prefixed with "field \"value\": "), for errors of
// a lookup or a check that does not know which request field its input came from.
absl::Status AboutField(const absl::Status& status, absl::string_view field,
                        absl::string_view value);

}  // namespace oobleck

#endif  // OOBLECK_CORE_FIELD_PATH_H_
