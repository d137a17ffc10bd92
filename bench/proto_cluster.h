// Mixed-type clusters as a service request carries them (pb::Cluster), for the benchmarks
// that drive the real server (bench/README.md#cache-budget, #soak): one measured GPU type
// and others derived from it by relative speed.
#ifndef OOBLECK_BENCH_PROTO_CLUSTER_H_
#define OOBLECK_BENCH_PROTO_CLUSTER_H_

#include <string>
#include <vector>

#include "oobleck/planner/v1/planner.pb.h"

namespace oobleck::bench {

struct ProtoGpuType {
  std::string name;       // also the node type's name
  double memory_gib;      // per GPU
  double relative_speed;  // to the measured type (ignored for the measured type itself)
};

// `count` nodes of each type, `gpus_per_node` GPUs each, 25e9 B/s inside a node and
// 12.5e9 B/s between nodes; every type but `measured_gpu` is derived from its profile.
inline planner::v1::Cluster ProtoCluster(const std::vector<ProtoGpuType>& types,
                                         const std::string& measured_gpu, int gpus_per_node,
                                         int count) {
  constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
  planner::v1::Cluster cluster;
  cluster.set_inter_node_bytes_per_s(12.5e9);
  for (const ProtoGpuType& gpu : types) {
    planner::v1::NodeType* type = cluster.add_node_types();
    type->set_name(gpu.name);
    type->set_gpu_type(gpu.name);
    type->set_gpus_per_node(gpus_per_node);
    type->set_gpu_memory_bytes(gpu.memory_gib * kGiB);
    type->set_intra_node_bytes_per_s(25e9);
    type->set_count(count);
    if (gpu.name != measured_gpu) {
      type->mutable_derive()->set_measured_gpu_type(measured_gpu);
      type->mutable_derive()->set_relative_speed(gpu.relative_speed);
    }
  }
  return cluster;
}

}  // namespace oobleck::bench

#endif  // OOBLECK_BENCH_PROTO_CLUSTER_H_
