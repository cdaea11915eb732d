// What the `--server` tests of report and export (report_server_test.cc, export_server_test.cc)
// do to a real test server: judge a submission's open round as a worker would, re-judge one,
// mark one hacked. Each REQUIREs that the server accepted it.
#ifndef PTXBENCH_TESTS_CLIENT_SERVER_ROUNDS_H_
#define PTXBENCH_TESTS_CLIENT_SERVER_ROUNDS_H_

#include <catch2/catch.hpp>
#include <string>

#include "tests/server/api/api_test_support.h"

namespace ptxbench::client::testing {

// Serves the open round of submission `id`: its compile job, then its evaluate job ending in
// `verdict`.
inline void JudgeOpenRound(api_test::FakeWorker& worker, const std::string& id,
                           const v1::Verdict& verdict) {
  auto compile = worker.NextJob(absl::Seconds(15));
  REQUIRE(compile.has_value());
  REQUIRE(compile->submission_id() == id);
  REQUIRE(worker.Complete(*compile, api_test::MakeVerdict(v1::VERDICT_CLASS_COMPILED)).ok());
  auto evaluate = worker.NextJob(absl::Seconds(15));
  REQUIRE(evaluate.has_value());
  REQUIRE(evaluate->submission_id() == id);
  grpc::Status done = worker.Complete(*evaluate, verdict);
  INFO(done.error_message());
  REQUIRE(done.ok());
}

// Opens a new judging round of submission `id` (AdminService.RejudgeSubmissions).
inline void RejudgeOne(api_test::TestServer& server, const std::string& id) {
  grpc::ClientContext context;
  api_test::WithDeadline(&context);
  Authorize(&context, server.admin_token());
  v1::RejudgeSubmissionsRequest request;
  request.add_task_ids(api_test::kTaskId);
  request.add_submission_ids(id);
  request.set_reason("tolerance tightened");
  v1::RejudgeSubmissionsResponse response;
  REQUIRE(server.admin()->RejudgeSubmissions(&context, request, &response).ok());
  REQUIRE(response.count() == 1);
}

// Marks submission `id` hacked with `reason` (AdminService.MarkSubmissionHacked).
inline void MarkHacked(api_test::TestServer& server, const std::string& id,
                       const std::string& reason) {
  grpc::ClientContext context;
  api_test::WithDeadline(&context);
  Authorize(&context, server.admin_token());
  v1::MarkSubmissionHackedRequest request;
  request.set_submission_id(id);
  request.set_reason(reason);
  v1::Submission marked;
  REQUIRE(server.admin()->MarkSubmissionHacked(&context, request, &marked).ok());
}

}  // namespace ptxbench::client::testing

#endif  // PTXBENCH_TESTS_CLIENT_SERVER_ROUNDS_H_
