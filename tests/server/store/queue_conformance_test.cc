// The queue conformance suite: what every scheduler built on this store may rely on, checked
// against a real PostgreSQL (a fresh migrated database per test case, tests/support).
// Concurrency is real too: threads with their own worker rows race on one Store.
#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "proto/wire_names.h"
#include "server/store/store.h"
#include "tests/support/pg_fixture.h"
#include "tests/support/status_testing.h"

namespace ptxbench::store {
namespace {

using ::ptxbench::testing::PgFixture;
using ::ptxbench::testing::ValueOrFail;

constexpr char kAcme[] = "acme";
constexpr char kGlobex[] = "globex";

TenantRow Tenant(const std::string& name) {
  TenantRow tenant;
  tenant.name = name;
  return tenant;
}

// The tests name enums by their stored names, as a reader of the database would; a name the
// wire does not know becomes a value no enumerator has (which the store must refuse).
template <typename Enum>
Enum Named(absl::StatusOr<Enum> parsed) {
  return parsed.ok() ? *parsed : static_cast<Enum>(99);
}
v1::Arch ArchNamed(const std::string& name) { return Named(wire::ParseArch(name)); }
v1::VerdictClass ClassNamed(const std::string& name) {
  return Named(wire::ParseVerdictClass(name));
}

TokenRow Token(const std::string& token_id, const std::string& tenant, const std::string& role) {
  TokenRow token;
  token.token_id = token_id;
  token.tenant = tenant;
  token.role = Named(wire::ParseRole(role));
  return token;
}

StoreOptions Options(absl::Duration lease_duration = absl::Seconds(60),
                     absl::Duration retry_backoff_base = absl::Seconds(2),
                     int max_infrastructure_attempts = 3, int pool_size = 8) {
  StoreOptions options;
  options.lease_duration = lease_duration;
  options.retry_backoff_base = retry_backoff_base;
  options.max_infrastructure_attempts = max_infrastructure_attempts;
  options.pool_size = pool_size;
  return options;
}

SubmissionFilter Filter(const std::string& tenant, const std::string& session_id = "",
                        int page_size = 0, const std::string& page_token = "") {
  SubmissionFilter filter;
  filter.tenant = tenant;
  filter.session_id = session_id;
  filter.page_size = page_size;
  filter.page_token = page_token;
  return filter;
}

void CreateTenants(Store& store) {
  REQUIRE_OK(store.CreateTenant(Tenant(kAcme)));
  REQUIRE_OK(store.CreateTenant(Tenant(kGlobex)));
}

NewSubmission MakeSubmission(const std::string& tenant, const std::string& arch = "sm_90a",
                             const std::string& scope = "full") {
  static std::atomic<int> counter{0};
  NewSubmission submission;
  submission.tenant = tenant;
  submission.task_id = "gemm_n7168_k5120";
  submission.task_version_hash = "3f2a9c";
  submission.arch = ArchNamed(arch);
  submission.language = v1::SOURCE_LANGUAGE_PTX;
  submission.source = absl::StrCat("// kernel ", counter++, "\n.version 8.7\n.target ", arch, "\n");
  submission.model = "test-model";
  submission.session_id = "session-1";
  submission.knowledge_level = v1::KNOWLEDGE_LEVEL_TEMPLATES;
  submission.scope = Named(wire::ParseScope(scope));
  return submission;
}

SubmissionRow Submit(Store& store, const std::string& tenant, const std::string& arch = "sm_90a",
                     const std::string& scope = "full") {
  return ValueOrFail(store.CreateSubmission(MakeSubmission(tenant, arch, scope)));
}

WorkerRow RegisterGpu(Store& store, const std::string& hostname, const std::string& arch) {
  WorkerRegistration registration;
  registration.hostname = hostname;
  registration.arch = ArchNamed(arch);
  registration.gpu_name = arch == "sm_90a" ? "NVIDIA H200" : "NVIDIA B200";
  registration.gpu_uuid = "GPU-" + hostname;
  registration.identity_json = R"({"driver_version": "580.65", "cuda_version": "13.0"})";
  return ValueOrFail(store.RegisterWorker(registration));
}

WorkerRow RegisterCompiler(Store& store, const std::string& hostname) {
  WorkerRegistration registration;
  registration.hostname = hostname;
  registration.compile_only = true;
  return ValueOrFail(store.RegisterWorker(registration));
}

VerdictRow MakeVerdict(const std::string& verdict_class, const std::string& message = "") {
  VerdictRow verdict;
  verdict.verdict_class = ClassNamed(verdict_class);
  verdict.compiled = verdict_class != "compile_error";
  verdict.correct = verdict_class == "pass";
  verdict.target_executed = verdict_class == "pass";
  verdict.tic = verdict_class == "pass";
  verdict.message = message;
  return verdict;
}

std::optional<LeasedJobRow> Lease(Store& store, const std::string& worker_id) {
  return ValueOrFail(store.LeaseJob(worker_id));
}

// Polls LeaseJob until a job comes (a retry's not_before passes) or `limit` elapses.
std::optional<LeasedJobRow> LeaseWithin(Store& store, const std::string& worker_id,
                                        absl::Duration limit) {
  const absl::Time deadline = absl::Now() + limit;
  while (absl::Now() < deadline) {
    if (auto job = Lease(store, worker_id)) return job;
    absl::SleepFor(absl::Milliseconds(10));
  }
  return std::nullopt;
}

std::vector<std::string> EventStages(Store& store, const std::string& submission_id) {
  std::vector<std::string> stages;
  for (const StageEventRow& event : ValueOrFail(store.ListStageEvents(submission_id, 0))) {
    stages.push_back(event.kind == EventKind::kNotice ? "notice" : wire::StageName(event.stage));
  }
  return stages;
}

TEST_CASE_METHOD(PgFixture, "sixteen concurrent leasers never share a job and lease each job once",
                 "[store][queue]") {
  auto store = ConnectStore(Options());
  CreateTenants(*store);
  constexpr int kJobs = 160;
  constexpr int kLeasers = 16;
  for (int i = 0; i < kJobs; ++i) {
    Submit(*store, i % 2 == 0 ? kAcme : kGlobex, i % 3 == 0 ? "sm_100a" : "sm_90a", "compile_only");
  }
  std::vector<std::string> worker_ids;
  for (int i = 0; i < kLeasers; ++i) {
    worker_ids.push_back(RegisterCompiler(*store, absl::StrCat("compiler-", i)).worker_id);
  }

  std::atomic<int> completed{0};
  std::vector<std::vector<LeaseRef>> leased(kLeasers);
  std::vector<std::string> errors(kLeasers);
  std::vector<std::thread> threads;
  const absl::Time deadline = absl::Now() + absl::Seconds(60);
  for (int i = 0; i < kLeasers; ++i) {
    threads.emplace_back([&, i] {
      while (completed.load() < kJobs) {
        if (absl::Now() > deadline) {
          errors[i] = "deadline passed";
          return;
        }
        auto job = store->LeaseJob(worker_ids[i]);
        if (!job.ok()) {
          errors[i] = job.status().ToString();
          return;
        }
        if (!job->has_value()) {
          std::this_thread::sleep_for(std::chrono::milliseconds(2));
          continue;
        }
        leased[i].push_back((*job)->lease);
        absl::Status done = store->CompleteJob((*job)->lease, MakeVerdict("compiled"));
        if (!done.ok()) {
          errors[i] = done.ToString();
          return;
        }
        ++completed;
      }
    });
  }
  for (std::thread& thread : threads) thread.join();

  for (const std::string& error : errors) {
    INFO(error);
    CHECK(error.empty());
  }
  std::set<std::string> distinct;
  int total = 0;
  int leasers_that_worked = 0;
  for (int i = 0; i < kLeasers; ++i) {
    leasers_that_worked += leased[i].empty() ? 0 : 1;
    for (const LeaseRef& lease : leased[i]) {
      ++total;
      distinct.insert(lease.job_id);
      CHECK(lease.attempt == 1);
      CHECK(lease.worker_id == worker_ids[i]);
    }
  }
  REQUIRE(total == kJobs);
  REQUIRE(distinct.size() == static_cast<size_t>(kJobs));
  // Not a fairness claim, only evidence that the leasers really ran concurrently.
  CHECK(leasers_that_worked > 1);
  REQUIRE(database().Scalar("SELECT count(*) FROM submissions WHERE state = 'finished'").value() ==
          std::to_string(kJobs));
  REQUIRE(
      database().Scalar("SELECT count(*) FROM verdicts WHERE verdict_class = 'compiled'").value() ==
      std::to_string(kJobs));
  REQUIRE(ValueOrFail(store->QueueDepths()).empty());
}

TEST_CASE_METHOD(PgFixture, "a completion that finishes its submission says which, with its labels",
                 "[store][queue]") {
  auto store = ConnectStore(Options());
  CreateTenants(*store);
  const WorkerRow compiler = RegisterCompiler(*store, "cpu-1");
  const WorkerRow gpu = RegisterGpu(*store, "gpu-1", "sm_90a");
  const SubmissionRow submission = Submit(*store, kAcme);

  // A compile job of a full-scope submission that compiled does not finish it.
  std::optional<LeasedJobRow> compile = Lease(*store, compiler.worker_id);
  REQUIRE(compile.has_value());
  std::optional<FinishedSubmission> finished = FinishedSubmission{};
  REQUIRE_OK(store->CompleteJob(compile->lease, MakeVerdict("compiled"), &finished));
  REQUIRE_FALSE(finished.has_value());

  // Its evaluate job does, and the labels are the submission's.
  std::optional<LeasedJobRow> evaluate = Lease(*store, gpu.worker_id);
  REQUIRE(evaluate.has_value());
  VerdictRow pass = MakeVerdict("pass");
  pass.speedup = 0.97;
  REQUIRE_OK(store->CompleteJob(evaluate->lease, pass, &finished));
  REQUIRE(finished.has_value());
  CHECK(finished->id == submission.id);
  CHECK(finished->tenant == kAcme);
  CHECK(finished->model == "test-model");
  CHECK(finished->task_id == "gemm_n7168_k5120");
  CHECK(finished->arch == v1::ARCH_SM_90A);
  CHECK(finished->verdict_class == v1::VERDICT_CLASS_PASS);
  CHECK(finished->speedup == 0.97);

  // A refused second completion leaves nothing behind.
  std::optional<FinishedSubmission> again;
  REQUIRE(IsLeaseLost(store->CompleteJob(evaluate->lease, pass, &again)));
  REQUIRE_FALSE(again.has_value());
}

// Every verdict class the engine can give is storable (migrations/0008_target_work_verdicts:
// before it, 0001's CHECK refused the strong-TIC classes and such a job retried until it ended
// as an infrastructure failure).
TEST_CASE_METHOD(PgFixture, "the strong-TIC verdict classes are stored like any other",
                 "[store][queue]") {
  auto store = ConnectStore(Options());
  CreateTenants(*store);
  const WorkerRow compiler = RegisterCompiler(*store, "cpu-1");
  const WorkerRow gpu = RegisterGpu(*store, "gpu-1", "sm_90a");
  for (const char* verdict_class : {"target_work_insufficient", "profiled_path_differs"}) {
    INFO(verdict_class);
    const SubmissionRow submission = Submit(*store, kAcme);
    std::optional<LeasedJobRow> compile = Lease(*store, compiler.worker_id);
    REQUIRE(compile.has_value());
    REQUIRE_OK(store->CompleteJob(compile->lease, MakeVerdict("compiled")));
    std::optional<LeasedJobRow> evaluate = Lease(*store, gpu.worker_id);
    REQUIRE(evaluate.has_value());
    VerdictRow verdict = MakeVerdict(verdict_class, "wgmma did 0.3 % of the task's FLOPs");
    verdict.correct = true;
    verdict.target_executed = true;
    REQUIRE_OK(store->CompleteJob(evaluate->lease, verdict));
    const SubmissionRow finished = ValueOrFail(store->GetSubmission(submission.id, kAcme));
    REQUIRE(finished.verdict.has_value());
    CHECK(finished.verdict->verdict_class == ClassNamed(verdict_class));
    CHECK_FALSE(finished.verdict->tic);
  }
}

TEST_CASE_METHOD(PgFixture, "a stale worker is fenced out once its lease is reaped and re-leased",
                 "[store][queue]") {
  auto store = ConnectStore(Options(absl::Milliseconds(200), absl::ZeroDuration()));
  CreateTenants(*store);
  SubmissionRow submission = Submit(*store, kAcme);
  WorkerRow stale = RegisterGpu(*store, "h200-a", "sm_90a");
  WorkerRow fresh = RegisterGpu(*store, "h200-b", "sm_90a");

  std::optional<LeasedJobRow> first = Lease(*store, stale.worker_id);
  REQUIRE(first.has_value());
  REQUIRE(first->lease.attempt == 1);
  absl::SleepFor(absl::Milliseconds(300));
  REQUIRE(ValueOrFail(store->ReapExpiredLeases()) == 1);
  // Both workers were silent for a lease period, so the reaper marked them offline; the fresh
  // one comes back with a heartbeat, the stale one never does.
  REQUIRE(ValueOrFail(store->Heartbeat(fresh.worker_id, {}, true, "")).lost.empty());
  std::optional<LeasedJobRow> second = Lease(*store, fresh.worker_id);
  REQUIRE(second.has_value());
  REQUIRE(second->lease.job_id == first->lease.job_id);
  REQUIRE(second->lease.attempt == 2);

  // Every call of the stale worker about its old lease is refused and changes nothing.
  HeartbeatResult beat = ValueOrFail(store->Heartbeat(stale.worker_id, {first->lease}, true, ""));
  REQUIRE(beat.lost.size() == 1);
  REQUIRE(beat.lost[0].job_id == first->lease.job_id);
  REQUIRE(beat.cancelled_job_ids.empty());
  absl::Status report = store->ReportStage(first->lease, v1::STAGE_COMPILE, R"({"ok": true})");
  REQUIRE(IsLeaseLost(report));
  REQUIRE_THAT(std::string(report.message()), Catch::Contains("leased again"));
  REQUIRE(IsLeaseLost(store->CompleteJob(first->lease, MakeVerdict("pass", "stale"))));
  REQUIRE(
      IsLeaseLost(store->FailJob(first->lease, v1::FAILURE_KIND_INFRASTRUCTURE, "stale").status()));
  REQUIRE(IsLeaseLost(store->FailJob(first->lease, v1::FAILURE_KIND_KERNEL, "stale").status()));
  // The same worker with the new attempt number would be a different lease: the fence is on
  // all three parts.
  LeaseRef wrong_worker = second->lease;
  wrong_worker.worker_id = stale.worker_id;
  REQUIRE(IsLeaseLost(store->CompleteJob(wrong_worker, MakeVerdict("pass"))));

  // The current holder is unaffected, and its verdict is stored exactly once.
  REQUIRE_OK(store->ReportStage(second->lease, v1::STAGE_COMPILE, R"({"ok": true})"));
  REQUIRE_OK(store->CompleteJob(second->lease, MakeVerdict("compile_error", "from the holder")));
  REQUIRE(IsLeaseLost(store->CompleteJob(second->lease, MakeVerdict("pass", "twice"))));
  SubmissionRow finished = ValueOrFail(store->GetSubmission(submission.id, kAcme));
  REQUIRE(finished.state == v1::SUBMISSION_STATE_FINISHED);
  REQUIRE(finished.verdict.has_value());
  REQUIRE(finished.verdict->verdict_class == v1::VERDICT_CLASS_COMPILE_ERROR);
  REQUIRE(finished.verdict->message == "from the holder");
  REQUIRE(database().Scalar("SELECT count(*) FROM verdicts").value() == "1");

  // The audit log tells the story with its actors.
  std::vector<AuditRow> audit =
      ValueOrFail(store->ListAuditLog(AuditEntity::kJob, first->lease.job_id));
  std::vector<std::string> transitions;
  for (const AuditRow& row : audit) transitions.push_back(row.new_state + " by " + row.actor);
  REQUIRE(transitions == std::vector<std::string>{
                             "queued by tenant:acme",
                             "leased by worker:" + stale.worker_id,
                             "queued by system:reaper",
                             "leased by worker:" + fresh.worker_id,
                             "done by worker:" + fresh.worker_id,
                         });
}

TEST_CASE_METHOD(PgFixture,
                 "an expired lease is requeued as an infrastructure attempt with backoff",
                 "[store][queue]") {
  // 500 ms: long enough that a loaded CI machine does not expire the lease before the "not
  // yet expired" checks, short enough to wait for.
  auto store = ConnectStore(Options(absl::Milliseconds(500), absl::Seconds(2), 3));
  CreateTenants(*store);
  SubmissionRow submission = Submit(*store, kAcme);
  WorkerRow worker = RegisterGpu(*store, "h200-a", "sm_90a");
  std::optional<LeasedJobRow> job = Lease(*store, worker.worker_id);
  REQUIRE(job.has_value());

  // Not expired yet: nothing to reap, and a heartbeat extends the lease.
  REQUIRE(ValueOrFail(store->ReapExpiredLeases()) == 0);
  REQUIRE(ValueOrFail(store->Heartbeat(worker.worker_id, {job->lease}, true, "")).lost.empty());
  absl::SleepFor(absl::Milliseconds(700));
  const absl::Time reap_called = absl::Now();
  REQUIRE(ValueOrFail(store->ReapExpiredLeases()) == 1);
  const absl::Time reap_returned = absl::Now();

  std::vector<JobRow> jobs = ValueOrFail(store->ListJobs(submission.id));
  REQUIRE(jobs.size() == 1);
  REQUIRE(jobs[0].state == JobState::kQueued);
  REQUIRE(jobs[0].attempt == 1);
  REQUIRE(jobs[0].infrastructure_attempts == 1);
  REQUIRE_FALSE(jobs[0].lease_expires_at.has_value());
  REQUIRE_THAT(jobs[0].last_error, Catch::Contains("lease expired"));
  // First retry: base * 2^0 * jitter in [0.5, 1.5) = 1 s to 3 s after the reaper's
  // transaction began, which was between the call and its return.
  CHECK(jobs[0].not_before >= reap_called + absl::Seconds(1));
  CHECK(jobs[0].not_before <= reap_returned + absl::Seconds(3));
  // not_before is respected, even by a healthy worker of the right arch.
  REQUIRE(ValueOrFail(store->Heartbeat(worker.worker_id, {}, true, "")).lost.empty());
  REQUIRE_FALSE(Lease(*store, worker.worker_id).has_value());
  // The submission is still running and the watcher saw why.
  REQUIRE(ValueOrFail(store->GetSubmission(submission.id, "")).state ==
          v1::SUBMISSION_STATE_RUNNING);
  std::vector<StageEventRow> events = ValueOrFail(store->ListStageEvents(submission.id, 0));
  REQUIRE(events.back().kind == EventKind::kNotice);
  REQUIRE_THAT(events.back().payload_json, Catch::Contains("infrastructure failure (1 of 3)"));
}

TEST_CASE_METHOD(PgFixture, "infrastructure failures retry with growing backoff up to the cap",
                 "[store][queue]") {
  const absl::Duration base = absl::Milliseconds(150);
  auto store = ConnectStore(Options(absl::Seconds(60), base, 3));
  CreateTenants(*store);
  SubmissionRow submission = Submit(*store, kAcme);
  WorkerRow worker = RegisterGpu(*store, "h200-a", "sm_90a");

  for (int failure = 1; failure <= 3; ++failure) {
    std::optional<LeasedJobRow> job = LeaseWithin(*store, worker.worker_id, absl::Seconds(5));
    REQUIRE(job.has_value());
    REQUIRE(job->lease.attempt == failure);
    const absl::Time failed_at = absl::Now();
    const bool will_retry = ValueOrFail(store->FailJob(job->lease, v1::FAILURE_KIND_INFRASTRUCTURE,
                                                       absl::StrCat("sandbox crashed #", failure)));
    const absl::Time returned_at = absl::Now();
    std::vector<JobRow> jobs = ValueOrFail(store->ListJobs(submission.id));
    REQUIRE(jobs[0].infrastructure_attempts == failure);
    if (failure < 3) {
      REQUIRE(will_retry);
      REQUIRE(jobs[0].state == JobState::kQueued);
      // base * 2^(failure-1) * jitter in [0.5, 1.5), counted from the start of FailJob's
      // transaction, which lies between the call and its return.
      const absl::Duration nominal = base * (1 << (failure - 1));
      CHECK(jobs[0].not_before >= failed_at + nominal * 0.5);
      CHECK(jobs[0].not_before <= returned_at + nominal * 1.5);
      if (absl::Now() + absl::Milliseconds(20) < jobs[0].not_before) {
        REQUIRE_FALSE(Lease(*store, worker.worker_id).has_value());
      }
    } else {
      REQUIRE_FALSE(will_retry);
      REQUIRE(jobs[0].state == JobState::kFailed);
    }
  }
  SubmissionRow finished = ValueOrFail(store->GetSubmission(submission.id, kAcme));
  REQUIRE(finished.state == v1::SUBMISSION_STATE_FINISHED);
  REQUIRE(finished.stage == v1::STAGE_DONE);
  REQUIRE(finished.verdict->verdict_class == v1::VERDICT_CLASS_INFRASTRUCTURE_FAILURE);
  REQUIRE_THAT(finished.verdict->message, Catch::Contains("gave up after 3"));
  REQUIRE_THAT(finished.verdict->message, Catch::Contains("sandbox crashed #3"));
  REQUIRE_THAT(finished.verdict->verdict_json,
               Catch::Contains("VERDICT_CLASS_INFRASTRUCTURE_FAILURE"));
  REQUIRE(EventStages(*store, submission.id) ==
          std::vector<std::string>{"queued", "notice", "notice", "done"});
  REQUIRE_FALSE(Lease(*store, worker.worker_id).has_value());
}

TEST_CASE_METHOD(PgFixture, "a kernel failure is never retried", "[store][queue]") {
  auto store = ConnectStore(Options(absl::Seconds(60), absl::ZeroDuration()));
  CreateTenants(*store);
  WorkerRow worker = RegisterGpu(*store, "h200-a", "sm_90a");

  SubmissionRow named = Submit(*store, kAcme);
  std::optional<LeasedJobRow> job = Lease(*store, worker.worker_id);
  REQUIRE(job.has_value());
  REQUIRE_FALSE(ValueOrFail(store->FailJob(job->lease, v1::FAILURE_KIND_KERNEL, "watchdog fired",
                                           v1::VERDICT_CLASS_TIMEOUT)));
  REQUIRE_FALSE(Lease(*store, worker.worker_id).has_value());
  SubmissionRow finished = ValueOrFail(store->GetSubmission(named.id, kAcme));
  REQUIRE(finished.state == v1::SUBMISSION_STATE_FINISHED);
  REQUIRE(finished.verdict->verdict_class == v1::VERDICT_CLASS_TIMEOUT);
  REQUIRE(finished.verdict->message == "watchdog fired");
  std::vector<JobRow> jobs = ValueOrFail(store->ListJobs(named.id));
  REQUIRE(jobs[0].state == JobState::kFailed);
  REQUIRE(jobs[0].infrastructure_attempts == 0);

  // Without a class, a compile job's kernel failure is a compile error.
  SubmissionRow defaulted = Submit(*store, kAcme);
  job = Lease(*store, worker.worker_id);
  REQUIRE(job.has_value());
  REQUIRE_FALSE(ValueOrFail(store->FailJob(job->lease, v1::FAILURE_KIND_KERNEL, "ptxas refused")));
  REQUIRE(ValueOrFail(store->GetSubmission(defaulted.id, "")).verdict->verdict_class ==
          v1::VERDICT_CLASS_COMPILE_ERROR);

  // Classes that are not kernel failures, and unknown kinds, are refused before anything.
  SubmissionRow third = Submit(*store, kAcme);
  job = Lease(*store, worker.worker_id);
  REQUIRE(job.has_value());
  REQUIRE_STATUS(store->FailJob(job->lease, v1::FAILURE_KIND_KERNEL, "x", v1::VERDICT_CLASS_PASS),
                 absl::StatusCode::kInvalidArgument);
  REQUIRE_STATUS(store->FailJob(job->lease, static_cast<v1::FailureKind>(99), "x"),
                 absl::StatusCode::kInvalidArgument);
  REQUIRE(ValueOrFail(store->GetSubmission(third.id, "")).state == v1::SUBMISSION_STATE_RUNNING);
}

TEST_CASE_METHOD(PgFixture, "fair share: the tenant with the fewest leased jobs goes first",
                 "[store][queue]") {
  auto store = ConnectStore();
  CreateTenants(*store);
  // acme floods the queue first; globex arrives later with two.
  std::map<std::string, std::string> tenant_of;
  for (int i = 0; i < 6; ++i) tenant_of[Submit(*store, kAcme).id] = kAcme;
  for (int i = 0; i < 2; ++i) tenant_of[Submit(*store, kGlobex).id] = kGlobex;
  WorkerRow worker = RegisterGpu(*store, "h200-a", "sm_90a");

  std::vector<std::string> order;
  for (int i = 0; i < 8; ++i) {
    std::optional<LeasedJobRow> job = Lease(*store, worker.worker_id);
    REQUIRE(job.has_value());
    order.push_back(tenant_of.at(job->submission_id));
  }
  // Leased jobs are held (never completed), so every lease changes the counts:
  // (0,0) acme oldest; (1,0) globex; (1,1) acme oldest; (2,1) globex; then only acme is left.
  REQUIRE(order ==
          std::vector<std::string>{kAcme, kGlobex, kAcme, kGlobex, kAcme, kAcme, kAcme, kAcme});
  REQUIRE_FALSE(Lease(*store, worker.worker_id).has_value());
}

TEST_CASE_METHOD(PgFixture,
                 "arch routing: GPU workers take their own arch and compile-only workers compile",
                 "[store][queue]") {
  auto store = ConnectStore();
  CreateTenants(*store);
  SubmissionRow hopper = Submit(*store, kAcme, "sm_90a");
  SubmissionRow blackwell = Submit(*store, kAcme, "sm_100a");
  WorkerRow h200 = RegisterGpu(*store, "h200-a", "sm_90a");
  WorkerRow b200 = RegisterGpu(*store, "b200-a", "sm_100a");
  WorkerRow compiler = RegisterCompiler(*store, "cpu-a");

  // The B200 gets the sm_100a job although the sm_90a one is older, and nothing else.
  std::optional<LeasedJobRow> b200_job = Lease(*store, b200.worker_id);
  REQUIRE(b200_job.has_value());
  REQUIRE(b200_job->submission_id == blackwell.id);
  REQUIRE(b200_job->arch == v1::ARCH_SM_100A);
  REQUIRE_FALSE(Lease(*store, b200.worker_id).has_value());

  // A compile-only worker takes compile jobs of any arch.
  std::optional<LeasedJobRow> compile = Lease(*store, compiler.worker_id);
  REQUIRE(compile.has_value());
  REQUIRE(compile->submission_id == hopper.id);
  REQUIRE(compile->kind == v1::JOB_KIND_COMPILE);
  REQUIRE(compile->arch == v1::ARCH_SM_90A);
  REQUIRE_OK(store->CompleteJob(compile->lease, MakeVerdict("compiled")));

  // The evaluate job that follows goes to the sm_90a GPU only: never to the compile-only
  // worker, never to the other arch.
  REQUIRE_FALSE(Lease(*store, compiler.worker_id).has_value());
  REQUIRE_FALSE(Lease(*store, b200.worker_id).has_value());
  REQUIRE(ValueOrFail(store->CountCapableWorkers(v1::ARCH_SM_90A, v1::JOB_KIND_EVALUATE,
                                                 absl::Minutes(1))) == 1);
  REQUIRE(ValueOrFail(store->CountCapableWorkers(v1::ARCH_SM_90A, v1::JOB_KIND_COMPILE,
                                                 absl::Minutes(1))) == 2);
  REQUIRE(ValueOrFail(store->CountCapableWorkers(v1::ARCH_SM_100A, v1::JOB_KIND_EVALUATE,
                                                 absl::Minutes(1))) == 1);

  // A draining worker gets nothing (and learns it from its heartbeat); an unhealthy one
  // neither; each resumes when the condition is lifted.
  REQUIRE(
      ValueOrFail(store->SetWorkerState(h200.worker_id, v1::WORKER_STATE_DRAINING, "maintenance"))
          .state == v1::WORKER_STATE_DRAINING);
  REQUIRE_FALSE(Lease(*store, h200.worker_id).has_value());
  HeartbeatResult beat = ValueOrFail(store->Heartbeat(h200.worker_id, {}, true, ""));
  REQUIRE(beat.drain);
  REQUIRE(ValueOrFail(store->CountCapableWorkers(v1::ARCH_SM_90A, v1::JOB_KIND_EVALUATE,
                                                 absl::Minutes(1))) == 0);
  REQUIRE_OK(store->SetWorkerState(h200.worker_id, v1::WORKER_STATE_ACTIVE, ""));
  REQUIRE(ValueOrFail(store->Heartbeat(h200.worker_id, {}, false, "ECC errors")).drain == false);
  REQUIRE_FALSE(Lease(*store, h200.worker_id).has_value());
  REQUIRE_FALSE(ValueOrFail(store->Heartbeat(h200.worker_id, {}, true, "")).drain);
  std::optional<LeasedJobRow> evaluate = Lease(*store, h200.worker_id);
  REQUIRE(evaluate.has_value());
  REQUIRE(evaluate->kind == v1::JOB_KIND_EVALUATE);
  REQUIRE(evaluate->submission_id == hopper.id);
  REQUIRE_THAT(evaluate->source, Catch::Contains(".target sm_90a"));

  // Re-registering the same GPU keeps the worker's id and counts its held job.
  WorkerRow again = RegisterGpu(*store, "h200-a", "sm_90a");
  REQUIRE(again.worker_id == h200.worker_id);
  REQUIRE(again.jobs_held == 1);
  REQUIRE(ValueOrFail(store->ListWorkers()).size() == 3);
  std::vector<QueueDepthRow> depths = ValueOrFail(store->QueueDepths());
  REQUIRE(depths.size() == 2);  // sm_100a compile (leased), sm_90a evaluate (leased).
  for (const QueueDepthRow& depth : depths) {
    CHECK(depth.queued == 0);
    CHECK(depth.leased == 1);
  }
}

TEST_CASE_METHOD(PgFixture, "compile then evaluate: a clean compile of a full submission chains",
                 "[store][queue]") {
  auto store = ConnectStore();
  CreateTenants(*store);
  WorkerRow compiler = RegisterCompiler(*store, "cpu-a");
  WorkerRow gpu = RegisterGpu(*store, "h200-a", "sm_90a");

  SECTION("full scope: compiled -> evaluate job -> pass") {
    NewSubmission request = MakeSubmission(kAcme);
    request.launch_plan_json = R"({"launches": [{"kernel": "gemm", "grid": [132, 1, 1]}]})";
    SubmissionRow submission = ValueOrFail(store->CreateSubmission(request));
    REQUIRE(submission.state == v1::SUBMISSION_STATE_QUEUED);
    REQUIRE(submission.stage == v1::STAGE_QUEUED);
    REQUIRE(submission.source_sha256.size() == 64);

    std::optional<LeasedJobRow> compile = Lease(*store, compiler.worker_id);
    REQUIRE(compile.has_value());
    REQUIRE(compile->source == request.source);
    REQUIRE_THAT(compile->launch_plan_json, Catch::Contains("\"grid\": [132, 1, 1]"));
    REQUIRE_OK(store->ReportStage(compile->lease, v1::STAGE_COMPILE, R"({"ok": true})"));
    REQUIRE_OK(store->CompleteJob(compile->lease, MakeVerdict("compiled")));
    SubmissionRow between = ValueOrFail(store->GetSubmission(submission.id, kAcme));
    REQUIRE(between.state == v1::SUBMISSION_STATE_RUNNING);
    REQUIRE_FALSE(between.verdict.has_value());
    std::vector<JobRow> jobs = ValueOrFail(store->ListJobs(submission.id));
    REQUIRE(jobs.size() == 2);
    REQUIRE(jobs[0].kind == v1::JOB_KIND_COMPILE);
    REQUIRE(jobs[0].state == JobState::kDone);
    REQUIRE(jobs[1].kind == v1::JOB_KIND_EVALUATE);
    REQUIRE(jobs[1].state == JobState::kQueued);

    std::optional<LeasedJobRow> evaluate = Lease(*store, gpu.worker_id);
    REQUIRE(evaluate.has_value());
    REQUIRE(evaluate->kind == v1::JOB_KIND_EVALUATE);
    REQUIRE(evaluate->lease.attempt == 1);
    REQUIRE_OK(store->ReportStage(evaluate->lease, v1::STAGE_COMPILE, R"({"ok": true})"));
    REQUIRE_OK(store->ReportStage(evaluate->lease, v1::STAGE_CORRECTNESS, R"({"ok": true})"));
    REQUIRE(ValueOrFail(store->GetSubmission(submission.id, "")).stage == v1::STAGE_CORRECTNESS);
    VerdictRow pass = MakeVerdict("pass", "all workloads within tolerance");
    pass.speedup = 1.25;
    pass.verdict_json = R"({"verdict_class": "VERDICT_CLASS_PASS", "speedup": 1.25})";
    REQUIRE_OK(store->CompleteJob(evaluate->lease, pass));

    SubmissionRow finished = ValueOrFail(store->GetSubmission(submission.id, kAcme));
    REQUIRE(finished.state == v1::SUBMISSION_STATE_FINISHED);
    REQUIRE(finished.stage == v1::STAGE_DONE);
    REQUIRE(finished.verdict->verdict_class == v1::VERDICT_CLASS_PASS);
    REQUIRE(finished.verdict->tic);
    REQUIRE(finished.verdict->speedup == Approx(1.25));
    REQUIRE_THAT(finished.verdict->verdict_json, Catch::Contains("VERDICT_CLASS_PASS"));

    // The full history replays in order, seq 1..n without gaps, and from any point.
    std::vector<StageEventRow> events = ValueOrFail(store->ListStageEvents(submission.id, 0));
    REQUIRE(EventStages(*store, submission.id) ==
            std::vector<std::string>{"queued", "compile", "compile", "correctness", "done"});
    for (size_t i = 0; i < events.size(); ++i) REQUIRE(events[i].seq == static_cast<int>(i) + 1);
    REQUIRE_THAT(events.back().payload_json, Catch::Contains("VERDICT_CLASS_PASS"));
    std::vector<StageEventRow> tail = ValueOrFail(store->ListStageEvents(submission.id, 3));
    REQUIRE(tail.size() == 2);
    REQUIRE(tail[0].seq == 4);
    REQUIRE(ValueOrFail(store->ListStageEvents(submission.id, 5)).empty());
  }

  SECTION("compile-only scope: compiled is the verdict") {
    SubmissionRow submission = Submit(*store, kAcme, "sm_100a", "compile_only");
    std::optional<LeasedJobRow> compile = Lease(*store, compiler.worker_id);
    REQUIRE(compile.has_value());
    REQUIRE_OK(store->CompleteJob(compile->lease, MakeVerdict("compiled")));
    SubmissionRow finished = ValueOrFail(store->GetSubmission(submission.id, kAcme));
    REQUIRE(finished.state == v1::SUBMISSION_STATE_FINISHED);
    REQUIRE(finished.verdict->verdict_class == v1::VERDICT_CLASS_COMPILED);
    REQUIRE(ValueOrFail(store->ListJobs(submission.id)).size() == 1);
  }

  SECTION("full scope: a compile error finishes without an evaluate job") {
    SubmissionRow submission = Submit(*store, kAcme);
    std::optional<LeasedJobRow> compile = Lease(*store, gpu.worker_id);
    REQUIRE(compile.has_value());
    REQUIRE_OK(store->CompleteJob(compile->lease, MakeVerdict("compile_error", "wgmma: bad")));
    REQUIRE(ValueOrFail(store->ListJobs(submission.id)).size() == 1);
    REQUIRE(ValueOrFail(store->GetSubmission(submission.id, "")).verdict->verdict_class ==
            v1::VERDICT_CLASS_COMPILE_ERROR);
    REQUIRE_FALSE(Lease(*store, gpu.worker_id).has_value());
  }

  SECTION("verdicts only the scheduler decides are refused") {
    Submit(*store, kAcme);
    std::optional<LeasedJobRow> compile = Lease(*store, gpu.worker_id);
    REQUIRE(compile.has_value());
    REQUIRE_STATUS(store->CompleteJob(compile->lease, MakeVerdict("infrastructure_failure")),
                   absl::StatusCode::kInvalidArgument);
    REQUIRE_STATUS(store->CompleteJob(compile->lease, MakeVerdict("cancelled")),
                   absl::StatusCode::kInvalidArgument);
    REQUIRE_STATUS(store->CompleteJob(compile->lease, MakeVerdict("excellent")),
                   absl::StatusCode::kInvalidArgument);
    VerdictRow not_json = MakeVerdict("pass");
    not_json.verdict_json = "{not json";
    REQUIRE_STATUS(store->CompleteJob(compile->lease, not_json),
                   absl::StatusCode::kInvalidArgument);
    // None of the refusals consumed the lease.
    REQUIRE_OK(store->CompleteJob(compile->lease, MakeVerdict("compile_error")));
  }
}

TEST_CASE_METHOD(PgFixture, "an idempotency key returns the first submission", "[store][queue]") {
  auto store = ConnectStore();
  CreateTenants(*store);
  NewSubmission request = MakeSubmission(kAcme);
  request.idempotency_key = "turn-7";
  SubmissionRow first = ValueOrFail(store->CreateSubmission(request));
  SubmissionRow again = ValueOrFail(store->CreateSubmission(request));
  REQUIRE(again.id == first.id);
  REQUIRE(ValueOrFail(store->ListJobs(first.id)).size() == 1);
  REQUIRE(ValueOrFail(store->ListStageEvents(first.id, 0)).size() == 1);

  // The same key with different content is a client bug, not a retry.
  NewSubmission different = MakeSubmission(kAcme);
  different.idempotency_key = "turn-7";
  absl::Status conflict = store->CreateSubmission(different).status();
  REQUIRE(absl::IsAlreadyExists(conflict));
  REQUIRE_THAT(std::string(conflict.message()), Catch::Contains(first.id));

  // Keys are per tenant; no key never collides.
  NewSubmission other_tenant = request;
  other_tenant.tenant = kGlobex;
  REQUIRE(ValueOrFail(store->CreateSubmission(other_tenant)).id != first.id);
  NewSubmission no_key = MakeSubmission(kAcme);
  REQUIRE(ValueOrFail(store->CreateSubmission(no_key)).id !=
          ValueOrFail(store->CreateSubmission(no_key)).id);

  // Concurrent retries with one key: one submission, everybody gets its id.
  NewSubmission racing = MakeSubmission(kGlobex);
  racing.idempotency_key = "race";
  std::vector<std::string> ids(8);
  std::vector<std::thread> threads;
  for (int i = 0; i < 8; ++i) {
    threads.emplace_back([&, i] {
      auto row = store->CreateSubmission(racing);
      ids[i] = row.ok() ? row->id : row.status().ToString();
    });
  }
  for (std::thread& thread : threads) thread.join();
  for (const std::string& id : ids) REQUIRE(id == ids[0]);
  REQUIRE(database()
              .Scalar("SELECT count(*) FROM submissions WHERE idempotency_key = 'race'")
              .value() == "1");
}

TEST_CASE_METHOD(PgFixture, "cancel stops queued and leased jobs and the holder learns it",
                 "[store][queue]") {
  auto store = ConnectStore();
  CreateTenants(*store);
  WorkerRow worker = RegisterGpu(*store, "h200-a", "sm_90a");
  SubmissionRow running = Submit(*store, kAcme);
  std::optional<LeasedJobRow> job = Lease(*store, worker.worker_id);
  REQUIRE(job.has_value());
  SubmissionRow queued = Submit(*store, kAcme);

  // Another tenant cannot even see it.
  REQUIRE_STATUS(store->CancelSubmission(running.id, kGlobex), absl::StatusCode::kNotFound);

  SubmissionRow cancelled = ValueOrFail(store->CancelSubmission(running.id, kAcme));
  REQUIRE(cancelled.state == v1::SUBMISSION_STATE_CANCELLED);
  REQUIRE(cancelled.stage == v1::STAGE_DONE);
  REQUIRE(cancelled.verdict->verdict_class == v1::VERDICT_CLASS_CANCELLED);
  HeartbeatResult beat = ValueOrFail(store->Heartbeat(worker.worker_id, {job->lease}, true, ""));
  REQUIRE(beat.cancelled_job_ids == std::vector<std::string>{job->lease.job_id});
  REQUIRE(beat.lost.empty());
  absl::Status late = store->CompleteJob(job->lease, MakeVerdict("pass"));
  REQUIRE(IsLeaseLost(late));
  REQUIRE_THAT(std::string(late.message()), Catch::Contains("cancelled"));
  REQUIRE(ValueOrFail(store->GetSubmission(running.id, "")).verdict->verdict_class ==
          v1::VERDICT_CLASS_CANCELLED);

  // A queued submission's job never reaches a worker.
  REQUIRE(ValueOrFail(store->CancelSubmission(queued.id, "")).state ==
          v1::SUBMISSION_STATE_CANCELLED);
  REQUIRE(ValueOrFail(store->ListJobs(queued.id))[0].state == JobState::kCancelled);
  REQUIRE_FALSE(Lease(*store, worker.worker_id).has_value());
  // Cancelling again changes nothing; the watcher's last event is "done".
  REQUIRE(ValueOrFail(store->CancelSubmission(queued.id, kAcme)).state ==
          v1::SUBMISSION_STATE_CANCELLED);
  REQUIRE(EventStages(*store, queued.id) == std::vector<std::string>{"queued", "done"});
  REQUIRE(ValueOrFail(store->CountUnfinishedSubmissions(kAcme)) == 0);
  // Notices after the end are dropped, so "done" stays last.
  REQUIRE_OK(store->AppendNotice(queued.id, R"({"notice": "no worker for sm_90a"})"));
  REQUIRE(EventStages(*store, queued.id).back() == "done");
  std::vector<AuditRow> audit =
      ValueOrFail(store->ListAuditLog(AuditEntity::kSubmission, running.id));
  REQUIRE(audit.back().new_state == "cancelled");
  REQUIRE(audit.back().actor == "tenant:acme");
}

TEST_CASE_METHOD(PgFixture, "cancels racing with working workers leave one verdict each",
                 "[store][queue]") {
  auto store = ConnectStore(Options());
  CreateTenants(*store);
  constexpr int kSubmissions = 40;
  constexpr int kWorkers = 4;
  std::vector<std::string> ids;
  for (int i = 0; i < kSubmissions; ++i) ids.push_back(Submit(*store, kAcme).id);
  std::vector<std::string> workers;
  for (int i = 0; i < kWorkers; ++i) {
    workers.push_back(RegisterGpu(*store, absl::StrCat("h200-", i), "sm_90a").worker_id);
  }

  std::atomic<bool> cancels_done{false};
  std::vector<std::string> errors(kWorkers + 1);
  std::vector<std::thread> threads;
  const absl::Time started = absl::Now();
  for (int w = 0; w < kWorkers; ++w) {
    threads.emplace_back([&, w] {
      absl::Time idle_since = absl::InfiniteFuture();
      while (absl::Now() - started < absl::Seconds(30)) {
        auto job = store->LeaseJob(workers[w]);
        if (!job.ok()) {
          errors[w] = job.status().ToString();
          return;
        }
        if (!job->has_value()) {
          // Done once the cancels are over and the queue stayed empty for a while.
          if (cancels_done && idle_since == absl::InfiniteFuture()) idle_since = absl::Now();
          if (cancels_done && absl::Now() - idle_since > absl::Milliseconds(300)) return;
          std::this_thread::sleep_for(std::chrono::milliseconds(2));
          continue;
        }
        idle_since = absl::InfiniteFuture();
        const LeaseRef lease = (*job)->lease;
        const bool compile = (*job)->kind == v1::JOB_KIND_COMPILE;
        absl::Status status =
            store->ReportStage(lease, compile ? v1::STAGE_COMPILE : v1::STAGE_CORRECTNESS, "{}");
        if (status.ok()) {
          status = store->CompleteJob(lease, MakeVerdict(compile ? "compiled" : "pass"));
        }
        // Losing the lease to a cancel is expected; anything else is a failure.
        if (!status.ok() && !IsLeaseLost(status)) {
          errors[w] = status.ToString();
          return;
        }
      }
      errors[w] = "did not finish within 30 s";
    });
  }
  threads.emplace_back([&] {
    for (int i = 0; i < kSubmissions; i += 2) {
      auto cancelled = store->CancelSubmission(ids[i], kAcme);
      if (!cancelled.ok()) errors[kWorkers] = cancelled.status().ToString();
      std::this_thread::sleep_for(std::chrono::milliseconds(3));
    }
    cancels_done = true;
  });
  for (std::thread& thread : threads) thread.join();
  for (const std::string& error : errors) {
    INFO(error);
    CHECK(error.empty());
  }
  // Deadlocks would cost deadlock_timeout (1 s) each before a retry; none should happen.
  CHECK(absl::Now() - started < absl::Seconds(15));
  REQUIRE(database().Scalar("SELECT count(*) FROM verdicts").value() ==
          std::to_string(kSubmissions));
  REQUIRE(
      database().Scalar("SELECT count(*) FROM jobs WHERE state IN ('queued', 'leased')").value() ==
      "0");
  for (int i = 0; i < kSubmissions; ++i) {
    SubmissionRow row = ValueOrFail(store->GetSubmission(ids[i], kAcme));
    INFO(ids[i]);
    if (i % 2 == 0) {
      // Cancelled in time, or finished before the cancel came; never both.
      REQUIRE((row.state == v1::SUBMISSION_STATE_CANCELLED ||
               row.state == v1::SUBMISSION_STATE_FINISHED));
      REQUIRE(row.verdict->verdict_class == (row.state == v1::SUBMISSION_STATE_CANCELLED
                                                 ? v1::VERDICT_CLASS_CANCELLED
                                                 : v1::VERDICT_CLASS_PASS));
    } else {
      REQUIRE(row.state == v1::SUBMISSION_STATE_FINISHED);
      REQUIRE(row.verdict->verdict_class == v1::VERDICT_CLASS_PASS);
    }
    std::vector<StageEventRow> events = ValueOrFail(store->ListStageEvents(ids[i], 0));
    REQUIRE(events.back().stage == v1::STAGE_DONE);
    for (size_t e = 0; e < events.size(); ++e) REQUIRE(events[e].seq == static_cast<int>(e) + 1);
  }
}

TEST_CASE_METHOD(PgFixture, "LISTEN/NOTIFY wakes waiting leasers and watchers", "[store][queue]") {
  auto store = ConnectStore();
  CreateTenants(*store);

  // Nothing happens: the wait ends at its timeout, not before.
  const absl::Time quiet_start = absl::Now();
  REQUIRE_FALSE(ValueOrFail(store->WaitForQueueChange(absl::Milliseconds(200))));
  REQUIRE(absl::Now() - quiet_start >= absl::Milliseconds(190));

  // One NOTIFY wakes every waiter sharing the listening connection.
  constexpr int kWaiters = 8;
  const uint64_t seen = store->QueueChangeCount();
  std::vector<int> woken(kWaiters, -1);
  std::vector<std::thread> waiters;
  for (int i = 0; i < kWaiters; ++i) {
    waiters.emplace_back([&, i] {
      auto woke = store->WaitForQueueChange(seen, absl::Seconds(20));
      woken[i] = woke.ok() && *woke ? 1 : 0;
    });
  }
  absl::SleepFor(absl::Milliseconds(100));
  const absl::Time submitted_at = absl::Now();
  SubmissionRow submission = Submit(*store, kAcme);
  for (std::thread& waiter : waiters) waiter.join();
  REQUIRE(absl::Now() - submitted_at < absl::Seconds(5));
  REQUIRE(std::count(woken.begin(), woken.end(), 1) == kWaiters);

  // A stage report wakes watchers.
  WorkerRow worker = RegisterGpu(*store, "h200-a", "sm_90a");
  std::optional<LeasedJobRow> job = Lease(*store, worker.worker_id);
  REQUIRE(job.has_value());
  const uint64_t events_seen = store->EventsChangeCount();
  bool watcher_woke = false;
  std::thread watcher([&] {
    auto woke = store->WaitForEvents(events_seen, absl::Seconds(20));
    watcher_woke = woke.ok() && *woke;
  });
  absl::SleepFor(absl::Milliseconds(50));
  const absl::Time reported_at = absl::Now();
  REQUIRE_OK(store->ReportStage(job->lease, v1::STAGE_COMPILE, R"({"ok": true})"));
  watcher.join();
  REQUIRE(watcher_woke);
  REQUIRE(absl::Now() - reported_at < absl::Seconds(5));

  // A requeue notifies leasers too (a retried job is leasable again).
  const uint64_t before_requeue = store->QueueChangeCount();
  REQUIRE(ValueOrFail(
      store->FailJob(job->lease, v1::FAILURE_KIND_INFRASTRUCTURE, "GPU fell off the bus")));
  REQUIRE(ValueOrFail(store->WaitForQueueChange(before_requeue, absl::Seconds(5))));
}

TEST_CASE_METHOD(PgFixture, "the audit log records actors and refuses changes", "[store][audit]") {
  auto store = ConnectStore();
  CreateTenants(*store);
  REQUIRE_OK(
      store->CreateToken(Token("tok1", kAcme, "vendor"), std::string(64, 'a'), "admin:root"));
  REQUIRE_OK(store->RevokeToken("tok1", "admin:root"));
  std::vector<AuditRow> token_audit = ValueOrFail(store->ListAuditLog(AuditEntity::kToken, "tok1"));
  REQUIRE(token_audit.size() == 2);
  REQUIRE(token_audit[0].new_state == "active");
  REQUIRE(token_audit[1].old_state == "active");
  REQUIRE(token_audit[1].new_state == "revoked");
  REQUIRE(token_audit[1].actor == "admin:root");

  WorkerRow worker = RegisterGpu(*store, "h200-a", "sm_90a");
  REQUIRE_OK(store->SetWorkerState(worker.worker_id, v1::WORKER_STATE_DRAINING, "", "admin:root"));
  std::vector<AuditRow> worker_audit =
      ValueOrFail(store->ListAuditLog(AuditEntity::kWorker, worker.worker_id));
  REQUIRE(worker_audit.back().new_state == "draining");
  REQUIRE(worker_audit.back().actor == "admin:root");

  // Append-only, even for the superuser the tests connect as.
  REQUIRE_STATUS(database().Sql("UPDATE audit_log SET actor = 'nobody'"),
                 absl::StatusCode::kPermissionDenied);
  REQUIRE_STATUS(database().Sql("DELETE FROM audit_log"), absl::StatusCode::kPermissionDenied);
  REQUIRE_STATUS(database().Sql("TRUNCATE audit_log"), absl::StatusCode::kPermissionDenied);
  // A change made outside the store is still recorded, attributed to the database role.
  REQUIRE_OK(database().Sql(
      absl::StrCat("UPDATE workers SET state = 'offline' WHERE id = '", worker.worker_id, "'")));
  REQUIRE_THAT(
      ValueOrFail(store->ListAuditLog(AuditEntity::kWorker, worker.worker_id)).back().actor,
      Catch::StartsWith("sql:"));
}

TEST_CASE_METHOD(PgFixture, "tokens and tenants and submission listings", "[store]") {
  auto store = ConnectStore();
  CreateTenants(*store);
  REQUIRE_STATUS(store->CreateTenant(Tenant(kAcme)), absl::StatusCode::kAlreadyExists);
  REQUIRE(ValueOrFail(store->ListTenants()).size() == 2);
  REQUIRE(ValueOrFail(store->CountTokens()) == 0);

  // A digest may be given as hex or as raw bytes; lookups find the token either way.
  const std::string hex = "00112233445566778899aabbccddeeff00112233445566778899AABBCCDDEEFF";
  REQUIRE_OK(store->CreateToken(Token("v1", kAcme, "vendor"), hex));
  REQUIRE_OK(store->CreateToken(Token("w1", "", "worker"), std::string(32, '\x7f')));
  TokenRow found = ValueOrFail(store->FindTokenBySecretHash(hex));
  REQUIRE(found.token_id == "v1");
  REQUIRE(found.tenant == kAcme);
  std::string raw_as_hex;
  for (int i = 0; i < 32; ++i) raw_as_hex += "7F";
  REQUIRE(ValueOrFail(store->FindTokenBySecretHash(raw_as_hex)).token_id == "w1");
  REQUIRE(ValueOrFail(store->FindTokenBySecretHash(std::string(32, '\x7f'))).role ==
          v1::ROLE_WORKER);
  REQUIRE_OK(store->RevokeToken("v1"));
  REQUIRE_STATUS(store->FindTokenBySecretHash(hex), absl::StatusCode::kNotFound);
  REQUIRE(ValueOrFail(store->CountTokens()) == 2);
  REQUIRE_STATUS(store->RevokeToken("nope"), absl::StatusCode::kNotFound);
  REQUIRE_STATUS(store->CreateToken(Token("v2", "", "vendor"), hex),
                 absl::StatusCode::kInvalidArgument);
  REQUIRE_STATUS(store->CreateToken(Token("v3", "initech", "vendor"), std::string(64, 'b')),
                 absl::StatusCode::kNotFound);
  REQUIRE_STATUS(store->CreateToken(Token("v4", "", "admin"), "abc"),
                 absl::StatusCode::kInvalidArgument);

  // Pages, newest first, with filters.
  std::vector<std::string> ids;
  for (int i = 0; i < 5; ++i) {
    NewSubmission request = MakeSubmission(kAcme);
    request.session_id = i < 3 ? "s-a" : "s-b";
    ids.push_back(ValueOrFail(store->CreateSubmission(request)).id);
  }
  Submit(*store, kGlobex);
  std::vector<std::string> listed;
  SubmissionFilter filter = Filter(kAcme, "", 2);
  int pages = 0;
  do {
    SubmissionPage page = ValueOrFail(store->ListSubmissions(filter));
    for (const SubmissionRow& row : page.submissions) listed.push_back(row.id);
    filter.page_token = page.next_page_token;
    ++pages;
  } while (!filter.page_token.empty());
  REQUIRE(pages == 3);
  REQUIRE(listed == std::vector<std::string>(ids.rbegin(), ids.rend()));
  SubmissionPage session = ValueOrFail(store->ListSubmissions(Filter(kAcme, "s-b")));
  REQUIRE(session.submissions.size() == 2);
  REQUIRE(session.next_page_token.empty());
  REQUIRE_STATUS(store->ListSubmissions(Filter(kAcme, "", 0, "garbage")),
                 absl::StatusCode::kInvalidArgument);
  REQUIRE_STATUS(store->ListSubmissions(Filter("")), absl::StatusCode::kInvalidArgument);
  REQUIRE(ValueOrFail(store->CountRecentSubmissions(kAcme, absl::Minutes(1))) == 5);
  REQUIRE(ValueOrFail(store->CountUnfinishedSubmissions(kGlobex)) == 1);
  REQUIRE_STATUS(store->GetSubmission(ids[0], kGlobex), absl::StatusCode::kNotFound);
}

TEST_CASE_METHOD(PgFixture, "bad input is refused with an error naming the problem", "[store]") {
  auto store = ConnectStore();
  CreateTenants(*store);
  auto expect_invalid = [&](NewSubmission request, const std::string& mentions) {
    absl::Status status = store->CreateSubmission(request).status();
    INFO(status.ToString());
    REQUIRE(absl::IsInvalidArgument(status));
    REQUIRE_THAT(std::string(status.message()), Catch::Contains(mentions));
  };
  NewSubmission request = MakeSubmission(kAcme);
  request.arch = static_cast<v1::Arch>(80);
  expect_invalid(request, "arch");
  request = MakeSubmission(kAcme);
  request.knowledge_level = static_cast<v1::KnowledgeLevel>(99);
  expect_invalid(request, "knowledge_level");
  request = MakeSubmission(kAcme);
  request.source = std::string("a\0b", 3);
  expect_invalid(request, "NUL");
  request = MakeSubmission(kAcme);
  request.source = "\xff\xfe not utf-8";
  expect_invalid(request, "UTF-8");
  request = MakeSubmission(kAcme);
  request.launch_plan_json = "{launches";
  expect_invalid(request, "launch_plan_json");
  request = MakeSubmission("initech");
  REQUIRE_STATUS(store->CreateSubmission(request), absl::StatusCode::kNotFound);
  request = MakeSubmission("Not A Tenant");
  expect_invalid(request, "tenant name");

  REQUIRE_STATUS(store->GetSubmission("42", ""), absl::StatusCode::kInvalidArgument);
  REQUIRE_STATUS(store->LeaseJob("not-a-uuid"), absl::StatusCode::kInvalidArgument);
  REQUIRE_STATUS(store->LeaseJob("00000000-0000-0000-0000-000000000000"),
                 absl::StatusCode::kNotFound);
  REQUIRE_STATUS(store->ReportStage({"x", "y", 1}, v1::STAGE_COMPILE, "{}"),
                 absl::StatusCode::kInvalidArgument);
  SubmissionRow submission = Submit(*store, kAcme);
  WorkerRow worker = RegisterGpu(*store, "h200-a", "sm_90a");
  std::optional<LeasedJobRow> job = Lease(*store, worker.worker_id);
  REQUIRE(job.has_value());
  REQUIRE_STATUS(store->ReportStage(job->lease, v1::STAGE_DONE, "{}"),
                 absl::StatusCode::kInvalidArgument);
  REQUIRE_STATUS(store->ReportStage(job->lease, v1::STAGE_COMPILE, "{oops"),
                 absl::StatusCode::kInvalidArgument);
  REQUIRE_STATUS(store->SetWorkerState(worker.worker_id, static_cast<v1::WorkerState>(99), ""),
                 absl::StatusCode::kInvalidArgument);
  WorkerRegistration no_arch;
  no_arch.hostname = "gpu-without-arch";
  REQUIRE_STATUS(store->RegisterWorker(no_arch), absl::StatusCode::kInvalidArgument);
  REQUIRE(ValueOrFail(store->GetSubmission(submission.id, "")).state ==
          v1::SUBMISSION_STATE_RUNNING);
}

TEST_CASE_METHOD(PgFixture,
                 "a broken connection is replaced and an unreachable server is UNAVAILABLE",
                 "[store]") {
  auto store = ConnectStore(Options(absl::Seconds(60), absl::Seconds(2), 3, 2));
  CreateTenants(*store);
  const uint64_t seen = store->QueueChangeCount();  // Starts the listening connection.
  // Kill every session of the store, the listener's included (as a database restart would).
  const std::optional<std::string> killed = ValueOrFail(
      database().Scalar("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                        "WHERE datname = current_database() AND pid <> pg_backend_pid()"));
  REQUIRE(std::stoi(killed.value()) >= 2);
  absl::SleepFor(absl::Milliseconds(100));
  // Pooled connections are replaced on their next use; the caller never sees the failure
  // because nothing had been sent on them yet.
  REQUIRE(ValueOrFail(store->ListTenants()).size() == 2);
  REQUIRE(ValueOrFail(store->ListTenants()).size() == 2);
  // The listener reconnects by itself and wakes its waiters, since notifications may have
  // been missed while it was away; afterwards NOTIFY wakes them again.
  REQUIRE(ValueOrFail(store->WaitForQueueChange(seen, absl::Seconds(10))));
  absl::SleepFor(absl::Milliseconds(100));
  const uint64_t reconnected = store->QueueChangeCount();
  Submit(*store, kAcme);
  REQUIRE(ValueOrFail(store->WaitForQueueChange(reconnected, absl::Seconds(10))));

  StoreOptions unreachable_options;
  unreachable_options.database_url = "postgresql://ptxbench@127.0.0.1:1/none";
  auto unreachable = Store::Connect(unreachable_options);
  REQUIRE(absl::IsUnavailable(unreachable.status()));
  REQUIRE_THAT(std::string(unreachable.status().message()), Catch::Contains("127.0.0.1:1"));
  StoreOptions bad_url;
  bad_url.database_url = "postgresql://[oops";
  REQUIRE_STATUS(Store::Connect(bad_url), absl::StatusCode::kInvalidArgument);
  StoreOptions no_pool;
  no_pool.database_url = database_url();
  no_pool.pool_size = 0;
  REQUIRE_STATUS(Store::Connect(no_pool), absl::StatusCode::kInvalidArgument);
}

// ---------------------------------------------------------------------------------------
// Lease faults: expiry is fenced, except where the scheduler was down; restarted workers.

TEST_CASE_METHOD(PgFixture,
                 "an expired lease not yet reaped is refused everywhere and stores nothing",
                 "[store][queue][faults]") {
  auto store = ConnectStore(Options(absl::Milliseconds(300), absl::ZeroDuration()));
  CreateTenants(*store);
  SubmissionRow submission = Submit(*store, kAcme);
  WorkerRow late = RegisterGpu(*store, "h200-late", "sm_90a");
  std::optional<LeasedJobRow> job = Lease(*store, late.worker_id);
  REQUIRE(job.has_value());
  REQUIRE(ValueOrFail(store->ListWorkers())[0].jobs_held == 1);
  absl::SleepFor(absl::Milliseconds(450));

  // No reaper has run: the lease is expired but still 'leased' in the table.
  REQUIRE(ValueOrFail(store->ListJobs(submission.id))[0].state == JobState::kLeased);
  // A late heartbeat does not revive it, and the worker learns it lost the job.
  HeartbeatResult beat = ValueOrFail(store->Heartbeat(late.worker_id, {job->lease}, true, ""));
  REQUIRE(beat.lost.size() == 1);
  REQUIRE(ValueOrFail(store->ListJobs(submission.id))[0].lease_expires_at.value() < absl::Now());
  // A late stage report, completion or failure changes nothing, and says why in a type.
  absl::Status report = store->ReportStage(job->lease, v1::STAGE_COMPILE, "{}");
  REQUIRE(LeaseLostReasonOf(report) == LeaseLostReason::kExpired);
  REQUIRE_THAT(std::string(report.message()), Catch::Contains("expired"));
  absl::Status complete = store->CompleteJob(job->lease, MakeVerdict("compile_error", "late"));
  REQUIRE(LeaseLostReasonOf(complete) == LeaseLostReason::kExpired);
  REQUIRE(LeaseLostReasonOf(
              store->FailJob(job->lease, v1::FAILURE_KIND_INFRASTRUCTURE, "late").status()) ==
          LeaseLostReason::kExpired);
  REQUIRE(database().Scalar("SELECT count(*) FROM verdicts").value() == "0");
  REQUIRE(EventStages(*store, submission.id) == std::vector<std::string>{"queued"});
  // ListWorkers does not count a lease nobody can use.
  REQUIRE(ValueOrFail(store->ListWorkers())[0].jobs_held == 0);

  // The reaper takes exactly that lease back; another worker gets the job.
  REQUIRE(ValueOrFail(store->ReapExpiredLeases()) == 1);
  WorkerRow other = RegisterGpu(*store, "h200-other", "sm_90a");
  std::optional<LeasedJobRow> again = Lease(*store, other.worker_id);
  REQUIRE(again.has_value());
  REQUIRE(again->lease.attempt == 2);
  REQUIRE(LeaseLostReasonOf(store->CompleteJob(job->lease, MakeVerdict("pass"))) ==
          LeaseLostReason::kLeasedAgain);
  REQUIRE_OK(store->CompleteJob(again->lease, MakeVerdict("compile_error", "from the holder")));
  REQUIRE(LeaseLostReasonOf(store->CompleteJob(again->lease, MakeVerdict("pass"))) ==
          LeaseLostReason::kFinished);
  REQUIRE(LeaseLostReasonOf(store->CompleteJob(
              {"00000000-0000-0000-0000-000000000000", other.worker_id, 1}, MakeVerdict("pass"))) ==
          LeaseLostReason::kNoSuchJob);
  // Other statuses carry no reason, whatever their message says.
  REQUIRE_FALSE(LeaseLostReasonOf(absl::FailedPreconditionError("lease lost: forged")));
  REQUIRE_FALSE(IsLeaseLost(absl::FailedPreconditionError("lease lost: forged")));
}

TEST_CASE_METHOD(PgFixture,
                 "a scheduler back from an outage grants live leases a lease period and reaps "
                 "only those that expired before it went down",
                 "[store][queue][faults]") {
  StoreOptions options = Options(absl::Seconds(2), absl::ZeroDuration());
  options.outage_threshold = absl::Milliseconds(500);
  auto store = ConnectStore(options);
  CreateTenants(*store);
  WorkerRow worker = RegisterGpu(*store, "h200-a", "sm_90a");
  SubmissionRow before = Submit(*store, kAcme);
  SubmissionRow during = Submit(*store, kAcme);
  SubmissionRow beating = Submit(*store, kAcme);
  std::optional<LeasedJobRow> expired_before = Lease(*store, worker.worker_id);
  std::optional<LeasedJobRow> expired_during = Lease(*store, worker.worker_id);
  std::optional<LeasedJobRow> heartbeat_first = Lease(*store, worker.worker_id);
  REQUIRE(expired_before->submission_id == before.id);
  REQUIRE(expired_during->submission_id == during.id);
  REQUIRE(heartbeat_first->submission_id == beating.id);
  // The last reaper pass ran 20 s ago, then the scheduler went down (a restart, a database
  // outage). One lease had expired before that (its worker died); the others expired while
  // nobody could serve their workers' heartbeats.
  REQUIRE_OK(database().Sql(R"sql(
      UPDATE scheduler_liveness SET alive_at = now() - interval '20 seconds';
      UPDATE jobs SET lease_expires_at = now() - interval '30 seconds'
        WHERE submission_id = ')sql" +
                            before.id + R"sql(';
      UPDATE jobs SET lease_expires_at = now() - interval '10 seconds'
        WHERE submission_id IN (')sql" +
                            during.id + "', '" + beating.id + "')"));

  // Before any reaper pass, the fence already applies the rule: a worker back first keeps
  // its lease; the one that expired before the outage stays lost.
  HeartbeatResult beat = ValueOrFail(store->Heartbeat(
      worker.worker_id, {heartbeat_first->lease, expired_before->lease}, true, ""));
  REQUIRE(beat.lost.size() == 1);
  REQUIRE(beat.lost[0].job_id == expired_before->lease.job_id);

  ReapReport pass;
  REQUIRE(ValueOrFail(store->ReapExpiredLeases(&pass)) == 1);
  CHECK(pass.outage);
  CHECK(pass.gap >= absl::Seconds(19));
  CHECK(pass.graced == 2);
  REQUIRE(ValueOrFail(store->ListJobs(before.id))[0].state == JobState::kQueued);
  for (const SubmissionRow* kept : {&during, &beating}) {
    JobRow job = ValueOrFail(store->ListJobs(kept->id))[0];
    REQUIRE(job.state == JobState::kLeased);
    REQUIRE(job.lease_expires_at.value() > absl::Now() + absl::Seconds(1));
  }
  // The worker whose heartbeat came after the pass still holds its job and completes it.
  REQUIRE(ValueOrFail(store->Heartbeat(worker.worker_id, {expired_during->lease}, true, ""))
              .lost.empty());
  REQUIRE_OK(store->CompleteJob(expired_during->lease, MakeVerdict("compile_error", "kept")));
  // The scheduler is up again: the next pass is no outage, grants nothing, reaps nothing.
  REQUIRE(ValueOrFail(store->ReapExpiredLeases(&pass)) == 0);
  CHECK_FALSE(pass.outage);
  CHECK(pass.graced == 0);
}

TEST_CASE_METHOD(PgFixture, "with regular reaper passes an expired lease is reaped on time",
                 "[store][queue][faults]") {
  StoreOptions options = Options(absl::Milliseconds(400), absl::ZeroDuration());
  options.outage_threshold = absl::Milliseconds(300);
  auto store = ConnectStore(options);
  CreateTenants(*store);
  WorkerRow worker = RegisterGpu(*store, "h200-a", "sm_90a");
  SubmissionRow submission = Submit(*store, kAcme);
  REQUIRE(ValueOrFail(store->ReapExpiredLeases()) == 0);  // The pass at start.
  std::optional<LeasedJobRow> job = Lease(*store, worker.worker_id);
  REQUIRE(job.has_value());
  const absl::Time leased = absl::Now();
  int reaped = 0;
  while (reaped == 0 && absl::Now() - leased < absl::Seconds(5)) {
    ReapReport pass;
    reaped = ValueOrFail(store->ReapExpiredLeases(&pass));
    REQUIRE_FALSE(pass.outage);  // 100 ms apart: never an outage, never a grace.
    absl::SleepFor(absl::Milliseconds(100));
  }
  REQUIRE(reaped == 1);
  // Not before the lease ran out, and within two passes after.
  const absl::Duration taken = absl::Now() - leased;
  CHECK(taken >= absl::Milliseconds(400));
  CHECK(taken < absl::Milliseconds(1500));
  REQUIRE(ValueOrFail(store->ListJobs(submission.id))[0].state == JobState::kQueued);
}

TEST_CASE_METHOD(PgFixture, "a worker that registers again gets its predecessor's leases released",
                 "[store][queue][faults]") {
  auto store = ConnectStore(Options(absl::Seconds(60), absl::ZeroDuration()));
  CreateTenants(*store);
  WorkerRow worker = RegisterGpu(*store, "h200-a", "sm_90a");
  SubmissionRow first = Submit(*store, kAcme);
  SubmissionRow second = Submit(*store, kAcme);
  std::optional<LeasedJobRow> a = Lease(*store, worker.worker_id);
  std::optional<LeasedJobRow> b = Lease(*store, worker.worker_id);
  REQUIRE((a.has_value() && b.has_value()));
  // Another worker's lease is not touched.
  WorkerRow neighbour = RegisterGpu(*store, "h200-b", "sm_90a");
  SubmissionRow theirs = Submit(*store, kAcme);
  std::optional<LeasedJobRow> c = Lease(*store, neighbour.worker_id);
  REQUIRE(c->submission_id == theirs.id);

  REQUIRE(ValueOrFail(store->ReleaseWorkerLeases(worker.worker_id, "worker restarted")) == 2);
  for (const SubmissionRow* released : {&first, &second}) {
    JobRow job = ValueOrFail(store->ListJobs(released->id))[0];
    REQUIRE(job.state == JobState::kQueued);
    REQUIRE(job.infrastructure_attempts == 1);
    REQUIRE(job.last_error == "worker restarted");
  }
  for (const WorkerRow& row : ValueOrFail(store->ListWorkers())) {
    REQUIRE(row.jobs_held == (row.worker_id == worker.worker_id ? 0 : 1));
  }
  // The predecessor's leases are dead; the new process leases the jobs again.
  REQUIRE(IsLeaseLost(store->CompleteJob(a->lease, MakeVerdict("pass"))));
  std::optional<LeasedJobRow> again = Lease(*store, worker.worker_id);
  REQUIRE(again.has_value());
  REQUIRE(again->lease.attempt == 2);
  REQUIRE(ValueOrFail(store->ReleaseWorkerLeases(worker.worker_id, "again")) == 1);
  REQUIRE(ValueOrFail(store->ReleaseWorkerLeases(worker.worker_id, "nothing held")) == 0);
  REQUIRE_OK(store->CompleteJob(c->lease, MakeVerdict("compile_error")));
  REQUIRE_STATUS(store->ReleaseWorkerLeases("not-a-uuid", "x"), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace ptxbench::store
