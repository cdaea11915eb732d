// Shallow validation of API requests: required fields, enum values, sizes, encodings and the
// shape of a launch plan. Every error is INVALID_ARGUMENT and starts with the field's path as
// the request spells it ("launch_plan.launches[0].grid: 4 dimensions, at most 3"), so a model
// or vendor can fix the request without reading server code. Whether the plan's expressions
// parse or its kernel exists is the engine's question (a PLAN_INVALID verdict), not the API's.
#ifndef PTXBENCH_SERVER_API_VALIDATE_H_
#define PTXBENCH_SERVER_API_VALIDATE_H_

#include <cstddef>
#include <optional>
#include <string>

#include "absl/status/status.h"
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
inline constexpr int kMaxLaunches = 16;
inline constexpr int kMaxLaunchArgs = 64;
inline constexpr size_t kMaxExpressionBytes = 256;

// The byte offset of the first byte that is not part of well-formed UTF-8 (RFC 3629: no
// overlong forms, no surrogates, nothing above U+10FFFF), or nullopt when all of it is.
std::optional<size_t> FindInvalidUtf8(const std::string& text);

// Why a serialized message failed to parse, when the reason is a string field that is not
// UTF-8 (protobuf refuses those in proto3 while parsing): INVALID_ARGUMENT naming the field
// by its path, e.g. "source: not valid UTF-8 (byte 27)" or
// "launch_plan.launches[0].grid[1]: ...". Any other malformation: INVALID_ARGUMENT "request:
// not a valid <message type>".
absl::Status DescribeParseFailure(const google::protobuf::Descriptor* descriptor,
                                  const std::string& bytes);

// Submit: the task exists and is defined for the arch; enums are known; sizes and the plan's
// shape are within limits.
absl::Status ValidateSubmitRequest(const v1::SubmitRequest& request, const TaskCatalog& catalog);
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
