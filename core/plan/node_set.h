// A cluster's nodes: the one place their rules are checked, and their index by id.
#ifndef OOBLECK_CORE_PLAN_NODE_SET_H_
#define OOBLECK_CORE_PLAN_NODE_SET_H_

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/cost_model.h"

namespace oobleck {

// One machine of the cluster: a stable id (e.g. its IP) and its node type (an index into
// the problem's node types).
struct ClusterNode {
  std::string id;
  int type = 0;
};

// id -> index into a node list whose ids are unique (views into that list).
using NodeIndex = absl::flat_hash_map<std::string_view, int>;

// A cluster's nodes, checked once and indexed by id: the one place their rules live (1 to
// kMaxClusterNodes nodes, each id non-empty and unique, each type an index below
// num_types; INVALID_ARGUMENT naming "nodes" or "nodes[i]", RESOURCE_EXHAUSTED for too
// many). Built once, at the server's edge or by a core caller, and taken by Plan, Replan
// and EvaluatePlan alike, so that nothing checks or hashes the ids again.
class NodeSet {
 public:
  static absl::StatusOr<NodeSet> Create(std::vector<ClusterNode> nodes, int num_types);

  NodeSet() = default;  // no nodes: not a cluster (Create never makes it)
  // Moves keep the index's views valid (the nodes' buffer moves along); a copy would not.
  NodeSet(NodeSet&&) = default;
  NodeSet& operator=(NodeSet&&) = default;
  NodeSet(const NodeSet&) = delete;
  NodeSet& operator=(const NodeSet&) = delete;

  const std::vector<ClusterNode>& nodes() const { return nodes_; }
  const NodeIndex& index() const { return index_; }
  size_t size() const { return nodes_.size(); }
  // The node types the set was checked against (each node's type is below it).
  int num_types() const { return num_types_; }

 private:
  std::vector<ClusterNode> nodes_;
  NodeIndex index_;  // views into nodes_
  int num_types_ = 0;
};

// INVALID_ARGUMENT unless `nodes` was checked against the model's node types.
absl::Status CheckNodeSetFits(const CostModel& model, const NodeSet& nodes);

}  // namespace oobleck

#endif  // OOBLECK_CORE_PLAN_NODE_SET_H_
