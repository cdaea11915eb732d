// Per-tenant admission of submissions: at most N per minute and at most M unfinished.
//
// The store's counts are the truth (they cover every replica and survive restarts), but
// counting on every Submit costs two index scans that grow with the tenant's backlog:
// bench/scheduler_bench measured Submit at 475/s with an empty queue and 288/s while filling
// it to 10,000. So each tenant's counts are cached and advanced locally per accepted
// submission, and read again from the store when they are older than `recount_after` or
// within 10% of a limit. The cached numbers only err high (a cancelled or finished submission
// still counts, one older than a minute still counts) except for submissions accepted by
// another replica in the last `recount_after`; near a limit the decision is always exact.
#ifndef PTXBENCH_SERVER_API_TENANT_LIMITER_H_
#define PTXBENCH_SERVER_API_TENANT_LIMITER_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "server/store/store.h"

namespace ptxbench::api {

class TenantLimiter {
 public:
  struct Options {
    int default_submissions_per_minute = 600;  // Where the tenant row says 0.
    int default_max_queued = 10000;
    absl::Duration recount_after = absl::Seconds(1);
    absl::Duration reread_limits_after = absl::Seconds(5);
  };

  TenantLimiter(store::Store* store, Options options);

  // Runs `create` when `tenant` is within its limits, under the tenant's lock so that two
  // Submits cannot both take the last place; RESOURCE_EXHAUSTED naming the limit otherwise.
  absl::StatusOr<store::SubmissionRow> Admit(
      const std::string& tenant,
      const std::function<absl::StatusOr<store::SubmissionRow>()>& create);

 private:
  struct TenantState {
    std::mutex mu;
    int per_minute = 0;
    int max_queued = 0;
    absl::Time limits_read = absl::InfinitePast();
    int64_t recent = 0;      // Submissions in the last minute, as last counted + since.
    int64_t unfinished = 0;  // Unfinished submissions, as last counted + since.
    absl::Time counted = absl::InfinitePast();
  };

  TenantState& StateOf(const std::string& tenant);
  absl::Status Check(const std::string& tenant, TenantState& state);

  store::Store* store_;
  Options options_;
  std::mutex states_mu_;
  std::map<std::string, std::unique_ptr<TenantState>> states_;
};

}  // namespace ptxbench::api

#endif  // PTXBENCH_SERVER_API_TENANT_LIMITER_H_
