// The result of a template search: a pipeline of stages over an ordered list of nodes.
#ifndef OOBLECK_CORE_PIPELINE_TEMPLATE_H_
#define OOBLECK_CORE_PIPELINE_TEMPLATE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "core/cluster.h"
#include "core/fnv1a.h"

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
  // X: the point-to-point transfer to the next stage that cost_ms includes (1f1b: c = F + B
  // + X_in + X_out; 0 for the last stage and under oobleck-sosp23), kept so that an answer
  // reports it instead of a client recovering it from cost_ms.
  double p2p_out_ms = 0;
};

struct PipelineTemplate {
  NodeMix mix;
  std::vector<int> node_order;  // node type of each pipeline position
  std::vector<Stage> stages;
  double iteration_time_ms = 0;

  int num_nodes() const { return static_cast<int>(node_order.size()); }
};

// A template's shape: its mix, node order and each stage's layers, node, type and GPUs —
// everything the cost model's Evaluate reads and everything Replan compares to keep a
// pipeline, not the times derived from it.
inline bool SameShape(const PipelineTemplate& a, const PipelineTemplate& b) {
  if (a.mix != b.mix || a.node_order != b.node_order || a.stages.size() != b.stages.size()) {
    return false;
  }
  for (size_t s = 0; s < a.stages.size(); ++s) {
    const Stage& x = a.stages[s];
    const Stage& y = b.stages[s];
    if (x.layer_begin != y.layer_begin || x.layer_end != y.layer_end ||
        x.node_index != y.node_index || x.node_type != y.node_type || x.gpus != y.gpus) {
      return false;
    }
  }
  return true;
}

// A hash of the shape: equal for templates of SameShape. Only for in-memory lookups (never
// stored), so it mixes whole ints (Fnv1a64Word): Replan hashes each of a
// fleet's hundreds of pipelines' templates, and the byte-wise hash showed in its profile.
inline uint64_t ShapeHash(const PipelineTemplate& t) {
  uint64_t h = kFnv1a64Basis;
  auto add = [&h](int x) { h = Fnv1a64Word(static_cast<uint32_t>(x), h); };
  add(static_cast<int>(t.mix.size()));
  for (int x : t.mix) add(x);
  add(static_cast<int>(t.node_order.size()));
  for (int x : t.node_order) add(x);
  for (const Stage& s : t.stages) {
    for (int x : {s.layer_begin, s.layer_end, s.node_index, s.node_type, s.gpus}) add(x);
  }
  return h;
}

}  // namespace oobleck

#endif  // OOBLECK_CORE_PIPELINE_TEMPLATE_H_
