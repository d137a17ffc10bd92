#include "core/template_search/bottleneck_bound.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/template_search/tolerances.h"
#include "tbb/parallel_for.h"

namespace oobleck::template_search {

PrefixMaxBound::PrefixMaxBound(const StageCosts& costs, const StateSpace& space,
                               const std::vector<NodeMix>& mixes, Interrupt& interrupt)
    : model_(costs.model()), costs_(costs), space_(space) {
  const CostModel& model = model_;
  for (int t = 0; t < model.num_types(); ++t) {
    memo_stride_ = std::max(memo_stride_, model.node_type(t).gpus_per_node + 1);
  }
  const int T = model.num_types();
  const int L = model.num_layers();
  // The grid is refined around the bottleneck of the largest requested mixes (a mix
  // inside another requested mix can only reach less).
  std::vector<int> maximal;
  for (const NodeMix& mix : mixes) {
    const int code = space.Encode(mix);
    if (!space.strictly_within(code) &&
        std::find(maximal.begin(), maximal.end(), code) == maximal.end()) {
      maximal.push_back(code);
    }
  }
  // The grid: geometric from the cheapest single layer to the costliest whole model, and
  // fine steps just above the bottleneck of the requested mixes themselves.
  double lo = std::numeric_limits<double>::infinity(), hi = 0;
  for (int t = 0; t < T; ++t) {
    for (int g : model.stage_sizes(t)) {
      hi = std::max(hi, costs.ComputeMs(t, g, 0, L));
      for (int l = 0; l < L; ++l) {
        const double c = costs.ComputeMs(t, g, l, l + 1);
        if (c > 0) lo = std::min(lo, c);
      }
    }
  }
  if (!(lo < hi)) return;  // degenerate costs: no bound (At() returns 0)
  double bottleneck = hi;
  {
    std::vector<int> memo;
    double below = 0, above = hi;  // reach(below) < L <= reach(above) for some mix
    for (int iter = 0; iter < kBottleneckBisections && above - below > kRelativeSlack * above;
         ++iter) {
      if (interrupt.Poll()) return;
      const double mid = 0.5 * (below + above);
      const std::vector<int> reach = Reach(mid, memo, interrupt);
      if (interrupt.stopped()) return;
      bool covers = false;
      for (int x : maximal) covers |= reach[space.Dense(x)] >= L;
      (covers ? above : below) = mid;
    }
    bottleneck = below;
  }
  lo = std::max(lo, hi * kLeastGridCapRatio);
  for (double c = lo; c < hi; c = NextCap(c, kCoarseGridFactor)) caps_.push_back(c);
  if (bottleneck > 0) {
    for (double c = bottleneck; c < kFineGridSpan * bottleneck && c < hi;
         c = NextCap(c, kFineGridFactor)) {
      caps_.push_back(c);
    }
  }
  std::sort(caps_.begin(), caps_.end());
  caps_.erase(std::unique(caps_.begin(), caps_.end()), caps_.end());

  Tabulate(interrupt);
}

double PrefixMaxBound::NextCap(double c, double factor) {
  return std::max(c * factor, std::nextafter(c, std::numeric_limits<double>::infinity()));
}

int PrefixMaxBound::Extend(int t, int g, int p, double cap) const {
  int lo = p, hi = model_.num_layers();
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (costs_.ComputeMs(t, g, p, mid) <= cap) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  return lo;
}

void PrefixMaxBound::Tabulate(Interrupt& interrupt) {
  const int K = static_cast<int>(caps_.size());
  const int NS = space_.num_node_states();
  const int D = space_.num_useful();
  if (!AssignPolled(reach_, int64_t{D} * NS * K, 0, interrupt) ||
      !AssignPolled(mix_reach_, int64_t{D} * K, 0, interrupt)) {
    caps_.clear();
    return;
  }
  tbb::parallel_for(0, K, [&](int k) {
    if (interrupt.Poll()) return;
    std::vector<int> memo;
    const std::vector<int> reach = Reach(caps_[k], memo, interrupt);
    if (interrupt.stopped()) return;
    for (int d = 0; d < D; ++d) mix_reach_[static_cast<size_t>(d) * K + k] = reach[d];
    for (int d = 0; d < D; ++d) {
      // (Thousands of multisets x dozens of node states per cap: poll on the way.)
      if (interrupt.Every(d)) return;
      for (int ns = 0; ns < NS; ++ns) {
        int best = reach[d];
        if (ns != 0) {
          const auto [t, used] = space_.PartialOf(ns);
          best = NodeReach(t, model_.node_type(t).gpus_per_node - used, best, caps_[k], memo);
        }
        reach_[(static_cast<size_t>(d) * NS + ns) * K + k] = best;
      }
    }
  });
  if (interrupt.stopped()) caps_.clear();
}

int PrefixMaxBound::NodeReach(int t, int gpus, int p, double cap,
                              std::vector<int>& memo_table) const {
  int* memo = &memo_table[(static_cast<size_t>(t) * (model_.num_layers() + 1) + p) * memo_stride_];
  if (memo[gpus] >= 0) return memo[gpus];
  const int G = model_.node_type(t).gpus_per_node;
  memo[0] = p;
  for (int h = 1; h <= G; ++h) {
    int best = p;
    for (int g : model_.stage_sizes(t)) {
      if (g <= h) best = std::max(best, Extend(t, g, memo[h - g], cap));
    }
    memo[h] = best;
  }
  return memo[gpus];
}

void PrefixMaxBound::ForgetReaches(std::vector<int>& memo) const {
  memo.assign(static_cast<size_t>(model_.num_types()) * (model_.num_layers() + 1) * memo_stride_,
              -1);
}

std::vector<int> PrefixMaxBound::Reach(double cap, std::vector<int>& memo,
                                       Interrupt& interrupt) const {
  ForgetReaches(memo);
  std::vector<int> reach(space_.num_useful(), 0);
  for (int d = 1; d < space_.num_useful(); ++d) {
    if (interrupt.Every(d)) break;
    const int u = space_.Code(d);
    for (int t = 0; t < model_.num_types(); ++t) {
      if (space_.count(u, t) == 0) continue;
      reach[d] =
          std::max(reach[d], NodeReach(t, model_.node_type(t).gpus_per_node,
                                       reach[space_.Dense(u - space_.stride(t))], cap, memo));
    }
  }
  return reach;
}

}  // namespace oobleck::template_search
