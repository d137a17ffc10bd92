// Sailor's inputs and plans (data/sailor/README.md): the per-layer profiles per GPU type,
// micro-batch size and tensor-parallel degree, the per-layer sizes, the model shapes, the
// measured bandwidths, and one plan (plan_config_*.json) with what was measured when it ran.
// Read here into plain structs, checked field by field; core/fidelity/evaluate.h predicts
// a plan from them.
#ifndef OOBLECK_CORE_FIDELITY_SAILOR_DATA_H_
#define OOBLECK_CORE_FIDELITY_SAILOR_DATA_H_

#include <array>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "absl/status/statusor.h"
#include "core/profile.h"
#include "nlohmann/json.hpp"

namespace oobleck::fidelity {

// One layer's measured times, seconds, for one micro-batch on one stage replica.
struct LayerTimes {
  double forward_s = 0;
  double backward_s = 0;
  // The optimizer step of the model Sailor's profiler ran at this tp: the embedding, the
  // first kProfiledTransformerLayers transformer layers and the last layer (the profile
  // repeats the same value on every layer; docs/COST_MODEL.md "Predicting real runs").
  double update_s = 0;
};

// One layer's sizes per GPU at one tp, for micro-batch size 1.
struct LayerSizes {
  double params_bytes = 0;
  double act_output_bytes = 0;  // what the layer sends to the next stage
  double act_mem_bytes = 0;     // what it keeps for its backward pass
};

// A measured bandwidth: GB/s as a polynomial c0·x² + c1·x + c2 of x = log2(message MB),
// never above peak_bytes_per_s.
struct BandwidthCurve {
  std::array<double, 3> coefficients{};
  double peak_bytes_per_s = 0;
  // Bytes per second for a message of `bytes`.
  double At(double bytes) const;
};

// profiles[gpu_type][micro-batch size][tp] -> one entry per layer.
using ModelProfile = std::map<std::string, std::map<int, std::map<int, std::vector<LayerTimes>>>>;

// (zone, gpu type, GPU count) at each end of a network path.
using Endpoint = std::tuple<std::string, std::string, int>;

struct SailorData {
  std::map<std::string, ModelProfile> profiles;  // by model
  // llm_info[model][tp] -> one entry per layer.
  std::map<std::string, std::map<int, std::vector<LayerSizes>>> layer_sizes;
  // num_all_layers of each training_config_*.json, by model.
  std::map<std::string, int> num_all_layers;
  // Between nodes: multizone_bandwidths.json and multizone_bandwidths_het.json.
  std::map<std::pair<Endpoint, Endpoint>, BandwidthCurve> inter_node;
  // Inside one node: intra_node_bandwidths.json[gpu type][GPU count].
  std::map<std::string, std::map<int, BandwidthCurve>> intra_node;
  // Measured runtime reserves by GPU type (what stored profiles carry: ModelProfile's
  // runtime_reserve_bytes); a GPU type without one gets kRuntimeReserveFraction of its memory.
  std::map<std::string, double> runtime_reserve_bytes;
};

// Reads profiles_tmp.json, llm_info.json, every training_config_*.json, and the three
// bandwidth files of `dir`. NOT_FOUND for a missing file; INVALID_ARGUMENT naming the file
// and the field for anything malformed (not an object, a non-number, a negative value, a
// layer list with holes).
absl::StatusOr<SailorData> LoadSailorData(const std::filesystem::path& dir);

// The same from documents already parsed, by file name (the name used in messages).
absl::StatusOr<SailorData> SailorDataFromJson(const std::map<std::string, nlohmann::json>& docs);

// One node a stage replica runs on, and how many of its GPUs the replica uses.
struct ReplicaNode {
  std::string gpu_type;
  int gpus_per_node = 0;
  std::string zone;
  int gpus = 0;  // of this replica's tp GPUs, those on this node
};

// One replica of a stage: `tp` GPUs (tensor parallel) of one node of `gpu_type`
// (`gpus_per_node` each) in `zone`, or of several nodes (`nodes`, the first being the one
// above; tensor parallelism then crosses the network).
struct StageReplica {
  std::string gpu_type;
  int gpus_per_node = 0;
  std::string zone;
  int tp = 0;
  // Every node with GPUs of this replica, in the plan's order; empty means the one above.
  std::vector<ReplicaNode> nodes;
};

// One entry of pipeline_list: its stages and their replicas (dp may differ per stage).
struct SailorPipeline {
  std::vector<std::vector<int>> layers_per_stage;
  std::vector<std::vector<StageReplica>> replicas;  // [stage][replica]
};

struct SailorPlan {
  std::string model;  // the plan's "model" field; empty when it has none
  int microbatch_size = 0;
  int global_batch = 0;
  std::vector<std::vector<int>> layers_per_stage;
  std::vector<std::vector<StageReplica>> replicas;  // [stage][replica]
  // pipeline_list[1], [2], ...: further pipelines with their own stages (the two fields above
  // are pipeline_list[0]); each pipeline runs gbs / (mbs × pipelines) samples.
  std::vector<SailorPipeline> other_pipelines;
  // What was measured, when the file has it.
  std::optional<double> real_iteration_s;
  std::optional<double> real_max_memory_bytes;
};

// Stage replicas a plan may list over all its pipelines: far above any cluster's (16384 × tp
// GPUs), low enough that predicting it stays well under a second.
inline constexpr int kMaxPlanReplicas = 1 << 14;

// Parses one plan_config_*.json (every pipeline_list entry). INVALID_ARGUMENT naming the
// field for a missing or malformed field, dp that differs from the replicas listed in
// tmp_per_stage, a replica whose nodes hold fewer GPUs than its tp, more than kMaxPlanReplicas
// replicas, or a global batch that is not a multiple of mbs × dp × pipelines for every stage.
absl::StatusOr<SailorPlan> SailorPlanFromJson(const nlohmann::json& doc);
absl::StatusOr<SailorPlan> LoadSailorPlan(const std::filesystem::path& path);

// Sailor's profiles as the planner stores them (LoadProfile with `sailor`): one profile per
// (GPU type, micro-batch size, tp), its layers' times in ms (forward, backward, update) and
// sizes at that micro-batch size (param_bytes as measured; activation_bytes and
// activation_output_bytes = llm_info's act_mem_bytes and act_output_bytes × mbs).
struct SailorProfileImport {
  std::vector<::oobleck::ModelProfile> profiles;
  // "<gpu_type>/mb<m>/tp<t>: why", for each one the files have but that was not made.
  std::vector<std::string> skipped;
};

// The profiles of `data`'s one model (the training config's: `data` must hold exactly one),
// stored under `model` (empty: that name), of `gpu_types` (empty: all) and micro-batch size
// `microbatch_size` (0: all). A (GPU type, mbs, tp) whose tp llm_info.json lacks is skipped
// with its reason. INVALID_ARGUMENT naming the file and field when the model is not in
// profiles_tmp.json or llm_info.json, a layer count differs from num_all_layers, a GPU type
// asked for has no profile, or nothing is left to store.
absl::StatusOr<SailorProfileImport> ProfilesFromSailorData(
    const SailorData& data, const std::string& model, const std::vector<std::string>& gpu_types,
    int microbatch_size);

// Whether `profile` carries what Sailor's format gives beyond Oobleck's (update times or
// output activation sizes), so that the evaluation can use it.
bool HasSailorFields(const ::oobleck::ModelProfile& profile);

// The inverse of ProfilesFromSailorData: SailorData's profiles, layer sizes and layer count
// of `model` from stored profiles (those of `model` that HasSailorFields; the rest are left
// out), and each GPU type's runtime reserve when its profiles carry one (the largest, if
// they differ). No network: the caller adds it.
SailorData SailorDataFromProfiles(
    const std::vector<std::shared_ptr<const ::oobleck::ModelProfile>>& profiles,
    const std::string& model);

}  // namespace oobleck::fidelity

#endif  // OOBLECK_CORE_FIDELITY_SAILOR_DATA_H_
