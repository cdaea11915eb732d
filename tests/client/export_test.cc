// `ptxbench export` against the hand-written fixture in testdata/report. What the fixture holds
// (files in sorted order, charged turns):
//   model-b gemm traj-00 [pass tic-Y]; traj-01 [wrong x3, wrong wrong-X, pass tic-Y];
//                traj-02 [wrong wrong-X, pass tic-Y]
//   model-b mha sm_100a: 3 x 3 runtime_unverified turns (one claims pass each)
//   model-a gemm traj-00 [wrong, pass, pass]; traj-01 [(infra: pass), compile_error,
//                target_not_executed, pass]; traj-02 [compile_error x8]
//   model-a mha  traj-00 [pass]; traj-01 [pass, wrong]; traj-02 [compile_error, wrong]
#include "client/report/export.h"

#include <stdlib.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "client/report/commands.h"
#include "client/report/metrics.h"
#include "tests/support/status_testing.h"
#include "tests/support/temp_files.h"

namespace ptxbench::client::report {
namespace {

namespace fs = std::filesystem;
using Catch::Matchers::Contains;
using ::ptxbench::testing::ScopedTempDir;
using ::ptxbench::testing::ValueOrFail;
using json = nlohmann::json;

std::string FixtureDir() {
  const char* dir = std::getenv("PTXBENCH_SOURCE_DIR");
  return std::string(dir != nullptr ? dir : PTXBENCH_SOURCE_DIR_DEFAULT) +
         "/tests/client/testdata/report";
}

// Runs `ptxbench export` and returns its rows, each parsed (a line that is not JSON fails).
std::vector<json> Export(const std::vector<std::string>& flags, const std::string& dir,
                         json* summary, std::string* printed = nullptr) {
  std::vector<std::string> args = flags;
  args.insert(args.end(), {"--out", dir + "/rows.jsonl", FixtureDir()});
  std::ostringstream out;
  std::ostringstream err;
  const int code = ExportCommand(args, out, err);
  INFO(err.str());
  REQUIRE(code == 0);
  if (printed != nullptr) *printed = out.str();
  std::ifstream rows_in(dir + "/rows.jsonl");
  std::vector<json> rows;
  for (std::string line; std::getline(rows_in, line);) {
    // "messages" first, and each message's "role" before its "content", as people read them.
    CHECK(line.rfind("{\"messages\":[{\"role\":", 0) == 0);
    json row = json::parse(line, nullptr, /*allow_exceptions=*/false);
    INFO(line);
    REQUIRE_FALSE(row.is_discarded());
    rows.push_back(std::move(row));
  }
  std::ifstream summary_in(dir + "/rows.summary.json");
  *summary = json::parse(summary_in);
  return rows;
}

// Roles in order, "weight" only on assistant messages, 1 on the last message alone.
void CheckRows(const std::vector<json>& rows, const std::vector<std::string>& roles) {
  for (const json& row : rows) {
    REQUIRE(row.is_object());
    REQUIRE(row["messages"].is_array());
    const json& messages = row["messages"];
    REQUIRE(messages.size() == roles.size());
    for (size_t i = 0; i < messages.size(); ++i) {
      CHECK(messages[i]["role"] == roles[i]);
      CHECK(messages[i]["content"].is_string());
      const bool last = i + 1 == messages.size();
      if (messages[i]["role"] == "assistant") {
        CHECK(messages[i]["weight"] == (last ? 1 : 0));
      } else {
        CHECK_FALSE(messages[i].contains("weight"));
      }
    }
    CHECK(messages[0]["content"] == "You write GPU kernels.");
    // Nothing from the infrastructure-failed record or unverified verdicts.
    CHECK(row.dump().find("infra-kernel") == std::string::npos);
    CHECK(row.dump().find("sm_100a") == std::string::npos);
  }
}

TEST_CASE("kernelgen rows: every TIC kernel once, no infra or unverified turn") {
  ScopedTempDir dir("ptxbench-export-");
  json summary;
  std::string printed;
  std::vector<json> rows =
      Export({"--format", "kernelgen", "--metadata"}, dir.path(), &summary, &printed);
  // model-b gemm: tic-Y once (two repeats dropped); model-a gemm: 3; model-a mha: 2.
  REQUIRE(rows.size() == 6);
  CheckRows(rows, {"system", "user", "assistant"});
  CHECK(rows[0]["messages"][1]["content"] == "Task: gemm_n7168_k5120");
  CHECK(rows[0]["messages"][2]["content"] == "Reasoning.\n```cuda\ntic-Y\n```");
  CHECK(rows[0]["metadata"]["model"] == "anthropic:model-b");
  CHECK(rows[0]["metadata"]["class"] == "pass");
  CHECK(summary["format"] == "kernelgen");
  CHECK(summary["rows"] == 6);
  CHECK(summary["trajectories"] == 12);
  CHECK(summary["per_task"] ==
        json::parse(R"({"gemm_n7168_k5120":{"pass":4},"mha_with_lse_d128":{"pass":2}})"));
  CHECK(summary["excluded"]["duplicate"] == 2);
  CHECK(summary["excluded"]["over_cap"] == 0);
  CHECK(summary["excluded"]["infra_failed_turns"] == 1);
  CHECK(summary["excluded"]["runtime_unverified_turns"] == 9);
  CHECK_THAT(printed, Contains("kernelgen: 6 rows from 12 trajectories"));
  CHECK_THAT(printed, Contains("2 duplicates"));
}

TEST_CASE("kernelgen rows are capped per (task, class)") {
  ScopedTempDir dir("ptxbench-export-");
  json summary;
  std::vector<json> rows =
      Export({"--format", "kernelgen", "--max-per-class", "3"}, dir.path(), &summary);
  REQUIRE(rows.size() == 5);
  CHECK(summary["per_task"]["gemm_n7168_k5120"]["pass"] == 3);
  CHECK(summary["per_task"]["mha_with_lse_d128"]["pass"] == 2);
  CHECK(summary["excluded"]["over_cap"] == 1);
  CHECK_FALSE(rows[0].contains("metadata"));
}

TEST_CASE("fixit rows: failed kernel, its feedback, the next turn's TIC kernel") {
  ScopedTempDir dir("ptxbench-export-");
  json summary;
  std::vector<json> rows =
      Export({"--format", "fixit", "--assistant", "source", "--metadata"}, dir.path(), &summary);
  // model-b traj-01 (4 -> 5); traj-02 repeats it (dropped); model-a gemm traj-00 (1 -> 2)
  // and traj-01 (target_not_executed 2 -> 3).
  REQUIRE(rows.size() == 3);
  CheckRows(rows, {"system", "user", "assistant", "user", "assistant"});
  const json& first = rows[0]["messages"];
  CHECK(first[2]["content"] == "```cuda\nwrong-X\n```");
  CHECK(first[3]["content"] == "feedback: wrong_result at turn 4");
  CHECK(first[4]["content"] == "```cuda\ntic-Y\n```");
  CHECK(rows[0]["metadata"]["turns"] == json::array({4, 5}));
  CHECK(rows[2]["metadata"]["class"] == "target_not_executed");
  CHECK(rows[2]["metadata"]["turns"] == json::array({2, 3}));
  CHECK(summary["per_task"] ==
        json::parse(R"({"gemm_n7168_k5120":{"target_not_executed":1,"wrong_result":2}})"));
  CHECK(summary["per_class"]["wrong_result"] == 2);
  CHECK(summary["excluded"]["duplicate"] == 1);
}

TEST_CASE("fixit rows are capped per (task, failure class)") {
  ScopedTempDir dir("ptxbench-export-");
  json summary;
  std::vector<json> rows =
      Export({"--format", "fixit", "--max-per-class", "1"}, dir.path(), &summary);
  REQUIRE(rows.size() == 2);
  CHECK(summary["per_task"]["gemm_n7168_k5120"]["wrong_result"] == 1);
  CHECK(summary["per_task"]["gemm_n7168_k5120"]["target_not_executed"] == 1);
  CHECK(summary["excluded"]["over_cap"] == 1);
  // The whole reply by default.
  CHECK(rows[0]["messages"][4]["content"] == "Reasoning.\n```cuda\ntic-Y\n```");
}

TEST_CASE("export refuses bad flags and malformed files with a clear message") {
  ScopedTempDir dir("ptxbench-export-");
  std::ostringstream out;
  std::ostringstream err;
  CHECK(ExportCommand({"--out", dir.path() + "/x.jsonl", FixtureDir()}, out, err) == 2);
  CHECK_THAT(err.str(), Contains("--format is required"));
  CHECK(ExportCommand({"--format", "sft", "--out", dir.path() + "/x.jsonl", FixtureDir()}, out,
                      err) == 2);
  CHECK_THAT(err.str(), Contains("unknown export format 'sft'"));
  CHECK(ExportCommand({"--format", "fixit", "--max-per-class", "-1", "--out",
                       dir.path() + "/x.jsonl", FixtureDir()},
                      out, err) == 2);
  CHECK_THAT(err.str(), Contains("--max-per-class must not be negative"));

  const std::string broken = dir.path() + "/run/m/t/sm_90a/none/traj-00.jsonl";
  fs::create_directories(fs::path(broken).parent_path());
  std::ofstream(broken) << "{\"kind\":\"header\"}\n";
  CHECK(ExportCommand({"--format", "fixit", "--out", dir.path() + "/x.jsonl", dir.path() + "/run"},
                      out, err) == 2);
  CHECK_THAT(err.str(), Contains(broken + ":1: missing field 'run'"));
}

}  // namespace
}  // namespace ptxbench::client::report
