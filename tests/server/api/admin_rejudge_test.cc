// AdminService's re-judging and hacked marks over real gRPC on loopback, a real server and a
// real PostgreSQL: a submission judged PASS by a worker, re-judged, judged WRONG_RESULT by the
// new round, the old verdict kept as superseded; the worker's late report from the old round
// refused; bad requests refused naming the field; non-admin callers refused.
#include <catch2/catch.hpp>
#include <optional>
#include <string>

#include "absl/strings/match.h"
#include "tests/server/api/api_test_support.h"
#include "tests/support/status_testing.h"

namespace ptxbench::api_test {
namespace {

std::string SubmitOk(TestServer& server, const std::string& token) {
  v1::SubmitResponse response;
  grpc::Status status = Submit(server, token, ValidSubmit(/*full=*/true), &response);
  INFO(status.error_message());
  REQUIRE(status.ok());
  return response.submission().id();
}

// Serves the open round of `id`: compile, then evaluate ending in `verdict_class`. Returns the
// evaluate job.
v1::LeasedJob JudgeRound(FakeWorker& worker, const std::string& id,
                         v1::VerdictClass verdict_class) {
  auto compile = worker.NextJob(absl::Seconds(15));
  REQUIRE(compile.has_value());
  REQUIRE(compile->submission_id() == id);
  REQUIRE(compile->kind() == v1::JOB_KIND_COMPILE);
  REQUIRE(worker.Complete(*compile, MakeVerdict(v1::VERDICT_CLASS_COMPILED)).ok());
  auto evaluate = worker.NextJob(absl::Seconds(15));
  REQUIRE(evaluate.has_value());
  REQUIRE(evaluate->kind() == v1::JOB_KIND_EVALUATE);
  grpc::Status done = worker.Complete(*evaluate, MakeVerdict(verdict_class));
  INFO(done.error_message());
  REQUIRE(done.ok());
  return *evaluate;
}

v1::Submission Get(TestServer& server, const std::string& token, const std::string& id) {
  grpc::ClientContext context;
  WithDeadline(&context);
  Authorize(&context, token);
  v1::GetSubmissionRequest request;
  request.set_submission_id(id);
  v1::Submission submission;
  REQUIRE(server.submissions()->GetSubmission(&context, request, &submission).ok());
  return submission;
}

grpc::Status Rejudge(TestServer& server, const std::string& token,
                     const v1::RejudgeSubmissionsRequest& request,
                     v1::RejudgeSubmissionsResponse* response) {
  grpc::ClientContext context;
  WithDeadline(&context);
  Authorize(&context, token);
  return server.admin()->RejudgeSubmissions(&context, request, response);
}

grpc::Status MarkHacked(TestServer& server, const std::string& token, const std::string& id,
                        const std::string& reason, v1::Submission* response) {
  grpc::ClientContext context;
  WithDeadline(&context);
  Authorize(&context, token);
  v1::MarkSubmissionHackedRequest request;
  request.set_submission_id(id);
  request.set_reason(reason);
  return server.admin()->MarkSubmissionHacked(&context, request, response);
}

v1::RejudgeSubmissionsRequest ForTask(const std::string& task_id,
                                      const std::string& older_than = "") {
  v1::RejudgeSubmissionsRequest request;
  request.add_task_ids(task_id);
  request.set_harness_older_than(older_than);
  request.set_reason("new harness");
  return request;
}

std::string Scalar(TestServer& server, const std::string& sql) {
  return server.database().Scalar(sql).value().value_or("NULL");
}

TEST_CASE("a re-judged submission gets the new round's verdict; the old one is superseded",
          "[api][rejudge]") {
  TestServer server;
  const std::string vendor = server.CreateToken("acme", v1::ROLE_VENDOR);
  FakeWorker worker(server.channel(), server.CreateToken("fleet", v1::ROLE_WORKER), v1::ARCH_SM_90A,
                    "GPU-rejudge");
  REQUIRE(worker.Register().ok());
  worker.OpenLease(1);
  const std::string id = SubmitOk(server, vendor);
  const v1::LeasedJob old_job = JudgeRound(worker, id, v1::VERDICT_CLASS_PASS);
  REQUIRE(Get(server, vendor, id).verdict().verdict_class() == v1::VERDICT_CLASS_PASS);

  // The fake worker's verdicts record no harness, which counts as older than any version.
  v1::RejudgeSubmissionsResponse response;
  grpc::Status status = Rejudge(server, server.admin_token(), ForTask(kTaskId, "0.2.0"), &response);
  INFO(status.error_message());
  REQUIRE(status.ok());
  REQUIRE(response.count() == 1);
  REQUIRE(response.submission_ids(0) == id);

  v1::Submission rejudging = Get(server, vendor, id);
  CHECK(rejudging.judging_round() == 1);
  CHECK(rejudging.state() != v1::SUBMISSION_STATE_FINISHED);
  CHECK(rejudging.verdict().verdict_class() == v1::VERDICT_CLASS_PASS);  // Served meanwhile.

  // Attack: the old round's lease holder reports a better verdict after the re-judge.
  grpc::Status late = worker.Complete(old_job, MakeVerdict(v1::VERDICT_CLASS_PASS));
  CHECK(late.error_code() == grpc::StatusCode::FAILED_PRECONDITION);
  CHECK(absl::StrContains(late.error_message(), "lease lost"));

  JudgeRound(worker, id, v1::VERDICT_CLASS_WRONG_RESULT);
  v1::Submission rejudged = Get(server, vendor, id);
  CHECK(rejudged.state() == v1::SUBMISSION_STATE_FINISHED);
  CHECK(rejudged.verdict().verdict_class() == v1::VERDICT_CLASS_WRONG_RESULT);
  CHECK(rejudged.superseded_verdicts() == 1);
  CHECK(Scalar(server, "SELECT verdict_class FROM leaderboard_results") == "wrong_result");

  grpc::ClientContext context;
  WithDeadline(&context);
  Authorize(&context, server.admin_token());
  v1::ListSupersededVerdictsRequest list;
  list.set_submission_id(id);
  v1::ListSupersededVerdictsResponse superseded;
  REQUIRE(server.admin()->ListSupersededVerdicts(&context, list, &superseded).ok());
  REQUIRE(superseded.verdicts_size() == 1);
  CHECK(superseded.verdicts(0).verdict().verdict_class() == v1::VERDICT_CLASS_PASS);
  CHECK(superseded.verdicts(0).round() == 0);
  CHECK(superseded.verdicts(0).superseded_by_round() == 1);
  CHECK(superseded.verdicts(0).rejudge_reason() == "new harness");
}

TEST_CASE("re-judge and hacked marks refuse bad input and non-admin callers",
          "[api][rejudge][hacked]") {
  TestServer server;
  const std::string vendor = server.CreateToken("acme", v1::ROLE_VENDOR);
  const std::string worker_token = server.CreateToken("fleet", v1::ROLE_WORKER);
  FakeWorker worker(server.channel(), worker_token, v1::ARCH_SM_90A, "GPU-hacked");
  REQUIRE(worker.Register().ok());
  worker.OpenLease(1);
  const std::string id = SubmitOk(server, vendor);
  JudgeRound(worker, id, v1::VERDICT_CLASS_PASS);
  v1::RejudgeSubmissionsResponse response;
  v1::Submission submission;

  SECTION("non-admin tokens are refused") {
    for (const std::string& token : {vendor, worker_token}) {
      CHECK(Rejudge(server, token, ForTask(kTaskId), &response).error_code() ==
            grpc::StatusCode::PERMISSION_DENIED);
      CHECK(MarkHacked(server, token, id, "fakes timing", &submission).error_code() ==
            grpc::StatusCode::PERMISSION_DENIED);
    }
    CHECK(Get(server, vendor, id).judging_round() == 0);
    CHECK_FALSE(Get(server, vendor, id).has_hacked());
  }
  SECTION("an unknown task, a malformed version, no task: INVALID_ARGUMENT naming it") {
    grpc::Status unknown =
        Rejudge(server, server.admin_token(), ForTask("no_such_task"), &response);
    CHECK(unknown.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
    CHECK(absl::StrContains(unknown.error_message(), "unknown task 'no_such_task'"));
    grpc::Status version =
        Rejudge(server, server.admin_token(), ForTask(kTaskId, "0.2-beta"), &response);
    CHECK(version.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
    CHECK(absl::StrContains(version.error_message(), "harness_older_than"));
    grpc::Status none =
        Rejudge(server, server.admin_token(), v1::RejudgeSubmissionsRequest(), &response);
    CHECK(none.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
    CHECK(absl::StrContains(none.error_message(), "task_ids"));
    CHECK(Get(server, vendor, id).judging_round() == 0);
  }
  SECTION("marked hacked: out of the rankings, visible to its owner, a second mark refused") {
    grpc::Status empty = MarkHacked(server, server.admin_token(), id, "", &submission);
    CHECK(empty.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
    CHECK(absl::StrContains(empty.error_message(), "reason"));
    REQUIRE(Scalar(server, "SELECT count(*) FROM leaderboard_results") == "1");
    grpc::Status marked =
        MarkHacked(server, server.admin_token(), id, "reads the reference output", &submission);
    INFO(marked.error_message());
    REQUIRE(marked.ok());
    CHECK(submission.hacked().reason() == "reads the reference output");
    CHECK(absl::StartsWith(submission.hacked().by(), "admin:"));
    CHECK(Scalar(server, "SELECT count(*) FROM leaderboard_results") == "0");
    CHECK(Scalar(server, "SELECT count(*) FROM benchmark_turns") == "0");
    const v1::Submission seen = Get(server, vendor, id);
    CHECK(seen.hacked().reason() == "reads the reference output");
    CHECK(seen.verdict().verdict_class() == v1::VERDICT_CLASS_PASS);  // Evidence kept.
    grpc::Status twice = MarkHacked(server, server.admin_token(), id, "other", &submission);
    CHECK(twice.error_code() == grpc::StatusCode::ALREADY_EXISTS);
    CHECK(Get(server, vendor, id).hacked().reason() == "reads the reference output");
  }
}

}  // namespace
}  // namespace ptxbench::api_test
