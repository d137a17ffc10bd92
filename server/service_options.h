// Optional production machinery injected into PlannerService by main(); each pointer is
// null when its flag is not given (and in tests that do not need it).
#ifndef OOBLECK_SERVER_SERVICE_OPTIONS_H_
#define OOBLECK_SERVER_SERVICE_OPTIONS_H_

#include "absl/time/time.h"
#include "core/confined_root.h"
#include "server/etcd_template_store.h"
#include "server/inline_profiles.h"
#include "server/profile_backend.h"
#include "server/request_log.h"
#include "server/search_gate.h"

namespace oobleck::server {

struct ServiceOptions {
  // --data_dir or --etcd_endpoints: LoadProfile persists through it before acknowledging.
  ProfileBackend* profile_store = nullptr;
  // --etcd_endpoints: the template cache shared by the replicas, behind the local one.
  EtcdTemplateStore* shared_templates = nullptr;
  // --max_concurrent_searches: PlanTemplates takes a slot before planning.
  SearchGate* search_gate = nullptr;
  // --log_requests: PlanTemplates searches running longer than a second log progress.
  const RequestLog* request_log = nullptr;
  // --load_root: LoadProfile.directory reads only inside it; null refuses every
  // server-side directory (PERMISSION_DENIED).
  const ConfinedRoot* load_root = nullptr;
  // --progress_interval_ms: PlanTemplatesStream sends a progress update at most this often.
  absl::Duration progress_interval = absl::Milliseconds(200);
  // --inline_profile_cache_mb: the bound of the profiles planning requests send inline.
  int64_t inline_profile_cache_bytes = kDefaultInlineProfileCacheBytes;
};

}  // namespace oobleck::server

#endif  // OOBLECK_SERVER_SERVICE_OPTIONS_H_
