#include "core/plan/node_set.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/field_path.h"
#include "core/plan/limits.h"
#include "core/shown_value.h"

namespace oobleck {

absl::StatusOr<NodeSet> NodeSet::Create(std::vector<ClusterNode> nodes, int num_types) {
  if (nodes.empty()) return InvalidField("nodes", " must not be empty");
  if (nodes.size() > static_cast<size_t>(kMaxClusterNodes)) {
    return FieldError(absl::StatusCode::kResourceExhausted, "nodes",
                      absl::StrFormat(" has %d entries, more than the limit of %d nodes per plan",
                                      nodes.size(), kMaxClusterNodes));
  }
  NodeSet set;
  set.nodes_ = std::move(nodes);
  set.num_types_ = num_types;
  set.index_.reserve(set.nodes_.size());
  // A field path is built only for an error: a fleet lists thousands of nodes.
  for (size_t i = 0; i < set.nodes_.size(); ++i) {
    const ClusterNode& node = set.nodes_[i];
    if (node.id.empty()) return InvalidField(absl::StrCat("nodes[", i, "].id"), " is required");
    if (node.type < 0 || node.type >= num_types) {
      return InvalidField(absl::StrCat("nodes[", i, "]"),
                          absl::StrCat(" (", Quote(node.id), ") has no valid node type"));
    }
    auto [it, inserted] = set.index_.emplace(node.id, static_cast<int>(i));
    if (!inserted) {
      return InvalidField(absl::StrCat("nodes[", i, "].id"),
                          absl::StrCat(" ", Quote(node.id), " repeats nodes[", it->second, "].id"));
    }
  }
  return set;
}

absl::Status CheckNodeSetFits(const CostModel& model, const NodeSet& nodes) {
  if (nodes.num_types() == model.num_types()) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrFormat("the nodes were checked against %d node types but the model has %d",
                      nodes.num_types(), model.num_types()));
}

}  // namespace oobleck
