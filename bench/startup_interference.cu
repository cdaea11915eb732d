// The noise side of the start-up interference benchmark (issue 16; `scripts/bench interference`
// on the GPU node, docs/measurement.md "What the next job's start-up costs the job measuring").
//
// A pipelined GPU worker starts the next job's processes while the current one measures
// (evaluate.cc RunStages: CUDA context, cudaMalloc, module loads, library handles; no kernel).
// This program repeats one kind of that start-up activity in a loop, launching no kernel of its
// own, so that an evaluation running beside it shows which kind slows the measuring process.
//
//   startup_interference MODE SECONDS        (ends early on SIGTERM, then prints its count)
//
// Built on the GPU node with the toolkit there (no CMake target: the build machine's CI has no
// GPU and nothing links it):
//   nvcc -O2 -arch=sm_90 bench/startup_interference.cu -lcublasLt -o startup_interference
#include <cublasLt.h>
#include <cuda_runtime.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace {

volatile sig_atomic_t g_stop = 0;

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

__global__ void NeverLaunched(float* p) {
  if (p != nullptr) p[threadIdx.x] = 1;
}

constexpr size_t kBigBytes = size_t{2} << 30;   // About a job's tensors and flush buffer.
constexpr size_t kSmallBytes = size_t{64} << 20;

// A cuBLASLt handle and the heuristic query for the GEMM task's shape: the library set-up a
// candidate process makes for its baseline (no matmul).
void LibrarySetUp() {
  cublasLtHandle_t handle = nullptr;
  cublasLtCreate(&handle);
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F);
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatrixLayoutCreate(&a, CUDA_R_16BF, 5120, 8192, 5120);
  cublasLtMatrixLayoutCreate(&b, CUDA_R_16BF, 5120, 7168, 5120);
  cublasLtMatrixLayoutCreate(&c, CUDA_R_16BF, 8192, 7168, 8192);
  cublasLtMatmulPreference_t pref = nullptr;
  cublasLtMatmulPreferenceCreate(&pref);
  cublasLtMatmulHeuristicResult_t results[8];
  int found = 0;
  cublasLtMatmulAlgoGetHeuristic(handle, op, a, b, c, c, pref, 8, results, &found);
  cublasLtMatmulPreferenceDestroy(pref);
  cublasLtMatrixLayoutDestroy(a);
  cublasLtMatrixLayoutDestroy(b);
  cublasLtMatrixLayoutDestroy(c);
  cublasLtMatmulDescDestroy(op);
  cublasLtDestroy(handle);
}

// One process's start-up and teardown: context, allocation, optional extras, reset.
void StartUpOnce(const std::string& mode) {
  cudaSetDevice(0);
  cudaFree(nullptr);  // Creates the context.
  void* p = nullptr;
  if (mode != "ctxonly") cudaMalloc(&p, kBigBytes);
  if (mode == "lt") LibrarySetUp();
  if (mode == "mod") {
    cudaFuncAttributes attributes;
    cudaFuncGetAttributes(&attributes, NeverLaunched);  // Loads this module (lazy loading).
  }
  cudaFree(p);
  cudaDeviceReset();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr,
                 "usage: startup_interference "
                 "cpu|ctx|ctxonly|lt|mod|idle|malloc|malloc64|paced SECONDS\n");
    return 2;
  }
  const std::string mode = argv[1];
  const double end = Now() + std::atof(argv[2]);
  std::signal(SIGTERM, [](int) { g_stop = 1; });
  const double t0 = Now();
  long iterations = 0;
  auto running = [&]() { return Now() < end && g_stop == 0; };
  if (mode == "cpu") {  // The CPU alone: busy loops, no CUDA call.
    for (; running(); ++iterations) {
      volatile double x = 0;
      for (int i = 0; i < 20000000; ++i) x = x + i;
    }
  } else if (mode == "idle") {  // A context holding 2 GiB, doing nothing after.
    void* p = nullptr;
    cudaSetDevice(0);
    cudaMalloc(&p, kBigBytes);
    while (running()) usleep(100000);
  } else if (mode == "malloc" || mode == "malloc64") {  // One context; map and unmap.
    cudaSetDevice(0);
    cudaFree(nullptr);
    const size_t bytes = mode == "malloc" ? kBigBytes : kSmallBytes;
    for (; running(); ++iterations) {
      void* p = nullptr;
      cudaMalloc(&p, bytes);
      cudaFree(p);
    }
  } else if (mode == "ctx" || mode == "ctxonly" || mode == "lt" || mode == "mod") {
    for (; running(); ++iterations) StartUpOnce(mode);
  } else if (mode == "paced") {  // One start-up (ctx) per 2.5 s: about one job per cadence.
    for (; running(); ++iterations) {
      StartUpOnce("ctx");
      for (int i = 0; i < 25 && running(); ++i) usleep(100000);
    }
  } else {
    std::fprintf(stderr, "startup_interference: no mode %s\n", mode.c_str());
    return 2;
  }
  const double seconds = Now() - t0;
  std::printf("{\"mode\": \"%s\", \"iterations\": %ld, \"seconds\": %.3f}\n", mode.c_str(),
              iterations, seconds);
  return 0;
}
