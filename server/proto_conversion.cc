#include "server/proto_conversion.h"

#include <set>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/cluster.h"

namespace oobleck::server {
namespace {

// Copies a proto map of counts -> ms into a core map, rejecting counts < 1.
absl::Status CopyCountMap(const google::protobuf::Map<int32_t, double>& in, absl::string_view field,
                          std::map<int, double>* out) {
  for (const auto& [count, ms] : in) {
    if (count < 1) {
      return absl::InvalidArgumentError(absl::StrCat(field, " key must be >= 1 (got ", count, ")"));
    }
    (*out)[count] = ms;
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
  return info;
}

absl::StatusOr<std::vector<LayerProfile>> FromProtoLayers(const pb::ProfileLayers& layers,
                                                          absl::string_view field) {
  if (layers.layers().empty()) {
    return absl::InvalidArgumentError(absl::StrCat(field, ".layers must not be empty"));
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
    absl::Status status =
        CopyCountMap(in.allreduce_in_node_ms(), absl::StrCat(prefix, ".allreduce_in_node_ms"),
                     &layer.allreduce_in_node_ms);
    if (!status.ok()) return status;
    status = CopyCountMap(in.allreduce_across_nodes_ms(),
                          absl::StrCat(prefix, ".allreduce_across_nodes_ms"),
                          &layer.allreduce_across_nodes_ms);
    if (!status.ok()) return status;
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
  int num_gpus = 0;
  for (const Stage& stage : tmpl.stages) {
    pb::Stage* s = out->add_stages();
    s->set_layer_begin(stage.layer_begin);
    s->set_layer_end(stage.layer_end);
    s->set_node_index(stage.node_index);
    s->set_node_type(types[stage.node_type].name);
    s->set_gpus(stage.gpus);
    s->set_forward_ms(stage.forward_ms);
    s->set_backward_ms(stage.backward_ms);
    s->set_cost_ms(stage.cost_ms);
    s->set_memory_bytes_per_gpu(stage.memory_bytes_per_gpu);
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

}  // namespace oobleck::server
