// Benchmarks of core's Plan and Replan (bench/README.md#plan): a 128-node, 512-GPU cluster
// of three GPU types, cold (template search included) and warm (templates cached), a sweep
// of global batch sizes, and a warm Replan after one node fails. Reads examples/.
#include <benchmark/benchmark.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "bench/bench_problems.h"
#include "core/plan/cluster_plan.h"
#include "core/plan/cluster_planner.h"
#include "core/plan/node_set.h"
#include "core/plan/objective.h"
#include "core/plan/plan_options.h"
#include "core/plan/plan_result.h"
#include "core/replan.h"

namespace oobleck::bench {
namespace {

// GPT-2 XL (ring all-reduce estimates, so 4-GPU stages are possible) on V100, RTX 3090 and
// RTX 4090 nodes of 4 GPUs; layer times derived from the measured RTX 4090 by the ditto
// files' relative speeds (1.0, 1.8, 2.94).
absl::StatusOr<PlanningProblem> ThreeTypeProblem(int microbatches) {
  absl::StatusOr<std::shared_ptr<const ModelProfile>> base =
      LoadGpt2XlProfile(kGpt2XlRingProfile, "rtx4090");
  if (!base.ok()) return base.status();
  PlanningProblem p;
  p.node_types = {{"v100", "v100", 4, 16 * kGiB, 12e9},
                  {"rtx3090", "rtx3090", 4, 24 * kGiB, kPcie4BytesPerS},
                  {"rtx4090", "rtx4090", 4, 24 * kGiB, kPcie4BytesPerS}};
  p.profiles = {std::make_shared<const ModelProfile>(DeriveProfile(**base, "v100", 1 / 2.94)),
                std::make_shared<const ModelProfile>(DeriveProfile(**base, "rtx3090", 1.8 / 2.94)),
                *base};
  p.derived_from = {"rtx4090", "rtx4090", ""};
  p.inter_node_bytes_per_s = kNetworkBytesPerS;
  p.cost_model = CostModelKind::kOneFOneB;
  p.microbatches = microbatches;
  p.missing_allreduce = MissingAllreduce::kRing;
  return p;
}

std::vector<ClusterNode> Nodes(const NodeMix& counts) {
  const char* names[] = {"v100", "rtx3090", "rtx4090"};
  std::vector<ClusterNode> nodes;
  for (int t = 0; t < static_cast<int>(counts.size()); ++t) {
    for (int k = 0; k < counts[t]; ++k) nodes.push_back({absl::StrCat(names[t], "-", k), t});
  }
  return nodes;
}

constexpr int kThreads = 2;  // the goal is stated for 2 cores
const NodeMix k128Nodes = {43, 43, 42};

void ReportPlan(benchmark::State& state, const PlanResult& result) {
  const BatchSizePlan& first = result.sizes[0];
  state.counters["mixes"] = result.mixes_planned;
  state.counters["max_nodes"] = result.limits.max_nodes;
  if (!first.status.ok()) {
    state.SkipWithError(std::string(first.status.message()).c_str());
    return;
  }
  state.counters["pipelines"] = static_cast<double>(first.plan.pipelines.size());
  state.counters["iteration_ms"] = first.plan.iteration_time_ms;
  state.counters["speedup_vs_dp"] = first.speedup;
}

// args: global batch, max nodes per pipeline (0 = default), cold (1) or warm (0), fault
// tolerance f (at least f + 1 pipelines).
void BM_Plan128Nodes(benchmark::State& state) {
  absl::StatusOr<PlanningProblem> problem = ThreeTypeProblem(16);
  if (!problem.ok()) {
    state.SkipWithError(std::string(problem.status().message()).c_str());
    return;
  }
  absl::StatusOr<CostModel> model = CostModel::Create(*problem);
  if (!model.ok()) {
    state.SkipWithError(std::string(model.status().message()).c_str());
    return;
  }
  const std::vector<ClusterNode> nodes = Nodes(k128Nodes);
  PlanOptions options;
  options.limits.max_nodes = static_cast<int>(state.range(1));
  options.fault_tolerance = static_cast<int>(state.range(3));
  const bool cold = state.range(2) == 1;
  auto cache = std::make_unique<TemplateCache>(int64_t{256} << 20);
  auto templates = std::make_unique<TemplatePlanner>(cache.get(), kThreads);
  if (!cold) {
    ClusterPlanner warmup(templates.get(), kThreads);
    (void)warmup.Plan(*model, nodes, {static_cast<int>(state.range(0))}, options);
  }
  absl::StatusOr<PlanResult> result;
  for (auto _ : state) {
    if (cold) {
      state.PauseTiming();
      cache = std::make_unique<TemplateCache>(int64_t{256} << 20);
      templates = std::make_unique<TemplatePlanner>(cache.get(), kThreads);
      state.ResumeTiming();
    }
    ClusterPlanner planner(templates.get(), kThreads);
    result = planner.Plan(*model, nodes, {static_cast<int>(state.range(0))}, options);
    if (!result.ok()) {
      state.SkipWithError(std::string(result.status().message()).c_str());
      return;
    }
  }
  ReportPlan(state, *result);
}

// Eight global batch sizes planned in parallel (warm).
void BM_PlanSweep128Nodes(benchmark::State& state) {
  absl::StatusOr<PlanningProblem> problem = ThreeTypeProblem(16);
  absl::StatusOr<CostModel> model = problem.ok() ? CostModel::Create(*problem) : problem.status();
  if (!model.ok()) {
    state.SkipWithError(std::string(model.status().message()).c_str());
    return;
  }
  const std::vector<ClusterNode> nodes = Nodes(k128Nodes);
  const std::vector<int> sizes = {128, 256, 384, 512, 768, 1024, 1536, 2048};
  TemplateCache cache(int64_t{256} << 20);
  TemplatePlanner templates(&cache, kThreads);
  ClusterPlanner planner(&templates, kThreads);
  (void)planner.Plan(*model, nodes, {sizes[0]}, {});
  absl::StatusOr<PlanResult> result;
  for (auto _ : state) {
    result = planner.Plan(*model, nodes, sizes, {});
    if (!result.ok()) {
      state.SkipWithError(std::string(result.status().message()).c_str());
      return;
    }
  }
  ReportPlan(state, *result);
  state.counters["sizes"] = static_cast<double>(sizes.size());
}

// Warm Replan after one node fails; args: nodes per type.
void BM_ReplanOneFailure(benchmark::State& state) {
  absl::StatusOr<PlanningProblem> problem = ThreeTypeProblem(16);
  absl::StatusOr<CostModel> model = problem.ok() ? CostModel::Create(*problem) : problem.status();
  if (!model.ok()) {
    state.SkipWithError(std::string(model.status().message()).c_str());
    return;
  }
  const int per_type = static_cast<int>(state.range(0));
  const std::vector<ClusterNode> nodes = Nodes({per_type, per_type, per_type});
  const int global_batch = 4 * per_type * 3;
  TemplateCache cache(int64_t{256} << 20);
  TemplatePlanner templates(&cache, kThreads);
  ClusterPlanner planner(&templates, kThreads);
  absl::StatusOr<PlanResult> planned = planner.Plan(*model, nodes, {global_batch}, {});
  if (!planned.ok() || !planned->sizes[0].status.ok()) {
    state.SkipWithError("plan failed");
    return;
  }
  const ClusterPlan& plan = planned->sizes[0].plan;
  ClusterEvent event;
  event.failed_node_ids = {plan.pipelines.front().node_ids.front()};
  absl::StatusOr<ReplanResult> r;
  for (auto _ : state) {
    r = Replan(planner, *model, nodes, plan, event, {});
    if (!r.ok()) {
      state.SkipWithError(std::string(r.status().message()).c_str());
      return;
    }
  }
  state.counters["nodes"] = static_cast<double>(nodes.size());
  state.counters["iteration_ms"] = r->plan.iteration_time_ms;
  state.counters["copy_GB"] = r->copy_bytes / 1e9;
}

// ---- fleet scale (bench/README.md#plan-at-fleet-scale) ----------------------------------

// Up to 8 node types of GPT-2 XL (ring all-reduce estimates): layer times derived from the
// measured RTX 4090 by relative speed, 16 to 80 GiB per GPU.
struct FleetType {
  const char* name;
  double relative_speed;  // to the RTX 4090
  int gpus;
  double memory_gib;
};
// (4 GPUs per node: the cold template search over mixes of 8-GPU nodes of many types is far
// slower and larger, see bench/README.md#plan-at-fleet-scale.)
constexpr FleetType kFleetTypes[] = {
    {"v100", 1 / 2.94, 4, 16}, {"rtx3090", 1.8 / 2.94, 4, 24}, {"rtx4090", 1, 4, 24},
    {"a100", 1.25, 4, 40},     {"a100-80", 1.3, 4, 80},        {"h100", 2.5, 4, 80},
    {"l40s", 1.1, 4, 48},      {"a10", 0.45, 4, 24},
};

absl::StatusOr<PlanningProblem> FleetProblem(int types, int microbatches) {
  absl::StatusOr<std::shared_ptr<const ModelProfile>> base =
      LoadGpt2XlProfile(kGpt2XlRingProfile, "rtx4090");
  if (!base.ok()) return base.status();
  PlanningProblem p;
  for (int t = 0; t < types; ++t) {
    const FleetType& f = kFleetTypes[t];
    p.node_types.push_back({f.name, f.name, f.gpus, f.memory_gib * kGiB, kPcie4BytesPerS});
    p.profiles.push_back(
        std::make_shared<const ModelProfile>(DeriveProfile(**base, f.name, f.relative_speed)));
    p.derived_from.push_back("rtx4090");
  }
  p.inter_node_bytes_per_s = kNetworkBytesPerS;
  p.cost_model = CostModelKind::kOneFOneB;
  p.microbatches = microbatches;
  p.missing_allreduce = MissingAllreduce::kRing;
  return p;
}

// `nodes` nodes spread evenly over the first `types` fleet types.
std::vector<ClusterNode> FleetNodes(int nodes, int types) {
  std::vector<ClusterNode> out;
  for (int k = 0; k < nodes; ++k) {
    const int t = k % types;
    out.push_back({absl::StrCat(kFleetTypes[t].name, "-", k / types), t});
  }
  return out;
}

double PeakRssMiB() {
  struct rusage usage;
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_maxrss / 1024.0;  // kilobytes on Linux
}

// p50 and p99 of per-iteration times, as counters.
void ReportPercentiles(benchmark::State& state, std::vector<double> ms) {
  if (ms.empty()) return;
  std::sort(ms.begin(), ms.end());
  auto at = [&](double q) {
    return ms[std::min(ms.size() - 1, static_cast<size_t>(q * ms.size()))];
  };
  state.counters["p50_ms"] = at(0.5);
  state.counters["p99_ms"] = at(0.99);
}

struct Fleet {
  std::unique_ptr<CostModel> model;
  std::unique_ptr<TemplateCache> cache;
  std::unique_ptr<TemplatePlanner> templates;
  std::unique_ptr<ClusterPlanner> planner;
  std::vector<ClusterNode> nodes;
};

absl::StatusOr<Fleet> MakeFleet(int nodes, int types) {
  absl::StatusOr<PlanningProblem> problem = FleetProblem(types, 16);
  if (!problem.ok()) return problem.status();
  absl::StatusOr<CostModel> model = CostModel::Create(*problem);
  if (!model.ok()) return model.status();
  Fleet f;
  f.model = std::make_unique<CostModel>(*std::move(model));
  f.cache = std::make_unique<TemplateCache>(int64_t{512} << 20);
  f.templates = std::make_unique<TemplatePlanner>(f.cache.get(), kThreads);
  f.planner = std::make_unique<ClusterPlanner>(f.templates.get(), kThreads);
  f.nodes = FleetNodes(nodes, types);
  return f;
}

constexpr int kFleetBatch = 1024;

// Plans the fleet of `nodes` x `types` with `options`: cold (template search included, a
// fresh cache each iteration) or warm (templates cached by a first call with another
// global batch).
void PlanFleetCase(benchmark::State& state, int nodes, int types, const PlanOptions& options,
                   bool cold) {
  absl::StatusOr<Fleet> fleet = MakeFleet(nodes, types);
  if (!fleet.ok()) {
    state.SkipWithError(std::string(fleet.status().message()).c_str());
    return;
  }
  if (!cold) {
    absl::StatusOr<PlanResult> first =
        fleet->planner->Plan(*fleet->model, fleet->nodes, {kFleetBatch - 1}, options);
    if (!first.ok()) {
      state.SkipWithError(std::string(first.status().message()).c_str());
      return;
    }
  }
  absl::StatusOr<PlanResult> result;
  for (auto _ : state) {
    if (cold) {
      state.PauseTiming();
      fleet->cache = std::make_unique<TemplateCache>(int64_t{512} << 20);
      fleet->templates = std::make_unique<TemplatePlanner>(fleet->cache.get(), kThreads);
      fleet->planner = std::make_unique<ClusterPlanner>(fleet->templates.get(), kThreads);
      state.ResumeTiming();
    }
    result = fleet->planner->Plan(*fleet->model, fleet->nodes, {kFleetBatch}, options);
    if (!result.ok()) {
      state.SkipWithError(std::string(result.status().message()).c_str());
      return;
    }
  }
  ReportPlan(state, *result);
  state.counters["gap"] = result->sizes[0].optimality_gap;
  state.counters["peak_rss_MiB"] = PeakRssMiB();
}

// args: nodes, types, cold (1) or warm (0); pipelines of up to the default 4 nodes.
void BM_PlanFleet(benchmark::State& state) {
  PlanFleetCase(state, static_cast<int>(state.range(0)), static_cast<int>(state.range(1)), {},
                state.range(2) == 1);
}

// Pipelines of up to `max_nodes` nodes (issue 10: up to 8, 12 869 mixes at 8 types); args:
// nodes, types, max_nodes, cold (1: minutes at 8 types) or warm (0).
void BM_PlanFleetLongPipelines(benchmark::State& state) {
  PlanOptions options;
  options.limits.max_nodes = static_cast<int>(state.range(2));
  PlanFleetCase(state, static_cast<int>(state.range(0)), static_cast<int>(state.range(1)), options,
                state.range(3) == 1);
}

// Warm Replan of the fleet's plan; args: nodes, types, failures (0: one node joins a
// cluster of nodes - 1).
void BM_ReplanFleet(benchmark::State& state) {
  const int types = static_cast<int>(state.range(1));
  const int failures = static_cast<int>(state.range(2));
  // A join starts one node short, so that the cluster after it stays within the limit.
  const int nodes = static_cast<int>(state.range(0)) - (failures == 0 ? 1 : 0);
  absl::StatusOr<Fleet> fleet = MakeFleet(nodes, types);
  if (!fleet.ok()) {
    state.SkipWithError(std::string(fleet.status().message()).c_str());
    return;
  }
  absl::StatusOr<PlanResult> planned =
      fleet->planner->Plan(*fleet->model, fleet->nodes, {kFleetBatch}, {});
  if (!planned.ok() || !planned->sizes[0].status.ok()) {
    state.SkipWithError("plan failed");
    return;
  }
  const ClusterPlan& plan = planned->sizes[0].plan;
  ClusterEvent event;
  for (int i = 0; i < failures; ++i) {
    const PlannedPipeline& p = plan.pipelines[(i * 7) % plan.pipelines.size()];
    event.failed_node_ids.push_back(p.node_ids[i % p.node_ids.size()]);
  }
  std::sort(event.failed_node_ids.begin(), event.failed_node_ids.end());
  event.failed_node_ids.erase(
      std::unique(event.failed_node_ids.begin(), event.failed_node_ids.end()),
      event.failed_node_ids.end());
  if (failures == 0) event.joined_nodes = {{"joined-0", types - 1}};
  absl::StatusOr<ReplanResult> r;
  std::vector<double> ms;
  for (auto _ : state) {
    const auto start = std::chrono::steady_clock::now();
    r = Replan(*fleet->planner, *fleet->model, fleet->nodes, plan, event, {});
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
                     .count());
    if (!r.ok()) {
      state.SkipWithError(std::string(r.status().message()).c_str());
      return;
    }
  }
  ReportPercentiles(state, std::move(ms));
  state.counters["iteration_ms"] = r->plan.iteration_time_ms;
  state.counters["strategy"] = static_cast<double>(r->strategy);
  state.counters["peak_rss_MiB"] = PeakRssMiB();
}

// Illustrative prices per node (4 GPUs) and hour, in kFleetTypes order.
constexpr double kFleetNodePricePerHour[] = {3.06, 1.60, 2.80, 8.20, 10.30, 19.60, 7.00, 3.00};

// Warm Plan with prices; args: nodes, types, objective (0: time, 1: cost, 2: time within a
// budget of half the fleet's price).
void BM_PlanFleetPriced(benchmark::State& state) {
  const int types = static_cast<int>(state.range(1));
  absl::StatusOr<Fleet> fleet = MakeFleet(static_cast<int>(state.range(0)), types);
  if (!fleet.ok()) {
    state.SkipWithError(std::string(fleet.status().message()).c_str());
    return;
  }
  PlanOptions options;
  options.price_per_hour.assign(kFleetNodePricePerHour, kFleetNodePricePerHour + types);
  double all = 0;
  for (const ClusterNode& n : fleet->nodes) all += options.price_per_hour[n.type];
  if (state.range(2) == 1) options.objective = PlanObjective::kCost;
  if (state.range(2) == 2) options.budget_per_hour = all / 2;
  (void)fleet->planner->Plan(*fleet->model, fleet->nodes, {kFleetBatch - 1}, options);
  absl::StatusOr<PlanResult> result;
  for (auto _ : state) {
    result = fleet->planner->Plan(*fleet->model, fleet->nodes, {kFleetBatch}, options);
    if (!result.ok()) {
      state.SkipWithError(std::string(result.status().message()).c_str());
      return;
    }
  }
  ReportPlan(state, *result);
  const ClusterPlan& plan = result->sizes[0].plan;
  state.counters["gap"] = result->sizes[0].optimality_gap;
  state.counters["price_per_hour"] = plan.price_per_hour;
  state.counters["price_per_1k_iter"] = plan.price_per_hour * plan.iteration_time_ms / 3.6e3;
}

// CPU seconds of the whole process (every thread) so far.
double ProcessCpuSeconds() {
  struct rusage usage;
  getrusage(RUSAGE_SELF, &usage);
  auto seconds = [](const timeval& t) { return t.tv_sec + t.tv_usec / 1e6; };
  return seconds(usage.ru_utime) + seconds(usage.ru_stime);
}

// Issue 28's fleet: the 80-layer LLM shape (bench_problems.h) on 516 nodes of its 6 GPU
// types (86 each; 8 GPUs per node, 24-80 GiB, some mixes memory-bound), pipelines of up to 8
// nodes (3002 mixes), global batch 4096, 1f1b M = 16; cold (empty template cache) or warm.
// Reports the process's CPU seconds per Plan (both threads) beside the wall time.
void BM_PlanLlm80Fleet(benchmark::State& state) {
  constexpr int kTypes = 6, kPerType = 86, kMaxNodes = 8, kBatch = 4096;
  absl::StatusOr<SearchCase> c = Llm80Case(kTypes, {CostModelKind::kOneFOneB, 16}, kMaxNodes);
  absl::StatusOr<CostModel> model = c.ok() ? CostModel::Create(c->problem) : c.status();
  if (!model.ok()) {
    state.SkipWithError(std::string(model.status().message()).c_str());
    return;
  }
  std::vector<ClusterNode> nodes;
  for (int t = 0; t < kTypes; ++t) {
    for (int k = 0; k < kPerType; ++k) {
      nodes.push_back({absl::StrCat(model->node_type(t).name, "-", k), t});
    }
  }
  PlanOptions options;
  options.limits.max_nodes = kMaxNodes;
  const bool cold = state.range(0) == 1;
  auto cache = std::make_unique<TemplateCache>(int64_t{1} << 30);
  auto templates = std::make_unique<TemplatePlanner>(cache.get(), kThreads);
  if (!cold) {
    ClusterPlanner warmup(templates.get(), kThreads);
    (void)warmup.Plan(*model, nodes, {kBatch - 1}, options);
  }
  absl::StatusOr<PlanResult> result;
  double cpu_s = 0;
  for (auto _ : state) {
    if (cold) {
      state.PauseTiming();
      cache = std::make_unique<TemplateCache>(int64_t{1} << 30);
      templates = std::make_unique<TemplatePlanner>(cache.get(), kThreads);
      state.ResumeTiming();
    }
    const double start = ProcessCpuSeconds();
    ClusterPlanner planner(templates.get(), kThreads);
    result = planner.Plan(*model, nodes, {kBatch}, options);
    cpu_s += ProcessCpuSeconds() - start;
    if (!result.ok()) {
      state.SkipWithError(std::string(result.status().message()).c_str());
      return;
    }
  }
  ReportPlan(state, *result);
  state.counters["gap"] = result->sizes[0].optimality_gap;
  state.counters["cpu_s"] = cpu_s / static_cast<double>(state.iterations());
  state.counters["peak_rss_MiB"] = PeakRssMiB();
}

void FleetSizes(benchmark::internal::Benchmark* b, bool with_cold) {
  for (int nodes : {16, 64, 256, 1024, 4096}) {
    for (int types : {2, 4, 6, 8}) {
      b->Args({nodes, types, 0});
      if (with_cold) b->Args({nodes, types, 1});
    }
  }
}

BENCHMARK(BM_PlanFleet)
    ->ArgNames({"nodes", "types", "cold"})
    ->Apply([](benchmark::internal::Benchmark* b) { FleetSizes(b, true); })
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
// Fixed iterations: every run of a case repeats its setup, which for the warm case is a
// cold call of minutes, so the library's own estimate of the iterations would redo it.
BENCHMARK(BM_PlanFleetLongPipelines)
    ->ArgNames({"nodes", "types", "max_nodes", "cold"})
    ->Args({4096, 6, 8, 0})
    ->Args({4096, 8, 8, 0})
    ->Iterations(5)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK(BM_PlanFleetLongPipelines)
    ->ArgNames({"nodes", "types", "max_nodes", "cold"})
    ->Args({4096, 6, 8, 1})
    ->Args({4096, 8, 8, 1})
    ->Iterations(1)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK(BM_PlanFleetPriced)
    ->ArgNames({"nodes", "types", "objective"})
    ->Apply([](benchmark::internal::Benchmark* b) {
      for (int nodes : {64, 512, 4096}) {
        for (int objective : {0, 1, 2}) b->Args({nodes, 4, objective});
      }
    })
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK(BM_ReplanFleet)
    ->ArgNames({"nodes", "types", "failures"})
    ->Args({4096, 6, 1})
    ->Args({4096, 6, 0})
    ->Args({4096, 6, 8})
    ->Apply([](benchmark::internal::Benchmark* b) {
      for (int nodes : {16, 64, 256, 1024, 4096}) {
        for (int types : {2, 4, 6, 8}) b->Args({nodes, types, 1});
      }
    })
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// Issue 28's cold Plan: one iteration each (the cold one is tens of seconds before it).
BENCHMARK(BM_PlanLlm80Fleet)
    ->ArgName("cold")
    ->Arg(1)
    ->Arg(0)
    ->Iterations(1)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

BENCHMARK(BM_Plan128Nodes)
    ->ArgNames({"B", "max_nodes", "cold", "f"})
    ->Args({512, 0, 1, 0})
    ->Args({512, 0, 0, 0})
    ->Args({512, 0, 0, 1})
    ->Args({512, 0, 0, 99})
    ->Args({2048, 0, 0, 0})
    ->Args({512, 8, 0, 0})
    ->Args({512, 6, 1, 0})
    ->Args({512, 8, 1, 0})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK(BM_PlanSweep128Nodes)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_ReplanOneFailure)
    ->ArgName("per_type")
    ->Arg(3)
    ->Arg(4)
    ->Arg(8)
    ->Arg(43)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

}  // namespace
}  // namespace oobleck::bench

BENCHMARK_MAIN();
