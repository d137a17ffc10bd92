// A small SVG writer for the pictures oobleck-plan draws: rectangles, text, lines and
// paths, each optionally with a tooltip (<title>). Plain SVG 1.1 with no external fonts,
// images or scripts, so a browser or rsvg-convert opens it as is. All text is escaped
// here: node ids and type names come from users.
#ifndef OOBLECK_CLIENT_SVG_CANVAS_H_
#define OOBLECK_CLIENT_SVG_CANVAS_H_

#include <map>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace oobleck::client::svg {

// `text` safe inside XML character data and attribute values: & < > " ' escaped, bytes
// that are not valid UTF-8 and control characters XML 1.0 forbids replaced by U+FFFD.
std::string EscapeXml(absl::string_view text);

// Approximate width in px of `text` at `font_px` in the generic sans-serif font (the
// renderer picks the face, so layout leaves a margin).
double TextWidth(absl::string_view text, double font_px);

// `text` cut to at most `max_chars` characters, ending in "..." when cut.
std::string Abbreviate(absl::string_view text, size_t max_chars);

struct TextStyle {
  double font_px = 12;
  std::string anchor = "start";  // start | middle | end
  std::string fill = "#222";
  bool bold = false;
  bool monospace = false;
  double rotate_deg = 0;  // about the anchor point
};

struct ShapeStyle {
  std::string fill = "none";
  std::string stroke = "none";
  double stroke_px = 1;
  std::string dash;  // stroke-dasharray, e.g. "4 3"
  double opacity = 1;
};

class Canvas {
 public:
  void Rect(double x, double y, double w, double h, const ShapeStyle& style,
            absl::string_view title = "", double corner_px = 0);
  void Text(double x, double y, absl::string_view text, const TextStyle& style = {},
            absl::string_view title = "");
  void Line(double x1, double y1, double x2, double y2, const ShapeStyle& style);
  // An SVG path `d` attribute (built from numbers only: no escaping needed).
  void Path(const std::string& d, const ShapeStyle& style, bool arrow_head = false,
            absl::string_view title = "");
  // Draws `other` here with its origin at (x, y).
  void Embed(const Canvas& other, double x, double y);
  // Grows the drawn area to include (x, y); shapes do this themselves.
  void Extend(double x, double y);

  double width() const { return max_x_; }
  double height() const { return max_y_; }

  // The document: white background, `margin_px` around the drawing, `title` as its
  // <title> (what a browser shows on the tab).
  std::string Document(absl::string_view title, double margin_px = 16) const;

 private:
  std::string body_;
  double max_x_ = 0;
  double max_y_ = 0;
  std::map<std::string, std::string> arrow_colours_;  // stroke colour -> marker id
};

// A fixed colour per GPU type, in the order the types are first asked for, so the same
// cluster gets the same colours in every picture.
class TypeColours {
 public:
  const std::string& Of(const std::string& gpu_type);
  // A lighter shade of the same colour (forward passes in a schedule).
  std::string LightOf(const std::string& gpu_type);
  const std::vector<std::string>& Types() const { return order_; }

 private:
  std::map<std::string, std::string> colours_;
  std::vector<std::string> order_;
};

}  // namespace oobleck::client::svg

#endif  // OOBLECK_CLIENT_SVG_CANVAS_H_
