// AdminService: workers, the queue, tenants and tokens. Admin tokens only.
#include <grpcpp/grpcpp.h>

#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status.h"
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
          ASSIGN_OR_RETURN(store::WorkerRow row,
                           ctx_->store->SetWorkerState(request.worker_id(), "draining",
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
          const std::string role = RoleName(request.role());
          if (role.empty()) {
            return absl::InvalidArgumentError(
                absl::StrCat("role: required (vendor, worker or admin), got ", request.role()));
          }
          RETURN_IF_ERROR(
              ValidateOptionalText(request.description(), "description", kMaxShortTextBytes));
          auto tenant = ctx_->store->GetTenant(request.tenant());
          if (absl::IsNotFound(tenant.status())) {
            return absl::NotFoundError(absl::StrCat("tenant: '", request.tenant(),
                                                    "' does not exist; CreateTenant first"));
          }
          if (!tenant.ok()) return tenant.status();
          const GeneratedToken token = GenerateToken();
          store::TokenRow row;
          row.token_id = token.token_id;
          row.tenant = request.tenant();
          row.role = role;
          row.description = request.description();
          RETURN_IF_ERROR(ctx_->store->CreateToken(row, token.sha256, caller.Actor()));
          ctx_->auth->OnTokenCreated();
          spdlog::info("token created token_id={} tenant={} role={} by_token={}", row.token_id,
                       row.tenant, row.role, caller.token_id);
          response->set_token_id(token.token_id);
          response->set_secret(token.token);
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
  }
};

}  // namespace

std::unique_ptr<grpc::Service> NewAdminService(ApiContext* ctx) {
  return std::make_unique<AdminServiceImpl>(ctx);
}

}  // namespace ptxbench::api
