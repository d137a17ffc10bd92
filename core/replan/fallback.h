// Oobleck's fallback rule as a Replan draft (docs/architecture/replan.md): every pipeline
// that lost nodes takes the template of its remaining mix, else borrows a node from the
// largest pipeline that can spare one, else merges with the smallest whose union has a
// template. Internal to core/replan.cc and core/replan/*.
#ifndef OOBLECK_CORE_REPLAN_FALLBACK_H_
#define OOBLECK_CORE_REPLAN_FALLBACK_H_

#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "core/plan/template_set.h"
#include "core/replan/candidate.h"

namespace oobleck::replan_internal {

// `set`: the cluster's template set, or nullptr to plan every mix through `templates`;
// `keepalive` holds the templates planned here that the draft points into.
// FAILED_PRECONDITION when the rule gets stuck or the batch does not fit.
absl::StatusOr<Draft> FallbackDraft(const ReplanContext& ctx, const TemplateSet* set,
                                    TemplatePlanner& templates, const SearchOptions& search,
                                    std::vector<std::shared_ptr<const MixResult>>* keepalive);

}  // namespace oobleck::replan_internal

#endif  // OOBLECK_CORE_REPLAN_FALLBACK_H_
