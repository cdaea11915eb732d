#include "client/report/export_server.h"

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "ptxbench/v1/vendor.grpc.pb.h"

namespace ptxbench::client::report {
namespace {

// The entry of a submission the server returned; an error for a verdict that cannot be read.
absl::StatusOr<CurrentVerdict> CurrentOf(const v1::Submission& submission) {
  CurrentVerdict current;
  current.task_id = submission.task_id();
  current.source_sha256 = submission.source_sha256();
  if (submission.has_hacked()) {
    current.hacked_reason = submission.hacked().reason().empty() ? "(no reason recorded)"
                                                                 : submission.hacked().reason();
  }
  switch (submission.state()) {
    case v1::SUBMISSION_STATE_FINISHED: {
      absl::StatusOr<Verdict> verdict = VerdictFromWire(submission.verdict());
      if (!verdict.ok()) {
        return absl::DataLossError(
            absl::StrCat("submission ", submission.id(),
                         ": its verdict cannot be read: ", verdict.status().message()));
      }
      current.verdict = *std::move(verdict);
      break;
    }
    case v1::SUBMISSION_STATE_CANCELLED:
      current.no_verdict = "cancelled";
      break;
    default:
      // A re-judge in progress keeps serving the old round's verdict (types.proto
      // Submission.judging_round), the very verdict the re-judge doubts: not current.
      current.no_verdict = submission.judging_round() > 0
                               ? absl::StrCat("being re-judged, round ", submission.judging_round(),
                                              " has no verdict yet")
                               : "not judged yet";
      break;
  }
  return current;
}

}  // namespace

std::vector<std::string> SubmissionIdsOf(const std::vector<Trajectory>& trajectories) {
  std::vector<std::string> ids;
  std::set<std::string> seen;
  for (const Trajectory& t : trajectories) {
    for (const TurnRecord& turn : t.turns) {
      if (!turn.submission_id.empty() && seen.insert(turn.submission_id).second) {
        ids.push_back(turn.submission_id);
      }
    }
  }
  return ids;
}

absl::StatusOr<std::map<std::string, CurrentVerdict>> FetchCurrentVerdicts(
    const Connection& connection, const std::vector<std::string>& submission_ids,
    const FetchOptions& options, std::ostream& notes) {
  absl::StatusOr<std::shared_ptr<grpc::Channel>> channel = Dial(connection.dial);
  if (!channel.ok()) return channel.status();
  auto stub = v1::SubmissionService::NewStub(*channel);

  std::mutex mu;
  std::map<std::string, CurrentVerdict> current;
  absl::Status first_error;
  std::atomic<size_t> next{0};
  std::atomic<bool> failed{false};
  auto fetch_all = [&] {
    for (size_t i = next++; i < submission_ids.size() && !failed; i = next++) {
      const std::string& id = submission_ids[i];
      // A malformed id is not sent: the file's problem, like an unknown one.
      if (!IsSubmissionId(id)) continue;
      v1::Submission submission;
      std::ostringstream retries;
      const grpc::Status status = CallWithRetries(
          [&](grpc::ClientContext* context) {
            Authorize(context, connection.token);
            context->set_deadline(std::chrono::system_clock::now() +
                                  absl::ToChronoNanoseconds(options.call_timeout));
            v1::GetSubmissionRequest request;
            request.set_submission_id(id);
            return stub->GetSubmission(context, request, &submission);
          },
          options.retry, absl::StrCat("ptxbench export: GetSubmission ", id), retries);
      std::lock_guard<std::mutex> lock(mu);
      notes << retries.str();
      if (status.error_code() == grpc::StatusCode::NOT_FOUND) continue;
      absl::StatusOr<CurrentVerdict> entry =
          status.ok() ? CurrentOf(submission)
                      : absl::StatusOr<CurrentVerdict>(absl::Status(
                            static_cast<absl::StatusCode>(status.error_code()),
                            absl::StrCat("reading submission ", id, ": ",
                                         DescribeCallFailure(status, connection).message)));
      if (!entry.ok()) {
        if (first_error.ok()) first_error = entry.status();
        failed = true;
        continue;
      }
      current[id] = *std::move(entry);
    }
  };
  const int threads =
      std::max(1, std::min(options.max_in_flight, static_cast<int>(submission_ids.size())));
  std::vector<std::thread> pool;
  pool.reserve(threads);
  for (int i = 0; i < threads; ++i) pool.emplace_back(fetch_all);
  for (std::thread& thread : pool) thread.join();
  if (!first_error.ok()) return first_error;
  return current;
}

}  // namespace ptxbench::client::report
