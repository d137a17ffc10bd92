#include "core/template_cache.h"

#include <utility>

namespace oobleck {
namespace {

int64_t EstimateBytes(const std::string& key, const MixResult& r) {
  return static_cast<int64_t>(sizeof(MixResult) + key.size() * 2 + r.infeasible_reason.size() +
                              r.best.stages.size() * sizeof(Stage) +
                              (r.best.node_order.size() + 2 * r.mix.size()) * sizeof(int) + 128);
}

}  // namespace

TemplateCache::TemplateCache(int64_t capacity_bytes) : lru_(capacity_bytes) {}

std::shared_ptr<const MixResult> TemplateCache::Find(const std::string& key) {
  return FindAll({key})[0];
}

std::vector<std::shared_ptr<const MixResult>> TemplateCache::FindAll(
    const std::vector<std::string>& keys) {
  std::vector<std::shared_ptr<const MixResult>> found(keys.size());
  absl::MutexLock lock(&mu_);
  for (size_t i = 0; i < keys.size(); ++i) {
    if (const std::shared_ptr<const MixResult>* hit = lru_.Find(keys[i])) found[i] = *hit;
  }
  return found;
}

void TemplateCache::Insert(const std::string& key, std::shared_ptr<const MixResult> value) {
  const int64_t bytes = EstimateBytes(key, *value);
  absl::MutexLock lock(&mu_);
  lru_.Insert(key, std::move(value), bytes,
              ByteLru<std::shared_ptr<const MixResult>>::OnExisting::kReplace);
}

CacheStats TemplateCache::stats() const {
  absl::MutexLock lock(&mu_);
  return lru_.stats();
}

}  // namespace oobleck
