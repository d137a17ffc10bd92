#include "core/plan/fault_tolerance.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/field_path.h"

namespace oobleck {

absl::Status ValidateFaultTolerance(int fault_tolerance) {
  if (fault_tolerance < 0 || fault_tolerance > kMaxFaultTolerance) {
    return InvalidField("fault_tolerance",
                        absl::StrFormat(" must be in [0, %d] (a plan of at most %d nodes has at "
                                        "most that many pipelines, minus one; got %d)",
                                        kMaxFaultTolerance, kMaxClusterNodes, fault_tolerance));
  }
  return absl::OkStatus();
}

std::string OobleckCapText(int total_nodes, int fault_tolerance) {
  return absl::StrCat("Oobleck's fault-tolerance rule caps pipelines at N - f = ", total_nodes,
                      " - ", fault_tolerance, " = ", total_nodes - fault_tolerance, " node(s)");
}

absl::StatusOr<PipelineSizeLimits> CapForOobleckFaultTolerance(PipelineSizeLimits limits,
                                                               int total_nodes,
                                                               int fault_tolerance) {
  const int cap = total_nodes - fault_tolerance;
  if (cap < limits.min_nodes) {
    return FieldError(
        absl::StatusCode::kFailedPrecondition, "fault_tolerance",
        absl::StrCat(" = ", fault_tolerance, ": ", OobleckCapText(total_nodes, fault_tolerance),
                     ", fewer than min_nodes_per_pipeline = ", limits.min_nodes));
  }
  limits.max_nodes = std::min(limits.max_nodes, cap);
  return limits;
}

}  // namespace oobleck
