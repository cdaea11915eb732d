#include "common/verdict.h"

#include <array>
#include <type_traits>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/status.h"

namespace ptxbench {
namespace {

// Names as stored in the database and reports; the order is irrelevant, the spelling is a
// compatibility promise (docs/api.md).
constexpr std::array<std::pair<VerdictClass, const char*>, 14> kVerdictClassNames = {{
    {VerdictClass::kPass, "pass"},
    {VerdictClass::kCompileError, "compile_error"},
    {VerdictClass::kPlanInvalid, "plan_invalid"},
    {VerdictClass::kRuntimeError, "runtime_error"},
    {VerdictClass::kTimeout, "timeout"},
    {VerdictClass::kWrongResult, "wrong_result"},
    {VerdictClass::kTargetNotExecuted, "target_not_executed"},
    {VerdictClass::kInputMutated, "input_mutated"},
    {VerdictClass::kImpossibleTime, "impossible_time"},
    {VerdictClass::kCompiled, "compiled"},
    {VerdictClass::kInfrastructureFailure, "infrastructure_failure"},
    {VerdictClass::kCancelled, "cancelled"},
    {VerdictClass::kTargetWorkInsufficient, "target_work_insufficient"},
    {VerdictClass::kProfiledPathDiffers, "profiled_path_differs"},
}};

constexpr std::array<std::pair<StrongCheck, const char*>, 3> kStrongCheckNames = {{
    {StrongCheck::kMade, "made"},
    {StrongCheck::kNotMade, "not_made"},
    {StrongCheck::kNotReached, "not_reached"},
}};

constexpr std::array<std::pair<Stage, const char*>, 6> kStageNames = {{
    {Stage::kQueued, "queued"},
    {Stage::kCompile, "compile"},
    {Stage::kCorrectness, "correctness"},
    {Stage::kTargetInstructions, "target_instructions"},
    {Stage::kTiming, "timing"},
    {Stage::kDone, "done"},
}};

// Typed field access with errors that name the field: "verdict JSON: field 'tic': expected a
// boolean".
template <typename T>
absl::Status ReadField(const nlohmann::json& json, const char* context, const char* key, T& out,
                       bool required = true) {
  auto it = json.find(key);
  if (it == json.end()) {
    if (!required) return absl::OkStatus();
    return absl::InvalidArgumentError(absl::StrCat(context, ": missing field '", key, "'"));
  }
  bool type_ok = false;
  if constexpr (std::is_same_v<T, bool>) {
    type_ok = it->is_boolean();
  } else if constexpr (std::is_same_v<T, double>) {
    type_ok = it->is_number();
  } else if constexpr (std::is_same_v<T, std::string>) {
    type_ok = it->is_string();
  }
  if (!type_ok) {
    const char* expected = std::is_same_v<T, bool>     ? "a boolean"
                           : std::is_same_v<T, double> ? "a number"
                                                       : "a string";
    return absl::InvalidArgumentError(
        absl::StrCat(context, ": field '", key, "': expected ", expected));
  }
  out = it->get<T>();
  return absl::OkStatus();
}

}  // namespace

std::string VerdictClassName(VerdictClass c) {
  for (const auto& [value, name] : kVerdictClassNames) {
    if (value == c) return name;
  }
  return "unknown";
}

absl::StatusOr<VerdictClass> ParseVerdictClass(const std::string& name) {
  for (const auto& [value, known] : kVerdictClassNames) {
    if (name == known) return value;
  }
  return absl::InvalidArgumentError(absl::StrCat("unknown verdict class '", name, "'"));
}

std::string StrongCheckName(StrongCheck s) {
  for (const auto& [value, name] : kStrongCheckNames) {
    if (value == s) return name;
  }
  return "unknown";
}

absl::StatusOr<StrongCheck> ParseStrongCheck(const std::string& name) {
  for (const auto& [value, known] : kStrongCheckNames) {
    if (name == known) return value;
  }
  return absl::InvalidArgumentError(absl::StrCat("unknown strong check state '", name, "'"));
}

std::string StageName(Stage s) {
  for (const auto& [value, name] : kStageNames) {
    if (value == s) return name;
  }
  return "unknown";
}

absl::StatusOr<Stage> ParseStage(const std::string& name) {
  for (const auto& [value, known] : kStageNames) {
    if (name == known) return value;
  }
  return absl::InvalidArgumentError(absl::StrCat("unknown stage '", name, "'"));
}

nlohmann::json ToJson(const StageReport& report) {
  return nlohmann::json{
      {"stage", StageName(report.stage)}, {"ok", report.ok},           {"summary", report.summary},
      {"detail", report.detail},          {"seconds", report.seconds},
  };
}

absl::StatusOr<StageReport> StageReportFromJson(const nlohmann::json& json) {
  constexpr const char* kContext = "stage report JSON";
  if (!json.is_object()) return absl::InvalidArgumentError("stage report JSON: not an object");
  StageReport report;
  std::string stage_name;
  RETURN_IF_ERROR(ReadField(json, kContext, "stage", stage_name));
  ASSIGN_OR_RETURN(report.stage, ParseStage(stage_name));
  RETURN_IF_ERROR(ReadField(json, kContext, "ok", report.ok));
  RETURN_IF_ERROR(ReadField(json, kContext, "summary", report.summary, /*required=*/false));
  RETURN_IF_ERROR(ReadField(json, kContext, "seconds", report.seconds, /*required=*/false));
  if (auto it = json.find("detail"); it != json.end()) report.detail = *it;
  return report;
}

nlohmann::json ToJson(const TargetWork& w) {
  return nlohmann::json{{"strong_check", StrongCheckName(w.strong_check)},
                        {"reason", w.reason},
                        {"share_of_task", w.share_of_task},
                        {"share_of_executed", w.share_of_executed},
                        {"min_share_of_task", w.min_share_of_task},
                        {"min_share_of_executed", w.min_share_of_executed},
                        {"other_work_over_task", w.other_work_over_task},
                        {"max_other_work_over_task", w.max_other_work_over_task},
                        {"path_checked", w.path_checked},
                        {"path_agrees", w.path_agrees},
                        {"figures", w.figures}};
}

absl::StatusOr<TargetWork> TargetWorkFromJson(const nlohmann::json& json) {
  constexpr const char* kContext = "verdict JSON: target_work";
  if (!json.is_object())
    return absl::InvalidArgumentError("verdict JSON: target_work: not an object");
  TargetWork w;
  std::string state;
  RETURN_IF_ERROR(ReadField(json, kContext, "strong_check", state));
  ASSIGN_OR_RETURN(w.strong_check, ParseStrongCheck(state));
  RETURN_IF_ERROR(ReadField(json, kContext, "reason", w.reason, false));
  RETURN_IF_ERROR(ReadField(json, kContext, "share_of_task", w.share_of_task, false));
  RETURN_IF_ERROR(ReadField(json, kContext, "share_of_executed", w.share_of_executed, false));
  RETURN_IF_ERROR(ReadField(json, kContext, "min_share_of_task", w.min_share_of_task, false));
  RETURN_IF_ERROR(
      ReadField(json, kContext, "min_share_of_executed", w.min_share_of_executed, false));
  RETURN_IF_ERROR(ReadField(json, kContext, "other_work_over_task", w.other_work_over_task, false));
  RETURN_IF_ERROR(
      ReadField(json, kContext, "max_other_work_over_task", w.max_other_work_over_task, false));
  RETURN_IF_ERROR(ReadField(json, kContext, "path_checked", w.path_checked, false));
  RETURN_IF_ERROR(ReadField(json, kContext, "path_agrees", w.path_agrees, false));
  if (auto it = json.find("figures"); it != json.end()) w.figures = *it;
  return w;
}

nlohmann::json ToJson(const Sampling& s) {
  return nlohmann::json{
      {"stop_reason", s.stop_reason},           {"converged", s.converged},
      {"speedup_stable", s.speedup_stable},     {"candidate_scatter", s.candidate_scatter},
      {"baseline_scatter", s.baseline_scatter}, {"note", s.note}};
}

absl::StatusOr<Sampling> SamplingFromJson(const nlohmann::json& json) {
  constexpr const char* kContext = "verdict JSON: sampling";
  if (!json.is_object()) return absl::InvalidArgumentError("verdict JSON: sampling: not an object");
  Sampling s;
  RETURN_IF_ERROR(ReadField(json, kContext, "stop_reason", s.stop_reason));
  RETURN_IF_ERROR(ReadField(json, kContext, "converged", s.converged));
  RETURN_IF_ERROR(ReadField(json, kContext, "speedup_stable", s.speedup_stable));
  RETURN_IF_ERROR(ReadField(json, kContext, "candidate_scatter", s.candidate_scatter, false));
  RETURN_IF_ERROR(ReadField(json, kContext, "baseline_scatter", s.baseline_scatter, false));
  RETURN_IF_ERROR(ReadField(json, kContext, "note", s.note, false));
  return s;
}

nlohmann::json ToJson(const Verdict& verdict) {
  nlohmann::json stages = nlohmann::json::array();
  for (const StageReport& stage : verdict.stages) stages.push_back(ToJson(stage));
  return nlohmann::json{
      {"verdict_class", VerdictClassName(verdict.verdict_class)},
      {"compiled", verdict.compiled},
      {"correct", verdict.correct},
      {"target_executed", verdict.target_executed},
      {"tic_paper", verdict.tic_paper},
      {"tic", verdict.tic},
      {"target_work", ToJson(verdict.target_work)},
      {"harness", {{"engine", verdict.harness.engine}, {"task_hash", verdict.harness.task_hash}}},
      {"sampling", verdict.sampling ? ToJson(*verdict.sampling) : nlohmann::json(nullptr)},
      {"speedup", verdict.speedup},
      {"message", verdict.message},
      {"runtime_unverified", verdict.runtime_unverified},
      {"stages", std::move(stages)},
      {"report", verdict.report},
  };
}

absl::StatusOr<Verdict> VerdictFromJson(const nlohmann::json& json) {
  constexpr const char* kContext = "verdict JSON";
  if (!json.is_object()) return absl::InvalidArgumentError("verdict JSON: not an object");
  Verdict verdict;
  std::string class_name;
  RETURN_IF_ERROR(ReadField(json, kContext, "verdict_class", class_name));
  ASSIGN_OR_RETURN(verdict.verdict_class, ParseVerdictClass(class_name));
  RETURN_IF_ERROR(ReadField(json, kContext, "compiled", verdict.compiled));
  RETURN_IF_ERROR(ReadField(json, kContext, "correct", verdict.correct));
  RETURN_IF_ERROR(ReadField(json, kContext, "target_executed", verdict.target_executed));
  RETURN_IF_ERROR(ReadField(json, kContext, "tic", verdict.tic));
  // Verdicts stored before issue 11 have neither definition's extra fields: their `tic` was the
  // paper's, and no strong check was made.
  verdict.tic_paper = verdict.tic;
  RETURN_IF_ERROR(ReadField(json, kContext, "tic_paper", verdict.tic_paper, false));
  if (auto it = json.find("target_work"); it != json.end()) {
    ASSIGN_OR_RETURN(verdict.target_work, TargetWorkFromJson(*it));
  } else if (verdict.tic) {
    verdict.target_work.strong_check = StrongCheck::kNotMade;
    verdict.target_work.reason = "judged before the strong check existed";
  }
  if (auto it = json.find("harness"); it != json.end()) {
    if (!it->is_object()) {
      return absl::InvalidArgumentError("verdict JSON: field 'harness': expected an object");
    }
    RETURN_IF_ERROR(ReadField(*it, "verdict JSON: harness", "engine", verdict.harness.engine));
    RETURN_IF_ERROR(
        ReadField(*it, "verdict JSON: harness", "task_hash", verdict.harness.task_hash));
  }
  if (auto it = json.find("sampling"); it != json.end() && !it->is_null()) {
    ASSIGN_OR_RETURN(Sampling sampling, SamplingFromJson(*it));
    verdict.sampling = std::move(sampling);
  }
  RETURN_IF_ERROR(ReadField(json, kContext, "speedup", verdict.speedup, /*required=*/false));
  RETURN_IF_ERROR(ReadField(json, kContext, "message", verdict.message, /*required=*/false));
  RETURN_IF_ERROR(ReadField(json, kContext, "runtime_unverified", verdict.runtime_unverified,
                            /*required=*/false));
  if (auto it = json.find("stages"); it != json.end()) {
    if (!it->is_array()) {
      return absl::InvalidArgumentError("verdict JSON: field 'stages': expected an array");
    }
    for (size_t i = 0; i < it->size(); ++i) {
      auto stage = StageReportFromJson((*it)[i]);
      if (!stage.ok()) {
        return Annotate(stage.status(), absl::StrCat("verdict JSON: stages[", i, "]"));
      }
      verdict.stages.push_back(*std::move(stage));
    }
  }
  if (auto it = json.find("report"); it != json.end()) verdict.report = *it;
  return verdict;
}

}  // namespace ptxbench
