// Builds the planning problems the template-search benchmarks run on (bench/README.md):
// GPT-2 XL from examples/, synthetic deep models made from it, and the "ditto" cluster
// files. Shared by every benchmark case so that each case is a few lines of parameters.
#ifndef OOBLECK_BENCH_BENCH_PROBLEMS_H_
#define OOBLECK_BENCH_BENCH_PROBLEMS_H_

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/cluster.h"
#include "core/cluster_file.h"
#include "core/cost_model.h"
#include "core/profile.h"

namespace oobleck::bench {

inline constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
// The bandwidths of the homogeneous cases: PCIe 4.0 inside a node, 100 Gb/s between nodes
// (the figures examples/profiles-ring was estimated with).
inline constexpr double kPcie4BytesPerS = 25e9;
inline constexpr double kNetworkBytesPerS = 12.5e9;
// Layers of the real GPT-2 XL profile; synthetic models scale GPU memory relative to it.
inline constexpr int kGpt2XlLayers = 50;

// The cost model and M of one benchmark case.
struct CostSetting {
  CostModelKind kind = CostModelKind::kOneFOneB;
  int microbatches = 0;  // 0: not given (oobleck-sosp23's no-M formula)

  std::string Label() const {
    const std::string name(CostModelName(kind));
    return microbatches > 0 ? absl::StrCat(name, "-M", microbatches) : name;
  }
};
inline constexpr CostSetting kOobleckNoM{CostModelKind::kOobleckSosp23, 0};
inline constexpr CostSetting kOneFOneBM50{CostModelKind::kOneFOneB, 50};

// What one benchmark case searches: a problem and the mixes to plan.
struct SearchCase {
  PlanningProblem problem;
  std::vector<NodeMix> mixes;
};

// The example data of the repository (examples/README.md), relative to examples/.
inline std::string ExampleDataPath(const std::string& relative) {
  return absl::StrCat(OOBLECK_EXAMPLE_DATA, "/", relative);
}
// GPT-2 XL measured on one RTX 4090, and the same with estimated ring all-reduce times.
inline constexpr char kGpt2XlProfile[] = "profiles/gpt2-xl/rtx4090";
inline constexpr char kGpt2XlRingProfile[] = "profiles-ring/gpt2-xl/rtx4090";

// GPT-2 XL (micro-batch 1) from examples/<relative_dir>, measured on `gpu_type`.
inline absl::StatusOr<std::shared_ptr<const ModelProfile>> LoadGpt2XlProfile(
    const std::string& relative_dir, const std::string& gpu_type) {
  absl::StatusOr<ModelProfile> profile =
      LoadOobleckProfileDir(ExampleDataPath(relative_dir), "gpt2-xl", gpu_type, 1);
  if (!profile.ok()) return profile.status();
  return std::make_shared<const ModelProfile>(*std::move(profile));
}

// The synthetic recipe: layer 0 is the base model's first layer (embedding), the last
// layer is its last (head), and the layers between repeat the base's middle layers (GPT-2
// XL's 48 transformer blocks) cyclically until the model has `num_layers` layers.
inline absl::StatusOr<std::shared_ptr<const ModelProfile>> SyntheticProfile(
    const ModelProfile& base, int num_layers) {
  if (base.num_layers() < 3) {
    return absl::InvalidArgumentError(
        absl::StrFormat("synthetic profile: base %s needs >= 3 layers (got %d)",
                        base.key.ToString(), base.num_layers()));
  }
  if (num_layers < 3) {
    return absl::InvalidArgumentError(
        absl::StrFormat("synthetic profile: num_layers must be >= 3 (got %d)", num_layers));
  }
  ModelProfile synthetic;
  synthetic.key = base.key;
  synthetic.key.model = absl::StrCat(base.key.model, "-synthetic", num_layers);
  const int blocks = base.num_layers() - 2;
  synthetic.layers.reserve(num_layers);
  synthetic.layers.push_back(base.layers.front());
  for (int i = 0; i < num_layers - 2; ++i) synthetic.layers.push_back(base.layers[1 + i % blocks]);
  synthetic.layers.push_back(base.layers.back());
  return std::make_shared<const ModelProfile>(std::move(synthetic));
}

// One node type of a hand-built case. relative_speed is against the measured profile the
// case is built from (1 with the measured GPU type's name = the measured profile itself).
struct NodeTypeSpec {
  NodeType node_type;
  double relative_speed = 1;
  int available = 1;  // nodes of this type the cluster has
};

// A problem over `types`, each type's profile measured or derived from `measured`, and every
// mix of the available nodes with min_nodes..max_nodes nodes.
inline absl::StatusOr<SearchCase> MakeCase(std::shared_ptr<const ModelProfile> measured,
                                           const std::vector<NodeTypeSpec>& types, CostSetting cost,
                                           MissingAllreduce missing_allreduce, int min_nodes,
                                           int max_nodes) {
  SearchCase c;
  NodeMix available;
  for (const NodeTypeSpec& spec : types) {
    c.problem.node_types.push_back(spec.node_type);
    available.push_back(spec.available);
    if (spec.relative_speed == 1 && spec.node_type.gpu_type == measured->key.gpu_type) {
      c.problem.profiles.push_back(measured);
      c.problem.derived_from.push_back("");
    } else {
      if (!(spec.relative_speed > 0)) {
        return absl::InvalidArgumentError(
            absl::StrFormat("node type %s: relative_speed must be > 0 (got %g)",
                            spec.node_type.name, spec.relative_speed));
      }
      c.problem.profiles.push_back(std::make_shared<const ModelProfile>(
          DeriveProfile(*measured, spec.node_type.gpu_type, spec.relative_speed)));
      c.problem.derived_from.push_back(measured->key.gpu_type);
    }
  }
  c.problem.inter_node_bytes_per_s = kNetworkBytesPerS;
  c.problem.cost_model = cost.kind;
  c.problem.microbatches = cost.microbatches;
  c.problem.missing_allreduce = missing_allreduce;
  c.mixes = EnumerateMixes(available, min_nodes, max_nodes);
  return c;
}

// `count` identical nodes of `gpus_per_node` GPUs of the profile's own GPU type.
inline absl::StatusOr<SearchCase> HomogeneousCase(std::shared_ptr<const ModelProfile> profile,
                                                  int gpus_per_node, double gpu_memory_bytes,
                                                  CostSetting cost, int min_nodes, int max_nodes) {
  const std::string gpu = profile->key.gpu_type;
  NodeTypeSpec spec{NodeType{gpu, gpu, gpus_per_node, gpu_memory_bytes, kPcie4BytesPerS}, 1,
                    max_nodes};
  return MakeCase(std::move(profile), {spec}, cost, MissingAllreduce::kSkipSize, min_nodes,
                  max_nodes);
}

// A cluster file of examples/clusters read with core's parser. Each node type gets its
// GPU type's own profile directory, or the top-level profile scaled by
// relative_speed(type) / relative_speed(profile_measured_on). A file whose gpu_types does
// not list profile_measured_on (ditto-exp1) needs that speed given as
// `measured_relative_speed`, like the CLI's --measured_relative_speed. M, k and the
// all-reduce policy come from the file; the mix planned is the one of every node in it.
inline absl::StatusOr<SearchCase> ClusterFileCase(const std::string& path, CostModelKind kind,
                                                  double measured_relative_speed = 0) {
  absl::StatusOr<ClusterFile> file = LoadClusterFile(path);
  if (!file.ok()) return file.status();
  SearchCase c;
  c.problem.node_types = file->NodeTypes();
  const ClusterFileGpuType* measured_on = file->FindGpuType(file->profile_measured_on);
  if (measured_on != nullptr && measured_on->relative_speed > 0) {
    measured_relative_speed = measured_on->relative_speed;
  }
  std::shared_ptr<const ModelProfile> top_level;  // loaded on first use
  for (const NodeType& type : c.problem.node_types) {
    const ClusterFileGpuType* gpu = file->FindGpuType(type.gpu_type);
    if (gpu == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": gpu_types has no entry \"", type.gpu_type, "\""));
    }
    if (!gpu->profile_dir.empty()) {
      absl::StatusOr<ModelProfile> own =
          LoadOobleckProfileDir(gpu->profile_dir, file->model, gpu->name, file->microbatch_size);
      if (!own.ok()) return own.status();
      c.problem.profiles.push_back(std::make_shared<const ModelProfile>(*std::move(own)));
      c.problem.derived_from.push_back("");
      continue;
    }
    if (file->profile_dir.empty() || !(measured_relative_speed > 0)) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s: gpu_types.%s is derived, which needs the top-level \"profile\" and the "
          "relative_speed of profile_measured_on \"%s\" (not in gpu_types and not given)",
          path, gpu->name, file->profile_measured_on));
    }
    if (top_level == nullptr) {
      absl::StatusOr<ModelProfile> loaded = LoadOobleckProfileDir(
          file->profile_dir, file->model, file->profile_measured_on, file->microbatch_size);
      if (!loaded.ok()) return loaded.status();
      top_level = std::make_shared<const ModelProfile>(*std::move(loaded));
    }
    if (gpu->name == file->profile_measured_on) {  // the measured type itself
      c.problem.profiles.push_back(top_level);
      c.problem.derived_from.push_back("");
      continue;
    }
    c.problem.profiles.push_back(std::make_shared<const ModelProfile>(
        DeriveProfile(*top_level, gpu->name, gpu->relative_speed / measured_relative_speed)));
    c.problem.derived_from.push_back(file->profile_measured_on);
  }
  c.problem.inter_node_bytes_per_s = file->inter_node_bytes_per_s;
  c.problem.cost_model = kind;
  c.problem.microbatches = file->microbatches_per_pipeline;
  c.problem.optimizer_state_multiplier = file->optimizer_state_multiplier;
  c.problem.missing_allreduce =
      file->missing_allreduce_ring ? MissingAllreduce::kRing : MissingAllreduce::kSkipSize;
  c.mixes = {file->NodeCounts()};
  return c;
}

// The LLM shape (bench/README.md#synthetic-recipe, "80-layer LLM"): 80 layers, GPT-2 XL's
// embedding and head kept and its blocks repeated with compute, parameters and all-reduce
// times x 4; nodes of 8 GPUs (ring all-reduce estimates for the sizes GPT-2 XL lacks) of the
// first `num_types` of A100, V100, H100, RTX 4090, RTX 3090, L40S, `nodes_per_type` nodes of each,
// real GPU memory (24-80 GiB); every mix of 1..max_nodes nodes. `activation_scale` > 1 scales
// the blocks' activations too (longer sequences): memory then binds on many more stages.
inline absl::StatusOr<SearchCase> Llm80Case(int num_types, CostSetting cost, int max_nodes,
                                            int nodes_per_type = 8, double activation_scale = 1) {
  constexpr int kLayers = 80;
  constexpr double kBlockScale = 4;
  auto base = LoadGpt2XlProfile(kGpt2XlProfile, "rtx4090");
  if (!base.ok()) return base.status();
  auto synthetic = SyntheticProfile(**base, kLayers);
  if (!synthetic.ok()) return synthetic.status();
  ModelProfile scaled = **synthetic;
  scaled.key.model = absl::StrCat((*base)->key.model, "-llm", kLayers);
  for (int l = 1; l + 1 < kLayers; ++l) {
    LayerProfile& layer = scaled.layers[l];
    layer.forward_ms *= kBlockScale;
    layer.backward_ms *= kBlockScale;
    layer.param_bytes *= kBlockScale;
    layer.activation_bytes *= activation_scale;
    for (auto& [gpus, ms] : layer.allreduce_in_node_ms) ms *= kBlockScale;
    for (auto& [nodes, ms] : layer.allreduce_across_nodes_ms) ms *= kBlockScale;
  }
  struct LlmType {
    const char* name;
    double relative_speed;  // to the RTX 4090 (as in plan_bench's fleet)
    double memory_gib;
    double intra_node_bytes_per_s;
  };
  constexpr LlmType kTypes[] = {
      {"a100", 1.25, 80, 300e9},
      {"v100", 1 / 2.94, 32, 150e9},
      {"h100", 2.5, 80, 450e9},
      {"rtx4090", 1, 24, kPcie4BytesPerS},
      {"rtx3090", 1.8 / 2.94, 24, kPcie4BytesPerS},
      {"l40s", 1.1, 48, kPcie4BytesPerS},
  };
  std::vector<NodeTypeSpec> types;
  for (int t = 0; t < num_types; ++t) {
    const LlmType& k = kTypes[t];
    types.push_back({NodeType{k.name, k.name, 8, k.memory_gib * kGiB, k.intra_node_bytes_per_s},
                     k.relative_speed, nodes_per_type});
  }
  return MakeCase(std::make_shared<const ModelProfile>(std::move(scaled)), types, cost,
                  MissingAllreduce::kRing, 1, max_nodes);
}

}  // namespace oobleck::bench

#endif  // OOBLECK_BENCH_BENCH_PROBLEMS_H_
