// A cluster planner over one cost model, with its own template cache: what the core tests of
// Plan and Replan build for each problem.
#ifndef OOBLECK_TESTS_CORE_TEST_PLANNER_H_
#define OOBLECK_TESTS_CORE_TEST_PLANNER_H_

#include <memory>
#include <utility>

#include "absl/status/statusor.h"
#include "core/cost_model.h"
#include "core/plan/cluster_planner.h"
#include "core/template_planner.h"
#include "gtest/gtest.h"

namespace oobleck::testing {

struct Planned {
  std::unique_ptr<CostModel> model;
  std::unique_ptr<TemplateCache> cache;
  std::unique_ptr<TemplatePlanner> templates;
  std::unique_ptr<ClusterPlanner> planner;
};

// One planning thread and a 64 MiB template cache; a problem the cost model refuses fails
// the test that asked.
inline Planned MakePlanner(PlanningProblem problem) {
  Planned p;
  absl::StatusOr<CostModel> model = CostModel::Create(std::move(problem));
  EXPECT_TRUE(model.ok()) << model.status();
  p.model = std::make_unique<CostModel>(*std::move(model));
  p.cache = std::make_unique<TemplateCache>(64 << 20);
  p.templates = std::make_unique<TemplatePlanner>(p.cache.get(), 1);
  p.planner = std::make_unique<ClusterPlanner>(p.templates.get(), 1);
  return p;
}

}  // namespace oobleck::testing

#endif  // OOBLECK_TESTS_CORE_TEST_PLANNER_H_
