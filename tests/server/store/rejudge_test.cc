// Re-judging and hacked marks (Store::Rejudge, MarkHacked, ListSupersededVerdicts;
// migrations/0009_rejudge), against a real PostgreSQL (a fresh migrated database per test
// case): a round's life from re-queue to the superseding verdict, the fence against an old
// round's lease, the filters, the views that skip hacked submissions, and the audit trail.
#include <catch2/catch.hpp>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "proto/wire_names.h"
#include "server/store/store.h"
#include "tests/support/pg_fixture.h"
#include "tests/support/status_testing.h"

namespace ptxbench::store {
namespace {

using ::ptxbench::testing::MigrationsDir;
using ::ptxbench::testing::PgFixture;
using ::ptxbench::testing::ValueOrFail;

constexpr char kAcme[] = "acme";
constexpr char kTask[] = "gemm_n7168_k5120";
constexpr char kOtherTask[] = "softmax_n4096";

void CreateAcme(Store& store) {
  TenantRow tenant;
  tenant.name = kAcme;
  REQUIRE_OK(store.CreateTenant(tenant));
}

SubmissionRow Submit(Store& store, const std::string& task_id = kTask,
                     const std::string& session_id = "session-1", int turn_index = 0) {
  static int counter = 0;
  NewSubmission submission;
  submission.tenant = kAcme;
  submission.task_id = task_id;
  submission.task_version_hash = "3f2a9c";
  submission.arch = v1::ARCH_SM_90A;
  submission.language = v1::SOURCE_LANGUAGE_PTX;
  submission.source = absl::StrCat("// kernel ", counter++, "\n.version 8.7\n.target sm_90a\n");
  submission.model = "test-model";
  submission.session_id = session_id;
  submission.turn_index = turn_index;
  submission.knowledge_level = v1::KNOWLEDGE_LEVEL_TEMPLATES;
  submission.scope = v1::EVALUATION_SCOPE_FULL;
  return ValueOrFail(store.CreateSubmission(submission));
}

std::string RegisterGpu(Store& store) {
  WorkerRegistration registration;
  registration.hostname = "gpu-host";
  registration.arch = v1::ARCH_SM_90A;
  registration.gpu_name = "NVIDIA H200";
  registration.gpu_uuid = "GPU-1";
  return ValueOrFail(store.RegisterWorker(registration)).worker_id;
}

// A verdict as a worker reports it: `engine` empty means no harness recorded (a verdict of
// a worker from before verdicts carried one).
VerdictRow Verdict(v1::VerdictClass verdict_class, const std::string& engine, double speedup) {
  VerdictRow verdict;
  verdict.verdict_class = verdict_class;
  verdict.compiled = true;
  verdict.correct = verdict_class == v1::VERDICT_CLASS_PASS;
  verdict.target_executed = verdict.correct;
  verdict.tic = verdict.correct;
  verdict.speedup = verdict.correct ? speedup : 0;
  const std::string name = absl::AsciiStrToUpper(wire::VerdictClassName(verdict_class));
  verdict.verdict_json =
      engine.empty()
          ? absl::StrCat(R"({"verdict_class": "VERDICT_CLASS_)", name, R"("})")
          : absl::StrCat(R"({"verdict_class": "VERDICT_CLASS_)", name,
                         R"(", "harness": {"engine": ")", engine, R"(", "task_hash": "ab"}})");
  return verdict;
}

// Runs the one round that is queued: lease the compile job, report it compiled, lease the
// evaluate job, report `verdict`. Returns the evaluate job's lease.
LeaseRef JudgeRound(Store& store, const std::string& worker_id, const VerdictRow& verdict) {
  auto compile = ValueOrFail(store.LeaseJob(worker_id));
  REQUIRE(compile.has_value());
  REQUIRE(compile->kind == v1::JOB_KIND_COMPILE);
  VerdictRow compiled;
  compiled.verdict_class = v1::VERDICT_CLASS_COMPILED;
  compiled.compiled = true;
  REQUIRE_OK(store.CompleteJob(compile->lease, compiled));
  auto evaluate = ValueOrFail(store.LeaseJob(worker_id));
  REQUIRE(evaluate.has_value());
  REQUIRE(evaluate->kind == v1::JOB_KIND_EVALUATE);
  REQUIRE_OK(store.CompleteJob(evaluate->lease, verdict));
  return evaluate->lease;
}

// The tasks' content changed since the first judging (what a harness change usually is).
constexpr char kNewHash[] = "7c1d4e";

RejudgeFilter ForTasks(std::vector<std::string> task_ids, const std::string& older_than = "") {
  RejudgeFilter filter;
  for (const std::string& task_id : task_ids) filter.task_version_hashes[task_id] = kNewHash;
  filter.task_ids = std::move(task_ids);
  filter.harness_older_than = older_than;
  filter.reason = "harness 0.2.0 checks target work";
  return filter;
}

std::string Scalar(PgFixture& fixture, const std::string& sql) {
  return fixture.database().Scalar(sql).value().value_or("NULL");
}

TEST_CASE_METHOD(PgFixture,
                 "a re-judged submission serves its old verdict until the new one supersedes it",
                 "[store][rejudge]") {
  auto store = ConnectStore();
  CreateAcme(*store);
  const std::string worker = RegisterGpu(*store);
  const SubmissionRow submission = Submit(*store);
  const LeaseRef old_lease =
      JudgeRound(*store, worker, Verdict(v1::VERDICT_CLASS_PASS, "0.1.0", 3.5));

  RejudgeResult result = ValueOrFail(store->Rejudge(ForTasks({kTask}, "0.2.0"), "admin:ops"));
  REQUIRE(result.submission_ids == std::vector<std::string>{submission.id});

  // Back in the queue with its old verdict still current: no reader sees it without one.
  SubmissionRow rejudging = ValueOrFail(store->GetSubmission(submission.id, ""));
  REQUIRE(rejudging.state == v1::SUBMISSION_STATE_QUEUED);
  REQUIRE(rejudging.judging_round == 1);
  REQUIRE(rejudging.verdict.has_value());
  REQUIRE(rejudging.verdict->verdict_class == v1::VERDICT_CLASS_PASS);
  REQUIRE(rejudging.verdict->round == 0);
  // The new round judges against the task as it is now: the catalog's current version.
  REQUIRE(rejudging.task_version_hash == kNewHash);
  REQUIRE(Scalar(*this, "SELECT verdict_class FROM leaderboard_results") == "pass");
  // A second re-judge while one is open opens nothing.
  REQUIRE(ValueOrFail(store->Rejudge(ForTasks({kTask}))).submission_ids.empty());
  // The submitter cannot cancel the re-judge to keep the old verdict.
  SubmissionRow after_cancel = ValueOrFail(store->CancelSubmission(submission.id, kAcme));
  REQUIRE(after_cancel.state == v1::SUBMISSION_STATE_QUEUED);
  REQUIRE(after_cancel.verdict->verdict_class == v1::VERDICT_CLASS_PASS);

  // Attack: the worker that held the old round's lease reports again after the re-judge.
  absl::Status late = store->CompleteJob(old_lease, Verdict(v1::VERDICT_CLASS_PASS, "0.1.0", 9));
  REQUIRE(IsLeaseLost(late));
  REQUIRE(store->ReportStage(old_lease, v1::STAGE_TIMING, "{}").code() ==
          absl::StatusCode::kFailedPrecondition);

  JudgeRound(*store, worker, Verdict(v1::VERDICT_CLASS_WRONG_RESULT, "0.2.0", 0));
  SubmissionRow rejudged = ValueOrFail(store->GetSubmission(submission.id, ""));
  REQUIRE(rejudged.state == v1::SUBMISSION_STATE_FINISHED);
  REQUIRE(rejudged.verdict->verdict_class == v1::VERDICT_CLASS_WRONG_RESULT);
  REQUIRE(rejudged.verdict->round == 1);
  REQUIRE(rejudged.superseded_verdicts == 1);
  REQUIRE(Scalar(*this, "SELECT verdict_class FROM leaderboard_results") == "wrong_result");
  REQUIRE(Scalar(*this, "SELECT count(*) FROM benchmark_turns WHERE tic") == "0");

  auto superseded = ValueOrFail(store->ListSupersededVerdicts(submission.id));
  REQUIRE(superseded.size() == 1);
  REQUIRE(superseded[0].verdict.verdict_class == v1::VERDICT_CLASS_PASS);
  REQUIRE(superseded[0].verdict.speedup == 3.5);
  REQUIRE(superseded[0].verdict.round == 0);
  REQUIRE(superseded[0].superseded_by_round == 1);
  REQUIRE(superseded[0].rejudge_reason == "harness 0.2.0 checks target work");
  REQUIRE(absl::StrContains(superseded[0].verdict.verdict_json, "0.1.0"));

  // Each round has its own jobs; the audit log has the re-queue by the admin.
  auto jobs = ValueOrFail(store->ListJobs(submission.id));
  REQUIRE(jobs.size() == 4);
  REQUIRE(jobs[0].round == 0);
  REQUIRE(jobs[3].round == 1);
  bool requeue_audited = false;
  for (const AuditRow& row :
       ValueOrFail(store->ListAuditLog(AuditEntity::kSubmission, submission.id))) {
    if (row.old_state == "finished" && row.new_state == "queued" && row.actor == "admin:ops") {
      requeue_audited = true;
    }
  }
  REQUIRE(requeue_audited);

  // superseded_verdicts is evidence: append-only even for the superuser.
  REQUIRE_FALSE(database().Sql("UPDATE superseded_verdicts SET speedup = 100").ok());
  REQUIRE_FALSE(database().Sql("DELETE FROM superseded_verdicts").ok());
  REQUIRE_FALSE(database().Sql("TRUNCATE superseded_verdicts").ok());

  // A third round: many superseded rows per submission (LIKE did not copy the primary key).
  REQUIRE(ValueOrFail(store->Rejudge(ForTasks({kTask}))).submission_ids.size() == 1);
  JudgeRound(*store, worker, Verdict(v1::VERDICT_CLASS_PASS, "0.2.0", 1.25));
  superseded = ValueOrFail(store->ListSupersededVerdicts(submission.id));
  REQUIRE(superseded.size() == 2);
  REQUIRE(superseded[1].verdict.verdict_class == v1::VERDICT_CLASS_WRONG_RESULT);
  REQUIRE(superseded[1].superseded_by_round == 2);
  REQUIRE(ValueOrFail(store->GetSubmission(submission.id, "")).verdict->speedup == 1.25);
}

TEST_CASE_METHOD(PgFixture, "the fence refuses an old round's job even if it were still leased",
                 "[store][rejudge]") {
  auto store = ConnectStore();
  CreateAcme(*store);
  const std::string worker = RegisterGpu(*store);
  const SubmissionRow submission = Submit(*store);
  const LeaseRef old_lease =
      JudgeRound(*store, worker, Verdict(v1::VERDICT_CLASS_PASS, "0.1.0", 2));
  REQUIRE(ValueOrFail(store->Rejudge(ForTasks({kTask}))).submission_ids.size() == 1);
  // Make the old round's evaluate job look held again (a bug, or an operator in psql): only
  // the round check stands between its result and the new round.
  REQUIRE_OK(database()
                 .Sql(absl::StrCat("UPDATE jobs SET state = 'leased', lease_expires_at = now() + "
                                   "interval '1 hour' WHERE id = '",
                                   old_lease.job_id, "'"))
                 .status());
  REQUIRE(IsLeaseLost(store->CompleteJob(old_lease, Verdict(v1::VERDICT_CLASS_PASS, "0.1.0", 50))));
  REQUIRE(IsLeaseLost(store->ReportStage(old_lease, v1::STAGE_TIMING, "{}")));
  SubmissionRow row = ValueOrFail(store->GetSubmission(submission.id, ""));
  REQUIRE(row.state == v1::SUBMISSION_STATE_QUEUED);
  REQUIRE(row.verdict->speedup == 2);
  REQUIRE(row.superseded_verdicts == 0);
}

TEST_CASE_METHOD(PgFixture, "rejudge selects by task, harness version and submission id",
                 "[store][rejudge]") {
  auto store = ConnectStore();
  CreateAcme(*store);
  const std::string worker = RegisterGpu(*store);
  const std::string old_engine = Submit(*store, kTask, "a").id;
  JudgeRound(*store, worker, Verdict(v1::VERDICT_CLASS_PASS, "0.9.1", 2));
  const std::string newer_engine = Submit(*store, kTask, "b").id;
  JudgeRound(*store, worker, Verdict(v1::VERDICT_CLASS_PASS, "0.10.0", 2));
  const std::string no_harness = Submit(*store, kTask, "c").id;
  JudgeRound(*store, worker, Verdict(v1::VERDICT_CLASS_PASS, "", 2));
  const std::string other_task = Submit(*store, kOtherTask, "d").id;
  JudgeRound(*store, worker, Verdict(v1::VERDICT_CLASS_PASS, "0.1.0", 2));
  const std::string unfinished = Submit(*store, kTask, "e").id;

  SECTION("malformed input is refused naming the field") {
    absl::Status empty = store->Rejudge(ForTasks({})).status();
    REQUIRE(empty.code() == absl::StatusCode::kInvalidArgument);
    REQUIRE(absl::StrContains(empty.message(), "task_ids"));
    absl::Status blank = store->Rejudge(ForTasks({""})).status();
    REQUIRE(blank.code() == absl::StatusCode::kInvalidArgument);
    for (const char* version : {"v0.2", "0..2", "0.2.", ".2", "0.2-rc1", "latest"}) {
      absl::Status bad = store->Rejudge(ForTasks({kTask}, version)).status();
      REQUIRE(bad.code() == absl::StatusCode::kInvalidArgument);
      REQUIRE(absl::StrContains(bad.message(), "harness_older_than"));
    }
    RejudgeFilter no_hash = ForTasks({kTask});
    no_hash.task_version_hashes.clear();
    absl::Status hash_status = store->Rejudge(no_hash).status();
    REQUIRE(hash_status.code() == absl::StatusCode::kInvalidArgument);
    REQUIRE(absl::StrContains(hash_status.message(), "no current version hash for task"));
    RejudgeFilter bad_id = ForTasks({kTask});
    bad_id.submission_ids = {"not-a-uuid"};
    absl::Status id_status = store->Rejudge(bad_id).status();
    REQUIRE(id_status.code() == absl::StatusCode::kInvalidArgument);
    REQUIRE(absl::StrContains(id_status.message(), "submission_ids"));
    REQUIRE(Scalar(*this, "SELECT count(*) FROM submissions WHERE judging_round > 0") == "0");
  }
  SECTION("harness_older_than compares versions part by part; none recorded is older") {
    auto result = ValueOrFail(store->Rejudge(ForTasks({kTask}, "0.10.0")));
    REQUIRE(result.submission_ids == std::vector<std::string>{old_engine, no_harness});
  }
  SECTION("without a version every finished submission of the tasks") {
    auto result = ValueOrFail(store->Rejudge(ForTasks({kTask, kOtherTask})));
    REQUIRE(result.submission_ids ==
            std::vector<std::string>{old_engine, newer_engine, no_harness, other_task});
    REQUIRE(ValueOrFail(store->GetSubmission(unfinished, "")).judging_round == 0);
  }
  SECTION("submission ids narrow the tasks' set") {
    RejudgeFilter filter = ForTasks({kTask});
    filter.submission_ids = {newer_engine, other_task};  // other_task is not of kTask.
    auto result = ValueOrFail(store->Rejudge(filter));
    REQUIRE(result.submission_ids == std::vector<std::string>{newer_engine});
  }
}

TEST_CASE_METHOD(PgFixture, "a hacked submission leaves the rankings but keeps its evidence",
                 "[store][rejudge][hacked]") {
  auto store = ConnectStore();
  CreateAcme(*store);
  const std::string worker = RegisterGpu(*store);
  const std::string honest = Submit(*store, kTask, "honest").id;
  JudgeRound(*store, worker, Verdict(v1::VERDICT_CLASS_PASS, "0.2.0", 1.5));
  const std::string gamer = Submit(*store, kTask, "gamer").id;
  JudgeRound(*store, worker, Verdict(v1::VERDICT_CLASS_PASS, "0.2.0", 40));
  REQUIRE(Scalar(*this, "SELECT count(*) FROM leaderboard_results") == "2");

  REQUIRE(store->MarkHacked(gamer, "", "admin:ops").status().code() ==
          absl::StatusCode::kInvalidArgument);
  SubmissionRow marked =
      ValueOrFail(store->MarkHacked(gamer, "times an empty stream", "admin:ops"));
  REQUIRE(marked.hacked.has_value());
  REQUIRE(marked.hacked->reason == "times an empty stream");
  REQUIRE(marked.hacked->by == "admin:ops");

  // Out of every ranking view; its verdict, source and events remain.
  REQUIRE(Scalar(*this, "SELECT string_agg(submission_id::text, ',') FROM leaderboard_results") ==
          honest);
  REQUIRE(Scalar(*this, "SELECT string_agg(submission_id::text, ',') FROM benchmark_turns") ==
          honest);
  REQUIRE(Scalar(*this, "SELECT round(best_tic_speedup::numeric, 2) FROM benchmark_trajectories") ==
          "1.50");
  SubmissionRow kept = ValueOrFail(store->GetSubmission(gamer, kAcme));
  REQUIRE(kept.verdict->speedup == 40);
  REQUIRE(kept.hacked.has_value());
  REQUIRE_FALSE(ValueOrFail(store->ListStageEvents(gamer, 0)).empty());

  // Marking twice: the first mark stands.
  absl::Status twice = store->MarkHacked(gamer, "another reason", "admin:other").status();
  REQUIRE(twice.code() == absl::StatusCode::kAlreadyExists);
  REQUIRE(absl::StrContains(twice.message(), "times an empty stream"));
  REQUIRE(ValueOrFail(store->GetSubmission(gamer, "")).hacked->by == "admin:ops");

  // Unmarking puts it back; both acts are audited with their actors.
  REQUIRE(ValueOrFail(store->UnmarkHacked(gamer, "admin:lead")).hacked == std::nullopt);
  REQUIRE(store->UnmarkHacked(gamer, "admin:lead").status().code() ==
          absl::StatusCode::kFailedPrecondition);
  REQUIRE(Scalar(*this, "SELECT count(*) FROM leaderboard_results") == "2");
  std::vector<std::string> marks;
  for (const AuditRow& row : ValueOrFail(store->ListAuditLog(AuditEntity::kSubmission, gamer))) {
    if (absl::StrContains(row.detail_json, "hacked")) marks.push_back(row.actor);
  }
  REQUIRE(marks == std::vector<std::string>{"admin:ops", "admin:lead"});
  REQUIRE(store->MarkHacked("00000000-0000-0000-0000-000000000000", "x", "admin").status().code() ==
          absl::StatusCode::kNotFound);
}

TEST_CASE_METHOD(PgFixture, "0009's down migration refuses to drop rounds and marks",
                 "[store][rejudge][migration]") {
  auto store = ConnectStore();
  CreateAcme(*store);
  const std::string worker = RegisterGpu(*store);
  Submit(*store);
  JudgeRound(*store, worker, Verdict(v1::VERDICT_CLASS_PASS, "0.1.0", 2));
  REQUIRE(ValueOrFail(store->Rejudge(ForTasks({kTask}))).submission_ids.size() == 1);
  // The migrations after 0009 (0010_compile_artifacts, 0011_unstable_speedups, ...) hold
  // nothing of the round and revert first; then 0009 refuses.
  int after_0009 = 0;
  for (const auto& entry : std::filesystem::directory_iterator(MigrationsDir())) {
    const std::string name = entry.path().filename().string();
    if (absl::EndsWith(name, ".up.sql") && std::stoi(name.substr(0, 4)) > 9) ++after_0009;
  }
  if (after_0009 > 0) REQUIRE_OK(store->MigrateDown(MigrationsDir(), after_0009));
  absl::Status down = store->MigrateDown(MigrationsDir(), 1);
  REQUIRE_FALSE(down.ok());
  REQUIRE(absl::StrContains(down.message(), "re-judged or hacked"));
  REQUIRE(ValueOrFail(store->SchemaVersion()) == 9);
}

}  // namespace
}  // namespace ptxbench::store
