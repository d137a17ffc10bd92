// Prices in whole steps per hour (docs/COST_MODEL.md#price), and the price of a plan.
#ifndef OOBLECK_CORE_PLAN_PRICE_H_
#define OOBLECK_CORE_PLAN_PRICE_H_

#include <cstdint>
#include <vector>

#include "core/plan/cluster_plan.h"

namespace oobleck {

// Prices are compared in steps of this much per hour, so that the integer programs
// minimise an integer. Every node type's price must be a whole number of steps
// (ValidatePlanPrices): then the steps are exact, a budget is compared exactly (BudgetSteps)
// and ClusterPlan::price_per_hour (steps / kPriceStepsPerHour) never exceeds it.
inline constexpr int64_t kPriceStepsPerHour = 10000;
inline constexpr double kPriceStepPerHour = 1.0 / kPriceStepsPerHour;
// The largest price_per_hour of one node (keeps every sum of prices exact in a double).
inline constexpr double kMaxPricePerHour = 1e6;
// A price in steps of kPriceStepPerHour (rounded to the nearest step).
int64_t PriceSteps(double price_per_hour);
// Whether a price is a whole number of steps, up to the rounding of a double (1e-6 of a step
// plus 1e-12 of the price).
bool OnPriceGrid(double price_per_hour);
// A price of `steps` steps per hour: the double nearest steps / kPriceStepsPerHour.
double PriceOfSteps(int64_t steps);
// The most steps whose price (PriceOfSteps) is at most `budget_per_hour` (finite, >= 0):
// a plan of prices on the grid is within the budget exactly when its steps are.
int64_t BudgetSteps(double budget_per_hour);

// Sum of price_per_hour[type] over the nodes of the plan's pipelines (0 without prices), in
// steps (prices on the grid: ValidatePlanPrices), read back by PriceOfSteps. A node's type is
// its template position's (a valid plan's ids have those types: EvaluatePlan).
double PlanPricePerHour(const ClusterPlan& plan, const std::vector<double>& price_per_hour);

}  // namespace oobleck

#endif  // OOBLECK_CORE_PLAN_PRICE_H_
