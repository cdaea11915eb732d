// Status conversion for CUDA calls, in the style of NVIDIA nvbench's NVBENCH_CUDA_CALL: the
// failing call is stringified with its file and line, so a log or verdict names exactly what
// failed ("cudaMalloc(&ptr, bytes) at worker/engine/gpu/runtime.cc:88: cudaErrorMemoryAllocation
// (out of memory)").
//
// Errors that a kernel causes and that poison the context (illegal address, trap, misaligned
// access, illegal instruction, launch failure) map to absl::StatusCode::kAborted, so callers
// can tell a kernel's fault (RUNTIME_ERROR verdict) from an infrastructure failure.
#ifndef PTXBENCH_WORKER_ENGINE_GPU_CUDA_CHECK_H_
#define PTXBENCH_WORKER_ENGINE_GPU_CUDA_CHECK_H_

#include <cuda.h>
#include <cuda_runtime_api.h>

#include <string>

#include "absl/status/status.h"
#include "common/status.h"

namespace ptxbench::gpu {

absl::Status CudaRuntimeStatus(cudaError_t error, const char* expression, const char* file,
                               int line);
absl::Status CudaDriverStatus(CUresult error, const char* expression, const char* file, int line);

// True for error codes through which a kernel poisons its context (sticky errors).
bool IsKernelFault(int cuda_error_code);

}  // namespace ptxbench::gpu

#define PTXBENCH_CUDA_TRY(call)                                                                   \
  do {                                                                                            \
    const cudaError_t ptxbench_cuda_error_ = (call);                                              \
    if (ptxbench_cuda_error_ != cudaSuccess) {                                                    \
      return ::ptxbench::gpu::CudaRuntimeStatus(ptxbench_cuda_error_, #call, __FILE__, __LINE__); \
    }                                                                                             \
  } while (false)

#define PTXBENCH_CU_TRY(call)                                                                  \
  do {                                                                                         \
    const CUresult ptxbench_cu_error_ = (call);                                                \
    if (ptxbench_cu_error_ != CUDA_SUCCESS) {                                                  \
      return ::ptxbench::gpu::CudaDriverStatus(ptxbench_cu_error_, #call, __FILE__, __LINE__); \
    }                                                                                          \
  } while (false)

#endif  // PTXBENCH_WORKER_ENGINE_GPU_CUDA_CHECK_H_
