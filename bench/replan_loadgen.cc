// Load generator for warm Replan (bench/README.md#replan-load): starts the real
// oobleck-planner binary on 127.0.0.1:0, plans a mixed cluster once (templates go into the
// server's cache), then sends Replan calls from --threads client threads for at most
// --requests calls or --duration_s seconds, and prints latency percentiles, RPC/s and the
// CPU time per call of the server process and of this client.
// Every request is a real event on the planned cluster (--event: nodes fail, or one joins);
// requests are stateless, so the threads replay a fixed set of them round-robin.
#include <grpcpp/grpcpp.h>
#include <sched.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <iterator>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "bench/server_process.h"
#include "oobleck/planner/v1/planner.grpc.pb.h"

ABSL_FLAG(std::string, server_bin, "",
          "the oobleck-planner binary (default: next to this program)");
ABSL_FLAG(std::string, profile_dir, OOBLECK_SOURCE_DIR "/examples/profiles",
          "--profile_dir for the server (must hold gpt2-xl/rtx4090)");
ABSL_FLAG(int, threads, 2, "client threads, each with synchronous calls");
ABSL_FLAG(int, requests, 20000, "stop after this many Replan calls in all");
ABSL_FLAG(double, duration_s, 20, "or after this many seconds");
ABSL_FLAG(int, warmup, 200, "Replan calls before measuring");
ABSL_FLAG(int, nodes_per_type, 4, "nodes of each GPU type (when --nodes is 0)");
ABSL_FLAG(int, nodes, 0,
          "nodes in all after the event, spread evenly over the types (0: --nodes_per_type each)");
ABSL_FLAG(int, types, 3,
          "GPU types, the first N of v100, rtx3090, rtx4090, a100, a100-80, h100, l40s, a10 "
          "(rtx4090 measured, the others derived by relative speed); at most 8");
ABSL_FLAG(int, gpus_per_node, 2, "GPUs per node");
ABSL_FLAG(std::string, event, "mixed",
          "mixed: each node failing alone and one join per type; failure: --failures nodes of "
          "distinct pipelines fail at once; join: one node joins a plan of one node fewer");
ABSL_FLAG(int, failures, 1, "nodes failing at once in each --event=failure request");
ABSL_FLAG(int, events, 256, "at most this many distinct events (spread over the plan)");
ABSL_FLAG(int, global_batch, 64, "micro-batches per iteration");
ABSL_FLAG(int, server_cpu, -1,
          "pin the server (and every thread it starts) to this CPU and the load generator to "
          "the others; -1: no pinning. On a small machine the client's own work then does not "
          "preempt the server's calls, as when the two run on different machines");
ABSL_FLAG(int, server_threads, 0, "--threads of the server (planning threads per request)");
ABSL_FLAG(double, baseline_s, 3,
          "seconds of GetStats calls first, the same way: what gRPC alone allows here (0: skip)");

namespace pb = ::oobleck::planner::v1;
using oobleck::bench::Percentile;

namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

struct Gpu {
  const char* name;
  double memory_gib;
  double relative_speed;  // to the measured rtx4090
};
// The fleet of bench/plan_bench.cc (BM_PlanFleet), in the same order.
constexpr Gpu kGpus[] = {
    {"v100", 16, 1 / 2.94}, {"rtx3090", 24, 1.8 / 2.94}, {"rtx4090", 24, 1}, {"a100", 40, 1.25},
    {"a100-80", 80, 1.3},   {"h100", 80, 2.5},           {"l40s", 48, 1.1},  {"a10", 24, 0.45}};
constexpr int kMaxTypes = sizeof(kGpus) / sizeof(kGpus[0]);

// `nodes` nodes over `types` types (type t gets nodes / types, the first nodes % types one
// more), listed type by type with ids 10.<t>.<k / 256>.<k % 256>.
pb::PlanRequest ClusterRequest(int types, int nodes, int gpus_per_node, int global_batch) {
  pb::PlanRequest request;
  request.set_model("gpt2-xl");
  request.set_microbatches(16);
  request.set_missing_allreduce_in_node(pb::MISSING_ALLREDUCE_RING);
  request.mutable_cluster()->set_inter_node_bytes_per_s(12.5e9);
  for (int t = 0; t < types; ++t) {
    const Gpu& gpu = kGpus[t];
    pb::NodeType* type = request.mutable_cluster()->add_node_types();
    type->set_name(gpu.name);
    type->set_gpu_type(gpu.name);
    type->set_gpus_per_node(gpus_per_node);
    type->set_gpu_memory_bytes(gpu.memory_gib * kGiB);
    type->set_intra_node_bytes_per_s(25e9);
    if (std::string(gpu.name) != "rtx4090") {
      type->mutable_derive()->set_measured_gpu_type("rtx4090");
      type->mutable_derive()->set_relative_speed(gpu.relative_speed);
    }
    const int count = nodes / types + (t < nodes % types ? 1 : 0);
    for (int k = 0; k < count; ++k) {
      pb::Node* node = request.add_nodes();
      node->set_id(absl::StrCat("10.", t, ".", k / 256, ".", k % 256));
      node->set_node_type(gpu.name);
    }
  }
  request.add_global_batch(global_batch);
  return request;
}

int Fail(const std::string& message) {
  std::cerr << "replan_loadgen: " << message << "\n";
  return 1;
}

pb::ReplanRequest OnPlan(const pb::PlanResponse& planned) {
  pb::ReplanRequest r;
  *r.mutable_request() = planned.request();
  *r.mutable_plan() = planned.plan();
  return r;
}

// The Replan requests to send (before dropping those with no answer), at most `limit`:
// spread over the nodes (mixed, one failure) or the pipelines (several failures).
std::vector<pb::ReplanRequest> MakeEvents(const pb::PlanResponse& planned, const std::string& kind,
                                          int failures, int limit) {
  std::vector<pb::ReplanRequest> events;
  const int n = planned.request().nodes_size();
  const int types = planned.request().cluster().node_types_size();
  if (kind == "join") {
    for (int e = 0; e < limit; ++e) {
      pb::ReplanRequest r = OnPlan(planned);
      pb::Node* joined = r.add_joined_nodes();
      joined->set_node_type(planned.request().cluster().node_types(e % types).name());
      joined->set_id(absl::StrCat("joined-", e));
      events.push_back(std::move(r));
    }
  } else if (kind == "failure") {
    const pb::ClusterPlan& plan = planned.plan();
    const int P = plan.pipelines_size();
    for (int e = 0; e < limit; ++e) {
      pb::ReplanRequest r = OnPlan(planned);
      // Pipelines e, e + P/failures, ...: distinct while failures <= P.
      for (int i = 0; i < failures; ++i) {
        const pb::PlannedPipeline& p = plan.pipelines((e + i * std::max(1, P / failures)) % P);
        r.add_failed_node_ids(p.node_ids((e + i) % p.node_ids_size()));
      }
      events.push_back(std::move(r));
    }
  } else {  // mixed
    const int stride = std::max(1, (n + types) / std::max(1, limit));
    for (int j = 0; j < n; j += stride) {
      pb::ReplanRequest r = OnPlan(planned);
      r.add_failed_node_ids(planned.request().nodes(j).id());
      events.push_back(std::move(r));
    }
    for (const pb::NodeType& type : planned.request().cluster().node_types()) {
      pb::ReplanRequest r = OnPlan(planned);
      pb::Node* joined = r.add_joined_nodes();
      joined->set_id(absl::StrCat("joined-", type.name()));
      joined->set_node_type(type.name());
      events.push_back(std::move(r));
    }
  }
  return events;
}

// utime + stime of a process in seconds, from /proc/<pid>/stat; -1 if unreadable.
double ProcessCpuSeconds(pid_t pid) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/stat"));
  std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t close = stat.rfind(')');
  if (close == std::string::npos) return -1;
  std::istringstream fields(stat.substr(close + 2));
  std::string field;
  double ticks = 0;
  for (int i = 3; i <= 15 && fields >> field; ++i) {
    if (i >= 14) ticks += std::stod(field);  // fields 14 and 15: utime, stime
  }
  return ticks / sysconf(_SC_CLK_TCK);
}

double SelfCpuSeconds() {
  rusage usage;
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_utime.tv_sec + usage.ru_stime.tv_sec +
         (usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6;
}

// Plans the cluster once (cold: templates searched and cached).
bool PlanOnce(pb::Planner::Stub& stub, const pb::PlanRequest& request, pb::PlanResponse* planned,
              std::string* error) {
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(300));
  const auto start = std::chrono::steady_clock::now();
  grpc::Status s = stub.Plan(&context, request, planned);
  if (!s.ok()) {
    *error = absl::StrCat("Plan: ", s.error_message());
    return false;
  }
  std::printf(
      "plan: %d nodes of %d types, %d pipelines, iteration %.1f ms; cold Plan %.1f ms (server "
      "%.1f ms)\n",
      planned->request().nodes_size(), planned->request().cluster().node_types_size(),
      planned->plan().pipelines_size(), planned->plan().iteration_time_ms(),
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count(),
      planned->planning_time_ms());
  return true;
}

// The cheapest RPC for `seconds` from `threads` threads on the same channel.
void Baseline(const std::shared_ptr<grpc::Channel>& channel, int threads, double seconds) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  std::atomic<int64_t> calls{0};
  const auto begin = std::chrono::steady_clock::now();
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&] {
      auto own_stub = pb::Planner::NewStub(channel);
      while (std::chrono::steady_clock::now() < until) {
        grpc::ClientContext context;
        pb::GetStatsResponse response;
        if (own_stub->GetStats(&context, pb::GetStatsRequest(), &response).ok()) calls.fetch_add(1);
      }
    });
  }
  for (std::thread& w : pool) w.join();
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
  std::printf("baseline: GetStats from %d threads: %.0f RPC/s\n", threads, calls.load() / s);
}

struct Measured {
  std::vector<double> client_ms, server_ms;
  std::map<std::string, int> strategies;
  int errors = 0;
  double elapsed_s = 0;
};

// Replan calls round-robin over `events` from `threads` threads until the limits.
Measured Measure(const std::shared_ptr<grpc::Channel>& channel, int threads,
                 const std::vector<pb::ReplanRequest>& events) {
  const int max_requests = absl::GetFlag(FLAGS_requests);
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::duration<double>(absl::GetFlag(FLAGS_duration_s));
  std::atomic<int> issued{0}, errors{0};
  std::vector<Measured> per_thread(threads);
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      auto own_stub = pb::Planner::NewStub(channel);
      Measured& mine = per_thread[t];
      for (;;) {
        const int n = issued.fetch_add(1);
        if (n >= max_requests || std::chrono::steady_clock::now() >= deadline) break;
        grpc::ClientContext context;
        context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
        pb::ReplanResponse response;
        const auto call_start = std::chrono::steady_clock::now();
        const grpc::Status s = own_stub->Replan(&context, events[n % events.size()], &response);
        mine.client_ms.push_back(
            std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - call_start)
                .count());
        if (!s.ok()) {
          errors.fetch_add(1);
        } else {
          mine.server_ms.push_back(response.planning_time_ms());
          ++mine.strategies[response.strategy()];
        }
      }
    });
  }
  for (std::thread& w : workers) w.join();
  Measured all;
  all.elapsed_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  all.errors = errors.load();
  for (const Measured& m : per_thread) {
    all.client_ms.insert(all.client_ms.end(), m.client_ms.begin(), m.client_ms.end());
    all.server_ms.insert(all.server_ms.end(), m.server_ms.begin(), m.server_ms.end());
    for (const auto& [name, count] : m.strategies) all.strategies[name] += count;
  }
  return all;
}

// Starts the server; with cpu >= 0 pins it (and every thread it starts: a spawned process
// inherits the spawner's CPU set) to that CPU and this process to the others.
bool StartServer(const std::string& binary, const std::vector<std::string>& args, int cpu,
                 oobleck::bench::ServerProcess* server, std::string* error) {
  cpu_set_t all;
  CPU_ZERO(&all);
  if (cpu >= 0) {
    if (sched_getaffinity(0, sizeof(all), &all) != 0 || !CPU_ISSET(cpu, &all) ||
        CPU_COUNT(&all) < 2) {
      *error = absl::StrCat("--server_cpu=", cpu, " is not one of at least two CPUs we may use");
      return false;
    }
    cpu_set_t only;
    CPU_ZERO(&only);
    CPU_SET(cpu, &only);
    if (sched_setaffinity(0, sizeof(only), &only) != 0) {
      *error = "sched_setaffinity failed";
      return false;
    }
  }
  const bool started = server->Start(binary, args);
  if (cpu >= 0) {
    CPU_CLR(cpu, &all);
    if (sched_setaffinity(0, sizeof(all), &all) != 0 && started) {
      *error = "sched_setaffinity failed";
      return false;
    }
  }
  if (!started) *error = server->error();
  return started;
}

// The events of `kind` on the plan that have an answer (a failure may lose every replica
// of a layer), after --warmup calls over them.
std::vector<pb::ReplanRequest> AnsweredEvents(pb::Planner::Stub& stub,
                                              const pb::PlanResponse& planned,
                                              const std::string& kind) {
  std::vector<pb::ReplanRequest> events;
  for (pb::ReplanRequest& r : MakeEvents(planned, kind, absl::GetFlag(FLAGS_failures),
                                         std::max(1, absl::GetFlag(FLAGS_events)))) {
    grpc::ClientContext context;
    pb::ReplanResponse response;
    if (stub.Replan(&context, r, &response).ok()) events.push_back(std::move(r));
  }
  for (int i = 0; !events.empty() && i < absl::GetFlag(FLAGS_warmup); ++i) {
    grpc::ClientContext context;
    pb::ReplanResponse response;
    stub.Replan(&context, events[i % events.size()], &response);
  }
  return events;
}

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  const std::string binary = oobleck::bench::ServerBinary(absl::GetFlag(FLAGS_server_bin));
  const int threads = std::max(1, absl::GetFlag(FLAGS_threads));
  const int types = absl::GetFlag(FLAGS_types);
  const std::string kind = absl::GetFlag(FLAGS_event);
  if (types < 1 || types > kMaxTypes)
    return Fail(absl::StrCat("--types must be in 1..", kMaxTypes));
  if (kind != "mixed" && kind != "failure" && kind != "join") {
    return Fail("--event must be mixed, failure or join");
  }
  if (absl::GetFlag(FLAGS_failures) < 1) return Fail("--failures must be >= 1");
  int nodes = absl::GetFlag(FLAGS_nodes);
  if (nodes == 0) nodes = absl::GetFlag(FLAGS_nodes_per_type) * types;
  if (kind == "join") --nodes;  // so that the cluster after the event has --nodes
  if (nodes < types) return Fail("fewer nodes than types");

  oobleck::bench::ServerProcess server;
  std::string error;
  std::vector<std::string> server_args = {"--address", "127.0.0.1:0", "--profile_dir",
                                          absl::GetFlag(FLAGS_profile_dir)};
  if (absl::GetFlag(FLAGS_server_threads) > 0) {
    server_args.push_back(absl::StrCat("--threads=", absl::GetFlag(FLAGS_server_threads)));
  }
  if (!StartServer(binary, server_args, absl::GetFlag(FLAGS_server_cpu), &server, &error)) {
    return Fail(error);
  }
  auto channel = grpc::CreateChannel(server.address(), grpc::InsecureChannelCredentials());
  if (!channel->WaitForConnected(std::chrono::system_clock::now() + std::chrono::seconds(20))) {
    return Fail(absl::StrCat("server at ", server.address(), " is not reachable"));
  }
  auto stub = pb::Planner::NewStub(channel);
  pb::PlanResponse planned;
  if (!PlanOnce(*stub,
                ClusterRequest(types, nodes, absl::GetFlag(FLAGS_gpus_per_node),
                               absl::GetFlag(FLAGS_global_batch)),
                &planned, &error)) {
    return Fail(error);
  }
  const std::vector<pb::ReplanRequest> events = AnsweredEvents(*stub, planned, kind);
  if (events.empty()) return Fail("no event has a plan");
  if (absl::GetFlag(FLAGS_baseline_s) > 0) {
    Baseline(channel, threads, absl::GetFlag(FLAGS_baseline_s));
  }

  const double server_cpu_before = ProcessCpuSeconds(server.pid());
  const double client_cpu_before = SelfCpuSeconds();
  const Measured m = Measure(channel, threads, events);
  const double server_cpu = ProcessCpuSeconds(server.pid()) - server_cpu_before;
  const double client_cpu = SelfCpuSeconds() - client_cpu_before;
  const double calls = std::max<size_t>(1, m.client_ms.size());
  std::printf(
      "replan (%s, %d distinct events): %zu calls from %d threads in %.2f s: %.0f RPC/s, %d "
      "errors\n",
      kind == "failure" ? absl::StrCat(absl::GetFlag(FLAGS_failures), " failure(s)").c_str()
                        : kind.c_str(),
      static_cast<int>(events.size()), m.client_ms.size(), threads, m.elapsed_s,
      m.client_ms.size() / m.elapsed_s, m.errors);
  std::string strategies;
  for (const auto& [name, count] : m.strategies)
    absl::StrAppend(&strategies, " ", name, " ", count);
  std::printf("strategies:%s\n", strategies.c_str());
  std::printf("latency ms (client): p50 %.3f  p90 %.3f  p99 %.3f  max %.3f\n",
              Percentile(m.client_ms, 0.5), Percentile(m.client_ms, 0.9),
              Percentile(m.client_ms, 0.99), Percentile(m.client_ms, 1.0));
  std::printf("planning ms (server): p50 %.3f  p99 %.3f  max %.3f\n", Percentile(m.server_ms, 0.5),
              Percentile(m.server_ms, 0.99), Percentile(m.server_ms, 1.0));
  std::printf("cpu ms per call: server %.3f  client %.3f\n", 1000 * server_cpu / calls,
              1000 * client_cpu / calls);
  return m.errors == 0 ? 0 : 1;
}
