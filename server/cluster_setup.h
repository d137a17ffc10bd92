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
#include "core/plan.h"
#include "core/profile_catalog.h"
#include "oobleck/planner/v1/planner.pb.h"
#include "server/inline_profiles.h"

namespace oobleck::server {

struct ClusterSetup {
  ClusterSetup() = default;
  // Moves keep the index's views valid (the nodes' buffer moves along); a copy would not.
  ClusterSetup(ClusterSetup&&) = default;
  ClusterSetup& operator=(ClusterSetup&&) = default;
  ClusterSetup(const ClusterSetup&) = delete;
  ClusterSetup& operator=(const ClusterSetup&) = delete;

  std::shared_ptr<const CostModel> model;
  std::vector<ClusterNode> nodes;
  // The listed nodes' index (views into `nodes`), built while checking the request's ids,
  // for core to reuse (ReplanOptions::node_index); unset when nodes come from counts.
  std::optional<NodeIndex> node_index;
  PipelineSizeLimits limits;
  int fault_tolerance = 0;
};

// Errors name fields with `prefix` ("" for PlanRequest, "request." inside ReplanRequest),
// in the message and in the carried path. The cost model comes from `models` when given.
// Inline profiles (`profiles`) are read through `inline_cache` (refused without one).
absl::StatusOr<ClusterSetup> ToClusterSetup(const ::oobleck::planner::v1::PlanRequest& request,
                                            const ProfileCatalog& catalog,
                                            const std::string& prefix,
                                            CostModelCache* models = nullptr,
                                            InlineProfileCache* inline_cache = nullptr);

}  // namespace oobleck::server

#endif  // OOBLECK_SERVER_CLUSTER_SETUP_H_
