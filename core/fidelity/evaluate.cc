#include "core/fidelity/evaluate.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <tuple>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/field_path.h"
#include "core/status_macros.h"

namespace oobleck::fidelity {
namespace {

absl::Status Missing(absl::string_view field, absl::string_view what) {
  return FieldError(absl::StatusCode::kFailedPrecondition, field, what);
}

std::string ReplicaField(int pipeline, int stage, int replica) {
  return absl::StrCat("pipeline_list/", pipeline, "/tmp_per_stage/", stage, "/", replica);
}

// The nodes of a replica (one, from its first-node fields, when the list is empty).
std::vector<ReplicaNode> NodesOf(const StageReplica& r) {
  if (!r.nodes.empty()) return r.nodes;
  return {ReplicaNode{r.gpu_type, r.gpus_per_node, r.zone, r.tp}};
}

// What one stage replica runs, looked up once.
struct ReplicaCosts {
  const StageReplica* where = nullptr;
  int link_gpus = 0;     // GPUs sharing the first node's link (the replica's GPUs there)
  double compute_s = 0;  // forward + backward of one micro-batch
  double update_s = 0;   // its share of the optimizer step
  double params_bytes = 0;
  double act_mem_bytes = 0;  // kept per micro-batch in flight
  double max_layer_act_bytes = 0;
  double out_bytes = 0;  // sent to the next stage per micro-batch
  double reserve_bytes = 0;
};

// One pipeline_list entry.
struct PipelineView {
  const std::vector<std::vector<int>>* layers;
  const std::vector<std::vector<StageReplica>>* replicas;
  int entry = 0;
};

absl::StatusOr<std::string> ChooseModel(const SailorData& data, const SailorPlan& plan,
                                        absl::string_view model) {
  if (!plan.model.empty()) return plan.model;
  if (!model.empty()) return std::string(model);
  if (plan.layers_per_stage.empty() || plan.layers_per_stage.back().empty()) {
    return InvalidField("pipeline_list/0/layers_per_stage", " must not be empty");
  }
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

// The profile of `gpu_type` at micro-batch size `mbs` and `tp`; FAILED_PRECONDITION naming
// `field` and the key (model/GPU type/mbs/tp) when the data lack it.
absl::StatusOr<const std::vector<LayerTimes>*> TimesFor(const SailorData& data,
                                                        const std::string& model,
                                                        const std::string& gpu_type, int mbs,
                                                        int tp, absl::string_view field) {
  const auto lacking = [&](absl::string_view why) {
    return Missing(
        field, absl::StrCat(": no profile ", ProfileKey{model, gpu_type, mbs, tp}.ToString(),
                            " (model/GPU type/mbs/tp) of Sailor's format (with update times and "
                            "output sizes): ",
                            why));
  };
  auto by_model = data.profiles.find(model);
  if (by_model == data.profiles.end()) return lacking(absl::StrCat(model, " has none"));
  auto gpu = by_model->second.find(gpu_type);
  if (gpu == by_model->second.end()) {
    return lacking(absl::StrCat("GPU type \"", gpu_type, "\" has no profile"));
  }
  auto batch = gpu->second.find(mbs);
  if (batch == gpu->second.end()) {
    return lacking(absl::StrCat("the profile of ", gpu_type, " has no micro-batch size ", mbs));
  }
  auto at_tp = batch->second.find(tp);
  if (at_tp == batch->second.end()) {
    return lacking(
        absl::StrCat("the profile of ", gpu_type, " at micro-batch size ", mbs, " has no tp ", tp));
  }
  return &at_tp->second;
}

// The measured links that bound a transfer between groups `a` and `b`: that pair as measured
// (either direction: links are symmetric) and, for every GPU count m up to the smaller
// group's, the pair measured with m GPUs at both ends. A group's aggregate bandwidth is at
// least what m of its GPUs reach sending at once over the same nodes' links, so the transfer
// runs at the best of them (docs/COST_MODEL.md, "Transfers"). Empty if none is measured.
std::vector<const BandwidthCurve*> InterNodeCurves(const SailorData& data, const Endpoint& a,
                                                   const Endpoint& b) {
  std::vector<const BandwidthCurve*> curves;
  const auto add = [&](const Endpoint& x, const Endpoint& y) {
    for (const auto& key : {std::pair{x, y}, std::pair{y, x}}) {
      auto it = data.inter_node.find(key);
      if (it != data.inter_node.end()) curves.push_back(&it->second);
    }
  };
  add(a, b);
  const int most = std::min(std::get<2>(a), std::get<2>(b));
  // Pairs measured from x's zone and GPU type at m ≤ most GPUs to y's at as many.
  const auto add_smaller = [&](const Endpoint& x, const Endpoint& y) {
    const auto& [zx, gx, nx] = x;
    const auto& [zy, gy, ny] = y;
    for (auto it = data.inter_node.lower_bound({Endpoint{zx, gx, 1}, Endpoint{}});
         it != data.inter_node.end(); ++it) {
      const auto& [from, to] = it->first;
      if (std::get<0>(from) != zx || std::get<1>(from) != gx || std::get<2>(from) > most) break;
      if (std::get<0>(to) == zy && std::get<1>(to) == gy && std::get<2>(to) == std::get<2>(from)) {
        curves.push_back(&it->second);
      }
    }
  };
  add_smaller(a, b);
  add_smaller(b, a);
  return curves;
}

// The in-node measurement for the fewest GPUs that hold `gpus` (else the largest measured).
absl::StatusOr<const BandwidthCurve*> IntraNodeCurve(const SailorData& data,
                                                     const std::string& gpu_type, int gpus,
                                                     absl::string_view field) {
  auto gpu = data.intra_node.find(gpu_type);
  if (gpu == data.intra_node.end() || gpu->second.empty()) {
    return Missing(field, absl::StrCat(": intra_node_bandwidths.json has no ", gpu_type));
  }
  auto curve = gpu->second.lower_bound(gpus);
  if (curve == gpu->second.end()) curve = std::prev(curve);
  return &curve->second;
}

absl::StatusOr<double> NetworkSeconds(const SailorData& data, const Endpoint& a, const Endpoint& b,
                                      double total_bytes, absl::string_view field) {
  const std::vector<const BandwidthCurve*> curves = InterNodeCurves(data, a, b);
  if (curves.empty()) {
    const auto& [za, ga, na] = a;
    const auto& [zb, gb, nb] = b;
    return Missing(field, absl::StrCat(": no measured bandwidth from ", na, " ", ga, " in ", za,
                                       " to ", nb, " ", gb, " in ", zb));
  }
  double bytes_per_s = 0;
  for (const BandwidthCurve* curve : curves) {
    bytes_per_s = std::max(bytes_per_s, curve->At(total_bytes));
  }
  return total_bytes / bytes_per_s;
}

// Seconds for a replica's GPUs on its first node to each send `bytes` to `b` at once, sharing
// that node's link.
absl::StatusOr<double> TransferSeconds(const SailorData& data, const ReplicaCosts& a,
                                       const ReplicaCosts& b, double bytes, bool one_node,
                                       absl::string_view field) {
  if (bytes <= 0) return 0.0;
  const double total = bytes * a.link_gpus;
  if (one_node) {
    ASSIGN_OR_RETURN(const BandwidthCurve* curve,
                     IntraNodeCurve(data, a.where->gpu_type, a.link_gpus + b.link_gpus, field));
    return total / curve->At(total);
  }
  return NetworkSeconds(data, Endpoint{a.where->zone, a.where->gpu_type, a.link_gpus},
                        Endpoint{b.where->zone, b.where->gpu_type, b.link_gpus}, total, field);
}

// Megatron's tensor-parallel all-reduces of one layer's output per micro-batch (forward and
// backward): the embedding's one each way, a transformer layer's two, none for the head.
int TensorParallelAllReduces(int layer, int layers) {
  if (layer == 0) return 2;
  return layer + 1 < layers ? 4 : 0;
}

// A replica over several nodes runs the layers of its profile at tp (measured inside one
// node), but its all-reduces cross the network: each adds the ring over the network minus the
// in-node ring the profile already holds.
absl::StatusOr<double> CrossNodeTpSeconds(const SailorData& data, const StageReplica& r,
                                          const std::vector<LayerSizes>& sizes,
                                          const std::vector<int>& layers, double mbs,
                                          absl::string_view field) {
  const std::vector<ReplicaNode> nodes = NodesOf(r);
  if (nodes.size() < 2) return 0.0;
  ASSIGN_OR_RETURN(const BandwidthCurve* in_node,
                   IntraNodeCurve(data, nodes[0].gpu_type, r.tp, field));
  const double ring = 2.0 * (r.tp - 1) / r.tp;
  double extra = 0;
  for (int l : layers) {
    const int count = TensorParallelAllReduces(l, static_cast<int>(sizes.size()));
    const double bytes = sizes[l].act_output_bytes * mbs;
    if (count == 0 || bytes <= 0) continue;
    double network = 0;
    for (size_t i = 0; i < nodes.size(); ++i) {  // the slowest hop between consecutive nodes
      const ReplicaNode& x = nodes[i];
      const ReplicaNode& y = nodes[(i + 1) % nodes.size()];
      ASSIGN_OR_RETURN(const double hop,
                       NetworkSeconds(data, Endpoint{x.zone, x.gpu_type, 1},
                                      Endpoint{y.zone, y.gpu_type, 1}, ring * bytes, field));
      network = std::max(network, hop);
    }
    extra += count * std::max(0.0, network - ring * bytes / in_node->At(ring * bytes));
  }
  return extra;
}

// Memory the runtime holds beyond tensors on a GPU of `gpu_type`: the measured reserve the
// data carry for it, else kRuntimeReserveFraction of its memory.
absl::StatusOr<double> RuntimeReserveBytes(const SailorData& data, const std::string& gpu_type,
                                           absl::string_view field) {
  auto capacity = GpuMemoryBytes(gpu_type);
  if (!capacity.ok()) return Missing(field, absl::StrCat(": ", capacity.status().message()));
  auto measured = data.runtime_reserve_bytes.find(gpu_type);
  if (measured == data.runtime_reserve_bytes.end()) return kRuntimeReserveFraction * *capacity;
  RETURN_IF_ERROR(CheckRuntimeReserve(measured->second, gpu_type,
                                      absl::StrCat("runtime_reserve_bytes of ", gpu_type)));
  return measured->second;
}

// The profile of each node of the replica, in the order of NodesOf (CheckPlanInputs has
// checked that each exists).
absl::StatusOr<std::vector<const std::vector<LayerTimes>*>> NodeTimes(const SailorData& data,
                                                                      const std::string& model,
                                                                      const StageReplica& r,
                                                                      int mbs,
                                                                      absl::string_view field) {
  std::vector<const std::vector<LayerTimes>*> out;
  for (const ReplicaNode& node : NodesOf(r)) {
    ASSIGN_OR_RETURN(out.emplace_back(), TimesFor(data, model, node.gpu_type, mbs, r.tp, field));
  }
  return out;
}

// Parameter bytes of the model whose optimizer step a profile's update time measures: the
// embedding (layer 0), the first kProfiledTransformerLayers transformer layers and the last
// layer (Sailor's profiler, docs/COST_MODEL.md "Predicting real runs").
double ProfiledModelParamsBytes(const std::vector<LayerSizes>& sizes) {
  const int n = static_cast<int>(sizes.size());
  double bytes = 0;
  for (int l = 0; l < n; ++l) {
    if (l <= kProfiledTransformerLayers || l == n - 1) bytes += sizes[l].params_bytes;
  }
  return bytes;
}

// Layer times of every node type of the replica (the slowest type paces a tp group).
absl::Status AddLayerTimes(const SailorData& data,
                           const std::vector<const std::vector<LayerTimes>*>& node_times,
                           const StageReplica& r, const std::vector<LayerSizes>& sizes,
                           const std::vector<int>& layers, absl::string_view field,
                           ReplicaCosts& c) {
  const double profiled_params = ProfiledModelParamsBytes(sizes);
  const std::vector<ReplicaNode> nodes = NodesOf(r);
  for (size_t i = 0; i < nodes.size(); ++i) {
    const ReplicaNode& node = nodes[i];
    const std::vector<LayerTimes>* times = node_times[i];
    double compute = 0, update = 0;
    for (int l : layers) {
      compute += (*times)[l].forward_s + (*times)[l].backward_s;
      // update_s is the step of the profiler's model at this tp (an AdamW step streams the
      // same bytes per parameter): this replica's step scales with its parameters.
      if (profiled_params > 0) {
        update += (*times)[l].update_s * sizes[l].params_bytes / profiled_params;
      }
    }
    c.compute_s = std::max(c.compute_s, compute);
    c.update_s = std::max(c.update_s, update);
    ASSIGN_OR_RETURN(const double reserve, RuntimeReserveBytes(data, node.gpu_type, field));
    c.reserve_bytes = std::max(c.reserve_bytes, reserve);
  }
  return absl::OkStatus();
}

absl::StatusOr<ReplicaCosts> CostsOf(const SailorData& data, const std::string& model,
                                     const SailorPlan& plan, const PipelineView& pipeline,
                                     int stage, int replica) {
  const StageReplica& r = (*pipeline.replicas)[stage][replica];
  const std::string field = ReplicaField(pipeline.entry, stage, replica);
  ASSIGN_OR_RETURN(const auto node_times, NodeTimes(data, model, r, plan.microbatch_size, field));
  const auto& sizes_by_tp = data.layer_sizes.at(model);
  auto sizes = sizes_by_tp.find(r.tp);
  if (sizes == sizes_by_tp.end()) {
    return Missing(field,
                   absl::StrCat(": llm_info.json has no layer sizes of ", model, " at tp ", r.tp));
  }
  const std::vector<int>& layers = (*pipeline.layers)[stage];
  ReplicaCosts c;
  c.where = &r;
  c.link_gpus = NodesOf(r)[0].gpus;
  RETURN_IF_ERROR(AddLayerTimes(data, node_times, r, sizes->second, layers, field, c));
  const double mbs = plan.microbatch_size;
  ASSIGN_OR_RETURN(const double tp_network,
                   CrossNodeTpSeconds(data, r, sizes->second, layers, mbs, field));
  c.compute_s += tp_network;
  for (int l : layers) {
    const LayerSizes& s = sizes->second[l];
    c.params_bytes += s.params_bytes;
    c.act_mem_bytes += s.act_mem_bytes * mbs;
    c.max_layer_act_bytes = std::max(c.max_layer_act_bytes, s.act_mem_bytes * mbs);
  }
  c.out_bytes = sizes->second[layers.back()].act_output_bytes * mbs;
  return c;
}

// Whether the whole plan fits in one node: one type and zone, every replica on one node, and
// the GPUs of all replicas no more than the node's.
bool PlanFitsOneNode(const std::vector<PipelineView>& pipelines) {
  const StageReplica& first = (*pipelines[0].replicas)[0][0];
  int gpus = 0;
  for (const PipelineView& p : pipelines) {
    for (const auto& stage : *p.replicas) {
      for (const StageReplica& r : stage) {
        if (r.gpu_type != first.gpu_type || r.zone != first.zone || NodesOf(r).size() > 1) {
          return false;
        }
        gpus += r.tp;
      }
    }
  }
  return gpus <= first.gpus_per_node;
}

// Costs of every replica of one pipeline_list entry: [stage][replica].
using EntryCosts = std::vector<std::vector<ReplicaCosts>>;

// What prices a transfer at one end: zone, GPU type and the GPUs sharing the link.
Endpoint LinkKind(const ReplicaCosts& c) {
  return Endpoint{c.where->zone, c.where->gpu_type, c.link_gpus};
}

// Replica r of a stage of `from` replicas exchanges micro-batches with the replicas j ≡ r (mod
// gcd(from, to)) of a neighbouring stage of `to` (micro-batch i runs on replica i mod dp of
// every stage). Those partners, one per link kind, for each residue class: a transfer's time
// depends on nothing else, and this keeps the work linear in the replicas.
std::vector<std::map<Endpoint, const ReplicaCosts*>> PartnerKinds(
    const std::vector<ReplicaCosts>& neighbour, int from) {
  const int to = static_cast<int>(neighbour.size());
  const int g = std::gcd(from, to);
  std::vector<std::map<Endpoint, const ReplicaCosts*>> classes(g);
  for (int j = 0; j < to; ++j) classes[j % g].emplace(LinkKind(neighbour[j]), &neighbour[j]);
  return classes;
}

// Seconds for `to` to rebuild a boundary tensor of `bytes` it received, as Sailor's engine
// does in reconstruct_tensor (deepspeed/utils.py of eth-easl/sailor, called by
// _exec_forward_pass for activations and _exec_backward_pass for gradients): it reads the
// partition's meta to the host (a sync), builds the whole tensor as zeros on the host and
// copies it to the GPU (`torch.zeros(n).cuda()`), then its tensor-parallel ranks all-gather
// their parts into it over the node's link.
absl::StatusOr<double> RebuildSeconds(const SailorData& data, const ReplicaCosts& to, double bytes,
                                      absl::string_view field) {
  if (bytes <= 0) return 0.0;
  double seconds = bytes / kHostTensorBytesPerS;
  const int tp = to.where->tp;
  if (tp > 1) {
    ASSIGN_OR_RETURN(const BandwidthCurve* curve,
                     IntraNodeCurve(data, NodesOf(*to.where)[0].gpu_type, tp, field));
    seconds += (tp - 1.0) / tp * bytes / curve->At(bytes);
  }
  return seconds;
}

// Per micro-batch of each replica: its compute plus its blocking transfers, the slowest
// partner on each side (DeepSpeed's pipeline engine sends and receives blocking).
struct StepCosts {
  std::vector<std::vector<double>> step_s, p2p_s;  // [stage][replica]
};

absl::StatusOr<StepCosts> StepsOf(const SailorData& data, const EntryCosts& costs, bool one_node,
                                  int entry) {
  StepCosts out;
  const int stages = static_cast<int>(costs.size());
  for (int s = 0; s < stages; ++s) {
    const int dp = static_cast<int>(costs[s].size());
    auto& steps = out.step_s.emplace_back(dp, 0.0);
    auto& p2p = out.p2p_s.emplace_back(dp, 0.0);
    for (int side : {s - 1, s + 1}) {
      if (side < 0 || side >= stages) continue;
      const auto classes = PartnerKinds(costs[side], dp);
      for (int r = 0; r < dp; ++r) {
        double slowest = 0;
        for (const auto& [kind, partner] : classes[r % classes.size()]) {
          const ReplicaCosts& from = side < s ? *partner : costs[s][r];
          const ReplicaCosts& to = side < s ? costs[s][r] : *partner;
          // DeepSpeed's PipelineEngine partitions a boundary tensor over the sender's
          // tensor-parallel group: each rank sends 1/tp of it (the receiver rebuilds it:
          // RebuildSeconds), so the sender's node carries its ranks' share of one copy.
          ASSIGN_OR_RETURN(const double t,
                           TransferSeconds(data, from, to, from.out_bytes / from.where->tp,
                                           one_node, ReplicaField(entry, s, r)));
          slowest = std::max(slowest, t);
        }
        p2p[r] += 2 * slowest;  // the activation one way, its gradient back
        // What this replica receives over the boundary (the activation from s − 1, the
        // gradient of its own output from s + 1) it rebuilds before using.
        const double received = side < s ? classes[r % classes.size()].begin()->second->out_bytes
                                         : costs[s][r].out_bytes;
        ASSIGN_OR_RETURN(const double rebuild,
                         RebuildSeconds(data, costs[s][r], received, ReplicaField(entry, s, r)));
        p2p[r] += rebuild;
      }
    }
    for (int r = 0; r < dp; ++r) {
      steps[r] = costs[s][r].compute_s + p2p[r];
    }
  }
  return out;
}

// Under 1F1B replica r of stage s runs its M_s = N / dp_s micro-batches back to back once the
// first arrives; micro-batch r's trip through the other stages (replica r mod dp of each)
// fills and drains around it. The slowest (stage, replica) sets the time; with one dp for all
// stages this is Σ_s c_s + (M − 1) max_s c_s of the slowest pipeline.
void TimeEntry(const StepCosts& steps, int samples_in_microbatches, int entry, Evaluation& e) {
  const int stages = static_cast<int>(steps.step_s.size());
  for (int s = 0; s < stages; ++s) {
    const int dp = static_cast<int>(steps.step_s[s].size());
    const int m = samples_in_microbatches / dp;
    for (int r = 0; r < dp; ++r) {
      double others = 0, others_p2p = 0;
      for (int o = 0; o < stages; ++o) {
        if (o == s) continue;
        const int at = r % static_cast<int>(steps.step_s[o].size());
        others += steps.step_s[o][at];
        others_p2p += steps.p2p_s[o][at];
      }
      const double total = m * steps.step_s[s][r] + others;
      if (total > e.pipeline_s) {
        e.pipeline_s = total;
        e.bubble_s = others;
        e.p2p_s = m * steps.p2p_s[s][r] + others_p2p;
        e.slowest_pipeline = r;
        e.slowest_pipeline_entry = entry;
      }
    }
  }
}

// The stage of `p` that holds `layer`.
int StageHolding(const PipelineView& p, int layer) {
  for (size_t s = 0; s < p.layers->size(); ++s) {
    if ((*p.layers)[s].back() >= layer) return static_cast<int>(s);
  }
  return static_cast<int>(p.layers->size()) - 1;
}

// The ring all-reducing one layer's gradients: every replica holding it in every pipeline, in
// order, and its links, one per (sender, receiver) kind (a link's time depends on nothing else).
struct Ring {
  int members = 0;
  std::map<std::pair<Endpoint, Endpoint>, std::pair<const ReplicaCosts*, const ReplicaCosts*>>
      links;
};

Ring RingHolding(const std::vector<PipelineView>& views, const std::vector<EntryCosts>& costs,
                 int layer) {
  std::vector<const ReplicaCosts*> members;
  for (size_t q = 0; q < views.size(); ++q) {
    for (const ReplicaCosts& c : costs[q][StageHolding(views[q], layer)]) members.push_back(&c);
  }
  Ring ring;
  ring.members = static_cast<int>(members.size());
  for (size_t i = 0; i < members.size(); ++i) {
    const ReplicaCosts* to = members[(i + 1) % members.size()];
    ring.links.emplace(std::pair{LinkKind(*members[i]), LinkKind(*to)}, std::pair{members[i], to});
  }
  return ring;
}

// Ring all-reduce of each stage's gradients over every replica holding its layers (its own
// and, with several pipelines, those holding its first layer in the others; each
// tensor-parallel rank reduces its own shard, all at once), paced by the ring's slowest link;
// the slowest stage sets the time.
absl::StatusOr<double> SyncSeconds(const SailorData& data, const std::vector<PipelineView>& views,
                                   const std::vector<EntryCosts>& costs, bool one_node) {
  std::map<int, Ring> rings;  // by first layer
  double slowest = 0;
  for (size_t p = 0; p < views.size(); ++p) {
    for (size_t s = 0; s < costs[p].size(); ++s) {
      const int first_layer = (*views[p].layers)[s].front();
      auto it = rings.find(first_layer);
      if (it == rings.end())
        it = rings.emplace(first_layer, RingHolding(views, costs, first_layer)).first;
      const int n = it->second.members;
      if (n < 2) continue;
      const double bytes = costs[p][s][0].params_bytes;
      for (const auto& [kinds, link] : it->second.links) {
        ASSIGN_OR_RETURN(const double t,
                         TransferSeconds(data, *link.first, *link.second, bytes, one_node,
                                         ReplicaField(views[p].entry, s, 0)));
        slowest = std::max(slowest, 2.0 * (n - 1) / n * t / kAllReduceEfficiency);
      }
    }
  }
  return slowest;
}

// The flat buffer DeepSpeed's allreduce_bucket copies a stage's gradients into before it
// all-reduces them (deepspeed/engine.py of eth-easl/sailor: _exec_reduce_grads →
// buffered_allreduce_fallback → allreduce_no_retain → allreduce_bucket → flatten), on every
// rank each iteration, dp 1 included; a bucket closes past kGradientBucketBytes. It is
// allocated after the last backward pass freed the activations, but PyTorch's caching
// allocator serves a request from one cached segment, never from several, so the freed
// activations serve it only if one of their tensors alone was as large; llm_info gives a
// layer's total, not its tensors, so the buffer is always counted (docs/COST_MODEL.md).
double GradientBucketBytes(const ReplicaCosts& c) {
  return std::min(c.params_bytes, kGradientBucketBytes);
}

GpuMemory MemoryOf(const ReplicaCosts& c, int in_flight) {
  GpuMemory m;
  m.training_state = kTrainingStateBytesPerParameterByte * c.params_bytes + GradientBucketBytes(c);
  // 1F1B keeps the activations of up to (stages − s) micro-batches on stage s; the backward
  // pass of a layer needs one more layer's worth for the gradients it produces.
  m.activations = in_flight * c.act_mem_bytes + c.max_layer_act_bytes;
  m.reserve = c.reserve_bytes;
  return m;
}

}  // namespace

absl::StatusOr<double> GpuMemoryBytes(absl::string_view gpu_type) {
  // Published sizes; the mixed RTX cluster's RTX-2080 is an 11 GiB card (Sailor's description
  // of that cluster, docs/COST_MODEL.md).
  static constexpr std::pair<absl::string_view, double> kGiB[] = {
      {"V100-16", 16},   {"A100-40", 40},  {"A100-80", 80}, {"GH-96", 96},
      {"Titan-RTX", 24}, {"RTX-2080", 11}, {"RTX-3090", 24}};
  for (const auto& [name, gib] : kGiB) {
    if (name == gpu_type) return gib * double(int64_t{1} << 30);
  }
  return absl::FailedPreconditionError(
      absl::StrCat("GPU type \"", gpu_type, "\" has no known memory size"));
}

absl::Status CheckRuntimeReserve(double bytes, absl::string_view gpu_type,
                                 absl::string_view field) {
  RETURN_IF_ERROR(ValidateRuntimeReserve(bytes, field));
  auto capacity = GpuMemoryBytes(gpu_type);
  if (capacity.ok() && bytes >= *capacity) {
    return InvalidValue(
        field, absl::StrCat("less than a ", gpu_type, "'s memory (", *capacity, " bytes)"), bytes);
  }
  return absl::OkStatus();
}

namespace {

std::vector<PipelineView> ViewsOf(const SailorPlan& plan) {
  std::vector<PipelineView> views = {{&plan.layers_per_stage, &plan.replicas, 0}};
  for (size_t p = 0; p < plan.other_pipelines.size(); ++p) {
    views.push_back({&plan.other_pipelines[p].layers_per_stage, &plan.other_pipelines[p].replicas,
                     static_cast<int>(p) + 1});
  }
  return views;
}

// What CheckPlanInputs asks of one replica: each node's profile (as many layers as the
// model's sizes) and memory size, and the layer sizes at its tp.
absl::Status CheckReplicaInputs(const SailorData& data, const std::string& model, int mbs,
                                const StageReplica& r, const std::string& field) {
  const auto& sizes_by_tp = data.layer_sizes.find(model);
  const std::vector<ReplicaNode> nodes = NodesOf(r);
  for (size_t k = 0; k < nodes.size(); ++k) {
    const std::string node_field = absl::StrCat(field, "/0/", k);
    ASSIGN_OR_RETURN(const std::vector<LayerTimes>* times,
                     TimesFor(data, model, nodes[k].gpu_type, mbs, r.tp, node_field));
    if (auto memory = GpuMemoryBytes(nodes[k].gpu_type); !memory.ok()) {
      return Missing(node_field, absl::StrCat(": ", memory.status().message()));
    }
    if (sizes_by_tp == data.layer_sizes.end() || !sizes_by_tp->second.contains(r.tp)) {
      return Missing(
          absl::StrCat(field, "/1"),
          absl::StrCat(": llm_info.json has no layer sizes of ", model, " at tp ", r.tp));
    }
    const size_t layers = sizes_by_tp->second.at(r.tp).size();
    if (times->size() != layers) {
      return Missing(node_field,
                     absl::StrCat(": the profile has ", times->size(), " layers, llm_info ", layers,
                                  " (", nodes[k].gpu_type, ")"));
    }
  }
  return absl::OkStatus();
}

// Every pipeline's stages have layers and replicas and cover the model's layers, and each
// stage's replicas split the pipeline's micro-batches evenly (what SailorPlanFromJson checks,
// again for plans built by other code).
absl::Status CheckShape(const SailorData& data, const std::string& model, const SailorPlan& plan,
                        const std::vector<PipelineView>& views) {
  const size_t model_layers = data.layer_sizes.at(model).begin()->second.size();
  const int64_t samples = plan.microbatch_size * static_cast<int64_t>(views.size());
  for (const PipelineView& p : views) {
    const std::string path = absl::StrCat("pipeline_list/", p.entry);
    if (p.layers->empty() || p.layers->size() != p.replicas->size()) {
      return InvalidField(path, ": needs one layer list and one replica list per stage");
    }
    for (size_t s = 0; s < p.layers->size(); ++s) {
      const int64_t dp = static_cast<int64_t>((*p.replicas)[s].size());
      if ((*p.layers)[s].empty() || dp == 0 || samples <= 0 ||
          plan.global_batch % (samples * dp) != 0) {
        return InvalidField(absl::StrCat(path, "/tmp_per_stage/", s),
                            ": a stage needs layers, replicas, and gbs a multiple of mbs × dp × "
                            "pipelines");
      }
    }
    int next = 0;  // layers 0 … n−1 in order, each once
    for (const auto& stage : *p.layers) {
      for (int l : stage) {
        if (l != next++) {
          return InvalidField(absl::StrCat(path, "/layers_per_stage"),
                              ": must list layers 0 … n-1 in order, each once");
        }
      }
    }
    const size_t plan_layers = next;
    if (plan_layers != model_layers) {
      return InvalidField(absl::StrCat(path, "/layers_per_stage"),
                          absl::StrCat(" covers ", plan_layers, " layers but ", model, " has ",
                                       model_layers, ": not a partition of the model"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status CheckPlanInputs(const SailorData& data, const SailorPlan& plan,
                             const std::string& model) {
  for (const PipelineView& p : ViewsOf(plan)) {
    for (size_t s = 0; s < p.replicas->size(); ++s) {
      for (size_t r = 0; r < (*p.replicas)[s].size(); ++r) {
        RETURN_IF_ERROR(
            CheckReplicaInputs(data, model, plan.microbatch_size, (*p.replicas)[s][r],
                               ReplicaField(p.entry, static_cast<int>(s), static_cast<int>(r))));
      }
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<Evaluation> EvaluateSailorPlan(const SailorData& data, const SailorPlan& plan,
                                              absl::string_view model_override) {
  Evaluation e;
  ASSIGN_OR_RETURN(e.model, ChooseModel(data, plan, model_override));
  if (!data.profiles.contains(e.model) || !data.layer_sizes.contains(e.model)) {
    return Missing("model", absl::StrCat(" \"", e.model, "\" has no profile or layer sizes"));
  }
  const std::vector<PipelineView> views = ViewsOf(plan);
  RETURN_IF_ERROR(CheckShape(data, e.model, plan, views));
  RETURN_IF_ERROR(CheckPlanInputs(data, plan, e.model));
  // Micro-batches of each pipeline_list entry, split over each stage's replicas.
  const int per_entry = plan.global_batch / (plan.microbatch_size * static_cast<int>(views.size()));
  e.microbatches = per_entry / static_cast<int>(plan.replicas[0].size());
  std::vector<EntryCosts> costs(views.size());
  for (const PipelineView& p : views) {
    for (size_t s = 0; s < p.replicas->size(); ++s) {
      auto& row = costs[p.entry].emplace_back();
      for (size_t r = 0; r < (*p.replicas)[s].size(); ++r) {
        ASSIGN_OR_RETURN(row.emplace_back(), CostsOf(data, e.model, plan, p, s, r));
        e.update_s = std::max(e.update_s, row.back().update_s);
      }
    }
  }
  const bool one_node = PlanFitsOneNode(views);
  for (const PipelineView& p : views) {
    ASSIGN_OR_RETURN(const StepCosts steps, StepsOf(data, costs[p.entry], one_node, p.entry));
    TimeEntry(steps, per_entry, p.entry, e);
  }
  ASSIGN_OR_RETURN(e.sync_s, SyncSeconds(data, views, costs, one_node));
  e.iteration_s = e.pipeline_s + e.sync_s + e.update_s;
  for (const EntryCosts& entry : costs) {
    const int stages = static_cast<int>(entry.size());
    auto& memory = &entry == &costs[0] ? e.memory : e.other_pipelines_memory.emplace_back();
    for (int s = 0; s < stages; ++s) {
      auto& row = memory.emplace_back();
      const int m = per_entry / static_cast<int>(entry[s].size());
      for (const ReplicaCosts& c : entry[s]) {
        row.push_back(MemoryOf(c, std::min(m, stages - s)));
        e.peak_memory_bytes = std::max(e.peak_memory_bytes, row.back().total());
      }
    }
  }
  return e;
}

}  // namespace oobleck::fidelity
