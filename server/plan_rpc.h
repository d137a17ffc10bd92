// The Plan and Replan RPCs: each validates its request (server/cluster_setup.h), calls
// core's ClusterPlanner / Replan under one CallWatch and converts the answer
// (server/proto_conversion.h). No planning logic.
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
#include "core/plan/cluster_planner.h"
#include "core/profile_catalog.h"
#include "oobleck/planner/v1/planner.grpc.pb.h"  // ServerUnaryStreamer of these messages
#include "oobleck/planner/v1/planner.pb.h"
#include "server/arena_block_pool.h"
#include "server/call_watch.h"
#include "server/inline_profiles.h"
#include "server/search_gate.h"

namespace oobleck::server {

// What the two RPCs use from the service; everything must outlive the call.
struct PlanRpcContext {
  const ProfileCatalog* catalog = nullptr;
  const ClusterPlanner* planner = nullptr;
  SearchGate* search_gate = nullptr;              // optional admission control
  CostModelCache* models = nullptr;               // optional: cost models shared across requests
  const ShutdownFlag* shutdown = nullptr;         // optional: set while the server drains
  ArenaBlockPool* arena_blocks = nullptr;         // optional: Replan's arena memory across calls
  InlineProfileCache* inline_profiles = nullptr;  // optional: without it `profiles` is refused
};

grpc::Status HandlePlan(grpc::ServerContext* context,
                        const ::oobleck::planner::v1::PlanRequest& request,
                        ::oobleck::planner::v1::PlanResponse* response, const PlanRpcContext& rpc);

// Replan as a streamed unary method: reads the request and writes the response itself, both
// on one protobuf arena (whose first block comes from rpc.arena_blocks when set). The response's
// planning_time_ms covers the call from before the request is read (parsed) until the response is
// complete, just before it is serialized and sent.
grpc::Status ServeReplan(grpc::ServerContext* context,
                         grpc::ServerUnaryStreamer<::oobleck::planner::v1::ReplanRequest,
                                                   ::oobleck::planner::v1::ReplanResponse>* stream,
                         const PlanRpcContext& rpc);

}  // namespace oobleck::server

#endif  // OOBLECK_SERVER_PLAN_RPC_H_
