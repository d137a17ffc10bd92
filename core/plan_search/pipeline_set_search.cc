// The exact plan search, SolvePipelineSet and MaxPipelineCount (docs/architecture/plan-search.md).
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
//
// The parts, one file each beside this driver: search_shapes (what every part reads of the
// problem), node_count_dp (the DP over node counts), makespan_ilp (the integer program per
// makespan), makespan_bracket (LP bound, gallop, hint) and cost_search (kCost).
#include "core/plan_search/pipeline_set_search.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "core/plan/objective.h"
#include "core/plan/pipeline_set.h"
#include "core/plan/pipeline_shape.h"
#include "core/plan_search/batch_split.h"
#include "core/plan_search/cost_search.h"
#include "core/plan_search/makespan_bracket.h"
#include "core/plan_search/makespan_ilp.h"
#include "core/plan_search/node_count_dp.h"
#include "core/plan_search/search_shapes.h"
#include "core/status_macros.h"

namespace oobleck {
namespace {

using plan_search::AsksMorePipelines;
using plan_search::AtOrBelow;
using plan_search::CostSearch;
using plan_search::DpStateCount;
using plan_search::IlpAnswer;
using plan_search::Incumbent;
using plan_search::kInf;
using plan_search::kMaxPlanStates;
using plan_search::MakespanBracket;
using plan_search::MakespanIlp;
using plan_search::NextAbove;
using plan_search::NodeCountDp;
using plan_search::SearchProgress;
using plan_search::SearchShapes;
using plan_search::SmallestFeasible;

// kAuto keeps the DP where a pass over its table costs about as much as one integer
// program (small clusters, e.g. most replans of the papers' clusters), and where no
// minimum pipeline count asks for the integer program.
constexpr int64_t kMaxAutoDpWork = int64_t{1} << 16;  // states x shapes

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
  return DpStateCount(problem) *
             static_cast<int64_t>(std::max<size_t>(problem.Shapes().size(), 1)) >
         kMaxAutoDpWork;
}

// The driver: the smallest feasible makespan, then the branch and bound over makespans
// (kTime), or the cost search (kCost); the node-count DP or the integer program answers
// each makespan (UsesIlp), and the plan is rebuilt from the incumbent.
class PlanSearch {
 public:
  // A minimum pipeline count (problem.min_pipelines) is a row of the integer program; the
  // node-count DP never sees one (UsesIlp, CheckProblem).
  explicit PlanSearch(const PipelineSetProblem& problem)
      : problem_(problem),
        shapes_(problem),
        progress_(problem),
        ilp_(shapes_, progress_),
        bracket_(shapes_, progress_),
        use_ilp_(UsesIlp(problem)) {
    if (!use_ilp_) dp_.emplace(shapes_, progress_);
  }

  absl::StatusOr<PipelineSetSolution> Solve() {
    if (problem_.objective == PlanObjective::kCost) {
      RETURN_IF_ERROR(CostSearch(shapes_, ilp_, bracket_, progress_, best_).Run());
      return Reconstruct();
    }
    const int B = shapes_.global_batch();
    const double top = shapes_.TopTau();
    RETURN_IF_ERROR(CheckSolvable(top));
    const int max_pipelines_free = std::min(B - shapes_.FixedCount(), shapes_.MaxFreePipelines());
    int pipelines_bound = max_pipelines_free;  // P_min at the smallest tau is at most this
    auto exact = [&](double tau) -> absl::StatusOr<bool> {
      if (use_ilp_) return ilp_.Feasible(tau);
      const int need = shapes_.Need(tau);
      if (need == plan_search::kImpossibleNeed) return false;
      if (need <= 0) return true;
      // The fewest pipelines that absorb enough bound the table's width.
      ASSIGN_OR_RETURN(NodeCountDp::Unconstrained free, dp_->FreeAbsorbUnconstrained(tau, need));
      if (free.absorbed < need) return false;
      pipelines_bound = std::min(max_pipelines_free, free.pipelines);
      return true;
    };
    double bad = -kInf, good = top;
    // (Small clusters skip the LP: there the exact DP costs less than the LP's bisection.)
    const bool from_lp =
        use_ilp_ || dp_->num_states() * static_cast<int64_t>(shapes_.shapes().size()) >
                        MakespanBracket::kSmallSearch;
    RETURN_IF_ERROR(bracket_.Narrow(from_lp, exact, bad, good));
    ASSIGN_OR_RETURN(const double tau_inf, SmallestFeasible(shapes_.all(), bad, good, exact));
    if (!use_ilp_) RETURN_IF_ERROR(dp_->CheckTableSize(pipelines_bound));
    RETURN_IF_ERROR(SearchFromSmallest(tau_inf, pipelines_bound));
    return Reconstruct();
  }

  // The most pipelines (kept + chosen) of any solution, capped at `at_most` (a plan of
  // more answers at_most, whether or not one of exactly at_most exists); 0 when there is
  // none. min_pipelines plays no part.
  absl::StatusOr<int> MaxTotalPipelines(int at_most) {
    // No plan at all (FAILED_PRECONDITION): none has any pipeline.
    if (absl::Status s = use_ilp_ ? shapes_.CheckBatch() : dp_->CheckCapacity(); !s.ok()) {
      if (s.code() == absl::StatusCode::kFailedPrecondition) return 0;
      return s;
    }
    const double top = shapes_.TopTau();
    if (use_ilp_) {
      ASSIGN_OR_RETURN(const bool fits, ilp_.Feasible(top));
      if (!fits && progress_.proven_infeasible >= top) return 0;
      if (!fits) return MakespanIlp::Undecided();
    }
    const int num_fixed = shapes_.FixedCount();
    if (at_most <= num_fixed) return at_most;  // the kept pipelines run the batch already
    const int pmax = std::min(shapes_.global_batch() - num_fixed, shapes_.MaxFreePipelines());
    const int want = std::min(pmax, at_most - num_fixed);
    int p = -1;
    if (use_ilp_) {
      ASSIGN_OR_RETURN(p, ilp_.MostPipelines(want, pmax));
    } else {
      // Every count up to pmax: the table answers "exactly p" per p.
      RETURN_IF_ERROR(dp_->CheckTableSize(pmax));
      ASSIGN_OR_RETURN(p, dp_->MostPipelines(top, pmax));
      p = std::min(p, want);
    }
    return p < 0 ? 0 : num_fixed + p;
  }

 private:
  // OK when some plan can run the batch at all (FAILED_PRECONDITION naming why not).
  absl::Status CheckSolvable(double top) {
    if (!use_ilp_) return dp_->CheckCapacity();
    RETURN_IF_ERROR(shapes_.CheckBatch());
    ASSIGN_OR_RETURN(const bool fits, ilp_.Feasible(top));
    return fits ? absl::OkStatus() : ilp_.NoPlanError();
  }

  // From the smallest feasible makespan up: its fewest pipelines, then the branch and bound
  // over the makespans whose smaller all-reduce could still win.
  absl::Status SearchFromSmallest(double tau_inf, int pipelines_bound) {
    ASSIGN_OR_RETURN(int p_inf, MinPipelines(tau_inf, pipelines_bound));
    if (p_inf < 0)
      return absl::InternalError("plan search: no pipeline count at the smallest makespan");
    best_.value = tau_inf + shapes_.Allreduce(p_inf);
    best_.tau = tau_inf;
    best_.pipelines = p_inf;
    KeepCurrent();

    // Candidates at or above best cannot improve on it (the all-reduce is >= 0). The
    // largest one below needs the fewest pipelines of all, which bounds the rest.
    const double top_tau = AtOrBelow(shapes_.all(), std::nextafter(best_.value, -kInf));
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
    if (p < 0 && !progress_.inexact) {
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
    absl::StatusOr<const IlpAnswer*> solved = ilp_.Solve(tau, CoverIlpGoal::kRelaxation);
    if (solved.ok() && !settled(**solved)) solved = ilp_.Solve(tau, CoverIlpGoal::kOptimal, enough);
    if (!solved.ok()) return solved.status();
    const IlpAnswer* a = *solved;
    if (a->status == CoverIlpStatus::kInfeasible) {
      if (!progress_.inexact) {
        return absl::InternalError("plan search: P_min increased with the makespan");
      }
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
    const int lower =
        static_cast<int>(std::clamp<int64_t>(a->lower_bound, 0, shapes_.MaxAllreduceIndex()));
    const int upper = HasPlan(*a) ? static_cast<int>(std::min<int64_t>(pcap, a->items)) : pcap;
    return PipelineRange{lower, std::max(lower, upper)};
  }
  // The fewest free pipelines with which tau does not beat the incumbent (all-reduce never
  // decreases with the count); INT64_MAX when no count is that many.
  int64_t PipelinesNotBeating(double tau) const {
    for (int64_t p = 0; p <= shapes_.MaxAllreduceIndex(); ++p) {
      if (tau + shapes_.Allreduce(static_cast<int>(p)) >= best_.value) return p;
    }
    return INT64_MAX;
  }

  // The fewest free pipelines (<= pcap) that run the batch within tau; -1 if none. The
  // plan it found stays current (the DP's table, or the integer program's counts).
  absl::StatusOr<int> MinPipelines(double tau, int pcap) {
    if (!use_ilp_) return dp_->MinPipelines(tau, pcap);
    // An exact answer is at most pcap whenever the search asks (P_min is monotone).
    ASSIGN_OR_RETURN(const IlpAnswer* a, ilp_.Solve(tau, CoverIlpGoal::kOptimal));
    if (!HasPlan(*a)) return -1;
    ilp_counts_ = a->counts;
    return static_cast<int>(a->items);
  }
  // The current plan becomes the incumbent's: the table MinPipelines just filled at tau,
  // or the integer program's answer.
  void KeepCurrent() {
    if (dp_.has_value()) dp_->KeepTable();
    std::swap(best_.counts, ilp_counts_);
  }
  void Consider(double tau, int p) {
    if (p < 0) return;
    const double value = tau + shapes_.Allreduce(p);
    if (value < best_.value) {
      best_.value = value;
      best_.tau = tau;
      best_.pipelines = p;
      KeepCurrent();
    }
  }

  // Branch and bound over (a, b): P_min in [pb, pa] in between, a either considered with
  // P_min(a) pipelines or unable to beat the incumbent (PipelinesAt). Only
  // tau < best - allreduce(pb) can improve on the incumbent, so the bisection runs over
  // (a, min(b, that)); the all-reduce differs little between pipeline counts, so this
  // range is usually a few candidates wide. pa == pb closes the interval: P_min = pb there,
  // and every tau in it takes longer than a with as many pipelines.
  absl::Status Search(double a, int pa, double b, int pb) {
    if (pa == pb) return absl::OkStatus();  // same P: every tau in (a, b) is worse than a
    const std::vector<plan_search::LoadCurve>& all = shapes_.all();
    const double hi = std::min(b, best_.value - shapes_.Allreduce(pb));
    const double first = NextAbove(all, a);
    if (first >= hi) return absl::OkStatus();
    const double mid = a + (hi - a) / 2;
    double c = AtOrBelow(all, mid);
    if (c <= a) c = first;
    ASSIGN_OR_RETURN(PipelineRange pc, PipelinesAt(c, pa));
    if (pc.lower < 0) return absl::OkStatus();  // an unsolved integer program: the gap says so
    RETURN_IF_ERROR(Search(a, pa, c, pc.lower));
    return Search(c, pc.upper, b, pb);
  }

  // A lower bound on every plan's iteration time: the first makespan not proven infeasible
  // plus the all-reduce of the fewest pipelines any plan better than the incumbent needs
  // (P_min never increases with tau, and such a plan's makespan is below the incumbent).
  absl::StatusOr<double> ProvenLowerBound() {
    const double tau_low = NextAbove(shapes_.all(), progress_.proven_infeasible);
    const double tau_top = AtOrBelow(shapes_.all(), std::nextafter(best_.value, -kInf));
    if (tau_top < tau_low) return best_.value;
    ASSIGN_OR_RETURN(const IlpAnswer* a, ilp_.Solve(tau_top, CoverIlpGoal::kRelaxation));
    if (a->status == CoverIlpStatus::kInfeasible) return best_.value;
    const int p_low =
        static_cast<int>(std::clamp<int64_t>(a->lower_bound, 0, shapes_.MaxAllreduceIndex()));
    return std::min(best_.value, tau_low + shapes_.Allreduce(p_low));
  }

  // The incumbent's shapes, one per free pipeline.
  absl::StatusOr<std::vector<int>> ChosenShapes() const {
    std::vector<int> chosen;
    if (best_.pipelines <= 0) return chosen;
    if (!use_ilp_) return dp_->Trace(best_.tau, best_.pipelines);
    if (best_.counts.size() != shapes_.shapes().size()) {
      return absl::InternalError("plan search: no plan kept");
    }
    for (size_t j = 0; j < best_.counts.size(); ++j) {
      for (int64_t c = 0; c < best_.counts[j]; ++c) chosen.push_back(static_cast<int>(j));
    }
    return chosen;
  }

  absl::StatusOr<PipelineSetSolution> Reconstruct() {
    PipelineSetSolution solution;
    ASSIGN_OR_RETURN(solution.chosen, ChosenShapes());
    std::vector<PipelineLoad> loads;
    for (const PipelineShape& f : problem_.fixed)
      loads.push_back({&f.stage_costs, f.max_microbatches});
    for (int j : solution.chosen) {
      const PipelineShape& s = problem_.Shapes()[j];
      loads.push_back({&s.stage_costs, s.max_microbatches});
    }
    const CostModel* model = shapes_.model();
    ASSIGN_OR_RETURN(std::vector<int> split, SplitBatch(*model, loads, shapes_.global_batch()));
    const size_t num_fixed = shapes_.FixedCount();
    solution.fixed_microbatches.assign(split.begin(), split.begin() + num_fixed);
    solution.chosen_microbatches.assign(split.begin() + num_fixed, split.end());
    for (size_t i = 0; i < loads.size(); ++i) {
      solution.pipeline_time_ms = std::max(solution.pipeline_time_ms,
                                           model->PipelineTimeMs(*loads[i].stage_costs, split[i]));
    }
    solution.allreduce_ms = (*problem_.allreduce_ms)[loads.size()];
    solution.iteration_time_ms = solution.pipeline_time_ms + solution.allreduce_ms;
    solution.evaluations = progress_.evaluations;
    solution.method = use_ilp_ ? PlanSearchMethod::kCoverIlp : PlanSearchMethod::kNodeCountDp;
    solution.price_steps = shapes_.fixed_price();
    for (int j : solution.chosen) solution.price_steps += shapes_.shape_price(j);
    if (problem_.objective == PlanObjective::kCost) {
      // The gap on price x time: what no plan left unexplored can undercut.
      const double cost = static_cast<double>(solution.price_steps) * solution.iteration_time_ms;
      if (progress_.inexact && cost > 0) {
        solution.optimality_gap =
            std::max(0.0, (cost - std::min(cost, progress_.cost_open_bound)) / cost);
      }
    } else if (progress_.inexact) {
      ASSIGN_OR_RETURN(double bound, ProvenLowerBound());
      solution.optimality_gap =
          std::max(0.0, (solution.iteration_time_ms - bound) / solution.iteration_time_ms);
    }
    return solution;
  }

  const PipelineSetProblem& problem_;
  const SearchShapes shapes_;
  SearchProgress progress_;
  MakespanIlp ilp_;
  MakespanBracket bracket_;
  const bool use_ilp_;
  std::optional<NodeCountDp> dp_;  // unless use_ilp_
  Incumbent best_;
  std::vector<int64_t> ilp_counts_;  // per shape: the integer program's last answer
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
