// Parses the info log that nvJitLink returns with -verbose: ptxas's per-function resource lines
// and its advisory diagnostics. The format, as produced by CUDA 13.0 for sm_90a and sm_100a:
//
//   ptxas info    : Compiling entry function 'gemm' for 'sm_90a'
//   ptxas info    : Function properties for gemm
//   ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
//   ptxas info    : Used 30 registers, used 1 barriers, 4096 bytes smem
//   ptxas info    : (C7511) Potential Performance Loss: wgmma.mma_async instructions are
//                   serialized due to ... in the function 'gemm'
//   info    : Function properties for 'gemm':
//   info    : used 30 registers, used 1 barriers, 0 stack, 5120 bytes smem, 552 bytes cmem[0], ...
//
// The linker's own summary ("info : used ...") counts the 1 KB of shared memory that sm_90
// reserves per block, so ptxas's figures are preferred; the summary only fills in kernels ptxas
// did not describe, and its constant-bank size.
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
