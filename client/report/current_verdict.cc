#include "client/report/current_verdict.h"

#include "absl/strings/str_cat.h"
#include "common/sha256.h"

namespace ptxbench::client::report {

std::string SourceSha256Of(const TurnRecord& turn) {
  return turn.source_sha256.empty() ? Sha256Hex(turn.source) : turn.source_sha256;
}

TurnVerdictNow CurrentVerdictOfTurn(const CurrentVerdicts& current, const std::string& task_id,
                                    const TurnRecord& turn) {
  TurnVerdictNow now;
  if (turn.submission_id.empty()) {
    now.unverifiable = "it has no submission id, so the server cannot vouch for its verdict";
    return now;
  }
  auto it = current.find(turn.submission_id);
  if (it == current.end()) {
    now.unverifiable = absl::StrCat("the server does not know submission ", turn.submission_id);
    return now;
  }
  const CurrentVerdict& entry = it->second;
  if (!entry.task_id.empty() && entry.task_id != task_id) {
    now.unverifiable = absl::StrCat("the server's submission ", turn.submission_id, " is of task ",
                                    entry.task_id, ", not ", task_id);
    return now;
  }
  if (!entry.source_sha256.empty() && entry.source_sha256 != SourceSha256Of(turn)) {
    now.unverifiable =
        absl::StrCat("the server's submission ", turn.submission_id, " is another source (sha256 ",
                     entry.source_sha256, ", the turn's ", SourceSha256Of(turn), ")");
    return now;
  }
  if (!entry.verdict.has_value()) {
    now.unverifiable =
        absl::StrCat("the server has no current verdict for submission ", turn.submission_id,
                     entry.no_verdict.empty() ? "" : absl::StrCat(" (", entry.no_verdict, ")"));
    return now;
  }
  now.verdict = entry.verdict;
  now.hacked_reason = entry.hacked_reason;
  return now;
}

}  // namespace ptxbench::client::report
