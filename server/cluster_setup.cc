#include "server/cluster_setup.h"

#include <string_view>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/field_path.h"
#include "core/shown_value.h"
#include "core/status_macros.h"
#include "server/job_request.h"
#include "server/proto_conversion.h"
#include "server/request_limits.h"

namespace oobleck::server {
namespace {

namespace pb = ::oobleck::planner::v1;

// The index of the node type named `name` in the cluster (the first of that name), or -1:
// a scan of a few names (at most kMaxPlanNodeTypes) is cheaper than hashing 4096 of them.
int FindNodeType(const pb::Cluster& cluster, std::string_view name) {
  for (int i = 0; i < cluster.node_types_size(); ++i) {
    if (cluster.node_types(i).name() == name) return i;
  }
  return -1;
}

// Node type i's count disagrees with the listed nodes (`listed` of its name). A name that
// repeats an earlier type's is the real fault (its nodes all went to the first type), said
// as core says it (ValidateNodeTypes). Paths without the prefix, but for the one inside
// the message.
absl::Status CountMismatch(const pb::Cluster& cluster, int i, int listed,
                           const std::string& prefix) {
  const std::string& name = cluster.node_types(i).name();
  if (const int first = FindNodeType(cluster, name); first != i) {
    return InvalidField(
        absl::StrCat(NodeTypeField(i), ".name"),
        absl::StrCat(" ", Quote(name), " repeats ", prefix, NodeTypeField(first), ".name"));
  }
  return InvalidField(
      absl::StrCat(NodeTypeField(i), ".count"),
      absl::StrCat(" is ", cluster.node_types(i).count(), " but nodes lists ", listed,
                   " node(s) of type ", Quote(name), "; set it to ",
                   listed == 0 ? "0 or list its nodes" : absl::StrCat(listed, " or to 0")));
}

// setup->nodes: the nodes listed in the request, indexed in setup->node_index (the one
// check of their ids: core reuses the index), or count nodes of each type named
// "<type>-<k>". Field paths without the prefix (ToClusterSetup adds it), but for the one
// inside a message.
absl::Status ToNodes(const pb::PlanRequest& request, const std::string& prefix,
                     ClusterSetup* setup) {
  const pb::Cluster& cluster = request.cluster();
  const int T = cluster.node_types_size();
  std::vector<ClusterNode>& nodes = setup->nodes;
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
    return absl::OkStatus();
  }
  // A field path is built only for an error: a fleet lists thousands of nodes. The index's
  // views are into `nodes`, whose buffer is reserved once and never moves.
  std::vector<int> counts(T, 0);
  NodeIndex& seen = setup->node_index.emplace();
  seen.reserve(request.nodes_size());
  nodes.reserve(request.nodes_size());
  for (int j = 0; j < request.nodes_size(); ++j) {
    const pb::Node& node = request.nodes(j);
    if (node.id().empty()) return InvalidField(absl::StrCat("nodes[", j, "].id"), " is required");
    const int type = FindNodeType(cluster, node.node_type());
    if (type < 0) {
      return InvalidField(absl::StrCat("nodes[", j, "].node_type"),
                          absl::StrCat(" ", Quote(node.node_type()),
                                       " is not the name of any cluster.node_types entry"));
    }
    nodes.push_back({node.id(), type});
    auto [it, inserted] = seen.emplace(nodes.back().id, j);
    if (!inserted) {
      return InvalidField(
          absl::StrCat("nodes[", j, "].id"),
          absl::StrCat(" ", Quote(node.id()), " repeats ", prefix, "nodes[", it->second, "].id"));
    }
    ++counts[type];
  }
  for (int i = 0; i < T; ++i) {
    const int count = cluster.node_types(i).count();
    if (count != 0 && count != counts[i]) return CountMismatch(cluster, i, counts[i], prefix);
  }
  return absl::OkStatus();
}

// Paths as in a PlanRequest; ToClusterSetup prefixes them.
absl::StatusOr<ClusterSetup> Resolve(const pb::PlanRequest& request, const ProfileCatalog& catalog,
                                     const std::string& prefix, CostModelCache* models,
                                     InlineProfileCache* inline_cache) {
  if (!request.has_cluster()) return InvalidField("cluster", " is required");
  RETURN_IF_ERROR(CheckPlanLimits(request, ""));
  ClusterSetup setup;
  RETURN_IF_ERROR(ToNodes(request, prefix, &setup));
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
  InlineProfiles inline_profiles;
  if (!request.profiles().empty()) {
    if (inline_cache == nullptr) {
      return InvalidField("profiles", " are not accepted here (no inline profile cache)");
    }
    ASSIGN_OR_RETURN(inline_profiles, ResolveInlineProfiles(request.profiles(), request.model(),
                                                            request.microbatch_size(),
                                                            request.cluster(), inline_cache));
  }
  ASSIGN_OR_RETURN(problem,
                   ResolveProblem(job, std::move(problem), catalog, models, &inline_profiles));
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
                                            const std::string& prefix, CostModelCache* models,
                                            InlineProfileCache* inline_cache) {
  absl::StatusOr<ClusterSetup> setup = Resolve(request, catalog, prefix, models, inline_cache);
  if (!setup.ok()) return UnderField(setup.status(), prefix);
  return setup;
}

}  // namespace oobleck::server
