#include "core/model_cache.h"

#include <cstring>
#include <utility>

#include "core/plan/limits.h"
#include "core/status_macros.h"

namespace oobleck {
namespace {

// Keys are bytes: fixed-size values as they are in memory, strings with their length first,
// so that distinct inputs never give one key.
template <typename T>
void AppendRaw(std::string* key, const T& value) {
  char bytes[sizeof(T)];
  std::memcpy(bytes, &value, sizeof(T));
  key->append(bytes, sizeof(T));
}

void AppendString(std::string* key, const std::string& value) {
  AppendRaw(key, value.size());
  key->append(value);
}

int64_t ProfileBytes(const ModelProfile& profile) {
  constexpr int64_t kMapNodeBytes = 48;  // a std::map<int, double> node
  int64_t bytes = sizeof(ModelProfile) + profile.key.model.size() + profile.key.gpu_type.size();
  for (const LayerProfile& layer : profile.layers) {
    bytes += sizeof(LayerProfile) +
             kMapNodeBytes * static_cast<int64_t>(layer.allreduce_in_node_ms.size() +
                                                  layer.allreduce_across_nodes_ms.size());
  }
  return bytes;
}

// The model's prefix tables (at most every GPU count of each type, forward and backward,
// plus parameters and activations) and the profiles it keeps alive.
int64_t ModelBytes(const CostModel& model) {
  const int64_t rows = model.num_layers() + 1;
  int64_t bytes = sizeof(CostModel) + static_cast<int64_t>(model.problem_key().size()) +
                  rows * static_cast<int64_t>(sizeof(double)) +  // boundary bytes
                  // the all-reduce memo (allreduce_memo()) once a fleet-size plan filled it
                  (int64_t{kMaxClusterNodes} + 1) * static_cast<int64_t>(sizeof(double));
  for (int t = 0; t < model.num_types(); ++t) {
    bytes += rows * static_cast<int64_t>(sizeof(double)) *
             (2 * static_cast<int64_t>(model.stage_sizes(t).size()) + 2);
  }
  for (const auto& profile : model.problem().profiles) bytes += ProfileBytes(*profile);
  for (const auto& list : model.problem().tp_profiles) {
    for (const auto& profile : list) bytes += ProfileBytes(*profile);
  }
  // Tensor-parallel types keep per-size parameter and activation prefix sums too.
  for (int t = 0; t < model.num_types(); ++t) {
    if (model.problem().TensorParallelDegrees(t).empty()) continue;
    bytes += rows * static_cast<int64_t>(sizeof(double)) * 2 *
             static_cast<int64_t>(model.stage_sizes(t).size());
  }
  return bytes;
}

}  // namespace

CostModelCache::CostModelCache(int64_t capacity_bytes) : lru_(capacity_bytes) {}

std::shared_ptr<const void> CostModelCache::Find(const std::string& key) {
  absl::MutexLock lock(&mu_);
  const Cached* hit = lru_.Find(key);
  return hit != nullptr ? hit->value : nullptr;
}

std::shared_ptr<const void> CostModelCache::Insert(Entry entry) {
  const int64_t bytes = entry.bytes + 2 * static_cast<int64_t>(entry.key.size()) + 64;
  absl::MutexLock lock(&mu_);
  // An equal value another thread inserted first wins; one too large is not cached.
  const Cached* cached = lru_.Insert(entry.key, {entry.value, std::move(entry.measured)}, bytes,
                                     ByteLru<Cached>::OnExisting::kKeep);
  return cached != nullptr ? cached->value : entry.value;
}

std::shared_ptr<const ModelProfile> CostModelCache::Derive(
    const std::shared_ptr<const ModelProfile>& measured, const std::string& gpu_type,
    double relative_speed) {
  std::string key = "derive|";
  AppendRaw(&key, measured.get());
  AppendRaw(&key, relative_speed);
  AppendString(&key, gpu_type);
  if (std::shared_ptr<const void> hit = Find(key)) {
    return std::static_pointer_cast<const ModelProfile>(hit);
  }
  auto derived =
      std::make_shared<const ModelProfile>(DeriveProfile(*measured, gpu_type, relative_speed));
  Entry entry{std::move(key), derived, measured, ProfileBytes(*derived)};
  return std::static_pointer_cast<const ModelProfile>(Insert(std::move(entry)));
}

absl::StatusOr<std::shared_ptr<const CostModel>> CostModelCache::Create(PlanningProblem problem) {
  std::string key = "model|";
  AppendRaw(&key, problem.cost_model);
  AppendRaw(&key, problem.microbatches);
  AppendRaw(&key, problem.optimizer_state_multiplier);
  AppendRaw(&key, problem.inter_node_bytes_per_s);
  AppendRaw(&key, problem.missing_allreduce);
  AppendRaw(&key, problem.stage_gpus);
  AppendRaw(&key, problem.node_types.size());
  AppendRaw(&key, problem.profiles.size());
  AppendRaw(&key, problem.derived_from.size());
  for (const NodeType& type : problem.node_types) {
    AppendString(&key, type.name);
    AppendString(&key, type.gpu_type);
    AppendRaw(&key, type.gpus_per_node);
    AppendRaw(&key, type.gpu_memory_bytes);
    AppendRaw(&key, type.intra_node_bytes_per_s);
  }
  for (const auto& profile : problem.profiles) AppendRaw(&key, profile.get());
  AppendRaw(&key, problem.tp_profiles.size());
  for (const auto& list : problem.tp_profiles) {
    AppendRaw(&key, list.size());
    for (const auto& profile : list) AppendRaw(&key, profile.get());
  }
  for (const std::string& from : problem.derived_from) AppendString(&key, from);
  if (std::shared_ptr<const void> hit = Find(key)) {
    return std::static_pointer_cast<const CostModel>(hit);
  }
  ASSIGN_OR_RETURN(CostModel model, CostModel::Create(std::move(problem)));
  auto built = std::make_shared<const CostModel>(std::move(model));
  const int64_t bytes = ModelBytes(*built);
  Entry entry{std::move(key), built, nullptr, bytes};
  return std::static_pointer_cast<const CostModel>(Insert(std::move(entry)));
}

CostModelCache::Stats CostModelCache::stats() const {
  absl::MutexLock lock(&mu_);
  const CacheStats lru = lru_.stats();
  return {lru.hits, lru.misses, lru.entries, lru.bytes};
}

}  // namespace oobleck
