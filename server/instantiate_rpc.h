// The Instantiate RPC: Oobleck's instantiation, or its batch split over given instance
// counts (core/oobleck_instantiation.h), under one CallWatch and a search-gate slot. Converts
// the request and the answer; no planning logic.
#ifndef OOBLECK_SERVER_INSTANTIATE_RPC_H_
#define OOBLECK_SERVER_INSTANTIATE_RPC_H_

#include <grpcpp/server_context.h>
#include <grpcpp/support/status.h>

#include "oobleck/planner/v1/planner.pb.h"
#include "server/call_watch.h"
#include "server/search_gate.h"

namespace oobleck::server {

// `search_gate` and `shutdown` may be null; both must outlive the call.
grpc::Status HandleInstantiate(grpc::ServerContext* context,
                               const ::oobleck::planner::v1::InstantiateRequest& request,
                               ::oobleck::planner::v1::InstantiateResponse* response,
                               SearchGate* search_gate, const ShutdownFlag* shutdown);

}  // namespace oobleck::server

#endif  // OOBLECK_SERVER_INSTANTIATE_RPC_H_
