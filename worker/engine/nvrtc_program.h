// The one wrapper around NVRTC (nvrtc.h appears only in nvrtc_program.cc).
#ifndef PTXBENCH_WORKER_ENGINE_NVRTC_PROGRAM_H_
#define PTXBENCH_WORKER_ENGINE_NVRTC_PROGRAM_H_

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace ptxbench {

struct NvrtcOutput {
  bool ok = false;         // False: the source did not compile (or was cancelled); see log.
  bool timed_out = false;  // Cancelled because it ran past the time limit.
  std::string log;         // NVRTC's program log, unfiltered.
  std::string ptx;         // Set when ok.
};

// Compiles CUDA C++ to PTX. `headers` are the only files #include can name (the caller has
// checked the directives); `options` are passed as they are. A failure of the source is data
// (ok=false); a failure of NVRTC itself (out of memory, missing builtins library, a rejected
// option) is an error status.
absl::StatusOr<NvrtcOutput> CompileToPtx(const std::string& source, const std::string& program_name,
                                         const std::map<std::string, std::string>& headers,
                                         const std::vector<std::string>& options,
                                         double max_seconds);

// "13.0".
std::string NvrtcVersion();

// Loads NVRTC's builtins library (libnvrtc-builtins.so.MAJOR.MINOR, which NVRTC otherwise opens
// at its first compile) into this process, once, so that a compile in the jail (compile_jail.h),
// where no library file exists, finds it loaded. InternalError when it cannot be found.
absl::Status PreloadNvrtcBuiltins();

}  // namespace ptxbench

#endif  // PTXBENCH_WORKER_ENGINE_NVRTC_PROGRAM_H_
