// The cluster file format of docs/CLUSTER_FILE.md ("ditto" clusters), read unchanged.
#ifndef OOBLECK_CORE_CLUSTER_FILE_H_
#define OOBLECK_CORE_CLUSTER_FILE_H_

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "core/cluster.h"
#include "core/cost_model.h"

namespace oobleck {

// The most nodes a cluster file may have in all: the most any RPC takes (PlanTemplates'
// kMaxNodesPerRequest, server/request_limits.h; Plan and Replan take kMaxClusterNodes,
// core/plan/limits.h). Checked before a node id is made: `"nodes": 1e9` is refused, not allocated.
inline constexpr int kMaxClusterFileNodes = 1 << 20;

struct ClusterFileGpuType {
  std::string name;         // key in "gpu_types"
  double memory_bytes = 0;  // memory_gib * 2^30
  double intra_node_bytes_per_s = 0;
  std::string profile_dir;    // set when measured ("profile"), absolute
  double relative_speed = 0;  // set when derived ("relative_speed")
  double price_per_hour = 0;  // of one GPU ("price_per_hour"); 0 when not given
};

struct ClusterFileNodeGroup {
  std::string gpu;
  int nodes = 0;
  int gpus_per_node = 0;
  std::vector<std::string> node_ids;  // given or generated as <gpu>-<k>
};

struct ClusterFile {
  std::string name;
  std::string model;
  std::string profile_dir;          // top-level "profile", absolute; may be empty
  std::string profile_measured_on;  // GPU type the top-level profile was measured on
  int microbatch_size = 1;
  int microbatches_per_pipeline = 0;  // M
  double inter_node_bytes_per_s = 0;
  double optimizer_state_multiplier = kDefaultOptimizerStateMultiplier;
  bool missing_allreduce_ring = false;        // "missing_allreduce_in_node": "ring"
  std::vector<ClusterFileGpuType> gpu_types;  // sorted by name
  std::vector<ClusterFileNodeGroup> node_groups;

  // One node type per distinct (gpu, gpus_per_node) in node-group order; named after the
  // GPU, or "<gpu>x<gpus_per_node>" when a GPU appears with several node sizes.
  std::vector<NodeType> NodeTypes() const;
  // Price per hour of one node of each entry of NodeTypes(): gpus_per_node x its GPU's
  // price_per_hour.
  std::vector<double> NodePricesPerHour() const;
  // Node count per entry of NodeTypes().
  NodeMix NodeCounts() const;
  const ClusterFileGpuType* FindGpuType(std::string_view name) const;
};

// Errors name the key and, for list entries, the index. Relative paths are resolved
// against base_dir.
absl::StatusOr<ClusterFile> ParseClusterFile(std::string_view json, const std::string& base_dir);
absl::StatusOr<ClusterFile> LoadClusterFile(const std::string& path);

}  // namespace oobleck

#endif  // OOBLECK_CORE_CLUSTER_FILE_H_
