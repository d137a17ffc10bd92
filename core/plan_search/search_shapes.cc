#include "core/plan_search/search_shapes.h"

#include <algorithm>
#include <bit>
#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace oobleck::plan_search {

bool AsksMorePipelines(const PipelineSetProblem& problem) {
  return problem.min_pipelines > std::max<int>(static_cast<int>(problem.fixed.size()), 1);
}

ShapesWithin::ShapesWithin(const std::vector<PipelineShape>& shapes, std::vector<int> top) {
  const int T = static_cast<int>(top.size());
  const int num_shapes = static_cast<int>(shapes.size());
  words_ = (num_shapes + 63) / 64;
  for (const PipelineShape& s : shapes) {
    for (int t = 0; t < T; ++t) top[t] = std::max(top[t], s.mix[t]);
  }
  type_base_.assign(T + 1, 0);
  for (int t = 0; t < T; ++t) {
    type_base_[t + 1] = type_base_[t] + (top[t] + 1) * static_cast<size_t>(words_);
  }
  at_most_.assign(type_base_[T], 0);
  for (int j = 0; j < num_shapes; ++j) {
    const uint64_t bit = uint64_t{1} << (j % 64);
    for (int t = 0; t < T; ++t) {
      for (int v = shapes[j].mix[t]; v <= top[t]; ++v) {
        at_most_[type_base_[t] + v * words_ + j / 64] |= bit;
      }
    }
  }
}

SearchShapes::SearchShapes(const PipelineSetProblem& problem)
    : problem_(problem), model_(problem.model), B_(problem.global_batch) {
  GroupFixed();
  for (const PipelineShape& s : problem.Shapes()) {
    shapes_.emplace_back(model_, &s.stage_costs, s.max_microbatches, B_);
  }
  all_ = fixed_groups_;
  all_.insert(all_.end(), shapes_.begin(), shapes_.end());
  for (const PipelineShape& f : problem.fixed) fixed_price_ += PriceOf(f.mix);
  shape_price_.reserve(problem.Shapes().size());
  for (const PipelineShape& s : problem.Shapes()) shape_price_.push_back(PriceOf(s.mix));
  free_budget_ = problem.max_price_steps < 0 ? -1 : problem.max_price_steps - fixed_price_;
  const int T = static_cast<int>(problem.available.size());
  total_free_ = MixSize(problem.available);
  min_shape_nodes_ = total_free_ + 1;
  fits_.reserve(problem.Shapes().size());
  for (const PipelineShape& s : problem.Shapes()) {
    min_shape_nodes_ = std::min(min_shape_nodes_, MixSize(s.mix));
    bool fits = true;
    for (int t = 0; t < T; ++t) fits = fits && s.mix[t] <= problem.available[t];
    fits_.push_back(fits);
  }
  FindSubmixes();
}

// fixed_, and its curves grouped by value (plan_search::LoadLess): a Replan keeps hundreds
// of pipelines of a few dozen templates, and the searches ask every kept curve at every
// makespan they try. all_ holds each group once: it only answers the smallest or largest
// time of any curve.
void SearchShapes::GroupFixed() {
  std::map<LoadLess::Key, int, LoadLess> group_of;
  for (const PipelineShape& f : problem_.fixed) {
    fixed_.emplace_back(model_, &f.stage_costs, f.max_microbatches, B_);
    auto [it, inserted] = group_of.emplace(LoadLess::Key{&f.stage_costs, f.max_microbatches},
                                           static_cast<int>(fixed_groups_.size()));
    if (inserted) {
      fixed_groups_.push_back(fixed_.back());
      fixed_multiplicity_.push_back(0);
    }
    ++fixed_multiplicity_[it->second];
  }
}

void SearchShapes::FindSubmixes() {
  const std::vector<PipelineShape>& shapes = problem_.Shapes();
  const int num_shapes = static_cast<int>(shapes.size());
  const ShapesWithin within(shapes, std::vector<int>(problem_.available.size(), 0));
  const int W = within.words();
  submix_starts_.reserve(num_shapes + 1);
  submix_starts_.push_back(0);
  int64_t count = 0;
  for (int a = 0; a < num_shapes; ++a) {
    for (int w = 0; w < W; ++w) count += std::popcount(within.Word(shapes[a].mix.data(), w));
  }
  submixes_.reserve(count);  // (counts each shape itself too)
  for (int a = 0; a < num_shapes; ++a) {
    for (int w = 0; w < W; ++w) {
      uint64_t bits = within.Word(shapes[a].mix.data(), w);
      if (w == a / 64) bits &= ~(uint64_t{1} << (a % 64));
      for (; bits != 0; bits &= bits - 1) submixes_.push_back(w * 64 + std::countr_zero(bits));
    }
    submix_starts_.push_back(static_cast<int>(submixes_.size()));
  }
}

int64_t SearchShapes::PriceOf(const NodeMix& mix) const {
  int64_t price = 0;
  if (problem_.type_price_steps.empty()) return 0;
  for (size_t t = 0; t < mix.size(); ++t) price += mix[t] * problem_.type_price_steps[t];
  return price;
}

int SearchShapes::Need(double tau) const {
  int64_t need = B_;
  for (size_t g = 0; g < fixed_groups_.size(); ++g) {
    const int k = fixed_groups_[g].Absorb(tau);
    if (k == 0) return kImpossibleNeed;
    need -= int64_t{k} * fixed_multiplicity_[g];
  }
  return static_cast<int>(std::max<int64_t>(need, 0));
}

double SearchShapes::TopTau() const {
  double top = -kInf;
  for (const LoadCurve& c : all_) {
    if (c.limit() >= 1) top = std::max(top, c.Time(c.limit()));
  }
  return top;
}

std::vector<Usable> SearchShapes::UsableShapes(double tau) const {
  std::vector<Usable> all;
  all.reserve(shapes_.size());
  std::vector<int32_t> absorb(shapes_.size(), 0);  // per shape; 0: not usable at tau
  for (int j = 0; j < static_cast<int>(shapes_.size()); ++j) {
    if (!fits_[j]) continue;
    const int k = shapes_[j].Absorb(tau);
    if (k > 0) {
      all.push_back({j, k});
      absorb[j] = k;
    }
  }
  std::vector<Usable> kept;
  kept.reserve(all.size());
  for (const Usable& a : all) {
    bool dominated = false;
    for (int i = submix_starts_[a.shape]; i < submix_starts_[a.shape + 1]; ++i) {
      if (absorb[submixes_[i]] >= a.absorb) {
        dominated = true;
        break;
      }
    }
    if (!dominated) kept.push_back(a);
  }
  return kept;
}

absl::Status SearchShapes::CheckBatch() const {
  const int num_fixed = FixedCount();
  if (B_ < 1) return absl::InvalidArgumentError("global_batch must be >= 1");
  if (num_fixed > B_) {
    return absl::FailedPreconditionError(
        absl::StrFormat("the plan keeps %d pipelines but the global batch has only %d "
                        "micro-batches (every pipeline needs at least one)",
                        num_fixed, B_));
  }
  for (int f = 0; f < num_fixed; ++f) {
    if (fixed_[f].limit() < 1) {
      return absl::FailedPreconditionError(
          absl::StrCat("kept pipeline ", f, " cannot hold even one micro-batch in GPU memory"));
    }
  }
  if (num_fixed == 0 && shapes_.empty()) {
    return absl::FailedPreconditionError("no pipeline template fits the available nodes");
  }
  return absl::OkStatus();
}

}  // namespace oobleck::plan_search
