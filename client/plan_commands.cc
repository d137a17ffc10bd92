#include "client/plan_commands.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "client/output.h"
#include "client/render_command.h"
#include "client/svg/plan_picture.h"
#include "core/status_macros.h"
#include "google/protobuf/util/json_util.h"

namespace oobleck::client {
namespace {

absl::Status Usage(const std::string& message) { return absl::InvalidArgumentError(message); }

std::string Ms(double ms) { return absl::StrFormat("%.2f", ms); }

absl::StatusOr<std::vector<int>> ParseGlobalBatches(const std::vector<std::string>& values) {
  std::vector<int> out;
  for (const std::string& v : values) {
    int n = 0;
    if (!absl::SimpleAtoi(v, &n) || n < 1) {
      return Usage(absl::StrCat("--global-batch values must be integers >= 1 (got \"", v, "\")"));
    }
    out.push_back(n);
  }
  return out;
}

// The pipelines' table; mix labels mark derived node types with "*" (footnoted), as the
// templates table does.
std::string FormatClusterPlan(const pb::ClusterPlan& plan, const pb::PlanRequest& request) {
  const std::map<std::string, std::string> gpu_type_of = GpuTypesOf(request.cluster());
  std::set<std::string> derived;
  std::vector<std::vector<std::string>> rows = {
      {"PIPELINE", "MIX", "NODES", "MICROBATCHES", "TIME_MS", "STAGES"}};
  for (int i = 0; i < plan.pipelines_size(); ++i) {
    const pb::PlannedPipeline& p = plan.pipelines(i);
    std::vector<std::string> stages;
    for (const pb::Stage& s : p.template_().stages()) stages.push_back(FormatStage(s));
    derived.insert(p.template_().derived_gpu_types().begin(),
                   p.template_().derived_gpu_types().end());
    rows.push_back(
        {absl::StrCat(i),
         MarkDerivedTypes(p.template_().mix_label(), DerivedNodeTypes(p.template_(), gpu_type_of)),
         absl::StrJoin(p.node_ids(), ","), absl::StrCat(p.microbatches()), Ms(p.time_ms()),
         absl::StrJoin(stages, " ")});
  }
  std::string out = RenderTable(rows);
  if (!plan.idle_nodes().empty()) {
    std::vector<std::vector<std::string>> idle = {{"IDLE_NODE", "TYPE", "REASON"}};
    for (const pb::IdleNode& n : plan.idle_nodes())
      idle.push_back({n.node_id(), n.node_type(), n.reason()});
    absl::StrAppend(&out, "\n", RenderTable(idle));
  }
  if (!derived.empty()) {
    absl::StrAppend(&out, "* profile derived by relative speed, not measured: ",
                    absl::StrJoin(derived, ", "), "\n");
  }
  return out;
}

}  // namespace

absl::Status CheckPlanUsage(const CommandLine& cl) {
  const CliOptions& o = cl.options;
  if (cl.command == "plan") {
    if (o.cluster.empty()) return Usage("plan needs --cluster FILE");
    if (o.global_batch.empty()) return Usage("plan needs --global-batch N [N ...]");
    if (absl::StatusOr<std::vector<int>> b = ParseGlobalBatches(o.global_batch); !b.ok()) {
      return b.status();
    }
    if (o.min_nodes_per_pipeline < 0) return Usage("--min-nodes-per-pipeline must be >= 0");
    if (o.fault_tolerance < 0) return Usage("--fault-tolerance must be >= 0");
    if (o.objective != "time" && o.objective != "cost") {
      return Usage(absl::StrCat("--objective must be time or cost (got \"", o.objective, "\")"));
    }
    if (!(std::isfinite(o.budget_per_hour) && o.budget_per_hour >= 0)) {
      return Usage("--budget-per-hour must be a finite number >= 0 (0: no budget)");
    }
    if (o.max_nodes_per_pipeline < 0) return Usage("--max-nodes-per-pipeline must be >= 0");
    if (absl::StatusOr<pb::MissingAllreduce> m = ParseMissingAllreduce(o.missing_allreduce);
        !m.ok()) {
      return m.status();
    }
    if (o.job.microbatches < 0) return Usage("--microbatches must be >= 0");
    if (cl.IsSet("measured_relative_speed") && !(o.measured_relative_speed > 0)) {
      return Usage("--measured-relative-speed must be > 0");
    }
  }
  if (cl.command == "replan") {
    if (o.plan.empty()) return Usage("replan needs --plan PLAN.json (the --json output of plan)");
    if (o.fail.empty() && o.join.empty()) {
      return Usage("replan needs --fail ID ... and/or --join ID:TYPE ...");
    }
    for (const std::string& j : o.join) {
      const size_t colon = j.rfind(':');
      if (colon == std::string::npos || colon == 0 || colon + 1 == j.size()) {
        return Usage(absl::StrCat("--join values must be ID:TYPE (got \"", j, "\")"));
      }
    }
    if (!(o.tolerance >= 0 && o.tolerance <= 1)) return Usage("--tolerance must be in [0, 1]");
    if (o.fault_tolerance < 0) return Usage("--fault-tolerance must be >= 0");
    if (!(std::isfinite(o.horizon_iterations) && o.horizon_iterations >= 0)) {
      return Usage("--horizon-iterations must be a finite number >= 0");
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<pb::PlanRequest> BuildPlanRequest(const ClusterFile& file,
                                                 const ClusterOverrides& overrides,
                                                 const std::vector<int>& global_batches,
                                                 int min_nodes_per_pipeline,
                                                 int max_nodes_per_pipeline,
                                                 std::vector<ProfileUpload>* uploads) {
  ASSIGN_OR_RETURN(ClusterRequest built, BuildClusterRequest(file, overrides));
  pb::PlanRequest request = PlanRequestOf(built.request);
  // Node types are one per (gpu, gpus_per_node), as ClusterFile::NodeTypes() names them.
  const std::vector<NodeType> types = file.NodeTypes();
  for (size_t g = 0; g < file.node_groups.size(); ++g) {
    const ClusterFileNodeGroup& group = file.node_groups[g];
    auto type = std::find_if(types.begin(), types.end(), [&](const NodeType& nt) {
      return nt.gpu_type == group.gpu && nt.gpus_per_node == group.gpus_per_node;
    });
    if (type == types.end()) {
      return absl::InternalError(absl::StrCat("node_groups[", g, "] has no node type"));
    }
    for (const std::string& id : group.node_ids) {
      pb::Node* node = request.add_nodes();
      node->set_id(id);
      node->set_node_type(type->name);
    }
  }
  for (int b : global_batches) request.add_global_batch(b);
  request.set_min_nodes_per_pipeline(min_nodes_per_pipeline);
  request.set_max_nodes_per_pipeline(max_nodes_per_pipeline);
  if (uploads != nullptr) *uploads = built.uploads;
  return request;
}

absl::StatusOr<pb::ReplanRequest> BuildReplanRequest(const std::string& plan_json,
                                                     const std::string& source,
                                                     const std::vector<std::string>& fail,
                                                     const std::vector<std::string>& join,
                                                     std::optional<double> tolerance) {
  pb::ReplanRequest request;
  google::protobuf::util::JsonParseOptions options;
  options.ignore_unknown_fields = true;  // a PlanResponse/ReplanResponse has more fields
  const auto parsed = google::protobuf::util::JsonStringToMessage(plan_json, &request, options);
  if (!parsed.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, " is not the JSON of a plan: ", parsed.ToString()));
  }
  if (!request.has_request() || !request.has_plan()) {
    return absl::InvalidArgumentError(
        absl::StrCat(source,
                     " has no \"request\" and \"plan\": pass the --json output of "
                     "oobleck-plan plan or replan"));
  }
  request.clear_failed_node_ids();
  request.clear_joined_nodes();
  request.clear_tolerance();
  for (const std::string& id : fail) request.add_failed_node_ids(id);
  for (const std::string& j : join) {
    const size_t colon = j.rfind(':');
    if (colon == std::string::npos || colon == 0 || colon + 1 == j.size()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--join values must be ID:TYPE (got \"", j, "\")"));
    }
    pb::Node* node = request.add_joined_nodes();
    node->set_id(j.substr(0, colon));
    node->set_node_type(j.substr(colon + 1));
  }
  if (tolerance.has_value()) request.set_tolerance(*tolerance);
  return request;
}

std::string FormatPlan(const pb::PlanResponse& response) {
  const pb::ClusterPlan& plan = response.plan();
  const pb::PlanRequest& request = response.request();
  std::string out = absl::StrFormat(
      "%s on %d nodes, cost model %s, global batch %d micro-batches: iteration %s ms\n",
      request.model(), request.nodes_size(), response.cost_model(), plan.global_batch(),
      Ms(plan.iteration_time_ms()));
  absl::StrAppend(&out, "  = slowest pipeline ", Ms(plan.pipeline_time_ms()), " ms + all-reduce ",
                  Ms(plan.allreduce_ms()), " ms over ", plan.pipelines_size(),
                  " pipeline(s), tolerating ", plan.fault_tolerance(), " node failure(s)");
  if (plan.price_per_hour() > 0) {
    absl::StrAppend(
        &out, "; nodes ", absl::StrFormat("%.4g", plan.price_per_hour()), " per hour, ",
        absl::StrFormat("%.4g", plan.price_per_hour() * plan.iteration_time_ms() / 3.6e6),
        " per iteration");
  }
  if (!response.sweep().empty()) {
    const pb::BatchSizePlan& first = response.sweep(0);
    if (first.data_parallel_iteration_time_ms() > 0) {
      absl::StrAppend(&out, "; data parallel ", Ms(first.data_parallel_iteration_time_ms()),
                      " ms (speed-up ", absl::StrFormat("%.2fx", first.speedup()), ")");
    } else {
      absl::StrAppend(&out, "; data parallel n/a: ", first.data_parallel_unavailable_reason());
    }
  }
  absl::StrAppendFormat(&out, "\n  planned in %.1f ms from %d pipeline templates (%d cached)",
                        response.planning_time_ms(), response.mixes_planned(),
                        response.mixes_from_cache());
  // Proven optimal is the norm and goes unsaid; a bounded answer says how far it may be.
  if (response.optimality_gap() > 0) {
    absl::StrAppendFormat(&out, "; within %.3f%% of the optimum (proven bound)",
                          100 * response.optimality_gap());
  }
  absl::StrAppend(&out, "\n\n");
  absl::StrAppend(&out, FormatClusterPlan(plan, request));
  if (response.sweep_size() > 1) {
    std::vector<std::vector<std::string>> rows = {
        {"GLOBAL_BATCH", "ITERATION_MS", "PIPELINES", "DATA_PARALLEL_MS", "SPEEDUP"}};
    for (const pb::BatchSizePlan& size : response.sweep()) {
      if (!size.feasible()) {
        rows.push_back(
            {absl::StrCat(size.global_batch()), "infeasible", "-", "-", size.infeasible_reason()});
        continue;
      }
      rows.push_back({absl::StrCat(size.global_batch()), Ms(size.plan().iteration_time_ms()),
                      absl::StrCat(size.plan().pipelines_size()),
                      size.data_parallel_iteration_time_ms() > 0
                          ? Ms(size.data_parallel_iteration_time_ms())
                          : "n/a",
                      size.speedup() > 0 ? absl::StrFormat("%.2fx", size.speedup()) : "n/a"});
    }
    absl::StrAppend(&out, "\n", RenderTable(rows));
  }
  return out;
}

std::string FormatReplan(const pb::ReplanResponse& response) {
  const pb::ClusterPlan& plan = response.plan();
  std::string out = absl::StrFormat(
      "replan (%s): iteration %s ms, was %s ms; fastest found %s ms; Oobleck's fallback rule %s\n",
      response.strategy(), Ms(plan.iteration_time_ms()), Ms(response.old_iteration_time_ms()),
      Ms(response.fastest_iteration_time_ms()),
      response.oobleck_fallback_iteration_time_ms() > 0
          ? absl::StrCat(Ms(response.oobleck_fallback_iteration_time_ms()), " ms")
          : absl::StrCat("finds no plan (", response.oobleck_fallback_failure(), ")"));
  absl::StrAppendFormat(
      &out, "  %d node(s), %d pipeline(s), %d kept; %d copies (%s); planned in %.2f ms\n",
      response.request().nodes_size(), plan.pipelines_size(), response.pipelines_kept(),
      response.copies_size(), FormatBytes(response.copy_bytes()), response.planning_time_ms());
  absl::StrAppendFormat(&out, "  downtime %.2f s (copies %.2f s); tolerates %d node failure(s)\n",
                        response.downtime_s(), response.transfer_s(), plan.fault_tolerance());
  if (!response.degraded_reason().empty()) {
    absl::StrAppend(&out, "  degraded: ", response.degraded_reason(), "\n");
  }
  if (!response.ignored_failed_node_ids().empty() || !response.ignored_joined_node_ids().empty()) {
    absl::StrAppend(&out, "  already applied (ignored): failed [",
                    absl::StrJoin(response.ignored_failed_node_ids(), ", "), "], joined [",
                    absl::StrJoin(response.ignored_joined_node_ids(), ", "), "]\n");
  }
  if (!response.copies().empty()) {
    std::vector<std::vector<std::string>> rows = {{"COPY_TO", "FROM", "LAYERS", "BYTES"}};
    for (const pb::LayerCopy& c : response.copies()) {
      rows.push_back({c.dest_node_id(), c.source_node_id(),
                      absl::StrFormat("[%d,%d)", c.layer_begin(), c.layer_end()),
                      FormatBytes(c.param_bytes())});
    }
    absl::StrAppend(&out, "\n", RenderTable(rows));
  }
  if (response.alternatives_size() > 1) {
    std::vector<std::vector<std::string>> rows = {
        {"ALTERNATIVE", "ITERATION_MS", "DOWNTIME_S", "COPY", "KEPT", "TOLERATES"}};
    for (const pb::ReplanAlternative& a : response.alternatives()) {
      rows.push_back({a.strategy(), Ms(a.iteration_time_ms()),
                      absl::StrFormat("%.2f", a.downtime_s()), FormatBytes(a.copy_bytes()),
                      absl::StrCat(a.pipelines_kept()), absl::StrCat(a.fault_tolerance())});
    }
    absl::StrAppend(&out, "\n", RenderTable(rows));
  }
  absl::StrAppend(&out, "\n", FormatClusterPlan(plan, response.request()));
  return out;
}

ClusterOverrides ClusterOverridesFromFlags(const CommandLine& cl) {
  const CliOptions& o = cl.options;
  ClusterOverrides overrides;
  overrides.cost_model = o.job.cost_model;
  if (cl.IsSet("microbatches")) overrides.microbatches = o.job.microbatches;
  if (cl.IsSet("optimizer_state_multiplier")) {
    overrides.optimizer_state_multiplier = o.job.optimizer_state_multiplier;
  }
  if (cl.IsSet("missing_allreduce")) {
    overrides.missing_allreduce = *ParseMissingAllreduce(o.missing_allreduce);
  }
  overrides.measured_relative_speed = o.measured_relative_speed;
  return overrides;
}

absl::Status RunPlan(const CommandLine& cl, const PlanCalls& calls) {
  const CliOptions& o = cl.options;
  ASSIGN_OR_RETURN(ClusterFile file, LoadClusterFile(o.cluster));
  ClusterOverrides overrides = ClusterOverridesFromFlags(cl);
  std::vector<ProfileUpload> uploads;
  absl::StatusOr<pb::PlanRequest> request =
      BuildPlanRequest(file, overrides, *ParseGlobalBatches(o.global_batch),
                       o.min_nodes_per_pipeline, o.max_nodes_per_pipeline, &uploads);
  if (!request.ok()) {
    return absl::Status(request.status().code(),
                        absl::StrCat(o.cluster, ": ", request.status().message()));
  }
  for (const ProfileUpload& upload : uploads) {
    RETURN_IF_ERROR(calls.ensure_profile(upload));
  }
  request->set_fault_tolerance(o.fault_tolerance);
  if (o.objective != "time") request->set_objective(o.objective);
  request->set_budget_per_hour(o.budget_per_hour);
  request->set_stage_gpus(*ParseStageGpus(o.stage_gpus));
  pb::PlanResponse response;
  RETURN_IF_ERROR(calls.plan(*request, &response));
  calls.print(response, FormatPlan(response));
  if (o.svg.empty()) return absl::OkStatus();
  return WriteSvgFile(o.svg, svg::DrawPlanSvg(response));
}

absl::Status RunReplan(const CommandLine& cl, const PlanCalls& calls) {
  const CliOptions& o = cl.options;
  ASSIGN_OR_RETURN(std::string text, ReadTextFile(o.plan));
  ASSIGN_OR_RETURN(pb::ReplanRequest request,
                   BuildReplanRequest(
                       text, o.plan, o.fail, o.join,
                       cl.IsSet("tolerance") ? std::optional<double>(o.tolerance) : std::nullopt));
  if (cl.IsSet("fault_tolerance"))
    request.mutable_request()->set_fault_tolerance(o.fault_tolerance);
  if (cl.IsSet("horizon_iterations")) request.set_horizon_iterations(o.horizon_iterations);
  if (cl.IsSet("stage_gpus")) {
    request.mutable_request()->set_stage_gpus(*ParseStageGpus(o.stage_gpus));
  }
  pb::ReplanResponse response;
  RETURN_IF_ERROR(calls.replan(request, &response));
  calls.print(response, FormatReplan(response));
  if (o.svg.empty()) return absl::OkStatus();
  return WriteSvgFile(o.svg, svg::DrawReplanSvg(request.request(), request.plan(), response));
}

}  // namespace oobleck::client
