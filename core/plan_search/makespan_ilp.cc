#include "core/plan_search/makespan_ilp.h"

#include <algorithm>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/plan/pipeline_set.h"
#include "core/plan/price.h"
#include "core/shown_value.h"
#include "core/status_macros.h"

namespace oobleck::plan_search {
namespace {

// Whether `a` answers a question asked with `goal`: a proven answer answers every one, a
// plan answers "is there one", and every answer has a proven lower bound.
bool Answers(const IlpAnswer& a, CoverIlpGoal goal) {
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

}  // namespace

absl::StatusOr<const IlpAnswer*> MakespanIlp::Solve(double tau, CoverIlpGoal goal,
                                                    int64_t stop_at_bound) {
  auto [it, inserted] = memo_.try_emplace(tau);
  if (!inserted && Answers(it->second, goal)) return &it->second;
  absl::StatusOr<IlpAnswer> answer =
      Run(tau, /*by_price=*/false,
          std::max<int64_t>(0, shapes_.global_batch() - int64_t{shapes_.FixedCount()}),
          shapes_.free_budget(), goal, stop_at_bound);
  if (!answer.ok()) {
    if (inserted) memo_.erase(it);
    return answer.status();
  }
  it->second = *std::move(answer);
  return &it->second;
}

absl::StatusOr<IlpAnswer> MakespanIlp::Run(double tau, bool by_price, int64_t max_items,
                                           int64_t max_price, CoverIlpGoal goal,
                                           int64_t stop_at_bound, int64_t min_items) {
  const PipelineSetProblem& problem = shapes_.problem();
  IlpAnswer answer;
  answer.goal = goal;
  const int need = shapes_.Need(tau);
  const int64_t fixed = shapes_.FixedCount();
  CoverIlp ilp;
  ilp.capacity.assign(problem.available.begin(), problem.available.end());
  ilp.need = need == kImpossibleNeed ? 0 : need;
  ilp.min_items = min_items >= 0 ? min_items : std::max<int64_t>(0, problem.min_pipelines - fixed);
  ilp.max_items = max_items;
  if (need == kImpossibleNeed || ilp.min_items > ilp.max_items) return answer;  // infeasible
  if (problem.max_price_steps >= 0 && shapes_.free_budget() < 0) {
    return answer;  // the fixed ones cost more
  }
  const std::vector<Usable> usable = shapes_.UsableShapes(tau);
  for (const Usable& u : usable) {
    const NodeMix& mix = problem.Shapes()[u.shape].mix;
    ilp.usage.emplace_back(mix.begin(), mix.end());
    ilp.gain.push_back(std::min(u.absorb, std::max(need, 1)));
    if (by_price) ilp.weight.push_back(shapes_.shape_price(u.shape));
    if (max_price >= 0) ilp.spend.push_back(shapes_.shape_price(u.shape));
  }
  ilp.budget = max_price;
  RETURN_IF_ERROR(progress_.Cancelled());
  ++progress_.evaluations;
  CoverIlpLimits limits;
  limits.goal = goal;
  limits.stop_at_bound = stop_at_bound;
  limits.max_nodes = problem.max_ilp_nodes;
  limits.cancelled = problem.search.cancelled;
  ASSIGN_OR_RETURN(CoverIlpSolution solved, SolveCoverIlp(ilp, limits));

  answer.status = solved.status;
  answer.items = solved.items;
  answer.objective = solved.objective;
  answer.lower_bound = solved.lower_bound;
  answer.counts.assign(shapes_.shapes().size(), 0);
  for (size_t i = 0; i < usable.size() && i < solved.counts.size(); ++i) {
    answer.counts[usable[i].shape] = solved.counts[i];
    answer.price += solved.counts[i] * shapes_.shape_price(usable[i].shape);
  }
  const bool stopped = goal == CoverIlpGoal::kOptimal && answer.lower_bound >= stop_at_bound &&
                       answer.status != CoverIlpStatus::kOptimal &&
                       answer.status != CoverIlpStatus::kInfeasible;
  if (stopped) {
    answer.goal = CoverIlpGoal::kRelaxation;  // a proven bound, as asked
    return answer;
  }
  // (Below kOptimal an unproven count was asked for; a yes/no question left open is not.)
  const bool open =
      goal == CoverIlpGoal::kOptimal
          ? answer.status == CoverIlpStatus::kBounded || answer.status == CoverIlpStatus::kUnknown
          : goal == CoverIlpGoal::kFirstFeasible && answer.status == CoverIlpStatus::kUnknown;
  if (open) progress_.inexact = true;
  return answer;
}

absl::Status MakespanIlp::Undecided() {
  return absl::ResourceExhaustedError(
      "counting the most pipelines the nodes fit: an integer program stopped at its node "
      "limit undecided; plan fewer node types or nodes at once");
}

// By integer programs "at least p of at most pmax free pipelines" (monotone in p: a plan
// with more has at least p): yes at want settles it (the usual case), else a bisection.
absl::StatusOr<int> MakespanIlp::MostPipelines(int want, int pmax) {
  const double tau = shapes_.TopTau();
  const bool none_free = shapes_.Need(tau) <= 0;  // the kept pipelines alone run the batch
  auto at_least = [&](int p) -> absl::StatusOr<bool> {
    ASSIGN_OR_RETURN(IlpAnswer a, Run(tau, /*by_price=*/false, pmax, -1,
                                      CoverIlpGoal::kFirstFeasible, INT64_MAX, p));
    if (a.status == CoverIlpStatus::kUnknown) return Undecided();
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

absl::StatusOr<bool> MakespanIlp::Feasible(double tau) {
  ASSIGN_OR_RETURN(const IlpAnswer* a, Solve(tau, CoverIlpGoal::kFirstFeasible));
  if (a->status == CoverIlpStatus::kInfeasible) {
    progress_.proven_infeasible = std::max(progress_.proven_infeasible, tau);
  }
  return HasPlan(*a);
}

absl::Status MakespanIlp::NoPlanError() {
  const PipelineSetProblem& problem = shapes_.problem();
  const int B = shapes_.global_batch();
  if (problem.max_price_steps >= 0) {
    // Within the budget nothing fits: say what the cheapest plan would cost, if any.
    ASSIGN_OR_RETURN(IlpAnswer cheapest,
                     Run(shapes_.TopTau(), /*by_price=*/true,
                         std::max<int64_t>(0, B - int64_t{shapes_.FixedCount()}), -1));
    if (HasPlan(cheapest)) {
      return absl::FailedPreconditionError(absl::StrFormat(
          "budget_per_hour = %s is below the price of every plan that runs the global batch "
          "of %d micro-batches%s: the cheapest uses nodes of %g per hour",
          problem.budget_per_hour > 0 ? ShowNumber(problem.budget_per_hour)
                                      : ShowNumber(PriceOfSteps(problem.max_price_steps)),
          B,
          AsksMorePipelines(problem) ? absl::StrCat(" with ", problem.min_pipelines, " pipelines")
                                     : std::string(),
          PriceOfSteps(shapes_.fixed_price() + cheapest.lower_bound)));
    }
  }
  if (AsksMorePipelines(problem)) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "no plan of at least %d pipelines fits the available nodes and holds the global "
        "batch of %d micro-batches within GPU memory (every pipeline needs one)",
        problem.min_pipelines, B));
  }
  return absl::FailedPreconditionError(absl::StrFormat(
      "the available pipelines cannot hold the global batch of %d micro-batches within GPU "
      "memory",
      B));
}

}  // namespace oobleck::plan_search
