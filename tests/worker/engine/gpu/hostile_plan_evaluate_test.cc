// Issue 12's exploit, as a test with real evaluator processes: a launch plan carrying a number
// beyond int64 (or beyond a double) threw an uncaught exception in the evaluator, the sandbox
// crashed three times and the verdict was infrastructure_failure, charged to nobody. Any value
// a plan can carry is now a PLAN_INVALID verdict naming the field, from the request's plan and
// from the source's block alike.
#include <catch2/catch.hpp>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "common/task.h"
#include "worker/engine/evaluate.h"

namespace ptxbench::engine {
namespace {

const Task& Gemm() {
  static const Task task = [] {
    const char* env = std::getenv("PTXBENCH_SOURCE_DIR");
    auto t =
        LoadTask(std::string(env ? env : PTXBENCH_SOURCE_DIR_DEFAULT) + "/tasks/gemm_n7168_k5120");
    REQUIRE(t.ok());
    return *t;
  }();
  return task;
}

// The reference solution's source, with its plan block replaced by `block` when given.
std::string Source(const std::string& block = "") {
  std::ifstream in(Gemm().dir + "/solutions/sm90a_wgmma_tma.cu");
  std::stringstream s;
  s << in.rdbuf();
  std::string source = s.str();
  REQUIRE(source.rfind("/* PTXBENCH_PLAN", 0) == 0);
  if (!block.empty()) source.replace(0, source.find("*/") + 2, "/* PTXBENCH_PLAN " + block + " */");
  return source;
}

Verdict Evaluate(const std::string& source, const std::string& plan_json) {
  EvaluationRequest request;
  request.task = &Gemm();
  request.arch = "sm_90a";
  request.source = source;
  request.launch_plan_json = plan_json;
  request.compile_only = true;
  EngineOptions options;
  const char* env = std::getenv("PTXBENCH_EVALUATOR");
  options.evaluator_path = env && *env ? env : PTXBENCH_EVALUATOR_PATH;
  options.secret = 12345;
  auto verdict = engine::Evaluate(request, options, nullptr);
  INFO(verdict.status().message());
  REQUIRE(verdict.ok());
  return *verdict;
}

TEST_CASE("hostile numbers in a launch plan are plan_invalid, not an evaluator crash",
          "[evaluate][plan]") {
  const std::string launch =
      R"({"launches": [{"kernel": "gemm_kernel", "grid": [GRID], "block": [384]}]})";
  auto with_grid = [&](const std::string& grid) {
    std::string plan = launch;
    plan.replace(plan.find("GRID"), 4, grid);
    return plan;
  };
  struct Case {
    std::string grid;
    std::string message;
  };
  const std::vector<Case> cases = {
      {"1e400", "launches[0].grid[0]: number 1e400 is beyond the range of a double"},
      {"18446744073709551616",
       "launches[0].grid[0]: integer 18446744073709551616 is outside the int64 range"},
      {"9223372036854775808",
       "launches[0].grid[0]: integer 9223372036854775808 is outside the int64 range"},
      {"-0.0", "launches[0].grid[0]: expected an expression"},
  };
  for (const Case& c : cases) {
    for (const bool in_source : {false, true}) {
      const std::string plan = with_grid(c.grid);
      const Verdict verdict = in_source ? Evaluate(Source(plan), "") : Evaluate(Source(), plan);
      INFO(c.grid << (in_source ? " in the source's block: " : " in the request: ")
                  << verdict.message);
      CHECK(verdict.verdict_class == VerdictClass::kPlanInvalid);
      CHECK(verdict.compiled);
      CHECK(verdict.message.find(c.message) != std::string::npos);
    }
  }
  // Duplicate keys and NUL bytes, which the JSON parser alone would let through.
  const Verdict duplicate = Evaluate(
      Source(),
      R"({"launches": [{"kernel": "a", "kernel": "gemm_kernel", "grid": [1], "block": [384]}]})");
  CHECK(duplicate.verdict_class == VerdictClass::kPlanInvalid);
  CHECK(duplicate.message.find("launches[0].kernel: duplicate key") != std::string::npos);
  const Verdict nul = Evaluate(
      Source(R"({"launches": [{"kernel": "gemm_kernel\u0000x", "grid": [1], "block": [384]}]})"),
      "");
  CHECK(nul.verdict_class == VerdictClass::kPlanInvalid);
  CHECK(nul.message.find("launches[0].kernel: contains a NUL byte") != std::string::npos);
}

}  // namespace
}  // namespace ptxbench::engine
