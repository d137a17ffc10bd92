// The pipelines a plan search may place: a template set's feasible shapes.
#ifndef OOBLECK_CORE_PLAN_PIPELINE_SHAPE_H_
#define OOBLECK_CORE_PLAN_PIPELINE_SHAPE_H_

#include <string>
#include <vector>

#include "core/cost_model.h"
#include "core/pipeline_template.h"
#include "core/plan/limits.h"
#include "core/plan/template_set.h"
#include "core/search.h"

namespace oobleck {

// A pipeline a plan search may place: its mix, template and memory limit.
struct PipelineShape {
  NodeMix mix;
  const PipelineTemplate* tmpl = nullptr;
  std::vector<double> stage_costs;
  int max_microbatches = 0;
};

// The feasible shapes of `set` with min..max nodes (shapes whose memory cannot hold even
// one micro-batch are left out).
std::vector<PipelineShape> FeasibleShapes(const CostModel& model, const TemplateSet& set,
                                          const PipelineSizeLimits& limits);
// Per node type t: why no pipeline of `shapes` includes a t node ("no feasible pipeline
// template of a..b nodes includes a <type> node"), "" when one does or available[t] == 0.
// The reason Plan and Replan give for such idle nodes.
std::vector<std::string> UnusedTypeReasons(const CostModel& model,
                                           const std::vector<PipelineShape>& shapes,
                                           const NodeMix& available,
                                           const PipelineSizeLimits& limits);

}  // namespace oobleck

#endif  // OOBLECK_CORE_PLAN_PIPELINE_SHAPE_H_
