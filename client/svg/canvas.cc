#include "client/svg/canvas.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace oobleck::client::svg {
namespace {

constexpr char kReplacement[] = "\xEF\xBF\xBD";  // U+FFFD

// Length of the valid UTF-8 sequence starting at text[i], or 0 if it is not one.
size_t Utf8Length(absl::string_view text, size_t i) {
  const auto byte = [&](size_t k) { return static_cast<uint8_t>(text[k]); };
  const uint8_t b = byte(i);
  size_t n = 0;
  uint32_t code = 0;
  if (b < 0x80) return 1;
  if ((b & 0xE0) == 0xC0) {
    n = 2;
    code = b & 0x1F;
  } else if ((b & 0xF0) == 0xE0) {
    n = 3;
    code = b & 0x0F;
  } else if ((b & 0xF8) == 0xF0) {
    n = 4;
    code = b & 0x07;
  } else {
    return 0;
  }
  if (i + n > text.size()) return 0;
  for (size_t k = 1; k < n; ++k) {
    if ((byte(i + k) & 0xC0) != 0x80) return 0;
    code = (code << 6) | (byte(i + k) & 0x3F);
  }
  // Overlong forms, surrogates, and code points beyond Unicode are not valid UTF-8;
  // U+FFFE/U+FFFF are not XML characters.
  static constexpr std::array<uint32_t, 5> kMin = {0, 0, 0x80, 0x800, 0x10000};
  if (code < kMin[n] || (code >= 0xD800 && code <= 0xDFFF) || code > 0x10FFFF || code == 0xFFFE ||
      code == 0xFFFF) {
    return 0;
  }
  return n;
}

// Coordinates from a hand-edited answer may be NaN or infinite; the document stays valid.
std::string Num(double v) { return absl::StrFormat("%.1f", std::isfinite(v) ? v : 0.0); }

std::string StyleAttributes(const ShapeStyle& s) {
  std::string out = absl::StrCat(" fill=\"", s.fill, "\"");
  if (s.stroke != "none") {
    absl::StrAppend(&out, " stroke=\"", s.stroke, "\" stroke-width=\"", Num(s.stroke_px), "\"");
    if (!s.dash.empty()) absl::StrAppend(&out, " stroke-dasharray=\"", s.dash, "\"");
  }
  if (s.opacity < 1) absl::StrAppend(&out, " opacity=\"", absl::StrFormat("%.2f", s.opacity), "\"");
  return out;
}

// The element closed either right away or around a <title> child (a tooltip).
std::string Close(absl::string_view element, absl::string_view title) {
  if (title.empty()) return "/>\n";
  return absl::StrCat("><title>", EscapeXml(title), "</title></", element, ">\n");
}

// Colour-blind-friendly qualitative palette (Okabe-Ito, then Tableau), then greys.
constexpr std::array<const char*, 12> kPalette = {"#0072B2", "#E69F00", "#009E73", "#CC79A7",
                                                  "#56B4E9", "#D55E00", "#8C564B", "#7F7F7F",
                                                  "#BCBD22", "#17BECF", "#9467BD", "#F0E442"};

}  // namespace

std::string EscapeXml(absl::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    const size_t n = Utf8Length(text, i);
    if (n == 0) {
      out += kReplacement;
      ++i;
      continue;
    }
    if (n == 1) {
      const char c = text[i];
      switch (c) {
        case '&':
          out += "&amp;";
          break;
        case '<':
          out += "&lt;";
          break;
        case '>':
          out += "&gt;";
          break;
        case '"':
          out += "&quot;";
          break;
        case '\'':
          out += "&apos;";
          break;
        default:
          if (static_cast<uint8_t>(c) < 0x20 && c != '\t' && c != '\n' && c != '\r') {
            out += kReplacement;
          } else {
            out += c;
          }
      }
    } else {
      out.append(text.data() + i, n);
    }
    i += n;
  }
  return out;
}

double TextWidth(absl::string_view text, double font_px) {
  // Average advance of sans-serif glyphs is ~0.55 em; count code points, not bytes.
  size_t chars = 0;
  for (char c : text) chars += (static_cast<uint8_t>(c) & 0xC0) != 0x80;
  return 0.58 * font_px * static_cast<double>(chars);
}

std::string Abbreviate(absl::string_view text, size_t max_chars) {
  const auto starts_char = [&](size_t i) { return (static_cast<uint8_t>(text[i]) & 0xC0) != 0x80; };
  size_t chars = 0;
  for (size_t i = 0; i < text.size(); ++i) chars += starts_char(i);
  if (chars <= max_chars) return std::string(text);
  const size_t keep = max_chars > 3 ? max_chars - 3 : 0;
  size_t seen = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    if (starts_char(i) && seen++ == keep) return absl::StrCat(text.substr(0, i), "...");
  }
  return std::string(text);
}

void Canvas::Extend(double x, double y) {
  max_x_ = std::max(max_x_, x);
  max_y_ = std::max(max_y_, y);
}

void Canvas::Rect(double x, double y, double w, double h, const ShapeStyle& style,
                  absl::string_view title, double corner_px) {
  absl::StrAppend(&body_, "<rect x=\"", Num(x), "\" y=\"", Num(y), "\" width=\"",
                  Num(std::max(w, 0.0)), "\" height=\"", Num(std::max(h, 0.0)), "\"");
  if (corner_px > 0) absl::StrAppend(&body_, " rx=\"", Num(corner_px), "\"");
  absl::StrAppend(&body_, StyleAttributes(style), Close("rect", title));
  Extend(x + w + style.stroke_px, y + h + style.stroke_px);
}

void Canvas::Text(double x, double y, absl::string_view text, const TextStyle& style,
                  absl::string_view title) {
  absl::StrAppend(&body_, "<text x=\"", Num(x), "\" y=\"", Num(y), "\" font-size=\"",
                  Num(style.font_px), "\" fill=\"", style.fill, "\"");
  if (style.anchor != "start") absl::StrAppend(&body_, " text-anchor=\"", style.anchor, "\"");
  if (style.bold) absl::StrAppend(&body_, " font-weight=\"bold\"");
  if (style.monospace) absl::StrAppend(&body_, " font-family=\"monospace\"");
  if (style.rotate_deg != 0) {
    absl::StrAppend(&body_, " transform=\"rotate(", Num(style.rotate_deg), " ", Num(x), " ", Num(y),
                    ")\"");
  }
  absl::StrAppend(&body_, ">", EscapeXml(text));
  if (!title.empty()) absl::StrAppend(&body_, "<title>", EscapeXml(title), "</title>");
  absl::StrAppend(&body_, "</text>\n");
  const double w = TextWidth(text, style.font_px);
  if (style.rotate_deg != 0) {
    Extend(x + style.font_px, y + w);
  } else if (style.anchor == "middle") {
    Extend(x + w / 2, y + style.font_px * 0.3);
  } else if (style.anchor == "end") {
    Extend(x, y + style.font_px * 0.3);
  } else {
    Extend(x + w, y + style.font_px * 0.3);
  }
}

void Canvas::Line(double x1, double y1, double x2, double y2, const ShapeStyle& style) {
  absl::StrAppend(&body_, "<line x1=\"", Num(x1), "\" y1=\"", Num(y1), "\" x2=\"", Num(x2),
                  "\" y2=\"", Num(y2), "\"", StyleAttributes(style), "/>\n");
  Extend(std::max(x1, x2), std::max(y1, y2));
}

void Canvas::Path(const std::string& d, const ShapeStyle& style, bool arrow_head,
                  absl::string_view title) {
  absl::StrAppend(&body_, "<path d=\"", d, "\"", StyleAttributes(style));
  if (arrow_head) {
    // One marker per stroke colour, so the head has the colour of its line.
    const std::string id = absl::StrCat("arrow", arrow_colours_.size());
    auto [it, inserted] = arrow_colours_.emplace(style.stroke, id);
    absl::StrAppend(&body_, " marker-end=\"url(#", it->second, ")\"");
  }
  absl::StrAppend(&body_, Close("path", title));
}

void Canvas::Embed(const Canvas& other, double x, double y) {
  absl::StrAppend(&body_, "<g transform=\"translate(", Num(x), " ", Num(y), ")\">\n", other.body_,
                  "</g>\n");
  // Markers of `other` keep their ids: only a canvas without arrows of its own may embed
  // one with arrows (the pictures draw arrows on the document alone).
  arrow_colours_.insert(other.arrow_colours_.begin(), other.arrow_colours_.end());
  Extend(x + other.max_x_, y + other.max_y_);
}

std::string Canvas::Document(absl::string_view title, double margin_px) const {
  const double w = max_x_ + 2 * margin_px;
  const double h = max_y_ + 2 * margin_px;
  std::string out = absl::StrCat(
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
      "<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" width=\"",
      Num(w), "\" height=\"", Num(h), "\" viewBox=\"0 0 ", Num(w), " ", Num(h),
      "\" font-family=\"DejaVu Sans, Helvetica, Arial, sans-serif\">\n<title>", EscapeXml(title),
      "</title>\n");
  if (!arrow_colours_.empty()) {
    absl::StrAppend(&out, "<defs>\n");
    for (const auto& [colour, id] : arrow_colours_) {
      absl::StrAppend(&out, "<marker id=\"", id,
                      "\" viewBox=\"0 0 10 10\" refX=\"9\" refY=\"5\" markerWidth=\"7\" "
                      "markerHeight=\"7\" orient=\"auto-start-reverse\"><path d=\"M0,0 L10,5 "
                      "L0,10 z\" fill=\"",
                      colour, "\"/></marker>\n");
    }
    absl::StrAppend(&out, "</defs>\n");
  }
  absl::StrAppend(&out, "<rect x=\"0\" y=\"0\" width=\"", Num(w), "\" height=\"", Num(h),
                  "\" fill=\"#ffffff\"/>\n<g transform=\"translate(", Num(margin_px), " ",
                  Num(margin_px), ")\">\n", body_, "</g>\n</svg>\n");
  return out;
}

const std::string& TypeColours::Of(const std::string& gpu_type) {
  auto it = colours_.find(gpu_type);
  if (it != colours_.end()) return it->second;
  const std::string colour = kPalette[order_.size() % kPalette.size()];
  order_.push_back(gpu_type);
  return colours_.emplace(gpu_type, colour).first->second;
}

std::string TypeColours::LightOf(const std::string& gpu_type) {
  const std::string& c = Of(gpu_type);
  // Mix 55% of the colour with white.
  auto channel = [&](int k) {
    const int v = std::stoi(c.substr(1 + 2 * k, 2), nullptr, 16);
    return static_cast<int>(v * 0.55 + 255 * 0.45);
  };
  return absl::StrFormat("#%02X%02X%02X", channel(0), channel(1), channel(2));
}

}  // namespace oobleck::client::svg
