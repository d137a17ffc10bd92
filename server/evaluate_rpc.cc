#include "server/evaluate_rpc.h"

#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/fidelity/evaluate.h"
#include "core/fidelity/sailor_data.h"
#include "core/field_path.h"
#include "core/interrupt.h"
#include "core/json_document.h"
#include "core/status_macros.h"
#include "server/status_conversion.h"

namespace oobleck::server {
namespace {

namespace pb = ::oobleck::planner::v1;

constexpr char kPlanField[] = "sailor_plan_json";

absl::StatusOr<nlohmann::json> ParseField(const std::string& text, const std::string& field,
                                          Interrupt* interrupt) {
  absl::StatusOr<nlohmann::json> doc = ParseJsonDocument(text, JsonLimits{.interrupt = interrupt});
  if (!doc.ok()) return InField(doc.status(), field);
  return doc;
}

// The network's three files, each read under the file name its reader expects; an empty
// field measures nothing.
absl::Status ReadNetwork(const pb::SailorNetwork& network, Interrupt* interrupt,
                         fidelity::SailorData* data) {
  const std::pair<const std::string*, std::pair<const char*, const char*>> files[] = {
      {&network.multizone_bandwidths_json(),
       {"network.multizone_bandwidths_json", "multizone_bandwidths.json"}},
      {&network.multizone_bandwidths_het_json(),
       {"network.multizone_bandwidths_het_json", "multizone_bandwidths_het.json"}},
      {&network.intra_node_bandwidths_json(),
       {"network.intra_node_bandwidths_json", "intra_node_bandwidths.json"}}};
  for (const auto& [text, names] : files) {
    if (text->empty()) continue;
    ASSIGN_OR_RETURN(nlohmann::json doc, ParseField(*text, names.first, interrupt));
    absl::StatusOr<fidelity::SailorData> read =
        fidelity::SailorDataFromJson({{names.second, std::move(doc)}});
    if (!read.ok()) return InField(read.status(), names.first);
    data->inter_node.merge(read->inter_node);
    data->intra_node.merge(read->intra_node);
  }
  return absl::OkStatus();
}

// The one stored model with Sailor's profiles of as many layers as `plan` has, as the local
// evaluation chooses among Sailor's files.
absl::StatusOr<std::string> OnlyModelFor(const fidelity::SailorPlan& plan,
                                         const ProfileCatalog& catalog) {
  const int layers = plan.layers_per_stage.back().back() + 1;
  std::set<std::string> fits;
  for (const auto& profile : catalog.List("")) {
    if (profile->num_layers() == layers && fidelity::HasSailorFields(*profile)) {
      fits.insert(profile->key.model);
    }
  }
  if (fits.size() == 1) return *fits.begin();
  return InvalidField("model",
                      absl::StrCat(" is required: the plan names no model and ", fits.size(),
                                   " stored models have Sailor's profiles "
                                   "of ",
                                   layers, " layers"));
}

absl::StatusOr<fidelity::Evaluation> Evaluate(const pb::EvaluateRequest& request,
                                              const ProfileCatalog& catalog, Interrupt* interrupt,
                                              fidelity::SailorPlan* plan) {
  if (request.plan_case() == pb::EvaluateRequest::PLAN_NOT_SET) {
    return InvalidField(kPlanField, " is required (the plan to evaluate)");
  }
  ASSIGN_OR_RETURN(const nlohmann::json doc,
                   ParseField(request.sailor_plan_json(), kPlanField, interrupt));
  absl::StatusOr<fidelity::SailorPlan> parsed = fidelity::SailorPlanFromJson(doc);
  if (!parsed.ok()) return InField(parsed.status(), kPlanField);
  *plan = *std::move(parsed);
  std::string model = request.model().empty() ? plan->model : request.model();
  if (model.empty()) {
    ASSIGN_OR_RETURN(model, OnlyModelFor(*plan, catalog));
  }
  plan->model = model;  // the stored profiles' name wins over the plan's
  fidelity::SailorData data = fidelity::SailorDataFromProfiles(catalog.List(model), model);
  if (absl::Status inputs = fidelity::CheckPlanInputs(data, *plan, model); !inputs.ok()) {
    return InField(inputs, kPlanField);
  }
  RETURN_IF_ERROR(ReadNetwork(request.network(), interrupt, &data));
  absl::StatusOr<fidelity::Evaluation> evaluation = fidelity::EvaluateSailorPlan(data, *plan);
  if (!evaluation.ok()) return InField(evaluation.status(), kPlanField);
  return evaluation;
}

}  // namespace

void ToProtoEvaluation(const fidelity::Evaluation& e, const fidelity::SailorPlan& plan,
                       pb::EvaluateResponse* response) {
  response->set_model(e.model);
  response->set_microbatches(e.microbatches);
  response->set_slowest_pipeline(e.slowest_pipeline);
  response->set_iteration_time_ms(e.iteration_s * 1e3);
  response->set_pipeline_ms(e.pipeline_s * 1e3);
  response->set_bubbles_ms(e.bubble_s * 1e3);
  response->set_p2p_ms(e.p2p_s * 1e3);
  response->set_sync_ms(e.sync_s * 1e3);
  response->set_update_ms(e.update_s * 1e3);
  response->set_peak_memory_bytes(e.peak_memory_bytes);
  for (size_t s = 0; s < e.memory.size(); ++s) {
    for (size_t r = 0; r < e.memory[s].size(); ++r) {
      const fidelity::GpuMemory& m = e.memory[s][r];
      pb::GpuMemoryUse* gpu = response->add_memory_per_gpu();
      gpu->set_stage(static_cast<int>(s));
      gpu->set_replica(static_cast<int>(r));
      gpu->set_gpu_type(plan.replicas[s][r].gpu_type);
      gpu->set_tp(plan.replicas[s][r].tp);
      gpu->set_training_state_bytes(m.training_state);
      gpu->set_activation_bytes(m.activations);
      gpu->set_reserve_bytes(m.reserve);
      gpu->set_total_bytes(m.total());
    }
  }
}

grpc::Status HandleEvaluate(grpc::ServerContext* context, const pb::EvaluateRequest& request,
                            pb::EvaluateResponse* response, const ProfileCatalog& catalog,
                            const ShutdownFlag* shutdown) {
  const CallWatch watch(context, shutdown);
  Interrupt interrupt(watch.Predicate());
  fidelity::SailorPlan plan;
  absl::StatusOr<fidelity::Evaluation> evaluation = Evaluate(request, catalog, &interrupt, &plan);
  if (watch.Stopped()) return watch.Interrupted("evaluating the plan");
  if (!evaluation.ok()) return ToGrpcStatus(evaluation.status());
  ToProtoEvaluation(*evaluation, plan, response);
  return grpc::Status::OK;
}

}  // namespace oobleck::server
