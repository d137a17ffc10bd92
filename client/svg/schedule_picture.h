// Pictures of pipeline templates: each template's 1F1B schedule over time for M
// micro-batches (forward and backward passes per stage, the point-to-point gaps and the
// bubbles), as `oobleck-plan templates --svg` and `render` draw them.
#ifndef OOBLECK_CLIENT_SVG_SCHEDULE_PICTURE_H_
#define OOBLECK_CLIENT_SVG_SCHEDULE_PICTURE_H_

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "oobleck/planner/v1/planner.pb.h"

namespace oobleck::client::svg {

namespace pb = ::oobleck::planner::v1;

// One forward or backward pass of one micro-batch on one stage.
struct ScheduledPass {
  int stage = 0;
  int microbatch = 0;
  bool backward = false;
  double start_ms = 0;
  double end_ms = 0;
};

// Point-to-point time X_s after each stage s, as the answer reports it (Stage.p2p_out_ms,
// the cost model's own figure: 0 for the last stage and under oobleck-sosp23).
std::vector<double> TransferMs(const pb::PipelineTemplate& tmpl);

// The 1F1B schedule (PipeDream-flush) of `tmpl` for `microbatches` micro-batches: stage s
// runs min(S-1-s, M) forward passes, then alternates one forward and one backward, then
// drains its backward passes. A forward pass starts when the stage is free and the
// previous stage's forward of the same micro-batch has arrived (its end + X_{s-1}); a
// backward pass when the next stage's backward has arrived (the last stage: right after
// its own forward). Passes take the stage's forward_ms / backward_ms.
std::vector<ScheduledPass> Schedule1F1B(const pb::PipelineTemplate& tmpl,
                                        const std::vector<double>& transfer_ms, int microbatches);

struct ScheduleOptions {
  // M the schedules are drawn for; 0: each template's own (PipelineTemplate.microbatches),
  // else (oobleck-sosp23 without M) 2 x stages.
  int microbatches = 0;
  // Node type name -> GPU type (from the request); a name not listed is its own GPU type.
  std::map<std::string, std::string> gpu_type_of;
  // GPU types in the order that picks their colours (the request's node types), so a
  // cluster's templates and plans share colours; others follow in order of appearance.
  std::vector<std::string> gpu_types;
  // At most this many feasible templates are drawn (the picture says how many are left).
  int max_templates = 64;
};

// The schedule of every feasible template of `response`, one panel each, and the reasons
// of the infeasible ones. FAILED_PRECONDITION naming the template when a feasible one has
// no stage timing (PipelineTemplate.microbatches unset: an answer of a server older than
// Stage.p2p_out_ms), which the schedule is drawn from.
absl::StatusOr<std::string> DrawTemplatesSvg(const pb::PlanTemplatesResponse& response,
                                             const ScheduleOptions& options);

}  // namespace oobleck::client::svg

#endif  // OOBLECK_CLIENT_SVG_SCHEDULE_PICTURE_H_
