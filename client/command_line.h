// Command line of oobleck-plan: `oobleck-plan [flags] COMMAND [args]`, flags anywhere.
// Flags are absl flags, but parsed here (not by absl::ParseCommandLine) so that usage
// errors exit with code 2, flags that do not apply to the command are rejected, and both
// --gpus-per-node and --gpus_per_node spellings work. The TLS flags fall back to
// OOBLECK_PLAN_* environment variables (UsageText lists them).
#ifndef OOBLECK_CLIENT_COMMAND_LINE_H_
#define OOBLECK_CLIENT_COMMAND_LINE_H_

#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "client/job_options.h"
#include "core/replan.h"

namespace oobleck::client {

// Every flag value, read once after parsing.
struct CliOptions {
  // Global.
  std::string server;
  bool json = false;
  double timeout_s = 0;
  std::string tls_ca;           // empty: plaintext
  std::string tls_server_name;  // empty: the --server host
  std::string auth_token_file;  // empty: no token
  // Profiles and templates: --model, --gpu-type, --microbatch-size, --gpus-per-node,
  // --cost-model, --microbatches, the link speeds, --optimizer-state-multiplier.
  JobOptions job;
  // Profiles.
  bool replace = false;
  bool server_dir = false;
  // Templates.
  std::string nodes;
  double gpu_memory_gib = 0;
  std::string missing_allreduce;
  std::string cluster;
  bool all_nodes = false;
  bool progress = false;  // with IsSet("progress"); unset: when stderr is a terminal
  double measured_relative_speed = 0;
  // Plan and Replan (client/plan_commands.h).
  std::vector<std::string> global_batch;  // --global-batch N [N ...]
  int min_nodes_per_pipeline = 0;
  int max_nodes_per_pipeline = 0;
  std::string plan;                            // --plan FILE: the --json output of plan or replan
  std::vector<std::string> fail;               // --fail ID [ID ...]
  std::vector<std::string> join;               // --join ID:TYPE [ID:TYPE ...]
  double tolerance = kDefaultReplanTolerance;  // deprecated rule, only when given
  int fault_tolerance = 0;                     // plan and replan (replan: only when given)
  double horizon_iterations = 1000;            // replan, only when given
  std::string objective = "time";              // plan: --objective time|cost
  double budget_per_hour = 0;                  // plan: --budget-per-hour X (0: none)
  std::string stage_gpus = "any";              // templates, plan, replan (replan: only when given)
  std::string allreduce_key = "gpus";          // load-profile
  double runtime_reserve_bytes = 0;            // load-profile, sent only when given
  // Instantiate (client/instantiate_command.h).
  std::vector<std::string> templates;         // --template NODES:STAGES:MS [...]
  std::string templates_file;                 // --templates-file ANSWER.json
  int num_nodes = 0;                          // --num-nodes N
  std::vector<std::string> allreduce_across;  // --allreduce-across PIPELINES:MS [...]
  std::vector<std::string> instances;         // --instances I [...]
  // Predictions (client/evaluate_command.h).
  std::string sailor_plan;  // --sailor-plan FILE
  std::string sailor_data;  // --sailor-data DIR
  std::string network;      // --network DIR (evaluate through the server)
  // load-profile --format sailor.
  std::string format = "oobleck";  // --format oobleck|sailor
  std::string profiles;            // --profiles profiles_tmp.json
  std::string llm_info;            // --llm-info llm_info.json
  std::string training_config;     // --training-config training_config_*.json
  // Pictures (client/render_command.h).
  std::string svg;  // --svg FILE; "" none, "-" standard output
};

struct CommandLine {
  std::string command;            // "" when only --help was asked for
  std::vector<std::string> args;  // positional arguments after the command
  CliOptions options;
  std::set<std::string> explicit_flags;  // flags given on the command line (underscore names)
  bool help = false;

  bool IsSet(const std::string& flag) const { return explicit_flags.count(flag) > 0; }
};

// INVALID_ARGUMENT for usage errors (unknown command or flag, bad value, a flag that does
// not apply to the command, wrong number of arguments).
absl::StatusOr<CommandLine> ParseCommandLine(int argc, char** argv);

// Usage of every command, or of `command` alone; flag defaults come from the flag
// definitions so the text cannot drift from them.
std::string UsageText(const std::string& command);

}  // namespace oobleck::client

#endif  // OOBLECK_CLIENT_COMMAND_LINE_H_
