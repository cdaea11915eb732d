// Shared plumbing of every RPC handler: authentication, the one conversion of absl::Status to
// grpc::Status, RPC metrics and error logging. Includes gRPC, so only the service .cc files
// include it.
#ifndef PTXBENCH_SERVER_API_RPC_H_
#define PTXBENCH_SERVER_API_RPC_H_

#include <grpcpp/server_context.h>
#include <grpcpp/support/status.h>

#include <initializer_list>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/clock.h"
#include "server/api/api_context.h"
#include "server/api/auth.h"
#include "server/api/notifier.h"

namespace ptxbench::api {

grpc::Status ToGrpcStatus(const absl::Status& status);

// One handler invocation. Usage:
//   RpcScope rpc(ctx_, "Submit", context);
//   auto caller = rpc.Authenticate({Role::kVendor});
//   if (!caller.ok()) return rpc.Finish(caller.status());
//   ...
//   return rpc.Finish(absl::OkStatus());
class RpcScope {
 public:
  RpcScope(ApiContext* ctx, const char* method, grpc::ServerContextBase* context)
      : ctx_(ctx), method_(method), context_(context), start_(absl::Now()) {}

  absl::StatusOr<Caller> Authenticate(std::initializer_list<Role> roles);

  // Records the call's duration and code, logs server-side failures, converts the status.
  grpc::Status Finish(const absl::Status& status);

  bool ClientGone() const { return context_->IsCancelled(); }

 private:
  ApiContext* ctx_;
  const char* method_;
  grpc::ServerContextBase* context_;
  absl::Time start_;
};

// Blocks a stream handler until `notifier` moves past `seen` or `poll` passes, waking every
// cancel_check_interval to notice a departed client. Returns false when the stream should end
// (client gone or server shutting down), true when the caller should look at the store again.
bool WaitForChangeOrPoll(const ApiContext& ctx, Notifier& notifier, uint64_t seen,
                         absl::Duration poll, grpc::ServerContextBase* context);

}  // namespace ptxbench::api

#endif  // PTXBENCH_SERVER_API_RPC_H_
