// `ptxbench run`: flags, the server (given or the embedded stack), the provider, the loop.
#ifndef PTXBENCH_CLIENT_RUN_RUN_COMMAND_H_
#define PTXBENCH_CLIENT_RUN_RUN_COMMAND_H_

#include <ostream>
#include <string>
#include <vector>

namespace ptxbench::client::run {

int RunCommand(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace ptxbench::client::run

#endif  // PTXBENCH_CLIENT_RUN_RUN_COMMAND_H_
