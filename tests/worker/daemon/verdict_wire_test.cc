// The engine's verdict reaches the wire with every field, and every class and stage name maps
// to its proto enum (a name that failed to parse would silently become UNSPECIFIED).
#include "worker/daemon/verdict_wire.h"

#include <catch2/catch.hpp>

#include "absl/time/clock.h"

namespace ptxbench::worker {
namespace {

TEST_CASE("every verdict class and stage has a wire value") {
  for (VerdictClass c :
       {VerdictClass::kPass, VerdictClass::kCompileError, VerdictClass::kPlanInvalid,
        VerdictClass::kRuntimeError, VerdictClass::kTimeout, VerdictClass::kWrongResult,
        VerdictClass::kTargetNotExecuted, VerdictClass::kInputMutated,
        VerdictClass::kImpossibleTime, VerdictClass::kCompiled,
        VerdictClass::kInfrastructureFailure, VerdictClass::kCancelled,
        VerdictClass::kTargetWorkInsufficient, VerdictClass::kProfiledPathDiffers}) {
    Verdict verdict;
    verdict.verdict_class = c;
    INFO(VerdictClassName(c));
    CHECK(ToWire(verdict).verdict_class() != v1::VERDICT_CLASS_UNSPECIFIED);
  }
  for (Stage s : {Stage::kQueued, Stage::kCompile, Stage::kCorrectness, Stage::kTargetInstructions,
                  Stage::kTiming, Stage::kDone}) {
    StageReport report;
    report.stage = s;
    INFO(StageName(s));
    CHECK(ToWire(report).stage() != v1::STAGE_UNSPECIFIED);
  }
}

TEST_CASE("a verdict keeps its figures, stages and audit record on the wire") {
  Verdict verdict;
  verdict.verdict_class = VerdictClass::kTargetNotExecuted;
  verdict.compiled = true;
  verdict.correct = true;
  verdict.speedup = 0.25;
  verdict.message = "wgmma: present in SASS but never executed";
  verdict.report = {{"seeds", {1, 2}}};
  StageReport compile;
  compile.stage = Stage::kCompile;
  compile.ok = true;
  compile.summary = "compiled";
  compile.detail = {{"registers", 168}};
  compile.seconds = 0.4;
  verdict.stages.push_back(compile);

  const absl::Time before = absl::Now();
  const v1::Verdict wire = ToWire(verdict);
  const absl::Time after = absl::Now();
  CHECK(wire.verdict_class() == v1::VERDICT_CLASS_TARGET_NOT_EXECUTED);
  CHECK(wire.compiled());
  CHECK(wire.correct());
  CHECK_FALSE(wire.target_executed());
  CHECK_FALSE(wire.tic());
  CHECK(wire.speedup() == 0.25);
  CHECK(wire.message() == verdict.message);
  REQUIRE(wire.stages_size() == 1);
  CHECK(wire.stages(0).stage() == v1::STAGE_COMPILE);
  CHECK(wire.stages(0).detail_json() == R"({"registers":168})");
  CHECK(wire.stages(0).seconds() == 0.4);
  CHECK(wire.report_json() == R"({"seeds":[1,2]})");
  CHECK(wire.finished_at().seconds() > 0);
  // To the nanosecond, between the clock before and after: whole seconds would read earlier
  // than `before` (service_bench takes cadences of a fraction of a second from it).
  const absl::Time finished = absl::FromUnixSeconds(wire.finished_at().seconds()) +
                              absl::Nanoseconds(wire.finished_at().nanos());
  CHECK(finished >= before);
  CHECK(finished <= after);
}

TEST_CASE("both TIC definitions, the strong check, harness and sampling reach the wire") {
  Verdict verdict;
  verdict.verdict_class = VerdictClass::kPass;
  verdict.tic_paper = true;
  verdict.tic = false;
  verdict.target_work.strong_check = StrongCheck::kNotMade;
  verdict.target_work.reason = "hardware counters were not collected on the timed path: refused";
  verdict.target_work.share_of_task = 0.97;
  verdict.target_work.min_share_of_task = 0.9;
  verdict.target_work.figures = {{"path_agreement", {{"checked", false}}}};
  verdict.harness = {"0.2.0", "abc"};
  verdict.sampling = Sampling{"time_cap", false, true, 0.004, 0.003, "ended at its time cap"};
  const v1::Verdict wire = ToWire(verdict);
  CHECK(wire.tic_paper());
  CHECK_FALSE(wire.tic());
  CHECK(wire.target_work().strong_check() == v1::STRONG_CHECK_NOT_MADE);
  CHECK(wire.target_work().reason() == verdict.target_work.reason);
  CHECK(wire.target_work().share_of_task() == 0.97);
  CHECK(wire.target_work().min_share_of_task() == 0.9);
  CHECK(wire.target_work().figures_json() == R"({"path_agreement":{"checked":false}})");
  CHECK(wire.harness().engine() == "0.2.0");
  CHECK(wire.harness().task_hash() == "abc");
  CHECK(wire.has_sampling());
  CHECK(wire.sampling().stop_reason() == "time_cap");
  CHECK_FALSE(wire.sampling().converged());
  CHECK(wire.sampling().speedup_stable());
  for (StrongCheck s : {StrongCheck::kMade, StrongCheck::kNotMade, StrongCheck::kNotReached}) {
    verdict.target_work.strong_check = s;
    CHECK(ToWire(verdict).target_work().strong_check() != v1::STRONG_CHECK_UNSPECIFIED);
  }
  verdict.sampling.reset();
  CHECK_FALSE(ToWire(verdict).has_sampling());
}

}  // namespace
}  // namespace ptxbench::worker
