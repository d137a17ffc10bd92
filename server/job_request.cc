#include "server/job_request.h"

#include <cmath>
#include <map>
#include <memory>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/field_path.h"
#include "core/profile.h"
#include "core/shown_value.h"
#include "core/status_macros.h"
#include "server/proto_conversion.h"

namespace oobleck::server {
namespace {

namespace pb = ::oobleck::planner::v1;

// What core cannot see in a node type: its count (not part of a PlanningProblem) and the
// derive message that says where its profile comes from.
absl::Status ValidateRequestNodeType(const pb::NodeType& type, int i, NodeCounts counts) {
  const std::string field = NodeTypeField(i);
  if (counts == NodeCounts::kRequired && type.count() < 1) {
    return InvalidValue(absl::StrCat(field, ".count"), ">= 1", type.count());
  }
  if (type.has_derive()) {
    if (type.derive().measured_gpu_type().empty()) {
      return InvalidField(absl::StrCat(field, ".derive.measured_gpu_type"), " is required");
    }
    const double speed = type.derive().relative_speed();
    if (!std::isfinite(speed) || speed <= 0) {
      return InvalidValue(absl::StrCat(field, ".derive.relative_speed"), "> 0", speed);
    }
  }
  return absl::OkStatus();
}

// The profile of `gpu_type` named by `field`: the request's inline one, else the loaded one.
absl::StatusOr<std::shared_ptr<const ModelProfile>> FindProfile(
    const JobFields& job, const std::string& gpu_type, const std::string& field,
    const ProfileCatalog& catalog, const InlineProfiles* inline_profiles) {
  if (inline_profiles != nullptr) {
    if (std::shared_ptr<const ModelProfile> sent = inline_profiles->For(gpu_type)) return sent;
  }
  if (job.model->empty()) {
    return InvalidField("model", absl::StrCat(" is required: ", field, " ", Quote(gpu_type),
                                              " has no inline profile (profiles)"));
  }
  absl::StatusOr<std::shared_ptr<const ModelProfile>> found =
      catalog.Find(*job.model, gpu_type, job.microbatch_size);
  if (!found.ok()) return AboutField(found.status(), field, gpu_type);
  return found;
}

// `profile` itself when `gpu_type` is empty, else derived as `gpu_type` at `speed` (through
// the model cache when there is one, so that equal derivations share one profile).
std::shared_ptr<const ModelProfile> MaybeDerived(std::shared_ptr<const ModelProfile> profile,
                                                 const std::string& gpu_type, double speed,
                                                 CostModelCache* models) {
  if (gpu_type.empty()) return profile;
  if (models != nullptr) return models->Derive(profile, gpu_type, speed);
  return std::make_shared<const ModelProfile>(DeriveProfile(*profile, gpu_type, speed));
}

// Node type i's profiles at the tensor-parallel degrees 2 to its GPUs per node, at the
// micro-batch size of `measured` (the loaded tp = 1 profile it uses), derived as
// `derived_gpu_type` at `relative_speed` when that is not empty. A degree loaded for that GPU
// type at other micro-batch sizes but not at this one is FAILED_PRECONDITION naming
// microbatch_size: the stage size would silently vanish otherwise.
absl::StatusOr<std::vector<std::shared_ptr<const ModelProfile>>> ResolveTensorParallel(
    const JobFields& job, int i, const ModelProfile& measured, const ProfileCatalog& catalog,
    CostModelCache* models, const std::string& derived_gpu_type, double relative_speed) {
  const int gpus_per_node = job.cluster->node_types(i).gpus_per_node();
  const ProfileKey& key = measured.key;
  std::vector<std::shared_ptr<const ModelProfile>> found;
  std::map<int, std::set<int>> sizes_by_tp;  // every degree that fits, at any micro-batch size
  for (std::shared_ptr<const ModelProfile>& p : catalog.List(key.model)) {
    const ProfileKey& k = p->key;
    if (k.gpu_type != key.gpu_type || k.tp < 2 || k.tp > gpus_per_node) continue;
    sizes_by_tp[k.tp].insert(k.microbatch_size);
    if (k.microbatch_size != key.microbatch_size) continue;
    if (p->num_layers() != measured.num_layers()) {
      return FieldError(
          absl::StatusCode::kFailedPrecondition, NodeTypeField(i),
          absl::StrCat(" uses profile ", key.ToString(), " with ", measured.num_layers(),
                       " layers but its tensor-parallel "
                       "profile ",
                       k.ToString(), " has ", p->num_layers()));
    }
    found.push_back(MaybeDerived(std::move(p), derived_gpu_type, relative_speed, models));
  }
  for (const auto& [tp, sizes] : sizes_by_tp) {
    if (sizes.count(key.microbatch_size) > 0) continue;
    return FieldError(
        absl::StatusCode::kFailedPrecondition, "microbatch_size",
        absl::StrCat(" ", key.microbatch_size, ": ", NodeTypeField(i), " (GPU type ",
                     Quote(key.gpu_type), ") has profiles of model ", Quote(key.model), " at tp ",
                     tp, " for micro-batch sizes ", absl::StrJoin(sizes, ", "), " but not at ",
                     key.microbatch_size, "; load that profile or choose one of those sizes"));
  }
  return found;
}

// The profile of node type i: measured, or derived from a measured one; and its
// tensor-parallel profiles (none for a profile sent inline).
absl::StatusOr<std::shared_ptr<const ModelProfile>> ResolveProfile(
    const JobFields& job, int i, const ProfileCatalog& catalog, CostModelCache* models,
    const InlineProfiles* inline_profiles, std::string* derived_from,
    std::vector<std::shared_ptr<const ModelProfile>>* tp_profiles) {
  const pb::NodeType& type = job.cluster->node_types(i);
  const std::string field = NodeTypeField(i);
  const bool derive = type.has_derive();
  const std::string& measured_type = derive ? type.derive().measured_gpu_type() : type.gpu_type();
  ASSIGN_OR_RETURN(
      std::shared_ptr<const ModelProfile> measured,
      FindProfile(job, measured_type,
                  absl::StrCat(field, derive ? ".derive.measured_gpu_type" : ".gpu_type"), catalog,
                  inline_profiles));
  const bool sent_inline =
      inline_profiles != nullptr && inline_profiles->For(measured_type) == measured;
  const std::string gpu_type =
      !derive ? "" : (type.gpu_type().empty() ? type.name() : type.gpu_type());
  const double speed = derive ? type.derive().relative_speed() : 0;
  if (!sent_inline) {
    ASSIGN_OR_RETURN(*tp_profiles,
                     ResolveTensorParallel(job, i, *measured, catalog, models, gpu_type, speed));
  }
  if (derive) *derived_from = measured->key.gpu_type;
  return MaybeDerived(std::move(measured), gpu_type, speed, models);
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
                        absl::StrCat(" uses GPU type ", Quote(profile.key.gpu_type),
                                     " with other layer costs than ", NodeTypeField(same->second),
                                     " (derived in one and measured in the other, or "
                                     "derived differently)"));
  }
  return absl::OkStatus();
}

}  // namespace

std::string NodeTypeField(int i) { return absl::StrCat("cluster.node_types[", i, "]"); }

absl::StatusOr<JobSettings> ValidateJob(const JobFields& job) {
  // Plain field checks first, so a malformed request never reaches the catalog or core.
  // Without a model every GPU type in use needs an inline profile (ResolveProblem says
  // which has none).
  if (job.model->empty() && (job.profiles == nullptr || job.profiles->empty())) {
    return InvalidField("model", " is required (or send every GPU type's profile in profiles)");
  }
  if (job.microbatch_size < 0) return InvalidValue("microbatch_size", ">= 0", job.microbatch_size);
  JobSettings settings;
  absl::StatusOr<CostModelKind> kind = ParseCostModelKind(*job.cost_model);
  if (!kind.ok()) return kind.status();  // names cost_model and its value
  settings.cost_model = *kind;
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
  ASSIGN_OR_RETURN(settings.stage_gpus, FromProtoStageGpus(job.stage_gpus, "stage_gpus"));
  return settings;
}

absl::StatusOr<PlanningProblem> ValidateCluster(const JobFields& job, const JobSettings& settings,
                                                NodeCounts counts) {
  if (job.cluster == nullptr) return InvalidField("cluster", " is required");
  PlanningProblem problem;
  problem.inter_node_bytes_per_s = job.cluster->inter_node_bytes_per_s();
  problem.cost_model = settings.cost_model;
  problem.microbatches = job.microbatches;
  // 0 is the proto's "not set"; anything else, negative or not a number too, goes to core.
  problem.optimizer_state_multiplier = job.optimizer_state_multiplier == 0
                                           ? kDefaultOptimizerStateMultiplier
                                           : job.optimizer_state_multiplier;
  problem.missing_allreduce = settings.missing_allreduce;
  problem.stage_gpus = settings.stage_gpus;
  for (const pb::NodeType& type : job.cluster->node_types()) {
    NodeType node_type;
    node_type.name = type.name();
    node_type.gpu_type = type.gpu_type();  // the resolved profile's, once ResolveProblem ran
    node_type.gpus_per_node = type.gpus_per_node();
    node_type.gpu_memory_bytes = type.gpu_memory_bytes();
    node_type.intra_node_bytes_per_s = type.intra_node_bytes_per_s();
    problem.node_types.push_back(std::move(node_type));
  }
  // Core owns the rules; the request holds the cluster's fields under "cluster.".
  RETURN_IF_ERROR(ValidateProblemSettings(problem, "cluster."));
  for (int i = 0; i < job.cluster->node_types_size(); ++i) {
    RETURN_IF_ERROR(ValidateRequestNodeType(job.cluster->node_types(i), i, counts));
  }
  return problem;
}

absl::StatusOr<PlanningProblem> ResolveProblem(const JobFields& job, PlanningProblem problem,
                                               const ProfileCatalog& catalog,
                                               CostModelCache* models,
                                               const InlineProfiles* inline_profiles) {
  const bool sent_inline = inline_profiles != nullptr && !inline_profiles->entries.empty();
  if (!sent_inline && catalog.List(*job.model).empty()) {
    return FieldError(absl::StatusCode::kNotFound, "model",
                      absl::StrCat(" ", Quote(*job.model), " has no loaded profiles"));
  }
  std::map<std::string, int> index_by_gpu_type;
  for (int i = 0; i < job.cluster->node_types_size(); ++i) {
    std::string derived_from;
    std::vector<std::shared_ptr<const ModelProfile>> tp_profiles;
    ASSIGN_OR_RETURN(
        std::shared_ptr<const ModelProfile> profile,
        ResolveProfile(job, i, catalog, models, inline_profiles, &derived_from, &tp_profiles));
    RETURN_IF_ERROR(CheckCombinable(problem, *profile, i, index_by_gpu_type));
    index_by_gpu_type.emplace(profile->key.gpu_type, i);
    problem.node_types[i].gpu_type = profile->key.gpu_type;
    problem.profiles.push_back(std::move(profile));
    problem.derived_from.push_back(std::move(derived_from));
    problem.tp_profiles.push_back(std::move(tp_profiles));
  }
  // A problem without tensor-parallel profiles has no list: its keys stay what they were.
  bool any_tp = false;
  for (const auto& list : problem.tp_profiles) any_tp |= !list.empty();
  if (!any_tp) problem.tp_profiles.clear();
  return problem;
}

}  // namespace oobleck::server
