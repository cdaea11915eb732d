// Every solution and decoy of every task, through the compile stage and plan validation as the
// worker runs them: solutions compile and their plans resolve for every workload; decoys fail
// exactly where their expected verdict says.
#include <algorithm>
#include <catch2/catch.hpp>
#include <map>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/task.h"
#include "tests/worker/engine/engine_test_support.h"
#include "worker/engine/compile.h"
#include "worker/engine/plan.h"

namespace ptxbench {
namespace {

struct Outcome {
  bool compiled = false;
  std::string compile_log;
  std::map<std::string, int> ptx_families;  // The compile stage's PTX scan.
  std::string plan_error;                   // Empty when the plan resolved for every workload.
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
  outcome.ptx_families = result->ptx_families;
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
      // A reference solution carries every target family of its arch in its PTX (the SASS
      // check is the GPU bundle's; a solution without them could never pass the stage).
      if (ref.expect == "pass" || ref.expect == "compiled") {
        for (const std::string& family : task.arches.at(ref.arch).target_families) {
          INFO("target family " << family);
          CHECK(outcome.ptx_families.count(family) == 1);
        }
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

// The compile limits are set from these figures (docs/operations.md, "Compile limits"): every
// solution of every task, for its arch and the other one, must compile well inside them, with
// room for a larger honest kernel.
TEST_CASE("Honest compiles stay well inside the compile limits") {
  auto catalog = TaskCatalog::Load(SourceDir() + "/tasks");
  REQUIRE(catalog.ok());
  const CompileLimits limits;
  double max_seconds = 0;
  uint64_t max_frontend_rss = 0, max_frontend_virtual = 0, max_assembler_rss = 0;
  std::string slowest, largest;
  int compiled = 0;
  for (const Task& task : catalog->tasks()) {
    for (const SourceRef& ref : task.solutions) {
      for (const std::string arch : {"sm_90a", "sm_100a"}) {
        // An arch the task does not declare has no template headers to offer (the paged decode
        // task is sm_90a only).
        if (task.arches.count(arch) == 0) continue;
        auto headers = TemplateHeaders(task, arch);
        REQUIRE(headers.ok());
        CompileRequest request;
        request.source = task.files.at(ref.path);
        request.arch = arch;
        request.headers = *headers;
        auto result = Compile(request);
        INFO(task.id << " " << ref.path << " " << arch);
        REQUIRE(result.ok());
        if (arch == ref.arch) CHECK(result->ok);
        CHECK(result->failure != CompileFailure::kTimeout);
        CHECK(result->failure != CompileFailure::kOutOfMemory);
        const std::string name = absl::StrCat(task.id, "/", ref.path, " for ", arch);
        if (result->timings.total_seconds > max_seconds) {
          max_seconds = result->timings.total_seconds;
          slowest = name;
        }
        if (result->memory.frontend_peak_virtual_bytes > max_frontend_virtual) {
          max_frontend_virtual = result->memory.frontend_peak_virtual_bytes;
          largest = name;
        }
        max_frontend_rss = std::max(max_frontend_rss, result->memory.frontend_peak_rss_bytes);
        max_assembler_rss = std::max(max_assembler_rss, result->memory.assembler_peak_rss_bytes);
        ++compiled;
      }
    }
  }
  constexpr double kMiB = 1 << 20;
  WARN("honest compiles: " << compiled << "; slowest " << max_seconds << " s (" << slowest
                           << "); NVRTC peak virtual " << max_frontend_virtual / kMiB << " MiB ("
                           << largest << "), peak RSS " << max_frontend_rss / kMiB
                           << " MiB; ptxas peak RSS " << max_assembler_rss / kMiB << " MiB");
  CHECK(compiled > 0);
  CHECK(max_seconds < limits.max_seconds / 4);
  CHECK(max_frontend_virtual < limits.max_memory_bytes / 2);
  CHECK(max_assembler_rss < limits.max_memory_bytes / 2);
}

}  // namespace
}  // namespace ptxbench
