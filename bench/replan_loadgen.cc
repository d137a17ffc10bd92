// Load generator for warm Replan (bench/README.md#replan-load): starts the real
// oobleck-planner binary on 127.0.0.1:0, plans a mixed cluster once (templates go into the
// server's cache), then sends Replan calls from --threads client threads for at most
// --requests calls or --duration_s seconds, and prints latency percentiles and RPC/s.
// Every request is a real event on the planned cluster (one node fails, or one joins);
// requests are stateless, so the threads replay a fixed set of them round-robin.
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <iostream>
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
ABSL_FLAG(int, nodes_per_type, 4, "nodes of each of the 3 GPU types (2 GPUs each)");
ABSL_FLAG(int, global_batch, 64, "micro-batches per iteration");
ABSL_FLAG(int, server_threads, 0, "--threads of the server (planning threads per request)");
ABSL_FLAG(double, baseline_s, 3,
          "seconds of GetStats calls first, the same way: what gRPC alone allows here (0: skip)");

namespace pb = ::oobleck::planner::v1;
using oobleck::bench::Percentile;

namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

pb::PlanRequest ClusterRequest(int nodes_per_type, int global_batch) {
  struct Gpu {
    const char* name;
    double memory_gib, relative_speed;
  };
  const Gpu gpus[] = {{"v100", 16, 1.0}, {"rtx3090", 24, 1.8}, {"rtx4090", 24, 2.94}};
  pb::PlanRequest request;
  request.set_model("gpt2-xl");
  request.set_microbatches(16);
  request.set_missing_allreduce_in_node(pb::MISSING_ALLREDUCE_RING);
  request.mutable_cluster()->set_inter_node_bytes_per_s(12.5e9);
  for (int t = 0; t < 3; ++t) {
    pb::NodeType* type = request.mutable_cluster()->add_node_types();
    type->set_name(gpus[t].name);
    type->set_gpu_type(gpus[t].name);
    type->set_gpus_per_node(2);
    type->set_gpu_memory_bytes(gpus[t].memory_gib * kGiB);
    type->set_intra_node_bytes_per_s(25e9);
    if (std::string(gpus[t].name) != "rtx4090") {
      type->mutable_derive()->set_measured_gpu_type("rtx4090");
      type->mutable_derive()->set_relative_speed(gpus[t].relative_speed / 2.94);
    }
    for (int k = 0; k < nodes_per_type; ++k) {
      pb::Node* node = request.add_nodes();
      node->set_id(absl::StrCat("10.0.", t, ".", k + 1));
      node->set_node_type(gpus[t].name);
    }
  }
  request.add_global_batch(global_batch);
  return request;
}

int Fail(const std::string& message) {
  std::cerr << "replan_loadgen: " << message << "\n";
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  const std::string binary = oobleck::bench::ServerBinary(absl::GetFlag(FLAGS_server_bin));
  const int threads = std::max(1, absl::GetFlag(FLAGS_threads));
  oobleck::bench::ServerProcess server;
  std::vector<std::string> server_args = {"--address", "127.0.0.1:0", "--profile_dir",
                                          absl::GetFlag(FLAGS_profile_dir)};
  if (absl::GetFlag(FLAGS_server_threads) > 0) {
    server_args.push_back(absl::StrCat("--threads=", absl::GetFlag(FLAGS_server_threads)));
  }
  if (!server.Start(binary, server_args)) return Fail(server.error());
  auto channel = grpc::CreateChannel(server.address(), grpc::InsecureChannelCredentials());
  if (!channel->WaitForConnected(std::chrono::system_clock::now() + std::chrono::seconds(20))) {
    return Fail(absl::StrCat("server at ", server.address(), " is not reachable"));
  }
  auto stub = pb::Planner::NewStub(channel);

  // Plan once (cold: templates searched and cached).
  pb::PlanResponse planned;
  {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(120));
    const auto start = std::chrono::steady_clock::now();
    grpc::Status s = stub->Plan(
        &context,
        ClusterRequest(absl::GetFlag(FLAGS_nodes_per_type), absl::GetFlag(FLAGS_global_batch)),
        &planned);
    if (!s.ok()) return Fail(absl::StrCat("Plan: ", s.error_message()));
    std::printf(
        "plan: %d nodes, %d pipelines, iteration %.1f ms; cold Plan %.1f ms (server %.1f ms)\n",
        planned.request().nodes_size(), planned.plan().pipelines_size(),
        planned.plan().iteration_time_ms(),
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count(),
        planned.planning_time_ms());
  }
  // The events: each node failing alone, and one new node of each type joining.
  std::vector<pb::ReplanRequest> events;
  for (const pb::Node& node : planned.request().nodes()) {
    pb::ReplanRequest r;
    *r.mutable_request() = planned.request();
    *r.mutable_plan() = planned.plan();
    r.add_failed_node_ids(node.id());
    events.push_back(std::move(r));
  }
  for (const pb::NodeType& type : planned.request().cluster().node_types()) {
    pb::ReplanRequest r;
    *r.mutable_request() = planned.request();
    *r.mutable_plan() = planned.plan();
    pb::Node* joined = r.add_joined_nodes();
    joined->set_id(absl::StrCat("joined-", type.name()));
    joined->set_node_type(type.name());
    events.push_back(std::move(r));
  }
  // Keep the events that have an answer (a failure may lose every replica of a layer).
  std::vector<pb::ReplanRequest> ok_events;
  for (pb::ReplanRequest& r : events) {
    grpc::ClientContext context;
    pb::ReplanResponse response;
    if (stub->Replan(&context, r, &response).ok()) ok_events.push_back(std::move(r));
  }
  if (ok_events.empty()) return Fail("no event has a plan");
  for (int i = 0; i < absl::GetFlag(FLAGS_warmup); ++i) {
    grpc::ClientContext context;
    pb::ReplanResponse response;
    stub->Replan(&context, ok_events[i % ok_events.size()], &response);
  }

  // Baseline: the cheapest RPC, same threads and channel.
  if (absl::GetFlag(FLAGS_baseline_s) > 0) {
    const auto until = std::chrono::steady_clock::now() +
                       std::chrono::duration<double>(absl::GetFlag(FLAGS_baseline_s));
    std::atomic<int64_t> calls{0};
    const auto begin = std::chrono::steady_clock::now();
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t) {
      pool.emplace_back([&] {
        auto own_stub = pb::Planner::NewStub(channel);
        while (std::chrono::steady_clock::now() < until) {
          grpc::ClientContext context;
          pb::GetStatsResponse response;
          if (own_stub->GetStats(&context, pb::GetStatsRequest(), &response).ok())
            calls.fetch_add(1);
        }
      });
    }
    for (std::thread& w : pool) w.join();
    const double s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
    std::printf("baseline: GetStats from %d threads: %.0f RPC/s\n", threads, calls.load() / s);
  }

  const int max_requests = absl::GetFlag(FLAGS_requests);
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::duration<double>(absl::GetFlag(FLAGS_duration_s));
  std::atomic<int> issued{0}, errors{0};
  std::vector<std::vector<double>> latencies(threads), server_ms(threads);
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      auto own_stub = pb::Planner::NewStub(channel);
      for (;;) {
        const int n = issued.fetch_add(1);
        if (n >= max_requests || std::chrono::steady_clock::now() >= deadline) break;
        grpc::ClientContext context;
        context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
        pb::ReplanResponse response;
        const auto call_start = std::chrono::steady_clock::now();
        const grpc::Status s =
            own_stub->Replan(&context, ok_events[n % ok_events.size()], &response);
        latencies[t].push_back(
            std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - call_start)
                .count());
        if (!s.ok()) {
          errors.fetch_add(1);
        } else {
          server_ms[t].push_back(response.planning_time_ms());
        }
      }
    });
  }
  for (std::thread& w : workers) w.join();
  const double elapsed_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::vector<double> all, all_server;
  for (int t = 0; t < threads; ++t) {
    all.insert(all.end(), latencies[t].begin(), latencies[t].end());
    all_server.insert(all_server.end(), server_ms[t].begin(), server_ms[t].end());
  }
  std::printf(
      "replan: %zu calls (%d distinct events) from %d threads in %.2f s: %.0f RPC/s, %d errors\n",
      all.size(), static_cast<int>(ok_events.size()), threads, elapsed_s, all.size() / elapsed_s,
      errors.load());
  std::printf("latency ms (client): p50 %.3f  p90 %.3f  p99 %.3f  max %.3f\n", Percentile(all, 0.5),
              Percentile(all, 0.9), Percentile(all, 0.99), Percentile(all, 1.0));
  std::printf("planning ms (server): p50 %.3f  p99 %.3f\n", Percentile(all_server, 0.5),
              Percentile(all_server, 0.99));
  return errors.load() == 0 ? 0 : 1;
}
