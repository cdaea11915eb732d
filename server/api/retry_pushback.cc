#include "server/api/retry_pushback.h"

#include <cstdint>
#include <string>

#include "absl/strings/cord.h"
#include "absl/strings/numbers.h"

namespace ptxbench::api {
namespace {

constexpr char kRetryShortlyPayload[] = "type.ptxbench.dev/retry-shortly-ms";

}  // namespace

absl::Status RetryShortly(absl::Status status, absl::Duration after) {
  if (!status.ok()) {
    status.SetPayload(kRetryShortlyPayload,
                      absl::Cord(std::to_string(absl::ToInt64Milliseconds(after))));
  }
  return status;
}

std::optional<absl::Duration> RetryShortlyAfter(const absl::Status& status) {
  const auto payload = status.GetPayload(kRetryShortlyPayload);  // absl::optional here.
  int64_t ms = 0;
  if (!payload.has_value() || !absl::SimpleAtoi(std::string(*payload), &ms) || ms < 0) {
    return std::nullopt;
  }
  return absl::Milliseconds(ms);
}

}  // namespace ptxbench::api
