// The harness's own GPU kernels: input generation, output poisoning, keyed hashing, L2
// flushing and the health probe. Compiled by nvcc at build time into a fatbin that is embedded
// in ptxbench-evaluator and loaded with cuModuleLoadData (builtin.cc), so the evaluator needs
// no CUDA language support in CMake and loads like any submission.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <stdint.h>

#include "worker/engine/gpu/philox.h"

using ptxbench::gpu::HashTerm;
using ptxbench::gpu::Philox4x32_10;

namespace {

// dtype codes: mirror builtin.h's BuiltinDType.
enum : int { kBF16 = 0, kFP16 = 1, kFP32 = 2, kFP8E4M3 = 3, kInt32 = 4 };

__device__ __forceinline__ float NormalFromBits(uint32_t a, uint32_t b, float* second) {
  // Box-Muller on (0,1] x [0,1): both outputs are independent N(0,1).
  float u1 = (static_cast<float>(a) + 1.0f) * 2.3283064365386963e-10f;
  float u2 = static_cast<float>(b) * 2.3283064365386963e-10f;
  float r = sqrtf(-2.0f * logf(u1));
  float s, c;
  sincospif(2.0f * u2, &s, &c);
  *second = r * s;
  return r * c;
}

// fp8_normal's inverse-CDF table (philox.h), in constant memory: the host table is not
// addressable from device code.
__constant__ uint32_t kFp8NormalThresholdsDevice[ptxbench::gpu::kFp8NormalCodes - 1] = {
    PTXBENCH_FP8_NORMAL_THRESHOLDS};

}  // namespace

extern "C" __global__ void ptxbench_generate(void* out, uint64_t count, uint64_t seed,
                                             uint32_t tensor_index, int dtype, int distribution,
                                             int64_t pages, int64_t max_length, int64_t jitter) {
  for (uint64_t i = blockIdx.x * static_cast<uint64_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<uint64_t>(gridDim.x) * blockDim.x) {
    // The paged tasks' integer distributions (philox.h; int32 tensors only, task.cc checks it).
    if (distribution == ptxbench::gpu::kDistPagePermutation) {
      if (dtype == kInt32)
        static_cast<int32_t*>(out)[i] =
            ptxbench::gpu::PagePermutationValue(i, pages, seed, tensor_index);
      continue;
    }
    if (distribution == ptxbench::gpu::kDistLengthLadder) {
      if (dtype == kInt32)
        static_cast<int32_t*>(out)[i] =
            ptxbench::gpu::LengthLadderValue(i, count, max_length, jitter, seed, tensor_index);
      continue;
    }
    ptxbench::gpu::Philox4 r = Philox4x32_10(i, tensor_index, seed);
    // The fp8 attention task's kinds, from the bits alone (philox.h): e4m3 bytes and fp32
    // descales; other dtypes are refused at task load.
    if (distribution == ptxbench::gpu::kDistFp8Normal) {
      if (dtype == kFP8E4M3) {
        static_cast<uint8_t*>(out)[i] =
            ptxbench::gpu::Fp8NormalByte(r.v[2], r.v[3], kFp8NormalThresholdsDevice);
      }
      continue;
    }
    if (distribution == ptxbench::gpu::kDistTensorDescale) {
      if (dtype == kFP32) {
        static_cast<float*>(out)[i] = __uint_as_float(ptxbench::gpu::TensorDescaleBits(r.v[2]));
      }
      continue;
    }
    float spike;
    float x = NormalFromBits(r.v[0], r.v[1], &spike);
    if (distribution == ptxbench::gpu::kDistSpiky &&
        static_cast<float>(r.v[2]) * 2.3283064365386963e-10f < ptxbench::gpu::kSpikeProbability) {
      x += ptxbench::gpu::kSpikeStddev * spike;
    }
    if (distribution == ptxbench::gpu::kDistBlockScale) {
      x = __uint_as_float(ptxbench::gpu::BlockScaleBits(r.v[2]));
    }
    switch (dtype) {
      case kBF16: static_cast<__nv_bfloat16*>(out)[i] = __float2bfloat16_rn(x); break;
      case kFP16: static_cast<__half*>(out)[i] = __float2half_rn(x); break;
      case kFP32: static_cast<float*>(out)[i] = x; break;
      case kFP8E4M3: static_cast<__nv_fp8_e4m3*>(out)[i] = __nv_fp8_e4m3(x); break;
      case kInt32: static_cast<int32_t*>(out)[i] = static_cast<int32_t>(r.v[3] & 0xFF) - 128; break;
      default: break;
    }
  }
}

// out[i] = bf16(e4m3 in[i] · scale[0]): the last step of cuDNN's fp8 attention baseline where
// cuDNN writes O as e4m3 (cudnn_sdpa_baseline.cc, "sdpa_fwd_fp8": on Hopper it cannot write bf16
// O). One rounding: an e4m3 value times the task's descale (4 significant bits each) is exact in
// fp32, and bf16 holds its 8 bits exactly. 16 elements per thread step when `count` is a multiple
// of 16 and the buffers 16-byte aligned (cudaMalloc'd tensors are), else one.
extern "C" __global__ void __launch_bounds__(256)
    ptxbench_e4m3_to_bf16_scaled(const uint8_t* in, const float* scale, __nv_bfloat16* out,
                                 uint64_t count) {
  const float factor = *scale;
  const uint64_t stride = static_cast<uint64_t>(gridDim.x) * blockDim.x;
  const uint64_t first = blockIdx.x * static_cast<uint64_t>(blockDim.x) + threadIdx.x;
  const bool vector = count % 16 == 0 && (reinterpret_cast<uintptr_t>(in) & 15) == 0 &&
                      (reinterpret_cast<uintptr_t>(out) & 15) == 0;
  if (!vector) {
    for (uint64_t i = first; i < count; i += stride) {
      const __nv_fp8_e4m3 x = *reinterpret_cast<const __nv_fp8_e4m3*>(in + i);
      out[i] = __float2bfloat16_rn(static_cast<float>(x) * factor);
    }
    return;
  }
  for (uint64_t v = first; v < count / 16; v += stride) {
    const uint4 packed = reinterpret_cast<const uint4*>(in)[v];
    const uint32_t words[4] = {packed.x, packed.y, packed.z, packed.w};
    __align__(16) __nv_bfloat16 converted[16];
    for (int w = 0; w < 4; ++w) {
      for (int b = 0; b < 4; ++b) {
        __nv_fp8_e4m3 x;
        x.__x = static_cast<__nv_fp8_storage_t>((words[w] >> (8 * b)) & 0xFF);
        converted[4 * w + b] = __float2bfloat16_rn(static_cast<float>(x) * factor);
      }
    }
    uint4* target = reinterpret_cast<uint4*>(out + 16 * v);
    target[0] = reinterpret_cast<const uint4*>(converted)[0];
    target[1] = reinterpret_cast<const uint4*>(converted)[1];
  }
}

// Fills `bytes` bytes with a repeating 32-bit pattern (the NaN poison of outputs).
extern "C" __global__ void ptxbench_fill32(uint32_t* out, uint64_t bytes, uint32_t pattern) {
  uint64_t words = bytes / 4;
  for (uint64_t i = blockIdx.x * static_cast<uint64_t>(blockDim.x) + threadIdx.x; i < words;
       i += static_cast<uint64_t>(gridDim.x) * blockDim.x) {
    out[i] = pattern;
  }
  uint64_t tail = bytes % 4;
  if (tail && blockIdx.x == 0 && threadIdx.x == 0) {
    uint8_t* b = reinterpret_cast<uint8_t*>(out) + words * 4;
    for (uint64_t k = 0; k < tail; ++k) b[k] = static_cast<uint8_t>(pattern >> (8 * k));
  }
}

// Keyed, order-independent hash: *result += sum over 8-byte words of HashTerm (tail bytes are
// zero-padded into one last word).
extern "C" __global__ void ptxbench_hash(const uint8_t* data, uint64_t bytes, uint64_t key,
                                         unsigned long long* result) {
  uint64_t words = bytes / 8;
  uint64_t sum = 0;
  const uint64_t* w = reinterpret_cast<const uint64_t*>(data);
  for (uint64_t i = blockIdx.x * static_cast<uint64_t>(blockDim.x) + threadIdx.x; i < words;
       i += static_cast<uint64_t>(gridDim.x) * blockDim.x) {
    sum += HashTerm(w[i], i, key);
  }
  if (blockIdx.x == 0 && threadIdx.x == 0 && bytes % 8) {
    uint64_t last = 0;
    for (uint64_t k = 0; k < bytes % 8; ++k) last |= static_cast<uint64_t>(data[words * 8 + k]) << (8 * k);
    sum += HashTerm(last, words, key);
  }
  for (int offset = 16; offset > 0; offset /= 2) sum += __shfl_down_sync(0xFFFFFFFFu, sum, offset);
  if ((threadIdx.x & 31) == 0) atomicAdd(result, static_cast<unsigned long long>(sum));
}

// Writes every 16-byte word of a buffer at least twice the L2 size: evicts what candidate or
// baseline left in L2 before the next timed sample. Every store carries an L2 evict_last
// policy, the highest retention a kernel can ask for: lines that a submission read under its
// own evict_last policy outlived a flush of plain stores (H200, 2026-12-07: a pointer chase
// over 16 MiB read so after the flush ran at 0.91 of the cold figure, about 15 % of its lines
// still in L2; gpu_counters_test "flush: ..."). Among lines of equal priority the older go
// first, so 2x the L2 of them displaces those too. ptxbench_discard must follow: an L2 full of
// evict_last lines would leave the next kernel's own lines almost no room.
extern "C" __global__ void ptxbench_flush(int4* buffer, uint64_t count, int value) {
  uint64_t policy;
  asm volatile("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;" : "=l"(policy));
  for (uint64_t i = blockIdx.x * static_cast<uint64_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<uint64_t>(gridDim.x) * blockDim.x) {
    asm volatile("st.global.L2::cache_hint.v4.s32 [%0], {%1, %1, %1, %1}, %2;" ::"l"(buffer + i),
                 "r"(value), "l"(policy)
                 : "memory");
  }
}

// Invalidates the flush buffer's lines in L2 without writing them back (discard.global.L2, PTX
// ISA 7.4+, sm_80+; its contents are never read), so the next sample starts from an L2 that
// holds nothing: neither the flush's evict_last lines nor dirty lines whose write-back would
// land inside the timed launch. `buffer` is 128-byte aligned and `lines` covers it.
extern "C" __global__ void ptxbench_discard(char* buffer, uint64_t lines) {
  for (uint64_t i = blockIdx.x * static_cast<uint64_t>(blockDim.x) + threadIdx.x; i < lines;
       i += static_cast<uint64_t>(gridDim.x) * blockDim.x) {
    asm volatile("discard.global.L2 [%0], 128;" ::"l"(buffer + i * 128) : "memory");
  }
}

// Health probe: out[i] = i * 3 + 1 for i < n.
extern "C" __global__ void ptxbench_health(int* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = i * 3 + 1;
}

// ---------------------------------------------------------------- output comparison
// The rule of compare.cc's CompareOutputs, element for element in double precision, so the GPU
// and the CPU oracle agree exactly on counts and maxima (the sums differ only by summation
// order). Block b owns the contiguous range [b*chunk, min((b+1)*chunk, count)) and writes one
// CompareBlockResult; the host adds the blocks in order (deterministic), and finds the first
// mismatches in the first blocks that have any.

// Mirrors runtime.cc's CompareBlockResult (64 bytes).
struct CompareBlockResult {
  unsigned long long mismatched, nonfinite, unwritten, reference_nonfinite;
  double max_abs, max_rel, err_sq, ref_sq;
};

namespace {

__device__ __forceinline__ double DecodeE4M3(uint32_t b) {
  int sign = (b >> 7) & 1, exponent = (b >> 3) & 0xF, mantissa = b & 0x7;
  double v;
  if (exponent == 0xF && mantissa == 0x7) {
    v = __longlong_as_double(0x7FF8000000000000ll);  // NaN: e4m3 has no Inf.
  } else if (exponent == 0) {
    v = ldexp(static_cast<double>(mantissa), -9);
  } else {
    v = ldexp(static_cast<double>(mantissa | 0x8), exponent - 10);
  }
  return sign ? -v : v;
}

__device__ __forceinline__ uint32_t RawElement(const void* data, uint64_t i, int dtype) {
  switch (dtype) {
    case kBF16:
    case kFP16: return static_cast<const uint16_t*>(data)[i];
    case kFP8E4M3: return static_cast<const uint8_t*>(data)[i];
    default: return static_cast<const uint32_t*>(data)[i];
  }
}

__device__ __forceinline__ double DecodeRaw(uint32_t bits, int dtype) {
  switch (dtype) {
    case kBF16: return static_cast<double>(__uint_as_float(bits << 16));
    case kFP16: return static_cast<double>(__half2float(__ushort_as_half(static_cast<unsigned short>(bits))));
    case kFP32: return static_cast<double>(__uint_as_float(bits));
    case kFP8E4M3: return DecodeE4M3(bits);
    default: return static_cast<double>(static_cast<int32_t>(bits));
  }
}

}  // namespace

extern "C" __global__ void __launch_bounds__(256)
    ptxbench_compare(const void* got, const void* expected, uint64_t count, int dtype,
                     uint32_t poison_bits, double atol, double rtol, uint64_t chunk,
                     CompareBlockResult* results) {
  const uint64_t begin = blockIdx.x * chunk;
  const uint64_t end = begin + chunk < count ? begin + chunk : count;
  unsigned long long mismatched = 0, nonfinite = 0, unwritten = 0, reference_nonfinite = 0;
  double max_abs = 0, max_rel = 0, err_sq = 0, ref_sq = 0;
  for (uint64_t i = begin + threadIdx.x; i < end; i += blockDim.x) {
    const uint32_t got_bits = RawElement(got, i, dtype);
    const uint32_t expected_bits = RawElement(expected, i, dtype);
    const double g = DecodeRaw(got_bits, dtype);
    const double e = DecodeRaw(expected_bits, dtype);
    if (!isfinite(e)) {
      ++reference_nonfinite;
      continue;
    }
    ref_sq += e * e;
    if (!isfinite(g)) {
      ++nonfinite;
      if (dtype != kInt32 && got_bits == poison_bits) ++unwritten;
      continue;
    }
    if (dtype == kInt32 && got_bits == poison_bits && expected_bits != poison_bits) ++unwritten;
    const double d = fabs(g - e);
    err_sq += d * d;
    max_abs = fmax(max_abs, d);
    if (e != 0) max_rel = fmax(max_rel, d / fabs(e));
    if (d > atol && d > rtol * fabs(e)) ++mismatched;
  }
  // Fixed-shape tree reduction: the same grid gives the same bits every run.
  __shared__ unsigned long long counts[4][256];
  __shared__ double values[4][256];
  const unsigned t = threadIdx.x;
  counts[0][t] = mismatched;
  counts[1][t] = nonfinite;
  counts[2][t] = unwritten;
  counts[3][t] = reference_nonfinite;
  values[0][t] = max_abs;
  values[1][t] = max_rel;
  values[2][t] = err_sq;
  values[3][t] = ref_sq;
  __syncthreads();
  for (unsigned half = blockDim.x / 2; half > 0; half /= 2) {
    if (t < half) {
      for (int k = 0; k < 4; ++k) counts[k][t] += counts[k][t + half];
      values[0][t] = fmax(values[0][t], values[0][t + half]);
      values[1][t] = fmax(values[1][t], values[1][t + half]);
      values[2][t] += values[2][t + half];
      values[3][t] += values[3][t + half];
    }
    __syncthreads();
  }
  if (t == 0) {
    CompareBlockResult r;
    r.mismatched = counts[0][0];
    r.nonfinite = counts[1][0];
    r.unwritten = counts[2][0];
    r.reference_nonfinite = counts[3][0];
    r.max_abs = values[0][0];
    r.max_rel = values[1][0];
    r.err_sq = values[2][0];
    r.ref_sq = values[3][0];
    results[blockIdx.x] = r;
  }
}

// ---------------------------------------------------------------- output sketch
// sketch.h: k <= 16 projections sum_i w_j(i) x_i in fp64, w_j(i) = +-1 from bit
// (i % 8) * 16 + j of Philox4x32-10(counter i / 8, stream, key) (one Philox call serves 8
// elements), with sum |x|, sum x^2, sum tol, sum tol^2 (tol = max(atol, rtol |x|), the compare
// kernel's rule) and the count of non-finite elements, in one pass. Block b writes
// kSketchStride doubles at results + b * kSketchStride; the host adds the blocks in order.
namespace {
constexpr int kSketchMaxK = 16;
constexpr int kSketchStride = kSketchMaxK + 5;
}  // namespace

extern "C" __global__ void __launch_bounds__(256)
    ptxbench_sketch(const void* data, uint64_t count, int dtype, uint64_t key, uint32_t stream,
                    int k, double atol, double rtol, double* results) {
  double acc[kSketchStride];
#pragma unroll
  for (int j = 0; j < kSketchStride; ++j) acc[j] = 0;
  const uint64_t stride = static_cast<uint64_t>(gridDim.x) * blockDim.x;
  for (uint64_t i = blockIdx.x * static_cast<uint64_t>(blockDim.x) + threadIdx.x; i < count;
       i += stride) {
    const double x = DecodeRaw(RawElement(data, i, dtype), dtype);
    if (!isfinite(x)) {
      acc[kSketchMaxK + 4] += 1;
      continue;
    }
    const ptxbench::gpu::Philox4 r = Philox4x32_10(i >> 3, stream, key);
    const unsigned base = static_cast<unsigned>(i & 7) * 16;
#pragma unroll
    for (int j = 0; j < kSketchMaxK; ++j) {
      if (j < k) acc[j] += ptxbench::gpu::SketchWeightNegative(r, base + j) ? -x : x;
    }
    const double tol = fmax(atol, rtol * fabs(x));
    acc[kSketchMaxK] += fabs(x);
    acc[kSketchMaxK + 1] += x * x;
    acc[kSketchMaxK + 2] += tol;
    acc[kSketchMaxK + 3] += tol * tol;
  }
  // Warp shuffles, then the block's 8 warps in order: the same grid gives the same bits.
  __shared__ double warp_sums[8][kSketchStride];
  const unsigned lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
  for (int j = 0; j < kSketchStride; ++j) {
    double v = acc[j];
    for (int offset = 16; offset > 0; offset /= 2) v += __shfl_down_sync(0xffffffffu, v, offset);
    if (lane == 0) warp_sums[warp][j] = v;
  }
  __syncthreads();
  if (threadIdx.x < kSketchStride) {
    double total = 0;
    for (unsigned w = 0; w < blockDim.x / 32; ++w) total += warp_sums[w][threadIdx.x];
    results[blockIdx.x * static_cast<uint64_t>(kSketchStride) + threadIdx.x] = total;
  }
}

// ---------------------------------------------------------------- launch jitter
// Holds the stream for `ns` nanoseconds of %globaltimer (timing.cc: the drawn delay before a
// launch sits on the GPU, so the timed launch is already queued when it ends and its event time
// holds no host launch latency). One thread; the timer's resolution (1 us or better) is far
// below the delays drawn.
extern "C" __global__ void ptxbench_delay(uint64_t ns) {
  uint64_t start;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  uint64_t now = start;
  while (now - start < ns) asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
}

// ---------------------------------------------------------------- fp64 SDPA backward
// The fp64 reference of the backward attention tasks (Tolerance::fp64_outputs; the definition
// and its host mirror: compare.h SdpaBackwardFp64Host). Inputs are the bf16 Q, K, V, dO, the
// given bf16 O and fp32 LSE, each exact in fp64; everything after is fp64:
//   delta_i = dO_i.O_i, P_ij = exp(scale q_i.k_j - LSE_i) (0 where causal and j > i),
//   dS = P (dO V^T - delta), dQ = scale dS K, dK = scale dS^T Q, dV = P^T dO.
// Tensors are [heads, S, D] (B and H flattened), D <= 128 and a multiple of 8. Tiles of 32 rows
// by 32 keys live in shared memory as doubles with a row stride of 129 doubles, so the 8
// threads that walk 8 different rows of a tile at the same column hit 8 different bank pairs.
// The work: ~768 fp64 flops per visible (i, j) for dQ, ~1024 for dK and dV; one thread block
// per 32 query (dQ) or key (dK, dV) rows of one head. No atomics: every output element is
// written by one thread, in a fixed order (the same bits every run).
namespace {
constexpr int kFp64Tile = 32;
constexpr int kFp64Stride = 129;  // Doubles per tile row (D <= 128, +1 against conflicts).
constexpr int kFp64PStride = kFp64Tile + 1;

__device__ __forceinline__ double Bf16ToDouble(uint16_t bits) {
  return static_cast<double>(__uint_as_float(static_cast<uint32_t>(bits) << 16));
}

// Rows [row0, row0 + 32) of one head's [S, D] bf16 tensor into a tile (zeros past S).
__device__ __forceinline__ void LoadFp64Tile(double* tile, const uint16_t* src, int row0, int s,
                                             int d) {
  for (int idx = threadIdx.x; idx < kFp64Tile * d; idx += blockDim.x) {
    const int r = idx / d, c = idx - r * d;
    const int row = row0 + r;
    tile[r * kFp64Stride + c] = row < s ? Bf16ToDouble(src[static_cast<size_t>(row) * d + c]) : 0.0;
  }
}
}  // namespace

// delta_i = sum_d dO_id O_id for `rows` rows of D elements (one thread per row).
extern "C" __global__ void __launch_bounds__(256)
    ptxbench_sdpa_bwd_fp64_delta(const uint16_t* o, const uint16_t* d_o, double* delta,
                                 uint64_t rows, int d) {
  const uint64_t row = blockIdx.x * static_cast<uint64_t>(blockDim.x) + threadIdx.x;
  if (row >= rows) return;
  double sum = 0;
  for (int c = 0; c < d; ++c) {
    sum += Bf16ToDouble(o[row * d + c]) * Bf16ToDouble(d_o[row * d + c]);
  }
  delta[row] = sum;
}

// dQ: block (x, head) owns query rows [32x, 32x + 32) of one head; 256 threads, thread t holds
// row t / 8 and the columns t % 8 + 8m. Dynamic shared memory: kSdpaFp64DqSharedBytes.
extern "C" __global__ void __launch_bounds__(256)
    ptxbench_sdpa_bwd_fp64_dq(const uint16_t* q, const uint16_t* k, const uint16_t* v,
                              const uint16_t* d_o, const float* lse, const double* delta,
                              double* dq, int s, int d, double scale, int causal) {
  extern __shared__ double smem[];
  double* qs = smem;
  double* dos = qs + kFp64Tile * kFp64Stride;
  double* ks = dos + kFp64Tile * kFp64Stride;
  double* vs = ks + kFp64Tile * kFp64Stride;
  double* ds = vs + kFp64Tile * kFp64Stride;
  double* lse_s = ds + kFp64Tile * kFp64PStride;
  double* delta_s = lse_s + kFp64Tile;
  const size_t head = blockIdx.y;
  const size_t base = head * static_cast<size_t>(s) * d;
  const int row0 = blockIdx.x * kFp64Tile;
  LoadFp64Tile(qs, q + base, row0, s, d);
  LoadFp64Tile(dos, d_o + base, row0, s, d);
  if (threadIdx.x < kFp64Tile) {
    const int row = row0 + threadIdx.x;
    lse_s[threadIdx.x] = row < s ? static_cast<double>(lse[head * s + row]) : 0.0;
    delta_s[threadIdx.x] = row < s ? delta[head * s + row] : 0.0;
  }
  const int r = threadIdx.x >> 3, lane = threadIdx.x & 7;
  const int row = row0 + r;
  double acc[16];
#pragma unroll
  for (int m = 0; m < 16; ++m) acc[m] = 0;
  const int key_end = causal ? min(s, row0 + kFp64Tile) : s;
  for (int key0 = 0; key0 < key_end; key0 += kFp64Tile) {
    __syncthreads();  // The last tile's K, V and dS are no longer read.
    LoadFp64Tile(ks, k + base, key0, s, d);
    LoadFp64Tile(vs, v + base, key0, s, d);
    __syncthreads();
    double score[4] = {0, 0, 0, 0}, dp[4] = {0, 0, 0, 0};
    for (int c = 0; c < d; ++c) {
      const double qv = qs[r * kFp64Stride + c], dov = dos[r * kFp64Stride + c];
#pragma unroll
      for (int m = 0; m < 4; ++m) {
        const int j = lane + 8 * m;
        score[m] = fma(qv, ks[j * kFp64Stride + c], score[m]);
        dp[m] = fma(dov, vs[j * kFp64Stride + c], dp[m]);
      }
    }
#pragma unroll
    for (int m = 0; m < 4; ++m) {
      const int j = lane + 8 * m, key = key0 + j;
      double p = 0;
      if (row < s && key < s && !(causal && key > row)) p = exp(scale * score[m] - lse_s[r]);
      ds[r * kFp64PStride + j] = p * (dp[m] - delta_s[r]);
    }
    __syncthreads();
    for (int j = 0; j < kFp64Tile; ++j) {
      const double x = ds[r * kFp64PStride + j];
#pragma unroll
      for (int m = 0; m < 16; ++m) {
        const int c = lane + 8 * m;
        if (c < d) acc[m] = fma(x, ks[j * kFp64Stride + c], acc[m]);
      }
    }
  }
  if (row < s) {
#pragma unroll
    for (int m = 0; m < 16; ++m) {
      const int c = lane + 8 * m;
      if (c < d) dq[base + static_cast<size_t>(row) * d + c] = scale * acc[m];
    }
  }
}

// dK and dV: block (x, head) owns key rows [32x, 32x + 32) of one head and walks the query
// tiles that see them (causal: from its own tile on); thread t holds key t / 8 and the columns
// t % 8 + 8m of both outputs. Dynamic shared memory: kSdpaFp64DkdvSharedBytes.
extern "C" __global__ void __launch_bounds__(256)
    ptxbench_sdpa_bwd_fp64_dkdv(const uint16_t* q, const uint16_t* k, const uint16_t* v,
                                const uint16_t* d_o, const float* lse, const double* delta,
                                double* dk, double* dv, int s, int d, double scale, int causal) {
  extern __shared__ double smem[];
  double* ks = smem;
  double* vs = ks + kFp64Tile * kFp64Stride;
  double* qs = vs + kFp64Tile * kFp64Stride;
  double* dos = qs + kFp64Tile * kFp64Stride;
  double* ps = dos + kFp64Tile * kFp64Stride;
  double* dss = ps + kFp64Tile * kFp64PStride;
  double* lse_s = dss + kFp64Tile * kFp64PStride;
  double* delta_s = lse_s + kFp64Tile;
  const size_t head = blockIdx.y;
  const size_t base = head * static_cast<size_t>(s) * d;
  const int key0 = blockIdx.x * kFp64Tile;
  LoadFp64Tile(ks, k + base, key0, s, d);
  LoadFp64Tile(vs, v + base, key0, s, d);
  const int kr = threadIdx.x >> 3, lane = threadIdx.x & 7;
  const int key = key0 + kr;
  double acc_k[16], acc_v[16];
#pragma unroll
  for (int m = 0; m < 16; ++m) acc_k[m] = acc_v[m] = 0;
  for (int row0 = causal ? key0 : 0; row0 < s; row0 += kFp64Tile) {
    __syncthreads();  // The last tile's Q, dO, P and dS are no longer read.
    LoadFp64Tile(qs, q + base, row0, s, d);
    LoadFp64Tile(dos, d_o + base, row0, s, d);
    if (threadIdx.x < kFp64Tile) {
      const int row = row0 + threadIdx.x;
      lse_s[threadIdx.x] = row < s ? static_cast<double>(lse[head * s + row]) : 0.0;
      delta_s[threadIdx.x] = row < s ? delta[head * s + row] : 0.0;
    }
    __syncthreads();
    double score[4] = {0, 0, 0, 0}, dp[4] = {0, 0, 0, 0};
    for (int c = 0; c < d; ++c) {
      const double kv = ks[kr * kFp64Stride + c], vv = vs[kr * kFp64Stride + c];
#pragma unroll
      for (int m = 0; m < 4; ++m) {
        const int i = lane + 8 * m;
        score[m] = fma(qs[i * kFp64Stride + c], kv, score[m]);
        dp[m] = fma(dos[i * kFp64Stride + c], vv, dp[m]);
      }
    }
#pragma unroll
    for (int m = 0; m < 4; ++m) {
      const int i = lane + 8 * m, row = row0 + i;
      double p = 0;
      if (row < s && key < s && !(causal && key > row)) p = exp(scale * score[m] - lse_s[i]);
      ps[i * kFp64PStride + kr] = p;
      dss[i * kFp64PStride + kr] = p * (dp[m] - delta_s[i]);
    }
    __syncthreads();
    for (int i = 0; i < kFp64Tile; ++i) {
      const double p = ps[i * kFp64PStride + kr], x = dss[i * kFp64PStride + kr];
#pragma unroll
      for (int m = 0; m < 16; ++m) {
        const int c = lane + 8 * m;
        if (c < d) {
          acc_v[m] = fma(p, dos[i * kFp64Stride + c], acc_v[m]);
          acc_k[m] = fma(x, qs[i * kFp64Stride + c], acc_k[m]);
        }
      }
    }
  }
  if (key < s) {
#pragma unroll
    for (int m = 0; m < 16; ++m) {
      const int c = lane + 8 * m;
      if (c < d) {
        dk[base + static_cast<size_t>(key) * d + c] = scale * acc_k[m];
        dv[base + static_cast<size_t>(key) * d + c] = acc_v[m];
      }
    }
  }
}

// ---------------------------------------------------------------- comparison with fp64
// compare.h Fp64ErrorSums on the GPU: block b sums (got - ref)^2 and ref^2 over the finite
// elements of [b*chunk, min((b+1)*chunk, count)) into results[2b], results[2b+1]; fixed-shape
// reductions and the host's in-order sum give the same bits every run.
extern "C" __global__ void __launch_bounds__(256)
    ptxbench_compare_fp64(const void* got, int dtype, const double* reference, uint64_t count,
                          uint64_t chunk, double* results) {
  const uint64_t begin = blockIdx.x * chunk;
  const uint64_t end = begin + chunk < count ? begin + chunk : count;
  double err_sq = 0, ref_sq = 0;
  for (uint64_t i = begin + threadIdx.x; i < end; i += blockDim.x) {
    const double g = DecodeRaw(RawElement(got, i, dtype), dtype);
    const double e = reference[i];
    if (!isfinite(g) || !isfinite(e)) continue;
    err_sq += (g - e) * (g - e);
    ref_sq += e * e;
  }
  __shared__ double sums[2][256];
  const unsigned t = threadIdx.x;
  sums[0][t] = err_sq;
  sums[1][t] = ref_sq;
  __syncthreads();
  for (unsigned half = blockDim.x / 2; half > 0; half /= 2) {
    if (t < half) {
      sums[0][t] += sums[0][t + half];
      sums[1][t] += sums[1][t + half];
    }
    __syncthreads();
  }
  if (t == 0) {
    results[2 * blockIdx.x] = sums[0][0];
    results[2 * blockIdx.x + 1] = sums[1][0];
  }
}
