// The result of a template search: a pipeline of stages over an ordered list of nodes.
#ifndef OOBLECK_CORE_PIPELINE_TEMPLATE_H_
#define OOBLECK_CORE_PIPELINE_TEMPLATE_H_

#include <string>
#include <vector>

#include "core/cluster.h"

namespace oobleck {

struct Stage {
  int layer_begin = 0;  // inclusive
  int layer_end = 0;    // exclusive
  int node_index = 0;   // position of the stage's node in the pipeline
  int node_type = 0;    // index into the problem's node types
  int gpus = 1;
  double forward_ms = 0;   // F (compute + in-node all-reduce)
  double backward_ms = 0;  // B
  double cost_ms = 0;      // stage cost c of the cost model
  double memory_bytes_per_gpu = 0;
};

struct PipelineTemplate {
  NodeMix mix;
  std::vector<int> node_order;  // node type of each pipeline position
  std::vector<Stage> stages;
  double iteration_time_ms = 0;

  int num_nodes() const { return static_cast<int>(node_order.size()); }
};

}  // namespace oobleck

#endif  // OOBLECK_CORE_PIPELINE_TEMPLATE_H_
