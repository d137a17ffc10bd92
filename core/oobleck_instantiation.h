// Oobleck's pipeline instantiation (docs/API.md#instantiate, docs/COST_MODEL.md#oobleck-
// instantiation), solved exactly. Given pipeline templates (nodes n_t, iteration time T_t),
// N nodes and a global batch of B micro-batches, choose instance counts x_t and one
// micro-batch count b_t per used template so that
//
//   sum_t x_t n_t = N (every node used),  sum_t x_t b_t = B,  b_t >= 1 where x_t > 0,
//
// minimising Oobleck's iteration time  max_{t: x_t > 0} T_t b_t + allreduce[P],
// P = sum_t x_t. Oobleck enumerates every instance set and balances T_t / s_t * b_t with a
// MINLP; here the batch split is exact for the formula above (a search over the candidate
// makespans T_t k with a bounded subset-sum feasibility test) and the instance sets are
// searched by branch and bound on a lower bound, with bounded work.
#ifndef OOBLECK_CORE_OOBLECK_INSTANTIATION_H_
#define OOBLECK_CORE_OOBLECK_INSTANTIATION_H_

#include <cstdint>
#include <map>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/interrupt.h"

namespace oobleck {

// A pipeline template as Oobleck's instantiator sees it.
struct InstantiationTemplate {
  int num_nodes = 0;
  int num_stages = 0;  // validated, not used by the formula (Oobleck's MINLP used it)
  double iteration_time_ms = 0;
};

struct InstantiationProblem {
  std::vector<InstantiationTemplate> templates;
  int num_nodes = 0;     // N; with fixed instances 0 (taken from them) or their node count
  int global_batch = 0;  // B, in micro-batches
  // Pipeline count -> layer 0's gradient all-reduce across that many pipelines (ms). A
  // count without an entry cannot be chosen.
  std::map<int, double> allreduce_ms;
};

struct Instantiation {
  std::vector<int> instances;     // x_t, per template in problem order
  std::vector<int> microbatches;  // b_t per template, 0 where x_t = 0
  int num_pipelines = 0;          // P
  double pipeline_time_ms = 0;    // max over used templates of T_t b_t
  double allreduce_ms = 0;        // allreduce_ms[P]
  double iteration_time_ms = 0;   // the sum of both
  int64_t instance_sets = 0;      // instance sets whose batch split was searched
};

// Bounds of one request (docs/ERRORS.md#limits).
inline constexpr int kMaxInstantiationTemplates = 1024;
inline constexpr int kMaxInstantiationNodes = 1 << 16;
inline constexpr int kMaxInstantiationStages = 1 << 20;
inline constexpr double kMinTemplateIterationMs = 1e-6;
inline constexpr double kMaxTemplateIterationMs = 1e12;
inline constexpr double kMaxInstantiationAllreduceMs = 1e12;
// Steps one instantiation may take (a subset-sum cell is one, a search node eight), about
// 1 s on one core; past it RESOURCE_EXHAUSTED names this limit.
inline constexpr int64_t kMaxInstantiationWork = int64_t{1} << 29;
// Bits of the table that reconstructs a batch split (used templates x (B - P + 1)).
inline constexpr int64_t kMaxSplitTableBits = int64_t{1} << 29;

// INVALID_ARGUMENT naming the field ("templates[2].iteration_time_ms", "num_nodes",
// "global_batch", "allreduce_across_pipelines_ms[0]", "instances[1]"); RESOURCE_EXHAUSTED
// naming the limit for more templates or nodes than the limits. `instances` null for the
// free instantiation.
absl::Status ValidateInstantiationProblem(const InstantiationProblem& problem,
                                          const std::vector<int>* instances);

// Oobleck's get_new_execution_plan: the least pipeline time over the given instance counts
// (x_t = instances[t]), exactly. Among equally fast splits, the earliest template in problem
// order gets the most micro-batches, then the next (the lexicographically largest b).
// FAILED_PRECONDITION when B < P, when allreduce_ms has no entry for P, or when no split
// with one count per template sums to B (2 pipelines of one template and B = 3).
absl::StatusOr<Instantiation> SplitOobleckBatch(const InstantiationProblem& problem,
                                                const std::vector<int>& instances,
                                                Interrupt& interrupt,
                                                int64_t max_work = kMaxInstantiationWork);

// Oobleck's get_best_execution_plan: the least iteration time over every instance set that
// uses all N nodes, exactly. Among equally fast instance sets, the first one the search
// meets (it tries more pipelines of the templates with the best throughput per node first);
// the split's tie-break is SplitOobleckBatch's. FAILED_PRECONDITION naming why when no set
// is feasible; RESOURCE_EXHAUSTED past max_work steps; CANCELLED when `interrupt` stops it.
absl::StatusOr<Instantiation> InstantiateOobleck(const InstantiationProblem& problem,
                                                 Interrupt& interrupt,
                                                 int64_t max_work = kMaxInstantiationWork);

}  // namespace oobleck

#endif  // OOBLECK_CORE_OOBLECK_INSTANTIATION_H_
