// The whole-layer bound of the template search
// (docs/architecture/template-search.md#whole-layer-bound-long-models-1f1b): a lower bound on the
// 1f1b time of every pipeline over one mix that, unlike the hull bound (PrefixCostBound), places
// whole layers. On the 1000-layer bench it is a median 0.06 % below the optima (the hull's
// 1.3 %); the passes do not use it yet (bench/README.md#whole-layer-bound).
#ifndef OOBLECK_CORE_TEMPLATE_SEARCH_WHOLE_LAYER_BOUND_H_
#define OOBLECK_CORE_TEMPLATE_SEARCH_WHOLE_LAYER_BOUND_H_

#include <vector>

#include "core/cluster.h"
#include "core/cost_model.h"
#include "core/interrupt.h"
#include "core/template_search/stage_costs.h"

namespace oobleck::template_search {

// WholeLayerBound's caps start at the mix's forced bottleneck and step by kWholeLayerCapStep while
// the open interval above the last cap could set the bound; then the interval that sets it is
// halved (geometrically) until its caps are within kWholeLayerCapResolution, at most
// kWholeLayerMaxCaps caps per mix in all. Per cap, the work price is bracketed by at most
// kWholeLayerPriceDoublings doubling steps and refined by kWholeLayerPriceSteps tangent steps.
inline constexpr double kWholeLayerCapStep = 1.1;
inline constexpr double kWholeLayerCapResolution = 5e-4;
inline constexpr int kWholeLayerMaxCaps = 64;
inline constexpr int kWholeLayerPriceDoublings = 20;
inline constexpr int kWholeLayerPriceSteps = 8;

// A pipeline over mix X with stage costs s_i (compute plus transfers) has T = sum s_i + k m,
// k = M - 1, m = max s_i. Its stages partition the layers into ranges, each on g GPUs of a type
// X holds, using exactly the GPUs X has (nodes split without idle GPUs); a stage pays at least
// its compute and its type's cheaper link at each inner boundary (the inter-node one when it
// fills its node). Pricing a GPU of type t at lambda_t (any sign) and dropping the GPU counts
// gives, for a cap C >= m, sum s_i >= D(C, lambda) - sum_t lambda_t GPUs_t(X), with D the
// least priced sum over partitions into stages of compute <= C (a DP over layers with one
// sliding-window minimum of prefix sums per stage size). That bound only falls as C grows,
// so on every interval [x_j, x_j+1] of caps T >= its value at x_j+1 plus k x_j, and the bound
// is the least of these over intervals covering [least max, inf). Memory, node boundaries
// and order, and which link a boundary uses are dropped: each only raises the real optimum.
class WholeLayerBound {
 public:
  WholeLayerBound(const StageCosts& costs, int microbatches);

  // A lower bound on the 1f1b time of every pipeline over `mix` (0 if none is known),
  // given `least_max_ms`, a lower bound on the largest stage compute of every such pipeline
  // (PrefixMaxBound::ForMix; 0 if unknown). Polls `interrupt` once per cap; stopped, it
  // returns a valid but looser bound.
  double ForMix(const NodeMix& mix, double least_max_ms, Interrupt& interrupt) const;

  // ForMix of every mix, in parallel (each mix on one thread: the same values at any thread
  // count). The bounds of mixes not reached when `interrupt` stops are 0.
  std::vector<double> ForMixes(const std::vector<NodeMix>& mixes,
                               const std::vector<double>& least_max_ms, Interrupt& interrupt) const;

 private:
  // Per stage size of a type: ComputeMs(t, g, 0, l), and the least transfer a stage of that
  // size pays at boundary l (in if it starts there, out if it ends there).
  struct SizeTables {
    std::vector<double> prefix, transfer;
  };
  // A stage size of one type in a mix, and the whole model's compute on it.
  struct Option {
    int type, gpus;
    const SizeTables* sizes;
    double whole_ms;
  };
  // The best priced partition under a cap: its priced compute sum, and the derivative of
  // its GPUs' prices in the work price.
  struct Partition {
    double priced_ms;
    double price_slope;
  };
  struct Scratch;

  // With the options' prices in `scratch`.
  Partition BestPartition(const std::vector<Option>& options, double cap, Scratch& scratch) const;
  // D(cap, lambda) - sum_t lambda_t type_gpus[t], and its derivative along `derivative`
  // (per type) at lambda.
  struct Priced {
    double value, slope;
  };
  Priced PriceBy(const std::vector<Option>& options, double cap, const std::vector<double>& lambda,
                 const std::vector<double>& derivative, const std::vector<double>& type_gpus,
                 Scratch& scratch) const;
  // Searches a concave function along a line from x (f(x) = fx) with at(x) -> Priced, first
  // steps of `step`, doubling.
  template <typename At>
  static void MaximiseAlong(double x, Priced fx, At at, double step);
  // The largest D(cap, lambda) - sum_t lambda_t type_gpus[t] found over GPU prices lambda:
  // a lower bound on the least compute sum under the cap; +inf if no partition fits under
  // the cap.
  double LeastSum(const std::vector<Option>& options, double cap,
                  const std::vector<double>& type_gpus, Scratch& scratch) const;

  const StageCosts& costs_;
  const int microbatches_;
  int layers_ = 0;
  std::vector<std::vector<SizeTables>> sizes_;  // [t][g]
};

}  // namespace oobleck::template_search

#endif  // OOBLECK_CORE_TEMPLATE_SEARCH_WHOLE_LAYER_BOUND_H_
