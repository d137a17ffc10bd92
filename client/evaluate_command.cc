#include "client/evaluate_command.h"

#include <algorithm>
#include <filesystem>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "client/plan_commands.h"
#include "client/requests.h"
#include "core/fidelity/sailor_data.h"
#include "core/file_reader.h"
#include "core/status_macros.h"
#include "nlohmann/json.hpp"

namespace oobleck::client {

std::string EvaluationJson(const fidelity::Evaluation& e, const fidelity::SailorPlan& plan) {
  nlohmann::ordered_json out;
  out["model"] = e.model;
  out["microbatches"] = e.microbatches;
  out["slowest_pipeline"] = e.slowest_pipeline;
  out["iteration_time_ms"] = e.iteration_s * 1e3;
  out["breakdown_ms"] = {{"pipeline", e.pipeline_s * 1e3},
                         {"bubbles", e.bubble_s * 1e3},
                         {"p2p", e.p2p_s * 1e3},
                         {"sync", e.sync_s * 1e3},
                         {"update", e.update_s * 1e3}};
  out["peak_memory_bytes"] = static_cast<int64_t>(e.peak_memory_bytes);
  nlohmann::ordered_json gpus = nlohmann::ordered_json::array();
  for (size_t s = 0; s < e.memory.size(); ++s) {
    for (size_t r = 0; r < e.memory[s].size(); ++r) {
      const fidelity::GpuMemory& m = e.memory[s][r];
      gpus.push_back({{"stage", s},
                      {"replica", r},
                      {"gpu_type", plan.replicas[s][r].gpu_type},
                      {"tp", plan.replicas[s][r].tp},
                      {"training_state_bytes", static_cast<int64_t>(m.training_state)},
                      {"activation_bytes", static_cast<int64_t>(m.activations)},
                      {"reserve_bytes", static_cast<int64_t>(m.reserve)},
                      {"total_bytes", static_cast<int64_t>(m.total())}});
    }
  }
  out["memory_per_gpu"] = std::move(gpus);
  return out.dump(2) + "\n";
}

std::string EvaluationTable(const fidelity::Evaluation& e, const fidelity::SailorPlan& plan) {
  constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
  std::string out = absl::StrFormat(
      "model %s, %d micro-batches per pipeline, slowest pipeline %d\n"
      "iteration        %10.2f ms\n"
      "  pipeline       %10.2f ms  (of which bubbles %.2f ms, p2p %.2f ms)\n"
      "  gradient sync  %10.2f ms\n"
      "  optimizer step %10.2f ms\n"
      "peak memory      %10.2f GiB\n\n"
      "stage replica gpu_type     tp  state_GiB  activ_GiB  reserve_GiB  total_GiB\n",
      e.model, e.microbatches, e.slowest_pipeline, e.iteration_s * 1e3, e.pipeline_s * 1e3,
      e.bubble_s * 1e3, e.p2p_s * 1e3, e.sync_s * 1e3, e.update_s * 1e3,
      e.peak_memory_bytes / kGiB);
  for (size_t s = 0; s < e.memory.size(); ++s) {
    for (size_t r = 0; r < e.memory[s].size(); ++r) {
      const fidelity::GpuMemory& m = e.memory[s][r];
      absl::StrAppendFormat(&out, "%5d %7d %-12s %2d %10.2f %10.2f %12.2f %10.2f\n", s, r,
                            plan.replicas[s][r].gpu_type, plan.replicas[s][r].tp,
                            m.training_state / kGiB, m.activations / kGiB, m.reserve / kGiB,
                            m.total() / kGiB);
    }
  }
  return out;
}

absl::Status RunEvaluate(const CommandLine& cl) {
  const CliOptions& o = cl.options;
  ASSIGN_OR_RETURN(const fidelity::SailorData data, fidelity::LoadSailorData(o.sailor_data));
  ASSIGN_OR_RETURN(const fidelity::SailorPlan plan, fidelity::LoadSailorPlan(o.sailor_plan));
  ASSIGN_OR_RETURN(const fidelity::Evaluation e,
                   fidelity::EvaluateSailorPlan(data, plan, o.job.model));
  std::cout << (o.json ? EvaluationJson(e, plan) : EvaluationTable(e, plan));
  return absl::OkStatus();
}

absl::StatusOr<::oobleck::planner::v1::EvaluateRequest> EvaluateRequestFromFlags(
    const CliOptions& o) {
  ::oobleck::planner::v1::EvaluateRequest request;
  request.set_model(o.job.model);
  ASSIGN_OR_RETURN(*request.mutable_sailor_plan_json(),
                   ReadRegularFile(o.sailor_plan, o.sailor_plan));
  auto* network = request.mutable_network();
  const std::pair<const char*, std::string*> files[] = {
      {"multizone_bandwidths.json", network->mutable_multizone_bandwidths_json()},
      {"multizone_bandwidths_het.json", network->mutable_multizone_bandwidths_het_json()},
      {"intra_node_bandwidths.json", network->mutable_intra_node_bandwidths_json()}};
  bool any = false;
  for (const auto& [name, text] : files) {
    const std::filesystem::path path = std::filesystem::path(o.network) / name;
    std::error_code ec;
    if (!std::filesystem::exists(path, ec)) continue;
    ASSIGN_OR_RETURN(*text, ReadRegularFile(path, path.string()));
    any = true;
  }
  if (!any) {
    return absl::NotFoundError(
        absl::StrCat(o.network,
                     " holds none of multizone_bandwidths.json, multizone_bandwidths_het.json, "
                     "intra_node_bandwidths.json"));
  }
  return request;
}

std::pair<fidelity::Evaluation, fidelity::SailorPlan> EvaluationFromResponse(
    const ::oobleck::planner::v1::EvaluateResponse& r) {
  fidelity::Evaluation e;
  fidelity::SailorPlan plan;
  e.model = r.model();
  e.microbatches = r.microbatches();
  e.slowest_pipeline = r.slowest_pipeline();
  e.iteration_s = r.iteration_time_ms() / 1e3;
  e.pipeline_s = r.pipeline_ms() / 1e3;
  e.bubble_s = r.bubbles_ms() / 1e3;
  e.p2p_s = r.p2p_ms() / 1e3;
  e.sync_s = r.sync_ms() / 1e3;
  e.update_s = r.update_ms() / 1e3;
  e.peak_memory_bytes = r.peak_memory_bytes();
  for (const auto& gpu : r.memory_per_gpu()) {
    const size_t s = static_cast<size_t>(gpu.stage());
    if (e.memory.size() <= s) e.memory.resize(s + 1);
    if (plan.replicas.size() <= s) plan.replicas.resize(s + 1);
    e.memory[s].push_back(
        {gpu.training_state_bytes(), gpu.activation_bytes(), gpu.reserve_bytes()});
    plan.replicas[s].push_back({gpu.gpu_type(), 0, "", gpu.tp()});
  }
  return {std::move(e), std::move(plan)};
}

absl::StatusOr<::oobleck::planner::v1::EvaluateRequest> JobPlanEvaluateRequest(
    const std::string& answer_json, const std::string& source) {
  ASSIGN_OR_RETURN(::oobleck::planner::v1::ReplanRequest read,
                   BuildReplanRequest(answer_json, source, {}, {}, std::nullopt));
  ::oobleck::planner::v1::EvaluateRequest request;
  request.mutable_job_plan()->mutable_request()->Swap(read.mutable_request());
  request.mutable_job_plan()->mutable_plan()->Swap(read.mutable_plan());
  return request;
}

namespace {

// The breakdown's parts the model has, by their short name ("pipeline", "bubbles", ...).
std::vector<std::pair<std::string, double>> ModelledParts(
    const ::oobleck::planner::v1::EvaluateResponse& r) {
  const std::pair<const char*, double> all[] = {{"pipeline_ms", r.pipeline_ms()},
                                                {"bubbles_ms", r.bubbles_ms()},
                                                {"p2p_ms", r.p2p_ms()},
                                                {"sync_ms", r.sync_ms()},
                                                {"update_ms", r.update_ms()}};
  std::vector<std::pair<std::string, double>> parts;
  for (const auto& [field, ms] : all) {
    if (std::find(r.unmodelled_fields().begin(), r.unmodelled_fields().end(), field) !=
        r.unmodelled_fields().end()) {
      continue;
    }
    std::string name = field;
    parts.emplace_back(name.substr(0, name.size() - 3), ms);
  }
  return parts;
}

}  // namespace

std::string JobPlanEvaluationJson(const ::oobleck::planner::v1::EvaluateResponse& r) {
  nlohmann::ordered_json out;
  out["model"] = r.model();
  out["cost_model"] = r.cost_model();
  out["objective"] = r.objective();
  out["microbatches"] = r.microbatches();
  out["slowest_pipeline"] = r.slowest_pipeline();
  out["iteration_time_ms"] = r.iteration_time_ms();
  nlohmann::ordered_json breakdown = nlohmann::ordered_json::object();
  for (const auto& [name, ms] : ModelledParts(r)) breakdown[name] = ms;
  out["breakdown_ms"] = std::move(breakdown);
  out["unmodelled"] =
      std::vector<std::string>(r.unmodelled_fields().begin(), r.unmodelled_fields().end());
  out["peak_memory_bytes"] = static_cast<int64_t>(r.peak_memory_bytes());
  nlohmann::ordered_json gpus = nlohmann::ordered_json::array();
  for (const auto& gpu : r.memory_per_gpu()) {
    gpus.push_back({{"pipeline", gpu.replica()},
                    {"stage", gpu.stage()},
                    {"node_id", gpu.node_id()},
                    {"gpus", gpu.gpus()},
                    {"gpu_type", gpu.gpu_type()},
                    {"training_state_bytes", static_cast<int64_t>(gpu.training_state_bytes())},
                    {"activation_bytes", static_cast<int64_t>(gpu.activation_bytes())},
                    {"total_bytes", static_cast<int64_t>(gpu.total_bytes())}});
  }
  out["memory_per_gpu"] = std::move(gpus);
  return out.dump(2) + "\n";
}

std::string JobPlanEvaluationTable(const ::oobleck::planner::v1::EvaluateResponse& r) {
  constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
  std::string out = absl::StrFormat(
      "model %s, cost model %s, objective %s; slowest pipeline %d (%d micro-batches)\n"
      "iteration        %10.2f ms\n",
      r.model(), r.cost_model(), r.objective(), r.slowest_pipeline(), r.microbatches(),
      r.iteration_time_ms());
  for (const auto& [name, ms] : ModelledParts(r)) {
    const bool part = name == "bubbles" || name == "p2p";  // parts of pipeline
    absl::StrAppendFormat(&out, "%-16s %10.2f ms%s\n", absl::StrCat(part ? "    " : "  ", name), ms,
                          part ? "  (part of pipeline)" : "");
  }
  absl::StrAppendFormat(&out,
                        "  not modelled: %s\n"
                        "peak memory      %10.2f GiB\n\n"
                        "pipeline stage node_id          gpus gpu_type     state_GiB  activ_GiB  "
                        "total_GiB\n",
                        absl::StrJoin(r.unmodelled_fields(), ", "), r.peak_memory_bytes() / kGiB);
  for (const auto& gpu : r.memory_per_gpu()) {
    absl::StrAppendFormat(&out, "%8d %5d %-16s %4d %-12s %9.2f %10.2f %10.2f\n", gpu.replica(),
                          gpu.stage(), gpu.node_id(), gpu.gpus(), gpu.gpu_type(),
                          gpu.training_state_bytes() / kGiB, gpu.activation_bytes() / kGiB,
                          gpu.total_bytes() / kGiB);
  }
  return out;
}

absl::Status RunServerEvaluate(const CommandLine& cl, const EvaluateCall& call) {
  if (!cl.options.plan.empty()) {
    ASSIGN_OR_RETURN(const std::string text, ReadTextFile(cl.options.plan));
    ASSIGN_OR_RETURN(const auto request, JobPlanEvaluateRequest(text, cl.options.plan));
    ::oobleck::planner::v1::EvaluateResponse response;
    RETURN_IF_ERROR(call(request, &response));
    std::cout << (cl.options.json ? JobPlanEvaluationJson(response)
                                  : JobPlanEvaluationTable(response));
    return absl::OkStatus();
  }
  ASSIGN_OR_RETURN(const auto request, EvaluateRequestFromFlags(cl.options));
  ::oobleck::planner::v1::EvaluateResponse response;
  RETURN_IF_ERROR(call(request, &response));
  const auto [e, plan] = EvaluationFromResponse(response);
  std::cout << (cl.options.json ? EvaluationJson(e, plan) : EvaluationTable(e, plan));
  return absl::OkStatus();
}

}  // namespace oobleck::client
