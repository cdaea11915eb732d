#include "client/command_support.h"

#include <google/protobuf/util/json_util.h>
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <cctype>
#include <random>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "client/exit_codes.h"
#include "common/random.h"

namespace ptxbench::client {
absl::StatusOr<Connection> ConnectionOf(const ParsedArgs& args, std::ostream& err) {
  return ConnectionFromFlags(args, err);
}

std::string GrpcCodeName(int code) {
  static const char* const kNames[] = {"OK",
                                       "CANCELLED",
                                       "UNKNOWN",
                                       "INVALID_ARGUMENT",
                                       "DEADLINE_EXCEEDED",
                                       "NOT_FOUND",
                                       "ALREADY_EXISTS",
                                       "PERMISSION_DENIED",
                                       "RESOURCE_EXHAUSTED",
                                       "FAILED_PRECONDITION",
                                       "ABORTED",
                                       "OUT_OF_RANGE",
                                       "UNIMPLEMENTED",
                                       "INTERNAL",
                                       "UNAVAILABLE",
                                       "DATA_LOSS",
                                       "UNAUTHENTICATED"};
  if (code >= 0 && code < static_cast<int>(sizeof(kNames) / sizeof(kNames[0]))) {
    return kNames[code];
  }
  return absl::StrCat("code ", code);
}

CallFailure DescribeCallFailure(const grpc::Status& status, const Connection& connection) {
  const std::string& address = connection.dial.address;
  const std::string said =
      absl::StrCat(status.error_message(), " (", GrpcCodeName(status.error_code()), ")");
  switch (status.error_code()) {
    case grpc::StatusCode::UNAVAILABLE:
      return {absl::StrCat("cannot reach the server at ", address, ": ", said,
                           "\nhint: is ptxbench-server running at ", address,
                           "? set --server or PTXBENCH_SERVER",
                           connection.dial.tls ? "; check --tls-ca" : ""),
              kExitInfrastructure};
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      return {absl::StrCat("the server at ", address, " did not answer in time: ", said),
              kExitInfrastructure};
    case grpc::StatusCode::CANCELLED:
      return {absl::StrCat("the server at ", address, " cancelled the call (stopping?): ", said),
              kExitInfrastructure};
    case grpc::StatusCode::UNAUTHENTICATED:
      return {absl::StrCat("the server refused the token: ", said,
                           "\nhint: pass --token-file FILE or set PTXBENCH_TOKEN_FILE"),
              kExitUsage};
    case grpc::StatusCode::PERMISSION_DENIED:
      return {absl::StrCat("the token may not do this: ", said), kExitUsage};
    case grpc::StatusCode::INVALID_ARGUMENT:
    case grpc::StatusCode::NOT_FOUND:
    case grpc::StatusCode::ALREADY_EXISTS:
    case grpc::StatusCode::FAILED_PRECONDITION:
    case grpc::StatusCode::OUT_OF_RANGE:
      return {said, kExitUsage};
    case grpc::StatusCode::RESOURCE_EXHAUSTED:
      return {absl::StrCat("the server refused for now (a limit): ", said), kExitInfrastructure};
    default:
      return {absl::StrCat("the call failed: ", said), kExitInfrastructure};
  }
}

bool RetryableCall(const grpc::Status& status) {
  return status.error_code() == grpc::StatusCode::UNAVAILABLE ||
         status.error_code() == grpc::StatusCode::CANCELLED;
}

grpc::Status CallWithRetries(const std::function<grpc::Status(grpc::ClientContext*)>& call,
                             const CallRetry& retry, const std::string& what, std::ostream& notes) {
  thread_local std::mt19937_64 random(std::random_device{}());
  const absl::Time start = absl::Now();
  absl::Duration wait = retry.first_wait;
  for (int attempt = 1;; ++attempt) {
    std::optional<absl::Duration> pushback;
    grpc::Status status;
    {
      grpc::ClientContext context;
      status = call(&context);
      pushback = RetryPushback(context);
    }
    const bool refused_for_now =
        status.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED && pushback.has_value();
    const bool retryable = refused_for_now || (retry.retry_unavailable && RetryableCall(status));
    if (status.ok() || !retryable || attempt >= retry.max_attempts) return status;
    // Full jitter: clients that lost one server together do not come back together; the
    // server's pushback is a floor, jittered upwards for the same reason.
    absl::Duration sleep = wait * std::uniform_real_distribution<double>(0.5, 1.0)(random);
    if (pushback.has_value()) {
      sleep = std::max(sleep, *pushback * std::uniform_real_distribution<double>(1.0, 1.5)(random));
    }
    if (retry.budget > absl::ZeroDuration() && absl::Now() + sleep - start > retry.budget) {
      return status;
    }
    notes << absl::StrFormat("%s: %s (%s); retry %d of %d in %.1f s\n", what,
                             status.error_message(), GrpcCodeName(status.error_code()), attempt,
                             retry.max_attempts - 1, absl::ToDoubleSeconds(sleep));
    notes.flush();
    std::this_thread::sleep_for(absl::ToChronoNanoseconds(sleep));
    wait = std::min(wait * 2, retry.max_wait);
  }
}

std::string NewIdempotencyKey() {
  absl::StatusOr<std::string> hex = RandomHex(16);
  if (hex.ok()) return "ptxbench-" + *hex;
  // No getrandom(2) (a kernel before 3.17): the random device is the fallback, still unique
  // enough for one client's retries.
  std::random_device device;
  std::string key = "ptxbench-";
  for (int i = 0; i < 16; ++i) absl::StrAppendFormat(&key, "%02x", device() & 0xff);
  return key;
}

bool IsSubmissionId(const std::string& id) {
  if (id.size() != 36) return false;
  for (size_t i = 0; i < id.size(); ++i) {
    const bool dash = i == 8 || i == 13 || i == 18 || i == 23;
    if (dash ? id[i] != '-' : !std::isxdigit(static_cast<unsigned char>(id[i]))) return false;
  }
  return true;
}

std::string ToJson(const google::protobuf::Message& message) {
  std::string json;
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  options.add_whitespace = true;
  (void)google::protobuf::util::MessageToJsonString(message, &json, options);
  return json;
}

}  // namespace ptxbench::client
