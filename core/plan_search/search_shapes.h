// What every part of the exact plan search (pipeline_set_search.cc) reads of its problem:
// the kept pipelines and the shapes as load curves, which shapes fit the available nodes,
// their prices, and per makespan what the free pipelines must absorb and which shapes are
// worth using. Also what the parts share while one search runs (SearchProgress, Incumbent).
#ifndef OOBLECK_CORE_PLAN_SEARCH_SEARCH_SHAPES_H_
#define OOBLECK_CORE_PLAN_SEARCH_SEARCH_SHAPES_H_

#include <cstdint>
#include <limits>
#include <vector>

#include "absl/status/status.h"
#include "core/interrupt.h"
#include "core/plan/pipeline_set.h"
#include "core/plan/pipeline_shape.h"
#include "core/plan_search/load_curve.h"

namespace oobleck::plan_search {

// SearchShapes::Need when a kept pipeline cannot take even one micro-batch.
inline constexpr int kImpossibleNeed = std::numeric_limits<int>::max();

// Whether problem.min_pipelines asks for more than every plan has anyway (the fixed
// pipelines, and at least one).
bool AsksMorePipelines(const PipelineSetProblem& problem);

// A shape usable at some makespan, with the micro-batches it absorbs there.
struct Usable {
  int shape;
  int32_t absorb;
};

// Per node type t and count v, the shapes with at most v nodes of type t (v up to top[t]),
// as bit sets of words() words; the shapes within a mix or a state are the AND over its
// counts.
class ShapesWithin {
 public:
  ShapesWithin(const std::vector<PipelineShape>& shapes, std::vector<int> top);
  int words() const { return words_; }
  // Word w of the set of shapes with at most counts[t] nodes of every type t.
  uint64_t Word(const int* counts, int w) const {
    uint64_t bits = ~uint64_t{0};
    for (size_t t = 0; t + 1 < type_base_.size(); ++t) {
      bits &= at_most_[type_base_[t] + counts[t] * words_ + w];
    }
    return bits;
  }

 private:
  int words_;
  std::vector<size_t> type_base_;
  std::vector<uint64_t> at_most_;
};

class SearchShapes {
 public:
  explicit SearchShapes(const PipelineSetProblem& problem);
  SearchShapes(const SearchShapes&) = delete;
  SearchShapes& operator=(const SearchShapes&) = delete;

  const PipelineSetProblem& problem() const { return problem_; }
  const CostModel* model() const { return model_; }
  int global_batch() const { return B_; }
  const std::vector<LoadCurve>& fixed() const { return fixed_; }
  const std::vector<LoadCurve>& shapes() const { return shapes_; }
  // The groups of equal kept pipelines, then the shapes: each curve once, for the
  // searches over candidate makespans (they only ask for the smallest or largest time).
  const std::vector<LoadCurve>& all() const { return all_; }
  // Whether shape j fits within the available nodes at all.
  bool fits(int j) const { return fits_[j] != 0; }
  int FixedCount() const { return static_cast<int>(fixed_.size()); }
  int total_free() const { return total_free_; }
  int min_shape_nodes() const { return min_shape_nodes_; }
  int MaxFreePipelines() const { return shapes_.empty() ? 0 : total_free_ / min_shape_nodes_; }
  double Allreduce(int free_pipelines) const {
    return (*problem_.allreduce_ms)[fixed_.size() + free_pipelines];
  }
  // The largest free pipeline count the all-reduce table covers.
  int64_t MaxAllreduceIndex() const {
    return static_cast<int64_t>(problem_.allreduce_ms->size()) - 1 -
           static_cast<int64_t>(fixed_.size());
  }

  // ---- prices (PipelineSetProblem::objective, max_price_steps), in price steps ----
  int64_t fixed_price() const { return fixed_price_; }
  int64_t shape_price(int j) const { return shape_price_[j]; }
  // What the free pipelines may cost (< 0: no budget).
  int64_t free_budget() const { return free_budget_; }

  // Micro-batches the free pipelines must absorb at tau; kImpossibleNeed if a kept pipeline
  // cannot take even one. (Over the groups of equal kept pipelines: the same sum.)
  int Need(double tau) const;
  // Largest useful tau: every pipeline at its limit.
  double TopTau() const;
  // Shapes usable at tau with what they absorb, dropping every shape some smaller shape
  // (fewer nodes of every type) absorbs at least as much as: swapping them keeps the
  // pipeline count and frees nodes, so no optimum needs them.
  std::vector<Usable> UsableShapes(double tau) const;
  // The checks that need no search: the batch, the kept pipelines, any shape at all.
  absl::Status CheckBatch() const;

 private:
  int64_t PriceOf(const NodeMix& mix) const;
  void GroupFixed();
  void FindSubmixes();

  const PipelineSetProblem& problem_;
  const CostModel* model_;
  const int B_;
  std::vector<LoadCurve> fixed_, shapes_;
  std::vector<LoadCurve> fixed_groups_;  // GroupFixed
  std::vector<int> fixed_multiplicity_;  // per group: its kept pipelines
  std::vector<LoadCurve> all_;           // fixed_groups_, then shapes_
  std::vector<char> fits_;               // per shape
  int total_free_ = 0;
  int min_shape_nodes_ = 1;
  int64_t fixed_price_ = 0;           // of the fixed pipelines' nodes
  std::vector<int64_t> shape_price_;  // per shape
  int64_t free_budget_ = -1;
  // Shapes with fewer nodes of every type than shape a: submixes_[submix_starts_[a] ...
  // submix_starts_[a + 1]).
  std::vector<int> submixes_, submix_starts_;
};

// What the parts of one search share as it runs.
struct SearchProgress {
  explicit SearchProgress(const PipelineSetProblem& problem)
      : interrupt(problem.search.cancelled) {}
  absl::Status Cancelled() {
    return interrupt.Poll() ? Interrupt::Status("plan search") : absl::OkStatus();
  }

  // Polled between table rows too: one table of a big one-type cluster is seconds of work
  // in a sanitizer build, and the search must stop with its call.
  Interrupt interrupt;
  int evaluations = 0;               // DP passes and integer programs
  bool inexact = false;              // some integer program stopped at its node limit
  double proven_infeasible = -kInf;  // every tau <= this is proven infeasible
  double cost_open_bound = kInf;     // kCost: proven bound on plans not looked at
};

// The best plan found so far: its value (iteration time, or price x time for kCost), its
// makespan and free pipeline count, and (integer program) its count per shape. The
// node-count DP keeps the best plan's table itself (NodeCountDp::KeepTable).
struct Incumbent {
  double value = kInf;
  double tau = kInf;
  int pipelines = -1;
  std::vector<int64_t> counts;
};

}  // namespace oobleck::plan_search

#endif  // OOBLECK_CORE_PLAN_SEARCH_SEARCH_SHAPES_H_
