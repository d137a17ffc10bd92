// Prometheus metrics (--metrics_address), served as text on http://ADDRESS/metrics:
//   oobleck_planner_rpcs_total{method,code}                 calls by method and status code
//                                                           (as the request log records it:
//                                                           server/request_log.h); a method
//                                                           no service here defines is
//                                                           "unknown", so label values stay
//                                                           bounded whatever clients send
//   oobleck_planner_rpc_duration_seconds{method,code}       their latency (histogram; for
//                                                           PlanTemplates, the planning time)
//   oobleck_planner_template_cache_{hits,misses,evictions}_total, _{entries,bytes,capacity_bytes}
//   oobleck_planner_profiles_loaded
//   oobleck_planner_inline_profile_cache_{hits,misses,evictions}_total, _{entries,bytes}
//   oobleck_planner_search_slots, _search_slots_in_use, _search_rejected_total
// Cache, profile and gate figures are read when scraped, so they are never stale.
#ifndef OOBLECK_SERVER_METRICS_H_
#define OOBLECK_SERVER_METRICS_H_

#include <grpcpp/support/status.h>

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/profile_catalog.h"
#include "core/template_planner.h"
#include "server/inline_profiles.h"
#include "server/search_gate.h"

namespace prometheus {
class Exposer;
class Registry;
class Counter;
class Histogram;
template <typename T>
class Family;
}  // namespace prometheus

namespace oobleck::server {

class ScrapeTimeCollector;

class ServerMetrics {
 public:
  // The figures read at scrape time come from these, which must outlive the metrics;
  // `gate` may be null.
  struct Sources {
    const TemplateCache* cache = nullptr;
    const ProfileCatalog* catalog = nullptr;
    const SearchGate* gate = nullptr;
    const InlineProfileCache* inline_profiles = nullptr;
  };

  // Starts the HTTP endpoint on `address` (HOST:PORT; port 0 picks one). UNAVAILABLE when
  // it cannot listen there.
  static absl::StatusOr<std::unique_ptr<ServerMetrics>> Start(const std::string& address,
                                                              const Sources& sources);
  ~ServerMetrics();

  // One finished call (thread-safe).
  void ObserveRpc(absl::string_view method, grpc::StatusCode code, double latency_s);

  // The port actually bound.
  int port() const { return port_; }

 private:
  ServerMetrics() = default;

  std::shared_ptr<prometheus::Registry> registry_;
  prometheus::Family<prometheus::Counter>* rpcs_ = nullptr;
  prometheus::Family<prometheus::Histogram>* rpc_duration_ = nullptr;
  std::shared_ptr<ScrapeTimeCollector> scrape_time_;
  std::unique_ptr<prometheus::Exposer> exposer_;
  int port_ = 0;
};

}  // namespace oobleck::server

#endif  // OOBLECK_SERVER_METRICS_H_
