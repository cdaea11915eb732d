// The `ptxbench` command line: verbs submit, watch, cancel, tasks, suite, eval, run, report and
// export (the table in cli.cc). main.cc only calls RunCli.
#ifndef PTXBENCH_CLIENT_CLI_H_
#define PTXBENCH_CLIENT_CLI_H_

#include <ostream>
#include <string>
#include <vector>

namespace ptxbench::client {

// Exit codes shared by every verb, so scripts can tell a failing kernel from a broken setup.
inline constexpr int kExitPass = 0;            // The verdict passed (or the command succeeded).
inline constexpr int kExitVerdictFailed = 1;   // A verdict exists and it is not a pass.
inline constexpr int kExitUsage = 2;           // Bad flags or input; nothing was sent.
inline constexpr int kExitInfrastructure = 3;  // Server unreachable, RPC error, no verdict.

int RunCli(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace ptxbench::client

#endif  // PTXBENCH_CLIENT_CLI_H_
