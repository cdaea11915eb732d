// The input generator of builtin_kernels.cu, on the CPU (multi-threaded). Same counter-based
// stream and formulas; the float math of the host library differs from the device's in the
// last bits, so values agree to within a bf16 rounding step, not bit for bit (block_scale,
// fp8_normal, tensor_descale and the integer distributions are built from bits alone and agree
// exactly). Used where no
// kernel of ours may run before the submission's (the instrumented run's fallback, see
// evaluator.cc) and by tests of the stream's statistics.
#ifndef PTXBENCH_WORKER_ENGINE_GPU_HOST_GENERATE_H_
#define PTXBENCH_WORKER_ENGINE_GPU_HOST_GENERATE_H_

#include <cstdint>

#include "worker/engine/gpu/philox.h"

namespace ptxbench::gpu {

// dtype codes as BuiltinDType: 0 bf16, 1 fp16, 2 fp32, 3 fp8 e4m3, 4 int32. `args` carries the
// parameters of kDistPagePermutation / kDistLengthLadder (int32 tensors only).
void HostGenerate(void* out, uint64_t count, int dtype, int distribution, uint64_t seed,
                  uint32_t tensor_index, int threads = 0, const IndexDistributionArgs& args = {});

uint16_t FloatToBf16(float value);
uint16_t FloatToHalf(float value);
uint8_t FloatToE4M3(float value);

}  // namespace ptxbench::gpu

#endif  // PTXBENCH_WORKER_ENGINE_GPU_HOST_GENERATE_H_
