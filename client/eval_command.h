// `ptxbench eval` (local mode): every stage of one evaluation on this machine's GPU, no server,
// printed as a table or JSON. Without a GPU (or with a GPU of another arch) only the compile
// stage runs and the output says plainly that the runtime stages were skipped and why.
//
//   ptxbench eval --task ID [--arch sm_90a] [--json] [--tasks-dir DIR] [--plan FILE]
//                 [--language cuda|ptx] [--gpu N] [--compile-only] [--keep-work-dir] SOURCE
//
// Exit codes (as every ptxbench verb): 0 only for a passing verdict (or, with --compile-only,
// a clean compile), 1 another verdict, 2 usage or input error, 3 infrastructure failure.
// The evaluation is the engine's Evaluate() (worker/engine/evaluate.h), as the worker runs it.
#ifndef PTXBENCH_CLIENT_EVAL_COMMAND_H_
#define PTXBENCH_CLIENT_EVAL_COMMAND_H_

#include <ostream>
#include <string>
#include <vector>

namespace ptxbench::client {

// `args` are the verb's arguments (after "eval").
int EvalCommand(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace ptxbench::client

#endif  // PTXBENCH_CLIENT_EVAL_COMMAND_H_
