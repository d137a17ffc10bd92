#include "core/shown_value.h"

#include <algorithm>
#include <charconv>
#include <cmath>

#include "absl/strings/str_format.h"

namespace oobleck {
namespace {

// The length of the valid UTF-8 character at the start of `text` (1 to 4 bytes), or 0 if
// it does not start with one (a stray continuation byte, an overlong form, a surrogate, a
// value above U+10FFFF, or a cut sequence).
size_t Utf8CharLength(std::string_view text) {
  const auto byte = [&](size_t i) { return static_cast<unsigned char>(text[i]); };
  const unsigned char lead = byte(0);
  if (lead < 0x80) return 1;
  size_t length;
  unsigned char low = 0x80, high = 0xBF;  // allowed range of the second byte
  if (lead >= 0xC2 && lead <= 0xDF) {
    length = 2;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    length = 3;
    if (lead == 0xE0) low = 0xA0;
    if (lead == 0xED) high = 0x9F;
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    length = 4;
    if (lead == 0xF0) low = 0x90;
    if (lead == 0xF4) high = 0x8F;
  } else {
    return 0;
  }
  if (text.size() < length || byte(1) < low || byte(1) > high) return 0;
  for (size_t i = 2; i < length; ++i) {
    if (byte(i) < 0x80 || byte(i) > 0xBF) return 0;
  }
  return length;
}

void AppendEscapedByte(unsigned char c, std::string* out) {
  switch (c) {
    case '"':
      out->append("\\\"");
      return;
    case '\\':
      out->append("\\\\");
      return;
    case '\n':
      out->append("\\n");
      return;
    case '\r':
      out->append("\\r");
      return;
    case '\t':
      out->append("\\t");
      return;
    default:
      absl::StrAppendFormat(out, "\\x%02x", c);
  }
}

}  // namespace

std::string Quote(std::string_view text) {
  std::string out = "\"";
  size_t i = 0;
  while (i < text.size()) {
    const size_t length = Utf8CharLength(text.substr(i));
    if (i + std::max<size_t>(length, 1) > kMaxQuotedBytes) break;
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if (length == 0 || (length == 1 && (c < 0x20 || c == 0x7F || c == '"' || c == '\\'))) {
      AppendEscapedByte(c, &out);
      ++i;
    } else {
      out.append(text.substr(i, length));
      i += length;
    }
  }
  if (i < text.size()) {
    absl::StrAppend(&out, "...\" (", text.size(), " bytes)");
  } else {
    out.push_back('"');
  }
  return out;
}

std::string ShowNumber(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  char buffer[64];
  const std::to_chars_result result = std::to_chars(buffer, buffer + sizeof(buffer), value);
  return std::string(buffer, result.ptr);
}

}  // namespace oobleck
