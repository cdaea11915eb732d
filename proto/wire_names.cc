#include "proto/wire_names.h"

#include <cstddef>

#include "absl/strings/str_cat.h"

namespace ptxbench::wire {
namespace {

template <typename Enum>
struct NamedValue {
  Enum value;
  const char* name;
};

template <typename Enum, size_t N>
std::string NameOf(const NamedValue<Enum> (&table)[N], Enum value) {
  for (const auto& entry : table) {
    if (entry.value == value) return entry.name;
  }
  return "";
}

template <typename Enum, size_t N>
absl::StatusOr<Enum> ValueOf(const NamedValue<Enum> (&table)[N], const std::string& name,
                             const char* what) {
  for (const auto& entry : table) {
    if (name == entry.name) return entry.value;
  }
  return absl::InvalidArgumentError(absl::StrCat("unknown ", what, " '", name, "'"));
}

// The names are those of store.h's header comment and of common/verdict.h.
constexpr NamedValue<v1::Arch> kArches[] = {{v1::ARCH_SM_90A, "sm_90a"},
                                            {v1::ARCH_SM_100A, "sm_100a"}};
constexpr NamedValue<v1::JobKind> kJobKinds[] = {{v1::JOB_KIND_COMPILE, "compile"},
                                                 {v1::JOB_KIND_EVALUATE, "evaluate"}};
constexpr NamedValue<v1::EvaluationScope> kScopes[] = {
    {v1::EVALUATION_SCOPE_FULL, "full"}, {v1::EVALUATION_SCOPE_COMPILE_ONLY, "compile_only"}};
constexpr NamedValue<v1::KnowledgeLevel> kKnowledgeLevels[] = {
    {v1::KNOWLEDGE_LEVEL_NONE, "none"},
    {v1::KNOWLEDGE_LEVEL_TEMPLATES, "templates"},
    {v1::KNOWLEDGE_LEVEL_CONTRACT, "contract"}};
constexpr NamedValue<v1::SourceLanguage> kLanguages[] = {{v1::SOURCE_LANGUAGE_CUDA, "cuda"},
                                                         {v1::SOURCE_LANGUAGE_PTX, "ptx"}};
constexpr NamedValue<v1::Role> kRoles[] = {
    {v1::ROLE_VENDOR, "vendor"}, {v1::ROLE_WORKER, "worker"}, {v1::ROLE_ADMIN, "admin"}};
constexpr NamedValue<v1::WorkerState> kWorkerStates[] = {{v1::WORKER_STATE_ACTIVE, "active"},
                                                         {v1::WORKER_STATE_DRAINING, "draining"},
                                                         {v1::WORKER_STATE_UNHEALTHY, "unhealthy"},
                                                         {v1::WORKER_STATE_OFFLINE, "offline"}};
constexpr NamedValue<v1::SubmissionState> kSubmissionStates[] = {
    {v1::SUBMISSION_STATE_QUEUED, "queued"},
    {v1::SUBMISSION_STATE_RUNNING, "running"},
    {v1::SUBMISSION_STATE_FINISHED, "finished"},
    {v1::SUBMISSION_STATE_CANCELLED, "cancelled"}};
constexpr NamedValue<v1::Stage> kStages[] = {
    {v1::STAGE_QUEUED, "queued"},           {v1::STAGE_COMPILE, "compile"},
    {v1::STAGE_CORRECTNESS, "correctness"}, {v1::STAGE_TARGET_INSTRUCTIONS, "target_instructions"},
    {v1::STAGE_TIMING, "timing"},           {v1::STAGE_DONE, "done"}};
constexpr NamedValue<v1::VerdictClass> kVerdictClasses[] = {
    {v1::VERDICT_CLASS_PASS, "pass"},
    {v1::VERDICT_CLASS_COMPILE_ERROR, "compile_error"},
    {v1::VERDICT_CLASS_PLAN_INVALID, "plan_invalid"},
    {v1::VERDICT_CLASS_RUNTIME_ERROR, "runtime_error"},
    {v1::VERDICT_CLASS_TIMEOUT, "timeout"},
    {v1::VERDICT_CLASS_WRONG_RESULT, "wrong_result"},
    {v1::VERDICT_CLASS_TARGET_NOT_EXECUTED, "target_not_executed"},
    {v1::VERDICT_CLASS_INPUT_MUTATED, "input_mutated"},
    {v1::VERDICT_CLASS_IMPOSSIBLE_TIME, "impossible_time"},
    {v1::VERDICT_CLASS_COMPILED, "compiled"},
    {v1::VERDICT_CLASS_INFRASTRUCTURE_FAILURE, "infrastructure_failure"},
    {v1::VERDICT_CLASS_CANCELLED, "cancelled"},
    {v1::VERDICT_CLASS_TARGET_WORK_INSUFFICIENT, "target_work_insufficient"},
    {v1::VERDICT_CLASS_PROFILED_PATH_DIFFERS, "profiled_path_differs"}};
constexpr NamedValue<v1::FailureKind> kFailureKinds[] = {
    {v1::FAILURE_KIND_KERNEL, "kernel"}, {v1::FAILURE_KIND_INFRASTRUCTURE, "infrastructure"}};
constexpr NamedValue<v1::ArtifactOutcome> kArtifactOutcomes[] = {
    {v1::ARTIFACT_OUTCOME_NONE, "none"},
    {v1::ARTIFACT_OUTCOME_USED, "used"},
    {v1::ARTIFACT_OUTCOME_VERIFIED_MATCH, "verified_match"},
    {v1::ARTIFACT_OUTCOME_MISMATCH, "mismatch"},
    {v1::ARTIFACT_OUTCOME_REFUSED, "refused"}};

}  // namespace

std::string ArchName(v1::Arch arch) { return NameOf(kArches, arch); }
absl::StatusOr<v1::Arch> ParseArch(const std::string& name) {
  return ValueOf(kArches, name, "arch");
}
std::string JobKindName(v1::JobKind kind) { return NameOf(kJobKinds, kind); }
absl::StatusOr<v1::JobKind> ParseJobKind(const std::string& name) {
  return ValueOf(kJobKinds, name, "job kind");
}
std::string ScopeName(v1::EvaluationScope scope) {
  if (scope == v1::EVALUATION_SCOPE_UNSPECIFIED) return "full";
  return NameOf(kScopes, scope);
}
absl::StatusOr<v1::EvaluationScope> ParseScope(const std::string& name) {
  return ValueOf(kScopes, name, "scope");
}
std::string KnowledgeLevelName(v1::KnowledgeLevel level) { return NameOf(kKnowledgeLevels, level); }
absl::StatusOr<v1::KnowledgeLevel> ParseKnowledgeLevel(const std::string& name) {
  return ValueOf(kKnowledgeLevels, name, "knowledge level");
}
std::string LanguageName(v1::SourceLanguage language) {
  if (language == v1::SOURCE_LANGUAGE_UNSPECIFIED) return "cuda";
  return NameOf(kLanguages, language);
}
absl::StatusOr<v1::SourceLanguage> ParseLanguage(const std::string& name) {
  return ValueOf(kLanguages, name, "language");
}
std::string RoleName(v1::Role role) { return NameOf(kRoles, role); }
absl::StatusOr<v1::Role> ParseRole(const std::string& name) {
  return ValueOf(kRoles, name, "role");
}
std::string WorkerStateName(v1::WorkerState state) { return NameOf(kWorkerStates, state); }
absl::StatusOr<v1::WorkerState> ParseWorkerState(const std::string& name) {
  return ValueOf(kWorkerStates, name, "worker state");
}
std::string SubmissionStateName(v1::SubmissionState state) {
  return NameOf(kSubmissionStates, state);
}
absl::StatusOr<v1::SubmissionState> ParseSubmissionState(const std::string& name) {
  return ValueOf(kSubmissionStates, name, "submission state");
}
std::string StageName(v1::Stage stage) { return NameOf(kStages, stage); }
absl::StatusOr<v1::Stage> ParseStage(const std::string& name) {
  return ValueOf(kStages, name, "stage");
}
std::string VerdictClassName(v1::VerdictClass verdict_class) {
  return NameOf(kVerdictClasses, verdict_class);
}
absl::StatusOr<v1::VerdictClass> ParseVerdictClass(const std::string& name) {
  return ValueOf(kVerdictClasses, name, "verdict class");
}
std::string FailureKindName(v1::FailureKind kind) { return NameOf(kFailureKinds, kind); }
std::string ArtifactOutcomeName(v1::ArtifactOutcome outcome) {
  return NameOf(kArtifactOutcomes, outcome);
}
absl::StatusOr<v1::ArtifactOutcome> ParseArtifactOutcome(const std::string& name) {
  return ValueOf(kArtifactOutcomes, name, "artifact outcome");
}

}  // namespace ptxbench::wire
