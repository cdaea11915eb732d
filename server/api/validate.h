// Validation of API requests: required fields, enum values, sizes and encodings, and the launch
// plan. Every error is INVALID_ARGUMENT and starts with the field's path as the request spells
// it ("launch_plan.launches[0].grid: has 4 entries; 1 to 3 are allowed"), so a model or vendor
// can fix the request without reading server code. The launch plan is checked by the one
// definition the engine uses (common/launch_plan.h): the API refuses exactly what the engine
// would refuse from the plan alone, with the same field path. Whether a plan's values fit the
// task's workloads, the device or the compiled kernel is the engine's question (a PLAN_INVALID
// verdict), not the API's.
#ifndef PTXBENCH_SERVER_API_VALIDATE_H_
#define PTXBENCH_SERVER_API_VALIDATE_H_

#include <cstddef>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "common/json_fields.h"
#include "common/task.h"
#include "google/protobuf/descriptor.h"
#include "ptxbench/v1/admin.pb.h"
#include "ptxbench/v1/vendor.pb.h"
#include "ptxbench/v1/worker.pb.h"

namespace ptxbench::api {

// Size limits of request fields. The source limit is the contract of vendor.proto; the rest
// bound what one request may make the server store or log.
inline constexpr size_t kMaxSourceBytes = 1 << 20;      // 1 MiB.
inline constexpr size_t kMaxShortTextBytes = 256;       // ids, names, model, session.
inline constexpr size_t kMaxMessageBytes = 64 << 10;    // reasons, summaries.
inline constexpr size_t kMaxStoredJsonBytes = 4 << 20;  // detail/report JSON of a verdict.
// The launch plan's limits are common/launch_plan.h's (kMaxPlanLaunches, ...).

// RFC 3629 well-formedness, shared with the JSON reader (common/json_fields.h).
using ::ptxbench::FindInvalidUtf8;

// Why a serialized message failed to parse, when the reason is a string field that is not
// UTF-8 (protobuf refuses those in proto3 while parsing): INVALID_ARGUMENT naming the field
// by its path, e.g. "source: not valid UTF-8 (byte 27)" or
// "launch_plan.launches[0].grid[1]: ...". Any other malformation: INVALID_ARGUMENT "request:
// not a valid <message type>".
absl::Status DescribeParseFailure(const google::protobuf::Descriptor* descriptor,
                                  const std::string& bytes);

// Submit: the task exists and is defined for the arch; enums are known; sizes are within limits;
// the launch plan passes ValidateLaunchPlan.
absl::Status ValidateSubmitRequest(const v1::SubmitRequest& request, const TaskCatalog& catalog);

// The plan as the engine will read it: its canonical JSON (MessageToJson, the text the worker
// hands the engine) through ParseLaunchPlanJson, every error prefixed with `field`.
absl::Status ValidateLaunchPlan(const v1::LaunchPlan& plan, const std::string& field);

// GetTask: the task exists and is defined for the arch; the knowledge level is set.
absl::Status ValidateGetTaskRequest(const v1::GetTaskRequest& request, const TaskCatalog& catalog);

// A submission id is the UUID the server assigned ("8-4-4-4-12" hex).
absl::Status ValidateSubmissionId(const std::string& id, const std::string& field);
absl::Status ValidateListSubmissionsRequest(const v1::ListSubmissionsRequest& request);

absl::Status ValidateWorkerIdentity(const v1::WorkerIdentity& identity, const std::string& field);
absl::Status ValidateJobLease(const v1::JobLease& lease, const std::string& field);
absl::Status ValidateStageResult(const v1::StageResult& result, const std::string& field);
absl::Status ValidateVerdict(const v1::Verdict& verdict, const std::string& field);
// A compile job's artifact (worker.proto CompileArtifact): within proto/wire_limits.h's sizes,
// its bytes hashing to its SHA-256s, its versions named, the server's own fields empty.
absl::Status ValidateCompileArtifact(const v1::CompileArtifact& artifact, const std::string& field);
// An evaluate job's report on its artifact: a known outcome, a bounded detail.
absl::Status ValidateArtifactUse(const v1::ArtifactUse& use, const std::string& field);

// Tenant names are [a-z0-9_-]{1,64} (admin.proto).
absl::Status ValidateTenantName(const std::string& name, const std::string& field);
absl::Status ValidateTenant(const v1::Tenant& tenant, const std::string& field);

// A non-empty text of at most `max_bytes` bytes of valid UTF-8.
absl::Status ValidateRequiredText(const std::string& text, const std::string& field,
                                  size_t max_bytes);
// Like ValidateRequiredText, but empty is allowed.
absl::Status ValidateOptionalText(const std::string& text, const std::string& field,
                                  size_t max_bytes);

}  // namespace ptxbench::api

#endif  // PTXBENCH_SERVER_API_VALIDATE_H_
