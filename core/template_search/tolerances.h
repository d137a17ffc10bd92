// The named tolerances and grid factors of the template search (docs/ARCHITECTURE.md#search).
#ifndef OOBLECK_CORE_TEMPLATE_SEARCH_TOLERANCES_H_
#define OOBLECK_CORE_TEMPLATE_SEARCH_TOLERANCES_H_

#include <cmath>

namespace oobleck::template_search {

// The one relative slack of the search: bounds are loosened by it (plus the same absolute
// amount in ms) so that rounding never prunes a label that ties the incumbent, a cap that
// fits exactly is never called impossible, and bisections stop at this precision.
inline constexpr double kRelativeSlack = 1e-9;

// The bottleneck bound's grid of caps: geometric with this factor from the cheapest layer
// to the whole model, and fine steps of kFineGridFactor from the requested mixes'
// bottleneck up to kFineGridSpan times it, where the bound decides most.
inline constexpr double kCoarseGridFactor = 1.05;
inline constexpr double kFineGridFactor = 1.001;
inline constexpr double kFineGridSpan = 1.1;
// Bisection steps for the requested mixes' bottleneck (each halves the interval).
inline constexpr int kBottleneckBisections = 60;

// The bound a pruning test compares with: `incumbent_ms` plus the slack.
inline double WithSlack(double incumbent_ms) {
  return incumbent_ms + kRelativeSlack * std::abs(incumbent_ms) + kRelativeSlack;
}

}  // namespace oobleck::template_search

#endif  // OOBLECK_CORE_TEMPLATE_SEARCH_TOLERANCES_H_
