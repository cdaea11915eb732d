// AdminService: workers, the queue, tenants, tokens, re-judging and hacked marks. Admin tokens
// only.
#include <grpcpp/grpcpp.h>

#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status.h"
#include "common/task.h"
#include "ptxbench/v1/admin.grpc.pb.h"
#include "server/api/convert.h"
#include "server/api/log_text.h"
#include "server/api/rpc.h"
#include "server/api/services.h"
#include "server/api/tokens.h"
#include "server/api/validate.h"
#include "spdlog/spdlog.h"

namespace ptxbench::api {
namespace {

// Bounds of a re-judge request and its answer (admin.proto): a task list longer than the
// catalog could ever be, or an id list longer than one answer carries, is a mistake.
constexpr int kMaxRejudgeTasks = 100;
constexpr int kMaxRejudgeSubmissionIds = 1000;
constexpr size_t kMaxRejudgeIdsListed = 1000;

// The store's filter for a request, every field checked here with its name: tasks must be
// in this server's catalog (a typo would otherwise re-judge nothing and look like success).
// The store checks the version's syntax (store::Store::Rejudge).
absl::StatusOr<store::RejudgeFilter> RejudgeFilterOf(const v1::RejudgeSubmissionsRequest& request,
                                                     const TaskCatalog& catalog) {
  if (request.task_ids().empty()) {
    return absl::InvalidArgumentError("task_ids: name at least one task to re-judge");
  }
  if (request.task_ids_size() > kMaxRejudgeTasks) {
    return absl::InvalidArgumentError(
        absl::StrCat("task_ids: at most ", kMaxRejudgeTasks, " tasks per re-judge"));
  }
  if (request.submission_ids_size() > kMaxRejudgeSubmissionIds) {
    return absl::InvalidArgumentError(
        absl::StrCat("submission_ids: at most ", kMaxRejudgeSubmissionIds, " ids per re-judge"));
  }
  store::RejudgeFilter filter;
  for (const std::string& task_id : request.task_ids()) {
    RETURN_IF_ERROR(ValidateRequiredText(task_id, "task_ids", kMaxShortTextBytes));
    const Task* task = catalog.Find(task_id);
    if (task == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("task_ids: unknown task '", task_id, "' (not in this server's catalog)"));
    }
    filter.task_ids.push_back(task_id);
    filter.task_version_hashes[task_id] = task->version_hash;
  }
  RETURN_IF_ERROR(
      ValidateOptionalText(request.harness_older_than(), "harness_older_than", kMaxShortTextBytes));
  filter.harness_older_than = request.harness_older_than();
  for (const std::string& id : request.submission_ids()) {
    RETURN_IF_ERROR(ValidateSubmissionId(id, "submission_ids"));
    filter.submission_ids.push_back(id);
  }
  RETURN_IF_ERROR(ValidateOptionalText(request.reason(), "reason", kMaxMessageBytes));
  filter.reason = request.reason();
  return filter;
}

// Every method is served by rpc.h's ServeStreamedUnary.
class AdminServiceImpl final : public GuardedService<v1::AdminService> {
 public:
  explicit AdminServiceImpl(ApiContext* ctx) : GuardedService(ctx) {
    ServeUnary<v1::ListWorkersRequest, v1::ListWorkersResponse>(
        "ListWorkers", kMaxSmallRequestBytes,
        [this](RpcScope& rpc, const v1::ListWorkersRequest& request,
               v1::ListWorkersResponse* response) -> absl::Status {
          ASSIGN_OR_RETURN(Caller caller, rpc.Authenticate({Role::kAdmin}));
          ASSIGN_OR_RETURN(auto workers, ctx_->store->ListWorkers());
          for (const auto& worker : workers) *response->add_workers() = WorkerFromRow(worker);
          return absl::OkStatus();
        });

    ServeUnary<v1::DrainWorkerRequest, v1::Worker>(
        "DrainWorker", kMaxSmallRequestBytes,
        [this](RpcScope& rpc, const v1::DrainWorkerRequest& request,
               v1::Worker* response) -> absl::Status {
          ASSIGN_OR_RETURN(Caller caller, rpc.Authenticate({Role::kAdmin}));
          RETURN_IF_ERROR(
              ValidateRequiredText(request.worker_id(), "worker_id", kMaxShortTextBytes));
          ASSIGN_OR_RETURN(store::WorkerRow row, ctx_->store->SetWorkerState(
                                                     request.worker_id(), v1::WORKER_STATE_DRAINING,
                                                     "drained by an admin", caller.Actor()));
          ctx_->jobs->SetDraining(row.worker_id, true);
          ctx_->leases->WakeWorker(row.worker_id);
          spdlog::info("worker draining worker_id={} by_token={}", row.worker_id, caller.token_id);
          *response = WorkerFromRow(row);
          return absl::OkStatus();
        });

    ServeUnary<v1::QueueStatsRequest, v1::QueueStatsResponse>(
        "QueueStats", kMaxSmallRequestBytes,
        [this](RpcScope& rpc, const v1::QueueStatsRequest& request,
               v1::QueueStatsResponse* response) -> absl::Status {
          ASSIGN_OR_RETURN(Caller caller, rpc.Authenticate({Role::kAdmin}));
          ASSIGN_OR_RETURN(auto depths, ctx_->store->QueueDepths());
          for (const auto& depth : depths) *response->add_depths() = QueueDepthFromRow(depth);
          return absl::OkStatus();
        });

    ServeUnary<v1::CreateTenantRequest, v1::Tenant>(
        "CreateTenant", kMaxSmallRequestBytes,
        [this](RpcScope& rpc, const v1::CreateTenantRequest& request,
               v1::Tenant* response) -> absl::Status {
          ASSIGN_OR_RETURN(Caller caller, rpc.Authenticate({Role::kAdmin}));
          if (!request.has_tenant()) return absl::InvalidArgumentError("tenant: required");
          RETURN_IF_ERROR(ValidateTenant(request.tenant(), "tenant"));
          store::TenantRow row;
          row.name = request.tenant().name();
          row.submissions_per_minute = request.tenant().submissions_per_minute();
          row.max_queued = request.tenant().max_queued();
          RETURN_IF_ERROR(ctx_->store->CreateTenant(row, caller.Actor()));
          ASSIGN_OR_RETURN(row, ctx_->store->GetTenant(row.name));
          spdlog::info("tenant created tenant={} by_token={}", row.name, caller.token_id);
          *response = TenantFromRow(row);
          return absl::OkStatus();
        });

    ServeUnary<v1::ListTenantsRequest, v1::ListTenantsResponse>(
        "ListTenants", kMaxSmallRequestBytes,
        [this](RpcScope& rpc, const v1::ListTenantsRequest& request,
               v1::ListTenantsResponse* response) -> absl::Status {
          ASSIGN_OR_RETURN(Caller caller, rpc.Authenticate({Role::kAdmin}));
          ASSIGN_OR_RETURN(auto tenants, ctx_->store->ListTenants());
          for (const auto& tenant : tenants) *response->add_tenants() = TenantFromRow(tenant);
          return absl::OkStatus();
        });

    ServeUnary<v1::CreateTokenRequest, v1::CreateTokenResponse>(
        "CreateToken", kMaxSmallRequestBytes,
        [this](RpcScope& rpc, const v1::CreateTokenRequest& request,
               v1::CreateTokenResponse* response) -> absl::Status {
          ASSIGN_OR_RETURN(Caller caller, rpc.Authenticate({Role::kAdmin}));
          RETURN_IF_ERROR(ValidateTenantName(request.tenant(), "tenant"));
          RETURN_IF_ERROR(
              ValidateOptionalText(request.description(), "description", kMaxShortTextBytes));
          MintTokenRequest mint;  // The one token-minting path (tokens.h).
          mint.tenant = request.tenant();
          mint.role = request.role();
          mint.description = request.description();
          mint.actor = caller.Actor();
          ASSIGN_OR_RETURN(MintedToken token, MintToken(*ctx_->store, mint));
          ctx_->auth->OnTokenCreated();
          spdlog::info("token created token_id={} tenant={} role={} by_token={}", token.token_id,
                       token.tenant, RoleName(token.role), caller.token_id);
          response->set_token_id(token.token_id);
          response->set_secret(token.secret);
          return absl::OkStatus();
        });

    ServeUnary<v1::RevokeTokenRequest, v1::RevokeTokenResponse>(
        "RevokeToken", kMaxSmallRequestBytes,
        [this](RpcScope& rpc, const v1::RevokeTokenRequest& request,
               v1::RevokeTokenResponse* response) -> absl::Status {
          ASSIGN_OR_RETURN(Caller caller, rpc.Authenticate({Role::kAdmin}));
          RETURN_IF_ERROR(ValidateRequiredText(request.token_id(), "token_id", kMaxShortTextBytes));
          RETURN_IF_ERROR(ctx_->store->RevokeToken(request.token_id(), caller.Actor()));
          ctx_->auth->OnTokenRevoked(request.token_id());
          spdlog::info("token revoked token_id={} by_token={}", LogQuoted(request.token_id()),
                       caller.token_id);
          return absl::OkStatus();
        });

    ServeUnary<v1::RejudgeSubmissionsRequest, v1::RejudgeSubmissionsResponse>(
        "RejudgeSubmissions", kMaxSmallRequestBytes,
        [this](RpcScope& rpc, const v1::RejudgeSubmissionsRequest& request,
               v1::RejudgeSubmissionsResponse* response) -> absl::Status {
          ASSIGN_OR_RETURN(Caller caller, rpc.Authenticate({Role::kAdmin}));
          ASSIGN_OR_RETURN(store::RejudgeFilter filter, RejudgeFilterOf(request, *ctx_->catalog));
          ASSIGN_OR_RETURN(store::RejudgeResult result,
                           ctx_->store->Rejudge(filter, caller.Actor()));
          response->set_count(static_cast<int32_t>(result.submission_ids.size()));
          for (size_t i = 0; i < result.submission_ids.size() && i < kMaxRejudgeIdsListed; ++i) {
            response->add_submission_ids(result.submission_ids[i]);
          }
          // New jobs are queued: wake the leasers now rather than at their next poll.
          ctx_->leases->JobsAvailable("");
          spdlog::info("rejudge tasks={} harness_older_than={} count={} by_token={}",
                       LogQuoted(absl::StrJoin(filter.task_ids, ",")),
                       LogQuoted(filter.harness_older_than), result.submission_ids.size(),
                       caller.token_id);
          return absl::OkStatus();
        });

    ServeUnary<v1::MarkSubmissionHackedRequest, v1::Submission>(
        "MarkSubmissionHacked", kMaxSmallRequestBytes,
        [this](RpcScope& rpc, const v1::MarkSubmissionHackedRequest& request,
               v1::Submission* response) -> absl::Status {
          ASSIGN_OR_RETURN(Caller caller, rpc.Authenticate({Role::kAdmin}));
          RETURN_IF_ERROR(ValidateSubmissionId(request.submission_id(), "submission_id"));
          RETURN_IF_ERROR(ValidateRequiredText(request.reason(), "reason", kMaxMessageBytes));
          ASSIGN_OR_RETURN(
              store::SubmissionRow row,
              ctx_->store->MarkHacked(request.submission_id(), request.reason(), caller.Actor()));
          spdlog::info("submission marked hacked submission_id={} by_token={}", row.id,
                       caller.token_id);
          ASSIGN_OR_RETURN(*response, SubmissionFromRow(row));
          return absl::OkStatus();
        });

    ServeUnary<v1::UnmarkSubmissionHackedRequest, v1::Submission>(
        "UnmarkSubmissionHacked", kMaxSmallRequestBytes,
        [this](RpcScope& rpc, const v1::UnmarkSubmissionHackedRequest& request,
               v1::Submission* response) -> absl::Status {
          ASSIGN_OR_RETURN(Caller caller, rpc.Authenticate({Role::kAdmin}));
          RETURN_IF_ERROR(ValidateSubmissionId(request.submission_id(), "submission_id"));
          ASSIGN_OR_RETURN(store::SubmissionRow row,
                           ctx_->store->UnmarkHacked(request.submission_id(), caller.Actor()));
          spdlog::info("submission hacked mark lifted submission_id={} by_token={}", row.id,
                       caller.token_id);
          ASSIGN_OR_RETURN(*response, SubmissionFromRow(row));
          return absl::OkStatus();
        });

    ServeUnary<v1::ListSupersededVerdictsRequest, v1::ListSupersededVerdictsResponse>(
        "ListSupersededVerdicts", kMaxSmallRequestBytes,
        [this](RpcScope& rpc, const v1::ListSupersededVerdictsRequest& request,
               v1::ListSupersededVerdictsResponse* response) -> absl::Status {
          ASSIGN_OR_RETURN(Caller caller, rpc.Authenticate({Role::kAdmin}));
          RETURN_IF_ERROR(ValidateSubmissionId(request.submission_id(), "submission_id"));
          ASSIGN_OR_RETURN(auto rows, ctx_->store->ListSupersededVerdicts(request.submission_id()));
          for (const store::SupersededVerdictRow& row : rows) {
            v1::SupersededVerdict* out = response->add_verdicts();
            ASSIGN_OR_RETURN(*out->mutable_verdict(), VerdictFromRow(row.verdict));
            out->set_round(row.verdict.round);
            out->set_superseded_by_round(row.superseded_by_round);
            out->set_rejudge_reason(row.rejudge_reason);
            *out->mutable_superseded_at() = ToTimestamp(row.superseded_at);
          }
          return absl::OkStatus();
        });
  }
};

}  // namespace

std::unique_ptr<grpc::Service> NewAdminService(ApiContext* ctx) {
  return std::make_unique<AdminServiceImpl>(ctx);
}

}  // namespace ptxbench::api
