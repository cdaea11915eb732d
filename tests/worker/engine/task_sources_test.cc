// Every solution and decoy of every task, through the compile stage and plan validation as the
// worker runs them: solutions compile and their plans resolve for every workload; decoys fail
// exactly where their expected verdict says.
#include <catch2/catch.hpp>
#include <string>

#include "common/task.h"
#include "tests/worker/engine/engine_test_support.h"
#include "worker/engine/compile.h"
#include "worker/engine/plan.h"

namespace ptxbench {
namespace {

struct Outcome {
  bool compiled = false;
  std::string compile_log;
  std::string plan_error;  // Empty when the plan resolved for every workload.
};

Outcome Evaluate(const Task& task, const SourceRef& ref) {
  Outcome outcome;
  auto headers = TemplateHeaders(task, ref.arch);
  REQUIRE(headers.ok());
  CompileRequest request;
  request.source = task.files.at(ref.path);
  request.language = ref.path.size() > 4 && ref.path.substr(ref.path.size() - 4) == ".ptx"
                         ? SourceLanguage::kPtx
                         : SourceLanguage::kCuda;
  request.arch = ref.arch;
  request.headers = *headers;
  auto result = Compile(request);
  REQUIRE(result.ok());
  outcome.compiled = result->ok;
  outcome.compile_log = result->log;
  if (!result->ok) return outcome;
  PlanOr<LaunchPlan> plan = SelectLaunchPlan(std::nullopt, request.source);
  if (!plan.ok()) {
    outcome.plan_error = plan.error().ToString();
    return outcome;
  }
  auto limits = DeviceLimitsForArch(ref.arch);
  REQUIRE(limits.ok());
  for (const Workload& workload : task.workloads) {
    PlanOr<ResolvedPlan> resolved =
        ValidatePlan(plan.value(), task, workload, *limits, result->kernels);
    if (!resolved.ok()) {
      outcome.plan_error = resolved.error().ToString();
      break;
    }
  }
  return outcome;
}

TEST_CASE("Solutions and decoys of the repository's tasks meet their expectations up to the plan") {
  auto catalog = TaskCatalog::Load(SourceDir() + "/tasks");
  INFO(catalog.status().ToString());
  REQUIRE(catalog.ok());
  int checked = 0;
  for (const Task& task : catalog->tasks()) {
    std::vector<SourceRef> sources = task.solutions;
    sources.insert(sources.end(), task.decoys.begin(), task.decoys.end());
    for (const SourceRef& ref : sources) {
      INFO(task.id << " " << ref.path << " expects " << ref.expect);
      const Outcome outcome = Evaluate(task, ref);
      INFO("log:\n" << outcome.compile_log << "\nplan: " << outcome.plan_error);
      if (ref.expect == "compile_error") {
        CHECK_FALSE(outcome.compiled);
      } else if (ref.expect == "plan_invalid") {
        CHECK(outcome.compiled);
        CHECK_FALSE(outcome.plan_error.empty());
      } else {
        CHECK(outcome.compiled);
        CHECK(outcome.plan_error.empty());
      }
      ++checked;
    }
  }
  CHECK(checked > 0);
}

// The example in the contract every prompt carries must itself be a valid plan for the GEMM task.
TEST_CASE("The contract's GEMM example plan validates against a kernel with its signature") {
  const std::string contract = ReadFile(SourceDir() + "/tasks/_shared/contract/submission.md");
  const size_t begin = contract.find("/* PTXBENCH_PLAN", contract.find("### Example"));
  REQUIRE(begin != std::string::npos);
  const size_t end = contract.find("```", begin);
  REQUIRE(end != std::string::npos);
  std::string source = contract.substr(begin, end - begin);
  // The example declares the kernel; give it a body and the CUtensorMap type.
  const size_t semicolon = source.rfind(';');
  REQUIRE(semicolon != std::string::npos);
  source = "struct alignas(64) CUtensorMap { unsigned long long opaque[16]; };\n" +
           source.substr(0, semicolon) + " { if (M < 0) C[0] = N + K; }\n";
  CompileRequest request;
  request.source = source;
  request.arch = "sm_90a";
  auto compiled = Compile(request);
  REQUIRE(compiled.ok());
  INFO(compiled->log);
  REQUIRE(compiled->ok);

  auto task = LoadTask(SourceDir() + "/tasks/gemm_n7168_k5120");
  REQUIRE(task.ok());
  PlanOr<LaunchPlan> plan = SelectLaunchPlan(std::nullopt, source);
  REQUIRE(plan.ok());
  for (const Workload& workload : task->workloads) {
    PlanOr<ResolvedPlan> resolved =
        ValidatePlan(plan.value(), *task, workload, DeviceLimits{}, compiled->kernels);
    INFO(workload.name << ": " << (resolved.ok() ? "" : resolved.error().ToString()));
    CHECK(resolved.ok());
  }
}

}  // namespace
}  // namespace ptxbench
