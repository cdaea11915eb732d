#include "client/cli.h"

#include <functional>
#include <map>

#include "client/command_support.h"
#include "client/eval_command.h"
#include "client/report/commands.h"
#include "client/run/run_command.h"
#include "client/submission_commands.h"
#include "client/suite_command.h"
#include "common/build_info.h"

namespace ptxbench::client {
namespace {

using Command = std::function<int(const std::vector<std::string>&, std::ostream&, std::ostream&)>;

const char kUsage[] =
    "usage: ptxbench VERB [flags] [args]      (ptxbench VERB --help: the verb's flags)\n"
    "verbs:\n"
    "  tasks    list the server's tasks, or print one task's prompt (--prompt ID)\n"
    "  submit   send a kernel for evaluation (--wait streams its stages)\n"
    "  watch    follow a submission's stage events until its verdict\n"
    "  cancel   cancel a submission that has no verdict yet\n"
    "  suite    submit every reference solution and decoy of the tasks; check their verdicts\n"
    "  eval     evaluate a kernel on this machine's GPU, no server (compile only without a GPU)\n"
    "  run      let a model write kernels over several turns with the verdicts as feedback\n"
    "  report   TIC rates, fast_p, speedups and tokens of trajectory files (table, md, html)\n"
    "  export   fine-tuning JSONL (kernelgen or fixit) from trajectory files\n"
    "  version  print the harness version, commit and CUDA toolkit (also --version)\n"
    "the server is --server HOST:PORT or PTXBENCH_SERVER (default 127.0.0.1:50051); the token\n"
    "is --token-file FILE or PTXBENCH_TOKEN_FILE (or PTXBENCH_TOKEN)\n"
    "exit codes: 0 pass, 1 verdict not a pass, 2 usage or input error, 3 infrastructure\n";

}  // namespace

int RunCli(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  static const auto* commands = new std::map<std::string, Command>{
      {"submit", SubmitCommand}, {"watch", WatchCommand},   {"cancel", CancelCommand},
      {"tasks", TasksCommand},   {"suite", SuiteCommand},   {"eval", EvalCommand},
      {"report", ReportCommand}, {"export", ExportCommand}, {"run", run::RunCommand},
  };
  if (args.empty() || args[0] == "help" || args[0] == "--help" || args[0] == "-h") {
    // `ptxbench help VERB` is `ptxbench VERB --help`.
    if (args.size() == 2 && args[0] == "help" && commands->count(args[1]) > 0) {
      return commands->at(args[1])({"--help"}, out, err);
    }
    (args.empty() ? err : out) << kUsage;
    return args.empty() ? kExitUsage : kExitPass;
  }
  if (args[0] == "--version" || args[0] == "version") {
    out << VersionLine("ptxbench") << "\n";
    return kExitPass;
  }
  auto it = commands->find(args[0]);
  if (it == commands->end()) {
    err << "ptxbench: unknown verb '" << args[0] << "'\n" << kUsage;
    return kExitUsage;
  }
  return it->second(std::vector<std::string>(args.begin() + 1, args.end()), out, err);
}

}  // namespace ptxbench::client
