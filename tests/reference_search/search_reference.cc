// The template search as it was before the LLM-shape speed-ups (commit 2da6fdb's
// core/search.cc, unchanged but for this namespace), kept as a test-only oracle: the tests
// compare the new search's optima with it on random mid-size instances
// (tests/core/search_oracle_test.cc). Remove once the new search has earned trust.
#include "tests/reference_search/search_reference.h"

#include <algorithm>
#include <atomic>
#include <climits>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/interrupt.h"
#include "core/search_size.h"
#include "tbb/parallel_for.h"

namespace oobleck::reference_search {
namespace {

// --- Objectives -------------------------------------------------------------------------

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
  bool Dominates(const Label& a, const Label& b, int /*layers_left*/) const {
    return a.sum <= b.sum && Final(a) <= Final(b) && (!track_stages || a.stages <= b.stages);
  }
  double Final(const Label& x) const { return x.sum + (microbatches - 1) * x.max; }
  static double Primary(const Label& x) { return x.sum; }
  static int Stages(const Label& x) { return x.stages; }
  // LowerBound(x) = x.sum + (a nondecreasing function of x.max), the same for a label with
  // only that max (MaxOnly): the mixes that can use a label set a threshold on its sum that
  // falls as its max grows.
  static constexpr bool kSumPlusMaxBound = true;
  static Label MaxOnly(const Label& x) { return {0, x.max, 0}; }
  // Lower bounds for branch and bound. `prefix` bounds the cost sum of the stages still to
  // place (PrefixCost), jointly with the final max; a stage of cost c alone forces T >= M c.
  double StageCoefficient(int /*min_stages*/, int /*max_stages*/, bool /*may_be_alone*/) const {
    return microbatches;
  }
  template <typename Prefix>
  double LowerBound(const Label& x, const Prefix& prefix, double rest_max_ms, int /*min_stages*/,
                    int /*max_stages*/, bool /*complete*/) const {
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
  template <typename E, typename Use>
  void ForUsefulSources(const std::vector<E>& sources, double c, double rest_max_ms,
                        Use use) const {
    const double floor = std::max(c, rest_max_ms);
    thread_local std::vector<int32_t> cheapest;  // per stage count, the min-sum low source
    cheapest.clear();
    for (int32_t i = 0; i < static_cast<int32_t>(sources.size()); ++i) {
      const Label& x = sources[i].label;
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
  bool Dominates(const Label& a, const Label& b, int /*layers_left*/) const {
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
  // Dominates(a, b) implies SortKey(a) <= SortKey(b), so in key order a survivor can only
  // be beaten by a later candidate with the same key.
  // A stage above the source's m becomes the new k*: the extension then depends only on
  // the source's total and r, and per r the smallest total dominates the rest.
  template <typename E, typename Use>
  void ForUsefulSources(const std::vector<E>& sources, double c, double /*rest_max_ms*/,
                        Use use) const {
    thread_local std::vector<int32_t> best_by_r;
    best_by_r.clear();
    for (int32_t i = 0; i < static_cast<int32_t>(sources.size()); ++i) {
      const Label& x = sources[i].label;
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
  double SortKey(const Label& x) const { return microbatches > 0 ? K(x) : 3 * x.m + K(x); }
  // Candidates in key order (ties in their given order); K and the key of each label are
  // computed once.
  template <typename E>
  void ParetoFilter(std::vector<E>& candidates, std::vector<E>& front) const {
    struct Keyed {  // compact, so that the scan over kept labels stays in cache
      double key;
      double k;
      double m;
      int32_t index;
    };
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
  static Label MaxOnly(const Label& x) { return x; }
  double Final(const Label& x) const {
    if (x.r == 1) return 4 * x.m;  // Oobleck's single-stage base case
    const int n_k = microbatches > 0 ? microbatches - x.q + 1 : 3 * x.r - x.q + 1;
    return x.total + n_k * x.m + x.tail;
  }
  static int Stages(const Label& x) { return x.r; }
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
  double LowerBound(const Label& x, const Prefix& prefix, double rest_max_ms, int /*min_stages*/,
                    int max_stages, bool complete) const {
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

// --- State space ------------------------------------------------------------------------

class StateSpace {
 public:
  StateSpace(const CostModel& model, const std::vector<NodeMix>& mixes) : model_(model) {
    const int T = model.num_types();
    caps_.assign(T, 0);
    for (const NodeMix& mix : mixes) {
      for (int t = 0; t < T; ++t) caps_[t] = std::max(caps_[t], mix[t]);
    }
    strides_.assign(T, 1);
    num_multisets_ = 1;
    for (int t = 0; t < T; ++t) {
      strides_[t] = num_multisets_;
      num_multisets_ *= caps_[t] + 1;
    }
    // Node states: 0 = boundary; then per type the partial states u = 1..G-1.
    partial_offset_.assign(T, 0);
    num_node_states_ = 1;
    for (int t = 0; t < T; ++t) {
      partial_offset_[t] = num_node_states_ - 1;
      num_node_states_ += model.node_type(t).gpus_per_node - 1;
    }
    // A multiset is useful if some requested mix contains it; a boundary state left of
    // layer 0 is useful only if some mix strictly contains it (another node must follow).
    // Both follow from the mixes downwards, one node at a time, in O(multisets x types):
    // u is strictly inside a mix iff u plus one node is inside one.
    size_.assign(num_multisets_, 0);
    within_.assign(num_multisets_, false);
    strictly_within_.assign(num_multisets_, false);
    for (const NodeMix& mix : mixes) within_[Encode(mix)] = true;
    std::vector<int> counts = caps_;  // of u, stepped down like an odometer
    for (int u = num_multisets_ - 1; u >= 0; --u) {
      if (u < num_multisets_ - 1) {
        int t = 0;
        for (; counts[t] == 0; ++t) counts[t] = caps_[t];
        --counts[t];
      }
      int size = 0;
      for (int t = 0; t < T; ++t) {
        size += counts[t];
        if (counts[t] < caps_[t] && within_[u + strides_[t]]) strictly_within_[u] = true;
      }
      size_[u] = size;
      if (strictly_within_[u]) within_[u] = true;
    }
    // States exist only on those multisets, numbered densely in increasing code order (a
    // multiset's sub-multisets come first).
    dense_.assign(num_multisets_, -1);
    for (int u = 0; u < num_multisets_; ++u) {
      if (!within_[u]) continue;
      dense_[u] = static_cast<int>(codes_.size());
      codes_.push_back(u);
    }
  }

  // Multisets inside some requested mix: the only ones states and bounds are kept for.
  int num_useful() const { return static_cast<int>(codes_.size()); }
  // The d-th of them (0 <= d < num_useful()) and back; Dense(u) needs within(u).
  int Code(int d) const { return codes_[d]; }
  int Dense(int u) const { return dense_[u]; }
  int num_node_states() const { return num_node_states_; }
  int64_t num_states() const {
    return int64_t{model_.num_layers() + 1} * num_useful() * num_node_states_;
  }
  // The state (a, u, ns); u must be within some mix.
  int64_t Index(int a, int u, int ns) const {
    return (int64_t{a} * num_useful() + dense_[u]) * num_node_states_ + ns;
  }
  int PartialState(int t, int used) const { return 1 + partial_offset_[t] + used - 1; }
  // Inverse of PartialState: (type, used).
  std::pair<int, int> PartialOf(int ns) const {
    for (int t = model_.num_types() - 1; t >= 0; --t) {
      if (ns - 1 >= partial_offset_[t] && model_.node_type(t).gpus_per_node > 1 &&
          ns - 1 < partial_offset_[t] + model_.node_type(t).gpus_per_node - 1) {
        return {t, ns - 1 - partial_offset_[t] + 1};
      }
    }
    return {-1, 0};
  }
  int stride(int t) const { return strides_[t]; }
  int count(int u, int t) const { return (u / strides_[t]) % (caps_[t] + 1); }
  int size(int u) const { return size_[u]; }
  bool within(int u) const { return within_[u]; }
  bool strictly_within(int u) const { return strictly_within_[u]; }
  int Encode(const NodeMix& mix) const {
    int u = 0;
    for (size_t t = 0; t < mix.size(); ++t) u += mix[t] * strides_[t];
    return u;
  }

 private:
  const CostModel& model_;
  std::vector<int> caps_, strides_, partial_offset_;
  int num_multisets_ = 1, num_node_states_ = 1;
  std::vector<int> size_;
  std::vector<bool> within_, strictly_within_;
  std::vector<int> dense_, codes_;
};

// --- Prefix bottleneck bound ------------------------------------------------------------

// A lower bound, for every state, on the largest stage cost among the stages still to be
// placed before it (layers [0, a) on the nodes the state leaves free). It comes from a
// relaxation in which a stage costs only its compute (no transfers; the oobleck-sosp23 cost
// is exactly that), memory is unlimited and a stage may be empty. In the relaxation a cap
// on stage cost is feasible iff greedily stretching every stage as far as the cap allows,
// node after node, reaches a: compute grows with a stage's layer range, so a stage that
// ends later never leaves less for the stages after it. The reach is monotone in the cap,
// so it is tabulated on a grid of caps (fine around the whole mix's bottleneck, where the
// bound decides most), and a state's bound is the largest grid cap whose reach falls short.
class PrefixMaxBound {
 public:
  // Stops early, leaving no bound, when `interrupt` fires (the caller then stops too).
  PrefixMaxBound(const CostModel& model, const StateSpace& space, const std::vector<NodeMix>& mixes,
                 Interrupt& interrupt)
      : model_(model), space_(space) {
    const int T = model.num_types();
    const int L = model.num_layers();
    // The grid is refined around the bottleneck of the largest requested mixes (a mix
    // inside another requested mix can only reach less).
    std::vector<int> maximal;
    for (const NodeMix& mix : mixes) {
      const int code = space.Encode(mix);
      if (!space.strictly_within(code) &&
          std::find(maximal.begin(), maximal.end(), code) == maximal.end()) {
        maximal.push_back(code);
      }
    }
    // The grid: geometric from the cheapest single layer to the costliest whole model, and
    // fine steps just above the bottleneck of the requested mixes themselves.
    double lo = std::numeric_limits<double>::infinity(), hi = 0;
    for (int t = 0; t < T; ++t) {
      for (int g : model.stage_sizes(t)) {
        hi = std::max(hi, model.ComputeMs(t, g, 0, L));
        for (int l = 0; l < L; ++l) {
          const double c = model.ComputeMs(t, g, l, l + 1);
          if (c > 0) lo = std::min(lo, c);
        }
      }
    }
    if (!(lo < hi)) return;  // degenerate costs: no bound (At() returns 0)
    double bottleneck = hi;
    {
      double below = 0, above = hi;  // reach(below) < L <= reach(above) for some mix
      for (int iter = 0; iter < 60 && above - below > 1e-9 * above; ++iter) {
        if (interrupt.Poll()) return;
        const double mid = 0.5 * (below + above);
        const std::vector<int> reach = Reach(mid);
        bool covers = false;
        for (int x : maximal) covers |= reach[space.Dense(x)] >= L;
        (covers ? above : below) = mid;
      }
      bottleneck = below;
    }
    for (double c = lo; c < hi; c *= 1.05) caps_.push_back(c);
    if (bottleneck > 0) {
      for (double c = bottleneck; c < 1.1 * bottleneck && c < hi; c *= 1.001) caps_.push_back(c);
    }
    std::sort(caps_.begin(), caps_.end());
    caps_.erase(std::unique(caps_.begin(), caps_.end()), caps_.end());

    const int K = static_cast<int>(caps_.size());
    const int NS = space.num_node_states();
    const int D = space.num_useful();
    reach_.assign(static_cast<size_t>(D) * NS * K, 0);
    mix_reach_.assign(static_cast<size_t>(D) * K, 0);
    for (int k = 0; k < K; ++k) {
      if (interrupt.Poll()) {
        caps_.clear();
        return;
      }
      const std::vector<int> reach = Reach(caps_[k]);
      for (int d = 0; d < D; ++d) mix_reach_[static_cast<size_t>(d) * K + k] = reach[d];
      for (int d = 0; d < D; ++d) {
        for (int ns = 0; ns < NS; ++ns) {
          int best = reach[d];
          if (ns != 0) {
            const auto [t, used] = space.PartialOf(ns);
            best = NodeReach(t, model.node_type(t).gpus_per_node - used, best, caps_[k]);
          }
          reach_[(static_cast<size_t>(d) * NS + ns) * K + k] = best;
        }
      }
    }
  }

  // Every pipeline over the nodes of `mix` has a stage that costs more than this.
  double ForMix(const NodeMix& mix) const {
    if (caps_.empty()) return 0;
    const int K = static_cast<int>(caps_.size());
    const int* reach = &mix_reach_[static_cast<size_t>(space_.Dense(space_.Encode(mix))) * K];
    const int k =
        static_cast<int>(std::lower_bound(reach, reach + K, model_.num_layers()) - reach) - 1;
    return k < 0 ? 0 : caps_[k];
  }

  // If the layers [0, a) are left for the free nodes `free` (a multiset) and, for a
  // partial node state ns, the GPUs that node has not used, every way to place them has a
  // stage that costs more than this; +inf if no node is left for them.
  double At(int a, int free, int ns) const {
    if (a == 0) return 0;
    if (ns == 0 && free == 0) return std::numeric_limits<double>::infinity();
    if (caps_.empty()) return 0;
    const int K = static_cast<int>(caps_.size());
    const int* reach =
        &reach_[(static_cast<size_t>(space_.Dense(free)) * space_.num_node_states() + ns) * K];
    // The largest k with reach[k] < a (reach grows with k).
    const int k = static_cast<int>(std::lower_bound(reach, reach + K, a) - reach) - 1;
    return k < 0 ? 0 : caps_[k];
  }

 private:
  // The farthest layer a stage of g GPUs of type t starting at p can end at within cap.
  int Extend(int t, int g, int p, double cap) const {
    int lo = p, hi = model_.num_layers();
    while (lo < hi) {
      const int mid = (lo + hi + 1) / 2;
      if (model_.ComputeMs(t, g, p, mid) <= cap) {
        lo = mid;
      } else {
        hi = mid - 1;
      }
    }
    return lo;
  }
  // The farthest layer `gpus` GPUs of one type-t node reach from p, over every split of
  // them into stages in any order.
  int NodeReach(int t, int gpus, int p, double cap) const {
    thread_local std::vector<int> reach;
    reach.assign(gpus + 1, p);
    for (int h = 1; h <= gpus; ++h) {
      for (int g : model_.stage_sizes(t)) {
        if (g <= h) reach[h] = std::max(reach[h], Extend(t, g, reach[h - g], cap));
      }
    }
    return reach[gpus];
  }
  // Per useful node multiset (by dense index), the farthest layer its nodes reach from
  // layer 0, in the best order. A multiset's sub-multisets are useful too, and come first.
  std::vector<int> Reach(double cap) const {
    std::vector<int> reach(space_.num_useful(), 0);
    for (int d = 1; d < space_.num_useful(); ++d) {
      const int u = space_.Code(d);
      for (int t = 0; t < model_.num_types(); ++t) {
        if (space_.count(u, t) == 0) continue;
        reach[d] = std::max(reach[d], NodeReach(t, model_.node_type(t).gpus_per_node,
                                                reach[space_.Dense(u - space_.stride(t))], cap));
      }
    }
    return reach;
  }

  const CostModel& model_;
  const StateSpace& space_;
  std::vector<double> caps_;    // the grid, ascending
  std::vector<int> reach_;      // [(free multiset * node states + ns) * grid + k]
  std::vector<int> mix_reach_;  // [u * grid + k]: reach of the nodes u alone
};

// --- Prefix cost bound ------------------------------------------------------------------

// What the stages before a state can cost, bounded below by a fractional relaxation. Any
// ratio rho(t, g) > 0 per stage size gives one: measure the work of layer l as
// w(l) = min over (t, g) of compute(t, g, l) / rho(t, g); then a stage of g GPUs of type t
// costs at least rho(t, g) per unit of the work it holds, so under a cap C on stage cost it
// holds at most C / rho(t, g) work. rho(t, g) is the median over the layers of its compute
// relative to the cheapest single GPU's: layers with an outlying ratio (a large all-reduce,
// a cheap embedding) then only lose some of their own work, instead of setting the ratio
// of every layer (with the smallest ratio, a 1000-layer 16-node search had 2.3x the
// candidates). A node's GPUs form stages in many ways; for every count j of its stages, the most
// work j stages of it can hold (a knapsack over stage sizes) gives the point (work, j C),
// and the lower convex hull of those points bounds the node's cost sum for any amount of
// work. Summing over the free nodes, filling the cheapest hull segments first, gives S(C):
// no prefix whose stages all cost at most C has a smaller cost sum.
struct HullSegment {
  double length;  // work it holds at cap 1
  double slope;   // cost per unit of work
};

class PrefixCost {
 public:
  PrefixCost() = default;
  PrefixCost(double work, const std::vector<HullSegment>* segments, double floor_ms)
      : work_(work), segments_(segments), floor_ms_(floor_ms) {}

  // min over caps C >= cap_floor of (cost sum of the prefix) + k C, for k >= 0.
  double SumPlus(double k, double cap_floor) const {
    cap_floor = std::max(cap_floor, 0.0);
    double best = k * cap_floor;
    if (segments_ != nullptr && work_ > 0) {
      if (memo_k_ != k) {
        // Sum(C) + k C is convex in C: remember its minimum over all feasible caps; above
        // that cap the function only grows.
        memo_k_ = k;
        memo_ = MinOver(k);
      }
      best = cap_floor <= memo_.first ? memo_.second : SumAt(cap_floor) + k * cap_floor;
    }
    return std::max(best, floor_ms_ + k * cap_floor);
  }
  // Least cost sum of the prefix if no stage of it costs more than cap (+inf: impossible).
  double Sum(double cap) const {
    return std::max(segments_ != nullptr && work_ > 0 ? SumAt(cap) : 0.0, floor_ms_);
  }
  double floor_ms() const { return floor_ms_; }

 private:
  double SumAt(double cap) const {
    if (!(cap > 0)) return std::numeric_limits<double>::infinity();
    const double need = work_ / cap;
    double left = need, total = 0;
    for (const HullSegment& s : *segments_) {
      const double take = std::min(left, s.length);
      total += take * s.slope;
      left -= take;
      if (left <= 0) break;
    }
    // Rounding must never turn a cap that fits exactly into "impossible".
    return left <= 1e-9 * need ? cap * total : std::numeric_limits<double>::infinity();
  }
  // (argmin, min) over feasible caps of Sum(C) + k C. The function is linear between the
  // caps where work / C crosses a segment end, so the minimum is at the smallest feasible
  // cap or at one of those.
  std::pair<double, double> MinOver(double k) const {
    constexpr double kInf = std::numeric_limits<double>::infinity();
    double capacity = 0;
    for (const HullSegment& s : *segments_) capacity += s.length;
    if (!(capacity > 0)) return {kInf, kInf};
    const double lo = work_ / capacity;
    std::pair<double, double> best = {lo, SumAt(lo) + k * lo};
    double end = 0;
    for (const HullSegment& s : *segments_) {
      end += s.length;
      const double cap = work_ / end;
      const double value = SumAt(cap) + k * cap;
      if (cap > lo && value < best.second) best = {cap, value};
    }
    return best;
  }

  double work_ = 0;
  const std::vector<HullSegment>* segments_ = nullptr;
  double floor_ms_ = 0;
  mutable double memo_k_ = std::numeric_limits<double>::quiet_NaN();
  mutable std::pair<double, double> memo_;  // (argmin, min) of Sum(C) + memo_k_ C
};

class PrefixCostBound {
 public:
  PrefixCostBound(const CostModel& model, const StateSpace& space, Interrupt& interrupt)
      : space_(space) {
    const int T = model.num_types();
    const int L = model.num_layers();
    std::vector<double> unit(L, std::numeric_limits<double>::infinity());
    work_prefix_.assign(L + 1, 0);
    floor_prefix_.assign(L + 1, 0);
    for (int l = 0; l < L; ++l) {
      double cheapest = std::numeric_limits<double>::infinity();
      for (int t = 0; t < T; ++t) {
        unit[l] = std::min(unit[l], model.ComputeMs(t, 1, l, l + 1));
        for (int g : model.stage_sizes(t))
          cheapest = std::min(cheapest, model.ComputeMs(t, g, l, l + 1));
      }
      floor_prefix_[l + 1] = floor_prefix_[l] + cheapest;
    }
    // rho[t][g]: the median ratio; none usable (no layer with a positive reference
    // compute) leaves only the floor.
    std::vector<std::vector<double>> rho(T);
    for (int t = 0; t < T; ++t) {
      rho[t].assign(model.node_type(t).gpus_per_node + 1, 0);
      for (int g : model.stage_sizes(t)) {
        std::vector<double> ratios;
        for (int l = 0; l < L; ++l) {
          if (unit[l] > 0) ratios.push_back(model.ComputeMs(t, g, l, l + 1) / unit[l]);
        }
        if (ratios.empty()) return;
        std::nth_element(ratios.begin(), ratios.begin() + ratios.size() / 2, ratios.end());
        const double r = ratios[ratios.size() / 2];
        if (!(r > 0) || !std::isfinite(1 / r)) return;
        rho[t][g] = r;
      }
    }
    for (int l = 0; l < L; ++l) {
      double work = std::numeric_limits<double>::infinity();
      for (int t = 0; t < T; ++t) {
        for (int g : model.stage_sizes(t)) {
          work = std::min(work, model.ComputeMs(t, g, l, l + 1) / rho[t][g]);
        }
      }
      work_prefix_[l + 1] = work_prefix_[l] + work;
    }
    // hulls[t][f]: the convex hull of f GPUs of a type-t node.
    std::vector<std::vector<std::vector<HullSegment>>> hulls(T);
    for (int t = 0; t < T; ++t) {
      const int G = model.node_type(t).gpus_per_node;
      std::vector<std::pair<int, double>> stages;  // (gpus, work held at cap 1)
      for (int g : model.stage_sizes(t)) stages.push_back({g, 1 / rho[t][g]});
      hulls[t].resize(G + 1);
      for (int f = 1; f <= G; ++f) hulls[t][f] = NodeHull(stages, f);
    }
    const int NS = space.num_node_states();
    segments_.assign(static_cast<size_t>(space.num_useful()) * NS, {});
    for (int d = 0; d < space.num_useful(); ++d) {
      if (interrupt.Every(d)) return;
      const int f = space.Code(d);
      for (int ns = 0; ns < NS; ++ns) {
        std::vector<HullSegment>& merged = segments_[static_cast<size_t>(d) * NS + ns];
        for (int t = 0; t < T; ++t) {
          const int n = space.count(f, t);
          if (n <= 0) continue;
          for (HullSegment s : hulls[t][model.node_type(t).gpus_per_node]) {
            merged.push_back({s.length * n, s.slope});
          }
        }
        if (ns != 0) {
          const auto [t, used] = space.PartialOf(ns);
          const int free = model.node_type(t).gpus_per_node - used;
          for (HullSegment s : hulls[t][free]) merged.push_back(s);
        }
        std::stable_sort(
            merged.begin(), merged.end(),
            [](const HullSegment& p, const HullSegment& q) { return p.slope < q.slope; });
      }
    }
  }

  // The layers [0, a) on the free nodes `free` and the unused GPUs of partial node ns.
  PrefixCost At(int a, int free, int ns) const {
    if (segments_.empty()) return PrefixCost(0, nullptr, floor_prefix_[a]);
    return PrefixCost(
        work_prefix_[a],
        &segments_[static_cast<size_t>(space_.Dense(free)) * space_.num_node_states() + ns],
        floor_prefix_[a]);
  }
  // The cheapest compute of layers [0, a) on any type and stage size: a lower bound on the
  // cost sum of whatever stages hold them.
  double floor_ms(int a) const { return floor_prefix_[a]; }

 private:
  // The lower convex hull of the points (most work j stages of f GPUs hold, j).
  static std::vector<HullSegment> NodeHull(const std::vector<std::pair<int, double>>& stages,
                                           int f) {
    // most[j][h]: most work j stages using h GPUs hold (-1: impossible).
    std::vector<std::vector<double>> most(f + 1, std::vector<double>(f + 1, -1));
    most[0][0] = 0;
    for (int j = 1; j <= f; ++j) {
      for (int h = 1; h <= f; ++h) {
        for (const auto& [g, work] : stages) {
          if (g <= h && most[j - 1][h - g] >= 0) {
            most[j][h] = std::max(most[j][h], most[j - 1][h - g] + work);
          }
        }
      }
    }
    std::vector<std::pair<double, double>> points = {{0, 0}};  // (work, cost at cap 1)
    for (int j = 1; j <= f; ++j) {
      double best = -1;
      for (int h = 0; h <= f; ++h) best = std::max(best, most[j][h]);
      if (best > points.back().first) points.push_back({best, j});
    }
    // Lower convex hull from (0, 0) (points are in increasing work and cost).
    std::vector<std::pair<double, double>> hull;
    for (const auto& p : points) {
      while (hull.size() >= 2) {
        const auto& o = hull[hull.size() - 2];
        const auto& q = hull.back();
        // Drop q if it lies on or above the segment o -> p.
        if ((q.second - o.second) * (p.first - o.first) >=
            (p.second - o.second) * (q.first - o.first)) {
          hull.pop_back();
        } else {
          break;
        }
      }
      hull.push_back(p);
    }
    std::vector<HullSegment> segments;
    for (size_t i = 1; i < hull.size(); ++i) {
      const double length = hull[i].first - hull[i - 1].first;
      if (std::isinf(length)) {
        segments.push_back({length, 0});
      } else {
        segments.push_back({length, (hull[i].second - hull[i - 1].second) / length});
      }
    }
    return segments;
  }

  const StateSpace& space_;
  std::vector<double> work_prefix_, floor_prefix_;
  std::vector<std::vector<HullSegment>> segments_;  // per (free multiset, ns), by slope
};

// --- The dynamic program ----------------------------------------------------------------

template <typename Objective>
class LabelSearch {
 public:
  using Label = typename Objective::Label;
  struct Entry {
    Label label;
    int64_t from_state;  // -1 for the empty suffix
    int32_t from_entry;
    int16_t type;
    int16_t gpus;
  };

  // beam_width > 0 keeps only that many labels per state (a heuristic that yields valid
  // templates, used for incumbents); 0 is exact. upper_bounds[i] (may be +inf) is a time
  // some template of mixes[i] achieves: the exact search drops what cannot beat it.
  LabelSearch(const CostModel& model, const std::vector<NodeMix>& mixes, Objective objective,
              int beam_width, const std::vector<double>& upper_bounds,
              const PrefixMaxBound& prefix_max, Interrupt& interrupt)
      : model_(model),
        mixes_(mixes),
        objective_(objective),
        space_(model, mixes),
        prefix_max_(prefix_max),
        prefix_cost_(model, space_, interrupt),
        interrupt_(interrupt),
        beam_width_(beam_width) {
    // Oobleck's formula with M is defined for at most M stages (CostModel::Evaluate).
    if (model.kind() == CostModelKind::kOobleckSosp23 && model.problem().microbatches > 0) {
      stage_cap_ = model.problem().microbatches;
    }
    const int L = model.num_layers();
    compute_prefix_.resize(model.num_types());
    for (int t = 0; t < model.num_types(); ++t) {
      compute_prefix_[t].resize(model.node_type(t).gpus_per_node + 1);
      for (int g : model.stage_sizes(t)) {
        compute_prefix_[t][g].resize(L + 1);
        for (int l = 0; l <= L; ++l) compute_prefix_[t][g][l] = model.ComputeMs(t, g, 0, l);
      }
    }
    // Per multiset u: every requested mix that contains it, with the nodes it leaves for
    // the layers before a state on u and its incumbent. A state serves all of them, and a
    // label is kept only if some of them could still use it.
    targets_.assign(space_.num_useful(), {});
    for (size_t i = 0; i < mixes.size(); ++i) {
      const NodeMix& mix = mixes[i];
      int gpus = 0;
      for (int t = 0; t < model.num_types(); ++t) gpus += mix[t] * model.node_type(t).gpus_per_node;
      const double ub =
          i < upper_bounds.size() ? upper_bounds[i] : std::numeric_limits<double>::infinity();
      const int code = space_.Encode(mix);
      // Every sub-multiset u of the mix, in increasing code order (an odometer on counts).
      std::vector<int> counts(model.num_types(), 0);
      for (int u = 0;;) {
        // Relative slack so that rounding never prunes a label that ties the incumbent.
        targets_[space_.Dense(u)].push_back(
            {code - u, ub + 1e-9 * std::abs(ub) + 1e-9, MixSize(mix), std::min(L, gpus)});
        int t = 0;
        while (t < model.num_types() && counts[t] == mix[t]) {
          u -= counts[t] * space_.stride(t);
          counts[t] = 0;
          ++t;
        }
        if (t == model.num_types()) break;
        ++counts[t];
        u += space_.stride(t);
      }
    }
  }

  // A lower bound on the time of every pipeline over `mix`.
  double RootLowerBound(const NodeMix& mix) const {
    const int L = model_.num_layers();
    int gpus = 0;
    for (int t = 0; t < model_.num_types(); ++t) gpus += mix[t] * model_.node_type(t).gpus_per_node;
    const PrefixCost prefix = prefix_cost_.At(L, space_.Encode(mix), 0);
    return objective_.LowerBound(Label{}, prefix, prefix_max_.ForMix(mix), MixSize(mix),
                                 std::min(L, gpus), false);
  }

  absl::StatusOr<std::vector<MixResult>> Run(const SearchOptions& options) {
    if (interrupt_.stopped()) return Interrupt::Status("template search");
    const int L = model_.num_layers();
    fronts_.assign(space_.num_states(), {});
    fronts_[space_.Index(L, 0, 0)].push_back({Label{}, -1, -1, -1, 0});
    const int NS = space_.num_node_states();
    const int num_targets = space_.num_useful() * NS;
    for (int a = L - 1; a >= 0; --a) {
      if (interrupt_.Poll()) return Interrupt::Status("template search");
      PrepareLayer(a);
      tbb::parallel_for(0, num_targets, [&](int target) {
        if (interrupt_.Every(target)) return;
        ComputeTarget(a, space_.Code(target / NS), target % NS);
      });
      if (interrupt_.stopped()) return Interrupt::Status("template search");
      if (options.progress) options.progress(phase_name(), L - a, L);
    }
    std::vector<MixResult> results;
    results.reserve(mixes_.size());
    for (const NodeMix& mix : mixes_) results.push_back(Extract(mix));
    if (options.stats != nullptr) {
      options.stats->candidates += candidates_;
      options.stats->labels += labels_;
    }
    return results;
  }

 private:
  // The bounds on what the layers [0, a) cost on each free multiset and partial node; they
  // do not depend on the state's own nodes, so the states of a layer share them.
  void PrepareLayer(int a) {
    const int NS = space_.num_node_states();
    layer_.resize(static_cast<size_t>(space_.num_useful()) * NS);
    tbb::parallel_for(0, static_cast<int>(layer_.size()), [&](int i) {
      if (interrupt_.Every(i)) return;
      LayerBound& b = layer_[i];
      b.rest_max_ms = prefix_max_.At(a, space_.Code(i / NS), i % NS);
      b.prefix = prefix_cost_.At(a, space_.Code(i / NS), i % NS);
      b.empty_stage_bound = std::isinf(b.rest_max_ms)
                                ? b.rest_max_ms
                                : objective_.StageBound(0.0, 0.0, b.prefix, b.rest_max_ms);
    });
  }

  void ComputeTarget(int a, int u, int ns) {
    if (!space_.within(u) || space_.size(u) == 0) return;
    if (a > 0 && ns == 0 && !space_.strictly_within(u)) return;
    if (a == 0 && ns != 0) return;
    const int L = model_.num_layers();
    if (L - a < space_.size(u)) return;  // every node needs at least one stage
    std::vector<Entry>& front = fronts_[space_.Index(a, u, ns)];
    thread_local std::vector<Entry> candidates;
    candidates.clear();
    Label best_final{}, best_primary{};
    bool have_sentinels = false;
    const Link in_link_boundary = a == 0 ? Link::kNone : Link::kInterNode;
    // The requested mixes this state can still serve: a mix is dropped when the bounds on
    // what its free nodes must still do before a, plus the cheapest compute of the layers
    // after a, already exceed its incumbent.
    thread_local std::vector<Target> targets;
    targets.clear();
    const double floor_ms = prefix_cost_.floor_ms(a);
    const double suffix_floor_ms = prefix_cost_.floor_ms(L) - floor_ms;
    // Bounds that hold for every served mix at once (the weakest of each part) reject most
    // of what no mix can use before the mixes are tried one by one.
    double rest_max_ms = std::numeric_limits<double>::infinity();
    double loosest_bound = -std::numeric_limits<double>::infinity();
    double weakest_coeff = std::numeric_limits<double>::infinity();
    double most_primary = -std::numeric_limits<double>::infinity();
    int fewest_stages = INT_MAX, most_stages = 0;
    const int NS = space_.num_node_states();
    for (const TargetMix& mix : targets_[space_.Dense(u)]) {
      if (a == 0 ? mix.free != 0 : ns == 0 && mix.free == 0) continue;  // nodes must match
      const LayerBound& b = layer_[static_cast<size_t>(space_.Dense(mix.free)) * NS + ns];
      if (std::isinf(b.rest_max_ms)) continue;  // no node left for the layers before a
      if (b.empty_stage_bound + suffix_floor_ms > mix.bound) continue;
      const Target& target = targets.emplace_back(
          Target{&mix, b.prefix, b.rest_max_ms,
                 objective_.StageCoefficient(mix.min_stages, mix.max_stages, a == 0),
                 objective_.StageCoefficient(mix.min_stages, mix.max_stages, true)});
      rest_max_ms = std::min(rest_max_ms, target.rest_max_ms);
      loosest_bound = std::max(loosest_bound, mix.bound);
      weakest_coeff = std::min({weakest_coeff, target.break_coeff, target.alone_coeff});
      fewest_stages = std::min(fewest_stages, mix.min_stages);
      most_stages = std::max(most_stages, mix.max_stages);
      most_primary = std::max(
          most_primary,
          mix.bound - objective_.PrimaryBound(b.empty_stage_bound, floor_ms, mix.max_stages));
    }
    if (targets.empty()) return;
    const bool may_break = weakest_coeff >= 0;
    const PrefixCost floor_only(0, nullptr, floor_ms);
    // Whether a stage of this compute, whose end leaves `after_ms` of cheapest compute,
    // cannot be part of a pipeline that beats the incumbent of any served mix, by the
    // bound that holds for all of them at once (O(1)).
    auto hopeless_for_all = [&](double compute, double after_ms) {
      return may_break &&
             objective_.StageBound(compute, weakest_coeff, floor_only, rest_max_ms) + after_ms >
                 loosest_bound;
    };
    // The same, mix by mix (a stage that is not alone); the mix that fitted last is tried
    // first.
    size_t stage_fit = 0;
    auto no_target_fits = [&](double compute) {
      if (hopeless_for_all(compute, 0)) return true;
      for (size_t k = 0, i = stage_fit; k < targets.size();
           ++k, i = i + 1 == targets.size() ? 0 : i + 1) {
        const Target& target = targets[i];
        if (target.break_coeff < 0 ||
            objective_.StageBound(compute, target.break_coeff, target.prefix, target.rest_max_ms) <=
                target.mix->bound) {
          stage_fit = i;
          return false;
        }
      }
      return true;
    };
    // no_target_fits is monotone in compute, so known answers settle most calls.
    double ok_up_to = -std::numeric_limits<double>::infinity();
    double too_costly_from = std::numeric_limits<double>::infinity();
    auto too_costly = [&](double compute) {
      if (compute <= ok_up_to) return false;
      if (compute >= too_costly_from) return true;
      if (no_target_fits(compute)) {
        too_costly_from = compute;
        return true;
      }
      ok_up_to = compute;
      return false;
    };
    // Whether some served mix could still use this label; the mix that last did is tried
    // first.
    size_t last_fit = 0;
    // With kSumPlusMaxBound, the largest sum some mix accepts at a given max, G(max), is
    // nonincreasing: known values of G at maxima on both sides of a label's settle most
    // labels without trying the mixes.
    thread_local std::vector<std::pair<double, double>> sum_limits;  // (max, G(max)) by max
    sum_limits.clear();
    auto sum_limit = [&](const Label& label) {
      const Label probe = Objective::MaxOnly(label);
      double limit = -std::numeric_limits<double>::infinity();
      for (const Target& target : targets) {
        const TargetMix& mix = *target.mix;
        limit = std::max(limit,
                         mix.bound - objective_.LowerBound(probe, target.prefix, target.rest_max_ms,
                                                           mix.min_stages, mix.max_stages, a == 0));
      }
      return limit;
    };
    auto some_target_fits = [&](const Label& label) {
      if (Objective::Primary(label) > most_primary ||
          objective_.LowerBound(label, floor_only, rest_max_ms, fewest_stages, most_stages,
                                a == 0) > loosest_bound) {
        return false;
      }
      if constexpr (Objective::kSumPlusMaxBound) {
        if (targets.size() > 2) {
          constexpr size_t kMaxLimits = 64;
          const double max = label.max, sum = Objective::Primary(label);
          auto above = std::lower_bound(
              sum_limits.begin(), sum_limits.end(), max,
              [](const std::pair<double, double>& p, double m) { return p.first < m; });
          if (above != sum_limits.end() && sum <= above->second) return true;
          if (above != sum_limits.end() && above->first == max) return false;
          if (above != sum_limits.begin() && sum > std::prev(above)->second) return false;
          const double limit = sum_limit(label);
          if (sum_limits.size() < kMaxLimits) sum_limits.insert(above, {max, limit});
          return sum <= limit;
        }
      }
      for (size_t k = 0, i = last_fit; k < targets.size();
           ++k, i = i + 1 == targets.size() ? 0 : i + 1) {
        const Target& target = targets[i];
        const TargetMix& mix = *target.mix;
        if (objective_.LowerBound(label, target.prefix, target.rest_max_ms, mix.min_stages,
                                  mix.max_stages, a == 0) <= mix.bound) {
          last_fit = i;
          return true;
        }
      }
      return false;
    };

    // Stages [a, l) of g GPUs on type t whose right neighbour state is (l, u_src, ns_src).
    auto pull = [&](int t, int g, int u_src, int ns_src, Link in, bool new_node_at_right) {
      const std::vector<double>& compute_ms = compute_prefix_[t][g];
      for (int l = a + 1; l <= L; ++l) {
        if (l == L && (!new_node_at_right || u_src != 0)) continue;
        // Compute grows with l, so once one stage cannot beat the incumbent no longer stage
        // can either (with the weakest coefficient any longer stage may have).
        // (From the tables: equal to ComputeMs up to rounding, far inside the bound's slack.)
        const double compute = compute_ms[l] - compute_ms[a];
        if (may_break && too_costly(compute)) break;
        const int64_t src = space_.Index(l, u_src, ns_src);
        const std::vector<Entry>& sources = fronts_[src];
        if (sources.empty()) continue;
        // The labels are tested mix by mix below; here only what no mix can use goes,
        // before its sources are read.
        if (hopeless_for_all(compute, prefix_cost_.floor_ms(L) - prefix_cost_.floor_ms(l))) {
          continue;
        }
        const int max_after = std::min(model_.MaxStagesFromEnd(t, g, a, l), stage_cap_);
        if (max_after < 1) continue;
        const Link out = l == L              ? Link::kNone
                         : new_node_at_right ? Link::kInterNode
                                             : Link::kIntraNode;
        const double c = model_.StageCostMs(t, g, a, l, in, out);
        objective_.ForUsefulSources(sources, c, rest_max_ms, [&](int32_t i) {
          if (Objective::Stages(sources[i].label) + 1 > max_after) return;
          Label label = objective_.Extend(sources[i].label, c);
          objective_.Clamp(label, rest_max_ms);
          if (a > 0) {
            // Most candidates lose to the best two seen so far (by final time and by
            // primary cost); checking those first keeps the sort small.
            for (const Label* s : {&best_final, &best_primary}) {
              if (have_sentinels && objective_.Dominates(*s, label, a)) return;
            }
          }
          if (!some_target_fits(label)) return;
          if (a > 0) {
            if (!have_sentinels || objective_.Final(label) < objective_.Final(best_final)) {
              best_final = label;
            }
            if (!have_sentinels || objective_.Primary(label) < objective_.Primary(best_primary)) {
              best_primary = label;
            }
            have_sentinels = true;
          }
          candidates.push_back({label, src, i, static_cast<int16_t>(t), static_cast<int16_t>(g)});
        });
      }
    };

    if (ns == 0) {
      for (int t = 0; t < model_.num_types(); ++t) {
        if (space_.count(u, t) == 0) continue;
        const int G = model_.node_type(t).gpus_per_node;
        for (int g : model_.stage_sizes(t)) {
          if (g == G) {
            pull(t, g, u - space_.stride(t), 0, in_link_boundary, true);
          } else {
            pull(t, g, u, space_.PartialState(t, G - g), in_link_boundary, false);
          }
        }
      }
    } else {
      const auto [t, used] = space_.PartialOf(ns);
      if (space_.count(u, t) == 0) return;
      for (int g : model_.stage_sizes(t)) {
        if (g == used) {
          pull(t, g, u - space_.stride(t), 0, Link::kIntraNode, true);
        } else if (g < used) {
          pull(t, g, u, space_.PartialState(t, used - g), Link::kIntraNode, false);
        }
      }
    }
    candidates_ += static_cast<int64_t>(candidates.size());
    Reduce(candidates, front, a);
    labels_ += static_cast<int64_t>(front.size());
  }

  // A complete pipeline (no layers left) has no future: only its final time matters, and
  // one entry suffices. Otherwise keep the Pareto front under the objective's dominance
  // (the beam keeps only its best few by final time).
  void Reduce(std::vector<Entry>& candidates, std::vector<Entry>& front, int layers_left) {
    if (candidates.empty()) return;
    if (layers_left == 0) {
      auto best = std::min_element(candidates.begin(), candidates.end(),
                                   [&](const Entry& x, const Entry& y) {
                                     return objective_.Final(x.label) < objective_.Final(y.label);
                                   });
      front.push_back(*best);
      return;
    }
    objective_.ParetoFilter(candidates, front);
    if (beam_width_ > 0 && static_cast<int>(front.size()) > beam_width_) {
      std::stable_sort(front.begin(), front.end(), [&](const Entry& x, const Entry& y) {
        return objective_.Final(x.label) < objective_.Final(y.label);
      });
      front.resize(beam_width_);
    }
    front.shrink_to_fit();
  }

  std::string_view phase_name() const {
    return beam_width_ > 0 ? "incumbent search (layers)" : "exact search (layers)";
  }

  MixResult Extract(const NodeMix& mix) const {
    MixResult result;
    result.mix = mix;
    const int64_t terminal = space_.Index(0, space_.Encode(mix), 0);
    const std::vector<Entry>& front = fronts_[terminal];
    int best = -1;
    double best_value = std::numeric_limits<double>::infinity();
    for (int i = 0; i < static_cast<int>(front.size()); ++i) {
      const double v = objective_.Final(front[i].label);
      if (v < best_value) {
        best_value = v;
        best = i;
      }
    }
    if (best < 0) return result;  // the caller explains why
    PipelineTemplate tmpl;
    tmpl.mix = mix;
    int64_t state = terminal;
    int32_t entry = best;
    int node = -1;
    const int per_position = space_.num_useful() * space_.num_node_states();
    while (fronts_[state][entry].from_state >= 0) {
      const Entry& e = fronts_[state][entry];
      const int a = static_cast<int>(state / per_position);
      const int l = static_cast<int>(e.from_state / per_position);
      const bool starts_node = state % space_.num_node_states() == 0;  // boundary target
      if (starts_node) {
        ++node;
        tmpl.node_order.push_back(e.type);
      }
      Stage stage;
      stage.layer_begin = a;
      stage.layer_end = l;
      stage.node_index = node;
      stage.node_type = e.type;
      stage.gpus = e.gpus;
      tmpl.stages.push_back(stage);
      state = e.from_state;
      entry = e.from_entry;
    }
    auto evaluated = model_.Evaluate(std::move(tmpl));
    if (evaluated.ok()) {
      result.feasible = true;
      result.best = *std::move(evaluated);
    } else {
      // Unreachable for a correct search; surfaced rather than hidden.
      result.infeasible_reason = absl::StrCat(
          "internal error: search produced an invalid template: ", evaluated.status().message());
    }
    return result;
  }

  const CostModel& model_;
  const std::vector<NodeMix>& mixes_;
  Objective objective_;
  StateSpace space_;
  const PrefixMaxBound& prefix_max_;
  PrefixCostBound prefix_cost_;
  Interrupt& interrupt_;
  int beam_width_;
  int stage_cap_ = INT_MAX;  // most stages a pipeline may have
  std::atomic<int64_t> candidates_{0}, labels_{0};
  std::vector<std::vector<std::vector<double>>>
      compute_prefix_;  // [t][g][l]: ComputeMs(t, g, 0, l)
  // A requested mix as seen from the states on one multiset u.
  struct TargetMix {
    int free;        // the mix minus u: the nodes left for the layers before the state
    double bound;    // its incumbent, with a little slack (may be +inf)
    int min_stages;  // fewest and most stages a pipeline over it can have
    int max_stages;
  };
  // The bounds on the layers [0, a) for one (free multiset, partial node state).
  struct LayerBound {
    PrefixCost prefix;
    double rest_max_ms = 0;
    double empty_stage_bound = 0;  // StageBound of a stage of no compute
  };
  // A mix served at one state, with its bounds there.
  struct Target {
    const TargetMix* mix;
    PrefixCost prefix;  // a copy: its memo is per thread
    double rest_max_ms;
    double break_coeff;  // StageCoefficient for a stage that is not alone, and one that is
    double alone_coeff;
  };
  std::vector<std::vector<TargetMix>> targets_;  // per multiset u
  std::vector<LayerBound> layer_;                // per (free multiset, ns) at the current a
  std::vector<std::vector<Entry>> fronts_;
};

// Fewest stages a node of type t can be split into.
int MinStagesPerNode(const CostModel& model, int t) {
  const int G = model.node_type(t).gpus_per_node;
  std::vector<int> best(G + 1, INT_MAX / 2);
  best[0] = 0;
  for (int g = 1; g <= G; ++g) {
    for (int s : model.stage_sizes(t)) {
      if (s <= g) best[g] = std::min(best[g], best[g - s] + 1);
    }
  }
  return best[G];
}

// A narrow beam pass finds good templates fast; their times bound the exact pass, which
// then skips every stage and label that provably cannot beat them.
template <typename Objective>
absl::StatusOr<std::vector<MixResult>> BranchAndBound(const CostModel& model,
                                                      const std::vector<NodeMix>& mixes,
                                                      Objective objective,
                                                      const SearchOptions& options) {
  constexpr int kBeamWidth = 4;
  constexpr double kInf = std::numeric_limits<double>::infinity();
  Interrupt interrupt(options.cancelled);
  const StateSpace space(model, mixes);
  const PrefixMaxBound prefix_max(model, space, mixes, interrupt);
  if (interrupt.stopped()) return Interrupt::Status("template search");
  // Without any bound the beam pass would try every stage of every state. It runs with
  // guessed bounds instead, a little above each mix's lower bound and widening round by
  // round, on the mixes it has not found a template for yet; a mix still without one after
  // the widest guess gets a last unbounded round (which also settles infeasible mixes).
  // On short models an unbounded beam pass is cheap and one pass finds every incumbent;
  // the guessed rounds pay off when stages can span hundreds of layers.
  constexpr int kGuessFromLayers = 256;
  const std::vector<double> slacks = model.num_layers() >= kGuessFromLayers
                                         ? std::vector<double>{0.02, 0.05, 0.1, 0.2, 0.4, -1.0}
                                         : std::vector<double>{-1.0};
  std::vector<double> upper_bounds(mixes.size(), kInf), guesses(mixes.size(), kInf);
  std::vector<bool> found(mixes.size(), false);
  if (slacks.size() > 1) {
    LabelSearch<Objective> probe(model, mixes, objective, kBeamWidth, upper_bounds, prefix_max,
                                 interrupt);
    for (size_t i = 0; i < mixes.size(); ++i) {
      const double lb = probe.RootLowerBound(mixes[i]);
      if (lb > 0 && std::isfinite(lb)) guesses[i] = lb;
    }
  }
  for (double slack : slacks) {
    std::vector<size_t> pending;
    for (size_t i = 0; i < mixes.size(); ++i) {
      if (!found[i]) pending.push_back(i);
    }
    if (pending.empty()) break;
    std::vector<NodeMix> round_mixes;
    std::vector<double> round_bounds;
    for (size_t i : pending) {
      round_mixes.push_back(mixes[i]);
      round_bounds.push_back(slack < 0 ? kInf : guesses[i] * (1 + slack));
    }
    const bool all = pending.size() == mixes.size();
    const StateSpace round_space(model, round_mixes);
    std::optional<PrefixMaxBound> round_max;
    if (!all) round_max.emplace(model, round_space, round_mixes, interrupt);
    LabelSearch<Objective> beam(model, round_mixes, objective, kBeamWidth, round_bounds,
                                all ? prefix_max : *round_max, interrupt);
    auto incumbents = beam.Run(options);
    if (!incumbents.ok()) return incumbents.status();
    for (size_t j = 0; j < pending.size(); ++j) {
      if ((*incumbents)[j].feasible) {
        found[pending[j]] = true;
        upper_bounds[pending[j]] = (*incumbents)[j].best.iteration_time_ms;
      }
    }
  }
  LabelSearch<Objective> exact(model, mixes, objective, 0, upper_bounds, prefix_max, interrupt);
  return exact.Run(options);
}

}  // namespace

std::string ExplainInfeasible(const CostModel& model, const NodeMix& mix) {
  constexpr double kGiB = 1024.0 * 1024 * 1024;
  const auto& types = model.problem().node_types;
  const int L = model.num_layers();
  int min_stages = 0;
  for (int t = 0; t < model.num_types(); ++t) {
    if (mix[t] == 0) continue;
    const int per_node = MinStagesPerNode(model, t);
    if (per_node >= INT_MAX / 2) {
      return absl::StrFormat(
          "the %d GPUs of a %s node cannot be split into stage sizes with in-node all-reduce "
          "data (allowed: 1 and the sizes every layer measured); ask for ring estimates",
          types[t].gpus_per_node, types[t].name);
    }
    min_stages += per_node * mix[t];
  }
  if (min_stages > L) {
    return absl::StrFormat(
        "the mix needs at least %d stages (every GPU busy, stage sizes limited to those with "
        "in-node all-reduce data) but the model has only %d layers",
        min_stages, L);
  }
  if (model.kind() == CostModelKind::kOobleckSosp23 && model.problem().microbatches > 0 &&
      min_stages > model.problem().microbatches) {
    return absl::StrFormat(
        "oobleck-sosp23 with M = %d micro-batches allows at most %d stages, but the mix needs "
        "at least %d (every GPU busy, stage sizes limited to those with in-node all-reduce "
        "data); raise M, use M = 0 (Oobleck's formula without M) or cost model 1f1b",
        model.problem().microbatches, model.problem().microbatches, min_stages);
  }
  if (model.kind() == CostModelKind::kOneFOneB) {
    // A layer that does not fit even alone, as the last stage, on the widest stage of any
    // node type of the mix.
    for (int l = 0; l < L; ++l) {
      bool fits_somewhere = false;
      for (int t = 0; t < model.num_types() && !fits_somewhere; ++t) {
        if (mix[t] == 0) continue;
        fits_somewhere = model.Fits(t, model.stage_sizes(t).back(), l, l + 1, 1);
      }
      if (!fits_somewhere) {
        std::string where;
        for (int t = 0; t < model.num_types(); ++t) {
          if (mix[t] == 0) continue;
          const int g = model.stage_sizes(t).back();
          absl::StrAppendFormat(&where, "%s%s: %.3f GiB per GPU on %d GPU(s) > %.3f GiB",
                                where.empty() ? "" : "; ", types[t].name,
                                model.MemoryBytesPerGpu(t, g, l, l + 1, 1) / kGiB, g,
                                types[t].gpu_memory_bytes / kGiB);
        }
        return absl::StrFormat("layer %d does not fit in GPU memory even alone (%s)", l, where);
      }
    }
    double capacity = 0;
    for (int t = 0; t < model.num_types(); ++t) {
      capacity += mix[t] * types[t].gpus_per_node * types[t].gpu_memory_bytes;
    }
    double needed = 0;
    for (int t = 0; t < model.num_types(); ++t) {
      if (mix[t] == 0) continue;
      // Whole model on one GPU with one micro-batch in flight: k * params + activations.
      const double n = model.MemoryBytesPerGpu(t, 1, 0, L, 1);
      needed = needed == 0 ? n : std::min(needed, n);
    }
    if (needed > capacity) {
      return absl::StrFormat(
          "the mix has %.2f GiB of GPU memory in all but the model needs at least %.2f GiB "
          "(optimizer state x parameters + activations of one micro-batch)",
          capacity / kGiB, needed / kGiB);
    }
    return absl::StrFormat(
        "no layer cut fits: every pipeline over this mix has a stage that exceeds its GPU "
        "memory with min(M=%d, stages after it) micro-batches in flight",
        model.problem().microbatches);
  }
  return "no pipeline over this mix exists";
}

absl::StatusOr<std::vector<MixResult>> SearchTemplates(const CostModel& model,
                                                       const std::vector<NodeMix>& mixes,
                                                       const SearchOptions& options) {
  for (size_t i = 0; i < mixes.size(); ++i) {
    if (static_cast<int>(mixes[i].size()) != model.num_types() || MixSize(mixes[i]) < 1 ||
        *std::min_element(mixes[i].begin(), mixes[i].end()) < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "mixes[", i, "] must have one non-negative count per node type and at least one node"));
    }
  }
  if (mixes.empty()) return std::vector<MixResult>{};
  // Refuse, before allocating anything, what the search could not finish.
  if (absl::Status size = CheckTemplateSearchSize(EstimateTemplateSearch(model, mixes));
      !size.ok()) {
    return size;
  }
  absl::StatusOr<std::vector<MixResult>> results;
  if (model.kind() == CostModelKind::kOneFOneB) {
    results = BranchAndBound(
        model, mixes, OneFOneBObjective{model.problem().microbatches, model.memory_can_bind()},
        options);
  } else {
    const int m = model.problem().microbatches;
    int most_stages = 0;
    for (const NodeMix& mix : mixes) {
      int gpus = 0;
      for (int t = 0; t < model.num_types(); ++t) gpus += mix[t] * model.node_type(t).gpus_per_node;
      most_stages = std::max(most_stages, std::min(gpus, model.num_layers()));
    }
    results = BranchAndBound(model, mixes, Sosp23Objective{m, m > 0 && most_stages > m}, options);
  }
  if (!results.ok()) return results;
  for (MixResult& r : *results) {
    if (!r.feasible && r.infeasible_reason.empty())
      r.infeasible_reason = reference_search::ExplainInfeasible(model, r.mix);
  }
  return results;
}

}  // namespace oobleck::reference_search
