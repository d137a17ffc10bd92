// The instantiate command of oobleck-plan: Oobleck's pipeline instantiation and batch
// split (the Instantiate RPC, docs/API.md#instantiate) from the command line. Templates
// are given as NODES:STAGES:ITERATION_MS or read from a saved `templates --json` answer.
// The RPC is passed in, so everything here is testable without a server.
#ifndef OOBLECK_CLIENT_INSTANTIATE_COMMAND_H_
#define OOBLECK_CLIENT_INSTANTIATE_COMMAND_H_

#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "client/command_line.h"
#include "client/requests.h"
#include "google/protobuf/message.h"

namespace oobleck::client {

struct InstantiateCalls {
  std::function<absl::Status(const pb::InstantiateRequest&, pb::InstantiateResponse*)> instantiate;
  // Prints a response: JSON or the table, as --json says.
  std::function<void(const google::protobuf::Message&, const std::string& table)> print;
};

// Usage errors of instantiate (exit code 2): missing or malformed flags. The values'
// ranges are the server's to check (docs/ERRORS.md#instantiate).
absl::Status CheckInstantiateUsage(const CommandLine& cl);

// "2:4:510" -> num_nodes 2, num_stages 4, iteration_time_ms 510.
absl::StatusOr<pb::TemplateShape> ParseTemplateShape(const std::string& text);

// The feasible templates of a PlanTemplatesResponse's JSON, in its order (`source` names
// it in errors); each mix must be one node type's (Oobleck's templates are node counts).
absl::StatusOr<std::vector<pb::TemplateShape>> TemplateShapesOfAnswer(const std::string& json,
                                                                      const std::string& source);

// The request of `cl` (after CheckInstantiateUsage); reads --templates-file.
absl::StatusOr<pb::InstantiateRequest> BuildInstantiateRequest(const CommandLine& cl);

// Pipelines and micro-batches per template, then the time.
std::string FormatInstantiate(const pb::InstantiateRequest& request,
                              const pb::InstantiateResponse& response);

absl::Status RunInstantiate(const CommandLine& cl, const InstantiateCalls& calls);

}  // namespace oobleck::client

#endif  // OOBLECK_CLIENT_INSTANTIATE_COMMAND_H_
