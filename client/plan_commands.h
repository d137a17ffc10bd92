// The plan and replan commands of oobleck-plan: their requests (from a cluster file, or
// from the JSON a previous plan/replan printed) and their tables. The RPCs are passed in,
// so everything here is testable without a server.
#ifndef OOBLECK_CLIENT_PLAN_COMMANDS_H_
#define OOBLECK_CLIENT_PLAN_COMMANDS_H_

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "client/command_line.h"
#include "client/requests.h"
#include "core/cluster_file.h"
#include "google/protobuf/message.h"
#include "oobleck/planner/v1/planner.pb.h"

namespace oobleck::client {

struct PlanCalls {
  std::function<absl::Status(const pb::PlanRequest&, pb::PlanResponse*)> plan;
  std::function<absl::Status(const pb::ReplanRequest&, pb::ReplanResponse*)> replan;
  // Makes sure the server holds a profile the cluster file names (uploads it if needed).
  std::function<absl::Status(const ProfileUpload&)> ensure_profile;
  // Prints a response: JSON or the table, as --json says.
  std::function<void(const google::protobuf::Message&, const std::string& table)> print;
};

// Usage errors of plan and replan (exit code 2): missing or malformed flags.
absl::Status CheckPlanUsage(const CommandLine& cl);

// The cluster-file settings the command line overrides (cost model, M, optimizer state,
// missing all-reduce, the measured GPU's relative speed); shared by templates and plan.
ClusterOverrides ClusterOverridesFromFlags(const CommandLine& cl);

absl::Status RunPlan(const CommandLine& cl, const PlanCalls& calls);
absl::Status RunReplan(const CommandLine& cl, const PlanCalls& calls);

// A PlanRequest for every node of a cluster file: node ids from its node_groups (given or
// generated), job and node types as `templates --cluster` builds them. `uploads` receives
// the profiles the request needs on the server.
absl::StatusOr<pb::PlanRequest> BuildPlanRequest(const ClusterFile& file,
                                                 const ClusterOverrides& overrides,
                                                 const std::vector<int>& global_batches,
                                                 int min_nodes_per_pipeline,
                                                 int max_nodes_per_pipeline,
                                                 std::vector<ProfileUpload>* uploads);

// A ReplanRequest from the JSON of a PlanResponse or ReplanResponse (`source` names it in
// errors) and the event: failed ids, joined "ID:TYPE" (split at the last ':').
absl::StatusOr<pb::ReplanRequest> BuildReplanRequest(const std::string& plan_json,
                                                     const std::string& source,
                                                     const std::vector<std::string>& fail,
                                                     const std::vector<std::string>& join,
                                                     std::optional<double> tolerance);

std::string FormatPlan(const pb::PlanResponse& response);
std::string FormatReplan(const pb::ReplanResponse& response);

}  // namespace oobleck::client

#endif  // OOBLECK_CLIENT_PLAN_COMMANDS_H_
