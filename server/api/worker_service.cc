// WorkerService: registration, the Lease stream, heartbeats, stage reports and job results.
// Every call about a job is fenced by its lease in the store: a worker whose lease was reaped
// and handed to another gets FAILED_PRECONDITION "lease lost" and changes nothing.
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status.h"
#include "ptxbench/v1/worker.grpc.pb.h"
#include "server/api/convert.h"
#include "server/api/log_text.h"
#include "server/api/request_check.h"
#include "server/api/result_check.h"
#include "server/api/rpc.h"
#include "server/api/services.h"
#include "server/api/validate.h"
#include "server/api/verdict_bounds.h"
#include "spdlog/spdlog.h"

namespace ptxbench::api {
namespace {

// A job leased while the worker's heartbeat was in flight is not in that heartbeat's list;
// it is kept for this long before a heartbeat that omits it releases its slot.
constexpr absl::Duration kReconcileGrace = absl::Seconds(10);

// Unary methods are served by rpc.h's ServeStreamedUnary (admission, the token, then the
// bounded, text-checked request); Lease stays a synchronous stream.
class WorkerServiceImpl final : public GuardedService<v1::WorkerService> {
 public:
  explicit WorkerServiceImpl(ApiContext* ctx) : GuardedService(ctx) {
    ServeUnary<v1::RegisterRequest, v1::RegisterResponse>(
        "Register", kMaxSmallRequestBytes,
        [this](RpcScope& rpc, const v1::RegisterRequest& in, v1::RegisterResponse* out) {
          return DoRegister(rpc, in, out);
        });
    ServeUnary<v1::HeartbeatRequest, v1::HeartbeatResponse>(
        "Heartbeat", kMaxSmallRequestBytes,
        [this](RpcScope& rpc, const v1::HeartbeatRequest& in, v1::HeartbeatResponse* out) {
          return DoHeartbeat(rpc, in, out);
        });
    ServeUnary<v1::ReportStageRequest, v1::ReportStageResponse>(
        "ReportStage", kMaxWorkerResultRequestBytes,
        [this](RpcScope& rpc, const v1::ReportStageRequest& in, v1::ReportStageResponse*) {
          return DoReportStage(rpc, in);
        });
    ServeUnary<v1::CompleteRequest, v1::CompleteResponse>(
        "Complete", kMaxWorkerResultRequestBytes,
        [this](RpcScope& rpc, const v1::CompleteRequest& in, v1::CompleteResponse*) {
          return DoComplete(rpc, in);
        });
    ServeUnary<v1::FailRequest, v1::FailResponse>(
        "Fail", kMaxSmallRequestBytes,
        [this](RpcScope& rpc, const v1::FailRequest& in, v1::FailResponse* out) {
          return DoFail(rpc, in, out);
        });
  }

  grpc::Status Lease(grpc::ServerContext* context, const v1::LeaseRequest* request,
                     grpc::ServerWriter<v1::LeasedJob>* writer) override {
    RpcScope rpc(ctx_, "Lease", context);
    return rpc.Finish(DoLease(rpc, context, *request, writer));
  }

 private:
  absl::Status DoRegister(RpcScope& rpc, const v1::RegisterRequest& request,
                          v1::RegisterResponse* response) {
    ASSIGN_OR_RETURN(Caller caller, rpc.Authenticate({Role::kWorker}));
    if (!request.has_identity()) return absl::InvalidArgumentError("identity: required");
    RETURN_IF_ERROR(ValidateWorkerIdentity(request.identity(), "identity"));
    const v1::WorkerIdentity& identity = request.identity();
    store::WorkerRegistration registration;
    registration.hostname = identity.hostname();
    registration.arch = identity.arch();
    registration.gpu_name = identity.gpu_name();
    registration.gpu_uuid = identity.gpu_uuid();
    registration.compile_only = identity.compile_only();
    registration.token_id = caller.token_id;
    ASSIGN_OR_RETURN(registration.identity_json, MessageToJson(identity));
    ASSIGN_OR_RETURN(store::WorkerRow row, ctx_->store->RegisterWorker(registration));
    RememberOwner(row);
    // A registration under an existing id is a new process of that worker (a restart): it
    // holds none of its predecessor's jobs, so they go back to the queue now rather than when
    // their leases expire, and stop filling the new process's slots (measured before: a
    // restarted one-slot worker idled ~20 s behind its predecessor's lease).
    ASSIGN_OR_RETURN(
        int released,
        ctx_->store->ReleaseWorkerLeases(
            row.worker_id, absl::StrCat("worker ", row.worker_id,
                                        " registered again (restarted); its job was requeued")));
    ctx_->jobs->SetDraining(row.worker_id, row.state == v1::WORKER_STATE_DRAINING);
    const bool forgot = ctx_->jobs->ReleaseWorker(row.worker_id) > 0;
    if (forgot) ctx_->leases->WakeWorker(row.worker_id);
    if (released > 0) {
      row.jobs_held = 0;
      ctx_->leases->JobsAvailable("");
      ctx_->event_changes->Notify();
      spdlog::info("worker registered again worker_id={}: {} leases of its predecessor released",
                   row.worker_id, released);
    }
    response->set_worker_id(row.worker_id);
    response->set_lease_seconds(ctx_->options.lease_seconds);
    spdlog::info("worker registered worker_id={} host={} arch={} gpu_uuid={} compile_only={}",
                 row.worker_id, LogQuoted(registration.hostname), ArchName(registration.arch),
                 LogQuoted(registration.gpu_uuid), registration.compile_only);
    return absl::OkStatus();
  }

  // A worker id belongs to the token that registered it (store.h, RegisterWorker): every call
  // about a worker, or a lease of one, must come from that token. The owner is cached: it
  // changes only when a registration claims an id whose token was revoked (a revoked token
  // cannot call at all), and a mismatch is read again before it is refused.
  absl::Status CheckOwner(const Caller& caller, const std::string& worker_id) {
    {
      std::lock_guard<std::mutex> lock(owners_mu_);
      auto it = owners_.find(worker_id);
      if (it != owners_.end() && it->second == caller.token_id) return absl::OkStatus();
    }
    ASSIGN_OR_RETURN(store::WorkerRow row, ctx_->store->GetWorker(worker_id));
    RememberOwner(row);
    if (row.registration.token_id != caller.token_id) {
      return absl::PermissionDeniedError(absl::StrCat(
          "worker_id: worker ", worker_id,
          " is registered by another token; a worker may act only for the ids it registered"));
    }
    return absl::OkStatus();
  }

  // The same for a job call: a lease naming an unknown worker is simply not held.
  absl::Status CheckLeaseOwner(const Caller& caller, const store::LeaseRef& lease) {
    absl::Status owned = CheckOwner(caller, lease.worker_id);
    if (absl::IsNotFound(owned)) {
      return store::LeaseLostError(
          store::LeaseLostReason::kLeasedAgain,
          absl::StrCat("lease lost: worker ", lease.worker_id, " is not registered"));
    }
    return owned;
  }

  void RememberOwner(const store::WorkerRow& row) {
    std::lock_guard<std::mutex> lock(owners_mu_);
    owners_[row.worker_id] = row.registration.token_id;
  }

  absl::Status DoLease(RpcScope& rpc, grpc::ServerContext* context, const v1::LeaseRequest& request,
                       grpc::ServerWriter<v1::LeasedJob>* writer) {
    if (ctx_->store_health != nullptr && !ctx_->store_health->reachable()) {
      return StoreUnavailable();
    }
    ASSIGN_OR_RETURN(Caller caller, rpc.Authenticate({Role::kWorker}));
    RETURN_IF_ERROR(CheckRequestText(request));
    RETURN_IF_ERROR(ValidateRequiredText(request.worker_id(), "worker_id", kMaxShortTextBytes));
    std::optional<StreamSlots::Slot> slot;
    if (ctx_->lease_slots != nullptr) {
      ASSIGN_OR_RETURN(
          StreamSlots::Slot acquired,
          ctx_->lease_slots->Acquire(caller.tenant.empty() ? caller.token_id : caller.tenant));
      slot.emplace(std::move(acquired));
    }
    if (request.slots() < 0 || request.slots() > ctx_->options.max_slots) {
      return absl::InvalidArgumentError(absl::StrCat(
          "slots: must be 0 (meaning 1) to ", ctx_->options.max_slots, ", got ", request.slots()));
    }
    const int slots = request.slots() == 0 ? 1 : request.slots();
    const std::string& worker_id = request.worker_id();
    ASSIGN_OR_RETURN(store::WorkerRow worker, ctx_->store->GetWorker(worker_id));
    RememberOwner(worker);
    RETURN_IF_ERROR(CheckOwner(caller, worker_id));
    ctx_->jobs->SetDraining(worker_id, worker.state == v1::WORKER_STATE_DRAINING);
    ctx_->jobs->HoldAtLeast(worker_id, worker.jobs_held);
    LeaseDispatcher::Waiter waiter;
    waiter.worker_id = worker_id;
    waiter.pool = LeaseDispatcher::PoolOf(ArchName(worker.registration.arch),
                                          worker.registration.compile_only);
    ctx_->leases->Add(&waiter);
    absl::Cleanup unregister = [&] { ctx_->leases->Remove(&waiter); };
    spdlog::info("lease stream opened worker_id={} slots={} pool={}", worker_id, slots,
                 waiter.pool);

    while (true) {
      if (ctx_->leases->shutting_down()) {
        // A server shutdown ends the stream cleanly: the worker reconnects to a replica.
        spdlog::info("lease stream closed worker_id={} reason=server_shutdown", worker_id);
        return absl::OkStatus();
      }
      if (context->IsCancelled()) {
        spdlog::info("lease stream closed worker_id={} reason=client", worker_id);
        return absl::CancelledError("worker went away");
      }
      const bool free_slot =
          !ctx_->jobs->Draining(worker_id) && ctx_->jobs->Held(worker_id) < slots;
      // Read before asking the store, so that a job enqueued meanwhile is not slept through.
      const uint64_t seen = ctx_->leases->Generation(waiter.pool);
      if (free_slot) {
        const absl::Time start = absl::Now();
        auto job = ctx_->store->LeaseJob(worker_id);
        if (!job.ok()) {
          if (!absl::IsUnavailable(job.status()) && !absl::IsAborted(job.status())) {
            return job.status();
          }
          spdlog::warn("lease: store unavailable worker_id={} error={}; retrying",
                       LogQuoted(worker_id), LogQuoted(job.status().ToString()));
        } else if (job->has_value()) {
          ctx_->metrics->RecordLeaseLatency(absl::ToDoubleSeconds(absl::Now() - start));
          ctx_->leases->PassOn(waiter.pool);
          RETURN_IF_ERROR(Deliver(**job, writer));
          continue;
        }
      }
      // Wait for a wake-up or the next poll, in steps short enough to notice a departed
      // client (a sync handler is not interrupted by cancellation).
      const absl::Time poll_at = absl::Now() + ctx_->options.poll_interval;
      while (!ctx_->leases->shutting_down() && !context->IsCancelled()) {
        const absl::Duration left = poll_at - absl::Now();
        if (left <= absl::ZeroDuration()) break;
        if (ctx_->leases->Wait(&waiter, free_slot, seen,
                               std::min(left, ctx_->options.cancel_check_interval))) {
          break;
        }
      }
    }
  }

  // Sends a leased job down the stream; a job the worker never received goes back to the
  // queue at once rather than after its lease expires.
  absl::Status Deliver(const store::LeasedJobRow& row, grpc::ServerWriter<v1::LeasedJob>* writer) {
    ctx_->jobs->Leased(
        {row.lease, row.submission_id, row.task_id, row.arch, row.kind, absl::Now()});
    ctx_->event_changes->Notify();
    if (!writer->Write(LeasedJobFromRow(row, ctx_->options.lease_seconds))) {
      ctx_->jobs->Released(row.lease.job_id);
      auto status = ctx_->store->FailJob(row.lease, v1::FAILURE_KIND_INFRASTRUCTURE,
                                         "lease stream closed before the job was delivered");
      ctx_->leases->JobsAvailable(ArchName(row.arch));
      spdlog::warn("lease: undelivered job returned job_id={} submission_id={} status={}",
                   row.lease.job_id, row.submission_id, status.status().ToString());
      return absl::CancelledError("worker went away");
    }
    spdlog::info("job leased job_id={} attempt={} kind={} submission_id={} worker_id={}",
                 row.lease.job_id, row.lease.attempt, JobKindName(row.kind), row.submission_id,
                 row.lease.worker_id);
    return absl::OkStatus();
  }

  absl::Status DoHeartbeat(RpcScope& rpc, const v1::HeartbeatRequest& request,
                           v1::HeartbeatResponse* response) {
    ASSIGN_OR_RETURN(Caller caller, rpc.Authenticate({Role::kWorker}));
    RETURN_IF_ERROR(ValidateRequiredText(request.worker_id(), "worker_id", kMaxShortTextBytes));
    RETURN_IF_ERROR(
        ValidateOptionalText(request.health_detail(), "health_detail", kMaxMessageBytes));
    RETURN_IF_ERROR(CheckOwner(caller, request.worker_id()));
    std::vector<store::LeaseRef> leases;
    for (int i = 0; i < request.leases_size(); ++i) {
      RETURN_IF_ERROR(ValidateJobLease(request.leases(i), absl::StrCat("leases[", i, "]")));
      if (request.leases(i).worker_id() != request.worker_id()) {
        return absl::InvalidArgumentError(
            absl::StrCat("leases[", i, "].worker_id: '", request.leases(i).worker_id(),
                         "' differs from worker_id '", request.worker_id(), "'"));
      }
      leases.push_back(LeaseRefFromProto(request.leases(i)));
    }
    ASSIGN_OR_RETURN(store::HeartbeatResult result,
                     ctx_->store->Heartbeat(request.worker_id(), leases, request.healthy(),
                                            request.health_detail()));
    std::set<std::string> gone;
    for (const auto& lost : result.lost) gone.insert(lost.job_id);
    for (const auto& job_id : result.cancelled_job_ids) gone.insert(job_id);
    // Leases still held that this process did not hand out (it restarted) count too.
    for (const auto& lease : leases) {
      if (!gone.count(lease.job_id)) ctx_->jobs->Adopt(lease);
    }
    int released = ctx_->jobs->Reconcile(request.worker_id(), leases, kReconcileGrace);
    for (const auto& lost : result.lost) {
      released += ctx_->jobs->Released(lost.job_id).has_value() ? 1 : 0;
      *response->add_lost() = LeaseRefToProto(lost);
    }
    for (const auto& job_id : result.cancelled_job_ids) {
      // The worker stops that work and reports nothing: its slot is free.
      released += ctx_->jobs->Released(job_id).has_value() ? 1 : 0;
      response->add_cancelled_job_ids(job_id);
    }
    response->set_drain(result.drain);
    const bool drain_changed = ctx_->jobs->Draining(request.worker_id()) != result.drain;
    ctx_->jobs->SetDraining(request.worker_id(), result.drain);
    if (released > 0 || drain_changed) ctx_->leases->WakeWorker(request.worker_id());
    return absl::OkStatus();
  }

  absl::Status DoReportStage(RpcScope& rpc, const v1::ReportStageRequest& request) {
    ASSIGN_OR_RETURN(Caller caller, rpc.Authenticate({Role::kWorker}));
    if (!request.has_lease()) return absl::InvalidArgumentError("lease: required");
    RETURN_IF_ERROR(ValidateJobLease(request.lease(), "lease"));
    if (!request.has_result()) return absl::InvalidArgumentError("result: required");
    RETURN_IF_ERROR(ValidateStageResult(request.result(), "result"));
    RETURN_IF_ERROR(CheckLeaseOwner(caller, LeaseRefFromProto(request.lease())));
    v1::StageResult result = request.result();
    BoundStageResult(&result);
    ASSIGN_OR_RETURN(std::string json, MessageToJson(result));
    RETURN_IF_ERROR(ctx_->store->ReportStage(LeaseRefFromProto(request.lease()),
                                             request.result().stage(), json));
    ctx_->event_changes->Notify();
    return absl::OkStatus();
  }

  // Counts the submission's final verdict once it is final (a compile job of a full-scope
  // submission that compiled leaves the submission running with an evaluate job queued).
  void RecordIfFinished(const std::string& submission_id) {
    if (submission_id.empty()) return;
    auto row = ctx_->store->GetSubmission(submission_id, "");
    if (!row.ok() || row->state != v1::SUBMISSION_STATE_FINISHED || !row->verdict.has_value()) {
      return;
    }
    RecordVerdict({row->id, row->tenant, row->model, row->task_id, row->arch,
                   row->verdict->verdict_class, row->verdict->speedup});
  }

  void RecordVerdict(const store::FinishedSubmission& finished) {
    ctx_->metrics->RecordVerdict(finished.tenant, finished.model, finished.task_id,
                                 ArchName(finished.arch), VerdictClassName(finished.verdict_class));
    spdlog::info("verdict submission_id={} tenant={} task={} arch={} verdict={} speedup={}",
                 finished.id, finished.tenant, finished.task_id, ArchName(finished.arch),
                 VerdictClassName(finished.verdict_class), finished.speedup);
  }

  absl::Status DoComplete(RpcScope& rpc, const v1::CompleteRequest& request) {
    ASSIGN_OR_RETURN(Caller caller, rpc.Authenticate({Role::kWorker}));
    if (!request.has_lease()) return absl::InvalidArgumentError("lease: required");
    RETURN_IF_ERROR(ValidateJobLease(request.lease(), "lease"));
    if (!request.has_verdict()) return absl::InvalidArgumentError("verdict: required");
    RETURN_IF_ERROR(ValidateVerdict(request.verdict(), "verdict"));
    v1::Verdict bounded = request.verdict();
    RETURN_IF_ERROR(BoundVerdict(&bounded));
    store::JobCompletion completion;
    ASSIGN_OR_RETURN(completion.verdict, VerdictToRow(bounded));
    if (request.has_artifact()) {
      RETURN_IF_ERROR(ValidateCompileArtifact(request.artifact(), "artifact"));
      completion.artifact = CompileArtifactToRow(request.artifact());
    }
    if (request.has_artifact_use()) {
      RETURN_IF_ERROR(ValidateArtifactUse(request.artifact_use(), "artifact_use"));
      completion.artifact_use = store::ArtifactUseReport{request.artifact_use().outcome(),
                                                         request.artifact_use().detail()};
    }
    const store::LeaseRef lease = LeaseRefFromProto(request.lease());
    RETURN_IF_ERROR(CheckLeaseOwner(caller, lease));
    // Under the fence, before anything is stored: could this job have produced this result?
    // (result_check.h.) A refusal requeues the job and is recorded in its audit row.
    const v1::Verdict& wire_verdict = request.verdict();
    completion.check = [&](const store::CompletingJob& job) {
      const Task* task = ctx_->catalog->Find(job.task_id);
      if (task != nullptr && task->version_hash != job.task_version_hash) task = nullptr;
      return CheckResult(job, wire_verdict, task);
    };
    // A distrusted producer's verdicts are re-judged against the catalog's tasks, as an admin's
    // re-judge is.
    completion.current_task_version = [this](const std::string& task_id) {
      const Task* task = ctx_->catalog->Find(task_id);
      return task != nullptr ? task->version_hash : std::string();
    };
    absl::StatusOr<store::CompletionResult> result = ctx_->store->CompleteJob(lease, completion);
    const absl::Status& status = result.status();
    // Whether completed or lost, the job no longer holds one of this worker's slots.
    auto held = ctx_->jobs->Released(lease.job_id);
    ctx_->leases->WakeWorker(lease.worker_id);
    ctx_->event_changes->Notify();
    // A compile job of a full-scope submission that compiled enqueues its evaluate job.
    if (status.ok() && held.has_value() && held->kind == v1::JOB_KIND_COMPILE &&
        completion.verdict.compiled) {
      ctx_->leases->JobsAvailable(ArchName(held->arch));
    }
    if (store::IsCommitOutcomeUnknown(status)) return ResultOutcomeUnknown(status, lease);
    if (!status.ok()) {
      spdlog::warn("complete refused job_id={} worker_id={} attempt={} error={}",
                   LogQuoted(lease.job_id), LogQuoted(lease.worker_id), lease.attempt,
                   LogQuoted(status.ToString()));
      // A refused result requeued the job (store.h): wake a leaser for it.
      if (absl::IsInvalidArgument(status)) ctx_->leases->JobsAvailable("");
      return status;
    }
    spdlog::info("job completed job_id={} worker_id={} attempt={} verdict={} artifact_stored={}",
                 lease.job_id, lease.worker_id, lease.attempt,
                 VerdictClassName(completion.verdict.verdict_class), result->artifact_stored);
    if (completion.artifact_use.has_value())
      RecordArtifactUse(lease, *completion.artifact_use, *result);
    if (result->finished.has_value()) RecordVerdict(*result->finished);
    return absl::OkStatus();
  }

  // An evaluate job's report on its compile artifact: counted, and a distrust and the re-judge
  // it caused logged and the re-judged submissions' jobs announced.
  void RecordArtifactUse(const store::LeaseRef& lease, const store::ArtifactUseReport& use,
                         const store::CompletionResult& result) {
    ctx_->metrics->RecordArtifactReport(wire::ArtifactOutcomeName(use.outcome));
    if (!result.distrusted_worker_id.empty()) {
      ctx_->metrics->RecordWorkerDistrusted();
      spdlog::warn(
          "compile artifact mismatch: worker distrusted producer_worker_id={} "
          "reporter_worker_id={} job_id={} detail={}",
          result.distrusted_worker_id, lease.worker_id, lease.job_id, LogQuoted(use.detail, 500));
    }
    if (!result.rejudged_submission_ids.empty()) {
      ctx_->leases->JobsAvailable("");
      spdlog::warn(
          "re-judging {} submissions whose verdicts used a distrusted worker's compile "
          "artifact submission_ids={}",
          result.rejudged_submission_ids.size(),
          LogQuoted(absl::StrJoin(result.rejudged_submission_ids, ","), 4000));
    }
    if (!result.not_rejudged_submission_ids.empty()) {
      spdlog::error(
          "not re-judged (task no longer in the catalog): submissions whose verdicts "
          "used a distrusted worker's compile artifact submission_ids={}",
          LogQuoted(absl::StrJoin(result.not_rejudged_submission_ids, ","), 4000));
    }
  }

  absl::Status DoFail(RpcScope& rpc, const v1::FailRequest& request, v1::FailResponse* response) {
    ASSIGN_OR_RETURN(Caller caller, rpc.Authenticate({Role::kWorker}));
    if (!request.has_lease()) return absl::InvalidArgumentError("lease: required");
    RETURN_IF_ERROR(ValidateJobLease(request.lease(), "lease"));
    const std::string kind = FailureKindName(request.kind());
    if (kind.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("kind: required (kernel or infrastructure), got ", request.kind()));
    }
    RETURN_IF_ERROR(ValidateOptionalText(request.reason(), "reason", kMaxMessageBytes));
    const store::LeaseRef lease = LeaseRefFromProto(request.lease());
    RETURN_IF_ERROR(CheckLeaseOwner(caller, lease));
    auto will_retry = ctx_->store->FailJob(lease, request.kind(), request.reason());
    auto held = ctx_->jobs->Released(lease.job_id);
    ctx_->leases->WakeWorker(lease.worker_id);
    ctx_->event_changes->Notify();
    if (store::IsCommitOutcomeUnknown(will_retry.status())) {
      return ResultOutcomeUnknown(will_retry.status(), lease);
    }
    if (!will_retry.ok()) return will_retry.status();
    response->set_will_retry(*will_retry);
    spdlog::info("job failed job_id={} worker_id={} attempt={} kind={} will_retry={} reason={}",
                 lease.job_id, lease.worker_id, lease.attempt, kind, *will_retry,
                 LogQuoted(request.reason(), 200));
    if (!*will_retry) RecordIfFinished(held.has_value() ? held->submission_id : "");
    return absl::OkStatus();
  }

  // The database connection broke while a Complete's or Fail's COMMIT was in flight (a
  // killed postmaster), so the result may or may not be stored. Sending the same call again
  // under the same lease is right either way: the fence stores it once, and answers a second
  // one with "lease lost: ... already done" (or "leased again" after a Fail that requeued).
  // So UNAVAILABLE, which the worker retries; UNKNOWN would make it drop a verdict it holds
  // and leave the job to its lease's expiry and a second evaluation.
  static absl::Status ResultOutcomeUnknown(const absl::Status& status,
                                           const store::LeaseRef& lease) {
    spdlog::warn("result outcome unknown job_id={} worker_id={} attempt={} message={}",
                 LogQuoted(lease.job_id), LogQuoted(lease.worker_id), lease.attempt,
                 LogQuoted(std::string(status.message()), 2048));
    return PublicStatus(absl::UnavailableError(
        "the database connection was lost while this result was being committed, so it may or "
        "may not be stored; send the same call again under the same lease: the lease's fence "
        "stores it once"));
  }

  std::mutex owners_mu_;
  std::map<std::string, std::string> owners_;  // Worker id -> owning token id.
};

}  // namespace

std::unique_ptr<grpc::Service> NewWorkerService(ApiContext* ctx) {
  return std::make_unique<WorkerServiceImpl>(ctx);
}

}  // namespace ptxbench::api
