// Soak test of the real server (bench/README.md#soak): --duration_s of mixed PlanTemplates,
// Plan and Replan traffic from --threads client threads, a share of it cut short by tight
// deadlines or by TryCancel at a random moment, against oobleck-planner started on
// 127.0.0.1:0 with a small --cache_mb (templates are evicted and searched again, so the
// searches that get cancelled are often ones whose results would enter the cache).
//
// It fails (exit 1) on anything a healthy service must not do:
// - a status code other than OK, CANCELLED (only after our TryCancel), DEADLINE_EXCEEDED and
//   RESOURCE_EXHAUSTED from the search gate — INTERNAL, UNAVAILABLE, INVALID_ARGUMENT, ...;
// - an OK answer that differs from the reference answer of the same request (computed before
//   the load on an empty cache; for the big searches, their first complete answer): a
//   cancelled search that left a partial result in the cache would show here;
// - a server that died, is not SERVING at the end, still holds search slots after the load,
//   gives a fresh answer at the end that differs from the one at the start, or whose
//   request log or rpcs_total metric holds a code other than those above (the server
//   records a call cancelled before its request arrived as CANCELLED: an INTERNAL there is
//   a failure).
// It prints latency percentiles by method, counts by status code, and the server's RSS at
// the start, middle and end.
#include <grpcpp/grpcpp.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <regex>
#include <set>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "bench/proto_cluster.h"
#include "bench/server_process.h"
#include "bench/synthetic_profile.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "oobleck/planner/v1/planner.grpc.pb.h"

ABSL_FLAG(std::string, server_bin, "",
          "the oobleck-planner binary (default: next to this program)");
ABSL_FLAG(std::string, profile_dir, OOBLECK_SOURCE_DIR "/examples/profiles",
          "--profile_dir for the server (must hold gpt2-xl/rtx4090)");
ABSL_FLAG(double, duration_s, 600, "length of the load, in seconds");
ABSL_FLAG(int, threads, 4, "client threads, each with one call in flight");
ABSL_FLAG(uint64_t, seed, 1, "seed of the choice of requests, modes and times");
ABSL_FLAG(int64_t, cache_mb, 1,
          "--cache_mb of the server: small, so that templates are evicted and searched again");
ABSL_FLAG(int, max_concurrent_searches, 2, "--max_concurrent_searches of the server");
ABSL_FLAG(int, server_threads, 0, "--threads of the server (planning threads per request)");
ABSL_FLAG(int, variants, 10,
          "versions of each ordinary request (different M or k, so different cache keys)");
ABSL_FLAG(int, big_layers, 240, "layers of the synthetic model the big searches plan");
ABSL_FLAG(int, big_max_nodes, 7,
          "nodes of each of the 3 types in the big PlanTemplates (every mix up to this size)");
ABSL_FLAG(double, big_fraction, 0.04, "share of the calls that are big searches");
ABSL_FLAG(double, cancel_fraction, 0.15,
          "share of the other calls cancelled (TryCancel) after 1-500 ms");
ABSL_FLAG(double, deadline_fraction, 0.15,
          "share of the other calls sent with a tight deadline of 1-250 ms");
ABSL_FLAG(double, full_deadline_s, 120, "deadline of the calls that are not meant to be cut short");
ABSL_FLAG(double, report_every_s, 60, "print a progress line this often");
ABSL_FLAG(int, inject_invalid_every, 0,
          "make every Nth call an invalid PlanTemplates request, which the server answers "
          "INVALID_ARGUMENT: shows that the soak fails on an unintended code (0: never)");
ABSL_FLAG(std::vector<std::string>, server_args, {},
          "more flags for the server, comma-separated (e.g. --malloc_arena_max=0)");
ABSL_FLAG(std::string, server_log, "",
          "file for the server's stderr (one log line per call); default: a temporary file, "
          "removed when the soak passes");

namespace pb = ::oobleck::planner::v1;
namespace health = ::grpc::health::v1;
using oobleck::bench::Percentile;
using oobleck::bench::ProcStatusKiB;
using oobleck::bench::ScrapeMetrics;
using Clock = std::chrono::steady_clock;

namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

enum class Method { kPlanTemplates, kPlan, kReplan };
const char* MethodName(Method m) {
  switch (m) {
    case Method::kPlanTemplates:
      return "PlanTemplates";
    case Method::kPlan:
      return "Plan";
    case Method::kReplan:
      return "Replan";
  }
  return "?";
}

// How a call is meant to end: answered (generous deadline), cut by a tight deadline,
// cancelled by the client at a random moment, or cancelled because the soak ended.
enum class Mode { kFull, kDeadline, kCancel, kStopped };
const char* ModeName(Mode m) {
  switch (m) {
    case Mode::kFull:
      return "full";
    case Mode::kDeadline:
      return "deadline";
    case Mode::kCancel:
      return "cancel";
    case Mode::kStopped:
      return "at-stop";
  }
  return "?";
}

// gRPC's codes are absl's, number for number.
std::string CodeName(grpc::StatusCode code) {
  return absl::StatusCodeToString(static_cast<absl::StatusCode>(code));
}

// One request the soak sends; exactly one of the messages is used.
struct Job {
  std::string name;
  Method method = Method::kPlanTemplates;
  bool big = false;
  int variant = 0;  // which version of the request (see TemplateAndPlanJobs)
  pb::PlanTemplatesRequest templates;
  pb::PlanRequest plan;
  pb::ReplanRequest replan;
};

// The answer with what legitimately changes between calls (timings, cache hits) cleared,
// serialized: equal answers give equal strings (the responses hold no maps).
std::string Normalized(pb::PlanTemplatesResponse r) {
  r.clear_planning_time_ms();
  for (pb::MixTemplate& m : *r.mutable_results()) m.clear_cache_hit();
  return r.SerializeAsString();
}
std::string Normalized(pb::PlanResponse r) {
  r.clear_planning_time_ms();
  r.clear_mixes_from_cache();
  return r.SerializeAsString();
}
std::string Normalized(pb::ReplanResponse r) {
  r.clear_planning_time_ms();
  return r.SerializeAsString();
}

struct CallResult {
  grpc::Status status;
  Mode mode = Mode::kFull;
  double latency_ms = 0;
  bool cancel_sent = false;
  std::string answer;              // Normalized() when OK
  pb::PlanResponse plan_response;  // when a Plan call is OK (the setup builds Replans on it)
};

// Sends `job` with the callback API and waits for it; in kCancel mode calls TryCancel
// after `cut_ms`, in kDeadline mode sets a deadline of `cut_ms`. When `stop` turns true
// the call is cancelled too (the soak is over; it is then reported as kStopped).
CallResult Invoke(pb::Planner::Stub* stub, const Job& job, Mode mode, double cut_ms,
                  double full_deadline_s, const std::atomic<bool>* stop) {
  grpc::ClientContext context;
  const auto now = std::chrono::system_clock::now();
  context.set_deadline(
      mode == Mode::kDeadline
          ? now + std::chrono::microseconds(static_cast<int64_t>(cut_ms * 1e3))
          : now + std::chrono::microseconds(static_cast<int64_t>(full_deadline_s * 1e6)));
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  CallResult result;
  result.mode = mode;
  Clock::time_point finished;
  auto on_done = [&](grpc::Status status) {
    std::lock_guard<std::mutex> lock(mu);
    finished = Clock::now();
    result.status = std::move(status);
    done = true;
    cv.notify_one();
  };
  pb::PlanTemplatesResponse templates_response;
  pb::ReplanResponse replan_response;
  const Clock::time_point start = Clock::now();
  switch (job.method) {
    case Method::kPlanTemplates:
      stub->async()->PlanTemplates(&context, &job.templates, &templates_response, on_done);
      break;
    case Method::kPlan:
      stub->async()->Plan(&context, &job.plan, &result.plan_response, on_done);
      break;
    case Method::kReplan:
      stub->async()->Replan(&context, &job.replan, &replan_response, on_done);
      break;
  }
  const Clock::time_point cancel_at =
      start + std::chrono::microseconds(static_cast<int64_t>(cut_ms * 1e3));
  std::unique_lock<std::mutex> lock(mu);
  while (!done) {
    Clock::time_point wake = Clock::now() + std::chrono::milliseconds(50);
    if (mode == Mode::kCancel && !result.cancel_sent) wake = std::min(wake, cancel_at);
    cv.wait_until(lock, wake);
    if (done) break;
    const bool cancel_now = mode == Mode::kCancel && Clock::now() >= cancel_at;
    const bool stopping = stop != nullptr && stop->load();
    if (!result.cancel_sent && (cancel_now || stopping)) {
      if (!cancel_now) result.mode = Mode::kStopped;
      result.cancel_sent = true;
      // The callback may run inside TryCancel; it takes `mu`.
      lock.unlock();
      context.TryCancel();
      lock.lock();
    }
  }
  result.latency_ms = std::chrono::duration<double, std::milli>(finished - start).count();
  if (result.status.ok()) {
    switch (job.method) {
      case Method::kPlanTemplates:
        result.answer = Normalized(templates_response);
        break;
      case Method::kPlan:
        result.answer = Normalized(result.plan_response);
        break;
      case Method::kReplan:
        result.answer = Normalized(replan_response);
        break;
    }
  }
  return result;
}

// Whether a status is one the service is meant to give under this load.
bool Intended(const CallResult& r) {
  switch (r.status.error_code()) {
    case grpc::StatusCode::OK:
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      return true;
    case grpc::StatusCode::CANCELLED:
      return r.cancel_sent;
    case grpc::StatusCode::RESOURCE_EXHAUSTED:
      // Only the search gate's; a size limit would mean a broken request.
      return absl::StrContains(r.status.error_message(), "search slots");
    default:
      return false;
  }
}

// ---------------------------------------------------------------------------------------
// The requests

// v100, rtx3090 (both derived from the measured rtx4090 by relative speed) and rtx4090;
// `per_type` nodes of each, `gpus` GPUs per node.
pb::Cluster ThreeTypes(int per_type, int gpus) {
  return oobleck::bench::ProtoCluster(
      {{"v100", 16, 1.0 / 2.94}, {"rtx3090", 24, 1.8 / 2.94}, {"rtx4090", 24, 1}}, "rtx4090", gpus,
      per_type);
}

pb::Cluster OneType(int count, int gpus) {
  pb::Cluster cluster;
  cluster.set_inter_node_bytes_per_s(12.5e9);
  pb::NodeType* type = cluster.add_node_types();
  type->set_name(absl::StrCat("rtx4090x", gpus));
  type->set_gpu_type("rtx4090");
  type->set_gpus_per_node(gpus);
  type->set_gpu_memory_bytes(24 * kGiB);
  type->set_intra_node_bytes_per_s(25e9);
  type->set_count(count);
  return cluster;
}

Job TemplatesJob(std::string name, std::string model, pb::Cluster cluster, std::string cost_model,
                 int microbatches, int max_nodes) {
  Job job;
  job.name = std::move(name);
  job.method = Method::kPlanTemplates;
  job.templates.set_model(std::move(model));
  *job.templates.mutable_cluster() = std::move(cluster);
  job.templates.set_cost_model(std::move(cost_model));
  job.templates.set_microbatches(microbatches);
  job.templates.set_max_nodes(max_nodes);
  job.templates.set_missing_allreduce_in_node(pb::MISSING_ALLREDUCE_RING);
  return job;
}

Job PlanJob(std::string name, std::string model, pb::Cluster cluster, int microbatches,
            std::vector<int> global_batch, int max_nodes_per_pipeline) {
  Job job;
  job.name = std::move(name);
  job.method = Method::kPlan;
  job.plan.set_model(std::move(model));
  *job.plan.mutable_cluster() = std::move(cluster);
  job.plan.set_microbatches(microbatches);
  job.plan.set_missing_allreduce_in_node(pb::MISSING_ALLREDUCE_RING);
  for (int b : global_batch) job.plan.add_global_batch(b);
  job.plan.set_max_nodes_per_pipeline(max_nodes_per_pipeline);
  return job;
}

// The PlanTemplates and Plan requests of the mix; the Replan events are made from the Plan
// answers (they need a plan). Each ordinary request comes in --variants versions that
// differ in M (micro-batches) or k (optimizer state multiplier), both part of the cache key:
// together they hold more templates than a small cache, so entries are evicted and searched
// again all through the soak.
std::vector<Job> TemplateAndPlanJobs(int variants) {
  const int big_layers = absl::GetFlag(FLAGS_big_layers);
  const int big_max_nodes = absl::GetFlag(FLAGS_big_max_nodes);
  std::vector<Job> jobs;
  for (int v = 0; v < variants; ++v) {
    const size_t first = jobs.size();
    const int m = 16 + 4 * v;  // M of the 1f1b requests
    const double k = 6 + 0.5 * v;
    Job job = TemplatesJob(absl::StrFormat("gpt2-xl 4 nodes x 1 GPU, oobleck-sosp23, k=%g", k),
                           "gpt2-xl", OneType(4, 1), "oobleck-sosp23", 0, 0);
    job.templates.set_optimizer_state_multiplier(k);
    jobs.push_back(std::move(job));
    jobs.push_back(TemplatesJob(absl::StrFormat("gpt2-xl 8 nodes x 2 GPUs, 1f1b M=%d", m),
                                "gpt2-xl", OneType(8, 2), "1f1b", m, 0));
    jobs.push_back(
        TemplatesJob(absl::StrFormat("gpt2-xl 3 types x 4 nodes, 1f1b M=%d, up to 4 nodes", m),
                     "gpt2-xl", ThreeTypes(4, 2), "1f1b", m, 4));
    job = TemplatesJob(absl::StrFormat("small 3 types x 5 nodes, oobleck-sosp23, k=%g", k),
                       "soak-small", ThreeTypes(5, 2), "oobleck-sosp23", 0, 5);
    job.templates.set_optimizer_state_multiplier(k);
    jobs.push_back(std::move(job));
    job =
        TemplatesJob(absl::StrFormat("small 3 types x 6 nodes, 1f1b M=%d, 4 explicit mixes", m / 2),
                     "soak-small", ThreeTypes(6, 2), "1f1b", m / 2, 0);
    for (const std::vector<int>& counts :
         std::vector<std::vector<int>>{{1, 1, 1}, {2, 0, 2}, {0, 3, 3}, {2, 2, 2}}) {
      pb::NodeMix* mix = job.templates.add_mixes();
      for (int c : counts) mix->add_counts(c);
    }
    jobs.push_back(std::move(job));
    jobs.push_back(PlanJob(absl::StrFormat("gpt2-xl 3 types x 4 nodes, M=%d, B=64 (+32, 128)", m),
                           "gpt2-xl", ThreeTypes(4, 2), m, {64, 32, 128}, 0));
    jobs.push_back(PlanJob(absl::StrFormat("gpt2-xl 16 nodes x 2 GPUs, M=%d, B=128", m), "gpt2-xl",
                           OneType(16, 2), m, {128}, 0));
    jobs.push_back(PlanJob(absl::StrFormat("small 3 types x 3 nodes, M=%d, B=48", m / 2),
                           "soak-small", ThreeTypes(3, 2), m / 2, {48}, 3));
    for (size_t i = first; i < jobs.size(); ++i) jobs[i].variant = v;
  }
  Job big = TemplatesJob(
      absl::StrFormat("BIG %d layers, 3 types x %d nodes, 1f1b M=16", big_layers, big_max_nodes),
      "soak-big", ThreeTypes(big_max_nodes, 2), "1f1b", 16, big_max_nodes);
  big.big = true;
  jobs.push_back(std::move(big));
  big = PlanJob(absl::StrFormat("BIG %d layers, 3 types x 5 nodes, B=96", big_layers), "soak-big",
                ThreeTypes(5, 2), 16, {96}, 5);
  big.big = true;
  jobs.push_back(std::move(big));
  return jobs;
}

// Events on a planned cluster: every node failing alone, the first and last node failing
// together, and one new node of each type joining.
std::vector<Job> ReplanJobs(const Job& plan_job, const pb::PlanResponse& planned) {
  std::vector<Job> jobs;
  auto event = [&](const std::string& what) {
    Job job;
    job.name = absl::StrCat("after \"", plan_job.name, "\": ", what);
    job.method = Method::kReplan;
    *job.replan.mutable_request() = planned.request();
    *job.replan.mutable_plan() = planned.plan();
    return job;
  };
  const auto& nodes = planned.request().nodes();
  for (const pb::Node& node : nodes) {
    Job job = event(absl::StrCat(node.id(), " fails"));
    job.replan.add_failed_node_ids(node.id());
    jobs.push_back(std::move(job));
  }
  if (nodes.size() >= 2) {
    Job job = event(absl::StrCat(nodes[0].id(), " and ", nodes[nodes.size() - 1].id(), " fail"));
    job.replan.add_failed_node_ids(nodes[0].id());
    job.replan.add_failed_node_ids(nodes[nodes.size() - 1].id());
    jobs.push_back(std::move(job));
  }
  for (const pb::NodeType& type : planned.request().cluster().node_types()) {
    Job job = event(absl::StrCat("a ", type.name(), " joins"));
    pb::Node* joined = job.replan.add_joined_nodes();
    joined->set_id(absl::StrCat("joined-", type.name()));
    joined->set_node_type(type.name());
    jobs.push_back(std::move(job));
  }
  return jobs;
}

// ---------------------------------------------------------------------------------------
// What the server says about itself

// The value of an unlabelled metric, or -1.
double MetricValue(const std::string& text, const std::string& name) {
  std::smatch match;
  if (std::regex_search(text, match, std::regex("\n" + name + " ([0-9.e+-]+)"))) {
    return std::stod(match[1]);
  }
  return -1;
}

// oobleck_planner_rpcs_total by code, summed over methods.
std::map<std::string, double> RpcsByCode(const std::string& text) {
  std::map<std::string, double> by_code;
  const std::regex line(R"(oobleck_planner_rpcs_total\{([^}]*)\} ([0-9.e+-]+))");
  const std::regex code(R"re(code="([A-Z_]+)")re");
  for (auto it = std::sregex_iterator(text.begin(), text.end(), line); it != std::sregex_iterator();
       ++it) {
    const std::string labels = (*it)[1];
    std::smatch c;
    if (std::regex_search(labels, c, code)) by_code[c[1]] += std::stod((*it)[2]);
  }
  return by_code;
}

// OK, CANCELLED, DEADLINE_EXCEEDED, RESOURCE_EXHAUSTED (and INVALID_ARGUMENT when
// `injected`): what the server may answer the soak's calls.
bool IntendedServerCode(const std::string& code, bool injected) {
  return code == "OK" || code == "CANCELLED" || code == "DEADLINE_EXCEEDED" ||
         code == "RESOURCE_EXHAUSTED" || (injected && code == "INVALID_ARGUMENT");
}

// Calls in the server's request log (one line per call: "... code=CODE ... message=...")
// whose code is none of OK, CANCELLED, DEADLINE_EXCEEDED, RESOURCE_EXHAUSTED (nor
// INVALID_ARGUMENT when `injected`), counted by code and message.
std::map<std::pair<std::string, std::string>, int64_t> UnintendedServerCodes(
    const std::string& log_path, bool injected) {
  std::map<std::pair<std::string, std::string>, int64_t> found;
  std::ifstream in(log_path);
  std::string line;
  const std::regex code_re(R"( code=([A-Z_]+))");
  const std::regex message_re(R"re( message="(.*)"$)re");
  std::smatch match;
  while (std::getline(in, line)) {
    if (!std::regex_search(line, match, code_re)) continue;
    const std::string code = match[1];
    if (IntendedServerCode(code, injected)) continue;
    std::string message;
    if (std::regex_search(line, match, message_re)) message = match[1];
    ++found[{code, message}];
  }
  return found;
}

// "metrics on http://HOST:PORT/metrics" in the server's log; 0 if absent.
int MetricsPort(const std::string& log_path) {
  std::ifstream in(log_path);
  std::string line;
  std::smatch match;
  while (std::getline(in, line)) {
    if (std::regex_search(line, match, std::regex(R"(metrics on http://[^:]+:(\d+)/metrics)"))) {
      return std::stoi(match[1]);
    }
  }
  return 0;
}

// ---------------------------------------------------------------------------------------
// The soak

// Everything the client threads record, under one mutex (calls take milliseconds).
class Tally {
 public:
  void Record(const Job& job, const CallResult& r) {
    std::lock_guard<std::mutex> lock(mu_);
    const bool intended = Intended(r);
    latencies_[{job.method, r.mode, r.status.error_code(), intended}].push_back(r.latency_ms);
    ++calls_;
    if (!intended) {
      ++unintended_;
      // One example per request and code is enough to see what went wrong.
      if (examples_.size() < 10 && example_keys_.insert({job.name, r.status.error_code()}).second) {
        examples_.push_back(absl::StrFormat("%s [%s] %s (%s, %.1f ms): %s", MethodName(job.method),
                                            job.name, CodeName(r.status.error_code()),
                                            ModeName(r.mode), r.latency_ms,
                                            r.status.error_message()));
      }
    }
  }
  void Mismatch(const Job& job, const std::string& when) {
    std::lock_guard<std::mutex> lock(mu_);
    ++mismatches_;
    if (examples_.size() < 10) {
      examples_.push_back(absl::StrFormat("%s [%s]: answer differs from the reference (%s)",
                                          MethodName(job.method), job.name, when));
    }
  }
  void Failure(const std::string& what) {
    std::lock_guard<std::mutex> lock(mu_);
    failures_.push_back(what);
  }

  struct Counts {
    int64_t calls = 0, ok = 0, cancelled = 0, deadline = 0, exhausted = 0, unintended = 0,
            mismatches = 0;
  };
  Counts counts() const {
    std::lock_guard<std::mutex> lock(mu_);
    Counts c;
    c.calls = calls_;
    c.unintended = unintended_;
    c.mismatches = mismatches_;
    for (const auto& [key, values] : latencies_) {
      const int64_t n = static_cast<int64_t>(values.size());
      switch (std::get<2>(key)) {
        case grpc::StatusCode::OK:
          c.ok += n;
          break;
        case grpc::StatusCode::CANCELLED:
          c.cancelled += n;
          break;
        case grpc::StatusCode::DEADLINE_EXCEEDED:
          c.deadline += n;
          break;
        case grpc::StatusCode::RESOURCE_EXHAUSTED:
          c.exhausted += n;
          break;
        default:
          break;
      }
    }
    return c;
  }

  void PrintTables() const {
    std::lock_guard<std::mutex> lock(mu_);
    std::printf("\nper method (client latency in ms):\n");
    std::printf("%-14s %8s %8s %9s %9s %9s   %9s %9s %9s\n", "method", "calls", "OK", "OK_p50",
                "OK_p99", "OK_max", "all_p50", "all_p99", "all_max");
    for (Method m : {Method::kPlanTemplates, Method::kPlan, Method::kReplan}) {
      std::vector<double> all, ok;
      for (const auto& [key, values] : latencies_) {
        if (std::get<0>(key) != m) continue;
        all.insert(all.end(), values.begin(), values.end());
        if (std::get<2>(key) == grpc::StatusCode::OK) {
          ok.insert(ok.end(), values.begin(), values.end());
        }
      }
      std::printf("%-14s %8zu %8zu %9.2f %9.2f %9.2f   %9.2f %9.2f %9.2f\n", MethodName(m),
                  all.size(), ok.size(), Percentile(ok, 0.5), Percentile(ok, 0.99),
                  Percentile(ok, 1), Percentile(all, 0.5), Percentile(all, 0.99),
                  Percentile(all, 1));
    }
    std::printf("\nby method, how the call was meant to end, and status code:\n");
    std::printf("%-14s %-9s %-19s %8s %9s %9s %9s %s\n", "method", "mode", "code", "count", "p50",
                "p99", "max", "");
    for (const auto& [key, values] : latencies_) {
      const auto [m, mode, code, intended] = key;
      std::printf("%-14s %-9s %-19s %8zu %9.2f %9.2f %9.2f %s\n", MethodName(m), ModeName(mode),
                  CodeName(code).c_str(), values.size(), Percentile(values, 0.5),
                  Percentile(values, 0.99), Percentile(values, 1),
                  code == grpc::StatusCode::OK ? ""
                  : intended                   ? "(intended)"
                                               : "UNINTENDED");
    }
    std::map<std::string, int64_t> by_code;
    for (const auto& [key, values] : latencies_) {
      by_code[CodeName(std::get<2>(key))] += values.size();
    }
    std::printf("\nerrors by code:");
    for (const auto& [code, n] : by_code) {
      if (code != "OK") std::printf(" %s %lld", code.c_str(), static_cast<long long>(n));
    }
    std::printf("\n");
  }

  std::vector<std::string> Problems() const {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<std::string> problems = failures_;
    if (unintended_ > 0) {
      problems.push_back(absl::StrCat(unintended_, " calls with an unintended status"));
    }
    if (mismatches_ > 0) {
      problems.push_back(absl::StrCat(mismatches_, " answers unlike the reference"));
    }
    problems.insert(problems.end(), examples_.begin(), examples_.end());
    return problems;
  }

 private:
  mutable std::mutex mu_;
  // Client latencies (ms) by method, mode, code and whether the code was intended.
  std::map<std::tuple<Method, Mode, grpc::StatusCode, bool>, std::vector<double>> latencies_;
  int64_t calls_ = 0, unintended_ = 0, mismatches_ = 0;
  std::vector<std::string> examples_, failures_;
  std::set<std::pair<std::string, grpc::StatusCode>> example_keys_;
};

// Reference answers by job index: set before the load for the ordinary jobs, by the first
// complete answer for the big ones.
class References {
 public:
  explicit References(size_t jobs) : answers_(jobs) {}
  void Set(size_t job, std::string answer) {
    std::lock_guard<std::mutex> lock(mu_);
    answers_[job] = std::move(answer);
  }
  // True when `answer` equals the reference (or becomes it, being the first).
  bool Check(size_t job, const std::string& answer) {
    std::lock_guard<std::mutex> lock(mu_);
    if (answers_[job].empty()) {
      answers_[job] = answer;
      return true;
    }
    return answers_[job] == answer;
  }
  bool Has(size_t job) const {
    std::lock_guard<std::mutex> lock(mu_);
    return !answers_[job].empty();
  }

 private:
  mutable std::mutex mu_;
  std::vector<std::string> answers_;
};

double LogUniform(std::mt19937_64& random, double lo, double hi) {
  return std::exp(std::uniform_real_distribution<double>(std::log(lo), std::log(hi))(random));
}

int Fail(const std::string& message) {
  std::cerr << "soak: " << message << "\n";
  return 1;
}

// KiB from ProcStatusKiB as MiB; "n/a" when it was not read (the server was gone).
std::string Mib(int64_t kib) { return kib < 0 ? "n/a" : absl::StrFormat("%.1f", kib / 1024.0); }

// Empty when the flags are usable, else what is wrong with them.
std::string FlagProblem() {
  const double duration_s = absl::GetFlag(FLAGS_duration_s);
  const int threads = absl::GetFlag(FLAGS_threads);
  if (!(duration_s > 0)) return absl::StrCat("--duration_s must be > 0 (got ", duration_s, ")");
  if (threads < 1) return absl::StrCat("--threads must be >= 1 (got ", threads, ")");
  if (absl::GetFlag(FLAGS_variants) < 1) {
    return absl::StrCat("--variants must be >= 1 (got ", absl::GetFlag(FLAGS_variants), ")");
  }
  if (absl::GetFlag(FLAGS_big_layers) < 2) {
    return absl::StrCat("--big_layers must be >= 2 (got ", absl::GetFlag(FLAGS_big_layers), ")");
  }
  if (absl::GetFlag(FLAGS_big_max_nodes) < 1) {
    return absl::StrCat("--big_max_nodes must be >= 1 (got ", absl::GetFlag(FLAGS_big_max_nodes),
                        ")");
  }
  for (const auto& [name, value] :
       {std::pair<const char*, double>{"--big_fraction", absl::GetFlag(FLAGS_big_fraction)},
        {"--cancel_fraction", absl::GetFlag(FLAGS_cancel_fraction)},
        {"--deadline_fraction", absl::GetFlag(FLAGS_deadline_fraction)}}) {
    if (!(value >= 0 && value <= 1)) {
      return absl::StrCat(name, " must be in [0, 1] (got ", value, ")");
    }
  }
  if (absl::GetFlag(FLAGS_cancel_fraction) + absl::GetFlag(FLAGS_deadline_fraction) > 1) {
    return "--cancel_fraction + --deadline_fraction must be <= 1";
  }
  return "";
}

// The server under load, its log, and the client's channel to it.
struct SoakServer {
  oobleck::bench::ServerProcess process;
  std::string log_path;
  bool temporary_log = false;
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<pb::Planner::Stub> stub;
  int metrics_port = -1;
};

// Starts the server (its stderr in a log file) and connects; "" or what went wrong.
std::string StartServer(SoakServer& server) {
  server.log_path = absl::GetFlag(FLAGS_server_log);
  server.temporary_log = server.log_path.empty();
  if (server.temporary_log) {
    server.log_path =
        (std::filesystem::temp_directory_path() / absl::StrCat("soak-server-", getpid(), ".log"))
            .string();
  }
  const std::string binary = oobleck::bench::ServerBinary(absl::GetFlag(FLAGS_server_bin));
  std::vector<std::string> args = {
      "--address=127.0.0.1:0", "--metrics_address=127.0.0.1:0",
      absl::StrCat("--profile_dir=", absl::GetFlag(FLAGS_profile_dir)),
      absl::StrCat("--cache_mb=", absl::GetFlag(FLAGS_cache_mb)),
      absl::StrCat("--max_concurrent_searches=", absl::GetFlag(FLAGS_max_concurrent_searches))};
  if (absl::GetFlag(FLAGS_server_threads) > 0) {
    args.push_back(absl::StrCat("--threads=", absl::GetFlag(FLAGS_server_threads)));
  }
  for (const std::string& arg : absl::GetFlag(FLAGS_server_args)) args.push_back(arg);
  if (!server.process.Start(binary, args, server.log_path)) {
    return server.process.error() + "; log: " + server.log_path;
  }
  server.channel =
      grpc::CreateChannel(server.process.address(), grpc::InsecureChannelCredentials());
  if (!server.channel->WaitForConnected(std::chrono::system_clock::now() +
                                        std::chrono::seconds(20))) {
    return absl::StrCat("server at ", server.process.address(), " is not reachable");
  }
  server.stub = pb::Planner::NewStub(server.channel);
  server.metrics_port = MetricsPort(server.log_path);
  return "";
}

// Synthetic models: a small one, and a deep one for the big searches. "" or what failed.
std::string LoadModels(pb::Planner::Stub* stub) {
  for (const auto& [model, layers, seed] :
       {std::tuple<const char*, int, uint64_t>{"soak-small", 40, 101},
        {"soak-big", absl::GetFlag(FLAGS_big_layers), 102}}) {
    const oobleck::bench::OobleckFiles files =
        oobleck::bench::SyntheticOobleckProfile(layers, seed);
    pb::LoadProfileRequest load;
    load.set_model(model);
    load.set_gpu_type("rtx4090");
    load.set_microbatch_size(1);
    load.mutable_files()->set_mb_json(files.mb_json);
    load.mutable_files()->set_allreduce_in_node_json(files.allreduce_in_node_json);
    load.mutable_files()->set_allreduce_across_nodes_json(files.allreduce_across_nodes_json);
    grpc::ClientContext context;
    pb::LoadProfileResponse response;
    if (grpc::Status s = stub->LoadProfile(&context, load, &response); !s.ok()) {
      return absl::StrCat("LoadProfile ", model, ": ", s.error_message());
    }
  }
  return "";
}

// The requests of the load, their reference answers (empty for the big searches), and
// the pools the clients draw from.
struct Workload {
  std::vector<Job> jobs;
  std::vector<std::string> reference_answers;
  std::vector<size_t> by_method[3], big_jobs;
  Job invalid;
};

// Reference answers, one call each on an empty cache (in this order, so the Replan events
// can be built on the Plan answers); "" or what failed.
std::string AnswerTemplatesAndPlans(pb::Planner::Stub* stub, Workload& work,
                                    std::vector<Job>& replans) {
  const double full_deadline_s = absl::GetFlag(FLAGS_full_deadline_s);
  for (const Job& job : work.jobs) {
    std::string answer;
    if (!job.big) {
      const CallResult r = Invoke(stub, job, Mode::kFull, 0, full_deadline_s, nullptr);
      if (!r.status.ok()) {
        return absl::StrCat("reference answer of ", MethodName(job.method), " [", job.name,
                            "]: ", CodeName(r.status.error_code()), " ", r.status.error_message());
      }
      answer = r.answer;
      // Replan events on the first version of each Plan request only (one version's
      // events exercise Replan as well as all of them would).
      if (job.method == Method::kPlan && job.variant == 0) {
        for (Job& replan : ReplanJobs(job, r.plan_response)) replans.push_back(std::move(replan));
      }
    }
    work.reference_answers.push_back(answer);
  }
  return "";
}

// The workload with its reference answers; "" or what failed.
std::string BuildWorkload(pb::Planner::Stub* stub, Workload& work) {
  const auto setup_start = Clock::now();
  work.jobs = TemplateAndPlanJobs(absl::GetFlag(FLAGS_variants));
  std::vector<Job> replans;
  if (std::string e = AnswerTemplatesAndPlans(stub, work, replans); !e.empty()) return e;
  // Events with no plan (a failure that loses every replica of a layer) are not sent.
  int dropped = 0;
  for (Job& replan : replans) {
    const CallResult r =
        Invoke(stub, replan, Mode::kFull, 0, absl::GetFlag(FLAGS_full_deadline_s), nullptr);
    if (r.status.ok()) {
      work.reference_answers.push_back(r.answer);
      work.jobs.push_back(std::move(replan));
    } else {
      ++dropped;
    }
  }
  int counts[3] = {0, 0, 0}, big = 0;
  for (const Job& job : work.jobs) {
    ++counts[static_cast<int>(job.method)];
    big += job.big;
  }
  std::printf(
      "setup: %zu requests (%d PlanTemplates, %d Plan, %d Replan events; %d big), reference "
      "answers in %.1f s (%d Replan events without a plan left out)\n",
      work.jobs.size(), counts[0], counts[1], counts[2], big,
      std::chrono::duration<double>(Clock::now() - setup_start).count(), dropped);
  for (size_t i = 0; i < work.jobs.size(); ++i) {
    const Job& job = work.jobs[i];
    (job.big ? work.big_jobs : work.by_method[static_cast<int>(job.method)]).push_back(i);
  }
  for (Method m : {Method::kPlanTemplates, Method::kPlan, Method::kReplan}) {
    if (work.by_method[static_cast<int>(m)].empty()) {
      return absl::StrCat("no ordinary ", MethodName(m), " request to send");
    }
  }
  work.invalid = work.jobs[0];
  work.invalid.name = "injected invalid request";
  work.invalid.templates.set_cost_model("no-such-cost-model");
  return "";
}

// What the client threads share during the load.
struct Load {
  const Workload& work;
  References& references;
  Tally& tally;
  std::shared_ptr<grpc::Channel> channel;
  std::atomic<bool> stop{false};
  std::atomic<int64_t> call_number{0};
};

// How one call is cut short, if at all: big searches mostly (they would hold a search
// slot for seconds), the others mostly complete.
std::pair<Mode, double> ChooseMode(const Job& job, bool inject, double w, std::mt19937_64& random) {
  const double cancel_fraction = absl::GetFlag(FLAGS_cancel_fraction);
  const double deadline_fraction = absl::GetFlag(FLAGS_deadline_fraction);
  if (job.big) {
    if (w < 0.5) return {Mode::kCancel, LogUniform(random, 5, 5000)};
    if (w < 0.8) return {Mode::kDeadline, LogUniform(random, 5, 3000)};
  } else if (!inject) {
    if (w < cancel_fraction) return {Mode::kCancel, LogUniform(random, 1, 500)};
    if (w < cancel_fraction + deadline_fraction) {
      return {Mode::kDeadline, LogUniform(random, 1, 250)};
    }
  }
  return {Mode::kFull, 0};
}

// One client thread: calls until the load stops, each checked against its reference.
void RunClient(Load& load, int t) {
  const Workload& work = load.work;
  std::mt19937_64 random(absl::GetFlag(FLAGS_seed) * 1000003 + t);
  std::uniform_real_distribution<double> unit(0, 1);
  auto own_stub = pb::Planner::NewStub(load.channel);
  const double big_fraction = absl::GetFlag(FLAGS_big_fraction);
  const int inject_every = absl::GetFlag(FLAGS_inject_invalid_every);
  while (!load.stop.load()) {
    const int64_t n = load.call_number.fetch_add(1);
    size_t index;
    const double u = unit(random);
    if (!work.big_jobs.empty() && u < big_fraction) {
      index = work.big_jobs[random() % work.big_jobs.size()];
    } else {
      // PlanTemplates 40%, Plan 20%, Replan 40% (every pool has jobs: see the setup).
      const double v = unit(random);
      const std::vector<size_t>& pool = work.by_method[v < 0.4 ? 0 : v < 0.6 ? 1 : 2];
      index = pool[random() % pool.size()];
    }
    const bool inject = inject_every > 0 && n % inject_every == inject_every - 1;
    const Job& job = inject ? work.invalid : work.jobs[index];
    const double w = unit(random);
    const auto [mode, cut_ms] = ChooseMode(job, inject, w, random);
    const CallResult r =
        Invoke(own_stub.get(), job, mode, cut_ms, absl::GetFlag(FLAGS_full_deadline_s), &load.stop);
    load.tally.Record(job, r);
    if (r.status.ok() && !inject && !load.references.Check(index, r.answer)) {
      load.tally.Mismatch(job, absl::StrCat("during the load, mode ", ModeName(r.mode)));
    }
  }
}

// One progress line at t_s; the server's RSS (KiB).
int64_t PrintProgress(SoakServer& server, Tally& tally, double t_s) {
  const Tally::Counts c = tally.counts();
  pb::GetStatsResponse stats;
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  const grpc::Status s = server.stub->GetStats(&context, pb::GetStatsRequest(), &stats);
  if (!s.ok()) {
    tally.Failure(absl::StrCat("GetStats at t=", t_s, " s: ", CodeName(s.error_code()), " ",
                               s.error_message()));
  }
  const int64_t rss = ProcStatusKiB(server.process.pid(), "VmRSS");
  std::printf("%8.0f %9lld %9lld %9lld %9lld %9lld %10lld %10lld %9s %8lld %9.2f %10lld\n", t_s,
              static_cast<long long>(c.calls), static_cast<long long>(c.ok),
              static_cast<long long>(c.cancelled), static_cast<long long>(c.deadline),
              static_cast<long long>(c.exhausted), static_cast<long long>(c.unintended),
              static_cast<long long>(c.mismatches), Mib(rss).c_str(),
              static_cast<long long>(stats.cache_entries()), stats.cache_bytes() / 1048576.0,
              static_cast<long long>(stats.cache_evictions()));
  std::fflush(stdout);
  return rss;
}

struct LoadFigures {
  double load_s = 0;
  int64_t rss_middle_kib = -1;
};

// The load itself: the client threads for --duration_s, a progress line every
// --report_every_s, stopping early if the server dies.
LoadFigures RunLoad(SoakServer& server, Load& load) {
  const double duration_s = absl::GetFlag(FLAGS_duration_s);
  LoadFigures figures;
  const auto load_start = Clock::now();
  const auto load_end =
      load_start + std::chrono::microseconds(static_cast<int64_t>(duration_s * 1e6));
  std::vector<std::thread> workers;
  for (int t = 0; t < absl::GetFlag(FLAGS_threads); ++t) {
    workers.emplace_back([&load, t] { RunClient(load, t); });
  }
  const double report_every_s = std::max(1.0, absl::GetFlag(FLAGS_report_every_s));
  double next_report_s = report_every_s;
  bool have_middle = false;
  while (Clock::now() < load_end) {
    const double t_s = std::chrono::duration<double>(Clock::now() - load_start).count();
    if (!have_middle && t_s >= duration_s / 2) {
      figures.rss_middle_kib = ProcStatusKiB(server.process.pid(), "VmRSS");
      have_middle = true;
    }
    if (t_s >= next_report_s) {
      PrintProgress(server, load.tally, t_s);
      next_report_s += report_every_s;
    }
    if (!server.process.Alive()) {
      load.tally.Failure(absl::StrCat("the server died at t=", static_cast<int>(t_s), " s (",
                                      server.process.exit_description(), ")"));
      break;
    }
    std::this_thread::sleep_for(
        std::min<Clock::duration>(std::chrono::milliseconds(100), load_end - Clock::now()));
  }
  load.stop.store(true);
  for (std::thread& w : workers) w.join();
  figures.load_s = std::chrono::duration<double>(Clock::now() - load_start).count();
  return figures;
}

// After the load: the server still SERVING.
void CheckHealth(SoakServer& server, Tally& tally) {
  auto health_stub = health::Health::NewStub(server.channel);
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  health::HealthCheckRequest request;
  health::HealthCheckResponse response;
  const grpc::Status s = health_stub->Check(&context, request, &response);
  std::printf("health: %s\n",
              s.ok() ? health::HealthCheckResponse::ServingStatus_Name(response.status()).c_str()
                     : (CodeName(s.error_code()) + " " + s.error_message()).c_str());
  if (!s.ok() || response.status() != health::HealthCheckResponse::SERVING) {
    tally.Failure("the server is not SERVING after the load");
  }
}

// After the load, from the metrics: every search slot given back, and only intended
// status codes.
void CheckMetrics(SoakServer& server, Tally& tally, bool injecting) {
  if (server.metrics_port <= 0) {
    std::printf("search slots: not checked (no metrics endpoint in the server log)\n");
    return;
  }
  // Cancelled searches stop at their next poll; give them a moment.
  const auto since = Clock::now();
  double in_use = -1;
  std::string text;
  while (Clock::now() - since < std::chrono::seconds(15)) {
    text = ScrapeMetrics(server.metrics_port);
    in_use = MetricValue(text, "oobleck_planner_search_slots_in_use");
    if (in_use == 0) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  const double waited_ms = std::chrono::duration<double, std::milli>(Clock::now() - since).count();
  if (in_use != 0) {
    tally.Failure(absl::StrCat(in_use, " search slots still in use 15 s after the load"));
  } else {
    std::printf(
        "search slots: all free %.0f ms after the last call returned; %g calls were "
        "refused a slot (RESOURCE_EXHAUSTED)\n",
        waited_ms, MetricValue(text, "oobleck_planner_search_rejected_total"));
  }
  std::printf("server-side status codes (metrics):");
  std::vector<std::string> unintended_codes;
  for (const auto& [code, n] : RpcsByCode(text)) {
    std::printf(" %s %.0f", code.c_str(), n);
    if (n > 0 && !IntendedServerCode(code, injecting)) {
      unintended_codes.push_back(absl::StrFormat("%s %.0f", code, n));
    }
  }
  std::printf("\n");
  if (!unintended_codes.empty()) {
    tally.Failure(
        absl::StrCat("server metrics: rpcs_total ", absl::StrJoin(unintended_codes, ", ")));
  }
}

void PrintCacheStats(SoakServer& server) {
  grpc::ClientContext context;
  pb::GetStatsResponse stats;
  if (!server.stub->GetStats(&context, pb::GetStatsRequest(), &stats).ok()) return;
  std::printf("cache: %lld hits, %lld misses, %lld evictions; %lld entries, %.2f of %.2f MiB\n",
              static_cast<long long>(stats.cache_hits()),
              static_cast<long long>(stats.cache_misses()),
              static_cast<long long>(stats.cache_evictions()),
              static_cast<long long>(stats.cache_entries()), stats.cache_bytes() / 1048576.0,
              stats.cache_capacity_bytes() / 1048576.0);
}

// Fresh answers after the load: every request again, to completion, equal to before.
void CheckFreshAnswers(SoakServer& server, const Workload& work, References& references,
                       Tally& tally) {
  int equal = 0, compared = 0, compared_by_method[3] = {0, 0, 0};
  for (size_t i = 0; i < work.jobs.size(); ++i) {
    if (!references.Has(i)) continue;  // a big search that never completed
    const Job& job = work.jobs[i];
    ++compared;
    ++compared_by_method[static_cast<int>(job.method)];
    const CallResult r = Invoke(server.stub.get(), job, Mode::kFull, 0,
                                absl::GetFlag(FLAGS_full_deadline_s), nullptr);
    if (!r.status.ok()) {
      tally.Failure(absl::StrCat("after the load, ", MethodName(job.method), " [", job.name, "]: ",
                                 CodeName(r.status.error_code()), " ", r.status.error_message()));
    } else if (!references.Check(i, r.answer)) {
      tally.Mismatch(job, "after the load");
    } else {
      ++equal;
    }
  }
  std::printf(
      "fresh answers after the load: %d of %d equal to the answers from before it "
      "(%d PlanTemplates, %d Plan, %d Replan; big searches: their first complete "
      "answer)\n",
      equal, compared, compared_by_method[0], compared_by_method[1], compared_by_method[2]);
}

// After the load: alive, serving, every search slot given back, the same answers.
void CheckAfterLoad(SoakServer& server, const Workload& work, References& references,
                    Tally& tally) {
  if (!server.process.Alive()) {
    tally.Failure(absl::StrCat("the server is gone after the load (",
                               server.process.exit_description(), ")"));
    return;
  }
  const bool injecting = absl::GetFlag(FLAGS_inject_invalid_every) > 0;
  CheckHealth(server, tally);
  CheckMetrics(server, tally, injecting);
  // What the server answered calls the client saw end otherwise (e.g. after a TryCancel).
  for (const auto& [code_and_message, n] : UnintendedServerCodes(server.log_path, injecting)) {
    const auto& [code, message] = code_and_message;
    tally.Failure(absl::StrCat("server log: ", n, " calls ", code, " \"", message, "\""));
  }
  PrintCacheStats(server);
  CheckFreshAnswers(server, work, references, tally);
}

// PASS (0, the temporary log removed) or FAIL with every problem (1).
int Verdict(SoakServer& server, Tally& tally) {
  const std::vector<std::string> problems = tally.Problems();
  if (problems.empty()) {
    std::printf("PASS\n");
    server.process.Stop();
    if (server.temporary_log) std::filesystem::remove(server.log_path);
    return 0;
  }
  std::printf("FAIL:\n");
  for (const std::string& p : problems) std::printf("  %s\n", p.c_str());
  std::printf("server log: %s\n", server.log_path.c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  if (std::string e = FlagProblem(); !e.empty()) return Fail(e);
  SoakServer server;
  if (std::string e = StartServer(server); !e.empty()) return Fail(e);
  std::printf(
      "soak: %.0f s, %d client threads, seed %llu, %u cores; server pid %d at %s (--cache_mb=%lld "
      "--max_concurrent_searches=%d), log %s\n",
      absl::GetFlag(FLAGS_duration_s), absl::GetFlag(FLAGS_threads),
      static_cast<unsigned long long>(absl::GetFlag(FLAGS_seed)),
      std::thread::hardware_concurrency(), server.process.pid(), server.process.address().c_str(),
      static_cast<long long>(absl::GetFlag(FLAGS_cache_mb)),
      absl::GetFlag(FLAGS_max_concurrent_searches), server.log_path.c_str());
  if (std::string e = LoadModels(server.stub.get()); !e.empty()) return Fail(e);
  Workload work;
  if (std::string e = BuildWorkload(server.stub.get(), work); !e.empty()) return Fail(e);
  References references(work.jobs.size());
  for (size_t i = 0; i < work.jobs.size(); ++i) {
    if (!work.reference_answers[i].empty()) references.Set(i, work.reference_answers[i]);
  }

  const int64_t rss_start_kib = ProcStatusKiB(server.process.pid(), "VmRSS");
  std::printf("server RSS at the start of the load: %s MiB\n", Mib(rss_start_kib).c_str());
  std::printf("%8s %9s %9s %9s %9s %9s %10s %10s %9s %8s %9s %10s\n", "t_s", "calls", "OK",
              "CANCELLED", "DEADLINE", "EXHAUSTED", "unintended", "mismatches", "RSS_MiB",
              "entries", "cache_MiB", "evictions");
  Tally tally;
  Load load{work, references, tally, server.channel};
  const LoadFigures figures = RunLoad(server, load);
  const int64_t rss_end_kib = ProcStatusKiB(server.process.pid(), "VmRSS");
  const int64_t hwm_kib = ProcStatusKiB(server.process.pid(), "VmHWM");
  PrintProgress(server, tally, figures.load_s);
  tally.PrintTables();
  std::printf("\nserver RSS MiB: start %s, middle %s, end %s; peak (VmHWM) %s\n",
              Mib(rss_start_kib).c_str(), Mib(figures.rss_middle_kib).c_str(),
              Mib(rss_end_kib).c_str(), Mib(hwm_kib).c_str());
  CheckAfterLoad(server, work, references, tally);
  std::printf("load: %.1f s\n", figures.load_s);
  return Verdict(server, tally);
}
