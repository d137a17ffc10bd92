#include "core/template_search/node_dp.h"

#include <algorithm>
#include <climits>
#include <limits>

#include "absl/strings/cord.h"

namespace oobleck::template_search {
namespace {

constexpr char kTooLargeUrl[] = "oobleck.planner/node-front-too-large";
// A cap no stage lowers below "always fits" (CostModel::MaxStagesFromEnd's large value is
// INT_MAX / 4; a node subtracts at most its GPU count).
constexpr int kNoCap = INT_MAX / 2;

}  // namespace

absl::Status NodeFrontTooLarge() {
  absl::Status status =
      absl::ResourceExhaustedError("a node's layouts exceed the node-move search's front limit");
  status.SetPayload(kTooLargeUrl, absl::Cord("1"));
  return status;
}

bool IsNodeFrontTooLarge(const absl::Status& status) {
  return status.GetPayload(kTooLargeUrl).has_value();
}

NodeLayouts::NodeLayouts(const StageCosts& costs, int type, int microbatches, bool track_memory,
                         const std::vector<double>* floor_prefix, double limit_at_0, double limit)
    : costs_(costs),
      type_(type),
      microbatches_(microbatches),
      gpus_per_node_(costs.model().node_type(type).gpus_per_node),
      num_layers_(costs.model().num_layers()),
      track_memory_(track_memory),
      floor_prefix_(*floor_prefix),
      limit_at_0_(limit_at_0),
      limit_(limit),
      sizes_(costs.model().stage_sizes(type)) {
  const int L = num_layers_;
  // Tabulated where it is small (at most kMaxTabulated entries); else asked per stage.
  constexpr int64_t kMaxTabulated = int64_t{1} << 22;
  if (!track_memory_ || static_cast<int64_t>(sizes_.size()) * (L + 1) * (L + 1) > kMaxTabulated) {
    return;
  }
  // Filled as the DP asks (-1: not yet), by the one thread that computes this type.
  max_stages_from_end_.assign(sizes_.size(), std::vector<int>((L + 1) * (L + 1), -1));
}

int NodeLayouts::MaxStagesFromEnd(int size_index, int begin, int end) {
  if (!track_memory_) return kNoCap;
  if (max_stages_from_end_.empty()) {
    return costs_.model().MaxStagesFromEnd(type_, sizes_[size_index], begin, end);
  }
  int& known =
      max_stages_from_end_[size_index][static_cast<size_t>(begin) * (num_layers_ + 1) + end];
  if (known < 0) known = costs_.model().MaxStagesFromEnd(type_, sizes_[size_index], begin, end);
  return known;
}

bool NodeLayouts::Compute(int a, Interrupt& interrupt) {
  const int L = num_layers_, G = gpus_per_node_;
  a_ = a;
  labels_ = 0;
  too_large_ = false;
  partial_.resize(static_cast<size_t>(L - a + 1) * G);
  for (std::vector<Item>& items : partial_) items.clear();
  closed_.resize(L - a + 1);
  fronts_.resize(L - a + 1);
  for (std::vector<Item>& items : closed_) items.clear();
  for (std::vector<NodeLabel>& front : fronts_) front.clear();
  by_stages_.resize(L - a + 1);
  least_max_.assign(L - a + 1, std::numeric_limits<double>::infinity());
  partial_[State(a, 0)].push_back({NodeLabel{0, 0, 0, kNoCap}, -1, -1, 0});
  for (int p = a; p < L; ++p) {
    if (interrupt.Poll()) return false;
    for (int used = 0; used < G; ++used) {
      std::vector<Item>& items = partial_[State(p, used)];
      if (items.empty()) continue;
      Filter(items);
      labels_ += static_cast<int64_t>(items.size());
      Expand(p, used);
    }
  }
  for (int y = a + 1; y <= L; ++y) {
    std::vector<Item>& items = closed_[y - a];
    Filter(items);
    if (static_cast<int>(items.size()) > kMaxNodeFront) {
      too_large_ = true;
      return false;
    }
    labels_ += static_cast<int64_t>(items.size());
    const std::vector<NodeLabel>& front = fronts_[y - a];
    for (const Item& item : items) {
      fronts_[y - a].push_back(item.label);
      least_max_[y - a] = std::min(least_max_[y - a], item.label.max);
    }
    std::vector<int32_t>& order = by_stages_[y - a];
    order.resize(front.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int32_t>(i);
    std::stable_sort(order.begin(), order.end(), [&front](int32_t x, int32_t y) {
      if (front[x].stages != front[y].stages) return front[x].stages < front[y].stages;
      return front[x].max < front[y].max;
    });
  }
  return true;
}

void NodeLayouts::Expand(int p, int used) {
  const int L = num_layers_, G = gpus_per_node_, a = a_, M = microbatches_;
  const double limit = a == 0 ? limit_at_0_ : limit_;
  const double before_ms = floor_prefix_[a];
  const int state = State(p, used);
  const Link in = p > a ? Link::kIntraNode : a == 0 ? Link::kNone : Link::kInterNode;
  for (size_t s = 0; s < sizes_.size(); ++s) {
    const int g = sizes_[s];
    if (used + g > G) break;  // sizes ascend
    const bool closing = used + g == G;
    for (int q = p + 1; q <= L; ++q) {
      if (!closing && q == L) break;  // the node's other stages need layers
      // Every pipeline holding the stage costs at least M times its compute.
      if (M * costs_.ComputeMs(type_, g, p, q) + before_ms > limit) break;
      const Link out = !closing ? Link::kIntraNode : q == L ? Link::kNone : Link::kInterNode;
      const double c = costs_.StageCostMs(type_, g, p, q, in, out);
      const int fits_after = MaxStagesFromEnd(static_cast<int>(s), p, q);
      const double after_ms = floor_prefix_[L] - floor_prefix_[q];
      std::vector<Item>& target = closing ? closed_[q - a] : partial_[State(q, used + g)];
      const std::vector<Item>& items = partial_[state];
      for (int32_t i = 0; i < static_cast<int32_t>(items.size()); ++i) {
        const NodeLabel& x = items[i].label;
        NodeLabel y{x.sum + c, std::max(x.max, c), x.stages + 1,
                    std::min(x.cap - 1, fits_after - 1)};
        if (y.cap < 0) continue;  // some stage fits after no suffix at all
        if (y.sum + (M - 1) * y.max + before_ms + after_ms > limit) continue;
        target.push_back({y, state, i, g});
      }
    }
  }
}

void NodeLayouts::Filter(std::vector<Item>& items) const {
  const int M = microbatches_;
  auto final_ms = [M](const NodeLabel& x) { return x.sum + (M - 1) * x.max; };
  std::stable_sort(items.begin(), items.end(), [&](const Item& x, const Item& y) {
    if (x.label.sum != y.label.sum) return x.label.sum < y.label.sum;
    const double fx = final_ms(x.label), fy = final_ms(y.label);
    if (fx != fy) return fx < fy;
    if (x.label.stages != y.label.stages) return x.label.stages < y.label.stages;
    return x.label.cap > y.label.cap;
  });
  // In order of sum, a label survives iff no earlier survivor is no worse in final time,
  // stage count and cap (the last two only where memory binds).
  size_t kept = 0;
  for (size_t i = 0; i < items.size(); ++i) {
    const NodeLabel& x = items[i].label;
    const double f = final_ms(x);
    bool dominated = false;
    for (size_t k = 0; k < kept && !dominated; ++k) {
      const NodeLabel& s = items[k].label;
      dominated = final_ms(s) <= f && (!track_memory_ || (s.stages <= x.stages && s.cap >= x.cap));
    }
    if (!dominated) items[kept++] = items[i];
  }
  items.resize(kept);
}

std::span<const NodeLabel> NodeLayouts::Front(int y) const {
  if (y <= a_ || y - a_ >= static_cast<int>(fronts_.size())) return {};
  return fronts_[y - a_];
}

std::span<const int32_t> NodeLayouts::ByStages(int y) const {
  if (y <= a_ || y - a_ >= static_cast<int>(by_stages_.size())) return {};
  return by_stages_[y - a_];
}

std::vector<NodeStage> NodeLayouts::Layout(int y, int index) const {
  std::vector<NodeStage> stages;
  int end = y;
  const Item* item = &closed_[y - a_][index];
  while (item->parent_state >= 0) {
    const int begin = StateLayer(item->parent_state);
    stages.push_back({item->gpus, begin, end});
    end = begin;
    item = &partial_[item->parent_state][item->parent_index];
  }
  std::reverse(stages.begin(), stages.end());
  return stages;
}

}  // namespace oobleck::template_search
