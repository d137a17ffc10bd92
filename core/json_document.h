// The one way the planner parses a JSON document (profiles, cluster files, stored profiles,
// shared templates). nlohmann::json builds, prints and destroys nested values recursively,
// so a document of a few hundred thousand nested brackets would overflow the stack; every
// document is first walked by a SAX pass that builds nothing and stops at the first bracket
// nested deeper than kMaxJsonDepth, so such a document is refused before any DOM exists.
#ifndef OOBLECK_CORE_JSON_DOCUMENT_H_
#define OOBLECK_CORE_JSON_DOCUMENT_H_

#include <cstdint>
#include <string_view>

#include "absl/status/statusor.h"
#include "core/interrupt.h"
#include "nlohmann/json.hpp"

namespace oobleck {

// Arrays and objects nested inside each other, counting the outermost one. The deepest
// document the planner writes or reads (a stored profile) has 4 levels.
inline constexpr int kMaxJsonDepth = 64;

struct JsonLimits {
  int max_depth = kMaxJsonDepth;
  // Elements of a top-level array or object; < 0 for no limit. Counted before parsing, so
  // a huge document is refused before it takes any memory.
  int64_t max_top_level_elements = -1;
  // Polled every Interrupt::kStride values of both passes (may be null): a 2^18-layer
  // profile takes most of a second to parse. CANCELLED once it stopped.
  Interrupt* interrupt = nullptr;
};

// The parsed document. INVALID_ARGUMENT "not valid JSON: <parser's reason>" for a syntax
// error or a number beyond double's range; INVALID_ARGUMENT "nested deeper than 64 levels
// of arrays and objects"; RESOURCE_EXHAUSTED "has more than N top-level
// elements" when limits.max_top_level_elements is exceeded; CANCELLED when
// limits.interrupt stopped. Messages never echo the text.
absl::StatusOr<nlohmann::json> ParseJsonDocument(std::string_view text,
                                                 const JsonLimits& limits = {});

}  // namespace oobleck

#endif  // OOBLECK_CORE_JSON_DOCUMENT_H_
