// The template cache replicas share through etcd (--etcd_endpoints): a template one replica
// computed is published under "<prefix>templates/<128-bit hash of the cache key>" so that
// another replica (or this one after a restart) answers the same request from it instead
// of searching. The value holds the whole cache key, checked on every read, so a hash
// collision is a miss, never a wrong answer.
//
// Eviction: every entry is attached to an etcd lease of --etcd_template_ttl_s and vanishes
// when it expires; each replica takes a new lease once its current one is older than
// 90 % of the TTL and writes at most --etcd_template_budget_mb of entries per lease (more
// are counted as skipped), so one replica keeps at most about twice that budget alive in
// etcd. Entries larger than kMaxSharedTemplateBytes are never published.
//
// Lookups are one serializable read of all missing keys (no quorum round: a member that
// lost its quorum still answers) bounded by a short deadline; publishing runs on its own
// thread from a bounded queue, so neither a slow nor a dead etcd delays a request by more
// than the lookup deadline. Every failure is a miss, counted in stats().errors.
#ifndef OOBLECK_SERVER_ETCD_TEMPLATE_STORE_H_
#define OOBLECK_SERVER_ETCD_TEMPLATE_STORE_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "core/template_planner.h"
#include "server/etcd_client.h"

namespace oobleck::server {

// etcd refuses requests over 1.5 MiB by default.
inline constexpr int64_t kMaxSharedTemplateBytes = 1 << 20;
// Results waiting to be published; more are skipped.
inline constexpr size_t kMaxPendingPublishes = 4096;

// The value stored for `key`: {"format": "oobleck-planner-template", "version": 1,
// "key": ..., "result": {mix, feasible, infeasible_reason, best: {...}}}.
std::string SerializeSharedTemplate(const std::string& key, const MixResult& result);
// Inverse; INVALID_ARGUMENT naming the field when the text is not such a value, or holds
// another key than `key`.
absl::StatusOr<MixResult> ParseSharedTemplate(const std::string& text, const std::string& key);

struct SharedCacheStats {
  int64_t hits = 0;
  int64_t misses = 0;
  int64_t published = 0;
  int64_t skipped = 0;
  int64_t errors = 0;
};

struct SharedCacheOptions {
  absl::Duration ttl = absl::Hours(1);
  int64_t budget_bytes = int64_t{64} << 20;
  absl::Duration lookup_timeout = absl::Milliseconds(200);
};

class EtcdTemplateStore final : public SharedTemplateStore {
 public:
  using LogFn = std::function<void(const std::string& line)>;

  // `client` must outlive the store. `log` (stderr when empty) gets one line per failure
  // kind change.
  EtcdTemplateStore(EtcdClient* client, const std::string& prefix, SharedCacheOptions options,
                    LogFn log = {});
  ~EtcdTemplateStore() override;  // stops publishing; what is still queued is dropped

  std::vector<std::shared_ptr<const MixResult>> FindAll(
      const std::vector<std::string>& keys) override;
  void Publish(const std::string& key, std::shared_ptr<const MixResult> result) override;

  SharedCacheStats stats() const;
  // The etcd key of a cache key.
  std::string KeyOf(const std::string& cache_key) const;

 private:
  void PublishLoop();
  void Report(const std::string& problem);

  EtcdClient* const client_;
  const std::string prefix_;  // "<--etcd_prefix>templates/"
  const SharedCacheOptions options_;
  const LogFn log_;

  mutable absl::Mutex mu_;
  SharedCacheStats stats_ ABSL_GUARDED_BY(mu_);
  std::deque<std::pair<std::string, std::shared_ptr<const MixResult>>> pending_
      ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::string last_problem_ ABSL_GUARDED_BY(mu_);
  // Publisher thread only.
  int64_t lease_ = 0;
  absl::Time lease_granted_;
  int64_t lease_bytes_ = 0;
  std::thread publisher_;
};

}  // namespace oobleck::server

#endif  // OOBLECK_SERVER_ETCD_TEMPLATE_STORE_H_
