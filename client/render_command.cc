#include "client/render_command.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iostream>

#include "absl/strings/str_cat.h"
#include "client/plan_commands.h"
#include "client/requests.h"
#include "client/svg/plan_picture.h"
#include "client/svg/schedule_picture.h"
#include "core/field_path.h"
#include "core/status_macros.h"
#include "google/protobuf/struct.pb.h"

namespace oobleck::client {
absl::Status WriteSvgFile(const std::string& path, const std::string& svg) {
  if (path == "-") {
    std::cout << svg;
    return absl::OkStatus();
  }
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (out) out << svg;
  if (out) out.close();
  if (!out) {
    return absl::PermissionDeniedError(
        absl::StrCat("cannot write --svg ", path, ": ", std::strerror(errno)));
  }
  std::cerr << "wrote " << path << "\n";
  return absl::OkStatus();
}

absl::StatusOr<std::string> RenderAnswer(const std::string& answer_json, const std::string& source,
                                         const std::optional<std::string>& old_plan_json,
                                         const std::string& old_source, int microbatches) {
  // The answer's kind from its top-level keys (the same in proto and camelCase JSON names).
  google::protobuf::Struct keys;
  if (absl::Status s = ParseAnswerJson(answer_json, source, &keys); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(source, " is not a JSON object: ", s.message()));
  }
  const auto has = [&](const char* key) { return keys.fields().count(key) > 0; };
  const std::string kind = has("results")                   ? "templates"
                           : has("strategy") && has("plan") ? "replan"
                           : has("plan")                    ? "plan"
                                                            : "";
  if (kind.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(source,
                     " is not the --json answer of templates, plan or replan (it has no "
                     "\"results\" or \"plan\")"));
  }
  if (old_plan_json.has_value() && kind != "replan") {
    return absl::InvalidArgumentError(
        absl::StrCat("--plan is for a replan answer (the plan it started from); ", source, " is a ",
                     kind, " answer"));
  }
  if (microbatches > 0 && kind != "templates") {
    return absl::InvalidArgumentError(
        absl::StrCat("--microbatches is for a templates answer (the M of its schedules); ", source,
                     " is a ", kind, " answer"));
  }
  if (kind == "templates") {
    pb::PlanTemplatesResponse templates;
    RETURN_IF_ERROR(ParseAnswerJson(answer_json, source, &templates));
    svg::ScheduleOptions options;
    options.microbatches = microbatches;
    absl::StatusOr<std::string> svg = svg::DrawTemplatesSvg(templates, options);
    if (!svg.ok()) return WithMessagePrefix(svg.status(), absl::StrCat(source, ": "));
    return svg;
  }
  if (kind == "plan") {
    pb::PlanResponse plan;
    RETURN_IF_ERROR(ParseAnswerJson(answer_json, source, &plan));
    return svg::DrawPlanSvg(plan);
  }
  pb::ReplanResponse replan;
  RETURN_IF_ERROR(ParseAnswerJson(answer_json, source, &replan));
  if (!old_plan_json.has_value()) {
    return absl::InvalidArgumentError(
        absl::StrCat(source,
                     " is a replan answer: pass --plan OLD.json, the plan it started from, to "
                     "draw it before and after"));
  }
  ASSIGN_OR_RETURN(pb::ReplanRequest old,
                   BuildReplanRequest(*old_plan_json, old_source, {}, {}, std::nullopt));
  return svg::DrawReplanSvg(old.request(), old.plan(), replan);
}

absl::Status RunRender(const CommandLine& cl) {
  const CliOptions& o = cl.options;
  const std::string& source = cl.args[0];
  ASSIGN_OR_RETURN(std::string answer, ReadTextFile(source));
  std::optional<std::string> old_plan;
  if (!o.plan.empty()) {
    ASSIGN_OR_RETURN(std::string text, ReadTextFile(o.plan));
    old_plan = std::move(text);
  }
  ASSIGN_OR_RETURN(std::string svg,
                   RenderAnswer(answer, source, old_plan, o.plan, o.job.microbatches));
  return WriteSvgFile(o.svg.empty() ? "-" : o.svg, svg);
}

}  // namespace oobleck::client
