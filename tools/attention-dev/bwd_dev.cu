// bwd_dev: a scratch harness for the mha_bwd_d128(_causal) sm_90a solutions and decoys, before
// the engine could run them. Loads an NVRTC cubin with the driver API, launches the three
// kernels as the sources' launch plans say (hard-coded here: preprocess, main, dq_convert, with
// the same arguments in every source of these tasks), and compares dQ, dK, dV with a naive fp32
// GPU reference by relative norm (the task's rule, max 1e-2).
//
// usage: bwd_dev cubin=X.cubin [label=name] [causal=0|1] [swizzle=128|none] [block=128]
//                [smem=108608] shapes=BxHxS[,BxHxS...] [iters=N] [seed=N]
//                [kv=64|128]  (key rows per CTA of attn_bwd_main: its grid is S/kv x B*H; 128
//                for the two-warpgroup candidates of candidates/; timing also reports the main
//                kernel alone)
// D is 128. Inputs Q, K, V, dO are "spiky" (N(0,1) + N(0,100) with probability 0.001, as the
// task generates them), rounded to bf16; O and LSE come from the fp32 reference forward (O
// rounded to bf16), as the task derives them with cuDNN. For shapes with more than 16 heads
// (B*H), the reference runs on 3 sampled heads only (first, one in the middle, last); the other
// heads get O = 0 and an LSE upper bound (finite values for timing, not compared).
// Prints one line per shape: relative norms, non-finite counts, and with iters>0 the median
// time of the three launches (CUDA events, after one warm-up run).
#include <cuda.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

namespace {

constexpr int kD = 128;

#define CU(call)                                                                              \
  do {                                                                                        \
    CUresult r_ = (call);                                                                     \
    if (r_ != CUDA_SUCCESS) {                                                                 \
      const char* s_ = nullptr;                                                               \
      cuGetErrorString(r_, &s_);                                                              \
      std::printf("CUDA_ERROR %s at %s:%d (%s)\n", s_ ? s_ : "?", __FILE__, __LINE__, #call); \
      std::exit(3);                                                                           \
    }                                                                                         \
  } while (0)
#define RT(call)                                                                               \
  do {                                                                                         \
    cudaError_t e_ = (call);                                                                   \
    if (e_ != cudaSuccess) {                                                                   \
      std::printf("CUDA_ERROR %s at %s:%d (%s)\n", cudaGetErrorString(e_), __FILE__, __LINE__, \
                  #call);                                                                      \
      std::exit(3);                                                                            \
    }                                                                                          \
  } while (0)

__device__ float Bf16ToFloat(unsigned short b) {
  return __uint_as_float(static_cast<unsigned>(b) << 16);
}
__device__ unsigned short FloatToBf16(float f) {
  unsigned u = __float_as_uint(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return 0x7fff;
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<unsigned short>(u >> 16);
}

__device__ unsigned long long Mix(unsigned long long x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ull;
  x ^= x >> 33;
  return x;
}
__device__ float Uniform(unsigned long long h) {  // (0, 1]
  return (static_cast<float>(h >> 40) + 1.0f) * (1.0f / 16777216.0f);
}
__device__ float Normal(unsigned long long key) {
  const float u1 = Uniform(Mix(key));
  const float u2 = Uniform(Mix(key ^ 0x9e3779b97f4a7c15ull));
  return sqrtf(-2.f * logf(u1)) * cospif(2.f * u2);
}

// Spiky: N(0,1) plus, with probability 0.001, N(0, 100) (standard deviation 10).
__global__ void GenSpiky(unsigned short* out, long long n, unsigned long long seed) {
  for (long long i = blockIdx.x * 256ll + threadIdx.x; i < n; i += 256ll * gridDim.x) {
    const unsigned long long key =
        Mix(seed * 0x100000001b3ull + static_cast<unsigned long long>(i));
    float v = Normal(key);
    if (Uniform(Mix(key + 7)) < 0.001f) v += 10.f * Normal(key + 13);
    out[i] = FloatToBf16(v);
  }
}

__global__ void FillU16(unsigned short* p, long long n, unsigned short v) {
  for (long long i = blockIdx.x * 256ll + threadIdx.x; i < n; i += 256ll * gridDim.x) p[i] = v;
}

// Block-wide reductions over 128 threads.
__device__ float BlockSum(float v, float* red) {
  for (int o = 16; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffffu, v, o);
  __syncthreads();
  if (threadIdx.x % 32 == 0) red[threadIdx.x / 32] = v;
  __syncthreads();
  return red[0] + red[1] + red[2] + red[3];
}
__device__ float BlockMax(float v, float* red) {
  for (int o = 16; o > 0; o /= 2) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  __syncthreads();
  if (threadIdx.x % 32 == 0) red[threadIdx.x / 32] = v;
  __syncthreads();
  return fmaxf(fmaxf(red[0], red[1]), fmaxf(red[2], red[3]));
}

__device__ float Dot(const unsigned short* a, const unsigned short* b) {
  float s = 0.f;
  for (int d = 0; d < kD; ++d) s += Bf16ToFloat(a[d]) * Bf16ToFloat(b[d]);
  return s;
}

// Reference forward for query row blockIdx.x of head heads[blockIdx.y]; 128 threads, S floats
// of dynamic shared memory.
__global__ void RefForward(const unsigned short* Q, const unsigned short* K,
                           const unsigned short* V, unsigned short* O, float* LSE, int S,
                           const int* heads, float scale, int causal) {
  extern __shared__ float p[];
  __shared__ float red[4];
  const int i = blockIdx.x;
  const long long base = static_cast<long long>(heads[blockIdx.y]) * S;
  const unsigned short* q = Q + (base + i) * kD;
  float mx = -INFINITY;
  for (int j = threadIdx.x; j < S; j += 128) {
    float s = (causal && j > i) ? -INFINITY : scale * Dot(q, K + (base + j) * kD);
    p[j] = s;
    mx = fmaxf(mx, s);
  }
  mx = BlockMax(mx, red);
  float sum = 0.f;
  for (int j = threadIdx.x; j < S; j += 128) {
    p[j] = expf(p[j] - mx);
    sum += p[j];
  }
  sum = BlockSum(sum, red);
  const int d = threadIdx.x;
  float o = 0.f;
  for (int j = 0; j < S; ++j) o += p[j] * Bf16ToFloat(V[(base + j) * kD + d]);
  O[(base + i) * kD + d] = FloatToBf16(o / sum);
  if (d == 0) LSE[base + i] = mx + logf(sum);
}

// For heads not referenced: LSE_i = scale * (|q_i|^2 + max_j |k_j|^2) / 2 >= every s_ij.
__global__ void LseBound(const unsigned short* Q, const unsigned short* K, float* LSE,
                         long long rows, float scale) {
  const long long r = blockIdx.x * 128ll + threadIdx.x;
  if (r >= rows) return;
  float qq = 0.f;
  for (int d = 0; d < kD; ++d) qq += Bf16ToFloat(Q[r * kD + d]) * Bf16ToFloat(Q[r * kD + d]);
  LSE[r] = 0.5f * scale * (qq + 2000.f);  // |k|^2 < 2000 for these inputs (128 + spikes)
}

__global__ void RefDelta(const unsigned short* O, const unsigned short* dO, float* delta, int S,
                         const int* heads) {
  const long long r = static_cast<long long>(heads[blockIdx.y]) * S + blockIdx.x;
  __shared__ float red[4];
  const float v = Bf16ToFloat(O[r * kD + threadIdx.x]) * Bf16ToFloat(dO[r * kD + threadIdx.x]);
  const float s = BlockSum(v, red);
  if (threadIdx.x == 0) delta[r] = s;
}

// dQ row i (fp32).
__global__ void RefDq(const unsigned short* Q, const unsigned short* K, const unsigned short* V,
                      const unsigned short* dO, const float* LSE, const float* delta, float* dQ,
                      int S, const int* heads, float scale, int causal) {
  extern __shared__ float ds[];
  const int i = blockIdx.x;
  const long long base = static_cast<long long>(heads[blockIdx.y]) * S;
  const unsigned short* q = Q + (base + i) * kD;
  const unsigned short* g = dO + (base + i) * kD;
  const float lse = LSE[base + i];
  const float dl = delta[base + i];
  for (int j = threadIdx.x; j < S; j += 128) {
    if (causal && j > i) {
      ds[j] = 0.f;
      continue;
    }
    const float p = expf(scale * Dot(q, K + (base + j) * kD) - lse);
    ds[j] = p * (Dot(g, V + (base + j) * kD) - dl);
  }
  __syncthreads();
  const int d = threadIdx.x;
  float acc = 0.f;
  for (int j = 0; j < S; ++j) acc += ds[j] * Bf16ToFloat(K[(base + j) * kD + d]);
  dQ[(base + i) * kD + d] = scale * acc;
}

// dK, dV row j (fp32).
__global__ void RefDkDv(const unsigned short* Q, const unsigned short* K, const unsigned short* V,
                        const unsigned short* dO, const float* LSE, const float* delta, float* dK,
                        float* dV, int S, const int* heads, float scale, int causal) {
  extern __shared__ float sh[];
  float* pp = sh;
  float* ds = sh + S;
  const int j = blockIdx.x;
  const long long base = static_cast<long long>(heads[blockIdx.y]) * S;
  const unsigned short* k = K + (base + j) * kD;
  const unsigned short* v = V + (base + j) * kD;
  for (int i = threadIdx.x; i < S; i += 128) {
    if (causal && j > i) {
      pp[i] = 0.f;
      ds[i] = 0.f;
      continue;
    }
    const float p = expf(scale * Dot(Q + (base + i) * kD, k) - LSE[base + i]);
    pp[i] = p;
    ds[i] = p * (Dot(dO + (base + i) * kD, v) - delta[base + i]);
  }
  __syncthreads();
  const int d = threadIdx.x;
  float av = 0.f, ak = 0.f;
  for (int i = 0; i < S; ++i) {
    av += pp[i] * Bf16ToFloat(dO[(base + i) * kD + d]);
    ak += ds[i] * Bf16ToFloat(Q[(base + i) * kD + d]);
  }
  dV[(base + j) * kD + d] = av;
  dK[(base + j) * kD + d] = scale * ak;
}

// sums[0] += (out-ref)^2, sums[1] += ref^2, sums[2] += non-finite count, over the rows of the
// listed heads; sums[3] = max |out - ref|.
__global__ void Compare(const unsigned short* out, const float* ref, int S, const int* heads,
                        double* sums) {
  const long long base = static_cast<long long>(heads[blockIdx.y]) * S * kD;
  double e2 = 0, r2 = 0, bad = 0, mx = 0;
  for (long long x = blockIdx.x * 256ll + threadIdx.x; x < static_cast<long long>(S) * kD;
       x += 256ll * gridDim.x) {
    const float o = Bf16ToFloat(out[base + x]);
    const float r = ref[base + x];
    if (!isfinite(o)) {
      bad += 1;
      continue;
    }
    const double e = static_cast<double>(o) - r;
    e2 += e * e;
    r2 += static_cast<double>(r) * r;
    mx = fmax(mx, fabs(e));
  }
  atomicAdd(&sums[0], e2);
  atomicAdd(&sums[1], r2);
  atomicAdd(&sums[2], bad);
  unsigned long long* m = reinterpret_cast<unsigned long long*>(&sums[3]);
  unsigned long long old = *m;
  while (__longlong_as_double(old) < mx) {
    const unsigned long long got = atomicCAS(m, old, __double_as_longlong(mx));
    if (got == old) break;
    old = got;
  }
}

std::map<std::string, std::string> ParseArgs(int argc, char** argv) {
  std::map<std::string, std::string> a;
  for (int i = 1; i < argc; ++i) {
    const char* eq = std::strchr(argv[i], '=');
    if (eq == nullptr) {
      std::printf("SETUP_ERROR bad argument %s\n", argv[i]);
      std::exit(2);
    }
    a[std::string(argv[i], static_cast<size_t>(eq - argv[i]))] = eq + 1;
  }
  return a;
}

CUtensorMap MakeMap(void* base, long long rows, CUtensorMapSwizzle swizzle) {
  CUtensorMap m;
  cuuint64_t dims[2] = {static_cast<cuuint64_t>(kD), static_cast<cuuint64_t>(rows)};
  cuuint64_t strides[1] = {kD * 2};
  cuuint32_t box[2] = {64, 64};
  cuuint32_t es[2] = {1, 1};
  CU(cuTensorMapEncodeTiled(&m, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, base, dims, strides, box, es,
                            CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle,
                            CU_TENSOR_MAP_L2_PROMOTION_L2_128B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE));
  return m;
}

}  // namespace

int main(int argc, char** argv) {
  auto args = ParseArgs(argc, argv);
  const std::string label = args.count("label") ? args["label"] : "candidate";
  const int causal = args.count("causal") ? std::atoi(args["causal"].c_str()) : 0;
  const bool swizzle128 = !args.count("swizzle") || args["swizzle"] == "128";
  const int block = args.count("block") ? std::atoi(args["block"].c_str()) : 128;
  const int smem = args.count("smem") ? std::atoi(args["smem"].c_str()) : 108608;
  const int kv = args.count("kv") ? std::atoi(args["kv"].c_str()) : 64;
  const int iters = args.count("iters") ? std::atoi(args["iters"].c_str()) : 0;
  const unsigned long long seed =
      args.count("seed") ? std::strtoull(args["seed"].c_str(), nullptr, 10) : 1;
  if (!args.count("cubin") || !args.count("shapes")) {
    std::printf("SETUP_ERROR need cubin= and shapes=\n");
    return 2;
  }
  CU(cuInit(0));
  CUdevice dev;
  CU(cuDeviceGet(&dev, 0));
  CUcontext ctx;
  CU(cuDevicePrimaryCtxRetain(&ctx, dev));
  CU(cuCtxSetCurrent(ctx));
  CUmodule mod;
  if (cuModuleLoad(&mod, args["cubin"].c_str()) != CUDA_SUCCESS) {
    std::printf("SETUP_ERROR cannot load %s\n", args["cubin"].c_str());
    return 2;
  }
  CUfunction f_pre, f_main, f_conv;
  CU(cuModuleGetFunction(&f_pre, mod, "attn_bwd_preprocess"));
  CU(cuModuleGetFunction(&f_main, mod, "attn_bwd_main"));
  CU(cuModuleGetFunction(&f_conv, mod, "attn_bwd_dq_convert"));
  CU(cuFuncSetAttribute(f_main, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, smem));
  int regs = 0;
  CU(cuFuncGetAttribute(&regs, CU_FUNC_ATTRIBUTE_NUM_REGS, f_main));
  std::printf("[%s] main kernel: %d registers, block %d, dynamic smem %d, causal %d, kv %d\n",
              label.c_str(), regs, block, smem, causal, kv);

  std::string shapes = args["shapes"];
  int failures = 0;
  size_t pos = 0;
  while (pos < shapes.size()) {
    size_t comma = shapes.find(',', pos);
    if (comma == std::string::npos) comma = shapes.size();
    const std::string shape = shapes.substr(pos, comma - pos);
    pos = comma + 1;
    int B = 0, H = 0, S = 0;
    if (std::sscanf(shape.c_str(), "%dx%dx%d", &B, &H, &S) != 3) {
      std::printf("SETUP_ERROR bad shape %s\n", shape.c_str());
      return 2;
    }
    const long long BH = static_cast<long long>(B) * H;
    const long long rows = BH * S;
    const long long n = rows * kD;
    const float scale = 1.0f / std::sqrt(static_cast<float>(kD));
    std::vector<int> heads;
    if (BH <= 16) {
      for (int h = 0; h < BH; ++h) heads.push_back(h);
    } else {
      heads = {0, static_cast<int>(BH / 2 + 1), static_cast<int>(BH - 1)};
    }
    unsigned short *Q, *K, *V, *O, *dO, *dQ, *dK, *dV;
    float *LSE, *delta_ref, *rdQ, *rdK, *rdV, *s_delta, *s_acc;
    int* d_heads;
    double* sums;
    RT(cudaMalloc(&Q, n * 2));
    RT(cudaMalloc(&K, n * 2));
    RT(cudaMalloc(&V, n * 2));
    RT(cudaMalloc(&O, n * 2));
    RT(cudaMalloc(&dO, n * 2));
    RT(cudaMalloc(&dQ, n * 2));
    RT(cudaMalloc(&dK, n * 2));
    RT(cudaMalloc(&dV, n * 2));
    RT(cudaMalloc(&LSE, rows * 4));
    RT(cudaMalloc(&delta_ref, rows * 4));
    RT(cudaMalloc(&rdQ, n * 4));
    RT(cudaMalloc(&rdK, n * 4));
    RT(cudaMalloc(&rdV, n * 4));
    RT(cudaMalloc(&s_delta, rows * 4));
    RT(cudaMalloc(&s_acc, n * 4));
    RT(cudaMalloc(&d_heads, heads.size() * 4));
    RT(cudaMalloc(&sums, 4 * 8));
    RT(cudaMemcpy(d_heads, heads.data(), heads.size() * 4, cudaMemcpyHostToDevice));
    GenSpiky<<<1024, 256>>>(Q, n, seed * 16 + 1);
    GenSpiky<<<1024, 256>>>(K, n, seed * 16 + 2);
    GenSpiky<<<1024, 256>>>(V, n, seed * 16 + 3);
    GenSpiky<<<1024, 256>>>(dO, n, seed * 16 + 4);
    FillU16<<<1024, 256>>>(O, n, 0);
    LseBound<<<(rows + 127) / 128, 128>>>(Q, K, LSE, rows, scale);
    const dim3 rgrid(S, static_cast<unsigned>(heads.size()));
    // The reference kernels keep a row of S floats (S * 8 bytes for RefDkDv) in dynamic shared
    // memory: above the 48 KiB default from S = 12288 (S * 4) and S = 6144 (S * 8), so they
    // must opt in, or the 16384-long workload fails to launch (it did until 2026-12-07).
    RT(cudaFuncSetAttribute(RefForward, cudaFuncAttributeMaxDynamicSharedMemorySize, S * 4));
    RT(cudaFuncSetAttribute(RefDq, cudaFuncAttributeMaxDynamicSharedMemorySize, S * 4));
    RT(cudaFuncSetAttribute(RefDkDv, cudaFuncAttributeMaxDynamicSharedMemorySize, S * 8));
    RefForward<<<rgrid, 128, S * 4>>>(Q, K, V, O, LSE, S, d_heads, scale, causal);
    RefDelta<<<rgrid, 128>>>(O, dO, delta_ref, S, d_heads);
    RefDq<<<rgrid, 128, S * 4>>>(Q, K, V, dO, LSE, delta_ref, rdQ, S, d_heads, scale, causal);
    RefDkDv<<<rgrid, 128, S * 8>>>(Q, K, V, dO, LSE, delta_ref, rdK, rdV, S, d_heads, scale,
                                   causal);
    RT(cudaGetLastError());
    RT(cudaDeviceSynchronize());

    const CUtensorMapSwizzle sw =
        swizzle128 ? CU_TENSOR_MAP_SWIZZLE_128B : CU_TENSOR_MAP_SWIZZLE_NONE;
    CUtensorMap tmQ = MakeMap(Q, rows, sw), tmK = MakeMap(K, rows, sw), tmV = MakeMap(V, rows, sw),
                tmdO = MakeMap(dO, rows, sw);
    // Scalars from 64-bit storage on purpose: the kernels declare int, the driver copies 4 bytes.
    long long vB = B, vH = H, vS = S;
    float vscale = scale;
    void* pre_args[] = {&O, &dO, &s_delta, &s_acc, &vB, &vH, &vS};
    void* main_args[] = {&tmQ, &tmK, &tmV, &tmdO, &LSE, &s_delta, &s_acc, &dK, &dV, &vS, &vscale};
    void* conv_args[] = {&s_acc, &dQ, &vB, &vH, &vS, &vscale};
    cudaEvent_t m0 = nullptr, m1 = nullptr;  // around the main kernel, when timing
    auto run_plan = [&]() {
      CU(cuLaunchKernel(f_pre, static_cast<unsigned>((rows + 7) / 8), 1, 1, 256, 1, 1, 0, nullptr,
                        pre_args, nullptr));
      if (m0 != nullptr) RT(cudaEventRecord(m0));
      CU(cuLaunchKernel(f_main, S / kv, static_cast<unsigned>(BH), 1, block, 1, 1, smem, nullptr,
                        main_args, nullptr));
      if (m1 != nullptr) RT(cudaEventRecord(m1));
      CU(cuLaunchKernel(f_conv, static_cast<unsigned>((n + 1023) / 1024), 1, 1, 256, 1, 1, 0,
                        nullptr, conv_args, nullptr));
    };
    // As the engine: outputs poisoned with NaN, scratch zero-filled.
    FillU16<<<1024, 256>>>(dQ, n, 0xffff);
    FillU16<<<1024, 256>>>(dK, n, 0xffff);
    FillU16<<<1024, 256>>>(dV, n, 0xffff);
    RT(cudaMemset(s_delta, 0, rows * 4));
    RT(cudaMemset(s_acc, 0, n * 4));
    RT(cudaDeviceSynchronize());
    run_plan();
    const CUresult run_status = cuCtxSynchronize();
    if (run_status != CUDA_SUCCESS) {
      const char* s = nullptr;
      cuGetErrorString(run_status, &s);
      std::printf("[%s] %s RUNTIME_ERROR %s\n", label.c_str(), shape.c_str(), s ? s : "?");
      return 4;
    }
    double rel[3], bad[3], mx[3];
    const unsigned short* outs[3] = {dQ, dK, dV};
    const float* refs[3] = {rdQ, rdK, rdV};
    for (int t = 0; t < 3; ++t) {
      RT(cudaMemset(sums, 0, 32));
      Compare<<<dim3(64, static_cast<unsigned>(heads.size())), 256>>>(outs[t], refs[t], S, d_heads,
                                                                      sums);
      double h[4];
      RT(cudaMemcpy(h, sums, 32, cudaMemcpyDeviceToHost));
      rel[t] = std::sqrt(h[0] / h[1]);
      bad[t] = h[2];
      mx[t] = h[3];
    }
    const bool ok =
        rel[0] <= 1e-2 && rel[1] <= 1e-2 && rel[2] <= 1e-2 && bad[0] + bad[1] + bad[2] == 0;
    if (!ok) ++failures;
    std::printf(
        "[%s] %s heads_checked=%zu rel_norm dQ=%.3e dK=%.3e dV=%.3e max_abs_err dQ=%.3g dK=%.3g "
        "dV=%.3g nonfinite=%.0f/%.0f/%.0f %s\n",
        label.c_str(), shape.c_str(), heads.size(), rel[0], rel[1], rel[2], mx[0], mx[1], mx[2],
        bad[0], bad[1], bad[2], ok ? "PASS" : "FAIL");
    if (iters > 0) {
      cudaEvent_t e0, e1;
      RT(cudaEventCreate(&e0));
      RT(cudaEventCreate(&e1));
      RT(cudaEventCreate(&m0));
      RT(cudaEventCreate(&m1));
      std::vector<float> ms, ms_main;
      for (int it = 0; it < iters; ++it) {
        RT(cudaMemset(s_acc, 0, n * 4));
        RT(cudaEventRecord(e0));
        run_plan();
        RT(cudaEventRecord(e1));
        RT(cudaEventSynchronize(e1));
        float t = 0;
        RT(cudaEventElapsedTime(&t, e0, e1));
        ms.push_back(t);
        RT(cudaEventElapsedTime(&t, m0, m1));
        ms_main.push_back(t);
      }
      std::sort(ms.begin(), ms.end());
      std::sort(ms_main.begin(), ms_main.end());
      const double flops = (causal ? 5.0 : 10.0) * BH * S * static_cast<double>(S) * kD;
      std::printf(
          "[%s] %s time median %.3f ms (min %.3f, max %.3f, %d runs) = %.1f TFLOP/s; main kernel "
          "median %.3f ms\n",
          label.c_str(), shape.c_str(), ms[ms.size() / 2], ms.front(), ms.back(), iters,
          flops / (ms[ms.size() / 2] * 1e-3) / 1e12, ms_main[ms_main.size() / 2]);
    }
    for (void* p : {static_cast<void*>(Q), static_cast<void*>(K), static_cast<void*>(V),
                    static_cast<void*>(O), static_cast<void*>(dO), static_cast<void*>(dQ),
                    static_cast<void*>(dK), static_cast<void*>(dV), static_cast<void*>(LSE),
                    static_cast<void*>(delta_ref), static_cast<void*>(rdQ), static_cast<void*>(rdK),
                    static_cast<void*>(rdV), static_cast<void*>(s_delta), static_cast<void*>(s_acc),
                    static_cast<void*>(d_heads), static_cast<void*>(sums)}) {
      RT(cudaFree(p));
    }
  }
  std::printf("[%s] %s\n", label.c_str(), failures == 0 ? "ALL PASS" : "SOME FAIL");
  return failures == 0 ? 0 : 1;
}
