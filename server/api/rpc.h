// Shared plumbing of every RPC handler: admission and parsing of unary calls, authentication,
// the one conversion of absl::Status to grpc::Status (with what a caller may see of a
// server-side failure), RPC metrics, error logging and the per-tenant stream caps. Includes
// gRPC, so only the service .cc files include it.
//
// Every unary method is served by ServeStreamedUnary (GuardedService below): on the call's
// headers alone it is refused when the store is down (UNAVAILABLE) or it carries no
// well-formed token; then it waits in its caller's admission lane (admission.h), its token is
// verified, and only then are its bytes read: bounded per method, text fields checked
// (request_check.h), parsed, handled. The two long-lived streams (Lease, WatchSubmission)
// authenticate first as well and take a per-tenant stream slot (stream_slots.h).
#ifndef PTXBENCH_SERVER_API_RPC_H_
#define PTXBENCH_SERVER_API_RPC_H_

#include <grpcpp/impl/service_type.h>
#include <grpcpp/server_context.h>
#include <grpcpp/support/byte_buffer.h>
#include <grpcpp/support/method_handler.h>
#include <grpcpp/support/status.h>
#include <grpcpp/support/sync_stream.h>

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
// ReportStage carry stage details: the largest honest verdict seen is ~30 KB in all
// (verdict_bounds.h), and what is stored is cut to 256 KiB per detail anyway, so 4 MiB is
// >100x room; everything else is ids, names and short texts. The transport's limit is the
// largest of these: every byte of a body is received before any handler can refuse it, so
// it is what an unauthenticated flood costs per call (was 8 MiB).
inline constexpr size_t kMaxSubmitRequestBytes = kMaxSourceBytes + (1 << 20);
inline constexpr size_t kMaxWorkerResultRequestBytes = 4 << 20;
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
using RawUnaryStreamer = grpc::ServerUnaryStreamer<grpc::ByteBuffer, grpc::ByteBuffer>;

// Serves one unary call whose request has not been received yet: refuses it (store down, no
// well-formed token), waits for its admission lane, verifies the token, and only then reads
// the request's bytes, bounds them by `max_request_bytes`, checks their text and runs `body`.
grpc::Status ServeStreamedUnary(ApiContext* ctx, const char* method,
                                const google::protobuf::Descriptor* request_type,
                                size_t max_request_bytes, grpc::ServerContext* context,
                                RawUnaryStreamer* stream, const UnaryBody& body);

// A generated service (`Outer` = v1::SubmissionService, ...) whose unary methods are served by
// ServeStreamedUnary. Why "streamed": for a unary method gRPC reads the whole request before a
// handler runs, so a refusal could only come after the transport had taken up to its limit of
// bytes from anyone (the cost of the issue-12 flood). A streamed handler starts on the headers
// and reads the body itself; a refused call's body is never read, and gRPC resets the stream.
template <class Outer>
class GuardedService : public Outer::Service {
 protected:
  explicit GuardedService(ApiContext* ctx) : ctx_(ctx) {}

  // Replaces the method's generated handler; `handler(RpcScope&, const Request&, Response*)`
  // returns an absl::Status.
  template <typename Request, typename Response, typename Handler>
  void ServeUnary(const char* method, size_t max_request_bytes, Handler handler) {
    const auto* service = google::protobuf::DescriptorPool::generated_pool()->FindServiceByName(
        Outer::service_full_name());
    const int index = service->FindMethodByName(method)->index();
    UnaryBody body = [handler = std::move(handler)](RpcScope& rpc, const std::string& bytes,
                                                    std::string* serialized) -> absl::Status {
      Request request;
      if (!request.ParseFromString(bytes)) {
        return DescribeParseFailure(Request::descriptor(), bytes);
      }
      Response response;
      absl::Status status = handler(rpc, request, &response);
      if (status.ok()) *serialized = response.SerializeAsString();
      return status;
    };
    ApiContext* ctx = ctx_;
    this->MarkMethodStreamed(
        index, new grpc::internal::StreamedUnaryHandler<grpc::ByteBuffer, grpc::ByteBuffer>(
                   [ctx, method, max_request_bytes, body = std::move(body)](
                       grpc::ServerContext* context, RawUnaryStreamer* stream) {
                     return ServeStreamedUnary(ctx, method, Request::descriptor(),
                                               max_request_bytes, context, stream, body);
                   }));
  }

  ApiContext* ctx_;
};

// Blocks a stream handler until `notifier` moves past `seen` or `poll` passes, waking every
// cancel_check_interval to notice a departed client. Returns false when the stream should end
// (client gone or server shutting down), true when the caller should look at the store again.
bool WaitForChangeOrPoll(const ApiContext& ctx, Notifier& notifier, uint64_t seen,
                         absl::Duration poll, grpc::ServerContextBase* context);

}  // namespace ptxbench::api

#endif  // PTXBENCH_SERVER_API_RPC_H_
