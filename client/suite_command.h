// `ptxbench suite`: every reference solution and decoy of every task, submitted to a server,
// with the verdicts checked against the tasks' expectations and printed as one table. The
// quickstart's main job and the H200 validation use it.
#ifndef PTXBENCH_CLIENT_SUITE_COMMAND_H_
#define PTXBENCH_CLIENT_SUITE_COMMAND_H_

#include <ostream>
#include <string>
#include <vector>

namespace ptxbench::client {

int SuiteCommand(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

// The verdict a source must get when only the compile stage runs: failures the compile stage
// decides (compile_error, plan_invalid) stay; everything else becomes "compiled".
std::string ExpectedUnderCompileOnly(const std::string& expect);

}  // namespace ptxbench::client

#endif  // PTXBENCH_CLIENT_SUITE_COMMAND_H_
