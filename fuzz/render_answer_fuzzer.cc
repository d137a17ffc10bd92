// `oobleck-plan render` on arbitrary files: the answer JSON is read by kind (templates,
// plan, replan) and drawn as SVG; it must never crash or hang. The input is the answer; a
// replan answer is drawn against a fixed plan (the seed it was replanned from), so the
// before/after picture is reached too.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>

#include "client/render_command.h"

namespace {

const std::string& OldPlan() {
  static const std::string* plan = [] {
    std::ifstream in(OOBLECK_SOURCE_DIR "/fuzz/corpus/render_answer/plan-ditto-exp2.json");
    std::ostringstream text;
    text << in.rdbuf();
    return new std::string(text.str());
  }();
  return *plan;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string answer(reinterpret_cast<const char*>(data), size);
  // As render is called: alone, with --microbatches, and with --plan (a replan answer).
  const struct {
    bool old_plan;
    int microbatches;
  } calls[] = {{false, 0}, {false, 3}, {true, 0}};
  for (const auto& call : calls) {
    absl::StatusOr<std::string> svg = oobleck::client::RenderAnswer(
        answer, "answer.json", call.old_plan ? std::optional<std::string>(OldPlan()) : std::nullopt,
        "plan.json", call.microbatches);
    // Whatever it drew is a document, never a fragment.
    if (svg.ok() && svg->rfind("<?xml", 0) != 0) std::abort();
  }
  return 0;
}
