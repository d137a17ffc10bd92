// The Plan and Replan RPCs: request validation (errors name the field), conversion to and
// from core's ClusterPlanner / Replan, deadlines and cancellation. No planning logic.
#ifndef OOBLECK_SERVER_PLAN_RPC_H_
#define OOBLECK_SERVER_PLAN_RPC_H_

#include <grpcpp/server_context.h>
#include <grpcpp/support/status.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/cost_model.h"
#include "core/model_cache.h"
#include "core/plan.h"
#include "core/profile_catalog.h"
#include "oobleck/planner/v1/planner.pb.h"
#include "server/call_watch.h"
#include "server/search_gate.h"

namespace oobleck::server {

// What the two RPCs use from the service; everything must outlive the call.
struct PlanRpcContext {
  const ProfileCatalog* catalog = nullptr;
  const ClusterPlanner* planner = nullptr;
  SearchGate* search_gate = nullptr;  // optional admission control
  CostModelCache* models = nullptr;   // optional: cost models shared across requests
  const ShutdownFlag* shutdown = nullptr;  // optional: set while the server drains
};

grpc::Status HandlePlan(grpc::ServerContext* context,
                        const ::oobleck::planner::v1::PlanRequest& request,
                        ::oobleck::planner::v1::PlanResponse* response, const PlanRpcContext& rpc);

grpc::Status HandleReplan(grpc::ServerContext* context,
                          const ::oobleck::planner::v1::ReplanRequest& request,
                          ::oobleck::planner::v1::ReplanResponse* response,
                          const PlanRpcContext& rpc);

// A PlanRequest resolved against the loaded profiles.
struct ClusterSetup {
  std::shared_ptr<const CostModel> model;
  std::vector<ClusterNode> nodes;
  PipelineSizeLimits limits;
  int fault_tolerance = 0;
  // The request with `nodes` listed and every NodeType.count set.
  ::oobleck::planner::v1::PlanRequest normalized;
};

// Errors name fields with `prefix` ("" for PlanRequest, "request." inside ReplanRequest).
// The cost model comes from `models` when given.
absl::StatusOr<ClusterSetup> ToClusterSetup(const ::oobleck::planner::v1::PlanRequest& request,
                                            const ProfileCatalog& catalog,
                                            const std::string& prefix,
                                            CostModelCache* models = nullptr);

// Plans as messages and back. FromProtoPlan checks names (node types) only; EvaluatePlan
// checks the plan itself.
void ToProtoPlan(const ClusterPlan& plan, const PlanningProblem& problem,
                 ::oobleck::planner::v1::ClusterPlan* out);
absl::StatusOr<ClusterPlan> FromProtoPlan(const ::oobleck::planner::v1::ClusterPlan& plan,
                                          const PlanningProblem& problem, const std::string& field);

}  // namespace oobleck::server

#endif  // OOBLECK_SERVER_PLAN_RPC_H_
