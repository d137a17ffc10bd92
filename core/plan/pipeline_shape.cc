#include "core/plan/pipeline_shape.h"

#include "absl/strings/str_format.h"
#include "core/plan_search/batch_split.h"

namespace oobleck {

std::vector<PipelineShape> FeasibleShapes(const CostModel& model, const TemplateSet& set,
                                          const PipelineSizeLimits& limits) {
  std::vector<PipelineShape> shapes;
  for (size_t i = 0; i < set.mixes.size(); ++i) {
    const int size = MixSize(set.mixes[i]);
    const MixResult& r = *set.results[i];
    if (size < limits.min_nodes || size > limits.max_nodes || !r.feasible) continue;
    const int max_microbatches = model.MaxMicrobatches(r.best);
    if (max_microbatches < 1) continue;
    shapes.push_back({set.mixes[i], &r.best, StageCosts(r.best), max_microbatches});
  }
  return shapes;
}

std::vector<std::string> UnusedTypeReasons(const CostModel& model,
                                           const std::vector<PipelineShape>& shapes,
                                           const NodeMix& available,
                                           const PipelineSizeLimits& limits) {
  std::vector<std::string> reasons(model.num_types());
  for (int t = 0; t < model.num_types(); ++t) {
    if (available[t] == 0) continue;
    bool used = false;
    for (const PipelineShape& s : shapes) used |= s.mix[t] > 0;
    if (used) continue;
    reasons[t] = absl::StrFormat("no feasible pipeline template of %d..%d nodes includes a %s node",
                                 limits.min_nodes, limits.max_nodes, model.node_type(t).name);
  }
  return reasons;
}

}  // namespace oobleck
