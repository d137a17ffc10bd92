// oobleck-planner: the planning service. Loads profiles from --profile_dir and --data_dir,
// serves oobleck.planner.v1.Planner plus health and reflection (optionally over TLS with a
// bearer token), and drains in-flight calls on SIGTERM/SIGINT.
#include <pthread.h>
#include <signal.h>

#include <chrono>
#include <cstdint>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "core/confined_root.h"
#include "core/profile_catalog.h"
#include "core/template_planner.h"
#include "server/memory.h"
#include "server/metrics.h"
#include "server/planner_server.h"
#include "server/planner_service.h"
#include "server/profile_store.h"
#include "server/profile_tree.h"
#include "server/request_log.h"
#include "server/search_gate.h"
#include "server/server_security.h"
#include "server/service_options.h"

ABSL_FLAG(std::string, address, "127.0.0.1:50051",
          "Address to listen on; a port of 0 picks a free one (printed at start).");
ABSL_FLAG(std::string, profile_dir, "",
          "Directory of profiles loaded at start, laid out as DIR/<model>/<gpu_type>/ with "
          "Oobleck's mb<m>.json, allreduce_in_node.json, allreduce_across_nodes.json.");
ABSL_FLAG(std::string, load_root, "",
          "LoadProfile requests naming a server-side `directory` may read only inside this "
          "directory tree (symlinks resolved first); empty: such requests are refused. "
          "--profile_dir must lie inside it when both are given.");
ABSL_FLAG(int, threads, 0, "Planning threads per request; 0 = all cores.");
ABSL_FLAG(int64_t, cache_mb, 256, "Memory budget of the shared template cache, in MiB.");
ABSL_FLAG(std::string, data_dir, "",
          "Directory where profiles loaded over RPC are persisted (one file each, written "
          "atomically) and reloaded from at start; empty: they live in memory only.");
ABSL_FLAG(std::string, tls_cert, "", "PEM certificate chain; with --tls_key, serve over TLS.");
ABSL_FLAG(std::string, tls_key, "", "PEM private key of --tls_cert.");
ABSL_FLAG(std::string, auth_token_file, "",
          "File holding a bearer token every call but health checks must present as "
          "\"authorization: Bearer <token>\" (needs --tls_cert/--tls_key).");
ABSL_FLAG(bool, log_requests, true,
          "Log one line per RPC (method, request id, status code, latency) to stderr.");
ABSL_FLAG(int, progress_interval_ms, 200,
          "PlanTemplatesStream sends a progress update at most this often (the first once "
          "the search has run this long), in milliseconds.");
ABSL_FLAG(std::string, metrics_address, "",
          "HOST:PORT to serve Prometheus metrics on (http://HOST:PORT/metrics); a port of 0 "
          "picks a free one (printed at start); empty: no metrics.");
ABSL_FLAG(int, max_concurrent_searches, 2,
          "PlanTemplates calls planning at once; more wait for a slot, and get "
          "RESOURCE_EXHAUSTED when none frees before their deadline.");
ABSL_FLAG(double, max_search_queue_wait_s, 30,
          "Longest wait for a search slot of a call without a deadline, in seconds.");
ABSL_FLAG(int, malloc_arena_max, 2,
          "At most this many glibc malloc arenas (mallopt M_ARENA_MAX), so that memory freed "
          "by one search is reused by the next instead of staying in a worker thread's arena; "
          "0 = glibc's default (8 per core). MALLOC_ARENA_MAX in the environment overrides it.");
ABSL_FLAG(double, malloc_trim_interval_s, 5,
          "Every this many seconds, return the allocator's free memory to the OS "
          "(malloc_trim) when it holds at least --malloc_trim_min_free_mb; 0 = never.");
ABSL_FLAG(int64_t, malloc_trim_min_free_mb, 32,
          "Free memory held by the allocator, in MiB, that makes the periodic trim run.");

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
  const int max_concurrent_searches = absl::GetFlag(FLAGS_max_concurrent_searches);
  if (max_concurrent_searches < 1) {
    std::cerr << "--max_concurrent_searches must be >= 1 (got " << max_concurrent_searches << ")\n";
    return 2;
  }
  const int progress_interval_ms = absl::GetFlag(FLAGS_progress_interval_ms);
  if (progress_interval_ms < 0 || progress_interval_ms > 60'000) {
    std::cerr << "--progress_interval_ms must be between 0 and 60000 (got " << progress_interval_ms
              << ")\n";
    return 2;
  }
  const double max_queue_wait_s = absl::GetFlag(FLAGS_max_search_queue_wait_s);
  if (!(max_queue_wait_s >= 0 && max_queue_wait_s <= 86400)) {
    std::cerr << "--max_search_queue_wait_s must be between 0 and 86400 (got " << max_queue_wait_s
              << ")\n";
    return 2;
  }
  const int malloc_arena_max = absl::GetFlag(FLAGS_malloc_arena_max);
  if (malloc_arena_max < 0 || malloc_arena_max > 1024) {
    std::cerr << "--malloc_arena_max must be between 0 and 1024 (got " << malloc_arena_max << ")\n";
    return 2;
  }
  const double trim_interval_s = absl::GetFlag(FLAGS_malloc_trim_interval_s);
  if (!(trim_interval_s == 0 || (trim_interval_s >= 0.1 && trim_interval_s <= 86400))) {
    std::cerr << "--malloc_trim_interval_s must be 0 or between 0.1 and 86400 (got "
              << trim_interval_s << ")\n";
    return 2;
  }
  const int64_t trim_min_free_mb = absl::GetFlag(FLAGS_malloc_trim_min_free_mb);
  if (trim_min_free_mb < 0 || trim_min_free_mb > (int64_t{1} << 30)) {
    std::cerr << "--malloc_trim_min_free_mb must be between 0 and 2^30 (got " << trim_min_free_mb
              << ")\n";
    return 2;
  }
  // Before any thread exists: a thread keeps the arena it got first.
  std::cerr << oobleck::server::CapMallocArenas(malloc_arena_max) << "\n";
  absl::StatusOr<oobleck::server::ServerSecurity> security = oobleck::server::ReadServerSecurity(
      absl::GetFlag(FLAGS_tls_cert), absl::GetFlag(FLAGS_tls_key),
      absl::GetFlag(FLAGS_auth_token_file));
  if (!security.ok()) {
    std::cerr << security.status().message() << "\n";
    return 2;
  }

  // Blocked before any thread exists so every thread inherits the mask and only the
  // sigwait below sees the signals.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  std::optional<oobleck::ConfinedRoot> load_root;
  if (const std::string root = absl::GetFlag(FLAGS_load_root); !root.empty()) {
    absl::StatusOr<oobleck::ConfinedRoot> opened = oobleck::ConfinedRoot::Open(root);
    if (!opened.ok()) {
      std::cerr << "--load_root: " << opened.status().message() << "\n";
      return 2;
    }
    load_root = *std::move(opened);
  }
  oobleck::ProfileCatalog catalog;
  const std::string profile_dir = absl::GetFlag(FLAGS_profile_dir);
  if (!profile_dir.empty() && load_root.has_value() &&
      !load_root->Resolve(profile_dir, "--profile_dir").ok()) {
    std::cerr << "--profile_dir " << profile_dir << " is not inside --load_root "
              << load_root->path().string() << "\n";
    return 2;
  }
  if (!profile_dir.empty()) {
    const oobleck::server::ProfileTreeReport report =
        oobleck::server::LoadProfileTree(profile_dir, &catalog);
    for (const std::string& error : report.errors) {
      std::cerr << "skipped profile: " << error << "\n";
    }
    std::cerr << "loaded " << report.loaded.size() << " profile(s) from " << profile_dir << "\n";
  }
  // After --profile_dir: profiles loaded over RPC (possibly replacing those) are newer.
  std::unique_ptr<oobleck::server::ProfileStore> store;
  if (const std::string data_dir = absl::GetFlag(FLAGS_data_dir); !data_dir.empty()) {
    absl::StatusOr<std::unique_ptr<oobleck::server::ProfileStore>> opened =
        oobleck::server::ProfileStore::Open(data_dir, &catalog);
    if (!opened.ok()) {
      std::cerr << "--data_dir: " << opened.status().message() << "\n";
      return 2;
    }
    store = *std::move(opened);
    const oobleck::server::ProfileStoreReport report = store->LoadAll();
    for (const std::string& error : report.errors) {
      std::cerr << "skipped stored profile: " << error << "\n";
    }
    std::cerr << "reloaded " << report.loaded.size() << " stored profile(s) from " << data_dir
              << "\n";
  }
  oobleck::TemplateCache cache(cache_mb << 20);
  oobleck::server::SearchGate search_gate(max_concurrent_searches, absl::Seconds(max_queue_wait_s));
  // Shared by the per-call lines and the progress lines of long searches.
  oobleck::server::RequestLog request_log(absl::GetFlag(FLAGS_log_requests));
  oobleck::server::ServiceOptions options;
  options.profile_store = store.get();
  options.request_log = &request_log;
  options.progress_interval = absl::Milliseconds(progress_interval_ms);
  options.search_gate = &search_gate;
  options.load_root = load_root.has_value() ? &*load_root : nullptr;
  oobleck::server::PlannerService service(&catalog, &cache, threads, options);

  std::unique_ptr<oobleck::server::ServerMetrics> metrics;
  if (const std::string metrics_address = absl::GetFlag(FLAGS_metrics_address);
      !metrics_address.empty()) {
    absl::StatusOr<std::unique_ptr<oobleck::server::ServerMetrics>> started =
        oobleck::server::ServerMetrics::Start(metrics_address, {&cache, &catalog, &search_gate});
    if (!started.ok()) {
      std::cerr << "--metrics_address: " << started.status().message() << "\n";
      return 1;
    }
    metrics = *std::move(started);
    const std::string host = metrics_address.substr(0, metrics_address.rfind(':'));
    std::cerr << "metrics on http://" << host << ":" << metrics->port() << "/metrics\n";
  }
  oobleck::server::ServerOptions server_options;
  server_options.security = *std::move(security);
  if (request_log.log_lines()) server_options.request_log = &request_log;
  server_options.metrics = metrics.get();
  auto running =
      oobleck::server::StartPlannerServer(absl::GetFlag(FLAGS_address), &service, server_options);
  if (!running.ok()) {
    std::cerr << running.status().message() << "\n";
    return 1;
  }
  std::cout << "listening on " << running->address << std::endl;
  // Off the request threads: the trim walks every arena.
  std::unique_ptr<oobleck::server::MallocTrimmer> trimmer;
  if (trim_interval_s > 0) {
    trimmer = std::make_unique<oobleck::server::MallocTrimmer>(absl::Seconds(trim_interval_s),
                                                               trim_min_free_mb << 20);
  }

  grpc::Server* server = running->server.get();
  std::thread stopper([&stop_signals, server, &service] {
    int signal_number = 0;
    sigwait(&stop_signals, &signal_number);
    std::cerr << "signal " << signal_number << ": shutting down (in-flight calls get 5 s)\n";
    // Running searches stop within ~100 ms and answer UNAVAILABLE; short calls finish.
    service.BeginShutdown();
    server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(5));
  });
  server->Wait();
  stopper.join();
  std::cerr << "stopped\n";
  return 0;
}
