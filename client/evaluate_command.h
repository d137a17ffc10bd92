// `oobleck-plan evaluate --sailor-plan FILE --sailor-data DIR [--model M] [--json]`: the
// predicted iteration time, its breakdown and the peak memory per GPU of a plan in Sailor's
// format, computed here by core/fidelity (no server, no RPC); with --network DIR instead of
// --sailor-data, computed by the server's Evaluate call from the profiles it stores. With
// --plan FILE (a plan or replan --json answer) the server predicts a plan of ours.
#ifndef OOBLECK_CLIENT_EVALUATE_COMMAND_H_
#define OOBLECK_CLIENT_EVALUATE_COMMAND_H_

#include <functional>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "client/command_line.h"
#include "core/fidelity/evaluate.h"
#include "oobleck/planner/v1/planner.pb.h"

namespace oobleck::client {

// The --json document: iteration_time_ms, breakdown_ms, peak_memory_bytes, memory_per_gpu.
std::string EvaluationJson(const fidelity::Evaluation& e, const fidelity::SailorPlan& plan);

// A table for people.
std::string EvaluationTable(const fidelity::Evaluation& e, const fidelity::SailorPlan& plan);

// Reads the flags' files, predicts and prints to standard output.
absl::Status RunEvaluate(const CommandLine& cl);

// The Evaluate RPC, given the request, filling the response (the caller's connection).
using EvaluateCall = std::function<absl::Status(const ::oobleck::planner::v1::EvaluateRequest&,
                                                ::oobleck::planner::v1::EvaluateResponse*)>;

// The request for --sailor-plan FILE and --network DIR (the bandwidth files DIR has; at
// least one), read here: the server reads no path.
absl::StatusOr<::oobleck::planner::v1::EvaluateRequest> EvaluateRequestFromFlags(
    const CliOptions& options);

// The Evaluation (and the plan's GPU type and tp per replica) an EvaluateResponse carries,
// so that both ways print through EvaluationJson and EvaluationTable.
std::pair<fidelity::Evaluation, fidelity::SailorPlan> EvaluationFromResponse(
    const ::oobleck::planner::v1::EvaluateResponse& response);

// The request for `evaluate --plan FILE`: the answer's request and plan as job_plan
// (INVALID_ARGUMENT naming `source` when it is not a plan or replan answer).
absl::StatusOr<::oobleck::planner::v1::EvaluateRequest> JobPlanEvaluateRequest(
    const std::string& answer_json, const std::string& source);

// The --json document of a job_plan's answer: the modelled parts in breakdown_ms, the others
// listed in "unmodelled" (never printed as zeros), and the memory of every stage's GPU.
std::string JobPlanEvaluationJson(const ::oobleck::planner::v1::EvaluateResponse& response);
// A table for people.
std::string JobPlanEvaluationTable(const ::oobleck::planner::v1::EvaluateResponse& response);

// `evaluate --network DIR` or `evaluate --plan FILE`: through the server, printed as
// RunEvaluate prints (--plan: the two functions above).
absl::Status RunServerEvaluate(const CommandLine& cl, const EvaluateCall& call);

}  // namespace oobleck::client

#endif  // OOBLECK_CLIENT_EVALUATE_COMMAND_H_
