// Benchmarks of core's Plan and Replan (bench/README.md#plan): a 128-node, 512-GPU cluster
// of three GPU types, cold (template search included) and warm (templates cached), a sweep
// of global batch sizes, and a warm Replan after one node fails. Reads ../shared/data.
#include <benchmark/benchmark.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "bench/bench_problems.h"
#include "core/plan.h"
#include "core/replan.h"

namespace oobleck::bench {
namespace {

// GPT-2 XL (ring all-reduce estimates, so 4-GPU stages are possible) on V100, RTX 3090 and
// RTX 4090 nodes of 4 GPUs; layer times derived from the measured RTX 4090 by the ditto
// files' relative speeds (1.0, 1.8, 2.94).
absl::StatusOr<PlanningProblem> ThreeTypeProblem(int microbatches) {
  absl::StatusOr<std::shared_ptr<const ModelProfile>> base =
      LoadGpt2XlProfile("profiles/gpt2-xl-ring", "rtx4090");
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
