// Size limits on what one request may ask for, so that a single call cannot take the
// server's memory or cores from everyone else. Each violation is RESOURCE_EXHAUSTED with a
// message naming the limit, its value and what the request had; docs/ERRORS.md lists them.
// (kMaxMixesPerRequest lives with the mix enumeration in templates_request.h; the message size
// limit with the server in planner_server.h.)
#ifndef OOBLECK_SERVER_REQUEST_LIMITS_H_
#define OOBLECK_SERVER_REQUEST_LIMITS_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "core/plan/limits.h"
#include "core/profile.h"
#include "oobleck/planner/v1/planner.pb.h"

namespace oobleck::server {

// kMaxLayersPerProfile (core/profile.h) bounds every profile, inline or read from files;
// JSON documents are counted against it before they are parsed.
// Bytes of a LoadProfile's model and of its gpu_type: names, not payloads (a profile is
// kept, listed and stored under them). INVALID_ARGUMENT naming the field.
inline constexpr size_t kMaxProfileNameBytes = 128;
// Node types in one cluster (each adds a dimension to the mix space).
inline constexpr int kMaxNodeTypesPerRequest = 256;
// Nodes in one cluster (sum of node_types[].count). A template never has more nodes than
// the model has layers, so this is far above anything plannable.
inline constexpr int64_t kMaxNodesPerRequest = 1 << 20;

// Plan and Replan: the fleet sizes whose plan search is benchmarked to answer in under a
// second once the templates are cached (bench/README.md#plan-at-fleet-scale).
inline constexpr int kMaxPlanNodeTypes = 8;
inline constexpr int kMaxPlanNodes = kMaxClusterNodes;  // core/plan/limits.h

absl::Status CheckProfileLimits(const ModelProfile& profile);
// The cluster of a PlanRequest (also inside a ReplanRequest; `prefix` names where).
absl::Status CheckPlanLimits(const ::oobleck::planner::v1::PlanRequest& request,
                             const std::string& prefix);
absl::Status CheckPlanTemplatesLimits(const ::oobleck::planner::v1::PlanTemplatesRequest& request);

}  // namespace oobleck::server

#endif  // OOBLECK_SERVER_REQUEST_LIMITS_H_
