// Pictures from oobleck-plan: the --svg FILE of templates, plan and replan, and the
// render command, which draws a saved --json answer (of this CLI, or of any client that
// prints the answer messages as proto3 JSON, e.g. Python's json_format). No RPCs here.
#ifndef OOBLECK_CLIENT_RENDER_COMMAND_H_
#define OOBLECK_CLIENT_RENDER_COMMAND_H_

#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "client/command_line.h"

namespace oobleck::client {

// Writes `svg` to `path` ("-": standard output) and says so on stderr; errors name the
// --svg path.
absl::Status WriteSvgFile(const std::string& path, const std::string& svg);

// The picture of a saved answer: a PlanTemplatesResponse (schedules), a PlanResponse
// (the plan) or a ReplanResponse (before and after; needs `old_plan_json`, the plan or
// replan answer it started from). `microbatches` > 0 sets the M of schedules. Errors name
// `source` / `old_source`.
absl::StatusOr<std::string> RenderAnswer(const std::string& answer_json, const std::string& source,
                                         const std::optional<std::string>& old_plan_json,
                                         const std::string& old_source, int microbatches);

// `oobleck-plan render ANSWER.json [--plan OLD.json] [--microbatches M] [--svg OUT.svg]`.
absl::Status RunRender(const CommandLine& cl);

}  // namespace oobleck::client

#endif  // OOBLECK_CLIENT_RENDER_COMMAND_H_
