#include "server/api/rpc.h"

#include <algorithm>

#include "absl/status/status.h"
#include "spdlog/spdlog.h"

namespace ptxbench::api {
namespace {

std::string CodeText(absl::StatusCode code) {
  return absl::StatusCodeToString(code);  // "OK", "INVALID_ARGUMENT", ...
}

}  // namespace

grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  // absl::StatusCode and grpc::StatusCode share their numbering (both follow
  // google.rpc.Code), so the cast is exact.
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()), std::string(status.message()));
}

absl::StatusOr<Caller> RpcScope::Authenticate(std::initializer_list<Role> roles) {
  std::string authorization;
  const auto& metadata = context_->client_metadata();
  auto it = metadata.find("authorization");
  if (it != metadata.end()) authorization.assign(it->second.data(), it->second.size());
  auto caller = ctx_->auth->Authenticate(authorization, context_->peer());
  if (!caller.ok()) return caller.status();
  auto allowed = RequireRole(*caller, roles);
  if (!allowed.ok()) return allowed;
  return caller;
}

grpc::Status RpcScope::Finish(const absl::Status& status) {
  const double seconds = absl::ToDoubleSeconds(absl::Now() - start_);
  if (ctx_->metrics != nullptr) ctx_->metrics->RecordRpc(method_, CodeText(status.code()), seconds);
  switch (status.code()) {
    case absl::StatusCode::kInternal:
    case absl::StatusCode::kUnknown:
    case absl::StatusCode::kDataLoss:
      spdlog::error("rpc failed method={} code={} peer={} message=\"{}\"", method_,
                    CodeText(status.code()), context_->peer(), std::string(status.message()));
      break;
    case absl::StatusCode::kUnavailable:  // Retryable: the store is down or the server stops.
    case absl::StatusCode::kUnauthenticated:
    case absl::StatusCode::kPermissionDenied:
      spdlog::warn("rpc refused method={} code={} peer={} message=\"{}\"", method_,
                   CodeText(status.code()), context_->peer(), std::string(status.message()));
      break;
    default:
      break;
  }
  return ToGrpcStatus(status);
}

bool WaitForChangeOrPoll(const ApiContext& ctx, Notifier& notifier, uint64_t seen,
                         absl::Duration poll, grpc::ServerContextBase* context) {
  const absl::Time deadline = absl::Now() + poll;
  while (true) {
    if (notifier.shutting_down() || context->IsCancelled()) return false;
    const absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) return true;
    if (notifier.WaitForChange(seen, std::min(left, ctx.options.cancel_check_interval))) {
      return !notifier.shutting_down() && !context->IsCancelled();
    }
  }
}

}  // namespace ptxbench::api
