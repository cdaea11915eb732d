// The one wrapper around nvJitLink (nvJitLink.h appears only in nvjitlink_linker.cc).
#ifndef PTXBENCH_WORKER_ENGINE_NVJITLINK_LINKER_H_
#define PTXBENCH_WORKER_ENGINE_NVJITLINK_LINKER_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace ptxbench {

struct LinkOutput {
  bool ok = false;        // False: ptxas or the linker refused the PTX; see error_log.
  std::string info_log;   // With -verbose: ptxas's resource lines and advisories.
  std::string error_log;  // ptxas errors ("Instruction 'wgmma.fence' not supported on ...").
  std::string cubin;      // Set when ok.
};

// Assembles and links one PTX module for `arch` ("sm_90a") with `options` ("-lineinfo",
// "-verbose", ...). A refusal of the PTX is data (ok=false); a failure of the library is an
// error status.
absl::StatusOr<LinkOutput> LinkPtx(const std::string& ptx, const std::string& module_name,
                                   const std::string& arch,
                                   const std::vector<std::string>& options);

// "13.0".
std::string NvJitLinkVersion();

}  // namespace ptxbench

#endif  // PTXBENCH_WORKER_ENGINE_NVJITLINK_LINKER_H_
