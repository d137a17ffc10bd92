// The whole-layer bound as it was before branch wl-setup sped its DP up (main 64f75e5): a
// test-only oracle. core/template_search/whole_layer_bound.h's figures must equal these bit
// for bit (tests/core/whole_layer_bound_test.cc), so the search visits the same states. The
// constants and WholeLayerCurve are the product's; the classes are copied unchanged.
#ifndef OOBLECK_TESTS_REFERENCE_SEARCH_WHOLE_LAYER_REFERENCE_H_
#define OOBLECK_TESTS_REFERENCE_SEARCH_WHOLE_LAYER_REFERENCE_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/cluster.h"
#include "core/interrupt.h"
#include "core/template_search/stage_costs.h"
#include "core/template_search/whole_layer_bound.h"

namespace oobleck::reference_search {

// The product's constants, so both sides search the same caps and prices.
using template_search::kWholeLayerCapResolution;
using template_search::kWholeLayerCapStep;
using template_search::kWholeLayerMaxCaps;
using template_search::kWholeLayerMaxTableBytes;
using template_search::kWholeLayerPrefixCapStep;
using template_search::kWholeLayerPrefixPrices;
using template_search::kWholeLayerPriceDoublings;
using template_search::kWholeLayerPriceSteps;
using template_search::StageCosts;
using template_search::WholeLayerCurve;

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

  // The prefix side, for WholeLayerPrefixBound: over the stage sizes of the types in the bit
  // mask `types`, at the work price `pi_factor` times their cheapest whole-model compute, the
  // GPU prices `lambda` (per type, 0 for the others; ForMix's line of prices) and the least
  // priced cost sum `sums[a]` of a partition of every prefix [0, a) into stages of compute
  // <= `cap` (+inf where none fits). For a free multiset F of those types,
  // sums[a] - sum_t lambda_t GPUs_t(F) bounds the cost sum of [0, a) on exactly F's GPUs.
  void PricedPrefixSums(int types, double cap, double pi_factor, std::vector<double>& lambda,
                        std::vector<double>& sums) const;

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
  // With the options' prices in `scratch`; scratch.least holds every prefix's value.
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
  // stage computes <= Cap(j); -inf where no table was built.
  double Q(int a, const NodeMix& free, int j) const;
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
  std::vector<double> caps_;    // [j - cap_first_]
  std::vector<float> values_;   // [a][table][price]: D(a), rounded down
  std::vector<double> lambda_;  // [table][price][t]
};

}  // namespace oobleck::reference_search

#endif  // OOBLECK_TESTS_REFERENCE_SEARCH_WHOLE_LAYER_REFERENCE_H_
