#include "server/request_limits.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

namespace oobleck::server {

absl::Status CheckProfileLimits(const ModelProfile& profile) {
  for (const auto& [field, name] :
       {std::pair{"model", &profile.key.model}, std::pair{"gpu_type", &profile.key.gpu_type}}) {
    if (name->size() > kMaxProfileNameBytes) {
      return absl::InvalidArgumentError(absl::StrCat(field, " has ", name->size(),
                                                     " bytes, more than the limit of ",
                                                     kMaxProfileNameBytes, " bytes"));
    }
  }
  if (profile.num_layers() > kMaxLayersPerProfile) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "profile ", profile.key.ToString(), " has ", profile.num_layers(),
        " layers, more than the limit of ", kMaxLayersPerProfile, " layers per profile"));
  }
  return absl::OkStatus();
}

absl::Status CheckPlanTemplatesLimits(const ::oobleck::planner::v1::PlanTemplatesRequest& request) {
  const int types = request.cluster().node_types_size();
  if (types > kMaxNodeTypesPerRequest) {
    return absl::ResourceExhaustedError(
        absl::StrCat("cluster.node_types has ", types, " entries, more than the limit of ",
                     kMaxNodeTypesPerRequest, " node types per request"));
  }
  int64_t nodes = 0;
  for (const auto& type : request.cluster().node_types()) {
    nodes += type.count() > 0 ? type.count() : 0;  // negative counts are INVALID_ARGUMENT later
  }
  if (nodes > kMaxNodesPerRequest) {
    return absl::ResourceExhaustedError(absl::StrCat("cluster.node_types counts add up to ", nodes,
                                                     " nodes, more than the limit of ",
                                                     kMaxNodesPerRequest, " nodes per request"));
  }
  return absl::OkStatus();
}

absl::Status CheckPlanLimits(const ::oobleck::planner::v1::PlanRequest& request,
                             const std::string& prefix) {
  const int types = request.cluster().node_types_size();
  if (types > kMaxPlanNodeTypes) {
    return absl::ResourceExhaustedError(
        absl::StrCat(prefix, "cluster.node_types has ", types, " entries, more than the limit of ",
                     kMaxPlanNodeTypes, " node types per Plan or Replan"));
  }
  if (request.nodes_size() > kMaxPlanNodes) {
    return absl::ResourceExhaustedError(absl::StrCat(prefix, "nodes has ", request.nodes_size(),
                                                     " entries, more than the limit of ",
                                                     kMaxPlanNodes, " nodes per Plan or Replan"));
  }
  int64_t counted = 0;
  for (const auto& type : request.cluster().node_types()) counted += std::max(0, type.count());
  if (request.nodes().empty() && counted > kMaxPlanNodes) {
    return absl::ResourceExhaustedError(absl::StrCat(prefix, "cluster.node_types counts add up to ",
                                                     counted, " nodes, more than the limit of ",
                                                     kMaxPlanNodes, " nodes per Plan or Replan"));
  }
  return absl::OkStatus();
}

}  // namespace oobleck::server
