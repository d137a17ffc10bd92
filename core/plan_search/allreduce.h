// Implemented in allreduce.cc.
#ifndef OOBLECK_CORE_PLAN_SEARCH_ALLREDUCE_H_
#define OOBLECK_CORE_PLAN_SEARCH_ALLREDUCE_H_

#include <vector>

#include "core/cost_model.h"

namespace oobleck {

// The cross-pipeline gradient all-reduce of a plan of P pipelines (COST_MODEL.md): per
// layer the slowest node type's time (measured allreduce_across_nodes_ms[P], else a ring
// estimate 2(P-1)/P * param_bytes / inter_node_bytes_per_s), summed over layers; 0 for
// P <= 1; never less than for fewer pipelines. Entry P of the result, P = 0..max_pipelines.
std::vector<double> CrossPipelineAllreduceMs(const CostModel& model, int max_pipelines);

}  // namespace oobleck

#endif  // OOBLECK_CORE_PLAN_SEARCH_ALLREDUCE_H_
