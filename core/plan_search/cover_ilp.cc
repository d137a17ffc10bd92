// SolveCoverIlp (core/plan_search/cover_ilp.h) on GLPK.
#include "core/plan_search/cover_ilp.h"

#include <glpk.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <optional>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/status_macros.h"

namespace oobleck {
namespace {

// GLPK solves in floating point; its bounds on an integer objective are rounded up past
// this much slack, its column values rounded to the nearest integer and then checked in
// integer arithmetic (CoverIlpFeasible), so no answer rests on a tolerance alone.
constexpr double kObjectiveTolerance = 1e-6;
// An LP value within this of an integer counts as that integer when rounding down.
constexpr double kIntegralityTolerance = 1e-7;
constexpr double kRelativeObjectiveTolerance = 1e-12;

// A GLPK problem that frees itself and the thread's GLPK environment (GLPK keeps one per
// thread; freeing it keeps threads that come and go from accumulating them).
class GlpkProblem {
 public:
  GlpkProblem() : lp_(glp_create_prob()) {}
  ~GlpkProblem() {
    glp_delete_prob(lp_);
    glp_free_env();
  }
  GlpkProblem(const GlpkProblem&) = delete;
  GlpkProblem& operator=(const GlpkProblem&) = delete;
  glp_prob* get() const { return lp_; }

 private:
  glp_prob* lp_;
};

absl::Status Validate(const CoverIlp& p) {
  const size_t rows = p.capacity.size();
  for (size_t r = 0; r < rows; ++r) {
    if (p.capacity[r] < 0) return absl::InvalidArgumentError(absl::StrCat("capacity[", r, "] < 0"));
  }
  if (p.gain.size() != p.usage.size()) {
    return absl::InvalidArgumentError("cover ILP: gain and usage differ in size");
  }
  for (size_t j = 0; j < p.usage.size(); ++j) {
    if (p.usage[j].size() != rows) {
      return absl::InvalidArgumentError(absl::StrCat("cover ILP: usage[", j, "] has wrong size"));
    }
    if (p.gain[j] < 0) return absl::InvalidArgumentError(absl::StrCat("gain[", j, "] < 0"));
    for (int u : p.usage[j]) {
      if (u < 0) return absl::InvalidArgumentError(absl::StrCat("usage[", j, "] < 0"));
    }
  }
  if (p.min_items < 0 || p.min_items > p.max_items) {
    return absl::InvalidArgumentError("cover ILP: need 0 <= min_items <= max_items");
  }
  if (!p.weight.empty() && p.weight.size() != p.usage.size()) {
    return absl::InvalidArgumentError("cover ILP: weight and usage differ in size");
  }
  for (size_t j = 0; j < p.weight.size(); ++j) {
    if (p.weight[j] < 0) return absl::InvalidArgumentError(absl::StrCat("weight[", j, "] < 0"));
  }
  if (p.budget >= 0) {
    if (p.spend.size() != p.usage.size()) {
      return absl::InvalidArgumentError("cover ILP: spend and usage differ in size");
    }
    for (size_t j = 0; j < p.spend.size(); ++j) {
      if (p.spend[j] < 0) return absl::InvalidArgumentError(absl::StrCat("spend[", j, "] < 0"));
    }
  }
  return absl::OkStatus();
}

int64_t Weight(const CoverIlp& p, size_t j) { return p.weight.empty() ? 1 : p.weight[j]; }
bool HasBudget(const CoverIlp& p) { return p.budget >= 0; }

int64_t ObjectiveOf(const CoverIlp& p, const std::vector<int64_t>& y) {
  int64_t sum = 0;
  for (size_t j = 0; j < y.size(); ++j) sum += Weight(p, j) * y[j];
  return sum;
}

// Upper bound of item j alone: what every row and the item count allow.
int64_t ItemBound(const CoverIlp& p, size_t j) {
  int64_t bound = p.max_items;
  for (size_t r = 0; r < p.capacity.size(); ++r) {
    if (p.usage[j][r] > 0) bound = std::min(bound, p.capacity[r] / p.usage[j][r]);
  }
  if (HasBudget(p) && p.spend[j] > 0) bound = std::min(bound, p.budget / p.spend[j]);
  return bound;
}

void Load(const CoverIlp& p, glp_prob* lp) {
  const int rows = static_cast<int>(p.capacity.size());
  const int items = static_cast<int>(p.usage.size());
  glp_set_obj_dir(lp, GLP_MIN);
  const bool budget = HasBudget(p);
  glp_add_rows(lp, rows + 2 + (budget ? 1 : 0));
  if (budget) glp_set_row_bnds(lp, rows + 3, GLP_UP, 0, static_cast<double>(p.budget));
  for (int r = 0; r < rows; ++r) {
    glp_set_row_bnds(lp, r + 1, GLP_UP, 0, static_cast<double>(p.capacity[r]));
  }
  glp_set_row_bnds(lp, rows + 1, GLP_LO, static_cast<double>(p.need), 0);
  const double lo = static_cast<double>(p.min_items), hi = static_cast<double>(p.max_items);
  if (p.max_items == INT64_MAX) {
    glp_set_row_bnds(lp, rows + 2, GLP_LO, lo, 0);
  } else {
    glp_set_row_bnds(lp, rows + 2, lo == hi ? GLP_FX : GLP_DB, lo, hi);
  }
  glp_add_cols(lp, items);
  std::vector<int> ia(1), ja(1);
  std::vector<double> ar(1);
  for (int j = 0; j < items; ++j) {
    glp_set_col_kind(lp, j + 1, GLP_IV);
    const double ub = static_cast<double>(ItemBound(p, j));
    glp_set_col_bnds(lp, j + 1, ub > 0 ? GLP_DB : GLP_FX, 0, std::max(ub, 0.0));
    glp_set_obj_coef(lp, j + 1, static_cast<double>(Weight(p, j)));
    auto add = [&](int row, double value) {
      ia.push_back(row);
      ja.push_back(j + 1);
      ar.push_back(value);
    };
    for (int r = 0; r < rows; ++r) {
      if (p.usage[j][r] != 0) add(r + 1, p.usage[j][r]);
    }
    if (p.gain[j] != 0) add(rows + 1, static_cast<double>(p.gain[j]));
    add(rows + 2, 1);
    if (budget && p.spend[j] != 0) add(rows + 3, static_cast<double>(p.spend[j]));
  }
  glp_load_matrix(lp, static_cast<int>(ia.size()) - 1, ia.data(), ja.data(), ar.data());
}

// (Weighted objectives reach 1e13 or so: the slack grows with the value, so that GLPK's
// rounding never makes a bound larger than the truth.) GLPK gives -DBL_MAX as the bound of a
// node whose relaxation is not solved yet: that is no bound, and subtracting the slack from
// it overflows to -inf, so anything outside int64's range saturates (a lower bound may
// always be lowered).
int64_t CeilBound(double value) {
  const double slack = std::max(kObjectiveTolerance, kRelativeObjectiveTolerance * std::abs(value));
  const double bound = std::ceil(value - slack);
  // 2^63 as a double; every double below it (and at least -2^63) converts exactly.
  constexpr double kInt64Limit = 9223372036854775808.0;
  if (!(bound >= -kInt64Limit)) return std::numeric_limits<int64_t>::min();
  if (bound >= kInt64Limit) return std::numeric_limits<int64_t>::max();
  return static_cast<int64_t>(bound);
}

// The LP solution rounded down (repaired where rounding overshot a row), then completed
// greedily with the item of largest gain that still fits, then trimmed of items the cover
// does not need. nullopt when the greedy completion gets stuck.
std::optional<std::vector<int64_t>> RoundLp(const CoverIlp& p, const std::vector<double>& x) {
  const size_t rows = p.capacity.size(), items = p.usage.size();
  std::vector<int64_t> y(items), left(p.capacity);
  int64_t gained = 0, count = 0, budget_left = p.budget;
  const bool budget = HasBudget(p);
  for (size_t j = 0; j < items; ++j) {
    y[j] = std::max<int64_t>(0, static_cast<int64_t>(std::floor(x[j] + kIntegralityTolerance)));
  }
  auto fits = [&](size_t j) {
    for (size_t r = 0; r < rows; ++r) {
      if (p.usage[j][r] > left[r]) return false;
    }
    return !budget || p.spend[j] <= budget_left;
  };
  auto take = [&](size_t j, int64_t n) {
    y[j] += n;
    for (size_t r = 0; r < rows; ++r) left[r] -= p.usage[j][r] * n;
    if (budget) budget_left -= p.spend[j] * n;
    gained += p.gain[j] * n;
    count += n;
  };
  std::vector<int64_t> start = std::move(y);
  y.assign(items, 0);
  for (size_t j = 0; j < items; ++j) {  // as much of the rounded LP as fits
    int64_t n = std::min(start[j], p.max_items - count);
    for (size_t r = 0; r < rows; ++r) {
      if (p.usage[j][r] > 0) n = std::min(n, left[r] / p.usage[j][r]);
    }
    if (budget && p.spend[j] > 0) n = std::min(n, budget_left / p.spend[j]);
    if (n > 0) take(j, n);
  }
  // Without weights the item of largest gain; with weights the most gain per weight.
  auto better = [&](size_t a, size_t b) {
    if (p.weight.empty()) return p.gain[a] > p.gain[b];
    return static_cast<double>(p.gain[a]) * static_cast<double>(Weight(p, b)) >
           static_cast<double>(p.gain[b]) * static_cast<double>(Weight(p, a));
  };
  while ((gained < p.need || count < p.min_items) && count < p.max_items) {
    std::optional<size_t> best;
    for (size_t j = 0; j < items; ++j) {
      if (fits(j) && (!best || better(j, *best))) best = j;
    }
    if (!best) return std::nullopt;
    take(*best, 1);
  }
  // Drop items the cover and the minimum count can do without: of least gain, or with
  // weights the heaviest first.
  std::vector<size_t> order(items);
  for (size_t j = 0; j < items; ++j) order[j] = j;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return p.weight.empty() ? p.gain[a] < p.gain[b] : Weight(p, a) > Weight(p, b);
  });
  for (size_t j : order) {
    while (y[j] > 0 && count > p.min_items && gained - p.gain[j] >= p.need) take(j, -1);
  }
  if (!CoverIlpFeasible(p, y)) return std::nullopt;
  return y;
}

struct SearchState {
  const CoverIlp* problem = nullptr;
  const CoverIlpLimits* limits = nullptr;
  std::vector<double> heuristic;  // 1-based column values of the rounded LP, empty if none
  bool heuristic_given = false;
  int64_t lower_bound = 0;
  int64_t nodes = 0;
  bool proved = false;
  // kFirstFeasible branches on the most gain instead (SeekFeasible): GLPK's bounds are then
  // not bounds on the objective.
  bool by_gain = false;
  bool cancelled = false;
};

// Branch-and-cut callback: offers the rounded LP as the first incumbent, raises the proven
// bound (rounded up: the objective is an integer), stops once it meets the incumbent, at
// the node limit or on cancellation.
void OnSearchEvent(glp_tree* tree, void* info) {
  SearchState& s = *static_cast<SearchState*>(info);
  if (glp_ios_reason(tree) == GLP_IHEUR && !s.heuristic_given && !s.heuristic.empty()) {
    s.heuristic_given = true;
    glp_ios_heur_sol(tree, s.heuristic.data());
  }
  int active = 0, alive = 0, total = 0;
  glp_ios_tree_size(tree, &active, &alive, &total);
  s.nodes = total;
  glp_prob* lp = glp_ios_get_prob(tree);
  if (s.by_gain) {
    if (glp_mip_status(lp) == GLP_FEAS || total > s.limits->max_nodes) glp_ios_terminate(tree);
    if (s.limits->cancelled && s.limits->cancelled()) {
      s.cancelled = true;
      glp_ios_terminate(tree);
    }
    return;
  }
  double bound = std::numeric_limits<double>::infinity();
  if (const int best = glp_ios_best_node(tree); best != 0) bound = glp_ios_node_bound(tree, best);
  if (const int curr = glp_ios_curr_node(tree); curr != 0) {
    bound = std::min(bound, glp_ios_node_bound(tree, curr));
  }
  if (std::isfinite(bound)) s.lower_bound = std::max(s.lower_bound, CeilBound(bound));
  if (glp_mip_status(lp) == GLP_FEAS && std::llround(glp_mip_obj_val(lp)) <= s.lower_bound) {
    s.proved = true;
    glp_ios_terminate(tree);
  } else if (s.lower_bound >= s.limits->stop_at_bound) {
    glp_ios_terminate(tree);
  } else if (s.limits->cancelled && s.limits->cancelled()) {
    s.cancelled = true;
    glp_ios_terminate(tree);
  } else if (total > s.limits->max_nodes) {
    glp_ios_terminate(tree);
  }
}

CoverIlpSolution Finish(const CoverIlp& p, CoverIlpStatus status, std::vector<int64_t> counts,
                        int64_t lower_bound, int64_t nodes) {
  CoverIlpSolution s;
  s.status = status;
  s.items = 0;
  for (int64_t c : counts) s.items += c;
  s.objective = ObjectiveOf(p, counts);
  s.counts = std::move(counts);
  s.lower_bound = status == CoverIlpStatus::kOptimal ? s.objective : lower_bound;
  s.nodes = nodes;
  return s;
}

// The LP relaxation of the loaded problem: true when it has an optimum, false when it is
// infeasible (then so is the integer program).
absl::StatusOr<bool> SolveRelaxation(glp_prob* lp) {
  glp_smcp simplex;
  glp_init_smcp(&simplex);
  simplex.msg_lev = GLP_MSG_OFF;
  if (glp_simplex(lp, &simplex) != 0) {
    return absl::InternalError("cover ILP: the LP relaxation failed to solve");
  }
  if (glp_get_status(lp) == GLP_NOFEAS) return false;
  if (glp_get_status(lp) != GLP_OPT) {
    return absl::InternalError("cover ILP: the LP relaxation has no optimum");
  }
  return true;
}

std::vector<double> ColumnValues(glp_prob* lp, size_t items) {
  std::vector<double> x(items);
  for (size_t j = 0; j < items; ++j) x[j] = glp_get_col_prim(lp, static_cast<int>(j) + 1);
  return x;
}

// GLPK's branch-and-cut parameters: quiet, with cuts and the callback above.
glp_iocp BranchAndCutParams(const CoverIlp& p, SearchState& state) {
  glp_iocp params;
  glp_init_iocp(&params);
  params.msg_lev = GLP_MSG_OFF;
  params.gmi_cuts = GLP_ON;
  params.mir_cuts = GLP_ON;
  params.cb_func = OnSearchEvent;
  params.cb_info = &state;
  if (!p.weight.empty()) {
    // GLPK prunes a branch whose bound is within tol_obj * (1 + |incumbent|) of the
    // incumbent: keep that below one unit of the integer objective, so that no better
    // solution is pruned.
    double largest = 1;
    for (size_t j = 0; j < p.usage.size(); ++j) {
      largest += static_cast<double>(Weight(p, j)) * static_cast<double>(ItemBound(p, j));
    }
    params.tol_obj = std::min(params.tol_obj, 0.25 / largest);
  }
  return params;
}

// GLPK's incumbent rounded to integers, if it has one that passes the integer check.
std::optional<std::vector<int64_t>> GlpkIncumbent(const CoverIlp& p, glp_prob* lp) {
  if (glp_mip_status(lp) != GLP_OPT && glp_mip_status(lp) != GLP_FEAS) return std::nullopt;
  std::vector<int64_t> y(p.usage.size());
  for (size_t j = 0; j < y.size(); ++j) {
    y[j] = std::llround(glp_mip_col_val(lp, static_cast<int>(j) + 1));
  }
  if (!CoverIlpFeasible(p, y)) return std::nullopt;
  return y;
}

// Branch and cut from the solved relaxation (state holds its bound and the rounding as a
// heuristic), then the answer: the better of GLPK's incumbent and the rounding, optimal
// when it meets the proven bound.
absl::StatusOr<CoverIlpSolution> BranchAndCut(const CoverIlp& p, glp_prob* lp, SearchState& state,
                                              std::optional<std::vector<int64_t>> rounded) {
  const size_t items = p.usage.size();
  if (state.limits->goal == CoverIlpGoal::kFirstFeasible) {
    // Any feasible y answers a yes/no question; the most gain leads to one soonest (the
    // fewest items does not: near the smallest feasible makespan it heads for large items
    // that leave the demand uncovered).
    for (size_t j = 0; j < items; ++j) {
      glp_set_obj_coef(lp, static_cast<int>(j) + 1, -static_cast<double>(p.gain[j]));
    }
    RETURN_IF_ERROR(SolveRelaxation(lp).status());
    state.by_gain = true;
  }
  glp_iocp params = BranchAndCutParams(p, state);
  const int ret = glp_intopt(lp, &params);
  if (state.cancelled) return absl::CancelledError("plan search cancelled");
  std::optional<std::vector<int64_t>> incumbent = GlpkIncumbent(p, lp);
  if (!incumbent || (rounded && ObjectiveOf(p, *rounded) < ObjectiveOf(p, *incumbent))) {
    incumbent = std::move(rounded);
  }
  const bool complete = ret == 0;
  if (complete && glp_mip_status(lp) == GLP_NOFEAS && !incumbent) {
    return Finish(p, CoverIlpStatus::kInfeasible, std::vector<int64_t>(items, 0), 0, state.nodes);
  }
  if (complete && glp_mip_status(lp) == GLP_OPT && incumbent && !state.by_gain) {
    state.lower_bound = std::max(state.lower_bound, ObjectiveOf(p, *incumbent));
  }
  if (!incumbent) {
    return Finish(p, CoverIlpStatus::kUnknown, std::vector<int64_t>(items, 0), state.lower_bound,
                  state.nodes);
  }
  const CoverIlpStatus status = ObjectiveOf(p, *incumbent) <= state.lower_bound
                                    ? CoverIlpStatus::kOptimal
                                    : CoverIlpStatus::kBounded;
  return Finish(p, status, *std::move(incumbent), state.lower_bound, state.nodes);
}

}  // namespace

bool CoverIlpFeasible(const CoverIlp& p, const std::vector<int64_t>& counts) {
  if (counts.size() != p.usage.size()) return false;
  std::vector<int64_t> used(p.capacity.size(), 0);
  int64_t gained = 0, count = 0;
  for (size_t j = 0; j < counts.size(); ++j) {
    if (counts[j] < 0) return false;
    for (size_t r = 0; r < used.size(); ++r) used[r] += p.usage[j][r] * counts[j];
    gained += p.gain[j] * counts[j];
    count += counts[j];
  }
  for (size_t r = 0; r < used.size(); ++r) {
    if (used[r] > p.capacity[r]) return false;
  }
  if (HasBudget(p)) {
    if (p.spend.size() != counts.size()) return false;
    int64_t spent = 0;
    for (size_t j = 0; j < counts.size(); ++j) spent += p.spend[j] * counts[j];
    if (spent > p.budget) return false;
  }
  return gained >= p.need && count >= p.min_items && count <= p.max_items;
}

absl::StatusOr<CoverIlpSolution> SolveCoverIlp(const CoverIlp& p, const CoverIlpLimits& limits) {
  RETURN_IF_ERROR(Validate(p));
  const size_t items = p.usage.size();
  if (p.need <= 0 && p.min_items == 0) {
    return Finish(p, CoverIlpStatus::kOptimal, std::vector<int64_t>(items, 0), 0, 0);
  }
  if (items == 0) return Finish(p, CoverIlpStatus::kInfeasible, {}, 0, 0);
  GlpkProblem holder;
  glp_prob* lp = holder.get();
  Load(p, lp);
  ASSIGN_OR_RETURN(bool relaxed, SolveRelaxation(lp));
  if (!relaxed) return Finish(p, CoverIlpStatus::kInfeasible, std::vector<int64_t>(items, 0), 0, 0);
  SearchState state;
  state.problem = &p;
  state.limits = &limits;
  // (min_items bounds the item count, so the objective only without weights.)
  state.lower_bound = std::max(p.weight.empty() ? p.min_items : 0, CeilBound(glp_get_obj_val(lp)));
  std::optional<std::vector<int64_t>> rounded = RoundLp(p, ColumnValues(lp, items));
  if (rounded) {
    if (ObjectiveOf(p, *rounded) <= state.lower_bound) {
      return Finish(p, CoverIlpStatus::kOptimal, *std::move(rounded), 0, 0);
    }
    if (limits.goal != CoverIlpGoal::kOptimal || state.lower_bound >= limits.stop_at_bound) {
      return Finish(p, CoverIlpStatus::kBounded, *std::move(rounded), state.lower_bound, 0);
    }
    state.heuristic.assign(items + 1, 0);
    for (size_t j = 0; j < items; ++j) state.heuristic[j + 1] = static_cast<double>((*rounded)[j]);
  }
  if (limits.goal == CoverIlpGoal::kRelaxation || state.lower_bound >= limits.stop_at_bound) {
    return Finish(p, CoverIlpStatus::kUnknown, std::vector<int64_t>(items, 0), state.lower_bound,
                  0);
  }
  return BranchAndCut(p, lp, state, std::move(rounded));
}

}  // namespace oobleck
