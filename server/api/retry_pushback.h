// Refusals that clear by themselves within moments (a full admission lane, too many lookups
// of unseen tokens in flight) say so, with how long to wait: RpcScope::Finish sends the mark
// as the trailer proto/dial.h kRetryPushbackMetadata, and the client sends the same call again
// after that long (client/command_support.h CallWithRetries) instead of failing it. Other
// RESOURCE_EXHAUSTED refusals (a tenant's quota, a stream cap) carry no mark: retrying them at
// once would not help. No gRPC here: auth.cc and admission callers make these statuses.
#ifndef PTXBENCH_SERVER_API_RETRY_PUSHBACK_H_
#define PTXBENCH_SERVER_API_RETRY_PUSHBACK_H_

#include <optional>

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace ptxbench::api {

// `status` marked: the same call may succeed when sent again after `after`.
absl::Status RetryShortly(absl::Status status, absl::Duration after);
// The wait a RetryShortly status names; nullopt for any other status.
std::optional<absl::Duration> RetryShortlyAfter(const absl::Status& status);

}  // namespace ptxbench::api

#endif  // PTXBENCH_SERVER_API_RETRY_PUSHBACK_H_
