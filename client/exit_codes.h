// The exit codes every `ptxbench` verb shares, so scripts can tell a failing kernel from a
// broken setup. A header of its own: the verb libraries (ptxbench_client_support and the ones
// above it) need the codes without the verb table of client/cli.h.
#ifndef PTXBENCH_CLIENT_EXIT_CODES_H_
#define PTXBENCH_CLIENT_EXIT_CODES_H_

namespace ptxbench::client {

inline constexpr int kExitPass = 0;            // The verdict passed (or the command succeeded).
inline constexpr int kExitVerdictFailed = 1;   // A verdict exists and it is not a pass.
inline constexpr int kExitUsage = 2;           // Bad flags or input; nothing was sent.
inline constexpr int kExitInfrastructure = 3;  // Server unreachable, RPC error, no verdict.

}  // namespace ptxbench::client

#endif  // PTXBENCH_CLIENT_EXIT_CODES_H_
