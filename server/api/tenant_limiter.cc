#include "server/api/tenant_limiter.h"

#include "absl/strings/str_cat.h"
#include "common/status.h"

namespace ptxbench::api {
namespace {

// Within this fraction of a limit the store is asked every time.
bool NearLimit(int64_t count, int limit) { return count * 10 >= static_cast<int64_t>(limit) * 9; }

}  // namespace

TenantLimiter::TenantLimiter(store::Store* store, Options options)
    : store_(store), options_(options) {}

TenantLimiter::TenantState& TenantLimiter::StateOf(const std::string& tenant) {
  std::lock_guard<std::mutex> lock(states_mu_);
  auto& state = states_[tenant];
  if (!state) state = std::make_unique<TenantState>();
  return *state;
}

absl::Status TenantLimiter::Check(const std::string& tenant, TenantState& state) {
  const absl::Time now = absl::Now();
  if (now - state.limits_read > options_.reread_limits_after) {
    ASSIGN_OR_RETURN(store::TenantRow row, store_->GetTenant(tenant));
    state.per_minute = row.submissions_per_minute > 0 ? row.submissions_per_minute
                                                      : options_.default_submissions_per_minute;
    state.max_queued = row.max_queued > 0 ? row.max_queued : options_.default_max_queued;
    state.limits_read = now;
  }
  if (now - state.counted > options_.recount_after || NearLimit(state.recent, state.per_minute) ||
      NearLimit(state.unfinished, state.max_queued)) {
    ASSIGN_OR_RETURN(state.recent, store_->CountRecentSubmissions(tenant, absl::Minutes(1)));
    ASSIGN_OR_RETURN(state.unfinished, store_->CountUnfinishedSubmissions(tenant));
    state.counted = now;
  }
  if (state.recent >= state.per_minute) {
    return absl::ResourceExhaustedError(absl::StrCat("tenant '", tenant, "' reached its limit of ",
                                                     state.per_minute,
                                                     " submissions per minute; retry later"));
  }
  if (state.unfinished >= state.max_queued) {
    return absl::ResourceExhaustedError(absl::StrCat("tenant '", tenant, "' has ", state.unfinished,
                                                     " unfinished submissions, its limit is ",
                                                     state.max_queued));
  }
  return absl::OkStatus();
}

absl::StatusOr<store::SubmissionRow> TenantLimiter::Admit(
    const std::string& tenant,
    const std::function<absl::StatusOr<store::SubmissionRow>()>& create) {
  TenantState& state = StateOf(tenant);
  std::lock_guard<std::mutex> lock(state.mu);
  RETURN_IF_ERROR(Check(tenant, state));
  auto row = create();
  if (row.ok()) {
    ++state.recent;
    ++state.unfinished;
  }
  return row;
}

}  // namespace ptxbench::api
