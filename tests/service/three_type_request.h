// The three-type GPT-2 XL request the Plan service tests share.
#ifndef OOBLECK_TESTS_SERVICE_THREE_TYPE_REQUEST_H_
#define OOBLECK_TESTS_SERVICE_THREE_TYPE_REQUEST_H_

#include <string>
#include <vector>

#include "oobleck/planner/v1/planner.pb.h"

namespace oobleck::server::testing {

namespace pb = ::oobleck::planner::v1;

// A node type of 2-GPU nodes named after its GPU, derived from the measured RTX 4090 by
// relative speed (1: the measured type itself).
inline pb::NodeType Type(const std::string& name, double memory_gib, double relative_speed) {
  pb::NodeType type;
  type.set_name(name);
  type.set_gpu_type(name);
  type.set_gpus_per_node(2);
  type.set_gpu_memory_bytes(memory_gib * 1024.0 * 1024.0 * 1024.0);
  type.set_intra_node_bytes_per_s(25e9);
  if (relative_speed != 1) {
    type.mutable_derive()->set_measured_gpu_type("rtx4090");
    type.mutable_derive()->set_relative_speed(relative_speed);
  }
  return type;
}

// GPT-2 XL on V100, RTX 3090 and RTX 4090 nodes of 2 GPUs (speeds relative to the measured
// RTX 4090 as in the ditto cluster files), three nodes of each with IP-like ids.
inline pb::PlanRequest ThreeTypeRequest(const std::vector<int>& global_batches) {
  pb::PlanRequest request;
  request.set_model("gpt2-xl");
  request.set_microbatches(16);
  request.set_missing_allreduce_in_node(pb::MISSING_ALLREDUCE_RING);
  pb::Cluster* cluster = request.mutable_cluster();
  cluster->set_inter_node_bytes_per_s(12.5e9);
  *cluster->add_node_types() = Type("v100", 16, 1 / 2.94);
  *cluster->add_node_types() = Type("rtx3090", 24, 1.8 / 2.94);
  *cluster->add_node_types() = Type("rtx4090", 24, 1);
  const char* types[] = {"v100", "rtx3090", "rtx4090"};
  for (int i = 0; i < 9; ++i) {
    pb::Node* node = request.add_nodes();
    node->set_id("10.0.0." + std::to_string(i + 1));
    node->set_node_type(types[i / 3]);
  }
  for (int batch : global_batches) request.add_global_batch(batch);
  return request;
}

}  // namespace oobleck::server::testing

#endif  // OOBLECK_TESTS_SERVICE_THREE_TYPE_REQUEST_H_
