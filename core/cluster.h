// Node types, node mixes (multisets of nodes) and the cluster shape a search runs over.
#ifndef OOBLECK_CORE_CLUSTER_H_
#define OOBLECK_CORE_CLUSTER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace oobleck {

struct NodeType {
  std::string name;      // unique within a cluster
  std::string gpu_type;  // which profile's layer costs apply
  int gpus_per_node = 1;
  double gpu_memory_bytes = 0;
  double intra_node_bytes_per_s = 0;
};

// The index of the node type named `name` (the first of that name), or -1: the one lookup
// of a node type by name (a request names types; core uses indices). A scan: a plan's
// cluster has at most a few types, cheaper than hashing 4096 names.
int FindNodeType(const std::vector<NodeType>& types, absl::string_view name);

// count[i] nodes of node type i.
using NodeMix = std::vector<int>;

int MixSize(const NodeMix& mix);
// "2xv100+1xa100" (types with count 0 are left out).
std::string MixLabel(const NodeMix& mix, const std::vector<NodeType>& types);

// Every mix m with m[i] <= available[i] and min_nodes <= |m| <= max_nodes, ordered by
// size, then lexicographically by counts.
std::vector<NodeMix> EnumerateMixes(const NodeMix& available, int min_nodes, int max_nodes);
// How many mixes EnumerateMixes would return, counted only up to `limit` (so that huge
// clusters are refused without enumerating them): O(limit x types) work.
int64_t CountMixes(const NodeMix& available, int64_t min_nodes, int64_t max_nodes, int64_t limit);

// GPUs in one node; more is not a node but a malformed input.
inline constexpr int kMaxGpusPerNode = 64;

// Names present and unique, 1 to kMaxGpusPerNode GPUs, finite memory and bandwidth > 0.
// INVALID_ARGUMENT naming the field and the value, with its path (core/field_path.h) under
// `path`, where the caller's input holds the list ("cluster.node_types" in a request).
absl::Status ValidateNodeTypes(const std::vector<NodeType>& types,
                               absl::string_view path = "node_types");

}  // namespace oobleck

#endif  // OOBLECK_CORE_CLUSTER_H_
