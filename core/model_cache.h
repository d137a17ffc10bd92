// Cost models and derived profiles shared across requests, so that a warm request for a
// cluster seen before does not copy and rescale profiles, rebuild the cost model's tables or
// fingerprint the profiles for the template cache key again.
#ifndef OOBLECK_CORE_MODEL_CACHE_H_
#define OOBLECK_CORE_MODEL_CACHE_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "core/byte_lru.h"
#include "core/cost_model.h"
#include "core/profile.h"

namespace oobleck {

// Default budget of a CostModelCache: a few dozen clusters of a 1000-layer model.
inline constexpr int64_t kDefaultModelCacheBytes = int64_t{64} << 20;

// Thread-safe, LRU, bounded in (estimated) bytes. Keys are the inputs' content, with
// profiles taken by identity: an entry holds the profiles it was built from, so no other
// profile can have their address while it is cached, and a profile replaced in the catalog
// (a new object) misses. What it returns equals what DeriveProfile and CostModel::Create
// return for the same inputs.
class CostModelCache {
 public:
  explicit CostModelCache(int64_t capacity_bytes = kDefaultModelCacheBytes);

  // DeriveProfile(*measured, gpu_type, relative_speed), built once per input while cached.
  std::shared_ptr<const ModelProfile> Derive(const std::shared_ptr<const ModelProfile>& measured,
                                             const std::string& gpu_type, double relative_speed);

  // CostModel::Create(problem), built once per problem while cached; errors are returned,
  // never cached.
  absl::StatusOr<std::shared_ptr<const CostModel>> Create(PlanningProblem problem);

  struct Stats {
    int64_t hits = 0;
    int64_t misses = 0;
    int64_t entries = 0;
    int64_t bytes = 0;
  };
  Stats stats() const;

 private:
  struct Entry {
    std::string key;
    std::shared_ptr<const void> value;             // a ModelProfile or a CostModel
    std::shared_ptr<const ModelProfile> measured;  // keeps a derived profile's source alive
    int64_t bytes = 0;
  };
  struct Cached {
    std::shared_ptr<const void> value;
    std::shared_ptr<const ModelProfile> measured;
  };
  std::shared_ptr<const void> Find(const std::string& key);
  // Returns the value now cached under `key` (an equal one another thread inserted first
  // wins, so every caller shares one object).
  std::shared_ptr<const void> Insert(Entry entry);

  mutable absl::Mutex mu_;
  ByteLru<Cached> lru_ ABSL_GUARDED_BY(mu_);
};

}  // namespace oobleck

#endif  // OOBLECK_CORE_MODEL_CACHE_H_
