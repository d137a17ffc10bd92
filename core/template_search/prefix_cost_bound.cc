#include "core/template_search/prefix_cost_bound.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace oobleck::template_search {

double PrefixCost::MinPerWork(double k) const {
  if (segments_ == nullptr || segments_->empty()) return 0;
  double best = k > 0 ? std::numeric_limits<double>::infinity() : segments_->front().slope;
  double end = 0, cost = 0;
  for (const HullSegment& s : *segments_) {
    if (!std::isfinite(s.length)) return std::min(best, s.slope);
    end += s.length;
    cost += s.length * s.slope;
    if (end > 0) best = std::min(best, (cost + k) / end);
  }
  return best;
}

int PrefixCost::ArgMinOver(double k) const {
  double capacity = 0;
  for (const HullSegment& s : *segments_) capacity += s.length;
  if (!(capacity > 0)) return -2;
  const double lo = work_ / capacity;
  int best = -1;
  double best_value = SumAt(lo) + k * lo;
  double end = 0;
  for (int i = 0; i < static_cast<int>(segments_->size()); ++i) {
    end += (*segments_)[i].length;
    const double cap = work_ / end;
    const double value = SumAt(cap) + k * cap;
    if (cap > lo && value < best_value) {
      best = i;
      best_value = value;
    }
  }
  return best;
}

std::pair<double, double> PrefixCost::MinAt(double k, int index) const {
  constexpr double kInf = std::numeric_limits<double>::infinity();
  if (index == -2) return {kInf, kInf};
  double end = 0;
  if (index == -1) {
    for (const HullSegment& s : *segments_) end += s.length;
  } else {
    for (int i = 0; i <= index; ++i) end += (*segments_)[i].length;
  }
  const double cap = work_ / end;
  return {cap, SumAt(cap) + k * cap};
}

PrefixCostBound::PrefixCostBound(const CostModel& model, const StateSpace& space, double common_k,
                                 Interrupt& interrupt)
    : space_(space), common_k_(common_k) {
  const int T = model.num_types();
  const int L = model.num_layers();
  std::vector<double> unit(L, std::numeric_limits<double>::infinity());
  work_prefix_.assign(L + 1, 0);
  floor_prefix_.assign(L + 1, 0);
  for (int l = 0; l < L; ++l) {
    double cheapest = std::numeric_limits<double>::infinity();
    for (int t = 0; t < T; ++t) {
      unit[l] = std::min(unit[l], model.ComputeMs(t, 1, l, l + 1));
      for (int g : model.stage_sizes(t))
        cheapest = std::min(cheapest, model.ComputeMs(t, g, l, l + 1));
    }
    floor_prefix_[l + 1] = floor_prefix_[l] + cheapest;
  }
  // rho[t][g]: the median ratio; none usable (no layer with a positive reference
  // compute) leaves only the floor.
  std::vector<std::vector<double>> rho(T);
  for (int t = 0; t < T; ++t) {
    rho[t].assign(model.node_type(t).gpus_per_node + 1, 0);
    for (int g : model.stage_sizes(t)) {
      std::vector<double> ratios;
      for (int l = 0; l < L; ++l) {
        if (unit[l] > 0) ratios.push_back(model.ComputeMs(t, g, l, l + 1) / unit[l]);
      }
      if (ratios.empty()) return;
      std::nth_element(ratios.begin(), ratios.begin() + ratios.size() / 2, ratios.end());
      const double r = ratios[ratios.size() / 2];
      if (!(r > 0) || !std::isfinite(1 / r)) return;
      rho[t][g] = r;
    }
  }
  for (int l = 0; l < L; ++l) {
    double work = std::numeric_limits<double>::infinity();
    for (int t = 0; t < T; ++t) {
      for (int g : model.stage_sizes(t)) {
        work = std::min(work, model.ComputeMs(t, g, l, l + 1) / rho[t][g]);
      }
    }
    work_prefix_[l + 1] = work_prefix_[l] + work;
  }
  MergeHulls(model, rho, interrupt);
}

void PrefixCostBound::MergeHulls(const CostModel& model,
                                 const std::vector<std::vector<double>>& rho,
                                 Interrupt& interrupt) {
  const int T = model.num_types();
  const int L = model.num_layers();
  const StateSpace& space = space_;
  const double common_k = common_k_;
  // hulls[t][f]: the convex hull of f GPUs of a type-t node.
  std::vector<std::vector<std::vector<HullSegment>>> hulls(T);
  for (int t = 0; t < T; ++t) {
    const int G = model.node_type(t).gpus_per_node;
    std::vector<std::pair<int, double>> stages;  // (gpus, work held at cap 1)
    for (int g : model.stage_sizes(t)) stages.push_back({g, 1 / rho[t][g]});
    hulls[t].resize(G + 1);
    for (int f = 1; f <= G; ++f) hulls[t][f] = NodeHull(stages, f);
  }
  const int NS = space.num_node_states();
  segments_.assign(static_cast<size_t>(space.num_useful()) * NS, {});
  common_argmin_.assign(segments_.size(), PrefixCost::kArgMinUnknown);
  for (int d = 0; d < space.num_useful(); ++d) {
    if (interrupt.Every(d)) return;
    const int f = space.Code(d);
    for (int ns = 0; ns < NS; ++ns) {
      std::vector<HullSegment>& merged = segments_[static_cast<size_t>(d) * NS + ns];
      for (int t = 0; t < T; ++t) {
        const int n = space.count(f, t);
        if (n <= 0) continue;
        for (HullSegment s : hulls[t][model.node_type(t).gpus_per_node]) {
          merged.push_back({s.length * n, s.slope});
        }
      }
      if (ns != 0) {
        const auto [t, used] = space.PartialOf(ns);
        const int free = model.node_type(t).gpus_per_node - used;
        for (HullSegment s : hulls[t][free]) merged.push_back(s);
      }
      std::stable_sort(
          merged.begin(), merged.end(),
          [](const HullSegment& p, const HullSegment& q) { return p.slope < q.slope; });
      if (work_prefix_[L] > 0 && std::isfinite(work_prefix_[L]) && !std::isnan(common_k)) {
        common_argmin_[static_cast<size_t>(d) * NS + ns] =
            PrefixCost(work_prefix_[L], &merged, 0).ArgMinOver(common_k);
      }
    }
  }
}

std::vector<HullSegment> PrefixCostBound::NodeHull(
    const std::vector<std::pair<int, double>>& stages, int f) {
  // most[j][h]: most work j stages using h GPUs hold (-1: impossible).
  std::vector<std::vector<double>> most(f + 1, std::vector<double>(f + 1, -1));
  most[0][0] = 0;
  for (int j = 1; j <= f; ++j) {
    for (int h = 1; h <= f; ++h) {
      for (const auto& [g, work] : stages) {
        if (g <= h && most[j - 1][h - g] >= 0) {
          most[j][h] = std::max(most[j][h], most[j - 1][h - g] + work);
        }
      }
    }
  }
  std::vector<std::pair<double, double>> points = {{0, 0}};  // (work, cost at cap 1)
  for (int j = 1; j <= f; ++j) {
    double best = -1;
    for (int h = 0; h <= f; ++h) best = std::max(best, most[j][h]);
    if (best > points.back().first) points.push_back({best, j});
  }
  // Lower convex hull from (0, 0) (points are in increasing work and cost).
  std::vector<std::pair<double, double>> hull;
  for (const auto& p : points) {
    while (hull.size() >= 2) {
      const auto& o = hull[hull.size() - 2];
      const auto& q = hull.back();
      // Drop q if it lies on or above the segment o -> p.
      if ((q.second - o.second) * (p.first - o.first) >=
          (p.second - o.second) * (q.first - o.first)) {
        hull.pop_back();
      } else {
        break;
      }
    }
    hull.push_back(p);
  }
  std::vector<HullSegment> segments;
  for (size_t i = 1; i < hull.size(); ++i) {
    const double length = hull[i].first - hull[i - 1].first;
    if (std::isinf(length)) {
      segments.push_back({length, 0});
    } else {
      segments.push_back({length, (hull[i].second - hull[i - 1].second) / length});
    }
  }
  return segments;
}

}  // namespace oobleck::template_search
