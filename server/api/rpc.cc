#include "server/api/rpc.h"

#include <openssl/rand.h>

#include <algorithm>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status.h"
#include "proto/dial.h"
#include "server/api/log_text.h"
#include "server/api/request_check.h"
#include "server/api/retry_pushback.h"
#include "server/store/store.h"
#include "spdlog/spdlog.h"

namespace ptxbench::api {
namespace {

constexpr char kPublicPayload[] = "type.ptxbench.dev/public-message";

std::string CodeText(absl::StatusCode code) {
  return absl::StatusCodeToString(code);  // "OK", "INVALID_ARGUMENT", ...
}

bool IsServerSide(absl::StatusCode code) {
  return code == absl::StatusCode::kUnavailable || code == absl::StatusCode::kInternal ||
         code == absl::StatusCode::kUnknown || code == absl::StatusCode::kDataLoss;
}

bool IsPublic(const absl::Status& status) { return status.GetPayload(kPublicPayload).has_value(); }

// A short random id that ties a caller's "internal error" to the server's log line.
std::string IncidentId() {
  unsigned char bytes[4] = {};
  RAND_bytes(bytes, sizeof(bytes));
  return absl::StrFormat("%02x%02x%02x%02x", bytes[0], bytes[1], bytes[2], bytes[3]);
}

std::string AuthorizationOf(grpc::ServerContextBase* context) {
  const auto& metadata = context->client_metadata();
  auto it = metadata.find("authorization");
  return it == metadata.end() ? std::string() : std::string(it->second.data(), it->second.size());
}

}  // namespace

absl::Status PublicStatus(absl::Status status) {
  if (!status.ok()) status.SetPayload(kPublicPayload, absl::Cord("1"));
  return status;
}

absl::Status StoreUnavailable() {
  return PublicStatus(absl::UnavailableError(
      "the service's database is unavailable; retry in a few seconds (nothing of this call was "
      "stored)"));
}

grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  // absl::StatusCode and grpc::StatusCode share their numbering (both follow
  // google.rpc.Code), so the cast is exact.
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()), std::string(status.message()));
}

absl::StatusOr<Caller> RpcScope::Authenticate(std::initializer_list<Role> roles) {
  auto caller = ctx_->auth->Authenticate(AuthorizationOf(context_), context_->peer());
  if (!caller.ok()) return caller.status();
  auto allowed = RequireRole(*caller, roles);
  if (!allowed.ok()) return allowed;
  return caller;
}

grpc::Status RpcScope::Finish(const absl::Status& status) {
  const double seconds = absl::ToDoubleSeconds(absl::Now() - start_);
  if (ctx_->metrics != nullptr) ctx_->metrics->RecordRpc(method_, CodeText(status.code()), seconds);
  if (std::optional<absl::Duration> after = RetryShortlyAfter(status)) {
    // The client sends the same call again after this long (proto/dial.h).
    context_->AddTrailingMetadata(kRetryPushbackMetadata,
                                  std::to_string(absl::ToInt64Milliseconds(*after)));
  }
  const std::string code = CodeText(status.code());
  if (IsServerSide(status.code()) && !IsPublic(status)) {
    // The detail stays in the log: a store error names the database's user, host, port and
    // database (issue 12, "Low"), an internal one may quote SQL.
    const std::string incident = IncidentId();
    spdlog::error("rpc failed method={} code={} incident={} peer={} message={}", method_, code,
                  incident, LogQuoted(context_->peer()),
                  LogQuoted(std::string(status.message()), 2048));
    if (status.code() == absl::StatusCode::kUnavailable) return ToGrpcStatus(StoreUnavailable());
    if (store::IsCommitOutcomeUnknown(status)) {
      return grpc::Status(
          grpc::StatusCode::UNKNOWN,
          absl::StrCat("the database connection was lost while this call's change was being "
                       "committed, so it may or may not have taken effect; look before repeating "
                       "it (incident ",
                       incident, ")"));
    }
    return grpc::Status(
        static_cast<grpc::StatusCode>(status.code()),
        absl::StrCat("internal error (incident ", incident, "): the server logged the details"));
  }
  switch (status.code()) {
    case absl::StatusCode::kUnavailable:  // Retryable: the store is down or the server stops.
    case absl::StatusCode::kUnauthenticated:
    case absl::StatusCode::kPermissionDenied:
    case absl::StatusCode::kResourceExhausted:
      spdlog::warn("rpc refused method={} code={} peer={} message={}", method_, code,
                   LogQuoted(context_->peer()), LogQuoted(std::string(status.message())));
      break;
    default:
      break;
  }
  return ToGrpcStatus(status);
}

grpc::Status ServeStreamedUnary(ApiContext* ctx, const char* method,
                                const google::protobuf::Descriptor* request_type,
                                size_t max_request_bytes, grpc::ServerContext* context,
                                RawUnaryStreamer* stream, const UnaryBody& body) {
  RpcScope rpc(ctx, method, context);
  // Refusals on the headers alone: the request's bytes are never read for them.
  if (ctx->store_health != nullptr && !ctx->store_health->reachable()) {
    return rpc.Finish(StoreUnavailable());
  }
  Authenticator::LaneDecision lane = ctx->auth->Lane(AuthorizationOf(context), context->peer());
  if (!lane.refusal.ok()) return rpc.Finish(lane.refusal);
  absl::Status status;
  const bool admitted = ctx->admission->RunOnCaller(lane.lane, [&] {
    status = [&]() -> absl::Status {
      if (context->IsCancelled()) return absl::CancelledError("the caller went away");
      RETURN_IF_ERROR(ctx->auth->Authenticate(AuthorizationOf(context), context->peer()).status());
      grpc::ByteBuffer request;
      if (!stream->Read(&request)) {
        return absl::InvalidArgumentError(absl::StrCat(
            "request: no ", request_type->full_name(), " arrived, or it was larger than the ",
            kMaxReceiveMessageBytes, " bytes the server accepts"));
      }
      const size_t size = request.Length();
      if (size > max_request_bytes) {
        return absl::InvalidArgumentError(
            absl::StrCat("request: ", size, " bytes, more than any valid ",
                         request_type->full_name(), " can be (", max_request_bytes, " bytes)"));
      }
      std::vector<grpc::Slice> slices;
      if (!request.Dump(&slices).ok()) return absl::InvalidArgumentError("request: unreadable");
      std::string bytes;
      bytes.reserve(size);
      for (const auto& slice : slices) {
        bytes.append(reinterpret_cast<const char*>(slice.begin()), slice.size());
      }
      request.Clear();
      RETURN_IF_ERROR(CheckRequestText(request_type, bytes));
      std::string response;
      RETURN_IF_ERROR(body(rpc, bytes, &response));
      grpc::Slice slice(response);  // Copies: grpc::Slice takes no std::string&&.
      if (!stream->Write(grpc::ByteBuffer(&slice, 1))) {
        return absl::CancelledError("the caller went away");
      }
      return absl::OkStatus();
    }();
  });
  if (!admitted) {
    // A full lane drains at the pace of its running calls (milliseconds each, a Submit's
    // transaction the longest): worth the same call again shortly, not a failure of it.
    status = RetryShortly(
        absl::ResourceExhaustedError(
            lane.lane.empty()
                ? "too many calls with tokens this server has not verified yet are waiting; "
                  "retry shortly"
                : absl::StrCat("too many calls of ", lane.lane, " are waiting; retry shortly")),
        absl::Milliseconds(500));
  }
  return rpc.Finish(status);
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
