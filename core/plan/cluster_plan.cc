#include "core/plan/cluster_plan.h"

#include <cmath>
#include <cstddef>

#include "absl/strings/str_format.h"

namespace oobleck {

absl::Status CheckPlanTimes(const ClusterPlan& plan) {
  const double t = plan.iteration_time_ms;
  if (std::isfinite(t) && t > 0) return absl::OkStatus();
  const size_t P = plan.pipelines.size();
  return absl::FailedPreconditionError(absl::StrFormat(
      "the plan of %d pipelines has no finite iteration time > 0 (pipelines %g ms + all-reduce "
      "across them %g ms): measure the profiles' allreduce_across_nodes_ms for %d pipelines "
      "or set cluster.inter_node_bytes_per_s > 0",
      P, plan.pipeline_time_ms, plan.allreduce_ms, P));
}

}  // namespace oobleck
