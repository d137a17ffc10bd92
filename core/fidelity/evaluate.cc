#include "core/fidelity/evaluate.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/field_path.h"
#include "core/status_macros.h"

namespace oobleck::fidelity {
namespace {

absl::Status Missing(absl::string_view field, absl::string_view what) {
  return FieldError(absl::StatusCode::kFailedPrecondition, field, what);
}

std::string ReplicaField(int stage, int replica) {
  return absl::StrCat("pipeline_list/0/tmp_per_stage/", stage, "/", replica);
}

// What one stage replica runs, looked up once.
struct ReplicaCosts {
  const StageReplica* where = nullptr;
  double compute_s = 0;  // forward + backward of one micro-batch
  double update_s = 0;   // its share of the optimizer step
  double params_bytes = 0;
  double act_mem_bytes = 0;  // kept per micro-batch in flight
  double max_layer_act_bytes = 0;
  double out_bytes = 0;  // sent to the next stage per micro-batch
};

absl::StatusOr<std::string> ChooseModel(const SailorData& data, const SailorPlan& plan,
                                        absl::string_view model) {
  if (!plan.model.empty()) return plan.model;
  if (!model.empty()) return std::string(model);
  const int layers = static_cast<int>(plan.layers_per_stage.back().back()) + 1;
  std::vector<std::string> fits;
  for (const auto& [name, by_tp] : data.layer_sizes) {
    if (!by_tp.empty() && static_cast<int>(by_tp.begin()->second.size()) == layers &&
        data.profiles.contains(name)) {
      fits.push_back(name);
    }
  }
  if (fits.size() == 1) return fits[0];
  return Missing("model",
                 absl::StrCat(": the plan names no model and ", fits.size(),
                              " models of the data have ", layers, " layers; name it (--model)"));
}

absl::StatusOr<const std::vector<LayerTimes>*> TimesFor(const ModelProfile& profile,
                                                        const StageReplica& r, int mbs,
                                                        absl::string_view field) {
  auto gpu = profile.find(r.gpu_type);
  if (gpu == profile.end()) {
    return Missing(field, absl::StrCat(": GPU type \"", r.gpu_type, "\" has no profile"));
  }
  auto batch = gpu->second.find(mbs);
  if (batch == gpu->second.end()) {
    return Missing(field,
                   absl::StrCat(": the profile of ", r.gpu_type, " has no micro-batch size ", mbs));
  }
  auto tp = batch->second.find(r.tp);
  if (tp == batch->second.end()) {
    return Missing(field, absl::StrCat(": the profile of ", r.gpu_type, " at micro-batch size ",
                                       mbs, " has no tp ", r.tp));
  }
  return &tp->second;
}

absl::StatusOr<ReplicaCosts> CostsOf(const SailorData& data, const std::string& model,
                                     const SailorPlan& plan, int stage, int replica) {
  const StageReplica& r = plan.replicas[stage][replica];
  const std::string field = ReplicaField(stage, replica);
  ASSIGN_OR_RETURN(const std::vector<LayerTimes>* times,
                   TimesFor(data.profiles.at(model), r, plan.microbatch_size, field));
  const auto& sizes_by_tp = data.layer_sizes.at(model);
  auto sizes = sizes_by_tp.find(r.tp);
  if (sizes == sizes_by_tp.end()) {
    return Missing(field,
                   absl::StrCat(": llm_info.json has no layer sizes of ", model, " at tp ", r.tp));
  }
  const std::vector<int>& layers = plan.layers_per_stage[stage];
  if (times->size() != sizes->second.size() ||
      static_cast<size_t>(layers.back()) >= times->size()) {
    return Missing(field,
                   absl::StrCat(": the profile has ", times->size(), " layers, llm_info ",
                                sizes->second.size(), ", the plan needs layer ", layers.back()));
  }
  double model_params = 0;
  for (const LayerSizes& s : sizes->second) model_params += s.params_bytes;
  ReplicaCosts c;
  c.where = &r;
  const double mbs = plan.microbatch_size;
  for (int l : layers) {
    const LayerTimes& t = (*times)[l];
    const LayerSizes& s = sizes->second[l];
    c.compute_s += t.forward_s + t.backward_s;
    // update_s is the step of the whole model at this tp: this replica's share is its share
    // of the parameters.
    if (model_params > 0) c.update_s += t.update_s * s.params_bytes / model_params;
    c.params_bytes += s.params_bytes;
    c.act_mem_bytes += s.act_mem_bytes * mbs;
    c.max_layer_act_bytes = std::max(c.max_layer_act_bytes, s.act_mem_bytes * mbs);
  }
  c.out_bytes = sizes->second[layers.back()].act_output_bytes * mbs;
  return c;
}

// GPUs of the whole plan, and whether they all fit in one node of one type and zone.
bool PlanFitsOneNode(const SailorPlan& plan) {
  const StageReplica& first = plan.replicas[0][0];
  int gpus = 0;
  for (const auto& stage : plan.replicas) {
    for (const StageReplica& r : stage) {
      if (r.gpu_type != first.gpu_type || r.zone != first.zone) return false;
      gpus += r.tp;
    }
  }
  return gpus <= first.gpus_per_node;
}

// The measured bandwidth between the groups of `a` and `b`: that pair as measured, else the
// other direction (links are symmetric), else (groups of different sizes not measured as
// such) both ends at the smaller size, the link the transfer cannot exceed. Null if none.
const BandwidthCurve* InterNodeCurve(const SailorData& data, const StageReplica& a,
                                     const StageReplica& b) {
  const int n = std::min(a.tp, b.tp);
  const std::pair<Endpoint, Endpoint> tries[] = {
      {Endpoint{a.zone, a.gpu_type, a.tp}, Endpoint{b.zone, b.gpu_type, b.tp}},
      {Endpoint{b.zone, b.gpu_type, b.tp}, Endpoint{a.zone, a.gpu_type, a.tp}},
      {Endpoint{a.zone, a.gpu_type, n}, Endpoint{b.zone, b.gpu_type, n}},
      {Endpoint{b.zone, b.gpu_type, n}, Endpoint{a.zone, a.gpu_type, n}}};
  for (const auto& key : tries) {
    auto it = data.inter_node.find(key);
    if (it != data.inter_node.end()) return &it->second;
  }
  return nullptr;
}

// Seconds for each of `a`'s tp GPUs to send `bytes` to `b` (each tensor-parallel rank sends
// the whole tensor, over its share of the node's link).
absl::StatusOr<double> TransferSeconds(const SailorData& data, const StageReplica& a,
                                       const StageReplica& b, double bytes, bool one_node,
                                       absl::string_view field) {
  if (bytes <= 0) return 0.0;
  if (one_node) {
    // The measurement for the fewest GPUs that hold both ends (else the largest measured).
    auto gpu = data.intra_node.find(a.gpu_type);
    if (gpu == data.intra_node.end() || gpu->second.empty()) {
      return Missing(field, absl::StrCat(": intra_node_bandwidths.json has no ", a.gpu_type));
    }
    auto curve = gpu->second.lower_bound(a.tp + b.tp);
    if (curve == gpu->second.end()) curve = std::prev(curve);
    const double total = bytes * a.tp;
    return total / curve->second.At(total);
  }
  const BandwidthCurve* curve = InterNodeCurve(data, a, b);
  if (curve == nullptr) {
    return Missing(
        field, absl::StrCat(": no measured bandwidth from ", a.tp, " ", a.gpu_type, " in ", a.zone,
                            " to ", b.tp, " ", b.gpu_type, " in ", b.zone));
  }
  const double total = bytes * a.tp;
  return total / curve->At(total);
}

// One data-parallel pipeline (replica `r` of every stage) under 1F1B: every stage does each
// of its M micro-batches' forward and backward, and sends/receives activations and their
// gradients (blocking, as DeepSpeed's pipeline engine does); the slowest stage sets the
// steady pace, and the others add their time once while the pipeline fills and drains.
struct PipelineTime {
  double total_s = 0, bubble_s = 0, p2p_s = 0;
};

absl::StatusOr<PipelineTime> TimePipeline(const SailorData& data,
                                          const std::vector<ReplicaCosts>& stages, int m,
                                          bool one_node, int r) {
  const int s_count = static_cast<int>(stages.size());
  std::vector<double> boundary(s_count, 0.0);  // after stage s, one direction
  for (int s = 0; s + 1 < s_count; ++s) {
    ASSIGN_OR_RETURN(boundary[s],
                     TransferSeconds(data, *stages[s].where, *stages[s + 1].where,
                                     stages[s].out_bytes, one_node, ReplicaField(s, r)));
  }
  double sum = 0, sum_p2p = 0, slowest = -1, slowest_p2p = 0;
  for (int s = 0; s < s_count; ++s) {
    const double p2p = 2 * boundary[s] + (s > 0 ? 2 * boundary[s - 1] : 0.0);
    const double per_microbatch = stages[s].compute_s + p2p;
    sum += per_microbatch;
    sum_p2p += p2p;
    if (per_microbatch > slowest) {
      slowest = per_microbatch;
      slowest_p2p = p2p;
    }
  }
  PipelineTime t;
  t.total_s = sum + (m - 1) * slowest;
  t.bubble_s = sum - slowest;
  t.p2p_s = sum_p2p + (m - 1) * slowest_p2p;
  return t;
}

// Ring all-reduce of each stage's gradients over its replicas (each tensor-parallel rank
// reduces its own shard, all at once), paced by the slowest link of the ring.
absl::StatusOr<double> SyncSeconds(const SailorData& data,
                                   const std::vector<std::vector<ReplicaCosts>>& costs,
                                   bool one_node) {
  double slowest = 0;
  for (size_t s = 0; s < costs.size(); ++s) {
    const int dp = static_cast<int>(costs[s].size());
    if (dp < 2) continue;
    for (int r = 0; r < dp; ++r) {
      const ReplicaCosts& a = costs[s][r];
      const ReplicaCosts& b = costs[s][(r + 1) % dp];
      ASSIGN_OR_RETURN(const double link, TransferSeconds(data, *a.where, *b.where, a.params_bytes,
                                                          one_node, ReplicaField(s, r)));
      slowest = std::max(slowest, 2.0 * (dp - 1) / dp * link / kAllReduceEfficiency);
    }
  }
  return slowest;
}

absl::StatusOr<GpuMemory> MemoryOf(const ReplicaCosts& c, int in_flight, absl::string_view field) {
  auto capacity = GpuMemoryBytes(c.where->gpu_type);
  if (!capacity.ok()) return Missing(field, absl::StrCat(": ", capacity.status().message()));
  GpuMemory m;
  m.training_state = kTrainingStateBytesPerParameterByte * c.params_bytes;
  // 1F1B keeps the activations of up to (stages − s) micro-batches on stage s; the backward
  // pass of a layer needs one more layer's worth for the gradients it produces.
  m.activations = in_flight * c.act_mem_bytes + c.max_layer_act_bytes;
  m.reserve = kRuntimeReserveFraction * *capacity;
  return m;
}

}  // namespace

absl::StatusOr<double> GpuMemoryBytes(absl::string_view gpu_type) {
  static constexpr std::pair<absl::string_view, double> kGiB[] = {
      {"V100-16", 16},   {"A100-40", 40}, {"A100-80", 80}, {"GH-96", 96},
      {"Titan-RTX", 24}, {"RTX-2080", 8}, {"RTX-3090", 24}};
  for (const auto& [name, gib] : kGiB) {
    if (name == gpu_type) return gib * double(int64_t{1} << 30);
  }
  return absl::FailedPreconditionError(
      absl::StrCat("GPU type \"", gpu_type, "\" has no known memory size"));
}

absl::StatusOr<Evaluation> EvaluateSailorPlan(const SailorData& data, const SailorPlan& plan,
                                              absl::string_view model_override) {
  Evaluation e;
  ASSIGN_OR_RETURN(e.model, ChooseModel(data, plan, model_override));
  if (!data.profiles.contains(e.model) || !data.layer_sizes.contains(e.model)) {
    return Missing("model", absl::StrCat(" \"", e.model, "\" has no profile or layer sizes"));
  }
  const size_t model_layers = data.layer_sizes.at(e.model).begin()->second.size();
  const size_t plan_layers = plan.layers_per_stage.back().back() + 1;
  if (plan_layers != model_layers) {
    return InvalidField("pipeline_list/0/layers_per_stage",
                        absl::StrCat(" covers ", plan_layers, " layers but ", e.model, " has ",
                                     model_layers, ": not a partition of the model"));
  }
  const int stages = static_cast<int>(plan.replicas.size());
  const int dp = static_cast<int>(plan.replicas[0].size());
  e.microbatches = plan.global_batch / (plan.microbatch_size * dp);
  std::vector<std::vector<ReplicaCosts>> costs(stages);
  for (int s = 0; s < stages; ++s) {
    for (int r = 0; r < dp; ++r) {
      ASSIGN_OR_RETURN(costs[s].emplace_back(), CostsOf(data, e.model, plan, s, r));
      e.update_s = std::max(e.update_s, costs[s].back().update_s);
    }
  }
  const bool one_node = PlanFitsOneNode(plan);
  for (int r = 0; r < dp; ++r) {
    std::vector<ReplicaCosts> pipeline;
    for (int s = 0; s < stages; ++s) pipeline.push_back(costs[s][r]);
    ASSIGN_OR_RETURN(const PipelineTime t,
                     TimePipeline(data, pipeline, e.microbatches, one_node, r));
    if (t.total_s > e.pipeline_s) {
      e.pipeline_s = t.total_s;
      e.bubble_s = t.bubble_s;
      e.p2p_s = t.p2p_s;
      e.slowest_pipeline = r;
    }
  }
  ASSIGN_OR_RETURN(e.sync_s, SyncSeconds(data, costs, one_node));
  e.iteration_s = e.pipeline_s + e.sync_s + e.update_s;
  for (int s = 0; s < stages; ++s) {
    auto& row = e.memory.emplace_back();
    for (int r = 0; r < dp; ++r) {
      ASSIGN_OR_RETURN(
          row.emplace_back(),
          MemoryOf(costs[s][r], std::min(e.microbatches, stages - s), ReplicaField(s, r)));
      e.peak_memory_bytes = std::max(e.peak_memory_bytes, row.back().total());
    }
  }
  return e;
}

}  // namespace oobleck::fidelity
