// The named tolerances and grid factors of the template search
// (docs/architecture/template-search.md).
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
// The grid starts no lower than this fraction of the whole model's cost: it holds at most
// log(1e12) / log(kCoarseGridFactor) = 567 coarse caps whatever the profile (valid times
// span 1e-9 to 1e308 ms). Real profiles span far less, and a grid without its lowest caps
// still bounds validly (a state reads a lower cap).
inline constexpr double kLeastGridCapRatio = 1e-12;
// Bisection steps for the requested mixes' bottleneck (each halves the interval).
inline constexpr int kBottleneckBisections = 60;

// The guessed bounds of the template search (branch_and_bound.h): a round bounds each mix
// by its root lower bound times 1 + a slack, the slacks widening round by round. A tight
// slack prunes hard but settles only the mixes whose optimum lies under it; each round that
// settles few costs a whole pass.
//
// The exact guessed rounds. At the LLM shape the optima are 1.02-1.10 times the lower bound
// (bench/README.md): a round whose guesses are too low for most mixes costs a whole pass and
// settles few, hence the first step of 6%.
inline constexpr double kExactGuessSlacks[] = {0.06, 0.1, 0.2, 0.4};
// The beam rounds that find incumbents (FindIncumbents with guesses); a last unbounded
// round follows them for the mixes still without an incumbent.
inline constexpr double kBeamGuessSlacks[] = {0.02, 0.05, 0.1, 0.2, 0.4};
// The same rounds when the guesses are whole-layer root bounds (WholeLayerBound, long 1f1b
// models): those lie a median 0.06 % and at most 0.6 % below the 1000-layer bench's optima,
// and a beam bounded a little above the optimum keeps fewer labels. The whole-layer tables
// cover each mix's maxima up to its bound at kWholeLayerTableSlack, which the exact pass's
// incumbents (found within the first slack) stay under.
inline constexpr double kWholeLayerBeamSlacks[] = {0.004, 0.01, 0.03};
inline constexpr double kWholeLayerTableSlack = 0.01;

// The bound a pruning test compares with: `incumbent_ms` plus the slack.
inline double WithSlack(double incumbent_ms) {
  return incumbent_ms + kRelativeSlack * std::abs(incumbent_ms) + kRelativeSlack;
}

}  // namespace oobleck::template_search

#endif  // OOBLECK_CORE_TEMPLATE_SEARCH_TOLERANCES_H_
