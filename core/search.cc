// Exact template search: a label-setting dynamic program over pipeline suffixes.
//
// A state is (a, U, node state): the layers [a, L) are already placed on the node multiset
// U, and the leftmost node of that suffix is either complete ("boundary") or of type t with
// u of its GPUs used ("partial"). Stages are added right to left, so the number of stages
// at or after a stage (which memory needs) and the links on both sides of a stage are known
// when it is placed. Each state keeps the Pareto front of labels that no other label at that
// state can beat for any completion (the dominance rules below are proved in
// docs/ARCHITECTURE.md#search); the terminal state (0, mix, boundary) then holds the optimum
// of every mix at once. Targets of one position are independent, so they are computed in
// parallel, each by one thread in a fixed order: results do not depend on thread count.
#include "core/search.h"

#include <algorithm>
#include <atomic>
#include <climits>
#include <cmath>
#include <cstdint>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "tbb/parallel_for.h"

namespace oobleck {
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
  // Lower bounds for branch and bound. rest_ms bounds the cost sum of the stages still to
  // place; a stage of cost c alone forces T >= M c.
  double StageCoefficient(int /*min_stages*/, int /*max_stages*/, bool /*may_be_alone*/) const {
    return microbatches;
  }
  double LowerBound(const Label& x, double rest_ms, double rest_max_ms, int /*min_stages*/,
                    int /*max_stages*/, bool /*complete*/) const {
    return x.sum + rest_ms + (microbatches - 1) * std::max(x.max, rest_max_ms);
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
    const double ka = K(a), kb = K(b);
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
  template <typename E>
  void ParetoFilter(std::vector<E>& candidates, std::vector<E>& front) const {
    std::stable_sort(candidates.begin(), candidates.end(), [&](const E& x, const E& y) {
      return SortKey(x.label) < SortKey(y.label);
    });
    for (const E& e : candidates) {
      bool dominated = false;
      for (const E& kept : front) {
        if (Dominates(kept.label, e.label, 1)) {
          dominated = true;
          break;
        }
      }
      if (dominated) continue;
      const double key = SortKey(e.label);
      for (size_t i = front.size(); i-- > 0 && SortKey(front[i].label) == key;) {
        if (Dominates(e.label, front[i].label, 1)) front.erase(front.begin() + i);
      }
      front.push_back(e);
    }
  }
  static double Primary(const Label& x) { return x.total; }
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
  // For an incomplete suffix x and the prefix P still to come, either k* stays in x
  // (T = sum P + K(x) [+ 3|P| m without M]) or P holds a stage above m and then, as every
  // stage after k* costs at most m_final, T >= sum P + 2 total + (M + 2 - S_max) m
  // (with M) or sum P + 2 total + (2r + 4) m (without M). The bound is the smaller one.
  // rest_max_ms bounds max P from below; above m it rules out the kept-k* case.
  double LowerBound(const Label& x, double rest_ms, double rest_max_ms, int /*min_stages*/,
                    int max_stages, bool complete) const {
    if (complete) return Final(x);
    const double m_final = std::max(x.m, rest_max_ms);
    const bool k_may_stay = rest_max_ms <= x.m;
    const double kept = k_may_stay ? (microbatches > 0 ? K(x) : 3 * x.m + K(x))
                                   : std::numeric_limits<double>::infinity();
    if (microbatches > 0) {
      const int coeff = microbatches + 2 - max_stages;
      if (coeff < 0) return -std::numeric_limits<double>::infinity();
      return rest_ms + std::min(kept, 2 * x.total + coeff * m_final);
    }
    return rest_ms + std::min(kept, 2 * x.total + (2 * x.r + 4) * m_final);
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
    size_.assign(num_multisets_, 0);
    within_.assign(num_multisets_, false);
    strictly_within_.assign(num_multisets_, false);
    std::vector<int> counts(T, 0);
    for (int u = 0; u < num_multisets_; ++u) {
      Decode(u, counts);
      int size = 0;
      for (int c : counts) size += c;
      size_[u] = size;
      for (const NodeMix& mix : mixes) {
        bool inside = true;
        for (int t = 0; t < T; ++t) inside &= counts[t] <= mix[t];
        if (!inside) continue;
        within_[u] = true;
        if (size < MixSize(mix)) strictly_within_[u] = true;
      }
    }
  }

  int num_multisets() const { return num_multisets_; }
  int num_node_states() const { return num_node_states_; }
  int64_t num_states() const {
    return int64_t{model_.num_layers() + 1} * num_multisets_ * num_node_states_;
  }
  int64_t Index(int a, int u, int ns) const {
    return (int64_t{a} * num_multisets_ + u) * num_node_states_ + ns;
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
  void Decode(int u, std::vector<int>& counts) const {
    for (size_t t = 0; t < counts.size(); ++t) counts[t] = (u / strides_[t]) % (caps_[t] + 1);
  }

  const CostModel& model_;
  std::vector<int> caps_, strides_, partial_offset_;
  int num_multisets_ = 1, num_node_states_ = 1;
  std::vector<int> size_;
  std::vector<bool> within_, strictly_within_;
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
              int beam_width, const std::vector<double>& upper_bounds)
      : model_(model),
        mixes_(mixes),
        objective_(objective),
        space_(model, mixes),
        beam_width_(beam_width) {
    const int L = model.num_layers();
    // Cheapest possible compute of each layer on any type and stage size: a lower bound on
    // the cost sum of the stages that hold a layer range.
    min_compute_prefix_.assign(L + 1, 0);
    for (int l = 0; l < L; ++l) {
      double best = std::numeric_limits<double>::infinity();
      for (int t = 0; t < model.num_types(); ++t) {
        for (int g : model.stage_sizes(t)) best = std::min(best, model.ComputeMs(t, g, l, l + 1));
      }
      min_compute_prefix_[l + 1] = min_compute_prefix_[l] + best;
    }
    // Single-GPU work of each layer on its fastest type. A stage of g GPUs of type t with
    // cost c does at most g * c of its own type's work, which is at most g * c * speed_[t]
    // of the fastest type's (speed_[t] <= 1: the type's best ratio over all layers). So the
    // stages before position a have a max of at least work([0, a)) / (speed-weighted GPUs
    // left for them).
    min_work_prefix_.assign(L + 1, 0);
    std::vector<double> min_work(L);
    for (int l = 0; l < L; ++l) {
      double best = std::numeric_limits<double>::infinity();
      for (int t = 0; t < model.num_types(); ++t) best = std::min(best, model.ComputeMs(t, 1, l, l + 1));
      min_work[l] = best;
      min_work_prefix_[l + 1] = min_work_prefix_[l] + best;
    }
    speed_.assign(model.num_types(), 0);
    for (int t = 0; t < model.num_types(); ++t) {
      for (int l = 0; l < L; ++l) {
        if (min_work[l] > 0) {
          speed_[t] = std::max(speed_[t], min_work[l] / model.ComputeMs(t, 1, l, l + 1));
        }
      }
      if (speed_[t] == 0) speed_[t] = 1;  // no work anywhere: the bound is 0 anyway
    }
    // Per multiset: the loosest incumbent, the most stages and the most weighted GPUs left
    // over of any requested mix that contains it (a state serves all of them).
    bound_.assign(space_.num_multisets(), -std::numeric_limits<double>::infinity());
    max_stages_.assign(space_.num_multisets(), 0);
    capacity_left_.assign(space_.num_multisets(), 0);
    for (size_t i = 0; i < mixes.size(); ++i) {
      const NodeMix& mix = mixes[i];
      int gpus = 0;
      for (int t = 0; t < model.num_types(); ++t) gpus += mix[t] * model.node_type(t).gpus_per_node;
      const double ub = i < upper_bounds.size() ? upper_bounds[i]
                                                : std::numeric_limits<double>::infinity();
      for (int u = 0; u < space_.num_multisets(); ++u) {
        bool inside = true;
        double capacity = 0;
        for (int t = 0; t < model.num_types(); ++t) {
          inside &= space_.count(u, t) <= mix[t];
          capacity += (mix[t] - space_.count(u, t)) * model.node_type(t).gpus_per_node * speed_[t];
        }
        if (!inside) continue;
        capacity_left_[u] = std::max(capacity_left_[u], capacity);
        // Relative slack so that rounding never prunes a label that ties the incumbent.
        bound_[u] = std::max(bound_[u], ub + 1e-9 * std::abs(ub) + 1e-9);
        max_stages_[u] = std::max(max_stages_[u], std::min(L, gpus));
      }
    }
  }

  absl::StatusOr<std::vector<MixResult>> Run(const SearchOptions& options) {
    const int L = model_.num_layers();
    fronts_.assign(space_.num_states(), {});
    fronts_[space_.Index(L, 0, 0)].push_back({Label{}, -1, -1, -1, 0});
    const int num_targets = space_.num_multisets() * space_.num_node_states();
    for (int a = L - 1; a >= 0; --a) {
      if (options.cancelled && options.cancelled()) {
        return absl::CancelledError("template search cancelled");
      }
      tbb::parallel_for(0, num_targets, [&](int target) {
        ComputeTarget(a, target / space_.num_node_states(), target % space_.num_node_states());
      });
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
    const double bound = bound_[u];
    const int min_stages = space_.size(u), max_stages = max_stages_[u];
    const double rest_ms = min_compute_prefix_[a];
    // Weighted GPUs the stages before a may use: other nodes of the largest mix, plus the
    // free GPUs of a partially filled current node.
    double capacity_left = capacity_left_[u];
    if (ns != 0) {
      const auto [t, used] = space_.PartialOf(ns);
      capacity_left += (model_.node_type(t).gpus_per_node - used) * speed_[t];
    }
    if (a > 0 && !(capacity_left > 0)) return;
    const double rest_max_ms = a > 0 ? min_work_prefix_[a] / capacity_left : 0;
    const double break_coeff = objective_.StageCoefficient(min_stages, max_stages, a == 0);

    // Stages [a, l) of g GPUs on type t whose right neighbour state is (l, u_src, ns_src).
    auto pull = [&](int t, int g, int u_src, int ns_src, Link in, bool new_node_at_right) {
      for (int l = a + 1; l <= L; ++l) {
        if (l == L && (!new_node_at_right || u_src != 0)) continue;
        // Compute grows with l, so once one stage cannot beat the incumbent no longer stage
        // can either (with the weakest coefficient any longer stage may have).
        const double compute = model_.ComputeMs(t, g, a, l);
        if (break_coeff >= 0 && break_coeff * compute + rest_ms > bound) break;
        const double coeff = objective_.StageCoefficient(min_stages, max_stages, a == 0 && l == L);
        const int64_t src = space_.Index(l, u_src, ns_src);
        const std::vector<Entry>& sources = fronts_[src];
        if (sources.empty()) continue;
        if (coeff >= 0 &&
            coeff * compute + rest_ms + (min_compute_prefix_[L] - min_compute_prefix_[l]) > bound) {
          continue;
        }
        const int max_after = model_.MaxStagesFromEnd(t, g, a, l);
        if (max_after < 1) continue;
        const Link out = l == L ? Link::kNone
                         : new_node_at_right ? Link::kInterNode
                                             : Link::kIntraNode;
        const double c = model_.StageCostMs(t, g, a, l, in, out);
        objective_.ForUsefulSources(sources, c, rest_max_ms, [&](int32_t i) {
          if (Objective::Stages(sources[i].label) + 1 > max_after) return;
          Label label = objective_.Extend(sources[i].label, c);
          objective_.Clamp(label, rest_max_ms);
          if (objective_.LowerBound(label, rest_ms, rest_max_ms, min_stages, max_stages, a == 0) >
              bound) {
            return;
          }
          if (a > 0) {
            // Most candidates lose to the best two seen so far (by final time and by
            // primary cost); checking those first keeps the sort small.
            for (const Label* s : {&best_final, &best_primary}) {
              if (have_sentinels && objective_.Dominates(*s, label, a)) return;
            }
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
    const int per_position = space_.num_multisets() * space_.num_node_states();
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
      result.infeasible_reason =
          absl::StrCat("internal error: search produced an invalid template: ",
                       evaluated.status().message());
    }
    return result;
  }

  const CostModel& model_;
  const std::vector<NodeMix>& mixes_;
  Objective objective_;
  StateSpace space_;
  int beam_width_;
  std::atomic<int64_t> candidates_{0}, labels_{0};
  std::vector<double> min_compute_prefix_, min_work_prefix_;
  std::vector<double> speed_, capacity_left_;
  std::vector<double> bound_;
  std::vector<int> max_stages_;
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
  std::vector<double> upper_bounds(mixes.size(), std::numeric_limits<double>::infinity());
  {
    LabelSearch<Objective> beam(model, mixes, objective, kBeamWidth, upper_bounds);
    auto incumbents = beam.Run(options);
    if (!incumbents.ok()) return incumbents.status();
    for (size_t i = 0; i < mixes.size(); ++i) {
      if ((*incumbents)[i].feasible) upper_bounds[i] = (*incumbents)[i].best.iteration_time_ms;
    }
  }
  LabelSearch<Objective> exact(model, mixes, objective, 0, upper_bounds);
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
  absl::StatusOr<std::vector<MixResult>> results;
  if (model.kind() == CostModelKind::kOneFOneB) {
    results = BranchAndBound(
        model, mixes, OneFOneBObjective{model.problem().microbatches, model.memory_can_bind()},
        options);
  } else {
    results =
        BranchAndBound(model, mixes, Sosp23Objective{model.problem().microbatches}, options);
  }
  if (!results.ok()) return results;
  for (MixResult& r : *results) {
    if (!r.feasible && r.infeasible_reason.empty()) r.infeasible_reason = ExplainInfeasible(model, r.mix);
  }
  return results;
}

}  // namespace oobleck
