#include "core/model_cache.h"

#include <cstring>
#include <utility>

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
                  rows * static_cast<int64_t>(sizeof(double));  // boundary bytes
  for (int t = 0; t < model.num_types(); ++t) {
    bytes += rows * static_cast<int64_t>(sizeof(double)) *
             (2 * static_cast<int64_t>(model.stage_sizes(t).size()) + 2);
  }
  for (const auto& profile : model.problem().profiles) bytes += ProfileBytes(*profile);
  return bytes;
}

}  // namespace

CostModelCache::CostModelCache(int64_t capacity_bytes) : capacity_bytes_(capacity_bytes) {}

std::shared_ptr<const void> CostModelCache::Find(const std::string& key) {
  absl::MutexLock lock(&mu_);
  auto it = index_.find(key);
  if (it == index_.end()) {
    ++stats_.misses;
    return nullptr;
  }
  ++stats_.hits;
  lru_.splice(lru_.begin(), lru_, it->second);
  return it->second->value;
}

std::shared_ptr<const void> CostModelCache::Insert(Entry entry) {
  entry.bytes += 2 * static_cast<int64_t>(entry.key.size()) + 64;
  absl::MutexLock lock(&mu_);
  if (auto it = index_.find(entry.key); it != index_.end()) return it->second->value;
  if (entry.bytes > capacity_bytes_) return entry.value;  // would evict everything
  std::shared_ptr<const void> value = entry.value;
  stats_.bytes += entry.bytes;
  lru_.push_front(std::move(entry));
  index_[lru_.front().key] = lru_.begin();
  while (stats_.bytes > capacity_bytes_ && !lru_.empty()) {
    stats_.bytes -= lru_.back().bytes;
    index_.erase(lru_.back().key);
    lru_.pop_back();
  }
  stats_.entries = static_cast<int64_t>(lru_.size());
  return value;
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
  for (const std::string& from : problem.derived_from) AppendString(&key, from);
  if (std::shared_ptr<const void> hit = Find(key)) {
    return std::static_pointer_cast<const CostModel>(hit);
  }
  absl::StatusOr<CostModel> model = CostModel::Create(std::move(problem));
  if (!model.ok()) return model.status();
  auto built = std::make_shared<const CostModel>(*std::move(model));
  const int64_t bytes = ModelBytes(*built);
  Entry entry{std::move(key), built, nullptr, bytes};
  return std::static_pointer_cast<const CostModel>(Insert(std::move(entry)));
}

CostModelCache::Stats CostModelCache::stats() const {
  absl::MutexLock lock(&mu_);
  return stats_;
}

}  // namespace oobleck
