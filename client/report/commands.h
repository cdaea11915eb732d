// The `ptxbench report` and `ptxbench export` verbs (docs/client.md).
#ifndef PTXBENCH_CLIENT_REPORT_COMMANDS_H_
#define PTXBENCH_CLIENT_REPORT_COMMANDS_H_

#include <ostream>
#include <string>
#include <vector>

namespace ptxbench::client {

int ReportCommand(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);
int ExportCommand(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace ptxbench::client

#endif  // PTXBENCH_CLIENT_REPORT_COMMANDS_H_
