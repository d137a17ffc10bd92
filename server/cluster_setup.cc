#include "server/cluster_setup.h"

#include <string_view>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/cluster.h"
#include "core/field_path.h"
#include "core/shown_value.h"
#include "core/status_macros.h"
#include "server/job_request.h"
#include "server/proto_conversion.h"
#include "server/request_limits.h"

namespace oobleck::server {
namespace {

namespace pb = ::oobleck::planner::v1;

// setup->nodes: the nodes listed in the request or, with none listed, count nodes of each
// type named "<type>-<k>"; checked and indexed once, by core (NodeSet). `types` are the
// request's node types, checked (names unique). Field paths without the prefix
// (ToClusterSetup adds it).
absl::Status ToNodes(const pb::PlanRequest& request, const std::vector<NodeType>& types,
                     ClusterSetup* setup) {
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
    ASSIGN_OR_RETURN(setup->nodes, NodeSet::Create(std::move(nodes), T));
    return absl::OkStatus();
  }
  // A field path is built only for an error: a fleet lists thousands of nodes.
  std::vector<int> counts(T, 0);
  nodes.reserve(request.nodes_size());
  for (int j = 0; j < request.nodes_size(); ++j) {
    const pb::Node& node = request.nodes(j);
    const int type = FindNodeType(types, node.node_type());
    if (type < 0) {
      return InvalidField(absl::StrCat("nodes[", j, "].node_type"),
                          absl::StrCat(" ", Quote(node.node_type()),
                                       " is not the name of any cluster.node_types entry"));
    }
    nodes.push_back({node.id(), type});
    ++counts[type];
  }
  ASSIGN_OR_RETURN(setup->nodes, NodeSet::Create(std::move(nodes), T));
  for (int i = 0; i < T; ++i) {
    const int count = cluster.node_types(i).count();
    if (count != 0 && count != counts[i]) {
      return InvalidField(absl::StrCat(NodeTypeField(i), ".count"),
                          absl::StrCat(" is ", count, " but nodes lists ", counts[i],
                                       " node(s) of type ", Quote(types[i].name), "; set it to ",
                                       counts[i] == 0 ? "0 or list its nodes"
                                                      : absl::StrCat(counts[i], " or to 0")));
    }
  }
  return absl::OkStatus();
}

// PlanRequest.fault_tolerance_rule (an open enum: any int may arrive).
absl::StatusOr<FaultToleranceRule> FromProtoRule(int rule) {
  switch (rule) {
    case pb::FAULT_TOLERANCE_PIPELINES:
      return FaultToleranceRule::kPipelines;
    case pb::FAULT_TOLERANCE_OOBLECK:
      return FaultToleranceRule::kOobleck;
    default:
      return InvalidField("fault_tolerance_rule",
                          absl::StrCat(" must be FAULT_TOLERANCE_PIPELINES (0) or "
                                       "FAULT_TOLERANCE_OOBLECK (1) (got ",
                                       rule, ")"));
  }
}

// Paths as in a PlanRequest; ToClusterSetup prefixes them.
absl::StatusOr<ClusterSetup> Resolve(const pb::PlanRequest& request, const ProfileCatalog& catalog,
                                     CostModelCache* models, InlineProfileCache* inline_cache) {
  if (!request.has_cluster()) return InvalidField("cluster", " is required");
  RETURN_IF_ERROR(CheckPlanLimits(request, ""));
  // The job and hardware checks of PlanTemplates, on the same field names. Types whose
  // nodes all failed stay in the cluster.
  const JobFields job = JobFields::Of(request);
  ASSIGN_OR_RETURN(const JobSettings settings, ValidateJob(job));
  ASSIGN_OR_RETURN(PlanningProblem problem,
                   ValidateCluster(job, settings, NodeCounts::kAnyNonNegative));
  ClusterSetup setup;
  RETURN_IF_ERROR(ToNodes(request, problem.node_types, &setup));
  // Core's checks that do not need the cluster's size, before the profiles are resolved and
  // under the prefix (inside a ReplanRequest, Replan's own errors are not prefixed). Core
  // runs the same functions again as guards for its own callers; they pass there.
  setup.limits.min_nodes = request.min_nodes_per_pipeline();
  setup.limits.max_nodes = request.max_nodes_per_pipeline();
  RETURN_IF_ERROR(ValidateLimits(setup.limits));
  RETURN_IF_ERROR(ValidateFaultTolerance(request.fault_tolerance()));
  setup.fault_tolerance = request.fault_tolerance();
  ASSIGN_OR_RETURN(setup.fault_tolerance_rule, FromProtoRule(request.fault_tolerance_rule()));

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
  absl::StatusOr<ClusterSetup> setup = Resolve(request, catalog, models, inline_cache);
  if (!setup.ok()) return UnderField(setup.status(), prefix);
  return setup;
}

}  // namespace oobleck::server
