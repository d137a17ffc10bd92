// Several replicas sharing state through etcd (--etcd_endpoints and the other --etcd_*
// flags, defined in replication.cc): the etcd client, the profile store every replica
// follows and the shared template cache, owned together and torn down in order.
#ifndef OOBLECK_SERVER_REPLICATION_H_
#define OOBLECK_SERVER_REPLICATION_H_

#include <grpcpp/server.h>

#include <memory>

#include "absl/status/statusor.h"
#include "core/profile_catalog.h"
#include "server/etcd_client.h"
#include "server/etcd_profile_store.h"
#include "server/etcd_template_store.h"
#include "server/service_options.h"

namespace oobleck::server {

class Replication {
 public:
  // Null when --etcd_endpoints is empty (one process, as without replication).
  // INVALID_ARGUMENT naming the flag for a bad --etcd_* value, or when `has_data_dir`
  // (the two stores exclude each other). `catalog` must outlive the result.
  static absl::StatusOr<std::unique_ptr<Replication>> FromFlags(ProfileCatalog* catalog,
                                                                bool has_data_dir);
  ~Replication();  // stops the watch and publisher threads before the client goes

  // Points the service's profile store and shared cache at etcd.
  void Configure(ServiceOptions* options) const;
  // Starts reading and watching the profiles; `server`'s health, NOT_SERVING until then
  // (ServerOptions::serving_at_start = false), turns SERVING once they were read.
  void Start(grpc::Server* server);

 private:
  Replication() = default;

  std::unique_ptr<EtcdClient> client_;
  std::unique_ptr<EtcdProfileStore> profiles_;
  std::unique_ptr<EtcdTemplateStore> templates_;  // null with --etcd_template_budget_mb=0
};

}  // namespace oobleck::server

#endif  // OOBLECK_SERVER_REPLICATION_H_
