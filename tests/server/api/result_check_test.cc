// What a worker's result may say for its job (result_check.h), against the repository's real
// GEMM task and the shapes of verdicts the engine sends (figures from the H200 run of
// docs/results/2026-11-30-h200-gpu-test-5.json).
#include "server/api/result_check.h"

#include <catch2/catch.hpp>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/task.h"
#include "tests/server/api/api_test_support.h"
#include "tests/support/status_testing.h"

namespace ptxbench::api {
namespace {

using ::ptxbench::testing::ValueOrFail;

const Task& Gemm() {
  static const Task task =
      ValueOrFail(LoadTask(absl::StrCat(api_test::SourceDir(), "/tasks/gemm_n7168_k5120")));
  return task;
}

store::CompletingJob Job(v1::JobKind kind) {
  store::CompletingJob job;
  job.kind = kind;
  job.scope = v1::EVALUATION_SCOPE_FULL;
  job.task_id = Gemm().id;
  job.task_version_hash = Gemm().version_hash;
  job.arch = v1::ARCH_SM_90A;
  return job;
}

void AddStage(v1::Verdict& verdict, v1::Stage stage, bool ok, const std::string& detail = "{}") {
  v1::StageResult* result = verdict.add_stages();
  result->set_stage(stage);
  result->set_ok(ok);
  result->set_detail_json(detail);
}

std::string Timing(double candidate_ms, double baseline_ms) {
  return absl::StrCat(R"({"timing": {"result": {"candidate": {"median_ms": )", candidate_ms,
                      R"(}, "baseline": {"median_ms": )", baseline_ms,
                      R"(}, "speedup": 1}}, "roofline_floor_ms": 0.56})");
}

// An honest PASS as the engine sends it: 0.797 ms against cuBLASLt's 0.770 ms.
v1::Verdict HonestPass() {
  v1::Verdict verdict;
  verdict.set_verdict_class(v1::VERDICT_CLASS_PASS);
  verdict.set_compiled(true);
  verdict.set_correct(true);
  verdict.set_target_executed(true);
  verdict.set_tic(true);
  verdict.set_speedup(0.770 / 0.797);
  AddStage(verdict, v1::STAGE_COMPILE, true);
  AddStage(verdict, v1::STAGE_CORRECTNESS, true);
  AddStage(verdict, v1::STAGE_TARGET_INSTRUCTIONS, true);
  AddStage(verdict, v1::STAGE_TIMING, true, Timing(0.797, 0.770));
  return verdict;
}

void CheckRefused(const store::CompletingJob& job, const v1::Verdict& verdict,
                  const std::string& mentions) {
  absl::Status status = CheckResult(job, verdict, &Gemm());
  INFO(status.ToString());
  REQUIRE(absl::IsInvalidArgument(status));
  REQUIRE_THAT(std::string(status.message()), Catch::Contains(mentions));
}

TEST_CASE("the server's roofline floor of the GEMM is the engine's on the H200",
          "[api][result_check]") {
  // The engine measured 0.5617 ms on the lent H200 (gpu-test-5, roofline_floor_ms).
  CHECK(ValueOrFail(ServerRooflineFloorMs(Gemm(), v1::ARCH_SM_90A)) ==
        Approx(0.5617).epsilon(1e-3));
  CHECK(ValueOrFail(ServerRooflineFloorMs(Gemm(), v1::ARCH_SM_100A)) <
        ValueOrFail(ServerRooflineFloorMs(Gemm(), v1::ARCH_SM_90A)));
  REQUIRE_STATUS(ServerRooflineFloorMs(Gemm(), v1::ARCH_UNSPECIFIED),
                 absl::StatusCode::kInvalidArgument);
}

TEST_CASE("honest results pass: compile verdicts, a pass, failures and an impossible time",
          "[api][result_check]") {
  v1::Verdict compiled;
  compiled.set_verdict_class(v1::VERDICT_CLASS_COMPILED);
  compiled.set_compiled(true);
  AddStage(compiled, v1::STAGE_COMPILE, true);
  REQUIRE_OK(CheckResult(Job(v1::JOB_KIND_COMPILE), compiled, &Gemm()));
  v1::Verdict compile_error;
  compile_error.set_verdict_class(v1::VERDICT_CLASS_COMPILE_ERROR);
  AddStage(compile_error, v1::STAGE_COMPILE, false);
  REQUIRE_OK(CheckResult(Job(v1::JOB_KIND_COMPILE), compile_error, &Gemm()));
  REQUIRE_OK(CheckResult(Job(v1::JOB_KIND_EVALUATE), compile_error, &Gemm()));

  REQUIRE_OK(CheckResult(Job(v1::JOB_KIND_EVALUATE), HonestPass(), &Gemm()));
  // Without the task version the floor is not checked; everything else still is.
  REQUIRE_OK(CheckResult(Job(v1::JOB_KIND_EVALUATE), HonestPass(), nullptr));
  // A pass timed without a timing stage (run_timing off) reports speedup 0.
  v1::Verdict untimed = HonestPass();
  untimed.set_speedup(0);
  untimed.mutable_stages()->RemoveLast();
  REQUIRE_OK(CheckResult(Job(v1::JOB_KIND_EVALUATE), untimed, &Gemm()));

  v1::Verdict wrong;
  wrong.set_verdict_class(v1::VERDICT_CLASS_WRONG_RESULT);
  wrong.set_compiled(true);
  AddStage(wrong, v1::STAGE_COMPILE, true);
  AddStage(wrong, v1::STAGE_CORRECTNESS, false);
  REQUIRE_OK(CheckResult(Job(v1::JOB_KIND_EVALUATE), wrong, &Gemm()));

  // The decoy that read results from elsewhere: 0.176 ms, below the 0.56 ms floor, speedup
  // 4.33, classed impossible_time by the engine: stored as it is (it fails anyway).
  v1::Verdict impossible = HonestPass();
  impossible.set_verdict_class(v1::VERDICT_CLASS_IMPOSSIBLE_TIME);
  impossible.set_tic(false);
  impossible.set_speedup(0.761 / 0.176);
  impossible.mutable_stages(3)->set_ok(false);
  impossible.mutable_stages(3)->set_detail_json(Timing(0.176, 0.761));
  REQUIRE_OK(CheckResult(Job(v1::JOB_KIND_EVALUATE), impossible, &Gemm()));

  v1::Verdict missing_family = HonestPass();
  missing_family.set_verdict_class(v1::VERDICT_CLASS_TARGET_NOT_EXECUTED);
  missing_family.set_target_executed(false);
  missing_family.set_tic(false);
  missing_family.mutable_stages(2)->set_ok(false);
  REQUIRE_OK(CheckResult(Job(v1::JOB_KIND_EVALUATE), missing_family, &Gemm()));
  // The families ran but did too little of the work (issue 11's strong check).
  v1::Verdict token_use = missing_family;
  token_use.set_target_executed(true);
  REQUIRE_OK(CheckResult(Job(v1::JOB_KIND_EVALUATE), token_use, &Gemm()));
}

TEST_CASE("a compile job's result cannot claim what only a GPU can show", "[api][result_check]") {
  const store::CompletingJob compile = Job(v1::JOB_KIND_COMPILE);
  // The exploit: a forged PASS with TIC and speedup 1e9 for a compile job.
  v1::Verdict forged = HonestPass();
  forged.set_speedup(1e9);
  CheckRefused(compile, forged, "a compile job cannot end with verdict class pass");
  // The same with a compile-job class but the GPU stages' claims.
  v1::Verdict compiled;
  compiled.set_verdict_class(v1::VERDICT_CLASS_COMPILED);
  compiled.set_compiled(true);
  AddStage(compiled, v1::STAGE_COMPILE, true);
  v1::Verdict with_tic = compiled;
  with_tic.set_tic(true);
  CheckRefused(compile, with_tic, "cannot report correct, target_executed or tic");
  v1::Verdict with_speedup = compiled;
  with_speedup.set_speedup(3);
  CheckRefused(compile, with_speedup, "cannot report a speedup");
  v1::Verdict with_timing = compiled;
  AddStage(with_timing, v1::STAGE_TIMING, true, Timing(1, 1));
  CheckRefused(compile, with_timing, "cannot report a timing stage");
  v1::Verdict no_stage = compiled;
  no_stage.clear_stages();
  CheckRefused(compile, no_stage, "needs the compile stage");
  v1::Verdict failed_stage = compiled;
  failed_stage.mutable_stages(0)->set_ok(false);
  CheckRefused(compile, failed_stage, "needs compiled and a passed compile stage");
  v1::Verdict runtime_class = compiled;
  runtime_class.set_verdict_class(v1::VERDICT_CLASS_WRONG_RESULT);
  CheckRefused(compile, runtime_class, "wrong_result");
}

TEST_CASE("an evaluate job's verdict needs its stages and stays within physical bounds",
          "[api][result_check]") {
  const store::CompletingJob evaluate = Job(v1::JOB_KIND_EVALUATE);
  // The exploit on a full-scope job: speedup 1e9.
  v1::Verdict huge = HonestPass();
  huge.set_speedup(1e9);
  CheckRefused(evaluate, huge, "above the physical bound");
  // Within the cap but not what the timing stage measured.
  v1::Verdict inflated = HonestPass();
  inflated.set_speedup(5);
  CheckRefused(evaluate, inflated, "is not the timing stage's baseline / candidate");
  // Consistent numbers below the floor of the fastest sm_90a GPU, classed pass.
  v1::Verdict too_fast = HonestPass();
  too_fast.set_speedup(0.770 / 0.3);
  too_fast.mutable_stages(3)->set_detail_json(Timing(0.3, 0.770));
  CheckRefused(evaluate, too_fast, "below the roofline floor");
  v1::Verdict no_medians = HonestPass();
  no_medians.mutable_stages(3)->set_detail_json("{}");
  CheckRefused(evaluate, no_medians, "candidate and baseline medians");
  v1::Verdict untimed = HonestPass();
  untimed.mutable_stages()->RemoveLast();
  CheckRefused(evaluate, untimed, "needs a timing stage");
  // A pass without the stages it needs, or with flags that contradict it.
  v1::Verdict no_correctness = HonestPass();
  no_correctness.mutable_stages(1)->set_ok(false);
  CheckRefused(evaluate, no_correctness, "needs a passed correctness stage");
  // A pass whose strong TIC check was not made (no counters on this machine) is not TIC:
  // honest, and worth nothing to a forger.
  v1::Verdict no_tic = HonestPass();
  no_tic.set_tic(false);
  REQUIRE_OK(CheckResult(evaluate, no_tic, &Gemm()));
  v1::Verdict tic_elsewhere = HonestPass();
  tic_elsewhere.set_verdict_class(v1::VERDICT_CLASS_WRONG_RESULT);
  CheckRefused(evaluate, tic_elsewhere, "tic holds only for pass");
  v1::Verdict unverified = HonestPass();
  unverified.set_runtime_unverified(true);
  CheckRefused(evaluate, unverified, "runtime_unverified");
  v1::Verdict not_correct = HonestPass();
  not_correct.set_correct(false);
  CheckRefused(evaluate, not_correct, "needs compiled, correct and target_executed");
  v1::Verdict odd_stage = HonestPass();
  odd_stage.mutable_stages(0)->set_stage(v1::STAGE_DONE);
  CheckRefused(evaluate, odd_stage, "is not a stage a worker runs");
  v1::Verdict negative = HonestPass();
  negative.set_speedup(-1);
  CheckRefused(evaluate, negative, "not a number >= 0");
}

}  // namespace
}  // namespace ptxbench::api
