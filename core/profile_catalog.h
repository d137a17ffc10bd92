// Thread-safe set of loaded profiles, keyed by (model, gpu_type, microbatch_size).
#ifndef OOBLECK_CORE_PROFILE_CATALOG_H_
#define OOBLECK_CORE_PROFILE_CATALOG_H_

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "core/profile.h"

namespace oobleck {

class ProfileCatalog {
 public:
  // Validates and stores. ALREADY_EXISTS if the key is taken and !replace.
  // Returns true when an existing profile was replaced.
  absl::StatusOr<bool> Put(ModelProfile profile, bool replace);
  // gpu_type "" matches when the model has profiles of exactly one GPU type;
  // microbatch_size 0 when it has exactly one micro-batch size. NOT_FOUND names what is
  // missing and what is there.
  absl::StatusOr<std::shared_ptr<const ModelProfile>> Find(const std::string& model,
                                                           const std::string& gpu_type,
                                                           int microbatch_size) const;
  std::vector<std::shared_ptr<const ModelProfile>> List(const std::string& model) const;
  // Forgets the profile under `key`; false when there was none.
  bool Remove(const ProfileKey& key);
  int size() const;

 private:
  mutable absl::Mutex mu_;
  std::map<ProfileKey, std::shared_ptr<const ModelProfile>> profiles_ ABSL_GUARDED_BY(mu_);
};

}  // namespace oobleck

#endif  // OOBLECK_CORE_PROFILE_CATALOG_H_
