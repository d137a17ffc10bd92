// The oobleck.planner.v1.Planner service: validates requests, converts them, calls core
// and converts the answers back. Holds no planning logic of its own.
#ifndef OOBLECK_SERVER_PLANNER_SERVICE_H_
#define OOBLECK_SERVER_PLANNER_SERVICE_H_

#include <atomic>
#include <chrono>
#include <cstdint>

#include "core/model_cache.h"
#include "core/plan/cluster_planner.h"
#include "core/profile_catalog.h"
#include "core/template_planner.h"
#include "oobleck/planner/v1/planner.grpc.pb.h"
#include "server/arena_block_pool.h"
#include "server/call_watch.h"
#include "server/inline_profiles.h"
#include "server/service_options.h"

namespace oobleck::server {

// As SearchOptions::progress (core/search.h).
using SearchProgressFn = decltype(SearchOptions::progress);

// Replan is registered as a "streamed unary" method: still one request and one response, but
// the handler reads and writes the messages itself, so that they live on one protobuf arena
// (server/plan_rpc.h, ServeReplan). Every other RPC is plain synchronous unary.
class PlannerService final : public ::oobleck::planner::v1::Planner::WithStreamedUnaryMethod_Replan<
                                 ::oobleck::planner::v1::Planner::Service> {
 public:
  // `catalog` and `cache` are shared with the rest of the process and must outlive the
  // service; `threads` <= 0 plans on all cores. `options` (profile store, search gate)
  // must outlive the service too.
  PlannerService(ProfileCatalog* catalog, TemplateCache* cache, int threads,
                 const ServiceOptions& options = {});

  grpc::Status LoadProfile(grpc::ServerContext* context,
                           const ::oobleck::planner::v1::LoadProfileRequest* request,
                           ::oobleck::planner::v1::LoadProfileResponse* response) override;
  grpc::Status ListProfiles(grpc::ServerContext* context,
                            const ::oobleck::planner::v1::ListProfilesRequest* request,
                            ::oobleck::planner::v1::ListProfilesResponse* response) override;
  grpc::Status PlanTemplates(grpc::ServerContext* context,
                             const ::oobleck::planner::v1::PlanTemplatesRequest* request,
                             ::oobleck::planner::v1::PlanTemplatesResponse* response) override;
  // PlanTemplates with progress updates while the search runs (the same call underneath).
  grpc::Status PlanTemplatesStream(
      grpc::ServerContext* context, const ::oobleck::planner::v1::PlanTemplatesRequest* request,
      grpc::ServerWriter<::oobleck::planner::v1::PlanTemplatesUpdate>* writer) override;
  // Plan and Replan live in server/plan_rpc.cc.
  grpc::Status Plan(grpc::ServerContext* context,
                    const ::oobleck::planner::v1::PlanRequest* request,
                    ::oobleck::planner::v1::PlanResponse* response) override;
  grpc::Status StreamedReplan(
      grpc::ServerContext* context,
      grpc::ServerUnaryStreamer<::oobleck::planner::v1::ReplanRequest,
                                ::oobleck::planner::v1::ReplanResponse>* stream) override;
  // Oobleck's instantiation and batch split (server/instantiate_rpc.cc).
  grpc::Status Instantiate(grpc::ServerContext* context,
                           const ::oobleck::planner::v1::InstantiateRequest* request,
                           ::oobleck::planner::v1::InstantiateResponse* response) override;
  grpc::Status GetStats(grpc::ServerContext* context,
                        const ::oobleck::planner::v1::GetStatsRequest* request,
                        ::oobleck::planner::v1::GetStatsResponse* response) override;
  grpc::Status Evaluate(grpc::ServerContext* context,
                        const ::oobleck::planner::v1::EvaluateRequest* request,
                        ::oobleck::planner::v1::EvaluateResponse* response) override;

  // Makes every running and waiting search stop at its next poll (UNAVAILABLE to its
  // client), so that a drain (SIGTERM) ends within its grace period. Call before
  // grpc::Server::Shutdown; there is no way back.
  void BeginShutdown() { shutdown_.Set(); }

  // The profiles planning requests sent inline (for metrics).
  const InlineProfileCache& inline_profile_cache() const { return inline_profiles_; }

 private:
  // UNAVAILABLE while the profile store has not read what it holds (a replica started
  // during an etcd outage), so the answer is retried instead of a wrong NOT_FOUND.
  absl::Status CheckSynced() const;
  // Both PlanTemplates RPCs: validation, limits, search gate, cache, deadline and
  // cancellation. `progress` (may be empty) sees the search advance.
  grpc::Status PlanTemplatesCall(grpc::ServerContext* context,
                                 const ::oobleck::planner::v1::PlanTemplatesRequest& request,
                                 const SearchProgressFn& progress,
                                 ::oobleck::planner::v1::PlanTemplatesResponse* response);

  ProfileCatalog* catalog_;
  const ServiceOptions options_;
  TemplateCache* cache_;
  TemplatePlanner planner_;
  ClusterPlanner cluster_planner_;      // uses planner_ (and so the shared cache)
  CostModelCache models_;               // Plan and Replan's cost models, across requests
  InlineProfileCache inline_profiles_;  // profiles sent with planning requests
  // Replan's arena memory, kept resident across calls: a fleet's call uses about 4.5 MiB;
  // up to 4 calls at once keep theirs (at most 16 MiB each).
  ArenaBlockPool replan_arena_blocks_{4, 16 << 20};
  std::atomic<int64_t> plan_templates_requests_{0};
  ShutdownFlag shutdown_;
  const std::chrono::steady_clock::time_point start_time_;
};

}  // namespace oobleck::server

#endif  // OOBLECK_SERVER_PLANNER_SERVICE_H_
