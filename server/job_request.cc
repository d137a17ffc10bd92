#include "server/job_request.h"

#include <cmath>
#include <map>
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/field_path.h"
#include "core/profile.h"
#include "core/status_macros.h"

namespace oobleck::server {
namespace {

namespace pb = ::oobleck::planner::v1;

// More node types than this is not a cluster but a malformed request; the bound also keeps
// the mix counting of PlanTemplates shallow.
constexpr int kMaxNodeTypes = 256;

template <typename Value>
absl::Status Invalid(absl::string_view field, absl::string_view requirement, Value got) {
  return InvalidField(field, absl::StrCat(" must be ", requirement, " (got ", got, ")"));
}

bool FiniteNonNegative(double value) { return std::isfinite(value) && value >= 0; }

absl::Status ValidateNodeType(const pb::NodeType& type, int i, const JobSettings& settings,
                              NodeCounts counts) {
  const std::string field = NodeTypeField(i);
  if (type.name().empty()) return InvalidField(absl::StrCat(field, ".name"), " is required");
  if (type.gpus_per_node() < 1) {
    return Invalid(absl::StrCat(field, ".gpus_per_node"), ">= 1", type.gpus_per_node());
  }
  if (counts == NodeCounts::kRequired && type.count() < 1) {
    return Invalid(absl::StrCat(field, ".count"), ">= 1", type.count());
  }
  // 1f1b checks memory, so it needs the size; oobleck-sosp23 ignores memory.
  const bool one_f_one_b = settings.cost_model == CostModelKind::kOneFOneB;
  if (!FiniteNonNegative(type.gpu_memory_bytes()) ||
      (one_f_one_b && type.gpu_memory_bytes() <= 0)) {
    return Invalid(absl::StrCat(field, ".gpu_memory_bytes"),
                   one_f_one_b ? "> 0 for cost_model \"1f1b\"" : "finite and >= 0",
                   type.gpu_memory_bytes());
  }
  // The bandwidth is divided by when stages share a node (1f1b transfers) or when the
  // ring formula estimates an all-reduce.
  const bool bandwidth_needed = settings.missing_allreduce == MissingAllreduce::kRing ||
                                (one_f_one_b && type.gpus_per_node() > 1);
  if (!FiniteNonNegative(type.intra_node_bytes_per_s()) ||
      (bandwidth_needed && type.intra_node_bytes_per_s() <= 0)) {
    return Invalid(absl::StrCat(field, ".intra_node_bytes_per_s"),
                   bandwidth_needed ? "> 0 for a node of several GPUs under 1f1b or with "
                                      "missing_allreduce_in_node RING"
                                    : "finite and >= 0",
                   type.intra_node_bytes_per_s());
  }
  if (type.has_derive()) {
    if (type.derive().measured_gpu_type().empty()) {
      return InvalidField(absl::StrCat(field, ".derive.measured_gpu_type"), " is required");
    }
    const double speed = type.derive().relative_speed();
    if (!std::isfinite(speed) || speed <= 0) {
      return Invalid(absl::StrCat(field, ".derive.relative_speed"), "> 0", speed);
    }
  }
  return absl::OkStatus();
}

// The profile of node type i: measured, or derived from a measured one.
absl::StatusOr<std::shared_ptr<const ModelProfile>> ResolveProfile(const JobFields& job, int i,
                                                                   const ProfileCatalog& catalog,
                                                                   CostModelCache* models,
                                                                   std::string* derived_from) {
  const pb::NodeType& type = job.cluster->node_types(i);
  const std::string field = NodeTypeField(i);
  if (!type.has_derive()) {
    absl::StatusOr<std::shared_ptr<const ModelProfile>> found =
        catalog.Find(*job.model, type.gpu_type(), job.microbatch_size);
    if (!found.ok()) {
      return AboutField(found.status(), absl::StrCat(field, ".gpu_type"), type.gpu_type());
    }
    return found;
  }
  const std::string& measured_type = type.derive().measured_gpu_type();
  auto measured = catalog.Find(*job.model, measured_type, job.microbatch_size);
  if (!measured.ok()) {
    return AboutField(measured.status(), absl::StrCat(field, ".derive.measured_gpu_type"),
                      measured_type);
  }
  const std::string& gpu_type = type.gpu_type().empty() ? type.name() : type.gpu_type();
  const double speed = type.derive().relative_speed();
  *derived_from = (*measured)->key.gpu_type;
  if (models != nullptr) return models->Derive(*measured, gpu_type, speed);
  return std::make_shared<const ModelProfile>(DeriveProfile(**measured, gpu_type, speed));
}

// Node type i's profile against those of the types before it.
absl::Status CheckCombinable(const PlanningProblem& problem, const ModelProfile& profile, int i,
                             const std::map<std::string, int>& index_by_gpu_type) {
  const std::string field = NodeTypeField(i);
  if (i > 0) {
    const ModelProfile& first = *problem.profiles[0];
    if (profile.key.microbatch_size != first.key.microbatch_size) {
      return FieldError(absl::StatusCode::kFailedPrecondition, field,
                        absl::StrCat(" resolves to profile ", profile.key.ToString(), " but ",
                                     NodeTypeField(0), " to ", first.key.ToString(),
                                     "; set microbatch_size to pick one micro-batch size"));
    }
    if (profile.num_layers() != first.num_layers()) {
      return FieldError(
          absl::StatusCode::kFailedPrecondition, field,
          absl::StrCat(" uses profile ", profile.key.ToString(), " with ", profile.num_layers(),
                       " layers but ", NodeTypeField(0), " uses ", first.key.ToString(), " with ",
                       first.num_layers(), " layers"));
    }
  }
  // A GPU type means one set of layer costs everywhere in the cluster.
  auto same = index_by_gpu_type.find(profile.key.gpu_type);
  if (same != index_by_gpu_type.end() && problem.profiles[same->second].get() != &profile &&
      profile.Fingerprint() != problem.profiles[same->second]->Fingerprint()) {
    return InvalidField(field,
                        absl::StrCat(" uses GPU type \"", profile.key.gpu_type,
                                     "\" with other layer costs than ", NodeTypeField(same->second),
                                     " (derived in one and measured in the other, or "
                                     "derived differently)"));
  }
  return absl::OkStatus();
}

}  // namespace

std::string NodeTypeField(int i) { return absl::StrCat("cluster.node_types[", i, "]"); }

absl::StatusOr<JobSettings> ValidateJob(const JobFields& job) {
  // Plain field checks first, so a malformed request never reaches the catalog or core.
  if (job.model->empty()) return InvalidField("model", " is required");
  if (job.microbatch_size < 0) return Invalid("microbatch_size", ">= 0", job.microbatch_size);
  JobSettings settings;
  absl::StatusOr<CostModelKind> kind = ParseCostModelKind(*job.cost_model);
  if (!kind.ok()) return AboutField(kind.status(), "cost_model", *job.cost_model);
  settings.cost_model = *kind;
  if (job.microbatches < 0) return Invalid("microbatches", ">= 0", job.microbatches);
  if (*kind == CostModelKind::kOneFOneB && job.microbatches == 0) {
    return Invalid("microbatches", ">= 1 for cost_model \"1f1b\"", job.microbatches);
  }
  if (!FiniteNonNegative(job.optimizer_state_multiplier)) {
    return Invalid("optimizer_state_multiplier", "finite and >= 0", job.optimizer_state_multiplier);
  }
  switch (job.missing_allreduce_in_node) {
    case pb::MISSING_ALLREDUCE_SKIP_SIZE:
      settings.missing_allreduce = MissingAllreduce::kSkipSize;
      break;
    case pb::MISSING_ALLREDUCE_RING:
      settings.missing_allreduce = MissingAllreduce::kRing;
      break;
    default:
      return InvalidField(
          "missing_allreduce_in_node",
          absl::StrCat(" has no value ", static_cast<int>(job.missing_allreduce_in_node)));
  }
  return settings;
}

absl::Status ValidateCluster(const JobFields& job, const JobSettings& settings, NodeCounts counts) {
  if (job.cluster == nullptr) return InvalidField("cluster", " is required");
  const pb::Cluster& cluster = *job.cluster;
  if (cluster.node_types().empty()) {
    return InvalidField("cluster.node_types", " must not be empty");
  }
  if (cluster.node_types_size() > kMaxNodeTypes) {
    return InvalidField("cluster.node_types",
                        absl::StrCat(" must have at most ", kMaxNodeTypes, " entries (got ",
                                     cluster.node_types_size(), ")"));
  }
  const double inter_node = cluster.inter_node_bytes_per_s();
  const bool one_f_one_b = settings.cost_model == CostModelKind::kOneFOneB;
  if (!FiniteNonNegative(inter_node) || (one_f_one_b && inter_node <= 0)) {
    return Invalid("cluster.inter_node_bytes_per_s",
                   one_f_one_b ? "> 0 for cost_model \"1f1b\"" : "finite and >= 0", inter_node);
  }
  std::map<std::string, int> index_by_name;
  for (int i = 0; i < cluster.node_types_size(); ++i) {
    const pb::NodeType& type = cluster.node_types(i);
    RETURN_IF_ERROR(ValidateNodeType(type, i, settings, counts));
    auto [it, inserted] = index_by_name.emplace(type.name(), i);
    if (!inserted) {
      return InvalidField(
          absl::StrCat(NodeTypeField(i), ".name"),
          absl::StrCat(" \"", type.name(), "\" repeats ", NodeTypeField(it->second), ".name"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<PlanningProblem> ResolveProblem(const JobFields& job, const JobSettings& settings,
                                               const ProfileCatalog& catalog,
                                               CostModelCache* models) {
  if (catalog.List(*job.model).empty()) {
    return FieldError(absl::StatusCode::kNotFound, "model",
                      absl::StrCat(" \"", *job.model, "\" has no loaded profiles"));
  }
  PlanningProblem problem;
  problem.inter_node_bytes_per_s = job.cluster->inter_node_bytes_per_s();
  problem.cost_model = settings.cost_model;
  problem.microbatches = job.microbatches;
  problem.optimizer_state_multiplier = job.optimizer_state_multiplier > 0
                                           ? job.optimizer_state_multiplier
                                           : kDefaultOptimizerStateMultiplier;
  problem.missing_allreduce = settings.missing_allreduce;
  std::map<std::string, int> index_by_gpu_type;
  for (int i = 0; i < job.cluster->node_types_size(); ++i) {
    const pb::NodeType& type = job.cluster->node_types(i);
    std::string derived_from;
    ASSIGN_OR_RETURN(std::shared_ptr<const ModelProfile> profile,
                     ResolveProfile(job, i, catalog, models, &derived_from));
    RETURN_IF_ERROR(CheckCombinable(problem, *profile, i, index_by_gpu_type));
    index_by_gpu_type.emplace(profile->key.gpu_type, i);

    NodeType node_type;
    node_type.name = type.name();
    node_type.gpu_type = profile->key.gpu_type;
    node_type.gpus_per_node = type.gpus_per_node();
    node_type.gpu_memory_bytes = type.gpu_memory_bytes();
    node_type.intra_node_bytes_per_s = type.intra_node_bytes_per_s();
    problem.node_types.push_back(std::move(node_type));
    problem.profiles.push_back(std::move(profile));
    problem.derived_from.push_back(std::move(derived_from));
  }
  return problem;
}

}  // namespace oobleck::server
