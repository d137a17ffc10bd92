// Durable profile store (--data_dir): every profile loaded over RPC is written to its own
// file before it is acknowledged, and the files are read back at start.
//
// A file is written atomically (temp file in the same directory, fsync, rename, fsync of
// the directory), so after a crash each file holds either the old or the new profile,
// never a mix. Each file carries a format version and a checksum of its payload, so a file
// damaged later (truncated copy, bit flip, hand edit) is detected, reported and skipped.
#ifndef OOBLECK_SERVER_PROFILE_STORE_H_
#define OOBLECK_SERVER_PROFILE_STORE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "core/profile.h"
#include "core/profile_catalog.h"
#include "server/profile_backend.h"

namespace oobleck::server {

// Version of the file layout below; files of another version are skipped with an error.
inline constexpr int kStoredProfileVersion = 1;
// File names longer than this are refused (most file systems allow 255 bytes).
inline constexpr size_t kMaxStoredProfileFileNameBytes = 240;

// The text of a stored profile file:
//   {"format": "oobleck-planner-profile", "version": 1,
//    "checksum": "fnv1a64:<16 hex digits of the payload as serialized>",
//    "profile": {"model", "gpu_type", "microbatch_size", "fingerprint", "layers": [...],
//                "allreduce_key": "ALLREDUCE_KEY_GPUS_MINUS_ONE" (only when not by GPUs),
//                "tp" (only when not 1), "runtime_reserve_bytes" (only when carried)}};
// a layer's "update_ms" and "activation_output_bytes" only when not 0 (Sailor's format), so
// a tp = 1 profile of Oobleck's reads as before.
// The layers' in-node tables are stored by GPU count whatever the convention they came in.
std::string SerializeStoredProfile(const ModelProfile& profile);

// Inverse of SerializeStoredProfile. INVALID_ARGUMENT (DATA_LOSS for a checksum or
// fingerprint mismatch) naming what is wrong; the result is validated like any profile.
absl::StatusOr<ModelProfile> ParseStoredProfile(std::string_view text);

// "<model>+<gpu_type>+mb<m>.json" ("...+mb<m>+tp<t>.json" when tp != 1) with every byte other than
// [A-Za-z0-9_-] of model and gpu_type percent-encoded, so distinct keys get distinct, safe names.
std::string StoredProfileFileName(const ProfileKey& key);

struct ProfileStoreReport {
  std::vector<std::string> loaded;  // keys ("model/gpu_type/mb<m>") now in the catalog
  std::vector<std::string> errors;  // one line per file skipped or cleaned up
};

class ProfileStore final : public ProfileBackend {
 public:
  // Creates `dir` (and parents) when missing. `catalog` must outlive the store.
  // FAILED_PRECONDITION when the directory cannot be created or is not a directory.
  static absl::StatusOr<std::unique_ptr<ProfileStore>> Open(const std::string& dir,
                                                            ProfileCatalog* catalog);

  // Reads every stored profile into the catalog, replacing profiles with the same key
  // (what was loaded over RPC is newer than a --profile_dir tree). Bad files and leftover
  // temp files of an interrupted write are reported and skipped, never fatal.
  ProfileStoreReport LoadAll();

  // Same contract as ProfileCatalog::Put, but the profile is on disk before this returns
  // OK. Nothing is written when the profile is invalid or the key exists and !replace;
  // when writing fails the catalog is unchanged and the error (INTERNAL naming the file and
  // the system error) is returned.
  absl::StatusOr<bool> Put(ModelProfile profile, bool replace) override;

  const std::string& dir() const { return dir_; }

 private:
  ProfileStore(std::string dir, ProfileCatalog* catalog)
      : dir_(std::move(dir)), catalog_(catalog) {}

  absl::Status WriteAtomically(const std::string& file_name, std::string_view contents)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::string dir_;
  ProfileCatalog* const catalog_;
  // Serializes Put so that the existence check, the write and the catalog update of one
  // key cannot interleave with another Put of the same key.
  absl::Mutex mu_;
  int64_t temp_sequence_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace oobleck::server

#endif  // OOBLECK_SERVER_PROFILE_STORE_H_
