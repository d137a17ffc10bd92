#include "server/evaluate_rpc.h"

#include <map>
#include <memory>
#include <optional>
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
#include "core/plan/objective.h"
#include "core/status_macros.h"
#include "server/cluster_setup.h"
#include "server/proto_conversion.h"
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
    return InvalidField(kPlanField, " is required (the plan to evaluate), or job_plan (ours)");
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

namespace {

constexpr char kJobPlanField[] = "job_plan";

// What a job_plan request must hold besides what ToClusterSetup and EvaluatePlan check: no
// Sailor fields, both messages, and templates with the M they were made for. A template
// without `microbatches` comes from a server older than Stage.p2p_out_ms (as `render`
// refuses it), whose figures this cost model may not reproduce.
absl::Status CheckJobPlanFields(const pb::EvaluateRequest& request) {
  if (!request.model().empty()) {
    return InvalidField("model",
                        " must be empty with job_plan (its model is "
                        "job_plan.request.model)");
  }
  if (request.has_network()) {
    return InvalidField("network",
                        " is for sailor_plan_json; a job_plan's network is "
                        "job_plan.request.cluster");
  }
  const pb::JobPlan& job = request.job_plan();
  if (!job.has_request()) {
    return InvalidField("job_plan.request",
                        " is required: the plan's job and cluster (PlanResponse.request or "
                        "ReplanResponse.request)");
  }
  if (!job.has_plan()) {
    return InvalidField("job_plan.plan",
                        " is required: the plan (PlanResponse.plan or ReplanResponse.plan)");
  }
  for (int i = 0; i < job.plan().pipelines_size(); ++i) {
    const pb::PipelineTemplate& tmpl = job.plan().pipelines(i).template_();
    if (!job.plan().pipelines(i).has_template_()) continue;  // FromProtoPlan names it
    const std::string field =
        absl::StrCat(kJobPlanField, ".plan.pipelines[", i, "].template.microbatches");
    if (!tmpl.has_microbatches()) {
      return FieldError(absl::StatusCode::kFailedPrecondition, field,
                        " is not set: the plan comes from a server older than this one (its "
                        "templates have no microbatches and stages[].p2p_out_ms), whose figures "
                        "this one may not reproduce; plan again");
    }
    if (tmpl.microbatches() != job.request().microbatches()) {
      return InvalidField(
          field, absl::StrCat(" = ", tmpl.microbatches(),
                              " but job_plan.request.microbatches = ", job.request().microbatches(),
                              ": the plan was made for another request"));
    }
  }
  return absl::OkStatus();
}

absl::Status EvaluateJobPlan(const pb::EvaluateRequest& request, const PlanRpcContext& rpc,
                             pb::EvaluateResponse* response) {
  RETURN_IF_ERROR(CheckJobPlanFields(request));
  const pb::JobPlan& job = request.job_plan();
  ASSIGN_OR_RETURN(ClusterSetup setup,
                   ToClusterSetup(job.request(), *rpc.catalog, "job_plan.request.", rpc.models,
                                  rpc.inline_profiles));
  absl::StatusOr<PlanObjective> objective = ParsePlanObjective(job.request().objective());
  if (!objective.ok()) return UnderField(objective.status(), "job_plan.request.");
  const PlanningProblem& problem = setup.model->problem();
  ASSIGN_OR_RETURN(ClusterPlan plan, FromProtoPlan(job.plan(), problem, "job_plan.plan"));
  absl::StatusOr<PlanBreakdown> breakdown =
      BreakDownPlan(*setup.model, setup.nodes, std::move(plan), *objective);
  if (!breakdown.ok()) return UnderField(breakdown.status(), "job_plan.");
  ToProtoBreakdown(*breakdown, problem, *objective, response);
  return absl::OkStatus();
}

}  // namespace

void ToProtoBreakdown(const PlanBreakdown& b, const PlanningProblem& problem,
                      PlanObjective objective, pb::EvaluateResponse* response) {
  response->set_model(problem.profiles[0]->key.model);
  response->set_cost_model(std::string(CostModelName(problem.cost_model)));
  response->set_objective(std::string(PlanObjectiveName(objective)));
  response->set_microbatches(b.plan.pipelines[b.slowest_pipeline].microbatches);
  response->set_slowest_pipeline(b.slowest_pipeline);
  response->set_iteration_time_ms(b.iteration_time_ms);
  response->set_pipeline_ms(b.pipeline_ms);
  response->set_sync_ms(b.sync_ms);
  // A part the model does not have is named, not sent as a zero.
  const auto part = [response](const std::optional<double>& ms, const char* field,
                               void (pb::EvaluateResponse::*set)(double)) {
    if (ms.has_value()) {
      (response->*set)(*ms);
    } else {
      response->add_unmodelled_fields(field);
    }
  };
  part(b.bubbles_ms, "bubbles_ms", &pb::EvaluateResponse::set_bubbles_ms);
  part(b.p2p_ms, "p2p_ms", &pb::EvaluateResponse::set_p2p_ms);
  part(b.update_ms, "update_ms", &pb::EvaluateResponse::set_update_ms);
  response->add_unmodelled_fields("memory_per_gpu.reserve_bytes");
  response->set_peak_memory_bytes(b.peak_memory_bytes);
  for (const StageGpuMemory& m : b.memory) {
    pb::GpuMemoryUse* gpu = response->add_memory_per_gpu();
    gpu->set_stage(m.stage);
    gpu->set_replica(m.pipeline);
    gpu->set_gpu_type(problem.node_types[m.node_type].gpu_type);
    gpu->set_tp(problem.StageTensorParallel(m.node_type, m.gpus));
    gpu->set_training_state_bytes(m.training_state_bytes);
    gpu->set_activation_bytes(m.activation_bytes);
    gpu->set_total_bytes(m.total_bytes());
    gpu->set_node_id(m.node_id);
    gpu->set_gpus(m.gpus);
  }
}

grpc::Status HandleEvaluateJobPlan(grpc::ServerContext* context, const pb::EvaluateRequest& request,
                                   pb::EvaluateResponse* response, const PlanRpcContext& rpc) {
  const CallWatch watch(context, rpc.shutdown);
  const absl::Status status = EvaluateJobPlan(request, rpc, response);
  if (watch.Stopped()) return watch.Interrupted("evaluating the plan");
  return ToGrpcStatus(status);
}

}  // namespace oobleck::server
