// Shared plumbing of every RPC handler: admission and parsing of unary calls, authentication,
// the one conversion of absl::Status to grpc::Status (with what a caller may see of a
// server-side failure), RPC metrics, error logging and the per-tenant stream caps. Includes
// gRPC, so only the service .cc files include it.
//
// Every unary method is a raw callback method served by ServeUnary: gRPC hands over the
// request's bytes, and before anything is parsed or queued the call is refused when the
// store is down (UNAVAILABLE), when it is larger than any valid request of its method can
// be, or when it carries no well-formed token; then it waits in its caller's admission lane
// (admission.h), and on a pool thread its text fields are checked (request_check.h), it is
// parsed and its handler runs. The two long-lived streams (Lease, WatchSubmission) stay on
// gRPC's synchronous API (server/server.cc says why) and take a per-tenant StreamSlot.
#ifndef PTXBENCH_SERVER_API_RPC_H_
#define PTXBENCH_SERVER_API_RPC_H_

#include <grpcpp/server_context.h>
#include <grpcpp/support/byte_buffer.h>
#include <grpcpp/support/server_callback.h>
#include <grpcpp/support/status.h>

#include <cstddef>
#include <functional>
#include <initializer_list>
#include <string>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/time/clock.h"
#include "google/protobuf/descriptor.h"
#include "server/api/api_context.h"
#include "server/api/auth.h"
#include "server/api/notifier.h"
#include "server/api/validate.h"

namespace ptxbench::api {

// The largest request each method can validly be, checked before parsing. A Submit is its
// source (validate.h: 1 MiB) plus a launch plan and short fields; a worker's Complete and
// ReportStage carry stage details (bounded again, and truncated, by verdict_bounds.h) and are
// allowed what the whole server accepted before; everything else is ids, names and short
// texts.
inline constexpr size_t kMaxSubmitRequestBytes = kMaxSourceBytes + (1 << 20);
inline constexpr size_t kMaxWorkerResultRequestBytes = 8 << 20;
inline constexpr size_t kMaxSmallRequestBytes = 256 << 10;
// gRPC's own limit (larger messages are refused by the transport, RESOURCE_EXHAUSTED).
inline constexpr size_t kMaxReceiveMessageBytes = kMaxWorkerResultRequestBytes;

grpc::Status ToGrpcStatus(const absl::Status& status);

// Marks a status whose message is meant for the caller even though its code is one of the
// server-side ones (UNAVAILABLE, INTERNAL, UNKNOWN, DATA_LOSS), whose messages RpcScope::Finish
// otherwise replaces: a store error names the database's user, address and database.
absl::Status PublicStatus(absl::Status status);

// One handler invocation. Usage:
//   RpcScope rpc(ctx_, "Submit", context);
//   auto caller = rpc.Authenticate({Role::kVendor});
//   if (!caller.ok()) return rpc.Finish(caller.status());
//   ...
//   return rpc.Finish(absl::OkStatus());
class RpcScope {
 public:
  RpcScope(ApiContext* ctx, const char* method, grpc::ServerContextBase* context,
           absl::Time start = absl::Now())
      : ctx_(ctx), method_(method), context_(context), start_(start) {}

  absl::StatusOr<Caller> Authenticate(std::initializer_list<Role> roles);

  // Records the call's duration and code, logs server-side failures (the full message) and
  // refusals, and converts the status; server-side failures reach the caller with a plain
  // message (PublicStatus above).
  grpc::Status Finish(const absl::Status& status);

  bool ClientGone() const { return context_->IsCancelled(); }
  const char* method() const { return method_; }

 private:
  ApiContext* ctx_;
  const char* method_;
  grpc::ServerContextBase* context_;
  absl::Time start_;
};

// Parses `bytes` (already checked by CheckRequestText) and runs the handler; fills `response`
// with the serialized reply.
using UnaryBody =
    std::function<absl::Status(RpcScope& rpc, const std::string& bytes, std::string* response)>;

grpc::ServerUnaryReactor* ServeUnaryRaw(ApiContext* ctx, const char* method,
                                        const google::protobuf::Descriptor* request_type,
                                        size_t max_request_bytes,
                                        grpc::CallbackServerContext* context,
                                        const grpc::ByteBuffer* request_bytes,
                                        grpc::ByteBuffer* response_bytes, UnaryBody body);

// The typed front of ServeUnaryRaw: `handler(RpcScope&, const Request&, Response*)` returns
// an absl::Status.
template <typename Request, typename Response, typename Handler>
grpc::ServerUnaryReactor* ServeUnary(ApiContext* ctx, const char* method, size_t max_request_bytes,
                                     grpc::CallbackServerContext* context,
                                     const grpc::ByteBuffer* request_bytes,
                                     grpc::ByteBuffer* response_bytes, Handler handler) {
  return ServeUnaryRaw(ctx, method, Request::descriptor(), max_request_bytes, context,
                       request_bytes, response_bytes,
                       [handler = std::move(handler)](RpcScope& rpc, const std::string& bytes,
                                                      std::string* serialized) -> absl::Status {
                         Request request;
                         if (!request.ParseFromString(bytes)) {
                           return DescribeParseFailure(Request::descriptor(), bytes);
                         }
                         Response response;
                         absl::Status status = handler(rpc, request, &response);
                         if (status.ok()) *serialized = response.SerializeAsString();
                         return status;
                       });
}

// Blocks a stream handler until `notifier` moves past `seen` or `poll` passes, waking every
// cancel_check_interval to notice a departed client. Returns false when the stream should end
// (client gone or server shutting down), true when the caller should look at the store again.
bool WaitForChangeOrPoll(const ApiContext& ctx, Notifier& notifier, uint64_t seen,
                         absl::Duration poll, grpc::ServerContextBase* context);

}  // namespace ptxbench::api

#endif  // PTXBENCH_SERVER_API_RPC_H_
