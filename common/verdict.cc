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

nlohmann::json ToJson(const Verdict& verdict) {
  nlohmann::json stages = nlohmann::json::array();
  for (const StageReport& stage : verdict.stages) stages.push_back(ToJson(stage));
  return nlohmann::json{
      {"verdict_class", VerdictClassName(verdict.verdict_class)},
      {"compiled", verdict.compiled},
      {"correct", verdict.correct},
      {"target_executed", verdict.target_executed},
      {"tic", verdict.tic},
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
