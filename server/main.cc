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
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "core/confined_root.h"
#include "core/profile_catalog.h"
#include "core/template_planner.h"
#include "server/memory.h"
#include "server/metrics.h"
#include "server/planner_server.h"
#include "server/planner_service.h"
#include "server/profile_store.h"
#include "server/profile_tree.h"
#include "server/replication.h"
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
ABSL_FLAG(int64_t, inline_profile_cache_mb, oobleck::server::kDefaultInlineProfileCacheBytes >> 20,
          "Memory budget of the profiles planning requests send inline (kept by "
          "fingerprint, least recently used first out, never persisted), in MiB.");
ABSL_FLAG(std::string, data_dir, "",
          "Directory where profiles loaded over RPC are persisted (one file each, written "
          "atomically) and reloaded from at start; empty: they live in memory only.");
ABSL_FLAG(int64_t, max_profile_mb, oobleck::kDefaultMaxProfileBytes >> 20,
          "Memory budget of all loaded profiles, in MiB (estimated); a LoadProfile that "
          "would pass it gets RESOURCE_EXHAUSTED and nothing is stored.");
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

namespace {

using ::oobleck::server::ProfileStore;
using ::oobleck::server::ServerMetrics;

// Start-time configuration errors exit with this code, a server that cannot bind with 1.
constexpr int kExitBadFlags = 2;
constexpr int kExitCannotServe = 1;

// The numeric flags, once in range.
struct NumericFlags {
  int threads = 0;
  int64_t cache_mb = 0;
  int64_t max_profile_mb = 0;
  int64_t inline_profile_cache_mb = 0;
  int max_concurrent_searches = 0;
  int progress_interval_ms = 0;
  double max_queue_wait_s = 0;
  int malloc_arena_max = 0;
  double trim_interval_s = 0;
  int64_t trim_min_free_mb = 0;
};

// One row of the range table: "--<name> must be <requirement> (got <value>)" unless valid.
struct FlagRule {
  const char* name;
  std::string value;
  bool valid;
  const char* requirement;
};

absl::StatusOr<NumericFlags> ReadNumericFlags() {
  NumericFlags f;
  f.threads = absl::GetFlag(FLAGS_threads);
  f.cache_mb = absl::GetFlag(FLAGS_cache_mb);
  f.max_profile_mb = absl::GetFlag(FLAGS_max_profile_mb);
  f.inline_profile_cache_mb = absl::GetFlag(FLAGS_inline_profile_cache_mb);
  f.max_concurrent_searches = absl::GetFlag(FLAGS_max_concurrent_searches);
  f.progress_interval_ms = absl::GetFlag(FLAGS_progress_interval_ms);
  f.max_queue_wait_s = absl::GetFlag(FLAGS_max_search_queue_wait_s);
  f.malloc_arena_max = absl::GetFlag(FLAGS_malloc_arena_max);
  f.trim_interval_s = absl::GetFlag(FLAGS_malloc_trim_interval_s);
  f.trim_min_free_mb = absl::GetFlag(FLAGS_malloc_trim_min_free_mb);
  constexpr int64_t kMaxMb = int64_t{1} << 30;
  const std::vector<FlagRule> rules = {
      {"threads", absl::StrCat(f.threads), f.threads >= 0, ">= 0"},
      {"cache_mb", absl::StrCat(f.cache_mb), f.cache_mb >= 1 && f.cache_mb <= kMaxMb,
       "between 1 and 2^30"},
      {"max_profile_mb", absl::StrCat(f.max_profile_mb),
       f.max_profile_mb >= 1 && f.max_profile_mb <= kMaxMb, "between 1 and 2^30"},
      {"inline_profile_cache_mb", absl::StrCat(f.inline_profile_cache_mb),
       f.inline_profile_cache_mb >= 1 && f.inline_profile_cache_mb <= kMaxMb, "between 1 and 2^30"},
      {"max_concurrent_searches", absl::StrCat(f.max_concurrent_searches),
       f.max_concurrent_searches >= 1, ">= 1"},
      {"progress_interval_ms", absl::StrCat(f.progress_interval_ms),
       f.progress_interval_ms >= 0 && f.progress_interval_ms <= 60'000, "between 0 and 60000"},
      {"max_search_queue_wait_s", absl::StrCat(f.max_queue_wait_s),
       f.max_queue_wait_s >= 0 && f.max_queue_wait_s <= 86400, "between 0 and 86400"},
      {"malloc_arena_max", absl::StrCat(f.malloc_arena_max),
       f.malloc_arena_max >= 0 && f.malloc_arena_max <= 1024, "between 0 and 1024"},
      {"malloc_trim_interval_s", absl::StrCat(f.trim_interval_s),
       f.trim_interval_s == 0 || (f.trim_interval_s >= 0.1 && f.trim_interval_s <= 86400),
       "0 or between 0.1 and 86400"},
      {"malloc_trim_min_free_mb", absl::StrCat(f.trim_min_free_mb),
       f.trim_min_free_mb >= 0 && f.trim_min_free_mb <= kMaxMb, "between 0 and 2^30"},
  };
  for (const FlagRule& rule : rules) {
    if (!rule.valid) {
      return absl::InvalidArgumentError(
          absl::StrCat("--", rule.name, " must be ", rule.requirement, " (got ", rule.value, ")"));
    }
  }
  return f;
}

// --load_root, if given, and --profile_dir loaded into `catalog` (it must lie inside
// --load_root when both are given).
absl::Status LoadStartProfiles(std::optional<oobleck::ConfinedRoot>* load_root,
                               oobleck::ProfileCatalog* catalog) {
  if (const std::string root = absl::GetFlag(FLAGS_load_root); !root.empty()) {
    absl::StatusOr<oobleck::ConfinedRoot> opened = oobleck::ConfinedRoot::Open(root);
    if (!opened.ok())
      return absl::InvalidArgumentError(absl::StrCat("--load_root: ", opened.status().message()));
    *load_root = *std::move(opened);
  }
  const std::string profile_dir = absl::GetFlag(FLAGS_profile_dir);
  if (profile_dir.empty()) return absl::OkStatus();
  if (load_root->has_value() && !(*load_root)->Resolve(profile_dir, "--profile_dir").ok()) {
    return absl::InvalidArgumentError(absl::StrCat("--profile_dir ", profile_dir,
                                                   " is not inside --load_root ",
                                                   (*load_root)->path().string()));
  }
  const oobleck::server::ProfileTreeReport report =
      oobleck::server::LoadProfileTree(profile_dir, catalog);
  for (const std::string& error : report.errors) std::cerr << "skipped profile: " << error << "\n";
  std::cerr << "loaded " << report.loaded.size() << " profile(s) from " << profile_dir << "\n";
  return absl::OkStatus();
}

// --data_dir's store with its profiles reloaded, or null without --data_dir. After
// --profile_dir: profiles loaded over RPC (possibly replacing those) are newer.
absl::StatusOr<std::unique_ptr<ProfileStore>> OpenProfileStore(oobleck::ProfileCatalog* catalog) {
  const std::string data_dir = absl::GetFlag(FLAGS_data_dir);
  if (data_dir.empty()) return nullptr;
  absl::StatusOr<std::unique_ptr<ProfileStore>> store = ProfileStore::Open(data_dir, catalog);
  if (!store.ok())
    return absl::InvalidArgumentError(absl::StrCat("--data_dir: ", store.status().message()));
  const oobleck::server::ProfileStoreReport report = (*store)->LoadAll();
  for (const std::string& error : report.errors) {
    std::cerr << "skipped stored profile: " << error << "\n";
  }
  std::cerr << "reloaded " << report.loaded.size() << " stored profile(s) from " << data_dir
            << "\n";
  return store;
}

// The metrics endpoint of --metrics_address, or null without it.
absl::StatusOr<std::unique_ptr<ServerMetrics>> StartMetrics(const ServerMetrics::Sources& sources) {
  const std::string address = absl::GetFlag(FLAGS_metrics_address);
  if (address.empty()) return nullptr;
  absl::StatusOr<std::unique_ptr<ServerMetrics>> metrics = ServerMetrics::Start(address, sources);
  if (!metrics.ok()) {
    return absl::Status(metrics.status().code(),
                        absl::StrCat("--metrics_address: ", metrics.status().message()));
  }
  const std::string host = address.substr(0, address.rfind(':'));
  std::cerr << "metrics on http://" << host << ":" << (*metrics)->port() << "/metrics\n";
  return metrics;
}

// Blocks SIGTERM and SIGINT; called before any thread exists so every thread inherits the
// mask and only the sigwait of the stopper sees the signals.
sigset_t BlockStopSignals() {
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  return stop_signals;
}

// Serves until SIGTERM/SIGINT: running searches stop within ~100 ms and answer
// UNAVAILABLE; short calls get 5 s to finish.
void ServeUntilSignal(const sigset_t& stop_signals, grpc::Server* server,
                      oobleck::server::PlannerService* service) {
  std::thread stopper([&stop_signals, server, service] {
    int signal_number = 0;
    sigwait(&stop_signals, &signal_number);
    std::cerr << "signal " << signal_number << ": shutting down (in-flight calls get 5 s)\n";
    service->BeginShutdown();
    server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(5));
  });
  server->Wait();
  stopper.join();
}

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  const absl::StatusOr<NumericFlags> flags = ReadNumericFlags();
  if (!flags.ok()) {
    std::cerr << flags.status().message() << "\n";
    return kExitBadFlags;
  }
  // Before any thread exists: a thread keeps the arena it got first.
  std::cerr << oobleck::server::CapMallocArenas(flags->malloc_arena_max) << "\n";
  absl::StatusOr<oobleck::server::ServerSecurity> security = oobleck::server::ReadServerSecurity(
      absl::GetFlag(FLAGS_tls_cert), absl::GetFlag(FLAGS_tls_key),
      absl::GetFlag(FLAGS_auth_token_file));
  if (!security.ok()) {
    std::cerr << security.status().message() << "\n";
    return kExitBadFlags;
  }
  const sigset_t stop_signals = BlockStopSignals();

  std::optional<oobleck::ConfinedRoot> load_root;
  oobleck::ProfileCatalog catalog(flags->max_profile_mb << 20);
  if (absl::Status loaded = LoadStartProfiles(&load_root, &catalog); !loaded.ok()) {
    std::cerr << loaded.message() << "\n";
    return kExitBadFlags;
  }
  absl::StatusOr<std::unique_ptr<ProfileStore>> store = OpenProfileStore(&catalog);
  if (!store.ok()) {
    std::cerr << store.status().message() << "\n";
    return kExitBadFlags;
  }
  // --etcd_endpoints: several replicas share profiles and templates (server/replication.h).
  absl::StatusOr<std::unique_ptr<oobleck::server::Replication>> replication =
      oobleck::server::Replication::FromFlags(&catalog, *store != nullptr);
  if (!replication.ok()) {
    std::cerr << replication.status().message() << "\n";
    return kExitBadFlags;
  }
  oobleck::TemplateCache cache(flags->cache_mb << 20);
  oobleck::server::SearchGate search_gate(flags->max_concurrent_searches,
                                          absl::Seconds(flags->max_queue_wait_s));
  // Shared by the per-call lines and the progress lines of long searches.
  oobleck::server::RequestLog request_log(absl::GetFlag(FLAGS_log_requests));
  oobleck::server::ServiceOptions options;
  options.profile_store = store->get();
  if (*replication != nullptr) (*replication)->Configure(&options);
  options.request_log = &request_log;
  options.progress_interval = absl::Milliseconds(flags->progress_interval_ms);
  options.inline_profile_cache_bytes = flags->inline_profile_cache_mb << 20;
  options.search_gate = &search_gate;
  options.load_root = load_root.has_value() ? &*load_root : nullptr;
  oobleck::server::PlannerService service(&catalog, &cache, flags->threads, options);

  absl::StatusOr<std::unique_ptr<ServerMetrics>> metrics =
      StartMetrics({&cache, &catalog, &search_gate, &service.inline_profile_cache()});
  if (!metrics.ok()) {
    std::cerr << metrics.status().message() << "\n";
    return kExitCannotServe;
  }
  oobleck::server::ServerOptions server_options;
  server_options.security = *std::move(security);
  if (request_log.log_lines()) server_options.request_log = &request_log;
  server_options.metrics = metrics->get();
  server_options.serving_at_start = *replication == nullptr;
  auto running =
      oobleck::server::StartPlannerServer(absl::GetFlag(FLAGS_address), &service, server_options);
  if (!running.ok()) {
    std::cerr << running.status().message() << "\n";
    return kExitCannotServe;
  }
  std::cout << "listening on " << running->address << std::endl;
  if (*replication != nullptr) (*replication)->Start(running->server.get());
  // Off the request threads: the trim walks every arena.
  std::unique_ptr<oobleck::server::MallocTrimmer> trimmer;
  if (flags->trim_interval_s > 0) {
    trimmer = std::make_unique<oobleck::server::MallocTrimmer>(
        absl::Seconds(flags->trim_interval_s), flags->trim_min_free_mb << 20);
  }
  ServeUntilSignal(stop_signals, running->server.get(), &service);
  replication->reset();  // its thread may still touch the server's health
  std::cerr << "stopped\n";
  return 0;
}
