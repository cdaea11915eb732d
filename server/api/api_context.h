// Everything the gRPC services share: the store, the task catalog, metrics, auth, the change
// signals and the limits. Owned by Server; the services hold a pointer.
#ifndef PTXBENCH_SERVER_API_API_CONTEXT_H_
#define PTXBENCH_SERVER_API_API_CONTEXT_H_

#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "absl/time/time.h"
#include "common/task.h"
#include "server/api/admission.h"
#include "server/api/auth.h"
#include "server/api/job_tracker.h"
#include "server/api/lease_dispatcher.h"
#include "server/api/notifier.h"
#include "server/api/page_token.h"
#include "server/api/store_health.h"
#include "server/api/stream_slots.h"
#include "server/api/tenant_limiter.h"
#include "server/metrics.h"
#include "server/store/store.h"

namespace ptxbench::api {

struct ApiOptions {
  int lease_seconds = 60;
  // How often a waiting stream re-reads the store when no change signal arrived: the upper
  // bound on how late a change made by another replica whose NOTIFY was lost is seen.
  absl::Duration poll_interval = absl::Seconds(1);
  // How often a waiting stream checks whether its client went away (sync API streams cannot
  // be interrupted while blocked, see server/server.cc).
  absl::Duration cancel_check_interval = absl::Milliseconds(200);
  // How often a watcher of a queued submission re-checks that some worker can run it.
  absl::Duration worker_check_interval = absl::Seconds(10);
  int max_slots = 64;
  // Concurrent streams per tenant (stream_slots.h). A repair loop watches one submission per
  // trajectory in flight (`ptxbench run --concurrency`, default 4) and `ptxbench suite` one at
  // a time; a worker holds one Lease stream, and a deployment's workers share their token's
  // tenant (a DaemonSet per GPU product: hundreds of GPUs, not thousands).
  int max_watches_per_tenant = 128;
  int max_leases_per_tenant = 1024;
};

struct ApiContext {
  store::Store* store = nullptr;
  const TaskCatalog* catalog = nullptr;
  server::Metrics* metrics = nullptr;
  Authenticator* auth = nullptr;
  LeaseDispatcher* leases = nullptr;
  Notifier* event_changes = nullptr;
  JobTracker* jobs = nullptr;
  TenantLimiter* limits = nullptr;
  StoreHealth* store_health = nullptr;  // Null: always reachable (tests of single services).
  Admission* admission = nullptr;       // Required by every unary method (rpc.h).
  StreamSlots* watch_slots = nullptr;   // Null: no cap.
  StreamSlots* lease_slots = nullptr;
  const PageTokens* page_tokens = nullptr;  // Null: the store's own tokens (tests).
  ApiOptions options;
};

}  // namespace ptxbench::api

#endif  // PTXBENCH_SERVER_API_API_CONTEXT_H_
