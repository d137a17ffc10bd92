// The pipeline sizes a plan may use and the bounds of one request's work.
#ifndef OOBLECK_CORE_PLAN_LIMITS_H_
#define OOBLECK_CORE_PLAN_LIMITS_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace oobleck {

// Pipeline sizes the plan may use. Every mix of min..max nodes is a candidate pipeline.
struct PipelineSizeLimits {
  int min_nodes = 1;
  int max_nodes = 0;  // 0: min(cluster nodes, kDefaultMaxNodesPerPipeline)
};
// The template search over every mix grows quickly with the pipeline size: for GPT-2 XL on
// 3 node types of 4 GPUs, every mix of up to 4 nodes (34 mixes) takes about 0.1 s cold on
// 2 cores, up to 8 nodes (164 mixes) 0.7 s, up to 16 nodes (968 mixes) 3.4 s, and the plan
// search grows with the mixes too (docs/API.md#plan). Requests that need larger pipelines
// (models that do not fit in 4 nodes) raise the limit.
inline constexpr int kDefaultMaxNodesPerPipeline = 4;
// Bounds of one request's work.
inline constexpr int kMaxGlobalBatch = 1 << 20;
inline constexpr int kMaxGlobalBatchSizes = 64;
inline constexpr int kMaxClusterNodes = 4096;
// Candidate pipeline mixes one plan may weigh (every mix of <= 8 nodes of 8 node types is
// 12870).
inline constexpr int kMaxMixesPerPlan = 1 << 14;

// min_nodes >= 0, max_nodes >= 0 and a max_nodes > 0 not below min_nodes (or 1), whatever
// the cluster (errors carry the field paths "min_nodes_per_pipeline" /
// "max_nodes_per_pipeline", core/field_path.h).
absl::Status ValidateLimits(const PipelineSizeLimits& limits);

// The effective limits for a cluster of `total_nodes` (errors name the field).
absl::StatusOr<PipelineSizeLimits> ResolveLimits(const PipelineSizeLimits& limits, int total_nodes);

}  // namespace oobleck

#endif  // OOBLECK_CORE_PLAN_LIMITS_H_
