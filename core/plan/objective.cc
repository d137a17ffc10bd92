#include "core/plan/objective.h"

#include "absl/strings/str_cat.h"
#include "core/field_path.h"
#include "core/shown_value.h"

namespace oobleck {

absl::StatusOr<PlanObjective> ParsePlanObjective(std::string_view name) {
  if (name.empty() || name == "time") return PlanObjective::kTime;
  if (name == "cost") return PlanObjective::kCost;
  if (name == "oobleck-instantiation") return PlanObjective::kOobleckInstantiation;
  return InvalidField("objective", absl::StrCat(" must be \"time\" or \"cost\", or "
                                                "\"oobleck-instantiation\" (got ",
                                                Quote(name), ")"));
}

std::string_view PlanObjectiveName(PlanObjective objective) {
  switch (objective) {
    case PlanObjective::kCost:
      return "cost";
    case PlanObjective::kOobleckInstantiation:
      return "oobleck-instantiation";
    case PlanObjective::kTime:
      break;
  }
  return "time";
}

}  // namespace oobleck
