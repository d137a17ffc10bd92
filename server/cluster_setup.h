// A PlanRequest (alone for Plan, or inside a ReplanRequest) validated and resolved against
// the loaded profiles: the cost model, the concrete nodes, the pipeline-size limits and the
// fault tolerance. The job and node-type fields are checked by server/job_request.h, as for
// PlanTemplates; the rest here. Errors name fields by their path in the request.
#ifndef OOBLECK_SERVER_CLUSTER_SETUP_H_
#define OOBLECK_SERVER_CLUSTER_SETUP_H_

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/cost_model.h"
#include "core/model_cache.h"
#include "core/plan/fault_tolerance.h"
#include "core/plan/limits.h"
#include "core/plan/node_set.h"
#include "core/profile_catalog.h"
#include "oobleck/planner/v1/planner.pb.h"
#include "server/inline_profiles.h"

namespace oobleck::server {

struct ClusterSetup {
  std::shared_ptr<const CostModel> model;
  // The request's nodes (listed, or made from the counts), checked and indexed once.
  NodeSet nodes;
  PipelineSizeLimits limits;
  int fault_tolerance = 0;
  FaultToleranceRule fault_tolerance_rule = FaultToleranceRule::kPipelines;
};

// Errors name fields with `prefix` ("" for PlanRequest, "request." inside ReplanRequest),
// in the message and in the carried path (another field a message mentions, as in
// "request.nodes[2].id \"a\" repeats nodes[0].id", is named within the same PlanRequest).
// The cost model comes from `models` when given.
// Inline profiles (`profiles`) are read through `inline_cache` (refused without one).
absl::StatusOr<ClusterSetup> ToClusterSetup(const ::oobleck::planner::v1::PlanRequest& request,
                                            const ProfileCatalog& catalog,
                                            const std::string& prefix,
                                            CostModelCache* models = nullptr,
                                            InlineProfileCache* inline_cache = nullptr);

}  // namespace oobleck::server

#endif  // OOBLECK_SERVER_CLUSTER_SETUP_H_
