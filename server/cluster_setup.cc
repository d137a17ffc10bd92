#include "server/cluster_setup.h"

#include <string_view>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "core/field_path.h"
#include "core/status_macros.h"
#include "server/job_request.h"
#include "server/proto_conversion.h"
#include "server/request_limits.h"

namespace oobleck::server {
namespace {

namespace pb = ::oobleck::planner::v1;

// The nodes listed in the request, or count nodes of each type named "<type>-<k>". Field
// paths without the prefix (ToClusterSetup adds it), but for the one inside a message.
absl::StatusOr<std::vector<ClusterNode>> ToNodes(const pb::PlanRequest& request,
                                                 const std::string& prefix) {
  const pb::Cluster& cluster = request.cluster();
  const int T = cluster.node_types_size();
  std::vector<ClusterNode> nodes;
  if (request.nodes().empty()) {
    for (int i = 0; i < T; ++i) {
      const int count = cluster.node_types(i).count();
      if (count < 1) {
        return InvalidField(absl::StrCat(NodeTypeField(i), ".count"),
                            absl::StrCat(" must be >= 1 when nodes is empty (got ", count, ")"));
      }
    }
    for (int i = 0; i < T; ++i) {
      for (int k = 0; k < cluster.node_types(i).count(); ++k) {
        nodes.push_back({absl::StrCat(cluster.node_types(i).name(), "-", k), i});
      }
    }
    return nodes;
  }
  // Views of the request's strings (it outlives these maps); a field path is built only
  // for an error: a fleet lists thousands of nodes.
  absl::flat_hash_map<std::string_view, int> type_index;
  for (int i = 0; i < T; ++i) type_index.emplace(cluster.node_types(i).name(), i);
  std::vector<int> counts(T, 0);
  absl::flat_hash_map<std::string_view, int> seen;
  seen.reserve(request.nodes_size());
  nodes.reserve(request.nodes_size());
  for (int j = 0; j < request.nodes_size(); ++j) {
    const pb::Node& node = request.nodes(j);
    if (node.id().empty()) return InvalidField(absl::StrCat("nodes[", j, "].id"), " is required");
    auto type = type_index.find(node.node_type());
    if (type == type_index.end()) {
      return InvalidField(absl::StrCat("nodes[", j, "].node_type"),
                          absl::StrCat(" \"", node.node_type(),
                                       "\" is not the name of any cluster.node_types entry"));
    }
    auto [it, inserted] = seen.emplace(node.id(), j);
    if (!inserted) {
      return InvalidField(
          absl::StrCat("nodes[", j, "].id"),
          absl::StrCat(" \"", node.id(), "\" repeats ", prefix, "nodes[", it->second, "].id"));
    }
    nodes.push_back({node.id(), type->second});
    ++counts[type->second];
  }
  for (int i = 0; i < T; ++i) {
    const int count = cluster.node_types(i).count();
    if (count != 0 && count != counts[i]) {
      return InvalidField(
          absl::StrCat(NodeTypeField(i), ".count"),
          absl::StrCat(" is ", count, " but nodes lists ", counts[i], " node(s) of type \"",
                       cluster.node_types(i).name(), "\"; set it to ", counts[i], " or to 0"));
    }
  }
  return nodes;
}

// Paths as in a PlanRequest; ToClusterSetup prefixes them.
absl::StatusOr<ClusterSetup> Resolve(const pb::PlanRequest& request, const ProfileCatalog& catalog,
                                     const std::string& prefix, CostModelCache* models) {
  if (!request.has_cluster()) return InvalidField("cluster", " is required");
  RETURN_IF_ERROR(CheckPlanLimits(request, ""));
  ClusterSetup setup;
  ASSIGN_OR_RETURN(setup.nodes, ToNodes(request, prefix));
  // Core's checks, before the profiles are resolved; against the cluster, core checks the
  // sizes again when it plans.
  setup.limits.min_nodes = request.min_nodes_per_pipeline();
  setup.limits.max_nodes = request.max_nodes_per_pipeline();
  RETURN_IF_ERROR(ValidateLimits(setup.limits));
  RETURN_IF_ERROR(ValidateFaultTolerance(request.fault_tolerance()));
  setup.fault_tolerance = request.fault_tolerance();

  // The job and hardware checks of PlanTemplates, on the same field names. Types whose
  // nodes all failed stay in the cluster.
  const JobFields job = JobFields::Of(request);
  ASSIGN_OR_RETURN(const JobSettings settings, ValidateJob(job));
  ASSIGN_OR_RETURN(PlanningProblem problem,
                   ValidateCluster(job, settings, NodeCounts::kAnyNonNegative));
  ASSIGN_OR_RETURN(problem, ResolveProblem(job, std::move(problem), catalog, models));
  if (models != nullptr) {
    ASSIGN_OR_RETURN(setup.model, models->Create(std::move(problem)));
  } else {
    ASSIGN_OR_RETURN(CostModel model, CostModel::Create(std::move(problem)));
    setup.model = std::make_shared<const CostModel>(std::move(model));
  }
  return setup;
}

}  // namespace

absl::StatusOr<ClusterSetup> ToClusterSetup(const pb::PlanRequest& request,
                                            const ProfileCatalog& catalog,
                                            const std::string& prefix, CostModelCache* models) {
  absl::StatusOr<ClusterSetup> setup = Resolve(request, catalog, prefix, models);
  if (!setup.ok()) return UnderField(setup.status(), prefix);
  return setup;
}

}  // namespace oobleck::server
