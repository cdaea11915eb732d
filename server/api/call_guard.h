// A gRPC server interceptor over every call, for what no handler of ours sees:
//   - Streams that need no token (reflection's ServerReflectionInfo, the health service's
//     Watch) are capped in total: each open one holds a server thread or a watch slot for as
//     long as its peer keeps it open, and anyone who can connect may open them (issue 12,
//     "Medium": uncapped before). One over the cap is cancelled at once.
//   - A synchronous stream method of ours (Lease, WatchSubmission) whose request gRPC could
//     not parse (a string field that is not UTF-8) would answer INTERNAL with no message;
//     the reply becomes INVALID_ARGUMENT naming the request's text field. (The unary
//     methods parse their requests themselves, rpc.h.)
#ifndef PTXBENCH_SERVER_API_CALL_GUARD_H_
#define PTXBENCH_SERVER_API_CALL_GUARD_H_

#include <memory>

#include "grpcpp/support/server_interceptor.h"

namespace ptxbench::api {

// A reflection client (grpcurl) holds one stream per invocation; 32 lets a few operators
// work while bounding what strangers can hold.
inline constexpr int kMaxUnauthenticatedStreams = 32;

std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface> NewCallGuardFactory(
    int max_unauthenticated_streams = kMaxUnauthenticatedStreams);

}  // namespace ptxbench::api

#endif  // PTXBENCH_SERVER_API_CALL_GUARD_H_
