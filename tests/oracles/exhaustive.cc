// Brute-force reference for the search: every distinct node order, every ordered GPU split
// of every node, every contiguous layer cut, each scored by CostModel::Evaluate. It shares
// nothing with core/template_search/ but the cost model, so agreement between the two is
// evidence. Test-only (oobleck_test_oracles).
#include "tests/oracles/exhaustive.h"

#include <algorithm>
#include <functional>

namespace oobleck {

MixResult ExhaustiveSearch(const CostModel& model, const NodeMix& mix) {
  MixResult result;
  result.mix = mix;
  const int L = model.num_layers();
  std::vector<int> order;
  for (int t = 0; t < static_cast<int>(mix.size()); ++t) order.insert(order.end(), mix[t], t);
  std::sort(order.begin(), order.end());
  const int n = static_cast<int>(order.size());

  std::vector<int> stage_node, stage_gpus;  // per stage, for the current split
  auto try_cuts = [&]() {
    const int S = static_cast<int>(stage_node.size());
    if (S > L) return;
    std::vector<int> ends(S);  // ends[s] = layer_end of stage s
    std::function<void(int, int)> cut = [&](int s, int begin) {
      if (s == S - 1) {
        ends[s] = L;
        PipelineTemplate tmpl;
        tmpl.mix = mix;
        tmpl.node_order = order;
        int b = 0;
        for (int i = 0; i < S; ++i) {
          Stage st;
          st.layer_begin = b;
          st.layer_end = ends[i];
          st.node_index = stage_node[i];
          st.node_type = order[stage_node[i]];
          st.gpus = stage_gpus[i];
          tmpl.stages.push_back(st);
          b = ends[i];
        }
        auto evaluated = model.Evaluate(std::move(tmpl));
        if (evaluated.ok() &&
            (!result.feasible || evaluated->iteration_time_ms < result.best.iteration_time_ms)) {
          result.feasible = true;
          result.best = *std::move(evaluated);
        }
        return;
      }
      // Leave at least one layer for each later stage.
      for (int end = begin + 1; end <= L - (S - 1 - s); ++end) {
        ends[s] = end;
        cut(s + 1, end);
      }
    };
    cut(0, 0);
  };
  std::function<void(int, int)> split = [&](int node, int used) {
    if (node == n) {
      try_cuts();
      return;
    }
    const int G = model.node_type(order[node]).gpus_per_node;
    if (used == G) {
      split(node + 1, 0);
      return;
    }
    for (int g : model.stage_sizes(order[node])) {
      if (used + g > G) continue;
      stage_node.push_back(node);
      stage_gpus.push_back(g);
      split(node, used + g);
      stage_node.pop_back();
      stage_gpus.pop_back();
    }
  };
  do {
    split(0, 0);
  } while (std::next_permutation(order.begin(), order.end()));
  if (!result.feasible) result.infeasible_reason = ExplainInfeasible(model, mix);
  return result;
}

}  // namespace oobleck
