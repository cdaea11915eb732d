// The verdict model: what an evaluation concluded, as data. The engine produces it, the worker
// daemon converts it to ptxbench.v1.Verdict at the wire, the server stores its JSON.
// Verdicts are data, never errors: an absl::Status error from the engine means the
// infrastructure failed and nothing is known about the kernel.
#ifndef PTXBENCH_COMMON_VERDICT_H_
#define PTXBENCH_COMMON_VERDICT_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace ptxbench {

// Mirrors ptxbench.v1.VerdictClass. Text names (VerdictClassName) are lower_snake_case and are
// what the database and reports store: "pass", "compile_error", ...
enum class VerdictClass {
  kPass,
  kCompileError,
  kPlanInvalid,
  kRuntimeError,
  kTimeout,
  kWrongResult,
  kTargetNotExecuted,
  kInputMutated,
  kImpossibleTime,
  kCompiled,               // Compile-only scope: compiled cleanly.
  kInfrastructureFailure,  // Only ever set by the scheduler, never by the engine.
  kCancelled,
  // Issue 11's strong target-instruction check (docs/measurement.md, "Work share"): the target
  // families ran, but did less of the task's arithmetic than the task's threshold.
  kTargetWorkInsufficient,
  // The instrumented (SASS-metrics) run and the hardware counters of the timed path disagree
  // on the target work: the kernel behaves differently when it is profiled.
  kProfiledPathDiffers,
};

// Mirrors ptxbench.v1.Stage (without UNSPECIFIED); names "queued", "compile", "correctness",
// "target_instructions", "timing", "done".
enum class Stage { kQueued, kCompile, kCorrectness, kTargetInstructions, kTiming, kDone };

std::string VerdictClassName(VerdictClass c);
absl::StatusOr<VerdictClass> ParseVerdictClass(const std::string& name);
std::string StageName(Stage s);
absl::StatusOr<Stage> ParseStage(const std::string& name);

// One stage's result, reported as soon as the stage completes.
struct StageReport {
  Stage stage = Stage::kCompile;
  bool ok = false;
  std::string summary;    // One line a person reads.
  nlohmann::json detail;  // The stage's full report (documented in docs/api.md).
  double seconds = 0;
};

struct Verdict {
  VerdictClass verdict_class = VerdictClass::kCompileError;
  bool compiled = false;
  bool correct = false;
  bool target_executed = false;
  bool tic = false;     // compiled && correct && target_executed.
  double speedup = 0;   // Library median / candidate median; 0 when not timed.
  std::string message;  // Why, naming the failing field, workload or family.
  bool runtime_unverified = false;
  std::vector<StageReport> stages;
  nlohmann::json report;  // Audit record: worker/GPU identity, versions, seeds, clocks.
};

nlohmann::json ToJson(const StageReport& report);
absl::StatusOr<StageReport> StageReportFromJson(const nlohmann::json& json);
nlohmann::json ToJson(const Verdict& verdict);
absl::StatusOr<Verdict> VerdictFromJson(const nlohmann::json& json);

}  // namespace ptxbench

#endif  // PTXBENCH_COMMON_VERDICT_H_
