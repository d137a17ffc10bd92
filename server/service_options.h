// Optional production machinery injected into PlannerService by main(); each pointer is
// null when its flag is not given (and in tests that do not need it).
#ifndef OOBLECK_SERVER_SERVICE_OPTIONS_H_
#define OOBLECK_SERVER_SERVICE_OPTIONS_H_

#include "absl/time/time.h"
#include "core/confined_root.h"
#include "server/profile_store.h"
#include "server/request_log.h"
#include "server/search_gate.h"

namespace oobleck::server {

struct ServiceOptions {
  // --data_dir: LoadProfile persists through it before acknowledging.
  ProfileStore* profile_store = nullptr;
  // --max_concurrent_searches: PlanTemplates takes a slot before planning.
  SearchGate* search_gate = nullptr;
  // --log_requests: PlanTemplates searches running longer than a second log progress.
  const RequestLog* request_log = nullptr;
  // --load_root: LoadProfile.directory reads only inside it; null refuses every
  // server-side directory (PERMISSION_DENIED).
  const ConfinedRoot* load_root = nullptr;
  // --progress_interval_ms: PlanTemplatesStream sends a progress update at most this often.
  absl::Duration progress_interval = absl::Milliseconds(200);
};

}  // namespace oobleck::server

#endif  // OOBLECK_SERVER_SERVICE_OPTIONS_H_
