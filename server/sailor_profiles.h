// LoadProfile with `sailor`: Sailor's profile files, sent inline, become one stored profile
// per (GPU type, micro-batch size, tp) (core/fidelity/sailor_data.h converts; this parses
// the request and stores). The server reads no path the request names.
#ifndef OOBLECK_SERVER_SAILOR_PROFILES_H_
#define OOBLECK_SERVER_SAILOR_PROFILES_H_

#include <grpcpp/server_context.h>
#include <grpcpp/support/status.h>

#include "core/profile_catalog.h"
#include "oobleck/planner/v1/planner.pb.h"
#include "server/call_watch.h"
#include "server/profile_backend.h"

namespace oobleck::server {

// `store` may be null (profiles then live in `catalog` only); `shutdown` may be null.
grpc::Status LoadSailorProfiles(grpc::ServerContext* context,
                                const ::oobleck::planner::v1::LoadProfileRequest& request,
                                ::oobleck::planner::v1::LoadProfileResponse* response,
                                ProfileCatalog* catalog, ProfileBackend* store,
                                const ShutdownFlag* shutdown);

}  // namespace oobleck::server

#endif  // OOBLECK_SERVER_SAILOR_PROFILES_H_
