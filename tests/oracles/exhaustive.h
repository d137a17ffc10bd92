// Test oracles: brute-force references the exact searches are checked against. Built into
// the test-only library oobleck_test_oracles, never into the server or the CLI.
#ifndef OOBLECK_TESTS_ORACLES_EXHAUSTIVE_H_
#define OOBLECK_TESTS_ORACLES_EXHAUSTIVE_H_

#include "core/cost_model.h"
#include "core/search.h"

namespace oobleck {

// Brute force over every node order, GPU split and layer cut. For tests on small inputs.
MixResult ExhaustiveSearch(const CostModel& model, const NodeMix& mix);

}  // namespace oobleck

#endif  // OOBLECK_TESTS_ORACLES_EXHAUSTIVE_H_
