#include "server/plan_rpc.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <map>
#include <set>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/field_path.h"
#include "core/replan.h"
#include "server/call_watch.h"
#include "server/cluster_setup.h"
#include "server/elapsed.h"
#include "server/proto_conversion.h"
#include "server/status_conversion.h"

namespace oobleck::server {
namespace {

namespace pb = ::oobleck::planner::v1;

void AddDerivedGpuTypes(const ClusterSetup& setup,
                        google::protobuf::RepeatedPtrField<std::string>* out) {
  const PlanningProblem& problem = setup.model->problem();
  std::set<std::string> derived;
  for (const ClusterNode& node : setup.nodes) {
    if (!problem.derived_from[node.type].empty())
      derived.insert(problem.node_types[node.type].gpu_type);
  }
  for (const std::string& gpu : derived) *out->Add() = gpu;
}

}  // namespace

grpc::Status HandlePlan(grpc::ServerContext* context, const pb::PlanRequest& request,
                        pb::PlanResponse* response, const PlanRpcContext& rpc) {
  const auto start = std::chrono::steady_clock::now();
  absl::StatusOr<ClusterSetup> setup = ToClusterSetup(request, *rpc.catalog, "", rpc.models);
  if (!setup.ok()) return ToGrpcStatus(setup.status());
  if (request.global_batch().empty()) {
    return ToGrpcStatus(
        InvalidField("global_batch", " must list at least one size (micro-batches per iteration)"));
  }
  const std::vector<int> batches(request.global_batch().begin(), request.global_batch().end());
  const CallWatch watch(context, rpc.shutdown);
  PlanOptions options;
  options.limits = setup->limits;
  options.fault_tolerance = setup->fault_tolerance;
  options.search = watch.Options();
  if (rpc.search_gate != nullptr) {
    options.search.admit = rpc.search_gate->AdmissionFor(context, watch.Predicate());
  }
  absl::StatusOr<PlanResult> result =
      rpc.planner->Plan(*setup->model, setup->nodes, batches, options);
  if (!result.ok()) {
    if (result.status().code() == absl::StatusCode::kCancelled) {
      return watch.Interrupted(absl::StrCat("planning ", setup->nodes.size(), " nodes"));
    }
    return ToGrpcStatus(result.status());
  }
  const BatchSizePlan& first = result->sizes[0];
  if (!first.status.ok()) {
    return ToGrpcStatus(absl::Status(
        first.status.code(),
        absl::StrCat("global_batch[0] = ", first.global_batch, ": ", first.status.message())));
  }
  const PlanningProblem& problem = setup->model->problem();
  *response->mutable_request() = std::move(setup->normalized);
  ToProtoPlan(first.plan, problem, response->mutable_plan());
  for (const BatchSizePlan& size : result->sizes) {
    pb::BatchSizePlan* out = response->add_sweep();
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
  response->set_optimality_gap(first.optimality_gap);
  response->set_cost_model(std::string(CostModelName(problem.cost_model)));
  AddDerivedGpuTypes(*setup, response->mutable_derived_gpu_types());
  response->set_mixes_planned(result->mixes_planned);
  response->set_mixes_from_cache(result->mixes_from_cache);
  response->set_planning_time_ms(MillisecondsSince(start));
  return grpc::Status::OK;
}

grpc::Status HandleReplan(grpc::ServerContext* context, const pb::ReplanRequest& request,
                          pb::ReplanResponse* response, const PlanRpcContext& rpc) {
  const auto start = std::chrono::steady_clock::now();
  if (!request.has_request()) {
    return ToGrpcStatus(InvalidField(
        "request", " is required: the job and cluster of the current plan (PlanResponse.request)"));
  }
  if (!request.has_plan()) {
    return ToGrpcStatus(InvalidField("plan", " is required: the current plan (PlanResponse.plan)"));
  }
  absl::StatusOr<ClusterSetup> setup =
      ToClusterSetup(request.request(), *rpc.catalog, "request.", rpc.models);
  if (!setup.ok()) return ToGrpcStatus(setup.status());
  const CostModel& model = *setup->model;
  const PlanningProblem& problem = model.problem();
  absl::StatusOr<ClusterPlan> current = FromProtoPlan(request.plan(), problem, "plan");
  if (!current.ok()) return ToGrpcStatus(current.status());

  ClusterEvent event;
  event.failed_node_ids.assign(request.failed_node_ids().begin(), request.failed_node_ids().end());
  const std::map<std::string, int> type_index = NodeTypeIndex(problem);
  for (int i = 0; i < request.joined_nodes_size(); ++i) {
    const pb::Node& node = request.joined_nodes(i);
    auto it = type_index.find(node.node_type());
    if (it == type_index.end()) {
      return ToGrpcStatus(
          InvalidField(absl::StrCat("joined_nodes[", i, "].node_type"),
                       absl::StrCat(" \"", node.node_type(),
                                    "\" is not the name of any cluster.node_types entry")));
    }
    event.joined_nodes.push_back({node.id(), it->second});
  }
  ReplanOptions options;
  if (request.has_tolerance()) options.tolerance = request.tolerance();
  if (request.has_horizon_iterations()) options.horizon_iterations = request.horizon_iterations();
  if (request.has_restart_overhead_s()) options.restart_overhead_s = request.restart_overhead_s();
  if (!request.force_strategy().empty()) {
    options.force_strategy = ParseReplanStrategy(request.force_strategy());
    if (!options.force_strategy.has_value()) {
      return ToGrpcStatus(InvalidField(
          "force_strategy", absl::StrCat(" \"", request.force_strategy(),
                                         "\" is not one of \"optimal\", \"keep-pipelines\", "
                                         "\"drop-broken\", \"oobleck-fallback\"")));
    }
  }
  options.fault_tolerance = setup->fault_tolerance;
  options.limits = setup->limits;
  const CallWatch watch(context, rpc.shutdown);
  options.search = watch.Options();
  if (rpc.search_gate != nullptr) {
    options.search.admit = rpc.search_gate->AdmissionFor(context, watch.Predicate());
  }
  absl::StatusOr<ReplanResult> r =
      Replan(*rpc.planner, model, setup->nodes, *std::move(current), event, options);
  if (!r.ok()) {
    if (r.status().code() == absl::StatusCode::kCancelled) return watch.Interrupted("replanning");
    return ToGrpcStatus(r.status());
  }
  pb::PlanRequest* next = response->mutable_request();
  *next = std::move(setup->normalized);
  SetProtoNodes(r->nodes, problem, next);
  ToProtoPlan(r->plan, problem, response->mutable_plan());
  response->set_old_iteration_time_ms(r->old_plan.iteration_time_ms);
  for (const LayerCopy& c : r->copies) {
    pb::LayerCopy* out = response->add_copies();
    out->set_dest_node_id(c.dest_node_id);
    out->set_source_node_id(c.source_node_id);
    out->set_layer_begin(c.layer_begin);
    out->set_layer_end(c.layer_end);
    out->set_param_bytes(c.param_bytes);
  }
  response->set_copy_bytes(r->copy_bytes);
  response->set_strategy(std::string(ReplanStrategyName(r->strategy)));
  response->set_pipelines_kept(r->pipelines_kept);
  response->set_fastest_iteration_time_ms(r->fastest_iteration_time_ms);
  response->set_oobleck_fallback_iteration_time_ms(r->oobleck_fallback_ms.value_or(0));
  response->set_oobleck_fallback_failure(r->oobleck_fallback_failure);
  for (const std::string& id : r->ignored_failed_node_ids)
    response->add_ignored_failed_node_ids(id);
  for (const std::string& id : r->ignored_joined_node_ids)
    response->add_ignored_joined_node_ids(id);
  response->set_degraded_reason(r->degraded_reason);
  response->set_downtime_s(r->downtime_s);
  response->set_transfer_s(r->transfer_s);
  for (const ReplanAlternative& a : r->alternatives) {
    pb::ReplanAlternative* out = response->add_alternatives();
    out->set_strategy(std::string(ReplanStrategyName(a.strategy)));
    out->set_iteration_time_ms(a.iteration_time_ms);
    out->set_downtime_s(a.downtime_s);
    out->set_copy_bytes(a.copy_bytes);
    out->set_pipelines_kept(a.pipelines_kept);
    out->set_fault_tolerance(a.fault_tolerance);
  }
  response->set_planning_time_ms(MillisecondsSince(start));
  return grpc::Status::OK;
}

}  // namespace oobleck::server
