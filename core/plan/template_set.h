// The template set of a cluster: the optimal template of every mix it may use.
#ifndef OOBLECK_CORE_PLAN_TEMPLATE_SET_H_
#define OOBLECK_CORE_PLAN_TEMPLATE_SET_H_

#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "core/cost_model.h"
#include "core/plan/limits.h"
#include "core/search.h"
#include "core/template_planner.h"

namespace oobleck {

// The template set of a cluster: the optimal template of every mix of `limits` within
// `available`, from the cache or one search. Also holds each 1-node mix (for the
// data-parallel baseline and for idle reasons) even outside the limits.
struct TemplateSet {
  std::vector<NodeMix> mixes;
  std::vector<std::shared_ptr<const MixResult>> results;  // parallel to mixes
  int from_cache = 0;

  // nullptr when the mix was not planned.
  const MixResult* Find(const NodeMix& mix) const;
};
absl::StatusOr<TemplateSet> PlanTemplateSet(TemplatePlanner& planner, const CostModel& model,
                                            const NodeMix& available,
                                            const PipelineSizeLimits& limits,
                                            const SearchOptions& options);

// The mix of one node of type t (the 1-node mixes a TemplateSet also holds).
NodeMix SingleNode(int num_types, int t);

}  // namespace oobleck

#endif  // OOBLECK_CORE_PLAN_TEMPLATE_SET_H_
