// The text names of the API's enums ("sm_90a", "compile_only", "wrong_result", ...), in one
// place for every program: the server stores them in the database (server/store/store.h says
// why), the worker and the engine speak them (common/verdict.h), the client prints and parses
// them. Depends only on the generated messages.
#ifndef PTXBENCH_PROTO_WIRE_NAMES_H_
#define PTXBENCH_PROTO_WIRE_NAMES_H_

#include <string>

#include "absl/status/statusor.h"
#include "ptxbench/v1/admin.pb.h"
#include "ptxbench/v1/types.pb.h"
#include "ptxbench/v1/worker.pb.h"

namespace ptxbench::wire {

// Enum <-> stored name. The *Name functions return "" for UNSPECIFIED and unknown values; the
// Parse* functions return INVALID_ARGUMENT for a name they do not know.
std::string ArchName(v1::Arch arch);
absl::StatusOr<v1::Arch> ParseArch(const std::string& name);
std::string JobKindName(v1::JobKind kind);
absl::StatusOr<v1::JobKind> ParseJobKind(const std::string& name);
std::string ScopeName(v1::EvaluationScope scope);  // UNSPECIFIED is "full" (types.proto).
absl::StatusOr<v1::EvaluationScope> ParseScope(const std::string& name);
std::string KnowledgeLevelName(v1::KnowledgeLevel level);
absl::StatusOr<v1::KnowledgeLevel> ParseKnowledgeLevel(const std::string& name);
std::string LanguageName(v1::SourceLanguage language);  // UNSPECIFIED is "cuda".
absl::StatusOr<v1::SourceLanguage> ParseLanguage(const std::string& name);
std::string RoleName(v1::Role role);
absl::StatusOr<v1::Role> ParseRole(const std::string& name);
std::string WorkerStateName(v1::WorkerState state);
absl::StatusOr<v1::WorkerState> ParseWorkerState(const std::string& name);
std::string SubmissionStateName(v1::SubmissionState state);
absl::StatusOr<v1::SubmissionState> ParseSubmissionState(const std::string& name);
std::string StageName(v1::Stage stage);
absl::StatusOr<v1::Stage> ParseStage(const std::string& name);
std::string VerdictClassName(v1::VerdictClass verdict_class);
absl::StatusOr<v1::VerdictClass> ParseVerdictClass(const std::string& name);
std::string FailureKindName(v1::FailureKind kind);
std::string ArtifactOutcomeName(v1::ArtifactOutcome outcome);
absl::StatusOr<v1::ArtifactOutcome> ParseArtifactOutcome(const std::string& name);

}  // namespace ptxbench::wire

#endif  // PTXBENCH_PROTO_WIRE_NAMES_H_
