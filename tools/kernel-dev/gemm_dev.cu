// gemm_dev: a small stand-alone harness for developing the gemm_n7168_k5120 reference solutions
// and decoys on an H200, before the engine exists. It loads a cubin (built by nvrtc_check, so
// the NVRTC path is what runs), encodes the tensor maps the way the launch plan asks, launches
// the kernel with the driver API (clusters included), compares every element with cuBLASLt
// under the task's rule (fails only if |err| > atol AND |err| > rtol*|ref|), checks that the
// inputs are unchanged, and times candidate and cuBLASLt interleaved with CUDA events.
//
// It does not parse launch plans; the few plan facts it needs come as key=value arguments:
//   cubin=PATH kernel=NAME block=384 smem=197696 tile_m=128 tile_n=256 cluster_m=2
//   persistent=132 cluster_x=2: grid.x = cluster_x * min(persistent / cluster_x,
//       ceil_div(M, tile_m * cluster_x) * ceil_div(N, tile_n)), cluster {cluster_x, 1, 1}
//       (persistent=132 cluster_x=1 is the persistent solution's min(132, tiles))
//   swizzle_c=128B|none   lt_algos=8 (time that many heuristic results once, keep the fastest)
//   scratch_bytes=N          (a scratch buffer, token W in args, zero-filled before every
//                             candidate launch as the engine does)
//   args=tmA,tmB,tmC,M,N,K   (tokens: tmA tmB tmC = tensor maps of A B C; A B C = pointers;
//                             M N K = scalars, passed from 64-bit storage on purpose: the
//                             driver copies the kernel's declared 4 bytes, little-endian)
//   box_a=64x128 box_b=64x256 box_c=64x64 swizzle=128B|none
//   shapes=8192x7168x5120,256x256x256 trials=2 time_iters=0 warmup_ms=300
// Output: one RESULT line per (shape, trial), one TIMING line per timed shape. Exit status: 0
// all correct, 1 some mismatch or mutated input, 2 launch/runtime error, 3 setup error.
#include <cublasLt.h>
#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

namespace {

#define CHECK_CUDA(expr)                                                          \
  do {                                                                            \
    cudaError_t err_ = (expr);                                                    \
    if (err_ != cudaSuccess) {                                                    \
      std::printf("RUNTIME_ERROR %s: %s (%s)\n", #expr, cudaGetErrorString(err_), \
                  cudaGetErrorName(err_));                                        \
      std::exit(2);                                                               \
    }                                                                             \
  } while (0)

#define CHECK_CU(expr)                                                   \
  do {                                                                   \
    CUresult res_ = (expr);                                              \
    if (res_ != CUDA_SUCCESS) {                                          \
      const char* name_ = nullptr;                                       \
      cuGetErrorName(res_, &name_);                                      \
      std::printf("RUNTIME_ERROR %s: %s\n", #expr, name_ ? name_ : "?"); \
      std::exit(2);                                                      \
    }                                                                    \
  } while (0)

#define CHECK_LT(expr)                                                                 \
  do {                                                                                 \
    cublasStatus_t st_ = (expr);                                                       \
    if (st_ != CUBLAS_STATUS_SUCCESS) {                                                \
      std::printf("SETUP_ERROR %s: cublas status %d\n", #expr, static_cast<int>(st_)); \
      std::exit(3);                                                                    \
    }                                                                                  \
  } while (0)

struct Shape {
  int m, n, k;
};

// Normal(0,1) bf16 from a counter-based hash (splitmix64) and Box-Muller: cheap, seedable, the
// task's "normal" distribution.
__device__ unsigned long long SplitMix(unsigned long long x) {
  x += 0x9E3779B97F4A7C15ULL;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}

__global__ void FillNormal(__nv_bfloat16* p, long long count, unsigned long long seed) {
  for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<long long>(gridDim.x) * blockDim.x) {
    const unsigned long long h =
        SplitMix(seed * 0x100000001B3ULL + static_cast<unsigned long long>(i));
    const float u1 = (static_cast<float>(h >> 40) + 1.0f) / 16777217.0f;
    const float u2 = static_cast<float>((h >> 16) & 0xFFFFFF) / 16777216.0f;
    p[i] = __float2bfloat16_rn(sqrtf(-2.0f * logf(u1)) * cospif(2.0f * u2));
  }
}

struct CompareStats {
  unsigned long long fails;
  unsigned long long nonfinite;
  unsigned long long first_fail;
  unsigned int max_abs_err_bits;
};

__global__ void Compare(const __nv_bfloat16* out, const __nv_bfloat16* ref, long long count,
                        float atol, float rtol, CompareStats* stats) {
  for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<long long>(gridDim.x) * blockDim.x) {
    const float o = __bfloat162float(out[i]);
    const float r = __bfloat162float(ref[i]);
    const float err = fabsf(o - r);
    const bool finite = isfinite(o);
    if (!finite) atomicAdd(&stats->nonfinite, 1ULL);
    if (!finite || (err > atol && err > rtol * fabsf(r))) {
      atomicAdd(&stats->fails, 1ULL);
      atomicMin(&stats->first_fail, static_cast<unsigned long long>(i));
    }
    if (finite) atomicMax(&stats->max_abs_err_bits, __float_as_uint(err));
  }
}

__global__ void CountDiff(const unsigned int* a, const unsigned int* b, long long words,
                          unsigned long long* diffs) {
  for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < words;
       i += static_cast<long long>(gridDim.x) * blockDim.x) {
    if (a[i] != b[i]) atomicAdd(diffs, 1ULL);
  }
}

std::map<std::string, std::string> ParseArgs(int argc, char** argv) {
  std::map<std::string, std::string> kv;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const size_t eq = a.find('=');
    if (eq != std::string::npos) kv[a.substr(0, eq)] = a.substr(eq + 1);
  }
  return kv;
}

std::vector<std::string> Split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, sep)) {
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

void ParseBox(const std::string& s, cuuint32_t box[2]) {
  const std::vector<std::string> p = Split(s, 'x');
  box[0] = static_cast<cuuint32_t>(std::stoul(p.at(0)));
  box[1] = static_cast<cuuint32_t>(std::stoul(p.at(1)));
}

// A row-major [rows][cols] bf16 tensor as a 2-D tensor map: dims {cols, rows} (innermost
// first), one stride (bytes per row), as the engine does for dims=[] in a plan.
CUtensorMap EncodeMap(void* base, int rows, int cols, const cuuint32_t box[2],
                      CUtensorMapSwizzle swizzle, CUtensorMapL2promotion promotion) {
  CUtensorMap map;
  const cuuint64_t dims[2] = {static_cast<cuuint64_t>(cols), static_cast<cuuint64_t>(rows)};
  const cuuint64_t strides[1] = {static_cast<cuuint64_t>(cols) * 2};
  const cuuint32_t element_strides[2] = {1, 1};
  CHECK_CU(cuTensorMapEncodeTiled(&map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, base, dims, strides,
                                  box, element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle,
                                  promotion, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE));
  return map;
}

struct Lt {
  cublasLtHandle_t handle;
  void* workspace;
  size_t workspace_bytes = 64 << 20;
  int algos = 1;        // heuristic results to try
  bool chosen = false;  // `algo` holds the fastest for the current shape
  int chosen_index = 0;
  cublasLtMatmulAlgo_t algo;
};

// C[M][N] (row-major) = A[M][K] * B[N][K]^T, seen column-major as C^T (N x M) = op(B) * A with
// B stored K x N column-major (transposed: T) and A stored K x M column-major (N).
void LtGemm(Lt& lt, const Shape& s, const void* A, const void* B, void* C, cudaStream_t stream) {
  cublasLtMatmulDesc_t op;
  CHECK_LT(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
  CHECK_LT(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)));
  CHECK_LT(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)));
  cublasLtMatrixLayout_t la, lb, lc;
  CHECK_LT(cublasLtMatrixLayoutCreate(&la, CUDA_R_16BF, s.k, s.n, s.k));
  CHECK_LT(cublasLtMatrixLayoutCreate(&lb, CUDA_R_16BF, s.k, s.m, s.k));
  CHECK_LT(cublasLtMatrixLayoutCreate(&lc, CUDA_R_16BF, s.n, s.m, s.n));
  cublasLtMatmulPreference_t pref;
  CHECK_LT(cublasLtMatmulPreferenceCreate(&pref));
  CHECK_LT(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                &lt.workspace_bytes, sizeof(lt.workspace_bytes)));
  const float alpha = 1.0f, beta = 0.0f;
  if (!lt.chosen) {
    std::vector<cublasLtMatmulHeuristicResult_t> heur(std::max(1, lt.algos));
    int found = 0;
    CHECK_LT(cublasLtMatmulAlgoGetHeuristic(lt.handle, op, la, lb, lc, lc, pref,
                                            static_cast<int>(heur.size()), heur.data(), &found));
    if (found == 0) {
      std::printf("SETUP_ERROR no cublasLt algorithm\n");
      std::exit(3);
    }
    lt.algo = heur[0].algo;
    lt.chosen_index = 0;
    if (found > 1) {
      // Fastest of the candidates: 3 warm-up + 10 timed launches each (median of single-launch
      // event timings), on the caller's buffers.
      cudaEvent_t e0, e1;
      CHECK_CUDA(cudaEventCreate(&e0));
      CHECK_CUDA(cudaEventCreate(&e1));
      float best = 1e30f;
      for (int h = 0; h < found; ++h) {
        std::vector<float> ms_list;
        bool ok = true;
        for (int i = 0; i < 13 && ok; ++i) {
          CHECK_CUDA(cudaEventRecord(e0, stream));
          ok = cublasLtMatmul(lt.handle, op, &alpha, B, la, A, lb, &beta, C, lc, C, lc,
                              &heur[h].algo, lt.workspace, lt.workspace_bytes,
                              stream) == CUBLAS_STATUS_SUCCESS;
          CHECK_CUDA(cudaEventRecord(e1, stream));
          CHECK_CUDA(cudaEventSynchronize(e1));
          float ms;
          CHECK_CUDA(cudaEventElapsedTime(&ms, e0, e1));
          if (i >= 3) ms_list.push_back(ms);
        }
        if (!ok) continue;
        std::sort(ms_list.begin(), ms_list.end());
        const float med = ms_list[ms_list.size() / 2];
        if (med < best) {
          best = med;
          lt.algo = heur[h].algo;
          lt.chosen_index = h;
        }
      }
      std::printf("LT %dx%dx%d: %d heuristic candidates, fastest #%d (%.4f ms, not flushed)\n", s.m,
                  s.n, s.k, found, lt.chosen_index, best);
    }
    lt.chosen = true;
  }
  CHECK_LT(cublasLtMatmul(lt.handle, op, &alpha, B, la, A, lb, &beta, C, lc, C, lc, &lt.algo,
                          lt.workspace, lt.workspace_bytes, stream));
  cublasLtMatmulPreferenceDestroy(pref);
  cublasLtMatrixLayoutDestroy(la);
  cublasLtMatrixLayoutDestroy(lb);
  cublasLtMatrixLayoutDestroy(lc);
  cublasLtMatmulDescDestroy(op);
}

struct Candidate {
  CUfunction fn;
  int block = 384;
  int smem = 0;
  int tile_m = 128;
  int tile_n = 256;
  int cluster_m = 1;
  int cluster_x = 1;
  int persistent = 0;
  size_t scratch_bytes = 0;
  CUtensorMapSwizzle swizzle_c = CU_TENSOR_MAP_SWIZZLE_128B;
  std::vector<std::string> args;
  cuuint32_t box_a[2] = {64, 128};
  cuuint32_t box_b[2] = {64, 256};
  cuuint32_t box_c[2] = {64, 64};
  CUtensorMapSwizzle swizzle = CU_TENSOR_MAP_SWIZZLE_128B;
};

struct Buffers {
  void* a;
  void* b;
  void* c;
  void* scratch = nullptr;
  CUtensorMap tm_a, tm_b, tm_c;
  long long m, n, k;  // 64-bit on purpose (see the header comment).
};

// Scratch is zero-filled before every launch, outside any timed region (as the engine does).
void ZeroScratch(const Candidate& cand, Buffers& buf, cudaStream_t stream) {
  if (cand.scratch_bytes > 0)
    CHECK_CUDA(cudaMemsetAsync(buf.scratch, 0, cand.scratch_bytes, stream));
}

CUresult Launch(const Candidate& cand, const Shape& s, Buffers& buf, cudaStream_t stream) {
  std::vector<void*> params;
  CUdeviceptr pa = reinterpret_cast<CUdeviceptr>(buf.a);
  CUdeviceptr pb = reinterpret_cast<CUdeviceptr>(buf.b);
  CUdeviceptr pc = reinterpret_cast<CUdeviceptr>(buf.c);
  CUdeviceptr pw = reinterpret_cast<CUdeviceptr>(buf.scratch);
  for (const std::string& a : cand.args) {
    if (a == "tmA")
      params.push_back(&buf.tm_a);
    else if (a == "tmB")
      params.push_back(&buf.tm_b);
    else if (a == "tmC")
      params.push_back(&buf.tm_c);
    else if (a == "A")
      params.push_back(&pa);
    else if (a == "B")
      params.push_back(&pb);
    else if (a == "C")
      params.push_back(&pc);
    else if (a == "W")
      params.push_back(&pw);
    else if (a == "M")
      params.push_back(&buf.m);
    else if (a == "N")
      params.push_back(&buf.n);
    else if (a == "K")
      params.push_back(&buf.k);
  }
  CUlaunchConfig config = {};
  if (cand.persistent > 0) {
    const long long units =
        1LL * ((s.m + cand.tile_m * cand.cluster_x - 1) / (cand.tile_m * cand.cluster_x)) *
        ((s.n + cand.tile_n - 1) / cand.tile_n);
    config.gridDimX = static_cast<unsigned>(
        cand.cluster_x * std::min<long long>(cand.persistent / cand.cluster_x, units));
    config.gridDimY = 1;
  } else {
    config.gridDimX = (s.n + cand.tile_n - 1) / cand.tile_n;
    const int m_units = cand.tile_m * cand.cluster_m;
    config.gridDimY = (s.m + m_units - 1) / m_units * cand.cluster_m;
  }
  config.gridDimZ = 1;
  config.blockDimX = cand.block;
  config.blockDimY = 1;
  config.blockDimZ = 1;
  config.sharedMemBytes = cand.smem;
  config.hStream = reinterpret_cast<CUstream>(stream);
  CUlaunchAttribute attr;
  if (cand.cluster_m > 1 || cand.cluster_x > 1) {
    attr.id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
    attr.value.clusterDim.x = cand.cluster_x;
    attr.value.clusterDim.y = cand.cluster_m;
    attr.value.clusterDim.z = 1;
    config.attrs = &attr;
    config.numAttrs = 1;
  }
  return cuLaunchKernelEx(&config, cand.fn, params.data(), nullptr);
}

float Median(std::vector<float> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.f : v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  std::map<std::string, std::string> kv = ParseArgs(argc, argv);
  auto get = [&](const std::string& key, const std::string& dflt) {
    return kv.count(key) ? kv[key] : dflt;
  };
  CHECK_CUDA(cudaSetDevice(0));
  CHECK_CUDA(cudaFree(nullptr));
  std::ifstream in(get("cubin", ""), std::ios::binary);
  if (!in) {
    std::printf("SETUP_ERROR cannot read cubin\n");
    return 3;
  }
  std::string image((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  CUmodule module;
  CHECK_CU(cuModuleLoadData(&module, image.data()));
  Candidate cand;
  CHECK_CU(cuModuleGetFunction(&cand.fn, module, get("kernel", "gemm_kernel").c_str()));
  cand.block = std::stoi(get("block", "384"));
  cand.smem = std::stoi(get("smem", "0"));
  cand.tile_m = std::stoi(get("tile_m", "128"));
  cand.tile_n = std::stoi(get("tile_n", "256"));
  cand.cluster_m = std::stoi(get("cluster_m", "1"));
  cand.cluster_x = std::stoi(get("cluster_x", "1"));
  cand.persistent = std::stoi(get("persistent", "0"));
  cand.scratch_bytes = std::stoull(get("scratch_bytes", "0"));
  cand.swizzle_c =
      get("swizzle_c", "128B") == "none" ? CU_TENSOR_MAP_SWIZZLE_NONE : CU_TENSOR_MAP_SWIZZLE_128B;
  cand.args = Split(get("args", "tmA,tmB,tmC,M,N,K"), ',');
  ParseBox(get("box_a", "64x128"), cand.box_a);
  ParseBox(get("box_b", "64x256"), cand.box_b);
  ParseBox(get("box_c", "64x64"), cand.box_c);
  cand.swizzle =
      get("swizzle", "128B") == "none" ? CU_TENSOR_MAP_SWIZZLE_NONE : CU_TENSOR_MAP_SWIZZLE_128B;
  if (cand.smem > 48 * 1024) {
    CHECK_CU(
        cuFuncSetAttribute(cand.fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, cand.smem));
  }
  if (cand.cluster_x > 1 || cand.cluster_m > 1) {
    // How many clusters of this shape fit at once (a persistent grid beyond it runs a 2nd wave).
    CUlaunchConfig occ = {};
    occ.gridDimX = cand.cluster_x * 66;
    occ.gridDimY = cand.cluster_m;
    occ.gridDimZ = 1;
    occ.blockDimX = cand.block;
    occ.blockDimY = 1;
    occ.blockDimZ = 1;
    occ.sharedMemBytes = cand.smem;
    CUlaunchAttribute cattr;
    cattr.id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
    cattr.value.clusterDim.x = cand.cluster_x;
    cattr.value.clusterDim.y = cand.cluster_m;
    cattr.value.clusterDim.z = 1;
    occ.attrs = &cattr;
    occ.numAttrs = 1;
    int clusters = -1;
    const CUresult r = cuOccupancyMaxActiveClusters(&clusters, cand.fn, &occ);
    std::printf("OCCUPANCY max_active_clusters=%d (cluster %dx%d, smem %d)%s\n", clusters,
                cand.cluster_x, cand.cluster_m, cand.smem,
                r == CUDA_SUCCESS ? "" : " query failed");
  }
  const int trials = std::stoi(get("trials", "2"));
  const int time_iters = std::stoi(get("time_iters", "0"));
  const float warmup_ms = std::stof(get("warmup_ms", "300"));
  const std::string label = get("label", get("kernel", "gemm_kernel"));

  std::vector<Shape> shapes;
  for (const std::string& s : Split(get("shapes", "256x256x256"), ',')) {
    const std::vector<std::string> p = Split(s, 'x');
    shapes.push_back({std::stoi(p.at(0)), std::stoi(p.at(1)), std::stoi(p.at(2))});
  }

  cudaStream_t stream;
  CHECK_CUDA(cudaStreamCreate(&stream));
  Lt lt;
  CHECK_LT(cublasLtCreate(&lt.handle));
  lt.algos = std::stoi(get("lt_algos", "1"));
  CHECK_CUDA(cudaMalloc(&lt.workspace, lt.workspace_bytes));
  void* flush = nullptr;
  const size_t flush_bytes = 256ull << 20;  // > 4x the 60 MB L2
  CHECK_CUDA(cudaMalloc(&flush, flush_bytes));
  CompareStats* stats;
  CHECK_CUDA(cudaMalloc(&stats, sizeof(CompareStats)));
  unsigned long long* diffs;
  CHECK_CUDA(cudaMalloc(&diffs, sizeof(unsigned long long)));

  int exit_code = 0;
  for (const Shape& s : shapes) {
    const long long na = 1LL * s.m * s.k, nb = 1LL * s.n * s.k, nc = 1LL * s.m * s.n;
    Buffers buf;
    void *a_copy, *b_copy, *c_ref;
    CHECK_CUDA(cudaMalloc(&buf.a, na * 2));
    CHECK_CUDA(cudaMalloc(&buf.b, nb * 2));
    CHECK_CUDA(cudaMalloc(&buf.c, nc * 2));
    if (cand.scratch_bytes > 0) CHECK_CUDA(cudaMalloc(&buf.scratch, cand.scratch_bytes));
    CHECK_CUDA(cudaMalloc(&a_copy, na * 2));
    CHECK_CUDA(cudaMalloc(&b_copy, nb * 2));
    CHECK_CUDA(cudaMalloc(&c_ref, nc * 2));
    buf.m = s.m;
    buf.n = s.n;
    buf.k = s.k;
    buf.tm_a =
        EncodeMap(buf.a, s.m, s.k, cand.box_a, cand.swizzle, CU_TENSOR_MAP_L2_PROMOTION_L2_256B);
    buf.tm_b =
        EncodeMap(buf.b, s.n, s.k, cand.box_b, cand.swizzle, CU_TENSOR_MAP_L2_PROMOTION_L2_256B);
    buf.tm_c =
        EncodeMap(buf.c, s.m, s.n, cand.box_c, cand.swizzle_c, CU_TENSOR_MAP_L2_PROMOTION_NONE);
    lt.chosen = false;  // pick cuBLASLt's algorithm for this shape
    for (int t = 0; t < trials; ++t) {
      const unsigned long long seed = 1000003ULL * (t + 1) + 7919ULL * s.m + 31ULL * s.n + s.k;
      FillNormal<<<1024, 256, 0, stream>>>(static_cast<__nv_bfloat16*>(buf.a), na, seed);
      FillNormal<<<1024, 256, 0, stream>>>(static_cast<__nv_bfloat16*>(buf.b), nb, seed ^ 0xABCDEF);
      CHECK_CUDA(cudaMemcpyAsync(a_copy, buf.a, na * 2, cudaMemcpyDeviceToDevice, stream));
      CHECK_CUDA(cudaMemcpyAsync(b_copy, buf.b, nb * 2, cudaMemcpyDeviceToDevice, stream));
      CHECK_CUDA(cudaMemsetAsync(buf.c, 0xFF, nc * 2, stream));  // bf16 NaN poison
      LtGemm(lt, s, a_copy, b_copy, c_ref, stream);
      CHECK_CUDA(cudaStreamSynchronize(stream));
      ZeroScratch(cand, buf, stream);
      const CUresult launched = Launch(cand, s, buf, stream);
      if (launched != CUDA_SUCCESS) {
        const char* name = nullptr;
        cuGetErrorName(launched, &name);
        std::printf("RESULT %s %dx%dx%d trial=%d status=launch_failed:%s\n", label.c_str(), s.m,
                    s.n, s.k, t, name ? name : "?");
        return 2;
      }
      CHECK_CUDA(cudaStreamSynchronize(stream));
      CHECK_CUDA(cudaMemsetAsync(stats, 0, sizeof(CompareStats), stream));
      CHECK_CUDA(cudaMemsetAsync(&stats->first_fail, 0xFF, sizeof(unsigned long long), stream));
      CHECK_CUDA(cudaMemsetAsync(diffs, 0, sizeof(unsigned long long), stream));
      Compare<<<1024, 256, 0, stream>>>(static_cast<__nv_bfloat16*>(buf.c),
                                        static_cast<__nv_bfloat16*>(c_ref), nc, 1e-2f, 1e-2f,
                                        stats);
      CountDiff<<<1024, 256, 0, stream>>>(static_cast<unsigned*>(buf.a),
                                          static_cast<unsigned*>(a_copy), na / 2, diffs);
      CountDiff<<<1024, 256, 0, stream>>>(static_cast<unsigned*>(buf.b),
                                          static_cast<unsigned*>(b_copy), nb / 2, diffs);
      CompareStats host;
      unsigned long long host_diffs = 0;
      CHECK_CUDA(cudaMemcpy(&host, stats, sizeof(host), cudaMemcpyDeviceToHost));
      CHECK_CUDA(cudaMemcpy(&host_diffs, diffs, sizeof(host_diffs), cudaMemcpyDeviceToHost));
      float max_err;
      std::memcpy(&max_err, &host.max_abs_err_bits, 4);
      const bool ok = host.fails == 0 && host_diffs == 0;
      if (!ok) exit_code = 1;
      std::printf(
          "RESULT %s %dx%dx%d trial=%d status=%s fails=%llu nonfinite=%llu max_abs_err=%.4g "
          "first_fail=(%lld,%lld) input_words_changed=%llu\n",
          label.c_str(), s.m, s.n, s.k, t, ok ? "ok" : "MISMATCH", host.fails, host.nonfinite,
          max_err, host.fails ? static_cast<long long>(host.first_fail / s.n) : -1LL,
          host.fails ? static_cast<long long>(host.first_fail % s.n) : -1LL, host_diffs);
      std::fflush(stdout);
    }
    if (time_iters > 0) {
      cudaEvent_t e0, e1;
      CHECK_CUDA(cudaEventCreate(&e0));
      CHECK_CUDA(cudaEventCreate(&e1));
      // Shared warm-up: alternate both for warmup_ms so clocks settle for both.
      float spent = 0;
      while (spent < warmup_ms) {
        CHECK_CUDA(cudaEventRecord(e0, stream));
        for (int i = 0; i < 5; ++i) {
          ZeroScratch(cand, buf, stream);
          CHECK_CU(Launch(cand, s, buf, stream));
          LtGemm(lt, s, buf.a, buf.b, c_ref, stream);
        }
        CHECK_CUDA(cudaEventRecord(e1, stream));
        CHECK_CUDA(cudaEventSynchronize(e1));
        float ms;
        CHECK_CUDA(cudaEventElapsedTime(&ms, e0, e1));
        spent += ms;
      }
      std::vector<float> cand_ms, lib_ms;
      for (int i = 0; i < time_iters; ++i) {
        for (int which = 0; which < 2; ++which) {
          if (which == 0) ZeroScratch(cand, buf, stream);
          CHECK_CUDA(cudaMemsetAsync(flush, i & 0xFF, flush_bytes, stream));
          CHECK_CUDA(cudaEventRecord(e0, stream));
          if (which == 0) {
            CHECK_CU(Launch(cand, s, buf, stream));
          } else {
            LtGemm(lt, s, buf.a, buf.b, c_ref, stream);
          }
          CHECK_CUDA(cudaEventRecord(e1, stream));
          CHECK_CUDA(cudaEventSynchronize(e1));
          float ms;
          CHECK_CUDA(cudaEventElapsedTime(&ms, e0, e1));
          (which == 0 ? cand_ms : lib_ms).push_back(ms);
        }
      }
      const double flops = 2.0 * s.m * s.n * s.k;
      const float cm = Median(cand_ms), lm = Median(lib_ms);
      std::sort(cand_ms.begin(), cand_ms.end());
      std::sort(lib_ms.begin(), lib_ms.end());
      std::printf(
          "TIMING %s %dx%dx%d iters=%d cand_median_ms=%.4f (min %.4f max %.4f) %.1f TFLOP/s | "
          "cublasLt_median_ms=%.4f (min %.4f max %.4f) %.1f TFLOP/s | speedup=%.3f\n",
          label.c_str(), s.m, s.n, s.k, time_iters, cm, cand_ms.front(), cand_ms.back(),
          flops / cm / 1e9, lm, lib_ms.front(), lib_ms.back(), flops / lm / 1e9, lm / cm);
      // Re-check correctness of the output of the timed launches' last inputs.
      CHECK_CUDA(cudaMemsetAsync(buf.c, 0xFF, nc * 2, stream));
      ZeroScratch(cand, buf, stream);
      CHECK_CU(Launch(cand, s, buf, stream));
      LtGemm(lt, s, buf.a, buf.b, c_ref, stream);
      CHECK_CUDA(cudaMemsetAsync(stats, 0, sizeof(CompareStats), stream));
      Compare<<<1024, 256, 0, stream>>>(static_cast<__nv_bfloat16*>(buf.c),
                                        static_cast<__nv_bfloat16*>(c_ref), nc, 1e-2f, 1e-2f,
                                        stats);
      CompareStats host;
      CHECK_CUDA(cudaMemcpy(&host, stats, sizeof(host), cudaMemcpyDeviceToHost));
      std::printf("RESULT %s %dx%dx%d after_timing status=%s fails=%llu\n", label.c_str(), s.m, s.n,
                  s.k, host.fails == 0 ? "ok" : "MISMATCH", host.fails);
      if (host.fails) exit_code = 1;
    }
    cudaFree(buf.a);
    cudaFree(buf.b);
    cudaFree(buf.c);
    cudaFree(buf.scratch);
    cudaFree(a_copy);
    cudaFree(b_copy);
    cudaFree(c_ref);
  }
  return exit_code;
}
