// The real ptxbench-server binary as a process: accepted submissions survive kill -9, and a
// verdict recorded before the crash is neither lost nor recorded twice after the restart.
#include <signal.h>
#include <sys/wait.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tests/server/api/api_test_support.h"
#include "tests/support/process.h"

namespace ptxbench::api_test {
namespace {

using ::ptxbench::testing::ChildProcess;
using ::ptxbench::testing::MakeTempDir;
using ::ptxbench::testing::WaitForServingAddress;

// The ptxbench-server binary as a child process (tests/support/process.h); its log's
// "serving grpc=HOST:PORT" line tells the port it bound (it listens on port 0).
class ServerProcess {
 public:
  explicit ServerProcess(const std::string& database_url) : dir_(MakeTempDir("ptxbench-proc-")) {
    process_ = ChildProcess::Start(
        {PTXBENCH_SERVER_BINARY, "serve", "--database-url", database_url, "--listen", "127.0.0.1:0",
         "--metrics-listen", "off", "--tasks-dir", TestTasksDir(), "--migrations-dir",
         SourceDir() + "/migrations", "--log-level", "warn"},
        dir_ + "/server.log");
    REQUIRE(process_ != nullptr);
    address_ = WaitForServingAddress(*process_, absl::Seconds(60));
    INFO("server log: " << process_->Log());
    REQUIRE_FALSE(address_.empty());
    channel_ = DialTestServer(address_);
  }
  ~ServerProcess() {
    process_.reset();  // SIGKILLs a server still running.
    std::filesystem::remove_all(dir_);
  }

  // Sends `signal` and reaps the process; returns its wait status.
  int Kill(int signal) {
    process_->Signal(signal);
    const std::optional<int> status = process_->Wait(absl::Seconds(30));
    REQUIRE(status.has_value());
    return *status;
  }

  std::shared_ptr<grpc::Channel> channel() const { return channel_; }

 private:
  std::string dir_;
  std::unique_ptr<ChildProcess> process_;
  std::string address_;
  std::shared_ptr<grpc::Channel> channel_;
};

v1::Submission Get(const std::shared_ptr<grpc::Channel>& channel, const std::string& id) {
  grpc::ClientContext context;
  WithDeadline(&context);
  v1::GetSubmissionRequest request;
  request.set_submission_id(id);
  v1::Submission submission;
  auto status =
      v1::SubmissionService::NewStub(channel)->GetSubmission(&context, request, &submission);
  INFO(status.error_message());
  REQUIRE(status.ok());
  return submission;
}

TEST_CASE("submissions, verdicts and leases survive kill -9 of the server, without duplicates",
          "[api][process]") {
  const auto database = FreshDatabase();
  const std::string& database_url = database->url();
  std::vector<std::string> ids;
  v1::LeasedJob completed_job;
  v1::LeasedJob running_job;
  std::string worker_id;
  {
    ServerProcess first(database_url);
    // No token exists: loopback callers act as admin of tenant "local".
    auto stub = v1::SubmissionService::NewStub(first.channel());
    for (int i = 0; i < 3; ++i) {
      grpc::ClientContext context;
      WithDeadline(&context);
      v1::SubmitResponse response;
      auto status = stub->Submit(&context, ValidSubmit(), &response);
      INFO(status.error_message());
      REQUIRE(status.ok());
      ids.push_back(response.submission().id());
    }
    FakeWorker worker(first.channel(), "", v1::ARCH_SM_90A, "GPU-process");
    REQUIRE(worker.Register().ok());
    worker_id = worker.worker_id();
    // Lease one job and finish it; the stream is closed first so that nothing else is leased
    // behind the test's back.
    worker.OpenLease(1);
    auto job = worker.NextJob(absl::Seconds(15));
    REQUIRE(job.has_value());
    worker.CloseLease();
    REQUIRE(worker.ReportStage(*job, v1::STAGE_COMPILE, true).ok());
    REQUIRE(worker.Complete(*job, MakeVerdict(v1::VERDICT_CLASS_COMPILED)).ok());
    completed_job = *job;
    // Lease a second one and keep it running across the crash.
    worker.OpenLease(1);
    job = worker.NextJob(absl::Seconds(15));
    REQUIRE(job.has_value());
    worker.CloseLease();
    running_job = *job;
    const int status = first.Kill(SIGKILL);
    CHECK(WIFSIGNALED(status));
  }
  std::string queued_id;
  for (const auto& id : ids) {
    if (id != completed_job.submission_id() && id != running_job.submission_id()) queued_id = id;
  }
  REQUIRE_FALSE(queued_id.empty());

  ServerProcess second(database_url);
  const v1::Submission finished = Get(second.channel(), completed_job.submission_id());
  CHECK(finished.state() == v1::SUBMISSION_STATE_FINISHED);
  CHECK(finished.verdict().verdict_class() == v1::VERDICT_CLASS_COMPILED);
  CHECK(Get(second.channel(), running_job.submission_id()).state() == v1::SUBMISSION_STATE_RUNNING);
  CHECK(Get(second.channel(), queued_id).state() == v1::SUBMISSION_STATE_QUEUED);
  {
    grpc::ClientContext context;
    WithDeadline(&context);
    v1::ListSubmissionsResponse listed;
    REQUIRE(v1::SubmissionService::NewStub(second.channel())
                ->ListSubmissions(&context, v1::ListSubmissionsRequest(), &listed)
                .ok());
    CHECK(listed.submissions_size() == 3);
  }

  // The worker reconnects without registering again, as a worker daemon does. Its one slot
  // is still taken by the job leased before the crash, so the queued job waits.
  FakeWorker worker(second.channel(), "", v1::ARCH_SM_90A, "GPU-process");
  worker.set_worker_id(worker_id);
  worker.OpenLease(1);
  CHECK_FALSE(worker.NextJob(absl::Milliseconds(2500)).has_value());
  v1::HeartbeatResponse heartbeat;
  REQUIRE(worker.Heartbeat({running_job}, &heartbeat).ok());
  CHECK(heartbeat.lost_size() == 0);
  REQUIRE(worker.Complete(running_job, MakeVerdict(v1::VERDICT_CLASS_COMPILED)).ok());
  auto next = worker.NextJob(absl::Seconds(15));
  REQUIRE(next.has_value());
  CHECK(next->submission_id() == queued_id);
  worker.CloseLease();

  // Replaying a Complete for the finished job (a worker retrying after the crash) is refused
  // by the lease fence; the recorded verdict stays as it was.
  CHECK(worker.Complete(completed_job, MakeVerdict(v1::VERDICT_CLASS_WRONG_RESULT)).error_code() ==
        grpc::StatusCode::FAILED_PRECONDITION);
  CHECK(Get(second.channel(), completed_job.submission_id()).verdict().verdict_class() ==
        v1::VERDICT_CLASS_COMPILED);

  // A watcher sees exactly one verdict.
  grpc::ClientContext context;
  WithDeadline(&context);
  v1::WatchSubmissionRequest watch;
  watch.set_submission_id(completed_job.submission_id());
  auto reader = v1::SubmissionService::NewStub(second.channel())->WatchSubmission(&context, watch);
  int done_events = 0;
  v1::StageEvent event;
  while (reader->Read(&event)) done_events += event.stage() == v1::STAGE_DONE ? 1 : 0;
  CHECK(reader->Finish().ok());
  CHECK(done_events == 1);

  // SIGTERM stops the server cleanly.
  const int status = second.Kill(SIGTERM);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
}

}  // namespace
}  // namespace ptxbench::api_test
