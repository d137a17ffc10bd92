// CrossPipelineAllreduceMs (allreduce.h): the all-reduce across a plan's pipelines.
#include "core/plan_search/allreduce.h"

#include <algorithm>
#include <vector>

namespace oobleck {

namespace {

// For the k-th measured P (measured[P] set, in increasing P) and layer l, at [k * L + l]: the
// slowest profile's all-reduce time (its measurement, else the ring estimate of its own
// parameter bytes). Each profile's sorted map is walked once along the measured P instead
// of looked up per P, layer and profile (tens of thousands of lookups with profiles that
// measure dozens of P); the maximum does not depend on the order it is taken in.
std::vector<double> SlowestLayerMs(const CostModel& model, const std::vector<char>& measured) {
  const PlanningProblem& problem = model.problem();
  std::vector<int> measured_p;
  for (size_t P = 0; P < measured.size(); ++P) {
    if (measured[P]) measured_p.push_back(static_cast<int>(P));
  }
  const int L = model.num_layers();
  std::vector<double> slowest(measured_p.size() * L, 0.0);
  for (const auto& profile : problem.profiles) {
    for (int l = 0; l < L; ++l) {
      const LayerProfile& layer = profile->layers[l];
      auto it = layer.allreduce_across_nodes_ms.begin();
      const auto end = layer.allreduce_across_nodes_ms.end();
      for (size_t k = 0; k < measured_p.size(); ++k) {
        const int P = measured_p[k];
        while (it != end && it->first < P) ++it;
        const double ms =
            it != end && it->first == P
                ? it->second
                : RingAllreduceMs(P, layer.param_bytes, problem.inter_node_bytes_per_s);
        double& s = slowest[k * L + l];
        s = std::max(s, ms);
      }
    }
  }
  return slowest;
}

// The table for max_pipelines, computed. Entry P does not depend on max_pipelines >= P (the
// measured P up to it, and a running maximum from P = 2 up), so a longer table's prefix is
// the shorter table: CrossPipelineAllreduceMs serves every length from the longest kept.
std::vector<double> ComputeCrossPipelineAllreduceMs(const CostModel& model, int max_pipelines) {
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
  const std::vector<double> slowest = SlowestLayerMs(model, measured);
  const int L = model.num_layers();
  for (int P = 2, k = 0; P <= max_pipelines; ++P) {
    double sum = 0;
    if (!measured[P]) {
      sum = RingAllreduceMs(P, max_params, problem.inter_node_bytes_per_s);
    } else {
      for (int l = 0; l < L; ++l) sum += slowest[static_cast<size_t>(k) * L + l];
      ++k;
    }
    allreduce[P] = std::max(allreduce[P - 1], sum);
  }
  return allreduce;
}

}  // namespace

std::vector<double> CrossPipelineAllreduceMs(const CostModel& model, int max_pipelines) {
  const size_t size = static_cast<size_t>(std::max(max_pipelines, 1)) + 1;
  if (const auto kept = model.allreduce_memo().Get(); kept != nullptr && kept->size() >= size) {
    return std::vector<double>(kept->begin(), kept->begin() + size);
  }
  std::vector<double> table = ComputeCrossPipelineAllreduceMs(model, max_pipelines);
  model.allreduce_memo().Offer(table);
  return table;
}

}  // namespace oobleck
