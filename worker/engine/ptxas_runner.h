// Runs the ptxas binary of the CUDA toolkit on one PTX module, as a child process.
//
// Why not nvJitLink: nvJitLink assembles PTX as relocatable code, and ptxas then ignores
// setmaxnreg "to maintain compatibility across compilation units" (advisory C7504, measured with
// CUDA 13.0 on this task's reference sm_90a GEMM: 154 registers for every warpgroup instead of
// the 40/232 split the kernel asks for). Whole-program ptxas honours setmaxnreg, as nvcc does,
// so the cubin we time is the one the kernel's author would build. A child process can also be
// killed at the deadline, which an in-process library call cannot.
//
// Compile() runs it inside the compile jail (compile_jail.h), not beside it: PTX has no include
// mechanism, but ptxas stat()s every path a `.file` directive names and writes the file's size
// and modification time into the cubin's line table (measured, CUDA 13.0: `.file 1
// "/etc/passwd"` put 1401, the file's size, into the cubin), and the cubin's SHA-256 goes back
// to the vendor. In the jail no such file exists.
//
// The child leads its own process group (killed as a group at the deadline), dies with its
// parent (PR_SET_PDEATHSIG), gets a fixed environment, no inherited descriptors, and inherits
// the caller's resource limits (the jail's memory cap).
#ifndef PTXBENCH_WORKER_ENGINE_PTXAS_RUNNER_H_
#define PTXBENCH_WORKER_ENGINE_PTXAS_RUNNER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace ptxbench {

struct PtxasOutput {
  bool ok = false;         // False: ptxas refused the PTX (or was killed); see log.
  bool timed_out = false;  // Killed at the deadline.
  int signal = 0;          // The signal that ended it, if one did.
  // stdout and stderr together: "ptxas info : ..." lines with -v, errors naming
  // "submission.ptx, line N".
  std::string log;
  std::string cubin;  // Set when ok.
  uint64_t peak_rss_bytes = 0;
};

struct PtxasRun {
  std::string ptx;
  std::string arch;                  // "sm_90a".
  std::vector<std::string> options;  // "-lineinfo", "-v", ...
  double max_seconds = 60;
  size_t max_output_bytes = 256 << 10;
  // Where submission.ptx and submission.cubin are written (ptxas's messages name the input by
  // this relative name, so no host path reaches the log); empty: a new folder under $TMPDIR,
  // removed after.
  std::string work_dir;
  std::string library_path;  // LD_LIBRARY_PATH of the child (in the jail); empty: none.
};

// The ptxas used: $PTXBENCH_PTXAS when set, else the toolkit's, found at build time.
std::string PtxasPath();

// Assembles the PTX. A refusal of the PTX is data (ok=false); a ptxas that cannot be started, or
// a failing file system, is an error status.
absl::StatusOr<PtxasOutput> RunPtxas(const PtxasRun& run);

// "13.0.88", from `ptxas --version`; InternalError when ptxas cannot be run.
absl::StatusOr<std::string> PtxasVersion();

}  // namespace ptxbench

#endif  // PTXBENCH_WORKER_ENGINE_PTXAS_RUNNER_H_
