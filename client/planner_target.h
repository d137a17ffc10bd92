// How oobleck-plan reaches one or several planner replicas: --server is HOST:PORT, a
// comma-separated list of IP:PORT, or any gRPC target URI (dns:///name:port resolves to
// every replica behind a headless Service). The channel balances calls round-robin over
// every address and retries the idempotent calls once a replica is gone, as the service
// config in proto/oobleck/planner/v1/service_config.json (compiled in) says.
#ifndef OOBLECK_CLIENT_PLANNER_TARGET_H_
#define OOBLECK_CLIENT_PLANNER_TARGET_H_

#include <string>

#include "absl/status/statusor.h"

namespace oobleck::client {

// The gRPC target for --server: a target with a scheme (dns:, ipv4:, ipv6:, unix:, or
// any "scheme://...") and a single "HOST:PORT" as they are; a list of IP:PORT as
// "ipv4:a,b,..." (or "ipv6:[a]:p,..."). INVALID_ARGUMENT naming the part that is not
// IP:PORT (a list of host names has no gRPC target; use dns:///).
absl::StatusOr<std::string> PlannerTarget(const std::string& server);

// proto/oobleck/planner/v1/service_config.json: round_robin plus the retry policy.
const char* PlannerServiceConfigJson();

}  // namespace oobleck::client

#endif  // OOBLECK_CLIENT_PLANNER_TARGET_H_
