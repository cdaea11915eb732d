#include "server/api/validate.h"

#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/launch_plan.h"
#include "common/sha256.h"
#include "common/status.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/wire_format_lite.h"
#include "proto/wire_limits.h"
#include "server/api/convert.h"

namespace ptxbench::api {
namespace {

absl::Status Invalid(const std::string& field, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat(field, ": ", what));
}

std::string Indexed(const std::string& field, int index) {
  return absl::StrCat(field, "[", index, "]");
}

absl::Status ValidateTaskAndArch(const std::string& task_id, v1::Arch arch,
                                 const TaskCatalog& catalog, const Task** task_out) {
  RETURN_IF_ERROR(ValidateRequiredText(task_id, "task_id", kMaxShortTextBytes));
  const Task* task = catalog.Find(task_id);
  if (task == nullptr) return Invalid("task_id", absl::StrCat("unknown task '", task_id, "'"));
  if (arch == v1::ARCH_UNSPECIFIED) return Invalid("arch", "required (sm_90a or sm_100a)");
  const std::string arch_name = ArchName(arch);
  if (arch_name.empty()) return Invalid("arch", absl::StrCat("unknown value ", arch));
  if (task->FindArch(arch_name) == nullptr) {
    return Invalid("arch", absl::StrCat("task '", task_id, "' is not defined for ", arch_name));
  }
  if (task_out != nullptr) *task_out = task;
  return absl::OkStatus();
}

bool IsHex(char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

// Walks one serialized message's fields; returns the path of the first string field that is
// not UTF-8 (with the offset inside it), or nullopt.
std::optional<std::pair<std::string, size_t>> FindInvalidUtf8Field(
    const google::protobuf::Descriptor* descriptor, const std::string& bytes,
    const std::string& prefix, int depth) {
  using google::protobuf::FieldDescriptor;
  using google::protobuf::internal::WireFormatLite;
  if (depth > 32) return std::nullopt;
  google::protobuf::io::CodedInputStream input(reinterpret_cast<const uint8_t*>(bytes.data()),
                                               static_cast<int>(bytes.size()));
  std::map<int, int> seen;  // Occurrences per field number: the index of repeated fields.
  while (uint32_t tag = input.ReadTag()) {
    const int number = WireFormatLite::GetTagFieldNumber(tag);
    const FieldDescriptor* field = descriptor->FindFieldByNumber(number);
    if (field == nullptr ||
        WireFormatLite::GetTagWireType(tag) != WireFormatLite::WIRETYPE_LENGTH_DELIMITED) {
      if (!WireFormatLite::SkipField(&input, tag)) return std::nullopt;
      continue;
    }
    uint32_t length = 0;
    std::string value;
    if (!input.ReadVarint32(&length) || !input.ReadString(&value, static_cast<int>(length))) {
      return std::nullopt;
    }
    std::string path = prefix.empty() ? field->name() : absl::StrCat(prefix, ".", field->name());
    const int index = seen[number]++;
    if (field->is_repeated()) path = absl::StrCat(path, "[", index, "]");
    if (field->type() == FieldDescriptor::TYPE_STRING) {
      if (auto offset = FindInvalidUtf8(value)) return std::make_pair(path, *offset);
    } else if (field->type() == FieldDescriptor::TYPE_MESSAGE) {
      if (auto found = FindInvalidUtf8Field(field->message_type(), value, path, depth + 1)) {
        return found;
      }
    }
  }
  return std::nullopt;
}

}  // namespace

absl::Status DescribeParseFailure(const google::protobuf::Descriptor* descriptor,
                                  const std::string& bytes) {
  if (auto found = FindInvalidUtf8Field(descriptor, bytes, "", 0)) {
    return Invalid(found->first, absl::StrCat("not valid UTF-8 (byte ", found->second, ")"));
  }
  return Invalid("request", absl::StrCat("not a valid ", descriptor->full_name()));
}

absl::Status ValidateOptionalText(const std::string& text, const std::string& field,
                                  size_t max_bytes) {
  if (text.size() > max_bytes) {
    return Invalid(field, absl::StrCat(text.size(), " bytes exceeds the limit of ", max_bytes));
  }
  if (auto offset = FindInvalidUtf8(text)) {
    return Invalid(field, absl::StrCat("not valid UTF-8 (byte ", *offset, ")"));
  }
  return absl::OkStatus();
}

absl::Status ValidateRequiredText(const std::string& text, const std::string& field,
                                  size_t max_bytes) {
  if (text.empty()) return Invalid(field, "required");
  return ValidateOptionalText(text, field, max_bytes);
}

absl::Status ValidateLaunchPlan(const v1::LaunchPlan& plan, const std::string& field) {
  // The same text the worker gives the engine: protobuf's JSON with the proto field names
  // (convert.cc MessageToJson; worker/daemon/worker.cc prints the leased plan alike).
  absl::StatusOr<std::string> json = MessageToJson(plan);
  if (!json.ok()) return Invalid(field, std::string(json.status().message()));
  PlanOr<LaunchPlan> parsed = ParseLaunchPlanJson(*json);
  if (!parsed.ok()) {
    const PlanError& error = parsed.error();
    return Invalid(error.field.empty() ? field : absl::StrCat(field, ".", error.field),
                   error.message);
  }
  return absl::OkStatus();
}

absl::Status ValidateSubmitRequest(const v1::SubmitRequest& request, const TaskCatalog& catalog) {
  RETURN_IF_ERROR(ValidateTaskAndArch(request.task_id(), request.arch(), catalog, nullptr));
  if (!v1::SourceLanguage_IsValid(request.language())) {
    return Invalid("language", absl::StrCat("unknown value ", request.language()));
  }
  if (request.source().empty()) return Invalid("source", "required");
  if (request.source().size() > kMaxSourceBytes) {
    return Invalid("source",
                   absl::StrCat(request.source().size(), " bytes exceeds the 1 MiB limit"));
  }
  if (auto offset = FindInvalidUtf8(request.source())) {
    return Invalid("source", absl::StrCat("not valid UTF-8 (byte ", *offset, ")"));
  }
  if (request.has_launch_plan()) {
    RETURN_IF_ERROR(ValidateLaunchPlan(request.launch_plan(), "launch_plan"));
  }
  RETURN_IF_ERROR(ValidateOptionalText(request.model(), "model", kMaxShortTextBytes));
  RETURN_IF_ERROR(ValidateOptionalText(request.session_id(), "session_id", kMaxShortTextBytes));
  if (request.turn_index() < 0) {
    return Invalid("turn_index", absl::StrCat("must be >= 0, got ", request.turn_index()));
  }
  if (request.knowledge_level() == v1::KNOWLEDGE_LEVEL_UNSPECIFIED) {
    return Invalid("knowledge_level", "required (none, templates or contract)");
  }
  if (!v1::KnowledgeLevel_IsValid(request.knowledge_level())) {
    return Invalid("knowledge_level", absl::StrCat("unknown value ", request.knowledge_level()));
  }
  if (!v1::EvaluationScope_IsValid(request.scope())) {
    return Invalid("scope", absl::StrCat("unknown value ", request.scope()));
  }
  RETURN_IF_ERROR(
      ValidateOptionalText(request.idempotency_key(), "idempotency_key", kMaxShortTextBytes));
  return absl::OkStatus();
}

absl::Status ValidateGetTaskRequest(const v1::GetTaskRequest& request, const TaskCatalog& catalog) {
  RETURN_IF_ERROR(ValidateTaskAndArch(request.task_id(), request.arch(), catalog, nullptr));
  if (request.knowledge_level() == v1::KNOWLEDGE_LEVEL_UNSPECIFIED) {
    return Invalid("knowledge_level", "required (none, templates or contract)");
  }
  if (KnowledgeLevelName(request.knowledge_level()).empty()) {
    return Invalid("knowledge_level", absl::StrCat("unknown value ", request.knowledge_level()));
  }
  return absl::OkStatus();
}

absl::Status ValidateSubmissionId(const std::string& id, const std::string& field) {
  if (id.empty()) return Invalid(field, "required");
  // The store's column is a UUID; checking here turns a PostgreSQL cast error into a clear
  // message and keeps arbitrary text out of SQL parameters and logs.
  static constexpr int kGroups[] = {8, 4, 4, 4, 12};
  size_t pos = 0;
  bool ok = id.size() == 36;
  for (int g = 0; ok && g < 5; ++g) {
    for (int k = 0; k < kGroups[g]; ++k, ++pos) ok = ok && IsHex(id[pos]);
    if (g < 4) ok = ok && id[pos++] == '-';
  }
  if (!ok)
    return Invalid(field, absl::StrCat("'", id.substr(0, 64), "' is not a submission id (a UUID)"));
  return absl::OkStatus();
}

absl::Status ValidateListSubmissionsRequest(const v1::ListSubmissionsRequest& request) {
  RETURN_IF_ERROR(ValidateOptionalText(request.session_id(), "session_id", kMaxShortTextBytes));
  RETURN_IF_ERROR(ValidateOptionalText(request.task_id(), "task_id", kMaxShortTextBytes));
  if (request.page_size() < 0 || request.page_size() > 500) {
    return Invalid("page_size", absl::StrCat("must be 0 to 500, got ", request.page_size()));
  }
  return ValidateOptionalText(request.page_token(), "page_token", kMaxShortTextBytes);
}

absl::Status ValidateWorkerIdentity(const v1::WorkerIdentity& identity, const std::string& field) {
  RETURN_IF_ERROR(
      ValidateRequiredText(identity.hostname(), field + ".hostname", kMaxShortTextBytes));
  if (!v1::Arch_IsValid(identity.arch())) {
    return Invalid(field + ".arch", absl::StrCat("unknown value ", identity.arch()));
  }
  if (!identity.compile_only()) {
    if (identity.arch() == v1::ARCH_UNSPECIFIED) {
      return Invalid(field + ".arch", "required unless compile_only is set");
    }
    RETURN_IF_ERROR(
        ValidateRequiredText(identity.gpu_uuid(), field + ".gpu_uuid", kMaxShortTextBytes));
  }
  for (const auto& [value, name] : {std::pair{&identity.gpu_name(), "gpu_name"},
                                    {&identity.gpu_uuid(), "gpu_uuid"},
                                    {&identity.driver_version(), "driver_version"},
                                    {&identity.cuda_version(), "cuda_version"},
                                    {&identity.cublas_version(), "cublas_version"},
                                    {&identity.cudnn_version(), "cudnn_version"},
                                    {&identity.harness_version(), "harness_version"}}) {
    RETURN_IF_ERROR(
        ValidateOptionalText(*value, absl::StrCat(field, ".", name), kMaxShortTextBytes));
  }
  return absl::OkStatus();
}

absl::Status ValidateJobLease(const v1::JobLease& lease, const std::string& field) {
  RETURN_IF_ERROR(ValidateRequiredText(lease.job_id(), field + ".job_id", kMaxShortTextBytes));
  RETURN_IF_ERROR(
      ValidateRequiredText(lease.worker_id(), field + ".worker_id", kMaxShortTextBytes));
  if (lease.attempt() < 0) {
    return Invalid(field + ".attempt", absl::StrCat("must be >= 0, got ", lease.attempt()));
  }
  return absl::OkStatus();
}

absl::Status ValidateStageResult(const v1::StageResult& result, const std::string& field) {
  if (result.stage() == v1::STAGE_UNSPECIFIED || result.stage() == v1::STAGE_QUEUED ||
      result.stage() == v1::STAGE_DONE || !v1::Stage_IsValid(result.stage())) {
    return Invalid(field + ".stage",
                   absl::StrCat("must be compile, correctness, target_instructions or timing, got ",
                                result.stage()));
  }
  RETURN_IF_ERROR(ValidateOptionalText(result.summary(), field + ".summary", kMaxMessageBytes));
  RETURN_IF_ERROR(
      ValidateOptionalText(result.detail_json(), field + ".detail_json", kMaxStoredJsonBytes));
  return absl::OkStatus();
}

absl::Status ValidateVerdict(const v1::Verdict& verdict, const std::string& field) {
  if (verdict.verdict_class() == v1::VERDICT_CLASS_UNSPECIFIED ||
      !v1::VerdictClass_IsValid(verdict.verdict_class())) {
    return Invalid(field + ".verdict_class",
                   absl::StrCat("required, got ", verdict.verdict_class()));
  }
  if (verdict.verdict_class() == v1::VERDICT_CLASS_CANCELLED) {
    return Invalid(field + ".verdict_class", "cancelled is set by the server, not a worker");
  }
  if (verdict.verdict_class() == v1::VERDICT_CLASS_INFRASTRUCTURE_FAILURE) {
    return Invalid(field + ".verdict_class",
                   "infrastructure_failure is reported with Fail(kind=INFRASTRUCTURE)");
  }
  RETURN_IF_ERROR(ValidateOptionalText(verdict.message(), field + ".message", kMaxMessageBytes));
  RETURN_IF_ERROR(
      ValidateOptionalText(verdict.report_json(), field + ".report_json", kMaxStoredJsonBytes));
  for (int i = 0; i < verdict.stages_size(); ++i) {
    RETURN_IF_ERROR(ValidateStageResult(verdict.stages(i), Indexed(field + ".stages", i)));
  }
  return absl::OkStatus();
}

absl::Status ValidateCompileArtifact(const v1::CompileArtifact& artifact,
                                     const std::string& field) {
  const size_t module_bytes = artifact.cubin().size() + artifact.ptx().size();
  if (module_bytes > wire::kMaxArtifactModuleBytes) {
    return Invalid(field, absl::StrCat("cubin and ptx are ", module_bytes,
                                       " bytes together, at most ", wire::kMaxArtifactModuleBytes));
  }
  if (artifact.cubin().empty()) return Invalid(field + ".cubin", "required");
  if (artifact.ptx().empty()) return Invalid(field + ".ptx", "required");
  RETURN_IF_ERROR(ValidateRequiredText(artifact.compile_event_json(), field + ".compile_event_json",
                                       wire::kMaxArtifactEventBytes));
  // The server keeps only bytes that are what they claim to be; the GPU worker checks again
  // before it uses them (the database is not trusted more than the wire).
  if (Sha256Hex(artifact.cubin()) != artifact.cubin_sha256()) {
    return Invalid(
        field + ".cubin_sha256",
        absl::StrCat("'", artifact.cubin_sha256().substr(0, 64), "' is not the sha256 of cubin (",
                     artifact.cubin().size(), " bytes; 64 lower-case hex digits expected)"));
  }
  if (Sha256Hex(artifact.ptx()) != artifact.ptx_sha256()) {
    return Invalid(
        field + ".ptx_sha256",
        absl::StrCat("'", artifact.ptx_sha256().substr(0, 64), "' is not the sha256 of ptx (",
                     artifact.ptx().size(), " bytes; 64 lower-case hex digits expected)"));
  }
  RETURN_IF_ERROR(
      ValidateRequiredText(artifact.nvrtc_version(), field + ".nvrtc_version", kMaxShortTextBytes));
  RETURN_IF_ERROR(
      ValidateRequiredText(artifact.ptxas_version(), field + ".ptxas_version", kMaxShortTextBytes));
  RETURN_IF_ERROR(ValidateRequiredText(artifact.harness_version(), field + ".harness_version",
                                       kMaxShortTextBytes));
  if (!artifact.producer_job_id().empty()) {
    return Invalid(field + ".producer_job_id", "set by the server; must be empty");
  }
  if (!artifact.producer_worker_id().empty()) {
    return Invalid(field + ".producer_worker_id", "set by the server; must be empty");
  }
  return absl::OkStatus();
}

absl::Status ValidateArtifactUse(const v1::ArtifactUse& use, const std::string& field) {
  if (use.outcome() == v1::ARTIFACT_OUTCOME_UNSPECIFIED ||
      !v1::ArtifactOutcome_IsValid(use.outcome())) {
    return Invalid(field + ".outcome", absl::StrCat("required, got ", use.outcome()));
  }
  return ValidateOptionalText(use.detail(), field + ".detail", kMaxMessageBytes);
}

absl::Status ValidateTenantName(const std::string& name, const std::string& field) {
  if (name.empty()) return Invalid(field, "required");
  if (name.size() > 64) return Invalid(field, absl::StrCat(name.size(), " bytes, at most 64"));
  for (char c : name) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-')) {
      return Invalid(field, absl::StrCat("'", name, "' must match [a-z0-9_-]{1,64}"));
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateTenant(const v1::Tenant& tenant, const std::string& field) {
  RETURN_IF_ERROR(ValidateTenantName(tenant.name(), field + ".name"));
  if (tenant.submissions_per_minute() < 0) {
    return Invalid(field + ".submissions_per_minute",
                   absl::StrCat("must be >= 0, got ", tenant.submissions_per_minute()));
  }
  if (tenant.max_queued() < 0) {
    return Invalid(field + ".max_queued", absl::StrCat("must be >= 0, got ", tenant.max_queued()));
  }
  return absl::OkStatus();
}

}  // namespace ptxbench::api
