#include "core/plan/limits.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "core/field_path.h"
#include "core/status_macros.h"

namespace oobleck {

absl::Status ValidateLimits(const PipelineSizeLimits& limits) {
  if (limits.min_nodes < 0) {
    return InvalidField("min_nodes_per_pipeline",
                        absl::StrCat(" must be >= 0 (got ", limits.min_nodes, ")"));
  }
  if (limits.max_nodes < 0) {
    return InvalidField("max_nodes_per_pipeline",
                        absl::StrCat(" must be >= 0 (got ", limits.max_nodes, ")"));
  }
  const int min_nodes = std::max(1, limits.min_nodes);
  if (limits.max_nodes > 0 && limits.max_nodes < min_nodes) {
    return InvalidField("max_nodes_per_pipeline",
                        absl::StrCat(" must be >= min_nodes_per_pipeline = ", min_nodes, " (got ",
                                     limits.max_nodes, ")"));
  }
  return absl::OkStatus();
}

absl::StatusOr<PipelineSizeLimits> ResolveLimits(const PipelineSizeLimits& limits,
                                                 int total_nodes) {
  RETURN_IF_ERROR(ValidateLimits(limits));
  PipelineSizeLimits out;
  out.min_nodes = std::max(1, limits.min_nodes);
  if (out.min_nodes > total_nodes) {
    return FieldError(absl::StatusCode::kFailedPrecondition, "min_nodes_per_pipeline",
                      absl::StrCat(" = ", out.min_nodes, " is more than the cluster's ",
                                   total_nodes, " node(s)"));
  }
  // A limit above the cluster size is no limit (a replan of a shrunken cluster keeps it).
  out.max_nodes = limits.max_nodes > 0
                      ? std::min(limits.max_nodes, total_nodes)
                      : std::min(total_nodes, std::max(kDefaultMaxNodesPerPipeline, out.min_nodes));
  return out;
}

}  // namespace oobleck
