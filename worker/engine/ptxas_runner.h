// Runs the ptxas binary of the CUDA toolkit on one PTX module, as a child process in a private
// temporary folder.
//
// Why not nvJitLink: nvJitLink assembles PTX as relocatable code, and ptxas then ignores
// setmaxnreg "to maintain compatibility across compilation units" (advisory C7504, measured with
// CUDA 13.0 on this task's reference sm_90a GEMM: 154 registers for every warpgroup instead of
// the 40/232 split the kernel asks for). Whole-program ptxas honours setmaxnreg, as nvcc does,
// so the cubin we time is the one the kernel's author would build. A child process can also be
// killed at the deadline, which an in-process library call cannot.
#ifndef PTXBENCH_WORKER_ENGINE_PTXAS_RUNNER_H_
#define PTXBENCH_WORKER_ENGINE_PTXAS_RUNNER_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace ptxbench {

struct PtxasOutput {
  bool ok = false;         // False: ptxas refused the PTX (or was killed); see log.
  bool timed_out = false;  // Killed at the deadline.
  // stdout and stderr together: "ptxas info : ..." lines with -v, errors naming
  // "submission.ptx, line N".
  std::string log;
  std::string cubin;  // Set when ok.
};

// The ptxas used: $PTXBENCH_PTXAS when set, else the toolkit's, found at build time.
std::string PtxasPath();

// Assembles `ptx` for `arch` ("sm_90a") with `options` ("-lineinfo", "-v", ...). A refusal of
// the PTX is data (ok=false); a ptxas that cannot be started, or a failing file system, is an
// error status.
absl::StatusOr<PtxasOutput> RunPtxas(const std::string& ptx, const std::string& arch,
                                     const std::vector<std::string>& options, double max_seconds,
                                     size_t max_output_bytes);

// "13.0.88", from `ptxas --version`; InternalError when ptxas cannot be run.
absl::StatusOr<std::string> PtxasVersion();

}  // namespace ptxbench

#endif  // PTXBENCH_WORKER_ENGINE_PTXAS_RUNNER_H_
