#include "core/plan/pipeline_set.h"

#include <algorithm>

namespace oobleck {

std::vector<size_t> ChosenOrder(const std::vector<PipelineShape>& shapes,
                                const PipelineSetSolution& solution) {
  std::vector<size_t> order(solution.chosen.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const NodeMix& ma = shapes[solution.chosen[a]].mix;
    const NodeMix& mb = shapes[solution.chosen[b]].mix;
    const int sa = MixSize(ma), sb = MixSize(mb);
    return sa != sb ? sa > sb : ma > mb;
  });
  return order;
}

}  // namespace oobleck
