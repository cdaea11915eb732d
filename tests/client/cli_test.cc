// The `ptxbench` binary's conventions, run as a user runs it: --help of every verb on stdout
// with exit 0, --version, usage errors (exit 2) that name the problem before anything is sent
// or started, an unreachable server (exit 3) with a hint instead of a gRPC number, and `eval`
// from a private TMPDIR.
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "nlohmann/json.hpp"
#include "tests/support/process.h"
#include "tests/support/temp_files.h"

namespace ptxbench::testing {
namespace {

const std::string kBin = PTXBENCH_BIN_DIR;
const std::string kSource = PTXBENCH_SOURCE_DIR_FOR_TESTS;

// Runs a shell command line; its stdout only, or both streams, with the exit code.
CommandResult Shell(const std::string& line) {
  return RunCommand({"/bin/sh", "-c", line}, absl::Seconds(120));
}

TEST_CASE("cli: every verb's --help prints its usage on stdout and exits 0") {
  for (const char* verb :
       {"tasks", "submit", "watch", "cancel", "suite", "eval", "run", "report", "export"}) {
    INFO(verb);
    const CommandResult help = Shell(absl::StrCat(kBin, "/ptxbench ", verb, " --help 2>/dev/null"));
    CHECK(help.exit_code == 0);
    CHECK(absl::StrContains(help.output, absl::StrCat("usage: ptxbench ", verb)));
    const CommandResult via_help =
        Shell(absl::StrCat(kBin, "/ptxbench help ", verb, " 2>/dev/null"));
    CHECK(via_help.exit_code == 0);
    CHECK(via_help.output == help.output);
  }
  const CommandResult top = Shell(kBin + "/ptxbench --help 2>/dev/null");
  CHECK(top.exit_code == 0);
  CHECK(absl::StrContains(top.output, "cancel"));
  CHECK(Shell(kBin + "/ptxbench 2>&1").exit_code == 2);
  CHECK(Shell(kBin + "/ptxbench bogus 2>&1").exit_code == 2);
}

TEST_CASE("cli: every binary says its version, commit and CUDA toolkit") {
  for (const char* program :
       {"ptxbench", "ptxbench-server", "ptxbench-worker", "ptxbench-evaluator"}) {
    INFO(program);
    const CommandResult version = Shell(absl::StrCat(kBin, "/", program, " --version 2>/dev/null"));
    CHECK(version.exit_code == 0);
    CHECK(absl::StartsWith(version.output, absl::StrCat(program, " 0.")));
    CHECK(absl::StrContains(version.output, "(commit "));
    CHECK(absl::StrContains(version.output, "CUDA toolkit 13."));
  }
}

TEST_CASE("cli: usage errors exit 2 and say what is wrong, before anything is sent") {
  // A submission id that is not one is refused here, not by the server (none runs).
  CommandResult watch = Shell(kBin + "/ptxbench watch --server 127.0.0.1:1 not-an-id 2>&1");
  CHECK(watch.exit_code == 2);
  CHECK(absl::StrContains(watch.output, "'not-an-id' is not a submission id"));
  CommandResult cancel = Shell(kBin + "/ptxbench cancel 1234 2>&1");
  CHECK(cancel.exit_code == 2);
  CommandResult flag = Shell(kBin + "/ptxbench submit --tsak x 2>&1");
  CHECK(flag.exit_code == 2);
  CHECK(absl::StrContains(flag.output, "unknown flag --tsak"));
  CHECK(absl::StrContains(flag.output, "ptxbench submit --help lists the flags"));
  CommandResult token = Shell(kBin + "/ptxbench tasks --token-file /nonexistent 2>&1");
  CHECK(token.exit_code == 2);
  CHECK(absl::StrContains(token.output, "--token-file: cannot read /nonexistent"));
}

TEST_CASE("cli: an unreachable server exits 3 with a hint, retried first") {
  const CommandResult tasks = Shell(kBin + "/ptxbench tasks --server 127.0.0.1:1 2>&1");
  INFO(tasks.output);
  CHECK(tasks.exit_code == 3);
  CHECK(absl::StrContains(tasks.output, "cannot reach the server at 127.0.0.1:1"));
  CHECK(absl::StrContains(tasks.output,
                          "hint: is ptxbench-server running at 127.0.0.1:1? set --server or "
                          "PTXBENCH_SERVER"));
  CHECK(absl::StrContains(tasks.output, "UNAVAILABLE"));
  CHECK(absl::StrContains(tasks.output, "retry 1 of 5"));
  CHECK_FALSE(absl::StrContains(tasks.output, "rpc failed (14)"));
}

TEST_CASE("cli: run refuses a missing API key of a public endpoint before starting a stack") {
  ScopedTempDir dir;
  const CommandResult run = Shell(absl::StrCat(
      "env -u OPENAI_API_KEY -u OPENAI_BASE_URL -u PTXBENCH_SERVER PTXBENCH_STATE_DIR=", dir.path(),
      "/state ", kBin, "/ptxbench run --model openai:gpt-5 --task gemm_n7168_k5120 ", "--out ",
      dir.path(), "/out 2>&1"));
  INFO(run.output);
  CHECK(run.exit_code == 2);
  CHECK(absl::StrContains(run.output, "OPENAI_API_KEY is not set"));
  CHECK_FALSE(absl::StrContains(run.output, "starting the embedded stack"));
  CHECK_FALSE(std::filesystem::exists(dir.path() + "/state"));
}

TEST_CASE("cli: eval works from a private TMPDIR (mode 0700), as a sandboxed shell has") {
  ScopedTempDir dir;
  const std::string private_tmp = dir.path() + "/private";
  std::filesystem::create_directories(private_tmp);
  REQUIRE(chmod(private_tmp.c_str(), 0700) == 0);
  const std::string source = kSource + "/tasks/gemm_n7168_k5120/solutions/sm90a_wgmma_tma.cu";
  const CommandResult eval = Shell(absl::StrCat(
      "TMPDIR=", private_tmp, " ", kBin, "/ptxbench eval --task gemm_n7168_k5120 --tasks-dir ",
      kSource, "/tasks --compile-only ", source, " 2>&1"));
  INFO(eval.output);
  CHECK(eval.exit_code == 0);
  CHECK(absl::StrContains(eval.output, "verdict: compiled"));
  CHECK_FALSE(absl::StrContains(eval.output, "Permission denied"));
  if (geteuid() == 0) {
    // As root the sandbox runs as nobody, who cannot pass the private folder: said, not failed.
    CHECK(absl::StrContains(eval.output, "is not reachable by the sandbox user"));
  }
  // The compile stage's detail, through the real evaluator sandbox: the PTX family counts the
  // feedback quotes (before the .loc fix: "mbarrier 9, wgmma 1") and the launch's dynamic
  // shared memory from the plan (the feedback said "0 bytes shared memory").
  const CommandResult json =
      Shell(absl::StrCat(kBin, "/ptxbench eval --task gemm_n7168_k5120 --tasks-dir ", kSource,
                         "/tasks --compile-only --json ", source, " 2>/dev/null"));
  REQUIRE(json.exit_code == 0);
  auto verdict = nlohmann::json::parse(json.output, nullptr, /*allow_exceptions=*/false);
  REQUIRE(verdict.is_object());
  const nlohmann::json& detail = verdict["stages"][0]["detail"];
  CHECK(detail["ptx_families"]["tma"] == 6);
  CHECK(detail["ptx_families"]["wgmma"] == 4);
  REQUIRE(detail["launches"].size() == 1);
  CHECK(detail["launches"][0]["kernel"] == "gemm_kernel");
  CHECK(detail["launches"][0]["dynamic_shared_bytes"] == 197696);
  // An unknown task names the ones there are.
  const CommandResult unknown = Shell(absl::StrCat(
      kBin, "/ptxbench eval --task gemm_typo --tasks-dir ", kSource, "/tasks ", source, " 2>&1"));
  CHECK(unknown.exit_code == 2);
  CHECK(absl::StrContains(unknown.output, "hint: the tasks in "));
  CHECK(absl::StrContains(unknown.output, "gemm_n7168_k5120"));
}

}  // namespace
}  // namespace ptxbench::testing
