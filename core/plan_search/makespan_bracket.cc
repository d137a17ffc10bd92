#include "core/plan_search/makespan_bracket.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/plan_search/packing_lp.h"
#include "core/status_macros.h"

namespace oobleck::plan_search {
namespace {

// The gallop up from the LP bound: the first step is this fraction of the bound (at least
// kGallopMinStepMs), and each step kGallopGrowth times the last. Small first steps reach an
// optimum a few candidates above the bound in few exact passes; the growth keeps the passes
// logarithmic in the distance when it lies far above.
constexpr double kGallopFirstStep = 1e-6;
constexpr double kGallopMinStepMs = 1e-9;
constexpr double kGallopGrowth = 4;
// Around a replan's hint: relative steps from kHintFirstStep (a replan's old makespan is
// usually within a few percent), doubling while below kHintStepLimit (far past any
// candidate); a step down takes at most kHintMaxStepDown of the makespan, so the probe
// stays positive.
constexpr double kHintFirstStep = 0.01;
constexpr double kHintStepLimit = 1e6;
constexpr double kHintMaxStepDown = 0.999;

}  // namespace

absl::Status MakespanBracket::Narrow(bool from_lp, MakespanTest exact, double& bad, double& good) {
  const double hint = shapes_.problem().makespan_hint_ms;
  const std::vector<LoadCurve>& all = shapes_.all();
  // The LP relaxation bounds what the pipelines absorb from above, so no tau below its
  // smallest feasible one is feasible; the exact optimum is usually a few candidates on.
  if (from_lp) {
    auto relaxed = [&](double tau) -> absl::StatusOr<bool> { return RelaxedFeasible(tau); };
    // (good is still the largest candidate here.) A replan's hint narrows the LP's
    // bisection too: its bound is usually within a percent of the old makespan.
    double lp_bad = -kInf, lp_good = good;
    if (hint > 0 && std::isfinite(hint)) RETURN_IF_ERROR(AroundHint(relaxed, lp_bad, lp_good));
    ASSIGN_OR_RETURN(double tau_lp, SmallestFeasible(all, lp_bad, lp_good, relaxed));
    bad = std::nextafter(tau_lp, -kInf);
    progress_.proven_infeasible = AtOrBelow(all, bad);  // the LP rules out every tau <= bad
    // Gallop up from the LP bound with growing steps (in ms), then bisect what is left.
    for (double step = std::max(kGallopFirstStep * std::abs(tau_lp), kGallopMinStepMs);;
         step *= kGallopGrowth) {
      const double probe = NextAbove(all, std::nextafter(bad + step, -kInf));
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

absl::Status MakespanBracket::AroundHint(MakespanTest feasible, double& bad, double& good) const {
  const double hint = shapes_.problem().makespan_hint_ms;
  const std::vector<LoadCurve>& all = shapes_.all();
  double probe = AtOrBelow(all, hint);
  if (probe == -kInf) probe = NextAbove(all, -kInf);
  ASSIGN_OR_RETURN(bool ok, probe < good ? feasible(probe) : absl::StatusOr<bool>(true));
  if (probe < good && ok) good = probe;
  if (probe < good && !ok) bad = probe;
  for (double f = kHintFirstStep; f < kHintStepLimit; f *= 2) {
    const bool down = bad == -kInf;  // still looking for an infeasible tau below
    const double next =
        down ? AtOrBelow(all, std::nextafter(good * (1 - std::min(f, kHintMaxStepDown)), -kInf))
             : NextAbove(all, std::nextafter(bad * (1 + f), -kInf));
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

bool MakespanBracket::RelaxedFeasible(double tau) const {
  const int need = shapes_.Need(tau);
  if (need == kImpossibleNeed) return false;
  if (need <= 0) return true;
  const NodeMix& available = shapes_.problem().available;
  std::vector<std::vector<double>> columns;
  std::vector<double> gains, rows(available.begin(), available.end());
  for (const Usable& s : shapes_.UsableShapes(tau)) {
    const NodeMix& mix = shapes_.problem().Shapes()[s.shape].mix;
    columns.emplace_back(mix.begin(), mix.end());
    gains.push_back(s.absorb);
  }
  if (columns.empty()) return false;
  const double bound = PackingLpMax(columns, gains, rows);
  // Rounding in the simplex must not make the bound smaller than the true optimum.
  return bound * (1 + 1e-9) + 1e-6 >= need;
}

}  // namespace oobleck::plan_search
