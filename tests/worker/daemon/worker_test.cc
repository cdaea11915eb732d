// The worker daemon (worker.h) in process against a real server over loopback, restarted
// under it: it reconnects within about two seconds, and a job it runs across the restart is
// still completed.
#include "worker/daemon/worker.h"

#include <atomic>
#include <catch2/catch.hpp>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "server/server.h"
#include "tests/server/api/api_test_support.h"
#include "tests/support/pg_fixture.h"
#include "tests/support/status_testing.h"

namespace ptxbench::worker {
namespace {

using ::ptxbench::testing::ValueOrFail;

// A compile-only executor that "compiles" in `run_time` and reports it.
class FakeCompiler : public JobExecutor {
 public:
  explicit FakeCompiler(absl::Duration run_time) : run_time_(run_time) {}
  ExecutorIdentity Identity() const override {
    ExecutorIdentity identity;
    identity.harness_version = "worker_test";
    return identity;
  }
  absl::StatusOr<Verdict> Run(const JobSpec& job, const StageCallback& on_stage,
                              const std::atomic<bool>& cancel) override {
    ++started_;
    const absl::Time until = absl::Now() + run_time_;
    while (absl::Now() < until && !cancel) absl::SleepFor(absl::Milliseconds(10));
    if (cancel) return absl::CancelledError("cancelled");
    StageReport compile;
    compile.stage = Stage::kCompile;
    compile.ok = true;
    compile.summary = "compiled (fake)";
    compile.seconds = absl::ToDoubleSeconds(run_time_);
    on_stage(compile);
    Verdict verdict;
    verdict.verdict_class = VerdictClass::kCompiled;
    verdict.compiled = true;
    verdict.message = "compiled (fake)";
    verdict.stages.push_back(compile);
    return verdict;
  }
  absl::Status HealthProbe() override { return absl::OkStatus(); }
  int started() const { return started_; }

 private:
  const absl::Duration run_time_;
  std::atomic<int> started_{0};
};

std::unique_ptr<server::Server> StartServer(const std::string& database_url,
                                            const std::string& listen) {
  server::ServerOptions options;
  options.listen = listen;
  options.metrics_listen = "";
  options.database_url = database_url;
  options.tasks_dir = api_test::TestTasksDir();
  options.migrations_dir = testing::MigrationsDir();
  options.store_pool_size = 4;
  options.shutdown_grace = absl::Seconds(2);
  auto server = ValueOrFail(server::Server::Create(options));
  REQUIRE_OK(server->Start());
  return server;
}

// Submits a compile-only job (loopback bootstrap: no token) and returns its id.
std::string Submit(const std::string& address) {
  auto stub = v1::SubmissionService::NewStub(api_test::DialTestServer(address));
  grpc::ClientContext context;
  api_test::WithDeadline(&context, absl::Seconds(10));
  v1::SubmitResponse response;
  grpc::Status status = stub->Submit(&context, api_test::ValidSubmit(), &response);
  INFO(status.error_message());
  REQUIRE(status.ok());
  return response.submission().id();
}

// Polls until the submission has a verdict; returns its class (UNSPECIFIED on timeout).
v1::VerdictClass AwaitVerdict(const std::string& address, const std::string& id,
                              absl::Duration limit) {
  auto stub = v1::SubmissionService::NewStub(api_test::DialTestServer(address));
  const absl::Time deadline = absl::Now() + limit;
  while (absl::Now() < deadline) {
    grpc::ClientContext context;
    api_test::WithDeadline(&context, absl::Seconds(5));
    v1::GetSubmissionRequest request;
    request.set_submission_id(id);
    v1::Submission submission;
    if (stub->GetSubmission(&context, request, &submission).ok() &&
        submission.state() == v1::SUBMISSION_STATE_FINISHED) {
      return submission.verdict().verdict_class();
    }
    absl::SleepFor(absl::Milliseconds(20));
  }
  return v1::VERDICT_CLASS_UNSPECIFIED;
}

TEST_CASE("a worker is leasing again within about 2 s of a server restart",
          "[worker][daemon][faults]") {
  auto database = api_test::FreshDatabase();
  auto first = StartServer(database->url(), "127.0.0.1:0");
  const std::string address = absl::StrCat("127.0.0.1:", first->port());
  WorkerOptions options;
  options.server = address;
  options.compile_only = true;
  options.hostname = "worker-test";
  auto executor = std::make_unique<FakeCompiler>(absl::Milliseconds(50));
  auto worker = ValueOrFail(Worker::Create(options, std::move(executor)));
  REQUIRE_OK(worker->Start());
  REQUIRE(AwaitVerdict(address, Submit(address), absl::Seconds(10)) == v1::VERDICT_CLASS_COMPILED);

  // Down for 3 s: long enough for gRPC's default reconnection backoff (1 s x 1.6 per
  // attempt) to have grown past 2 s, and for our own loop's.
  first->GracefulStop();
  first.reset();
  absl::SleepFor(absl::Seconds(3));
  auto second = StartServer(database->url(), address);
  const absl::Time restarted = absl::Now();
  const std::string id = Submit(address);
  REQUIRE(AwaitVerdict(address, id, absl::Seconds(20)) == v1::VERDICT_CLASS_COMPILED);
  const absl::Duration back = absl::Now() - restarted;
  INFO("verdict " << absl::FormatDuration(back) << " after the restart");
  CHECK(back < absl::Milliseconds(2500));
  worker->GracefulStop();
  worker->Wait();
}

TEST_CASE("a job running across a server restart is still completed by its worker",
          "[worker][daemon][faults]") {
  auto database = api_test::FreshDatabase();
  auto first = StartServer(database->url(), "127.0.0.1:0");
  const std::string address = absl::StrCat("127.0.0.1:", first->port());
  WorkerOptions options;
  options.server = address;
  options.compile_only = true;
  options.hostname = "worker-test";
  auto owned = std::make_unique<FakeCompiler>(absl::Seconds(4));
  FakeCompiler* executor = owned.get();
  auto worker = ValueOrFail(Worker::Create(options, std::move(owned)));
  REQUIRE_OK(worker->Start());
  const std::string id = Submit(address);
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (executor->started() == 0 && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  REQUIRE(executor->started() == 1);
  // The server goes away while the job runs and comes back before it ends.
  first->GracefulStop();
  first.reset();
  absl::SleepFor(absl::Seconds(1));
  auto second = StartServer(database->url(), address);
  REQUIRE(AwaitVerdict(address, id, absl::Seconds(20)) == v1::VERDICT_CLASS_COMPILED);
  CHECK(executor->started() == 1);  // Never run twice.
  worker->GracefulStop();
  worker->Wait();
}

// A GPU executor that never runs: what a GPU worker's creation needs (its GPU's identity).
class IdleGpuExecutor : public JobExecutor {
 public:
  explicit IdleGpuExecutor(std::string uuid) : uuid_(std::move(uuid)) {}
  ExecutorIdentity Identity() const override {
    ExecutorIdentity identity;
    identity.arch = "sm_90a";
    identity.gpu_uuid = uuid_;
    identity.harness_version = "worker_test";
    return identity;
  }
  absl::StatusOr<Verdict> Run(const JobSpec&, const StageCallback&,
                              const std::atomic<bool>&) override {
    return absl::UnimplementedError("never leased in this test");
  }
  absl::Status HealthProbe() override { return absl::OkStatus(); }

 private:
  std::string uuid_;
};

TEST_CASE("a second GPU worker on the same GPU, or one with two slots, is refused at creation",
          "[worker][gpu_lock]") {
  char templ[] = "/tmp/ptxbench-worker-lock-XXXXXX";
  REQUIRE(mkdtemp(templ) != nullptr);
  WorkerOptions options;
  options.server = "127.0.0.1:1";  // Never dialled: creation refuses before any connection.
  options.gpu_lock_dir = templ;
  options.hostname = "worker-test";
  auto first = Worker::Create(options, std::make_unique<IdleGpuExecutor>("GPU-worker-test"));
  REQUIRE_OK(first.status());

  auto second = Worker::Create(options, std::make_unique<IdleGpuExecutor>("GPU-worker-test"));
  REQUIRE_FALSE(second.ok());
  CHECK(second.status().code() == absl::StatusCode::kFailedPrecondition);
  CHECK(absl::StrContains(second.status().message(), "GPU GPU-worker-test is already evaluated"));

  // A compile-only worker needs no GPU and takes no lock; another GPU is another lock.
  WorkerOptions compile_only = options;
  compile_only.compile_only = true;
  compile_only.slots = 4;
  CHECK(Worker::Create(compile_only, std::make_unique<FakeCompiler>(absl::Seconds(1))).ok());
  CHECK(Worker::Create(options, std::make_unique<IdleGpuExecutor>("GPU-other")).ok());

  WorkerOptions two_slots = options;
  two_slots.slots = 2;
  auto doubled = Worker::Create(two_slots, std::make_unique<IdleGpuExecutor>("GPU-third"));
  REQUIRE_FALSE(doubled.ok());
  CHECK(doubled.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK(absl::StrContains(doubled.status().message(), "one job at a time"));

  first->reset();  // The first worker ends: its GPU is free again.
  CHECK(Worker::Create(options, std::make_unique<IdleGpuExecutor>("GPU-worker-test")).ok());
}

// A GPU executor whose jobs take `run_time` each and count how many run at once.
class ConcurrencyProbe : public JobExecutor {
 public:
  ConcurrencyProbe(std::string uuid, absl::Duration run_time)
      : uuid_(std::move(uuid)), run_time_(run_time) {}
  ExecutorIdentity Identity() const override {
    ExecutorIdentity identity;
    identity.arch = "sm_90a";
    identity.gpu_name = "probe";
    identity.gpu_uuid = uuid_;
    identity.harness_version = "worker_test";
    return identity;
  }
  absl::StatusOr<Verdict> Run(const JobSpec&, const StageCallback& on_stage,
                              const std::atomic<bool>& cancel) override {
    const int now = ++running_;
    int seen = most_;
    while (now > seen && !most_.compare_exchange_weak(seen, now)) {
    }
    const absl::Time until = absl::Now() + run_time_;
    while (absl::Now() < until && !cancel) absl::SleepFor(absl::Milliseconds(10));
    --running_;
    ++finished_;
    if (cancel) return absl::CancelledError("cancelled");
    StageReport compile;
    compile.stage = Stage::kCompile;
    compile.ok = true;
    compile.summary = "compiled (probe)";
    compile.seconds = absl::ToDoubleSeconds(run_time_);
    on_stage(compile);
    Verdict verdict;
    verdict.verdict_class = VerdictClass::kCompiled;
    verdict.compiled = true;
    verdict.message = "compiled (probe)";
    verdict.stages.push_back(compile);
    return verdict;
  }
  absl::Status HealthProbe() override { return absl::OkStatus(); }
  int most() const { return most_; }
  int finished() const { return finished_; }

 private:
  std::string uuid_;
  absl::Duration run_time_;
  std::atomic<int> running_{0};
  std::atomic<int> most_{0};
  std::atomic<int> finished_{0};
};

// The jobs a GPU worker holds at once: its Lease asks for --gpu-pipeline of them. Compile jobs of
// the worker's arch go to GPU workers too, so compile-only submissions exercise the lease.
TEST_CASE(
    "a GPU worker holds two jobs at once with --gpu-pipeline 2 and never more than one "
    "without",
    "[worker][daemon][gpu_pipeline]") {
  char templ[] = "/tmp/ptxbench-worker-pipeline-XXXXXX";
  REQUIRE(mkdtemp(templ) != nullptr);
  const int pipeline = GENERATE(1, 2);
  INFO("gpu_pipeline " << pipeline);
  auto database = api_test::FreshDatabase();
  auto server = StartServer(database->url(), "127.0.0.1:0");
  const std::string address = absl::StrCat("127.0.0.1:", server->port());
  WorkerOptions options;
  options.server = address;
  options.hostname = "worker-test";
  options.gpu_lock_dir = templ;
  options.gpu_pipeline = pipeline;
  auto owned = std::make_unique<ConcurrencyProbe>(absl::StrCat("GPU-pipeline-", pipeline),
                                                  absl::Milliseconds(1500));
  ConcurrencyProbe* probe = owned.get();
  auto worker = ValueOrFail(Worker::Create(options, std::move(owned)));
  std::vector<std::string> ids;
  for (int i = 0; i < 4; ++i) ids.push_back(Submit(address));
  REQUIRE_OK(worker->Start());
  for (const std::string& id : ids) {
    CHECK(AwaitVerdict(address, id, absl::Seconds(30)) == v1::VERDICT_CLASS_COMPILED);
  }
  CHECK(probe->finished() == 4);
  CHECK(probe->most() == pipeline);
  worker->GracefulStop();
  worker->Wait();
}

TEST_CASE("the GPU pipeline (--gpu-pipeline) is 1 or 2, on GPU workers only",
          "[worker][gpu_pipeline]") {
  char templ[] = "/tmp/ptxbench-worker-pipeline-XXXXXX";
  REQUIRE(mkdtemp(templ) != nullptr);
  WorkerOptions options;
  options.server = "127.0.0.1:1";  // Never dialled.
  options.gpu_lock_dir = templ;
  options.hostname = "worker-test";
  for (int bad : {0, 3}) {
    WorkerOptions o = options;
    o.gpu_pipeline = bad;
    auto refused = Worker::Create(o, std::make_unique<IdleGpuExecutor>("GPU-pipeline-bad"));
    REQUIRE_FALSE(refused.ok());
    CHECK(absl::StrContains(refused.status().message(), "--gpu-pipeline"));
  }
  WorkerOptions compile_only = options;
  compile_only.compile_only = true;
  compile_only.gpu_pipeline = 2;
  auto refused = Worker::Create(compile_only, std::make_unique<FakeCompiler>(absl::Seconds(1)));
  REQUIRE_FALSE(refused.ok());
  CHECK(absl::StrContains(refused.status().message(), "GPU workers"));
  // Two jobs through the pipeline still take the GPU's lock: one daemon per GPU.
  WorkerOptions pipelined = options;
  pipelined.gpu_pipeline = 2;
  auto first = Worker::Create(pipelined, std::make_unique<IdleGpuExecutor>("GPU-pipeline-lock"));
  REQUIRE_OK(first.status());
  auto second = Worker::Create(pipelined, std::make_unique<IdleGpuExecutor>("GPU-pipeline-lock"));
  REQUIRE_FALSE(second.ok());
  CHECK(second.status().code() == absl::StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace ptxbench::worker
