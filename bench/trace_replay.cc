// Trace replay (bench/README.md#trace-replay): goodput under real node failures. Replays
// node event traces (examples/traces, `time_ms,add|remove,node`) against the real
// server: Plan once enough nodes are up, then one Replan per event time (events at the same
// time are one call), and counts the samples each policy trains:
//
//   ours        Replan as it chooses (downtime-aware; the horizon estimated from the event
//               rate seen so far unless --horizon_iterations is given);
//   oobleck     Replan forced to Oobleck's fallback rule on failures (force_strategy
//               "oobleck-fallback"; joins: see --fallback_joins);
//   checkpoint  restart from the last checkpoint on every event, then a fresh Plan.
//
// Time model (the same for all three): a plan trains whole iterations of its
// iteration_time_ms; an event interrupts the iteration in flight (lost) unless the plan does
// not change; applying a new plan costs the Replan's downtime_s; a policy that loses layers
// (every holder failed) or restarts on purpose loses the iterations since its last
// checkpoint (one every --checkpoint_interval_s of training, rounded to whole iterations)
// and waits --restart_s; with no plan for the nodes up, training pauses until one exists.
// Prints, per policy, samples, effective-time fraction (time of kept iterations / trace
// span), downtime, restarts, and last `goodput_ratio_vs_oobleck=X` (ours / oobleck).
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "bench/server_process.h"
#include "bench/trace_events.h"
#include "client/requests.h"
#include "core/cluster_file.h"
#include "oobleck/planner/v1/planner.grpc.pb.h"

ABSL_FLAG(std::string, server, "",
          "address of a running oobleck-planner (empty: start the one next to this program on "
          "127.0.0.1:0)");
ABSL_FLAG(std::string, server_bin, "", "with --server empty: the oobleck-planner binary");
ABSL_FLAG(std::string, server_log, "/dev/null",
          "with --server empty: where the started server's request log goes");
ABSL_FLAG(std::string, cluster, "",
          "cluster file (docs/CLUSTER_FILE.md format): model, profiles, job and the node "
          "types the traces are mapped to (its node_groups give the types; their node counts "
          "are not used)");
ABSL_FLAG(int, fault_tolerance, 0, "PlanRequest.fault_tolerance of every plan");
ABSL_FLAG(int, global_batch, 128, "micro-batches per iteration");
ABSL_FLAG(int, max_nodes_per_pipeline, 0, "PlanRequest.max_nodes_per_pipeline (0: default)");
ABSL_FLAG(double, horizon_iterations, -1,
          "ours: ReplanRequest.horizon_iterations (< 0: the mean time between events seen so "
          "far over the current iteration time)");
ABSL_FLAG(double, restart_overhead_s, 5, "ReplanRequest.restart_overhead_s for every Replan");
ABSL_FLAG(double, checkpoint_interval_s, 600, "training time between checkpoints");
ABSL_FLAG(double, restart_s, 120, "restarting from a checkpoint: seconds until training runs");
ABSL_FLAG(std::string, fallback_joins, "optimal",
          "oobleck: strategy forced on events with joins only: \"optimal\" (re-instantiate "
          "over every node, as Oobleck does when it starts) or \"oobleck-fallback\" (joined "
          "nodes stay idle)");
ABSL_FLAG(double, deadline_s, 120, "deadline of each call");

namespace pb = ::oobleck::planner::v1;
using oobleck::bench::TraceEvent;

namespace {

int Fail(const std::string& message) {
  std::cerr << "trace_replay: " << message << "\n";
  return 1;
}

// --trace may be given several times; absl keeps only the last value of a flag, so the
// values are taken out of argv first.
std::vector<std::string> TakeTraceFlags(int* argc, char** argv) {
  std::vector<std::string> traces;
  int out = 1;
  for (int i = 1; i < *argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--trace" && i + 1 < *argc) {
      traces.push_back(argv[++i]);
    } else if (arg.rfind("--trace=", 0) == 0) {
      traces.push_back(arg.substr(8));
    } else {
      argv[out++] = argv[i];
    }
  }
  *argc = out;
  return traces;
}

// One call's worth of events: a time and the nodes removed and added then. A node touched
// twice at the same time starts the next group (a Replan cannot fail and join one id).
struct EventGroup {
  int64_t time_ms = 0;
  std::vector<std::string> removed;
  std::vector<pb::Node> added;
};
std::vector<EventGroup> GroupByTime(const std::vector<TraceEvent>& events) {
  std::vector<EventGroup> groups;
  std::set<std::string> touched;
  for (const TraceEvent& e : events) {
    if (groups.empty() || groups.back().time_ms != e.time_ms || touched.count(e.node_id)) {
      groups.push_back({e.time_ms, {}, {}});
      touched.clear();
    }
    touched.insert(e.node_id);
    if (e.add) {
      pb::Node node;
      node.set_id(e.node_id);
      node.set_node_type(e.node_type);
      groups.back().added.push_back(std::move(node));
    } else {
      groups.back().removed.push_back(e.node_id);
    }
  }
  return groups;
}

class Planner {
 public:
  explicit Planner(std::shared_ptr<grpc::Channel> channel)
      : stub_(pb::Planner::NewStub(std::move(channel))) {}
  grpc::Status Plan(const pb::PlanRequest& request, pb::PlanResponse* response) {
    grpc::ClientContext context;
    SetDeadline(&context);
    return stub_->Plan(&context, request, response);
  }
  grpc::Status Replan(const pb::ReplanRequest& request, pb::ReplanResponse* response) {
    grpc::ClientContext context;
    SetDeadline(&context);
    return stub_->Replan(&context, request, response);
  }
  grpc::Status LoadProfile(const pb::LoadProfileRequest& request) {
    grpc::ClientContext context;
    SetDeadline(&context);
    pb::LoadProfileResponse response;
    return stub_->LoadProfile(&context, request, &response);
  }

 private:
  static void SetDeadline(grpc::ClientContext* context) {
    context->set_deadline(
        std::chrono::system_clock::now() +
        std::chrono::milliseconds(static_cast<int64_t>(absl::GetFlag(FLAGS_deadline_s) * 1000)));
  }
  std::unique_ptr<pb::Planner::Stub> stub_;
};

enum class Policy { kOurs, kOobleck, kCheckpoint };
const char* PolicyName(Policy p) {
  return p == Policy::kOurs ? "ours" : p == Policy::kOobleck ? "oobleck" : "checkpoint";
}

// Whether the nodes of `failed` held every replica of some layer of `plan`.
bool LosesLayers(const pb::ClusterPlan& plan, const std::set<std::string>& failed) {
  int layers = 0;
  for (const pb::PlannedPipeline& p : plan.pipelines()) {
    for (const pb::Stage& s : p.template_().stages()) layers = std::max(layers, s.layer_end());
  }
  std::vector<bool> held(layers, false);
  for (const pb::PlannedPipeline& p : plan.pipelines()) {
    for (const pb::Stage& s : p.template_().stages()) {
      if (failed.count(p.node_ids(s.node_index()))) continue;
      for (int l = s.layer_begin(); l < s.layer_end(); ++l) held[l] = true;
    }
  }
  return std::find(held.begin(), held.end(), false) != held.end();
}

// One policy's job over the trace.
class Job {
 public:
  Job(Policy policy, Planner* planner, const pb::PlanRequest& base, double span_start_s)
      : policy_(policy), planner_(planner), base_(base), last_s_(span_start_s) {}

  // Trains until `now_s`, then applies the event. Errors other than "no plan fits" end the
  // replay (they are bugs or bad input, never skipped).
  absl::Status Step(const EventGroup& group, const std::vector<pb::Node>& up_after,
                    double events_per_s) {
    const double now_s = group.time_ms / 1e3;
    Train(now_s);
    std::set<std::string> failed;
    for (const std::string& id : group.removed) {
      if (running_ && InPlan(id)) failed.insert(id);
    }
    if (!running_) return Start(now_s, up_after, /*from_checkpoint=*/false);
    if (policy_ == Policy::kCheckpoint || LosesLayers(plan_, failed)) {
      RollBack();
      return Start(now_s, up_after, /*from_checkpoint=*/true);
    }
    pb::ReplanRequest replan;
    *replan.mutable_request() = request_;
    *replan.mutable_plan() = plan_;
    for (const std::string& id : group.removed) replan.add_failed_node_ids(id);
    for (const pb::Node& n : group.added) *replan.add_joined_nodes() = n;
    replan.set_restart_overhead_s(absl::GetFlag(FLAGS_restart_overhead_s));
    if (policy_ == Policy::kOobleck) {
      replan.set_force_strategy(group.removed.empty() ? absl::GetFlag(FLAGS_fallback_joins)
                                                      : "oobleck-fallback");
    } else {
      const double horizon = absl::GetFlag(FLAGS_horizon_iterations);
      replan.set_horizon_iterations(
          horizon >= 0 ? horizon : (events_per_s > 0 ? 1 / events_per_s : 1e6) / IterationS());
    }
    pb::ReplanResponse r;
    const grpc::Status s = planner_->Replan(replan, &r);
    if (s.error_code() == grpc::StatusCode::FAILED_PRECONDITION) {
      running_ = false;  // no plan fits the nodes up: pause (the survivors keep the weights)
      paused_ += 1;
      return absl::OkStatus();
    }
    if (!s.ok()) {
      return absl::InternalError(
          absl::StrCat(PolicyName(policy_), ": Replan at ", now_s, " s: ", s.error_message()));
    }
    ++replans_;
    degraded_ += r.degraded_reason().empty() ? 0 : 1;
    if (r.downtime_s() > 0) partial_s_ = 0;  // the iteration in flight is lost
    request_ = r.request();
    plan_ = r.plan();
    down_until_s_ = now_s + r.downtime_s();
    return absl::OkStatus();
  }

  void Finish(double end_s) { Train(end_s); }

  std::string Report(double span_s, int samples_per_iteration) const {
    return absl::StrFormat(
        "%-10s samples=%.0f effective_time_fraction=%.3f downtime_s=%.0f restarts=%d "
        "replans=%d degraded=%d paused=%d",
        PolicyName(policy_), iterations_ * samples_per_iteration, effective_s_ / span_s,
        downtime_s_, restarts_, replans_, degraded_, paused_);
  }
  double samples(int samples_per_iteration) const { return iterations_ * samples_per_iteration; }

 private:
  double IterationS() const { return plan_.iteration_time_ms() / 1e3; }
  bool InPlan(const std::string& id) const {
    for (const pb::Node& n : request_.nodes()) {
      if (n.id() == id) return true;
    }
    return false;
  }

  // Whole iterations between the last event and now, after any downtime.
  void Train(double now_s) {
    if (running_ && now_s > last_s_) {
      const double down = std::clamp(down_until_s_ - last_s_, 0.0, now_s - last_s_);
      downtime_s_ += down;
      const double it = IterationS();
      const double train = now_s - last_s_ - down + partial_s_;
      const double done = std::floor(train / it);
      partial_s_ = train - done * it;
      iterations_ += done;
      effective_s_ += done * it;
      // Checkpoints every ceil(interval / iteration) iterations.
      const double every =
          std::max(1.0, std::ceil(absl::GetFlag(FLAGS_checkpoint_interval_s) / it));
      unsaved_ += done;
      unsaved_ = std::fmod(unsaved_, every);
      unsaved_effective_s_ = unsaved_ * it;
    }
    last_s_ = std::max(last_s_, now_s);
  }
  void RollBack() {
    iterations_ -= unsaved_;
    effective_s_ -= unsaved_effective_s_;
    unsaved_ = 0;
    unsaved_effective_s_ = 0;
    partial_s_ = 0;
    ++restarts_;
  }
  absl::Status Start(double now_s, const std::vector<pb::Node>& up, bool from_checkpoint) {
    running_ = false;
    partial_s_ = 0;
    if (up.empty()) return absl::OkStatus();
    pb::PlanRequest request = base_;
    request.clear_nodes();
    for (const pb::Node& n : up) *request.add_nodes() = n;
    for (pb::NodeType& t : *request.mutable_cluster()->mutable_node_types()) t.set_count(0);
    // A job restarted from a checkpoint on every event needs no spare pipelines; the others
    // start with f if the nodes fit it, else with none (later Replans restore f).
    const int f = policy_ == Policy::kCheckpoint ? 0 : base_.fault_tolerance();
    request.set_fault_tolerance(f);
    pb::PlanResponse response;
    grpc::Status s = planner_->Plan(request, &response);
    if (s.error_code() == grpc::StatusCode::FAILED_PRECONDITION && f > 0) {
      request.set_fault_tolerance(0);
      response.Clear();
      s = planner_->Plan(request, &response);
    }
    if (s.error_code() == grpc::StatusCode::FAILED_PRECONDITION) return absl::OkStatus();
    if (!s.ok()) {
      return absl::InternalError(absl::StrCat(PolicyName(policy_), ": Plan of ", up.size(),
                                              " nodes at ", now_s, " s: ", s.error_message()));
    }
    running_ = true;
    request_ = response.request();
    request_.set_fault_tolerance(f);
    plan_ = response.plan();
    down_until_s_ = now_s + (from_checkpoint ? absl::GetFlag(FLAGS_restart_s)
                                             : absl::GetFlag(FLAGS_restart_overhead_s));
    return absl::OkStatus();
  }

  Policy policy_;
  Planner* planner_;
  pb::PlanRequest base_;
  bool running_ = false;
  pb::PlanRequest request_;
  pb::ClusterPlan plan_;
  double last_s_ = 0, down_until_s_ = 0, partial_s_ = 0;
  double iterations_ = 0, effective_s_ = 0, downtime_s_ = 0;
  double unsaved_ = 0, unsaved_effective_s_ = 0;  // iterations since the last checkpoint
  int restarts_ = 0, replans_ = 0, degraded_ = 0, paused_ = 0;
};

// The job and node types of the cluster file as a PlanRequest without nodes, and the
// profiles uploaded.
absl::StatusOr<pb::PlanRequest> BaseRequest(Planner& planner) {
  absl::StatusOr<oobleck::ClusterFile> file =
      oobleck::LoadClusterFile(absl::GetFlag(FLAGS_cluster));
  if (!file.ok()) return file.status();
  absl::StatusOr<oobleck::client::ClusterRequest> built =
      oobleck::client::BuildClusterRequest(*file, {});
  if (!built.ok()) return built.status();
  for (const oobleck::client::ProfileUpload& upload : built->uploads) {
    absl::StatusOr<oobleck::client::ProfileDirFiles> dir =
        oobleck::client::ReadProfileDir(upload.dir, upload.microbatch_size);
    if (!dir.ok()) return dir.status();
    pb::LoadProfileRequest load;
    load.set_model(upload.model);
    load.set_gpu_type(upload.gpu_type);
    load.set_microbatch_size(upload.microbatch_size);
    *load.mutable_files() = std::move(dir->files);
    const grpc::Status s = planner.LoadProfile(load);
    if (!s.ok() && s.error_code() != grpc::StatusCode::ALREADY_EXISTS) {
      return absl::InternalError(absl::StrCat("LoadProfile ", upload.dir, ": ", s.error_message()));
    }
  }
  pb::PlanRequest request = oobleck::client::PlanRequestOf(built->request);
  request.add_global_batch(absl::GetFlag(FLAGS_global_batch));
  request.set_max_nodes_per_pipeline(absl::GetFlag(FLAGS_max_nodes_per_pipeline));
  request.set_fault_tolerance(absl::GetFlag(FLAGS_fault_tolerance));
  return request;
}

// Empty when the flags other than --trace are usable, else what is wrong with them.
std::string FlagProblem() {
  if (absl::GetFlag(FLAGS_cluster).empty()) return "--cluster FILE is required";
  if (absl::GetFlag(FLAGS_fault_tolerance) < 0) return "--fault_tolerance must be >= 0";
  if (absl::GetFlag(FLAGS_global_batch) < 1) return "--global_batch must be >= 1";
  for (const auto& [name, value] :
       {std::pair{"--checkpoint_interval_s", absl::GetFlag(FLAGS_checkpoint_interval_s)},
        std::pair{"--restart_s", absl::GetFlag(FLAGS_restart_s)},
        std::pair{"--restart_overhead_s", absl::GetFlag(FLAGS_restart_overhead_s)}}) {
    if (!(std::isfinite(value) && value >= 0)) {
      return absl::StrCat(name, " must be a finite number >= 0 (got ", value, ")");
    }
  }
  if (!std::isfinite(absl::GetFlag(FLAGS_horizon_iterations))) {
    return "--horizon_iterations must be finite";
  }
  const std::string joins = absl::GetFlag(FLAGS_fallback_joins);
  if (joins != "optimal" && joins != "oobleck-fallback") {
    return absl::StrCat("--fallback_joins must be optimal or oobleck-fallback (got \"", joins,
                        "\")");
  }
  return "";
}

// Empty when every trace's node type is one of the cluster's, else which one is not.
std::string UnknownTraceType(const pb::PlanRequest& base,
                             const std::vector<oobleck::bench::TraceSpec>& specs) {
  std::set<std::string> type_names;
  for (const pb::NodeType& t : base.cluster().node_types()) type_names.insert(t.name());
  for (const oobleck::bench::TraceSpec& spec : specs) {
    if (!type_names.count(spec.node_type)) {
      return absl::StrCat("--trace ", spec.path, ":", spec.node_type, ": node type \"",
                          spec.node_type, "\" is not one of the cluster's (",
                          absl::StrJoin(type_names, ", "), ")");
    }
  }
  return "";
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> trace_flags = TakeTraceFlags(&argc, argv);
  absl::ParseCommandLine(argc, argv);
  if (trace_flags.empty()) return Fail("give at least one --trace FILE:NODE_TYPE");
  if (std::string e = FlagProblem(); !e.empty()) return Fail(e);
  std::vector<oobleck::bench::TraceSpec> specs;
  for (const std::string& t : trace_flags) {
    absl::StatusOr<oobleck::bench::TraceSpec> spec = oobleck::bench::ParseTraceSpec(t);
    if (!spec.ok()) return Fail(std::string(spec.status().message()));
    specs.push_back(*spec);
  }
  absl::StatusOr<std::vector<TraceEvent>> events = oobleck::bench::ReadTraces(specs);
  if (!events.ok()) return Fail(std::string(events.status().message()));

  oobleck::bench::ServerProcess process;
  std::string address = absl::GetFlag(FLAGS_server);
  if (address.empty()) {
    if (!process.Start(oobleck::bench::ServerBinary(absl::GetFlag(FLAGS_server_bin)),
                       {"--address", "127.0.0.1:0"}, absl::GetFlag(FLAGS_server_log))) {
      return Fail(process.error());
    }
    address = process.address();
  }
  auto channel = grpc::CreateChannel(address, grpc::InsecureChannelCredentials());
  if (!channel->WaitForConnected(std::chrono::system_clock::now() + std::chrono::seconds(20))) {
    return Fail(absl::StrCat("server at ", address, " is not reachable"));
  }
  Planner planner(channel);
  absl::StatusOr<pb::PlanRequest> base = BaseRequest(planner);
  if (!base.ok()) return Fail(std::string(base.status().message()));
  if (std::string e = UnknownTraceType(*base, specs); !e.empty()) return Fail(e);

  const std::vector<EventGroup> groups = GroupByTime(*events);
  const double start_s = groups.front().time_ms / 1e3;
  const double end_s = groups.back().time_ms / 1e3;
  const double span_s = end_s - start_s;
  if (!(span_s > 0)) return Fail("the traces span no time");
  const int samples_per_iteration =
      absl::GetFlag(FLAGS_global_batch) * std::max(1, base->microbatch_size());
  std::vector<Job> jobs;
  for (Policy p : {Policy::kOurs, Policy::kOobleck, Policy::kCheckpoint}) {
    jobs.emplace_back(p, &planner, *base, start_s);
  }
  std::map<std::string, pb::Node> up;
  const auto wall_start = std::chrono::steady_clock::now();
  for (size_t g = 0; g < groups.size(); ++g) {
    for (const std::string& id : groups[g].removed) up.erase(id);
    for (const pb::Node& n : groups[g].added) up[n.id()] = n;
    std::vector<pb::Node> up_list;
    for (const auto& [id, node] : up) up_list.push_back(node);
    const double seen_s = groups[g].time_ms / 1e3 - start_s;
    const double events_per_s = seen_s > 0 ? g / seen_s : 0;
    for (Job& job : jobs) {
      if (absl::Status s = job.Step(groups[g], up_list, events_per_s); !s.ok()) {
        return Fail(std::string(s.message()));
      }
    }
  }
  for (Job& job : jobs) job.Finish(end_s);

  std::printf(
      "trace span %.2f h, %zu events in %zu calls, fault_tolerance=%d, global batch %d; "
      "replayed in %.1f s\n",
      span_s / 3600, events->size(), groups.size(), absl::GetFlag(FLAGS_fault_tolerance),
      absl::GetFlag(FLAGS_global_batch),
      std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start).count());
  for (const Job& job : jobs)
    std::printf("%s\n", job.Report(span_s, samples_per_iteration).c_str());
  const double fallback = jobs[1].samples(samples_per_iteration);
  std::printf("goodput_ratio_vs_oobleck=%.4f\n",
              fallback > 0 ? jobs[0].samples(samples_per_iteration) / fallback : 0.0);
  return 0;
}
