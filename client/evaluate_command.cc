#include "client/evaluate_command.h"

#include <filesystem>
#include <iostream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
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

absl::Status RunServerEvaluate(const CommandLine& cl, const EvaluateCall& call) {
  ASSIGN_OR_RETURN(const auto request, EvaluateRequestFromFlags(cl.options));
  ::oobleck::planner::v1::EvaluateResponse response;
  RETURN_IF_ERROR(call(request, &response));
  const auto [e, plan] = EvaluationFromResponse(response);
  std::cout << (cl.options.json ? EvaluationJson(e, plan) : EvaluationTable(e, plan));
  return absl::OkStatus();
}

}  // namespace oobleck::client
