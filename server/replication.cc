#include "server/replication.h"

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/status_macros.h"
#include "server/planner_server.h"

ABSL_FLAG(std::string, etcd_endpoints, "",
          "host:port[,host:port...] of an etcd v3 cluster: profiles loaded over RPC are "
          "stored there (quorum write before the answer) and every replica follows them "
          "with a watch; templates are shared too. Health is NOT_SERVING until the "
          "profiles were read. Excludes --data_dir.");
ABSL_FLAG(std::string, etcd_prefix, "/oobleck-planner/",
          "Prefix of every etcd key this service writes; replicas that share use the same "
          "prefix.");
ABSL_FLAG(int, etcd_timeout_ms, 2000,
          "Deadline of each etcd call, in milliseconds; an upload waits at most about this "
          "long for a quorum before it fails with UNAVAILABLE.");
ABSL_FLAG(int64_t, etcd_template_ttl_s, 3600,
          "With --etcd_endpoints, templates this replica computes are shared through etcd "
          "for about this long (an etcd lease), in seconds.");
ABSL_FLAG(int64_t, etcd_template_budget_mb, 64,
          "With --etcd_endpoints, at most this many MiB of templates written to etcd per "
          "lease by this replica; 0 = share none.");

namespace oobleck::server {
namespace {

absl::Status OutOfRange(const char* flag, int64_t min, int64_t max, int64_t got) {
  return absl::InvalidArgumentError(
      absl::StrCat("--", flag, " must be between ", min, " and ", max, " (got ", got, ")"));
}

}  // namespace

absl::StatusOr<std::unique_ptr<Replication>> Replication::FromFlags(ProfileCatalog* catalog,
                                                                    bool has_data_dir) {
  const std::string endpoints = absl::GetFlag(FLAGS_etcd_endpoints);
  if (endpoints.empty()) return nullptr;
  ASSIGN_OR_RETURN(std::vector<std::string> parsed,
                   ParseEtcdEndpoints(endpoints, "--etcd_endpoints"));
  if (has_data_dir) {
    return absl::InvalidArgumentError("--etcd_endpoints and --data_dir exclude each other");
  }
  const int timeout_ms = absl::GetFlag(FLAGS_etcd_timeout_ms);
  if (timeout_ms < 1 || timeout_ms > 600'000) {
    return OutOfRange("etcd_timeout_ms", 1, 600'000, timeout_ms);
  }
  const int64_t ttl_s = absl::GetFlag(FLAGS_etcd_template_ttl_s);
  if (ttl_s < 5 || ttl_s > 30 * 86400)
    return OutOfRange("etcd_template_ttl_s", 5, 30 * 86400, ttl_s);
  const int64_t budget_mb = absl::GetFlag(FLAGS_etcd_template_budget_mb);
  if (budget_mb < 0 || budget_mb > (int64_t{1} << 20)) {
    return OutOfRange("etcd_template_budget_mb", 0, int64_t{1} << 20, budget_mb);
  }
  const std::string prefix = absl::GetFlag(FLAGS_etcd_prefix);
  std::unique_ptr<Replication> replication(new Replication());
  replication->client_ =
      std::make_unique<EtcdClient>(std::move(parsed), absl::Milliseconds(timeout_ms));
  replication->profiles_ =
      std::make_unique<EtcdProfileStore>(replication->client_.get(), prefix, catalog);
  if (budget_mb > 0) {
    replication->templates_ = std::make_unique<EtcdTemplateStore>(
        replication->client_.get(), prefix,
        SharedCacheOptions{absl::Seconds(ttl_s), budget_mb << 20});
  }
  return replication;
}

Replication::~Replication() {
  templates_.reset();
  profiles_.reset();
}

void Replication::Configure(ServiceOptions* options) const {
  options->profile_store = profiles_.get();
  options->shared_templates = templates_.get();
}

void Replication::Start(grpc::Server* server) {
  profiles_->Start([server] { SetServing(server, true); });
}

}  // namespace oobleck::server
