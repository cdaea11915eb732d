#include "server/api/verdict_bounds.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "server/api/validate.h"

namespace ptxbench::api {
namespace {

// The marker that replaces an oversized JSON text. `head` is a JSON string (the cut may fall
// inside a UTF-8 sequence: replaced, not thrown).
std::string TruncationMarker(const std::string& original, size_t limit) {
  nlohmann::json marker = {{"truncated", true},
                           {"original_bytes", original.size()},
                           {"limit_bytes", limit},
                           {"head", original.substr(0, kTruncatedHeadBytes)}};
  return marker.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace

void BoundStageResult(v1::StageResult* result) {
  const size_t size = result->detail_json().size();
  if (size <= kMaxStoredDetailBytes) return;
  result->set_detail_json(TruncationMarker(result->detail_json(), kMaxStoredDetailBytes));
  std::string summary = absl::StrCat(
      result->summary(), result->summary().empty() ? "" : " ", "[detail truncated: ", size,
      " bytes, the server keeps at most ", kMaxStoredDetailBytes, "]");
  if (summary.size() > kMaxMessageBytes) summary.resize(kMaxMessageBytes);
  result->set_summary(std::move(summary));
}

absl::Status BoundVerdict(v1::Verdict* verdict) {
  if (verdict->stages_size() > kMaxVerdictStages) {
    return absl::InvalidArgumentError(absl::StrCat("verdict.stages: ", verdict->stages_size(),
                                                   " stages, at most ", kMaxVerdictStages));
  }
  for (v1::StageResult& stage : *verdict->mutable_stages()) BoundStageResult(&stage);
  if (verdict->report_json().size() > kMaxStoredReportBytes) {
    verdict->set_report_json(TruncationMarker(verdict->report_json(), kMaxStoredReportBytes));
  }
  return absl::OkStatus();
}

}  // namespace ptxbench::api
