#include "server/planner_service.h"

#include <algorithm>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "core/cost_model.h"
#include "core/field_path.h"
#include "core/interrupt.h"
#include "core/profile.h"
#include "core/status_macros.h"
#include "server/call_watch.h"
#include "server/elapsed.h"
#include "server/evaluate_rpc.h"
#include "server/inline_profiles.h"
#include "server/instantiate_rpc.h"
#include "server/plan_rpc.h"
#include "server/proto_conversion.h"
#include "server/request_limits.h"
#include "server/sailor_profiles.h"
#include "server/status_conversion.h"
#include "server/templates_request.h"

namespace oobleck::server {
namespace {

namespace pb = ::oobleck::planner::v1;

// The profile a LoadProfileRequest describes, before it is stored. Inline files are parsed
// polling `interrupt`.
absl::StatusOr<ModelProfile> ProfileFromRequest(const pb::LoadProfileRequest& request,
                                                const ConfinedRoot* load_root,
                                                Interrupt* interrupt) {
  if (request.model().empty()) return InvalidField("model", " is required");
  if (request.gpu_type().empty()) return InvalidField("gpu_type", " is required");
  if (request.source_case() == pb::LoadProfileRequest::SOURCE_NOT_SET) {
    return InvalidField("source", " is required: set directory, files or layers");
  }
  const int microbatch_size = request.microbatch_size();
  if (microbatch_size < 0) {
    return InvalidField("microbatch_size",
                        absl::StrCat(" must be >= 0 (got ", microbatch_size, ")"));
  }
  // Only a directory can say which micro-batch size it holds.
  if (request.source_case() != pb::LoadProfileRequest::kDirectory && microbatch_size < 1) {
    return InvalidField(
        "microbatch_size",
        absl::StrCat(" must be >= 1 unless the source is a directory (got ", microbatch_size, ")"));
  }
  ASSIGN_OR_RETURN(const AllreduceKey convention,
                   FromProtoAllreduceKey(request.allreduce_key(), "allreduce_key"));
  if (request.source_case() == pb::LoadProfileRequest::kDirectory) {
    if (request.directory().empty()) return InvalidField("directory", " must not be empty");
    if (load_root == nullptr) {
      return absl::PermissionDeniedError(
          "directory: this server reads no server-side directories (it was started "
          "without --load_root); send the profile inline as files or layers (the CLI "
          "does so by default)");
    }
    return LoadOobleckProfileDir(request.directory(), request.model(), request.gpu_type(),
                                 microbatch_size, load_root, convention);
  }
  ModelProfile profile;
  profile.key = ProfileKey{request.model(), request.gpu_type(), microbatch_size};
  profile.allreduce_key = convention;
  ASSIGN_OR_RETURN(profile.layers,
                   LayersFromRequest(request.has_layers() ? &request.layers() : nullptr,
                                     request.has_files() ? &request.files() : nullptr, convention,
                                     "", interrupt));
  return profile;
}

}  // namespace

absl::Status PlannerService::CheckSynced() const {
  return options_.profile_store != nullptr ? options_.profile_store->CheckSynced()
                                           : absl::OkStatus();
}

PlannerService::PlannerService(ProfileCatalog* catalog, TemplateCache* cache, int threads,
                               const ServiceOptions& options)
    : catalog_(catalog),
      options_(options),
      cache_(cache),
      planner_(cache, threads, options.shared_templates),
      cluster_planner_(&planner_, threads),
      inline_profiles_(options.inline_profile_cache_bytes),
      start_time_(std::chrono::steady_clock::now()) {}

grpc::Status PlannerService::LoadProfile(grpc::ServerContext* context,
                                         const pb::LoadProfileRequest* request,
                                         pb::LoadProfileResponse* response) {
  // A profile of 2^18 layers takes about a second to parse: the parse polls the call's
  // deadline, cancellation and the server's shutdown, and nothing is stored after them.
  if (request->source_case() == pb::LoadProfileRequest::kSailor) {
    return LoadSailorProfiles(context, *request, response, catalog_, options_.profile_store,
                              &shutdown_);
  }
  const CallWatch watch(context, &shutdown_);
  Interrupt interrupt(watch.Predicate());
  absl::StatusOr<ModelProfile> profile =
      ProfileFromRequest(*request, options_.load_root, &interrupt);
  if (watch.Stopped()) return watch.Interrupted("loading the profile");
  if (!profile.ok()) return ToGrpcStatus(profile.status());
  if (absl::Status reserve = ApplyRuntimeReserve(*request, &*profile); !reserve.ok()) {
    return ToGrpcStatus(reserve);
  }
  if (absl::Status limits = CheckProfileLimits(*profile); !limits.ok()) {
    return ToGrpcStatus(limits);
  }
  pb::ProfileInfo info = ToProfileInfo(*profile);
  // With a store the profile is on disk before the call is acknowledged.
  absl::StatusOr<bool> replaced =
      options_.profile_store != nullptr
          ? options_.profile_store->Put(*std::move(profile), request->replace())
          : catalog_->Put(*std::move(profile), request->replace());
  if (!replaced.ok()) return ToGrpcStatus(replaced.status());
  *response->mutable_profile() = std::move(info);
  response->set_replaced(*replaced);
  return grpc::Status::OK;
}

grpc::Status PlannerService::ListProfiles(grpc::ServerContext* /*context*/,
                                          const pb::ListProfilesRequest* request,
                                          pb::ListProfilesResponse* response) {
  if (absl::Status synced = CheckSynced(); !synced.ok()) return ToGrpcStatus(synced);
  std::vector<std::shared_ptr<const ModelProfile>> profiles = catalog_->List(request->model());
  std::sort(profiles.begin(), profiles.end(),
            [](const auto& a, const auto& b) { return a->key < b->key; });
  for (const auto& profile : profiles) *response->add_profiles() = ToProfileInfo(*profile);
  return grpc::Status::OK;
}

grpc::Status PlannerService::PlanTemplates(grpc::ServerContext* context,
                                           const pb::PlanTemplatesRequest* request,
                                           pb::PlanTemplatesResponse* response) {
  return PlanTemplatesCall(context, *request, /*progress=*/{}, response);
}

grpc::Status PlannerService::PlanTemplatesStream(
    grpc::ServerContext* context, const pb::PlanTemplatesRequest* request,
    grpc::ServerWriter<pb::PlanTemplatesUpdate>* writer) {
  const auto start = std::chrono::steady_clock::now();
  const auto interval = absl::ToChronoNanoseconds(options_.progress_interval);
  auto next_update = start + interval;  // a quick answer sends no progress at all
  absl::Mutex write_mu;  // core calls this from one thread at a time; writes must not overlap
  // A failed write means the client is gone: the search sees the cancellation itself.
  auto send_progress = [&](std::string_view phase, int64_t done, int64_t total) {
    absl::MutexLock lock(&write_mu);
    const auto now = std::chrono::steady_clock::now();
    if (now < next_update) return;
    next_update = now + interval;
    pb::PlanTemplatesUpdate update;
    pb::SearchProgress* progress = update.mutable_progress();
    progress->set_phase(std::string(phase));
    progress->set_done(done);
    progress->set_total(total);
    progress->set_elapsed_ms(std::chrono::duration<double, std::milli>(now - start).count());
    writer->Write(update);
  };
  pb::PlanTemplatesUpdate answer;
  const grpc::Status status =
      PlanTemplatesCall(context, *request, send_progress, answer.mutable_response());
  if (!status.ok()) return status;
  if (!writer->Write(answer)) {
    return grpc::Status(grpc::StatusCode::CANCELLED,
                        "the call was cancelled before the answer was sent");
  }
  return grpc::Status::OK;
}

grpc::Status PlannerService::PlanTemplatesCall(grpc::ServerContext* context,
                                               const pb::PlanTemplatesRequest& request,
                                               const SearchProgressFn& progress,
                                               pb::PlanTemplatesResponse* response) {
  const auto start = std::chrono::steady_clock::now();
  plan_templates_requests_.fetch_add(1, std::memory_order_relaxed);
  if (absl::Status synced = CheckSynced(); !synced.ok()) return ToGrpcStatus(synced);

  if (absl::Status limits = CheckPlanTemplatesLimits(request); !limits.ok()) {
    return ToGrpcStatus(limits);
  }
  absl::StatusOr<TemplateRequest> converted =
      ToTemplateRequest(request, *catalog_, /*models=*/nullptr, &inline_profiles_);
  if (!converted.ok()) return ToGrpcStatus(converted.status());
  absl::StatusOr<CostModel> model = CostModel::Create(std::move(converted->problem));
  if (!model.ok()) return ToGrpcStatus(model.status());

  // The search polls the call's deadline, cancellation and the server's shutdown.
  const CallWatch watch(context, &shutdown_);
  // A bounded number of searches run at once; cached answers need no slot.
  SearchOptions options = watch.Options(options_.search_gate);
  // Long searches log their advance under the call's request id.
  SearchProgressFn log_progress;
  if (options_.request_log != nullptr) log_progress = options_.request_log->ProgressLogger(context);
  if (log_progress || progress) {
    options.progress = [&log_progress, &progress](std::string_view phase, int64_t done,
                                                  int64_t total) {
      if (log_progress) log_progress(phase, done, total);
      if (progress) progress(phase, done, total);
    };
  }
  absl::StatusOr<std::vector<PlannedMix>> planned =
      planner_.PlanTemplates(*model, converted->mixes, options);
  if (!planned.ok()) {
    return watch.Answer(planned.status(),
                        absl::StrCat("planning ", converted->mixes.size(), " mixes"));
  }

  response->set_cost_model(std::string(CostModelName(model->kind())));
  for (const InlineProfiles::Entry& sent : converted->inline_profiles.entries) {
    *response->add_inline_profiles() = ToProfileInfo(*sent.profile);
  }
  for (const PlannedMix& mix : *planned) {
    ToProtoMixTemplate(mix, model->problem(), response->add_results());
  }
  response->set_planning_time_ms(MillisecondsSince(start));
  return grpc::Status::OK;
}

grpc::Status PlannerService::Plan(grpc::ServerContext* context, const pb::PlanRequest* request,
                                  pb::PlanResponse* response) {
  if (absl::Status synced = CheckSynced(); !synced.ok()) return ToGrpcStatus(synced);
  return HandlePlan(context, *request, response,
                    {catalog_, &cluster_planner_, options_.search_gate, &models_, &shutdown_,
                     /*arena_blocks=*/nullptr, &inline_profiles_});
}

grpc::Status PlannerService::StreamedReplan(
    grpc::ServerContext* context,
    grpc::ServerUnaryStreamer<pb::ReplanRequest, pb::ReplanResponse>* stream) {
  if (absl::Status synced = CheckSynced(); !synced.ok()) return ToGrpcStatus(synced);
  return ServeReplan(context, stream,
                     {catalog_, &cluster_planner_, options_.search_gate, &models_, &shutdown_,
                      &replan_arena_blocks_, &inline_profiles_});
}

grpc::Status PlannerService::Instantiate(grpc::ServerContext* context,
                                         const pb::InstantiateRequest* request,
                                         pb::InstantiateResponse* response) {
  return HandleInstantiate(context, *request, response, options_.search_gate, &shutdown_);
}

grpc::Status PlannerService::Evaluate(grpc::ServerContext* context,
                                      const pb::EvaluateRequest* request,
                                      pb::EvaluateResponse* response) {
  if (absl::Status synced = CheckSynced(); !synced.ok()) return ToGrpcStatus(synced);
  if (request->has_job_plan()) {
    return HandleEvaluateJobPlan(context, *request, response,
                                 {catalog_, &cluster_planner_, options_.search_gate, &models_,
                                  &shutdown_, /*arena_blocks=*/nullptr, &inline_profiles_});
  }
  return HandleEvaluate(context, *request, response, *catalog_, &shutdown_);
}

grpc::Status PlannerService::GetStats(grpc::ServerContext* /*context*/,
                                      const pb::GetStatsRequest* /*request*/,
                                      pb::GetStatsResponse* response) {
  const CacheStats stats = cache_->stats();
  response->set_cache_hits(stats.hits);
  response->set_cache_misses(stats.misses);
  response->set_cache_entries(stats.entries);
  response->set_cache_bytes(stats.bytes);
  response->set_cache_evictions(stats.evictions);
  response->set_cache_capacity_bytes(stats.capacity_bytes);
  response->set_profiles_loaded(catalog_->size());
  response->set_plan_templates_requests(plan_templates_requests_.load(std::memory_order_relaxed));
  response->set_uptime_s(MillisecondsSince(start_time_) / 1000.0);
  if (options_.shared_templates != nullptr) {
    const SharedCacheStats shared = options_.shared_templates->stats();
    response->set_shared_cache_hits(shared.hits);
    response->set_shared_cache_misses(shared.misses);
    response->set_shared_cache_published(shared.published);
    response->set_shared_cache_skipped(shared.skipped);
    response->set_shared_cache_errors(shared.errors);
  }
  return grpc::Status::OK;
}

}  // namespace oobleck::server
