// The worker token's trust boundary, attacked over real gRPC (issue: a worker token could
// lease every tenant's job and store any verdict). Each case is an exploit that used to work:
// a forged PASS with TIC and speedup 1e9 for a compile-only submission, and acting as another
// token's worker.
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "server/store/store.h"
#include "tests/server/api/api_test_support.h"
#include "tests/support/status_testing.h"

namespace ptxbench::api_test {
namespace {

using ::ptxbench::testing::ValueOrFail;

std::string Submit(TestServer& server, const std::string& token, bool full) {
  grpc::ClientContext context;
  WithDeadline(&context);
  Authorize(&context, token);
  v1::SubmitResponse response;
  auto status = server.submissions()->Submit(&context, ValidSubmit(full), &response);
  INFO(status.error_message());
  REQUIRE(status.ok());
  return response.submission().id();
}

std::unique_ptr<store::Store> StoreOf(TestServer& server) {
  store::StoreOptions options;
  options.database_url = server.server().database_url();
  options.pool_size = 1;
  return ValueOrFail(store::Store::Connect(options));
}

// The forged verdict of the issue: every flag a reader looks for.
v1::Verdict ForgedPass() {
  v1::Verdict verdict = MakeVerdict(v1::VERDICT_CLASS_PASS);
  verdict.set_speedup(1e9);
  return verdict;
}

std::string TokenIdOf(const std::string& secret) {
  const size_t start = std::string("ptxb_").size();
  return secret.substr(start, secret.find('_', start) - start);
}

TEST_CASE("a forged PASS with TIC and speedup 1e9 for a compile-only submission is refused",
          "[api][trust]") {
  TestServer server;
  const std::string vendor = server.CreateToken("acme", v1::ROLE_VENDOR);
  const std::string fleet = server.CreateToken("fleet", v1::ROLE_WORKER);
  const std::string id = Submit(server, vendor, /*full=*/false);
  FakeWorker forger(server.channel(), fleet, v1::ARCH_SM_90A, "GPU-forger");
  REQUIRE(forger.Register().ok());
  forger.OpenLease(1);
  auto job = forger.NextJob(absl::Seconds(10));
  REQUIRE(job.has_value());
  REQUIRE(job->kind() == v1::JOB_KIND_COMPILE);

  grpc::Status refused = forger.Complete(*job, ForgedPass());
  INFO(refused.error_message());
  REQUIRE(refused.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
  CHECK(absl::StartsWith(refused.error_message(), "result refused: "));
  CHECK(absl::StrContains(refused.error_message(), "compile job"));

  // Nothing of it was stored: the submission has no verdict, its job runs again, and the
  // audit log says why, naming the worker.
  auto store = StoreOf(server);
  store::SubmissionRow row = ValueOrFail(store->GetSubmission(id, ""));
  CHECK(row.state != v1::SUBMISSION_STATE_FINISHED);
  CHECK_FALSE(row.verdict.has_value());
  std::vector<store::JobRow> jobs = ValueOrFail(store->ListJobs(id));
  REQUIRE(jobs.size() == 1);
  CHECK(jobs[0].state == store::JobState::kQueued);
  CHECK(jobs[0].infrastructure_attempts == 1);
  bool audited = false;
  for (const store::AuditRow& audit :
       ValueOrFail(store->ListAuditLog(store::AuditEntity::kJob, job->job_id()))) {
    if (absl::StrContains(audit.detail_json, "result refused")) {
      audited = true;
      CHECK(audit.actor == "worker:" + forger.worker_id());
      CHECK(audit.new_state == "queued");
    }
  }
  CHECK(audited);
  // The forger's lease is gone; the same forgery on the retry is refused again.
  CHECK(forger.Complete(*job, MakeVerdict(v1::VERDICT_CLASS_COMPILED)).error_code() ==
        grpc::StatusCode::FAILED_PRECONDITION);
  auto retry = forger.NextJob(absl::Seconds(10));
  REQUIRE(retry.has_value());
  REQUIRE(retry->job_id() == job->job_id());
  CHECK(forger.Complete(*retry, ForgedPass()).error_code() == grpc::StatusCode::INVALID_ARGUMENT);
  // An honest result for the next attempt is taken.
  auto honest = forger.NextJob(absl::Seconds(10));
  REQUIRE(honest.has_value());
  REQUIRE(forger.Complete(*honest, MakeVerdict(v1::VERDICT_CLASS_COMPILED)).ok());
  CHECK(ValueOrFail(store->GetSubmission(id, "")).verdict->verdict_class ==
        v1::VERDICT_CLASS_COMPILED);
}

TEST_CASE("an evaluate job's speedup of 1e9 is refused as physically impossible", "[api][trust]") {
  TestServer server;
  const std::string vendor = server.CreateToken("acme", v1::ROLE_VENDOR);
  const std::string fleet = server.CreateToken("fleet", v1::ROLE_WORKER);
  const std::string id = Submit(server, vendor, /*full=*/true);
  FakeWorker gpu(server.channel(), fleet, v1::ARCH_SM_90A, "GPU-evaluate");
  REQUIRE(gpu.Register().ok());
  gpu.OpenLease(1);
  auto compile = gpu.NextJob(absl::Seconds(10));
  REQUIRE(compile.has_value());
  REQUIRE(gpu.Complete(*compile, MakeVerdict(v1::VERDICT_CLASS_COMPILED)).ok());
  auto evaluate = gpu.NextJob(absl::Seconds(10));
  REQUIRE(evaluate.has_value());
  REQUIRE(evaluate->kind() == v1::JOB_KIND_EVALUATE);
  grpc::Status refused = gpu.Complete(*evaluate, ForgedPass());
  REQUIRE(refused.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
  CHECK(absl::StrContains(refused.error_message(), "physical bound"));
  // The honest pass (speedup 1.25 from medians 1.25 / 1.0 ms) is taken on the retry.
  auto retry = gpu.NextJob(absl::Seconds(10));
  REQUIRE(retry.has_value());
  REQUIRE(gpu.Complete(*retry, MakeVerdict(v1::VERDICT_CLASS_PASS)).ok());
  auto store = StoreOf(server);
  CHECK(ValueOrFail(store->GetSubmission(id, "")).verdict->speedup == Approx(1.25));
}

TEST_CASE("a worker id belongs to the token that registered it", "[api][trust]") {
  TestServer server;
  const std::string vendor = server.CreateToken("acme", v1::ROLE_VENDOR);
  const std::string owner_token = server.CreateToken("fleet", v1::ROLE_WORKER);
  const std::string thief_token = server.CreateToken("other-fleet", v1::ROLE_WORKER);
  FakeWorker owner(server.channel(), owner_token, v1::ARCH_SM_90A, "GPU-owned");
  REQUIRE(owner.Register().ok());
  const std::string id = Submit(server, vendor, /*full=*/false);
  owner.OpenLease(1);
  auto job = owner.NextJob(absl::Seconds(10));
  REQUIRE(job.has_value());

  // Another token, knowing the worker id (logs, ListWorkers) and the lease, tries everything.
  FakeWorker thief(server.channel(), thief_token, v1::ARCH_SM_90A, "GPU-owned");
  thief.set_worker_id(owner.worker_id());
  CHECK(thief.Complete(*job, MakeVerdict(v1::VERDICT_CLASS_COMPILED)).error_code() ==
        grpc::StatusCode::PERMISSION_DENIED);
  CHECK(thief.ReportStage(*job, v1::STAGE_COMPILE, true).error_code() ==
        grpc::StatusCode::PERMISSION_DENIED);
  bool will_retry = false;
  CHECK(thief.Fail(*job, v1::FAILURE_KIND_INFRASTRUCTURE, &will_retry).error_code() ==
        grpc::StatusCode::PERMISSION_DENIED);
  v1::HeartbeatResponse heartbeat;
  CHECK(thief.Heartbeat({}, &heartbeat).error_code() == grpc::StatusCode::PERMISSION_DENIED);
  {
    grpc::ClientContext context;
    WithDeadline(&context, absl::Seconds(10));
    Authorize(&context, thief_token);
    v1::LeaseRequest request;
    request.set_worker_id(owner.worker_id());
    auto reader = server.workers()->Lease(&context, request);
    v1::LeasedJob stolen;
    CHECK_FALSE(reader->Read(&stolen));
    CHECK(reader->Finish().error_code() == grpc::StatusCode::PERMISSION_DENIED);
  }
  // Registering the same GPU to take the id over: refused while the owner is alive (ABORTED,
  // which a rotated worker retries), and the owner's job is untouched.
  grpc::Status takeover = thief.Register();
  CHECK(takeover.error_code() == grpc::StatusCode::ABORTED);
  CHECK(absl::StrContains(takeover.error_message(), "registered by another token"));
  auto store = StoreOf(server);
  CHECK(ValueOrFail(store->ListJobs(id))[0].state == store::JobState::kLeased);
  REQUIRE(owner.Complete(*job, MakeVerdict(v1::VERDICT_CLASS_COMPILED)).ok());

  // Rotation: once the owner's token is revoked, a new token may register the worker.
  {
    grpc::ClientContext context;
    Authorize(&context, server.admin_token());
    v1::RevokeTokenRequest revoke;
    revoke.set_token_id(TokenIdOf(owner_token));
    v1::RevokeTokenResponse revoked;
    REQUIRE(server.admin()->RevokeToken(&context, revoke, &revoked).ok());
  }
  FakeWorker successor(server.channel(), thief_token, v1::ARCH_SM_90A, "GPU-owned");
  REQUIRE(successor.Register().ok());
  CHECK(successor.worker_id() == owner.worker_id());
  {
    grpc::ClientContext context;
    Authorize(&context, server.admin_token());
    v1::ListWorkersResponse workers;
    REQUIRE(server.admin()->ListWorkers(&context, v1::ListWorkersRequest(), &workers).ok());
    REQUIRE(workers.workers_size() == 1);
    CHECK(workers.workers(0).token_id() == TokenIdOf(thief_token));
  }
  v1::HeartbeatResponse beat;
  CHECK(successor.Heartbeat({}, &beat).ok());
}

TEST_CASE("a worker id silent for a lease period moves to a new token, without its leases",
          "[api][trust]") {
  TestServer server;
  const std::string vendor = server.CreateToken("acme", v1::ROLE_VENDOR);
  const std::string old_token = server.CreateToken("fleet", v1::ROLE_WORKER);
  const std::string new_token = server.CreateToken("fleet-2", v1::ROLE_WORKER);
  FakeWorker before(server.channel(), old_token, v1::ARCH_SM_90A, "GPU-rotated");
  REQUIRE(before.Register().ok());
  const std::string id = Submit(server, vendor, /*full=*/false);
  before.OpenLease(1);
  auto job = before.NextJob(absl::Seconds(10));
  REQUIRE(job.has_value());
  before.CloseLease();
  // The old process stopped (token rotation) a lease period ago; its lease is still in the
  // table (the reaper has not run), which is the case a claim must not inherit.
  REQUIRE(server.database()
              .Sql("UPDATE workers SET last_seen = now() - interval '1 hour' WHERE id = '" +
                   before.worker_id() + "'")
              .ok());
  FakeWorker after(server.channel(), new_token, v1::ARCH_SM_90A, "GPU-rotated");
  REQUIRE(after.Register().ok());
  CHECK(after.worker_id() == before.worker_id());
  // The old token's process can no longer act for the id, and the lease it held was released.
  CHECK(before.Complete(*job, MakeVerdict(v1::VERDICT_CLASS_COMPILED)).error_code() ==
        grpc::StatusCode::PERMISSION_DENIED);
  auto store = StoreOf(server);
  CHECK(ValueOrFail(store->ListJobs(id))[0].state == store::JobState::kQueued);
  after.OpenLease(1);
  auto again = after.NextJob(absl::Seconds(10));
  REQUIRE(again.has_value());
  CHECK(again->job_id() == job->job_id());
  REQUIRE(after.Complete(*again, MakeVerdict(v1::VERDICT_CLASS_COMPILED)).ok());
}

}  // namespace
}  // namespace ptxbench::api_test
