// What a Plan request asks for besides its nodes and batch sizes.
#ifndef OOBLECK_CORE_PLAN_PLAN_OPTIONS_H_
#define OOBLECK_CORE_PLAN_PLAN_OPTIONS_H_

#include <vector>

#include "absl/status/status.h"
#include "core/cost_model.h"
#include "core/plan/fault_tolerance.h"
#include "core/plan/limits.h"
#include "core/plan/objective.h"
#include "core/search.h"

namespace oobleck {

struct PlanOptions {
  PipelineSizeLimits limits;
  // Plans have at least fault_tolerance + 1 pipelines (PipelineSetProblem::min_pipelines),
  // so that any fault_tolerance failures leave every layer a replica
  // (docs/COST_MODEL.md#fault-tolerance).
  int fault_tolerance = 0;
  SearchOptions search;  // cancellation, polled by the template search and the plan search
  PlanObjective objective = PlanObjective::kTime;
  // Per node type (empty: every price 0), each in [0, kMaxPricePerHour]; kCost needs every
  // type's price > 0. Errors name "cluster.node_types[i].price_per_hour".
  std::vector<double> price_per_hour{};
  // 0: none; else plans only use nodes whose prices add up to at most this.
  double budget_per_hour = 0;
  // kOobleck: fault_tolerance caps pipeline sizes at N - f instead (one pipeline may do).
  FaultToleranceRule fault_tolerance_rule = FaultToleranceRule::kPipelines;
};

// Prices in [0, kMaxPricePerHour] on the price grid (one per node type, or none), a finite
// budget >= 0, prices > 0 for kCost and prices for a budget; errors name the request's fields.
absl::Status ValidatePlanPrices(const CostModel& model, const PlanOptions& options);

}  // namespace oobleck

#endif  // OOBLECK_CORE_PLAN_PLAN_OPTIONS_H_
