// Limits of the wire contract that a sender must know as well as the server: a request over
// one is refused whole, so a worker checks before it sends.
#ifndef PTXBENCH_PROTO_WIRE_LIMITS_H_
#define PTXBENCH_PROTO_WIRE_LIMITS_H_

#include <cstddef>

namespace ptxbench::wire {

// A CompileArtifact in CompleteRequest (worker.proto): its cubin and PTX together, and its
// compile event. The reference GEMM's module is ~120 KiB of cubin and PTX
// (worker/engine/compile_cache.h), so 1 MiB is 8x room; with the compile job's verdict (one
// stage detail and the report, each stored cut at 256 KiB) a Complete stays under 2 MiB, half
// of the 4 MiB that Complete may be (server/api/rpc.h), and a verdict is never refused for
// the artifact beside it. A larger module is not sent: the GPU worker compiles itself.
inline constexpr size_t kMaxArtifactModuleBytes = size_t{1} << 20;
inline constexpr size_t kMaxArtifactEventBytes = size_t{256} << 10;

}  // namespace ptxbench::wire

#endif  // PTXBENCH_PROTO_WIRE_LIMITS_H_
