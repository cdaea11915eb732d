// The `ptxbench` command line: verbs submit, watch, cancel, tasks, suite, eval, run, report and
// export (the table in cli.cc). main.cc only calls RunCli.
#ifndef PTXBENCH_CLIENT_CLI_H_
#define PTXBENCH_CLIENT_CLI_H_

#include <ostream>
#include <string>
#include <vector>

#include "client/exit_codes.h"

namespace ptxbench::client {

// Runs one command line (without the program name); returns its exit code (exit_codes.h).
int RunCli(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace ptxbench::client

#endif  // PTXBENCH_CLIENT_CLI_H_
