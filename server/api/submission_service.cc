// SubmissionService: tasks, submissions and their stage events, for vendors (and admins).
#include <grpcpp/grpcpp.h>

#include <optional>
#include <set>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "ptxbench/v1/vendor.grpc.pb.h"
#include "server/api/convert.h"
#include "server/api/log_text.h"
#include "server/api/request_check.h"
#include "server/api/rpc.h"
#include "server/api/services.h"
#include "server/api/validate.h"
#include "spdlog/spdlog.h"

namespace ptxbench::api {
namespace {

v1::TaskSummary SummaryOf(const Task& task) {
  v1::TaskSummary summary;
  summary.set_id(task.id);
  summary.set_version_hash(task.version_hash);
  summary.set_title(task.title);
  std::set<std::string> families;
  for (const auto& [arch_name, arch] : task.arches) {
    auto parsed = ParseArch(arch_name);
    if (parsed.ok()) {
      summary.add_arches(*parsed);
      v1::ArchTargets* targets = summary.add_arch_targets();
      targets->set_arch(*parsed);
      for (const auto& family : arch.target_families) targets->add_target_families(family);
    }
    families.insert(arch.target_families.begin(), arch.target_families.end());
  }
  for (const auto& family : families) summary.add_target_families(family);
  return summary;
}

// The kind of job a submission waits for: its first job is always a compile job; a full-scope
// submission that got past the queued stage waits for (or runs) its evaluate job.
v1::JobKind PendingJobKind(const store::SubmissionRow& row) {
  return row.scope == v1::EVALUATION_SCOPE_FULL && row.stage != v1::STAGE_QUEUED
             ? v1::JOB_KIND_EVALUATE
             : v1::JOB_KIND_COMPILE;
}

bool IsTerminal(v1::SubmissionState state) {
  return state == v1::SUBMISSION_STATE_FINISHED || state == v1::SUBMISSION_STATE_CANCELLED;
}

// The database connection broke while the submission's COMMIT was in flight (the chaos test
// kills the postmaster under load and met it: "connection lost during COMMIT"), so the row
// may or may not exist. With an idempotency key the same request sent again is exactly
// right either way (it returns the stored submission, or stores it now), so the answer is
// UNAVAILABLE, which every client retries; without one only the caller can look, so it is
// UNKNOWN and says how. The detail goes to the log; the caller's message names no database.
absl::Status SubmitOutcomeUnknown(const absl::Status& status, const store::NewSubmission& request) {
  spdlog::warn("submit outcome unknown tenant={} idempotency_key={} message={}", request.tenant,
               LogQuoted(request.idempotency_key), LogQuoted(std::string(status.message()), 2048));
  if (!request.idempotency_key.empty()) {
    return PublicStatus(absl::UnavailableError(
        "the database connection was lost while this submission was being committed, so it "
        "may or may not be stored; send the same request again with the same idempotency_key: "
        "a stored submission is returned, not duplicated"));
  }
  return PublicStatus(absl::UnknownError(
      "the database connection was lost while this submission was being committed, so it may "
      "or may not be stored; ListSubmissions shows whether it was (set idempotency_key to make "
      "a retry safe)"));
}

// Every unary method is served by rpc.h's ServeStreamedUnary (admission, then the token,
// then the request's bytes: bounded, text-checked, parsed here so that a field that is not
// UTF-8 is named). WatchSubmission stays a synchronous stream.
class SubmissionServiceImpl final : public GuardedService<v1::SubmissionService> {
 public:
  explicit SubmissionServiceImpl(ApiContext* ctx) : GuardedService(ctx) {
    ServeUnary<v1::ListTasksRequest, v1::ListTasksResponse>(
        "ListTasks", kMaxSmallRequestBytes,
        [this](RpcScope& rpc, const v1::ListTasksRequest&, v1::ListTasksResponse* out) {
          return DoListTasks(rpc, out);
        });
    ServeUnary<v1::GetTaskRequest, v1::GetTaskResponse>(
        "GetTask", kMaxSmallRequestBytes,
        [this](RpcScope& rpc, const v1::GetTaskRequest& in, v1::GetTaskResponse* out) {
          return DoGetTask(rpc, in, out);
        });
    ServeUnary<v1::SubmitRequest, v1::SubmitResponse>(
        "Submit", kMaxSubmitRequestBytes,
        [this](RpcScope& rpc, const v1::SubmitRequest& in, v1::SubmitResponse* out) {
          if (ctx_->event_changes->shutting_down()) {
            // Retryable: nothing was stored (server.cc's GracefulStop drains these first).
            return absl::UnavailableError(
                "server shutting down: nothing was stored; submit again (with the same "
                "idempotency key) after the restart or to another replica");
          }
          return DoSubmit(rpc, in, out);
        });
    ServeUnary<v1::GetSubmissionRequest, v1::Submission>(
        "GetSubmission", kMaxSmallRequestBytes,
        [this](RpcScope& rpc, const v1::GetSubmissionRequest& in, v1::Submission* out) {
          return DoGetSubmission(rpc, in, out);
        });
    ServeUnary<v1::ListSubmissionsRequest, v1::ListSubmissionsResponse>(
        "ListSubmissions", kMaxSmallRequestBytes,
        [this](RpcScope& rpc, const v1::ListSubmissionsRequest& in,
               v1::ListSubmissionsResponse* out) { return DoListSubmissions(rpc, in, out); });
    ServeUnary<v1::CancelSubmissionRequest, v1::Submission>(
        "CancelSubmission", kMaxSmallRequestBytes,
        [this](RpcScope& rpc, const v1::CancelSubmissionRequest& in, v1::Submission* out) {
          return DoCancel(rpc, in, out);
        });
  }

  grpc::Status WatchSubmission(grpc::ServerContext* context,
                               const v1::WatchSubmissionRequest* request,
                               grpc::ServerWriter<v1::StageEvent>* writer) override {
    RpcScope rpc(ctx_, "WatchSubmission", context);
    return rpc.Finish(DoWatch(rpc, context, *request, writer));
  }

 private:
  absl::Status DoListTasks(RpcScope& rpc, v1::ListTasksResponse* response) {
    ASSIGN_OR_RETURN(Caller caller, rpc.Authenticate({Role::kVendor}));
    for (const Task& task : ctx_->catalog->tasks()) *response->add_tasks() = SummaryOf(task);
    return absl::OkStatus();
  }

  absl::Status DoGetTask(RpcScope& rpc, const v1::GetTaskRequest& request,
                         v1::GetTaskResponse* response) {
    ASSIGN_OR_RETURN(Caller caller, rpc.Authenticate({Role::kVendor}));
    RETURN_IF_ERROR(ValidateGetTaskRequest(request, *ctx_->catalog));
    const Task& task = *ctx_->catalog->Find(request.task_id());
    const std::string arch = ArchName(request.arch());
    const std::string level = KnowledgeLevelName(request.knowledge_level());
    *response->mutable_task() = SummaryOf(task);
    ASSIGN_OR_RETURN(std::string prompt, RenderPrompt(task, arch, level));
    response->set_prompt(std::move(prompt));
    response->set_definition_json(task.definition.dump(2));
    if (request.knowledge_level() != v1::KNOWLEDGE_LEVEL_NONE) {
      ASSIGN_OR_RETURN(auto headers, TemplateHeaders(task, arch));
      for (auto& [name, content] : headers) {
        auto* header = response->add_templates();
        header->set_name(name);
        header->set_content(std::move(content));
      }
    }
    return absl::OkStatus();
  }

  absl::Status DoSubmit(RpcScope& rpc, const v1::SubmitRequest& request,
                        v1::SubmitResponse* response) {
    ASSIGN_OR_RETURN(Caller caller, rpc.Authenticate({Role::kVendor}));
    RETURN_IF_ERROR(ValidateSubmitRequest(request, *ctx_->catalog));
    const Task& task = *ctx_->catalog->Find(request.task_id());

    store::NewSubmission submission;
    submission.tenant = caller.tenant;
    submission.task_id = task.id;
    submission.task_version_hash = task.version_hash;
    submission.arch = request.arch();
    submission.language = request.language();
    submission.source = request.source();
    if (request.has_launch_plan()) {
      ASSIGN_OR_RETURN(submission.launch_plan_json, MessageToJson(request.launch_plan()));
    }
    submission.model = request.model();
    submission.session_id = request.session_id();
    submission.turn_index = request.turn_index();
    submission.knowledge_level = request.knowledge_level();
    submission.scope = request.scope();
    submission.idempotency_key = request.idempotency_key();

    // CreateSubmission returns only after the transaction committed: OK means durable.
    absl::StatusOr<store::SubmissionRow> created = ctx_->limits->Admit(
        caller.tenant, [&] { return ctx_->store->CreateSubmission(submission); });
    if (store::IsCommitOutcomeUnknown(created.status())) {
      return SubmitOutcomeUnknown(created.status(), submission);
    }
    ASSIGN_OR_RETURN(store::SubmissionRow row, std::move(created));
    ctx_->leases->JobsAvailable(ArchName(row.arch));
    ctx_->event_changes->Notify();
    ctx_->metrics->RecordSubmission(row.tenant, row.model, row.task_id, ArchName(row.arch));
    spdlog::info(
        "submission accepted submission_id={} tenant={} task={} arch={} model={} session_id={} "
        "turn={}",
        row.id, row.tenant, row.task_id, ArchName(row.arch), LogQuoted(row.model),
        LogQuoted(row.session_id), row.turn_index);
    ASSIGN_OR_RETURN(*response->mutable_submission(), SubmissionFromRow(row));
    return absl::OkStatus();
  }

  absl::Status DoGetSubmission(RpcScope& rpc, const v1::GetSubmissionRequest& request,
                               v1::Submission* response) {
    ASSIGN_OR_RETURN(Caller caller, rpc.Authenticate({Role::kVendor}));
    RETURN_IF_ERROR(ValidateSubmissionId(request.submission_id(), "submission_id"));
    ASSIGN_OR_RETURN(store::SubmissionRow row,
                     ctx_->store->GetSubmission(request.submission_id(), caller.VisibleTenant()));
    ASSIGN_OR_RETURN(*response, SubmissionFromRow(row));
    return absl::OkStatus();
  }

  absl::Status DoListSubmissions(RpcScope& rpc, const v1::ListSubmissionsRequest& request,
                                 v1::ListSubmissionsResponse* response) {
    ASSIGN_OR_RETURN(Caller caller, rpc.Authenticate({Role::kVendor}));
    RETURN_IF_ERROR(ValidateListSubmissionsRequest(request));
    store::SubmissionFilter filter;
    filter.tenant = caller.tenant;  // Even an admin lists only its own tenant here.
    filter.session_id = request.session_id();
    filter.task_id = request.task_id();
    filter.page_size = request.page_size() == 0 ? 50 : request.page_size();
    if (ctx_->page_tokens != nullptr) {
      ASSIGN_OR_RETURN(filter.page_token,
                       ctx_->page_tokens->Open(caller.tenant, request.page_token()));
    } else {
      filter.page_token = request.page_token();
    }
    ASSIGN_OR_RETURN(store::SubmissionPage page, ctx_->store->ListSubmissions(filter));
    for (const auto& row : page.submissions) {
      ASSIGN_OR_RETURN(*response->add_submissions(), SubmissionFromRow(row));
    }
    response->set_next_page_token(ctx_->page_tokens != nullptr
                                      ? ctx_->page_tokens->Seal(caller.tenant, page.next_page_token)
                                      : page.next_page_token);
    return absl::OkStatus();
  }

  absl::Status DoCancel(RpcScope& rpc, const v1::CancelSubmissionRequest& request,
                        v1::Submission* response) {
    ASSIGN_OR_RETURN(Caller caller, rpc.Authenticate({Role::kVendor}));
    RETURN_IF_ERROR(ValidateSubmissionId(request.submission_id(), "submission_id"));
    ASSIGN_OR_RETURN(store::SubmissionRow before,
                     ctx_->store->GetSubmission(request.submission_id(), caller.VisibleTenant()));
    ASSIGN_OR_RETURN(store::SubmissionRow row,
                     ctx_->store->CancelSubmission(request.submission_id(), caller.VisibleTenant(),
                                                   caller.Actor()));
    ctx_->event_changes->Notify();
    if (before.state != v1::SUBMISSION_STATE_CANCELLED &&
        row.state == v1::SUBMISSION_STATE_CANCELLED) {
      ctx_->metrics->RecordVerdict(row.tenant, row.model, row.task_id, ArchName(row.arch),
                                   VerdictClassName(v1::VERDICT_CLASS_CANCELLED));
      spdlog::info("submission cancelled submission_id={} tenant={} by_token={}", row.id,
                   row.tenant, caller.token_id);
    }
    ASSIGN_OR_RETURN(*response, SubmissionFromRow(row));
    return absl::OkStatus();
  }

  // Appends "no registered worker for <arch>; waiting" when nothing could ever lease the job
  // the submission waits for, so a watcher learns why nothing happens instead of hanging.
  absl::Status NoticeIfNoWorker(const store::SubmissionRow& row) {
    if (IsTerminal(row.state)) return absl::OkStatus();
    const v1::JobKind kind = PendingJobKind(row);
    ASSIGN_OR_RETURN(int64_t capable,
                     ctx_->store->CountCapableWorkers(row.arch, kind,
                                                      absl::Seconds(ctx_->options.lease_seconds)));
    if (capable > 0) return absl::OkStatus();
    const std::string notice =
        kind == v1::JOB_KIND_COMPILE
            ? absl::StrCat("no registered worker for ", ArchName(row.arch), "; waiting")
            : absl::StrCat("no registered worker for ", ArchName(row.arch), " evaluation; waiting");
    RETURN_IF_ERROR(ctx_->store->AppendNotice(row.id, NoticePayload(notice)));
    return absl::OkStatus();
  }

  absl::Status DoWatch(RpcScope& rpc, grpc::ServerContext* context,
                       const v1::WatchSubmissionRequest& request,
                       grpc::ServerWriter<v1::StageEvent>* writer) {
    if (ctx_->store_health != nullptr && !ctx_->store_health->reachable()) {
      return StoreUnavailable();
    }
    ASSIGN_OR_RETURN(Caller caller, rpc.Authenticate({Role::kVendor}));
    RETURN_IF_ERROR(CheckRequestText(request));
    RETURN_IF_ERROR(ValidateSubmissionId(request.submission_id(), "submission_id"));
    std::optional<StreamSlots::Slot> slot;
    if (ctx_->watch_slots != nullptr) {
      ASSIGN_OR_RETURN(StreamSlots::Slot acquired, ctx_->watch_slots->Acquire(caller.tenant));
      slot.emplace(std::move(acquired));
    }
    const std::string& id = request.submission_id();
    const std::string tenant = caller.VisibleTenant();
    ASSIGN_OR_RETURN(store::SubmissionRow row, ctx_->store->GetSubmission(id, tenant));
    int64_t after_seq = 0;
    absl::Time next_row_check = absl::InfinitePast();
    while (true) {
      const uint64_t seen = ctx_->event_changes->generation();
      ASSIGN_OR_RETURN(auto events, ctx_->store->ListStageEvents(id, after_seq));
      for (const auto& event_row : events) {
        ASSIGN_OR_RETURN(v1::StageEvent event, StageEventFromRow(event_row));
        after_seq = event_row.seq;
        if (!writer->Write(event)) return absl::CancelledError("watcher went away");
        if (event.stage() == v1::STAGE_DONE) return absl::OkStatus();
      }
      // The store appends a DONE event for every way a submission ends (verdict, failure,
      // cancellation), so the row itself is read only now and then: to see whether a worker
      // exists for it, and as a safety net should the DONE event be missing.
      if (absl::Now() >= next_row_check) {
        next_row_check = absl::Now() + ctx_->options.worker_check_interval;
        ASSIGN_OR_RETURN(row, ctx_->store->GetSubmission(id, tenant));
        if (IsTerminal(row.state)) {
          // The row may have turned terminal after the events were read: read them once more.
          ASSIGN_OR_RETURN(auto late, ctx_->store->ListStageEvents(id, after_seq));
          for (const auto& event_row : late) {
            ASSIGN_OR_RETURN(v1::StageEvent event, StageEventFromRow(event_row));
            after_seq = event_row.seq;
            if (!writer->Write(event)) return absl::CancelledError("watcher went away");
            if (event.stage() == v1::STAGE_DONE) return absl::OkStatus();
          }
          spdlog::warn("watch: submission {} is {} without a done event", id,
                       SubmissionStateName(row.state));
          v1::StageEvent done;
          done.set_submission_id(id);
          done.set_stage(v1::STAGE_DONE);
          *done.mutable_at() = ToTimestamp(absl::Now());
          if (row.verdict.has_value()) {
            ASSIGN_OR_RETURN(*done.mutable_verdict(), VerdictFromRow(*row.verdict));
          } else {
            done.mutable_verdict()->set_verdict_class(v1::VERDICT_CLASS_CANCELLED);
          }
          writer->Write(done);
          return absl::OkStatus();
        }
        auto status = NoticeIfNoWorker(row);
        if (!status.ok()) {
          spdlog::warn("watch: worker check failed submission_id={} error={}", id,
                       LogQuoted(status.ToString()));
        } else {
          continue;  // Read the notice (if one was appended) without waiting.
        }
      }
      if (!WaitForChangeOrPoll(*ctx_, *ctx_->event_changes, seen, ctx_->options.poll_interval,
                               context)) {
        if (ctx_->event_changes->shutting_down()) {
          return PublicStatus(
              absl::UnavailableError("server shutting down; watch again to resume"));
        }
        return absl::CancelledError("watcher went away");
      }
    }
  }
};

}  // namespace

std::unique_ptr<grpc::Service> NewSubmissionService(ApiContext* ctx) {
  return std::make_unique<SubmissionServiceImpl>(ctx);
}

}  // namespace ptxbench::api
