// Reads a PTX module as text: its kernels (.entry) with parameter sizes and launch bounds, and
// the static count of target-family instructions per function. Only instructions count:
// comments, string operands of directives and names are skipped, so a kernel that merely
// mentions "wgmma.mma_async" in a comment has none.
#ifndef PTXBENCH_WORKER_ENGINE_PTX_SCAN_H_
#define PTXBENCH_WORKER_ENGINE_PTX_SCAN_H_

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "worker/engine/kernel_info.h"

namespace ptxbench {

struct PtxScan {
  std::string target;                        // The .target directive's first operand ("sm_90a").
  std::vector<KernelSignature> kernels;      // Every .entry, in order; resources not filled.
  std::map<std::string, int> family_counts;  // Family name -> instructions in the module.
  // Function (.entry or .func) name -> family name -> count.
  std::map<std::string, std::map<std::string, int>> family_counts_by_function;
};

PtxScan ScanPtx(std::string_view ptx);

// The instruction mnemonics of a PTX module in order (predicates, operands and labels removed):
// {"mov.u32", "wgmma.fence.sync.aligned", ...}. Exposed for tests and diagnostics.
std::vector<std::string> PtxMnemonics(std::string_view ptx);

// The same for a piece of a function body, such as the one PTX line nvdisasm -gp names for a
// SASS instruction ("@%p1 bra $L__BB0_2;", "{ .reg .pred p; setp.ne.b32 p, %r1, 0; wgmma...}"):
// every statement is taken as an instruction, whatever braces the piece opens or closes.
std::vector<std::string> PtxFragmentMnemonics(std::string_view fragment);

}  // namespace ptxbench

#endif  // PTXBENCH_WORKER_ENGINE_PTX_SCAN_H_
