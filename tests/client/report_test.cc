// `ptxbench report` against the hand-written fixture in testdata/report (4 groups of 3
// trajectories; every expected figure below is worked out by hand in the comments).
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "client/report/commands.h"
#include "client/report/metrics.h"
#include "client/report/render.h"
#include "tests/support/process.h"
#include "tests/support/status_testing.h"
#include "tests/support/temp_files.h"

namespace ptxbench::client::report {
namespace {

namespace fs = std::filesystem;
using Catch::Matchers::Contains;
using ::ptxbench::testing::ReadWholeFile;
using ::ptxbench::testing::ScopedTempDir;
using ::ptxbench::testing::ValueOrFail;

std::string SourceDir() {
  if (const char* dir = std::getenv("PTXBENCH_SOURCE_DIR")) return dir;
  return PTXBENCH_SOURCE_DIR_DEFAULT;
}

std::string FixtureDir() { return SourceDir() + "/tests/client/testdata/report"; }

int Count(const std::string& text, const std::string& needle) {
  int count = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) {
    ++count;
  }
  return count;
}

const GroupMetrics& Group(const Report& report, const std::string& model, const std::string& task,
                          const std::string& arch) {
  for (const GroupMetrics& g : report.groups) {
    if (g.key.model == model && g.key.task == task && g.key.arch == arch) return g;
  }
  FAIL("no group " << model << " " << task << " " << arch);
  return report.groups.front();
}

void CheckRate(const std::optional<Rate>& rate, int hits, int total) {
  REQUIRE(rate.has_value());
  CHECK(rate->hits == hits);
  CHECK(rate->total == total);
}

void CheckRate(const Rate& rate, int hits, int total) {
  CHECK(rate.hits == hits);
  CHECK(rate.total == total);
}

Report FixtureReport() {
  std::vector<Trajectory> trajectories = ValueOrFail(LoadTrajectories({FixtureDir()}));
  REQUIRE(trajectories.size() == 12);
  ReportOptions options;
  options.turn_limits = {1, 3, 4, 8};
  return ValueOrFail(BuildReport(trajectories, options));
}

TEST_CASE("Report figures equal the hand-computed values of the fixture") {
  const Report report = FixtureReport();
  REQUIRE(report.groups.size() == 4);
  CHECK(report.files == 12);

  SECTION("model-a gemm: TIC first at charged turns 2, 3 (after an uncharged infra turn), never") {
    const GroupMetrics& g = Group(report, "openai:model-a", "gemm_n7168_k5120", "sm_90a");
    CHECK(g.trajectories == 3);
    REQUIRE(g.tic_at_limit.size() == 4);
    // The infra-failed record in traj-01 carries a pass verdict with speedup 9.0: were it
    // charged, TIC@1 would be 1/3 and the best speedup 9.
    CheckRate(g.tic_at_limit[0], 0, 3);
    CheckRate(g.tic_at_limit[1], 2, 3);
    CheckRate(g.tic_at_limit[2], 2, 3);
    CheckRate(g.tic_at_limit[3], 2, 3);
    REQUIRE(g.tic_curve.size() == 8);
    CheckRate(g.tic_curve[1], 1, 3);  // TIC@2: only traj-00.
    CheckRate(g.correct, 2, 3);       // traj-01's target_not_executed turn is correct.
    CheckRate(g.compiled, 2, 3);      // traj-02 never compiled.
    REQUIRE(g.fast_p.size() == 3);
    CheckRate(g.fast_p[0], 2, 3);  // p = 0.5: 0.8/1.25 and 1.1.
    CheckRate(g.fast_p[1], 2, 3);  // p = 1.0: 1.25 and 1.1.
    CheckRate(g.fast_p[2], 1, 3);  // p = 1.2: only 1.25.
    CHECK(g.tic_speedups == std::vector<double>{0.8, 1.25, 1.1});
    REQUIRE(g.geomean_speedup.has_value());
    CHECK(*g.geomean_speedup == Approx(std::cbrt(0.8 * 1.25 * 1.1)).epsilon(1e-12));
    CHECK(*g.best_speedup == 1.25);
    CHECK(g.charged_turns == 14);
    CHECK(g.infra_failed_turns == 1);
    // Input 1000 on every charged turn (99999 on the uncharged one); output 7000 / 14.
    CHECK(g.input_tokens_per_turn == 1000);
    CHECK(g.output_tokens_per_turn == 500);
    CHECK(g.reasoning_tokens_per_turn == 100);
    CHECK(g.runtime_unverified_turns == 0);
  }

  SECTION("model-a mha: an unfinished trajectory with a torn line counts with its two turns") {
    const GroupMetrics& g = Group(report, "openai:model-a", "mha_with_lse_d128", "sm_90a");
    CheckRate(g.tic_at_limit[0], 2, 3);
    CheckRate(g.tic_at_limit[3], 2, 3);
    CheckRate(g.correct, 2, 3);
    CheckRate(g.compiled, 3, 3);
    CheckRate(g.fast_p[0], 2, 3);  // 2.0 and exactly 0.5: thresholds are inclusive.
    CheckRate(g.fast_p[1], 1, 3);
    CheckRate(g.fast_p[2], 1, 3);
    CHECK(*g.geomean_speedup == Approx(1.0).epsilon(1e-12));  // sqrt(2.0 * 0.5)
    CHECK(*g.best_speedup == 2.0);
    CHECK(g.unfinished == 1);
    CHECK(g.charged_turns == 5);
  }

  SECTION("model-b gemm: TIC first at turns 1, 5, 2") {
    const GroupMetrics& g = Group(report, "anthropic:model-b", "gemm_n7168_k5120", "sm_90a");
    CheckRate(g.tic_at_limit[0], 1, 3);
    CheckRate(g.tic_at_limit[1], 2, 3);
    CheckRate(g.tic_at_limit[2], 2, 3);
    CheckRate(g.tic_at_limit[3], 3, 3);
    CheckRate(g.correct, 3, 3);
    CheckRate(g.fast_p[0], 3, 3);
    CheckRate(g.fast_p[1], 3, 3);  // 1.0 >= 1.0.
    CheckRate(g.fast_p[2], 2, 3);  // 3.0 and exactly 1.2.
    CHECK(*g.geomean_speedup == Approx(std::cbrt(1.0 * 3.0 * 1.2)).epsilon(1e-12));
    CHECK(*g.best_speedup == 3.0);
  }

  SECTION("model-b mha on sm_100a: runtime_unverified verdicts are never TIC") {
    const GroupMetrics& g = Group(report, "anthropic:model-b", "mha_with_lse_d128", "sm_100a");
    CHECK(g.min_budget == 3);
    CheckRate(g.tic_at_limit[0], 0, 3);
    CheckRate(g.tic_at_limit[1], 0, 3);
    // A budget of 3 says nothing about turn 4 or 8.
    CHECK_FALSE(g.tic_at_limit[2].has_value());
    CHECK_FALSE(g.tic_at_limit[3].has_value());
    // Turn 2 of each claims pass/tic/correct with speedup 2.5, but is runtime_unverified.
    CheckRate(g.correct, 0, 3);
    CheckRate(g.compiled, 3, 3);
    CheckRate(g.fast_p[0], 0, 3);
    CHECK(g.tic_speedups.empty());
    CHECK_FALSE(g.geomean_speedup.has_value());
    CHECK(g.runtime_unverified_turns == 9);
  }

  SECTION("the torn line and the unfinished trajectory are reported") {
    REQUIRE(report.warnings.size() == 2);
    CHECK_THAT(report.warnings[0], Contains("model-a/mha_with_lse_d128/sm_90a/templates/"
                                            "traj-02.jsonl:4: torn last line"));
    CHECK_THAT(report.warnings[1], Contains("1 unfinished trajectories"));
  }
}

TEST_CASE("The same trajectory read twice is counted once") {
  std::vector<Trajectory> trajectories =
      ValueOrFail(LoadTrajectories({FixtureDir(), FixtureDir()}));
  REQUIRE(trajectories.size() == 24);
  Report report = ValueOrFail(BuildReport(trajectories, ReportOptions{}));
  for (const GroupMetrics& g : report.groups) CHECK(g.trajectories == 3);
  CHECK(std::count_if(report.warnings.begin(), report.warnings.end(), [](const std::string& w) {
          return w.find("same trajectory") != std::string::npos;
        }) == 12);
}

TEST_CASE("Bad report options are refused") {
  std::vector<Trajectory> none;
  ReportOptions options;
  options.turn_limits = {0};
  REQUIRE_STATUS(BuildReport(none, options), absl::StatusCode::kInvalidArgument);
  options = ReportOptions{};
  options.fast_p = {-1};
  REQUIRE_STATUS(BuildReport(none, options), absl::StatusCode::kInvalidArgument);
}

TEST_CASE("Table, Markdown and HTML hold every row, the marker and self-contained plots") {
  const Report report = FixtureReport();
  const std::string table = RenderTable(report);
  CHECK_THAT(table, Contains("TIC@8"));
  CHECK_THAT(table, Contains("fast_0.5"));
  CHECK_THAT(table, Contains("fast_1.0"));
  CHECK_THAT(table, Contains("fast_1.2"));
  CHECK_THAT(table, Contains(std::string("sm_100a") + kUnverifiedMarker));
  CHECK_THAT(table, Contains("never counts as TIC"));

  const std::string markdown = RenderMarkdown(report);
  // One table row per group, with counts; rates of the hand-computed values.
  CHECK_THAT(
      markdown,
      Contains("| openai:model-a | gemm_n7168_k5120 | sm_90a | templates | 3 | 0.0% (0/3) | "
               "66.7% (2/3) | 66.7% (2/3) | 66.7% (2/3) | 66.7% (2/3) | 66.7% (2/3) | "
               "66.7% (2/3) | 66.7% (2/3) | 33.3% (1/3) | 1.032 | - | 1.250 | 1000 | 500 | 100 |"));
  CHECK_THAT(markdown, Contains("| anthropic:model-b | mha_with_lse_d128 | sm_100a\xE2\x80\xA0 | "
                                "templates | 3 | 0.0% (0/3) | 0.0% (0/3) | n/a | n/a |"));
  CHECK_THAT(markdown, Contains("| anthropic:model-b | gemm_n7168_k5120 | sm_90a |"));
  CHECK_THAT(markdown, Contains("| openai:model-a | mha_with_lse_d128 | sm_90a |"));
  CHECK(std::count(markdown.begin(), markdown.end(), '\n') > 8);

  const std::string html = RenderHtml(report);
  CHECK(html.rfind("<!DOCTYPE html>", 0) == 0);
  CHECK_THAT(html, Contains("</html>"));
  CHECK_THAT(html,
             Contains("<td class=\"k model\">openai:model-a</td><td class=\"k\">gemm_n7168_k5120"));
  // Provenance and 95 % intervals on the page.
  CHECK_THAT(html, Contains("<dl class=\"provenance\""));
  CHECK_THAT(html, Contains("title=\"2/3; 95% Wilson interval 20.8&ndash;93.9%\">66.7%"
                            "<span class=\"ci\">21&ndash;94%</span>"));
  CHECK_THAT(html, Contains("<tr class=\"unverified\">"));
  // Two plots per task (TIC curve, speedup strip), each an inline <svg>, in a <figure>.
  CHECK(Count(html, "<svg class=\"plot\"") == 4);
  CHECK(Count(html, "<figure id=") == 4);
  CHECK(Count(html, "<svg ") == Count(html, "</svg>"));
  CHECK_THAT(html, Contains("<polyline"));
  // Self-contained: nothing fetched, no script.
  for (const char* external :
       {"http:", "https:", "src=", "href=", "<script", "<link", "@import", "url("}) {
    INFO(external);
    CHECK(html.find(external) == std::string::npos);
  }
}

TEST_CASE("ptxbench report prints the table and writes Markdown, HTML and JSON") {
  ScopedTempDir out_dir("ptxbench-report-");
  std::ostringstream out;
  std::ostringstream err;
  const int code = ReportCommand({"--out", out_dir.path(), FixtureDir()}, out, err);
  INFO(err.str());
  REQUIRE(code == 0);
  CHECK_THAT(out.str(), Contains("openai:model-a"));
  CHECK_THAT(out.str(), Contains("wrote " + out_dir.path() + "/report.html"));
  CHECK_THAT(ReadWholeFile(out_dir.path() + "/report.md"), Contains("# PTXBench report"));
  CHECK_THAT(ReadWholeFile(out_dir.path() + "/report.html"), Contains("<svg"));
  const nlohmann::json json = nlohmann::json::parse(ReadWholeFile(out_dir.path() + "/report.json"));
  REQUIRE(json["groups"].size() == 4);
  CHECK(json["groups"][0]["model"] == "anthropic:model-b");
  CHECK(json["groups"][0]["tic_rate_at_turn_limit"]["8"]["hits"] == 3);
  CHECK(json["groups"][1]["tic_rate_at_turn_limit"]["8"].is_null());
  CHECK(json["groups"][0]["fast_p"]["fast_1.2"]["hits"] == 2);
}

TEST_CASE("A malformed trajectory file fails the report with its file and line") {
  ScopedTempDir dir("ptxbench-report-");
  fs::copy(FixtureDir(), dir.path(), fs::copy_options::recursive);
  const std::string bad =
      dir.path() + "/openai_model-a/gemm_n7168_k5120/sm_90a/templates/traj-01.jsonl";
  std::string text = ReadWholeFile(bad);
  // Line 3 loses its "extracted" field.
  size_t line3 = text.find('\n', text.find('\n') + 1) + 1;
  size_t field = text.find("\"extracted\":true,", line3);
  REQUIRE(field != std::string::npos);
  text.erase(field, std::string("\"extracted\":true,").size());
  std::ofstream(bad, std::ios::binary | std::ios::trunc) << text;

  auto loaded = LoadTrajectories({dir.path()});
  REQUIRE_STATUS(loaded, absl::StatusCode::kInvalidArgument);
  CHECK(std::string(loaded.status().message()) == bad + ":3: missing field 'extracted'");

  std::ostringstream out;
  std::ostringstream err;
  CHECK(ReportCommand({"--no-files", dir.path()}, out, err) == 2);
  CHECK_THAT(err.str(), Contains(bad + ":3: missing field 'extracted'"));
  CHECK(ReportCommand({"--limits", "1,x", FixtureDir()}, out, err) == 2);
  CHECK_THAT(err.str(), Contains("--limits: 'x' is not an integer"));
  CHECK(ReportCommand({dir.path() + "/nowhere"}, out, err) == 2);
  CHECK_THAT(err.str(), Contains("nowhere: not a directory"));
}

}  // namespace
}  // namespace ptxbench::client::report

namespace ptxbench::client::report {
namespace {

// Trajectories made in memory, for figures the hand-written fixture does not hold.
TurnRecord Turn(int number, VerdictClass verdict_class, double speedup = 0,
                std::optional<std::pair<double, double>> floor_and_median = std::nullopt) {
  TurnRecord turn;
  turn.turn = number;
  turn.extracted = true;
  turn.source = absl::StrCat("kernel-", number);
  Verdict verdict;
  verdict.verdict_class = verdict_class;
  verdict.compiled = verdict_class != VerdictClass::kCompileError;
  verdict.correct = verdict.tic = verdict.target_executed = verdict_class == VerdictClass::kPass;
  verdict.speedup = speedup;
  verdict.report = {{"harness_version", "ptxbench-engine/0.1"},
                    {"device", {{"name", "NVIDIA H200"}}}};
  if (floor_and_median.has_value()) {
    StageReport timing;
    timing.stage = Stage::kTiming;
    timing.ok = true;
    timing.detail = {
        {"roofline_floor_ms", floor_and_median->first},
        {"timing", {{"result", {{"candidate", {{"median_ms", floor_and_median->second}}}}}}}};
    verdict.stages.push_back(timing);
  }
  turn.verdict = verdict;
  return turn;
}

Trajectory Made(const std::string& model, int index, v1::EvaluationScope scope,
                std::vector<TurnRecord> turns, bool scope_recorded = true) {
  Trajectory t;
  t.path = absl::StrCat("/made/", model, "/traj-", index, ".jsonl");
  t.header.run.model = model;
  t.header.run.provider = "openai";
  t.header.run.task = "gemm_n7168_k5120";
  t.header.run.task_version = "v7";
  t.header.run.arch = "sm_90a";
  t.header.run.knowledge = "none";
  t.header.run.trajectory_index = index;
  t.header.run.turns = 8;
  t.header.run.scope = scope;
  t.header.run.client_version = "ptxbench 0.1 (abc1234)";
  t.header.run.server = "embedded";
  t.header.run.temperature = -1;
  t.header.started_at = absl::StrCat("2026-12-01T00:00:0", index, "Z");
  t.header.scope_recorded = scope_recorded;
  t.turns = std::move(turns);
  t.end = TrajectoryEnd{};
  return t;
}

TEST_CASE("Wilson intervals of the rates") {
  // Worked out with z = 1.96: 2/3 -> [0.2077, 0.9385]; 0/3 -> [0, 0.5615]; 8/8 -> [0.6756, 1].
  Interval i = WilsonInterval({2, 3});
  CHECK(i.low == Approx(0.2077).margin(1e-4));
  CHECK(i.high == Approx(0.9385).margin(1e-4));
  i = WilsonInterval({0, 3});
  CHECK(i.low == 0);
  CHECK(i.high == Approx(0.5615).margin(1e-4));
  i = WilsonInterval({8, 8});
  CHECK(i.low == Approx(0.6756).margin(1e-4));
  CHECK(i.high == Approx(1.0).margin(1e-12));
  i = WilsonInterval({0, 0});
  CHECK(i.low == 0);
  CHECK(i.high == 1);
}

TEST_CASE("Speed of light: roofline floor over the median, only where it can be true") {
  // 0.5 ms floor, 0.8 ms median: 62.5 %. A floor above the median is impossible (that time is
  // refused as impossible_time), a missing figure says nothing: neither counts.
  std::vector<Trajectory> trajectories = {
      Made("openai:m", 0, v1::EVALUATION_SCOPE_FULL,
           {Turn(1, VerdictClass::kPass, 1.2, std::pair{0.5, 0.8}),
            Turn(2, VerdictClass::kPass, 1.5, std::pair{0.9, 0.6}),
            Turn(3, VerdictClass::kPass, 1.1)}),
      Made("openai:m", 1, v1::EVALUATION_SCOPE_FULL,
           {Turn(1, VerdictClass::kWrongResult, 0, std::pair{0.5, 0.6}),
            Turn(2, VerdictClass::kPass, 0.9, std::pair{0.2, 0.8})}),
  };
  const Report report = ValueOrFail(BuildReport(trajectories, ReportOptions{}));
  REQUIRE(report.groups.size() == 1);
  const GroupMetrics& g = report.groups[0];
  CHECK(g.tic_speeds_of_light == std::vector<double>{0.625, 0.25});
  CHECK(*g.geomean_speed_of_light == Approx(std::sqrt(0.625 * 0.25)));
  CHECK(*g.best_speed_of_light == 0.625);
  CHECK_FALSE(SpeedOfLight(trajectories[1].turns[0]).has_value());  // Not TIC.
  // Provenance lists what the files and verdicts record.
  CHECK(report.provenance.client_versions == std::vector<std::string>{"ptxbench 0.1 (abc1234)"});
  CHECK(report.provenance.harness_versions == std::vector<std::string>{"ptxbench-engine/0.1"});
  CHECK(report.provenance.gpus == std::vector<std::string>{"NVIDIA H200"});
  CHECK(report.provenance.task_versions == std::vector<std::string>{"gemm_n7168_k5120 v7"});
  CHECK(report.provenance.first_started_at == "2026-12-01T00:00:00Z");
  CHECK(report.provenance.last_started_at == "2026-12-01T00:00:01Z");
  REQUIRE(report.provenance.model_settings.size() == 1);
  CHECK_THAT(report.provenance.model_settings[0], Contains("temperature provider default"));
  const nlohmann::json json = ReportJson(report);
  CHECK(json["provenance"]["servers"] == nlohmann::json::array({"embedded"}));
  CHECK(json["groups"][0]["correct_rate"]["wilson95"].size() == 2);
}

TurnRecord WithSampling(TurnRecord turn, bool speedup_stable) {
  Sampling sampling;
  sampling.stop_reason = speedup_stable ? "converged" : "sample_cap";
  sampling.converged = speedup_stable;
  sampling.speedup_stable = speedup_stable;
  sampling.candidate_scatter = speedup_stable ? 0.004 : 0.2;
  sampling.baseline_scatter = 0.003;
  turn.verdict->sampling = sampling;
  return turn;
}

TEST_CASE("An unstable speedup counts as TIC but as no speedup") {
  // traj 0: 0.8 stable at turn 1 (speed of light 0.5 / 0.8), 2.5 unstable at turn 2 (its
  // timing stage would give 0.2 / 0.3); traj 1: 3.0 unstable only; traj 2: 1.3 from a harness
  // before verdicts carried sampling (nothing makes it unclean).
  std::vector<Trajectory> trajectories = {
      Made("openai:m", 0, v1::EVALUATION_SCOPE_FULL,
           {WithSampling(Turn(1, VerdictClass::kPass, 0.8, std::pair{0.5, 0.8}), true),
            WithSampling(Turn(2, VerdictClass::kPass, 2.5, std::pair{0.2, 0.3}), false)}),
      Made("openai:m", 1, v1::EVALUATION_SCOPE_FULL,
           {WithSampling(Turn(1, VerdictClass::kPass, 3.0), false)}),
      Made("openai:m", 2, v1::EVALUATION_SCOPE_FULL, {Turn(1, VerdictClass::kPass, 1.3)}),
  };
  const Report report = ValueOrFail(BuildReport(trajectories, ReportOptions{}));
  REQUIRE(report.groups.size() == 1);
  const GroupMetrics& g = report.groups[0];
  CheckRate(g.tic_at_limit[0], 3, 3);  // TIC stays TIC.
  CHECK(g.tic_speedups == std::vector<double>{0.8, 1.3});
  CHECK(g.tic_turns_unstable_speedup == 2);
  CHECK(*g.geomean_speedup == Approx(std::sqrt(0.8 * 1.3)).epsilon(1e-12));
  CHECK(*g.best_speedup == 1.3);
  // fast_p: traj 0 is fast at 0.5 only (its 2.5 does not count), traj 1 never (its 3.0 does
  // not count), traj 2 at every p (1.3). Counted, the unstable ones would make 1.0 and 1.2 3/3.
  CheckRate(g.fast_p[0], 2, 3);
  CheckRate(g.fast_p[1], 1, 3);
  CheckRate(g.fast_p[2], 1, 3);
  CHECK(g.tic_speeds_of_light == std::vector<double>{0.625});

  const nlohmann::json json = ReportJson(report);
  CHECK(json["groups"][0]["tic_turns_unstable_speedup"] == 2);
  CHECK(json["groups"][0]["tic_speedups"] == nlohmann::json::array({0.8, 1.3}));
  const std::string line = "openai:m gemm_n7168_k5120 sm_90a none: 2 TIC turns";
  const std::string table = RenderTable(report);
  CHECK_THAT(table, Contains("unstable speedups"));
  CHECK_THAT(table, Contains(line));
  CHECK_THAT(RenderMarkdown(report), Contains(line));
  CHECK_THAT(RenderHtml(report), Contains("id=\"unstable-speedups\""));
  // Without unstable speedups, no such note.
  trajectories.erase(trajectories.begin(), trajectories.begin() + 2);
  CHECK(RenderTable(ValueOrFail(BuildReport(trajectories, ReportOptions{})))
            .find("unstable speedups") == std::string::npos);
}

TEST_CASE("Without --server the report says it shows the verdicts the files recorded") {
  const Report report = FixtureReport();
  CHECK_FALSE(report.verdicts.from_server);
  const std::string note =
      "verdicts: as recorded in the trajectory files, not checked against the server";
  CHECK_THAT(RenderTable(report), Contains(note));
  const std::string markdown = RenderMarkdown(report);
  CHECK_THAT(markdown, Contains("## Verdicts"));
  CHECK_THAT(markdown, Contains(note));
  CHECK_THAT(RenderHtml(report), Contains("id=\"verdict-source\">" + note));
  CHECK(ReportJson(report)["verdicts"]["source"] == "trajectory files");

  std::ostringstream out;
  std::ostringstream err;
  REQUIRE(ReportCommand({"--no-files", FixtureDir()}, out, err) == 0);
  CHECK_THAT(out.str(), Contains(note));
  // The connection flags mean nothing without --server.
  CHECK(ReportCommand({"--no-files", "--token-file", "/nonexistent", FixtureDir()}, out, err) == 2);
  CHECK_THAT(err.str(), Contains("--token-file needs --server"));
}

TEST_CASE("Compile-only runs are a group of their own with compile figures only") {
  std::vector<Trajectory> trajectories = {
      // The same model, task, arch and knowledge in full scope: never mixed with the others.
      Made("openai:m", 0, v1::EVALUATION_SCOPE_FULL, {Turn(1, VerdictClass::kPass, 1.0)}),
      // Compiled first at turns 2, 1 and never: compiled@1 1/3, compiled 2/3; of the two whose
      // first turn did not compile, one compiled later; turns to compile (2 + 1) / 2.
      Made("openai:m", 0, v1::EVALUATION_SCOPE_COMPILE_ONLY,
           {Turn(1, VerdictClass::kCompileError), Turn(2, VerdictClass::kCompiled)}),
      Made("openai:m", 1, v1::EVALUATION_SCOPE_COMPILE_ONLY, {Turn(1, VerdictClass::kCompiled)}),
      // An older file without the scope in its header: inferred from its `compiled` verdicts.
      Made("openai:m", 2, v1::EVALUATION_SCOPE_COMPILE_ONLY,
           {Turn(1, VerdictClass::kCompileError), Turn(2, VerdictClass::kCompileError)},
           /*scope_recorded=*/false),
  };
  const Report report = ValueOrFail(BuildReport(trajectories, ReportOptions{}));
  REQUIRE(report.groups.size() == 2);
  const auto full = GroupsOfScope(report, false);
  const auto compile = GroupsOfScope(report, true);
  REQUIRE(full.size() == 1);
  REQUIRE(compile.size() == 1);
  CHECK(full[0]->trajectories == 1);
  CheckRate(full[0]->tic_at_limit[0], 1, 1);
  const GroupMetrics& c = *compile[0];
  CHECK(c.trajectories == 3);
  CheckRate(c.compiled_at_limit[0], 1, 3);
  CheckRate(c.compiled_at_limit[1], 2, 3);
  CheckRate(c.compiled, 2, 3);
  CheckRate(c.compile_repairs, 1, 2);
  CHECK(*c.mean_turns_to_compile == 1.5);
  CHECK(std::any_of(report.warnings.begin(), report.warnings.end(), [](const std::string& w) {
    return w.find("compile-only inferred") != std::string::npos;
  }));
  const nlohmann::json json = ReportJson(report);
  const nlohmann::json& cj = json["groups"][1];
  CHECK(cj["scope"] == "compile_only");
  CHECK(cj["tic_rate_at_turn_limit"].is_null());
  CHECK(cj["fast_p"].is_null());
  CHECK(cj["compile_repairs"]["hits"] == 1);
  // The tables keep them apart: the compile-only table has no TIC column.
  const std::string table = RenderTable(report);
  CHECK_THAT(table, Contains("compile-only runs"));
  CHECK_THAT(table, Contains("compiled@1"));
  CHECK_THAT(table, Contains("compile repairs"));
  const std::string html = RenderHtml(report);
  CHECK_THAT(html, Contains("id=\"compile-figures\""));
  CHECK_THAT(html, Contains("id=\"compile-curve-gemm_n7168_k5120\""));
}

TEST_CASE("ptxbench report on a folder without trajectories fails with the reason") {
  ScopedTempDir empty("ptxbench-report-empty-");
  fs::create_directories(empty.path() + "/openai_m/gemm/sm_90a/none");
  std::ofstream(empty.path() + "/openai_m/gemm/sm_90a/none/notes.txt") << "not a trajectory";
  std::ostringstream out;
  std::ostringstream err;
  CHECK(ReportCommand({empty.path()}, out, err) == 2);
  CHECK_THAT(err.str(), Contains("no trajectory files (traj-*.jsonl"));
  CHECK_THAT(err.str(), Contains(empty.path()));
  CHECK_FALSE(fs::exists(empty.path() + "/report.html"));
}

// The committed H200 repair-loop run (docs/results/) is reported from its files as they are.
TEST_CASE("the committed repair-loop run is re-reportable") {
  const std::string run = SourceDir() + "/docs/results/2026-12-02-h200-repair-loop";
  ScopedTempDir out_dir("ptxbench-report-");
  std::ostringstream out;
  std::ostringstream err;
  const int code = ReportCommand({"--out", out_dir.path(), run}, out, err);
  INFO(err.str());
  REQUIRE(code == 0);
  const nlohmann::json json = nlohmann::json::parse(ReadWholeFile(out_dir.path() + "/report.json"));
  REQUIRE(json["groups"].size() >= 1);
  for (const auto& g : json["groups"]) {
    CHECK(g["scope"] == "full");
    CHECK(g["unfinished"] == 0);
  }
  CHECK(json["provenance"]["gpus"] == nlohmann::json::array({"NVIDIA H200"}));
  // All four trajectories of scripts/device-e2e's plan: two tasks, two each.
  size_t trajectories = 0;
  for (const auto& entry : fs::recursive_directory_iterator(run)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("traj-", 0) == 0 && entry.path().extension() == ".jsonl") ++trajectories;
  }
  CHECK(trajectories == 4);
}

}  // namespace
}  // namespace ptxbench::client::report

namespace ptxbench::client::report {
namespace {

// A run of the size a paper reports: five models with their real (long) names, three tasks,
// twelve trajectories each, TIC at varied turns with timed speedups, and a compile-only run.
Report PaperSizedReport() {
  const std::vector<std::string> models = {
      "openai:gpt-5-2025-08-07", "anthropic:claude-opus-4-1-20250805",
      "openai:deepseek-ai/DeepSeek-R1-Distill-Qwen-32B",
      "openai:Qwen/Qwen3-Coder-480B-A35B-Instruct-FP8", "openai:meta-llama/Llama-3.3-70B-Instruct"};
  const std::vector<std::string> tasks = {"gemm_n7168_k5120", "mha_with_lse_d128",
                                          "mha_bwd_d128_causal"};
  std::vector<Trajectory> trajectories;
  int seed = 0;
  for (size_t m = 0; m < models.size(); ++m) {
    for (const std::string& task : tasks) {
      for (int index = 0; index < 12; ++index) {
        ++seed;
        std::vector<TurnRecord> turns;
        const int first_tic = 1 + static_cast<int>((seed * 7 + m * 3) % 11);  // > 8: never.
        for (int turn = 1; turn <= std::min(8, first_tic); ++turn) {
          if (turn < first_tic) {
            turns.push_back(Turn(
                turn, turn % 3 == 0 ? VerdictClass::kCompileError : VerdictClass::kWrongResult));
          } else {
            const double speedup = 0.15 * std::pow(1.6, static_cast<double>((seed + m) % 9));
            turns.push_back(Turn(turn, VerdictClass::kPass, speedup,
                                 std::pair{0.5, 0.5 * std::max(1.05, 2.5 / speedup)}));
          }
        }
        Trajectory t = Made(models[m], index, v1::EVALUATION_SCOPE_FULL, std::move(turns));
        t.header.run.task = task;
        trajectories.push_back(std::move(t));
      }
    }
  }
  for (int index = 0; index < 6; ++index) {
    trajectories.push_back(
        Made(models[0], index, v1::EVALUATION_SCOPE_COMPILE_ONLY,
             {Turn(1, index % 2 ? VerdictClass::kCompiled : VerdictClass::kCompileError),
              Turn(2, VerdictClass::kCompiled)}));
  }
  return ValueOrFail(BuildReport(trajectories, ReportOptions{}));
}

std::string FindChromium() {
  for (const char* name : {"chromium", "chromium-browser"}) {
    for (const char* dir : {"/usr/bin", "/usr/local/bin", "/bin"}) {
      const std::string path = std::string(dir) + "/" + name;
      if (access(path.c_str(), X_OK) == 0) return path;
    }
  }
  return "";
}

// Measures the page as the browser laid it out, into <pre id="probe">: the document's width
// against the window's, every figure's and table's box, and every table cell whose content
// is wider than the cell.
constexpr char kProbe[] = R"(<script>
(function () {
  const width = document.documentElement.clientWidth;
  const boxes = {};
  for (const el of document.querySelectorAll('figure[id], table[id], dl[id]')) {
    const r = el.getBoundingClientRect();
    boxes[el.id] = {left: r.left, right: r.right, width: r.width, height: r.height};
  }
  const overflowing = [];
  for (const cell of document.querySelectorAll('td, th')) {
    if (cell.scrollWidth > cell.clientWidth + 1) overflowing.push(cell.textContent);
  }
  const probe = document.createElement('pre');
  probe.id = 'probe';
  probe.textContent = 'PROBE' + JSON.stringify({
    window_width: width, document_width: document.documentElement.scrollWidth,
    boxes: boxes, overflowing: overflowing}) + 'EBORP';
  document.body.appendChild(probe);
})();
</script>)";

TEST_CASE("the HTML report fits 1400 px in Chromium with every figure drawn", "[browser]") {
  const std::string chromium = FindChromium();
  if (chromium.empty()) {
    FAIL("chromium is not installed: scripts/install-deps installs it (Debian package chromium)");
  }
  const Report report = PaperSizedReport();
  REQUIRE(report.groups.size() == 16);
  std::string html = RenderHtml(report);
  ScopedTempDir dir("ptxbench-report-browser-");
  std::ofstream(dir.path() + "/report.html") << html;
  const size_t body_end = html.rfind("</body>");
  REQUIRE(body_end != std::string::npos);
  html.insert(body_end, kProbe);
  std::ofstream(dir.path() + "/probe.html") << html;

  const std::vector<std::string> browser = {
      chromium,        "--headless",        "--no-sandbox",
      "--disable-gpu", "--hide-scrollbars", "--window-size=1400,1000"};
  std::vector<std::string> dump = browser;
  dump.insert(dump.end(), {"--dump-dom", "file://" + dir.path() + "/probe.html"});
  const testing::CommandResult r = testing::RunCommand(dump, absl::Seconds(120));
  INFO(r.output.substr(0, 4000));
  REQUIRE(r.exit_code == 0);
  const size_t begin = r.output.find("PROBE{");
  const size_t end = r.output.find("}EBORP");
  REQUIRE(begin != std::string::npos);
  REQUIRE(end != std::string::npos);
  const nlohmann::json probe = nlohmann::json::parse(r.output.substr(begin + 5, end - begin - 4));
  INFO(probe.dump(1));
  CHECK(probe["window_width"] == 1400);
  CHECK(probe["document_width"].get<double>() <= 1400);
  CHECK(probe["overflowing"].empty());
  std::vector<std::string> expected = {"provenance", "figures", "tokens", "compile-figures",
                                       "compile-curve-gemm_n7168_k5120"};
  for (const char* task : {"gemm_n7168_k5120", "mha_with_lse_d128", "mha_bwd_d128_causal"}) {
    expected.push_back(absl::StrCat("tic-curve-", task));
    expected.push_back(absl::StrCat("speedups-", task));
  }
  for (const std::string& id : expected) {
    INFO(id);
    REQUIRE(probe["boxes"].contains(id));
    const nlohmann::json& box = probe["boxes"][id];
    CHECK(box["width"].get<double>() > 600);  // A figure as wide as the page, not a stamp.
    CHECK(box["height"].get<double>() > 40);
    CHECK(box["left"].get<double>() >= 0);
    CHECK(box["right"].get<double>() <= 1400);
  }
  CHECK(probe["boxes"].size() == expected.size());

  // A screenshot of the page as rendered (PTXBENCH_REPORT_SCREENSHOT keeps it, e.g. for docs/).
  const char* keep = std::getenv("PTXBENCH_REPORT_SCREENSHOT");
  const std::string png = keep != nullptr ? keep : dir.path() + "/report.png";
  if (keep != nullptr) std::ofstream(png + ".html") << RenderHtml(report);
  std::vector<std::string> shot = {chromium,
                                   "--headless",
                                   "--no-sandbox",
                                   "--disable-gpu",
                                   "--hide-scrollbars",
                                   "--window-size=1400,2400",
                                   "--screenshot=" + png,
                                   "file://" + dir.path() + "/report.html"};
  const testing::CommandResult s = testing::RunCommand(shot, absl::Seconds(120));
  INFO(s.output.substr(0, 2000));
  REQUIRE(s.exit_code == 0);
  CHECK(ReadWholeFile(png).rfind("\x89PNG", 0) == 0);
}

}  // namespace
}  // namespace ptxbench::client::report
