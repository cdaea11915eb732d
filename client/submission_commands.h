// `ptxbench submit`, `watch`, `tasks` and `cancel`: one kernel to the server, its stage events
// back; the server's tasks; cancelling a submission.
#ifndef PTXBENCH_CLIENT_SUBMISSION_COMMANDS_H_
#define PTXBENCH_CLIENT_SUBMISSION_COMMANDS_H_

#include <ostream>
#include <string>
#include <vector>

namespace ptxbench::client {

int SubmitCommand(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);
int WatchCommand(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);
int TasksCommand(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);
int CancelCommand(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace ptxbench::client

#endif  // PTXBENCH_CLIENT_SUBMISSION_COMMANDS_H_
