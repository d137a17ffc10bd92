#include "server/metrics.h"

#include <google/protobuf/descriptor.h>
#include <prometheus/client_metric.h>
#include <prometheus/collectable.h>
#include <prometheus/counter.h>
#include <prometheus/exposer.h>
#include <prometheus/family.h>
#include <prometheus/histogram.h>
#include <prometheus/metric_family.h>
#include <prometheus/registry.h>

#include <exception>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace oobleck::server {
namespace {

constexpr char kPrefix[] = "oobleck_planner_";
constexpr char kUnknownMethod[] = "unknown";

prometheus::MetricFamily Single(const std::string& name, const std::string& help,
                                prometheus::MetricType type, double value) {
  prometheus::ClientMetric metric;
  if (type == prometheus::MetricType::Counter) {
    metric.counter.value = value;
  } else {
    metric.gauge.value = value;
  }
  return prometheus::MetricFamily{absl::StrCat(kPrefix, name), help, type, {metric}};
}

// The method label of a call: its full name when some service compiled into this binary
// defines it, else "unknown". Clients may send any path; one label value per path would
// grow the metrics (and their memory) without bound.
std::string MethodLabel(absl::string_view method) {
  // "/package.Service/Method"
  const size_t slash = method.rfind('/');
  if (method.size() < 4 || method[0] != '/' || slash == 0 || slash == absl::string_view::npos) {
    return kUnknownMethod;
  }
  const std::string full_name =
      absl::StrCat(method.substr(1, slash - 1), ".", method.substr(slash + 1));
  if (google::protobuf::DescriptorPool::generated_pool()->FindMethodByName(full_name) == nullptr) {
    return kUnknownMethod;
  }
  return std::string(method);
}

}  // namespace

// Figures owned by other objects, read at each scrape.
class ScrapeTimeCollector final : public prometheus::Collectable {
 public:
  explicit ScrapeTimeCollector(const ServerMetrics::Sources& sources) : sources_(sources) {}

  std::vector<prometheus::MetricFamily> Collect() const override {
    using prometheus::MetricType;
    std::vector<prometheus::MetricFamily> out;
    if (sources_.cache != nullptr) {
      const CacheStats stats = sources_.cache->stats();
      out.push_back(Single("template_cache_hits_total", "Template lookups answered from the cache.",
                           MetricType::Counter, stats.hits));
      out.push_back(Single("template_cache_misses_total", "Template lookups that had to search.",
                           MetricType::Counter, stats.misses));
      out.push_back(Single("template_cache_evictions_total",
                           "Entries evicted to stay within --cache_mb.", MetricType::Counter,
                           stats.evictions));
      out.push_back(Single("template_cache_entries", "Entries in the template cache.",
                           MetricType::Gauge, stats.entries));
      out.push_back(Single("template_cache_bytes", "Estimated bytes held by the template cache.",
                           MetricType::Gauge, stats.bytes));
      out.push_back(Single("template_cache_capacity_bytes", "The cache budget (--cache_mb).",
                           MetricType::Gauge, stats.capacity_bytes));
    }
    if (sources_.catalog != nullptr) {
      out.push_back(Single("profiles_loaded", "Profiles in the catalog.", MetricType::Gauge,
                           sources_.catalog->size()));
    }
    if (sources_.inline_profiles != nullptr) {
      const CacheStats stats = sources_.inline_profiles->stats();
      out.push_back(Single("inline_profile_cache_hits_total",
                           "Inline profiles found by fingerprint or content.", MetricType::Counter,
                           stats.hits));
      out.push_back(Single("inline_profile_cache_misses_total",
                           "Inline profile lookups that found none.", MetricType::Counter,
                           stats.misses));
      out.push_back(Single("inline_profile_cache_evictions_total",
                           "Inline profiles evicted to stay within --inline_profile_cache_mb.",
                           MetricType::Counter, stats.evictions));
      out.push_back(Single("inline_profile_cache_entries", "Inline profiles kept.",
                           MetricType::Gauge, stats.entries));
      out.push_back(Single("inline_profile_cache_bytes",
                           "Estimated bytes of the inline profiles kept.", MetricType::Gauge,
                           stats.bytes));
    }
    if (sources_.gate != nullptr) {
      out.push_back(Single("search_slots",
                           "Searches that may run at once "
                           "(--max_concurrent_searches).",
                           MetricType::Gauge, sources_.gate->max_concurrent()));
      out.push_back(Single("search_slots_in_use", "Searches running now.", MetricType::Gauge,
                           sources_.gate->in_use()));
      out.push_back(Single("search_rejected_total",
                           "Calls answered RESOURCE_EXHAUSTED because no search slot freed in "
                           "time.",
                           MetricType::Counter, static_cast<double>(sources_.gate->rejected())));
    }
    return out;
  }

 private:
  const ServerMetrics::Sources sources_;
};

absl::StatusOr<std::unique_ptr<ServerMetrics>> ServerMetrics::Start(const std::string& address,
                                                                    const Sources& sources) {
  std::unique_ptr<ServerMetrics> metrics(new ServerMetrics);
  metrics->registry_ = std::make_shared<prometheus::Registry>();
  metrics->rpcs_ = &prometheus::BuildCounter()
                        .Name(absl::StrCat(kPrefix, "rpcs_total"))
                        .Help("Finished RPCs by method and status code.")
                        .Register(*metrics->registry_);
  metrics->rpc_duration_ = &prometheus::BuildHistogram()
                                .Name(absl::StrCat(kPrefix, "rpc_duration_seconds"))
                                .Help("RPC latency by method and status code, in seconds.")
                                .Register(*metrics->registry_);
  metrics->scrape_time_ = std::make_shared<ScrapeTimeCollector>(sources);
  try {
    // civetweb reports a failed bind by throwing.
    metrics->exposer_ = std::make_unique<prometheus::Exposer>(address);
  } catch (const std::exception& e) {
    return absl::UnavailableError(
        absl::StrCat("cannot serve metrics on ", address, ": ", e.what()));
  }
  metrics->exposer_->RegisterCollectable(metrics->registry_);
  metrics->exposer_->RegisterCollectable(metrics->scrape_time_);
  const std::vector<int> ports = metrics->exposer_->GetListeningPorts();
  if (ports.empty()) {
    return absl::UnavailableError(absl::StrCat("cannot serve metrics on ", address));
  }
  metrics->port_ = ports.front();
  return metrics;
}

ServerMetrics::~ServerMetrics() = default;

void ServerMetrics::ObserveRpc(absl::string_view method, grpc::StatusCode code, double latency_s) {
  // Bucket bounds from 1 ms (cached answers) to 2 min (the largest searches).
  static const prometheus::Histogram::BucketBoundaries kBoundsS = {
      0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120};
  const prometheus::Labels labels = {
      {"method", MethodLabel(method)},
      {"code", std::string(absl::StatusCodeToString(static_cast<absl::StatusCode>(code)))}};
  rpcs_->Add(labels).Increment();
  rpc_duration_->Add(labels, kBoundsS).Observe(latency_s);
}

}  // namespace oobleck::server
