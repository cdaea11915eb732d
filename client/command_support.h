// What the client's verbs that talk to the server share: the connection of a verb, errors of
// failed calls in words with a hint and the exit code they deserve, retries of calls a
// restarting server fails, and JSON output of messages. Declaring and parsing a verb and
// reading its input files are in client/verb.h, which links no gRPC.
#ifndef PTXBENCH_CLIENT_COMMAND_SUPPORT_H_
#define PTXBENCH_CLIENT_COMMAND_SUPPORT_H_

#include <functional>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "client/verb.h"
#include "common/cli_args.h"
#include "proto/dial.h"

namespace google::protobuf {
class Message;
}  // namespace google::protobuf

namespace grpc {
class ClientContext;
class Status;
}  // namespace grpc

namespace ptxbench::client {

// The connection of a verb that connects; a bad --token-file or --tls-ca is the error.
absl::StatusOr<Connection> ConnectionOf(const ParsedArgs& args, std::ostream& err);

// A failed call in words, with a hint for the usual causes, and the exit code it deserves:
// 2 for what the caller can fix (bad input, unknown id, refused token), 3 for infrastructure
// (server unreachable or restarting, timeouts).
struct CallFailure {
  std::string message;
  int exit_code = 3;
};
CallFailure DescribeCallFailure(const grpc::Status& status, const Connection& connection);
// The gRPC code's name ("UNAVAILABLE") rather than its number.
std::string GrpcCodeName(int code);

// Whether a call that failed with `status` may succeed when sent again unchanged: the server
// was unreachable or restarting (UNAVAILABLE), a server stopping gracefully cancelled it
// (CANCELLED: ServerContext calls cut by Shutdown), or it ran out of time.
bool RetryableCall(const grpc::Status& status);

struct CallRetry {
  int max_attempts = 6;
  absl::Duration first_wait = absl::Milliseconds(500);
  absl::Duration max_wait = absl::Seconds(10);
  // False: only the server's "retry shortly" refusals are retried here; UNAVAILABLE and
  // CANCELLED go back to the caller at once (`ptxbench run` retries those itself, per turn).
  bool retry_unavailable = true;
  // Non-zero: no retry is started that would begin later than this after the first attempt
  // (the deadline of the caller's whole operation).
  absl::Duration budget = absl::ZeroDuration();
};
// Calls `call` with a fresh context (the caller authorises it and sets its deadline) until
// it succeeds, fails with a status that is neither RetryableCall nor a refusal the server
// marked "retry shortly" (RESOURCE_EXHAUSTED with the proto/dial.h kRetryPushbackMetadata
// trailer: a full admission lane, too many token lookups at once), or `retry.max_attempts`
// are spent; waits with jittered exponential backoff between attempts, at least the server's
// pushback, and reports each retry on `notes` ("ptxbench submit: UNAVAILABLE ...; retry 2 of 5
// in 1.2 s").
grpc::Status CallWithRetries(const std::function<grpc::Status(grpc::ClientContext*)>& call,
                             const CallRetry& retry, const std::string& what, std::ostream& notes);

// A fresh idempotency key ("ptxbench-<32 hex digits>" from /dev/urandom): a Submit retried
// after a lost reply with the same key returns the submission it created.
std::string NewIdempotencyKey();
// Whether `id` is a submission id (a UUID, 8-4-4-4-12 hex digits).
bool IsSubmissionId(const std::string& id);

std::string ToJson(const google::protobuf::Message& message);

}  // namespace ptxbench::client

#endif  // PTXBENCH_CLIENT_COMMAND_SUPPORT_H_
