// Builders of planning problems shared by the core tests.
#ifndef OOBLECK_TESTS_CORE_TEST_PROBLEMS_H_
#define OOBLECK_TESTS_CORE_TEST_PROBLEMS_H_

#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "core/cost_model.h"
#include "core/profile.h"

namespace oobleck::testing {

// The example profiles (examples/README.md), relative to examples/: GPT-2 XL measured on one
// RTX 4090, and the same with estimated ring all-reduce times.
inline constexpr char kGpt2XlProfile[] = "profiles/gpt2-xl/rtx4090";
inline constexpr char kGpt2XlRingProfile[] = "profiles-ring/gpt2-xl/rtx4090";

inline std::shared_ptr<const ModelProfile> LoadGpt2Xl(const std::string& dir = kGpt2XlProfile) {
  auto p =
      LoadOobleckProfileDir(std::string(OOBLECK_EXAMPLE_DATA) + "/" + dir, "gpt2-xl", "rtx4090", 1);
  if (!p.ok()) return nullptr;
  return std::make_shared<const ModelProfile>(*std::move(p));
}

// One node type, `gpus` GPUs per node, `nodes` of them.
inline PlanningProblem Homogeneous(std::shared_ptr<const ModelProfile> profile, int gpus,
                                   CostModelKind kind, int microbatches,
                                   double memory_bytes = 24.0 * (1 << 30)) {
  PlanningProblem p;
  p.node_types = {{"node", profile->key.gpu_type, gpus, memory_bytes, 25e9}};
  p.profiles = {std::move(profile)};
  p.inter_node_bytes_per_s = 12.5e9;
  p.cost_model = kind;
  p.microbatches = microbatches;
  return p;
}

// `num_layers` layers of an LLM-like model drawn from `rng` (forward 0.5-20 ms, backward about
// twice that, 10-500 MB of parameters, 1 MB to `max_activation_bytes` of activations, no
// in-node all-reduce), and the memory that holds them all with `optimizer_state_multiplier`
// and 8 micro-batches of activations: the base the long random instances of the search
// tests scale per node type.
struct RandomLayers {
  std::vector<LayerProfile> layers;
  double whole_bytes = 0;
};
inline RandomLayers MakeRandomLlmLayers(std::mt19937& rng, int num_layers,
                                        double optimizer_state_multiplier,
                                        double max_activation_bytes) {
  auto uniform = [&](double lo, double hi) {
    return std::uniform_real_distribution<double>(lo, hi)(rng);
  };
  RandomLayers out;
  out.layers.resize(num_layers);
  double total_params = 0, total_acts = 0;
  for (LayerProfile& l : out.layers) {
    l.forward_ms = uniform(0.5, 20);
    l.backward_ms = 2 * l.forward_ms * uniform(0.8, 1.2);
    l.param_bytes = uniform(1e7, 5e8);
    l.activation_bytes = uniform(1e6, max_activation_bytes);
    l.allreduce_in_node_ms[1] = 0;
    total_params += l.param_bytes;
    total_acts += l.activation_bytes;
  }
  out.whole_bytes = optimizer_state_multiplier * total_params + total_acts * 8;
  return out;
}

// How each node type of the long LLM-like instances is drawn, on top of what every such type
// shares (`base`'s layers run `speed` = uniform(0.3, 3) times faster, a network of 10-300
// GB/s). The draws are made in this order, `layer_speed` once per layer, so that a builder's
// seeds keep their instances.
struct RandomLlmNodeTypeDraws {
  std::function<int()> gpus;
  std::function<double(double speed)> layer_speed;  // the type's speed on one layer
  std::function<double()> memory_bytes;             // per GPU
  std::function<int()> available;                   // nodes of the type
};

// Appends `types` node types "type0", "type1", ... to `p` (each with its profile of `base`)
// and returns how many nodes of each are available.
inline NodeMix AddRandomLlmNodeTypes(std::mt19937& rng, int types,
                                     const std::vector<LayerProfile>& base,
                                     const RandomLlmNodeTypeDraws& draws, PlanningProblem& p) {
  auto uniform = [&](double lo, double hi) {
    return std::uniform_real_distribution<double>(lo, hi)(rng);
  };
  NodeMix available;
  for (int t = 0; t < types; ++t) {
    const std::string name = "type" + std::to_string(t);
    const int gpus = draws.gpus();
    auto profile = std::make_shared<ModelProfile>();
    profile->key = {"m", name, 1};
    profile->layers = base;
    const double speed = uniform(0.3, 3);
    for (LayerProfile& l : profile->layers) {
      const double layer_speed = draws.layer_speed(speed);
      l.forward_ms /= layer_speed;
      l.backward_ms /= layer_speed;
    }
    const double memory = draws.memory_bytes();
    p.node_types.push_back({name, name, gpus, memory, uniform(10e9, 300e9)});
    p.profiles.push_back(std::move(profile));
    p.derived_from.push_back("");
    available.push_back(draws.available());
  }
  return available;
}

// A random small instance: 2-3 node types of 1-2 GPUs, 3-`max_layers` layers, memory that
// binds sometimes, all-reduce data for 2 GPUs on some types only.
struct RandomInstance {
  PlanningProblem problem;
  NodeMix available;
};

inline RandomInstance MakeRandomInstance(uint32_t seed, CostModelKind kind, int max_layers,
                                         int max_nodes) {
  std::mt19937 rng(seed);
  auto uniform = [&](double lo, double hi) {
    return std::uniform_real_distribution<double>(lo, hi)(rng);
  };
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  const int L = pick(3, max_layers);
  const int T = pick(2, 3);
  RandomInstance inst;
  PlanningProblem& p = inst.problem;
  p.cost_model = kind;
  p.microbatches = kind == CostModelKind::kOneFOneB ? pick(1, 8) : pick(0, 1) * pick(1, 8);
  p.optimizer_state_multiplier = pick(0, 1) ? 6 : uniform(0, 4);
  p.inter_node_bytes_per_s = uniform(1e9, 20e9);
  double total_params = 0, total_acts = 0;
  std::vector<LayerProfile> base(L);
  for (LayerProfile& l : base) {
    l.forward_ms = uniform(0.1, 10);
    l.backward_ms = uniform(0.1, 20);
    l.param_bytes = uniform(1e6, 1e8);
    l.activation_bytes = uniform(1e6, 5e7);
    total_params += l.param_bytes;
    total_acts += l.activation_bytes;
  }
  // Memory somewhere between "everything binds" and "nothing binds".
  const double whole = p.optimizer_state_multiplier * total_params + total_acts * 4;
  for (int t = 0; t < T; ++t) {
    const std::string name = "type" + std::to_string(t);
    const int gpus = pick(1, 2);
    auto profile = std::make_shared<ModelProfile>();
    profile->key = {"m", name, 1};
    profile->layers = base;
    const double speed = uniform(0.5, 3);
    const bool has_ar2 = pick(0, 2) > 0;
    for (LayerProfile& l : profile->layers) {
      l.forward_ms /= speed;
      l.backward_ms /= speed;
      l.allreduce_in_node_ms[1] = 0;
      if (has_ar2) l.allreduce_in_node_ms[2] = uniform(0, 2);
    }
    const double memory = pick(0, 3) == 0 ? whole * 10 : whole * uniform(0.15, 1.2);
    p.node_types.push_back({name, name, gpus, memory, uniform(5e9, 50e9)});
    p.profiles.push_back(std::move(profile));
    inst.available.push_back(pick(0, 2));
  }
  if (MixSize(inst.available) == 0) inst.available[0] = 1;
  while (MixSize(inst.available) > max_nodes) {
    for (int& c : inst.available) {
      if (c > 0 && MixSize(inst.available) > max_nodes) --c;
    }
  }
  return inst;
}

}  // namespace oobleck::testing

#endif  // OOBLECK_TESTS_CORE_TEST_PROBLEMS_H_
