#include "client/instantiate_command.h"

#include <set>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "client/output.h"
#include "core/status_macros.h"

namespace oobleck::client {
namespace {

absl::Status Usage(const std::string& message) { return absl::InvalidArgumentError(message); }

// "PIPELINES:MS" of --allreduce-across.
absl::Status AddAllreduceEntry(const std::string& text, pb::InstantiateRequest* request) {
  const std::vector<std::string> parts = absl::StrSplit(text, ':');
  int pipelines = 0;
  double ms = 0;
  if (parts.size() != 2 || !absl::SimpleAtoi(parts[0], &pipelines) ||
      !absl::SimpleAtod(parts[1], &ms)) {
    return Usage(absl::StrCat("--allreduce-across values must be PIPELINES:MS, e.g. 4:52.5 (got \"",
                              text, "\")"));
  }
  auto& table = *request->mutable_allreduce_across_pipelines_ms();
  if (!table.insert({pipelines, ms}).second) {
    return Usage(absl::StrCat("--allreduce-across gives ", pipelines, " pipelines twice"));
  }
  return absl::OkStatus();
}

absl::StatusOr<int> ParseCount(const std::string& flag, const std::string& text) {
  int n = 0;
  if (!absl::SimpleAtoi(text, &n)) {
    return Usage(absl::StrCat("--", flag, " values must be integers (got \"", text, "\")"));
  }
  return n;
}

// Everything of the request but the templates file (read by BuildInstantiateRequest).
absl::StatusOr<pb::InstantiateRequest> RequestFromFlags(const CliOptions& o) {
  pb::InstantiateRequest request;
  for (const std::string& t : o.templates) {
    ASSIGN_OR_RETURN(*request.add_templates(), ParseTemplateShape(t));
  }
  request.set_num_nodes(o.num_nodes);
  if (o.global_batch.size() != 1) {
    return Usage(absl::StrCat("instantiate needs one --global-batch N (got ", o.global_batch.size(),
                              " values)"));
  }
  ASSIGN_OR_RETURN(const int batch, ParseCount("global-batch", o.global_batch[0]));
  request.set_global_batch(batch);
  for (const std::string& entry : o.allreduce_across) {
    RETURN_IF_ERROR(AddAllreduceEntry(entry, &request));
  }
  for (const std::string& count : o.instances) {
    ASSIGN_OR_RETURN(const int n, ParseCount("instances", count));
    request.add_instances(n);
  }
  return request;
}

}  // namespace

absl::StatusOr<pb::TemplateShape> ParseTemplateShape(const std::string& text) {
  const std::vector<std::string> parts = absl::StrSplit(text, ':');
  pb::TemplateShape shape;
  int nodes = 0, stages = 0;
  double ms = 0;
  if (parts.size() != 3 || !absl::SimpleAtoi(parts[0], &nodes) ||
      !absl::SimpleAtoi(parts[1], &stages) || !absl::SimpleAtod(parts[2], &ms)) {
    return Usage(absl::StrCat(
        "--template values must be NODES:STAGES:ITERATION_MS, e.g. 2:4:510 (got \"", text, "\")"));
  }
  shape.set_num_nodes(nodes);
  shape.set_num_stages(stages);
  shape.set_iteration_time_ms(ms);
  return shape;
}

absl::StatusOr<std::vector<pb::TemplateShape>> TemplateShapesOfAnswer(const std::string& json,
                                                                      const std::string& source) {
  pb::PlanTemplatesResponse answer;
  RETURN_IF_ERROR(ParseAnswerJson(json, source, &answer));
  std::vector<pb::TemplateShape> shapes;
  std::set<std::string> node_types;
  for (const pb::MixTemplate& result : answer.results()) {
    if (!result.feasible()) continue;
    const pb::PipelineTemplate& t = result.template_();
    node_types.insert(t.node_order().begin(), t.node_order().end());
    pb::TemplateShape& shape = shapes.emplace_back();
    shape.set_num_nodes(t.num_nodes());
    shape.set_num_stages(t.stages_size());
    shape.set_iteration_time_ms(t.iteration_time_ms());
  }
  if (shapes.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat(source, " holds no feasible template to instantiate"));
  }
  if (node_types.size() > 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        source, " holds templates of node types ", absl::StrJoin(node_types, ", "),
        ": instantiate needs templates of one node type (Oobleck's templates are node counts)"));
  }
  return shapes;
}

absl::Status CheckInstantiateUsage(const CommandLine& cl) {
  const CliOptions& o = cl.options;
  if (o.templates.empty() == o.templates_file.empty()) {
    return Usage(
        "instantiate needs either --template NODES:STAGES:MS ... or --templates-file "
        "ANSWER.json (the --json output of templates)");
  }
  if (o.global_batch.empty()) return Usage("instantiate needs --global-batch N");
  if (o.num_nodes == 0 && o.instances.empty()) {
    return Usage("instantiate needs --num-nodes N (or --instances I ... for fixed pipelines)");
  }
  return RequestFromFlags(o).status();
}

absl::StatusOr<pb::InstantiateRequest> BuildInstantiateRequest(const CommandLine& cl) {
  ASSIGN_OR_RETURN(pb::InstantiateRequest request, RequestFromFlags(cl.options));
  if (!cl.options.templates_file.empty()) {
    ASSIGN_OR_RETURN(std::string json, ReadTextFile(cl.options.templates_file));
    ASSIGN_OR_RETURN(std::vector<pb::TemplateShape> shapes,
                     TemplateShapesOfAnswer(json, cl.options.templates_file));
    for (pb::TemplateShape& shape : shapes) *request.add_templates() = std::move(shape);
  }
  return request;
}

std::string FormatInstantiate(const pb::InstantiateRequest& request,
                              const pb::InstantiateResponse& response) {
  std::vector<std::vector<std::string>> rows = {
      {"TEMPLATE", "NODES", "STAGES", "TEMPLATE_MS", "PIPELINES", "MICROBATCHES", "TIME_MS"}};
  for (int i = 0; i < request.templates_size(); ++i) {
    const pb::TemplateShape& t = request.templates(i);
    const int instances = i < response.instances_size() ? response.instances(i) : 0;
    const int microbatches = i < response.microbatches_size() ? response.microbatches(i) : 0;
    rows.push_back({absl::StrCat(i), absl::StrCat(t.num_nodes()), absl::StrCat(t.num_stages()),
                    absl::StrFormat("%.2f", t.iteration_time_ms()), absl::StrCat(instances),
                    absl::StrCat(microbatches),
                    instances > 0 ? absl::StrFormat("%.2f", t.iteration_time_ms() * microbatches)
                                  : std::string("-")});
  }
  return absl::StrCat(
      absl::StrFormat("instantiate: %d pipelines, iteration %.2f ms = pipelines %.2f + "
                      "all-reduce %.2f (planned in %.1f ms)\n",
                      response.num_pipelines(), response.iteration_time_ms(),
                      response.pipeline_time_ms(), response.allreduce_ms(),
                      response.planning_time_ms()),
      RenderTable(rows));
}

absl::Status RunInstantiate(const CommandLine& cl, const InstantiateCalls& calls) {
  ASSIGN_OR_RETURN(pb::InstantiateRequest request, BuildInstantiateRequest(cl));
  pb::InstantiateResponse response;
  RETURN_IF_ERROR(calls.instantiate(request, &response));
  calls.print(response, FormatInstantiate(request, response));
  return absl::OkStatus();
}

}  // namespace oobleck::client
