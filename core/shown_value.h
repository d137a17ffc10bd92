// How an error message shows a value the user gave: a number as the shortest text that
// reads back as the same double (1e-09, 5e-324, 0.1; never rounded to "0"), a string quoted,
// with control and non-UTF-8 bytes escaped and at most kMaxQuotedBytes of it, so that a
// message never grows with its input (a 1 MB model name is still a short NOT_FOUND).
#ifndef OOBLECK_CORE_SHOWN_VALUE_H_
#define OOBLECK_CORE_SHOWN_VALUE_H_

#include <cstddef>
#include <string>
#include <string_view>
#include <type_traits>

#include "absl/strings/str_cat.h"

namespace oobleck {

// How much of a user's string a message quotes (bytes of the original text).
inline constexpr size_t kMaxQuotedBytes = 128;

// "text", with `"` and `\` backslash-escaped, control bytes as \n, \t or \xNN, bytes that
// are not part of valid UTF-8 as \xNN; a longer text is cut (at a character) after
// kMaxQuotedBytes and followed by its length: "abc..." (16384 bytes).
std::string Quote(std::string_view text);

// The shortest text that parses back to exactly `value` ("inf", "-inf", "nan" as such).
std::string ShowNumber(double value);

// A number as the user wrote it: floating point by ShowNumber, integers as they are.
template <typename Number>
std::string Show(Number value) {
  if constexpr (std::is_floating_point_v<Number>) {
    return ShowNumber(static_cast<double>(value));
  } else {
    return absl::StrCat(value);
  }
}

}  // namespace oobleck

#endif  // OOBLECK_CORE_SHOWN_VALUE_H_
