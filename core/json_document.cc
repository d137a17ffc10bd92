#include "core/json_document.h"

#include <string>

#include "absl/strings/str_cat.h"

namespace oobleck {
namespace {

using json = nlohmann::json;

// Builds nothing: tracks the nesting depth and counts top-level elements, and stops the
// parser (by returning false) at the first bracket too deep or element too many.
class ShapeCheck final : public nlohmann::json_sax<json> {
 public:
  explicit ShapeCheck(const JsonLimits& limits) : limits_(limits) {}
  const absl::Status& status() const { return status_; }

  bool null() override { return Value(); }
  bool boolean(bool) override { return Value(); }
  bool number_integer(number_integer_t) override { return Value(); }
  bool number_unsigned(number_unsigned_t) override { return Value(); }
  bool number_float(number_float_t, const string_t&) override { return Value(); }
  bool string(string_t&) override { return Value(); }
  bool binary(binary_t&) override { return Value(); }
  bool start_object(std::size_t) override { return Open(); }
  bool key(string_t&) override { return true; }
  bool end_object() override { return Close(); }
  bool start_array(std::size_t) override { return Open(); }
  bool end_array() override { return Close(); }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& e) override {
    status_ = absl::InvalidArgumentError(absl::StrCat("not valid JSON: ", e.what()));
    return false;
  }

 private:
  bool Value() {
    if (limits_.interrupt != nullptr && limits_.interrupt->Every(++values_)) {
      status_ = Interrupt::Status("JSON parse");
      return false;
    }
    if (depth_ == 1 && limits_.max_top_level_elements >= 0 &&
        ++top_level_elements_ > limits_.max_top_level_elements) {
      status_ = absl::ResourceExhaustedError(
          absl::StrCat("has more than ", limits_.max_top_level_elements,
                       " top-level elements (counted before parsing)"));
      return false;
    }
    return true;
  }
  bool Open() {
    if (!Value()) return false;
    if (++depth_ > limits_.max_depth) {
      status_ = absl::InvalidArgumentError(
          absl::StrCat("nested deeper than ", limits_.max_depth, " levels of arrays and objects"));
      return false;
    }
    return true;
  }
  bool Close() {
    --depth_;
    return true;
  }

  const JsonLimits limits_;
  absl::Status status_;
  int64_t top_level_elements_ = 0;
  int64_t values_ = 0;
  int depth_ = 0;
};

// json::parse's document builder, polling `interrupt` (may be null) every
// Interrupt::kStride values.
class PolledDomBuilder {
 public:
  PolledDomBuilder(json& doc, Interrupt* interrupt)
      : dom_(doc, /*allow_exceptions=*/false), interrupt_(interrupt) {}
  bool null() { return Go() && dom_.null(); }
  bool boolean(bool v) { return Go() && dom_.boolean(v); }
  bool number_integer(json::number_integer_t v) { return Go() && dom_.number_integer(v); }
  bool number_unsigned(json::number_unsigned_t v) { return Go() && dom_.number_unsigned(v); }
  bool number_float(json::number_float_t v, const json::string_t& s) {
    return Go() && dom_.number_float(v, s);
  }
  bool string(json::string_t& v) { return Go() && dom_.string(v); }
  bool binary(json::binary_t& v) { return Go() && dom_.binary(v); }
  bool start_object(std::size_t n) { return Go() && dom_.start_object(n); }
  bool key(json::string_t& k) { return dom_.key(k); }
  bool end_object() { return dom_.end_object(); }
  bool start_array(std::size_t n) { return Go() && dom_.start_array(n); }
  bool end_array() { return dom_.end_array(); }
  template <typename Exception>
  bool parse_error(std::size_t position, const std::string& token, const Exception& e) {
    return dom_.parse_error(position, token, e);
  }

 private:
  bool Go() { return interrupt_ == nullptr || !interrupt_->Every(++values_); }
  nlohmann::detail::json_sax_dom_parser<json> dom_;
  Interrupt* interrupt_;
  int64_t values_ = 0;
};

}  // namespace

absl::StatusOr<json> ParseJsonDocument(std::string_view text, const JsonLimits& limits) {
  ShapeCheck check(limits);
  const bool ok =
      json::sax_parse(text, &check, nlohmann::detail::input_format_t::json, /*strict=*/true);
  if (!check.status().ok()) return check.status();
  if (!ok) return absl::InvalidArgumentError("not valid JSON");
  // The shape check parsed the same text with the same lexer, so only the interrupt can
  // stop this one.
  json doc;
  PolledDomBuilder builder(doc, limits.interrupt);
  const bool built =
      json::sax_parse(text, &builder, nlohmann::detail::input_format_t::json, /*strict=*/true);
  if (limits.interrupt != nullptr && limits.interrupt->stopped()) {
    return Interrupt::Status("JSON parse");
  }
  if (!built || doc.is_discarded()) return absl::InvalidArgumentError("not valid JSON");
  return doc;
}

}  // namespace oobleck
