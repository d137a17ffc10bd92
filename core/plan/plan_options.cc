#include "core/plan/plan_options.h"

#include <cmath>
#include <cstddef>

#include "absl/strings/str_format.h"
#include "core/field_path.h"
#include "core/plan/price.h"
#include "core/shown_value.h"

namespace oobleck {

absl::Status ValidatePlanPrices(const CostModel& model, const PlanOptions& options) {
  const int T = model.num_types();
  if (!options.price_per_hour.empty() && static_cast<int>(options.price_per_hour.size()) != T) {
    return InvalidField("price_per_hour", absl::StrFormat(": %d prices for %d node types",
                                                          options.price_per_hour.size(), T));
  }
  for (size_t t = 0; t < options.price_per_hour.size(); ++t) {
    const double price = options.price_per_hour[t];
    if (!(price >= 0 && price <= kMaxPricePerHour)) {  // also NaN
      return InvalidField(
          absl::StrFormat("cluster.node_types[%d].price_per_hour", t),
          absl::StrFormat(" must be in [0, %g] (got %s)", kMaxPricePerHour, ShowNumber(price)));
    }
    // Plans are compared with budgets in steps: a price between steps would be rounded, and
    // a plan could cost more than its budget.
    if (!OnPriceGrid(price)) {
      return InvalidField(
          absl::StrFormat("cluster.node_types[%d].price_per_hour", t),
          absl::StrFormat(" must be a multiple of %g per hour, the step prices are compared in "
                          "(got %s)",
                          kPriceStepPerHour, ShowNumber(price)));
    }
  }
  if (!(options.budget_per_hour >= 0 && std::isfinite(options.budget_per_hour))) {
    return InvalidField("budget_per_hour",
                        absl::StrFormat(" must be a finite number >= 0 (0: no budget; got %s)",
                                        ShowNumber(options.budget_per_hour)));
  }
  if (options.objective == PlanObjective::kCost) {
    for (int t = 0; t < T; ++t) {
      if (options.price_per_hour.empty() || !(options.price_per_hour[t] > 0)) {
        return FieldError(absl::StatusCode::kFailedPrecondition, "objective",
                          absl::StrFormat(" = \"cost\" needs prices: "
                                          "cluster.node_types[%d].price_per_hour (\"%s\") must "
                                          "be > 0",
                                          t, model.node_type(t).name));
      }
    }
  }
  if (options.budget_per_hour > 0 && options.price_per_hour.empty()) {
    return FieldError(absl::StatusCode::kFailedPrecondition, "budget_per_hour",
                      " needs prices: set cluster.node_types[].price_per_hour");
  }
  return absl::OkStatus();
}

}  // namespace oobleck
