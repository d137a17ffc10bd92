#include "core/oobleck_instantiation.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/field_path.h"
#include "core/plan/limits.h"
#include "core/status_macros.h"

namespace oobleck {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
// Bounds are compared with this much slack, so that a rounding of the continuous bound
// never prunes a plan that is better by less than an ulp.
constexpr double kBoundSlack = 1e-12;
// A search node costs about as much as this many subset-sum cells (measured: ~10 ns vs ~1).
constexpr int64_t kStepsPerSet = 8;
// A round of the candidate bisection costs about this many cells per term.
constexpr int64_t kStepsPerRoundTerm = 1024;

// The steps one instantiation may take (search nodes and subset-sum cells).
class WorkBudget {
 public:
  explicit WorkBudget(int64_t max_steps) : max_steps_(max_steps) {}
  absl::Status Spend(int64_t steps) {
    used_ += steps;
    if (used_ <= max_steps_) return absl::OkStatus();
    return absl::ResourceExhaustedError(absl::StrCat(
        "the instantiation took more than ", max_steps_,
        " steps (the limit kMaxInstantiationWork, docs/ERRORS.md#limits): fewer templates, "
        "fewer nodes or a smaller global_batch make it smaller"));
  }
  int64_t used() const { return used_; }

 private:
  const int64_t max_steps_;
  int64_t used_ = 0;
};

// The largest k in [0, cap] with t * k <= tau, the products as computed in double (so that
// every candidate makespan is exactly some t * k).
int64_t MaxK(double t, double tau, int64_t cap) {
  if (!(tau >= t)) return 0;
  const double q = std::floor(tau / t);
  int64_t k = q >= static_cast<double>(cap) ? cap : static_cast<int64_t>(q);
  while (k < cap && t * static_cast<double>(k + 1) <= tau) ++k;
  while (k > 0 && t * static_cast<double>(k) > tau) --k;
  return k;
}

// The largest k in [0, cap] with t * k < v.
int64_t CountBelow(double t, double v, int64_t cap) {
  if (!(v > t)) return 0;
  const double q = std::ceil(v / t) - 1;
  int64_t k = q >= static_cast<double>(cap) ? cap : std::max<int64_t>(0, static_cast<int64_t>(q));
  while (k < cap && t * static_cast<double>(k + 1) < v) ++k;
  while (k > 0 && t * static_cast<double>(k) >= v) --k;
  return k;
}

// out[s] = OR over c in [0, span] of in[s - c x]: one template's extra micro-batches c
// (b - 1) added to every reachable sum; a sliding window per residue class mod x, O(size).
void ExtendReach(int64_t x, int64_t span, const std::vector<uint8_t>& in,
                 std::vector<uint8_t>& out) {
  const int64_t n = static_cast<int64_t>(in.size());
  for (int64_t r = 0; r < x && r < n; ++r) {
    int64_t ones = 0;
    int64_t i = 0;
    for (int64_t s = r; s < n; s += x, ++i) {
      ones += in[s];
      if (i > span) ones -= in[s - (span + 1) * x];
      out[s] = ones > 0;
    }
  }
}

// A used template of one instance set, as the batch split sees it.
struct SplitTerm {
  double time_ms = 0;            // T_t
  int64_t instances = 0;         // x_t >= 1
  int64_t max_microbatches = 0;  // the most b_t can be: (B - (P - x_t)) / x_t
};

// The exact batch split of one instance set: the least makespan tau such that b_t in
// [1, floor(tau / T_t)] reach sum_t x_t b_t = B. The answer is a candidate T_t k; the search
// bisects over the candidates (picking one near the middle of those left, by counting) with
// a bounded subset-sum over B - P as the test.
class BatchSplitter {
 public:
  BatchSplitter(std::vector<SplitTerm> terms, int64_t batch, Interrupt& interrupt,
                WorkBudget& budget)
      : terms_(std::move(terms)), batch_(batch), interrupt_(interrupt), budget_(budget) {
    for (const SplitTerm& term : terms_) {
      pipelines_ += term.instances;
      slowest_ms_ = std::max(slowest_ms_, term.time_ms);
    }
    target_ = batch_ - pipelines_;
  }

  // The least makespan <= limit with a split; kInf when there is none.
  absl::StatusOr<double> LeastMakespan(double limit);
  // Per term, b at `makespan` (a makespan LeastMakespan found): the lexicographically
  // largest b in term order.
  absl::StatusOr<std::vector<int>> Split(double makespan);

 private:
  int64_t Span(const SplitTerm& term, double tau) const {
    return MaxK(term.time_ms, tau, term.max_microbatches) - 1;
  }
  int64_t Capacity(double tau) const;
  absl::StatusOr<bool> Feasible(double tau);
  double LargestAtMost(double v) const;
  double SmallestAbove(double v) const;
  int64_t CountUpTo(double lo, double v) const;
  int64_t CountIn(double lo, double hi) const;
  double CandidateNearMiddle(double lo, double hi, int64_t count) const;
  template <typename Pred>
  absl::StatusOr<double> SmallestTrue(double lo, double hi, Pred pred);
  absl::StatusOr<double> Gallop(double lo, double top);

  std::vector<SplitTerm> terms_;
  int64_t batch_;
  int64_t pipelines_ = 0;
  int64_t target_ = 0;  // B - P: what the extra micro-batches must add up to
  double slowest_ms_ = 0;
  Interrupt& interrupt_;
  WorkBudget& budget_;
  std::vector<uint8_t> reach_, next_;
};

int64_t BatchSplitter::Capacity(double tau) const {
  int64_t capacity = 0;
  for (const SplitTerm& term : terms_) {
    capacity += term.instances * MaxK(term.time_ms, tau, term.max_microbatches);
  }
  return capacity;
}

absl::StatusOr<bool> BatchSplitter::Feasible(double tau) {
  if (tau < slowest_ms_ || target_ < 0 || Capacity(tau) < batch_) return false;
  reach_.assign(target_ + 1, 0);
  next_.assign(target_ + 1, 0);
  reach_[0] = 1;
  for (const SplitTerm& term : terms_) {
    if (reach_[target_]) return true;  // the other templates take b = 1
    const int64_t span = Span(term, tau);
    if (span == 0) continue;
    RETURN_IF_ERROR(budget_.Spend(target_ + 1));
    if (interrupt_.Poll()) return Interrupt::Status("instantiation");
    ExtendReach(term.instances, span, reach_, next_);
    reach_.swap(next_);
  }
  return reach_[target_] != 0;
}

double BatchSplitter::LargestAtMost(double v) const {
  double largest = -1;
  for (const SplitTerm& term : terms_) {
    const int64_t k = MaxK(term.time_ms, v, term.max_microbatches);
    if (k >= 1) largest = std::max(largest, term.time_ms * static_cast<double>(k));
  }
  return largest;
}

double BatchSplitter::SmallestAbove(double v) const {
  double smallest = kInf;
  for (const SplitTerm& term : terms_) {
    const int64_t k = MaxK(term.time_ms, v, term.max_microbatches);
    if (k < term.max_microbatches) {
      smallest = std::min(smallest, term.time_ms * static_cast<double>(k + 1));
    }
  }
  return smallest;
}

int64_t BatchSplitter::CountUpTo(double lo, double v) const {
  int64_t count = 0;
  for (const SplitTerm& term : terms_) {
    count += std::max<int64_t>(0, MaxK(term.time_ms, v, term.max_microbatches) -
                                      MaxK(term.time_ms, lo, term.max_microbatches));
  }
  return count;
}

int64_t BatchSplitter::CountIn(double lo, double hi) const {
  int64_t count = 0;
  for (const SplitTerm& term : terms_) {
    count += std::max<int64_t>(0, CountBelow(term.time_ms, hi, term.max_microbatches) -
                                      MaxK(term.time_ms, lo, term.max_microbatches));
  }
  return count;
}

// A candidate in (lo, hi) with about half of the `count` candidates there below it: a
// bisection on the value by counting, then the largest candidate under that value.
double BatchSplitter::CandidateNearMiddle(double lo, double hi, int64_t count) const {
  const int64_t half = (count + 1) / 2;
  double a = lo, b = hi;
  for (int i = 0; i < 64; ++i) {
    const double mid = a + (b - a) / 2;
    if (mid <= a || mid >= b) break;
    (CountUpTo(lo, mid) >= half ? b : a) = mid;
  }
  double best = -1;
  for (const SplitTerm& term : terms_) {
    const int64_t k = std::min(MaxK(term.time_ms, b, term.max_microbatches),
                               CountBelow(term.time_ms, hi, term.max_microbatches));
    const double v = term.time_ms * static_cast<double>(k);
    if (k >= 1 && v > lo) best = std::max(best, v);
  }
  return best > lo ? best : SmallestAbove(lo);
}

// The smallest candidate in (lo, hi] where the monotone `pred` holds; pred(hi) holds.
template <typename Pred>
absl::StatusOr<double> BatchSplitter::SmallestTrue(double lo, double hi, Pred pred) {
  for (int64_t count = CountIn(lo, hi); count > 0; count = CountIn(lo, hi)) {
    // A round counts and bisects over every term (~1 us each): bounded and polled like
    // the subset-sum cells.
    RETURN_IF_ERROR(budget_.Spend(kStepsPerRoundTerm * static_cast<int64_t>(terms_.size())));
    if (interrupt_.Poll()) return Interrupt::Status("instantiation");
    const double mid = CandidateNearMiddle(lo, hi, count);
    ASSIGN_OR_RETURN(const bool holds, pred(mid));
    (holds ? hi : lo) = mid;
  }
  return hi;
}

// From an infeasible candidate `lo`, feasible candidates at doubling distances up to `top`:
// the first that holds bounds the bisection. kInf when none up to `top` does.
absl::StatusOr<double> BatchSplitter::Gallop(double lo, double top) {
  const double base = lo;
  for (double step = slowest_ms_;; step *= 2) {
    double probe = LargestAtMost(std::min(top, base + step));
    if (probe <= lo) probe = SmallestAbove(lo);
    if (probe > top) return kInf;
    ASSIGN_OR_RETURN(const bool holds, Feasible(probe));
    if (holds) {
      return SmallestTrue(lo, probe, [this](double tau) { return Feasible(tau); });
    }
    if (probe >= top) return kInf;
    lo = probe;
  }
}

absl::StatusOr<double> BatchSplitter::LeastMakespan(double limit) {
  if (target_ < 0) return kInf;
  const double top = LargestAtMost(limit);
  if (top < slowest_ms_ || Capacity(top) < batch_) return kInf;
  // The least makespan whose capacity sum_t x_t floor(tau / T_t) reaches B bounds the
  // answer from below, and usually is it. With rate = sum_t x_t / T_t it lies in
  // (B / rate, max(slowest, (B + P) / rate)] (capacity >= tau rate - P), unless caps bind.
  const auto reaches_batch = [this](double tau) -> absl::StatusOr<bool> {
    return tau >= slowest_ms_ && Capacity(tau) >= batch_;
  };
  double rate = 0;
  for (const SplitTerm& term : terms_) rate += term.instances / term.time_ms;
  const double below = batch_ / rate * (1 - 1e-9);
  double above = LargestAtMost(
      std::min(top, std::max(slowest_ms_, (batch_ + pipelines_) / rate * (1 + 1e-9))));
  ASSIGN_OR_RETURN(const bool above_reaches, reaches_batch(above));
  if (!above_reaches) above = top;
  ASSIGN_OR_RETURN(const double floor_ms, SmallestTrue(below, above, reaches_batch));
  ASSIGN_OR_RETURN(const bool holds, Feasible(floor_ms));
  if (holds) return floor_ms;
  return Gallop(floor_ms, top);
}

// Bit tables of the sums the terms from i on reach; the forward pass then gives each term
// in order the most micro-batches the later terms can complete.
absl::StatusOr<std::vector<int>> BatchSplitter::Split(double makespan) {
  const int64_t m = static_cast<int64_t>(terms_.size());
  if (m * (target_ + 1) > kMaxSplitTableBits) {
    return absl::ResourceExhaustedError(
        absl::StrCat("the batch split's table needs ", m, " used templates x ", target_ + 1,
                     " sums bits, over the limit kMaxSplitTableBits = ", kMaxSplitTableBits,
                     " (docs/ERRORS.md#limits): use fewer templates or a smaller global_batch"));
  }
  RETURN_IF_ERROR(budget_.Spend(m * (target_ + 1)));
  const size_t words = static_cast<size_t>(target_ / 64 + 1);
  std::vector<std::vector<uint64_t>> suffix(m + 1, std::vector<uint64_t>(words, 0));
  std::vector<uint8_t> reach(target_ + 1, 0), next(target_ + 1, 0);
  reach[0] = 1;
  for (int64_t i = m; i >= 1; --i) {
    if (i < m) {
      if (interrupt_.Poll()) return Interrupt::Status("instantiation");
      ExtendReach(terms_[i].instances, Span(terms_[i], makespan), reach, next);
      reach.swap(next);
    }
    for (int64_t s = 0; s <= target_; ++s) {
      if (reach[s]) suffix[i][s / 64] |= uint64_t{1} << (s % 64);
    }
  }
  std::vector<int> microbatches(m, 0);
  int64_t left = target_;
  for (int64_t i = 0; i < m; ++i) {
    const int64_t x = terms_[i].instances;
    int64_t c = std::min(Span(terms_[i], makespan), left / x);
    while (c >= 0 && !((suffix[i + 1][(left - c * x) / 64] >> ((left - c * x) % 64)) & 1)) --c;
    if (c < 0) return absl::InternalError("batch split: the makespan has no split");
    RETURN_IF_ERROR(budget_.Spend(std::min(Span(terms_[i], makespan), left / x) - c + 1));
    microbatches[i] = static_cast<int>(c + 1);
    left -= c * x;
  }
  return microbatches;
}

// The split terms of instance counts `instances` (per template; used ones only).
std::vector<SplitTerm> TermsOf(const InstantiationProblem& problem,
                               const std::vector<int>& instances, int64_t pipelines) {
  std::vector<SplitTerm> terms;
  for (size_t t = 0; t < instances.size(); ++t) {
    if (instances[t] == 0) continue;
    const int64_t x = instances[t];
    terms.push_back(
        {problem.templates[t].iteration_time_ms, x, (problem.global_batch - (pipelines - x)) / x});
  }
  return terms;
}

// The answer for `instances` at `makespan` (which has a split).
absl::StatusOr<Instantiation> Answer(const InstantiationProblem& problem,
                                     const std::vector<int>& instances, double makespan,
                                     Interrupt& interrupt, WorkBudget& budget) {
  Instantiation answer;
  answer.instances = instances;
  answer.num_pipelines = std::accumulate(instances.begin(), instances.end(), 0);
  BatchSplitter splitter(TermsOf(problem, instances, answer.num_pipelines), problem.global_batch,
                         interrupt, budget);
  ASSIGN_OR_RETURN(const std::vector<int> used_microbatches, splitter.Split(makespan));
  answer.microbatches.assign(instances.size(), 0);
  size_t used = 0;
  for (size_t t = 0; t < instances.size(); ++t) {
    if (instances[t] == 0) continue;
    answer.microbatches[t] = used_microbatches[used++];
    answer.pipeline_time_ms = std::max(
        answer.pipeline_time_ms, problem.templates[t].iteration_time_ms * answer.microbatches[t]);
  }
  answer.allreduce_ms = problem.allreduce_ms.at(answer.num_pipelines);
  answer.iteration_time_ms = answer.pipeline_time_ms + answer.allreduce_ms;
  return answer;
}

absl::Status ValidateTemplate(const InstantiationTemplate& shape, const std::string& field) {
  if (shape.num_nodes < 1 || shape.num_nodes > kMaxInstantiationNodes) {
    return InvalidValue(field + ".num_nodes", absl::StrCat("in [1, ", kMaxInstantiationNodes, "]"),
                        shape.num_nodes);
  }
  if (shape.num_stages < 1 || shape.num_stages > kMaxInstantiationStages) {
    return InvalidValue(field + ".num_stages",
                        absl::StrCat("in [1, ", kMaxInstantiationStages, "]"), shape.num_stages);
  }
  const double t = shape.iteration_time_ms;
  if (!(t >= kMinTemplateIterationMs && t <= kMaxTemplateIterationMs)) {
    return InvalidValue(field + ".iteration_time_ms", "finite, in [1e-06, 1e+12]", t);
  }
  return absl::OkStatus();
}

absl::Status ValidateInstances(const InstantiationProblem& problem,
                               const std::vector<int>& instances) {
  if (instances.size() != problem.templates.size()) {
    return InvalidField(
        "instances", absl::StrCat(" must list one count per template (", problem.templates.size(),
                                  "), got ", instances.size()));
  }
  int64_t nodes = 0, pipelines = 0;
  for (size_t t = 0; t < instances.size(); ++t) {
    if (instances[t] < 0 || instances[t] > kMaxGlobalBatch) {
      return InvalidValue(absl::StrCat("instances[", t, "]"),
                          absl::StrCat("in [0, ", kMaxGlobalBatch, "]"), instances[t]);
    }
    nodes += int64_t{instances[t]} * problem.templates[t].num_nodes;
    pipelines += instances[t];
  }
  if (pipelines == 0) return InvalidField("instances", " must hold at least one pipeline");
  if (problem.num_nodes != 0 && problem.num_nodes != nodes) {
    return InvalidField("num_nodes", absl::StrCat(" must be 0 or the instances' node count ", nodes,
                                                  " (got ", problem.num_nodes, ")"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateInstantiationProblem(const InstantiationProblem& problem,
                                          const std::vector<int>* instances) {
  const size_t count = problem.templates.size();
  if (count == 0) return InvalidField("templates", " must list at least one template");
  if (count > static_cast<size_t>(kMaxInstantiationTemplates)) {
    return FieldError(absl::StatusCode::kResourceExhausted, "templates",
                      absl::StrCat(" lists ", count, " templates, more than the limit of ",
                                   kMaxInstantiationTemplates));
  }
  for (size_t t = 0; t < count; ++t) {
    RETURN_IF_ERROR(ValidateTemplate(problem.templates[t], absl::StrCat("templates[", t, "]")));
  }
  const int min_nodes = instances != nullptr ? 0 : 1;
  if (problem.num_nodes < min_nodes) {
    return InvalidValue("num_nodes", absl::StrCat(">= ", min_nodes), problem.num_nodes);
  }
  if (problem.num_nodes > kMaxInstantiationNodes) {
    return FieldError(absl::StatusCode::kResourceExhausted, "num_nodes",
                      absl::StrCat(" = ", problem.num_nodes, " is more than the limit of ",
                                   kMaxInstantiationNodes, " nodes"));
  }
  if (problem.global_batch < 1 || problem.global_batch > kMaxGlobalBatch) {
    return InvalidValue("global_batch", absl::StrCat("in [1, ", kMaxGlobalBatch, "]"),
                        problem.global_batch);
  }
  for (const auto& [pipelines, ms] : problem.allreduce_ms) {
    const bool key_ok = pipelines >= 1;
    if (key_ok && ms >= 0 && ms <= kMaxInstantiationAllreduceMs) continue;
    // Named only on error: a table of 2^16 entries is checked in well under a millisecond.
    const std::string field = absl::StrCat("allreduce_across_pipelines_ms[", pipelines, "]");
    if (!key_ok) return InvalidField(field, " key must be >= 1 (a pipeline count)");
    return InvalidValue(field, "finite, in [0, 1e+12]", ms);
  }
  return instances != nullptr ? ValidateInstances(problem, *instances) : absl::OkStatus();
}

absl::StatusOr<Instantiation> SplitOobleckBatch(const InstantiationProblem& problem,
                                                const std::vector<int>& instances,
                                                Interrupt& interrupt, int64_t max_work) {
  RETURN_IF_ERROR(ValidateInstantiationProblem(problem, &instances));
  const int64_t pipelines = std::accumulate(instances.begin(), instances.end(), int64_t{0});
  if (pipelines > problem.global_batch) {
    return FieldError(absl::StatusCode::kFailedPrecondition, "global_batch",
                      absl::StrCat(" = ", problem.global_batch, " is smaller than the ", pipelines,
                                   " pipelines of `instances`: each needs >= 1 micro-batch"));
  }
  if (!problem.allreduce_ms.contains(static_cast<int>(pipelines))) {
    return FieldError(absl::StatusCode::kFailedPrecondition, "allreduce_across_pipelines_ms",
                      absl::StrCat(" has no entry for ", pipelines,
                                   " pipelines (the pipeline count of `instances`)"));
  }
  WorkBudget budget(max_work);
  BatchSplitter splitter(TermsOf(problem, instances, pipelines), problem.global_batch, interrupt,
                         budget);
  ASSIGN_OR_RETURN(const double makespan, splitter.LeastMakespan(kInf));
  if (makespan == kInf) {
    return FieldError(
        absl::StatusCode::kFailedPrecondition, "global_batch",
        absl::StrCat(" = ", problem.global_batch, " cannot be split over instances [",
                     absl::StrJoin(instances, ", "),
                     "]: the pipelines of one template share one micro-batch count b >= 1, "
                     "and no such counts make sum(instances[t] x b_t) equal the batch"));
  }
  ASSIGN_OR_RETURN(Instantiation answer, Answer(problem, instances, makespan, interrupt, budget));
  answer.instance_sets = 1;
  return answer;
}

namespace {

// Branch and bound over instance sets (counts per template, every node used), templates in
// order of best throughput per node first, more instances first. A partial set is bounded by
// max(slowest used T, B / (its rate sum_t x_t / T_t + remaining nodes x the best rate per
// node left)) plus the least all-reduce of any pipeline count it can still reach; a
// complete set by its exact split.
class InstanceSetSearch {
 public:
  InstanceSetSearch(const InstantiationProblem& problem, Interrupt& interrupt, int64_t max_work)
      : problem_(problem), interrupt_(interrupt), budget_(max_work) {}

  absl::StatusOr<Instantiation> Run();

 private:
  absl::Status Prepare();
  bool Fills(size_t depth, int nodes) const {
    return (fills_[depth][nodes / 64] >> (nodes % 64)) & 1;
  }
  absl::Status Visit(size_t depth, int nodes_left, int pipelines, double rate, double slowest);
  absl::Status EvaluateLeaf(int pipelines);
  absl::Status NoPlanError() const;

  const InstantiationProblem& problem_;
  Interrupt& interrupt_;
  WorkBudget budget_;
  std::vector<int> order_;         // template indices, best throughput per node first
  std::vector<double> best_rate_;  // per depth: max over order_[depth..] of 1 / (n T)
  std::vector<int> largest_;       // per depth: the largest n over order_[depth..] (>= 1)
  std::vector<std::vector<uint64_t>> fills_;  // [depth] bit R: order_[depth..] cover R nodes
  std::vector<double> allreduce_;             // per pipeline count; kInf without an entry
  std::vector<double> allreduce_floor_;       // min of allreduce_ over counts >= P
  std::vector<int> counts_;                   // the current set, per template
  std::vector<int> best_counts_;
  double best_ms_ = kInf;
  double best_makespan_ms_ = 0;
  int64_t instance_sets_ = 0;
  int64_t visits_ = 0;  // loop steps of Visit, for Interrupt::Every
  // Why sets were left out (for the error when none is feasible).
  int too_many_pipelines_ = 0;  // an example count > B, 0 if none
  int missing_allreduce_ = 0;   // an example count without an entry, 0 if none
  bool no_split_ = false;
};

absl::Status InstanceSetSearch::Prepare() {
  const int m = static_cast<int>(problem_.templates.size());
  const auto& shapes = problem_.templates;
  order_.resize(m);
  std::iota(order_.begin(), order_.end(), 0);
  std::stable_sort(order_.begin(), order_.end(), [&](int a, int b) {
    return shapes[a].num_nodes * shapes[a].iteration_time_ms <
           shapes[b].num_nodes * shapes[b].iteration_time_ms;
  });
  const int n = problem_.num_nodes;
  best_rate_.assign(m + 1, 0);
  largest_.assign(m + 1, 1);
  fills_.assign(m + 1, std::vector<uint64_t>(n / 64 + 1, 0));
  fills_[m][0] = 1;
  for (int d = m - 1; d >= 0; --d) {
    const InstantiationTemplate& shape = shapes[order_[d]];
    best_rate_[d] = std::max(best_rate_[d + 1], 1.0 / (shape.num_nodes * shape.iteration_time_ms));
    largest_[d] = std::max(d + 1 < m ? largest_[d + 1] : 1, shape.num_nodes);
    RETURN_IF_ERROR(budget_.Spend(n + 1));
    if (interrupt_.Poll()) return Interrupt::Status("instantiation");
    fills_[d] = fills_[d + 1];
    for (int r = shape.num_nodes; r <= n; ++r) {
      if (Fills(d, r - shape.num_nodes)) fills_[d][r / 64] |= uint64_t{1} << (r % 64);
    }
  }
  // A set of P pipelines gives each >= 1 micro-batch and uses >= P nodes.
  const int max_pipelines = std::min(problem_.global_batch, n);
  allreduce_.assign(max_pipelines + 1, kInf);
  for (const auto& [pipelines, ms] : problem_.allreduce_ms) {
    if (pipelines <= max_pipelines) allreduce_[pipelines] = ms;
  }
  allreduce_floor_ = allreduce_;
  for (int p = max_pipelines - 1; p >= 0; --p) {
    allreduce_floor_[p] = std::min(allreduce_floor_[p], allreduce_floor_[p + 1]);
  }
  counts_.assign(m, 0);
  return absl::OkStatus();
}

absl::Status InstanceSetSearch::Visit(size_t depth, int nodes_left, int pipelines, double rate,
                                      double slowest) {
  if (depth == order_.size()) return EvaluateLeaf(pipelines);
  const int t = order_[depth];
  const InstantiationTemplate& shape = problem_.templates[t];
  const int batch = problem_.global_batch;
  for (int x = nodes_left / shape.num_nodes; x >= 0; --x) {
    RETURN_IF_ERROR(budget_.Spend(kStepsPerSet));
    // Every() needs a count that steps by one: the budget's jumps by whole leaves and
    // could skip every multiple of its stride.
    if (interrupt_.Every(++visits_)) return Interrupt::Status("instantiation");
    const int left = nodes_left - x * shape.num_nodes;
    if (!Fills(depth + 1, left)) continue;
    // The fewest pipelines the set can end with.
    const int fewest = pipelines + x + (left + largest_[depth + 1] - 1) / largest_[depth + 1];
    if (fewest > batch) {
      too_many_pipelines_ = fewest;
      continue;
    }
    const double allreduce_floor = allreduce_floor_[fewest];
    if (allreduce_floor == kInf) {
      missing_allreduce_ = fewest;
      continue;
    }
    const double rate_x = rate + x / shape.iteration_time_ms;
    const double slowest_x = x > 0 ? std::max(slowest, shape.iteration_time_ms) : slowest;
    const double bound =
        std::max(slowest_x, batch / (rate_x + left * best_rate_[depth + 1])) * (1 - kBoundSlack) +
        allreduce_floor;
    if (bound >= best_ms_) continue;
    counts_[t] = x;
    RETURN_IF_ERROR(Visit(depth + 1, left, pipelines + x, rate_x, slowest_x));
    counts_[t] = 0;
  }
  return absl::OkStatus();
}

absl::Status InstanceSetSearch::EvaluateLeaf(int pipelines) {
  const double allreduce = allreduce_[pipelines];
  if (allreduce == kInf) {
    missing_allreduce_ = pipelines;
    return absl::OkStatus();
  }
  ++instance_sets_;
  BatchSplitter splitter(TermsOf(problem_, counts_, pipelines), problem_.global_batch, interrupt_,
                         budget_);
  const double limit = best_ms_ == kInf ? kInf : (best_ms_ - allreduce) * (1 + kBoundSlack);
  ASSIGN_OR_RETURN(const double makespan, splitter.LeastMakespan(limit));
  if (makespan == kInf) {
    if (best_ms_ == kInf) no_split_ = true;
    return absl::OkStatus();
  }
  if (makespan + allreduce < best_ms_) {
    best_ms_ = makespan + allreduce;
    best_makespan_ms_ = makespan;
    best_counts_ = counts_;
  }
  return absl::OkStatus();
}

absl::Status InstanceSetSearch::NoPlanError() const {
  const int n = problem_.num_nodes;
  if (!Fills(0, n)) {
    std::vector<int> sizes;
    for (const InstantiationTemplate& shape : problem_.templates) sizes.push_back(shape.num_nodes);
    std::sort(sizes.begin(), sizes.end());
    sizes.erase(std::unique(sizes.begin(), sizes.end()), sizes.end());
    return FieldError(
        absl::StatusCode::kFailedPrecondition, "num_nodes",
        absl::StrCat(" = ", n, ": no set of the templates (of ", absl::StrJoin(sizes, ", "),
                     " nodes) covers exactly that many nodes, and every node "
                     "must be used"));
  }
  std::vector<std::string> reasons;
  if (too_many_pipelines_ > 0) {
    reasons.push_back(absl::StrCat("sets of ", too_many_pipelines_,
                                   " pipelines need more micro-batches than global_batch = ",
                                   problem_.global_batch, " (each pipeline needs >= 1)"));
  }
  if (missing_allreduce_ > 0) {
    reasons.push_back(absl::StrCat("allreduce_across_pipelines_ms has no entry for ",
                                   missing_allreduce_,
                                   " pipelines (nor for other counts the "
                                   "sets need)"));
  }
  if (no_split_) {
    reasons.push_back("some sets cannot split the batch with one micro-batch count per template");
  }
  return absl::FailedPreconditionError(absl::StrCat("no instance set covering num_nodes = ", n,
                                                    " works: ", absl::StrJoin(reasons, "; ")));
}

absl::StatusOr<Instantiation> InstanceSetSearch::Run() {
  RETURN_IF_ERROR(ValidateInstantiationProblem(problem_, nullptr));
  RETURN_IF_ERROR(Prepare());
  if (Fills(0, problem_.num_nodes)) {
    RETURN_IF_ERROR(Visit(0, problem_.num_nodes, 0, 0, 0));
  }
  if (best_ms_ == kInf) return NoPlanError();
  ASSIGN_OR_RETURN(Instantiation answer,
                   Answer(problem_, best_counts_, best_makespan_ms_, interrupt_, budget_));
  answer.instance_sets = instance_sets_;
  return answer;
}

}  // namespace

absl::StatusOr<Instantiation> InstantiateOobleck(const InstantiationProblem& problem,
                                                 Interrupt& interrupt, int64_t max_work) {
  return InstanceSetSearch(problem, interrupt, max_work).Run();
}

}  // namespace oobleck
