// The Evaluate RPC: a plan in Sailor's format predicted from the stored profiles of its
// model and the cluster's network sent in the request. The server converts; the model is
// core/fidelity's EvaluateSailorPlan (docs/COST_MODEL.md, "Predicting real runs"). No path
// the request names is read. A `job_plan` (a Plan or Replan answer) is checked as Replan
// checks its current plan and broken down by core/plan/plan_breakdown.h.
#ifndef OOBLECK_SERVER_EVALUATE_RPC_H_
#define OOBLECK_SERVER_EVALUATE_RPC_H_

#include <grpcpp/server_context.h>
#include <grpcpp/support/status.h>

#include "absl/status/statusor.h"
#include "core/fidelity/evaluate.h"
#include "core/plan/plan_breakdown.h"
#include "core/profile_catalog.h"
#include "oobleck/planner/v1/planner.pb.h"
#include "server/call_watch.h"
#include "server/plan_rpc.h"

namespace oobleck::server {

// `shutdown` may be null; it and `catalog` must outlive the call.
grpc::Status HandleEvaluate(grpc::ServerContext* context,
                            const ::oobleck::planner::v1::EvaluateRequest& request,
                            ::oobleck::planner::v1::EvaluateResponse* response,
                            const ProfileCatalog& catalog, const ShutdownFlag* shutdown);

// The answer for `evaluation` of `plan`.
void ToProtoEvaluation(const fidelity::Evaluation& evaluation, const fidelity::SailorPlan& plan,
                       ::oobleck::planner::v1::EvaluateResponse* response);

// Evaluate of a request whose plan is a `job_plan`: the same request checks as Replan's
// (ToClusterSetup under "job_plan.request.", the plan under "job_plan.plan."). Uses rpc's
// catalog, models, inline profiles and shutdown.
grpc::Status HandleEvaluateJobPlan(grpc::ServerContext* context,
                                   const ::oobleck::planner::v1::EvaluateRequest& request,
                                   ::oobleck::planner::v1::EvaluateResponse* response,
                                   const PlanRpcContext& rpc);

// The answer for `breakdown` of a job_plan made under `problem` and `objective`.
void ToProtoBreakdown(const PlanBreakdown& breakdown, const PlanningProblem& problem,
                      PlanObjective objective, ::oobleck::planner::v1::EvaluateResponse* response);

}  // namespace oobleck::server

#endif  // OOBLECK_SERVER_EVALUATE_RPC_H_
