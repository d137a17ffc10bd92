// Layer costs of one model on one GPU type, and loading Oobleck's profile layout.
#ifndef OOBLECK_CORE_PROFILE_H_
#define OOBLECK_CORE_PROFILE_H_

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/confined_root.h"
#include "core/interrupt.h"

namespace oobleck {

// One layer, one GPU, one micro-batch (Oobleck's profiler output).
struct LayerProfile {
  double forward_ms = 0;
  double backward_ms = 0;
  double param_bytes = 0;       // mem_required[0]
  double activation_bytes = 0;  // mem_required[1], retained per in-flight micro-batch
  std::map<int, double> allreduce_in_node_ms;       // GPUs -> ms
  std::map<int, double> allreduce_across_nodes_ms;  // nodes -> ms
  // Given by Sailor's format only (0 in Oobleck's, which the search's cost model reads
  // nothing of): the optimizer step at this tp of the model Sailor's profiler ran (the
  // embedding, two transformer layers and the last layer; Sailor repeats it on every layer)
  // and the bytes the layer sends to the next stage per micro-batch. Last, so that
  // positional initialisers of the fields above keep their meaning.
  double update_ms = 0;
  double activation_output_bytes = 0;
};

struct ProfileKey {
  std::string model;
  std::string gpu_type;
  int microbatch_size = 1;
  // Tensor-parallel degree the layers were measured at (each GPU holding 1/tp of every layer);
  // tp > 1 ones make stages tensor-parallel (docs/COST_MODEL.md#tensor-parallel-stages).
  int tp = 1;
  auto operator<=>(const ProfileKey&) const = default;
  // "model/gpu_type/mb<m>", and "/tp<t>" after it when tp != 1 (so every key of a tp = 1
  // profile reads as it did before tp existed).
  std::string ToString() const;
};

// What the keys of an in-node all-reduce table, as a user gives it, count: the stage's
// GPUs (Oobleck's `develop` branch) or the stage's GPUs minus one (`sosp23-artifact`, whose
// StageExecutionResult reads allreduce_in_node[g - 1] for a stage of g GPUs). A profile's
// LayerProfile::allreduce_in_node_ms is keyed by GPU count either way.
enum class AllreduceKey { kGpus, kGpusMinusOne };
// "ALLREDUCE_KEY_GPUS" or "ALLREDUCE_KEY_GPUS_MINUS_ONE", as the API names them.
std::string_view AllreduceKeyName(AllreduceKey key);

struct ModelProfile {
  ProfileKey key;
  std::vector<LayerProfile> layers;
  // The convention its in-node table was given in (the table itself is normalised).
  AllreduceKey allreduce_key = AllreduceKey::kGpus;
  // Memory the runtime holds on one GPU of this type beyond tensors (CUDA context, kernel
  // images, NCCL buffers, the caching allocator's slack), bytes, as whoever loaded the
  // profile measured it. The evaluation of plans in Sailor's format counts it in place of
  // the calibrated fraction of the GPU's memory (docs/COST_MODEL.md, "Memory of one GPU");
  // the searches do not read it, so it is no part of the fingerprint. Unset: none carried.
  std::optional<double> runtime_reserve_bytes = std::nullopt;

  int num_layers() const { return static_cast<int>(layers.size()); }
  // Stable content hash (hex) of the layer data; used in cache keys.
  std::string Fingerprint() const;
  // GPU counts g > 1 for which every layer has an in-node all-reduce time (plus 1).
  std::vector<int> AllreduceInNodeGpus() const;
};

// Real models have tens to a few hundred layers, but profiles well beyond gRPC's default
// 4 MiB message are accepted on purpose. More layers than this is RESOURCE_EXHAUSTED; a
// JSON document is counted against it before it is parsed.
inline constexpr int kMaxLayersPerProfile = 1 << 18;

// The least positive value a profile may hold (in its unit: ms or bytes); anything
// smaller must be 0. A layer time of a picosecond is no measurement, and a subnormal one
// (5e-324) made the template search's grids of stage costs stop growing (issue "Hardening
// round 3", item 1).
inline constexpr double kMinPositiveProfileValue = 1e-9;

// Checks values are finite and non-negative, 0 or at least kMinPositiveProfileValue, the
// layer list is non-empty, that an all-reduce key present on some layers is present on
// all, and the runtime reserve when there is one (ValidateRuntimeReserve). Errors name layer
// and key.
absl::Status ValidateProfile(const ModelProfile& profile);

// INVALID_ARGUMENT naming `field` unless `bytes`, a runtime reserve, is finite and >= 0.
// (Whether it fits the GPU's memory needs that size: fidelity::CheckRuntimeReserve.)
absl::Status ValidateRuntimeReserve(double bytes, absl::string_view field);

// The GPU count an in-node all-reduce key stands for under `convention`. A key that
// contradicts the convention, below 1 (kGpus) or 0 (kGpusMinusOne) or standing for more
// than kMaxGpusPerNode GPUs (core/cluster.h), is INVALID_ARGUMENT whose message starts
// " key <k> is not ..." (naming the convention), for the caller to put where the key was
// in front of (a field path, or a file and layer).
absl::StatusOr<int> InNodeKeyGpus(AllreduceKey convention, int64_t key);

// Rewrites every layer's allreduce_in_node_ms from keys in `convention` to GPU counts
// (InNodeKeyGpus); errors begin with `where(layer)`, the caller's name of that table.
absl::Status NormalizeAllreduceInNode(AllreduceKey convention,
                                      absl::FunctionRef<std::string(int layer)> where,
                                      std::vector<LayerProfile>* layers);

// Parses the three JSON documents of Oobleck's layout. `source` names them in errors
// (e.g. the directory), with `mb_file_name` for the first (the file's real name when it was
// read from one). Errors name the file, the layer index and the key. Polls `interrupt` (may
// be null) between the documents and layer by layer: CANCELLED once it stopped (2^18 layers
// take about a second). The in-node table's keys are read in `convention` and normalised
// (NormalizeAllreduceInNode).
absl::StatusOr<std::vector<LayerProfile>> ParseOobleckProfile(
    std::string_view mb_json, std::string_view allreduce_in_node_json,
    std::string_view allreduce_across_nodes_json, std::string_view source,
    std::string_view mb_file_name = "mb<m>.json", Interrupt* interrupt = nullptr,
    AllreduceKey convention = AllreduceKey::kGpus);

// Reads <dir>/mb<m>.json, allreduce_in_node.json, allreduce_across_nodes.json (regular
// files of at most kMaxInputFileBytes each). microbatch_size 0 picks the only mb<m>.json
// in the directory. With `root`, the directory and every file must lie inside it once
// symlinks are resolved (a relative `dir` is taken from the root), and whatever is not
// there or not allowed gets one NOT_FOUND message naming only `dir`. The in-node table's
// keys are read in `convention`.
absl::StatusOr<ModelProfile> LoadOobleckProfileDir(const std::string& dir, const std::string& model,
                                                   const std::string& gpu_type, int microbatch_size,
                                                   const ConfinedRoot* root = nullptr,
                                                   AllreduceKey convention = AllreduceKey::kGpus);

// A profile for an unmeasured GPU type: compute times divided by relative_speed,
// communication times and memory unchanged, no runtime reserve (it was the measured type's).
ModelProfile DeriveProfile(const ModelProfile& measured, const std::string& gpu_type,
                           double relative_speed);

}  // namespace oobleck

#endif  // OOBLECK_CORE_PROFILE_H_
