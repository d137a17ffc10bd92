// The node-count DP of the plan search (PlanSearchMethod::kNodeCountDp): for a makespan
// tau, how many micro-batches can p free pipelines within the used node counts u absorb,
// a knapsack over node-type counts with a cardinality (docs/architecture/plan-search.md).
//
// State space: u_t in [-pad_t, available_t] per node type, so that u - mix never leaves the
// array (padding states are "impossible"); only real states (u >= 0) are computed, in index
// order, which puts every state after all states it is built from.
#ifndef OOBLECK_CORE_PLAN_SEARCH_NODE_COUNT_DP_H_
#define OOBLECK_CORE_PLAN_SEARCH_NODE_COUNT_DP_H_

#include <cstdint>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/plan/pipeline_set.h"
#include "core/plan_search/search_shapes.h"

namespace oobleck::plan_search {

// States of the DP over node-type counts (its tables hold this many rows).
inline constexpr int64_t kMaxPlanStates = int64_t{1} << 22;

// The DP's states for `problem`, saturated just above kMaxPlanStates.
int64_t DpStateCount(const PipelineSetProblem& problem);

class NodeCountDp {
 public:
  // A minimum pipeline count (problem.min_pipelines) is a row of the integer program; the
  // DP never sees one. `shapes` and `progress` must outlive the DP.
  NodeCountDp(const SearchShapes& shapes, SearchProgress& progress);
  NodeCountDp(const NodeCountDp&) = delete;
  NodeCountDp& operator=(const NodeCountDp&) = delete;

  int64_t num_states() const { return num_states_; }

  // The most micro-batches (saturated at `cap`) any number of free pipelines absorb at tau,
  // and the fewest pipelines that reach that much.
  struct Unconstrained {
    int64_t absorbed = 0;
    int pipelines = 0;
  };
  absl::StatusOr<Unconstrained> FreeAbsorbUnconstrained(double tau, int cap);
  // The fewest free pipelines (<= pcap) that run the batch within tau; -1 if none. Leaves
  // the table it filled for KeepTable.
  absl::StatusOr<int> MinPipelines(double tau, int pcap);
  // The most free pipelines (<= pcap) that run the batch within tau; -1 if none.
  absl::StatusOr<int> MostPipelines(double tau, int pcap);
  // Keeps the table MinPipelines just filled as the incumbent's (swapping it with the
  // incumbent's last one).
  void KeepTable() { std::swap(best_table_, table_); }
  // The shapes of the plan of p free pipelines at tau, from the kept table (which was
  // filled at tau with room for at least p pipelines).
  absl::StatusOr<std::vector<int>> Trace(double tau, int p) const;

  // FAILED_PRECONDITION when no plan exists at all: the batch, the kept pipelines, or the
  // memory of every pipeline together cannot hold the batch.
  absl::Status CheckCapacity();
  // RESOURCE_EXHAUSTED when a table for up to pcap pipelines exceeds kMaxTableEntries.
  absl::Status CheckTableSize(int pcap) const;

 private:
  struct Table {
    std::vector<int16_t> v16;
    std::vector<int32_t> v32;
    bool int16 = true;
    int width = 1;
    int32_t At(int64_t u, int p) const { return int16 ? v16[u * width + p] : v32[u * width + p]; }
  };

  void BuildStates(std::vector<int>* row_digits);
  void BuildFitLists(int64_t fit_pairs, const std::vector<int>& row_digits);
  int64_t Offset(const NodeMix& mix) const;
  absl::Status FillTable(double tau, int pcap, int cap);
  template <typename V>
  bool FillRows(std::vector<V>& table, const std::vector<Usable>& usable, int pcap, int width,
                int cap);
  template <typename Row>
  bool ForEachRow(const Row& row, int64_t work) const;

  const SearchShapes& shapes_;
  const PipelineSetProblem& problem_;
  SearchProgress& progress_;
  std::vector<int64_t> strides_;
  int64_t num_states_ = 1;
  int64_t full_ = 0;                  // the state u = available
  std::vector<int64_t> real_states_;  // u >= 0, in index order
  std::vector<int> real_sizes_;       // |u| of each
  std::vector<size_t> by_size_;       // indices into real_states_, by size then index
  std::vector<size_t> level_starts_;  // by_size_[level_starts_[s]...] have size s
  std::vector<int64_t> offsets_;      // per shape
  // Per real state r (index into real_states_): the shapes that fit within it, i.e. whose
  // u - mix is a real state, fit_shapes_[fit_starts_[r] ... fit_starts_[r + 1]); empty when
  // FitPairs says no. The DPs then skip the other shapes, whose sources are padding
  // states that can only give impossible entries.
  std::vector<int> fit_starts_, fit_shapes_;
  std::vector<int64_t> block_delta_;  // FillRows' buffers
  std::vector<int32_t> block_k_;
  std::vector<int64_t> keys_;  // FreeAbsorbUnconstrained's
  Table table_, best_table_;
};

}  // namespace oobleck::plan_search

#endif  // OOBLECK_CORE_PLAN_SEARCH_NODE_COUNT_DP_H_
