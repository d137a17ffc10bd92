// Thread-safe set of loaded profiles, keyed by (model, gpu_type, microbatch_size, tp).
#ifndef OOBLECK_CORE_PROFILE_CATALOG_H_
#define OOBLECK_CORE_PROFILE_CATALOG_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "core/profile.h"

namespace oobleck {

// Default bound on the estimated memory of all loaded profiles (--max_profile_mb): some
// two thousand profiles of a thousand layers, or eight of the largest allowed (2^18 layers).
inline constexpr int64_t kDefaultMaxProfileBytes = int64_t{512} << 20;

// Estimated bytes a loaded profile holds (layers, all-reduce tables and names).
int64_t ProfileMemoryBytes(const ModelProfile& profile);

class ProfileCatalog {
 public:
  explicit ProfileCatalog(int64_t max_bytes = kDefaultMaxProfileBytes) : max_bytes_(max_bytes) {}

  // Validates and stores. ALREADY_EXISTS if the key is taken and !replace;
  // RESOURCE_EXHAUSTED (CheckRoom) when it would not fit. Returns true when an existing
  // profile was replaced.
  absl::StatusOr<bool> Put(ModelProfile profile, bool replace);
  // OK when `profile` would fit in the memory limit, counting the profile it replaces as
  // freed; RESOURCE_EXHAUSTED naming the limit, what is held and what `profile` needs.
  // Stores call this before writing, so a refused profile is never persisted.
  absl::Status CheckRoom(const ModelProfile& profile) const;
  // gpu_type "" matches when the model has profiles of exactly one GPU type;
  // microbatch_size 0 when it has exactly one micro-batch size. Only profiles measured at
  // `tp` are considered (the search asks for tp = 1: a tp > 1 profile is never taken for
  // one). NOT_FOUND names what is missing and what is there.
  absl::StatusOr<std::shared_ptr<const ModelProfile>> Find(const std::string& model,
                                                           const std::string& gpu_type,
                                                           int microbatch_size, int tp = 1) const;
  std::vector<std::shared_ptr<const ModelProfile>> List(const std::string& model) const;
  // Forgets the profile under `key`; false when there was none.
  bool Remove(const ProfileKey& key);
  int size() const;
  // Estimated bytes of every loaded profile, and the limit on them.
  int64_t bytes() const;
  int64_t max_bytes() const { return max_bytes_; }

 private:
  absl::Status CheckRoomLocked(const ModelProfile& profile, int64_t profile_bytes) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const int64_t max_bytes_;
  mutable absl::Mutex mu_;
  std::map<ProfileKey, std::shared_ptr<const ModelProfile>> profiles_ ABSL_GUARDED_BY(mu_);
  int64_t bytes_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace oobleck

#endif  // OOBLECK_CORE_PROFILE_CATALOG_H_
