// STAGE_GPUS_EQUAL_HALVES against Oobleck `develop`'s own rule for a node's stages. Its divide
// and conquer (oobleck/csrc/planning/pipeline_template.cpp, divide_and_conquer) splits a one-
// node part of g GPUs and s stages into a left part of any 1 <= g_left < g GPUs with
// 1 <= s_left < s stages and a right part of the rest, and refuses a part of one stage whose
// GPU count is not a power of two (and a part with fewer GPUs than stages). DevelopLayouts
// enumerates what that recursion can build, written from that rule alone; the tests compare
// it with the stage sizes our policy allows, and the search's optimum with a brute force over
// develop's layouts on small random instances.
#include <algorithm>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "core/cost_model.h"
#include "core/search.h"
#include "gtest/gtest.h"

namespace oobleck {
namespace {

using Layout = std::vector<int>;  // GPUs of each stage on a node, in layer order

bool PowerOfTwo(int n) { return n > 0 && (n & (n - 1)) == 0; }

// The in-node GPU sequences develop's recursion builds for a part of `gpus` GPUs and
// `stages` stages.
std::set<Layout> DevelopLayouts(int gpus, int stages) {
  static std::map<std::pair<int, int>, std::set<Layout>> memo;
  const auto key = std::make_pair(gpus, stages);
  if (auto it = memo.find(key); it != memo.end()) return it->second;
  std::set<Layout> out;
  if (gpus >= stages && stages == 1 && PowerOfTwo(gpus)) out.insert({gpus});
  if (gpus >= stages && stages > 1) {
    for (int left = 1; left < gpus; ++left) {
      for (int left_stages = 1; left_stages < stages; ++left_stages) {
        for (const Layout& a : DevelopLayouts(left, left_stages)) {
          for (const Layout& b : DevelopLayouts(gpus - left, stages - left_stages)) {
            Layout both = a;
            both.insert(both.end(), b.begin(), b.end());
            out.insert(both);
          }
        }
      }
    }
  }
  memo[key] = out;
  return out;
}

std::set<Layout> DevelopLayouts(int gpus) {
  std::set<Layout> all;
  for (int s = 1; s <= gpus; ++s) {
    const std::set<Layout> some = DevelopLayouts(gpus, s);
    all.insert(some.begin(), some.end());
  }
  return all;
}

// Every ordered sequence of `sizes` adding up to `gpus` (how our search fills a node).
std::set<Layout> Compositions(int gpus, const std::vector<int>& sizes) {
  std::set<Layout> out;
  Layout current;
  std::function<void(int)> fill = [&](int left) {
    if (left == 0) out.insert(current);
    for (int g : sizes) {
      if (g > left) continue;
      current.push_back(g);
      fill(left - g);
      current.pop_back();
    }
  };
  fill(gpus);
  return out;
}

// `layers` layers with in-node all-reduce data for every GPU count, random times.
PlanningProblem Problem(int gpus, int layers, StageGpus policy, std::mt19937* rng) {
  auto uniform = [&](double lo, double hi) {
    return std::uniform_real_distribution<double>(lo, hi)(*rng);
  };
  auto profile = std::make_shared<ModelProfile>();
  profile->key = {"m", "gpu", 1};
  for (int l = 0; l < layers; ++l) {
    LayerProfile layer;
    layer.forward_ms = uniform(1, 10);
    layer.backward_ms = 2 * layer.forward_ms * uniform(0.8, 1.2);
    layer.param_bytes = uniform(1e6, 1e8);
    layer.activation_bytes = uniform(1e6, 1e7);
    for (int g = 2; g <= gpus; ++g) layer.allreduce_in_node_ms[g] = uniform(0, 3);
    profile->layers.push_back(layer);
  }
  PlanningProblem p;
  p.node_types = {{"node", "gpu", gpus, 80e9, 100e9}};
  p.profiles = {profile};
  p.cost_model = CostModelKind::kOobleckSosp23;
  p.inter_node_bytes_per_s = 10e9;
  p.stage_gpus = policy;
  return p;
}

TEST(EqualHalvesTest, SameInNodeLayoutsAsDevelop) {
  for (int gpus = 1; gpus <= 12; ++gpus) {
    std::mt19937 rng(gpus);
    absl::StatusOr<CostModel> model =
        CostModel::Create(Problem(gpus, 2, StageGpus::kEqualHalves, &rng));
    ASSERT_TRUE(model.ok()) << gpus << " GPUs: " << model.status();
    EXPECT_EQ(Compositions(gpus, model->stage_sizes(0)), DevelopLayouts(gpus)) << gpus << " GPUs";
  }
}

// The best template over develop's layouts and every layer cut, timed by the cost model
// (with every stage size allowed, so it judges the layouts, not the policy).
double DevelopOptimum(const CostModel& any, int nodes) {
  const int L = any.num_layers();
  const int gpus = any.node_type(0).gpus_per_node;
  const std::set<Layout> layouts = DevelopLayouts(gpus);
  double best = -1;
  std::vector<const Layout*> chosen(nodes);
  std::function<void(int)> pick = [&](int node) {
    if (node < nodes) {
      for (const Layout& layout : layouts) {
        chosen[node] = &layout;
        pick(node + 1);
      }
      return;
    }
    std::vector<int> stage_node, stage_gpus;
    for (int n = 0; n < nodes; ++n) {
      for (int g : *chosen[n]) {
        stage_node.push_back(n);
        stage_gpus.push_back(g);
      }
    }
    const int S = static_cast<int>(stage_gpus.size());
    if (S > L) return;
    std::vector<int> ends(S);
    std::function<void(int, int)> cut = [&](int s, int begin) {
      if (s == S) {
        PipelineTemplate tmpl;
        tmpl.mix = {nodes};
        tmpl.node_order.assign(nodes, 0);
        for (int i = 0, b = 0; i < S; b = ends[i], ++i) {
          tmpl.stages.push_back({b, ends[i], stage_node[i], 0, stage_gpus[i]});
        }
        absl::StatusOr<PipelineTemplate> timed = any.Evaluate(std::move(tmpl));
        if (timed.ok() && (best < 0 || timed->iteration_time_ms < best)) {
          best = timed->iteration_time_ms;
        }
        return;
      }
      for (int end = begin + 1; end <= L - (S - 1 - s); ++end) {
        if (s == S - 1 && end != L) continue;
        ends[s] = end;
        cut(s + 1, end);
      }
    };
    cut(0, 0);
  };
  pick(0);
  return best;
}

TEST(EqualHalvesTest, SearchFindsDevelopsOptimumOnRandomInstances) {
  for (uint32_t seed = 1; seed <= 24; ++seed) {
    std::mt19937 rng(seed);
    const int gpus = std::vector<int>{2, 3, 4, 5, 6}[seed % 5];
    const int layers = 3 + seed % 4;
    const int nodes = 1 + seed % 2;
    std::mt19937 profile_rng(seed * 7919);
    const PlanningProblem halves = Problem(gpus, layers, StageGpus::kEqualHalves, &profile_rng);
    PlanningProblem any_problem = halves;
    any_problem.stage_gpus = StageGpus::kAny;
    absl::StatusOr<CostModel> model = CostModel::Create(halves);
    absl::StatusOr<CostModel> any = CostModel::Create(any_problem);
    ASSERT_TRUE(model.ok()) << "seed " << seed << ": " << model.status();
    ASSERT_TRUE(any.ok()) << "seed " << seed << ": " << any.status();
    auto got = SearchTemplates(*model, {NodeMix{nodes}});
    ASSERT_TRUE(got.ok()) << "seed " << seed << ": " << got.status();
    const double want = DevelopOptimum(*any, nodes);
    const std::string where = std::string(StageGpusName(halves.stage_gpus)) + " seed " +
                              std::to_string(seed) + ": " + std::to_string(nodes) + " nodes of " +
                              std::to_string(gpus) + " GPUs, " + std::to_string(layers) + " layers";
    ASSERT_EQ((*got)[0].feasible, want >= 0) << where;
    if (want < 0) continue;
    EXPECT_NEAR((*got)[0].best.iteration_time_ms, want, 1e-9 * want) << where;
    for (const Stage& stage : (*got)[0].best.stages) {
      EXPECT_TRUE(PowerOfTwo(stage.gpus)) << where << ": a stage of " << stage.gpus << " GPUs";
    }
  }
}

}  // namespace
}  // namespace oobleck
