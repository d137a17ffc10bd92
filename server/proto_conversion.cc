#include "server/proto_conversion.h"

#include <algorithm>
#include <set>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/cluster.h"
#include "core/fidelity/evaluate.h"
#include "core/field_path.h"
#include "core/shown_value.h"
#include "core/status_macros.h"

namespace oobleck::server {
namespace {

// Copies a proto map of counts -> ms into a core map, rejecting counts < 1.
absl::Status CopyCountMap(const google::protobuf::Map<int32_t, double>& in, absl::string_view field,
                          std::map<int, double>* out) {
  for (const auto& [count, ms] : in) {
    if (count < 1) {
      return InvalidField(field, absl::StrCat(" key must be >= 1 (got ", count, ")"));
    }
    (*out)[count] = ms;
  }
  return absl::OkStatus();
}

// Copies an in-node all-reduce map, keys read in `convention`, by GPU count.
absl::Status CopyInNodeMap(const google::protobuf::Map<int32_t, double>& in,
                           absl::string_view field, AllreduceKey convention,
                           std::map<int, double>* out) {
  for (const auto& [key, ms] : in) {
    absl::StatusOr<int> gpus = InNodeKeyGpus(convention, key);
    if (!gpus.ok()) return InvalidField(field, gpus.status().message());
    (*out)[*gpus] = ms;
  }
  return absl::OkStatus();
}

}  // namespace

pb::ProfileInfo ToProfileInfo(const ModelProfile& profile) {
  pb::ProfileInfo info;
  info.set_model(profile.key.model);
  info.set_gpu_type(profile.key.gpu_type);
  info.set_microbatch_size(profile.key.microbatch_size);
  info.set_num_layers(profile.num_layers());
  info.set_fingerprint(profile.Fingerprint());
  double forward_ms = 0, backward_ms = 0, param_bytes = 0;
  for (const LayerProfile& layer : profile.layers) {
    forward_ms += layer.forward_ms;
    backward_ms += layer.backward_ms;
    param_bytes += layer.param_bytes;
  }
  info.set_total_forward_ms(forward_ms);
  info.set_total_backward_ms(backward_ms);
  info.set_total_param_bytes(param_bytes);
  for (int gpus : profile.AllreduceInNodeGpus()) info.add_allreduce_in_node_gpus(gpus);
  info.set_allreduce_key(ToProtoAllreduceKey(profile.allreduce_key));
  info.set_tp(profile.key.tp);
  if (profile.runtime_reserve_bytes) info.set_runtime_reserve_bytes(*profile.runtime_reserve_bytes);
  return info;
}

absl::Status ApplyRuntimeReserve(const pb::LoadProfileRequest& request, ModelProfile* profile) {
  if (!request.has_runtime_reserve_bytes()) return absl::OkStatus();
  RETURN_IF_ERROR(fidelity::CheckRuntimeReserve(request.runtime_reserve_bytes(),
                                                profile->key.gpu_type, "runtime_reserve_bytes"));
  profile->runtime_reserve_bytes = request.runtime_reserve_bytes();
  return absl::OkStatus();
}

absl::StatusOr<AllreduceKey> FromProtoAllreduceKey(pb::AllreduceKey key, absl::string_view field) {
  switch (key) {
    case pb::ALLREDUCE_KEY_GPUS:
      return AllreduceKey::kGpus;
    case pb::ALLREDUCE_KEY_GPUS_MINUS_ONE:
      return AllreduceKey::kGpusMinusOne;
    default:
      return InvalidField(field, absl::StrCat(" has no value ", static_cast<int>(key)));
  }
}

pb::AllreduceKey ToProtoAllreduceKey(AllreduceKey key) {
  return key == AllreduceKey::kGpus ? pb::ALLREDUCE_KEY_GPUS : pb::ALLREDUCE_KEY_GPUS_MINUS_ONE;
}

absl::StatusOr<StageGpus> FromProtoStageGpus(pb::StageGpus policy, absl::string_view field) {
  switch (policy) {
    case pb::STAGE_GPUS_ANY:
      return StageGpus::kAny;
    case pb::STAGE_GPUS_DIVISORS:
      return StageGpus::kDivisors;
    case pb::STAGE_GPUS_EQUAL_HALVES:
      return StageGpus::kEqualHalves;
    default:
      return InvalidField(field, absl::StrCat(" has no value ", static_cast<int>(policy)));
  }
}

absl::StatusOr<std::vector<LayerProfile>> FromProtoLayers(const pb::ProfileLayers& layers,
                                                          absl::string_view field,
                                                          AllreduceKey convention) {
  if (layers.layers().empty()) {
    return InvalidField(absl::StrCat(field, ".layers"), " must not be empty");
  }
  std::vector<LayerProfile> out;
  out.reserve(layers.layers_size());
  for (int i = 0; i < layers.layers_size(); ++i) {
    const pb::LayerProfile& in = layers.layers(i);
    const std::string prefix = absl::StrCat(field, ".layers[", i, "]");
    LayerProfile layer;
    layer.forward_ms = in.forward_ms();
    layer.backward_ms = in.backward_ms();
    layer.param_bytes = in.param_bytes();
    layer.activation_bytes = in.activation_bytes();
    layer.update_ms = in.update_ms();
    layer.activation_output_bytes = in.activation_output_bytes();
    RETURN_IF_ERROR(CopyInNodeMap(in.allreduce_in_node_ms(),
                                  absl::StrCat(prefix, ".allreduce_in_node_ms"), convention,
                                  &layer.allreduce_in_node_ms));
    RETURN_IF_ERROR(CopyCountMap(in.allreduce_across_nodes_ms(),
                                 absl::StrCat(prefix, ".allreduce_across_nodes_ms"),
                                 &layer.allreduce_across_nodes_ms));
    out.push_back(std::move(layer));
  }
  return out;
}

void ToProtoMix(const NodeMix& mix, pb::NodeMix* out) {
  out->clear_counts();
  for (int count : mix) out->add_counts(count);
}

void ToProtoTemplate(const PipelineTemplate& tmpl, const PlanningProblem& problem,
                     pb::PipelineTemplate* out) {
  const std::vector<NodeType>& types = problem.node_types;
  out->set_num_nodes(tmpl.num_nodes());
  out->set_iteration_time_ms(tmpl.iteration_time_ms);
  out->set_microbatches(problem.microbatches);  // the M CostModel::Evaluate computed it for
  int num_gpus = 0;
  std::vector<bool> tensor_parallel(types.size());  // per node type
  for (size_t t = 0; t < types.size(); ++t) {
    tensor_parallel[t] = !problem.TensorParallelDegrees(static_cast<int>(t)).empty();
  }
  for (const Stage& stage : tmpl.stages) {
    pb::Stage* s = out->add_stages();
    if (tensor_parallel[stage.node_type] && stage.gpus > 1) s->set_tensor_parallel(stage.gpus);
    s->set_layer_begin(stage.layer_begin);
    s->set_layer_end(stage.layer_end);
    s->set_node_index(stage.node_index);
    s->set_node_type(types[stage.node_type].name);
    s->set_gpus(stage.gpus);
    s->set_forward_ms(stage.forward_ms);
    s->set_backward_ms(stage.backward_ms);
    s->set_cost_ms(stage.cost_ms);
    s->set_memory_bytes_per_gpu(stage.memory_bytes_per_gpu);
    s->set_p2p_out_ms(stage.p2p_out_ms);
    num_gpus += stage.gpus;
  }
  ToProtoMix(tmpl.mix, out->mutable_mix());
  out->set_mix_label(MixLabel(tmpl.mix, types));
  for (int type : tmpl.node_order) out->add_node_order(types[type].name);
  out->set_num_gpus(num_gpus);
  std::set<std::string> derived;  // sorted and unique
  for (size_t t = 0; t < types.size() && t < tmpl.mix.size(); ++t) {
    if (tmpl.mix[t] > 0 && t < problem.derived_from.size() && !problem.derived_from[t].empty()) {
      derived.insert(types[t].gpu_type);
    }
  }
  for (const std::string& gpu_type : derived) out->add_derived_gpu_types(gpu_type);
}

void ToProtoMixTemplate(const PlannedMix& planned, const PlanningProblem& problem,
                        pb::MixTemplate* out) {
  const MixResult& result = *planned.result;
  ToProtoMix(result.mix, out->mutable_mix());
  out->set_mix_label(MixLabel(result.mix, problem.node_types));
  out->set_feasible(result.feasible);
  if (result.feasible) {
    ToProtoTemplate(result.best, problem, out->mutable_template_());
  } else {
    out->set_infeasible_reason(result.infeasible_reason);
  }
  out->set_cache_hit(planned.cache_hit);
  out->set_shared_cache_hit(planned.shared_cache_hit);
}

void SetProtoNodes(const std::vector<ClusterNode>& nodes, const PlanningProblem& problem,
                   pb::PlanRequest* request) {
  request->clear_nodes();
  std::vector<int> counts(problem.node_types.size(), 0);
  for (const ClusterNode& node : nodes) {
    pb::Node* out = request->add_nodes();
    out->set_id(node.id);
    out->set_node_type(problem.node_types[node.type].name);
    ++counts[node.type];
  }
  for (int i = 0; i < request->cluster().node_types_size(); ++i) {
    request->mutable_cluster()->mutable_node_types(i)->set_count(counts[i]);
  }
}

namespace {

// Whether two templates are the same in every field ToProtoTemplate reads (exact doubles):
// then their messages are equal too.
bool SameTemplate(const PipelineTemplate& a, const PipelineTemplate& b) {
  if (a.mix != b.mix || a.node_order != b.node_order ||
      a.iteration_time_ms != b.iteration_time_ms || a.stages.size() != b.stages.size()) {
    return false;
  }
  for (size_t k = 0; k < a.stages.size(); ++k) {
    const Stage &x = a.stages[k], &y = b.stages[k];
    if (x.layer_begin != y.layer_begin || x.layer_end != y.layer_end ||
        x.node_index != y.node_index || x.node_type != y.node_type || x.gpus != y.gpus ||
        x.forward_ms != y.forward_ms || x.backward_ms != y.backward_ms || x.cost_ms != y.cost_ms ||
        x.memory_bytes_per_gpu != y.memory_bytes_per_gpu || x.p2p_out_ms != y.p2p_out_ms) {
      return false;
    }
  }
  return true;
}

}  // namespace

namespace {

// A string of a plan being converted: moved out of a plan the caller gives up, else copied
// (a fleet's plan has thousands of ids and idle reasons).
std::string&& Take(std::string& s) { return std::move(s); }
const std::string& Take(const std::string& s) { return s; }

// ToProtoPlan of a const plan (Plan = const ClusterPlan) or of one whose strings move.
template <typename Plan>
void FillProtoPlan(Plan& plan, const PlanningProblem& problem, pb::ClusterPlan* out) {
  out->set_global_batch(plan.global_batch);
  out->mutable_pipelines()->Reserve(plan.pipelines.size());
  // A fleet's hundreds of pipelines share a few dozen templates: each distinct one (by
  // mix, then every field) is converted once and copied for the others.
  absl::flat_hash_map<NodeMix, std::vector<int>> converted;  // mix -> pipeline indices
  for (size_t i = 0; i < plan.pipelines.size(); ++i) {
    auto& p = plan.pipelines[i];
    pb::PlannedPipeline* pp = out->add_pipelines();
    std::vector<int>& same_mix = converted[p.tmpl.mix];
    auto same = std::find_if(same_mix.begin(), same_mix.end(),
                             [&](int j) { return SameTemplate(plan.pipelines[j].tmpl, p.tmpl); });
    if (same != same_mix.end()) {
      pp->mutable_template_()->CopyFrom(out->pipelines(*same).template_());
    } else {
      ToProtoTemplate(p.tmpl, problem, pp->mutable_template_());
      same_mix.push_back(static_cast<int>(i));
    }
    pp->mutable_node_ids()->Reserve(p.node_ids.size());
    for (auto& id : p.node_ids) pp->add_node_ids(Take(id));
    pp->set_microbatches(p.microbatches);
    pp->set_time_ms(p.time_ms);
  }
  out->set_iteration_time_ms(plan.iteration_time_ms);
  out->set_pipeline_time_ms(plan.pipeline_time_ms);
  out->set_allreduce_ms(plan.allreduce_ms);
  out->set_fault_tolerance(plan.fault_tolerance());
  out->set_price_per_hour(plan.price_per_hour);
  out->mutable_idle_nodes()->Reserve(plan.idle.size());
  for (auto& idle : plan.idle) {
    pb::IdleNode* node = out->add_idle_nodes();
    node->set_node_id(Take(idle.id));
    node->set_node_type(problem.node_types[idle.type].name);
    node->set_reason(Take(idle.reason));
  }
}

}  // namespace

void ToProtoPlan(const ClusterPlan& plan, const PlanningProblem& problem, pb::ClusterPlan* out) {
  FillProtoPlan(plan, problem, out);
}

void ToProtoPlan(ClusterPlan&& plan, const PlanningProblem& problem, pb::ClusterPlan* out) {
  FillProtoPlan(plan, problem, out);
}

namespace {

absl::Status NotANodeType(const std::string& field, const std::string& name) {
  return InvalidField(field, absl::StrCat(" ", Quote(name), " is not a node type of the cluster"));
}

// One pipeline of a plan message, `i` its index in the plan under `field`. Field paths are
// built only for an error: a fleet's plan has hundreds of pipelines.
template <typename Message>  // const pb::PlannedPipeline (copies), or one whose ids move
absl::StatusOr<PlannedPipeline> FromProtoPipeline(Message& in, int i,
                                                  const std::vector<NodeType>& types,
                                                  const std::string& field) {
  const int num_types = static_cast<int>(types.size());
  auto where = [&] { return absl::StrCat(field, ".pipelines[", i, "].template"); };
  if (!in.has_template_()) return InvalidField(where(), " is required");
  const pb::PipelineTemplate& t = in.template_();
  PlannedPipeline p;
  p.tmpl.mix.assign(num_types, 0);
  p.tmpl.node_order.reserve(t.node_order_size());
  for (int j = 0; j < t.node_order_size(); ++j) {
    const int type = FindNodeType(types, t.node_order(j));
    if (type < 0) {
      return NotANodeType(absl::StrCat(where(), ".node_order[", j, "]"), t.node_order(j));
    }
    p.tmpl.node_order.push_back(type);
    ++p.tmpl.mix[type];
  }
  p.tmpl.stages.reserve(t.stages_size());
  for (int k = 0; k < t.stages_size(); ++k) {
    const pb::Stage& in_stage = t.stages(k);
    const int type = FindNodeType(types, in_stage.node_type());
    if (type < 0) {
      return NotANodeType(absl::StrCat(where(), ".stages[", k, "].node_type"),
                          in_stage.node_type());
    }
    Stage stage;
    stage.layer_begin = in_stage.layer_begin();
    stage.layer_end = in_stage.layer_end();
    stage.node_index = in_stage.node_index();
    stage.node_type = type;
    stage.gpus = in_stage.gpus();
    p.tmpl.stages.push_back(stage);
  }
  if constexpr (std::is_const_v<Message>) {
    p.node_ids.assign(in.node_ids().begin(), in.node_ids().end());
  } else {
    p.node_ids.reserve(in.node_ids_size());
    for (std::string& id : *in.mutable_node_ids()) p.node_ids.push_back(std::move(id));
  }
  p.microbatches = in.microbatches();
  return p;
}

}  // namespace

namespace {

// FromProtoPlan of a const message (Message = const pb::ClusterPlan) or of one whose
// strings move out.
template <typename Message>
absl::StatusOr<ClusterPlan> ReadProtoPlan(Message& plan, const PlanningProblem& problem,
                                          const std::string& field) {
  const std::vector<NodeType>& types = problem.node_types;
  ClusterPlan out;
  out.global_batch = plan.global_batch();
  out.pipelines.reserve(plan.pipelines_size());
  for (int i = 0; i < plan.pipelines_size(); ++i) {
    auto& in = *[&] {
      if constexpr (std::is_const_v<Message>) {
        return &plan.pipelines(i);
      } else {
        return plan.mutable_pipelines(i);
      }
    }();
    ASSIGN_OR_RETURN(PlannedPipeline p, FromProtoPipeline(in, i, types, field));
    out.pipelines.push_back(std::move(p));
  }
  out.idle.reserve(plan.idle_nodes_size());
  for (int i = 0; i < plan.idle_nodes_size(); ++i) {
    const pb::IdleNode& idle = plan.idle_nodes(i);
    const int type = std::max(FindNodeType(types, idle.node_type()), 0);
    if constexpr (std::is_const_v<Message>) {
      out.idle.push_back({idle.node_id(), type, idle.reason()});
    } else {
      pb::IdleNode& taken = *plan.mutable_idle_nodes(i);
      out.idle.push_back(
          {std::move(*taken.mutable_node_id()), type, std::move(*taken.mutable_reason())});
    }
  }
  return out;
}

}  // namespace

absl::StatusOr<ClusterPlan> FromProtoPlan(const pb::ClusterPlan& plan,
                                          const PlanningProblem& problem,
                                          const std::string& field) {
  return ReadProtoPlan(plan, problem, field);
}

absl::StatusOr<ClusterPlan> FromProtoPlan(pb::ClusterPlan* plan, const PlanningProblem& problem,
                                          const std::string& field) {
  return ReadProtoPlan(*plan, problem, field);
}

void ToProtoBatchSizePlan(const BatchSizePlan& size, const PlanningProblem& problem,
                          pb::BatchSizePlan* out) {
  out->set_global_batch(size.global_batch);
  out->set_feasible(size.status.ok());
  if (size.status.ok()) {
    ToProtoPlan(size.plan, problem, out->mutable_plan());
  } else {
    out->set_infeasible_reason(std::string(size.status.message()));
  }
  out->set_data_parallel_iteration_time_ms(size.data_parallel_ms.value_or(0));
  out->set_data_parallel_unavailable_reason(size.data_parallel_unavailable);
  out->set_speedup(size.speedup);
  out->set_optimality_gap(size.optimality_gap);
}

absl::StatusOr<ClusterEvent> FromProtoEvent(const pb::ReplanRequest& request,
                                            const PlanningProblem& problem) {
  ClusterEvent event;
  event.failed_node_ids.assign(request.failed_node_ids().begin(), request.failed_node_ids().end());
  for (int i = 0; i < request.joined_nodes_size(); ++i) {
    const pb::Node& node = request.joined_nodes(i);
    const int type = FindNodeType(problem.node_types, node.node_type());
    if (type < 0) {
      return InvalidField(absl::StrCat("joined_nodes[", i, "].node_type"),
                          absl::StrCat(" ", Quote(node.node_type()),
                                       " is not the name of any cluster.node_types entry"));
    }
    event.joined_nodes.push_back({node.id(), type});
  }
  return event;
}

absl::StatusOr<ReplanOptions> FromProtoReplanOptions(const pb::ReplanRequest& request) {
  ReplanOptions options;
  if (request.has_tolerance()) options.tolerance = request.tolerance();
  if (request.has_horizon_iterations()) options.horizon_iterations = request.horizon_iterations();
  if (request.has_restart_overhead_s()) options.restart_overhead_s = request.restart_overhead_s();
  if (!request.force_strategy().empty()) {
    options.force_strategy = ParseReplanStrategy(request.force_strategy());
    if (!options.force_strategy.has_value()) {
      return InvalidField("force_strategy",
                          absl::StrCat(" ", Quote(request.force_strategy()),
                                       " is not one of \"optimal\", \"keep-pipelines\", "
                                       "\"drop-broken\", \"oobleck-fallback\""));
    }
  }
  return options;
}

void ToProtoReplanResult(ReplanResult&& r, const PlanningProblem& problem,
                         pb::ReplanResponse* response) {
  ToProtoPlan(std::move(r.plan), problem, response->mutable_plan());
  response->set_old_iteration_time_ms(r.old_plan.iteration_time_ms);
  for (const LayerCopy& c : r.copies) {
    pb::LayerCopy* out = response->add_copies();
    out->set_dest_node_id(c.dest_node_id);
    out->set_source_node_id(c.source_node_id);
    out->set_layer_begin(c.layer_begin);
    out->set_layer_end(c.layer_end);
    out->set_param_bytes(c.param_bytes);
  }
  response->set_copy_bytes(r.copy_bytes);
  response->set_strategy(std::string(ReplanStrategyName(r.strategy)));
  response->set_pipelines_kept(r.pipelines_kept);
  response->set_fastest_iteration_time_ms(r.fastest_iteration_time_ms);
  response->set_oobleck_fallback_iteration_time_ms(r.oobleck_fallback_ms.value_or(0));
  response->set_oobleck_fallback_failure(r.oobleck_fallback_failure);
  for (const std::string& id : r.ignored_failed_node_ids) response->add_ignored_failed_node_ids(id);
  for (const std::string& id : r.ignored_joined_node_ids) response->add_ignored_joined_node_ids(id);
  response->set_degraded_reason(r.degraded_reason);
  response->set_downtime_s(r.downtime_s);
  response->set_transfer_s(r.transfer_s);
  for (const ReplanAlternative& a : r.alternatives) {
    pb::ReplanAlternative* out = response->add_alternatives();
    out->set_strategy(std::string(ReplanStrategyName(a.strategy)));
    out->set_iteration_time_ms(a.iteration_time_ms);
    out->set_downtime_s(a.downtime_s);
    out->set_copy_bytes(a.copy_bytes);
    out->set_pipelines_kept(a.pipelines_kept);
    out->set_fault_tolerance(a.fault_tolerance);
  }
}

}  // namespace oobleck::server
