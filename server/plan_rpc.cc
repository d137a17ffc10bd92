#include "server/plan_rpc.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <map>
#include <set>
#include <utility>

#include "absl/cleanup/cleanup.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/field_path.h"
#include "core/plan/cluster_plan.h"
#include "core/plan/node_set.h"
#include "core/plan/objective.h"
#include "core/plan/plan_options.h"
#include "core/plan/plan_result.h"
#include "core/plan/price.h"
#include "core/replan.h"
#include "google/protobuf/arena.h"
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
  for (const ClusterNode& node : setup.nodes.nodes()) {
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

grpc::Status HandlePlan(grpc::ServerContext* context, const pb::PlanRequest& request,
                        pb::PlanResponse* response, const PlanRpcContext& rpc) {
  const auto start = std::chrono::steady_clock::now();
  absl::StatusOr<ClusterSetup> setup =
      ToClusterSetup(request, *rpc.catalog, "", rpc.models, rpc.inline_profiles);
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
  options.fault_tolerance_rule = setup->fault_tolerance_rule;
  absl::StatusOr<PlanObjective> objective = ParsePlanObjective(request.objective());
  if (!objective.ok()) return ToGrpcStatus(objective.status());
  options.objective = *objective;
  options.price_per_hour = PricesOf(request);
  options.budget_per_hour = request.budget_per_hour();
  options.search = watch.Options(rpc.search_gate);
  absl::StatusOr<PlanResult> result =
      rpc.planner->Plan(*setup->model, setup->nodes, batches, options);
  if (!result.ok()) {
    return watch.Answer(result.status(), absl::StrCat("planning ", setup->nodes.size(), " nodes"));
  }
  const BatchSizePlan& first = result->sizes[0];
  if (!first.status.ok()) {
    return ToGrpcStatus(WithMessagePrefix(
        first.status, absl::StrCat("global_batch[0] = ", first.global_batch, ": ")));
  }
  const PlanningProblem& problem = setup->model->problem();
  // The request with its nodes listed and every NodeType.count set.
  *response->mutable_request() = request;
  SetProtoNodes(setup->nodes.nodes(), problem, response->mutable_request());
  ToProtoPlan(first.plan, problem, response->mutable_plan());
  for (const BatchSizePlan& size : result->sizes) {
    ToProtoBatchSizePlan(size, problem, response->add_sweep());
  }
  response->set_optimality_gap(first.optimality_gap);
  response->set_cost_model(std::string(CostModelName(problem.cost_model)));
  AddDerivedGpuTypes(*setup, response->mutable_derived_gpu_types());
  response->set_mixes_planned(result->mixes_planned);
  response->set_mixes_from_cache(result->mixes_from_cache);
  response->set_planning_time_ms(MillisecondsSince(start));
  return grpc::Status::OK;
}

namespace {

// Replan of `request`, whose PlanRequest it consumes (swapped into the response's, then
// given the nodes after the event): both messages live on the caller's arena. `start` is
// when the call's request began to be read.
grpc::Status HandleReplan(grpc::ServerContext* context, pb::ReplanRequest* request,
                          pb::ReplanResponse* response, const PlanRpcContext& rpc,
                          std::chrono::steady_clock::time_point start) {
  if (!request->has_request()) {
    return ToGrpcStatus(InvalidField(
        "request", " is required: the job and cluster of the current plan (PlanResponse.request)"));
  }
  if (!request->has_plan()) {
    return ToGrpcStatus(InvalidField("plan", " is required: the current plan (PlanResponse.plan)"));
  }
  absl::StatusOr<ClusterSetup> setup =
      ToClusterSetup(request->request(), *rpc.catalog, "request.", rpc.models, rpc.inline_profiles);
  if (!setup.ok()) return ToGrpcStatus(setup.status());
  const CostModel& model = *setup->model;
  const PlanningProblem& problem = model.problem();
  absl::StatusOr<ClusterPlan> current = FromProtoPlan(request->mutable_plan(), problem, "plan");
  if (!current.ok()) return ToGrpcStatus(current.status());

  absl::StatusOr<ClusterEvent> event = FromProtoEvent(*request, problem);
  if (!event.ok()) return ToGrpcStatus(event.status());
  absl::StatusOr<ReplanOptions> replan_options = FromProtoReplanOptions(*request);
  if (!replan_options.ok()) return ToGrpcStatus(replan_options.status());
  ReplanOptions& options = *replan_options;
  options.fault_tolerance = setup->fault_tolerance;
  options.fault_tolerance_rule = setup->fault_tolerance_rule;
  options.limits = setup->limits;
  const CallWatch watch(context, rpc.shutdown);
  options.search = watch.Options(rpc.search_gate);
  absl::StatusOr<ReplanResult> r =
      Replan(*rpc.planner, model, setup->nodes, *std::move(current), *event, options);
  if (!r.ok()) return watch.Answer(r.status(), "replanning");
  // Replan ignores objective and budget_per_hour (it keeps the least time) but reports
  // the price of the new plan when the cluster has valid prices.
  PlanOptions priced;
  priced.price_per_hour = PricesOf(request->request());
  if (!priced.price_per_hour.empty() && ValidatePlanPrices(model, priced).ok()) {
    r->plan.price_per_hour = PlanPricePerHour(r->plan, priced.price_per_hour);
  }
  // The next request is this one's with the cluster after the event: its nodes are
  // replaced, everything else moves over (the same arena: a swap, no copy).
  pb::PlanRequest* next = response->mutable_request();
  request->mutable_request()->clear_nodes();
  next->Swap(request->mutable_request());
  SetProtoNodes(r->nodes, problem, next);
  ToProtoReplanResult(*std::move(r), problem, response);
  response->set_planning_time_ms(MillisecondsSince(start));
  return grpc::Status::OK;
}

// ServeReplan on an arena whose first block is `block` (none: the arena's own); sets
// `arena_bytes` to what the arena allocated in all.
grpc::Status ServeReplanOnArena(
    grpc::ServerContext* context,
    grpc::ServerUnaryStreamer<pb::ReplanRequest, pb::ReplanResponse>* stream,
    const PlanRpcContext& rpc, std::chrono::steady_clock::time_point start,
    const ArenaBlockPool::Block& block, uint64_t* arena_bytes) {
  // A fleet's request and answer are thousands of small messages and strings: on an arena
  // they cost a pointer bump each and are freed at once (blocks of up to 1 MiB).
  google::protobuf::ArenaOptions arena_options;
  arena_options.start_block_size = 64 << 10;
  arena_options.max_block_size = 1 << 20;
  arena_options.initial_block = block.bytes.get();
  arena_options.initial_block_size = block.size;
  google::protobuf::Arena arena(arena_options);
  const absl::Cleanup measure = [&] { *arena_bytes = arena.SpaceAllocated(); };
  auto* request = google::protobuf::Arena::CreateMessage<pb::ReplanRequest>(&arena);
  if (!stream->Read(request)) {
    switch (WhyNoRequest(context)) {
      case MissingRequest::kDeadlinePassed:
        return grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED,
                            "the deadline passed before the request arrived");
      case MissingRequest::kCancelled:
        return grpc::Status(grpc::StatusCode::CANCELLED,
                            "the call was cancelled before its request arrived");
      case MissingRequest::kClientsFault:
        break;
    }
    // What gRPC's unary handler answers too when no request message arrives or parses.
    return grpc::Status(grpc::StatusCode::INTERNAL,
                        "no ReplanRequest arrived, or it did not parse as one");
  }
  auto* response = google::protobuf::Arena::CreateMessage<pb::ReplanResponse>(&arena);
  const grpc::Status status = HandleReplan(context, request, response, rpc, start);
  if (!status.ok()) return status;
  // As the last message the answer is held back until the status goes out with it, as a
  // unary handler sends it: the client never sees a Replan's headers before its status, so
  // a replica killed in between leaves an uncommitted call that the channel's retry policy
  // retries on another replica (with a plain Write, e2e_replication's kill -9 test lost one).
  if (!stream->Write(*response, grpc::WriteOptions().set_last_message())) {
    return grpc::Status(grpc::StatusCode::CANCELLED,
                        "the call was cancelled before the answer was sent");
  }
  return grpc::Status::OK;
}

}  // namespace

grpc::Status ServeReplan(grpc::ServerContext* context,
                         grpc::ServerUnaryStreamer<pb::ReplanRequest, pb::ReplanResponse>* stream,
                         const PlanRpcContext& rpc) {
  const auto start = std::chrono::steady_clock::now();
  ArenaBlockPool::Block block;
  if (rpc.arena_blocks != nullptr) block = rpc.arena_blocks->Take();
  uint64_t arena_bytes = 0;
  const grpc::Status status = ServeReplanOnArena(context, stream, rpc, start, block, &arena_bytes);
  if (rpc.arena_blocks != nullptr) rpc.arena_blocks->Return(std::move(block), arena_bytes);
  return status;
}

}  // namespace oobleck::server
