// Implemented in batch_split.cc.
#ifndef OOBLECK_CORE_PLAN_SEARCH_BATCH_SPLIT_H_
#define OOBLECK_CORE_PLAN_SEARCH_BATCH_SPLIT_H_

#include <vector>

#include "absl/status/statusor.h"
#include "core/cost_model.h"
#include "core/pipeline_template.h"

namespace oobleck {

// The split of `global_batch` micro-batches over pipelines (stage costs in pipeline order
// and memory limits from CostModel::MaxMicrobatches) that minimises max_i T_i(M_i) with
// M_i >= 1; ties go to lower pipeline indices. Error if no split exists (more pipelines than
// micro-batches, or the memory limits hold fewer than the batch).
struct PipelineLoad {
  const std::vector<double>* stage_costs = nullptr;
  int max_microbatches = CostModel::kNoMicrobatchLimit;
};
absl::StatusOr<std::vector<int>> SplitBatch(const CostModel& model,
                                            const std::vector<PipelineLoad>& pipelines,
                                            int global_batch);

// Stage costs of an evaluated template, in pipeline order.
std::vector<double> StageCosts(const PipelineTemplate& tmpl);
// The same into *costs (its buffer reused: a loop over a fleet's pipelines allocates once).
void StageCosts(const PipelineTemplate& tmpl, std::vector<double>* costs);

}  // namespace oobleck

#endif  // OOBLECK_CORE_PLAN_SEARCH_BATCH_SPLIT_H_
