// fault_tolerance (f): its range and the two ways it is read
// (docs/COST_MODEL.md#fault-tolerance).
#ifndef OOBLECK_CORE_PLAN_FAULT_TOLERANCE_H_
#define OOBLECK_CORE_PLAN_FAULT_TOLERANCE_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/plan/limits.h"

namespace oobleck {

// The f-failure guarantee: f >= 0, a plan has at least f + 1 pipelines.
inline constexpr int kMaxFaultTolerance = kMaxClusterNodes - 1;
// "fault_tolerance must be in [0, 4095] (got -1)"; OK for a valid f. The error carries the
// field path "fault_tolerance" (core/field_path.h).
absl::Status ValidateFaultTolerance(int fault_tolerance);

// How fault_tolerance (f) is read (docs/COST_MODEL.md#fault-tolerance).
enum class FaultToleranceRule {
  kPipelines,  // at least f + 1 pipelines: any f failures leave every layer a replica
  kOobleck,    // Oobleck's: no pipeline has more than N - f nodes (N: the cluster's nodes)
};
// Oobleck's rule on resolved limits for a cluster of `total_nodes`: max_nodes lowered to
// N - f; FAILED_PRECONDITION when N - f is below min_nodes (nothing fits).
absl::StatusOr<PipelineSizeLimits> CapForOobleckFaultTolerance(PipelineSizeLimits limits,
                                                               int total_nodes,
                                                               int fault_tolerance);
// "Oobleck's fault-tolerance rule caps pipelines at N - f = 13 - 3 = 10 node(s)".
std::string OobleckCapText(int total_nodes, int fault_tolerance);

}  // namespace oobleck

#endif  // OOBLECK_CORE_PLAN_FAULT_TOLERANCE_H_
