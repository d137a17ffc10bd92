#include "client/command_line.h"

#include <algorithm>
#include <cstdlib>
#include <map>
#include <string_view>

#include "absl/flags/flag.h"
#include "absl/flags/reflection.h"
#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "core/cost_model.h"
#include "core/status_macros.h"

// Global flags.
ABSL_FLAG(std::string, server, "127.0.0.1:50051",
          "planner address HOST:PORT, several replicas as IP:PORT,IP:PORT,..., or a gRPC "
          "target such as dns:///NAME:PORT; calls are balanced round-robin and idempotent "
          "ones retried on another replica");
ABSL_FLAG(bool, json, false,
          "print the response as proto3 JSON with the proto's field names instead of a table");
ABSL_FLAG(double, timeout_s, 120, "deadline of each RPC in seconds");
ABSL_FLAG(std::string, tls_ca, "",
          "PEM certificate(s) to trust: connect over TLS (the server runs with --tls_cert); "
          "default: $OOBLECK_PLAN_TLS_CA");
ABSL_FLAG(std::string, tls_server_name, "",
          "name the server's certificate must carry when it differs from the --server host, "
          "e.g. when probing 127.0.0.1 inside the container (needs --tls-ca); default: "
          "$OOBLECK_PLAN_TLS_SERVER_NAME");
ABSL_FLAG(std::string, auth_token_file, "",
          "file holding the bearer token the server's --auth_token_file expects (needs "
          "--tls-ca); default: $OOBLECK_PLAN_AUTH_TOKEN_FILE");

// Profiles.
ABSL_FLAG(std::string, model, "", "model name, e.g. gpt2-xl");
ABSL_FLAG(std::string, gpu_type, "",
          "GPU type of the profile; for templates, empty means the model's only GPU type");
ABSL_FLAG(int, microbatch_size, 0,
          "micro-batch size; 0 picks the only mb<m>.json / the model's only size");
ABSL_FLAG(bool, replace, false,
          "overwrite a stored profile with the same (model, GPU type, micro-batch size)");
ABSL_FLAG(double, runtime_reserve_bytes, 0,
          "load-profile: memory the runtime holds on one GPU of the profile's type beyond "
          "tensors (CUDA context, NCCL buffers, allocator slack), bytes, stored with the profile "
          "for evaluate (with --format sailor: --gpu-type must name one type); unset: none");
ABSL_FLAG(bool, server_dir, false,
          "DIR is a directory on the server: send its path instead of the files' contents");

// Templates.
ABSL_FLAG(std::string, nodes, "",
          "pipeline sizes in nodes: A-B or N (homogeneous: required; the cluster has B nodes)");
ABSL_FLAG(int, gpus_per_node, 1, "GPUs per node (homogeneous)");
ABSL_FLAG(std::string, cost_model, "1f1b", "cost model: 1f1b or oobleck-sosp23");
ABSL_FLAG(int, microbatches, 0,
          "micro-batches per pipeline and iteration (M); required by 1f1b unless the cluster "
          "file gives microbatches_per_pipeline; 0 = not given");
ABSL_FLAG(double, gpu_memory_gib, 24, "memory per GPU in GiB (homogeneous)");
ABSL_FLAG(double, intra_node_bytes_per_s, 25e9,
          "GPU-to-GPU bandwidth inside a node (homogeneous; default: PCIe 4.0)");
ABSL_FLAG(double, inter_node_bytes_per_s, 12.5e9,
          "network bandwidth between nodes (homogeneous; default: 100 Gb/s)");
ABSL_FLAG(double, optimizer_state_multiplier, oobleck::kDefaultOptimizerStateMultiplier,
          "optimizer-state bytes per parameter byte (Oobleck: 6); overrides the cluster file");
ABSL_FLAG(std::string, missing_allreduce, "skip",
          "in-node all-reduce times the profile lacks: skip (do not use that stage size) or "
          "ring (estimate 2(g-1)/g * param_bytes / intra_node_bytes_per_s); overrides the "
          "cluster file");
ABSL_FLAG(std::string, cluster, "",
          "a cluster file (docs/CLUSTER_FILE.md format): plan that mixed cluster, uploading "
          "the profiles it names");
ABSL_FLAG(bool, all_nodes, false, "with --cluster: plan only the mix of all the cluster's nodes");
ABSL_FLAG(bool, progress, false,
          "templates: show the search's progress on stderr (uses PlanTemplatesStream); on by "
          "default when stderr is a terminal, --progress=false turns it off");
ABSL_FLAG(double, measured_relative_speed, 0,
          "with --cluster: relative_speed of the profile_measured_on GPU, needed when the "
          "file's gpu_types do not list it (e.g. 2.94 for rtx4090 on the ditto files' scale)");

// Plan and Replan.
ABSL_FLAG(std::vector<std::string>, global_batch, {},
          "plan: global batch sizes in micro-batches, e.g. --global-batch 64 128 256 (the first "
          "is the plan shown; all are planned and compared with data parallelism)");
ABSL_FLAG(int, min_nodes_per_pipeline, 0, "plan: smallest pipeline in nodes (0: 1)");
ABSL_FLAG(int, max_nodes_per_pipeline, 0,
          "plan: largest pipeline in nodes (0: min(cluster nodes, 4)); larger values search "
          "many more templates");
ABSL_FLAG(std::string, plan, "",
          "replan: the current plan, a file with the --json output of plan or replan; "
          "evaluate: the plan to predict, such a file");
ABSL_FLAG(std::vector<std::string>, fail, {}, "replan: ids of the nodes that failed");
ABSL_FLAG(std::vector<std::string>, join, {},
          "replan: nodes that joined, as ID:TYPE with TYPE a node type of the plan's cluster");
ABSL_FLAG(double, tolerance, oobleck::kDefaultReplanTolerance,
          "replan (deprecated rule, used only when given): plans within this fraction of the "
          "fastest compete on bytes copied");
ABSL_FLAG(int, fault_tolerance, 0,
          "plan: the plan survives any F simultaneous node failures (at least F+1 pipelines); "
          "replan: the F to keep (default: the plan request's)");
ABSL_FLAG(std::string, objective, "time",
          "plan: what the plan minimises: time (iteration time) or cost (price per "
          "iteration: the price_per_hour of the nodes it uses x iteration time; needs prices "
          "in the cluster file's gpu_types)");
ABSL_FLAG(double, budget_per_hour, 0,
          "plan: use only nodes whose prices add up to at most this per hour (0: no budget)");
ABSL_FLAG(double, horizon_iterations, 1000,
          "replan: iterations the new plan is expected to run; the answer minimises "
          "downtime + N x iteration time");

ABSL_FLAG(std::string, stage_gpus, "any",
          "GPU counts a stage on a node may use: any (every count with all-reduce data), "
          "divisors (of the node's GPUs) or equal-halves (Oobleck develop: stages of a power of "
          "two GPUs); replan: only when given (default: the plan's)");
ABSL_FLAG(std::string, allreduce_key, "gpus",
          "load-profile: what the keys of allreduce_in_node.json count: gpus (Oobleck develop) "
          "or gpus-minus-one (Oobleck sosp23-artifact)");

// Instantiate.
ABSL_FLAG(std::vector<std::string>, template, {},
          "instantiate: templates as NODES:STAGES:ITERATION_MS, e.g. --template 2:4:510 3:6:363");
ABSL_FLAG(std::string, templates_file, "",
          "instantiate: take the feasible templates of a saved `templates --json` answer (one "
          "node type) instead of --template");
ABSL_FLAG(int, num_nodes, 0,
          "instantiate: nodes to use, every one of them (with --instances: 0 or their node count)");
ABSL_FLAG(std::vector<std::string>, allreduce_across, {},
          "instantiate: layer 0's all-reduce across P pipelines as P:MS, e.g. 1:0 2:30.5 4:52; "
          "a pipeline count without an entry cannot be chosen");
ABSL_FLAG(std::vector<std::string>, instances, {},
          "instantiate: fixed pipelines, one count per template (Oobleck's "
          "get_new_execution_plan): only the batch split is searched");
// Predictions of a plan in Sailor's format (client/evaluate_command.h).
ABSL_FLAG(std::string, sailor_plan, "", "evaluate: a plan in Sailor's format (plan_config_*.json)");
ABSL_FLAG(std::string, sailor_data, "",
          "evaluate: folder of Sailor's profiles_tmp.json, llm_info.json, training_config_*.json "
          "and bandwidth files (e.g. data/sailor)");

ABSL_FLAG(std::string, network, "",
          "evaluate with --server: folder of the cluster's measured bandwidths in Sailor's "
          "format (multizone_bandwidths.json, multizone_bandwidths_het.json, "
          "intra_node_bandwidths.json; those present are sent); the profiles are the server's");
// Profiles in Sailor's format (load-profile --format sailor).
ABSL_FLAG(std::string, format, "oobleck",
          "load-profile: oobleck (a DIR in Oobleck's layout) or sailor (--profiles, --llm-info, "
          "--training-config: one profile per GPU type, micro-batch size and tp)");
ABSL_FLAG(std::string, profiles, "", "load-profile --format sailor: Sailor's profiles_tmp.json");
ABSL_FLAG(std::string, llm_info, "", "load-profile --format sailor: Sailor's llm_info.json");
ABSL_FLAG(std::string, training_config, "",
          "load-profile --format sailor: Sailor's training_config_*.json (names the model)");

// Pictures.
ABSL_FLAG(std::string, svg, "",
          "templates, plan, replan: also draw the answer as an SVG picture into this file; "
          "render: where the picture goes (default: standard output); - is standard output");

namespace oobleck::client {
namespace {

constexpr std::string_view kCommands[] = {"load-profile", "list-profiles", "templates", "plan",
                                          "replan",       "instantiate",   "render",    "evaluate",
                                          "stats",        "health"};
constexpr char kCommandList[] =
    "one of load-profile, list-profiles, templates, plan, replan, instantiate, render, evaluate, "
    "stats, health";

// Connection flags an environment variable stands in for when the flag is not given, so
// that a fixed command (the container's HEALTHCHECK) works with whatever TLS the
// deployment configures.
struct EnvironmentDefault {
  std::string_view flag;
  const char* variable;
  std::string CliOptions::*option;
};
constexpr EnvironmentDefault kEnvironmentDefaults[] = {
    {"tls_ca", "OOBLECK_PLAN_TLS_CA", &CliOptions::tls_ca},
    {"tls_server_name", "OOBLECK_PLAN_TLS_SERVER_NAME", &CliOptions::tls_server_name},
    {"auth_token_file", "OOBLECK_PLAN_AUTH_TOKEN_FILE", &CliOptions::auth_token_file},
};
// Flags that take several values: --global-batch 64 128, --fail a b, --join x:t y:t.
constexpr std::string_view kListFlags[] = {"global_batch",     "fail",     "join", "template",
                                           "allreduce_across", "instances"};

struct FlagUse {
  std::string_view name;
  std::vector<std::string_view> commands;  // empty: every command
};

const std::vector<FlagUse>& FlagUses() {
  static const std::vector<FlagUse> kUses = {
      {"server", {}},
      {"json", {}},
      {"timeout_s", {}},
      {"tls_ca", {}},
      {"tls_server_name", {}},
      {"auth_token_file", {}},
      {"model", {"load-profile", "list-profiles", "templates", "evaluate"}},
      {"gpu_type", {"load-profile", "templates"}},
      {"microbatch_size", {"load-profile", "templates"}},
      {"replace", {"load-profile", "templates", "plan"}},
      {"server_dir", {"load-profile"}},
      {"nodes", {"templates"}},
      {"gpus_per_node", {"templates"}},
      {"cost_model", {"templates", "plan"}},
      {"microbatches", {"templates", "plan", "render"}},
      {"gpu_memory_gib", {"templates"}},
      {"intra_node_bytes_per_s", {"templates"}},
      {"inter_node_bytes_per_s", {"templates"}},
      {"optimizer_state_multiplier", {"templates", "plan"}},
      {"missing_allreduce", {"templates", "plan"}},
      {"cluster", {"templates", "plan"}},
      {"all_nodes", {"templates"}},
      {"progress", {"templates"}},
      {"measured_relative_speed", {"templates", "plan"}},
      {"global_batch", {"plan", "instantiate"}},
      {"min_nodes_per_pipeline", {"plan"}},
      {"max_nodes_per_pipeline", {"plan"}},
      {"plan", {"replan", "render", "evaluate"}},
      {"fail", {"replan"}},
      {"join", {"replan"}},
      {"tolerance", {"replan"}},
      {"svg", {"templates", "plan", "replan", "render"}},
      {"sailor_plan", {"evaluate"}},
      {"sailor_data", {"evaluate"}},
      {"network", {"evaluate"}},
      {"format", {"load-profile"}},
      {"profiles", {"load-profile"}},
      {"llm_info", {"load-profile"}},
      {"training_config", {"load-profile"}},
      {"fault_tolerance", {"plan", "replan"}},
      {"objective", {"plan"}},
      {"budget_per_hour", {"plan"}},
      {"horizon_iterations", {"replan"}},
      {"stage_gpus", {"templates", "plan", "replan"}},
      {"allreduce_key", {"load-profile"}},
      {"runtime_reserve_bytes", {"load-profile"}},
      {"template", {"instantiate"}},
      {"templates_file", {"instantiate"}},
      {"num_nodes", {"instantiate"}},
      {"allreduce_across", {"instantiate"}},
      {"instances", {"instantiate"}},
  };
  return kUses;
}

const FlagUse* FindUse(std::string_view name) {
  for (const FlagUse& use : FlagUses()) {
    if (use.name == name) return &use;
  }
  return nullptr;
}

bool Applies(const FlagUse& use, std::string_view command) {
  return use.commands.empty() ||
         std::find(use.commands.begin(), use.commands.end(), command) != use.commands.end();
}

std::string Dashed(std::string_view name) {
  std::string out(name);
  std::replace(out.begin(), out.end(), '_', '-');
  return out;
}

absl::Status Usage(const std::string& message) { return absl::InvalidArgumentError(message); }

// Word-wraps `text` to lines of at most `width` characters, each starting with `indent`.
std::string Wrap(absl::string_view text, const std::string& indent, size_t width = 92) {
  std::string out, line = indent;
  for (absl::string_view word : absl::StrSplit(text, ' ', absl::SkipEmpty())) {
    if (line.size() > indent.size() && line.size() + 1 + word.size() > width) {
      absl::StrAppend(&out, line, "\n");
      line = indent;
    }
    absl::StrAppend(&line, line.size() > indent.size() ? " " : "", word);
  }
  absl::StrAppend(&out, line, "\n");
  return out;
}

CliOptions ReadFlags() {
  CliOptions o;
  o.server = absl::GetFlag(FLAGS_server);
  o.json = absl::GetFlag(FLAGS_json);
  o.timeout_s = absl::GetFlag(FLAGS_timeout_s);
  o.tls_ca = absl::GetFlag(FLAGS_tls_ca);
  o.tls_server_name = absl::GetFlag(FLAGS_tls_server_name);
  o.auth_token_file = absl::GetFlag(FLAGS_auth_token_file);
  o.job.model = absl::GetFlag(FLAGS_model);
  o.job.gpu_type = absl::GetFlag(FLAGS_gpu_type);
  o.job.microbatch_size = absl::GetFlag(FLAGS_microbatch_size);
  o.replace = absl::GetFlag(FLAGS_replace);
  o.server_dir = absl::GetFlag(FLAGS_server_dir);
  o.nodes = absl::GetFlag(FLAGS_nodes);
  o.job.gpus_per_node = absl::GetFlag(FLAGS_gpus_per_node);
  o.job.cost_model = absl::GetFlag(FLAGS_cost_model);
  o.job.microbatches = absl::GetFlag(FLAGS_microbatches);
  o.gpu_memory_gib = absl::GetFlag(FLAGS_gpu_memory_gib);
  o.job.intra_node_bytes_per_s = absl::GetFlag(FLAGS_intra_node_bytes_per_s);
  o.job.inter_node_bytes_per_s = absl::GetFlag(FLAGS_inter_node_bytes_per_s);
  o.job.optimizer_state_multiplier = absl::GetFlag(FLAGS_optimizer_state_multiplier);
  o.missing_allreduce = absl::GetFlag(FLAGS_missing_allreduce);
  o.cluster = absl::GetFlag(FLAGS_cluster);
  o.all_nodes = absl::GetFlag(FLAGS_all_nodes);
  o.progress = absl::GetFlag(FLAGS_progress);
  o.measured_relative_speed = absl::GetFlag(FLAGS_measured_relative_speed);
  o.global_batch = absl::GetFlag(FLAGS_global_batch);
  o.min_nodes_per_pipeline = absl::GetFlag(FLAGS_min_nodes_per_pipeline);
  o.max_nodes_per_pipeline = absl::GetFlag(FLAGS_max_nodes_per_pipeline);
  o.plan = absl::GetFlag(FLAGS_plan);
  o.fail = absl::GetFlag(FLAGS_fail);
  o.join = absl::GetFlag(FLAGS_join);
  o.tolerance = absl::GetFlag(FLAGS_tolerance);
  o.svg = absl::GetFlag(FLAGS_svg);
  o.sailor_plan = absl::GetFlag(FLAGS_sailor_plan);
  o.sailor_data = absl::GetFlag(FLAGS_sailor_data);
  o.network = absl::GetFlag(FLAGS_network);
  o.format = absl::GetFlag(FLAGS_format);
  o.profiles = absl::GetFlag(FLAGS_profiles);
  o.llm_info = absl::GetFlag(FLAGS_llm_info);
  o.training_config = absl::GetFlag(FLAGS_training_config);
  o.fault_tolerance = absl::GetFlag(FLAGS_fault_tolerance);
  o.horizon_iterations = absl::GetFlag(FLAGS_horizon_iterations);
  o.objective = absl::GetFlag(FLAGS_objective);
  o.budget_per_hour = absl::GetFlag(FLAGS_budget_per_hour);
  o.stage_gpus = absl::GetFlag(FLAGS_stage_gpus);
  o.allreduce_key = absl::GetFlag(FLAGS_allreduce_key);
  o.runtime_reserve_bytes = absl::GetFlag(FLAGS_runtime_reserve_bytes);
  o.templates = absl::GetFlag(FLAGS_template);
  o.templates_file = absl::GetFlag(FLAGS_templates_file);
  o.num_nodes = absl::GetFlag(FLAGS_num_nodes);
  o.allreduce_across = absl::GetFlag(FLAGS_allreduce_across);
  o.instances = absl::GetFlag(FLAGS_instances);
  return o;
}

// Positional arguments each command takes.
absl::Status CheckArgs(const CommandLine& cl) {
  // Runs before cl.options is read.
  const bool takes_file =
      (cl.command == "load-profile" && absl::GetFlag(FLAGS_format) != "sailor") ||
      cl.command == "render";
  const size_t want = takes_file ? 1 : 0;
  if (cl.args.size() != want) {
    return Usage(absl::StrCat(cl.command, " takes ",
                              !takes_file              ? "no arguments"
                              : cl.command == "render" ? "one argument (ANSWER.json)"
                                                       : "one argument (DIR)",
                              ", got ", cl.args.size(), ": ", absl::StrJoin(cl.args, " ")));
  }
  return absl::OkStatus();
}

// Reads every flag into its absl flag (list flags take the arguments that follow them) and
// collects the other arguments in *positional; --help only sets cl->help.
absl::Status ParseFlags(int argc, char** argv, CommandLine* cl,
                        std::vector<std::string>* positional) {
  std::map<std::string, std::vector<std::string>> lists;  // values of kListFlags
  auto is_command = [](std::string_view word) {
    return std::find(std::begin(kCommands), std::end(kCommands), word) != std::end(kCommands);
  };
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "--") {
      for (++i; i < argc; ++i) positional->emplace_back(argv[i]);
      break;
    }
    if (arg.size() < 2 || arg[0] != '-') {
      positional->emplace_back(arg);
      continue;
    }
    std::string_view body = arg.substr(arg[1] == '-' ? 2 : 1);
    const size_t eq = body.find('=');
    std::string name(body.substr(0, eq));
    std::replace(name.begin(), name.end(), '-', '_');
    if (name == "help" || name == "h") {
      cl->help = true;
      continue;
    }
    const bool has_value = eq != std::string_view::npos;
    std::string value = has_value ? std::string(body.substr(eq + 1)) : "";

    absl::CommandLineFlag* flag = FindUse(name) ? absl::FindCommandLineFlag(name) : nullptr;
    if (flag == nullptr && absl::StartsWith(name, "no") && FindUse(name.substr(2)) != nullptr) {
      absl::CommandLineFlag* negated = absl::FindCommandLineFlag(name.substr(2));
      if (negated != nullptr && negated->IsOfType<bool>() && !has_value) {
        name = name.substr(2);
        flag = negated;
        value = "false";
      }
    }
    if (flag == nullptr) return Usage(absl::StrCat("unknown flag ", std::string(arg)));
    if (flag->IsOfType<bool>()) {
      if (!has_value && value.empty()) value = "true";
    } else if (!has_value) {
      if (i + 1 >= argc) return Usage(absl::StrCat("flag --", Dashed(name), " needs a value"));
      value = argv[++i];
    }
    if (std::find(std::begin(kListFlags), std::end(kListFlags), name) != std::end(kListFlags)) {
      // This value and every following argument up to the next flag (or, before the
      // command, up to the command) belong to the list; repeating the flag appends.
      std::vector<std::string>& values = lists[name];
      values.push_back(value);
      while (i + 1 < argc && argv[i + 1][0] != '-' &&
             !(positional->empty() && is_command(argv[i + 1]))) {
        values.emplace_back(argv[++i]);
      }
      cl->explicit_flags.insert(name);
      continue;
    }
    std::string error;
    if (!flag->ParseFrom(value, &error)) {
      return Usage(absl::StrCat("bad value for --", Dashed(name), ": ", error));
    }
    cl->explicit_flags.insert(name);
  }
  for (const auto& [name, values] : lists) {
    std::string error;
    if (!absl::FindCommandLineFlag(name)->ParseFrom(absl::StrJoin(values, ","), &error)) {
      return Usage(absl::StrCat("bad value for --", Dashed(name), ": ", error));
    }
  }

  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<CommandLine> ParseCommandLine(int argc, char** argv) {
  CommandLine cl;
  std::vector<std::string> positional;
  RETURN_IF_ERROR(ParseFlags(argc, argv, &cl, &positional));
  if (positional.empty()) {
    if (cl.help) return cl;
    return Usage(absl::StrCat("missing COMMAND (", kCommandList, ")"));
  }
  cl.command = positional.front();
  cl.args.assign(positional.begin() + 1, positional.end());
  if (std::find(std::begin(kCommands), std::end(kCommands), cl.command) == std::end(kCommands)) {
    return Usage(absl::StrCat("unknown command \"", cl.command, "\" (", kCommandList, ")"));
  }
  if (cl.help) return cl;
  for (const std::string& name : cl.explicit_flags) {
    if (!Applies(*FindUse(name), cl.command)) {
      return Usage(absl::StrCat("flag --", Dashed(name), " does not apply to ", cl.command));
    }
  }
  RETURN_IF_ERROR(CheckArgs(cl));
  cl.options = ReadFlags();
  for (const EnvironmentDefault& d : kEnvironmentDefaults) {
    const char* value = std::getenv(d.variable);
    if (!cl.IsSet(std::string(d.flag)) && value != nullptr && *value != '\0') {
      cl.options.*d.option = value;
    }
  }
  return cl;
}

std::string UsageText(const std::string& command) {
  std::string out =
      "usage: oobleck-plan [flags] COMMAND [args]\n"
      "\n"
      "Commands:\n"
      "  load-profile --model M --gpu-type G [--microbatch-size m] [--replace] [--server-dir] DIR\n"
      "               [--allreduce-key gpus|gpus-minus-one]\n"
      "      Store a profile in Oobleck's layout (mb<m>.json, allreduce_in_node.json,\n"
      "      allreduce_across_nodes.json). DIR is read here and sent inline, or with\n"
      "      --server-dir its path is sent for the server to read.\n"
      "  load-profile --format sailor --profiles profiles_tmp.json --llm-info llm_info.json\n"
      "               --training-config training_config_X.json [--model M] [--gpu-type T,...]\n"
      "               [--microbatch-size m] [--replace]\n"
      "      Store Sailor's profiles of the config's model (stored as M): one per GPU type,\n"
      "      micro-batch size and tensor-parallel degree tp. The files are sent inline.\n"
      "  list-profiles [--model M]\n"
      "      The stored profiles.\n"
      "  templates --model M --nodes A-B|N [--gpus-per-node g] [--gpu-type T] ...\n"
      "      Optimal pipeline template of a homogeneous cluster of B nodes, for every\n"
      "      pipeline size from A to B nodes.\n"
      "  templates --cluster FILE [--all-nodes | --nodes A-B] [--cost-model ...]\n"
      "      Optimal templates of a mixed cluster file; uploads the profiles the file names\n"
      "      (pass --replace to overwrite different ones on the server). Without --all-nodes\n"
      "      or --nodes, every mix of 1 to all nodes.\n"
      "  plan --cluster FILE --global-batch N [N ...] [--fault-tolerance F] ...\n"
      "      Pipelines bound to the file's node ids and the split of each global batch (in\n"
      "      micro-batches) minimising the iteration time, next to data parallelism. Its\n"
      "      --json output is what replan --plan reads.\n"
      "  replan --plan PLAN.json [--fail ID ...] [--join ID:TYPE ...] [--fault-tolerance F]\n"
      "         [--horizon-iterations N]\n"
      "      A new plan after nodes fail or join, the layers to copy where, its downtime and\n"
      "      the alternatives weighed. Its --json output is again a valid --plan.\n"
      "  instantiate (--template NODES:STAGES:MS ... | --templates-file ANSWER.json)\n"
      "         --num-nodes N --global-batch B [--allreduce-across P:MS ...] [--instances I ...]\n"
      "      Oobleck's pipeline instantiation, exact: pipelines of each template that use every\n"
      "      node and the split of B micro-batches (one count per template) minimising Oobleck's\n"
      "      iteration time. With --instances, only the batch split over those pipelines.\n"
      "  render ANSWER.json [--plan OLD.json] [--microbatches M] [--svg OUT.svg]\n"
      "      Draws a saved --json answer of templates, plan or replan as an SVG picture\n"
      "      (no server needed). A replan answer needs --plan, the plan it started from.\n"
      "      templates, plan and replan draw the same pictures with --svg FILE.\n"
      "  evaluate --sailor-plan FILE --sailor-data DIR [--model M] [--json]\n"
      "      Predicts the iteration time (with its breakdown) and the peak memory per GPU of\n"
      "      a plan in Sailor's format from Sailor's profiles and measured bandwidths (no\n"
      "      server needed; docs/COST_MODEL.md, \"Predicting real runs\").\n"
      "  evaluate --sailor-plan FILE --network DIR [--server HOST:PORT] [--model M] [--json]\n"
      "      The same through the server's Evaluate call, from the profiles it stores\n"
      "      (load-profile --format sailor) and the bandwidth files of DIR, sent inline.\n"
      "  evaluate --plan FILE [--server HOST:PORT] [--json]\n"
      "      Predicts a plan of ours (the --json output of plan or replan) under its own cost\n"
      "      model: its iteration time as that answer reported it, the breakdown (slowest\n"
      "      pipeline, bubbles, p2p, all-reduce; parts the model lacks are named) and the\n"
      "      memory per GPU of every stage (docs/COST_MODEL.md#breakdown-of-a-plan).\n"
      "  stats\n"
      "      Cache and request counters of the server.\n"
      "  health\n"
      "      Prints the server's grpc.health.v1 status (SERVING, NOT_SERVING, ...); exit code 0\n"
      "      only when SERVING. Needs no token. The container image's HEALTHCHECK.\n"
      "\n"
      "Flags (--a-b and --a_b are the same flag):\n";
  for (const FlagUse& use : FlagUses()) {
    if (!command.empty() && !Applies(use, command)) continue;
    const absl::CommandLineFlag* flag = absl::FindCommandLineFlag(std::string(use.name));
    if (flag == nullptr) continue;
    std::string default_value = flag->DefaultValue();
    if (default_value.empty()) default_value = "\"\"";
    absl::StrAppend(&out, "  --", Dashed(use.name), "  (default: ", default_value, ")\n",
                    Wrap(flag->Help(), "      "));
  }
  absl::StrAppend(&out,
                  "\nEnvironment: OOBLECK_PLAN_TLS_CA, OOBLECK_PLAN_TLS_SERVER_NAME and "
                  "OOBLECK_PLAN_AUTH_TOKEN_FILE\nstand for --tls-ca, --tls-server-name and "
                  "--auth-token-file when those are not given.\n");
  absl::StrAppend(&out,
                  "\nOutput: tables for people, or --json. Errors go to stderr as "
                  "\"error: <CODE>: <message>\";\nexit code 1 for errors, 2 for usage errors.\n");
  return out;
}

}  // namespace oobleck::client
