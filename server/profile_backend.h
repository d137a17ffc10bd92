// Where profiles loaded over RPC are kept durably: a local directory (--data_dir,
// server/profile_store.h) or etcd shared by every replica (--etcd_endpoints,
// server/etcd_profile_store.h). LoadProfile calls Put and acknowledges only after it.
#ifndef OOBLECK_SERVER_PROFILE_BACKEND_H_
#define OOBLECK_SERVER_PROFILE_BACKEND_H_

#include "absl/status/statusor.h"
#include "core/profile.h"

namespace oobleck::server {

class ProfileBackend {
 public:
  virtual ~ProfileBackend() = default;

  // Same contract as ProfileCatalog::Put (true when a profile was replaced), but the
  // profile is durable in the backend and in this replica's catalog before OK is
  // returned. On any error the catalog is unchanged.
  virtual absl::StatusOr<bool> Put(ModelProfile profile, bool replace) = 0;

  // OK once this replica holds every profile the backend had when it started; until then
  // UNAVAILABLE (which clients retry, on this replica or another): an answer from a
  // partial catalog, such as NOT_FOUND for a model not read yet, would be wrong.
  virtual absl::Status CheckSynced() const { return absl::OkStatus(); }
};

}  // namespace oobleck::server

#endif  // OOBLECK_SERVER_PROFILE_BACKEND_H_
