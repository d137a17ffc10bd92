// Answers template requests from the shared TemplateCache (core/template_cache.h), the
// cache shared with other processes, or by searching.
#ifndef OOBLECK_CORE_TEMPLATE_PLANNER_H_
#define OOBLECK_CORE_TEMPLATE_PLANNER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/search.h"
#include "core/template_cache.h"

namespace oobleck {

// A second cache level shared with other processes (the other replicas of the service,
// through etcd: server/etcd_template_store.h), asked for what the local cache misses.
// Keys are the local cache's (content: problem key + mix), so a result found there is the
// one a search would return. Must be thread-safe; a store that cannot answer reports a miss.
class SharedTemplateStore {
 public:
  virtual ~SharedTemplateStore() = default;
  // The result stored under each key, in order; nullptr for a miss.
  virtual std::vector<std::shared_ptr<const MixResult>> FindAll(
      const std::vector<std::string>& keys) = 0;
  // Offers a complete result to the others; may drop it (budget) and must not block long.
  virtual void Publish(const std::string& key, std::shared_ptr<const MixResult> result) = 0;
};

struct PlannedMix {
  std::shared_ptr<const MixResult> result;
  bool cache_hit = false;         // from the local cache or the shared one
  bool shared_cache_hit = false;  // from the shared one (computed by another process)
};

class TemplatePlanner {
 public:
  // `cache` is shared across requests and must outlive the planner.
  // threads <= 0: all cores.
  // `shared` (may be null) is asked on local misses and gets every new result.
  TemplatePlanner(TemplateCache* cache, int threads, SharedTemplateStore* shared = nullptr);

  // Results in the order of `mixes`; only mixes missing from the cache are searched, and
  // only complete results enter the cache.
  absl::StatusOr<std::vector<PlannedMix>> PlanTemplates(const CostModel& model,
                                                        const std::vector<NodeMix>& mixes,
                                                        const SearchOptions& options = {});

 private:
  TemplateCache* cache_;
  int threads_;
  SharedTemplateStore* shared_;
};

}  // namespace oobleck

#endif  // OOBLECK_CORE_TEMPLATE_PLANNER_H_
