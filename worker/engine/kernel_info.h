// What the compiled module says about each kernel: its parameters (from the PTX .entry
// declaration) and its resources (from ptxas). The compile stage produces it; launch-plan
// validation checks the plan's arguments and sizes against it.
#ifndef PTXBENCH_WORKER_ENGINE_KERNEL_INFO_H_
#define PTXBENCH_WORKER_ENGINE_KERNEL_INFO_H_

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"

namespace ptxbench {

struct KernelParameter {
  std::string name;        // PTX parameter name, e.g. "gemm_param_0".
  int64_t size_bytes = 0;  // e.g. 8 for .u64, 128 for ".align 64 .b8 x[128]".
  int64_t alignment = 0;   // Explicit .align, else the element size.
};

// Resource usage as ptxas reports it for one kernel.
struct KernelResources {
  int registers = 0;
  int barriers = 0;
  int64_t shared_bytes = 0;  // Static shared memory declared by the kernel.
  int64_t spill_store_bytes = 0;
  int64_t spill_load_bytes = 0;
  int64_t stack_frame_bytes = 0;
  int64_t constant_bytes = 0;  // cmem[0]: the parameter bank and compiler constants.
};

struct KernelSignature {
  std::string name;  // The .entry name; extern "C" kernels keep their source name.
  std::vector<KernelParameter> parameters;
  // .maxntid / .reqntid of the entry (from __launch_bounds__ or PTX); 0 when absent.
  std::array<int64_t, 3> max_threads = {0, 0, 0};
  std::array<int64_t, 3> required_threads = {0, 0, 0};
  bool has_resources = false;  // False when ptxas reported nothing for this kernel.
  KernelResources resources;
};

nlohmann::json ToJson(const KernelSignature& kernel);

}  // namespace ptxbench

#endif  // PTXBENCH_WORKER_ENGINE_KERNEL_INFO_H_
