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
#include "core/replan.h"
#include "server/call_watch.h"
#include "server/elapsed.h"
#include "server/plan_request.h"
#include "server/proto_conversion.h"
#include "server/request_limits.h"
#include "server/status_conversion.h"

namespace oobleck::server {
namespace {

namespace pb = ::oobleck::planner::v1;

// Keeps the code; names the field path the message is about.
absl::Status Prefixed(const absl::Status& status, const std::string& prefix) {
  if (status.ok() || prefix.empty()) return status;
  return absl::Status(status.code(), absl::StrCat(prefix, status.message()));
}

absl::Status Invalid(const std::string& message) { return absl::InvalidArgumentError(message); }

void SetNodes(const std::vector<ClusterNode>& nodes, const PlanningProblem& problem,
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

// The request's prices per node type (empty when every price is 0: no prices).
std::vector<double> PricesOf(const pb::PlanRequest& request) {
  std::vector<double> prices;
  bool any = false;
  for (const pb::NodeType& type : request.cluster().node_types()) {
    prices.push_back(type.price_per_hour());
    any = any || type.price_per_hour() != 0;
  }
  if (!any) prices.clear();
  return prices;
}

}  // namespace

absl::StatusOr<ClusterSetup> ToClusterSetup(const pb::PlanRequest& request,
                                            const ProfileCatalog& catalog,
                                            const std::string& prefix, CostModelCache* models) {
  if (!request.has_cluster()) return Invalid(absl::StrCat(prefix, "cluster is required"));
  if (absl::Status limits = CheckPlanLimits(request, prefix); !limits.ok()) return limits;
  const pb::Cluster& cluster = request.cluster();
  const int T = cluster.node_types_size();
  std::map<std::string, int> type_index;
  for (int i = 0; i < T; ++i) type_index.emplace(cluster.node_types(i).name(), i);

  ClusterSetup setup;
  std::vector<int> counts(T, 0);
  if (request.nodes().empty()) {
    for (int i = 0; i < T; ++i) {
      const int count = cluster.node_types(i).count();
      if (count < 1) {
        return Invalid(absl::StrCat(prefix, "cluster.node_types[", i,
                                    "].count must be >= 1 when nodes is empty (got ", count, ")"));
      }
    }
    for (int i = 0; i < T; ++i) {
      for (int k = 0; k < cluster.node_types(i).count(); ++k) {
        setup.nodes.push_back({absl::StrCat(cluster.node_types(i).name(), "-", k), i});
      }
      counts[i] = cluster.node_types(i).count();
    }
  } else {
    std::map<std::string, int> seen;
    for (int j = 0; j < request.nodes_size(); ++j) {
      const pb::Node& node = request.nodes(j);
      const std::string field = absl::StrCat(prefix, "nodes[", j, "]");
      if (node.id().empty()) return Invalid(absl::StrCat(field, ".id is required"));
      auto type = type_index.find(node.node_type());
      if (type == type_index.end()) {
        return Invalid(absl::StrCat(field, ".node_type \"", node.node_type(),
                                    "\" is not the name of any cluster.node_types entry"));
      }
      auto [it, inserted] = seen.emplace(node.id(), j);
      if (!inserted) {
        return Invalid(absl::StrCat(field, ".id \"", node.id(), "\" repeats ", prefix, "nodes[",
                                    it->second, "].id"));
      }
      setup.nodes.push_back({node.id(), type->second});
      ++counts[type->second];
    }
    for (int i = 0; i < T; ++i) {
      const int count = cluster.node_types(i).count();
      if (count != 0 && count != counts[i]) {
        return Invalid(absl::StrCat(prefix, "cluster.node_types[", i, "].count is ", count,
                                    " but nodes lists ", counts[i], " node(s) of type \"",
                                    cluster.node_types(i).name(), "\"; set it to ", counts[i],
                                    " or to 0"));
      }
    }
  }
  if (request.min_nodes_per_pipeline() < 0) {
    return Invalid(absl::StrCat(prefix, "min_nodes_per_pipeline must be >= 0 (got ",
                                request.min_nodes_per_pipeline(), ")"));
  }
  if (request.max_nodes_per_pipeline() < 0) {
    return Invalid(absl::StrCat(prefix, "max_nodes_per_pipeline must be >= 0 (got ",
                                request.max_nodes_per_pipeline(), ")"));
  }
  setup.limits.min_nodes = request.min_nodes_per_pipeline();
  setup.limits.max_nodes = request.max_nodes_per_pipeline();
  if (absl::Status s = ValidateFaultTolerance(request.fault_tolerance()); !s.ok()) {
    return Prefixed(s, prefix);
  }
  setup.fault_tolerance = request.fault_tolerance();

  // The job and hardware checks of PlanTemplates, on the same field names. Types without
  // nodes (all failed) stay in the cluster: count 1 only for those checks.
  pb::PlanTemplatesRequest templates;
  templates.set_model(request.model());
  templates.set_microbatch_size(request.microbatch_size());
  *templates.mutable_cluster() = cluster;
  for (int i = 0; i < T; ++i) {
    templates.mutable_cluster()->mutable_node_types(i)->set_count(std::max(1, counts[i]));
  }
  templates.set_cost_model(request.cost_model());
  templates.set_microbatches(request.microbatches());
  templates.set_optimizer_state_multiplier(request.optimizer_state_multiplier());
  templates.set_missing_allreduce_in_node(request.missing_allreduce_in_node());
  if (T > 0) {
    pb::NodeMix* one = templates.add_mixes();
    for (int i = 0; i < T; ++i) one->add_counts(i == 0 ? 1 : 0);
  }
  if (absl::Status limits = CheckPlanTemplatesLimits(templates); !limits.ok()) {
    return Prefixed(limits, prefix);
  }
  absl::StatusOr<TemplateRequest> converted = ToTemplateRequest(templates, catalog, models);
  if (!converted.ok()) return Prefixed(converted.status(), prefix);
  if (models != nullptr) {
    absl::StatusOr<std::shared_ptr<const CostModel>> model =
        models->Create(std::move(converted->problem));
    if (!model.ok()) return Prefixed(model.status(), prefix);
    setup.model = *std::move(model);
  } else {
    absl::StatusOr<CostModel> model = CostModel::Create(std::move(converted->problem));
    if (!model.ok()) return Prefixed(model.status(), prefix);
    setup.model = std::make_shared<const CostModel>(*std::move(model));
  }
  setup.normalized = request;
  SetNodes(setup.nodes, setup.model->problem(), &setup.normalized);
  return setup;
}

void ToProtoPlan(const ClusterPlan& plan, const PlanningProblem& problem, pb::ClusterPlan* out) {
  out->set_global_batch(plan.global_batch);
  for (const PlannedPipeline& p : plan.pipelines) {
    pb::PlannedPipeline* pp = out->add_pipelines();
    ToProtoTemplate(p.tmpl, problem, pp->mutable_template_());
    for (const std::string& id : p.node_ids) pp->add_node_ids(id);
    pp->set_microbatches(p.microbatches);
    pp->set_time_ms(p.time_ms);
  }
  out->set_iteration_time_ms(plan.iteration_time_ms);
  out->set_pipeline_time_ms(plan.pipeline_time_ms);
  out->set_allreduce_ms(plan.allreduce_ms);
  out->set_fault_tolerance(plan.fault_tolerance());
  for (const IdleNode& idle : plan.idle) {
    pb::IdleNode* node = out->add_idle_nodes();
    node->set_node_id(idle.id);
    node->set_node_type(problem.node_types[idle.type].name);
    node->set_reason(idle.reason);
  }
}

absl::StatusOr<ClusterPlan> FromProtoPlan(const pb::ClusterPlan& plan,
                                          const PlanningProblem& problem,
                                          const std::string& field) {
  std::map<std::string, int> type_index;
  for (size_t t = 0; t < problem.node_types.size(); ++t) type_index[problem.node_types[t].name] = t;
  auto type_of = [&](const std::string& name, const std::string& where) -> absl::StatusOr<int> {
    auto it = type_index.find(name);
    if (it == type_index.end()) {
      return Invalid(absl::StrCat(where, " \"", name, "\" is not a node type of the cluster"));
    }
    return it->second;
  };
  ClusterPlan out;
  out.global_batch = plan.global_batch();
  for (int i = 0; i < plan.pipelines_size(); ++i) {
    const pb::PlannedPipeline& in = plan.pipelines(i);
    const std::string where = absl::StrCat(field, ".pipelines[", i, "]");
    if (!in.has_template_()) return Invalid(absl::StrCat(where, ".template is required"));
    const pb::PipelineTemplate& t = in.template_();
    PlannedPipeline p;
    p.tmpl.mix.assign(problem.node_types.size(), 0);
    for (int j = 0; j < t.node_order_size(); ++j) {
      absl::StatusOr<int> type =
          type_of(t.node_order(j), absl::StrCat(where, ".template.node_order[", j, "]"));
      if (!type.ok()) return type.status();
      p.tmpl.node_order.push_back(*type);
      ++p.tmpl.mix[*type];
    }
    for (int k = 0; k < t.stages_size(); ++k) {
      const pb::Stage& in_stage = t.stages(k);
      absl::StatusOr<int> type =
          type_of(in_stage.node_type(), absl::StrCat(where, ".template.stages[", k, "].node_type"));
      if (!type.ok()) return type.status();
      Stage stage;
      stage.layer_begin = in_stage.layer_begin();
      stage.layer_end = in_stage.layer_end();
      stage.node_index = in_stage.node_index();
      stage.node_type = *type;
      stage.gpus = in_stage.gpus();
      p.tmpl.stages.push_back(stage);
    }
    p.node_ids.assign(in.node_ids().begin(), in.node_ids().end());
    p.microbatches = in.microbatches();
    out.pipelines.push_back(std::move(p));
  }
  for (const pb::IdleNode& idle : plan.idle_nodes()) {
    auto it = type_index.find(idle.node_type());
    out.idle.push_back({idle.node_id(), it == type_index.end() ? 0 : it->second, idle.reason()});
  }
  return out;
}

grpc::Status HandlePlan(grpc::ServerContext* context, const pb::PlanRequest& request,
                        pb::PlanResponse* response, const PlanRpcContext& rpc) {
  const auto start = std::chrono::steady_clock::now();
  absl::StatusOr<ClusterSetup> setup = ToClusterSetup(request, *rpc.catalog, "", rpc.models);
  if (!setup.ok()) return ToGrpcStatus(setup.status());
  if (request.global_batch().empty()) {
    return ToGrpcStatus(
        Invalid("global_batch must list at least one size (micro-batches per iteration)"));
  }
  const std::vector<int> batches(request.global_batch().begin(), request.global_batch().end());
  const CallWatch watch(context, rpc.shutdown);
  PlanOptions options;
  options.limits = setup->limits;
  options.fault_tolerance = setup->fault_tolerance;
  absl::StatusOr<PlanObjective> objective = ParsePlanObjective(request.objective());
  if (!objective.ok()) return ToGrpcStatus(objective.status());
  options.objective = *objective;
  options.price_per_hour = PricesOf(request);
  options.budget_per_hour = request.budget_per_hour();
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
  response->mutable_plan()->set_price_per_hour(first.plan.price_per_hour);
  for (const BatchSizePlan& size : result->sizes) {
    pb::BatchSizePlan* out = response->add_sweep();
    out->set_global_batch(size.global_batch);
    out->set_feasible(size.status.ok());
    if (size.status.ok()) {
      ToProtoPlan(size.plan, problem, out->mutable_plan());
      out->mutable_plan()->set_price_per_hour(size.plan.price_per_hour);
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
    return ToGrpcStatus(Invalid(
        "request is required: the job and cluster of the current plan (PlanResponse.request)"));
  }
  if (!request.has_plan()) {
    return ToGrpcStatus(Invalid("plan is required: the current plan (PlanResponse.plan)"));
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
  std::map<std::string, int> type_index;
  for (size_t t = 0; t < problem.node_types.size(); ++t) type_index[problem.node_types[t].name] = t;
  for (int i = 0; i < request.joined_nodes_size(); ++i) {
    const pb::Node& node = request.joined_nodes(i);
    auto it = type_index.find(node.node_type());
    if (it == type_index.end()) {
      return ToGrpcStatus(
          Invalid(absl::StrCat("joined_nodes[", i, "].node_type \"", node.node_type(),
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
      return ToGrpcStatus(Invalid(absl::StrCat("force_strategy \"", request.force_strategy(),
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
  SetNodes(r->nodes, problem, next);
  ToProtoPlan(r->plan, problem, response->mutable_plan());
  // Replan ignores objective and budget_per_hour (it keeps the least time) but reports
  // the price of the new plan when the cluster has valid prices.
  PlanOptions priced;
  priced.price_per_hour = PricesOf(request.request());
  if (!priced.price_per_hour.empty() && ValidatePlanPrices(model, priced).ok()) {
    response->mutable_plan()->set_price_per_hour(
        PlanPricePerHour(r->plan, r->nodes, priced.price_per_hour));
  }
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
