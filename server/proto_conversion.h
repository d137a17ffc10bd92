// The one place where public API messages and core value types convert into each other. No
// validation of request semantics beyond what a conversion itself needs (requests are
// validated by server/job_request.h, templates_request.h and cluster_setup.h).
#ifndef OOBLECK_SERVER_PROTO_CONVERSION_H_
#define OOBLECK_SERVER_PROTO_CONVERSION_H_

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/cost_model.h"
#include "core/pipeline_template.h"
#include "core/plan/cluster_plan.h"
#include "core/plan/node_set.h"
#include "core/plan/plan_result.h"
#include "core/profile.h"
#include "core/replan.h"
#include "core/template_planner.h"
#include "oobleck/planner/v1/planner.pb.h"

namespace oobleck::server {

namespace pb = ::oobleck::planner::v1;

pb::ProfileInfo ToProfileInfo(const ModelProfile& profile);

// Gives `profile` the request's runtime_reserve_bytes when it is set, once
// fidelity::CheckRuntimeReserve accepts it for the profile's GPU type (else INVALID_ARGUMENT
// naming runtime_reserve_bytes).
absl::Status ApplyRuntimeReserve(const pb::LoadProfileRequest& request, ModelProfile* profile);

// Layers sent inline. `field` prefixes error messages (e.g. "layers"); in-node all-reduce
// keys are read in `convention` and stored by GPU count (core's InNodeKeyGpus), node counts
// must be >= 1. Values are checked by core's ValidateProfile.
absl::StatusOr<std::vector<LayerProfile>> FromProtoLayers(
    const pb::ProfileLayers& layers, absl::string_view field,
    AllreduceKey convention = AllreduceKey::kGpus);

// The API's all-reduce key convention; INVALID_ARGUMENT naming `field` for a value the
// enum does not have.
absl::StatusOr<AllreduceKey> FromProtoAllreduceKey(pb::AllreduceKey key, absl::string_view field);
pb::AllreduceKey ToProtoAllreduceKey(AllreduceKey key);
// The same for the stage GPU policy.
absl::StatusOr<StageGpus> FromProtoStageGpus(pb::StageGpus policy, absl::string_view field);

void ToProtoMix(const NodeMix& mix, pb::NodeMix* out);

// Node types are named through problem.node_types; derived_gpu_types lists the GPU types
// of the template's nodes whose profile was derived (problem.derived_from non-empty).
void ToProtoTemplate(const PipelineTemplate& tmpl, const PlanningProblem& problem,
                     pb::PipelineTemplate* out);

void ToProtoMixTemplate(const PlannedMix& planned, const PlanningProblem& problem,
                        pb::MixTemplate* out);

// Lists `nodes` in request->nodes and sets every cluster.node_types[i].count to its number
// of nodes.
void SetProtoNodes(const std::vector<ClusterNode>& nodes, const PlanningProblem& problem,
                   pb::PlanRequest* request);

// Plans as messages and back. FromProtoPlan checks names (node types) only, naming fields
// under `field` ("plan"); EvaluatePlan checks the plan itself.
// The overloads on a plan or message the caller gives up move its strings (ids, idle
// reasons: thousands at fleet scale) instead of copying them; the results are the same.
void ToProtoPlan(const ClusterPlan& plan, const PlanningProblem& problem, pb::ClusterPlan* out);
void ToProtoPlan(ClusterPlan&& plan, const PlanningProblem& problem, pb::ClusterPlan* out);
absl::StatusOr<ClusterPlan> FromProtoPlan(const pb::ClusterPlan& plan,
                                          const PlanningProblem& problem, const std::string& field);
absl::StatusOr<ClusterPlan> FromProtoPlan(pb::ClusterPlan* plan, const PlanningProblem& problem,
                                          const std::string& field);

// One global batch size of a Plan answer (PlanResponse.sweep).
void ToProtoBatchSizePlan(const BatchSizePlan& size, const PlanningProblem& problem,
                          pb::BatchSizePlan* out);

// ReplanRequest's failed_node_ids and joined_nodes (whose node_type must name a node type).
absl::StatusOr<ClusterEvent> FromProtoEvent(const pb::ReplanRequest& request,
                                            const PlanningProblem& problem);
// ReplanRequest's tolerance, horizon, restart overhead and force_strategy (a known name).
absl::StatusOr<ReplanOptions> FromProtoReplanOptions(const pb::ReplanRequest& request);
// Everything of a ReplanResponse that comes from the result: the new plan, the copies,
// the strategy and its alternatives (not `request`, not the timing). The new plan's strings
// move into the message.
void ToProtoReplanResult(ReplanResult&& result, const PlanningProblem& problem,
                         pb::ReplanResponse* out);

}  // namespace oobleck::server

#endif  // OOBLECK_SERVER_PROTO_CONVERSION_H_
