// Parses ptxas's -v output: per-function resource lines and advisory diagnostics. The format,
// as produced by the ptxas binary of CUDA 13.0 for sm_90a and sm_100a:
//
//   ptxas info    : Compiling entry function 'gemm' for 'sm_90a'
//   ptxas info    : Function properties for gemm
//       0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
//   ptxas info    : Used 168 registers, used 16 barriers, 4096 bytes smem
//   ptxas info    : (C7511) Potential Performance Loss: wgmma.mma_async instructions are
//                   serialized due to ... in the function 'gemm'
//
// The same lines inside nvJitLink's -verbose log carry a "ptxas         ." prefix on the stack
// line and are followed by the linker's summary ("info : used 30 registers, ..., 5120 bytes
// smem"), which counts the 1 KB of shared memory sm_90 reserves per block; ptxas's figures are
// preferred, and the summary only fills in functions ptxas did not describe. Both forms parse.
#ifndef PTXBENCH_WORKER_ENGINE_PTXAS_INFO_H_
#define PTXBENCH_WORKER_ENGINE_PTXAS_INFO_H_

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "worker/engine/kernel_info.h"

namespace ptxbench {

struct PtxasInfo {
  std::map<std::string, KernelResources> resources;  // By function name.
  // Warnings and coded advisories ("(C7511) Potential Performance Loss: ..."), one per line,
  // without the "ptxas info    : " prefix.
  std::vector<std::string> diagnostics;
};

PtxasInfo ParsePtxasInfo(std::string_view log);

}  // namespace ptxbench

#endif  // PTXBENCH_WORKER_ENGINE_PTXAS_INFO_H_
