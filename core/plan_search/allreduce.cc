// CrossPipelineAllreduceMs (core/plan.h): the all-reduce across a plan's pipelines.
#include <algorithm>
#include <vector>

#include "core/plan.h"

namespace oobleck {

std::vector<double> CrossPipelineAllreduceMs(const CostModel& model, int max_pipelines) {
  const PlanningProblem& problem = model.problem();
  std::vector<double> allreduce(std::max(max_pipelines, 1) + 1, 0.0);
  // A profile has the same all-reduce keys on every layer (ValidateProfile), so layer 0
  // says which P are measured; for a P no profile measured, every layer takes the ring
  // estimate of its largest parameter size.
  double max_params = 0;
  for (int l = 0; l < model.num_layers(); ++l) {
    double largest = 0;
    for (const auto& profile : problem.profiles)
      largest = std::max(largest, profile->layers[l].param_bytes);
    max_params += largest;
  }
  // The measured P up to max_pipelines, from each profile's keys (a few), instead of a
  // lookup per profile and P (thousands of P at fleet scale).
  std::vector<char> measured(allreduce.size(), 0);
  for (const auto& profile : problem.profiles) {
    if (profile->layers.empty()) continue;
    for (const auto& [P, ms] : profile->layers[0].allreduce_across_nodes_ms) {
      if (P >= 2 && P <= max_pipelines) measured[P] = 1;
    }
  }
  for (int P = 2; P <= max_pipelines; ++P) {
    double sum = 0;
    if (!measured[P]) {
      sum = 2.0 * (P - 1) / P * max_params / problem.inter_node_bytes_per_s * 1e3;
    } else {
      for (int l = 0; l < model.num_layers(); ++l) {
        double slowest = 0;
        for (const auto& profile : problem.profiles) {
          const LayerProfile& layer = profile->layers[l];
          auto it = layer.allreduce_across_nodes_ms.find(P);
          const double ms =
              it != layer.allreduce_across_nodes_ms.end()
                  ? it->second
                  : 2.0 * (P - 1) / P * layer.param_bytes / problem.inter_node_bytes_per_s * 1e3;
          slowest = std::max(slowest, ms);
        }
        sum += slowest;
      }
    }
    allreduce[P] = std::max(allreduce[P - 1], sum);
  }
  return allreduce;
}


}  // namespace oobleck
