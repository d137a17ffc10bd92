// Infeasibility explanations of the template search: why no pipeline over a mix exists.
#include <algorithm>
#include <climits>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/cost_model.h"
#include "core/search.h"

namespace oobleck {
namespace {

// Fewest stages a node of type t can be split into.
int MinStagesPerNode(const CostModel& model, int t) {
  const int G = model.node_type(t).gpus_per_node;
  std::vector<int> best(G + 1, INT_MAX / 2);
  best[0] = 0;
  for (int g = 1; g <= G; ++g) {
    for (int s : model.stage_sizes(t)) {
      if (s <= g) best[g] = std::min(best[g], best[g - s] + 1);
    }
  }
  return best[G];
}

// The stage size of type t whose GPUs hold layer l with the least bytes each: the widest
// when stages split layers (parameters divide, activations do not), the least measured one
// when they run tensor-parallel (docs/COST_MODEL.md#tensor-parallel-stages).
int LeastMemorySize(const CostModel& model, int t, int l) {
  const std::vector<int>& sizes = model.stage_sizes(t);
  if (model.problem().TensorParallelDegrees(t).empty()) return sizes.back();
  int best = sizes.back();
  for (int g : sizes) {
    const double bytes = model.MemoryBytesPerGpu(t, g, l, l + 1, 1);
    if (bytes < model.MemoryBytesPerGpu(t, best, l, l + 1, 1)) best = g;
  }
  return best;
}

// Bytes of GPU memory, over all their GPUs, stages of type t need for the whole model with
// one micro-batch in flight at least: one GPU's k * params + activations when stages split
// layers; with tensor-parallel stages, per layer the least over the sizes g of g GPUs' bytes.
double LeastModelBytes(const CostModel& model, int t) {
  const int L = model.num_layers();
  if (model.problem().TensorParallelDegrees(t).empty()) {
    return model.MemoryBytesPerGpu(t, 1, 0, L, 1);
  }
  double sum = 0;
  for (int l = 0; l < L; ++l) {
    double least = model.MemoryBytesPerGpu(t, 1, l, l + 1, 1);
    for (int g : model.stage_sizes(t)) {
      least = std::min(least, g * model.MemoryBytesPerGpu(t, g, l, l + 1, 1));
    }
    sum += least;
  }
  return sum;
}

// Why no pipeline over `mix` fits in GPU memory under 1f1b.
std::string ExplainMemory(const CostModel& model, const NodeMix& mix) {
  constexpr double kGiB = 1024.0 * 1024 * 1024;
  const auto& types = model.problem().node_types;
  const int L = model.num_layers();
  // A layer that does not fit even alone, as the last stage, on the stage size of any node
  // type of the mix that holds it in the least memory per GPU.
  for (int l = 0; l < L; ++l) {
    bool fits_somewhere = false;
    for (int t = 0; t < model.num_types() && !fits_somewhere; ++t) {
      if (mix[t] == 0) continue;
      fits_somewhere = model.Fits(t, LeastMemorySize(model, t, l), l, l + 1, 1);
    }
    if (!fits_somewhere) {
      std::string where;
      for (int t = 0; t < model.num_types(); ++t) {
        if (mix[t] == 0) continue;
        const int g = LeastMemorySize(model, t, l);
        absl::StrAppendFormat(&where, "%s%s: %.3f GiB per GPU on %d GPU(s) > %.3f GiB",
                              where.empty() ? "" : "; ", types[t].name,
                              model.MemoryBytesPerGpu(t, g, l, l + 1, 1) / kGiB, g,
                              types[t].gpu_memory_bytes / kGiB);
      }
      return absl::StrFormat("layer %d does not fit in GPU memory even alone (%s)", l, where);
    }
  }
  double capacity = 0;
  for (int t = 0; t < model.num_types(); ++t) {
    capacity += mix[t] * types[t].gpus_per_node * types[t].gpu_memory_bytes;
  }
  double needed = 0;
  for (int t = 0; t < model.num_types(); ++t) {
    if (mix[t] == 0) continue;
    // Whole model on one GPU with one micro-batch in flight: k * params + activations.
    const double n = LeastModelBytes(model, t);
    needed = needed == 0 ? n : std::min(needed, n);
  }
  if (needed > capacity) {
    return absl::StrFormat(
        "the mix has %.2f GiB of GPU memory in all but the model needs at least %.2f GiB "
        "(optimizer state x parameters + activations of one micro-batch)",
        capacity / kGiB, needed / kGiB);
  }
  return absl::StrFormat(
      "no layer cut fits: every pipeline over this mix has a stage that exceeds its GPU "
      "memory with min(M=%d, stages after it) micro-batches in flight",
      model.problem().microbatches);
}

}  // namespace

std::string ExplainInfeasible(const CostModel& model, const NodeMix& mix) {
  const auto& types = model.problem().node_types;
  const int L = model.num_layers();
  int min_stages = 0;
  for (int t = 0; t < model.num_types(); ++t) {
    if (mix[t] == 0) continue;
    const int per_node = MinStagesPerNode(model, t);
    if (per_node >= INT_MAX / 2) {
      return absl::StrFormat(
          "the %d GPUs of a %s node cannot be split into stage sizes with in-node all-reduce "
          "data (allowed: 1 and the sizes every layer measured); ask for ring estimates",
          types[t].gpus_per_node, types[t].name);
    }
    min_stages += per_node * mix[t];
  }
  if (min_stages > L) {
    return absl::StrFormat(
        "the mix needs at least %d stages (every GPU busy, stage sizes limited to those with "
        "in-node all-reduce data) but the model has only %d layers",
        min_stages, L);
  }
  if (model.kind() == CostModelKind::kOobleckSosp23 && model.problem().microbatches > 0 &&
      min_stages > model.problem().microbatches) {
    return absl::StrFormat(
        "oobleck-sosp23 with M = %d micro-batches allows at most %d stages, but the mix needs "
        "at least %d (every GPU busy, stage sizes limited to those with in-node all-reduce "
        "data); raise M, use M = 0 (Oobleck's formula without M) or cost model 1f1b",
        model.problem().microbatches, model.problem().microbatches, min_stages);
  }
  if (model.kind() == CostModelKind::kOneFOneB) return ExplainMemory(model, mix);
  return "no pipeline over this mix exists";
}

}  // namespace oobleck
