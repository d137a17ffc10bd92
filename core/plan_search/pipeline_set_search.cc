// The exact plan search, SolvePipelineSet and MaxPipelineCount (docs/ARCHITECTURE.md#plan-search).
//
// For a makespan tau every pipeline shape j absorbs k_j(tau) micro-batches (the most x with
// T_j(x) <= tau within its memory limit). A set of pipelines can run the batch within tau
// iff every pipeline absorbs at least one and their sum reaches B. So for a fixed tau the
// question "how many micro-batches can p pipelines over the available nodes absorb" is a
// knapsack over node-type counts with a cardinality, solved by a DP over (used counts u,
// pipelines p). The optimum is a pair (tau, P) with tau one of the finitely many values
// T_j(x): the search finds the smallest feasible tau without regard to P (a cheaper DP over u
// alone; a plan with more than B pipelines can always drop its weakest ones), then branch and
// bound over tau: P_min(tau) never increases with tau and the all-reduce never decreases
// with P, so an interval of tau whose two ends need p_lo >= p_hi pipelines costs at least
// (first tau in it) + allreduce(p_hi), and intervals whose ends agree on P are done.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <queue>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "core/interrupt.h"
#include "core/plan.h"
#include "core/plan_search/cover_ilp.h"
#include "core/plan_search/dp_rows.h"
#include "core/plan_search/load_curve.h"
#include "core/plan_search/packing_lp.h"
#include "core/shown_value.h"
#include "core/status_macros.h"
#include "tbb/blocked_range.h"
#include "tbb/parallel_for.h"

namespace oobleck {
namespace {

using plan_search::AtOrBelow;
using plan_search::kInf;
using plan_search::kLanes;
using plan_search::LoadCurve;
using plan_search::NextAbove;
using plan_search::RowBlock;
using plan_search::SmallestFeasible;

// States of the DP over node-type counts (its tables hold this many rows).
constexpr int64_t kMaxPlanStates = int64_t{1} << 22;
// Sums of absorbed micro-batches saturate here (far above any global batch).
constexpr int kSaturated = 1 << 29;

// Padding per node type of the DP's state space, so that u - mix never leaves the array.
std::vector<int> DpPadding(const PipelineSetProblem& problem) {
  std::vector<int> pad(problem.available.size(), 1);  // at least one: idle steps go to u - e_t
  for (const PipelineShape& s : problem.Shapes()) {
    for (size_t t = 0; t < pad.size(); ++t)
      pad[t] = std::max(pad[t], std::min(s.mix[t], problem.available[t] + 1));
  }
  return pad;
}

// The DP's states, saturated just above kMaxPlanStates.
int64_t DpStateCount(const PipelineSetProblem& problem) {
  const std::vector<int> pad = DpPadding(problem);
  int64_t states = 1;
  for (size_t t = 0; t < pad.size(); ++t) {
    states = std::min(states * (problem.available[t] + 1 + pad[t]), kMaxPlanStates + 1);
  }
  return states;
}

// kAuto keeps the DP where a pass over its table costs about as much as one integer
// program (small clusters, e.g. most replans of the papers' clusters), and where no
// minimum pipeline count asks for the integer program.
constexpr int64_t kMaxAutoDpWork = int64_t{1} << 16;  // states x shapes

// Whether problem.min_pipelines asks for more than every plan has anyway (the fixed
// pipelines, and at least one).
bool AsksMorePipelines(const PipelineSetProblem& problem) {
  return problem.min_pipelines > std::max<int>(static_cast<int>(problem.fixed.size()), 1);
}

bool UsesIlp(const PipelineSetProblem& problem) {
  switch (problem.method) {
    case PlanSearchMethod::kCoverIlp:
      return true;
    case PlanSearchMethod::kNodeCountDp:
      return false;
    case PlanSearchMethod::kAuto:
      break;
  }
  if (AsksMorePipelines(problem)) return true;
  // Prices are rows and weights of the integer program; the DP knows none.
  if (problem.objective == PlanObjective::kCost || problem.max_price_steps >= 0) return true;
  return DpStateCount(problem) * static_cast<int64_t>(std::max<size_t>(problem.Shapes().size(), 1)) >
         kMaxAutoDpWork;
}

// State space of the DPs: u_t in [-pad_t, available_t] per node type, so that u - mix never
// leaves the array (padding states are "impossible"); only real states (u >= 0) are
// computed, in index order, which puts every state after all states it is built from.
class PlanSearch {
 public:
  // A minimum pipeline count (problem.min_pipelines) is a row of the integer program; the
  // node-count DP never sees one (UsesIlp, CheckProblem).
  explicit PlanSearch(const PipelineSetProblem& problem)
      : problem_(problem), model_(problem.model), B_(problem.global_batch) {
    GroupFixed();
    for (const PipelineShape& s : problem.Shapes()) {
      shapes_.emplace_back(model_, &s.stage_costs, s.max_microbatches, B_);
    }
    all_ = fixed_groups_;
    all_.insert(all_.end(), shapes_.begin(), shapes_.end());
    for (const PipelineShape& f : problem.fixed) fixed_price_ += PriceOf(f.mix);
    shape_price_.reserve(problem.Shapes().size());
    for (const PipelineShape& s : problem.Shapes()) shape_price_.push_back(PriceOf(s.mix));
    free_budget_ = problem.max_price_steps < 0 ? -1 : problem.max_price_steps - fixed_price_;
    use_ilp_ = UsesIlp(problem);
    std::vector<int> row_digits;  // T per real state, for the fit lists below
    const int64_t fit_pairs = use_ilp_ ? -1 : FitPairs(problem);
    if (!use_ilp_) BuildStates(fit_pairs >= 0 ? &row_digits : nullptr);
    BuildShapes(fit_pairs, row_digits);
  }

  // The DP's states, u_t in [-pad_t, available_t] per type (DpStateCount of them); with
  // `row_digits`, the counts of every real state too.
  void BuildStates(std::vector<int>* row_digits) {
    const PipelineSetProblem& problem = problem_;
    const int T = static_cast<int>(problem.available.size());
    const std::vector<int> pad = DpPadding(problem);
    strides_.assign(T, 1);
    num_states_ = 1;
    for (int t = 0; t < T; ++t) {
      strides_[t] = num_states_;
      num_states_ *= problem.available[t] + 1 + pad[t];
    }
    int64_t origin = 0;
    for (int t = 0; t < T; ++t) origin += pad[t] * strides_[t];
    full_ = origin + Offset(problem.available);
    // Real states in index order (odometer over u, first type fastest).
    int64_t num_real = 1;
    for (int t = 0; t < T; ++t) num_real *= problem.available[t] + 1;
    real_states_.reserve(num_real);
    real_sizes_.reserve(num_real);
    std::vector<int> digits(T, 0);
    if (row_digits != nullptr) row_digits->reserve(num_real * T);
    int64_t idx = origin;
    int size = 0;
    while (true) {
      real_states_.push_back(idx);
      real_sizes_.push_back(size);
      if (row_digits != nullptr) row_digits->insert(row_digits->end(), digits.begin(), digits.end());
      int t = 0;
      for (; t < T; ++t) {
        if (digits[t] < problem.available[t]) {
          ++digits[t];
          idx += strides_[t];
          ++size;
          break;
        }
        idx -= digits[t] * strides_[t];
        size -= digits[t];
        digits[t] = 0;
      }
      if (t == T) break;
    }
    // Real states grouped by size (number of nodes), for the wavefront of FillRows.
    const int max_size = MixSize(problem.available);
    level_starts_.assign(max_size + 2, 0);
    for (int size_of : real_sizes_) ++level_starts_[size_of + 1];
    for (int l = 1; l <= max_size + 1; ++l) level_starts_[l] += level_starts_[l - 1];
    by_size_.resize(real_states_.size());
    {
      std::vector<size_t> next(level_starts_.begin(), level_starts_.end() - 1);
      for (size_t r = 0; r < real_states_.size(); ++r) by_size_[next[real_sizes_[r]]++] = r;
    }
  }

  // Per shape: whether it fits, its state offset (DP), the shapes within it (submixes_)
  // and, with fit_pairs >= 0, the DP's fit lists.
  void BuildShapes(int64_t fit_pairs, const std::vector<int>& row_digits) {
    const PipelineSetProblem& problem = problem_;
    const int T = static_cast<int>(problem.available.size());
    const bool fit_lists = fit_pairs >= 0;
    total_free_ = MixSize(problem.available);
    min_shape_nodes_ = total_free_ + 1;
    offsets_.reserve(problem.Shapes().size());
    fits_.reserve(problem.Shapes().size());
    for (const PipelineShape& s : problem.Shapes()) {
      min_shape_nodes_ = std::min(min_shape_nodes_, MixSize(s.mix));
      if (!use_ilp_) offsets_.push_back(Offset(s.mix));
      bool fits = true;
      for (int t = 0; t < T; ++t) fits = fits && s.mix[t] <= problem.available[t];
      fits_.push_back(fits);
    }
    const int num_shapes = static_cast<int>(problem.Shapes().size());
    // at_most[t][v]: the shapes with at most v nodes of type t, a bit set of W words (v up
    // to the largest count of a shape or of the available nodes). The shapes within a mix
    // or a state are the AND over its counts.
    const int W = (num_shapes + 63) / 64;
    std::vector<size_t> type_base(T + 1, 0);
    // (Up to the available counts for the fit lists' states, else the shapes' counts.)
    std::vector<int> top(T, 0);
    if (fit_lists) top.assign(problem.available.begin(), problem.available.end());
    for (const PipelineShape& s : problem.Shapes()) {
      for (int t = 0; t < T; ++t) top[t] = std::max(top[t], s.mix[t]);
    }
    for (int t = 0; t < T; ++t) {
      type_base[t + 1] = type_base[t] + (top[t] + 1) * static_cast<size_t>(W);
    }
    std::vector<uint64_t> at_most(type_base[T], 0), fitting(W, 0);
    for (int j = 0; j < num_shapes; ++j) {
      const uint64_t bit = uint64_t{1} << (j % 64);
      if (fits_[j]) fitting[j / 64] |= bit;
      for (int t = 0; t < T; ++t) {
        for (int v = problem.Shapes()[j].mix[t]; v <= top[t]; ++v) {
          at_most[type_base[t] + v * W + j / 64] |= bit;
        }
      }
    }
    auto within = [&](const int* counts, int w) {
      uint64_t bits = ~uint64_t{0};
      for (int t = 0; t < T; ++t) bits &= at_most[type_base[t] + counts[t] * W + w];
      return bits;
    };
    submix_starts_.reserve(num_shapes + 1);
    submix_starts_.push_back(0);
    {
      int64_t count = 0;
      for (int a = 0; a < num_shapes; ++a) {
        for (int w = 0; w < W; ++w) count += std::popcount(within(problem.Shapes()[a].mix.data(), w));
      }
      submixes_.reserve(count);  // (counts each shape itself too)
    }
    for (int a = 0; a < num_shapes; ++a) {
      for (int w = 0; w < W; ++w) {
        uint64_t bits = within(problem.Shapes()[a].mix.data(), w);
        if (w == a / 64) bits &= ~(uint64_t{1} << (a % 64));
        for (; bits != 0; bits &= bits - 1) submixes_.push_back(w * 64 + std::countr_zero(bits));
      }
      submix_starts_.push_back(static_cast<int>(submixes_.size()));
    }
    if (fit_lists) {
      fit_shapes_.reserve(fit_pairs);
      fit_starts_.reserve(real_states_.size() + 1);
      fit_starts_.push_back(0);
      for (size_t r = 0; r < real_states_.size(); ++r) {
        for (int w = 0; w < W; ++w) {
          uint64_t bits = within(&row_digits[r * T], w) & fitting[w];
          for (; bits != 0; bits &= bits - 1)
            fit_shapes_.push_back(w * 64 + std::countr_zero(bits));
        }
        fit_starts_.push_back(static_cast<int>(fit_shapes_.size()));
      }
    }
  }

  absl::StatusOr<PipelineSetSolution> Solve() {
    if (problem_.objective == PlanObjective::kCost) return SolveCost();
    const int num_fixed = static_cast<int>(fixed_.size());
    const double top = TopTau();
    RETURN_IF_ERROR(CheckSolvable(top));
    const int max_pipelines_free = std::min(B_ - num_fixed, MaxFreePipelines());
    int pipelines_bound = max_pipelines_free;  // P_min at the smallest tau is at most this
    auto exact = [&](double tau) -> absl::StatusOr<bool> {
      if (use_ilp_) return IlpFeasible(tau);
      const int need = Need(tau);
      if (need == kImpossible) return false;
      if (need <= 0) return true;
      // The fewest pipelines that absorb enough bound the table's width.
      ASSIGN_OR_RETURN(Unconstrained free, FreeAbsorbUnconstrained(tau, need));
      if (free.absorbed < need) return false;
      pipelines_bound = std::min(max_pipelines_free, free.pipelines);
      return true;
    };
    double bad = -kInf, good = top;
    RETURN_IF_ERROR(Bracket(exact, bad, good));
    ASSIGN_OR_RETURN(const double tau_inf, SmallestFeasible(all_, bad, good, exact));
    if (!use_ilp_ && int64_t{num_states_} * (pipelines_bound + 1) > kMaxTableEntries) {
      return absl::ResourceExhaustedError(absl::StrFormat(
          "the exact plan search over this cluster needs a table of %d node-count states x %d "
          "pipeline counts, more than the limit of %d entries; raise min_nodes_per_pipeline "
          "or plan fewer nodes or node types at once",
          num_states_, pipelines_bound + 1, kMaxTableEntries));
    }

    RETURN_IF_ERROR(SearchFromSmallest(tau_inf, pipelines_bound));
    return Reconstruct();
  }

  // OK when some plan can run the batch at all (FAILED_PRECONDITION naming why not).
  absl::Status CheckSolvable(double top) {
    if (!use_ilp_) return CheckCapacity();
    RETURN_IF_ERROR(CheckBatch());
    ASSIGN_OR_RETURN(const bool fits, IlpFeasible(top));
    return fits ? absl::OkStatus() : NoPlanError();
  }

  // Narrows (bad, good], the makespans where the smallest feasible one lies, before the
  // bisection of Solve: from the LP bound up, or around a replan's hint.
  template <typename Exact>
  absl::Status Bracket(const Exact& exact, double& bad, double& good) {
    const double hint = problem_.makespan_hint_ms;
    // The LP relaxation bounds what the pipelines absorb from above, so no tau below its
    // smallest feasible one is feasible; the exact optimum is usually a few candidates on.
    // (Small clusters skip it: there the exact DP costs less than the LP's bisection.)
    if (use_ilp_ || num_states_ * static_cast<int64_t>(shapes_.size()) > kSmallSearch) {
      auto relaxed = [&](double tau) -> absl::StatusOr<bool> { return RelaxedFeasible(tau); };
      // (good is still the largest candidate here.) A replan's hint narrows the LP's
      // bisection too: its bound is usually within a percent of the old makespan.
      double lp_bad = -kInf, lp_good = good;
      if (hint > 0 && std::isfinite(hint)) RETURN_IF_ERROR(AroundHint(relaxed, lp_bad, lp_good));
      ASSIGN_OR_RETURN(double tau_lp, SmallestFeasible(all_, lp_bad, lp_good, relaxed));
      bad = std::nextafter(tau_lp, -kInf);
      proven_infeasible_ = AtOrBelow(all_, bad);  // the LP bound rules out every tau <= bad
      // Gallop up from the LP bound with growing steps (in ms), then bisect what is left.
      for (double step = std::max(kGallopFirstStep * std::abs(tau_lp), kGallopMinStepMs);;
           step *= kGallopGrowth) {
        const double probe = NextAbove(all_, std::nextafter(bad + step, -kInf));
        if (probe >= good) break;
        ASSIGN_OR_RETURN(bool ok, exact(probe));
        if (ok) {
          good = probe;
          break;
        }
        bad = probe;
      }
    } else if (hint > 0 && std::isfinite(hint)) {
      // Small searches: bracket tau_inf around the hint; only the search order changes.
      RETURN_IF_ERROR(AroundHint(exact, bad, good));
    }
    return absl::OkStatus();
  }

  // Narrows (bad, good] (as SmallestFeasible takes it, for a predicate monotone in tau)
  // around the hint, a replan's old makespan, which is usually within a few percent of the
  // threshold: relative steps that double from it, down while `feasible` holds, up while not.
  template <typename Feasible>
  absl::Status AroundHint(const Feasible& feasible, double& bad, double& good) {
    const double hint = problem_.makespan_hint_ms;
    double probe = AtOrBelow(all_, hint);
    if (probe == -kInf) probe = NextAbove(all_, -kInf);
    ASSIGN_OR_RETURN(bool ok, probe < good ? feasible(probe) : absl::StatusOr<bool>(true));
    if (probe < good && ok) good = probe;
    if (probe < good && !ok) bad = probe;
    for (double f = kHintFirstStep; f < kHintStepLimit; f *= 2) {
      const bool down = bad == -kInf;  // still looking for an infeasible tau below
      const double next =
          down ? AtOrBelow(all_, std::nextafter(good * (1 - std::min(f, kHintMaxStepDown)), -kInf))
               : NextAbove(all_, std::nextafter(bad * (1 + f), -kInf));
      if (down ? next == -kInf : next >= good) break;
      ASSIGN_OR_RETURN(bool at, feasible(next));
      if (at) {
        good = next;
        if (!down) break;
      } else {
        bad = next;
        if (down) break;
      }
    }
    return absl::OkStatus();
  }

  // From the smallest feasible makespan up: its fewest pipelines, then the branch and bound
  // over the makespans whose smaller all-reduce could still win.
  absl::Status SearchFromSmallest(double tau_inf, int pipelines_bound) {
    ASSIGN_OR_RETURN(int p_inf, MinPipelines(tau_inf, pipelines_bound));
    if (p_inf < 0)
      return absl::InternalError("plan search: no pipeline count at the smallest makespan");
    best_ = tau_inf + Allreduce(p_inf);
    best_tau_ = tau_inf;
    best_p_ = p_inf;
    std::swap(best_table_, table_);
    std::swap(best_counts_, ilp_counts_);

    // Candidates at or above best cannot improve on it (the all-reduce is >= 0). The
    // largest one below needs the fewest pipelines of all, which bounds the rest.
    const double top_tau = AtOrBelow(all_, std::nextafter(best_, -kInf));
    if (top_tau > tau_inf) {
      ASSIGN_OR_RETURN(PipelineRange p_top, PipelinesAt(top_tau, p_inf));
      if (p_top.lower >= 0) {  // (else an unsolved integer program: the gap says so)
        RETURN_IF_ERROR(Search(tau_inf, p_inf, top_tau, p_top.lower));
      }
    }
    return absl::OkStatus();
  }

  // Bounds on P_min(tau), the fewest free pipelines within tau: lower <= P_min <= upper
  // (upper <= pcap, an upper bound the caller knows; lower < 0: no plan, which only an
  // unsolved integer program allows). Exact, and the plan considered as a candidate,
  // wherever tau could still beat the incumbent; elsewhere the integer program's LP bound
  // is enough (tau + allreduce(lower) >= best: nothing at tau improves, now or later).
  struct PipelineRange {
    int lower = -1;
    int upper = -1;
  };
  absl::StatusOr<PipelineRange> PipelinesAt(double tau, int pcap) {
    if (use_ilp_) return IlpPipelinesAt(tau, pcap);
    ASSIGN_OR_RETURN(const int p, MinPipelines(tau, pcap));
    if (p < 0 && !inexact_) {
      return absl::InternalError("plan search: P_min increased with the makespan");
    }
    Consider(tau, p);
    return PipelineRange{p, p};
  }
  // PipelinesAt with the integer program: its LP bound first, then branch and bound only
  // until the bound reaches the count at which tau stops beating the incumbent.
  absl::StatusOr<PipelineRange> IlpPipelinesAt(double tau, int pcap) {
    const int64_t enough = PipelinesNotBeating(tau);
    auto settled = [enough](const IlpAnswer& a) {
      return a.status == CoverIlpStatus::kOptimal || a.status == CoverIlpStatus::kInfeasible ||
             a.lower_bound >= enough;
    };
    absl::StatusOr<const IlpAnswer*> solved = SolveIlp(tau, CoverIlpGoal::kRelaxation);
    if (solved.ok() && !settled(**solved)) solved = SolveIlp(tau, CoverIlpGoal::kOptimal, enough);
    if (!solved.ok()) return solved.status();
    const IlpAnswer* a = *solved;
    if (a->status == CoverIlpStatus::kInfeasible) {
      if (!inexact_) return absl::InternalError("plan search: P_min increased with the makespan");
      return PipelineRange{};
    }
    if (HasPlan(*a)) {
      ilp_counts_ = a->counts;
      Consider(tau, static_cast<int>(a->items));
    }
    if (a->status == CoverIlpStatus::kOptimal) {
      return PipelineRange{static_cast<int>(a->items), static_cast<int>(a->items)};
    }
    // Not beating the incumbent (or an integer program at its node limit: the gap says so).
    const int lower = static_cast<int>(std::clamp<int64_t>(a->lower_bound, 0, MaxAllreduceIndex()));
    const int upper = HasPlan(*a) ? static_cast<int>(std::min<int64_t>(pcap, a->items)) : pcap;
    return PipelineRange{lower, std::max(lower, upper)};
  }
  // The fewest free pipelines with which tau does not beat the incumbent (all-reduce never
  // decreases with the count); INT64_MAX when no count is that many.
  int64_t PipelinesNotBeating(double tau) const {
    for (int64_t p = 0; p <= MaxAllreduceIndex(); ++p) {
      if (tau + Allreduce(static_cast<int>(p)) >= best_) return p;
    }
    return INT64_MAX;
  }
  // The largest free pipeline count the all-reduce table covers.
  int64_t MaxAllreduceIndex() const {
    return static_cast<int64_t>(problem_.allreduce_ms->size()) - 1 -
           static_cast<int64_t>(fixed_.size());
  }

  // The most pipelines (kept + chosen) of any solution, capped at `at_most` (a plan of
  // more answers at_most, whether or not one of exactly at_most exists); 0 when there is
  // none. min_pipelines plays no part.
  absl::StatusOr<int> MaxTotalPipelines(int at_most) {
    // No plan at all (FAILED_PRECONDITION): none has any pipeline.
    if (absl::Status s = use_ilp_ ? CheckBatch() : CheckCapacity(); !s.ok()) {
      if (s.code() == absl::StatusCode::kFailedPrecondition) return 0;
      return s;
    }
    if (use_ilp_) {
      ASSIGN_OR_RETURN(const bool fits, IlpFeasible(TopTau()));
      if (!fits && proven_infeasible_ >= TopTau()) return 0;
      if (!fits) return IlpUndecided();
    }
    const int num_fixed = static_cast<int>(fixed_.size());
    if (at_most <= num_fixed) return at_most;  // the kept pipelines run the batch already
    const int pmax = std::min(B_ - num_fixed, MaxFreePipelines());
    const int want = std::min(pmax, at_most - num_fixed);
    int p = -1;
    if (use_ilp_) {
      ASSIGN_OR_RETURN(p, IlpMostPipelines(want, pmax));
    } else {
      // Every count up to pmax: the table answers "exactly p" per p.
      RETURN_IF_ERROR(CheckTableSize(pmax));
      ASSIGN_OR_RETURN(p, MostPipelines(TopTau(), pmax));
      p = std::min(p, want);
    }
    return p < 0 ? 0 : num_fixed + p;
  }

 private:
  // ---- checks before the search ----
  // FAILED_PRECONDITION when no plan exists at all: the batch, the kept pipelines, or the
  // memory of every pipeline together cannot hold the batch.
  absl::Status CheckCapacity() {
    RETURN_IF_ERROR(CheckBatch());
    int64_t capacity = 0;
    for (const LoadCurve& c : fixed_) capacity += c.limit();
    ASSIGN_OR_RETURN(Unconstrained free, FreeAbsorbUnconstrained(TopTau(), kSaturated));
    capacity += free.absorbed;
    if (capacity < B_) {
      return absl::FailedPreconditionError(absl::StrFormat(
          "the available pipelines hold at most %d micro-batches per iteration within GPU "
          "memory, fewer than the global batch of %d",
          capacity, B_));
    }
    return absl::OkStatus();
  }
  // The checks that need no search: the batch, the kept pipelines, any shape at all.
  absl::Status CheckBatch() const {
    const int num_fixed = static_cast<int>(fixed_.size());
    if (B_ < 1) return absl::InvalidArgumentError("global_batch must be >= 1");
    if (num_fixed > B_) {
      return absl::FailedPreconditionError(
          absl::StrFormat("the plan keeps %d pipelines but the global batch has only %d "
                          "micro-batches (every pipeline needs at least one)",
                          num_fixed, B_));
    }
    for (int f = 0; f < num_fixed; ++f) {
      if (fixed_[f].limit() < 1) {
        return absl::FailedPreconditionError(
            absl::StrCat("kept pipeline ", f, " cannot hold even one micro-batch in GPU memory"));
      }
    }
    if (num_fixed == 0 && shapes_.empty()) {
      return absl::FailedPreconditionError("no pipeline template fits the available nodes");
    }
    return absl::OkStatus();
  }
  // Largest useful tau: every pipeline at its limit.
  double TopTau() const {
    double top = -kInf;
    for (const LoadCurve& c : all_) {
      if (c.limit() >= 1) top = std::max(top, c.Time(c.limit()));
    }
    return top;
  }
  absl::Status CheckTableSize(int pcap) const {
    if (int64_t{num_states_} * (pcap + 1) <= kMaxTableEntries) return absl::OkStatus();
    return absl::ResourceExhaustedError(absl::StrFormat(
        "the exact plan search over this cluster needs a table of %d node-count states x %d "
        "pipeline counts, more than the limit of %d entries; raise min_nodes_per_pipeline "
        "or plan fewer nodes or node types at once",
        num_states_, pcap + 1, kMaxTableEntries));
  }

  // The most free pipelines (<= pcap) that run the batch within tau; -1 if none.
  absl::StatusOr<int> MostPipelines(double tau, int pcap) {
    const int need = Need(tau);
    if (need == kImpossible) return -1;
    const int none = need <= 0 ? 0 : -1;  // what zero free pipelines achieve
    pcap = std::min(pcap, MaxFreePipelines());
    if (pcap < 1) return none;
    const int cap = std::max(need, 1);  // every free pipeline takes a micro-batch
    RETURN_IF_ERROR(FillTable(tau, pcap, cap));
    for (int p = pcap; p >= 1; --p) {
      if (table_.At(full_, p) >= cap) return p;
    }
    return none;
  }

  static constexpr int kImpossible = std::numeric_limits<int>::max();
  // The search keeps two tables (the current one and the best one's): at most 64 MiB each
  // as int32. 128 nodes of 3 types with up to 128 pipelines need 10.7M entries.
  static constexpr int64_t kMaxTableEntries = int64_t{1} << 24;
  // The int16 table holds sums up to this (with room for one addition before clamping).
  static constexpr int kMaxInt16Need = (1 << 14) - 1;
  // Below this many (state, shape) pairs a DP pass costs microseconds.
  static constexpr int64_t kSmallSearch = 20000;
  // Bracket's gallop up from the LP bound: the first step is this fraction of the bound (at
  // least kGallopMinStepMs), and each step kGallopGrowth times the last. Small first steps
  // reach an optimum a few candidates above the bound in few exact passes; the growth keeps
  // the passes logarithmic in the distance when it lies far above.
  static constexpr double kGallopFirstStep = 1e-6;
  static constexpr double kGallopMinStepMs = 1e-9;
  static constexpr double kGallopGrowth = 4;
  // Bracket around a replan's hint: relative steps from kHintFirstStep (a replan's old
  // makespan is usually within a few percent), doubling while below kHintStepLimit (far
  // past any candidate); a step down takes at most kHintMaxStepDown of the makespan, so the
  // probe stays positive.
  static constexpr double kHintFirstStep = 0.01;
  static constexpr double kHintStepLimit = 1e6;
  static constexpr double kHintMaxStepDown = 0.999;
  // One-block tables up to this many entries (1 MiB as int16).
  static constexpr int64_t kMaxOneBlockEntries = int64_t{1} << 19;
  // Table fills below this many row-element updates stay on one thread.
  static constexpr int64_t kParallelWork = int64_t{1} << 24;
  // Table work between two polls of the interrupt: about 0.2 ms in a release build, and
  // still well under the 100 ms a cancelled search may run on in the sanitizer and
  // fuzzing builds, which are 20-50x slower. (A poll reads the clock.)
  static constexpr int64_t kPollWork = int64_t{1} << 18;

  // The number of (state, shape) pairs where the shape fits within the state, or -1 when
  // fit lists do not pay: they do when they are small and leave out a good part of the
  // pairs, in small clusters (warm replans) where most states are too small for most shapes.
  static int64_t FitPairs(const PipelineSetProblem& problem) {
    constexpr int64_t kMaxFitPairs = int64_t{1} << 18;
    int64_t all = 1, fitting = 0;
    for (int count : problem.available) all *= count + 1;
    all *= static_cast<int64_t>(problem.Shapes().size());
    for (const PipelineShape& s : problem.Shapes()) {
      int64_t states = 1;  // u >= mix within the available counts
      for (size_t t = 0; t < problem.available.size(); ++t) {
        states *= std::max(0, problem.available[t] - s.mix[t] + 1);
      }
      fitting += states;
      if (fitting > kMaxFitPairs) return -1;
    }
    return fitting * 4 <= all * 3 ? fitting : -1;
  }

  int64_t Offset(const NodeMix& mix) const {
    int64_t off = 0;
    for (size_t t = 0; t < mix.size(); ++t) off += mix[t] * strides_[t];
    return off;
  }
  int MaxFreePipelines() const { return shapes_.empty() ? 0 : total_free_ / min_shape_nodes_; }
  double Allreduce(int free_pipelines) const {
    return (*problem_.allreduce_ms)[fixed_.size() + free_pipelines];
  }
  void Consider(double tau, int p) {
    if (p < 0) return;
    const double value = tau + Allreduce(p);
    if (value < best_) {
      best_ = value;
      best_tau_ = tau;
      best_p_ = p;
      std::swap(best_table_, table_);  // the table MinPipelines just filled at tau
      std::swap(best_counts_, ilp_counts_);  // or the integer program's answer
    }
  }
  absl::Status Cancelled() const {
    return interrupt_.Poll() ? Interrupt::Status("plan search") : absl::OkStatus();
  }
  // Micro-batches the free pipelines must absorb at tau; kImpossible if a kept pipeline
  // cannot take even one. (Over the groups of equal kept pipelines: the same sum.)
  int Need(double tau) const {
    int64_t need = B_;
    for (size_t g = 0; g < fixed_groups_.size(); ++g) {
      const int k = fixed_groups_[g].Absorb(tau);
      if (k == 0) return kImpossible;
      need -= int64_t{k} * fixed_multiplicity_[g];
    }
    return static_cast<int>(std::max<int64_t>(need, 0));
  }
  // fixed_, and its curves grouped by value (plan_search::LoadLess): a Replan keeps hundreds
  // of pipelines of a few dozen templates, and the searches ask every kept curve at every
  // makespan they try. all_ holds each group once: it only answers the smallest or largest
  // time of any curve.
  void GroupFixed() {
    std::map<plan_search::LoadLess::Key, int, plan_search::LoadLess> group_of;
    for (const PipelineShape& f : problem_.fixed) {
      fixed_.emplace_back(model_, &f.stage_costs, f.max_microbatches, B_);
      auto [it, inserted] = group_of.emplace(
          plan_search::LoadLess::Key{&f.stage_costs, f.max_microbatches},
          static_cast<int>(fixed_groups_.size()));
      if (inserted) {
        fixed_groups_.push_back(fixed_.back());
        fixed_multiplicity_.push_back(0);
      }
      ++fixed_multiplicity_[it->second];
    }
  }

  // ---- the integer program per makespan (use_ilp_) ----------------------------------

  struct IlpAnswer {
    CoverIlpStatus status = CoverIlpStatus::kInfeasible;
    int64_t items = 0;
    int64_t objective = 0;        // items, or price when by price
    int64_t lower_bound = 0;      // on the objective
    int64_t price = 0;            // of the free pipelines' nodes, in price steps
    std::vector<int64_t> counts;  // per shape
    CoverIlpGoal goal = CoverIlpGoal::kOptimal;  // how far it was solved
  };
  // Whether `a` answers a question asked with `goal`: a proven answer answers every one, a
  // plan answers "is there one", and every answer has a proven lower bound.
  static bool Answers(const IlpAnswer& a, CoverIlpGoal goal) {
    if (a.status == CoverIlpStatus::kOptimal || a.status == CoverIlpStatus::kInfeasible) return true;
    switch (goal) {
      case CoverIlpGoal::kRelaxation:
        return true;
      case CoverIlpGoal::kFirstFeasible:
        return HasPlan(a) || a.goal != CoverIlpGoal::kRelaxation;
      case CoverIlpGoal::kOptimal:
        return a.goal == CoverIlpGoal::kOptimal;
    }
    return false;
  }
  // The fewest free pipelines that run the batch within tau (cover_ilp.h with one row per
  // node type, and one for a budget), solved as far as `goal` asks, memoised per tau: the
  // search asks for some makespans twice, a yes/no question first and the count later.
  // (stop_at_bound: see CoverIlpLimits; an answer stopped there counts as a bound.)
  absl::StatusOr<const IlpAnswer*> SolveIlp(double tau, CoverIlpGoal goal,
                                            int64_t stop_at_bound = INT64_MAX) {
    auto [it, inserted] = ilp_memo_.try_emplace(tau);
    if (!inserted && Answers(it->second, goal)) return &it->second;
    absl::StatusOr<IlpAnswer> answer =
        RunIlp(tau, /*by_price=*/false, std::max<int64_t>(0, B_ - int64_t{FixedCount()}),
               free_budget_, goal, stop_at_bound);
    if (!answer.ok()) {
      if (inserted) ilp_memo_.erase(it);
      return answer.status();
    }
    it->second = *std::move(answer);
    return &it->second;
  }
  // One integer program at tau: the fewest free pipelines, or (by_price) the least price of
  // their nodes, with at most max_items free pipelines whose prices add up to at most
  // max_price (< 0: no limit), solved as far as `goal` asks.
  // (min_items >= 0: at least that many free pipelines instead of the problem's minimum.)
  absl::StatusOr<IlpAnswer> RunIlp(double tau, bool by_price, int64_t max_items,
                                   int64_t max_price,
                                   CoverIlpGoal goal = CoverIlpGoal::kOptimal,
                                   int64_t stop_at_bound = INT64_MAX, int64_t min_items = -1) {
    IlpAnswer answer;
    answer.goal = goal;
    const int need = Need(tau);
    const int64_t fixed = FixedCount();
    CoverIlp ilp;
    ilp.capacity.assign(problem_.available.begin(), problem_.available.end());
    ilp.need = need == kImpossible ? 0 : need;
    ilp.min_items =
        min_items >= 0 ? min_items : std::max<int64_t>(0, problem_.min_pipelines - fixed);
    ilp.max_items = max_items;
    if (need == kImpossible || ilp.min_items > ilp.max_items) return answer;  // infeasible
    if (problem_.max_price_steps >= 0 && free_budget_ < 0) return answer;   // fixed ones cost more
    const std::vector<Usable> usable = UsableShapes(tau);
    for (const Usable& u : usable) {
      const NodeMix& mix = problem_.Shapes()[u.shape].mix;
      ilp.usage.emplace_back(mix.begin(), mix.end());
      ilp.gain.push_back(std::min(u.absorb, std::max(need, 1)));
      if (by_price) ilp.weight.push_back(shape_price_[u.shape]);
      if (max_price >= 0) ilp.spend.push_back(shape_price_[u.shape]);
    }
    ilp.budget = max_price;
    RETURN_IF_ERROR(Cancelled());
    ++evaluations_;
    CoverIlpLimits limits;
    limits.goal = goal;
    limits.stop_at_bound = stop_at_bound;
    limits.max_nodes = problem_.max_ilp_nodes;
    limits.cancelled = problem_.search.cancelled;
    ASSIGN_OR_RETURN(CoverIlpSolution solved, SolveCoverIlp(ilp, limits));

    answer.status = solved.status;
    answer.items = solved.items;
    answer.objective = solved.objective;
    answer.lower_bound = solved.lower_bound;
    answer.counts.assign(shapes_.size(), 0);
    for (size_t i = 0; i < usable.size() && i < solved.counts.size(); ++i) {
      answer.counts[usable[i].shape] = solved.counts[i];
      answer.price += solved.counts[i] * shape_price_[usable[i].shape];
    }
    const bool stopped = goal == CoverIlpGoal::kOptimal && answer.lower_bound >= stop_at_bound &&
                         answer.status != CoverIlpStatus::kOptimal &&
                         answer.status != CoverIlpStatus::kInfeasible;
    if (stopped) {
      answer.goal = CoverIlpGoal::kRelaxation;  // a proven bound, as asked
      return answer;
    }
    // (Below kOptimal an unproven count was asked for; a yes/no question left open is not.)
    const bool open = goal == CoverIlpGoal::kOptimal ? answer.status == CoverIlpStatus::kBounded ||
                                                          answer.status == CoverIlpStatus::kUnknown
                                                    : goal == CoverIlpGoal::kFirstFeasible &&
                                                          answer.status == CoverIlpStatus::kUnknown;
    if (open) inexact_ = true;
    return answer;
  }
  static bool HasPlan(const IlpAnswer& a) {
    return a.status == CoverIlpStatus::kOptimal || a.status == CoverIlpStatus::kBounded;
  }
  static absl::Status IlpUndecided() {
    return absl::ResourceExhaustedError(
        "counting the most pipelines the nodes fit: an integer program stopped at its node "
        "limit undecided; plan fewer node types or nodes at once");
  }
  // The most free pipelines (capped at want <= pmax) of any plan at the largest makespan,
  // -1 if none, by integer programs "at least p of at most pmax free pipelines" (monotone in
  // p: a plan with more has at least p): yes at want settles it (the usual case), else a
  // bisection. Exact, or RESOURCE_EXHAUSTED when a program stops undecided.
  absl::StatusOr<int> IlpMostPipelines(int want, int pmax) {
    const double tau = TopTau();
    const bool none_free = Need(tau) <= 0;  // the kept pipelines alone run the batch
    auto at_least = [&](int p) -> absl::StatusOr<bool> {
      ASSIGN_OR_RETURN(IlpAnswer a, RunIlp(tau, /*by_price=*/false, pmax, -1,
                                           CoverIlpGoal::kFirstFeasible, INT64_MAX, p));
      if (a.status == CoverIlpStatus::kUnknown) return IlpUndecided();
      return HasPlan(a);
    };
    if (want < 1) return none_free ? 0 : -1;
    ASSIGN_OR_RETURN(const bool all, at_least(want));
    if (all) return want;
    int yes = 0, no = want;  // at_least(no) is false; at_least(yes) true or yes == 0
    while (no - yes > 1) {
      const int mid = yes + (no - yes) / 2;
      ASSIGN_OR_RETURN(const bool fits, at_least(mid));
      (fits ? yes : no) = mid;
    }
    return yes > 0 ? yes : (none_free ? 0 : -1);
  }
  // Whether some set of pipelines runs the batch within tau; unsolved counts as no (and
  // leaves a gap).
  absl::StatusOr<bool> IlpFeasible(double tau) {
    ASSIGN_OR_RETURN(const IlpAnswer* a, SolveIlp(tau, CoverIlpGoal::kFirstFeasible));
    if (a->status == CoverIlpStatus::kInfeasible) {
      proven_infeasible_ = std::max(proven_infeasible_, tau);
    }
    return HasPlan(*a);
  }
  // The pipeline count of the best plan found at tau (-1: none), its pipelines kept for
  // Consider. An exact answer is at most pcap whenever the search asks (P_min is monotone).
  absl::StatusOr<int> IlpMinPipelines(double tau, int /*pcap*/) {
    ASSIGN_OR_RETURN(const IlpAnswer* a, SolveIlp(tau, CoverIlpGoal::kOptimal));
    if (!HasPlan(*a)) return -1;
    ilp_counts_ = a->counts;
    return static_cast<int>(a->items);
  }
  // A lower bound on every plan's iteration time: the first makespan not proven infeasible
  // plus the all-reduce of the fewest pipelines any plan better than the incumbent needs
  // (P_min never increases with tau, and such a plan's makespan is below the incumbent).
  absl::StatusOr<double> ProvenLowerBound() {
    const double tau_low = NextAbove(all_, proven_infeasible_);
    const double tau_top = AtOrBelow(all_, std::nextafter(best_, -kInf));
    if (tau_top < tau_low) return best_;
    ASSIGN_OR_RETURN(const IlpAnswer* a, SolveIlp(tau_top, CoverIlpGoal::kRelaxation));
    if (a->status == CoverIlpStatus::kInfeasible) return best_;
    const int p_low = static_cast<int>(std::clamp<int64_t>(a->lower_bound, 0, MaxAllreduceIndex()));
    return std::min(best_, tau_low + Allreduce(p_low));
  }
  absl::Status NoPlanError() {
    if (problem_.max_price_steps >= 0) {
      // Within the budget nothing fits: say what the cheapest plan would cost, if any.
      ASSIGN_OR_RETURN(IlpAnswer cheapest,
                       RunIlp(TopTau(), /*by_price=*/true,
                              std::max<int64_t>(0, B_ - int64_t{FixedCount()}), -1));
      if (HasPlan(cheapest)) {
        return absl::FailedPreconditionError(absl::StrFormat(
            "budget_per_hour = %s is below the price of every plan that runs the global batch "
            "of %d micro-batches%s: the cheapest uses nodes of %g per hour",
            problem_.budget_per_hour > 0 ? ShowNumber(problem_.budget_per_hour)
                                         : ShowNumber(StepsToPrice(problem_.max_price_steps)),
            B_,
            AsksMorePipelines(problem_)
                ? absl::StrCat(" with ", problem_.min_pipelines, " pipelines")
                : std::string(),
            StepsToPrice(fixed_price_ + cheapest.lower_bound)));
      }
    }
    if (AsksMorePipelines(problem_)) {
      return absl::FailedPreconditionError(absl::StrFormat(
          "no plan of at least %d pipelines fits the available nodes and holds the global "
          "batch of %d micro-batches within GPU memory (every pipeline needs one)",
          problem_.min_pipelines, B_));
    }
    return absl::FailedPreconditionError(absl::StrFormat(
        "the available pipelines cannot hold the global batch of %d micro-batches within GPU "
        "memory",
        B_));
  }

  // Shapes usable at tau with what they absorb, dropping every shape some smaller shape
  // (fewer nodes of every type) absorbs at least as much as: swapping them keeps the
  // pipeline count and frees nodes, so no optimum needs them.
  struct Usable {
    int shape;
    int32_t absorb;
  };
  std::vector<Usable> UsableShapes(double tau) const {
    std::vector<Usable> all;
    all.reserve(shapes_.size());
    std::vector<int32_t> absorb(shapes_.size(), 0);  // per shape; 0: not usable at tau
    for (int j = 0; j < static_cast<int>(shapes_.size()); ++j) {
      if (!fits_[j]) continue;
      const int k = shapes_[j].Absorb(tau);
      if (k > 0) {
        all.push_back({j, k});
        absorb[j] = k;
      }
    }
    std::vector<Usable> kept;
    kept.reserve(all.size());
    for (const Usable& a : all) {
      bool dominated = false;
      for (int i = submix_starts_[a.shape]; i < submix_starts_[a.shape + 1]; ++i) {
        if (absorb[submixes_[i]] >= a.absorb) {
          dominated = true;
          break;
        }
      }
      if (!dominated) kept.push_back(a);
    }
    return kept;
  }

  // False only if no set of pipelines can run the batch within tau: the free pipelines'
  // LP relaxation (fractional pipelines) is below what they must absorb.
  bool RelaxedFeasible(double tau) const {
    const int need = Need(tau);
    if (need == kImpossible) return false;
    if (need <= 0) return true;
    std::vector<std::vector<double>> columns;
    std::vector<double> gains, rows(problem_.available.begin(), problem_.available.end());
    for (const Usable& s : UsableShapes(tau)) {
      const NodeMix& mix = problem_.Shapes()[s.shape].mix;
      columns.emplace_back(mix.begin(), mix.end());
      gains.push_back(s.absorb);
    }
    if (columns.empty()) return false;
    const double bound = PackingLpMax(columns, gains, rows);
    // Rounding in the simplex must not make the bound smaller than the true optimum.
    return bound * (1 + 1e-9) + 1e-6 >= need;
  }

  // The most micro-batches (saturated at `cap`) any number of free pipelines absorb at tau,
  // and the fewest pipelines that reach that much.
  struct Unconstrained {
    int64_t absorbed = 0;
    int pipelines = 0;
  };
  absl::StatusOr<Unconstrained> FreeAbsorbUnconstrained(double tau, int cap) {
    RETURN_IF_ERROR(Cancelled());
    ++evaluations_;
    const std::vector<Usable> usable = UsableShapes(tau);
    if (usable.empty()) return Unconstrained{};
    // One int64 per state orders (more absorbed, then fewer pipelines): absorbed << 21 |
    // (kMask - pipelines), so a plain max does both, branch-free. Impossible states are so
    // negative that no addition brings them above the all-idle key.
    constexpr int kShift = 21;
    constexpr int64_t kMask = (int64_t{1} << kShift) - 1;
    constexpr int64_t kImpossible = -(int64_t{1} << 60);
    std::vector<int64_t>& w = keys_;
    if (!AssignPolled(w, num_states_, kImpossible, interrupt_)) {
      return Interrupt::Status("plan search");
    }
    const int T = static_cast<int>(strides_.size());
    const int64_t cap64 = cap;
    const size_t rows_per_poll = std::max<size_t>(1, kPollWork / (T + usable.size()));
    if (!fit_starts_.empty()) {
      std::vector<int32_t> kept_absorb(shapes_.size(), 0);  // per shape; 0: not in usable
      for (const Usable& a : usable) kept_absorb[a.shape] = a.absorb;
      for (size_t r = 0; r < real_states_.size(); ++r) {
        if (r % rows_per_poll == 0 && interrupt_.Poll()) return Interrupt::Status("plan search");
        const int64_t u = real_states_[r];
        int64_t best = kMask;  // nothing absorbed, no pipeline
        for (int t = 0; t < T; ++t) best = std::max(best, w[u - strides_[t]]);
        for (int i = fit_starts_[r]; i < fit_starts_[r + 1]; ++i) {
          const int j = fit_shapes_[i];
          const int64_t absorb = kept_absorb[j];
          if (absorb == 0) continue;
          const int64_t src = w[u - offsets_[j]];
          const int64_t absorbed = std::min((src >> kShift) + absorb, cap64);
          best = std::max(best, (absorbed << kShift) | ((src & kMask) - 1));
        }
        w[u] = best;
      }
    } else {
      for (size_t r = 0; r < real_states_.size(); ++r) {
        if (r % rows_per_poll == 0 && interrupt_.Poll()) return Interrupt::Status("plan search");
        const int64_t u = real_states_[r];
        int64_t best = kMask;  // nothing absorbed, no pipeline
        for (int t = 0; t < T; ++t) best = std::max(best, w[u - strides_[t]]);
        for (const Usable& s : usable) {
          const int64_t src = w[u - offsets_[s.shape]];
          const int64_t absorbed = std::min((src >> kShift) + s.absorb, cap64);
          best = std::max(best, (absorbed << kShift) | ((src & kMask) - 1));
        }
        w[u] = best;
      }
    }
    const int64_t at_full = w[full_];
    return Unconstrained{at_full >> kShift, static_cast<int>(kMask - (at_full & kMask))};
  }

  // table[u][p] = most micro-batches (saturated at `cap`) exactly p free pipelines within u
  // absorb at tau; kNeg when p pipelines do not fit. Rows are `width` entries (at least
  // pcap + 1) and computed with straight loops over p so that they vectorise (int16 lanes
  // when cap allows).
  //
  // Rows of 1 + kLanes entries (pcap <= kLanes: warm replans of small clusters) are one
  // block: every row is computed in full, past its pmax, with fixed trip counts over a copy
  // in registers, where a vector loop's scalar tail would be most of the work. Entries past
  // pmax are impossible and come out as kNeg all the same (they are built on kNeg entries
  // only and clamped), entries past pcap are never read, and entry p depends on entries
  // <= p only, so the entries up to pcap are exactly those of the narrow table.
  // False when the search was interrupted before every row was filled.
  template <typename V>
  bool FillRows(std::vector<V>& table, const std::vector<Usable>& usable, int pcap, int width,
                int cap) {
    constexpr V kNegV = std::numeric_limits<V>::min() / 2;
    if (!AssignPolled(table, num_states_ * width, kNegV, interrupt_)) return false;
    const int T = static_cast<int>(strides_.size());
    const int min_nodes = std::max(1, min_shape_nodes_);
    const V capv = static_cast<V>(cap);
    const bool one_block = width == 1 + kLanes;
    // Per shape for one-block rows: the distance from a row to its source row, and what the
    // shape adds (0: not usable at this tau).
    std::vector<int64_t>& block_delta = block_delta_;
    std::vector<int32_t>& block_k = block_k_;
    if (one_block) {
      block_delta.resize(shapes_.size());
      for (size_t j = 0; j < shapes_.size(); ++j) block_delta[j] = offsets_[j] * width;
      block_k.assign(shapes_.size(), 0);
      for (const Usable& s : usable) block_k[s.shape] = std::min(s.absorb, cap);
    }
    auto row = [&](size_t r) {
      const int64_t u = real_states_[r];
      V* __restrict dst = &table[u * width];
      dst[0] = 0;
      const int pmax = std::min(pcap, real_sizes_[r] / min_nodes);
      for (int t = 0; t < T; ++t) {
        const V* __restrict src = &table[(u - strides_[t]) * width];
        MaxRow(dst, src, pmax);
      }
      for (const Usable& s : usable) {
        const V* __restrict src = &table[(u - offsets_[s.shape]) * width];
        AddMaxRow(dst, src, static_cast<V>(std::min(s.absorb, cap)), capv, pmax);
      }
      ClampRow(dst, kNegV, pmax);
    };
    auto block_row = [&](size_t r) {
      const int64_t u = real_states_[r];
      V* __restrict dst = &table[u * width];
      dst[0] = 0;
      if (real_sizes_[r] < min_nodes) return;  // pmax = 0
      RowBlock<V> acc(dst + 1);
      for (int t = 0; t < T; ++t) acc.Max(dst - strides_[t] * width + 1);
      if (!fit_starts_.empty()) {
        for (int i = fit_starts_[r]; i < fit_starts_[r + 1]; ++i) {
          const int j = fit_shapes_[i];
          if (block_k[j] == 0) continue;
          acc.AddMax(dst - block_delta[j], static_cast<V>(block_k[j]), capv);
        }
      } else {
        for (const Usable& s : usable) {
          acc.AddMax(dst - block_delta[s.shape], static_cast<V>(block_k[s.shape]), capv);
        }
      }
      acc.Clamp(kNegV);
      acc.Store(dst + 1);
    };
    const int64_t work =
        static_cast<int64_t>(real_states_.size()) * width * static_cast<int64_t>(usable.size() + T);
    return one_block ? ForEachRow(block_row, work) : ForEachRow(row, work);
  }
  // Runs `row` on every real state, each after the states it is built from, polling the
  // interrupt every kPollWork of work; false if it stopped early.
  template <typename Row>
  bool ForEachRow(const Row& row, int64_t work) const {
    const size_t rows = real_states_.size();
    const int64_t per_row = std::max<int64_t>(1, work / std::max<size_t>(1, rows));
    const size_t rows_per_poll = static_cast<size_t>(std::max<int64_t>(1, kPollWork / per_row));
    if (work < kParallelWork) {
      for (size_t r = 0; r < rows; ++r) {
        if (r % rows_per_poll == 0 && interrupt_.Poll()) return false;
        row(by_size_[r]);
      }
      return true;
    }
    // Every state is built from states with fewer nodes: one size level at a time, the
    // states of a level in parallel (each row written by one thread: deterministic).
    const size_t grain = std::min<size_t>(64, rows_per_poll);
    for (size_t level = 0; level + 1 < level_starts_.size(); ++level) {
      if (interrupt_.Poll()) return false;
      tbb::parallel_for(
          tbb::blocked_range<size_t>(level_starts_[level], level_starts_[level + 1], grain),
          [&](const tbb::blocked_range<size_t>& range) {
            // (The partitioner may hand one body far more than `grain` rows.)
            for (size_t i = range.begin(); i != range.end(); ++i) {
              if ((i - range.begin()) % rows_per_poll == 0 && interrupt_.Poll()) return;
              row(by_size_[i]);
            }
          });
    }
    return !interrupt_.stopped();
  }
  template <typename V>
  static void MaxRow(V* __restrict dst, const V* __restrict src, int pmax) {
    for (int p = 1; p <= pmax; ++p) dst[p] = std::max(dst[p], src[p]);
  }
  // dst[p] = max(dst[p], min(src[p - 1] + k, cap)); src + k cannot overflow V because
  // src >= kNeg and k <= cap <= max(V) / 2.
  template <typename V>
  static void AddMaxRow(V* __restrict dst, const V* __restrict src, V k, V cap, int pmax) {
    for (int p = 1; p <= pmax; ++p) {
      dst[p] = std::max(dst[p], std::min(static_cast<V>(src[p - 1] + k), cap));
    }
  }
  // A sum built on an impossible entry stays below 0; reset it so it cannot grow back.
  template <typename V>
  static void ClampRow(V* __restrict dst, V neg, int pmax) {
    for (int p = 1; p <= pmax; ++p) dst[p] = dst[p] < 0 ? neg : dst[p];
  }
  absl::Status FillTable(double tau, int pcap, int cap) {
    RETURN_IF_ERROR(Cancelled());
    ++evaluations_;
    const std::vector<Usable> usable = UsableShapes(tau);
    table_.int16 = cap <= kMaxInt16Need;
    // One block per row when pcap allows and the wider table stays small (a table with
    // many states and few pipelines keeps its narrow rows).
    const bool one_block = pcap <= kLanes && num_states_ * (1 + kLanes) <= kMaxOneBlockEntries;
    table_.width = one_block ? 1 + kLanes : pcap + 1;
    const bool filled = table_.int16 ? FillRows(table_.v16, usable, pcap, table_.width, cap)
                                     : FillRows(table_.v32, usable, pcap, table_.width, cap);
    return filled ? absl::OkStatus() : Interrupt::Status("plan search");
  }
  struct Table {
    std::vector<int16_t> v16;
    std::vector<int32_t> v32;
    bool int16 = true;
    int width = 1;
    int32_t At(int64_t u, int p) const { return int16 ? v16[u * width + p] : v32[u * width + p]; }
  };

  // The fewest free pipelines (<= pcap) that run the batch within tau; -1 if none.
  absl::StatusOr<int> MinPipelines(double tau, int pcap) {
    if (use_ilp_) return IlpMinPipelines(tau, pcap);
    const int need = Need(tau);
    if (need == kImpossible) return -1;
    if (need <= 0) return 0;
    pcap = std::min(pcap, MaxFreePipelines());
    if (pcap < 1) return -1;
    RETURN_IF_ERROR(FillTable(tau, pcap, need));
    for (int p = 1; p <= pcap; ++p) {
      if (table_.At(full_, p) >= need) return p;
    }
    return -1;
  }

  // Branch and bound over (a, b): P_min in [pb, pa] in between, a either considered with
  // P_min(a) pipelines or unable to beat the incumbent (PipelinesAt). Only
  // tau < best - allreduce(pb) can improve on the incumbent, so the bisection runs over
  // (a, min(b, that)); the all-reduce differs little between pipeline counts, so this
  // range is usually a few candidates wide. pa == pb closes the interval: P_min = pb there,
  // and every tau in it takes longer than a with as many pipelines.
  absl::Status Search(double a, int pa, double b, int pb) {
    if (pa == pb) return absl::OkStatus();  // same P: every tau in (a, b) is worse than a
    const double hi = std::min(b, best_ - Allreduce(pb));
    const double first = NextAbove(all_, a);
    if (first >= hi) return absl::OkStatus();
    const double mid = a + (hi - a) / 2;
    double c = AtOrBelow(all_, mid);
    if (c <= a) c = first;
    ASSIGN_OR_RETURN(PipelineRange pc, PipelinesAt(c, pa));
    if (pc.lower < 0) return absl::OkStatus();  // an unsolved integer program: the gap says so
    RETURN_IF_ERROR(Search(a, pa, c, pc.lower));
    return Search(c, pc.upper, b, pb);
  }

  absl::StatusOr<PipelineSetSolution> Reconstruct() {
    PipelineSetSolution solution;
    const int need = Need(best_tau_);
    if (best_p_ > 0 && use_ilp_) {
      if (best_counts_.size() != shapes_.size()) {
        return absl::InternalError("plan search: no plan kept");
      }
      for (size_t j = 0; j < best_counts_.size(); ++j) {
        for (int64_t c = 0; c < best_counts_[j]; ++c) solution.chosen.push_back(static_cast<int>(j));
      }
    } else if (best_p_ > 0) {
      // best_table_ was filled at best_tau_ with room for at least best_p_ pipelines.
      const std::vector<Usable> usable = UsableShapes(best_tau_);
      const Table& table = best_table_;
      if (table.width <= best_p_ || table.At(full_, best_p_) < need) {
        return absl::InternalError("plan search: the optimum does not reconstruct");
      }
      const int T = static_cast<int>(strides_.size());
      int64_t u = full_;
      int q = best_p_;
      while (q > 0) {
        const int32_t value = table.At(u, q);
        bool stepped = false;
        for (const Usable& s : usable) {
          const int32_t src = table.At(u - offsets_[s.shape], q - 1);
          if (src < 0 || std::min(src + std::min(s.absorb, need), need) != value) continue;
          solution.chosen.push_back(s.shape);
          u -= offsets_[s.shape];
          --q;
          stepped = true;
          break;
        }
        for (int t = 0; t < T && !stepped; ++t) {
          if (table.At(u - strides_[t], q) == value) {
            u -= strides_[t];
            stepped = true;
          }
        }
        if (!stepped) return absl::InternalError("plan search: broken DP trace");
      }
    }
    std::vector<PipelineLoad> loads;
    for (const PipelineShape& f : problem_.fixed)
      loads.push_back({&f.stage_costs, f.max_microbatches});
    for (int j : solution.chosen) {
      const PipelineShape& s = problem_.Shapes()[j];
      loads.push_back({&s.stage_costs, s.max_microbatches});
    }
    ASSIGN_OR_RETURN(std::vector<int> split, SplitBatch(*model_, loads, B_));
    const size_t num_fixed = fixed_.size();
    solution.fixed_microbatches.assign(split.begin(), split.begin() + num_fixed);
    solution.chosen_microbatches.assign(split.begin() + num_fixed, split.end());
    for (size_t i = 0; i < loads.size(); ++i) {
      solution.pipeline_time_ms = std::max(solution.pipeline_time_ms,
                                           model_->PipelineTimeMs(*loads[i].stage_costs, split[i]));
    }
    solution.allreduce_ms = (*problem_.allreduce_ms)[loads.size()];
    solution.iteration_time_ms = solution.pipeline_time_ms + solution.allreduce_ms;
    solution.evaluations = evaluations_;
    solution.method = use_ilp_ ? PlanSearchMethod::kCoverIlp : PlanSearchMethod::kNodeCountDp;
    solution.price_steps = fixed_price_;
    for (int j : solution.chosen) solution.price_steps += shape_price_[j];
    if (problem_.objective == PlanObjective::kCost) {
      // The gap on price x time: what no plan left unexplored can undercut.
      const double cost = static_cast<double>(solution.price_steps) * solution.iteration_time_ms;
      if (inexact_ && cost > 0) {
        solution.optimality_gap = std::max(0.0, (cost - std::min(cost, cost_open_bound_)) / cost);
      }
    } else if (inexact_) {
      ASSIGN_OR_RETURN(double bound, ProvenLowerBound());
      solution.optimality_gap =
          std::max(0.0, (solution.iteration_time_ms - bound) / solution.iteration_time_ms);
    }
    return solution;
  }

  // ---- prices (PipelineSetProblem::objective, max_price_steps) ------------------------

  int FixedCount() const { return static_cast<int>(fixed_.size()); }
  int64_t PriceOf(const NodeMix& mix) const {
    int64_t price = 0;
    if (problem_.type_price_steps.empty()) return 0;
    for (size_t t = 0; t < mix.size(); ++t) price += mix[t] * problem_.type_price_steps[t];
    return price;
  }
  static double StepsToPrice(int64_t steps) {
    return PriceOfSteps(steps);
  }
  // Price x (makespan + all-reduce) of `a` at tau, fixed pipelines included.
  double CostOf(double tau, int64_t free_price, int64_t free_pipelines) const {
    return static_cast<double>(fixed_price_ + free_price) *
           (tau + Allreduce(static_cast<int>(free_pipelines)));
  }
  void ConsiderCost(double tau, const IlpAnswer& a) {
    const double value = CostOf(tau, a.price, a.items);
    if (value < best_) {
      best_ = value;
      best_tau_ = tau;
      best_p_ = static_cast<int>(a.items);
      best_counts_ = a.counts;
    }
  }

  // The least price x iteration time (docs/ARCHITECTURE.md#cost-aware-plans). Every plan
  // runs within some candidate makespan tau = T_j(x) at cost >= price x (tau + AR(P)), so
  // the optimum is min over tau of the best plan feasible at tau. At one tau (CostAt): the
  // least price c0 (an integer program weighted by price), then the fewest pipelines among
  // plans of that price (P0; less all-reduce), then the least price with at most P0 - 1
  // pipelines, and so on while the price alone can still beat the incumbent. Over tau:
  // c(tau), the least price, never increases with tau (the feasible set only grows), so an
  // interval (a, b) of makespans costs at least c(b) x (first tau after a + AR of the
  // fewest pipelines any plan has); intervals are split best bound first and dropped once
  // that bound reaches the incumbent.
  absl::StatusOr<PipelineSetSolution> SolveCost() {
    RETURN_IF_ERROR(CheckBatch());
    const double top = TopTau();
    ASSIGN_OR_RETURN(bool fits, IlpFeasible(top));
    if (!fits) return NoPlanError();
    ASSIGN_OR_RETURN(double tau_lp,
                     SmallestFeasible(all_, -kInf, top, [&](double tau) -> absl::StatusOr<bool> {
                       return RelaxedFeasible(tau);
                     }));
    const int fewest_free = std::max(0, std::max(1, problem_.min_pipelines) - FixedCount());
    ar_floor_ = Allreduce(fewest_free);
    struct Interval {
      double bound;  // no plan with a makespan in (a, b) costs less
      double a, b;
      int64_t price_b;  // proven least free price at b
      bool operator>(const Interval& o) const { return bound > o.bound; }
    };
    std::priority_queue<Interval, std::vector<Interval>, std::greater<Interval>> open;
    auto push = [&](double a, double b, int64_t price_b) {
      const double first = NextAbove(all_, a);
      if (first >= b) return;
      const double bound = std::max(static_cast<double>(fixed_price_ + price_b) * (first + ar_floor_),
                                    ThroughputBound(first, b, price_b));
      if (bound < best_) open.push({bound, a, b, price_b});
    };
    ASSIGN_OR_RETURN(std::optional<int64_t> at_top, CostAt(top));
    if (!at_top.has_value()) return absl::InternalError("plan search: no plan at the top makespan");
    push(std::nextafter(tau_lp, -kInf), top, *at_top);
    int makespans = 1;
    while (!open.empty() && open.top().bound < best_) {
      const Interval iv = open.top();
      if (makespans >= problem_.max_cost_makespans) {
        cost_open_bound_ = std::min(cost_open_bound_, iv.bound);
        inexact_ = true;
        break;
      }
      open.pop();
      const double first = NextAbove(all_, iv.a);
      double c = AtOrBelow(all_, iv.a + (iv.b - iv.a) / 2);
      if (c <= iv.a) c = first;
      ASSIGN_OR_RETURN(std::optional<int64_t> at, CostAt(c));
      ++makespans;
      if (at.has_value()) push(iv.a, c, *at);  // (proven infeasible: so is everything below)
      push(c, iv.b, iv.price_b);
    }
    return Reconstruct();
  }
  // A lower bound on price x (tau + AR) over plans with a makespan tau in [lo, hi] whose
  // free pipelines cost at least price_hi: the free pipelines absorb Need(hi) or more
  // micro-batches, each at a price x time of at least price_j x TimePerMicrobatchAtLeast
  // (a bound that, unlike price_hi x lo, keeps each pipeline's fill time: it proves the
  // flat stretches of price x time, where cheaper plans take proportionally longer).
  double ThroughputBound(double lo, double hi, int64_t price_hi) const {
    const int need = Need(hi);
    if (need == kImpossible) return kInf;
    double per_microbatch = kInf;
    for (size_t j = 0; j < shapes_.size(); ++j) {
      if (!fits_[j]) continue;
      per_microbatch = std::min(per_microbatch, static_cast<double>(shape_price_[j]) *
                                                    shapes_[j].TimePerMicrobatchAtLeast(lo, hi));
    }
    const double free_part = need <= 0 ? 0 : need * per_microbatch;
    const double bound = free_part + static_cast<double>(fixed_price_) * lo +
                         static_cast<double>(fixed_price_ + price_hi) * ar_floor_;
    return bound * (1 - kBoundSlack);  // T(x) is affine only up to rounding
  }
  static constexpr double kBoundSlack = 1e-9;

  // The best plans at tau (ConsiderCost); the proven least free price at tau, or nullopt
  // when no plan runs within tau (proven).
  absl::StatusOr<std::optional<int64_t>> CostAt(double tau) {
    const int64_t min_items = std::max<int64_t>(0, problem_.min_pipelines - FixedCount());
    int64_t max_items = std::max<int64_t>(0, B_ - int64_t{FixedCount()});
    std::optional<int64_t> least;
    while (max_items >= min_items) {
      ASSIGN_OR_RETURN(IlpAnswer cheapest, RunIlp(tau, /*by_price=*/true, max_items, free_budget_));
      if (cheapest.status == CoverIlpStatus::kInfeasible) break;
      if (!least) least = cheapest.lower_bound;
      // Every plan at tau left to look at costs at least this.
      const double bound =
          static_cast<double>(fixed_price_ + cheapest.lower_bound) * (tau + ar_floor_);
      if (bound >= best_) break;
      if (cheapest.status != CoverIlpStatus::kOptimal) {
        if (HasPlan(cheapest)) ConsiderCost(tau, cheapest);
        cost_open_bound_ = std::min(cost_open_bound_, bound);
        break;
      }
      // The fewest pipelines among plans of that price.
      const int64_t cap =
          free_budget_ < 0 ? cheapest.objective : std::min(free_budget_, cheapest.objective);
      ASSIGN_OR_RETURN(IlpAnswer fewest, RunIlp(tau, /*by_price=*/false, cheapest.items, cap));
      const bool fewer = HasPlan(fewest) && fewest.items <= cheapest.items;
      ConsiderCost(tau, fewer ? fewest : cheapest);
      if (fewest.status != CoverIlpStatus::kOptimal) {
        cost_open_bound_ = std::min(cost_open_bound_, bound);
        break;
      }
      max_items = fewest.items - 1;  // plans with fewer pipelines cost more
    }
    if (!least) return std::optional<int64_t>();
    return least;
  }

  const PipelineSetProblem& problem_;
  // Polled between table rows too: one table of a big one-type cluster is seconds of work
  // in a sanitizer build, and the search must stop with its call.
  mutable Interrupt interrupt_{problem_.search.cancelled};
  const CostModel* model_;
  const int B_;
  int64_t fixed_price_ = 0;           // of the fixed pipelines' nodes, in price steps
  std::vector<int64_t> shape_price_;  // per shape
  int64_t free_budget_ = -1;          // what the free pipelines may cost (< 0: no budget)
  double ar_floor_ = 0;               // all-reduce of the fewest pipelines a plan has
  double cost_open_bound_ = kInf;     // kCost: proven bound on plans not looked at
  std::vector<LoadCurve> fixed_, shapes_;
  std::vector<LoadCurve> fixed_groups_;  // GroupFixed
  std::vector<int> fixed_multiplicity_;  // per group: its kept pipelines
  std::vector<LoadCurve> all_;           // fixed_groups_, then shapes_
  std::vector<int64_t> strides_;
  int64_t num_states_ = 1;
  int64_t full_ = 0;                  // the state u = available
  std::vector<int64_t> real_states_;  // u >= 0, in index order
  std::vector<int> real_sizes_;       // |u| of each
  std::vector<size_t> by_size_;       // indices into real_states_, by size then index
  std::vector<size_t> level_starts_;  // by_size_[level_starts_[s]...] have size s
  std::vector<int64_t> offsets_;      // per shape
  std::vector<char> fits_;            // per shape: fits the available nodes at all
  int total_free_ = 0;
  int min_shape_nodes_ = 1;
  // Per real state r (index into real_states_): the shapes that fit within it, i.e. whose
  // u - mix is a real state, fit_shapes_[fit_starts_[r] ... fit_starts_[r + 1]); empty when
  // UseFitLists says no. The DPs then skip the other shapes, whose sources are padding
  // states that can only give impossible entries.
  std::vector<int> fit_starts_, fit_shapes_;
  std::vector<int64_t> block_delta_;  // FillRows' buffers
  std::vector<int32_t> block_k_;
  // Shapes with fewer nodes of every type than shape a: submixes_[submix_starts_[a] ...
  // submix_starts_[a + 1]).
  std::vector<int> submixes_, submix_starts_;
  std::vector<int64_t> keys_;
  Table table_, best_table_;
  bool use_ilp_ = false;
  std::map<double, IlpAnswer> ilp_memo_;
  std::vector<int64_t> ilp_counts_, best_counts_;  // per shape: the last answer, the best
  bool inexact_ = false;                // some integer program stopped at its node limit
  double proven_infeasible_ = -kInf;    // every tau <= this is proven infeasible
  double best_ = kInf;
  double best_tau_ = kInf;
  int best_p_ = -1;
  int evaluations_ = 0;
};


}  // namespace

namespace {

// What SolvePipelineSet and MaxPipelineCount check before allocating the search.
absl::Status CheckProblem(const PipelineSetProblem& problem) {
  if (problem.model == nullptr || problem.allreduce_ms == nullptr) {
    return absl::InvalidArgumentError("plan search: model and allreduce_ms are required");
  }
  if (problem.min_pipelines < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("plan search: min_pipelines must be >= 0 (got ", problem.min_pipelines, ")"));
  }
  const size_t max_pipelines = problem.fixed.size() + MixSize(problem.available);
  if (problem.allreduce_ms->size() <= max_pipelines) {
    return absl::InvalidArgumentError(
        "plan search: allreduce_ms does not cover every pipeline count");
  }
  if (problem.min_pipelines < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("min_pipelines must be >= 0, got ", problem.min_pipelines));
  }
  if (problem.max_ilp_nodes < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_ilp_nodes must be >= 0, got ", problem.max_ilp_nodes));
  }
  if (!problem.type_price_steps.empty()) {
    if (problem.type_price_steps.size() != problem.available.size()) {
      return absl::InvalidArgumentError("plan search: type_price_steps must have one per type");
    }
    for (int64_t price : problem.type_price_steps) {
      if (price < 0) return absl::InvalidArgumentError("plan search: a price is negative");
    }
  }
  if (problem.max_cost_makespans < 1) {
    return absl::InvalidArgumentError("plan search: max_cost_makespans must be >= 1");
  }
  if (!UsesIlp(problem)) {
    if (problem.objective == PlanObjective::kCost || problem.max_price_steps >= 0) {
      return absl::InvalidArgumentError(
          "plan search: the node-count DP knows no prices; use kCoverIlp or kAuto");
    }
    if (AsksMorePipelines(problem)) {
      return absl::InvalidArgumentError(
          "plan search: the node-count DP does not take min_pipelines; use kCoverIlp or kAuto");
    }
    // The DP's state space, checked before anything is allocated for it.
    if (DpStateCount(problem) > kMaxPlanStates) {
      return absl::ResourceExhaustedError(absl::StrFormat(
          "the exact plan search over %d node types with %s nodes has more than %d "
          "node-count states; plan fewer node types or nodes at once",
          problem.available.size(), absl::StrJoin(problem.available, "+"), kMaxPlanStates));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<PipelineSetSolution> SolvePipelineSet(const PipelineSetProblem& problem) {
  RETURN_IF_ERROR(CheckProblem(problem));
  if (problem.min_pipelines > 1) {
    // The optimum without the minimum is the optimum with it whenever it has enough
    // pipelines (usual: f is small next to what a large cluster runs), and its search
    // costs a fraction of the constrained one. No plan at all: that is the answer too.
    PipelineSetProblem free_problem = problem;
    free_problem.min_pipelines = 0;
    absl::StatusOr<PipelineSetSolution> unconstrained = PlanSearch(free_problem).Solve();
    if (!unconstrained.ok()) return unconstrained;
    const size_t total = problem.fixed.size() + unconstrained->chosen.size();
    if (total >= static_cast<size_t>(problem.min_pipelines)) return unconstrained;
  }
  PlanSearch search(problem);
  absl::StatusOr<PipelineSetSolution> solved = search.Solve();
  // (With a budget the error already names it; the count below ignores prices.)
  if (!solved.ok() && solved.status().code() == absl::StatusCode::kFailedPrecondition &&
      AsksMorePipelines(problem) && problem.max_price_steps < 0) {
    // Say how far from the minimum the nodes are, when the count is cheap to have.
    absl::StatusOr<int> most = MaxPipelineCount(problem, problem.min_pipelines - 1);
    if (most.ok()) {
      const std::string& why = problem.min_pipelines_reason;
      return absl::FailedPreconditionError(absl::StrFormat(
          "%s needs %d pipelines; the nodes fit at most %d that run the global batch of %d "
          "micro-batches within GPU memory",
          why.empty() ? absl::StrCat("min_pipelines = ", problem.min_pipelines) : why,
          problem.min_pipelines, *most, problem.global_batch));
    }
  }
  return solved;
}

absl::StatusOr<int> MaxPipelineCount(const PipelineSetProblem& problem, int at_most) {
  RETURN_IF_ERROR(CheckProblem(problem));
  if (at_most < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("plan search: at_most must be >= 0 (got ", at_most, ")"));
  }
  // Counted by problem.method: kAuto takes the node-count DP where its table is small (as
  // the search does) and the integer program beyond, so that many node types scale like the
  // plan search itself.
  PipelineSetProblem counting = problem;
  counting.min_pipelines = 0;
  counting.objective = PlanObjective::kTime;
  counting.max_price_steps = -1;
  RETURN_IF_ERROR(CheckProblem(counting));
  PlanSearch search(counting);
  return search.MaxTotalPipelines(at_most);
}

}  // namespace oobleck
