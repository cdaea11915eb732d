// Kernels for the one-off device probe (tests/gpu/probe/README.md): compiled to a cubin with
// `nvcc -cubin -arch=sm_90a -lineinfo` and loaded by device_probe with cuModuleLoadData, the
// way the engine loads a submission.
#include <cuda.h>
#include <cuda_bf16.h>
#include <stdint.h>

extern "C" __global__ void k_pred(float* out, int n, int flag) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  float v = (float)i;
  for (int r = 0; r < 4; ++r) v = v * 1.0001f + 0.5f;
  if (flag == 12345) out[i + n] = sqrtf(v);  // never true: present but not executed
  if (i < n) out[i] = v;
}

extern "C" __global__ void k_second(float* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = out[i] * 2.0f + 1.0f;
}

extern "C" __global__ void k_heavy(float* out, int iters) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  float a = i * 1e-6f, b = 1.0f;
  for (int r = 0; r < iters; ++r) { a = a * 0.999f + b; b = b * 1.0001f - a * 1e-7f; }
  out[i] = a + b;
}

__device__ __forceinline__ uint64_t smem_desc(const void* p, uint32_t lbo, uint32_t sbo) {
  uint32_t addr = static_cast<uint32_t>(__cvta_generic_to_shared(p));
  uint64_t d = 0;
  d |= (uint64_t)((addr & 0x3FFFF) >> 4);
  d |= (uint64_t)((lbo & 0x3FFFF) >> 4) << 16;
  d |= (uint64_t)((sbo & 0x3FFFF) >> 4) << 32;
  return d;  // swizzle bits 62-63 = 0: no swizzle
}

// One warpgroup; wgmma m64n8k16 bf16 -> f32 when run != 0 (branch-skipped otherwise).
extern "C" __global__ void k_wgmma(float* out, int run) {
  __shared__ __align__(128) __nv_bfloat16 sA[64 * 16];
  __shared__ __align__(128) __nv_bfloat16 sB[8 * 16];
  for (int i = threadIdx.x; i < 64 * 16; i += blockDim.x) sA[i] = __float2bfloat16((i % 7) * 0.25f);
  for (int i = threadIdx.x; i < 8 * 16; i += blockDim.x) sB[i] = __float2bfloat16((i % 5) * 0.5f);
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
  __syncthreads();
  float d0 = 0, d1 = 0, d2 = 0, d3 = 0;
  if (run) {
    uint64_t da = smem_desc(sA, 128, 256), db = smem_desc(sB, 128, 256);
    asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
    asm volatile(
        "{\n .reg .pred p;\n setp.ne.b32 p, %6, 0;\n"
        " wgmma.mma_async.sync.aligned.m64n8k16.f32.bf16.bf16 {%0,%1,%2,%3}, %4, %5, p, 1, 1, 0, 0;\n}\n"
        : "+f"(d0), "+f"(d1), "+f"(d2), "+f"(d3)
        : "l"(da), "l"(db), "r"(0));
    asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
    asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
  }
  int t = blockIdx.x * blockDim.x + threadIdx.x;
  out[t * 4 + 0] = d0; out[t * 4 + 1] = d1; out[t * 4 + 2] = d2; out[t * 4 + 3] = d3;
}

// One TMA 2D load of a 64x64 bf16 box completing on an mbarrier, then a sum.
extern "C" __global__ void k_tma(const __grid_constant__ CUtensorMap map, float* out) {
  __shared__ __align__(128) __nv_bfloat16 tile[64 * 64];
  __shared__ __align__(8) uint64_t bar;
  uint32_t bar_addr = static_cast<uint32_t>(__cvta_generic_to_shared(&bar));
  uint32_t tile_addr = static_cast<uint32_t>(__cvta_generic_to_shared(tile));
  if (threadIdx.x == 0) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(bar_addr));
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar_addr), "r"(64 * 64 * 2));
    asm volatile(
        "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];"
        ::"r"(tile_addr), "l"(&map), "r"(0), "r"((int)blockIdx.x * 64), "r"(bar_addr) : "memory");
  }
  asm volatile(
      "{\n .reg .pred P1;\n WAIT_%=:\n mbarrier.try_wait.parity.shared::cta.b64 P1, [%0], %1;\n"
      " @P1 bra DONE_%=;\n bra WAIT_%=;\n DONE_%=:\n}\n" ::"r"(bar_addr), "r"(0));
  float s = 0;
  for (int i = threadIdx.x; i < 64 * 64; i += blockDim.x) s += __bfloat162float(tile[i]);
  atomicAdd(out + blockIdx.x, s);
}

extern "C" __global__ void k_oob(float* out) { out[(size_t)1 << 40] = 1.0f; }

extern "C" __global__ void k_hang(volatile int* flag) {
  while (*flag == 0) { }
}
