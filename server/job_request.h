// The part of PlanTemplatesRequest and PlanRequest they share, the job and its hardware
// (model, micro-batches, cost model, cluster.node_types), validated and resolved against the
// loaded profiles once for both RPCs. Errors name the field by its path in the request
// (core/field_path.h: the path is also carried as data).
#ifndef OOBLECK_SERVER_JOB_REQUEST_H_
#define OOBLECK_SERVER_JOB_REQUEST_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/cluster.h"
#include "core/cost_model.h"
#include "core/model_cache.h"
#include "core/profile_catalog.h"
#include "oobleck/planner/v1/planner.pb.h"
#include "server/inline_profiles.h"

namespace oobleck::server {

// A view of the shared fields of a request message; the message must outlive it.
struct JobFields {
  const std::string* model = nullptr;
  int microbatch_size = 0;
  const std::string* cost_model = nullptr;
  int microbatches = 0;
  double optimizer_state_multiplier = 0;
  ::oobleck::planner::v1::MissingAllreduce missing_allreduce_in_node = {};
  const ::oobleck::planner::v1::Cluster* cluster = nullptr;  // null when not set
  ::oobleck::planner::v1::StageGpus stage_gpus = {};
  const google::protobuf::RepeatedPtrField<::oobleck::planner::v1::InlineProfile>* profiles =
      nullptr;

  // PlanTemplatesRequest and PlanRequest name these fields alike.
  template <typename Request>
  static JobFields Of(const Request& request) {
    return {&request.model(),
            request.microbatch_size(),
            &request.cost_model(),
            request.microbatches(),
            request.optimizer_state_multiplier(),
            request.missing_allreduce_in_node(),
            request.has_cluster() ? &request.cluster() : nullptr,
            request.stage_gpus(),
            &request.profiles()};
  }
};

// The job's settings once their fields are checked.
struct JobSettings {
  CostModelKind cost_model = CostModelKind::kOneFOneB;
  MissingAllreduce missing_allreduce = MissingAllreduce::kSkipSize;
  StageGpus stage_gpus = StageGpus::kAny;
};

// What core cannot check: model (required unless profiles are sent inline),
// microbatch_size, cost_model (parsed by core), missing_allreduce_in_node, stage_gpus:
// INVALID_ARGUMENT naming the field and the value.
absl::StatusOr<JobSettings> ValidateJob(const JobFields& job);

// Whether every node type must have count >= 1: PlanTemplates plans mixes of the counts;
// Plan and Replan list nodes, and a type whose nodes all failed stays in the cluster.
enum class NodeCounts { kRequired, kAnyNonNegative };

// The planning problem without its profiles, checked: `cluster` present, then core's rules
// (ValidateProblemSettings: microbatches, optimizer_state_multiplier, the bandwidths, the
// node types' names, GPUs and memory, on the request's paths), then what core does not see
// (each node type's count and derive).
absl::StatusOr<PlanningProblem> ValidateCluster(const JobFields& job, const JobSettings& settings,
                                                NodeCounts counts);

// `problem` (from ValidateCluster) with each node type's profile, measured or derived (from
// `models` when given, shared across requests): the request's inline profile of its GPU
// type when `inline_profiles` has one, else the loaded one. NOT_FOUND for profiles that are
// not loaded, FAILED_PRECONDITION when they cannot be combined.
absl::StatusOr<PlanningProblem> ResolveProblem(const JobFields& job, PlanningProblem problem,
                                               const ProfileCatalog& catalog,
                                               CostModelCache* models,
                                               const InlineProfiles* inline_profiles = nullptr);

// "cluster.node_types[i]".
std::string NodeTypeField(int i);

}  // namespace oobleck::server

#endif  // OOBLECK_SERVER_JOB_REQUEST_H_
