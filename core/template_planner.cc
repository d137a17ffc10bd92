#include "core/template_planner.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "core/status_macros.h"
#include "tbb/task_arena.h"

namespace oobleck {
namespace {

// A result from a shared store is used only when it describes a template of `mix` for
// this model: another process (or a hand-written value) must not make us index out of
// range later. Optimality is the publisher's: keys are content, and every process runs
// the same exact search.
bool FitsModel(const CostModel& model, const NodeMix& mix, const MixResult& r) {
  if (r.mix != mix) return false;
  if (!r.feasible) return true;
  const PipelineTemplate& t = r.best;
  if (t.mix != mix || t.stages.empty() || !(t.iteration_time_ms >= 0)) return false;
  std::vector<int> counts(mix.size(), 0);
  for (int type : t.node_order) {
    if (type < 0 || type >= static_cast<int>(mix.size()) || type >= model.num_types()) {
      return false;
    }
    ++counts[type];
  }
  if (counts != mix) return false;
  int next_layer = 0;
  int last_node = 0;
  for (const Stage& s : t.stages) {
    if (s.layer_begin != next_layer || s.layer_end <= s.layer_begin || s.node_index < last_node ||
        s.node_index >= t.num_nodes() || s.node_type != t.node_order[s.node_index] || s.gpus < 1 ||
        s.gpus > model.node_type(s.node_type).gpus_per_node) {
      return false;
    }
    next_layer = s.layer_end;
    last_node = s.node_index;
  }
  return next_layer == model.num_layers();
}

}  // namespace

TemplatePlanner::TemplatePlanner(TemplateCache* cache, int threads, SharedTemplateStore* shared)
    : cache_(cache), threads_(threads), shared_(shared) {}

absl::StatusOr<std::vector<PlannedMix>> TemplatePlanner::PlanTemplates(
    const CostModel& model, const std::vector<NodeMix>& mixes, const SearchOptions& options) {
  const std::string& problem_key = model.problem_key();
  std::vector<PlannedMix> planned(mixes.size());
  std::vector<std::string> keys(mixes.size());
  std::vector<NodeMix> missing;
  std::vector<size_t> missing_index;
  for (size_t i = 0; i < mixes.size(); ++i) {
    std::string& key = keys[i];
    key.reserve(problem_key.size() + 5 + 4 * mixes[i].size());
    key.append(problem_key).append("|mix=");
    for (size_t t = 0; t < mixes[i].size(); ++t) {
      if (t > 0) key.push_back(',');
      absl::StrAppend(&key, mixes[i][t]);
    }
  }
  std::vector<std::shared_ptr<const MixResult>> hits = cache_->FindAll(keys);
  for (size_t i = 0; i < mixes.size(); ++i) {
    if (hits[i] != nullptr) {
      planned[i] = {std::move(hits[i]), true};
    } else {
      missing.push_back(mixes[i]);
      missing_index.push_back(i);
    }
  }
  if (!missing.empty() && shared_ != nullptr) {
    std::vector<std::string> missing_keys;
    for (size_t i : missing_index) missing_keys.push_back(keys[i]);
    std::vector<std::shared_ptr<const MixResult>> shared = shared_->FindAll(missing_keys);
    std::vector<NodeMix> still_missing;
    std::vector<size_t> still_missing_index;
    for (size_t j = 0; j < missing.size(); ++j) {
      const size_t i = missing_index[j];
      if (shared[j] != nullptr && FitsModel(model, missing[j], *shared[j])) {
        cache_->Insert(keys[i], shared[j]);
        planned[i] = {std::move(shared[j]), true, true};
      } else {
        still_missing.push_back(std::move(missing[j]));
        still_missing_index.push_back(i);
      }
    }
    missing = std::move(still_missing);
    missing_index = std::move(still_missing_index);
  }
  if (missing.empty()) return planned;
  std::shared_ptr<void> admission;  // held until the search is done
  if (options.admit) {
    ASSIGN_OR_RETURN(std::shared_ptr<void> admitted, options.admit());
    admission = std::move(admitted);
  }
  absl::StatusOr<std::vector<MixResult>> results;
  if (threads_ > 0) {
    tbb::task_arena arena(threads_);
    arena.execute([&] { results = SearchTemplates(model, missing, options); });
  } else {
    results = SearchTemplates(model, missing, options);
  }
  RETURN_IF_ERROR(results.status());
  for (size_t j = 0; j < missing.size(); ++j) {
    auto value = std::make_shared<const MixResult>(std::move((*results)[j]));
    cache_->Insert(keys[missing_index[j]], value);
    if (shared_ != nullptr) shared_->Publish(keys[missing_index[j]], value);
    planned[missing_index[j]] = {std::move(value), false};
  }
  return planned;
}

}  // namespace oobleck
