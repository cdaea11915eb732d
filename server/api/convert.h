// The one place where wire messages (ptxbench.v1) and store rows meet. Enumerations are the
// wire's enums on both sides (the store keeps their text inside its SQL layer, store.h);
// verdicts and stage results are stored as the JSON of their proto message (JsonUtil, proto
// field names) next to key columns, so a verdict read back is byte-for-byte the message a
// worker sent.
#ifndef PTXBENCH_SERVER_API_CONVERT_H_
#define PTXBENCH_SERVER_API_CONVERT_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "google/protobuf/message.h"
#include "google/protobuf/timestamp.pb.h"
#include "proto/wire_names.h"
#include "ptxbench/v1/admin.pb.h"
#include "ptxbench/v1/types.pb.h"
#include "ptxbench/v1/worker.pb.h"
#include "server/store/store.h"

namespace ptxbench::api {

// Enum <-> text name (prompts, logs, metric labels): proto/wire_names.h, shared with the worker
// and the client.
using wire::ArchName;
using wire::FailureKindName;
using wire::JobKindName;
using wire::KnowledgeLevelName;
using wire::LanguageName;
using wire::ParseArch;
using wire::ParseJobKind;
using wire::ParseKnowledgeLevel;
using wire::ParseLanguage;
using wire::ParseRole;
using wire::ParseScope;
using wire::ParseStage;
using wire::ParseSubmissionState;
using wire::ParseVerdictClass;
using wire::ParseWorkerState;
using wire::RoleName;
using wire::ScopeName;
using wire::StageName;
using wire::SubmissionStateName;
using wire::VerdictClassName;
using wire::WorkerStateName;

google::protobuf::Timestamp ToTimestamp(absl::Time time);
absl::Time FromTimestamp(const google::protobuf::Timestamp& timestamp);

// Message <-> JSON with proto field names, as stored in JSONB columns.
absl::StatusOr<std::string> MessageToJson(const google::protobuf::Message& message);
absl::Status MessageFromJson(const std::string& json, google::protobuf::Message* message);

// A worker's verdict -> the stored row (key columns + the verdict's JSON). INVALID_ARGUMENT
// names the field for an unspecified verdict class.
absl::StatusOr<store::VerdictRow> VerdictToRow(const v1::Verdict& verdict);
// The stored row -> the wire verdict; the JSON is authoritative, the key columns fill in when
// a row has no JSON.
absl::StatusOr<v1::Verdict> VerdictFromRow(const store::VerdictRow& row);

absl::StatusOr<v1::Submission> SubmissionFromRow(const store::SubmissionRow& row);

// A stored stage event -> the wire event: a notice, a stage's StageResult, or (stage DONE) the
// final verdict.
absl::StatusOr<v1::StageEvent> StageEventFromRow(const store::StageEventRow& row);
// The payload stored for a notice event.
std::string NoticePayload(const std::string& notice);

v1::Worker WorkerFromRow(const store::WorkerRow& row);
v1::Tenant TenantFromRow(const store::TenantRow& row);
v1::QueueDepth QueueDepthFromRow(const store::QueueDepthRow& row);
v1::LeasedJob LeasedJobFromRow(const store::LeasedJobRow& row, int lease_seconds);
// A worker's artifact -> the stored row (the producer is the store's to set).
store::CompileArtifactRow CompileArtifactToRow(const v1::CompileArtifact& artifact);
store::LeaseRef LeaseRefFromProto(const v1::JobLease& lease);
v1::JobLease LeaseRefToProto(const store::LeaseRef& lease);

}  // namespace ptxbench::api

#endif  // PTXBENCH_SERVER_API_CONVERT_H_
