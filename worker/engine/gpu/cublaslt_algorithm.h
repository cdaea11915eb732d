#ifndef PTXBENCH_WORKER_ENGINE_GPU_CUBLASLT_ALGORITHM_H_
#define PTXBENCH_WORKER_ENGINE_GPU_CUBLASLT_ALGORITHM_H_

// Private to the two cuBLASLt wrappers (cublaslt_baseline.cc, cublaslt_fp8_baseline.cc): the
// only files that may see cublasLt.h.
#include <cublasLt.h>

#include "nlohmann/json.hpp"

namespace ptxbench::gpu {

// What tells two heuristic results apart in the audit report (and a cached choice from a
// changed library): the algorithm's id, tile, stages, split-K, swizzle and cluster shape as
// cuBLASLt reports them; missing attributes are left out.
nlohmann::json CublasLtAlgorithmConfig(const cublasLtMatmulAlgo_t& algo);

}  // namespace ptxbench::gpu

#endif  // PTXBENCH_WORKER_ENGINE_GPU_CUBLASLT_ALGORITHM_H_
