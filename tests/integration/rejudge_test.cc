// Re-judging end to end, in process: the real server over a fresh PostgreSQL database and the
// real worker daemon (worker/daemon/worker.h: register, Lease stream, stage reports, Complete
// with the round fence) whose executor stands in for the GPU engine and judges by the task's
// version: the version the kernel was first judged under passes it, a later version (the
// task's tolerance tightened) finds it wrong. A submission is judged (pass), the harness
// changes (the server restarted with the new task files), an admin re-judges it: the worker
// judges round 1 against the new version and the verdict differs; GetSubmission shows it with
// judging_round 1, ListSupersededVerdicts the old one, the leaderboard and benchmark views the
// new one; a hacked mark then takes it out of the views while the evidence stays.
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/build_info.h"
#include "nlohmann/json.hpp"
#include "server/server.h"
#include "tests/server/api/api_test_support.h"
#include "tests/support/pg_fixture.h"
#include "tests/support/status_testing.h"
#include "tests/support/temp_files.h"
#include "worker/daemon/worker.h"

namespace ptxbench::worker {
namespace {

namespace fs = std::filesystem;
using ::ptxbench::testing::ValueOrFail;

// Judges by the task version the job carries: `passing_version` passes, any other version
// finds a wrong result (as a tightened tolerance would). Compile jobs compile.
class VersionKeyedExecutor : public JobExecutor {
 public:
  explicit VersionKeyedExecutor(std::string passing_version)
      : passing_version_(std::move(passing_version)) {}

  ExecutorIdentity Identity() const override {
    ExecutorIdentity identity;
    identity.arch = "sm_90a";
    identity.gpu_name = "fake H200";
    identity.gpu_uuid = "GPU-rejudge-test";
    identity.harness_version = "rejudge_test";
    return identity;
  }

  absl::StatusOr<Verdict> Run(const JobSpec& job, const StageCallback& on_stage,
                              const std::atomic<bool>& cancel) override {
    if (cancel) return absl::CancelledError("cancelled");
    {
      std::lock_guard<std::mutex> lock(mu_);
      versions_seen_.push_back(job.task_version_hash);
    }
    Verdict verdict;
    verdict.compiled = true;
    verdict.harness.engine = kHarnessVersion;
    verdict.harness.task_hash = job.task_version_hash;
    auto stage = [&](Stage which, bool ok, const nlohmann::json& detail) {
      StageReport report;
      report.stage = which;
      report.ok = ok;
      report.summary = ok ? "ok (fake)" : "failed (fake)";
      report.detail = detail;
      report.seconds = 0.01;
      on_stage(report);
      verdict.stages.push_back(report);
    };
    stage(Stage::kCompile, true, nlohmann::json::object());
    if (job.compile_only) {
      verdict.verdict_class = VerdictClass::kCompiled;
      verdict.message = "compiled (fake)";
      return verdict;
    }
    if (job.task_version_hash == passing_version_) {
      stage(Stage::kCorrectness, true, nlohmann::json::object());
      stage(Stage::kTargetInstructions, true, nlohmann::json::object());
      // 1.25 ms / 1.0 ms: above the test GEMM's roofline floor, as api_test's verdicts.
      stage(Stage::kTiming, true,
            {{"timing",
              {{"result",
                {{"candidate", {{"median_ms", 1.0}}}, {"baseline", {{"median_ms", 1.25}}}}}}}});
      verdict.verdict_class = VerdictClass::kPass;
      verdict.correct = verdict.target_executed = verdict.tic = verdict.tic_paper = true;
      verdict.speedup = 1.25;
      verdict.message = "all workloads within tolerance";
    } else {
      stage(Stage::kCorrectness, false, nlohmann::json::object());
      verdict.verdict_class = VerdictClass::kWrongResult;
      verdict.message = "workload 0: 3% of elements beyond the tightened tolerance";
    }
    return verdict;
  }

  absl::Status HealthProbe() override { return absl::OkStatus(); }

  std::vector<std::string> versions_seen() const {
    std::lock_guard<std::mutex> lock(mu_);
    return versions_seen_;
  }

 private:
  const std::string passing_version_;
  mutable std::mutex mu_;
  std::vector<std::string> versions_seen_;
};

std::unique_ptr<server::Server> StartServer(const std::string& database_url,
                                            const std::string& listen,
                                            const std::string& tasks_dir) {
  server::ServerOptions options;
  options.listen = listen;
  options.metrics_listen = "";
  options.database_url = database_url;
  options.tasks_dir = tasks_dir;
  options.migrations_dir = testing::MigrationsDir();
  options.store_pool_size = 4;
  options.shutdown_grace = absl::Seconds(2);
  auto server = ValueOrFail(server::Server::Create(options));
  REQUIRE_OK(server->Start());
  return server;
}

// Loopback bootstrap (no token exists): the test is the operator, admin of tenant "local".
struct Stubs {
  explicit Stubs(const std::string& address)
      : channel(api_test::DialTestServer(address)),
        submissions(v1::SubmissionService::NewStub(channel)),
        admin(v1::AdminService::NewStub(channel)) {}
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<v1::SubmissionService::Stub> submissions;
  std::unique_ptr<v1::AdminService::Stub> admin;
};

std::string VersionOf(Stubs& stubs, const std::string& task_id) {
  grpc::ClientContext context;
  api_test::WithDeadline(&context, absl::Seconds(10));
  v1::ListTasksResponse response;
  REQUIRE(stubs.submissions->ListTasks(&context, v1::ListTasksRequest(), &response).ok());
  for (const v1::TaskSummary& task : response.tasks()) {
    if (task.id() == task_id) return task.version_hash();
  }
  FAIL("no task " << task_id);
  return "";
}

v1::Submission Get(Stubs& stubs, const std::string& id) {
  grpc::ClientContext context;
  api_test::WithDeadline(&context, absl::Seconds(10));
  v1::GetSubmissionRequest request;
  request.set_submission_id(id);
  v1::Submission submission;
  grpc::Status status = stubs.submissions->GetSubmission(&context, request, &submission);
  INFO(status.error_message());
  REQUIRE(status.ok());
  return submission;
}

// Polls until the submission is FINISHED in `round`.
v1::Submission AwaitRound(Stubs& stubs, const std::string& id, int round) {
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  v1::Submission submission;
  while (absl::Now() < deadline) {
    submission = Get(stubs, id);
    if (submission.state() == v1::SUBMISSION_STATE_FINISHED && submission.judging_round() == round)
      return submission;
    absl::SleepFor(absl::Milliseconds(20));
  }
  FAIL("submission " << id << " not finished in round " << round << " within 30 s: state "
                     << submission.state() << ", round " << submission.judging_round());
  return submission;
}

std::string Scalar(const testing::TestDatabase& database, const std::string& sql) {
  return database.Scalar(sql).value().value_or("NULL");
}

TEST_CASE("rejudge end to end: a new round under the new task version supersedes the old verdict",
          "[integration][rejudge]") {
  auto database = api_test::FreshDatabase();
  ::ptxbench::testing::ScopedTempDir dir("ptxbench-rejudge-");
  const std::string tasks = dir.path() + "/tasks";
  fs::copy(api_test::TestTasksDir(), tasks, fs::copy_options::recursive);

  auto first = StartServer(database->url(), "127.0.0.1:0", tasks);
  const std::string address = absl::StrCat("127.0.0.1:", first->port());
  std::string old_version;
  std::string submission_id;
  {
    Stubs stubs(address);
    old_version = VersionOf(stubs, api_test::kTaskId);
    v1::SubmitRequest request = api_test::ValidSubmit(/*full=*/true);
    grpc::ClientContext context;
    api_test::WithDeadline(&context, absl::Seconds(10));
    v1::SubmitResponse response;
    grpc::Status status = stubs.submissions->Submit(&context, request, &response);
    INFO(status.error_message());
    REQUIRE(status.ok());
    submission_id = response.submission().id();
  }

  WorkerOptions options;
  options.server = address;
  options.hostname = "rejudge-worker";
  auto owned = std::make_unique<VersionKeyedExecutor>(old_version);
  VersionKeyedExecutor* executor = owned.get();
  auto worker = ValueOrFail(Worker::Create(options, std::move(owned)));
  REQUIRE_OK(worker->Start());
  {
    Stubs stubs(address);
    const v1::Submission judged = AwaitRound(stubs, submission_id, 0);
    CHECK(judged.verdict().verdict_class() == v1::VERDICT_CLASS_PASS);
    CHECK(judged.verdict().harness().task_hash() == old_version);
  }
  const std::string views_sql = absl::StrCat(
      "SELECT (SELECT string_agg(verdict_class, ',') FROM leaderboard_results WHERE "
      "submission_id = '",
      submission_id, "') || '|' || (SELECT string_agg(verdict_class || ':' || tic, ',') FROM ",
      "benchmark_turns WHERE submission_id = '", submission_id, "')");
  CHECK(Scalar(*database, views_sql) == "pass|pass:true");

  // The harness changes: the task's tolerance is tightened, and the server restarted with it.
  first->GracefulStop();
  first.reset();
  {
    const std::string path = tasks + "/" + api_test::kTaskId + "/task.json";
    nlohmann::json task = nlohmann::json::parse(std::ifstream(path));
    task["tolerance"]["atol"] = 0.001;
    task["tolerance"]["rtol"] = 0.001;
    std::ofstream(path, std::ios::trunc) << task.dump(2);
  }
  auto second = StartServer(database->url(), address, tasks);
  Stubs stubs(address);
  const std::string new_version = VersionOf(stubs, api_test::kTaskId);
  REQUIRE(new_version != old_version);

  {
    grpc::ClientContext context;
    api_test::WithDeadline(&context, absl::Seconds(10));
    v1::RejudgeSubmissionsRequest request;
    request.add_task_ids(api_test::kTaskId);
    request.set_reason("tolerance tightened to 1e-3");
    v1::RejudgeSubmissionsResponse response;
    grpc::Status status = stubs.admin->RejudgeSubmissions(&context, request, &response);
    INFO(status.error_message());
    REQUIRE(status.ok());
    REQUIRE(response.count() == 1);
    CHECK(response.submission_ids(0) == submission_id);
  }
  const v1::Submission rejudged = AwaitRound(stubs, submission_id, 1);
  CHECK(rejudged.verdict().verdict_class() == v1::VERDICT_CLASS_WRONG_RESULT);
  CHECK_FALSE(rejudged.verdict().tic());
  CHECK(rejudged.task_version_hash() == new_version);  // Judged against the current version.
  CHECK(rejudged.verdict().harness().task_hash() == new_version);
  CHECK(rejudged.superseded_verdicts() == 1);
  // The worker was handed the new version for the new round (compile and evaluate jobs).
  const std::vector<std::string> seen = executor->versions_seen();
  REQUIRE(seen.size() == 4);
  CHECK(seen[0] == old_version);
  CHECK(seen[1] == old_version);
  CHECK(seen[2] == new_version);
  CHECK(seen[3] == new_version);

  {
    grpc::ClientContext context;
    api_test::WithDeadline(&context, absl::Seconds(10));
    v1::ListSupersededVerdictsRequest request;
    request.set_submission_id(submission_id);
    v1::ListSupersededVerdictsResponse response;
    REQUIRE(stubs.admin->ListSupersededVerdicts(&context, request, &response).ok());
    REQUIRE(response.verdicts_size() == 1);
    const v1::SupersededVerdict& old = response.verdicts(0);
    CHECK(old.verdict().verdict_class() == v1::VERDICT_CLASS_PASS);
    CHECK(old.verdict().harness().task_hash() == old_version);
    CHECK(old.round() == 0);
    CHECK(old.superseded_by_round() == 1);
    CHECK(old.rejudge_reason() == "tolerance tightened to 1e-3");
  }
  // Rankings use the latest verdict.
  CHECK(Scalar(*database, views_sql) == "wrong_result|wrong_result:false");

  // A hacked mark takes it out of every ranking; its verdicts stay for audit.
  {
    grpc::ClientContext context;
    api_test::WithDeadline(&context, absl::Seconds(10));
    v1::MarkSubmissionHackedRequest request;
    request.set_submission_id(submission_id);
    request.set_reason("reads the reference output");
    v1::Submission marked;
    REQUIRE(stubs.admin->MarkSubmissionHacked(&context, request, &marked).ok());
    CHECK(marked.hacked().reason() == "reads the reference output");
  }
  CHECK(Scalar(*database, views_sql) == "NULL");
  CHECK(Scalar(*database, absl::StrCat("SELECT count(*) FROM verdicts WHERE submission_id = '",
                                       submission_id, "'")) == "1");
  CHECK(Get(stubs, submission_id).verdict().verdict_class() == v1::VERDICT_CLASS_WRONG_RESULT);

  worker->GracefulStop();
  worker->Wait();
}

}  // namespace
}  // namespace ptxbench::worker
