// Pictures of plans and replans, as `oobleck-plan plan --svg`, `replan --svg` and `render`
// draw them: one row per pipeline (identical pipelines of a large plan share a row with a
// count), its stages as blocks on the nodes they run on, coloured by GPU type and
// labelled with layer ranges and GPU counts; idle nodes below. A replan shows the plan
// before and after side by side, failed and joined nodes marked, and an arrow per layer
// copy from the node that sends to the node that receives, with its bytes.
#ifndef OOBLECK_CLIENT_SVG_PLAN_PICTURE_H_
#define OOBLECK_CLIENT_SVG_PLAN_PICTURE_H_

#include <string>

#include "oobleck/planner/v1/planner.pb.h"

namespace oobleck::client::svg {

namespace pb = ::oobleck::planner::v1;

struct PlanPictureOptions {
  // Plans with more pipelines than this draw identical pipelines (same template, same
  // share of the batch) as one row with a count; pipelines with a failed or joined node
  // or a copy are always drawn alone.
  int aggregate_above = 16;
  // Idle nodes beyond this many are drawn one box per (type, reason) with a count.
  int max_idle_boxes = 40;
  // Copies listed under a replan (all are drawn as arrows and kept in their tooltips).
  int max_copies_listed = 40;
};

std::string DrawPlanSvg(const pb::PlanResponse& response, const PlanPictureOptions& options = {});

// `old_request` and `old_plan`: the plan the replan started from (ReplanRequest.request
// and .plan); failed nodes are those of old_request missing from response.request, joined
// ones the reverse.
std::string DrawReplanSvg(const pb::PlanRequest& old_request, const pb::ClusterPlan& old_plan,
                          const pb::ReplanResponse& response,
                          const PlanPictureOptions& options = {});

}  // namespace oobleck::client::svg

#endif  // OOBLECK_CLIENT_SVG_PLAN_PICTURE_H_
