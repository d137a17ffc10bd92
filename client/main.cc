// oobleck-plan: command-line client of the oobleck-planner service.
//   oobleck-plan [flags] COMMAND [args]   (oobleck-plan --help for the list)
// Exit codes: 0 success, 1 error (printed as "error: <CODE>: <message>"), 2 usage error.
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "client/channel_security.h"
#include "client/command_line.h"
#include "client/evaluate_command.h"
#include "client/instantiate_command.h"
#include "client/output.h"
#include "client/plan_commands.h"
#include "client/planner_target.h"
#include "client/progress_bar.h"
#include "client/render_command.h"
#include "client/requests.h"
#include "client/svg/schedule_picture.h"
#include "core/cluster_file.h"
#include "core/file_reader.h"
#include "core/profile.h"
#include "core/status_macros.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "oobleck/planner/v1/planner.grpc.pb.h"

namespace oobleck::client {
namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

absl::Status FromGrpc(const grpc::Status& status) {
  // grpc::StatusCode and absl::StatusCode share the canonical code numbers.
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()), status.error_message());
}

// One channel, one deadline per call.
class PlannerConnection {
 public:
  PlannerConnection(const std::shared_ptr<grpc::Channel>& channel, double timeout_s)
      : channel_(channel), stub_(pb::Planner::NewStub(channel)), timeout_s_(timeout_s) {}

  template <typename Request, typename Response>
  absl::Status Call(grpc::Status (pb::Planner::Stub::*method)(grpc::ClientContext*, const Request&,
                                                              Response*),
                    const Request& request, Response* response) {
    grpc::ClientContext context;
    SetDeadline(&context);
    return FromGrpc((stub_.get()->*method)(&context, request, response));
  }

  // PlanTemplatesStream: `on_progress` sees each progress update, `response` gets the
  // answer.
  absl::Status StreamTemplates(const pb::PlanTemplatesRequest& request,
                               const std::function<void(const pb::SearchProgress&)>& on_progress,
                               pb::PlanTemplatesResponse* response) {
    grpc::ClientContext context;
    SetDeadline(&context);
    std::unique_ptr<grpc::ClientReader<pb::PlanTemplatesUpdate>> reader =
        stub_->PlanTemplatesStream(&context, request);
    pb::PlanTemplatesUpdate update;
    bool answered = false;
    while (reader->Read(&update)) {
      if (update.has_progress()) on_progress(update.progress());
      if (update.has_response()) {
        *response = std::move(*update.mutable_response());
        answered = true;
      }
    }
    RETURN_IF_ERROR(FromGrpc(reader->Finish()));
    if (!answered) {
      return absl::InternalError("PlanTemplatesStream ended without an answer");
    }
    return absl::OkStatus();
  }

  absl::StatusOr<grpc::health::v1::HealthCheckResponse> CheckHealth() {
    grpc::ClientContext context;
    SetDeadline(&context);
    grpc::health::v1::HealthCheckResponse response;
    // "": the server as a whole, what container and Kubernetes probes ask about.
    const grpc::Status status = grpc::health::v1::Health::NewStub(channel_)->Check(
        &context, grpc::health::v1::HealthCheckRequest(), &response);
    if (!status.ok()) return FromGrpc(status);
    return response;
  }

 private:
  void SetDeadline(grpc::ClientContext* context) const {
    context->set_deadline(std::chrono::system_clock::now() +
                          std::chrono::microseconds(static_cast<int64_t>(timeout_s_ * 1e6)));
  }

  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<pb::Planner::Stub> stub_;
  double timeout_s_;
};

void Print(const CliOptions& options, const google::protobuf::Message& message,
           const std::string& table) {
  std::cout << (options.json ? ToJson(message) : table);
  if (options.json) std::cout << "\n";
}

// ---------------------------------------------------------------------------------------
// Usage checks: everything that is wrong with the command line itself (exit code 2).

absl::Status Usage(const std::string& message) { return absl::InvalidArgumentError(message); }

std::string DashedFlag(std::string flag) {
  std::replace(flag.begin(), flag.end(), '_', '-');
  return flag;
}

absl::Status CheckSailorLoadUsage(const CommandLine& cl) {
  const CliOptions& o = cl.options;
  if (o.format != "sailor") {
    return Usage(absl::StrCat("--format must be oobleck or sailor (got \"", o.format, "\")"));
  }
  if (o.profiles.empty() || o.llm_info.empty() || o.training_config.empty()) {
    return Usage("load-profile --format sailor needs --profiles, --llm-info and --training-config");
  }
  for (const char* flag : {"server_dir", "allreduce_key"}) {
    if (cl.IsSet(flag)) {
      return Usage(absl::StrCat("--", DashedFlag(flag), " does not apply with --format sailor"));
    }
  }
  if (o.job.microbatch_size < 0) return Usage("--microbatch-size must be >= 0");
  return absl::OkStatus();
}

// evaluate: --plan FILE alone (a plan of ours), or --sailor-plan with one of --sailor-data
// and --network.
absl::Status CheckEvaluateUsage(const CommandLine& cl) {
  const CliOptions& o = cl.options;
  if (!o.plan.empty()) {
    for (const char* flag : {"sailor_plan", "sailor_data", "network", "model"}) {
      if (cl.IsSet(flag)) {
        return Usage(absl::StrCat("--", DashedFlag(flag),
                                  " is for plans in Sailor's format, not with --plan (the plan's "
                                  "answer holds its job)"));
      }
    }
    return absl::OkStatus();
  }
  if (o.sailor_plan.empty() || o.sailor_data.empty() == o.network.empty()) {
    return Usage(
        "evaluate needs --sailor-plan FILE and either --sailor-data DIR (evaluated here) or "
        "--network DIR (evaluated by the server from its stored profiles), or --plan FILE (a "
        "plan or replan --json answer, evaluated by the server)");
  }
  return absl::OkStatus();
}

absl::Status CheckUsage(const CommandLine& cl) {
  const CliOptions& o = cl.options;
  if (!(o.timeout_s > 0)) return Usage("--timeout_s must be > 0");
  if (!o.tls_server_name.empty() && o.tls_ca.empty()) {
    return Usage(
        "--tls-server-name (or OOBLECK_PLAN_TLS_SERVER_NAME) needs --tls-ca (or "
        "OOBLECK_PLAN_TLS_CA): it names the certificate TLS checks");
  }
  if (cl.command == "load-profile" && o.format != "oobleck") return CheckSailorLoadUsage(cl);
  if (cl.command == "load-profile") {
    for (const char* flag : {"profiles", "llm_info", "training_config"}) {
      if (cl.IsSet(flag)) {
        return Usage(absl::StrCat("--", DashedFlag(flag), " needs --format sailor"));
      }
    }
    if (o.job.model.empty()) return Usage("load-profile needs --model");
    if (o.job.gpu_type.empty()) return Usage("load-profile needs --gpu-type");
    if (o.job.microbatch_size < 0) return Usage("--microbatch-size must be >= 0");
    if (absl::StatusOr<pb::AllreduceKey> k = ParseAllreduceKey(o.allreduce_key); !k.ok()) {
      return k.status();
    }
  }
  if (absl::StatusOr<pb::StageGpus> g = ParseStageGpus(o.stage_gpus); !g.ok()) return g.status();
  if (cl.command == "instantiate") return CheckInstantiateUsage(cl);
  if (cl.command == "plan" || cl.command == "replan") return CheckPlanUsage(cl);
  if (cl.command == "render" && o.job.microbatches < 0) return Usage("--microbatches must be >= 0");
  if (cl.command == "evaluate") return CheckEvaluateUsage(cl);
  if (cl.command != "templates") return absl::OkStatus();

  if (cl.IsSet("nodes")) {
    if (absl::StatusOr<NodeRange> r = ParseNodeRange(o.nodes); !r.ok()) return r.status();
  }
  if (absl::StatusOr<pb::MissingAllreduce> m = ParseMissingAllreduce(o.missing_allreduce);
      !m.ok()) {
    return m.status();
  }
  if (o.job.microbatches < 0) return Usage("--microbatches must be >= 0");
  if (cl.IsSet("cluster")) {
    // The cluster file describes the hardware and the model; flags would contradict it.
    for (const char* flag :
         {"model", "gpu_type", "microbatch_size", "gpus_per_node", "gpu_memory_gib",
          "intra_node_bytes_per_s", "inter_node_bytes_per_s"}) {
      if (cl.IsSet(flag)) {
        std::string dashed = flag;
        std::replace(dashed.begin(), dashed.end(), '_', '-');
        return Usage(
            absl::StrCat("--", dashed, " does not apply with --cluster (the file sets it)"));
      }
    }
    if (o.all_nodes && cl.IsSet("nodes")) return Usage("pass --all-nodes or --nodes, not both");
    if (cl.IsSet("measured_relative_speed") && !(o.measured_relative_speed > 0)) {
      return Usage("--measured-relative-speed must be > 0");
    }
    return absl::OkStatus();
  }
  for (const char* flag : {"all_nodes", "measured_relative_speed", "replace"}) {
    if (cl.IsSet(flag)) {
      std::string dashed = flag;
      std::replace(dashed.begin(), dashed.end(), '_', '-');
      return Usage(absl::StrCat("--", dashed, " needs --cluster"));
    }
  }
  if (o.job.model.empty()) return Usage("templates needs --model (or --cluster FILE)");
  if (!cl.IsSet("nodes")) return Usage("templates needs --nodes A-B or N (or --cluster FILE)");
  if (o.job.gpus_per_node < 1) return Usage("--gpus-per-node must be >= 1");
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------------------
// Commands (errors: exit code 1).

absl::Status LoadProfile(const CommandLine& cl, PlannerConnection& server) {
  const CliOptions& o = cl.options;
  pb::LoadProfileRequest request;
  request.set_model(o.job.model);
  request.set_gpu_type(o.job.gpu_type);
  request.set_replace(o.replace);
  request.set_allreduce_key(*ParseAllreduceKey(o.allreduce_key));
  if (cl.IsSet("runtime_reserve_bytes")) request.set_runtime_reserve_bytes(o.runtime_reserve_bytes);
  if (o.server_dir) {
    request.set_microbatch_size(o.job.microbatch_size);
    request.set_directory(cl.args[0]);
  } else {
    ASSIGN_OR_RETURN(ProfileDirFiles dir, ReadProfileDir(cl.args[0], o.job.microbatch_size));
    request.set_microbatch_size(dir.microbatch_size);
    *request.mutable_files() = std::move(dir.files);
  }
  pb::LoadProfileResponse response;
  if (absl::Status s = server.Call(&pb::Planner::Stub::LoadProfile, request, &response); !s.ok()) {
    if (s.code() == absl::StatusCode::kAlreadyExists && !o.replace) {
      return absl::AlreadyExistsError(absl::StrCat(s.message(), " (pass --replace to overwrite)"));
    }
    return s;
  }
  Print(o, response, FormatProfileLoaded(response));
  return absl::OkStatus();
}

// Sailor's three files, read here and sent inline.
absl::Status LoadSailorProfile(const CommandLine& cl, PlannerConnection& server) {
  const CliOptions& o = cl.options;
  pb::LoadProfileRequest request;
  request.set_model(o.job.model);
  request.set_microbatch_size(o.job.microbatch_size);
  request.set_replace(o.replace);
  if (cl.IsSet("runtime_reserve_bytes")) request.set_runtime_reserve_bytes(o.runtime_reserve_bytes);
  pb::SailorProfileFiles* files = request.mutable_sailor();
  ASSIGN_OR_RETURN(*files->mutable_profiles_json(), ReadRegularFile(o.profiles, o.profiles));
  ASSIGN_OR_RETURN(*files->mutable_llm_info_json(), ReadRegularFile(o.llm_info, o.llm_info));
  ASSIGN_OR_RETURN(*files->mutable_training_config_json(),
                   ReadRegularFile(o.training_config, o.training_config));
  for (absl::string_view gpu : absl::StrSplit(o.job.gpu_type, ',', absl::SkipEmpty())) {
    files->add_gpu_types(std::string(gpu));
  }
  pb::LoadProfileResponse response;
  if (absl::Status s = server.Call(&pb::Planner::Stub::LoadProfile, request, &response); !s.ok()) {
    if (s.code() == absl::StatusCode::kAlreadyExists && !o.replace) {
      return absl::AlreadyExistsError(absl::StrCat(s.message(), " (pass --replace to overwrite)"));
    }
    return s;
  }
  std::string table = absl::StrCat(response.replaced() ? "stored (replacing) " : "stored ",
                                   response.profiles_size(), " profiles\n");
  for (const pb::ProfileInfo& info : response.profiles()) {
    absl::StrAppend(&table, "  ", info.model(), "/", info.gpu_type(), "/mb", info.microbatch_size(),
                    "/tp", info.tp(), "  ", info.num_layers(), " layers\n");
  }
  for (const std::string& line : response.skipped())
    absl::StrAppend(&table, "  skipped ", line, "\n");
  Print(o, response, table);
  return absl::OkStatus();
}

absl::Status LoadAnyProfile(const CommandLine& cl, PlannerConnection& server) {
  return cl.options.format == "sailor" ? LoadSailorProfile(cl, server) : LoadProfile(cl, server);
}

absl::Status ServerEvaluate(const CommandLine& cl, PlannerConnection& server) {
  return RunServerEvaluate(cl, [&server](const pb::EvaluateRequest& r, pb::EvaluateResponse* out) {
    return server.Call(&pb::Planner::Stub::Evaluate, r, out);
  });
}

absl::Status ListProfiles(const CommandLine& cl, PlannerConnection& server) {
  pb::ListProfilesRequest request;
  request.set_model(cl.options.job.model);
  pb::ListProfilesResponse response;
  if (absl::Status s = server.Call(&pb::Planner::Stub::ListProfiles, request, &response); !s.ok()) {
    return s;
  }
  Print(cl.options, response, FormatProfiles(response));
  return absl::OkStatus();
}

// Makes sure the server holds `upload`'s profile: uploads it, or accepts an identical one
// already there (same fingerprint); a different one is only overwritten with --replace.
absl::Status EnsureProfile(const ProfileUpload& upload, bool replace, PlannerConnection& server) {
  const std::string key =
      absl::StrCat(upload.model, "/", upload.gpu_type, "/mb", upload.microbatch_size);
  ASSIGN_OR_RETURN(ProfileDirFiles dir, ReadProfileDir(upload.dir, upload.microbatch_size));
  // Parsed here too, for the fingerprint and so a broken profile is reported by its path.
  ASSIGN_OR_RETURN(
      ModelProfile local,
      LoadOobleckProfileDir(upload.dir, upload.model, upload.gpu_type, upload.microbatch_size));
  const std::string local_fingerprint = local.Fingerprint();

  pb::LoadProfileRequest request;
  request.set_model(upload.model);
  request.set_gpu_type(upload.gpu_type);
  request.set_microbatch_size(upload.microbatch_size);
  request.set_replace(replace);
  *request.mutable_files() = std::move(dir.files);
  pb::LoadProfileResponse response;
  absl::Status s = server.Call(&pb::Planner::Stub::LoadProfile, request, &response);
  if (s.ok()) {
    std::cerr << (response.replaced() ? "replaced" : "uploaded") << " profile " << key << " from "
              << upload.dir << "\n";
    return absl::OkStatus();
  }
  if (s.code() != absl::StatusCode::kAlreadyExists) return s;

  pb::ListProfilesRequest list_request;
  list_request.set_model(upload.model);
  pb::ListProfilesResponse list;
  if (absl::Status ls = server.Call(&pb::Planner::Stub::ListProfiles, list_request, &list);
      !ls.ok()) {
    return ls;
  }
  for (const pb::ProfileInfo& info : list.profiles()) {
    if (info.gpu_type() != upload.gpu_type || info.microbatch_size() != upload.microbatch_size) {
      continue;
    }
    if (info.fingerprint() == local_fingerprint) return absl::OkStatus();
    return absl::AlreadyExistsError(absl::StrCat("the server's profile ", key, " (fingerprint ",
                                                 info.fingerprint(), ") differs from the one in ",
                                                 upload.dir, " (fingerprint ", local_fingerprint,
                                                 "); pass --replace to overwrite it"));
  }
  return s;  // ALREADY_EXISTS yet not listed: report the server's own words
}

absl::Status Templates(const CommandLine& cl, PlannerConnection& server) {
  const CliOptions& o = cl.options;
  pb::PlanTemplatesRequest request;
  if (cl.IsSet("cluster")) {
    ASSIGN_OR_RETURN(ClusterFile file, LoadClusterFile(o.cluster));
    ClusterOverrides overrides = ClusterOverridesFromFlags(cl);
    if (cl.IsSet("nodes")) overrides.nodes = *ParseNodeRange(o.nodes);
    overrides.all_nodes = o.all_nodes;
    absl::StatusOr<ClusterRequest> built = BuildClusterRequest(file, overrides);
    if (!built.ok()) {
      return absl::Status(built.status().code(),
                          absl::StrCat(o.cluster, ": ", built.status().message()));
    }
    for (const ProfileUpload& upload : built->uploads) {
      RETURN_IF_ERROR(EnsureProfile(upload, o.replace, server));
    }
    request = std::move(built->request);
  } else {
    HomogeneousOptions h;
    h.job = o.job;
    h.nodes = *ParseNodeRange(o.nodes);
    h.gpu_memory_bytes = o.gpu_memory_gib * kGiB;
    h.missing_allreduce = *ParseMissingAllreduce(o.missing_allreduce);
    request = BuildHomogeneousRequest(h);
  }
  request.set_stage_gpus(*ParseStageGpus(o.stage_gpus));
  pb::PlanTemplatesResponse response;
  const bool stderr_is_terminal = isatty(STDERR_FILENO) == 1;
  absl::Status s = absl::UnimplementedError("no progress asked for");
  if (cl.IsSet("progress") ? o.progress : stderr_is_terminal) {
    ProgressBar bar(&std::cerr, /*redraw=*/stderr_is_terminal);
    s = server.StreamTemplates(
        request, [&bar](const pb::SearchProgress& progress) { bar.Show(progress); }, &response);
  }
  // Plain PlanTemplates without progress, or from a server that predates the stream.
  if (s.code() == absl::StatusCode::kUnimplemented) {
    s = server.Call(&pb::Planner::Stub::PlanTemplates, request, &response);
  }
  if (!s.ok()) return s;
  const std::map<std::string, std::string> gpu_type_of = GpuTypesOf(request.cluster());
  Print(o, response, FormatTemplates(response, gpu_type_of));
  if (o.svg.empty()) return absl::OkStatus();
  svg::ScheduleOptions picture;
  picture.microbatches = request.microbatches();
  picture.gpu_type_of = gpu_type_of;
  for (const pb::NodeType& t : request.cluster().node_types()) {
    picture.gpu_types.push_back(GpuTypeOf(t));
  }
  ASSIGN_OR_RETURN(const std::string svg, svg::DrawTemplatesSvg(response, picture));
  return WriteSvgFile(o.svg, svg);
}

absl::Status Stats(const CommandLine& cl, PlannerConnection& server) {
  pb::GetStatsResponse response;
  if (absl::Status s = server.Call(&pb::Planner::Stub::GetStats, pb::GetStatsRequest(), &response);
      !s.ok()) {
    return s;
  }
  Print(cl.options, response, FormatStats(response));
  return absl::OkStatus();
}

// Prints the health status; an error unless it is SERVING.
absl::Status Health(const CommandLine& cl, PlannerConnection& server) {
  absl::StatusOr<grpc::health::v1::HealthCheckResponse> response = server.CheckHealth();
  if (!response.ok()) {
    return absl::Status(response.status().code(),
                        absl::StrCat("health check of ", cl.options.server,
                                     " failed: ", response.status().message()));
  }
  const std::string status =
      grpc::health::v1::HealthCheckResponse::ServingStatus_Name(response->status());
  Print(cl.options, *response, status + "\n");
  if (response->status() != grpc::health::v1::HealthCheckResponse::SERVING) {
    return absl::UnavailableError(
        absl::StrCat("the server at ", cl.options.server, " is ", status, ", not SERVING"));
  }
  return absl::OkStatus();
}

void PrintError(const absl::Status& status) {
  std::cerr << "error: " << absl::StatusCodeToString(status.code()) << ": " << status.message()
            << "\n";
}

int RunCommand(int argc, char** argv) {
  absl::StatusOr<CommandLine> cl = ParseCommandLine(argc, argv);
  if (!cl.ok()) {
    PrintError(cl.status());
    std::cerr << "run oobleck-plan --help for usage\n";
    return 2;
  }
  if (cl->help) {
    std::cout << UsageText(cl->command);
    return 0;
  }
  if (absl::Status usage = CheckUsage(*cl); !usage.ok()) {
    PrintError(usage);
    std::cerr << "run oobleck-plan " << cl->command << " --help for usage\n";
    return 2;
  }
  const bool local_evaluate = cl->command == "evaluate" && !cl->options.sailor_data.empty();
  if (cl->command == "render" || local_evaluate) {  // reads files; no server
    absl::Status status = cl->command == "render" ? RunRender(*cl) : RunEvaluate(*cl);
    if (!status.ok()) PrintError(status);
    return status.ok() ? 0 : 1;
  }
  absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> credentials =
      ChannelCredentialsFromFiles(cl->options.tls_ca, cl->options.auth_token_file);
  if (!credentials.ok()) {
    PrintError(credentials.status());
    return 2;
  }
  absl::StatusOr<std::string> target = PlannerTarget(cl->options.server);
  if (!target.ok()) {
    PrintError(target.status());
    return 2;
  }
  PlannerConnection server(CreatePlannerChannel(*target, *credentials, cl->options.tls_server_name),
                           cl->options.timeout_s);
  absl::Status status;
  if (cl->command == "load-profile") {
    status = LoadAnyProfile(*cl, server);
  } else if (cl->command == "evaluate") {
    status = ServerEvaluate(*cl, server);
  } else if (cl->command == "list-profiles") {
    status = ListProfiles(*cl, server);
  } else if (cl->command == "templates") {
    status = Templates(*cl, server);
  } else if (cl->command == "plan" || cl->command == "replan") {
    // client/plan_commands.cc; the calls go through this connection.
    PlanCalls calls;
    calls.plan = [&server](const pb::PlanRequest& r, pb::PlanResponse* out) {
      return server.Call(&pb::Planner::Stub::Plan, r, out);
    };
    calls.replan = [&server](const pb::ReplanRequest& r, pb::ReplanResponse* out) {
      return server.Call(&pb::Planner::Stub::Replan, r, out);
    };
    calls.ensure_profile = [&](const ProfileUpload& upload) {
      return EnsureProfile(upload, cl->options.replace, server);
    };
    calls.print = [&](const google::protobuf::Message& m, const std::string& table) {
      Print(cl->options, m, table);
    };
    status = cl->command == "plan" ? RunPlan(*cl, calls) : RunReplan(*cl, calls);
  } else if (cl->command == "instantiate") {
    InstantiateCalls calls;
    calls.instantiate = [&server](const pb::InstantiateRequest& r, pb::InstantiateResponse* out) {
      return server.Call(&pb::Planner::Stub::Instantiate, r, out);
    };
    calls.print = [&](const google::protobuf::Message& m, const std::string& table) {
      Print(cl->options, m, table);
    };
    status = RunInstantiate(*cl, calls);
  } else if (cl->command == "health") {
    status = Health(*cl, server);
  } else {
    status = Stats(*cl, server);
  }
  if (!status.ok()) {
    PrintError(status);
    return 1;
  }
  return 0;
}

// What was printed must have reached stdout: `> /dev/full` or a full disk is an error
// (exit 1), not a silent exit 0 with nothing written.
int Main(int argc, char** argv) {
  const int code = RunCommand(argc, argv);
  std::cout.flush();
  errno = 0;
  const bool flushed = std::fflush(stdout) == 0;
  const int error = errno;  // the reason, when the last write failed here
  if (!std::cout.good() || !flushed || std::ferror(stdout)) {
    PrintError(absl::DataLossError(absl::StrCat(
        "cannot write the output to stdout",
        !flushed && error != 0 ? absl::StrCat(": ", std::strerror(error)) : std::string())));
    return code == 0 ? 1 : code;
  }
  return code;
}

}  // namespace
}  // namespace oobleck::client

int main(int argc, char** argv) { return oobleck::client::Main(argc, argv); }
