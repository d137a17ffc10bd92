// TemplateCache: the per-mix results of the template search, shared by all requests of a
// process and injected into TemplatePlanner (core/template_planner.h); keys are content
// (PlanningProblem::CacheKey() plus the mix, docs/architecture/caches.md#templatecache).
#ifndef OOBLECK_CORE_TEMPLATE_CACHE_H_
#define OOBLECK_CORE_TEMPLATE_CACHE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "core/byte_lru.h"
#include "core/search.h"

namespace oobleck {

// LRU cache of per-mix results keyed by content, bounded in (estimated) bytes.
class TemplateCache {
 public:
  explicit TemplateCache(int64_t capacity_bytes);
  std::shared_ptr<const MixResult> Find(const std::string& key);
  // Find for each key in order, under one lock (nullptr for a miss).
  std::vector<std::shared_ptr<const MixResult>> FindAll(const std::vector<std::string>& keys);
  void Insert(const std::string& key, std::shared_ptr<const MixResult> value);
  CacheStats stats() const;

 private:
  mutable absl::Mutex mu_;
  ByteLru<std::shared_ptr<const MixResult>> lru_ ABSL_GUARDED_BY(mu_);
};

}  // namespace oobleck

#endif  // OOBLECK_CORE_TEMPLATE_CACHE_H_
