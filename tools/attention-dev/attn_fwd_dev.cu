// attn_fwd_dev: a stand-alone harness for developing the mha_with_lse_d128(_causal) sm_90a
// reference solutions and decoys on an H200, outside the engine. It loads cubins built by
// nvrtc_check (the NVRTC path the engine uses), encodes the three tensor maps the way the
// solutions' plans ask ({"dims": ["D", "B*H*S"], "box": [64, box_rows], "swizzle": "128B"}),
// launches each candidate with the driver API, compares O and LSE with a naive fp32 GPU
// reference under the task rule (fail only if |err| > 1e-2 AND |err| > 1e-2*|ref|; NaN fails;
// outputs poisoned with NaN before every run), and times the candidates with CUDA events
// (256 MB L2 flush before each sample, median).
//
// Every candidate has the signature of the task's solutions:
//   attn_fwd_kernel(CUtensorMap tmQ, tmK, tmV, bf16* O, float* LSE, float scale, int S)
// with grid (S / block_m, B*H). It does not parse launch plans; the plan facts come as
//   cand=LABEL:CUBIN:BLOCK_M:THREADS:DYNAMIC_SMEM:BOX_ROWS     (repeatable)
//   causal=0|1 shapes=4x48x4096,1x2x128 trials=2 time_iters=20 (timing on shapes with S>=4096)
//   cudnn_dir=DIR   trial 0 reads Q, K, V and cuDNN's O and LSE from DIR (fwd_cudnn_ref.py) and
//                   also compares each candidate with cuDNN's output (VS_CUDNN lines), which is
//                   what the engine compares with, and cuDNN with the fp32 reference
// Output: RESULT lines per (candidate, shape, trial), TIMING lines. Exit status: 0 all correct,
// 1 some mismatch, 2 launch/runtime error, 3 setup error.
#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
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
      std::fflush(stdout);                                               \
      std::exit(2);                                                      \
    }                                                                    \
  } while (0)

constexpr int kD = 128;

struct Shape {
  int b, h, s;
  long long rows() const { return static_cast<long long>(b) * h * s; }
};

struct Candidate {
  std::string label, cubin;
  int block_m = 128, threads = 384, smem = 0, box_rows = 128;
  CUmodule module = nullptr;
  CUfunction function = nullptr;
};

// Normal(0,1) bf16 from a counter hash (splitmix64) and Box-Muller.
__device__ unsigned long long Mix(unsigned long long x) {
  x += 0x9E3779B97F4A7C15ULL;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}

__global__ void FillNormal(__nv_bfloat16* p, long long n, unsigned long long seed) {
  for (long long i = blockIdx.x * 256LL + threadIdx.x; i < n; i += gridDim.x * 256LL) {
    const unsigned long long h = Mix(seed * 0x100000001B3ULL + static_cast<unsigned long long>(i));
    const float u1 = (static_cast<float>(h >> 40) + 1.0f) / 16777217.0f;
    const float u2 = static_cast<float>((h >> 16) & 0xFFFFFF) / 16777216.0f;
    p[i] = __float2bfloat16_rn(sqrtf(-2.0f * logf(u1)) * cospif(2.0f * u2));
  }
}

// Naive fp32 reference, one CTA per 64 query rows of one head, 256 threads: thread t owns row
// t/4 and output columns 32*(t%4) .. +31; the 4 threads of a row split each 64-key block's
// logits (keys t%4 + 4i). Exact expf/logf, fp32 accumulation, online softmax in natural log.
constexpr int kRefRows = 64;
constexpr int kRefKeys = 64;
constexpr int kPad = kD + 1;
constexpr size_t kRefSmem =
    sizeof(float) * (kRefRows * kPad + 2 * kRefKeys * kPad + kRefRows * (kRefKeys + 1));

__global__ void __launch_bounds__(256)
    RefAttention(const __nv_bfloat16* Q, const __nv_bfloat16* K, const __nv_bfloat16* V, float* O,
                 float* LSE, int S, float scale, int causal) {
  extern __shared__ float sm[];
  float* q = sm;
  float* k = q + kRefRows * kPad;
  float* v = k + kRefKeys * kPad;
  float* p = v + kRefKeys * kPad;
  const int t = threadIdx.x;
  const int r = t / 4;
  const int part = t % 4;
  const long long head0 = static_cast<long long>(blockIdx.y) * S;
  const int q0 = blockIdx.x * kRefRows;
  for (int i = t; i < kRefRows * kD; i += 256) {
    q[(i / kD) * kPad + i % kD] = __bfloat162float(Q[(head0 + q0 + i / kD) * kD + i % kD]);
  }
  float o[32];
  for (int i = 0; i < 32; ++i) o[i] = 0.0f;
  float m = -INFINITY, l = 0.0f;
  const int query = q0 + r;
  const int kv_end = causal ? q0 + kRefRows : S;
  for (int k0 = 0; k0 < kv_end; k0 += kRefKeys) {
    __syncthreads();
    for (int i = t; i < kRefKeys * kD; i += 256) {
      const long long g = (head0 + k0 + i / kD) * kD + i % kD;
      k[(i / kD) * kPad + i % kD] = __bfloat162float(K[g]);
      v[(i / kD) * kPad + i % kD] = __bfloat162float(V[g]);
    }
    __syncthreads();
    float s[16];
    float block_max = -INFINITY;
    for (int i = 0; i < 16; ++i) {
      const int key = part + 4 * i;
      float dot = 0.0f;
      for (int d = 0; d < kD; ++d) dot += q[r * kPad + d] * k[key * kPad + d];
      s[i] = (causal && k0 + key > query) ? -INFINITY : dot * scale;
      block_max = fmaxf(block_max, s[i]);
    }
    block_max = fmaxf(block_max, __shfl_xor_sync(0xffffffffu, block_max, 1));
    block_max = fmaxf(block_max, __shfl_xor_sync(0xffffffffu, block_max, 2));
    const float m_new = fmaxf(m, block_max);
    const float c = (m == -INFINITY) ? 0.0f : expf(m - m_new);
    float sum = 0.0f;
    for (int i = 0; i < 16; ++i) {
      const float e = (s[i] == -INFINITY) ? 0.0f : expf(s[i] - m_new);
      p[r * (kRefKeys + 1) + part + 4 * i] = e;
      sum += e;
    }
    sum += __shfl_xor_sync(0xffffffffu, sum, 1);
    sum += __shfl_xor_sync(0xffffffffu, sum, 2);
    l = l * c + sum;
    m = m_new;
    __syncthreads();
    for (int i = 0; i < 32; ++i) o[i] *= c;
    for (int key = 0; key < kRefKeys; ++key) {
      const float pk = p[r * (kRefKeys + 1) + key];
      for (int i = 0; i < 32; ++i) o[i] += pk * v[key * kPad + part * 32 + i];
    }
  }
  for (int i = 0; i < 32; ++i) O[(head0 + query) * kD + part * 32 + i] = o[i] / l;
  if (part == 0) LSE[head0 + query] = m + logf(l);
}

struct Stats {
  unsigned long long fails, nonfinite, first_fail;
  unsigned int max_err_bits;
  double ratio_sum;  // sum of out/ref (LSE only): shows a constant-factor error
};

template <typename T>
__device__ float ToFloat(T x);
template <>
__device__ float ToFloat<__nv_bfloat16>(__nv_bfloat16 x) {
  return __bfloat162float(x);
}
template <>
__device__ float ToFloat<float>(float x) {
  return x;
}

template <typename T, typename R>
__global__ void Compare(const T* out, const R* ref, long long n, Stats* st) {
  for (long long i = blockIdx.x * 256LL + threadIdx.x; i < n; i += gridDim.x * 256LL) {
    const float o = ToFloat(out[i]);
    const float r = ToFloat(ref[i]);
    const float err = fabsf(o - r);
    const bool finite = isfinite(o);
    if (!finite) atomicAdd(&st->nonfinite, 1ULL);
    if (!finite || (err > 1e-2f && err > 1e-2f * fabsf(r))) {
      atomicAdd(&st->fails, 1ULL);
      atomicMin(&st->first_fail, static_cast<unsigned long long>(i));
    }
    if (finite) atomicMax(&st->max_err_bits, __float_as_uint(err));
    if (sizeof(T) == 4 && i % 97 == 0 && finite && r != 0.0f) atomicAdd(&st->ratio_sum, o / r);
  }
}

// Compares O (bf16) and LSE (fp32) with a reference pair under the task rule and prints one line.
template <typename R>
bool CompareAndPrint(const char* tag, const std::string& label, const Shape& shape, int causal,
                     int trial, const __nv_bfloat16* o, const float* lse, const R* o_ref,
                     const float* lse_ref, Stats* st, float ref_ms, cudaStream_t stream) {
  const long long elems = shape.rows() * kD;
  Stats init[2] = {{0, 0, ~0ULL, 0, 0.0}, {0, 0, ~0ULL, 0, 0.0}};
  CHECK_CUDA(cudaMemcpy(st, init, sizeof(init), cudaMemcpyHostToDevice));
  Compare<<<1024, 256, 0, stream>>>(o, o_ref, elems, &st[0]);
  Compare<<<1024, 256, 0, stream>>>(lse, lse_ref, shape.rows(), &st[1]);
  Stats got[2];
  CHECK_CUDA(cudaMemcpy(got, st, sizeof(got), cudaMemcpyDeviceToHost));
  float max_o, max_l;
  std::memcpy(&max_o, &got[0].max_err_bits, 4);
  std::memcpy(&max_l, &got[1].max_err_bits, 4);
  const bool ok = got[0].fails == 0 && got[1].fails == 0;
  const long long sampled = (shape.rows() + 96) / 97;
  std::printf(
      "%s %s %dx%dx%d causal=%d trial=%d %s O_fail=%llu O_nonfinite=%llu O_maxerr=%.3g "
      "O_first_fail=%lld LSE_fail=%llu LSE_maxerr=%.3g LSE_mean_ratio=%.4f ref_ms=%.1f\n",
      tag, label.c_str(), shape.b, shape.h, shape.s, causal, trial, ok ? "PASS" : "FAIL",
      got[0].fails, got[0].nonfinite, max_o,
      got[0].fails ? static_cast<long long>(got[0].first_fail) : -1LL, got[1].fails, max_l,
      got[1].ratio_sum / sampled, ref_ms);
  std::fflush(stdout);
  return ok;
}

// Reads `bytes` bytes of a raw file into device memory; false if the file is short or missing.
bool LoadToDevice(const std::string& path, void* dst, size_t bytes) {
  std::ifstream in(path, std::ios::binary);
  std::vector<char> buffer(bytes);
  if (!in.read(buffer.data(), static_cast<std::streamsize>(bytes))) return false;
  CHECK_CUDA(cudaMemcpy(dst, buffer.data(), bytes, cudaMemcpyHostToDevice));
  return true;
}

std::vector<std::string> Split(const std::string& s, char sep) {
  std::vector<std::string> parts;
  std::stringstream in(s);
  std::string item;
  while (std::getline(in, item, sep)) parts.push_back(item);
  return parts;
}

CUtensorMap EncodeMap(void* base, const Shape& shape, int box_rows) {
  CUtensorMap map;
  const cuuint64_t dims[2] = {static_cast<cuuint64_t>(kD), static_cast<cuuint64_t>(shape.rows())};
  const cuuint64_t strides[1] = {kD * 2};
  const cuuint32_t box[2] = {64, static_cast<cuuint32_t>(box_rows)};
  const cuuint32_t elem_strides[2] = {1, 1};
  CHECK_CU(cuTensorMapEncodeTiled(&map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, base, dims, strides,
                                  box, elem_strides, CU_TENSOR_MAP_INTERLEAVE_NONE,
                                  CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                                  CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE));
  return map;
}

void Launch(Candidate& c, const Shape& shape, CUtensorMap* maps, void* o, void* lse, float scale,
            cudaStream_t stream) {
  int s = shape.s;
  void* args[] = {&maps[0], &maps[1], &maps[2], &o, &lse, &scale, &s};
  CHECK_CU(cuLaunchKernel(c.function, shape.s / c.block_m, shape.b * shape.h, 1, c.threads, 1, 1,
                          c.smem, stream, args, nullptr));
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<Candidate> cands;
  std::vector<Shape> shapes;
  int causal = 0, trials = 1, time_iters = 0;
  std::string cudnn_dir;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const size_t eq = arg.find('=');
    const std::string key = arg.substr(0, eq),
                      value = eq == std::string::npos ? "" : arg.substr(eq + 1);
    if (key == "cand") {
      const auto f = Split(value, ':');
      if (f.size() != 6) {
        std::printf("SETUP_ERROR cand wants LABEL:CUBIN:BLOCK_M:THREADS:SMEM:BOX_ROWS\n");
        return 3;
      }
      Candidate c;
      c.label = f[0];
      c.cubin = f[1];
      c.block_m = std::stoi(f[2]);
      c.threads = std::stoi(f[3]);
      c.smem = std::stoi(f[4]);
      c.box_rows = std::stoi(f[5]);
      cands.push_back(c);
    } else if (key == "shapes") {
      for (const auto& t : Split(value, ',')) {
        const auto d = Split(t, 'x');
        shapes.push_back({std::stoi(d[0]), std::stoi(d[1]), std::stoi(d[2])});
      }
    } else if (key == "causal") {
      causal = std::stoi(value);
    } else if (key == "cudnn_dir") {
      cudnn_dir = value;
    } else if (key == "trials") {
      trials = std::stoi(value);
    } else if (key == "time_iters") {
      time_iters = std::stoi(value);
    } else {
      std::printf("SETUP_ERROR unknown argument %s\n", arg.c_str());
      return 3;
    }
  }
  CHECK_CU(cuInit(0));
  CHECK_CUDA(cudaFree(nullptr));  // creates the primary context the driver API then uses
  for (auto& c : cands) {
    std::ifstream in(c.cubin, std::ios::binary);
    if (!in) {
      std::printf("SETUP_ERROR cannot read %s\n", c.cubin.c_str());
      return 3;
    }
    std::string image((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    CHECK_CU(cuModuleLoadData(&c.module, image.data()));
    CHECK_CU(cuModuleGetFunction(&c.function, c.module, "attn_fwd_kernel"));
    CHECK_CU(
        cuFuncSetAttribute(c.function, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, c.smem));
  }
  CHECK_CUDA(cudaFuncSetAttribute(RefAttention, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                  static_cast<int>(kRefSmem)));
  cudaStream_t stream;
  CHECK_CUDA(cudaStreamCreate(&stream));
  const float scale = 1.0f / std::sqrt(static_cast<float>(kD));
  bool all_ok = true;
  void* flush = nullptr;
  const size_t flush_bytes = 256u << 20;
  CHECK_CUDA(cudaMalloc(&flush, flush_bytes));

  for (const Shape& shape : shapes) {
    const long long elems = shape.rows() * kD;
    __nv_bfloat16 *q, *k, *v, *o;
    float *lse, *o_ref, *lse_ref;
    Stats* st;
    CHECK_CUDA(cudaMalloc(&q, elems * 2));
    CHECK_CUDA(cudaMalloc(&k, elems * 2));
    CHECK_CUDA(cudaMalloc(&v, elems * 2));
    CHECK_CUDA(cudaMalloc(&o, elems * 2));
    CHECK_CUDA(cudaMalloc(&lse, shape.rows() * 4));
    CHECK_CUDA(cudaMalloc(&o_ref, elems * 4));
    CHECK_CUDA(cudaMalloc(&lse_ref, shape.rows() * 4));
    CHECK_CUDA(cudaMalloc(&st, 2 * sizeof(Stats)));
    __nv_bfloat16* o_cudnn = nullptr;
    float* lse_cudnn = nullptr;
    if (!cudnn_dir.empty()) {
      CHECK_CUDA(cudaMalloc(&o_cudnn, elems * 2));
      CHECK_CUDA(cudaMalloc(&lse_cudnn, shape.rows() * 4));
    }
    CUtensorMap maps_by_rows[2][3];  // box rows 64 and 128
    for (int t = 0; t < trials; ++t) {
      const unsigned long long seed = 1000 + 10 * t + shape.s;
      FillNormal<<<1024, 256, 0, stream>>>(q, elems, seed);
      FillNormal<<<1024, 256, 0, stream>>>(k, elems, seed + 1);
      FillNormal<<<1024, 256, 0, stream>>>(v, elems, seed + 2);
      // With cudnn_dir, trial 0 takes its inputs and a second reference (cuDNN's O and LSE,
      // the engine's reference) from fwd_cudnn_ref.py's files.
      bool have_cudnn = false;
      if (!cudnn_dir.empty() && t == 0) {
        char prefix[256];
        std::snprintf(prefix, sizeof(prefix), "%s/%dx%dx%d_c%d_", cudnn_dir.c_str(), shape.b,
                      shape.h, shape.s, causal);
        const std::string pre = prefix;
        CHECK_CUDA(cudaStreamSynchronize(stream));
        have_cudnn = LoadToDevice(pre + "q.bin", q, elems * 2) &&
                     LoadToDevice(pre + "k.bin", k, elems * 2) &&
                     LoadToDevice(pre + "v.bin", v, elems * 2) &&
                     LoadToDevice(pre + "o.bin", o_cudnn, elems * 2) &&
                     LoadToDevice(pre + "lse.bin", lse_cudnn, shape.rows() * 4);
        if (!have_cudnn) std::printf("NOTE no cuDNN files for %s\n", prefix);
      }
      cudaEvent_t r0, r1;
      CHECK_CUDA(cudaEventCreate(&r0));
      CHECK_CUDA(cudaEventCreate(&r1));
      CHECK_CUDA(cudaEventRecord(r0, stream));
      RefAttention<<<dim3(shape.s / kRefRows, shape.b * shape.h), 256, kRefSmem, stream>>>(
          q, k, v, o_ref, lse_ref, shape.s, scale, causal);
      CHECK_CUDA(cudaEventRecord(r1, stream));
      CHECK_CUDA(cudaStreamSynchronize(stream));
      float ref_ms = 0;
      CHECK_CUDA(cudaEventElapsedTime(&ref_ms, r0, r1));
      if (have_cudnn) {
        CompareAndPrint("CUDNN_VS_FP32", "cudnn", shape, causal, t, o_cudnn, lse_cudnn, o_ref,
                        lse_ref, st, ref_ms, stream);
      }
      for (int b = 0; b < 2; ++b) {
        for (int m = 0; m < 3; ++m) {
          maps_by_rows[b][m] = EncodeMap(m == 0 ? q : m == 1 ? k : v, shape, b == 0 ? 64 : 128);
        }
      }
      for (auto& c : cands) {
        CHECK_CUDA(cudaMemsetAsync(o, 0xFF, elems * 2, stream));  // bf16 NaN
        CHECK_CUDA(cudaMemsetAsync(lse, 0xFF, shape.rows() * 4, stream));
        Launch(c, shape, maps_by_rows[c.box_rows == 64 ? 0 : 1], o, lse, scale, stream);
        const cudaError_t err = cudaStreamSynchronize(stream);
        if (err != cudaSuccess) {
          std::printf("RESULT %s %dx%dx%d trial=%d RUNTIME_ERROR %s\n", c.label.c_str(), shape.b,
                      shape.h, shape.s, t, cudaGetErrorName(err));
          std::fflush(stdout);
          return 2;
        }
        all_ok &= CompareAndPrint("RESULT", c.label, shape, causal, t, o, lse, o_ref, lse_ref, st,
                                  ref_ms, stream);
        if (have_cudnn) {
          all_ok &= CompareAndPrint("VS_CUDNN", c.label, shape, causal, t, o, lse, o_cudnn,
                                    lse_cudnn, st, 0.0f, stream);
        }
      }
    }
    if (time_iters > 0 && shape.s >= 4096) {
      const double flops =
          (causal ? 2.0 : 4.0) * shape.b * shape.h * double(shape.s) * shape.s * kD;
      for (auto& c : cands) {
        CUtensorMap* maps = maps_by_rows[c.box_rows == 64 ? 0 : 1];
        for (int w = 0; w < 3; ++w) Launch(c, shape, maps, o, lse, scale, stream);
        std::vector<float> ms;
        cudaEvent_t e0, e1;
        CHECK_CUDA(cudaEventCreate(&e0));
        CHECK_CUDA(cudaEventCreate(&e1));
        for (int it = 0; it < time_iters; ++it) {
          CHECK_CUDA(cudaMemsetAsync(flush, it & 0xFF, flush_bytes, stream));
          CHECK_CUDA(cudaEventRecord(e0, stream));
          Launch(c, shape, maps, o, lse, scale, stream);
          CHECK_CUDA(cudaEventRecord(e1, stream));
          CHECK_CUDA(cudaEventSynchronize(e1));
          float t = 0;
          CHECK_CUDA(cudaEventElapsedTime(&t, e0, e1));
          ms.push_back(t);
        }
        std::sort(ms.begin(), ms.end());
        const float median = ms[ms.size() / 2];
        std::printf(
            "TIMING %s %dx%dx%d causal=%d median_ms=%.4f min_ms=%.4f max_ms=%.4f TFLOPs=%.1f "
            "n=%d\n",
            c.label.c_str(), shape.b, shape.h, shape.s, causal, median, ms.front(), ms.back(),
            flops / (median * 1e-3) / 1e12, time_iters);
        std::fflush(stdout);
      }
    }
    cudaFree(q);
    cudaFree(k);
    cudaFree(v);
    cudaFree(o);
    cudaFree(lse);
    cudaFree(o_ref);
    cudaFree(lse_ref);
    cudaFree(st);
    cudaFree(o_cudnn);
    cudaFree(lse_cudnn);
  }
  return all_ok ? 0 : 1;
}
