// The objectives of the template search: the label each cost model keeps per pipeline suffix, how a
// stage extends it, when one label dominates another, and the lower bounds branch and bound prunes
// with (docs/architecture/template-search.md#labels-and-dominance). The final time of a label is
// the cost model's own formula (core/cost_model.h), so the two cannot drift.
#ifndef OOBLECK_CORE_TEMPLATE_SEARCH_OBJECTIVES_H_
#define OOBLECK_CORE_TEMPLATE_SEARCH_OBJECTIVES_H_

#include <algorithm>
#include <cmath>
#include <concepts>
#include <cstdint>
#include <limits>
#include <span>
#include <vector>

#include "core/cost_model.h"
#include "core/template_search/prefix_cost_bound.h"

namespace oobleck::template_search {

// What the label DP and branch and bound need from an objective, with PrefixCost
// (core/template_search/prefix_cost_bound.h) bounding what the stages still to place cost.
template <typename O>
concept SearchObjective = requires(const O& o, const typename O::Label& x, typename O::Label& y,
                                   double c, const PrefixCost& prefix, int n, bool flag) {
  // The label of the suffix with a stage of cost c prepended.
  { o.Extend(x, c) } -> std::same_as<typename O::Label>;
  // The time of a complete pipeline: the cost model's formula.
  { o.Final(x) } -> std::same_as<double>;
  // x is no worse than the other label for every completion.
  { o.Dominates(x, x) } -> std::same_as<bool>;
  // The cost the label has surely paid (LowerBound - Primary >= PrimaryBound), and its
  // number of stages.
  { O::Primary(x) } -> std::same_as<double>;
  { O::Stages(x) } -> std::same_as<int>;
  // A lower bound on every completion's time, given that the stages still to place have a
  // max above c, the pipeline has at most n stages, and whether none is left (flag).
  { o.LowerBound(x, prefix, c, n, flag) } -> std::same_as<double>;
  // A bound on every pipeline holding a stage of compute c, nondecreasing in c, with the
  // coefficient StageCoefficient(min stages, max stages, may be alone) gives.
  { o.StageBound(c, c, prefix, c) } -> std::same_as<double>;
  { o.StageCoefficient(n, n, flag) } -> std::same_as<double>;
  { o.PrimaryBound(c, c, n) } -> std::same_as<double>;
  // Canonicalises a label given the least max of the stages still to place.
  {o.Clamp(y, c)};
  // LowerBound is Primary + a nondecreasing function of the label's max (MaxOnly keeps
  // only what that function reads).
  { O::kSumPlusMaxBound } -> std::convertible_to<bool>;
  { O::MaxOnly(x) } -> std::same_as<typename O::Label>;
  // Whether ParetoFilter leaves a front in order of Primary (a scan over it may stop at
  // the first source that is too costly).
  { O::kFrontsByPrimary } -> std::convertible_to<bool>;
  // From this many layers on, the search uses guessed bounds: exact rounds on short models,
  // beam rounds for incumbents on long ones (core/template_search/branch_and_bound.h).
  { O::kGuessFromLayers } -> std::convertible_to<int>;
  // The k of the prefix.SumPlus(k, ...) most calls use (NaN: none), precomputed per state.
  { o.CommonPrefixCoefficient() } -> std::same_as<double>;
};

// 1f1b: T = sum c + (M - 1) max c. Labels (sum, max, stages at or after, capped at M).
struct OneFOneBObjective {
  struct Label {
    double sum = 0;
    double max = 0;
    int stages = 0;
  };
  int microbatches;
  bool track_stages;  // memory can bind: fewer stages after is better for earlier stages

  Label Extend(const Label& x, double c) const {
    return {x.sum + c, std::max(x.max, c), std::min(x.stages + 1, microbatches)};
  }
  // For a prefix P, T = sum + sum P + (M - 1) max(max, max P). a is never worse than b
  // for every max P iff it is no worse both when max P is large (sum) and when it is small
  // (sum + (M - 1) max): a larger max can be paid for by a smaller sum.
  bool Dominates(const Label& a, const Label& b) const {
    return a.sum <= b.sum && Final(a) <= Final(b) && (!track_stages || a.stages <= b.stages);
  }
  double Final(const Label& x) const { return OneFOneBTimeMs(x.sum, x.max, microbatches); }
  static double Primary(const Label& x) { return x.sum; }
  static int Stages(const Label& x) { return x.stages; }
  // LowerBound(x) = x.sum + (a nondecreasing function of x.max), the same for a label with
  // only that max (MaxOnly): the mixes that can use a label set a threshold on its sum that
  // falls as its max grows.
  static constexpr bool kSumPlusMaxBound = true;
  // ParetoFilter leaves a front in order of sum (Primary).
  static constexpr bool kFrontsByPrimary = true;
  // The unbounded beam pass is most of the work at any length (98 % of the candidates on
  // the 80-layer, 8-GPU LLM shape of bench/README.md), and guessed rounds cut it 20x.
  static constexpr int kGuessFromLayers = 0;
  static Label MaxOnly(const Label& x) { return {0, x.max, 0}; }
  // Lower bounds for branch and bound. `prefix` bounds the cost sum of the stages still to
  // place (PrefixCost), jointly with the final max; a stage of cost c alone forces T >= M c.
  double StageCoefficient(int /*min_stages*/, int /*max_stages*/, bool /*may_be_alone*/) const {
    return microbatches;
  }
  // The coefficient k of every prefix.SumPlus(k, ...) this objective asks for.
  double CommonPrefixCoefficient() const { return microbatches - 1; }
  template <typename Prefix>
  double LowerBound(const Label& x, const Prefix& prefix, double rest_max_ms, int /*max_stages*/,
                    bool /*complete*/) const {
    return x.sum + prefix.SumPlus(microbatches - 1, std::max(x.max, rest_max_ms));
  }
  // A bound on every pipeline holding a stage of this compute here, nondecreasing in it.
  template <typename Prefix>
  double StageBound(double compute_ms, double /*coeff*/, const Prefix& prefix,
                    double rest_max_ms) const {
    return compute_ms + prefix.SumPlus(microbatches - 1, std::max(compute_ms, rest_max_ms));
  }
  // LowerBound(x, ...) - Primary(x) is at least this for every label x; `empty_stage_bound`
  // is StageBound(0, ...) with the same prefix and rest_max, floor_ms the prefix's floor.
  double PrimaryBound(double empty_stage_bound, double /*floor_ms*/, int /*max_stages*/) const {
    return empty_stage_bound;
  }
  // Calls use(i) for the source labels whose extension by a stage of cost c may survive.
  // Where the new max is max(c, rest_max) whatever the source's max, the extension differs
  // only in sum and stages, so of those sources only the (sum, stages)-minimal ones count.
  // An extension whose sum exceeds primary_limit cannot survive (the caller's test); when
  // `by_sum` says the sources are in order of sum (an exact front, ParetoFilter's order),
  // the first such source ends the scan, as every later one has at least its sum.
  template <typename E, typename Use>
  void ForUsefulSources(std::span<const E> sources, double c, double rest_max_ms,
                        double primary_limit, bool by_sum, Use use) const {
    const double floor = std::max(c, rest_max_ms);
    // Per stage count, the min-sum low source. Scratch owned by the calling thread, for one
    // call: cleared here, dead when it returns. Safe because a template-search task
    // (ComputeTarget, one per parallel_for index) never waits on TBB, so a thread cannot
    // start a second task in the middle of this one. (An explicit per-task Scratch would
    // have to pass through the SearchObjective concept: ForUsefulSources, ParetoFilter.)
    thread_local std::vector<int32_t> cheapest;
    cheapest.clear();
    for (int32_t i = 0; i < static_cast<int32_t>(sources.size()); ++i) {
      const Label& x = sources[i].label;
      if (x.sum + c > primary_limit) {  // the sum Extend gives, by the same addition
        if (by_sum) break;
        continue;
      }
      if (x.max > floor) {
        use(i);
        continue;
      }
      const int k = track_stages ? x.stages : 0;
      if (k >= static_cast<int>(cheapest.size())) cheapest.resize(k + 1, -1);
      if (cheapest[k] < 0 || x.sum < sources[cheapest[k]].label.sum) cheapest[k] = i;
    }
    double best = std::numeric_limits<double>::infinity();
    for (int32_t i : cheapest) {
      if (i >= 0 && sources[i].label.sum < best) {
        best = sources[i].label.sum;
        use(i);
      }
    }
  }
  // The stages still to place have a max of at least rest_max_ms, so raising the label's
  // max to it changes no completion's time; labels below it then compare on sum alone.
  void Clamp(Label& x, double rest_max_ms) const { x.max = std::max(x.max, rest_max_ms); }
  // The Pareto set of `candidates` under Dominates, by one sort and a sweep: in order of
  // sum, a label survives iff no earlier survivor with at most as many stages has a final
  // time at most as large.
  template <typename E>
  void ParetoFilter(std::vector<E>& candidates, std::vector<E>& front) const {
    std::stable_sort(candidates.begin(), candidates.end(), [&](const E& x, const E& y) {
      if (x.label.sum != y.label.sum) return x.label.sum < y.label.sum;
      const double fx = Final(x.label), fy = Final(y.label);
      if (fx != fy) return fx < fy;
      return x.label.stages < y.label.stages;
    });
    if (!track_stages) {
      double best = std::numeric_limits<double>::infinity();
      for (const E& e : candidates) {
        const double f = Final(e.label);
        if (f < best) {
          best = f;
          front.push_back(e);
        }
      }
      return;
    }
    int most = 0;
    for (const E& e : candidates) most = std::max(most, e.label.stages);
    std::vector<double> best_at(most + 1, std::numeric_limits<double>::infinity());
    for (const E& e : candidates) {
      const double f = Final(e.label);
      bool dominated = false;
      for (int k = 0; k <= e.label.stages && !dominated; ++k) dominated = best_at[k] <= f;
      if (dominated) continue;
      best_at[e.label.stages] = f;
      front.push_back(e);
    }
  }
};

// oobleck-sosp23: T = sum c + n_k c_k* + sum_{i >= k*} c_i with k* the last argmax.
// Suffix labels keep m = max, total = sum, tail = sum from the suffix's last argmax to the
// end, q = how many stages that is, and r = stages in the suffix. Prepending a stage moves
// k* only if it is strictly larger than m.
struct Sosp23Objective {
  struct Label {
    double m = -1;
    double total = 0;
    double tail = 0;
    int q = 0;
    int r = 0;
  };
  int microbatches;  // 0: Oobleck's no-M formula
  bool stage_cap;    // M > 0 and a pipeline could have more than M stages

  Label Extend(const Label& x, double c) const {
    Label y = x;
    if (c > x.m) {
      y.m = c;
      y.tail = x.total + c;
      y.q = x.r + 1;
    }
    y.total += c;
    y.r += 1;
    return y;
  }
  // K: the value of the final time that does not depend on a completion whose stages are
  // all <= m (M given: T = sum P + K; no M: T = sum P + 3|P| m + K).
  double K(const Label& x) const {
    const int n = microbatches > 0 ? microbatches - x.q + 1 : 3 * x.r - x.q + 1;
    return x.total + x.tail + n * x.m;
  }
  // Sufficient condition for "a is never worse than b for any non-empty prefix P".
  // Three ranges of max(P): <= m_a (k* stays in both suffixes), > m_b (k* moves into P for
  // both), and in between (k* moves for a only). Requires m_a <= m_b.
  bool Dominates(const Label& a, const Label& b) const {
    if (a.m > b.m) return false;
    return DominatesGivenK(a, K(a), b, K(b));
  }
  // Dominates with K(a) and K(b) already known.
  bool DominatesGivenK(const Label& a, double ka, const Label& b, double kb) const {
    if (a.m > b.m) return false;
    // Under the cap a label with more stages has fewer completions; the formula below
    // needs a.r >= b.r, so only labels with equal r compare.
    if (stage_cap && a.r != b.r) return false;
    if (microbatches > 0) {
      if (ka > kb) return false;
      if (a.r < b.r || 2 * a.total - a.r * b.m > 2 * b.total - b.r * b.m) return false;
      if (a.m < b.m) {
        const double coeff = microbatches + 1 - a.r;
        if (coeff * (coeff >= 0 ? b.m : a.m) + 2 * a.total > kb) return false;
      }
      return true;
    }
    if (3 * a.m + ka > 3 * b.m + kb) return false;
    if (a.r > b.r || 2 * a.total + 2 * a.r * b.m > 2 * b.total + 2 * b.r * b.m) return false;
    if (a.m < b.m && (1 + 2 * a.r) * b.m + 2 * a.total > kb) return false;
    return true;
  }
  // A stage above the source's m becomes the new k*: the extension then depends only on
  // the source's total and r, and per r the smallest total dominates the rest. Fronts are
  // in order of K, not of total, so an extension whose total exceeds primary_limit is
  // skipped, never the scan ended (`by_sum` is ignored).
  template <typename E, typename Use>
  void ForUsefulSources(std::span<const E> sources, double c, double /*rest_max_ms*/,
                        double primary_limit, bool /*by_sum*/, Use use) const {
    // Scratch owned by the calling thread for one call, as `cheapest` in OneFOneBObjective.
    thread_local std::vector<int32_t> best_by_r;
    best_by_r.clear();
    for (int32_t i = 0; i < static_cast<int32_t>(sources.size()); ++i) {
      const Label& x = sources[i].label;
      if (x.total + c > primary_limit) continue;  // the total Extend gives
      if (!(c > x.m)) {
        use(i);
        continue;
      }
      if (x.r >= static_cast<int>(best_by_r.size())) best_by_r.resize(x.r + 1, -1);
      int32_t& best = best_by_r[x.r];
      if (best < 0 || x.total < sources[best].label.total) best = i;
    }
    for (int32_t i : best_by_r) {
      if (i >= 0) use(i);
    }
  }
  // If every completion must hold a stage of at least rest_max > m, k* is sure to move into
  // it and only total and r matter: m, tail and q are set to one canonical value (m just
  // below rest_max, so that any such stage still resets them exactly as it would the true
  // ones), which lets labels that differ only there collapse.
  void Clamp(Label& x, double rest_max_ms) const {
    if (!(rest_max_ms > x.m)) return;
    x.m = std::nextafter(rest_max_ms, -std::numeric_limits<double>::infinity());
    x.tail = x.total;
    x.q = x.r;
  }
  // Candidates in order of a key (K with M, 3m + K without) that Dominates(a, b) never
  // makes larger for a than for b, so a survivor can only be beaten by a later candidate
  // with the same key; ties stay in their given order. K and the key of each label are
  // computed once.
  template <typename E>
  void ParetoFilter(std::vector<E>& candidates, std::vector<E>& front) const {
    struct Keyed {  // compact, so that the scan over kept labels stays in cache
      double key;
      double k;
      double m;
      int32_t index;
    };
    // Scratch owned by the calling thread for one call, as `cheapest` in OneFOneBObjective.
    thread_local std::vector<Keyed> order, kept;
    order.clear();
    for (int32_t i = 0; i < static_cast<int32_t>(candidates.size()); ++i) {
      const double k = K(candidates[i].label);
      const double m = candidates[i].label.m;
      order.push_back({microbatches > 0 ? k : 3 * m + k, k, m, i});
    }
    std::sort(order.begin(), order.end(), [](const Keyed& x, const Keyed& y) {
      return x.key != y.key ? x.key < y.key : x.index < y.index;
    });
    kept.clear();
    for (int32_t i = 0; i < static_cast<int32_t>(front.size()); ++i) {
      const double k = K(front[i].label);
      const double m = front[i].label.m;
      kept.push_back({microbatches > 0 ? k : 3 * m + k, k, m, i});
    }
    for (const Keyed& c : order) {
      const Label& label = candidates[c.index].label;
      bool dominated = false;
      for (size_t j = 0; j < kept.size() && !dominated; ++j) {
        dominated = kept[j].m <= c.m && DominatesGivenK(front[j].label, kept[j].k, label, c.k);
      }
      if (dominated) continue;
      for (size_t j = front.size(); j-- > 0 && kept[j].key == c.key;) {
        if (DominatesGivenK(label, c.k, front[j].label, kept[j].k)) {
          front.erase(front.begin() + j);
          kept.erase(kept.begin() + j);
        }
      }
      front.push_back(candidates[c.index]);
      kept.push_back(c);
    }
  }
  static double Primary(const Label& x) { return x.total; }
  static constexpr bool kSumPlusMaxBound = false;
  // ParetoFilter leaves a front in order of K, not of total.
  static constexpr bool kFrontsByPrimary = false;
  // The exact pass dominates; below a few hundred layers the looser incumbents of guessed
  // rounds cost it more than they save (Ditto exp3: 5.48M -> 5.58M candidates).
  static constexpr int kGuessFromLayers = 256;
  static Label MaxOnly(const Label& x) { return x; }
  double Final(const Label& x) const {
    const int n_k = microbatches > 0 ? microbatches - x.q + 1 : 3 * x.r - x.q + 1;
    return Sosp23TimeMs(x.total, x.m, x.tail, n_k, x.r);
  }
  static int Stages(const Label& x) { return x.r; }
  // No coefficient of prefix.SumPlus is common to most calls (it depends on the label).
  double CommonPrefixCoefficient() const { return std::numeric_limits<double>::quiet_NaN(); }
  // n_k is at least M - S + 1 (M given; S <= max_stages) or 2S + 1 (no M; S >= min_stages).
  // A negative bound on n_k gives no bound at all (-1: do not prune).
  int MinNk(int min_stages, int max_stages) const {
    return microbatches > 0 ? microbatches - max_stages + 1 : 2 * min_stages + 1;
  }
  // T = sum c + n_k m + tail >= (other stages) + c + n_k c + c for any stage c <= m.
  double StageCoefficient(int min_stages, int max_stages, bool may_be_alone) const {
    const int n_min = MinNk(min_stages, max_stages);
    if (n_min < 0) return -1;
    return may_be_alone ? std::min(4, n_min + 2) : n_min + 2;
  }
  template <typename Prefix>
  double StageBound(double compute_ms, double coeff, const Prefix& prefix,
                    double /*rest_max_ms*/) const {
    return coeff * compute_ms + prefix.floor_ms();
  }
  // LowerBound(x, ...) - Primary(x) is at least this for every label x: both of its cases
  // (and Final) are at least total + the prefix's floor, unless M is too small for a bound.
  double PrimaryBound(double /*empty_stage_bound*/, double floor_ms, int max_stages) const {
    if (microbatches > 0 && microbatches + 2 - max_stages < 0) {
      return -std::numeric_limits<double>::infinity();
    }
    return floor_ms;
  }
  // For an incomplete suffix x and the prefix P still to come, either k* stays in x
  // (T = sum P + K(x) [+ 3|P| m without M]) or P holds a stage above m and then, as every
  // stage after k* costs at most m_final, T >= sum P + 2 total + (M + 2 - S_max) m
  // (with M) or sum P + 2 total + (2r + 4) m (without M). The bound is the smaller one.
  // rest_max_ms bounds max P from below; above m it rules out the kept-k* case.
  // The prefix's cost sum is bounded by prefix.Sum(m) when no stage of it exceeds m (k*
  // stays), and jointly with the final max otherwise (prefix.SumPlus).
  template <typename Prefix>
  double LowerBound(const Label& x, const Prefix& prefix, double rest_max_ms, int max_stages,
                    bool complete) const {
    if (complete) return Final(x);
    const double m_final = std::max(x.m, rest_max_ms);
    const bool k_may_stay = rest_max_ms <= x.m;
    const double kept = k_may_stay ? prefix.Sum(x.m) + (microbatches > 0 ? K(x) : 3 * x.m + K(x))
                                   : std::numeric_limits<double>::infinity();
    if (microbatches > 0) {
      const int coeff = microbatches + 2 - max_stages;
      if (coeff < 0) return -std::numeric_limits<double>::infinity();
      return std::min(kept, 2 * x.total + prefix.SumPlus(coeff, m_final));
    }
    return std::min(kept, 2 * x.total + prefix.SumPlus(2 * x.r + 4, m_final));
  }
};

}  // namespace oobleck::template_search

#endif  // OOBLECK_CORE_TEMPLATE_SEARCH_OBJECTIVES_H_
