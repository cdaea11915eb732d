// `ptxbench eval` (client/eval_command.h) in process: its flags and usage errors on the client's
// shared verb parser, the messages and exit codes of bad input, and real evaluations through
// the evaluator sandbox (compile stage only on a machine without a GPU).
#include "client/eval_command.h"

#include <stdlib.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "client/command_support.h"
#include "client/exit_codes.h"
#include "nlohmann/json.hpp"

namespace ptxbench::client {
namespace {

const std::string kTasks = std::string(PTXBENCH_SOURCE_DIR_FOR_TESTS) + "/tasks";
const std::string kSource = kTasks + "/gemm_n7168_k5120/solutions/sm90a_wgmma_tma.cu";

struct Ran {
  int exit_code = -1;
  std::string out;
  std::string err;
};

Ran Eval(const std::vector<std::string>& args) {
  std::ostringstream out, err;
  Ran ran;
  ran.exit_code = EvalCommand(args, out, err);
  ran.out = out.str();
  ran.err = err.str();
  return ran;
}

// The evaluator this build made, unless the environment names another.
void UseBuiltEvaluator() {
  const char* env = std::getenv("PTXBENCH_EVALUATOR");
  if (env == nullptr || *env == '\0') setenv("PTXBENCH_EVALUATOR", PTXBENCH_EVALUATOR_PATH, 1);
}

TEST_CASE("eval --help: the verb's usage and flags on stdout, exit 0") {
  for (const std::vector<std::string>& args :
       std::vector<std::vector<std::string>>{{"--help"}, {"--task", "x", "-h", "a.cu"}}) {
    const Ran help = Eval(args);
    CHECK(help.exit_code == kExitPass);
    CHECK(absl::StartsWith(help.out, "usage: ptxbench eval [flags] --task ID SOURCE\n"));
    for (const char* flag : {"--task", "--arch", "--tasks-dir", "--plan", "--language", "--gpu",
                             "--compile-only", "--keep-work-dir", "--json", "--help"}) {
      INFO(flag);
      CHECK(absl::StrContains(help.out, flag));
    }
    CHECK(help.err.empty());
  }
}

TEST_CASE("eval: usage errors name the problem and exit 2 before anything runs") {
  struct Case {
    std::vector<std::string> args;
    std::string problem;
  };
  const std::vector<Case> cases = {
      {{kSource}, "ptxbench eval: --task is required\n"},
      {{"--task", "gemm_n7168_k5120"}, "ptxbench eval: exactly one SOURCE file is needed\n"},
      {{"--task", "gemm_n7168_k5120", kSource, kSource},
       "ptxbench eval: exactly one SOURCE file is needed\n"},
      {{"--task", "gemm_n7168_k5120", "--arch", "sm_80", kSource},
       "ptxbench eval: --arch: 'sm_80' is not an arch; use sm_90a or sm_100a\n"},
      {{"--task", "gemm_n7168_k5120", "--language", "fortran", kSource},
       "ptxbench eval: --language: 'fortran' is not cuda or ptx\n"},
      {{"--task", "gemm_n7168_k5120", "--gpu", "-1", kSource},
       "ptxbench eval: --gpu: a device ordinal >= 0\n"},
      {{"--task", "gemm_n7168_k5120", "--gpu", "first", kSource},
       "ptxbench eval: --gpu: a device ordinal >= 0\n"},
      {{"--bogus"}, "ptxbench eval: unknown flag --bogus"},
  };
  for (const Case& c : cases) {
    const Ran ran = Eval(c.args);
    INFO(ran.err);
    CHECK(ran.exit_code == kExitUsage);
    CHECK(absl::StartsWith(ran.err, c.problem));
    CHECK(absl::StrContains(ran.err, "usage: ptxbench eval [flags] --task ID SOURCE"));
    CHECK(ran.out.empty());
  }
}

TEST_CASE("the source language: --language, else the file name's extension") {
  CHECK(SourceLanguage("", "kernel.cu").value_or("") == "cuda");
  CHECK(SourceLanguage("", "kernel.ptx").value_or("") == "ptx");
  CHECK(SourceLanguage("", "-").value_or("") == "cuda");  // Standard input.
  CHECK(SourceLanguage("ptx", "kernel.cu").value_or("") == "ptx");
  CHECK(SourceLanguage("cuda", "kernel.ptx").value_or("") == "cuda");
  const absl::StatusOr<std::string> refused = SourceLanguage("CUDA", "kernel.cu");
  REQUIRE(absl::IsInvalidArgument(refused.status()));
  CHECK(refused.status().message() == "--language: 'CUDA' is not cuda or ptx");
}

TEST_CASE("eval: an unknown task lists the tasks; unreadable files are named") {
  const Ran unknown = Eval({"--task", "gemm_typo", "--tasks-dir", kTasks, kSource});
  CHECK(unknown.exit_code == kExitUsage);
  CHECK(absl::StrContains(unknown.err, "ptxbench eval: "));
  CHECK(absl::StrContains(unknown.err, "hint: the tasks in " + kTasks + " are "));
  CHECK(absl::StrContains(unknown.err, "gemm_n7168_k5120"));

  const Ran no_source =
      Eval({"--task", "gemm_n7168_k5120", "--tasks-dir", kTasks, "/nonexistent/kernel.cu"});
  CHECK(no_source.exit_code == kExitUsage);
  CHECK(absl::StrContains(no_source.err,
                          "ptxbench eval: the source: cannot read /nonexistent/kernel.cu"));

  const Ran no_plan = Eval({"--task", "gemm_n7168_k5120", "--tasks-dir", kTasks, "--plan",
                            "/nonexistent/plan.json", kSource});
  CHECK(no_plan.exit_code == kExitUsage);
  CHECK(
      absl::StrContains(no_plan.err, "ptxbench eval: --plan: cannot read /nonexistent/plan.json"));
}

TEST_CASE("eval: a compile-only evaluation passes; a full one without a GPU says it skipped") {
  UseBuiltEvaluator();
  const Ran compiled =
      Eval({"--task", "gemm_n7168_k5120", "--tasks-dir", kTasks, "--compile-only", kSource});
  INFO(compiled.err);
  CHECK(compiled.exit_code == kExitPass);
  CHECK(absl::StrContains(compiled.out, "verdict: compiled"));
  CHECK(absl::StrContains(compiled.err, "[compile] "));  // Each stage as it ends.

  const Ran full = Eval({"--task", "gemm_n7168_k5120", "--tasks-dir", kTasks, "--json", kSource});
  INFO(full.err);
  const nlohmann::json verdict = nlohmann::json::parse(full.out, nullptr, false);
  REQUIRE(verdict.is_object());
  CHECK_FALSE(absl::StrContains(full.err, "[compile] "));  // --json: no stage lines.
  if (verdict.value("runtime_unverified", false)) {
    CHECK(full.exit_code == kExitVerdictFailed);  // Not a pass: nothing ran on a GPU.
    CHECK(absl::StrContains(verdict.dump(), "SKIPPED"));
  } else {
    CHECK(full.exit_code == (verdict["verdict_class"] == "pass" ? kExitPass : kExitVerdictFailed));
  }
}

}  // namespace
}  // namespace ptxbench::client
