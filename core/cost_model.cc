#include "core/cost_model.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/field_path.h"
#include "core/shown_value.h"
#include "core/status_macros.h"

namespace oobleck {
namespace {

constexpr int kAlwaysFits = INT_MAX / 4;
constexpr int kMaxMicrobatches = 1 << 20;

}  // namespace

absl::StatusOr<CostModelKind> ParseCostModelKind(std::string_view name) {
  if (name.empty() || name == "1f1b") return CostModelKind::kOneFOneB;
  if (name == "oobleck-sosp23") return CostModelKind::kOobleckSosp23;
  return InvalidField("cost_model", absl::StrCat(" ", Quote(name),
                                                 " is unknown; use \"1f1b\" "
                                                 "or \"oobleck-sosp23\""));
}

std::string_view CostModelName(CostModelKind kind) {
  return kind == CostModelKind::kOneFOneB ? "1f1b" : "oobleck-sosp23";
}

std::string_view StageGpusName(StageGpus policy) {
  switch (policy) {
    case StageGpus::kAny:
      return "STAGE_GPUS_ANY";
    case StageGpus::kDivisors:
      return "STAGE_GPUS_DIVISORS";
    case StageGpus::kEqualHalves:
      return "STAGE_GPUS_EQUAL_HALVES";
  }
  return "STAGE_GPUS_ANY";
}

bool StageGpusAllow(StageGpus policy, int node_gpus, int gpus) {
  const auto power_of_two = [](int n) { return n > 0 && (n & (n - 1)) == 0; };
  switch (policy) {
    case StageGpus::kAny:
      return true;
    case StageGpus::kDivisors:
      return gpus > 0 && node_gpus % gpus == 0;
    case StageGpus::kEqualHalves:
      // Every composition of node_gpus into powers of two is a split develop can reach.
      return power_of_two(gpus) && gpus <= node_gpus;
  }
  return false;
}

std::vector<int> PlanningProblem::TensorParallelDegrees(int t) const {
  std::vector<int> degrees;
  if (t >= static_cast<int>(tp_profiles.size())) return degrees;
  const int G = node_types[t].gpus_per_node;
  for (const auto& profile : tp_profiles[t]) {
    const int tp = profile ? profile->key.tp : 0;
    if (tp >= 2 && tp <= G && StageGpusAllow(stage_gpus, G, tp)) degrees.push_back(tp);
  }
  std::sort(degrees.begin(), degrees.end());
  degrees.erase(std::unique(degrees.begin(), degrees.end()), degrees.end());
  return degrees;
}

std::string PlanningProblem::CacheKey() const {
  // Node-type names are the only free text: each is written with its length first, so no
  // name, whatever separators it holds, can reproduce another cluster's key.
  std::string key =
      absl::StrFormat("%s|M=%d|k=%a|inter=%a|ar=%d|types=%d", CostModelName(cost_model),
                      microbatches, optimizer_state_multiplier, inter_node_bytes_per_s,
                      static_cast<int>(missing_allreduce), node_types.size());
  // Only a restricting policy is written, so that every key of the default (and every
  // template stored under one, server/etcd_template_store.h) stays what it was.
  if (stage_gpus != StageGpus::kAny) {
    absl::StrAppendFormat(&key, "|sg=%d", static_cast<int>(stage_gpus));
  }
  for (size_t i = 0; i < node_types.size(); ++i) {
    const NodeType& t = node_types[i];
    absl::StrAppendFormat(&key, "|%d#%s:%d:%a:%a:%s", t.name.size(), t.name, t.gpus_per_node,
                          t.gpu_memory_bytes, t.intra_node_bytes_per_s,
                          i < profiles.size() && profiles[i] ? profiles[i]->Fingerprint() : "-");
    // Only a type with tensor-parallel profiles writes them, so that every key of tp = 1
    // profiles alone stays what it was, and no such key is ever one with them.
    if (i < tp_profiles.size() && !tp_profiles[i].empty()) {
      absl::StrAppendFormat(&key, "|tp%d", tp_profiles[i].size());
      for (const auto& profile : tp_profiles[i]) {
        absl::StrAppendFormat(&key, ":%d=%s", profile ? profile->key.tp : 0,
                              profile ? profile->Fingerprint() : "-");
      }
    }
  }
  return key;
}

namespace {

// Every time the model can form stays within [kMinModelComputeMs, kMaxModelTimeMs]
// (docs/ERRORS.md#limits): then every figure an answer carries (iteration times over up to
// kMaxGlobalBatch micro-batches, all-reduces, speed-ups) is finite and > 0. About 31
// years; a picosecond.
constexpr double kMaxModelTimeMs = 1e12;
constexpr double kMinModelComputeMs = 1e-9;

// The whole model's compute on every stage size (a tiny relative speed divides it up past
// the bound), its memory, and the largest boundary transfer over each link (a tiny
// bandwidth) are in range. An overflow is the input's fault, named here, never a false
// "infeasible" reason or an infinite time later.
struct WholeModelCosts {
  double min_compute_ms = 0;  // forward + backward, over the stage sizes: the least
  double max_forward_ms = 0;  // and the largest of each
  double max_backward_ms = 0;
  double param_bytes = 0;
  double largest_boundary_bytes = 0;
  double across_allreduce_ms = 0;  // the layers' largest allreduce_across_nodes_ms, summed
};

absl::Status CheckModelCosts(const PlanningProblem& problem, int t, const WholeModelCosts& c) {
  const NodeType& type = problem.node_types[t];
  auto beyond = [&](const std::string& what, double value) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "node type %d (%s): %s %s; check its profile's layer times and all-reduce tables, "
        "derive.relative_speed and the bandwidths",
        t, type.name, what,
        std::isfinite(value)
            ? absl::StrFormat("is %g ms, more than the limit of %g ms", value, kMaxModelTimeMs)
            : std::string("overflows to infinity")));
  };
  if (!(c.max_forward_ms + c.max_backward_ms <= kMaxModelTimeMs)) {  // also inf, NaN
    return beyond("the whole model's compute time", c.max_forward_ms + c.max_backward_ms);
  }
  if (!(c.min_compute_ms >= kMinModelComputeMs)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "node type %d (%s): the whole model's compute time is %g ms, less than %g ms (every "
        "plan would take no time); check its profile's forward_ms and backward_ms and "
        "derive.relative_speed",
        t, type.name, c.min_compute_ms, kMinModelComputeMs));
  }
  if (!std::isfinite(c.param_bytes * (1 + problem.optimizer_state_multiplier))) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "node type %d (%s): the model's parameter memory times optimizer_state_multiplier "
        "overflows to infinity",
        t, type.name));
  }
  if (!(c.across_allreduce_ms <= kMaxModelTimeMs)) {
    return beyond("the sum of the layers' allreduce_across_nodes_ms", c.across_allreduce_ms);
  }
  const double intra_ms = c.largest_boundary_bytes / type.intra_node_bytes_per_s * 1e3;
  if (!(intra_ms <= kMaxModelTimeMs)) {
    return beyond("a layer's output transfer at intra_node_bytes_per_s", intra_ms);
  }
  const double inter = problem.inter_node_bytes_per_s;
  const double inter_ms = c.largest_boundary_bytes / inter * 1e3;
  if (problem.cost_model == CostModelKind::kOneFOneB && !(inter_ms <= kMaxModelTimeMs)) {
    return beyond("a layer's output transfer at inter_node_bytes_per_s", inter_ms);
  }
  // The ring estimate of the all-reduce across pipelines (where none is measured).
  const double ring_ms = 2 * c.param_bytes / inter * 1e3;
  if (inter > 0 && !(ring_ms <= kMaxModelTimeMs)) {
    return beyond("the ring all-reduce of its parameters at inter_node_bytes_per_s", ring_ms);
  }
  return absl::OkStatus();
}

// The layers' largest allreduce_across_nodes_ms (over P), summed.
double AcrossAllreduceMs(const ModelProfile& profile) {
  double sum = 0;
  for (const LayerProfile& layer : profile.layers) {
    double largest = 0;
    for (const auto& [P, ms] : layer.allreduce_across_nodes_ms) largest = std::max(largest, ms);
    sum += largest;
  }
  return sum;
}

}  // namespace

absl::Status CostModel::CheckFinite(const PlanningProblem& problem, const CostModel& model) {
  const int L = model.num_layers_;
  double largest_boundary = 0;
  for (double b : model.boundary_bytes_) largest_boundary = std::max(largest_boundary, b);
  for (size_t t = 0; t < model.types_.size(); ++t) {
    const TypeTables& tables = model.types_[t];
    WholeModelCosts c;
    c.min_compute_ms = std::numeric_limits<double>::infinity();
    for (size_t i = 0; i < tables.sizes.size(); ++i) {
      const double forward = tables.forward_prefix[i][L], backward = tables.backward_prefix[i][L];
      c.max_forward_ms = std::max(c.max_forward_ms, forward);
      c.max_backward_ms = std::max(c.max_backward_ms, backward);
      c.min_compute_ms = std::min(c.min_compute_ms, forward + backward);
    }
    c.param_bytes = tables.param_prefix[L];
    for (const std::vector<double>& params : tables.tp_param_prefix) {
      c.param_bytes = std::max(c.param_bytes, params[L]);
    }
    c.largest_boundary_bytes = largest_boundary;
    c.across_allreduce_ms = AcrossAllreduceMs(*problem.profiles[t]);
    RETURN_IF_ERROR(CheckModelCosts(problem, static_cast<int>(t), c));
  }
  return absl::OkStatus();
}

namespace {

bool FiniteNonNegative(double value) { return std::isfinite(value) && value >= 0; }

}  // namespace

absl::Status ValidateProblemSettings(const PlanningProblem& problem,
                                     absl::string_view cluster_prefix) {
  const bool one_f_one_b = problem.cost_model == CostModelKind::kOneFOneB;
  const int M = problem.microbatches;
  if (M < 0) return InvalidValue("microbatches", ">= 0", M);
  if (M > kMaxMicrobatches) {
    return InvalidValue("microbatches", absl::StrCat("<= ", kMaxMicrobatches), M);
  }
  if (one_f_one_b && M == 0) return InvalidValue("microbatches", ">= 1 for cost_model \"1f1b\"", M);
  if (!FiniteNonNegative(problem.optimizer_state_multiplier)) {
    return InvalidValue("optimizer_state_multiplier", "finite and >= 0",
                        problem.optimizer_state_multiplier);
  }
  // oobleck-sosp23 ignores transfers, so only 1f1b needs a network bandwidth.
  const double inter_node = problem.inter_node_bytes_per_s;
  if (!FiniteNonNegative(inter_node) || (one_f_one_b && inter_node <= 0)) {
    return InvalidValue(absl::StrCat(cluster_prefix, "inter_node_bytes_per_s"),
                        one_f_one_b ? "> 0 for cost_model \"1f1b\"" : "finite and >= 0",
                        inter_node);
  }
  RETURN_IF_ERROR(
      ValidateNodeTypes(problem.node_types, absl::StrCat(cluster_prefix, "node_types")));
  return absl::OkStatus();
}

absl::Status CostModel::ValidateProfiles(const PlanningProblem& problem) {
  const size_t num_types = problem.node_types.size();
  if (problem.profiles.size() != num_types) {
    return InvalidField("profiles", absl::StrFormat(": %d node types but %d profiles", num_types,
                                                    problem.profiles.size()));
  }
  int layers = 0;
  for (size_t t = 0; t < num_types; ++t) {
    const auto& profile = problem.profiles[t];
    if (!profile) {
      return InvalidField(absl::StrCat("node_types[", t, "]"), " has no profile");
    }
    if (t == 0) layers = profile->num_layers();
    if (profile->num_layers() != layers || layers == 0) {
      return InvalidField(absl::StrCat("node_types[", t, "]"),
                          absl::StrFormat(" (%s): profile %s has %d layers, node_types[0] has %d",
                                          problem.node_types[t].name, profile->key.ToString(),
                                          profile->num_layers(), layers));
    }
  }
  if (problem.tp_profiles.size() > num_types) {
    return InvalidField("tp_profiles", absl::StrFormat(": %d node types but %d lists", num_types,
                                                       problem.tp_profiles.size()));
  }
  for (size_t t = 0; t < problem.tp_profiles.size(); ++t) {
    std::vector<int> seen;
    for (size_t j = 0; j < problem.tp_profiles[t].size(); ++j) {
      const auto& profile = problem.tp_profiles[t][j];
      const std::string where = absl::StrCat("node_types[", t, "].tp_profiles[", j, "]");
      if (!profile) return InvalidField(where, " is not set");
      const int tp = profile->key.tp;
      if (tp < 2 || std::find(seen.begin(), seen.end(), tp) != seen.end()) {
        return InvalidField(where, absl::StrFormat(" (%s): tp must be >= 2 and appear once",
                                                   profile->key.ToString()));
      }
      seen.push_back(tp);
      if (profile->num_layers() != layers) {
        return InvalidField(
            where, absl::StrFormat(" (%s) has %d layers, node_types[0] has %d",
                                   profile->key.ToString(), profile->num_layers(), layers));
      }
    }
  }
  return absl::OkStatus();
}

CostModel::TypeTables CostModel::BuildTensorParallelTables(const PlanningProblem& problem, int t,
                                                           const std::vector<int>& degrees) {
  const ModelProfile& base = *problem.profiles[t];
  const int L = base.num_layers();
  auto measured_at = [&](int g) -> const ModelProfile& {
    if (g == 1) return base;
    for (const auto& profile : problem.tp_profiles[t]) {
      if (profile->key.tp == g) return *profile;
    }
    return base;  // not reached: every degree comes from tp_profiles[t]
  };
  TypeTables tables;
  tables.sizes.push_back(1);
  tables.sizes.insert(tables.sizes.end(), degrees.begin(), degrees.end());
  for (int g : tables.sizes) {
    // Measured at tp = g: what one GPU of the stage spends and holds; nothing is divided.
    const ModelProfile& profile = measured_at(g);
    std::vector<double> fwd(L + 1, 0), bwd(L + 1, 0), params(L + 1, 0), acts(L + 1, 0);
    for (int l = 0; l < L; ++l) {
      const LayerProfile& layer = profile.layers[l];
      fwd[l + 1] = fwd[l] + layer.forward_ms;
      bwd[l + 1] = bwd[l] + layer.backward_ms;
      params[l + 1] = params[l] + layer.param_bytes;
      acts[l + 1] = acts[l] + layer.activation_bytes;
    }
    tables.forward_prefix.push_back(std::move(fwd));
    tables.backward_prefix.push_back(std::move(bwd));
    tables.tp_param_prefix.push_back(std::move(params));
    tables.tp_activation_prefix.push_back(std::move(acts));
  }
  // The whole layers' bytes, as a node holds or receives them (core/replan): tp = 1's.
  tables.param_prefix = tables.tp_param_prefix[0];
  tables.activation_prefix = tables.tp_activation_prefix[0];
  return tables;
}

CostModel::TypeTables CostModel::BuildTypeTables(const NodeType& type, const ModelProfile& profile,
                                                 MissingAllreduce missing, StageGpus stage_gpus) {
  const int L = profile.num_layers();
  TypeTables tables;
  for (int g = 1; g <= type.gpus_per_node; ++g) {
    if (!StageGpusAllow(stage_gpus, type.gpus_per_node, g)) continue;
    bool measured = true;
    for (const LayerProfile& layer : profile.layers) {
      measured &= g == 1 || layer.allreduce_in_node_ms.count(g) > 0;
    }
    if (!measured && missing != MissingAllreduce::kRing) continue;
    std::vector<double> fwd(L + 1, 0), bwd(L + 1, 0);
    for (int l = 0; l < L; ++l) {
      const LayerProfile& layer = profile.layers[l];
      double allreduce_ms = 0;
      if (g > 1) {
        auto it = layer.allreduce_in_node_ms.find(g);
        allreduce_ms = it != layer.allreduce_in_node_ms.end()
                           ? it->second
                           : RingAllreduceMs(g, layer.param_bytes, type.intra_node_bytes_per_s);
      }
      fwd[l + 1] = fwd[l] + layer.forward_ms / g + allreduce_ms;
      bwd[l + 1] = bwd[l] + layer.backward_ms / g + allreduce_ms;
    }
    tables.sizes.push_back(g);
    tables.forward_prefix.push_back(std::move(fwd));
    tables.backward_prefix.push_back(std::move(bwd));
  }
  tables.param_prefix.assign(L + 1, 0);
  tables.activation_prefix.assign(L + 1, 0);
  for (int l = 0; l < L; ++l) {
    tables.param_prefix[l + 1] = tables.param_prefix[l] + profile.layers[l].param_bytes;
    tables.activation_prefix[l + 1] =
        tables.activation_prefix[l] + profile.layers[l].activation_bytes;
  }
  return tables;
}

absl::StatusOr<CostModel> CostModel::Create(PlanningProblem problem) {
  RETURN_IF_ERROR(ValidateProblemSettings(problem));
  RETURN_IF_ERROR(ValidateProfiles(problem));
  const size_t num_types = problem.node_types.size();
  problem.derived_from.resize(num_types);
  CostModel model;
  model.num_layers_ = problem.profiles[0]->num_layers();
  const int L = model.num_layers_;
  model.boundary_bytes_.assign(L, 0);
  for (const auto& profile : problem.profiles) {
    for (int l = 0; l < L; ++l) {
      model.boundary_bytes_[l] =
          std::max(model.boundary_bytes_[l], profile->layers[l].activation_bytes);
    }
  }
  model.types_.reserve(num_types);
  for (size_t t = 0; t < num_types; ++t) {
    const std::vector<int> degrees = problem.TensorParallelDegrees(static_cast<int>(t));
    model.types_.push_back(degrees.empty()
                               ? BuildTypeTables(problem.node_types[t], *problem.profiles[t],
                                                 problem.missing_allreduce, problem.stage_gpus)
                               : BuildTensorParallelTables(problem, static_cast<int>(t), degrees));
  }
  RETURN_IF_ERROR(CheckFinite(problem, model));
  model.problem_ = std::move(problem);
  model.problem_key_ = model.problem_.CacheKey();
  if (model.kind() == CostModelKind::kOneFOneB) {
    for (int t = 0; t < model.num_types(); ++t) {
      model.memory_can_bind_ |= model.MaxStagesFromEnd(t, 1, 0, L) < kAlwaysFits;
      // A split stage needs less per GPU than one GPU; a tensor-parallel one may not.
      if (model.types_[t].tp_param_prefix.empty()) continue;
      for (int g : model.stage_sizes(t)) {
        model.memory_can_bind_ |= model.MaxStagesFromEnd(t, g, 0, L) < kAlwaysFits;
      }
    }
  }
  return model;
}

int CostModel::SizeIndex(int t, int gpus) const {
  const auto& sizes = types_[t].sizes;
  auto it = std::lower_bound(sizes.begin(), sizes.end(), gpus);
  return it != sizes.end() && *it == gpus ? static_cast<int>(it - sizes.begin()) : -1;
}

double CostModel::ForwardMs(int t, int gpus, int begin, int end) const {
  const auto& p = types_[t].forward_prefix[SizeIndex(t, gpus)];
  return p[end] - p[begin];
}

double CostModel::BackwardMs(int t, int gpus, int begin, int end) const {
  const auto& p = types_[t].backward_prefix[SizeIndex(t, gpus)];
  return p[end] - p[begin];
}

double CostModel::ComputeMs(int t, int gpus, int begin, int end) const {
  const int i = SizeIndex(t, gpus);
  const auto& f = types_[t].forward_prefix[i];
  const auto& b = types_[t].backward_prefix[i];
  return (f[end] - f[begin]) + (b[end] - b[begin]);
}

double CostModel::TransferMs(int t, int last_layer, Link link) const {
  if (kind() != CostModelKind::kOneFOneB || link == Link::kNone) return 0;
  const double bytes_per_s = link == Link::kIntraNode
                                 ? problem_.node_types[t].intra_node_bytes_per_s
                                 : problem_.inter_node_bytes_per_s;
  return boundary_bytes_[last_layer] / bytes_per_s * 1e3;
}

double CostModel::StageCostMs(int t, int gpus, int begin, int end, Link in, Link out) const {
  return ComputeMs(t, gpus, begin, end) + TransferMs(t, begin - 1, in) +
         TransferMs(t, end - 1, out);
}

CostModel::GpuMemoryParts CostModel::MemoryParts(int t, int gpus, int begin, int end,
                                                 int in_flight) const {
  const TypeTables& tables = types_[t];
  if (!tables.tp_param_prefix.empty()) {  // measured per GPU at tp = gpus
    const int i = SizeIndex(t, gpus);
    const std::vector<double>& p = tables.tp_param_prefix[i];
    const std::vector<double>& a = tables.tp_activation_prefix[i];
    return {problem_.optimizer_state_multiplier * (p[end] - p[begin]),
            (a[end] - a[begin]) * in_flight};
  }
  const double params = tables.param_prefix[end] - tables.param_prefix[begin];
  const double acts = tables.activation_prefix[end] - tables.activation_prefix[begin];
  return {problem_.optimizer_state_multiplier * params / gpus, acts * in_flight};
}

double CostModel::MemoryBytesInFlight(int t, int gpus, int begin, int end, int in_flight) const {
  const GpuMemoryParts parts = MemoryParts(t, gpus, begin, end, in_flight);
  return parts.training_state_bytes + parts.activation_bytes;
}

double CostModel::MemoryBytesPerGpu(int t, int gpus, int begin, int end,
                                    int stages_from_end) const {
  const int in_flight = std::min(std::max(problem_.microbatches, 1), stages_from_end);
  return MemoryBytesInFlight(t, gpus, begin, end, in_flight);
}

int CostModel::MaxMicrobatches(const PipelineTemplate& tmpl) const {
  if (kind() != CostModelKind::kOneFOneB) return kNoMicrobatchLimit;
  const int S = static_cast<int>(tmpl.stages.size());
  int limit = kNoMicrobatchLimit;
  for (int s = 0; s < S; ++s) {
    const Stage& st = tmpl.stages[s];
    const double memory = problem_.node_types[st.node_type].gpu_memory_bytes;
    auto fits = [&](int in_flight) {
      return MemoryBytesInFlight(st.node_type, st.gpus, st.layer_begin, st.layer_end, in_flight) <=
             memory;
    };
    if (fits(S - s)) continue;  // min(x, S - s) never exceeds S - s
    if (!fits(0)) return 0;
    // Largest y < S - s that fits; then x <= y.
    int lo = 0, hi = S - s - 1;
    while (lo < hi) {
      const int mid = (lo + hi + 1) / 2;
      if (fits(mid)) {
        lo = mid;
      } else {
        hi = mid - 1;
      }
    }
    limit = std::min(limit, lo);
  }
  return limit;
}

int CostModel::MaxStagesFromEnd(int t, int gpus, int begin, int end) const {
  if (kind() != CostModelKind::kOneFOneB) return kAlwaysFits;
  const double memory = problem_.node_types[t].gpu_memory_bytes;
  const int m = problem_.microbatches;
  if (MemoryBytesPerGpu(t, gpus, begin, end, m) <= memory) return kAlwaysFits;
  // Largest r < M with memory(r) <= capacity; the same expression as Fits() decides.
  int lo = 0, hi = m - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (MemoryBytesPerGpu(t, gpus, begin, end, mid) <= memory) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  return lo;
}

bool CostModel::Fits(int t, int gpus, int begin, int end, int stages_from_end) const {
  return stages_from_end <= MaxStagesFromEnd(t, gpus, begin, end);
}

double CostModel::PipelineTimeMs(const std::vector<double>& stage_costs) const {
  return PipelineTimeMs(stage_costs, problem_.microbatches);
}

CostModel::PipelineTimeParts CostModel::TimeParts(const std::vector<double>& stage_costs) const {
  PipelineTimeParts parts;
  parts.stages = static_cast<int>(stage_costs.size());
  if (stage_costs.empty()) return parts;
  for (double c : stage_costs) parts.sum_ms += c;
  if (kind() == CostModelKind::kOneFOneB) {
    parts.max_ms = *std::max_element(stage_costs.begin(), stage_costs.end());
    return parts;
  }
  const int S = parts.stages;
  for (int i = 1; i < S; ++i) {
    if (stage_costs[i] >= stage_costs[parts.kstar]) parts.kstar = i;
  }
  parts.max_ms = stage_costs[parts.kstar];
  for (int i = parts.kstar; i < S; ++i) parts.tail_ms += stage_costs[i];
  return parts;
}

double CostModel::PipelineTimeMs(const std::vector<double>& stage_costs, int microbatches) const {
  return PipelineTimeMs(TimeParts(stage_costs), microbatches);
}

absl::Status CostModel::CheckTemplateShape(const PipelineTemplate& tmpl) const {
  const int n = tmpl.num_nodes();
  NodeMix counts(num_types(), 0);
  for (int i = 0; i < n; ++i) {
    if (tmpl.node_order[i] < 0 || tmpl.node_order[i] >= num_types()) {
      return InvalidField(absl::StrCat("node_order[", i, "]"),
                          absl::StrCat(" = ", tmpl.node_order[i],
                                       " is not a node type index (0 to ", num_types() - 1, ")"));
    }
    ++counts[tmpl.node_order[i]];
  }
  if (counts != tmpl.mix) {
    return InvalidField("node_order", " does not use every node of the mix once");
  }
  const int S = static_cast<int>(tmpl.stages.size());
  std::vector<int> gpus_used(n, 0);
  int next_layer = 0, last_node = -1;
  for (int s = 0; s < S; ++s) {
    const Stage& st = tmpl.stages[s];
    const std::string where = absl::StrCat("stages[", s, "]");
    if (st.layer_begin != next_layer || st.layer_end <= st.layer_begin ||
        st.layer_end > num_layers_) {
      return InvalidField(where,
                          absl::StrFormat(" has layers [%d, %d) but must start at layer %d "
                                          "and end after it, at most at %d",
                                          st.layer_begin, st.layer_end, next_layer, num_layers_));
    }
    if (st.node_index < 0 || st.node_index >= n) {
      return InvalidField(
          absl::StrCat(where, ".node_index"),
          absl::StrFormat(" = %d is not a node of the template (0 to %d)", st.node_index, n - 1));
    }
    if (st.node_index < last_node || st.node_index > last_node + 1) {
      return InvalidField(
          absl::StrCat(where, ".node_index"),
          absl::StrFormat(" = %d but must be %s", st.node_index,
                          last_node < 0 ? "0 (the first node)"
                                        : absl::StrFormat("%d (the previous stage's node) or %d",
                                                          last_node, last_node + 1)));
    }
    if (st.node_type != tmpl.node_order[st.node_index]) {
      return InvalidField(
          absl::StrCat(where, ".node_type"),
          absl::StrFormat(" %s does not match its node %d, a %s node", TypeName(st.node_type),
                          st.node_index, TypeName(tmpl.node_order[st.node_index])));
    }
    if (SizeIndex(st.node_type, st.gpus) < 0) {
      return InvalidField(absl::StrCat(where, ".gpus"),
                          absl::StrFormat(" = %d is not a stage size a %s node allows", st.gpus,
                                          TypeName(st.node_type)));
    }
    gpus_used[st.node_index] += st.gpus;
    next_layer = st.layer_end;
    last_node = st.node_index;
  }
  if (next_layer != num_layers_ || last_node != n - 1) {
    return InvalidField("stages", absl::StrFormat(" cover layers [0, %d) on nodes 0 to %d but "
                                                  "must cover [0, %d) on nodes 0 to %d",
                                                  next_layer, last_node, num_layers_, n - 1));
  }
  for (int i = 0; i < n; ++i) {
    const int gpus = problem_.node_types[tmpl.node_order[i]].gpus_per_node;
    if (gpus_used[i] != gpus) {
      return InvalidField(
          "stages", absl::StrFormat(" on node %d use %d GPUs but a %s node has %d", i, gpus_used[i],
                                    TypeName(tmpl.node_order[i]), gpus));
    }
  }
  if (kind() == CostModelKind::kOobleckSosp23 && problem_.microbatches > 0 &&
      S > problem_.microbatches) {
    // n_k = M - q + 1 would drop to zero or below: Oobleck's formula needs S <= M.
    return absl::FailedPreconditionError(absl::StrFormat(
        "oobleck-sosp23 with M = %d micro-batches allows at most %d stages; the template has %d",
        problem_.microbatches, problem_.microbatches, S));
  }
  return absl::OkStatus();
}

absl::StatusOr<PipelineTemplate> CostModel::Evaluate(PipelineTemplate tmpl) const {
  RETURN_IF_ERROR(CheckTemplateShape(tmpl));
  const int S = static_cast<int>(tmpl.stages.size());
  std::vector<double> costs(S);
  for (int s = 0; s < S; ++s) {
    Stage& st = tmpl.stages[s];
    const Link in = s == 0                                           ? Link::kNone
                    : tmpl.stages[s - 1].node_index == st.node_index ? Link::kIntraNode
                                                                     : Link::kInterNode;
    const Link out = s == S - 1                                       ? Link::kNone
                     : tmpl.stages[s + 1].node_index == st.node_index ? Link::kIntraNode
                                                                      : Link::kInterNode;
    st.forward_ms = ForwardMs(st.node_type, st.gpus, st.layer_begin, st.layer_end);
    st.backward_ms = BackwardMs(st.node_type, st.gpus, st.layer_begin, st.layer_end);
    st.cost_ms = StageCostMs(st.node_type, st.gpus, st.layer_begin, st.layer_end, in, out);
    st.p2p_out_ms = TransferMs(st.node_type, st.layer_end - 1, out);
    st.memory_bytes_per_gpu =
        MemoryBytesPerGpu(st.node_type, st.gpus, st.layer_begin, st.layer_end, S - s);
    if (!Fits(st.node_type, st.gpus, st.layer_begin, st.layer_end, S - s)) {
      return absl::FailedPreconditionError(absl::StrFormat(
          "stage %d (layers [%d, %d) on %d GPU(s) of %s) needs %.0f bytes per GPU, more than "
          "its %.0f",
          s, st.layer_begin, st.layer_end, st.gpus, problem_.node_types[st.node_type].name,
          st.memory_bytes_per_gpu, problem_.node_types[st.node_type].gpu_memory_bytes));
    }
    costs[s] = st.cost_ms;
  }
  tmpl.iteration_time_ms = PipelineTimeMs(costs);
  return tmpl;
}

}  // namespace oobleck
