#include "core/template_search/node_dp.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <limits>
#include <utility>

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
                         std::vector<double> floor_prefix, int64_t max_kept_labels)
    : costs_(costs),
      type_(type),
      microbatches_(microbatches),
      gpus_per_node_(costs.model().node_type(type).gpus_per_node),
      num_layers_(costs.model().num_layers()),
      track_memory_(track_memory),
      floor_prefix_(std::move(floor_prefix)),
      max_kept_labels_(max_kept_labels),
      sizes_(costs.model().stage_sizes(type)),
      computed_(costs.model().num_layers() + 1) {
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

bool NodeLayouts::Prepare(int a, double limit, Interrupt& interrupt, double compute_limit) {
  too_large_ = false;
  const Computed& kept = computed_[a];
  const double at = std::isnan(compute_limit) ? limit : compute_limit;
  // Kept layouts serve a limit no looser than theirs; a pass reading them again (at
  // `compute_limit`) reads the very layouts it read before.
  const bool reuse =
      kept.valid && (std::isnan(compute_limit) ? kept.limit >= limit : kept.limit == compute_limit);
  if (!reuse && !Compute(a, at, interrupt)) return false;
  if (kept_labels_ > max_kept_labels_) {  // forget every other first layer
    for (int b = 0; b <= num_layers_; ++b) {
      if (b == a || !computed_[b].valid) continue;
      kept_labels_ -= computed_[b].labels;
      computed_[b] = Computed{};
    }
  }
  a_ = a;
  return View(limit);
}

bool NodeLayouts::Compute(int a, double limit, Interrupt& interrupt) {
  const int L = num_layers_, G = gpus_per_node_;
  Computed& c = computed_[a];
  if (c.valid) kept_labels_ -= c.labels;
  c = Computed{};
  c.limit = limit;
  partial_.resize(static_cast<size_t>(L - a + 1) * G);
  for (std::vector<Item>& items : partial_) items.clear();
  closed_.resize(L - a + 1);
  for (std::vector<Item>& items : closed_) items.clear();
  partial_[State(a, a, 0)].push_back({NodeLabel{0, 0, 0, kNoCap}, -1, -1, 0});
  c.partial_at.assign(static_cast<size_t>(L - a + 1) * G + 1, 0);
  for (int p = a; p < L; ++p) {
    if (interrupt.Poll()) return false;
    for (int used = 0; used < G; ++used) {
      std::vector<Item>& items = partial_[State(a, p, used)];
      if (items.empty()) continue;
      Filter(items);
      Expand(a, limit, p, used);
    }
  }
  // Kept compactly: the scratch holds every candidate an Expand made.
  for (size_t state = 0; state + 1 < c.partial_at.size(); ++state) {
    c.partial_at[state] = static_cast<int32_t>(c.partial.size());
    c.partial.insert(c.partial.end(), partial_[state].begin(), partial_[state].end());
  }
  c.partial_at.back() = static_cast<int32_t>(c.partial.size());
  c.closed_at.assign(L - a + 2, 0);
  for (int y = a + 1; y <= L; ++y) {
    std::vector<Item>& items = closed_[y - a];
    Filter(items);
    const auto begin = static_cast<int32_t>(c.closed.size());
    c.closed_at[y - a] = begin;
    c.closed.insert(c.closed.end(), items.begin(), items.end());
    for (int32_t i = 0; i < static_cast<int32_t>(items.size()); ++i) c.order.push_back(i);
    std::stable_sort(c.order.begin() + begin, c.order.end(), [&items](int32_t x, int32_t y) {
      if (items[x].label.stages != items[y].label.stages) {
        return items[x].label.stages < items[y].label.stages;
      }
      return items[x].label.max < items[y].label.max;
    });
  }
  c.closed_at[L - a + 1] = static_cast<int32_t>(c.closed.size());
  c.labels = static_cast<int64_t>(c.partial.size() + c.closed.size());
  c.valid = true;
  kept_labels_ += c.labels;
  return true;
}

bool NodeLayouts::Passes(const NodeLabel& x, int a, int y, double limit) const {
  const int L = num_layers_, M = microbatches_;
  const double before_ms = floor_prefix_[a];
  const double after_ms = floor_prefix_[L] - floor_prefix_[y];
  return !(x.sum + (M - 1) * x.max + before_ms + after_ms > limit);
}

bool NodeLayouts::View(double limit) {
  const int L = num_layers_, a = a_;
  const Computed& c = computed_[a];
  fronts_.resize(L - a + 1);
  by_stages_.resize(L - a + 1);
  kept_index_.resize(L - a + 1);
  least_max_.assign(L - a + 1, std::numeric_limits<double>::infinity());
  for (int y = a + 1; y <= L; ++y) {
    const std::span<const Item> items(c.closed.data() + c.closed_at[y - a],
                                      c.closed_at[y - a + 1] - c.closed_at[y - a]);
    std::vector<NodeLabel>& front = fronts_[y - a];
    std::vector<int32_t>& index = kept_index_[y - a];
    front.clear();
    index.clear();
    remap_.assign(items.size(), -1);
    for (int32_t i = 0; i < static_cast<int32_t>(items.size()); ++i) {
      const NodeLabel& x = items[i].label;
      if (c.limit > limit && !Passes(x, a, y, limit)) continue;
      remap_[i] = static_cast<int32_t>(front.size());
      front.push_back(x);
      index.push_back(i);
      least_max_[y - a] = std::min(least_max_[y - a], x.max);
    }
    if (static_cast<int>(front.size()) > kMaxNodeFront) {
      too_large_ = true;
      return false;
    }
    std::vector<int32_t>& order = by_stages_[y - a];
    order.clear();
    for (int32_t k = c.closed_at[y - a]; k < c.closed_at[y - a + 1]; ++k) {
      const int32_t i = c.order[k];
      if (remap_[i] >= 0) order.push_back(remap_[i]);
    }
  }
  return true;
}

void NodeLayouts::Expand(int a, double limit, int p, int used) {
  const int L = num_layers_, G = gpus_per_node_, M = microbatches_;
  const double before_ms = floor_prefix_[a];
  const int state = State(a, p, used);
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
      const double cost = costs_.StageCostMs(type_, g, p, q, in, out);
      const int fits_after = MaxStagesFromEnd(static_cast<int>(s), p, q);
      const double after_ms = floor_prefix_[L] - floor_prefix_[q];
      std::vector<Item>& target = closing ? closed_[q - a] : partial_[State(a, q, used + g)];
      const std::vector<Item>& items = partial_[state];
      for (int32_t i = 0; i < static_cast<int32_t>(items.size()); ++i) {
        const NodeLabel& x = items[i].label;
        NodeLabel y{x.sum + cost, std::max(x.max, cost), x.stages + 1,
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
  // stage count and cap (the last two only where memory binds). None is if the least final
  // time of the survivors is above the label's; where memory cannot bind, that is the test.
  size_t kept = 0;
  double least_final = std::numeric_limits<double>::infinity();
  for (size_t i = 0; i < items.size(); ++i) {
    const NodeLabel& x = items[i].label;
    const double f = final_ms(x);
    bool dominated = least_final <= f;
    if (dominated && track_memory_) {
      dominated = false;
      for (size_t k = 0; k < kept && !dominated; ++k) {
        const NodeLabel& s = items[k].label;
        dominated = final_ms(s) <= f && s.stages <= x.stages && s.cap >= x.cap;
      }
    }
    if (dominated) continue;
    least_final = std::min(least_final, f);
    items[kept++] = items[i];
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
  const Computed& c = computed_[a_];
  std::vector<NodeStage> stages;
  int end = y;
  const Item* item = &c.closed[c.closed_at[y - a_] + kept_index_[y - a_][index]];
  while (item->parent_state >= 0) {
    const int begin = StateLayer(a_, item->parent_state);
    stages.push_back({item->gpus, begin, end});
    end = begin;
    item = &c.partial[c.partial_at[item->parent_state] + item->parent_index];
  }
  std::reverse(stages.begin(), stages.end());
  return stages;
}

}  // namespace oobleck::template_search
