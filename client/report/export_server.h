// `ptxbench export --server`: the current verdict and hacked mark of every exported turn's
// submission, from the server that judged it (SubmissionService.GetSubmission), so that a
// re-judged or hacked kernel never becomes a training row on the strength of the verdict its
// trajectory file recorded. gRPC stays inside export_server.cc.
#ifndef PTXBENCH_CLIENT_REPORT_EXPORT_SERVER_H_
#define PTXBENCH_CLIENT_REPORT_EXPORT_SERVER_H_

#include <map>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "client/command_support.h"
#include "client/report/export.h"
#include "client/trajectory.h"
#include "proto/dial.h"

namespace ptxbench::client::report {

struct FetchOptions {
  // GetSubmission calls in flight at once: a dataset of 100k turns must not open 100k calls
  // (nor make the server's admission lane refuse them); 8 is the unary lane's running limit
  // (server/api/admission.h max_running_per_lane), so one export keeps one lane busy at most.
  int max_in_flight = 8;
  absl::Duration call_timeout = absl::Seconds(30);
  CallRetry retry;  // UNAVAILABLE and the server's "retry shortly" refusals are retried.
};

// The submission ids of `trajectories`' turns, each once, in file order.
std::vector<std::string> SubmissionIdsOf(const std::vector<Trajectory>& trajectories);

// The current verdict of each of `submission_ids` that the server knows (and the caller's
// token may read); an id it does not know (NOT_FOUND, or not a submission id at all) has no
// entry. Any other failure (the server unreachable, a refused token, a verdict that cannot be
// read) is the error, naming the address: a dataset is never built from stale verdicts.
// Retries are reported on `notes`.
absl::StatusOr<std::map<std::string, CurrentVerdict>> FetchCurrentVerdicts(
    const Connection& connection, const std::vector<std::string>& submission_ids,
    const FetchOptions& options, std::ostream& notes);

}  // namespace ptxbench::client::report

#endif  // PTXBENCH_CLIENT_REPORT_EXPORT_SERVER_H_
