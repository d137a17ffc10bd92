// Cache budget benchmark (bench/README.md#cache-budget): does the shared template cache stay
// within --cache_mb, and does the server's memory stop growing once it is full, while a
// stream of distinct models arrives?
//
// For each run it starts the real oobleck-planner on 127.0.0.1:0 and, model after model,
// loads a synthetic profile over LoadProfile (Oobleck's three JSON files, different depth
// and content per model, so every fingerprint and cache key differs), plans its templates
// with three PlanTemplates requests (a 3-type cluster under 1f1b and oobleck-sosp23, and an
// 8-GPU homogeneous cluster), then reads GetStats and the server's /proc/<pid>/status.
// Every model's figures are checked (cache bytes <= budget, capacity = budget); a table row
// is printed every --sample_every models.
//
// Loaded profiles are kept (they are the service's data, never evicted), so the server's
// RSS grows with the number of models even when the cache is bounded. The "profiles" run
// loads the same models without planning: its RSS slope is that growth alone, which the
// summary subtracts from each budget's slope. A large budget the models never fill shows
// what the cache would cost unbounded.
#include <grpcpp/grpcpp.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <iostream>
#include <random>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "bench/proto_cluster.h"
#include "bench/server_process.h"
#include "bench/synthetic_profile.h"
#include "oobleck/planner/v1/planner.grpc.pb.h"

ABSL_FLAG(std::string, server_bin, "",
          "the oobleck-planner binary (default: next to this program)");
ABSL_FLAG(std::string, runs, "profiles,8,32,1024",
          "comma-separated runs, each on a fresh server: a --cache_mb budget in MiB, or "
          "\"profiles\" (load the same models, plan nothing: the RSS the profiles take)");
ABSL_FLAG(int, models, 300, "distinct models loaded and planned per run");
ABSL_FLAG(int, min_layers, 16, "fewest layers of a synthetic model");
ABSL_FLAG(int, max_layers, 40, "most layers of a synthetic model");
ABSL_FLAG(int, max_nodes, 7,
          "largest pipeline of the 3-type requests, in nodes (their mixes: every mix of 1 to "
          "this many nodes, up to this many of each type)");
ABSL_FLAG(int, sample_every, 20, "print a table row every this many models");
ABSL_FLAG(int, server_threads, 0, "--threads of the server (planning threads per request)");
ABSL_FLAG(uint64_t, seed, 1, "seed of the synthetic models (model i uses seed + i)");

namespace pb = ::oobleck::planner::v1;
using oobleck::bench::ProcStatusKiB;

namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
constexpr double kMiB = 1024.0 * 1024.0;
constexpr char kMeasuredGpu[] = "a100";

// After one model: the server's cache counters and memory.
struct Sample {
  int models = 0;
  pb::GetStatsResponse stats;
  int64_t rss_kib = 0, hwm_kib = 0;
};

struct RunResult {
  std::string name;
  int64_t budget_bytes = 0;   // 0: the profiles-only run
  int64_t rss_start_kib = 0;  // after start, before any call
  std::vector<Sample> samples;
  int64_t max_cache_bytes = 0;
  int violations = 0;  // models after which cache_bytes > budget or capacity != budget
  double seconds = 0;
};

// The 3-type cluster: the measured GPU and two derived from it, 2 GPUs per node,
// `max_nodes` nodes of each type.
pb::Cluster MixedCluster(int max_nodes) {
  return oobleck::bench::ProtoCluster({{"v100", 16, 0.4}, {"a100", 24, 1}, {"h100", 24, 1.7}},
                                      kMeasuredGpu, /*gpus_per_node=*/2, max_nodes);
}

// The requests planned for one model: each its own cache keys (cost model, M and cluster
// are part of the key).
std::vector<pb::PlanTemplatesRequest> TemplateRequests(const std::string& model, int max_nodes) {
  std::vector<pb::PlanTemplatesRequest> requests;
  pb::PlanTemplatesRequest mixed;
  mixed.set_model(model);
  mixed.set_microbatch_size(1);
  *mixed.mutable_cluster() = MixedCluster(max_nodes);
  mixed.set_max_nodes(max_nodes);
  mixed.set_cost_model("1f1b");
  mixed.set_microbatches(16);
  requests.push_back(mixed);
  mixed.set_cost_model("oobleck-sosp23");
  mixed.clear_microbatches();
  requests.push_back(mixed);

  pb::PlanTemplatesRequest homogeneous;
  homogeneous.set_model(model);
  homogeneous.set_microbatch_size(1);
  homogeneous.set_cost_model("1f1b");
  homogeneous.set_microbatches(32);
  pb::Cluster* cluster = homogeneous.mutable_cluster();
  cluster->set_inter_node_bytes_per_s(25e9);
  pb::NodeType* type = cluster->add_node_types();
  type->set_name("a100x8");
  type->set_gpu_type(kMeasuredGpu);
  type->set_gpus_per_node(8);
  type->set_gpu_memory_bytes(40 * kGiB);
  type->set_intra_node_bytes_per_s(300e9);
  type->set_count(8);
  requests.push_back(homogeneous);
  return requests;
}

std::string ModelName(int i) { return absl::StrFormat("synthetic-%04d", i); }

int ModelLayers(int i) {
  std::mt19937_64 random(absl::GetFlag(FLAGS_seed) + i);
  return std::uniform_int_distribution<int>(absl::GetFlag(FLAGS_min_layers),
                                            absl::GetFlag(FLAGS_max_layers))(random);
}

// Least-squares slope of RSS (KiB) per model over the second half of the samples.
double SecondHalfSlopeKiB(const std::vector<Sample>& samples) {
  const size_t begin = samples.size() / 2;
  const size_t n = samples.size() - begin;
  if (n < 2) return 0;
  double mean_x = 0, mean_y = 0;
  for (size_t i = begin; i < samples.size(); ++i) {
    mean_x += samples[i].models;
    mean_y += samples[i].rss_kib;
  }
  mean_x /= n;
  mean_y /= n;
  double sxy = 0, sxx = 0;
  for (size_t i = begin; i < samples.size(); ++i) {
    sxy += (samples[i].models - mean_x) * (samples[i].rss_kib - mean_y);
    sxx += (samples[i].models - mean_x) * (samples[i].models - mean_x);
  }
  return sxx > 0 ? sxy / sxx : 0;
}

void PrintRow(const RunResult& run, const Sample& s) {
  const pb::GetStatsResponse& st = s.stats;
  std::printf("%7d %8d %8lld %10.2f %6.1f%% %9lld %9lld %9lld %8.1f %8.1f\n", s.models,
              st.profiles_loaded(), static_cast<long long>(st.cache_entries()),
              st.cache_bytes() / kMiB,
              run.budget_bytes > 0 ? 100.0 * st.cache_bytes() / run.budget_bytes : 0.0,
              static_cast<long long>(st.cache_evictions()), static_cast<long long>(st.cache_hits()),
              static_cast<long long>(st.cache_misses()), s.rss_kib / 1024.0, s.hwm_kib / 1024.0);
  std::fflush(stdout);  // rows as they come, also into a file
}

// Loads model i's profile and, with `plan`, plans its templates (filling the cache);
// on an error, `what` names the call.
grpc::Status AddModel(pb::Planner::Stub& stub, int i, bool plan, std::string* what) {
  const std::string model = ModelName(i);
  const oobleck::bench::OobleckFiles files =
      oobleck::bench::SyntheticOobleckProfile(ModelLayers(i), absl::GetFlag(FLAGS_seed) + i);
  pb::LoadProfileRequest load;
  load.set_model(model);
  load.set_gpu_type(kMeasuredGpu);
  load.set_microbatch_size(1);
  load.mutable_files()->set_mb_json(files.mb_json);
  load.mutable_files()->set_allreduce_in_node_json(files.allreduce_in_node_json);
  load.mutable_files()->set_allreduce_across_nodes_json(files.allreduce_across_nodes_json);
  {
    grpc::ClientContext context;
    pb::LoadProfileResponse response;
    *what = absl::StrCat("LoadProfile ", model);
    if (grpc::Status s = stub.LoadProfile(&context, load, &response); !s.ok()) return s;
  }
  if (!plan) return grpc::Status::OK;
  *what = absl::StrCat("PlanTemplates ", model);
  for (const pb::PlanTemplatesRequest& request :
       TemplateRequests(model, absl::GetFlag(FLAGS_max_nodes))) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::minutes(10));
    pb::PlanTemplatesResponse response;
    if (grpc::Status s = stub.PlanTemplates(&context, request, &response); !s.ok()) return s;
  }
  return grpc::Status::OK;
}

// One run on a fresh server. `budget_mb` 0: profiles only. False on an RPC error or a
// server that died (the message is printed).
bool Run(const std::string& binary, const std::string& name, int64_t budget_mb, RunResult* run) {
  run->name = name;
  run->budget_bytes = budget_mb << 20;
  oobleck::bench::ServerProcess server;
  std::vector<std::string> args = {"--address=127.0.0.1:0", "--log_requests=false",
                                   absl::StrCat("--cache_mb=", budget_mb > 0 ? budget_mb : 1)};
  if (absl::GetFlag(FLAGS_server_threads) > 0) {
    args.push_back(absl::StrCat("--threads=", absl::GetFlag(FLAGS_server_threads)));
  }
  if (!server.Start(binary, args)) {
    std::cerr << "cache_budget_bench: " << server.error() << "\n";
    return false;
  }
  auto channel = grpc::CreateChannel(server.address(), grpc::InsecureChannelCredentials());
  if (!channel->WaitForConnected(std::chrono::system_clock::now() + std::chrono::seconds(20))) {
    std::cerr << "cache_budget_bench: server at " << server.address() << " is not reachable\n";
    return false;
  }
  auto stub = pb::Planner::NewStub(channel);
  run->rss_start_kib = ProcStatusKiB(server.pid(), "VmRSS");
  std::printf("\n== %s: server pid %d, RSS at start %.1f MiB\n", name.c_str(), server.pid(),
              run->rss_start_kib / 1024.0);
  std::printf("%7s %8s %8s %10s %7s %9s %9s %9s %8s %8s\n", "models", "profiles", "entries",
              "cache_MiB", "budget", "evictions", "hits", "misses", "RSS_MiB", "HWM_MiB");

  auto fail = [&](const std::string& what, const grpc::Status& status) {
    std::cerr << "cache_budget_bench: " << name << ": " << what << ": " << status.error_code()
              << " " << status.error_message()
              << (server.Alive() ? "" : " (server " + server.exit_description() + ")") << "\n";
    return false;
  };
  const int models = absl::GetFlag(FLAGS_models);
  const int sample_every = std::max(1, absl::GetFlag(FLAGS_sample_every));
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < models; ++i) {
    std::string what;
    if (const grpc::Status s = AddModel(*stub, i, budget_mb > 0, &what); !s.ok()) {
      return fail(what, s);
    }
    Sample sample;
    sample.models = i + 1;
    {
      grpc::ClientContext context;
      const grpc::Status s = stub->GetStats(&context, pb::GetStatsRequest(), &sample.stats);
      if (!s.ok()) return fail("GetStats", s);
    }
    sample.rss_kib = ProcStatusKiB(server.pid(), "VmRSS");
    sample.hwm_kib = ProcStatusKiB(server.pid(), "VmHWM");
    run->max_cache_bytes = std::max<int64_t>(run->max_cache_bytes, sample.stats.cache_bytes());
    if (budget_mb > 0 && (sample.stats.cache_bytes() > run->budget_bytes ||
                          sample.stats.cache_capacity_bytes() != run->budget_bytes)) {
      ++run->violations;
      std::printf("BUDGET VIOLATED after model %d: cache_bytes %lld, capacity %lld, budget %lld\n",
                  i + 1, static_cast<long long>(sample.stats.cache_bytes()),
                  static_cast<long long>(sample.stats.cache_capacity_bytes()),
                  static_cast<long long>(run->budget_bytes));
    }
    run->samples.push_back(sample);
    if ((i + 1) % sample_every == 0 || i + 1 == models) PrintRow(*run, sample);
  }
  run->seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return true;
}

// The runs of --runs (name, budget MiB; 0: profiles only), after checking the flags;
// false (the problem printed) when a flag is unusable.
bool ParseRuns(std::vector<std::pair<std::string, int64_t>>* out) {
  std::vector<std::pair<std::string, int64_t>>& runs = *out;
  if (absl::GetFlag(FLAGS_models) < 2) {
    std::cerr << "--models must be >= 2 (got " << absl::GetFlag(FLAGS_models) << ")\n";
    return false;
  }
  if (absl::GetFlag(FLAGS_min_layers) < 1 ||
      absl::GetFlag(FLAGS_max_layers) < absl::GetFlag(FLAGS_min_layers)) {
    std::cerr << "--min_layers must be >= 1 and <= --max_layers (got "
              << absl::GetFlag(FLAGS_min_layers) << ", " << absl::GetFlag(FLAGS_max_layers)
              << ")\n";
    return false;
  }
  if (absl::GetFlag(FLAGS_max_nodes) < 1) {
    std::cerr << "--max_nodes must be >= 1 (got " << absl::GetFlag(FLAGS_max_nodes) << ")\n";
    return false;
  }
  for (absl::string_view run : absl::StrSplit(absl::GetFlag(FLAGS_runs), ',', absl::SkipEmpty())) {
    int64_t mb = 0;
    if (run == "profiles") {
      runs.emplace_back("profiles only", 0);
    } else if (absl::SimpleAtoi(run, &mb) && mb >= 1) {
      runs.emplace_back(absl::StrCat("cache_mb=", mb), mb);
    } else {
      std::cerr << "--runs: \"" << run << "\" is neither \"profiles\" nor a budget >= 1 MiB\n";
      return false;
    }
  }
  if (runs.empty()) {
    std::cerr << "--runs is empty\n";
    return false;
  }
  return true;
}

// The summary table; false if some run's cache went above its budget.
bool PrintSummary(const std::vector<RunResult>& results, bool have_profiles_run,
                  double profiles_slope_kib) {
  std::printf(
      "\nsummary (MiB; slope: least-squares RSS growth per model over the second half of the "
      "models, KiB)\n");
  std::printf("%-14s %7s %10s %9s %9s %9s %9s %9s %8s %12s %8s\n", "run", "budget", "max_cache",
              "entries", "evictions", "RSS_start", "RSS_end", "HWM_end", "slope", "-profiles",
              "seconds");
  bool ok = true;
  for (const RunResult& run : results) {
    const Sample& last = run.samples.back();
    const double slope = SecondHalfSlopeKiB(run.samples);
    std::printf(
        "%-14s %7s %10.2f %9lld %9lld %9.1f %9.1f %9.1f %8.1f %12s %8.1f\n", run.name.c_str(),
        run.budget_bytes > 0 ? absl::StrFormat("%.0f", run.budget_bytes / kMiB).c_str() : "-",
        run.max_cache_bytes / kMiB, static_cast<long long>(last.stats.cache_entries()),
        static_cast<long long>(last.stats.cache_evictions()), run.rss_start_kib / 1024.0,
        last.rss_kib / 1024.0, last.hwm_kib / 1024.0, slope,
        have_profiles_run && run.budget_bytes > 0
            ? absl::StrFormat("%.1f", slope - profiles_slope_kib).c_str()
            : "-",
        run.seconds);
    if (run.violations > 0) {
      ok = false;
      std::printf("FAIL %s: cache bytes above the budget after %d of %d models\n", run.name.c_str(),
                  run.violations, static_cast<int>(run.samples.size()));
    }
  }
  return ok;
}

// Where the budget bound: evictions had started by the middle of the run, so over the
// second half the cache is full and only the profiles should add memory.
void PrintBudgetNotes(const std::vector<RunResult>& results, bool have_profiles_run,
                      double profiles_slope_kib) {
  for (const RunResult& run : results) {
    if (run.budget_bytes == 0) continue;
    const Sample& middle = run.samples[run.samples.size() / 2];
    const Sample& last = run.samples.back();
    const double per_model_kib = (last.stats.cache_bytes() - middle.stats.cache_bytes()) / 1024.0 /
                                 (last.models - middle.models);
    if (middle.stats.cache_evictions() > 0) {
      std::printf(
          "%s: full from before the middle (%lld evictions by model %d); over the second half "
          "cache bytes grew %.1f KiB/model and RSS %.1f KiB/model%s\n",
          run.name.c_str(), static_cast<long long>(middle.stats.cache_evictions()), middle.models,
          per_model_kib, SecondHalfSlopeKiB(run.samples),
          have_profiles_run
              ? absl::StrFormat(" (profiles alone: %.1f KiB/model)", profiles_slope_kib).c_str()
              : "");
    } else {
      std::printf(
          "%s: not full by the middle (%.1f of %.0f MiB at model %d): the cache grew %.1f "
          "KiB/model over the second half (what an unbounded cache costs)",
          run.name.c_str(), middle.stats.cache_bytes() / kMiB, run.budget_bytes / kMiB,
          middle.models, per_model_kib);
      // How honest the cache's byte estimate is: the RSS it really adds per counted byte.
      if (have_profiles_run && per_model_kib > 0) {
        std::printf("; RSS added per counted cache byte: %.2f",
                    (SecondHalfSlopeKiB(run.samples) - profiles_slope_kib) / per_model_kib);
      }
      std::printf("\n");
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  const std::string binary = oobleck::bench::ServerBinary(absl::GetFlag(FLAGS_server_bin));
  std::vector<std::pair<std::string, int64_t>> runs;  // name, budget MiB (0: profiles only)
  if (!ParseRuns(&runs)) return 2;
  std::printf(
      "cache_budget_bench: %d synthetic models of %d-%d layers per run; each planned with 3 "
      "PlanTemplates requests (3 types up to %d nodes x {1f1b M=16, oobleck-sosp23}; 8 nodes "
      "of 8 GPUs, 1f1b M=32)\n",
      absl::GetFlag(FLAGS_models), absl::GetFlag(FLAGS_min_layers), absl::GetFlag(FLAGS_max_layers),
      absl::GetFlag(FLAGS_max_nodes));

  std::vector<RunResult> results;
  for (const auto& [name, mb] : runs) {
    RunResult run;
    if (!Run(binary, name, mb, &run)) return 1;
    results.push_back(std::move(run));
  }

  // The profiles-only slope is what stored profiles cost per model; the rest is the cache.
  double profiles_slope_kib = 0;
  bool have_profiles_run = false;
  for (const RunResult& run : results) {
    if (run.budget_bytes == 0) {
      profiles_slope_kib = SecondHalfSlopeKiB(run.samples);
      have_profiles_run = true;
    }
  }
  const bool ok = PrintSummary(results, have_profiles_run, profiles_slope_kib);
  PrintBudgetNotes(results, have_profiles_run, profiles_slope_kib);
  std::printf("%s: cache bytes %s the budget after every model of every run\n",
              ok ? "PASS" : "FAIL", ok ? "within" : "NOT within");
  return ok ? 0 : 1;
}
