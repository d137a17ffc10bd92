#include "core/plan/price.h"

#include <cmath>

namespace oobleck {

int64_t PriceSteps(double price_per_hour) {
  return static_cast<int64_t>(std::llround(price_per_hour * kPriceStepsPerHour));
}

bool OnPriceGrid(double price_per_hour) {
  // Up to the rounding of a price computed from others (0.45 per GPU x 3 GPUs): the plan's
  // price is its steps read back, and those are what the budget is compared with.
  const double steps = price_per_hour * kPriceStepsPerHour;
  return std::abs(steps - std::round(steps)) <= 1e-6 + 1e-12 * steps;
}

double PriceOfSteps(int64_t steps) {
  return static_cast<double>(steps) / static_cast<double>(kPriceStepsPerHour);
}

int64_t BudgetSteps(double budget_per_hour) {
  int64_t steps = static_cast<int64_t>(std::floor(budget_per_hour * kPriceStepsPerHour));
  // (The product rounds; step to the exact boundary of the comparison the answer makes.)
  while (steps > 0 && PriceOfSteps(steps) > budget_per_hour) --steps;
  while (PriceOfSteps(steps + 1) <= budget_per_hour) ++steps;
  return steps;
}

double PlanPricePerHour(const ClusterPlan& plan, const std::vector<double>& price_per_hour) {
  if (price_per_hour.empty()) return 0;
  int64_t steps = 0;
  for (const PlannedPipeline& p : plan.pipelines) {
    for (const int type : p.tmpl.node_order) steps += PriceSteps(price_per_hour[type]);
  }
  return PriceOfSteps(steps);
}

}  // namespace oobleck
