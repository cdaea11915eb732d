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

// Whether the strong target-instruction check (work share on the timed path + profiled path =
// timed path, docs/measurement.md "Work share") was made. Names "made", "not_made",
// "not_reached" (the evaluation ended before it: compile error, wrong result, ...).
enum class StrongCheck { kMade, kNotMade, kNotReached };
std::string StrongCheckName(StrongCheck s);
absl::StatusOr<StrongCheck> ParseStrongCheck(const std::string& name);

// What the strong check found. When it was not made, `reason` says why and `tic` is false: a
// verdict never passes as if the check had been made.
struct TargetWork {
  StrongCheck strong_check = StrongCheck::kNotReached;
  std::string reason;  // Why not made, or what failed; "" when made and met.
  double share_of_task = 0;
  double share_of_executed = 0;
  double min_share_of_task = 0;  // The task's thresholds (task.json min_work_share).
  double min_share_of_executed = 0;
  // Multiply-add FLOPs the kernel executed on other units / the task's FLOPs, and its bound
  // ((1 - min_share_of_executed) / min_share_of_executed; work_share.h JudgeTargetWork says why).
  double other_work_over_task = 0;
  double max_other_work_over_task = 0;
  bool path_checked = false;  // The instrumented run's target work compared with the counters'.
  bool path_agrees = false;
  nlohmann::json figures;  // work_share.h ToJson of the share and the path agreement.
};

// What judged the verdict: one definition of the engine version (common/build_info.h
// kHarnessVersion) and the hash of the task's judging file (Task::JudgingHash). A verdict whose
// harness differs from the current one was judged by other rules (re-judging compares these).
struct Harness {
  std::string engine;
  std::string task_hash;
};

// How the timing loop ended and whether the speedup is a clean figure.
struct Sampling {
  std::string stop_reason;       // "converged", "sample_cap", "time_cap".
  bool converged = false;        // stop_reason == "converged".
  bool speedup_stable = true;    // False when the candidate's samples scatter > 4x the library's.
  double candidate_scatter = 0;  // max(RSE of the median, MAD/median) of the candidate's samples.
  double baseline_scatter = 0;   // The same for the library.
  std::string note;              // Feedback when not converged or not stable.
};

struct Verdict {
  VerdictClass verdict_class = VerdictClass::kCompileError;
  bool compiled = false;
  bool correct = false;
  bool target_executed = false;
  // The paper's definition: compiled && correct && every target family executed predicate-on.
  bool tic_paper = false;
  // The strong definition, which the verdict class follows: tic_paper && the strong check was
  // made and met (work share >= the task's thresholds, profiled path = timed path).
  bool tic = false;
  TargetWork target_work;
  Harness harness;
  std::optional<Sampling> sampling;  // When the timing loop ran.
  double speedup = 0;                // Library median / candidate median; 0 when not timed.
  std::string message;               // Why, naming the failing field, workload or family.
  bool runtime_unverified = false;
  std::vector<StageReport> stages;
  nlohmann::json report;  // Audit record: worker/GPU identity, versions, seeds, clocks.
};

nlohmann::json ToJson(const StageReport& report);
absl::StatusOr<StageReport> StageReportFromJson(const nlohmann::json& json);
nlohmann::json ToJson(const TargetWork& work);
nlohmann::json ToJson(const Sampling& sampling);
nlohmann::json ToJson(const Verdict& verdict);
absl::StatusOr<Verdict> VerdictFromJson(const nlohmann::json& json);

}  // namespace ptxbench

#endif  // PTXBENCH_COMMON_VERDICT_H_
