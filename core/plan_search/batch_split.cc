// SplitBatch and StageCosts (batch_split.h): the split of a global batch over chosen
// pipelines that minimises their slowest time.
#include "core/plan_search/batch_split.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <queue>
#include <utility>
#include <vector>

#include "absl/strings/str_format.h"
#include "core/plan_search/load_curve.h"
#include "core/status_macros.h"

namespace oobleck {

using plan_search::AtOrBelow;
using plan_search::kInf;
using plan_search::LoadCurve;
using plan_search::SmallestFeasible;

std::vector<double> StageCosts(const PipelineTemplate& tmpl) {
  std::vector<double> costs;
  StageCosts(tmpl, &costs);
  return costs;
}

void StageCosts(const PipelineTemplate& tmpl, std::vector<double>* costs) {
  costs->clear();
  costs->reserve(tmpl.stages.size());
  for (const Stage& s : tmpl.stages) costs->push_back(s.cost_ms);
}

namespace {

// Pipelines with the same stage costs and limit share one curve (e.g. every node of a type
// in the data-parallel baseline, or the hundreds of pipelines of a fleet plan built from a few
// dozen templates): pipeline i follows curves[group[i]], and curve g stands for
// multiplicity[g] pipelines. A curve is a function of the costs' values and the limit only,
// so grouping by values (not by the vectors' addresses: Replan's callers hold one vector per
// pipeline) changes no time the search reads.
struct CurveGroups {
  std::vector<LoadCurve> curves;
  std::vector<int> group, multiplicity;
};

CurveGroups GroupCurves(const CostModel& model, const std::vector<PipelineLoad>& pipelines,
                        int global_batch) {
  const int P = static_cast<int>(pipelines.size());
  std::map<plan_search::LoadLess::Key, int, plan_search::LoadLess> curve_of;
  CurveGroups out;
  out.group.resize(P);
  for (int i = 0; i < P; ++i) {
    auto key = std::make_pair(pipelines[i].stage_costs, pipelines[i].max_microbatches);
    auto [it, inserted] = curve_of.emplace(key, static_cast<int>(out.curves.size()));
    if (inserted) {
      out.curves.emplace_back(&model, pipelines[i].stage_costs, pipelines[i].max_microbatches,
                              global_batch);
      out.multiplicity.push_back(0);
    }
    out.group[i] = it->second;
    ++out.multiplicity[it->second];
  }
  return out;
}

// The split once the smallest feasible makespan tau is known: everything strictly below
// tau, then values equal to tau in pipeline order.
absl::StatusOr<std::vector<int>> SplitAt(const std::vector<LoadCurve>& curves,
                                         const std::vector<int>& group, double tau,
                                         int global_batch) {
  const int P = static_cast<int>(group.size());
  const double below = AtOrBelow(curves, std::nextafter(tau, -kInf));
  std::vector<int> below_k(curves.size()), at_k(curves.size());
  for (size_t g = 0; g < curves.size(); ++g) {
    below_k[g] = std::isinf(below) ? 0 : curves[g].Absorb(below);
    at_k[g] = curves[g].Absorb(tau);
  }
  std::vector<int> split(P);
  int64_t sum = 0;
  for (int i = 0; i < P; ++i) {
    split[i] = std::max(1, below_k[group[i]]);
    sum += split[i];
  }
  if (sum > global_batch) {
    // Only when forcing a first micro-batch onto pipelines whose T(1) = tau overshoots:
    // take back from the pipelines finishing last (all below tau); later indices first.
    auto later = [&](int a, int b) {
      const double ta = curves[group[a]].Time(split[a]), tb = curves[group[b]].Time(split[b]);
      return ta != tb ? ta < tb : a < b;
    };
    std::priority_queue<int, std::vector<int>, decltype(later)> heap(later);
    for (int i = 0; i < P; ++i) {
      if (split[i] > 1) heap.push(i);
    }
    while (sum > global_batch && !heap.empty()) {
      const int i = heap.top();
      heap.pop();
      --split[i];
      --sum;
      if (split[i] > 1) heap.push(i);
    }
  }
  for (int i = 0; i < P && sum < global_batch; ++i) {
    const int add =
        static_cast<int>(std::min<int64_t>(at_k[group[i]] - split[i], global_batch - sum));
    if (add > 0) {
      split[i] += add;
      sum += add;
    }
  }
  if (sum != global_batch) return absl::InternalError("batch split does not add up");
  return split;
}

}  // namespace

absl::StatusOr<std::vector<int>> SplitBatch(const CostModel& model,
                                            const std::vector<PipelineLoad>& pipelines,
                                            int global_batch) {
  const int P = static_cast<int>(pipelines.size());
  if (P == 0) return absl::FailedPreconditionError("no pipelines to split the batch over");
  if (P > global_batch) {
    return absl::FailedPreconditionError(
        absl::StrFormat("%d pipelines need at least %d micro-batches, the global batch has %d", P,
                        P, global_batch));
  }
  CurveGroups groups = GroupCurves(model, pipelines, global_batch);
  std::vector<LoadCurve>& curves = groups.curves;
  const std::vector<int>& multiplicity = groups.multiplicity;
  int64_t capacity = 0;
  double top = -kInf;
  for (size_t g = 0; g < curves.size(); ++g) {
    if (curves[g].limit() < 1) {
      return absl::FailedPreconditionError("a pipeline cannot hold one micro-batch in GPU memory");
    }
    capacity += int64_t{curves[g].limit()} * multiplicity[g];
    top = std::max(top, curves[g].Time(curves[g].limit()));
  }
  if (capacity < global_batch) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "the pipelines hold at most %d micro-batches within GPU memory, fewer than %d", capacity,
        global_batch));
  }
  auto absorbed = [&](double tau) -> int64_t {
    int64_t sum = 0;
    for (size_t g = 0; g < curves.size(); ++g) {
      const int k = curves[g].Absorb(tau);
      if (k == 0) return -1;
      sum += int64_t{k} * multiplicity[g];
    }
    return sum;
  };
  auto feasible = [&](double t) -> absl::StatusOr<bool> { return absorbed(t) >= global_batch; };
  ASSIGN_OR_RETURN(const double tau, SmallestFeasible(curves, -kInf, top, feasible));
  return SplitAt(curves, groups.group, tau, global_batch);
}

}  // namespace oobleck
