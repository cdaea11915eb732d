// The one way our programs open a gRPC channel to ptxbench-server and attach the bearer token:
// the client (`ptxbench`), the worker daemon, `ptxbench-server health` and the tests all call
// Dial and Authorize, so TLS, the CA file, keepalive, message limits and the User-Agent are
// defined once. What a connection is and its flags are in proto/connection.h, which links no
// gRPC.
#ifndef PTXBENCH_PROTO_DIAL_H_
#define PTXBENCH_PROTO_DIAL_H_

#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "proto/connection.h"

namespace grpc {
class Channel;
class ClientContext;
}  // namespace grpc

namespace ptxbench {

// A channel to `options.address`. INVALID_ARGUMENT for an empty address, NOT_FOUND for an
// unreadable CA file; connecting is lazy, so an unreachable server shows at the first call.
absl::StatusOr<std::shared_ptr<grpc::Channel>> Dial(const DialOptions& options);

// Adds `authorization: Bearer <token>` to a call (nothing for an empty token). Metadata rather
// than call credentials: gRPC refuses call credentials on plaintext channels, and loopback
// servers are plaintext.
void Authorize(grpc::ClientContext* context, const std::string& token);

// The trailer of a refusal that clears by itself within moments (server/api/retry_pushback.h:
// a full admission lane, too many lookups of unseen tokens at once): its value is how many
// milliseconds to wait before sending the same call again. Our own key, not gRPC's
// "grpc-retry-pushback-ms": the "grpc-" prefix is reserved to the transport.
inline constexpr char kRetryPushbackMetadata[] = "ptxbench-retry-pushback-ms";

// The wait a finished call's trailers ask for (kRetryPushbackMetadata), at most 60 s; nullopt
// when they ask for none or the value is not a number of milliseconds.
std::optional<absl::Duration> RetryPushback(const grpc::ClientContext& context);

}  // namespace ptxbench

#endif  // PTXBENCH_PROTO_DIAL_H_
