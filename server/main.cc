// oobleck-planner: the planning service. Loads profiles from --profile_dir, serves
// oobleck.planner.v1.Planner plus health and reflection, and drains in-flight calls on
// SIGTERM/SIGINT.
#include <pthread.h>
#include <signal.h>

#include <chrono>
#include <cstdint>
#include <iostream>
#include <string>
#include <thread>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "core/profile_catalog.h"
#include "core/template_planner.h"
#include "server/planner_server.h"
#include "server/planner_service.h"
#include "server/profile_tree.h"

ABSL_FLAG(std::string, address, "127.0.0.1:50051",
          "Address to listen on; a port of 0 picks a free one (printed at start).");
ABSL_FLAG(std::string, profile_dir, "",
          "Directory of profiles loaded at start, laid out as DIR/<model>/<gpu_type>/ with "
          "Oobleck's mb<m>.json, allreduce_in_node.json, allreduce_across_nodes.json.");
ABSL_FLAG(int, threads, 0, "Planning threads per request; 0 = all cores.");
ABSL_FLAG(int64_t, cache_mb, 256, "Memory budget of the shared template cache, in MiB.");

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  const int threads = absl::GetFlag(FLAGS_threads);
  const int64_t cache_mb = absl::GetFlag(FLAGS_cache_mb);
  if (threads < 0) {
    std::cerr << "--threads must be >= 0 (got " << threads << ")\n";
    return 2;
  }
  if (cache_mb < 1 || cache_mb > (int64_t{1} << 30)) {
    std::cerr << "--cache_mb must be between 1 and 2^30 (got " << cache_mb << ")\n";
    return 2;
  }

  // Blocked before any thread exists so every thread inherits the mask and only the
  // sigwait below sees the signals.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  oobleck::ProfileCatalog catalog;
  const std::string profile_dir = absl::GetFlag(FLAGS_profile_dir);
  if (!profile_dir.empty()) {
    const oobleck::server::ProfileTreeReport report =
        oobleck::server::LoadProfileTree(profile_dir, &catalog);
    for (const std::string& error : report.errors) {
      std::cerr << "skipped profile: " << error << "\n";
    }
    std::cerr << "loaded " << report.loaded.size() << " profile(s) from " << profile_dir << "\n";
  }
  oobleck::TemplateCache cache(cache_mb << 20);
  oobleck::server::PlannerService service(&catalog, &cache, threads);

  auto running = oobleck::server::StartPlannerServer(absl::GetFlag(FLAGS_address), &service);
  if (!running.ok()) {
    std::cerr << running.status().message() << "\n";
    return 1;
  }
  std::cout << "listening on " << running->address << std::endl;

  grpc::Server* server = running->server.get();
  std::thread stopper([&stop_signals, server] {
    int signal_number = 0;
    sigwait(&stop_signals, &signal_number);
    std::cerr << "signal " << signal_number << ": shutting down (in-flight calls get 5 s)\n";
    server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(5));
  });
  server->Wait();
  stopper.join();
  std::cerr << "stopped\n";
  return 0;
}
