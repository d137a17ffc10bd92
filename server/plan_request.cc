#include "server/plan_request.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/profile.h"

namespace oobleck::server {
namespace {

namespace pb = ::oobleck::planner::v1;

// More node types than this is not a cluster but a malformed request; the bound also keeps
// the mix counting below shallow.
constexpr int kMaxNodeTypes = 256;

std::string NodeTypeField(int i) { return absl::StrCat("cluster.node_types[", i, "]"); }

template <typename Value>
absl::Status Invalid(absl::string_view field, absl::string_view requirement, Value got) {
  return absl::InvalidArgumentError(
      absl::StrCat(field, " must be ", requirement, " (got ", got, ")"));
}

bool FiniteNonNegative(double value) { return std::isfinite(value) && value >= 0; }

absl::Status ValidateNodeType(const pb::NodeType& type, int i, CostModelKind kind,
                              bool ring_allreduce) {
  const std::string field = NodeTypeField(i);
  if (type.name().empty()) {
    return absl::InvalidArgumentError(absl::StrCat(field, ".name is required"));
  }
  if (type.gpus_per_node() < 1) {
    return Invalid(absl::StrCat(field, ".gpus_per_node"), ">= 1", type.gpus_per_node());
  }
  if (type.count() < 1) {
    return Invalid(absl::StrCat(field, ".count"), ">= 1", type.count());
  }
  // 1f1b checks memory, so it needs the size; oobleck-sosp23 ignores memory.
  const bool memory_needed = kind == CostModelKind::kOneFOneB;
  if (!FiniteNonNegative(type.gpu_memory_bytes()) ||
      (memory_needed && type.gpu_memory_bytes() <= 0)) {
    return Invalid(absl::StrCat(field, ".gpu_memory_bytes"),
                   memory_needed ? "> 0 for cost_model \"1f1b\"" : "finite and >= 0",
                   type.gpu_memory_bytes());
  }
  // The bandwidth is divided by when stages share a node (1f1b transfers) or when the
  // ring formula estimates an all-reduce.
  const bool bandwidth_needed =
      ring_allreduce || (kind == CostModelKind::kOneFOneB && type.gpus_per_node() > 1);
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
      return absl::InvalidArgumentError(
          absl::StrCat(field, ".derive.measured_gpu_type is required"));
    }
    const double speed = type.derive().relative_speed();
    if (!std::isfinite(speed) || speed <= 0) {
      return Invalid(absl::StrCat(field, ".derive.relative_speed"), "> 0", speed);
    }
  }
  return absl::OkStatus();
}

// Keeps the code of a core lookup error and prefixes the request field it came from.
absl::Status WithField(const absl::Status& status, absl::string_view field,
                       absl::string_view value) {
  return absl::Status(status.code(), absl::StrCat(field, " \"", value, "\": ", status.message()));
}

absl::Status TooManyMixes(absl::string_view what) {
  return absl::ResourceExhaustedError(
      absl::StrCat(what, " more than ", kMaxMixesPerRequest,
                   " mixes, the per-request limit; narrow min_nodes/max_nodes or split "
                   "the mixes over several requests"));
}

absl::StatusOr<std::vector<NodeMix>> ResolveMixes(const pb::PlanTemplatesRequest& request,
                                                  const NodeMix& available) {
  int64_t total_nodes = 0;
  for (int count : available) total_nodes += count;
  if (total_nodes > INT_MAX) {
    return absl::InvalidArgumentError(absl::StrCat(
        "cluster.node_types counts must add up to at most ", INT_MAX, " (got ", total_nodes, ")"));
  }

  if (request.mixes().empty()) {
    const int64_t min_nodes = request.min_nodes() > 0 ? request.min_nodes() : 1;
    const int64_t max_nodes = request.max_nodes() > 0 ? request.max_nodes() : total_nodes;
    if (min_nodes > total_nodes) {
      return absl::InvalidArgumentError(absl::StrCat("min_nodes must be <= ", total_nodes,
                                                     ", the cluster's node count (got ", min_nodes,
                                                     ")"));
    }
    if (max_nodes > total_nodes) {
      return absl::InvalidArgumentError(absl::StrCat("max_nodes must be <= ", total_nodes,
                                                     ", the cluster's node count (got ", max_nodes,
                                                     ")"));
    }
    if (min_nodes > max_nodes) {
      return absl::InvalidArgumentError(
          absl::StrCat("min_nodes must be <= max_nodes = ", max_nodes, " (got ", min_nodes, ")"));
    }
    if (CountMixes(available, min_nodes, max_nodes, kMaxMixesPerRequest + 1) >
        kMaxMixesPerRequest) {
      return TooManyMixes("the cluster's node counts and min_nodes/max_nodes give");
    }
    // Both bounds are <= total_nodes, which fits in int once the count is this small.
    return EnumerateMixes(available, static_cast<int>(min_nodes), static_cast<int>(max_nodes));
  }

  if (request.mixes_size() > kMaxMixesPerRequest) return TooManyMixes("mixes lists");
  std::map<NodeMix, int> first_index;
  std::vector<NodeMix> mixes;
  mixes.reserve(request.mixes_size());
  for (int j = 0; j < request.mixes_size(); ++j) {
    const pb::NodeMix& in = request.mixes(j);
    const std::string field = absl::StrCat("mixes[", j, "]");
    if (in.counts_size() != static_cast<int>(available.size())) {
      return absl::InvalidArgumentError(absl::StrCat(field, ".counts must have ", available.size(),
                                                     " entries, one per cluster.node_types (got ",
                                                     in.counts_size(), ")"));
    }
    NodeMix mix(in.counts().begin(), in.counts().end());
    int64_t size = 0;
    for (size_t i = 0; i < mix.size(); ++i) {
      if (mix[i] < 0 || mix[i] > available[i]) {
        return absl::InvalidArgumentError(
            absl::StrCat(field, ".counts[", i, "] must be between 0 and ", NodeTypeField(i),
                         ".count = ", available[i], " (got ", mix[i], ")"));
      }
      size += mix[i];
    }
    if (size < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat(field, " must contain at least one node (all counts are 0)"));
    }
    auto [it, inserted] = first_index.emplace(mix, j);
    if (!inserted) {
      return absl::InvalidArgumentError(absl::StrCat(field, " repeats mixes[", it->second, "]"));
    }
    mixes.push_back(std::move(mix));
  }
  // The order EnumerateMixes answers in: by size, then by counts with the first count
  // descending, so explicit and enumerated mixes come back alike.
  std::sort(mixes.begin(), mixes.end(), [](const NodeMix& a, const NodeMix& b) {
    const int size_a = MixSize(a), size_b = MixSize(b);
    return size_a != size_b ? size_a < size_b : a > b;
  });
  return mixes;
}

}  // namespace

absl::StatusOr<TemplateRequest> ToTemplateRequest(const pb::PlanTemplatesRequest& request,
                                                  const ProfileCatalog& catalog,
                                                  CostModelCache* models) {
  // Plain field checks first, so a malformed request never reaches the catalog or core.
  if (request.model().empty()) return absl::InvalidArgumentError("model is required");
  if (request.microbatch_size() < 0) {
    return Invalid("microbatch_size", ">= 0", request.microbatch_size());
  }
  absl::StatusOr<CostModelKind> kind = ParseCostModelKind(request.cost_model());
  if (!kind.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("cost_model \"", request.cost_model(), "\": ", kind.status().message()));
  }
  if (request.microbatches() < 0) {
    return Invalid("microbatches", ">= 0", request.microbatches());
  }
  if (*kind == CostModelKind::kOneFOneB && request.microbatches() == 0) {
    return Invalid("microbatches", ">= 1 for cost_model \"1f1b\"", request.microbatches());
  }
  if (!FiniteNonNegative(request.optimizer_state_multiplier())) {
    return Invalid("optimizer_state_multiplier", "finite and >= 0",
                   request.optimizer_state_multiplier());
  }
  MissingAllreduce missing_allreduce;
  switch (request.missing_allreduce_in_node()) {
    case pb::MISSING_ALLREDUCE_SKIP_SIZE:
      missing_allreduce = MissingAllreduce::kSkipSize;
      break;
    case pb::MISSING_ALLREDUCE_RING:
      missing_allreduce = MissingAllreduce::kRing;
      break;
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("missing_allreduce_in_node has no value ",
                       static_cast<int>(request.missing_allreduce_in_node())));
  }
  if (request.min_nodes() < 0) return Invalid("min_nodes", ">= 0", request.min_nodes());
  if (request.max_nodes() < 0) return Invalid("max_nodes", ">= 0", request.max_nodes());

  if (!request.has_cluster()) return absl::InvalidArgumentError("cluster is required");
  const pb::Cluster& cluster = request.cluster();
  if (cluster.node_types().empty()) {
    return absl::InvalidArgumentError("cluster.node_types must not be empty");
  }
  if (cluster.node_types_size() > kMaxNodeTypes) {
    return absl::InvalidArgumentError(absl::StrCat("cluster.node_types must have at most ",
                                                   kMaxNodeTypes, " entries (got ",
                                                   cluster.node_types_size(), ")"));
  }
  const double inter_node = cluster.inter_node_bytes_per_s();
  if (!FiniteNonNegative(inter_node) || (*kind == CostModelKind::kOneFOneB && inter_node <= 0)) {
    return Invalid(
        "cluster.inter_node_bytes_per_s",
        *kind == CostModelKind::kOneFOneB ? "> 0 for cost_model \"1f1b\"" : "finite and >= 0",
        inter_node);
  }
  const bool ring = missing_allreduce == MissingAllreduce::kRing;
  std::map<std::string, int> index_by_name;
  NodeMix available;
  for (int i = 0; i < cluster.node_types_size(); ++i) {
    const pb::NodeType& type = cluster.node_types(i);
    absl::Status status = ValidateNodeType(type, i, *kind, ring);
    if (!status.ok()) return status;
    auto [it, inserted] = index_by_name.emplace(type.name(), i);
    if (!inserted) {
      return absl::InvalidArgumentError(absl::StrCat(NodeTypeField(i), ".name \"", type.name(),
                                                     "\" repeats ", NodeTypeField(it->second),
                                                     ".name"));
    }
    available.push_back(type.count());
  }
  TemplateRequest out;
  absl::StatusOr<std::vector<NodeMix>> mixes = ResolveMixes(request, available);
  if (!mixes.ok()) return mixes.status();
  out.mixes = *std::move(mixes);

  // Profiles: each node type's GPU type, measured or derived.
  if (catalog.List(request.model()).empty()) {
    return absl::NotFoundError(
        absl::StrCat("model \"", request.model(), "\" has no loaded profiles"));
  }
  PlanningProblem& problem = out.problem;
  problem.inter_node_bytes_per_s = inter_node;
  problem.cost_model = *kind;
  problem.microbatches = request.microbatches();
  problem.optimizer_state_multiplier =
      request.optimizer_state_multiplier() > 0 ? request.optimizer_state_multiplier() : 6;
  problem.missing_allreduce = missing_allreduce;
  std::map<std::string, int> index_by_gpu_type;
  for (int i = 0; i < cluster.node_types_size(); ++i) {
    const pb::NodeType& type = cluster.node_types(i);
    const std::string field = NodeTypeField(i);
    std::shared_ptr<const ModelProfile> profile;
    std::string derived_from;
    if (type.has_derive()) {
      const std::string& measured_type = type.derive().measured_gpu_type();
      auto measured = catalog.Find(request.model(), measured_type, request.microbatch_size());
      if (!measured.ok()) {
        return WithField(measured.status(), absl::StrCat(field, ".derive.measured_gpu_type"),
                         measured_type);
      }
      const std::string& gpu_type = type.gpu_type().empty() ? type.name() : type.gpu_type();
      const double speed = type.derive().relative_speed();
      profile =
          models != nullptr
              ? models->Derive(*measured, gpu_type, speed)
              : std::make_shared<const ModelProfile>(DeriveProfile(**measured, gpu_type, speed));
      derived_from = (*measured)->key.gpu_type;
    } else {
      auto found = catalog.Find(request.model(), type.gpu_type(), request.microbatch_size());
      if (!found.ok()) {
        return WithField(found.status(), absl::StrCat(field, ".gpu_type"), type.gpu_type());
      }
      profile = *std::move(found);
    }

    if (i > 0) {
      const ModelProfile& first = *problem.profiles[0];
      if (profile->key.microbatch_size != first.key.microbatch_size) {
        return absl::FailedPreconditionError(absl::StrCat(
            field, " resolves to profile ", profile->key.ToString(), " but ", NodeTypeField(0),
            " to ", first.key.ToString(), "; set microbatch_size to pick one micro-batch size"));
      }
      if (profile->num_layers() != first.num_layers()) {
        return absl::FailedPreconditionError(
            absl::StrCat(field, " uses profile ", profile->key.ToString(), " with ",
                         profile->num_layers(), " layers but ", NodeTypeField(0), " uses ",
                         first.key.ToString(), " with ", first.num_layers(), " layers"));
      }
    }
    // A GPU type means one set of layer costs everywhere in the cluster.
    auto [same, inserted] = index_by_gpu_type.emplace(profile->key.gpu_type, i);
    if (!inserted && profile != problem.profiles[same->second] &&
        profile->Fingerprint() != problem.profiles[same->second]->Fingerprint()) {
      return absl::InvalidArgumentError(
          absl::StrCat(field, " uses GPU type \"", profile->key.gpu_type,
                       "\" with other layer costs than ", NodeTypeField(same->second),
                       " (derived in one and measured in the other, or derived differently)"));
    }

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
  return out;
}

}  // namespace oobleck::server
