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

}  // namespace

extern "C" __global__ void ptxbench_generate(void* out, uint64_t count, uint64_t seed,
                                             uint32_t tensor_index, int dtype, int distribution) {
  for (uint64_t i = blockIdx.x * static_cast<uint64_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<uint64_t>(gridDim.x) * blockDim.x) {
    ptxbench::gpu::Philox4 r = Philox4x32_10(i, tensor_index, seed);
    float spike;
    float x = NormalFromBits(r.v[0], r.v[1], &spike);
    if (distribution == ptxbench::gpu::kDistSpiky &&
        static_cast<float>(r.v[2]) * 2.3283064365386963e-10f < ptxbench::gpu::kSpikeProbability) {
      x += ptxbench::gpu::kSpikeStddev * spike;
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
// baseline left in L2 before the next timed sample.
extern "C" __global__ void ptxbench_flush(int4* buffer, uint64_t count, int value) {
  for (uint64_t i = blockIdx.x * static_cast<uint64_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<uint64_t>(gridDim.x) * blockDim.x) {
    buffer[i] = make_int4(value, value, value, value);
  }
}

// Health probe: out[i] = i * 3 + 1 for i < n.
extern "C" __global__ void ptxbench_health(int* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = i * 3 + 1;
}
