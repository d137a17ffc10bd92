// A small client of etcd's v3 API over gRPC (the KV, Watch and Lease calls the replicated
// profile store and the shared template cache need), speaking to every endpoint of one
// etcd cluster.
//
// Each endpoint gets its own channel; a call goes to the endpoint that answered last and
// moves on to the next one when that endpoint cannot be reached, so one dead member costs
// nothing but a fast connection error. Every call has a deadline (the cluster without
// quorum does not answer writes or linearizable reads at all), and every failure to reach
// a working cluster is UNAVAILABLE with a message that names etcd and its endpoints.
#ifndef OOBLECK_SERVER_ETCD_CLIENT_H_
#define OOBLECK_SERVER_ETCD_CLIENT_H_

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "etcd/etcdserverpb/rpc.grpc.pb.h"

namespace oobleck::server {

struct EtcdKeyValue {
  std::string key;
  std::string value;
  int64_t mod_revision = 0;
};

struct EtcdRange {
  std::vector<EtcdKeyValue> kvs;
  int64_t revision = 0;  // the store's revision the range was read at
};

struct EtcdWrite {
  bool existed = false;  // the key held a value before
  int64_t revision = 0;  // the revision of this write (0 when nothing was written)
};

struct EtcdEvent {
  bool deleted = false;  // a DELETE (value empty) rather than a PUT
  EtcdKeyValue kv;
};

// Splits "host:port[,host:port...]", checking each part. INVALID_ARGUMENT naming `flag`.
absl::StatusOr<std::vector<std::string>> ParseEtcdEndpoints(const std::string& endpoints,
                                                            const std::string& flag);

// The first key after every key that starts with `prefix` (etcd's range_end for a prefix).
std::string PrefixRangeEnd(const std::string& prefix);

class EtcdClient {
 public:
  // `call_timeout` bounds every unary call (one endpoint at a time).
  EtcdClient(std::vector<std::string> endpoints, absl::Duration call_timeout);

  // Every key starting with `prefix`, read linearizably (what a quorum agreed on).
  absl::StatusOr<EtcdRange> RangePrefix(const std::string& prefix);
  // The values of `keys` in order (nullopt where absent), read from whichever member
  // answers (serializable: no quorum round, so a member cut off from the others still
  // answers, maybe a little behind), within `timeout`.
  absl::StatusOr<std::vector<std::optional<std::string>>> GetMany(
      const std::vector<std::string>& keys, absl::Duration timeout);
  // Writes `value` under `key` (attached to `lease` when non-zero) and returns once a
  // quorum has it. With !overwrite nothing is written when the key exists
  // (result.existed, revision 0).
  absl::StatusOr<EtcdWrite> Put(const std::string& key, const std::string& value, bool overwrite,
                                int64_t lease = 0);
  absl::StatusOr<int64_t> Delete(const std::string& key);  // the revision of the delete
  // A lease of `ttl` (whole seconds, at least 1); its keys vanish when it expires.
  absl::StatusOr<int64_t> GrantLease(absl::Duration ttl);

  // Streams the changes of every key under `prefix` from `start_revision` on, calling
  // `on_events` with each batch and the revision it brings the watcher to. Returns when
  // the stream ends: FAILED_PRECONDITION with `*compacted` set when start_revision was
  // compacted away (read everything again), UNAVAILABLE when the member went away,
  // CANCELLED after StopWatch().
  absl::Status Watch(const std::string& prefix, int64_t start_revision,
                     const std::function<void(const std::vector<EtcdEvent>&, int64_t)>& on_events,
                     bool* compacted);
  // Ends a running Watch (from another thread) and makes later ones return at once.
  void StopWatch();

  std::string endpoints_text() const;

 private:
  using Stub = etcdserverpb::KV::Stub;
  // Runs `call` against each endpoint in turn, starting at the one that worked last,
  // until one answers; errors are worded by EtcdError.
  // `timeout` 0: the client's call_timeout.
  absl::Status CallAnyEndpoint(
      const std::string& what,
      const std::function<grpc::Status(int endpoint, grpc::ClientContext*)>& call,
      absl::Duration timeout = absl::ZeroDuration());
  absl::Status EtcdError(const std::string& what, const grpc::Status& status,
                         absl::Duration timeout) const;

  const std::vector<std::string> endpoints_;
  const absl::Duration call_timeout_;
  std::vector<std::shared_ptr<grpc::Channel>> channels_;
  std::vector<std::unique_ptr<etcdserverpb::KV::Stub>> kv_;
  std::vector<std::unique_ptr<etcdserverpb::Watch::Stub>> watch_;
  std::vector<std::unique_ptr<etcdserverpb::Lease::Stub>> lease_;
  std::atomic<int> preferred_{0};

  absl::Mutex watch_mu_;
  grpc::ClientContext* watch_context_ ABSL_GUARDED_BY(watch_mu_) = nullptr;
  bool watch_stopped_ ABSL_GUARDED_BY(watch_mu_) = false;
};

}  // namespace oobleck::server

#endif  // OOBLECK_SERVER_ETCD_CLIENT_H_
