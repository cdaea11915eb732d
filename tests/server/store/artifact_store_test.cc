// Compile artifacts in the store (Store::CompleteJob with an artifact or an artifact report,
// Store::LeaseJob; migrations/0010_compile_artifacts), against a real PostgreSQL (a fresh
// migrated database per test case): stored with the compile job's completion and handed out
// with its round's evaluate lease, never across judging rounds or from a distrusted worker;
// a mismatch distrusts the producer, is audited, and re-judges the verdicts that used its
// artifacts unverified; malformed completions are refused naming the field.
#include <catch2/catch.hpp>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/sha256.h"
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
constexpr char kHash[] = "3f2a9c";

class ArtifactFixture : public PgFixture {
 public:
  ArtifactFixture() : store_(ConnectStore()) {
    TenantRow tenant;
    tenant.name = kAcme;
    REQUIRE_OK(store_->CreateTenant(tenant));
    producer_ = RegisterWorker("compile-host-1", /*compile_only=*/true);
  }

  Store& store() { return *store_; }
  const std::string& producer() const { return producer_; }

  std::string RegisterWorker(const std::string& hostname, bool compile_only) {
    WorkerRegistration registration;
    registration.hostname = hostname;
    registration.compile_only = compile_only;
    if (!compile_only) {
      registration.arch = v1::ARCH_SM_90A;
      registration.gpu_name = "NVIDIA H200";
      registration.gpu_uuid = "GPU-" + hostname;
    }
    return ValueOrFail(store_->RegisterWorker(registration)).worker_id;
  }

  std::string Submit() {
    NewSubmission submission;
    submission.tenant = kAcme;
    submission.task_id = kTask;
    submission.task_version_hash = kHash;
    submission.arch = v1::ARCH_SM_90A;
    submission.language = v1::SOURCE_LANGUAGE_CUDA;
    submission.source = absl::StrCat("// kernel ", ++submissions_, "\n__global__ void gemm() {}\n");
    submission.model = "test-model";
    submission.knowledge_level = v1::KNOWLEDGE_LEVEL_TEMPLATES;
    submission.scope = v1::EVALUATION_SCOPE_FULL;
    return ValueOrFail(store_->CreateSubmission(submission)).id;
  }

  LeasedJobRow Lease(const std::string& worker, v1::JobKind kind) {
    std::optional<LeasedJobRow> job = ValueOrFail(store_->LeaseJob(worker));
    REQUIRE(job.has_value());
    REQUIRE(job->kind == kind);
    return *std::move(job);
  }

  // Submits, and has `compiler` compile it with `artifact` (nullopt: none): the evaluate job is
  // then queued. Returns the submission id and the compile job's lease.
  std::pair<std::string, LeaseRef> Compiled(const std::string& compiler,
                                            const std::optional<CompileArtifactRow>& artifact) {
    const std::string id = Submit();
    const LeasedJobRow compile = Lease(compiler, v1::JOB_KIND_COMPILE);
    REQUIRE(compile.submission_id == id);
    JobCompletion completion;
    completion.verdict = CompiledVerdict();
    completion.artifact = artifact;
    const CompletionResult result = ValueOrFail(store_->CompleteJob(compile.lease, completion));
    REQUIRE(result.artifact_stored == artifact.has_value());
    return {id, compile.lease};
  }

  // Completes an evaluate job with a passing verdict and `outcome` as its artifact report.
  CompletionResult Evaluated(const LeasedJobRow& job, v1::ArtifactOutcome outcome) {
    JobCompletion completion;
    completion.verdict = PassVerdict();
    completion.artifact_use = ArtifactUseReport{outcome, "test"};
    completion.current_task_version = [](const std::string& task_id) {
      return task_id == kTask ? std::string(kHash) : std::string();
    };
    return ValueOrFail(store_->CompleteJob(job.lease, completion));
  }

  std::string Scalar(const std::string& sql) {
    return database().Scalar(sql).value().value_or("NULL");
  }

  static VerdictRow CompiledVerdict() {
    VerdictRow verdict;
    verdict.verdict_class = v1::VERDICT_CLASS_COMPILED;
    verdict.compiled = true;
    return verdict;
  }

  static VerdictRow PassVerdict() {
    VerdictRow verdict;
    verdict.verdict_class = v1::VERDICT_CLASS_PASS;
    verdict.compiled = verdict.correct = verdict.target_executed = verdict.tic = true;
    verdict.speedup = 1.5;
    return verdict;
  }

  // A module with the bytes a real cubin starts with, NUL and 0xff included (bytea, not text).
  static CompileArtifactRow Artifact(const std::string& tag) {
    CompileArtifactRow artifact;
    artifact.cubin = std::string({'\x7f', 'E', 'L', 'F', '\x02', '\x01', '\x00', '\xff'}) + tag;
    artifact.ptx = absl::StrCat(".version 8.7\n.target sm_90a\n// ", tag, "\n");
    artifact.cubin_sha256 = Sha256Hex(artifact.cubin);
    artifact.ptx_sha256 = Sha256Hex(artifact.ptx);
    artifact.compile_event_json = absl::StrCat(R"({"outcome": "compiled", "tag": ")", tag, R"("})");
    artifact.nvrtc_version = "13.0.48";
    artifact.ptxas_version = "V13.0.48";
    artifact.harness_version = "0.3.0";
    return artifact;
  }

 private:
  std::unique_ptr<Store> store_;
  std::string producer_;
  int submissions_ = 0;
};

TEST_CASE_METHOD(ArtifactFixture,
                 "a compile job's artifact is handed out with its evaluate lease, then released",
                 "[store][artifact]") {
  const std::string gpu = RegisterWorker("gpu-host-1", /*compile_only=*/false);
  const CompileArtifactRow sent = Artifact("a");
  const auto [id, compile_lease] = Compiled(producer(), sent);
  const LeasedJobRow evaluate = Lease(gpu, v1::JOB_KIND_EVALUATE);
  REQUIRE(evaluate.submission_id == id);
  REQUIRE(evaluate.artifact.has_value());
  const CompileArtifactRow& got = *evaluate.artifact;
  CHECK(got.cubin == sent.cubin);  // Byte for byte, NUL and 0xff included.
  CHECK(got.ptx == sent.ptx);
  CHECK(got.cubin_sha256 == sent.cubin_sha256);
  CHECK(got.ptx_sha256 == sent.ptx_sha256);
  CHECK(got.compile_event_json == sent.compile_event_json);
  CHECK(got.nvrtc_version == sent.nvrtc_version);
  CHECK(got.ptxas_version == sent.ptxas_version);
  CHECK(got.harness_version == sent.harness_version);
  CHECK(got.producer_job_id == compile_lease.job_id);
  CHECK(got.producer_worker_id == producer());

  const CompletionResult result = Evaluated(evaluate, v1::ARTIFACT_OUTCOME_USED);
  REQUIRE(result.finished.has_value());
  CHECK(result.distrusted_worker_id.empty());
  CHECK(result.rejudged_submission_ids.empty());
  CHECK(Scalar("SELECT outcome || ' ' || producer_worker_id || ' ' || reporter_worker_id "
               "FROM artifact_uses") == absl::StrCat("used ", producer(), " ", gpu));
  // The bytes served their one purpose; the hashes and the producer stay as evidence.
  CHECK(Scalar("SELECT (cubin IS NULL AND released_at IS NOT NULL)::text || ' ' || cubin_sha256 "
               "FROM compile_artifacts") == absl::StrCat("true ", sent.cubin_sha256));
  // The report is evidence: append-only.
  CHECK_FALSE(database().Sql("UPDATE artifact_uses SET outcome = 'verified_match'").ok());
}

TEST_CASE_METHOD(ArtifactFixture, "a compile-only submission's artifact is not kept",
                 "[store][artifact]") {
  NewSubmission submission;
  submission.tenant = kAcme;
  submission.task_id = kTask;
  submission.task_version_hash = kHash;
  submission.arch = v1::ARCH_SM_90A;
  submission.source = "// compile only\n";
  submission.knowledge_level = v1::KNOWLEDGE_LEVEL_NONE;
  submission.scope = v1::EVALUATION_SCOPE_COMPILE_ONLY;
  REQUIRE_OK(store().CreateSubmission(submission));
  const LeasedJobRow compile = Lease(producer(), v1::JOB_KIND_COMPILE);
  JobCompletion completion;
  completion.verdict = CompiledVerdict();
  completion.artifact = Artifact("c");
  const CompletionResult result = ValueOrFail(store().CompleteJob(compile.lease, completion));
  CHECK(result.finished.has_value());
  CHECK_FALSE(result.artifact_stored);
  CHECK(Scalar("SELECT count(*) FROM compile_artifacts") == "0");
}

TEST_CASE_METHOD(ArtifactFixture, "a re-judge round never gets the previous round's artifact",
                 "[store][artifact]") {
  const std::string gpu = RegisterWorker("gpu-host-1", /*compile_only=*/false);
  const auto [id, round0_compile] = Compiled(producer(), Artifact("round 0"));
  const LeasedJobRow round0 = Lease(gpu, v1::JOB_KIND_EVALUATE);
  REQUIRE(round0.artifact.has_value());
  // A kernel failure ends the round without a completion: round 0's bytes are not released.
  REQUIRE_OK(store().FailJob(round0.lease, v1::FAILURE_KIND_KERNEL, "illegal address"));
  REQUIRE(Scalar("SELECT count(*) FROM compile_artifacts WHERE cubin IS NOT NULL") == "1");

  RejudgeFilter filter;
  filter.task_ids = {kTask};
  filter.task_version_hashes[kTask] = kHash;
  REQUIRE(ValueOrFail(store().Rejudge(filter)).submission_ids == std::vector<std::string>{id});
  // Round 1's compile job completes without an artifact: its evaluate job gets none.
  const LeasedJobRow round1_compile = Lease(producer(), v1::JOB_KIND_COMPILE);
  REQUIRE_OK(store().CompleteJob(round1_compile.lease, CompiledVerdict()));
  const LeasedJobRow round1 = Lease(gpu, v1::JOB_KIND_EVALUATE);
  CHECK(round1.submission_id == id);
  CHECK_FALSE(round1.artifact.has_value());
  // Nor can its worker report on one: none of its round was stored.
  JobCompletion completion;
  completion.verdict = PassVerdict();
  completion.artifact_use = ArtifactUseReport{v1::ARTIFACT_OUTCOME_USED, ""};
  const absl::Status refused = store().CompleteJob(round1.lease, completion).status();
  CHECK(refused.code() == absl::StatusCode::kInvalidArgument);
  CHECK(absl::StartsWith(refused.message(), "artifact_use:"));
  // NONE needs no artifact.
  completion.artifact_use->outcome = v1::ARTIFACT_OUTCOME_NONE;
  REQUIRE_OK(store().CompleteJob(round1.lease, completion));
  CHECK(Scalar("SELECT count(*) FROM artifact_uses") == "0");
}

TEST_CASE_METHOD(ArtifactFixture,
                 "a mismatch distrusts the producer and re-judges the verdicts that used its "
                 "artifacts unverified",
                 "[store][artifact]") {
  const std::string gpu = RegisterWorker("gpu-host-1", /*compile_only=*/false);
  const std::string other_gpu = RegisterWorker("gpu-host-2", /*compile_only=*/false);
  // used: judged with the producer's artifact, unverified.
  const std::string used = Compiled(producer(), Artifact("used")).first;
  CHECK(Evaluated(Lease(gpu, v1::JOB_KIND_EVALUATE), v1::ARTIFACT_OUTCOME_USED)
            .rejudged_submission_ids.empty());
  // verified: the GPU worker compiled itself and found the same module.
  const std::string verified = Compiled(producer(), Artifact("verified")).first;
  Evaluated(Lease(gpu, v1::JOB_KIND_EVALUATE), v1::ARTIFACT_OUTCOME_VERIFIED_MATCH);
  // in_flight: its evaluate job holds the producer's artifact while the mismatch is found.
  const std::string in_flight = Compiled(producer(), Artifact("in flight")).first;
  const LeasedJobRow in_flight_job = Lease(other_gpu, v1::JOB_KIND_EVALUATE);
  REQUIRE(in_flight_job.artifact.has_value());
  // caught: the GPU worker compiled itself and found another module.
  const std::string caught = Compiled(producer(), Artifact("forged")).first;
  const LeasedJobRow caught_job = Lease(gpu, v1::JOB_KIND_EVALUATE);
  const CompletionResult mismatch = Evaluated(caught_job, v1::ARTIFACT_OUTCOME_MISMATCH);

  CHECK(mismatch.distrusted_worker_id == producer());
  CHECK(mismatch.rejudged_submission_ids == std::vector<std::string>{used});
  CHECK(mismatch.not_rejudged_submission_ids.empty());
  const SubmissionRow rejudging = ValueOrFail(store().GetSubmission(used, ""));
  CHECK(rejudging.state == v1::SUBMISSION_STATE_QUEUED);
  CHECK(rejudging.judging_round == 1);
  // The other verdicts rest on the GPU worker's own compile and stand.
  for (const std::string& id : {verified, caught}) {
    const SubmissionRow row = ValueOrFail(store().GetSubmission(id, ""));
    CHECK(row.state == v1::SUBMISSION_STATE_FINISHED);
    CHECK(row.judging_round == 0);
  }
  // The mark is audited, with the reporter as the actor and the evidence in the detail.
  bool audited = false;
  for (const AuditRow& row : ValueOrFail(store().ListAuditLog(AuditEntity::kWorker, producer()))) {
    if (!absl::StrContains(row.detail_json, "\"distrusted\": true")) continue;
    audited = true;
    CHECK(row.actor == "worker:" + gpu);
    CHECK(absl::StrContains(row.detail_json, caught_job.lease.job_id));
    CHECK(absl::StrContains(row.detail_json, "failed verification"));
  }
  CHECK(audited);

  // A verdict that used the producer's artifact after it was distrusted is re-judged as it
  // is stored.
  const CompletionResult late = Evaluated(in_flight_job, v1::ARTIFACT_OUTCOME_USED);
  CHECK(late.distrusted_worker_id.empty());  // Distrusted before.
  CHECK(late.rejudged_submission_ids == std::vector<std::string>{in_flight});

  // No artifact of the producer is handed out again, while another compile-only worker's is:
  // the re-judged submission's new round gets the honest worker's.
  const std::string honest = RegisterWorker("compile-host-2", /*compile_only=*/true);
  const LeasedJobRow recompile = Lease(honest, v1::JOB_KIND_COMPILE);
  CHECK(recompile.submission_id == used);
  JobCompletion completion;
  completion.verdict = CompiledVerdict();
  completion.artifact = Artifact("honest");
  REQUIRE(ValueOrFail(store().CompleteJob(recompile.lease, completion)).artifact_stored);
  const LeasedJobRow rejudged = Lease(gpu, v1::JOB_KIND_EVALUATE);
  REQUIRE(rejudged.artifact.has_value());
  CHECK(rejudged.artifact->producer_worker_id == honest);
  CHECK(rejudged.artifact->producer_job_id == recompile.lease.job_id);
  Evaluated(rejudged, v1::ARTIFACT_OUTCOME_USED);
  // in_flight's round 1 is compiled by the distrusted producer: its evaluate job gets nothing.
  const LeasedJobRow by_distrusted = Lease(producer(), v1::JOB_KIND_COMPILE);
  CHECK(by_distrusted.submission_id == in_flight);
  completion.artifact = Artifact("distrusted");
  REQUIRE_OK(store().CompleteJob(by_distrusted.lease, completion));
  const LeasedJobRow without = Lease(gpu, v1::JOB_KIND_EVALUATE);
  CHECK(without.submission_id == in_flight);
  CHECK_FALSE(without.artifact.has_value());
}

TEST_CASE_METHOD(ArtifactFixture, "malformed artifact completions are refused naming the field",
                 "[store][artifact]") {
  const std::string gpu = RegisterWorker("gpu-host-1", /*compile_only=*/false);
  Submit();
  const LeasedJobRow compile = Lease(producer(), v1::JOB_KIND_COMPILE);
  const auto refused = [&](const LeaseRef& lease, const JobCompletion& completion,
                           const std::string& field) {
    const absl::Status status = store().CompleteJob(lease, completion).status();
    INFO(status.ToString());
    CHECK(status.code() == absl::StatusCode::kInvalidArgument);
    CHECK(absl::StartsWith(status.message(), field + ":"));
  };
  JobCompletion completion;
  completion.verdict = CompiledVerdict();
  completion.artifact = Artifact("x");
  completion.artifact->cubin_sha256 = "ABC";
  refused(compile.lease, completion, "artifact.cubin_sha256");
  completion.artifact = Artifact("x");
  completion.artifact->ptxas_version.clear();
  refused(compile.lease, completion, "artifact.ptxas_version");
  completion.artifact = Artifact("x");
  completion.verdict.verdict_class = v1::VERDICT_CLASS_COMPILE_ERROR;
  completion.verdict.compiled = false;
  refused(compile.lease, completion, "artifact");
  completion.verdict = CompiledVerdict();
  completion.artifact.reset();
  completion.artifact_use = ArtifactUseReport{v1::ARTIFACT_OUTCOME_USED, ""};
  refused(compile.lease, completion, "artifact_use");
  completion.artifact_use->outcome = v1::ARTIFACT_OUTCOME_UNSPECIFIED;
  refused(compile.lease, completion, "artifact_use.outcome");
  // Nothing of those was stored: the job is still leased and completes normally.
  REQUIRE(Scalar(absl::StrCat("SELECT state FROM jobs WHERE id = '", compile.lease.job_id, "'")) ==
          "leased");
  completion.artifact_use.reset();
  completion.artifact = Artifact("x");
  REQUIRE(ValueOrFail(store().CompleteJob(compile.lease, completion)).artifact_stored);

  const LeasedJobRow evaluate = Lease(gpu, v1::JOB_KIND_EVALUATE);
  completion.verdict = PassVerdict();
  refused(evaluate.lease, completion, "artifact");
}

TEST_CASE_METHOD(ArtifactFixture, "0010's down migration refuses to drop a distrust mark",
                 "[store][artifact][migration]") {
  const std::string gpu = RegisterWorker("gpu-host-1", /*compile_only=*/false);
  Compiled(producer(), Artifact("forged"));
  Evaluated(Lease(gpu, v1::JOB_KIND_EVALUATE), v1::ARTIFACT_OUTCOME_MISMATCH);
  // The migrations after 0010 hold nothing of the mark and revert first; then 0010 refuses.
  int after_0010 = 0;
  for (const auto& entry : std::filesystem::directory_iterator(MigrationsDir())) {
    const std::string name = entry.path().filename().string();
    if (absl::EndsWith(name, ".up.sql") && std::stoi(name.substr(0, 4)) > 10) ++after_0010;
  }
  if (after_0010 > 0) REQUIRE_OK(store().MigrateDown(MigrationsDir(), after_0010));
  const absl::Status down = store().MigrateDown(MigrationsDir(), 1);
  REQUIRE_FALSE(down.ok());
  CHECK(absl::StrContains(down.message(), "distrusted workers exist"));
  CHECK(ValueOrFail(store().SchemaVersion()) == 10);
  // Lifted by an operator (audited), the migration reverts.
  REQUIRE(database()
              .Sql("UPDATE workers SET distrusted_at = NULL, distrust_reason = NULL, "
                   "distrust_detail = NULL")
              .ok());
  REQUIRE_OK(store().MigrateDown(MigrationsDir(), 1));
  CHECK(ValueOrFail(store().SchemaVersion()) == 9);
}

}  // namespace
}  // namespace ptxbench::store
