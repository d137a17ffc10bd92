// Stage costs as the template search reads them, built once per request and shared by
// every pass and every mix: they depend on the layer range, node type and GPU count only
// (issue 12). Each figure equals CostModel's bit for bit (the same prefix sums, the same
// arithmetic), so the search's results do not depend on which of the two it asks; this one
// answers without CostModel's size lookup and indirections, which the bottleneck bound's
// binary searches and the DP's inner loop call millions of times.
#ifndef OOBLECK_CORE_TEMPLATE_SEARCH_STAGE_COSTS_H_
#define OOBLECK_CORE_TEMPLATE_SEARCH_STAGE_COSTS_H_

#include <array>
#include <vector>

#include "core/cost_model.h"

namespace oobleck::template_search {

class StageCosts {
 public:
  explicit StageCosts(const CostModel& model) : model_(model) {
    const int L = model.num_layers();
    const int T = model.num_types();
    prefix_.resize(T);
    transfer_.resize(T);
    for (int t = 0; t < T; ++t) {
      prefix_[t].resize(model.node_type(t).gpus_per_node + 1);
      for (int g : model.stage_sizes(t)) {
        Prefix& p = prefix_[t][g];
        p.forward.resize(L + 1);
        p.backward.resize(L + 1);
        // The prefix sums start at 0, so x - 0 returns them exactly.
        for (int l = 0; l <= L; ++l) {
          p.forward[l] = model.ForwardMs(t, g, 0, l);
          p.backward[l] = model.BackwardMs(t, g, 0, l);
        }
      }
      for (Link link : {Link::kNone, Link::kIntraNode, Link::kInterNode}) {
        std::vector<double>& x = transfer_[t][static_cast<int>(link)];
        x.assign(L + 1, 0);  // [last_layer + 1]: a stage starting at 0 has no left link
        for (int l = 0; l < L; ++l) x[l + 1] = model.TransferMs(t, l, link);
      }
    }
  }

  const CostModel& model() const { return model_; }

  // ComputeMs of one stage size with its prefix sums looked up once, for loops over many
  // layer ranges of that size (the same arithmetic, so the same figures).
  class Compute {
   public:
    double Ms(int begin, int end) const {
      return (forward_[end] - forward_[begin]) + (backward_[end] - backward_[begin]);
    }

   private:
    friend class StageCosts;
    const double* forward_ = nullptr;
    const double* backward_ = nullptr;
  };
  Compute ComputeOf(int t, int g) const {
    Compute c;
    c.forward_ = prefix_[t][g].forward.data();
    c.backward_ = prefix_[t][g].backward.data();
    return c;
  }
  // CostModel::ComputeMs(t, g, begin, end).
  double ComputeMs(int t, int g, int begin, int end) const {
    return ComputeOf(t, g).Ms(begin, end);
  }
  // CostModel::StageCostMs(t, g, begin, end, in, out).
  double StageCostMs(int t, int g, int begin, int end, Link in, Link out) const {
    return ComputeMs(t, g, begin, end) + transfer_[t][static_cast<int>(in)][begin] +
           transfer_[t][static_cast<int>(out)][end];
  }

 private:
  struct Prefix {
    std::vector<double> forward, backward;  // [l]: ForwardMs / BackwardMs(t, g, 0, l)
  };
  const CostModel& model_;
  std::vector<std::vector<Prefix>> prefix_;                   // [t][g]
  std::vector<std::array<std::vector<double>, 3>> transfer_;  // [t][link][last layer + 1]
};

}  // namespace oobleck::template_search

#endif  // OOBLECK_CORE_TEMPLATE_SEARCH_STAGE_COSTS_H_
