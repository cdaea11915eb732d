// A trajectory turn judged by its submission's current verdict on the server: after a re-judge
// the verdict a trajectory file recorded may have been superseded, and an admin may have marked
// the submission hacked. `ptxbench export --server` and `ptxbench report --server` both fetch
// the verdicts with FetchCurrentVerdicts (export_server.h) and judge each turn with
// CurrentVerdictOfTurn, so the two agree on which verdict is current and on when a file's
// claim is vouched for by nothing.
#ifndef PTXBENCH_CLIENT_REPORT_CURRENT_VERDICT_H_
#define PTXBENCH_CLIENT_REPORT_CURRENT_VERDICT_H_

#include <map>
#include <optional>
#include <string>

#include "client/trajectory.h"
#include "common/verdict.h"

namespace ptxbench::client::report {

// A turn's verdict as the server holds it now (GetSubmission).
struct CurrentVerdict {
  std::optional<Verdict> verdict;  // Absent: the server has none now (see no_verdict).
  std::string no_verdict;          // Why `verdict` is absent: "cancelled", "being re-judged".
  std::string hacked_reason;       // Non-empty: marked hacked.
  // What the server's submission is, so that a file naming another kernel's submission id
  // (someone else's TIC submission of the same task) does not borrow its verdict. Empty: not
  // checked (callers that built the map themselves).
  std::string task_id;
  std::string source_sha256;
};

// By submission id.
using CurrentVerdicts = std::map<std::string, CurrentVerdict>;

// What the current verdicts say of one turn.
struct TurnVerdictNow {
  // The current verdict; absent when `unverifiable` says why nothing vouches for one.
  std::optional<Verdict> verdict;
  // Why no current verdict judges the turn: it has no submission id, the server does not know
  // the id, the server's submission is another task's or another source's, or it has no
  // verdict now (a re-judge is running, it was cancelled). Empty when `verdict` is set.
  std::string unverifiable;
  std::string hacked_reason;  // Non-empty: marked hacked (`verdict` is still the current one).
};

// The turn of a trajectory of task `task_id`, judged by `current`.
TurnVerdictNow CurrentVerdictOfTurn(const CurrentVerdicts& current, const std::string& task_id,
                                    const TurnRecord& turn);

// The lower-case hex SHA-256 of the turn's source: the recorded one, else computed.
std::string SourceSha256Of(const TurnRecord& turn);

}  // namespace ptxbench::client::report

#endif  // PTXBENCH_CLIENT_REPORT_CURRENT_VERDICT_H_
