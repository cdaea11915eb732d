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

}  // namespace
}  // namespace ptxbench
