// The previous template search, a test-only oracle (search_reference.cc says why).
#ifndef OOBLECK_TESTS_REFERENCE_SEARCH_SEARCH_REFERENCE_H_
#define OOBLECK_TESTS_REFERENCE_SEARCH_SEARCH_REFERENCE_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/cost_model.h"
#include "core/search.h"

namespace oobleck::reference_search {

absl::StatusOr<std::vector<MixResult>> SearchTemplates(const CostModel& model,
                                                       const std::vector<NodeMix>& mixes,
                                                       const SearchOptions& options = {});
std::string ExplainInfeasible(const CostModel& model, const NodeMix& mix);

}  // namespace oobleck::reference_search

#endif  // OOBLECK_TESTS_REFERENCE_SEARCH_SEARCH_REFERENCE_H_
