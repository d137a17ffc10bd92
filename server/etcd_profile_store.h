// Replicated profile store (--etcd_endpoints): every profile loaded over RPC is written to
// etcd under "<prefix>profiles/<name>" (the checksummed JSON of a --data_dir file, the name
// that file would have) by a quorum write before LoadProfile answers, and every replica
// follows the prefix with an etcd watch, so an upload, replacement or deletion (etcdctl del)
// on any replica reaches all of them within the watch's delay (milliseconds), not a poll.
//
// Each key's state carries etcd's revision of the write; a replica applies a state only
// when it is newer than the one it holds, so it never goes back to a profile older than
// one it acknowledged or already served (watch events, a re-read after a reconnect and
// this replica's own writes may arrive in any order).
//
// Start() returns at once; a background thread reads every profile (retrying until etcd
// answers, logging why it cannot) and then watches. `on_synced` runs once the first read
// succeeded: main() keeps health NOT_SERVING until then, and the planning and listing calls
// answer UNAVAILABLE (CheckSynced) rather than from a catalog not read yet. Later outages
// of etcd do not unload anything: plans keep answering from the profiles already read,
// uploads fail with UNAVAILABLE naming etcd, and the watch resumes from the last revision
// seen (or reads everything again when etcd compacted that revision away).
#ifndef OOBLECK_SERVER_ETCD_PROFILE_STORE_H_
#define OOBLECK_SERVER_ETCD_PROFILE_STORE_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "absl/synchronization/mutex.h"
#include "core/profile_catalog.h"
#include "server/etcd_client.h"
#include "server/profile_backend.h"

namespace oobleck::server {

class EtcdProfileStore final : public ProfileBackend {
 public:
  using LogFn = std::function<void(const std::string& line)>;

  // `catalog` and `client` must outlive the store. `log` gets one line per profile
  // skipped, per outage and per recovery (stderr when empty).
  EtcdProfileStore(EtcdClient* client, std::string prefix, ProfileCatalog* catalog, LogFn log = {});
  ~EtcdProfileStore() override;  // stops the watch thread

  // Starts the read-then-watch thread; `on_synced` (may be empty) runs on it once.
  void Start(std::function<void()> on_synced);

  // Quorum write to etcd, then this replica's catalog. ALREADY_EXISTS when the key is in
  // etcd (loaded by any replica) and !replace; UNAVAILABLE naming etcd when it cannot be
  // reached or has no quorum.
  absl::StatusOr<bool> Put(ModelProfile profile, bool replace) override;

  // The etcd key of a profile.
  std::string KeyOf(const ProfileKey& key) const;
  // True once every profile in etcd was read at least once.
  bool synced() const;
  // UNAVAILABLE "... not yet synced with etcd ..." until synced().
  absl::Status CheckSynced() const override;

 private:
  void Run(std::function<void()> on_synced);
  // Reads every key under the prefix; returns the revision read at.
  absl::StatusOr<int64_t> ReadAll();
  // Applies the state of one etcd key at `revision`: a stored profile (`value`) or a
  // deletion (nullopt), unless this replica already holds a state at least as new.
  void Apply(const std::string& etcd_key, int64_t revision,
             const std::optional<std::string>& value);
  void Log(const std::string& line) const;

  EtcdClient* const client_;
  const std::string prefix_;  // "<--etcd_prefix>profiles/"
  ProfileCatalog* const catalog_;
  const LogFn log_;

  mutable absl::Mutex mu_;
  // Revision of the last state applied per etcd key (deletions included), and the profile
  // each key holds now (keys whose value did not parse are absent).
  std::map<std::string, int64_t> applied_revision_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, ProfileKey> loaded_ ABSL_GUARDED_BY(mu_);
  bool synced_ ABSL_GUARDED_BY(mu_) = false;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace oobleck::server

#endif  // OOBLECK_SERVER_ETCD_PROFILE_STORE_H_
