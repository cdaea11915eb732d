#include "server/api/convert.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "google/protobuf/util/json_util.h"
#include "google/protobuf/util/time_util.h"
#include "nlohmann/json.hpp"

namespace ptxbench::api {
google::protobuf::Timestamp ToTimestamp(absl::Time time) {
  google::protobuf::Timestamp timestamp;
  if (time == absl::InfinitePast() || time == absl::UnixEpoch()) return timestamp;
  const int64_t nanos = absl::ToUnixNanos(time);
  timestamp.set_seconds(nanos / 1000000000);
  timestamp.set_nanos(static_cast<int32_t>(nanos % 1000000000));
  if (timestamp.nanos() < 0) {
    timestamp.set_seconds(timestamp.seconds() - 1);
    timestamp.set_nanos(timestamp.nanos() + 1000000000);
  }
  return timestamp;
}

absl::Time FromTimestamp(const google::protobuf::Timestamp& timestamp) {
  return absl::FromUnixSeconds(timestamp.seconds()) + absl::Nanoseconds(timestamp.nanos());
}

absl::StatusOr<std::string> MessageToJson(const google::protobuf::Message& message) {
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  std::string json;
  auto status = google::protobuf::util::MessageToJsonString(message, &json, options);
  if (!status.ok()) {
    return absl::InternalError(
        absl::StrCat("encoding ", message.GetTypeName(), " as JSON: ", status.ToString()));
  }
  return json;
}

absl::Status MessageFromJson(const std::string& json, google::protobuf::Message* message) {
  google::protobuf::util::JsonParseOptions options;
  // Rows written by a newer server may carry fields this one does not know.
  options.ignore_unknown_fields = true;
  auto status = google::protobuf::util::JsonStringToMessage(json, message, options);
  if (!status.ok()) {
    return absl::DataLossError(
        absl::StrCat("decoding stored ", message->GetTypeName(), ": ", status.ToString()));
  }
  return absl::OkStatus();
}

absl::StatusOr<store::VerdictRow> VerdictToRow(const v1::Verdict& verdict) {
  if (VerdictClassName(verdict.verdict_class()).empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("verdict.verdict_class: required, got ", verdict.verdict_class()));
  }
  store::VerdictRow row;
  row.verdict_class = verdict.verdict_class();
  row.compiled = verdict.compiled();
  row.correct = verdict.correct();
  row.target_executed = verdict.target_executed();
  row.tic = verdict.tic();
  row.speedup = verdict.speedup();
  row.runtime_unverified = verdict.runtime_unverified();
  row.message = verdict.message();
  row.finished_at = verdict.has_finished_at() ? FromTimestamp(verdict.finished_at()) : absl::Now();
  v1::Verdict stored = verdict;
  *stored.mutable_finished_at() = ToTimestamp(row.finished_at);
  auto json = MessageToJson(stored);
  if (!json.ok()) return json.status();
  row.verdict_json = *std::move(json);
  return row;
}

absl::StatusOr<v1::Verdict> VerdictFromRow(const store::VerdictRow& row) {
  v1::Verdict verdict;
  if (!row.verdict_json.empty() && row.verdict_json != "{}" && row.verdict_json != "null") {
    auto status = MessageFromJson(row.verdict_json, &verdict);
    if (!status.ok()) return status;
  }
  // The key columns are what queries and reports read; they win over the JSON so that the
  // wire never disagrees with a paper's SQL.
  verdict.set_verdict_class(row.verdict_class);
  verdict.set_compiled(row.compiled);
  verdict.set_correct(row.correct);
  verdict.set_target_executed(row.target_executed);
  verdict.set_tic(row.tic);
  verdict.set_speedup(row.speedup);
  verdict.set_runtime_unverified(row.runtime_unverified);
  if (!row.message.empty()) verdict.set_message(row.message);
  if (!verdict.has_finished_at()) *verdict.mutable_finished_at() = ToTimestamp(row.finished_at);
  return verdict;
}

absl::StatusOr<v1::Submission> SubmissionFromRow(const store::SubmissionRow& row) {
  v1::Submission submission;
  submission.set_id(row.id);
  submission.set_task_id(row.task_id);
  submission.set_task_version_hash(row.task_version_hash);
  submission.set_arch(row.arch);
  submission.set_source_sha256(row.source_sha256);
  submission.set_model(row.model);
  submission.set_session_id(row.session_id);
  submission.set_turn_index(row.turn_index);
  submission.set_knowledge_level(row.knowledge_level);
  submission.set_scope(row.scope);
  submission.set_state(row.state);
  submission.set_stage(row.stage);
  *submission.mutable_created_at() = ToTimestamp(row.created_at);
  submission.set_tenant(row.tenant);
  if (row.verdict.has_value()) {
    auto verdict = VerdictFromRow(*row.verdict);
    if (!verdict.ok()) return verdict.status();
    *submission.mutable_verdict() = *std::move(verdict);
  }
  submission.set_judging_round(row.judging_round);
  if (row.hacked.has_value()) {
    submission.mutable_hacked()->set_reason(row.hacked->reason);
    submission.mutable_hacked()->set_by(row.hacked->by);
    *submission.mutable_hacked()->mutable_at() = ToTimestamp(row.hacked->at);
  }
  submission.set_superseded_verdicts(row.superseded_verdicts);
  return submission;
}

std::string NoticePayload(const std::string& notice) {
  return nlohmann::json{{"notice", notice}}.dump();
}

absl::StatusOr<v1::StageEvent> StageEventFromRow(const store::StageEventRow& row) {
  v1::StageEvent event;
  event.set_submission_id(row.submission_id);
  event.set_stage(row.stage);
  *event.mutable_at() = ToTimestamp(row.at);
  // Payload shapes are those of store.h's StageEventRow comment.
  if (row.kind == store::EventKind::kNotice) {
    const auto payload =
        nlohmann::json::parse(row.payload_json, nullptr, /*allow_exceptions=*/false);
    if (payload.is_object() && payload.contains("notice") && payload["notice"].is_string()) {
      event.set_notice(payload["notice"].get<std::string>());
    } else {
      event.set_notice(row.payload_json);
    }
    return event;
  }
  if (row.payload_json.empty() || row.payload_json == "{}" || row.stage == v1::STAGE_QUEUED) {
    return event;
  }
  if (row.stage == v1::STAGE_DONE) {
    RETURN_IF_ERROR(MessageFromJson(row.payload_json, event.mutable_verdict()));
  } else {
    RETURN_IF_ERROR(MessageFromJson(row.payload_json, event.mutable_result()));
  }
  return event;
}

v1::Worker WorkerFromRow(const store::WorkerRow& row) {
  v1::Worker worker;
  worker.set_worker_id(row.worker_id);
  auto* identity = worker.mutable_identity();
  if (!row.registration.identity_json.empty() &&
      !MessageFromJson(row.registration.identity_json, identity).ok()) {
    identity->Clear();
  }
  identity->set_hostname(row.registration.hostname);
  identity->set_arch(row.registration.arch);
  identity->set_gpu_name(row.registration.gpu_name);
  identity->set_gpu_uuid(row.registration.gpu_uuid);
  identity->set_compile_only(row.registration.compile_only);
  worker.set_state(row.state);
  worker.set_health_detail(row.health_detail);
  *worker.mutable_last_seen() = ToTimestamp(row.last_seen);
  worker.set_jobs_held(row.jobs_held);
  worker.set_token_id(row.registration.token_id);
  return worker;
}

v1::Tenant TenantFromRow(const store::TenantRow& row) {
  v1::Tenant tenant;
  tenant.set_name(row.name);
  tenant.set_submissions_per_minute(row.submissions_per_minute);
  tenant.set_max_queued(row.max_queued);
  *tenant.mutable_created_at() = ToTimestamp(row.created_at);
  return tenant;
}

v1::QueueDepth QueueDepthFromRow(const store::QueueDepthRow& row) {
  v1::QueueDepth depth;
  depth.set_arch(row.arch);
  depth.set_kind(row.kind);
  depth.set_queued(row.queued);
  depth.set_leased(row.leased);
  depth.set_oldest_age_seconds(row.oldest_age_seconds);
  return depth;
}

v1::LeasedJob LeasedJobFromRow(const store::LeasedJobRow& row, int lease_seconds) {
  v1::LeasedJob job;
  job.set_job_id(row.lease.job_id);
  job.set_attempt(row.lease.attempt);
  job.set_kind(row.kind);
  job.set_submission_id(row.submission_id);
  job.set_task_id(row.task_id);
  job.set_task_version_hash(row.task_version_hash);
  job.set_arch(row.arch);
  job.set_language(row.language);
  job.set_source(row.source);
  if (!row.launch_plan_json.empty() &&
      !MessageFromJson(row.launch_plan_json, job.mutable_launch_plan()).ok()) {
    // Validated at Submit, so this cannot happen short of a damaged row; the engine then
    // reports the plan block of the source as missing, which names the problem.
    job.clear_launch_plan();
  }
  job.set_lease_seconds(lease_seconds);
  if (row.artifact.has_value()) {
    const store::CompileArtifactRow& a = *row.artifact;
    v1::CompileArtifact* artifact = job.mutable_artifact();
    artifact->set_cubin(a.cubin);
    artifact->set_ptx(a.ptx);
    artifact->set_cubin_sha256(a.cubin_sha256);
    artifact->set_ptx_sha256(a.ptx_sha256);
    artifact->set_compile_event_json(a.compile_event_json);
    artifact->set_nvrtc_version(a.nvrtc_version);
    artifact->set_ptxas_version(a.ptxas_version);
    artifact->set_harness_version(a.harness_version);
    artifact->set_producer_job_id(a.producer_job_id);
    artifact->set_producer_worker_id(a.producer_worker_id);
  }
  return job;
}

store::CompileArtifactRow CompileArtifactToRow(const v1::CompileArtifact& artifact) {
  store::CompileArtifactRow row;
  row.cubin = artifact.cubin();
  row.ptx = artifact.ptx();
  row.cubin_sha256 = artifact.cubin_sha256();
  row.ptx_sha256 = artifact.ptx_sha256();
  row.compile_event_json = artifact.compile_event_json();
  row.nvrtc_version = artifact.nvrtc_version();
  row.ptxas_version = artifact.ptxas_version();
  row.harness_version = artifact.harness_version();
  return row;
}

store::LeaseRef LeaseRefFromProto(const v1::JobLease& lease) {
  return store::LeaseRef{lease.job_id(), lease.worker_id(), lease.attempt()};
}

v1::JobLease LeaseRefToProto(const store::LeaseRef& lease) {
  v1::JobLease proto;
  proto.set_job_id(lease.job_id);
  proto.set_worker_id(lease.worker_id);
  proto.set_attempt(lease.attempt);
  return proto;
}

}  // namespace ptxbench::api
