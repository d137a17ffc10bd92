// The whole-layer bound of the template search
// (docs/architecture/template-search.md#whole-layer-bound-long-models-1f1b): a lower bound on the
// 1f1b time of every pipeline over one mix that, unlike the hull bound (PrefixCostBound), places
// whole layers. On the 1000-layer bench it is a median 0.06 % below the optima (the hull's
// 1.3 %). It gives the guesses of long models' beam rounds, and WholeLayerPrefixBound below
// (the same relaxation on every prefix [0, a)) prunes their boundary states.
#ifndef OOBLECK_CORE_TEMPLATE_SEARCH_WHOLE_LAYER_BOUND_H_
#define OOBLECK_CORE_TEMPLATE_SEARCH_WHOLE_LAYER_BOUND_H_

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <limits>
#include <mutex>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
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
  // count; a DP two mixes share is computed once, MemoisedPartition). The bounds of mixes not
  // reached when `interrupt` stops are 0.
  std::vector<double> ForMixes(const std::vector<NodeMix>& mixes,
                               const std::vector<double>& least_max_ms, Interrupt& interrupt) const;

  // The prefix side, for WholeLayerPrefixBound: over the stage sizes of the types in the bit
  // mask `types`, at each work price `pi_factors[p]` times their cheapest whole-model compute
  // (one pass for all: they share the stage windows), the GPU prices `lambda[p]` (per type, 0
  // for the others; ForMix's line of prices) and the least priced cost sum `sums[p][a]` of a
  // partition of every prefix [0, a) into stages of compute <= `cap` (+inf where none fits).
  // For a free multiset F of those types, sums[p][a] - sum_t lambda[p]_t GPUs_t(F) bounds the
  // cost sum of [0, a) on exactly F's GPUs.
  void PricedPrefixSums(int types, double cap, const std::vector<double>& pi_factors,
                        std::vector<std::vector<double>>& lambda,
                        std::vector<std::vector<double>>& sums) const;

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

  // The stage sizes of the types in the bit mask `types`.
  std::vector<Option> OptionsFor(int types) const;
  // ForMix's line of GPU prices at work price pi: lambda_t = cap max_g (pi / rho_tg - 1) / g
  // and its derivative in pi (0 for the types with no GPUs in type_gpus).
  static void PricesAt(const std::vector<Option>& options, double cap, double pi,
                       const std::vector<double>& type_gpus, std::vector<double>& lambda,
                       std::vector<double>& derivative);
  // With `sets` sets of the options' prices in `scratch`; scratch.least holds every prefix's
  // value per set; the result is the first set's.
  Partition BestPartition(const std::vector<Option>& options, double cap, int sets,
                          Scratch& scratch) const;
  // BestPartition's result, computed once per options, cap and prices for all of this
  // object's mixes (mixes of the same types share caps and prices: about a quarter of the
  // 1000-layer bench's root DPs repeat); scratch.least is then not set.
  Partition MemoisedPartition(const std::vector<Option>& options, double cap,
                              Scratch& scratch) const;
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
  mutable std::mutex memo_mutex_;
  mutable absl::flat_hash_map<std::string, Partition> memo_;  // MemoisedPartition's
};

// WholeLayerPrefixBound's caps lie on one geometric grid, kWholeLayerPrefixCapStep apart (a
// bound loses at most k times that step of the max where the prefix sets the max), each
// priced at kWholeLayerPrefixPrices work prices (times the cheapest whole-model compute of
// the types; along full16's optimal path on the 1000-layer bench these three gave bounds as
// tight as 51 prices from 0.5 to 6 or tighter). A curve spans at most kWholeLayerCurveCaps caps;
// above, the hull.
inline constexpr double kWholeLayerPrefixCapStep = 1.002;
inline constexpr double kWholeLayerPrefixPrices[] = {3, 4.5, 6};
inline constexpr int kWholeLayerCurveCaps = 150;
// The most memory WholeLayerPrefixBound's tables may take (the 1000-layer bench's 251 mixes
// need 87 MB), and the most node types it is built for (a table per subset of a mix's types).
inline constexpr size_t kWholeLayerMaxTableBytes = size_t{256} << 20;
inline constexpr int kWholeLayerMaxTypes = 8;

// The whole-layer bound on what the layers [0, a) of a boundary state cost plus k times the
// pipeline's max (docs/architecture/template-search.md#whole-layer-bound-long-models-1f1b), as
// a function of a lower bound c on that max: Phi(c) = min over caps x >= c of Q(x) + k x, Q(x)
// a lower bound on the prefix's cost sum when its stage computes are <= x, on the grid
// x_j = kWholeLayerPrefixCapStep^j between x_first and x_last: for c in [x_j, x_j+1],
// Phi(c) >= min(Q(x_j+1) + k c, min_{i > j} Q(x_i+1) + k x_i, tail), the tail bounding every
// prefix max above x_last. Nondecreasing in c.
struct WholeLayerCurve {
  int first = 0;               // grid index of x[0]
  double k = 0;                // M - 1
  std::vector<double> x;       // the caps
  std::vector<double> q;       // [j]: Q(x[j])
  std::vector<double> suffix;  // [j]: min_{i >= j} Q(x[i+1]) + k x[i], then the tail
  // -inf below the curve (no bound).
  double Phi(double c) const {
    if (x.empty() || !(c >= x.front())) return -std::numeric_limits<double>::infinity();
    if (c >= x.back()) return suffix.back();  // every cap >= x.back() is in the tail
    size_t j = std::min(static_cast<size_t>(std::max(GridIndex(c) - first, 0)), x.size() - 2);
    while (x[j + 1] < c) ++j;  // c <= x[j + 1]; stops at x.size() - 2 at the latest
    return std::min(q[j + 1] + k * c, suffix[j + 1]);
  }
  // The grid index j with x_j <= c < x_j+1, up to rounding (Phi corrects it upwards).
  static int GridIndex(double c) {
    return static_cast<int>(std::floor(std::log(c) / std::log(kWholeLayerPrefixCapStep)));
  }
};

// The tables behind WholeLayerCurve: per set of node types S, grid cap x_j and work price pi,
// the least priced cost sum D(a) of every prefix [0, a) (WholeLayerBound's DP, stages of the
// types of S with compute <= x_j, a GPU of type t priced lambda_t), so that for a free multiset
// F of exactly the types S, Q_F(a, x_j) >= max over pi of D(a) - sum_t lambda_t GPUs_t(F): at a
// boundary state the prefix uses exactly F's GPUs. Built once per request for the caps that
// matter to the mixes (each mix's window [least max, most max], every subset of its types),
// stored as floats rounded down (a lower bound stays one).
class WholeLayerPrefixBound {
 public:
  // `least_max[i]` and `most_max[i]`: the range of the largest stage compute of a pipeline of
  // mixes[i] that can still beat its bound (no tables for a mix whose range is not finite).
  // Polls `interrupt` (then some tables are missing: Q is -inf there, still a bound).
  WholeLayerPrefixBound(const StageCosts& costs, const std::vector<NodeMix>& mixes,
                        const std::vector<double>& least_max, const std::vector<double>& most_max,
                        Interrupt& interrupt);

  // x_j, the same double wherever it is asked for.
  double Cap(int j) const;
  // A lower bound on the cost sum of the layers [0, a) on exactly the GPUs of `free` with
  // stage computes <= Cap(j); -inf where no table was built. Inline: a pass asks it for
  // every cap of every curve (89 M times on the 1000-layer bench).
  double Q(int a, const NodeMix& free, int j) const {
    int subset = 0;
    for (int t = 0; t < types_; ++t) {
      if (free[t] > 0) subset |= 1 << t;
    }
    if (subset == 0) return -std::numeric_limits<double>::infinity();
    const std::vector<int>& of = table_of_[subset];
    const int x = j - first_of_[subset];
    if (x < 0 || x >= static_cast<int>(of.size()) || of[x] < 0) {
      return -std::numeric_limits<double>::infinity();
    }
    const size_t table = static_cast<size_t>(of[x]);
    constexpr size_t P = std::size(kWholeLayerPrefixPrices);
    const float* values = &values_[(static_cast<size_t>(a) * tables_ + table) * P];
    double best = -std::numeric_limits<double>::infinity();
    for (size_t p = 0; p < P; ++p) {
      const double d = values[p];
      // No partition of [0, a) fits under the cap.
      if (d == std::numeric_limits<double>::infinity()) return d;
      const double* lambda = &lambda_[(table * P + p) * types_];
      double v = d;
      for (int t = 0; t < types_; ++t) {
        if (free[t] > 0) v -= lambda[t] * free[t] * gpus_per_node_[t];
      }
      best = std::max(best, v);
    }
    return best;
  }
  int64_t tables() const { return static_cast<int64_t>(tables_); }
  // False if the tables would have taken more than kWholeLayerMaxTableBytes: then none were
  // built (Q is -inf everywhere) and the search does without them.
  bool built() const { return tables_ > 0; }

 private:
  // One table: a subset of the types (a bit mask) and a grid cap.
  struct Table {
    int subset, j;
  };
  // The tables the mixes' windows need (each mix's window, a cap of margin below and two
  // above as a curve reads x_j+1, for every subset of its types); sets the caps and indices.
  std::vector<Table> PlanTables(const std::vector<NodeMix>& mixes,
                                const std::vector<double>& least_max,
                                const std::vector<double>& most_max);

  const StageCosts& costs_;
  int layers_ = 0, types_ = 0;
  size_t tables_ = 0;
  std::vector<std::vector<int>> table_of_;  // [type subset][j - first_of_[subset]]: table or -1
  std::vector<int> first_of_;
  int cap_first_ = 0;
  std::vector<double> caps_;        // [j - cap_first_]
  std::vector<float> values_;       // [a][table][price]: D(a), rounded down
  std::vector<double> lambda_;      // [table][price][t]
  std::vector<int> gpus_per_node_;  // [t]
};

}  // namespace oobleck::template_search

#endif  // OOBLECK_CORE_TEMPLATE_SEARCH_WHOLE_LAYER_BOUND_H_
