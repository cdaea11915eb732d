// The life of a submission over real gRPC: a vendor submits and watches, a fake worker leases,
// reports stages and completes; plus slots, drain, lease fencing, reaping, the "no worker"
// notice and shutdown of open streams.
#include <atomic>
#include <catch2/catch.hpp>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/sha256.h"
#include "server/store/database.h"
#include "tests/server/api/api_test_support.h"
#include "tests/support/status_testing.h"

namespace ptxbench::api_test {
namespace {

std::string SubmitOk(TestServer& server, const std::string& token,
                     const v1::SubmitRequest& request) {
  grpc::ClientContext context;
  WithDeadline(&context);
  Authorize(&context, token);
  v1::SubmitResponse response;
  auto status = server.submissions()->Submit(&context, request, &response);
  INFO(status.error_message());
  REQUIRE(status.ok());
  return response.submission().id();
}

// Collects a WatchSubmission stream on a thread until it ends.
class Watcher {
 public:
  Watcher(TestServer& server, const std::string& token, const std::string& id)
      : stub_(server.submissions()) {
    Authorize(&context_, token);
    WithDeadline(&context_, absl::Seconds(60));
    thread_ = std::thread([this, id] {
      v1::WatchSubmissionRequest request;
      request.set_submission_id(id);
      auto reader = stub_->WatchSubmission(&context_, request);
      v1::StageEvent event;
      while (reader->Read(&event)) {
        std::lock_guard<std::mutex> lock(mu_);
        events_.push_back(event);
        cv_.notify_all();
      }
      status_ = reader->Finish();
    });
  }
  ~Watcher() {
    context_.TryCancel();
    if (thread_.joinable()) thread_.join();
  }
  // Waits for the stream to end and returns every event.
  std::vector<v1::StageEvent> Finish(grpc::Status* status) {
    thread_.join();
    *status = status_;
    return events_;
  }
  // Waits until an event satisfies `pred`.
  bool WaitFor(const std::function<bool(const v1::StageEvent&)>& pred, absl::Duration timeout) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, absl::ToChronoNanoseconds(timeout), [&] {
      for (const auto& event : events_) {
        if (pred(event)) return true;
      }
      return false;
    });
  }

 private:
  std::unique_ptr<v1::SubmissionService::Stub> stub_;
  grpc::ClientContext context_;
  std::thread thread_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<v1::StageEvent> events_;
  grpc::Status status_;
};

std::vector<v1::Stage> StagesOf(const std::vector<v1::StageEvent>& events) {
  std::vector<v1::Stage> stages;
  for (const auto& event : events) {
    if (event.notice().empty()) stages.push_back(event.stage());
  }
  return stages;
}

TEST_CASE("submit, lease, report stages, complete: the watcher sees every stage and the verdict",
          "[api][flow]") {
  TestServerOptions options;
  options.metrics = true;
  TestServer server(options);
  const std::string vendor = server.CreateToken("acme", v1::ROLE_VENDOR);
  FakeWorker worker(server.channel(), server.CreateToken("fleet", v1::ROLE_WORKER), v1::ARCH_SM_90A,
                    "GPU-flow");
  REQUIRE(worker.Register().ok());
  const v1::SubmitRequest request = ValidSubmit(/*full=*/true);
  const std::string id = SubmitOk(server, vendor, request);
  Watcher watcher(server, vendor, id);
  worker.OpenLease(1);

  bool evaluated = false;
  v1::LeasedJob last_job;
  for (int jobs = 0; jobs < 2 && !evaluated; ++jobs) {
    auto job = worker.NextJob(absl::Seconds(15));
    REQUIRE(job.has_value());
    CHECK(job->submission_id() == id);
    CHECK(job->task_id() == kTaskId);
    CHECK(job->arch() == v1::ARCH_SM_90A);
    CHECK(job->source() == request.source());
    CHECK(job->task_version_hash().size() == 64);
    REQUIRE(job->has_launch_plan());
    CHECK(job->launch_plan().launches(0).kernel() == "gemm");
    CHECK(job->lease_seconds() == 60);
    if (job->kind() == v1::JOB_KIND_COMPILE) {
      REQUIRE(worker.ReportStage(*job, v1::STAGE_COMPILE, true).ok());
      v1::Verdict compiled = MakeVerdict(v1::VERDICT_CLASS_COMPILED);
      REQUIRE(worker.Complete(*job, compiled).ok());
    } else {
      REQUIRE(job->kind() == v1::JOB_KIND_EVALUATE);
      for (auto stage : {v1::STAGE_CORRECTNESS, v1::STAGE_TARGET_INSTRUCTIONS, v1::STAGE_TIMING}) {
        REQUIRE(worker.ReportStage(*job, stage, true).ok());
      }
      REQUIRE(worker.Complete(*job, MakeVerdict(v1::VERDICT_CLASS_PASS)).ok());
      evaluated = true;
    }
    last_job = *job;
  }
  REQUIRE(evaluated);

  grpc::Status status;
  const auto events = watcher.Finish(&status);
  INFO(status.error_message());
  REQUIRE(status.ok());
  const std::vector<v1::Stage> expected = {v1::STAGE_QUEUED,      v1::STAGE_COMPILE,
                                           v1::STAGE_CORRECTNESS, v1::STAGE_TARGET_INSTRUCTIONS,
                                           v1::STAGE_TIMING,      v1::STAGE_DONE};
  std::vector<v1::Stage> seen = StagesOf(events);
  // The store may record extra progress events (e.g. the evaluate job queued); the reported
  // stages must appear in order and DONE must be last.
  size_t next = 0;
  for (auto stage : seen) {
    if (next < expected.size() && stage == expected[next]) ++next;
  }
  CHECK(next == expected.size());
  REQUIRE(!events.empty());
  const v1::StageEvent& done = events.back();
  CHECK(done.stage() == v1::STAGE_DONE);
  CHECK(done.submission_id() == id);
  CHECK(done.verdict().verdict_class() == v1::VERDICT_CLASS_PASS);
  CHECK(done.verdict().tic());
  CHECK(done.verdict().speedup() == Approx(1.25));
  for (const auto& event : events) {
    if (event.stage() == v1::STAGE_COMPILE && event.has_result()) {
      CHECK(event.result().ok());
      CHECK(event.result().summary() == "stage STAGE_COMPILE done");
    }
  }

  // The stored submission carries the same verdict, with the worker's report intact.
  grpc::ClientContext context;
  Authorize(&context, vendor);
  v1::GetSubmissionRequest get;
  get.set_submission_id(id);
  v1::Submission submission;
  REQUIRE(server.submissions()->GetSubmission(&context, get, &submission).ok());
  CHECK(submission.state() == v1::SUBMISSION_STATE_FINISHED);
  CHECK(submission.stage() == v1::STAGE_DONE);
  CHECK(submission.verdict().verdict_class() == v1::VERDICT_CLASS_PASS);
  CHECK(submission.verdict().report_json() == R"({"worker":"fake"})");
  CHECK(submission.verdict().message() == "all workloads within tolerance");

  // A late watcher gets the whole history replayed, ending in the same verdict.
  Watcher late(server, vendor, id);
  const auto replayed = late.Finish(&status);
  REQUIRE(status.ok());
  CHECK(StagesOf(replayed) == StagesOf(events));

  // The lease is gone: completing again changes nothing.
  auto again = worker.Complete(last_job, MakeVerdict(v1::VERDICT_CLASS_WRONG_RESULT));
  CHECK(again.error_code() == grpc::StatusCode::FAILED_PRECONDITION);
  CHECK(absl::StrContains(again.error_message(), "lease lost"));

  const std::string metrics = HttpGet(server.server().metrics_port(), "/metrics");
  CHECK(absl::StrContains(metrics, "verdict_class=\"pass\"} 1"));
}

TEST_CASE("a Lease stream holds at most `slots` jobs until one completes", "[api][flow]") {
  TestServer server;
  const std::string vendor = server.CreateToken("acme", v1::ROLE_VENDOR);
  FakeWorker worker(server.channel(), server.CreateToken("fleet", v1::ROLE_WORKER), v1::ARCH_SM_90A,
                    "GPU-slots");
  REQUIRE(worker.Register().ok());
  for (int i = 0; i < 3; ++i) SubmitOk(server, vendor, ValidSubmit());
  worker.OpenLease(2);
  auto first = worker.NextJob(absl::Seconds(10));
  auto second = worker.NextJob(absl::Seconds(10));
  REQUIRE(first.has_value());
  REQUIRE(second.has_value());
  CHECK(first->job_id() != second->job_id());
  // Both slots are taken: the third job waits although it is queued.
  CHECK_FALSE(worker.NextJob(absl::Milliseconds(2500)).has_value());
  REQUIRE(worker.Complete(*first, MakeVerdict(v1::VERDICT_CLASS_COMPILED)).ok());
  auto third = worker.NextJob(absl::Seconds(10));
  REQUIRE(third.has_value());
  CHECK(third->job_id() != first->job_id());
  CHECK(third->job_id() != second->job_id());
  // A failed job frees its slot too (nothing else is queued, so nothing arrives).
  bool will_retry = true;
  REQUIRE(worker.Fail(*second, v1::FAILURE_KIND_KERNEL, &will_retry).ok());
  CHECK_FALSE(will_retry);
  CHECK_FALSE(worker.NextJob(absl::Milliseconds(1500)).has_value());
}

TEST_CASE("job calls are fenced by the lease", "[api][flow]") {
  TestServer server;
  const std::string vendor = server.CreateToken("acme", v1::ROLE_VENDOR);
  const std::string fleet = server.CreateToken("fleet", v1::ROLE_WORKER);
  FakeWorker worker(server.channel(), fleet, v1::ARCH_SM_90A, "GPU-fence-1");
  FakeWorker other(server.channel(), fleet, v1::ARCH_SM_90A, "GPU-fence-2");
  REQUIRE(worker.Register().ok());
  REQUIRE(other.Register().ok());
  CHECK(worker.worker_id() != other.worker_id());
  SubmitOk(server, vendor, ValidSubmit());
  worker.OpenLease(1);
  auto job = worker.NextJob(absl::Seconds(10));
  REQUIRE(job.has_value());
  v1::LeasedJob wrong_attempt = *job;
  wrong_attempt.set_attempt(job->attempt() + 1);
  CHECK(worker.ReportStage(wrong_attempt, v1::STAGE_COMPILE, true).error_code() ==
        grpc::StatusCode::FAILED_PRECONDITION);
  CHECK(worker.Complete(wrong_attempt, MakeVerdict(v1::VERDICT_CLASS_COMPILED)).error_code() ==
        grpc::StatusCode::FAILED_PRECONDITION);
  // Another worker cannot complete a job it does not hold.
  CHECK(other.Complete(*job, MakeVerdict(v1::VERDICT_CLASS_COMPILED)).error_code() ==
        grpc::StatusCode::FAILED_PRECONDITION);
  // The holder still can.
  CHECK(worker.Complete(*job, MakeVerdict(v1::VERDICT_CLASS_COMPILED)).ok());
  // Malformed job calls name the field.
  v1::LeasedJob no_id = *job;
  no_id.clear_job_id();
  auto invalid = worker.Complete(no_id, MakeVerdict(v1::VERDICT_CLASS_COMPILED));
  CHECK(invalid.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
  CHECK(absl::StartsWith(invalid.error_message(), "lease.job_id: required"));
  auto no_class = worker.Complete(*job, v1::Verdict());
  CHECK(no_class.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
  CHECK(absl::StartsWith(no_class.error_message(), "verdict.verdict_class: required"));
}

TEST_CASE(
    "a result whose COMMIT loses the database is UNAVAILABLE, and sent again it is stored once",
    "[api][flow]") {
  TestServer server;
  const std::string vendor = server.CreateToken("acme", v1::ROLE_VENDOR);
  FakeWorker worker(server.channel(), server.CreateToken("fleet", v1::ROLE_WORKER), v1::ARCH_SM_90A,
                    "GPU-in-doubt");
  REQUIRE(worker.Register().ok());
  const std::string id = SubmitOk(server, vendor, ValidSubmit());
  worker.OpenLease(1);
  auto job = worker.NextJob(absl::Seconds(10));
  REQUIRE(job.has_value());
  InstallSlowCommit(server.database(), "verdicts", "true");
  const bool complete = GENERATE(true, false);  // Complete, or Fail(KERNEL), which is final.
  INFO((complete ? "Complete" : "Fail"));
  auto send = [&]() -> grpc::Status {
    bool will_retry = true;
    if (complete) return worker.Complete(*job, MakeVerdict(v1::VERDICT_CLASS_COMPILED));
    return worker.Fail(*job, v1::FAILURE_KIND_KERNEL, &will_retry);
  };
  const grpc::Status lost = CallAndLoseTheCommit(server, send);
  INFO(lost.error_code() << " " << lost.error_message());
  // Not UNKNOWN: the worker would drop the verdict it holds and the job would wait for its
  // lease to expire and be evaluated a second time.
  CHECK(lost.error_code() == grpc::StatusCode::UNAVAILABLE);
  CHECK(absl::StrContains(lost.error_message(), "same lease"));
  CHECK(server.database().Scalar("SELECT count(*) FROM verdicts").value_or(std::nullopt) ==
        std::optional<std::string>("0"));
  RemoveSlowCommit(server.database(), "verdicts");
  grpc::Status again;
  for (int attempt = 0; attempt < 20; ++attempt) {
    again = send();
    if (again.error_code() != grpc::StatusCode::UNAVAILABLE) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
  }
  INFO(again.error_message());
  CHECK(again.ok());
  // Sent a third time, the fence refuses it: the result is stored once.
  CHECK(send().error_code() == grpc::StatusCode::FAILED_PRECONDITION);
  CHECK(server.database().Scalar("SELECT count(*) FROM verdicts").value_or(std::nullopt) ==
        std::optional<std::string>("1"));
  CHECK(server.database()
            .Scalar(absl::StrCat("SELECT state FROM submissions WHERE id = '", id, "'"))
            .value_or(std::nullopt) == std::optional<std::string>("finished"));
}

TEST_CASE("an expired lease is reaped and handed to another worker", "[api][flow]") {
  TestServerOptions options;
  options.lease_seconds = 3;
  options.reap_interval = absl::Milliseconds(500);
  TestServer server(options);
  const std::string vendor = server.CreateToken("acme", v1::ROLE_VENDOR);
  const std::string fleet = server.CreateToken("fleet", v1::ROLE_WORKER);
  FakeWorker silent(server.channel(), fleet, v1::ARCH_SM_90A, "GPU-silent");
  FakeWorker rescuer(server.channel(), fleet, v1::ARCH_SM_90A, "GPU-rescuer");
  REQUIRE(silent.Register().ok());
  REQUIRE(rescuer.Register().ok());
  const std::string id = SubmitOk(server, vendor, ValidSubmit());
  silent.OpenLease(1);
  auto lost = silent.NextJob(absl::Seconds(10));
  REQUIRE(lost.has_value());
  silent.CloseLease();
  // No heartbeat: within lease_seconds + reap_interval (+ retry backoff) the job is requeued.
  rescuer.StartHeartbeats(absl::Milliseconds(500));
  rescuer.OpenLease(1);
  auto rescued = rescuer.NextJob(absl::Seconds(20));
  REQUIRE(rescued.has_value());
  CHECK(rescued->job_id() == lost->job_id());
  CHECK(rescued->attempt() > lost->attempt());
  CHECK(rescued->submission_id() == id);
  // The silent worker learns its lease is lost and can change nothing.
  v1::HeartbeatResponse heartbeat;
  REQUIRE(silent.Heartbeat({*lost}, &heartbeat).ok());
  REQUIRE(heartbeat.lost_size() == 1);
  CHECK(heartbeat.lost(0).job_id() == lost->job_id());
  CHECK(silent.Complete(*lost, MakeVerdict(v1::VERDICT_CLASS_COMPILED)).error_code() ==
        grpc::StatusCode::FAILED_PRECONDITION);
  CHECK(rescuer.Complete(*rescued, MakeVerdict(v1::VERDICT_CLASS_COMPILED)).ok());
}

TEST_CASE("a restarted worker gets its predecessor's job back at once, not after its lease",
          "[api][flow][faults]") {
  TestServer server;  // 60 s leases: waiting one out would fail the deadlines below.
  const std::string vendor = server.CreateToken("acme", v1::ROLE_VENDOR);
  const std::string fleet = server.CreateToken("fleet", v1::ROLE_WORKER);
  FakeWorker before(server.channel(), fleet, v1::ARCH_SM_90A, "GPU-restart");
  REQUIRE(before.Register().ok());
  SubmitOk(server, vendor, ValidSubmit());
  before.OpenLease(1);
  auto job = before.NextJob(absl::Seconds(10));
  REQUIRE(job.has_value());
  before.CloseLease();  // The process dies with the job in hand.

  const absl::Time restarted = absl::Now();
  FakeWorker after(server.channel(), fleet, v1::ARCH_SM_90A, "GPU-restart");
  REQUIRE(after.Register().ok());
  REQUIRE(after.worker_id() == before.worker_id());
  {
    grpc::ClientContext context;
    Authorize(&context, server.admin_token());
    v1::ListWorkersResponse workers;
    REQUIRE(server.admin()->ListWorkers(&context, v1::ListWorkersRequest(), &workers).ok());
    REQUIRE(workers.workers_size() == 1);
    // A drain would otherwise wait for a job nobody runs.
    CHECK(workers.workers(0).jobs_held() == 0);
  }
  after.OpenLease(1);
  // Requeued as an infrastructure attempt: back after the retry backoff (1-3 s here).
  auto again = after.NextJob(absl::Seconds(10));
  REQUIRE(again.has_value());
  CHECK(again->job_id() == job->job_id());
  CHECK(again->attempt() == job->attempt() + 1);
  CHECK(absl::Now() - restarted < absl::Seconds(8));
  // The dead process's lease is fenced out; the new one completes.
  CHECK(before.Complete(*job, MakeVerdict(v1::VERDICT_CLASS_COMPILED)).error_code() ==
        grpc::StatusCode::FAILED_PRECONDITION);
  CHECK(after.Complete(*again, MakeVerdict(v1::VERDICT_CLASS_COMPILED)).ok());
}

TEST_CASE("a drained worker gets no new jobs and is told to drain", "[api][flow]") {
  TestServer server;
  const std::string vendor = server.CreateToken("acme", v1::ROLE_VENDOR);
  FakeWorker worker(server.channel(), server.CreateToken("fleet", v1::ROLE_WORKER), v1::ARCH_SM_90A,
                    "GPU-drain");
  REQUIRE(worker.Register().ok());
  {
    grpc::ClientContext context;
    Authorize(&context, server.admin_token());
    v1::DrainWorkerRequest request;
    request.set_worker_id(worker.worker_id());
    v1::Worker drained;
    REQUIRE(server.admin()->DrainWorker(&context, request, &drained).ok());
    CHECK(drained.state() == v1::WORKER_STATE_DRAINING);
  }
  {
    grpc::ClientContext context;
    Authorize(&context, server.admin_token());
    v1::ListWorkersResponse workers;
    REQUIRE(server.admin()->ListWorkers(&context, v1::ListWorkersRequest(), &workers).ok());
    REQUIRE(workers.workers_size() == 1);
    CHECK(workers.workers(0).state() == v1::WORKER_STATE_DRAINING);
    CHECK(workers.workers(0).identity().gpu_uuid() == "GPU-drain");
    CHECK(workers.workers(0).identity().harness_version() == "test");
  }
  SubmitOk(server, vendor, ValidSubmit());
  worker.OpenLease(1);
  CHECK_FALSE(worker.NextJob(absl::Milliseconds(2500)).has_value());
  v1::HeartbeatResponse heartbeat;
  REQUIRE(worker.Heartbeat({}, &heartbeat).ok());
  CHECK(heartbeat.drain());
  // The job is still queued for others.
  grpc::ClientContext context;
  Authorize(&context, server.admin_token());
  v1::QueueStatsResponse stats;
  REQUIRE(server.admin()->QueueStats(&context, v1::QueueStatsRequest(), &stats).ok());
  int64_t queued = 0;
  for (const auto& depth : stats.depths()) queued += depth.queued();
  CHECK(queued == 1);
}

TEST_CASE("a watcher is told when no worker can run the job, and sees a cancellation end it",
          "[api][flow]") {
  TestServer server;
  const std::string vendor = server.CreateToken("acme", v1::ROLE_VENDOR);
  v1::SubmitRequest request = ValidSubmit();
  request.set_arch(v1::ARCH_SM_100A);
  const std::string id = SubmitOk(server, vendor, request);
  Watcher watcher(server, vendor, id);
  CHECK(watcher.WaitFor(
      [](const v1::StageEvent& event) {
        return event.notice() == "no registered worker for sm_100a; waiting";
      },
      absl::Seconds(10)));
  grpc::ClientContext context;
  Authorize(&context, vendor);
  v1::CancelSubmissionRequest cancel;
  cancel.set_submission_id(id);
  v1::Submission cancelled;
  REQUIRE(server.submissions()->CancelSubmission(&context, cancel, &cancelled).ok());
  grpc::Status status;
  const auto events = watcher.Finish(&status);
  CHECK(status.ok());
  REQUIRE(!events.empty());
  CHECK(events.back().stage() == v1::STAGE_DONE);
  CHECK(events.back().verdict().verdict_class() == v1::VERDICT_CLASS_CANCELLED);
}

TEST_CASE("an idle Lease stream survives client keepalive pings", "[api][flow]") {
  // A worker pings its connection while its Lease stream waits for work; the stream must stay
  // open and still deliver. Scaled down: pings every 300 ms against an allowed 200 ms.
  TestServerOptions options;
  options.min_client_ping_interval = absl::Milliseconds(200);
  TestServer server(options);
  const std::string vendor = server.CreateToken("acme", v1::ROLE_VENDOR);
  // Its own channel rather than Dial's: pinging this often on an idle stream needs the
  // ping-rate arguments that no program of ours sets (Dial pings every 20 s).
  grpc::ChannelArguments arguments;
  arguments.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 300);
  arguments.SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  arguments.SetInt(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
  arguments.SetInt(GRPC_ARG_HTTP2_MIN_SENT_PING_INTERVAL_WITHOUT_DATA_MS, 300);
  auto channel =
      grpc::CreateCustomChannel(server.address(), grpc::InsecureChannelCredentials(), arguments);
  FakeWorker worker(channel, server.CreateToken("fleet", v1::ROLE_WORKER), v1::ARCH_SM_90A,
                    "GPU-keepalive");
  REQUIRE(worker.Register().ok());
  worker.OpenLease(1);
  // About 13 pings on an idle stream.
  CHECK_FALSE(worker.NextJob(absl::Seconds(4)).has_value());
  SubmitOk(server, vendor, ValidSubmit());
  auto job = worker.NextJob(absl::Seconds(10));
  CHECK(job.has_value());
}

TEST_CASE("GracefulStop ends open Lease and Watch streams promptly", "[api][flow]") {
  TestServer server;
  const std::string vendor = server.CreateToken("acme", v1::ROLE_VENDOR);
  FakeWorker worker(server.channel(), server.CreateToken("fleet", v1::ROLE_WORKER),
                    v1::ARCH_SM_100A, "GPU-stop");
  REQUIRE(worker.Register().ok());
  worker.OpenLease(1);
  const std::string id = SubmitOk(server, vendor, ValidSubmit());  // sm_90a: never leased here.
  Watcher watcher(server, vendor, id);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const absl::Time start = absl::Now();
  server.server().GracefulStop();
  CHECK(absl::Now() - start < absl::Seconds(3));
  grpc::Status status;
  watcher.Finish(&status);
  CHECK(status.error_code() == grpc::StatusCode::UNAVAILABLE);
  CHECK(worker.CloseLease().ok());
}

}  // namespace
}  // namespace ptxbench::api_test

namespace ptxbench::api_test {
namespace {

using ::ptxbench::testing::ValueOrFail;

TEST_CASE(
    "a graceful stop answers Submits in flight UNAVAILABLE, never CANCELLED, and keeps "
    "every one it accepted",
    "[api][flow][faults]") {
  TestServer server;
  const std::string vendor = server.CreateToken("acme", v1::ROLE_VENDOR);
  constexpr int kClients = 8;
  std::mutex mu;
  std::map<grpc::StatusCode, int> codes;
  std::map<grpc::StatusCode, std::string> messages;
  std::vector<std::string> accepted;
  std::atomic<bool> stop{false};
  std::vector<std::thread> clients;
  clients.reserve(kClients);
  for (int c = 0; c < kClients; ++c) {
    clients.emplace_back([&, c] {
      auto stub = server.submissions();
      for (int i = 0; !stop; ++i) {
        grpc::ClientContext context;
        WithDeadline(&context, absl::Seconds(20));
        Authorize(&context, vendor);
        v1::SubmitRequest request = ValidSubmit();
        request.set_source(absl::StrCat(request.source(), "// client ", c, " submit ", i, "\n"));
        v1::SubmitResponse response;
        grpc::Status status = stub->Submit(&context, request, &response);
        std::lock_guard<std::mutex> lock(mu);
        ++codes[status.error_code()];
        if (!status.ok()) messages[status.error_code()] = status.error_message();
        if (status.ok()) accepted.push_back(response.submission().id());
        if (status.error_code() == grpc::StatusCode::UNAVAILABLE) return;
      }
    });
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  const std::string database_url = server.server().database_url();
  server.server().GracefulStop();
  stop = true;
  for (auto& client : clients) client.join();
  std::string tally;
  for (const auto& [code, count] : codes) {
    absl::StrAppend(&tally, code, ":", count, " (", messages[code], ") ");
  }
  INFO("status codes: " << tally);
  CHECK(codes.count(grpc::StatusCode::CANCELLED) == 0);
  for (const auto& [code, count] : codes) {
    CHECK((code == grpc::StatusCode::OK || code == grpc::StatusCode::UNAVAILABLE));
  }
  REQUIRE(codes[grpc::StatusCode::OK] > 0);
  // Every accepted submission is stored: OK was said only after the commit.
  auto store = ValueOrFail(store::Store::Connect([&] {
    store::StoreOptions options;
    options.database_url = database_url;
    return options;
  }()));
  for (const std::string& id : accepted) REQUIRE_OK(store->GetSubmission(id, ""));
}

TEST_CASE("a graceful stop answers a Submit stuck on the store UNAVAILABLE within the grace",
          "[api][flow][faults]") {
  TestServer server;  // shutdown_grace 2 s.
  const std::string vendor = server.CreateToken("acme", v1::ROLE_VENDOR);
  const std::string url = server.server().database_url();
  // Another session holds the tenant's row lock for 6 s: a Submit waits for it (its insert
  // takes a key-share lock on the tenant), as it would on a database that stopped answering.
  std::thread locker([&] {
    (void)store::RunSql(url,
                        "SELECT 1 FROM tenants WHERE name = 'acme' FOR UPDATE; "
                        "SELECT pg_sleep(6)");
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  grpc::Status stuck;
  std::thread submitter([&] {
    grpc::ClientContext context;
    WithDeadline(&context, absl::Seconds(30));
    Authorize(&context, vendor);
    v1::SubmitResponse response;
    stuck = server.submissions()->Submit(&context, ValidSubmit(), &response);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  const absl::Time stopping = absl::Now();
  server.server().GracefulStop();
  submitter.join();
  WARN("stuck Submit: " << stuck.error_code() << ": " << stuck.error_message() << " after "
                        << absl::FormatDuration(absl::Now() - stopping));
  CHECK(stuck.error_code() == grpc::StatusCode::UNAVAILABLE);
  CHECK(absl::Now() - stopping < absl::Seconds(8));
  locker.join();
}

// ---------------------------------------------------------------- compile artifacts (issue 16)

// A module as a compile-only worker sends one: bytes, their digests, the versions.
v1::CompileArtifact TestArtifact(const std::string& tag) {
  v1::CompileArtifact artifact;
  artifact.set_cubin(std::string({'\x7f', 'E', 'L', 'F', '\x02', '\x01', '\x00', '\xff'}) + tag);
  artifact.set_ptx(absl::StrCat(".version 8.7\n.target sm_90a\n// ", tag, "\n"));
  artifact.set_cubin_sha256(Sha256Hex(artifact.cubin()));
  artifact.set_ptx_sha256(Sha256Hex(artifact.ptx()));
  artifact.set_compile_event_json(R"({"outcome": "compiled"})");
  artifact.set_nvrtc_version("13.0.48");
  artifact.set_ptxas_version("V13.0.48");
  artifact.set_harness_version("0.3.0");
  return artifact;
}

v1::CompleteRequest CompiledWith(const v1::CompileArtifact& artifact) {
  v1::CompleteRequest request;
  *request.mutable_verdict() = MakeVerdict(v1::VERDICT_CLASS_COMPILED);
  *request.mutable_artifact() = artifact;
  return request;
}

v1::CompleteRequest PassedWith(v1::ArtifactOutcome outcome) {
  v1::CompleteRequest request;
  *request.mutable_verdict() = MakeVerdict(v1::VERDICT_CLASS_PASS);
  request.mutable_artifact_use()->set_outcome(outcome);
  request.mutable_artifact_use()->set_detail("fake GPU worker");
  return request;
}

std::string Sql(TestServer& server, const std::string& sql) {
  auto value = server.database().Scalar(sql);
  INFO(sql << ": " << value.status().ToString());
  REQUIRE(value.ok());
  return value->value_or("NULL");
}

TEST_CASE(
    "a compile job's artifact reaches its evaluate job; a mismatch distrusts the producer and "
    "re-queues what used its artifacts",
    "[api][flow][artifact]") {
  TestServerOptions options;
  options.metrics = true;
  TestServer server(options);
  const std::string vendor = server.CreateToken("acme", v1::ROLE_VENDOR);
  const std::string fleet = server.CreateToken("fleet", v1::ROLE_WORKER);
  FakeWorker producer(server.channel(), fleet, v1::ARCH_UNSPECIFIED, "", /*compile_only=*/true);
  FakeWorker gpu(server.channel(), fleet, v1::ARCH_SM_90A, "GPU-artifacts");
  REQUIRE(producer.Register().ok());
  REQUIRE(gpu.Register().ok());
  const std::string used = SubmitOk(server, vendor, ValidSubmit(/*full=*/true));
  const std::string caught = SubmitOk(server, vendor, ValidSubmit(/*full=*/true));
  producer.OpenLease(2);
  std::map<std::string, v1::LeasedJob> compiles;  // By submission.
  for (int i = 0; i < 2; ++i) {
    auto job = producer.NextJob(absl::Seconds(15));
    REQUIRE(job.has_value());
    REQUIRE(job->kind() == v1::JOB_KIND_COMPILE);
    REQUIRE(producer.Complete(*job, CompiledWith(TestArtifact(job->submission_id()))).ok());
    compiles[job->submission_id()] = *job;
  }

  gpu.OpenLease(1);
  auto first = gpu.NextJob(absl::Seconds(15));
  REQUIRE(first.has_value());
  REQUIRE(first->kind() == v1::JOB_KIND_EVALUATE);
  REQUIRE(first->submission_id() == used);
  REQUIRE(first->has_artifact());
  const v1::CompileArtifact sent = TestArtifact(used);
  CHECK(first->artifact().cubin() == sent.cubin());
  CHECK(first->artifact().ptx() == sent.ptx());
  CHECK(first->artifact().cubin_sha256() == sent.cubin_sha256());
  CHECK(first->artifact().compile_event_json() == sent.compile_event_json());
  CHECK(first->artifact().harness_version() == sent.harness_version());
  CHECK(first->artifact().producer_job_id() == compiles[used].job_id());
  CHECK(first->artifact().producer_worker_id() == producer.worker_id());
  REQUIRE(gpu.Complete(*first, PassedWith(v1::ARTIFACT_OUTCOME_USED)).ok());

  auto second = gpu.NextJob(absl::Seconds(15));
  REQUIRE(second.has_value());
  REQUIRE(second->submission_id() == caught);
  REQUIRE(second->has_artifact());
  // Only the producer leases from here on, so that it takes the re-judge's compile job.
  gpu.CloseLease();
  REQUIRE(gpu.Complete(*second, PassedWith(v1::ARTIFACT_OUTCOME_MISMATCH)).ok());

  // Distrusted, audited with the reporter as the actor, counted.
  CHECK(Sql(server, "SELECT distrusted_at IS NOT NULL FROM workers WHERE id = '" +
                        producer.worker_id() + "'") == "t");
  CHECK(Sql(server, "SELECT actor FROM audit_log WHERE entity = 'worker' AND entity_id = '" +
                        producer.worker_id() + "' AND detail ->> 'distrusted' = 'true'") ==
        "worker:" + gpu.worker_id());
  const std::string metrics = HttpGet(server.server().metrics_port(), "/metrics");
  CHECK(absl::StrContains(metrics, "ptxbench_compile_artifact_reports_total{outcome=\"used\"} 1"));
  CHECK(absl::StrContains(metrics,
                          "ptxbench_compile_artifact_reports_total{outcome=\"mismatch\"} 1"));
  CHECK(absl::StrContains(metrics, "ptxbench_workers_distrusted_total 1"));
  // The verdict that used the producer's artifact unverified is judged again; the one the GPU
  // worker compiled itself stands.
  // (Queued, or already running: the producer's open stream may have taken its compile job.)
  CHECK(Sql(server,
            "SELECT state IN ('queued', 'running') AND judging_round = 1 FROM submissions "
            "WHERE id = '" +
                used + "'") == "t");
  CHECK(Sql(server, "SELECT state || ' ' || judging_round FROM submissions WHERE id = '" + caught +
                        "'") == "finished 0");

  // The re-judge's compile, by the distrusted producer: its artifact is not handed out.
  auto recompile = producer.NextJob(absl::Seconds(15));
  REQUIRE(recompile.has_value());
  REQUIRE(recompile->submission_id() == used);
  REQUIRE(producer.Complete(*recompile, CompiledWith(TestArtifact("round 1"))).ok());
  gpu.OpenLease(1);
  auto again = gpu.NextJob(absl::Seconds(15));
  REQUIRE(again.has_value());
  CHECK(again->submission_id() == used);
  CHECK(again->kind() == v1::JOB_KIND_EVALUATE);
  CHECK_FALSE(again->has_artifact());
}

TEST_CASE("bad compile artifacts and reports are refused, naming the field",
          "[api][flow][artifact]") {
  TestServer server;
  const std::string vendor = server.CreateToken("acme", v1::ROLE_VENDOR);
  const std::string fleet = server.CreateToken("fleet", v1::ROLE_WORKER);
  FakeWorker producer(server.channel(), fleet, v1::ARCH_UNSPECIFIED, "", /*compile_only=*/true);
  REQUIRE(producer.Register().ok());
  SubmitOk(server, vendor, ValidSubmit(/*full=*/true));
  producer.OpenLease(1);
  auto job = producer.NextJob(absl::Seconds(15));
  REQUIRE(job.has_value());
  const auto refused = [&](const v1::LeasedJob& leased, const v1::CompleteRequest& request,
                           const std::string& field) {
    const grpc::Status status = producer.Complete(leased, request);
    INFO(status.error_message());
    CHECK(status.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
    CHECK(absl::StartsWith(status.error_message(), field + ":"));
  };
  v1::CompileArtifact bad = TestArtifact("x");
  bad.set_cubin_sha256(Sha256Hex("something else"));
  refused(*job, CompiledWith(bad), "artifact.cubin_sha256");
  bad = TestArtifact("x");
  bad.set_ptx(bad.ptx() + " ");
  refused(*job, CompiledWith(bad), "artifact.ptx_sha256");
  // Over 1 MiB of cubin and PTX (proto/wire_limits.h), though the request is under its 4 MiB.
  bad = TestArtifact("x");
  bad.set_cubin(std::string(size_t{1} << 20, '\x01'));
  bad.set_cubin_sha256(Sha256Hex(bad.cubin()));
  refused(*job, CompiledWith(bad), "artifact");
  bad = TestArtifact("x");
  bad.set_producer_worker_id(producer.worker_id());
  refused(*job, CompiledWith(bad), "artifact.producer_worker_id");
  bad = TestArtifact("x");
  bad.clear_nvrtc_version();
  refused(*job, CompiledWith(bad), "artifact.nvrtc_version");
  // An artifact beside a verdict that did not compile.
  v1::CompleteRequest error = CompiledWith(TestArtifact("x"));
  *error.mutable_verdict() = MakeVerdict(v1::VERDICT_CLASS_COMPILE_ERROR);
  refused(*job, error, "artifact");
  // A report from a compile job, and a report without an outcome.
  v1::CompleteRequest report = PassedWith(v1::ARTIFACT_OUTCOME_USED);
  *report.mutable_verdict() = MakeVerdict(v1::VERDICT_CLASS_COMPILED);
  refused(*job, report, "artifact_use");
  report.mutable_artifact_use()->set_outcome(v1::ARTIFACT_OUTCOME_UNSPECIFIED);
  refused(*job, report, "artifact_use.outcome");
  // None of those was stored or requeued the job: its holder completes it.
  REQUIRE(producer.Complete(*job, CompiledWith(TestArtifact("x"))).ok());
  CHECK(Sql(server, "SELECT count(*) FROM compile_artifacts") == "1");

  // An evaluate job cannot send an artifact.
  FakeWorker gpu(server.channel(), fleet, v1::ARCH_SM_90A, "GPU-refusals");
  REQUIRE(gpu.Register().ok());
  producer.CloseLease();
  gpu.OpenLease(1);
  auto evaluate = gpu.NextJob(absl::Seconds(15));
  REQUIRE(evaluate.has_value());
  REQUIRE(evaluate->kind() == v1::JOB_KIND_EVALUATE);
  v1::CompleteRequest with_artifact = PassedWith(v1::ARTIFACT_OUTCOME_USED);
  *with_artifact.mutable_artifact() = TestArtifact("y");
  grpc::Status status = gpu.Complete(*evaluate, with_artifact);
  CHECK(status.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
  CHECK(absl::StartsWith(status.error_message(), "artifact:"));
  REQUIRE(gpu.Complete(*evaluate, PassedWith(v1::ARTIFACT_OUTCOME_USED)).ok());
}

}  // namespace
}  // namespace ptxbench::api_test
