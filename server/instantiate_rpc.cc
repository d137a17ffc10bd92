#include "server/instantiate_rpc.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/interrupt.h"
#include "core/oobleck_instantiation.h"
#include "server/elapsed.h"
#include "server/status_conversion.h"

namespace oobleck::server {
namespace {

namespace pb = ::oobleck::planner::v1;

InstantiationProblem FromProtoInstantiation(const pb::InstantiateRequest& request) {
  InstantiationProblem problem;
  for (const pb::TemplateShape& shape : request.templates()) {
    problem.templates.push_back({shape.num_nodes(), shape.num_stages(), shape.iteration_time_ms()});
  }
  problem.num_nodes = request.num_nodes();
  problem.global_batch = request.global_batch();
  // Sorted first: a std::map built from sorted input is linear, where inserting the proto
  // map's hash order costs tens of milliseconds at 2^16 entries (before any poll).
  std::vector<std::pair<int, double>> allreduce(request.allreduce_across_pipelines_ms().begin(),
                                                request.allreduce_across_pipelines_ms().end());
  std::sort(allreduce.begin(), allreduce.end());
  problem.allreduce_ms = std::map<int, double>(allreduce.begin(), allreduce.end());
  return problem;
}

void ToProtoInstantiation(const Instantiation& answer, pb::InstantiateResponse* response) {
  response->mutable_instances()->Assign(answer.instances.begin(), answer.instances.end());
  response->mutable_microbatches()->Assign(answer.microbatches.begin(), answer.microbatches.end());
  response->set_iteration_time_ms(answer.iteration_time_ms);
  response->set_pipeline_time_ms(answer.pipeline_time_ms);
  response->set_allreduce_ms(answer.allreduce_ms);
  response->set_num_pipelines(answer.num_pipelines);
}

}  // namespace

grpc::Status HandleInstantiate(grpc::ServerContext* context, const pb::InstantiateRequest& request,
                               pb::InstantiateResponse* response, SearchGate* search_gate,
                               const ShutdownFlag* shutdown) {
  const auto start = std::chrono::steady_clock::now();
  const InstantiationProblem problem = FromProtoInstantiation(request);
  const std::vector<int> instances(request.instances().begin(), request.instances().end());
  const bool fixed = !instances.empty();  // Oobleck's get_new_execution_plan
  if (absl::Status valid = ValidateInstantiationProblem(problem, fixed ? &instances : nullptr);
      !valid.ok()) {
    return ToGrpcStatus(valid);
  }
  const CallWatch watch(context, shutdown);
  const std::string what =
      fixed ? "splitting the batch" : absl::StrCat("instantiating ", problem.num_nodes, " nodes");
  // An instantiation may take up to kMaxInstantiationWork steps (about a second): it waits
  // its turn with the template searches.
  SearchGate::Slot slot;
  if (search_gate != nullptr) {
    absl::StatusOr<SearchGate::Slot> acquired =
        search_gate->AcquireForCall(context, watch.Predicate());
    if (!acquired.ok()) {
      return watch.Stopped() ? watch.Interrupted(what) : ToGrpcStatus(acquired.status());
    }
    slot = *std::move(acquired);
  }
  Interrupt interrupt(watch.Predicate());
  const absl::StatusOr<Instantiation> answer =
      fixed ? SplitOobleckBatch(problem, instances, interrupt)
            : InstantiateOobleck(problem, interrupt);
  if (!answer.ok()) return watch.Answer(answer.status(), what);
  ToProtoInstantiation(*answer, response);
  response->set_planning_time_ms(MillisecondsSince(start));
  return grpc::Status::OK;
}

}  // namespace oobleck::server
