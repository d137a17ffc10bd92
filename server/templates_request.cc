#include "server/templates_request.h"

#include <algorithm>
#include <climits>
#include <cstdint>
#include <map>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/field_path.h"
#include "core/status_macros.h"
#include "server/job_request.h"

namespace oobleck::server {
namespace {

namespace pb = ::oobleck::planner::v1;

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
    return InvalidField("cluster.node_types", absl::StrCat(" counts must add up to at most ",
                                                           INT_MAX, " (got ", total_nodes, ")"));
  }

  if (request.mixes().empty()) {
    const int64_t min_nodes = request.min_nodes() > 0 ? request.min_nodes() : 1;
    const int64_t max_nodes = request.max_nodes() > 0 ? request.max_nodes() : total_nodes;
    if (min_nodes > total_nodes) {
      return InvalidField(
          "min_nodes", absl::StrCat(" must be <= ", total_nodes, ", the cluster's node count (got ",
                                    min_nodes, ")"));
    }
    if (max_nodes > total_nodes) {
      return InvalidField(
          "max_nodes", absl::StrCat(" must be <= ", total_nodes, ", the cluster's node count (got ",
                                    max_nodes, ")"));
    }
    if (min_nodes > max_nodes) {
      return InvalidField("min_nodes", absl::StrCat(" must be <= max_nodes = ", max_nodes, " (got ",
                                                    min_nodes, ")"));
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
      return InvalidField(
          absl::StrCat(field, ".counts"),
          absl::StrCat(" must have ", available.size(),
                       " entries, one per cluster.node_types (got ", in.counts_size(), ")"));
    }
    NodeMix mix(in.counts().begin(), in.counts().end());
    int64_t size = 0;
    for (size_t i = 0; i < mix.size(); ++i) {
      if (mix[i] < 0 || mix[i] > available[i]) {
        return InvalidField(absl::StrCat(field, ".counts[", i, "]"),
                            absl::StrCat(" must be between 0 and ", NodeTypeField(i),
                                         ".count = ", available[i], " (got ", mix[i], ")"));
      }
      size += mix[i];
    }
    if (size < 1) {
      return InvalidField(field, " must contain at least one node (all counts are 0)");
    }
    auto [it, inserted] = first_index.emplace(mix, j);
    if (!inserted) {
      return InvalidField(field, absl::StrCat(" repeats mixes[", it->second, "]"));
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
                                                  CostModelCache* models,
                                                  InlineProfileCache* inline_cache) {
  const JobFields job = JobFields::Of(request);
  ASSIGN_OR_RETURN(const JobSettings settings, ValidateJob(job));
  if (request.min_nodes() < 0) {
    return InvalidField("min_nodes", absl::StrCat(" must be >= 0 (got ", request.min_nodes(), ")"));
  }
  if (request.max_nodes() < 0) {
    return InvalidField("max_nodes", absl::StrCat(" must be >= 0 (got ", request.max_nodes(), ")"));
  }
  ASSIGN_OR_RETURN(PlanningProblem problem, ValidateCluster(job, settings, NodeCounts::kRequired));
  NodeMix available;
  for (const pb::NodeType& type : request.cluster().node_types()) available.push_back(type.count());
  TemplateRequest out;
  ASSIGN_OR_RETURN(out.mixes, ResolveMixes(request, available));
  if (!request.profiles().empty()) {
    if (inline_cache == nullptr) {
      return InvalidField("profiles", " are not accepted here (no inline profile cache)");
    }
    ASSIGN_OR_RETURN(out.inline_profiles, ResolveInlineProfiles(request.profiles(), request.model(),
                                                                request.microbatch_size(),
                                                                request.cluster(), inline_cache));
  }
  ASSIGN_OR_RETURN(out.problem,
                   ResolveProblem(job, std::move(problem), catalog, models, &out.inline_profiles));
  return out;
}

}  // namespace oobleck::server
