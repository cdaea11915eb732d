#include "client/cli.h"

#include <functional>
#include <map>

#include "client/report/commands.h"
#include "client/run/run_command.h"
#include "client/submission_commands.h"
#include "client/suite_command.h"
#include "worker/engine/gpu/local_eval.h"

namespace ptxbench::client {
namespace {

using Command = std::function<int(const std::vector<std::string>&, std::ostream&, std::ostream&)>;

const char kUsage[] =
    "usage: ptxbench VERB [flags] [args]\n"
    "verbs:\n"
    "  tasks    list the server's tasks, or print one task's prompt (--prompt ID)\n"
    "  submit   send a kernel for evaluation (--wait streams its stages)\n"
    "  watch    follow a submission's stage events until its verdict\n"
    "  suite    submit every reference solution and decoy of the tasks; check their verdicts\n"
    "  eval     evaluate a kernel on this machine's GPU, no server (compile only without a GPU)\n"
    "  run      let a model write kernels over several turns with the verdicts as feedback\n"
    "  report   TIC rates, fast_p, speedups and tokens of trajectory files (table, md, html)\n"
    "  export   fine-tuning JSONL (kernelgen or fixit) from trajectory files\n"
    "exit codes: 0 pass, 1 verdict not a pass, 2 usage or input error, 3 infrastructure\n";

}  // namespace

int RunCli(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  static const auto* commands = new std::map<std::string, Command>{
      {"submit", SubmitCommand},
      {"watch", WatchCommand},
      {"tasks", TasksCommand},
      {"suite", SuiteCommand},
      {"eval", ::ptxbench::engine::RunLocalEval},
      {"report", ReportCommand},
      {"export", ExportCommand},
      {"run", run::RunCommand},
  };
  if (args.empty() || args[0] == "help" || args[0] == "--help" || args[0] == "-h") {
    (args.empty() ? err : out) << kUsage;
    return args.empty() ? kExitUsage : kExitPass;
  }
  auto it = commands->find(args[0]);
  if (it == commands->end()) {
    err << "ptxbench: unknown verb '" << args[0] << "'\n" << kUsage;
    return kExitUsage;
  }
  return it->second(std::vector<std::string>(args.begin() + 1, args.end()), out, err);
}

}  // namespace ptxbench::client
