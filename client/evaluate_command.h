// `oobleck-plan evaluate --sailor-plan FILE --sailor-data DIR [--model M] [--json]`: the
// predicted iteration time, its breakdown and the peak memory per GPU of a plan in Sailor's
// format, computed here by core/fidelity (no server, no RPC).
#ifndef OOBLECK_CLIENT_EVALUATE_COMMAND_H_
#define OOBLECK_CLIENT_EVALUATE_COMMAND_H_

#include <string>

#include "absl/status/status.h"
#include "client/command_line.h"
#include "core/fidelity/evaluate.h"

namespace oobleck::client {

// The --json document: iteration_time_ms, breakdown_ms, peak_memory_bytes, memory_per_gpu.
std::string EvaluationJson(const fidelity::Evaluation& e, const fidelity::SailorPlan& plan);

// A table for people.
std::string EvaluationTable(const fidelity::Evaluation& e, const fidelity::SailorPlan& plan);

// Reads the flags' files, predicts and prints to standard output.
absl::Status RunEvaluate(const CommandLine& cl);

}  // namespace oobleck::client

#endif  // OOBLECK_CLIENT_EVALUATE_COMMAND_H_
