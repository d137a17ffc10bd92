// Predicts the iteration time and the peak GPU memory of a plan in Sailor's format from
// Sailor's measured profiles and bandwidths (docs/COST_MODEL.md, "Predicting real runs").
// bench/fidelity compares the predictions with the runs of data/sailor/validation.
#ifndef OOBLECK_CORE_FIDELITY_EVALUATE_H_
#define OOBLECK_CORE_FIDELITY_EVALUATE_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/fidelity/sailor_data.h"

namespace oobleck::fidelity {

// The model's constants (docs/COST_MODEL.md says where each comes from).
// fp32 weights, gradients and AdamW's two moments: 16 bytes per parameter, i.e. 4 × the
// fp32 parameter bytes of llm_info.json (the runs' setup, data/sailor/README.md).
inline constexpr double kTrainingStateBytesPerParameterByte = 4.0;
// Largest flat buffer into which DeepSpeed copies a stage's fp32 gradients to all-reduce them:
// 500 M elements (MEMORY_OPT_ALLREDUCE_SIZE, the bucket size _exec_reduce_grads passes) × 4
// bytes. From the engine's source (eth-easl/sailor's deepspeed/engine.py), not calibrated.
inline constexpr double kGradientBucketBytes = 500e6 * 4;
// Fraction of the network's measured bandwidth a gradient all-reduce reaches: 1, not
// calibrated (docs/COST_MODEL.md, "Predicting real runs", says why).
inline constexpr double kAllReduceEfficiency = 1.0;
// Bytes per second at which Sailor's engine rebuilds a boundary tensor it received: the whole
// tensor built as zeros on the host and copied to the GPU (reconstruct_tensor's
// `torch.zeros(n).cuda()`). Calibrated on the 15 OPT-350 runs' iteration times.
inline constexpr double kHostTensorBytesPerS = 12e9;
// Transformer layers of the model Sailor's profiler times (profile.sh's --num_prof_layers 2):
// it builds the embedding, that many transformer layers and the last layer, and the update
// time it records is that model's optimizer step (STEP_MICRO_TIMER around the engine's
// _take_model_step). From the profiler's source (eth-easl/sailor), not calibrated.
inline constexpr int kProfiledTransformerLayers = 2;
// Memory the runtime holds beyond tensors (CUDA context, NCCL buffers, the caching
// allocator's slack), as a fraction of the GPU's memory, for a GPU type whose profiles carry
// no measured reserve (SailorData::runtime_reserve_bytes). Calibrated on the 15 OPT-350 runs.
inline constexpr double kRuntimeReserveFraction = 0.047;  // 4.8 GB of a 96 GiB GH200

// Memory of one GPU, bytes.
struct GpuMemory {
  // Weights, gradients and optimizer moments, plus the flat copy of the gradients that
  // DeepSpeed all-reduces (one bucket of up to kGradientBucketBytes).
  double training_state = 0;
  double activations = 0;  // micro-batches in flight under 1F1B, plus one layer's backward
  double reserve = 0;      // runtime reserve of the GPU type
  double total() const { return training_state + activations + reserve; }
};

struct Evaluation {
  std::string model;
  // Per replica of stage 0 of pipeline_list[0]: gbs / (mbs × dp × pipelines).
  int microbatches = 0;
  // The replica index r of the micro-batches (those on replica r mod dp of every stage) that
  // set the pace, and the pipeline_list entry they run in.
  int slowest_pipeline = 0;
  int slowest_pipeline_entry = 0;
  // Seconds. iteration = pipeline + sync + update; bubble and p2p are parts of pipeline.
  double iteration_s = 0;
  double pipeline_s = 0;
  double bubble_s = 0;
  double p2p_s = 0;
  double sync_s = 0;
  double update_s = 0;
  std::vector<std::vector<GpuMemory>> memory;  // [stage][replica] of pipeline_list[0], one GPU
  // The same for pipeline_list[1], [2], ... (SailorPlan::other_pipelines), in order.
  std::vector<std::vector<std::vector<GpuMemory>>> other_pipelines_memory;
  // The largest total of all GPUs of all pipelines.
  double peak_memory_bytes = 0;
};

// Predicts `plan`. The model is the plan's own, else `model` if not empty, else the one
// model of `data` with as many layers as the plan. FAILED_PRECONDITION naming the field when
// the data lack what the plan needs (the model, a GPU type, a micro-batch size or tp in the
// profiles, a layer size, a bandwidth between two replicas); INVALID_ARGUMENT when the plan's
// layers are not a partition of the model's.
absl::StatusOr<Evaluation> EvaluateSailorPlan(const SailorData& data, const SailorPlan& plan,
                                              absl::string_view model = "");

// FAILED_PRECONDITION naming the plan's field (`pipeline_list/P/tmp_per_stage/S/R/0/K` for
// node K of a replica, `.../R/1` for its tp) when `data` lack what `plan` needs of `model`:
// for every node of every replica of every stage of every pipeline, a profile of its GPU type
// at the plan's mbs and the replica's tp (the message names the key model/GPU type/mbs/tp),
// with as many layers as llm_info.json, and that GPU type's memory size; layer sizes at every
// replica's tp. EvaluateSailorPlan checks this first; the Evaluate RPC calls it on the stored
// profiles before it reads the network.
absl::Status CheckPlanInputs(const SailorData& data, const SailorPlan& plan,
                             const std::string& model);

// Memory of one GPU of `gpu_type`, bytes (published sizes); FAILED_PRECONDITION if unknown.
absl::StatusOr<double> GpuMemoryBytes(absl::string_view gpu_type);

// INVALID_ARGUMENT naming `field` unless `bytes` can be the runtime reserve of a GPU of
// `gpu_type`: finite, >= 0 (ValidateRuntimeReserve) and less than the GPU's memory when
// GpuMemoryBytes knows it (a type it does not know is checked for the first two only).
absl::Status CheckRuntimeReserve(double bytes, absl::string_view gpu_type, absl::string_view field);

}  // namespace oobleck::fidelity

#endif  // OOBLECK_CORE_FIDELITY_EVALUATE_H_
