// `ptxbench report` against the hand-written fixture in testdata/report (4 groups of 3
// trajectories; every expected figure below is worked out by hand in the comments).
#include <stdlib.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "client/report/commands.h"
#include "client/report/metrics.h"
#include "client/report/render.h"
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
  CHECK_THAT(html, Contains("2/3 &middot; 21&ndash;94%"));
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
