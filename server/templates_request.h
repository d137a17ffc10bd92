// A PlanTemplatesRequest validated and converted into core's planning problem (profiles
// resolved, measured or derived: server/job_request.h) and the list of mixes to plan.
#ifndef OOBLECK_SERVER_TEMPLATES_REQUEST_H_
#define OOBLECK_SERVER_TEMPLATES_REQUEST_H_

#include <vector>

#include "absl/status/statusor.h"
#include "core/cluster.h"
#include "core/cost_model.h"
#include "core/model_cache.h"
#include "core/profile_catalog.h"
#include "oobleck/planner/v1/planner.pb.h"
#include "server/inline_profiles.h"

namespace oobleck::server {

// Bounds the work one request can ask for; larger sweeps are split by the caller.
inline constexpr int kMaxMixesPerRequest = 4096;

struct TemplateRequest {
  PlanningProblem problem;
  std::vector<NodeMix> mixes;      // ordered by size, then counts
  InlineProfiles inline_profiles;  // the request's `profiles`, as resolved
};

// INVALID_ARGUMENT for malformed fields (the message names the field path and the bad
// value; the path is carried as data too, core/field_path.h), NOT_FOUND for profiles that
// are not loaded, FAILED_PRECONDITION when the loaded profiles cannot be combined,
// RESOURCE_EXHAUSTED above kMaxMixesPerRequest mixes. Derived profiles come from `models`
// when given (shared across requests), else are built. Inline profiles (`profiles`) are
// read through `inline_cache`; without one a request that sends them is refused.
absl::StatusOr<TemplateRequest> ToTemplateRequest(
    const ::oobleck::planner::v1::PlanTemplatesRequest& request, const ProfileCatalog& catalog,
    CostModelCache* models = nullptr, InlineProfileCache* inline_cache = nullptr);

}  // namespace oobleck::server

#endif  // OOBLECK_SERVER_TEMPLATES_REQUEST_H_
