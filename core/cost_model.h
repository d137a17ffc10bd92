// The one implementation of the cost models (docs/COST_MODEL.md): stage compute,
// point-to-point transfer, memory, and pipeline time for "1f1b" and "oobleck-sosp23".
#ifndef OOBLECK_CORE_COST_MODEL_H_
#define OOBLECK_CORE_COST_MODEL_H_

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "core/cluster.h"
#include "core/pipeline_template.h"
#include "core/profile.h"

namespace oobleck {

enum class CostModelKind { kOneFOneB, kOobleckSosp23 };

// "" and "1f1b" -> kOneFOneB; "oobleck-sosp23" -> kOobleckSosp23.
absl::StatusOr<CostModelKind> ParseCostModelKind(std::string_view name);
std::string_view CostModelName(CostModelKind kind);

enum class MissingAllreduce {
  kSkipSize,  // a stage size without in-node all-reduce data is not considered
  kRing,      // estimate 2(g-1)/g * param_bytes / intra_node_bytes_per_s
};

// Which GPU counts a stage on a node may use (docs/COST_MODEL.md#stages-and-templates); a node's
// stages always use all its GPUs. A restriction of the sizes with all-reduce data.
enum class StageGpus {
  kAny,       // every count with in-node all-reduce data (or the ring estimate)
  kDivisors,  // counts that divide the node's GPUs (Oobleck's get_rank_grid needs it)
  // Oobleck `develop`'s divide and conquer splits a node's GPUs anywhere, again and again,
  // and a part holding one stage must have a power of two GPUs: every stage has a power of
  // two GPUs, in any order, adding up to the node's (6 = 4 + 2; never one stage of 6).
  // The name is historical (docs/COST_MODEL.md#stages-and-templates).
  kEqualHalves,
};
// "STAGE_GPUS_ANY", "STAGE_GPUS_DIVISORS", "STAGE_GPUS_EQUAL_HALVES", as the API names them.
std::string_view StageGpusName(StageGpus policy);
// Whether `policy` lets a stage use `gpus` of a node's `node_gpus` GPUs.
bool StageGpusAllow(StageGpus policy, int node_gpus, int gpus);

// Everything a template search depends on except the mix. Value type.
// Optimizer-state bytes per parameter byte when a request gives none (Oobleck's figure: Adam
// keeps fp32 master weights and two moments beside fp16 weights).
inline constexpr double kDefaultOptimizerStateMultiplier = 6;

struct PlanningProblem {
  std::vector<NodeType> node_types;
  // profiles[i]: layer costs for node_types[i] (already derived where applicable).
  std::vector<std::shared_ptr<const ModelProfile>> profiles;
  // derived_from[i]: non-empty when profiles[i] was derived from that measured GPU type.
  std::vector<std::string> derived_from;
  double inter_node_bytes_per_s = 0;
  CostModelKind cost_model = CostModelKind::kOneFOneB;
  int microbatches = 0;  // M; 0 = not given (allowed for oobleck-sosp23 only)
  double optimizer_state_multiplier = kDefaultOptimizerStateMultiplier;
  MissingAllreduce missing_allreduce = MissingAllreduce::kSkipSize;
  StageGpus stage_gpus = StageGpus::kAny;
  // tp_profiles[i] (may be shorter than node_types, or empty): node_types[i]'s profiles
  // measured at tensor-parallel degrees tp >= 2, at the micro-batch size of profiles[i]
  // (which is the tp = 1 one). When some of them fit the node (TensorParallelDegrees), a
  // stage of g GPUs of that type runs tensor-parallel at tp = g with the times and per-GPU
  // bytes measured at tp = g, and the type's stage sizes are exactly 1 and those degrees
  // (docs/COST_MODEL.md#tensor-parallel-stages); otherwise its stages split layers across
  // their GPUs as before.
  std::vector<std::vector<std::shared_ptr<const ModelProfile>>> tp_profiles;

  // The measured tensor-parallel degrees a stage of node type t may run at besides 1:
  // those of tp_profiles[t] within the node's GPUs that stage_gpus allows, ascending.
  // Empty: the type's stages split the layers' work over their GPUs (tp = 1).
  std::vector<int> TensorParallelDegrees(int t) const;
  // The tensor-parallel degree of a stage of `gpus` GPUs of node type t: `gpus` when the
  // type runs tensor-parallel stages, else 1.
  int StageTensorParallel(int t, int gpus) const {
    return TensorParallelDegrees(t).empty() ? 1 : gpus;
  }

  // Content key of everything above (profile fingerprints, types, model, M, ...). A new
  // field belongs here and in CostModelCache's key (core/model_cache.cc).
  std::string CacheKey() const;
};

// The one check of a problem's settings, before its profiles are looked at: microbatches
// (>= 0, <= 2^20, >= 1 for 1f1b), optimizer_state_multiplier (finite, >= 0),
// inter_node_bytes_per_s (finite, >= 0, > 0 for 1f1b), the node types
// (ValidateNodeTypes) and stage_gpus (every node type keeps a stage size under it).
// INVALID_ARGUMENT naming the field and the value, the path also as data (core/field_path.h);
// node_types and inter_node_bytes_per_s under `cluster_prefix`, where the caller's input holds them
// ("cluster." in a planning request). Create runs it; the server runs it first so that a malformed
// request fails before profiles are looked up.
absl::Status ValidateProblemSettings(const PlanningProblem& problem,
                                     absl::string_view cluster_prefix = "");

enum class Link { kNone, kIntraNode, kInterNode };

// The pipeline-time formulas themselves, from a pipeline's summary figures; the template
// search's objectives (core/template_search/objectives.h) evaluate labels with them too.
// 1f1b: T = sum c + (M - 1) max c.
inline double OneFOneBTimeMs(double sum_ms, double max_ms, int microbatches) {
  return sum_ms + (microbatches - 1) * max_ms;
}
// oobleck-sosp23: T = sum c + n_k c_k* + (sum of c_i from k* to the end), with the max
// c_k* at the last argmax k*; Oobleck's base case 4c for a single stage.
inline double Sosp23TimeMs(double sum_ms, double max_ms, double tail_ms, int n_k, int stages) {
  if (stages == 1) return 4 * max_ms;  // t1 + t2 + t3 = c + 2c + c
  return sum_ms + n_k * max_ms + tail_ms;
}
// The ring all-reduce of `bytes` over `participants` (GPUs of a node, or pipelines) at
// `bytes_per_s`, in ms: 2 (n - 1) / n * bytes / bandwidth, where no all-reduce was measured
// (docs/COST_MODEL.md).
inline double RingAllreduceMs(int participants, double bytes, double bytes_per_s) {
  return 2.0 * (participants - 1) / participants * bytes / bytes_per_s * 1e3;
}

// The longest table computed so far of a function of one model alone whose shorter tables
// are prefixes of its longer ones (CrossPipelineAllreduceMs, core/plan_search/allreduce.cc:
// thousands of entries at fleet size, recomputed on every Replan before this memo).
class ModelTableMemo {
 public:
  std::shared_ptr<const std::vector<double>> Get() const {
    absl::MutexLock lock(&mu_);
    return table_;
  }
  // Keeps `table` when it is longer than the one kept.
  void Offer(std::vector<double> table) {
    absl::MutexLock lock(&mu_);
    if (table_ == nullptr || table_->size() < table.size()) {
      table_ = std::make_shared<const std::vector<double>>(std::move(table));
    }
  }

 private:
  mutable absl::Mutex mu_;
  std::shared_ptr<const std::vector<double>> table_ ABSL_GUARDED_BY(mu_);
};

class CostModel {
 public:
  // Validates the problem (ValidateProblemSettings, then its profiles) and precomputes
  // prefix sums.
  static absl::StatusOr<CostModel> Create(PlanningProblem problem);

  const PlanningProblem& problem() const { return problem_; }
  // problem().CacheKey(), computed once: it fingerprints every profile, and warm requests
  // look up templates by it.
  const std::string& problem_key() const { return problem_key_; }
  CostModelKind kind() const { return problem_.cost_model; }
  int num_layers() const { return num_layers_; }
  int num_types() const { return static_cast<int>(problem_.node_types.size()); }
  const NodeType& node_type(int t) const { return problem_.node_types[t]; }
  // CrossPipelineAllreduceMs's memo. Copies of a model share it: the model is immutable, so
  // the table is theirs too.
  ModelTableMemo& allreduce_memo() const { return *allreduce_memo_; }
  // GPU counts a stage on a node of type t may use (ascending).
  const std::vector<int>& stage_sizes(int t) const { return types_[t].sizes; }

  // Layers [begin, end) on `gpus` GPUs of node type t (split over them, or tensor-parallel
  // at tp = gpus with the times measured there: PlanningProblem::tp_profiles).
  double ForwardMs(int t, int gpus, int begin, int end) const;
  double BackwardMs(int t, int gpus, int begin, int end) const;
  double ComputeMs(int t, int gpus, int begin, int end) const;  // F + B
  // Parameter bytes of layers [begin, end) in node type t's tp = 1 profile (what a node must
  // hold, or receive when it takes the layers over, core/replan).
  double ParamBytes(int t, int begin, int end) const {
    return types_[t].param_prefix[end] - types_[t].param_prefix[begin];
  }
  // Transfer of layer `last_layer`'s activations to the next stage over `link` from a
  // node of type t (0 for kNone and for oobleck-sosp23).
  double TransferMs(int t, int last_layer, Link link) const;
  // c = F + B + X_in + X_out (oobleck-sosp23: F + B).
  double StageCostMs(int t, int gpus, int begin, int end, Link in, Link out) const;
  // The one memory expression per GPU in its two parts, with `in_flight` micro-batches of
  // activations kept (MemoryBytesPerGpu and the fit checks add them up).
  struct GpuMemoryParts {
    double training_state_bytes = 0;  // k * params / g: weights, gradients, optimizer state
    double activation_bytes = 0;      // activations * in_flight
  };
  GpuMemoryParts MemoryParts(int t, int gpus, int begin, int end, int in_flight) const;
  // k * params / g + activations * min(M, stages_from_end) (stages_from_end >= 1); for a
  // tensor-parallel stage the per-GPU bytes measured at tp = g, not divided.
  double MemoryBytesPerGpu(int t, int gpus, int begin, int end, int stages_from_end) const;
  // Always true for oobleck-sosp23, which ignores memory.
  bool Fits(int t, int gpus, int begin, int end, int stages_from_end) const;
  // The largest stages_from_end at which the stage fits (a large value when it always
  // fits, 0 when it never does).
  int MaxStagesFromEnd(int t, int gpus, int begin, int end) const;
  bool memory_can_bind() const { return memory_can_bind_; }

  // What PipelineTimeMs reads of a pipeline's stage costs: the same numbers whatever the
  // micro-batch count, so that searches asking for T(x) at many x compute them once.
  struct PipelineTimeParts {
    double sum_ms = 0;   // sum of the costs, in pipeline order
    double max_ms = 0;   // the largest cost (oobleck-sosp23: at the last argmax k*)
    double tail_ms = 0;  // oobleck-sosp23: the costs from k* to the end
    int stages = 0;
    int kstar = 0;  // oobleck-sosp23: the last argmax
  };
  PipelineTimeParts TimeParts(const std::vector<double>& stage_costs) const;
  // PipelineTimeMs(stage_costs, microbatches) from TimeParts(stage_costs): the same value.
  double PipelineTimeMs(const PipelineTimeParts& parts, int microbatches) const {
    if (parts.stages == 0) return 0;
    if (kind() == CostModelKind::kOneFOneB) {
      return OneFOneBTimeMs(parts.sum_ms, parts.max_ms, microbatches);
    }
    const int M = microbatches;
    const int S = parts.stages;
    const int n_k = M > 0 ? M - S + parts.kstar + 1 : 2 * S + parts.kstar + 1;
    return Sosp23TimeMs(parts.sum_ms, parts.max_ms, parts.tail_ms, n_k, S);
  }
  // Pipeline time of stage costs in pipeline order under the selected model.
  double PipelineTimeMs(const std::vector<double>& stage_costs) const;
  // The same for `microbatches` in place of the problem's M: a plan gives every pipeline
  // its own share of the global batch (core/plan/cluster_plan.h). 0 = oobleck-sosp23's no-M
  // formula.
  double PipelineTimeMs(const std::vector<double>& stage_costs, int microbatches) const;

  // The most micro-batches per iteration the evaluated template `tmpl` can run with every
  // stage s (0-based, of S) within its GPU memory while keeping min(x, S - s) micro-batches
  // in flight; kNoMicrobatchLimit when memory never binds (always for oobleck-sosp23), 0
  // when some stage does not fit at all.
  static constexpr int kNoMicrobatchLimit = 1 << 29;
  int MaxMicrobatches(const PipelineTemplate& tmpl) const;

  // Recomputes every figure of `tmpl` from node_order and stages (which must be a valid
  // pipeline over tmpl.mix: every node used once, GPUs of each node split without idle
  // GPUs into allowed sizes, layers cut contiguously). Error if malformed or infeasible.
  absl::StatusOr<PipelineTemplate> Evaluate(PipelineTemplate tmpl) const;

 private:
  const std::string& TypeName(int t) const { return problem_.node_types[t].name; }
  // OK, or INVALID_ARGUMENT naming the node type whose costs overflow to infinity.
  static absl::Status CheckFinite(const PlanningProblem& problem, const CostModel& model);

  struct TypeTables {
    std::vector<int> sizes;
    // Per size index: prefix sums over layers of f/g + AR and b/g + AR.
    std::vector<std::vector<double>> forward_prefix, backward_prefix;
    std::vector<double> param_prefix, activation_prefix;  // this type's profile
    // Tensor-parallel stages: per size index, prefix sums of the per-GPU parameter and
    // activation bytes measured at tp = size (empty when the type splits layers instead).
    std::vector<std::vector<double>> tp_param_prefix, tp_activation_prefix;
  };
  // One profile per node type, all of one layer count; tensor-parallel ones of that count
  // too, each at its own degree >= 2.
  static absl::Status ValidateProfiles(const PlanningProblem& problem);
  // One type's tables: the stage sizes it can use and the prefix sums over its layers.
  static TypeTables BuildTypeTables(const NodeType& type, const ModelProfile& profile,
                                    MissingAllreduce missing, StageGpus stage_gpus);
  // The same for a type whose stages run tensor-parallel at `degrees` (and 1).
  static TypeTables BuildTensorParallelTables(const PlanningProblem& problem, int t,
                                              const std::vector<int>& degrees);
  // Evaluate's structural checks: node order, contiguous stages, GPUs, the stage limit.
  absl::Status CheckTemplateShape(const PipelineTemplate& tmpl) const;
  CostModel() = default;
  int SizeIndex(int t, int gpus) const;
  // k * params / g + activations * in_flight: the one memory expression.
  double MemoryBytesInFlight(int t, int gpus, int begin, int end, int in_flight) const;

  PlanningProblem problem_;
  std::string problem_key_;
  int num_layers_ = 0;
  std::vector<TypeTables> types_;
  // Bytes sent after each layer: the largest activation size over the problem's profiles
  // (they agree when they describe the same model), so transfers do not depend on type.
  std::vector<double> boundary_bytes_;
  bool memory_can_bind_ = false;
  std::shared_ptr<ModelTableMemo> allreduce_memo_ = std::make_shared<ModelTableMemo>();
};

}  // namespace oobleck

#endif  // OOBLECK_CORE_COST_MODEL_H_
