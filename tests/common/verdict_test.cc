#include "common/verdict.h"

#include <catch2/catch.hpp>

namespace ptxbench {
namespace {

TEST_CASE("Every verdict class and stage round-trips through its name") {
  for (int i = 0; i <= static_cast<int>(VerdictClass::kCancelled); ++i) {
    const auto c = static_cast<VerdictClass>(i);
    const std::string name = VerdictClassName(c);
    CHECK(name != "unknown");
    auto parsed = ParseVerdictClass(name);
    REQUIRE(parsed.ok());
    CHECK(*parsed == c);
  }
  CHECK(VerdictClassName(VerdictClass::kTargetNotExecuted) == "target_not_executed");
  CHECK(VerdictClassName(VerdictClass::kPlanInvalid) == "plan_invalid");
  for (int i = 0; i <= static_cast<int>(Stage::kDone); ++i) {
    const auto s = static_cast<Stage>(i);
    auto parsed = ParseStage(StageName(s));
    REQUIRE(parsed.ok());
    CHECK(*parsed == s);
  }
  CHECK(StageName(Stage::kTargetInstructions) == "target_instructions");
  CHECK(ParseVerdictClass("PASS").status().message() == "unknown verdict class 'PASS'");
  CHECK(ParseStage("").status().message() == "unknown stage ''");
}

TEST_CASE("A verdict survives the JSON round trip") {
  Verdict verdict;
  verdict.verdict_class = VerdictClass::kTargetNotExecuted;
  verdict.compiled = true;
  verdict.correct = true;
  verdict.target_executed = false;
  verdict.tic = false;
  verdict.speedup = 0.73;
  verdict.message = "wgmma: 0 predicate-on executions of HGMMA";
  verdict.runtime_unverified = false;
  StageReport compile;
  compile.stage = Stage::kCompile;
  compile.ok = true;
  compile.summary = "compiled for sm_90a in 0.41 s";
  compile.detail = {{"registers", 168}, {"ptx_families", {{"wgmma", 4}}}};
  compile.seconds = 0.41;
  StageReport correctness{Stage::kCorrectness, true, "4 workloads within tolerance", nullptr, 2.5};
  verdict.stages = {compile, correctness};
  verdict.report = {{"worker", "h200-0"}, {"seeds", {1, 2, 3}}};

  const nlohmann::json json = ToJson(verdict);
  CHECK(json["verdict_class"] == "target_not_executed");
  CHECK(json["stages"][0]["stage"] == "compile");
  auto back = VerdictFromJson(json);
  REQUIRE(back.ok());
  CHECK(back->verdict_class == verdict.verdict_class);
  CHECK(back->compiled);
  CHECK(back->correct);
  CHECK_FALSE(back->target_executed);
  CHECK_FALSE(back->tic);
  CHECK(back->speedup == 0.73);
  CHECK(back->message == verdict.message);
  REQUIRE(back->stages.size() == 2);
  CHECK(back->stages[0].stage == Stage::kCompile);
  CHECK(back->stages[0].detail == compile.detail);
  CHECK(back->stages[1].detail.is_null());
  CHECK(back->stages[1].seconds == 2.5);
  CHECK(back->report == verdict.report);
  // Serializing again gives the same document, through a string too.
  CHECK(ToJson(*back) == json);
  auto reparsed = VerdictFromJson(nlohmann::json::parse(json.dump()));
  REQUIRE(reparsed.ok());
  CHECK(ToJson(*reparsed) == json);
}

TEST_CASE("Both TIC definitions, the strong check, harness and sampling round-trip") {
  Verdict verdict;
  verdict.verdict_class = VerdictClass::kTargetWorkInsufficient;
  verdict.compiled = verdict.correct = verdict.target_executed = true;
  verdict.tic_paper = true;
  verdict.tic = false;
  verdict.target_work.strong_check = StrongCheck::kMade;
  verdict.target_work.reason = "wgmma did 2.2e-05 % of the task's FLOPs (threshold 90.0 %)";
  verdict.target_work.share_of_task = 2.2e-7;
  verdict.target_work.share_of_executed = 2.1e-7;
  verdict.target_work.min_share_of_task = 0.9;
  verdict.target_work.min_share_of_executed = 0.9;
  verdict.target_work.path_checked = true;
  verdict.target_work.path_agrees = true;
  verdict.target_work.figures = {{"work_share", {{"counted_samples", 4}}}};
  verdict.harness = {"0.2.0", std::string(64, 'a')};
  verdict.sampling = Sampling{"sample_cap", false, false, 0.12, 0.004, "did not converge"};
  const nlohmann::json json = ToJson(verdict);
  CHECK(json["tic_paper"] == true);
  CHECK(json["target_work"]["strong_check"] == "made");
  CHECK(json["harness"]["engine"] == "0.2.0");
  CHECK(json["sampling"]["speedup_stable"] == false);
  auto back = VerdictFromJson(json);
  REQUIRE(back.ok());
  CHECK(back->tic_paper);
  CHECK_FALSE(back->tic);
  CHECK(back->target_work.strong_check == StrongCheck::kMade);
  CHECK(back->target_work.share_of_task == 2.2e-7);
  CHECK(back->target_work.min_share_of_executed == 0.9);
  CHECK(back->target_work.figures == verdict.target_work.figures);
  CHECK(back->harness.task_hash == verdict.harness.task_hash);
  REQUIRE(back->sampling.has_value());
  CHECK(back->sampling->stop_reason == "sample_cap");
  CHECK_FALSE(back->sampling->speedup_stable);
  CHECK(ToJson(*back) == json);
  // A verdict stored before these fields existed: its tic was the paper's, no check was made.
  nlohmann::json old = json;
  for (const char* key : {"tic_paper", "target_work", "harness", "sampling"}) old.erase(key);
  old["tic"] = true;
  auto legacy = VerdictFromJson(old);
  REQUIRE(legacy.ok());
  CHECK(legacy->tic_paper);
  CHECK(legacy->target_work.strong_check == StrongCheck::kNotMade);
  CHECK_FALSE(legacy->sampling.has_value());
  for (StrongCheck s : {StrongCheck::kMade, StrongCheck::kNotMade, StrongCheck::kNotReached}) {
    auto parsed = ParseStrongCheck(StrongCheckName(s));
    REQUIRE(parsed.ok());
    CHECK(*parsed == s);
  }
  CHECK_FALSE(ParseStrongCheck("maybe").ok());
  nlohmann::json bad = json;
  bad["target_work"]["strong_check"] = "maybe";
  CHECK(VerdictFromJson(bad).status().message() == "unknown strong check state 'maybe'");
}

TEST_CASE("Malformed verdict JSON is refused with the field named") {
  nlohmann::json json = ToJson(Verdict{});
  json.erase("tic");
  CHECK(VerdictFromJson(json).status().message() == "verdict JSON: missing field 'tic'");
  json = ToJson(Verdict{});
  json["compiled"] = "yes";
  CHECK(VerdictFromJson(json).status().message() ==
        "verdict JSON: field 'compiled': expected a boolean");
  json = ToJson(Verdict{});
  json["verdict_class"] = "great";
  CHECK(VerdictFromJson(json).status().message() == "unknown verdict class 'great'");
  json = ToJson(Verdict{});
  json["stages"] = {{{"stage", "compile"}}};
  CHECK(VerdictFromJson(json).status().message() ==
        "verdict JSON: stages[0]: stage report JSON: missing field 'ok'");
  CHECK(VerdictFromJson(nlohmann::json::array()).status().message() ==
        "verdict JSON: not an object");
}

}  // namespace
}  // namespace ptxbench
