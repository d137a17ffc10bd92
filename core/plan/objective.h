// What a plan minimises, and its names in requests.
#ifndef OOBLECK_CORE_PLAN_OBJECTIVE_H_
#define OOBLECK_CORE_PLAN_OBJECTIVE_H_

#include <string_view>

#include "absl/status/statusor.h"

namespace oobleck {

// What a plan minimises (docs/COST_MODEL.md#price).
enum class PlanObjective {
  kTime,  // "time": the iteration time
  kCost,  // "cost": price per iteration, (sum of the used nodes' price_per_hour) x time
  // "oobleck-instantiation": Oobleck's instantiation semantics and time formula
  // (core/oobleck_plan.h): every node used, one micro-batch count per template.
  kOobleckInstantiation,
};
// "time" -> kTime, "" -> kTime, "cost" -> kCost, "oobleck-instantiation" ->
// kOobleckInstantiation; INVALID_ARGUMENT naming `objective`.
absl::StatusOr<PlanObjective> ParsePlanObjective(std::string_view name);
std::string_view PlanObjectiveName(PlanObjective objective);

}  // namespace oobleck

#endif  // OOBLECK_CORE_PLAN_OBJECTIVE_H_
