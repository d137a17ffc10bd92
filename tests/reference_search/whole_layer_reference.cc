// A copy of core/template_search/whole_layer_bound.cc at main 64f75e5 (whole_layer_reference.h
// says why).
#include "tests/reference_search/whole_layer_reference.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <limits>
#include <utility>
#include <vector>

#include "core/template_search/tolerances.h"
#include "tbb/parallel_for.h"

namespace oobleck::reference_search {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
using template_search::kRelativeSlack;

}  // namespace

// Per call of ForMix: the DP's values, one monotone deque per option, and the options' prices.
struct WholeLayerBound::Scratch {
  std::vector<double> least;               // [l]: least priced sum of a partition of [0, l)
  std::vector<double> slope;               // [l]: the price's derivative summed over that partition
  std::vector<std::vector<int>> ends;      // per option: candidate stage starts, keys increasing
  std::vector<double> price, price_slope;  // per option: lambda_t g and its derivative
  std::vector<size_t> head, first;         // per option: the deque's front, the window's start
};

WholeLayerBound::WholeLayerBound(const StageCosts& costs, int microbatches)
    : costs_(costs), microbatches_(microbatches) {
  const CostModel& model = costs.model();
  layers_ = model.num_layers();
  const int T = model.num_types();
  sizes_.resize(T);
  for (int t = 0; t < T; ++t) {
    const int G = model.node_type(t).gpus_per_node;
    sizes_[t].resize(G + 1);
    for (int g : model.stage_sizes(t)) {
      SizeTables& s = sizes_[t][g];
      s.prefix.resize(layers_ + 1);
      for (int l = 0; l <= layers_; ++l) s.prefix[l] = costs.ComputeMs(t, g, 0, l);
      // A stage's transfers: at a boundary inside the model the cheaper of the two links,
      // or the inter-node one when the stage fills its node (its neighbours are then on
      // other nodes); none at the model's ends.
      const auto transfer = [&](int boundary) {
        if (boundary == 0 || boundary == layers_) return 0.0;
        const double inter = model.TransferMs(t, boundary - 1, Link::kInterNode);
        return g == G ? inter
                      : std::min(inter, model.TransferMs(t, boundary - 1, Link::kIntraNode));
      };
      s.transfer.resize(layers_ + 1);
      for (int l = 0; l <= layers_; ++l) s.transfer[l] = transfer(l);
    }
  }
}

std::vector<WholeLayerBound::Option> WholeLayerBound::OptionsFor(int types) const {
  const CostModel& model = costs_.model();
  std::vector<Option> options;
  for (int t = 0; t < model.num_types(); ++t) {
    if (!(types & (1 << t))) continue;
    for (int g : model.stage_sizes(t)) {
      options.push_back({t, g, &sizes_[t][g], sizes_[t][g].prefix[layers_]});
    }
  }
  return options;
}

void WholeLayerBound::PricedPrefixSums(int types, double cap, double pi_factor,
                                       std::vector<double>& lambda,
                                       std::vector<double>& sums) const {
  const std::vector<Option> options = OptionsFor(types);
  const int T = costs_.model().num_types();
  std::vector<double> present(T, 0), derivative(T, 0);
  double cheapest = kInf;
  for (const Option& o : options) {
    present[o.type] = 1;
    cheapest = std::min(cheapest, o.whole_ms);
  }
  lambda.assign(T, 0);
  Scratch scratch;
  scratch.price.assign(options.size(), 0);
  scratch.price_slope.assign(options.size(), 0);
  if (!options.empty() && cheapest > 0 && std::isfinite(cheapest)) {
    PricesAt(options, cap, pi_factor * cheapest, present, lambda, derivative);
    for (size_t o = 0; o < options.size(); ++o) {
      scratch.price[o] = lambda[options[o].type] * options[o].gpus;
    }
  }
  BestPartition(options, cap, scratch);
  sums = std::move(scratch.least);
}

WholeLayerBound::Partition WholeLayerBound::BestPartition(const std::vector<Option>& options,
                                                          double cap, Scratch& scratch) const {
  const int L = layers_;
  std::vector<double>& least = scratch.least;
  std::vector<double>& slope = scratch.slope;
  least.assign(L + 1, kInf);
  slope.assign(L + 1, 0);
  least[0] = 0;
  scratch.ends.resize(options.size());
  scratch.head.assign(options.size(), 0);
  scratch.first.assign(options.size(), 0);
  for (std::vector<int>& e : scratch.ends) e.clear();
  for (int j = 1; j <= L; ++j) {
    double best = kInf, best_slope = 0;
    for (size_t o = 0; o < options.size(); ++o) {
      const Option& option = options[o];
      const std::vector<double>& p = option.sizes->prefix;
      const std::vector<double>& x = option.sizes->transfer;
      std::vector<int>& ends = scratch.ends[o];
      size_t& head = scratch.head[o];
      // Stage [i, j) costs at least p[j] - p[i] + x[i] + x[j]: the best start minimises
      // least[i] - p[i] + x[i] over the
      // starts whose stage fits under the cap, a window that only moves right (compute is
      // >= 0 per layer), hence a monotone deque.
      if (std::isfinite(least[j - 1])) {
        const double key = least[j - 1] - p[j - 1] + x[j - 1];
        while (ends.size() > head && least[ends.back()] - p[ends.back()] + x[ends.back()] >= key)
          ends.pop_back();
        ends.push_back(j - 1);
      }
      size_t& lo = scratch.first[o];
      while (static_cast<int>(lo) < j &&
             costs_.ComputeMs(option.type, option.gpus, static_cast<int>(lo), j) > cap) {
        ++lo;
      }
      while (head < ends.size() && static_cast<size_t>(ends[head]) < lo) ++head;
      if (head == ends.size()) continue;
      const int i = ends[head];
      const double value = least[i] + (p[j] - p[i]) + x[i] + x[j] + scratch.price[o];
      if (value < best) {
        best = value;
        best_slope = slope[i] + scratch.price_slope[o];
      }
    }
    least[j] = best;
    slope[j] = best_slope;
  }
  return {least[L], slope[L]};
}

WholeLayerBound::Priced WholeLayerBound::PriceBy(const std::vector<Option>& options, double cap,
                                                 const std::vector<double>& lambda,
                                                 const std::vector<double>& derivative,
                                                 const std::vector<double>& type_gpus,
                                                 Scratch& scratch) const {
  scratch.price.resize(options.size());
  scratch.price_slope.resize(options.size());
  for (size_t o = 0; o < options.size(); ++o) {
    scratch.price[o] = lambda[options[o].type] * options[o].gpus;
    scratch.price_slope[o] = derivative[options[o].type] * options[o].gpus;
  }
  const Partition best = BestPartition(options, cap, scratch);
  Priced priced{best.priced_ms, best.price_slope};
  for (size_t t = 0; t < type_gpus.size(); ++t) {
    if (type_gpus[t] == 0) continue;
    priced.value -= lambda[t] * type_gpus[t];
    priced.slope -= derivative[t] * type_gpus[t];
  }
  return priced;
}

double WholeLayerBound::LeastSum(const std::vector<Option>& options, double cap,
                                 const std::vector<double>& type_gpus, Scratch& scratch) const {
  const int T = static_cast<int>(type_gpus.size());
  std::vector<double> lambda(T, 0), derivative(T, 0);
  // Without a cap every stage is as cheap as it can be: no prices.
  if (!std::isfinite(cap)) {
    return PriceBy(options, cap, lambda, derivative, type_gpus, scratch).value;
  }
  double cheapest = kInf;
  for (const Option& o : options) cheapest = std::min(cheapest, o.whole_ms);
  if (!(cheapest > 0) || !std::isfinite(cheapest)) {
    return PriceBy(options, cap, lambda, derivative, type_gpus, scratch).value;
  }
  // Every node's GPUs are split into stages without idle ones, so the stages on type t use
  // exactly type_gpus[t] GPUs and prices of any sign give a bound. One price pi per whole
  // model's work sets every type's: a GPU of type t costs
  // lambda_t(pi) = cap max_g (pi / rho_tg - 1) / g, rho_tg the whole model's compute on g GPUs
  // of type t: the dual prices of the fractional relaxation, where a full stage holds
  // cap / rho_tg of the work (negative: the type's GPUs must be used although other work is
  // cheaper). Its slope in pi is that of the prices (at a tie the steepest).
  double best = -kInf;  // every price gives a valid bound: the best one found
  const auto at_pi = [&](double pi) {
    PricesAt(options, cap, pi, type_gpus, lambda, derivative);
    const Priced p = PriceBy(options, cap, lambda, derivative, type_gpus, scratch);
    best = std::max(best, p.value);
    return p;
  };
  const Priced first = at_pi(cheapest);
  if (!std::isfinite(first.value)) return kInf;  // no partition fits under the cap
  MaximiseAlong(cheapest, first, at_pi, cheapest);
  return best;
}

void WholeLayerBound::PricesAt(const std::vector<Option>& options, double cap, double pi,
                               const std::vector<double>& type_gpus, std::vector<double>& lambda,
                               std::vector<double>& derivative) {
  std::fill(lambda.begin(), lambda.end(), -kInf);
  std::fill(derivative.begin(), derivative.end(), 0.0);
  for (const Option& o : options) {
    const double v = cap * (pi / o.whole_ms - 1) / o.gpus;
    const double dv = cap / (o.whole_ms * o.gpus);
    if (v > lambda[o.type] || (v == lambda[o.type] && dv > derivative[o.type])) {
      lambda[o.type] = v;
      derivative[o.type] = dv;
    }
  }
  for (size_t t = 0; t < type_gpus.size(); ++t) {
    if (type_gpus[t] == 0) lambda[t] = derivative[t] = 0;
  }
}

template <typename At>
void WholeLayerBound::MaximiseAlong(double x, Priced fx, At at, double step) {
  // f is concave along the line (a minimum of affine functions): bracket its maximum by
  // steps that double away from x, lo rising (slope > 0) and hi falling, then try where
  // their tangents meet (the middle if that is not inside), which bounds f from above there;
  // stop once what was found is within the resolution of that. Each evaluation reports its
  // own best to the caller.
  struct Point {
    double x;
    Priced f;
  };
  Point lo{x, fx}, hi{x, fx};
  if (fx.slope == 0) return;
  const double direction = fx.slope > 0 ? 1 : -1;
  Point& moving = fx.slope > 0 ? hi : lo;
  Point& trailing = fx.slope > 0 ? lo : hi;
  for (int i = 0; i < kWholeLayerPriceDoublings && (moving.f.slope > 0) == (direction > 0) &&
                  moving.f.slope != 0;
       ++i, step *= 2) {
    trailing = moving;
    moving.x += direction * step;
    moving.f = at(moving.x);
  }
  if (!(lo.f.slope > 0 && hi.f.slope <= 0) || !(lo.x < hi.x)) return;
  for (int i = 0; i < kWholeLayerPriceSteps; ++i) {
    double mid = (hi.f.value - lo.f.value + lo.f.slope * lo.x - hi.f.slope * hi.x) /
                 (lo.f.slope - hi.f.slope);
    if (!(mid > lo.x && mid < hi.x)) mid = (lo.x + hi.x) / 2;
    const double ceiling = lo.f.value + lo.f.slope * (mid - lo.x);
    const Priced f = at(mid);
    if (ceiling - std::max({f.value, lo.f.value, hi.f.value}) <=
        kWholeLayerCapResolution * std::abs(f.value)) {
      return;
    }
    (f.slope > 0 ? lo : hi) = Point{mid, f};
  }
}

double WholeLayerBound::ForMix(const NodeMix& mix, double least_max_ms,
                               Interrupt& interrupt) const {
  const CostModel& model = costs_.model();
  std::vector<double> type_gpus(model.num_types(), 0);
  int types = 0;
  for (int t = 0; t < model.num_types(); ++t) {
    if (t >= static_cast<int>(mix.size()) || mix[t] <= 0) continue;
    type_gpus[t] = mix[t] * model.node_type(t).gpus_per_node;
    types |= 1 << t;
  }
  const std::vector<Option> options = OptionsFor(types);
  if (options.empty() || layers_ == 0) return 0;
  Scratch scratch;
  const double k = microbatches_ - 1;
  // Some stage holds each layer: the largest stage compute is at least every layer's
  // cheapest compute.
  double least_max = std::max(least_max_ms, 0.0);
  for (int l = 0; l < layers_; ++l) {
    double cheapest = kInf;
    for (const Option& o : options)
      cheapest = std::min(cheapest, costs_.ComputeMs(o.type, o.gpus, l, l + 1));
    least_max = std::max(least_max, cheapest);
  }
  const double floor_ms = LeastSum(options, kInf, type_gpus, scratch);  // no cap
  if (!(k > 0) || !(least_max > 0) || !std::isfinite(least_max) || !std::isfinite(floor_ms)) {
    return std::max(0.0, (floor_ms + k * least_max) * (1 - kRelativeSlack));
  }
  // caps[j] ascending from least_max; sums[j] = LeastSum at caps[j] (sums[0] unused). The
  // interval [caps[j], caps[j + 1]] bounds T by sums[j + 1] + k caps[j]; above the last cap
  // T >= floor_ms + k caps.back().
  std::vector<double> caps = {least_max}, sums = {kInf};
  const auto least_interval = [&](double& value) {
    size_t arg = 0;
    value = kInf;
    for (size_t j = 0; j + 1 < caps.size(); ++j) {
      const double v = sums[j + 1] + k * caps[j];
      if (v < value) {
        value = v;
        arg = j;
      }
    }
    return arg;
  };
  // Extend the caps while the open interval above the last one could set the bound, else
  // split the interval that sets it until it is narrow.
  for (int evaluations = 0; evaluations < kWholeLayerMaxCaps; ++evaluations) {
    double least = kInf;
    const size_t j = least_interval(least);
    if (interrupt.Poll()) break;
    if (floor_ms + k * caps.back() < least) {
      caps.push_back(caps.back() * kWholeLayerCapStep);
      sums.push_back(LeastSum(options, caps.back(), type_gpus, scratch));
      continue;
    }
    if (caps[j + 1] <= caps[j] * (1 + kWholeLayerCapResolution)) break;
    const double mid = std::sqrt(caps[j] * caps[j + 1]);
    caps.insert(caps.begin() + static_cast<std::ptrdiff_t>(j) + 1, mid);
    sums.insert(sums.begin() + static_cast<std::ptrdiff_t>(j) + 1,
                LeastSum(options, mid, type_gpus, scratch));
  }
  double least = kInf;
  least_interval(least);
  const double bound = std::min(least, floor_ms + k * caps.back());
  return std::isfinite(bound) ? std::max(0.0, bound * (1 - kRelativeSlack)) : 0;
}

std::vector<double> WholeLayerBound::ForMixes(const std::vector<NodeMix>& mixes,
                                              const std::vector<double>& least_max_ms,
                                              Interrupt& interrupt) const {
  std::vector<double> bounds(mixes.size(), 0);
  tbb::parallel_for(0, static_cast<int>(mixes.size()), [&](int i) {
    if (interrupt.stopped()) return;
    bounds[i] = ForMix(mixes[i], i < static_cast<int>(least_max_ms.size()) ? least_max_ms[i] : 0,
                       interrupt);
  });
  return bounds;
}

std::vector<WholeLayerPrefixBound::Table> WholeLayerPrefixBound::PlanTables(
    const std::vector<NodeMix>& mixes, const std::vector<double>& least_max,
    const std::vector<double>& most_max) {
  const int T = types_, subsets = 1 << T;
  // Which grid caps each subset of types needs: each mix's window, with a margin of one cap
  // below and two above (a curve reads x_j+1), for every subset of its types.
  std::vector<int> first(subsets, 0), last(subsets, -1);
  std::vector<std::vector<char>> need(subsets);
  for (size_t i = 0; i < mixes.size(); ++i) {
    if (!(least_max[i] > 0) || !std::isfinite(most_max[i]) || !(most_max[i] >= least_max[i])) {
      continue;
    }
    int types = 0;
    for (int t = 0; t < T; ++t) {
      if (mixes[i][t] > 0) types |= 1 << t;
    }
    const int j0 = WholeLayerCurve::GridIndex(least_max[i]) - 1;
    const int j1 = WholeLayerCurve::GridIndex(most_max[i]) + 2;
    for (int s = types; s != 0; s = (s - 1) & types) {  // every nonempty subset of its types
      const int lo = last[s] < 0 ? j0 : std::min(first[s], j0);
      const int hi = last[s] < 0 ? j1 : std::max(last[s], j1);
      std::vector<char> grown(hi - lo + 1, 0);
      for (int j = first[s]; j <= last[s]; ++j) grown[j - lo] = need[s][j - first[s]];
      std::fill(grown.begin() + (j0 - lo), grown.begin() + (j1 - lo + 1), 1);
      need[s] = std::move(grown);
      first[s] = lo;
      last[s] = hi;
    }
  }
  int cap_last = -1;
  for (int s = 1; s < subsets; ++s) {
    if (last[s] < 0) continue;
    if (cap_last < 0 || first[s] < cap_first_) cap_first_ = first[s];
    cap_last = std::max(cap_last, last[s]);
  }
  for (int j = cap_first_; j <= cap_last; ++j) {
    caps_.push_back(std::pow(kWholeLayerPrefixCapStep, j));
  }
  std::vector<Table> tables;
  table_of_.assign(subsets, {});
  first_of_ = first;
  for (int s = 1; s < subsets; ++s) {
    table_of_[s].assign(need[s].size(), -1);
    for (size_t x = 0; x < need[s].size(); ++x) {
      if (!need[s][x]) continue;
      table_of_[s][x] = static_cast<int>(tables.size());
      tables.push_back({s, first[s] + static_cast<int>(x)});
    }
  }
  return tables;
}

WholeLayerPrefixBound::WholeLayerPrefixBound(const StageCosts& costs,
                                             const std::vector<NodeMix>& mixes,
                                             const std::vector<double>& least_max,
                                             const std::vector<double>& most_max,
                                             Interrupt& interrupt)
    : costs_(costs) {
  const CostModel& model = costs.model();
  const int L = model.num_layers(), T = model.num_types();
  layers_ = L;
  types_ = T;
  const std::vector<Table> tables = PlanTables(mixes, least_max, most_max);
  constexpr size_t P = std::size(kWholeLayerPrefixPrices);
  if (tables.size() * P * (L + 1) * sizeof(float) > kWholeLayerMaxTableBytes) {
    table_of_.assign(table_of_.size(), {});  // too many: none (built() is false)
    return;
  }
  tables_ = tables.size();
  values_.assign(static_cast<size_t>(L + 1) * tables_ * P, -std::numeric_limits<float>::infinity());
  lambda_.assign(tables_ * P * T, 0);
  const WholeLayerBound bound(costs, 0);
  tbb::parallel_for(0, static_cast<int>(tables_), [&](int table) {
    if (interrupt.Every(table)) return;
    std::vector<double> lambda, sums;
    for (size_t p = 0; p < P; ++p) {
      bound.PricedPrefixSums(tables[table].subset, Cap(tables[table].j), kWholeLayerPrefixPrices[p],
                             lambda, sums);
      std::copy(lambda.begin(), lambda.end(), lambda_.begin() + (table * P + p) * T);
      for (int a = 0; a <= L; ++a) {
        float v = static_cast<float>(sums[a]);  // rounded down: still a lower bound
        if (static_cast<double>(v) > sums[a]) {
          v = std::nextafter(v, -std::numeric_limits<float>::infinity());
        }
        values_[(static_cast<size_t>(a) * tables_ + table) * P + p] = v;
      }
    }
  });
}

double WholeLayerPrefixBound::Cap(int j) const {
  const int x = j - cap_first_;
  return x >= 0 && x < static_cast<int>(caps_.size()) ? caps_[x]
                                                      : std::pow(kWholeLayerPrefixCapStep, j);
}

double WholeLayerPrefixBound::Q(int a, const NodeMix& free, int j) const {
  int subset = 0;
  for (int t = 0; t < types_; ++t) {
    if (free[t] > 0) subset |= 1 << t;
  }
  if (subset == 0) return -kInf;
  const std::vector<int>& of = table_of_[subset];
  const int x = j - first_of_[subset];
  if (x < 0 || x >= static_cast<int>(of.size()) || of[x] < 0) return -kInf;
  const size_t table = static_cast<size_t>(of[x]);
  constexpr size_t P = std::size(kWholeLayerPrefixPrices);
  const CostModel& model = costs_.model();
  double best = -kInf;
  for (size_t p = 0; p < P; ++p) {
    const double d = values_[(static_cast<size_t>(a) * tables_ + table) * P + p];
    if (d == kInf) return kInf;  // no partition of [0, a) fits under the cap
    const double* lambda = &lambda_[(table * P + p) * types_];
    double v = d;
    for (int t = 0; t < types_; ++t) {
      if (free[t] > 0) v -= lambda[t] * free[t] * model.node_type(t).gpus_per_node;
    }
    best = std::max(best, v);
  }
  return best;
}

}  // namespace oobleck::reference_search
