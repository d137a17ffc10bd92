#include "core/profile_catalog.h"

#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/shown_value.h"
#include "core/status_macros.h"

namespace oobleck {

int64_t ProfileMemoryBytes(const ModelProfile& profile) {
  // A std::map node holds its pair plus about 32 bytes of links and colour.
  constexpr int64_t kMapEntryBytes = 32 + sizeof(std::pair<const int, double>);
  int64_t bytes = sizeof(ModelProfile) + profile.key.model.size() + profile.key.gpu_type.size() +
                  static_cast<int64_t>(profile.layers.capacity() * sizeof(LayerProfile));
  for (const LayerProfile& layer : profile.layers) {
    bytes += kMapEntryBytes * static_cast<int64_t>(layer.allreduce_in_node_ms.size() +
                                                   layer.allreduce_across_nodes_ms.size());
  }
  return bytes;
}

absl::Status ProfileCatalog::CheckRoomLocked(const ModelProfile& profile,
                                             int64_t profile_bytes) const {
  int64_t held = bytes_;
  if (auto it = profiles_.find(profile.key); it != profiles_.end()) {
    held -= ProfileMemoryBytes(*it->second);  // replaced, so freed
  }
  if (profile_bytes <= max_bytes_ - held) return absl::OkStatus();
  return absl::ResourceExhaustedError(
      absl::StrCat("profile ", profile.key.ToString(), " needs about ", profile_bytes,
                   " bytes but the loaded profiles already hold about ", held, " of the limit of ",
                   max_bytes_, " bytes (--max_profile_mb); nothing was stored"));
}

absl::Status ProfileCatalog::CheckRoom(const ModelProfile& profile) const {
  const int64_t profile_bytes = ProfileMemoryBytes(profile);
  absl::MutexLock lock(&mu_);
  return CheckRoomLocked(profile, profile_bytes);
}

absl::StatusOr<bool> ProfileCatalog::Put(ModelProfile profile, bool replace) {
  RETURN_IF_ERROR(ValidateProfile(profile));
  const int64_t profile_bytes = ProfileMemoryBytes(profile);
  absl::MutexLock lock(&mu_);
  auto it = profiles_.find(profile.key);
  const bool exists = it != profiles_.end();
  if (exists && !replace) {
    return absl::AlreadyExistsError(absl::StrCat("profile ", profile.key.ToString(),
                                                 " is already loaded; set replace to overwrite"));
  }
  RETURN_IF_ERROR(CheckRoomLocked(profile, profile_bytes));
  if (exists) bytes_ -= ProfileMemoryBytes(*it->second);
  bytes_ += profile_bytes;
  ProfileKey key = profile.key;
  profiles_[key] = std::make_shared<const ModelProfile>(std::move(profile));
  return exists;
}

bool ProfileCatalog::Remove(const ProfileKey& key) {
  absl::MutexLock lock(&mu_);
  auto it = profiles_.find(key);
  if (it == profiles_.end()) return false;
  bytes_ -= ProfileMemoryBytes(*it->second);
  profiles_.erase(it);
  return true;
}

int64_t ProfileCatalog::bytes() const {
  absl::MutexLock lock(&mu_);
  return bytes_;
}

absl::StatusOr<std::shared_ptr<const ModelProfile>> ProfileCatalog::Find(
    const std::string& model, const std::string& gpu_type, int microbatch_size, int tp) const {
  absl::MutexLock lock(&mu_);
  std::vector<std::shared_ptr<const ModelProfile>> matches;
  std::set<std::string> gpu_types;
  std::set<int> sizes;
  bool model_known = false;
  bool other_tp = false;  // the model has profiles, at other tensor-parallel degrees only
  for (const auto& [key, p] : profiles_) {
    if (key.model != model) continue;
    if (key.tp != tp) {
      other_tp = true;
      continue;
    }
    model_known = true;
    gpu_types.insert(key.gpu_type);
    sizes.insert(key.microbatch_size);
    if ((gpu_type.empty() || key.gpu_type == gpu_type) &&
        (microbatch_size == 0 || key.microbatch_size == microbatch_size)) {
      matches.push_back(p);
    }
  }
  if (!model_known) {
    if (other_tp) {
      return absl::NotFoundError(absl::StrCat("model ", Quote(model), " has no profile at tp ", tp,
                                              " (only at other tensor-parallel degrees)"));
    }
    return absl::NotFoundError(absl::StrCat("no profile is loaded for model ", Quote(model)));
  }
  if (matches.size() == 1) return matches[0];
  if (matches.empty()) {
    return absl::NotFoundError(absl::StrCat("no profile for model ", Quote(model), " gpu_type ",
                                            Quote(gpu_type), " microbatch_size ", microbatch_size,
                                            "; loaded gpu types: ", absl::StrJoin(gpu_types, ", "),
                                            "; micro-batch sizes: ", absl::StrJoin(sizes, ", ")));
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "model ", Quote(model), " has several profiles (gpu types: ", absl::StrJoin(gpu_types, ", "),
      "; micro-batch sizes: ", absl::StrJoin(sizes, ", "), "); give gpu_type and microbatch_size"));
}

std::vector<std::shared_ptr<const ModelProfile>> ProfileCatalog::List(
    const std::string& model) const {
  absl::MutexLock lock(&mu_);
  std::vector<std::shared_ptr<const ModelProfile>> out;
  for (const auto& [key, p] : profiles_) {
    if (model.empty() || key.model == model) out.push_back(p);
  }
  return out;
}

int ProfileCatalog::size() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int>(profiles_.size());
}

}  // namespace oobleck
