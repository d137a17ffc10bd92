// Profiles sent inside requests: LoadProfile's `layers` / `files`, and InlineProfile, the
// profile a planning request (PlanTemplates, Plan, Replan) carries instead of naming a
// stored one. Both are read and validated by the same code, so that an inline profile is
// refused exactly when LoadProfile would refuse it (its errors under "profiles[i]."). Inline
// profiles live in a bounded cache keyed by fingerprint, never in the profile store.
#ifndef OOBLECK_SERVER_INLINE_PROFILES_H_
#define OOBLECK_SERVER_INLINE_PROFILES_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "core/byte_lru.h"
#include "core/interrupt.h"
#include "core/profile.h"
#include "oobleck/planner/v1/planner.pb.h"

namespace oobleck::server {

// The layers a request sends as `layers` or `files` (exactly one non-null), in-node
// all-reduce keys read in `convention`. Errors name fields under `prefix` ("" for
// LoadProfile, "profiles[i]." inline). Polls `interrupt` (may be null) while parsing files.
absl::StatusOr<std::vector<LayerProfile>> LayersFromRequest(
    const ::oobleck::planner::v1::ProfileLayers* layers,
    const ::oobleck::planner::v1::OobleckProfileFiles* files, AllreduceKey convention,
    const std::string& prefix, Interrupt* interrupt);

// Default bound of the inline profile cache (--inline_profile_cache_mb): a few hundred
// profiles of a thousand layers; one profile larger than the bound is used but not kept.
inline constexpr int64_t kDefaultInlineProfileCacheBytes = int64_t{128} << 20;

// Thread-safe LRU of inline profiles by fingerprint, bounded by their estimated bytes
// (ProfileMemoryBytes).
class InlineProfileCache {
 public:
  explicit InlineProfileCache(int64_t capacity_bytes = kDefaultInlineProfileCacheBytes)
      : lru_(capacity_bytes) {}

  // The profile cached under `fingerprint`, or null.
  std::shared_ptr<const ModelProfile> Find(const std::string& fingerprint);
  // Caches `profile` under its fingerprint; returns the profile now cached (one cached
  // before with that content wins, so requests share one object), or `profile` itself
  // when it is larger than the whole cache.
  std::shared_ptr<const ModelProfile> Insert(std::shared_ptr<const ModelProfile> profile);
  CacheStats stats() const;

 private:
  mutable absl::Mutex mu_;
  ByteLru<std::shared_ptr<const ModelProfile>> lru_ ABSL_GUARDED_BY(mu_);
};

// A request's inline profiles, resolved, in request order.
struct InlineProfiles {
  struct Entry {
    std::string gpu_type;  // the request's InlineProfile.gpu_type ("" = every node type)
    std::shared_ptr<const ModelProfile> profile;
  };
  std::vector<Entry> entries;

  // The profile for node types of `gpu_type`, or null when that GPU type has none.
  std::shared_ptr<const ModelProfile> For(const std::string& gpu_type) const;
};

// Reads, validates and caches `profiles` of a request for `model` (empty: "inline") at
// `microbatch_size` (0: 1) over `cluster`. INVALID_ARGUMENT naming profiles[i]'s field
// (LoadProfile's errors, a repeated or unused gpu_type, an empty gpu_type beside other
// profiles or over several GPU types), NOT_FOUND for a fingerprint not cached,
// RESOURCE_EXHAUSTED past the profile limits.
absl::StatusOr<InlineProfiles> ResolveInlineProfiles(
    const google::protobuf::RepeatedPtrField<::oobleck::planner::v1::InlineProfile>& profiles,
    const std::string& model, int microbatch_size, const ::oobleck::planner::v1::Cluster& cluster,
    InlineProfileCache* cache);

}  // namespace oobleck::server

#endif  // OOBLECK_SERVER_INLINE_PROFILES_H_
