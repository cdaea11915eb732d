// `ptxbench eval` (local mode): every stage of one evaluation on this machine's GPU, printed as
// a table or JSON. Without a GPU (or with a GPU of another arch) only the compile stage runs and
// the output says plainly that the runtime stages were skipped and why.
//
//   ptxbench eval --task ID [--arch sm_90a] [--json] [--tasks-dir DIR] [--plan FILE]
//                 [--language cuda|ptx] [--gpu N] [--compile-only] [--keep-work-dir] SOURCE
//
// Exit codes (as every ptxbench verb): 0 only for a passing verdict (or, with --compile-only,
// a clean compile), 1 another verdict, 2 usage or input error, 3 infrastructure failure.
#ifndef PTXBENCH_WORKER_ENGINE_GPU_LOCAL_EVAL_H_
#define PTXBENCH_WORKER_ENGINE_GPU_LOCAL_EVAL_H_

#include <ostream>
#include <string>
#include <vector>

namespace ptxbench::engine {

// `args` are the verb's arguments (after "eval").
int RunLocalEval(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace ptxbench::engine

#endif  // PTXBENCH_WORKER_ENGINE_GPU_LOCAL_EVAL_H_
